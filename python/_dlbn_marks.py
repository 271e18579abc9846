"""dlbn Python bootstrap: the marker API of libdlbn.so (docs/DESIGN.md,
"Python bootstrap").

The library exports dlbn_mark, dlbn_config, dlbn_note and dlbn_active; they
are reached with ctypes.PyDLL(None).  Without the library (symbols missing) or with
dlbn_active() == 0 load_marker_api() gives None and nothing is marked.
_dlbn_boot sets `api` once: the library's functions, NullApi when replay or
settings run without the recorder, or a test's recorder object (with
mark(kind, iter_id, arg) and config(iter_id, bytes) methods).

The kinds are DLBN_MARK_* of include/dlbn/dlbn_trace.h; what each mark's
arguments mean is said in _dlbn_patch.
"""

MARK_FETCH_BEGIN = 1
MARK_FETCH_END = 2
MARK_FETCH_STOP = 3
MARK_ITER_BEGIN = 4
MARK_STEP = 5
MARK_HANDOFF = 6

NOTE_FETCH_ERROR = 1  # DLBN_NOTE_FETCH_ERROR: "Type: message" of a failed fetch
NOTE_MAX = 1000       # bytes of a NOTE's text the recorder keeps

api = None          # the marker API in use; None: the bootstrap is off
_next_iter_id = 1   # incremented under the GIL


class MarkerApi:
    def __init__(self, mark, config, note=None):
        self.mark = mark
        self.config = config
        self.note = note or (lambda iter_id, kind, text: 0)


class NullApi:
    """Replay or settings without the recorder: nothing to mark."""

    def mark(self, kind, iter_id, arg):
        return 0

    def config(self, iter_id, text):
        return 0

    def note(self, iter_id, kind, text):
        return 0


def load_marker_api():
    """The library's marker functions, or None if absent or inactive.

    PyDLL, not CDLL: the calls take well under a microsecond and must keep
    the GIL - releasing it would let the pin-memory thread (or any other)
    take it, and the training loop could wait a whole switch interval
    (5 ms) to get it back at every fetch."""
    try:
        import ctypes
        lib = ctypes.PyDLL(None)
        active = lib.dlbn_active
        mark = lib.dlbn_mark
        config = lib.dlbn_config
    except Exception:
        return None
    active.argtypes = ()
    active.restype = ctypes.c_int
    mark.argtypes = (ctypes.c_int, ctypes.c_longlong, ctypes.c_longlong)
    mark.restype = ctypes.c_int
    config.argtypes = (ctypes.c_longlong, ctypes.c_char_p)
    config.restype = ctypes.c_int
    note = getattr(lib, "dlbn_note", None)  # a library before trace format 4.1 lacks it
    if note is not None:
        note.argtypes = (ctypes.c_longlong, ctypes.c_int, ctypes.c_char_p)
        note.restype = ctypes.c_int
    if not active():
        return None
    return MarkerApi(mark, config, note)


def emit(kind, iter_id, arg):
    try:
        api.mark(kind, iter_id, arg)
    except Exception:
        pass


def fetch_error(iter_id, exc):
    """The exception a fetch raised, for the report of a failed run (a
    DataLoader worker killed by the OOM killer or by a bus error: torch
    says which in the message).  The loop's own exits are left out."""
    if isinstance(exc, (GeneratorExit, SystemExit, KeyboardInterrupt)):
        return
    try:
        text = "%s: %s" % (type(exc).__name__, str(exc).strip())
        if len(text) > NOTE_MAX:
            # torch re-raises a worker's exception with its traceback in the
            # message: the first line says where, the last what
            lines = [line for line in text.splitlines() if line.strip()]
            head, tail = lines[0][:NOTE_MAX // 3], lines[-1][:NOTE_MAX // 2]
            text = head + " [...] " + tail if len(lines) > 1 else text[:NOTE_MAX]
        api.note(iter_id, NOTE_FETCH_ERROR, text.encode("utf-8", "replace")[:NOTE_MAX])
    except Exception:
        pass


def note(text):
    """A process-level note in the trace (CONFIG with iter_id 0)."""
    try:
        api.config(0, text.encode("utf-8", "replace"))
    except Exception:
        pass


def new_iter_id():
    """A new iterator id, unique in the process."""
    global _next_iter_id
    iter_id = _next_iter_id
    _next_iter_id += 1
    return iter_id
