"""dlbn Python bootstrap: what its modules share (docs/DESIGN.md, "Python
bootstrap").

  - the run's switches, set once by _dlbn_boot from the environment:
    `environ` (what it read), `replay` (the _dlbn_replay module while
    DLBN_REPLAY is on, else None) and `settings` (_dlbn_settings while
    DLBN_SET or DLBN_MAX_STEPS is on, else None).  Every module reads them
    here, so that switching one off (replay, when torch's DataLoader is
    left alone) reaches them all;
  - the helpers of a wrapper that runs inside someone else's program:
    copy_names (the wrapper looks like what it wraps), drop_own_frames
    (an exception that passes through keeps the traceback it would have
    without dlbn), and the stderr, note and CONFIG text helpers.

Imported by name by the bootstrap's other modules: _dlbn_boot loads it
first (the bootstrap's directory is not on sys.path).
"""

import sys

environ = {}     # the environment the bootstrap read (os.environ, or a test's)
replay = None    # the _dlbn_replay module under DLBN_REPLAY
settings = None  # the _dlbn_settings module under DLBN_SET / DLBN_MAX_STEPS


def warn(message):
    """One "dlbn:" line on stderr (never raises)."""
    try:
        sys.stderr.write("dlbn: %s\n" % message)
    except Exception:
        pass


def quiet():
    """DLBN_LOG=quiet: informational lines are not said."""
    return environ.get("DLBN_LOG", "").strip() == "quiet"


def in_child_process():
    """A multiprocessing child (spawn/forkserver DataLoader workers import
    torch again): its stderr lines would repeat the main process's."""
    try:
        process = sys.modules.get("multiprocessing.process")
        return process is not None and process.parent_process() is not None
    except Exception:
        return False


def note_text(text):
    """A value for the "key=value;..." notes: no separators, short."""
    text = str(text).replace(";", ",").replace("=", ":")
    return text[:120]


def config_value(value):
    """A value of a CONFIG "key=value;..." text (booleans as 1 and 0)."""
    if isinstance(value, bool):
        return "1" if value else "0"
    return note_text(value)


def module_version(name):
    module = sys.modules.get(name)
    return note_text(getattr(module, "__version__", None) or "unknown")


def copy_names(wrapper, orig):
    """The wrapper takes the names and docstring of the function it wraps,
    and keeps it as __wrapped__ (how the bootstrap finds it again)."""
    for attr in ("__module__", "__name__", "__qualname__", "__doc__"):
        try:
            setattr(wrapper, attr, getattr(orig, attr))
        except Exception:
            pass
    wrapper.__wrapped__ = orig


# Exceptions that pass through a wrapper keep the traceback they would have
# without dlbn: the wrapper removes the bootstrap's frames (its own, and
# those of the replay code it called) from the head of the traceback, then
# re-raises with a bare `raise`, which - unlike `raise exc` - adds no entry
# for the re-raising frame.  Python 3.11 and later re-raise
# exc.__traceback__ as set here.  3.10 and earlier re-raise the traceback
# saved when the handler was entered, so there the handler's saved
# exception is replaced too (PyErr_SetExcInfo, which steals one reference
# of each argument).
def drop_own_frames(exc):
    try:
        tb = exc.__traceback__
        while tb is not None and tb.tb_frame.f_code.co_filename in OWN_FILES:
            tb = tb.tb_next
        exc.__traceback__ = tb
        if _OLD_RERAISE:
            _set_handled_exception(exc, tb)
    except Exception:
        pass


def _set_handled_exception(exc, tb):
    import ctypes
    api = ctypes.pythonapi
    args = (type(exc), exc, tb)
    for obj in args:
        api.Py_IncRef(ctypes.py_object(obj))
    api.PyErr_SetExcInfo(*(ctypes.py_object(obj) for obj in args))


def _own_files():
    """The files of the bootstrap's wrappers, beside this one: a traceback
    that passes through them loses their frames."""
    import os
    folder = os.path.dirname(drop_own_frames.__code__.co_filename)
    return frozenset(os.path.join(folder, name) for name in (
        "sitecustomize.py", "_dlbn_boot.py", "_dlbn_patch.py", "_dlbn_replay.py",
        "_dlbn_settings.py", "_dlbn_loaders.py", "_dlbn_wrappers.py", "_dlbn_profile.py"))


_OLD_RERAISE = sys.version_info < (3, 11) and sys.implementation.name == "cpython"
OWN_FILES = _own_files()
