"""dlbn Python bootstrap, DataLoader half: exact fetch marks (docs/DESIGN.md,
"Python bootstrap").

sitecustomize.py (the start-up half) loads this module when torch imports
torch.utils.data.dataloader and calls patch_module(), which wraps
    DataLoader.__iter__           -> ITER_BEGIN mark + CONFIG record
    _BaseDataLoaderIter.__next__  -> FETCH_BEGIN / FETCH_END, or FETCH_STOP
through the marker API that libdlbn.so exports (dlbn_mark, dlbn_config,
dlbn_active), reached with ctypes.PyDLL(None).  Without the library (symbols
missing) or with dlbn_active() == 0 nothing is wrapped.  When torchdata's
stateful_dataloader module is imported too, StatefulDataLoader.__iter__ (which
does not call DataLoader's) is wrapped the same way.

Only a torch whose DataLoader internals are the ones the wrappers use is
patched: before wrapping, every class, method and private attribute they rely
on is checked (see "Compatibility" below).  On a mismatch nothing is wrapped
(no marks, no replay), the trace gets a process-level note (CONFIG, iter_id
0) "bootstrap=incompatible;torch=V;reason=..." and stderr one "dlbn:" line
(unless DLBN_LOG=quiet; always when DLBN_REPLAY asked for replay, which is
then off).  A compatible torch gets the note "bootstrap=ok;torch=V".

Rules (it runs inside someone else's training job): dlbn's own failures never
raise into the host program - every wrapper body is guarded and falls back to
the unwrapped call; exceptions of the wrapped calls pass through unchanged,
with the traceback they would have without dlbn (the wrappers take their own
frames out of it).

Mark arguments (the kinds are DLBN_MARK_* of include/dlbn/dlbn_trace.h):
  ITER_BEGIN  iter_id, arg = how many iterators this DataLoader made before
              (the epoch number when there is one iter() per epoch)
  CONFIG      iter_id, "key=value;..." (emitted right after the iterator is
              made, so pin_memory is the effective value; under 500 bytes):
              num_workers, batch_size, prefetch_factor, pin_memory,
              persistent_workers, start_method, dataset_kind, drop_last,
              timeout, loader (its id()), loader_class, sampler (class name
              of what orders the samples), dali_proxy, threads and device
              (DALI's proxy DataLoader: its pipeline's), replay (with DLBN_REPLAY;
              wrapper_replay=MODULE:QUALNAME when the loop gets a wrapper
              iterable's cached items instead, _dlbn_wrappers.py), set,
              set_from, set_ignored, max_steps (dlbn-run --set/--max-steps,
              see "Settings and bounded runs" at the end), workers (pids of a
              multiprocess iterator's workers, up to 64)
  FETCH_BEGIN iter_id, arg = batch index within the epoch
  FETCH_END   iter_id, arg = the same batch index
  FETCH_STOP  iter_id, arg = batches yielded in the epoch (StopIteration),
              or -1 when __next__ raised anything else (a worker died ...)
  HANDOFF     iter_id, arg = the batch index of the FETCH_END before it:
              the fetch was made by a wrapper iterable's generator __iter__
              (timm's PrefetchLoader ...) and this is when that generator
              next yielded or ended (python/_dlbn_handoff.py; DLBN_HANDOFF=0
              turns it off)
iter_id is unique per process and new for every iter(loader), including the
reuse of one iterator object by persistent workers.

Replay (docs/DESIGN.md, "Replay and ground truth"; `dlbn-run --replay N`):
with DLBN_REPLAY=N (N >= 1) every DataLoader serves N cached batches, cycled,
instead of loading - the reference method's "Replay" run, whose time over
the same steps measures the speedup dlbn predicts (dlbn-analyze REAL
--baseline REPLAY).  Per loader:
  - the first iter() makes the real iterator as usual (workers start); its
    first __next__ takes the first N batches from it (inside the FETCH of
    step 0, which the analyzer's window always skips), copies them (tensors
    cloned, so shared memory of the workers is released and nothing the loop
    does later can change them) and drops the real iterator: workers go idle
    (persistent) or shut down, and no later step touches the loader again;
  - every epoch, this one included, yields len(loader) batches, batch k
    being cached batch k mod N itself, as the reference method (DALI's
    LoaderEvaluator) hands them out: a copy per step would add its memcpy
    and page faults to every replayed step (a 32 MiB batch: 0.72 s of
    window instead of 0.21 s over 40 steps), which Replay is meant to have
    none of.  DLBN_REPLAY_COPY=1 hands out a fresh copy per step instead,
    for a loop that mutates its batch in place - x.div_(255) - and must
    keep seeing the values a real run would;
  - later iter() calls make no real iterator at all (no worker start-up);
  - at the process's first iter() of a DataLoader, before its marks,
    every DataLoader made so far (a validation loader too) fills its cache,
    with no marks: the reference Replay caches every loader before the loop, and a
    loader first iterated inside the replayed steps would start its
    workers and load there;
  - marks continue (ITER_BEGIN, FETCH_BEGIN/END, FETCH_STOP at the end of
    the epoch) and CONFIG carries replay=N;
  - a wrapper iterable around the DataLoader (timm's PrefetchLoader) is
    replayed itself, so that the loop gets its cached items
    (_dlbn_wrappers.py): the DataLoader's replay runs under it unmarked
    while its items are taken, then as the loop's marked fetches.
A loader without len() (an IterableDataset without __len__) has no epoch
length to replay: it loads normally, says so once on stderr, and its CONFIG
carries replay=0.  If fewer than N batches exist, all of them are cycled.
Replay is honoured even when the recorder is passive (no marks then): it is
what the user asked the run to do.
"""

MARK_FETCH_BEGIN = 1
MARK_FETCH_END = 2
MARK_FETCH_STOP = 3
MARK_ITER_BEGIN = 4
MARK_STEP = 5
MARK_HANDOFF = 6

_patched = False     # patch_dataloader_module ran (it runs once)
_status = None       # then: "ok" (wrapped), "incompatible" or "off" (left alone)
_torch_module = None  # the torch.utils.data.dataloader wrapped
_stateful_done = False  # patch_stateful_module ran
_skip_iter_types = ()   # iterator classes of loaders left alone
_environ = {}        # the environment patching read (DLBN_LOG)
_api = None          # the marker API once patched
_next_iter_id = 1    # incremented under the GIL
_replay = 0          # DLBN_REPLAY: cached batches per loader, 0 = off
_replay_copy = False  # DLBN_REPLAY_COPY=1: a fresh copy per step
_orig_next = None    # the unwrapped _BaseDataLoaderIter.__next__


# ---------------------------------------------------------------------------
# Marker API of libdlbn.so


class _MarkerApi:
    def __init__(self, mark, config):
        self.mark = mark
        self.config = config


def _load_marker_api():
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
    if not active():
        return None
    return _MarkerApi(mark, config)


class _NullApi:
    """Replay without the recorder: nothing to mark."""

    def mark(self, kind, iter_id, arg):
        return 0

    def config(self, iter_id, text):
        return 0


def _replay_setting(environ):
    """(batches, copy) from DLBN_REPLAY / DLBN_REPLAY_COPY; bad values
    switch replay off with one line on stderr (never raise)."""
    text = environ.get("DLBN_REPLAY", "").strip()
    copy = environ.get("DLBN_REPLAY_COPY", "0").strip() not in ("", "0")
    if not text or text == "0":
        return 0, copy
    try:
        batches = int(text)
    except ValueError:
        batches = -1
    if batches < 1:
        _warn("DLBN_REPLAY=%r is not a positive batch count; replay off" % text)
        return 0, copy
    return batches, copy


def _warn(message):
    try:
        import sys
        sys.stderr.write("dlbn: %s\n" % message)
    except Exception:
        pass


def _emit(kind, iter_id, arg):
    try:
        _api.mark(kind, iter_id, arg)
    except Exception:
        pass


# ---------------------------------------------------------------------------
# Compatibility: what the wrappers rely on, checked before anything is wrapped
#
# The wrappers reach into torch's private DataLoader internals.  A torch that
# renamed or restructured them would get wrong marks (a batch index that never
# moves, a CONFIG that describes nothing) or, worse, a wrapper that gets in the
# way.  So patching first checks, without making a loader (that would start
# workers, or need a dataset), that every internal the wrappers and the
# CONFIG text use is where this code expects it: the classes and methods exist
# and are plain functions, and every attribute read from a loader or iterator
# is named by the __init__ that sets it (the names a code object uses,
# co_names: present for an attribute it stores or loads, gone when a rename
# happened).  On any mismatch nothing is wrapped and the trace says why.

# Set by DataLoader.__init__ (read by the CONFIG text; __len__ by replay).
_LOADER_ATTRS = ("num_workers", "batch_size", "batch_sampler", "sampler",
                 "prefetch_factor", "pin_memory", "persistent_workers",
                 "multiprocessing_context", "_dataset_kind", "drop_last", "timeout")
# Set by the iterator classes' __init__ (base class or one of the two kinds;
# torch 1.13 sets _prefetch_factor in the base, 2.x in the multiprocess one).
_ITER_ATTRS = ("_num_yielded", "_pin_memory", "_index_sampler", "_dataset_kind",
               "_num_workers", "_drop_last", "_timeout", "_persistent_workers",
               "_prefetch_factor")
# Set by the multiprocess iterator's __init__: its worker processes.
_MP_ITER_ATTRS = ("_workers",)


def _code_names(func):
    """Every name the code of func (and of the functions and comprehensions
    nested in it) uses: attributes, globals.  None when func has no code."""
    for _ in range(8):  # decorated with functools.wraps: the function inside
        inner = getattr(func, "__wrapped__", None)
        if inner is None:
            break
        func = inner
    code = getattr(func, "__code__", None)
    if code is None:
        return None
    names, todo = set(), [code]
    while todo:
        code = todo.pop()
        names.update(code.co_names)
        todo.extend(c for c in code.co_consts if hasattr(c, "co_names"))
    return names


def _init_names(cls):
    """Names used by the __init__ of cls and of its bases (each __init__ that
    runs, or may run through super(), on a new instance)."""
    names = set()
    for klass in cls.__mro__:
        found = _code_names(klass.__dict__.get("__init__"))
        if found:
            names |= found
    return names


def _own_function(cls, name):
    """cls.__dict__[name] when it is a plain Python function, else a reason."""
    import types
    value = cls.__dict__.get(name)
    if value is None:
        return None, "%s.%s missing" % (cls.__name__, name)
    if not isinstance(value, types.FunctionType):
        return None, "%s.%s is a %s not a function" % (
            cls.__name__, name, type(value).__name__)
    return value, None


def _class(module, name, base=None):
    cls = getattr(module, name, None)
    if not isinstance(cls, type):
        return None, "no class %s" % name
    if base is not None and not issubclass(cls, base):
        return None, "%s is not a %s" % (name, base.__name__)
    if not cls.__dictoffset__:  # the wrappers keep their state in __dict__
        return None, "%s has no instance __dict__" % name
    return cls, None


def _missing(names, wanted):
    return [n for n in wanted if n not in names]


def _check_iterators(base_cls, single_cls, multi_cls):
    """Reason why these iterator classes do not fit, or None."""
    orig_next, reason = _own_function(base_cls, "__next__")
    if reason:
        return reason
    for cls in (single_cls, multi_cls):
        if "__next__" in cls.__dict__:
            # its own __next__ would run instead of the wrapped one
            return "%s overrides __next__" % cls.__name__
    # The batch index of the marks: __next__ counts the batches it yielded.
    if "_num_yielded" not in (_code_names(orig_next) or ()):
        return "%s.__next__ does not count _num_yielded" % base_cls.__name__
    if "_num_yielded" in base_cls.__dict__:
        return "_num_yielded is a class attribute"
    single_names, multi_names = _init_names(single_cls), _init_names(multi_cls)
    lost = _missing(single_names | multi_names, _ITER_ATTRS)
    lost += _missing(multi_names, _MP_ITER_ATTRS)
    if lost:
        return "iterator __init__ sets no %s" % ",".join(lost)
    return None


def _torch_incompatibility(module):
    """Why the wrappers cannot be trusted with this torch.utils.data.dataloader,
    or None when everything they use is where they expect it."""
    loader_cls, reason = _class(module, "DataLoader")
    if reason:
        return reason
    base_cls, reason = _class(module, "_BaseDataLoaderIter")
    if reason:
        return reason
    single_cls, reason = _class(module, "_SingleProcessDataLoaderIter", base_cls)
    if reason:
        return reason
    multi_cls, reason = _class(module, "_MultiProcessingDataLoaderIter", base_cls)
    if reason:
        return reason
    for name in ("__iter__", "__len__"):
        reason = _own_function(loader_cls, name)[1]
        if reason:
            return reason
    lost = _missing(_init_names(loader_cls), _LOADER_ATTRS)
    if lost:
        return "DataLoader.__init__ sets no %s" % ",".join(lost)
    reason = _check_iterators(base_cls, single_cls, multi_cls)
    if reason:
        return reason
    kind = getattr(module, "_DatasetKind", None)
    if getattr(kind, "Iterable", None) != 1 or getattr(kind, "Map", None) != 0:
        return "_DatasetKind differs"   # _dataset_kind() reads 1 as iterable
    return None


def _stateful_incompatibility(module, torch_module):
    """The same for torchdata's StatefulDataLoader (torchdata.stateful_dataloader
    .stateful_dataloader): a DataLoader subclass with its own __iter__ (it
    makes its iterators without DataLoader.__iter__) and iterator classes that
    reach torch's (wrapped) __next__ through super()."""
    loader_cls, reason = _class(module, "StatefulDataLoader", torch_module.DataLoader)
    if reason:
        return reason
    reason = _own_function(loader_cls, "__iter__")[1]
    if reason:
        return reason
    lost = _missing(_init_names(loader_cls), _LOADER_ATTRS)
    if lost:
        return "StatefulDataLoader.__init__ sets no %s" % ",".join(lost)
    base_cls, reason = _class(module, "_StatefulBaseDataLoaderIter",
                              torch_module._BaseDataLoaderIter)
    if reason:
        return reason
    if "__next__" in base_cls.__dict__:
        own_next, reason = _own_function(base_cls, "__next__")
        if reason:
            return reason
        if not {"super", "__next__"} <= (_code_names(own_next) or set()):
            return "_StatefulBaseDataLoaderIter.__next__ does not call super"
    single_cls, reason = _class(module, "_StatefulSingleProcessDataLoaderIter", base_cls)
    if reason:
        return reason
    multi_cls, reason = _class(module, "_StatefulMultiProcessingDataLoaderIter", base_cls)
    if reason:
        return reason
    return _check_iterators(torch_module._BaseDataLoaderIter, single_cls, multi_cls)


def _note_text(text):
    """A value for the "key=value;..." notes: no separators, short."""
    text = str(text).replace(";", ",").replace("=", ":")
    return text[:120]


def _module_version(name):
    import sys
    module = sys.modules.get(name)
    return _note_text(getattr(module, "__version__", None) or "unknown")


def _quiet(environ):
    return environ.get("DLBN_LOG", "").strip() == "quiet"


def _in_child_process():
    """A multiprocessing child (spawn/forkserver DataLoader workers import
    torch again): its stderr lines would repeat the main process's."""
    try:
        import sys
        process = sys.modules.get("multiprocessing.process")
        return process is not None and process.parent_process() is not None
    except Exception:
        return False


# ---------------------------------------------------------------------------
# Patching

# Modules that sitecustomize hands over once imported, and what patches them.
TORCH_MODULE = "torch.utils.data.dataloader"
STATEFUL_MODULE = "torchdata.stateful_dataloader.stateful_dataloader"


def patch_module(name, module):
    """Patch one module that sitecustomize's import hook saw executed; return
    the names of the modules still worth handing over (the hook stops
    listening when there are none)."""
    try:
        if name == TORCH_MODULE:
            patch_dataloader_module(module)
        elif name == STATEFUL_MODULE:
            patch_stateful_module(module)
        elif _setup():
            if _loaders is not None:
                _loaders.patch(name, module)
            if _wrappers is not None:
                _wrappers.patch(name, module)
        return _still_wanted()
    except Exception:
        return ()


def _still_wanted():
    """The modules still worth being handed: StatefulDataLoader's only when
    torch's DataLoader was wrapped and torchdata is installed at all; the
    other loaders' (_dlbn_loaders) while the marker API is there."""
    wanted = _loaders.wanted() if _loaders is not None else ()
    if _wrappers is not None:
        wanted += _wrappers.wanted()
    import sys
    if _status != "ok" or _stateful_done or STATEFUL_MODULE in sys.modules:
        return wanted
    try:
        import _frozen_importlib_external
        if _frozen_importlib_external.PathFinder.find_spec("torchdata") is None:
            return wanted
    except Exception:
        return wanted
    return (STATEFUL_MODULE,) + wanted


def patch_dataloader_module(module, api=None, environ=None):
    """Wrap the DataLoader iterator protocol of a loaded dataloader module,
    if this torch's internals are the ones the wrappers know (else leave it
    alone and say why, in the trace and on stderr).

    `api` replaces the library's marker API (tests pass a recorder object
    with mark(kind, iter_id, arg) and config(iter_id, bytes) methods);
    `environ` replaces os.environ for the replay and log settings.
    """
    global _patched, _status, _orig_next, _torch_module, _replay
    if _patched:
        return
    _patched = True
    if not _setup(api, environ):
        _status = "off"
        return
    try:
        reason = _torch_incompatibility(module)
    except Exception as exc:  # a module too strange to inspect
        reason = "check failed with %s" % type(exc).__name__
    if reason is not None:
        _refuse(reason)
        return
    saved = []
    try:
        loader_cls = module.DataLoader
        base_iter_cls = module._BaseDataLoaderIter
        orig_iter = loader_cls.__dict__["__iter__"]
        orig_next = base_iter_cls.__dict__["__next__"]
        _orig_next = orig_next
        saved.append((loader_cls, "__iter__", orig_iter))
        loader_cls.__iter__ = _make_iter_wrapper(orig_iter)
        saved.append((base_iter_cls, "__next__", orig_next))
        base_iter_cls.__next__ = _make_next_wrapper(orig_next)
    except Exception:
        _unpatch(*saved)
        _status, _replay = "off", 0
        return
    _status, _torch_module = "ok", module
    if _settings or _replay:  # dlbn-run --set; --replay counts the loaders made
        _wrap_init(module.DataLoader, "DataLoader")
    _note("bootstrap=ok;torch=%s%s" % (_module_version("torch"), _settings_note()))
    _install_profile(api, _environ)
    _install_handoff(_environ)


_set_up = None    # _setup ran: True when the bootstrap is on
_loaders = None   # the _dlbn_loaders module once set up
_wrappers = None  # the _dlbn_wrappers module, under replay


def _setup(api=None, environ=None):
    """Read the settings and load the marker API, once (the first patched
    module does it: torch's DataLoader, or another loader's module imported
    before torch).  True when there is something to do: the recorder is
    active, or replay / settings were asked for."""
    global _set_up, _api, _environ, _replay, _replay_copy, _loaders, _wrappers
    if _set_up is not None:
        return _set_up
    _set_up = False
    try:
        if environ is None:
            import os
            environ = os.environ
        _environ = environ
        _replay, _replay_copy = _replay_setting(environ)
        _settings_setup(environ)
        _api = api if api is not None else _load_marker_api()
        if _api is None and (_replay or _settings_on()):
            _api = _NullApi()
        if _api is None:
            return False
        _set_up = True
    except Exception:
        return False
    _loaders = _set_up_module("_dlbn_loaders", environ)
    if _replay:  # after _loaders: it parses DLBN_WRAPPER with it
        _wrappers = _set_up_module("_dlbn_wrappers", environ)
    return True


def _set_up_module(name, environ):
    """A sibling module, set up with this one; None if that fails."""
    try:
        import sys
        module = _sibling_module(name)
        module.setup(sys.modules[__name__], environ)
        return module
    except Exception:
        return None


def _wrap_init(loader_cls, name):
    """DataLoader.__init__ (or StatefulDataLoader's) wrapped for --set and
    for --replay (which keeps the loaders made, to cache them all before the
    loop); a class whose __init__ is not a plain function gets no settings
    (and replay caches each loader at its first iter())."""
    global _settings
    orig_init, reason = _own_function(loader_cls, "__init__")
    if reason is None:
        try:
            loader_cls.__init__ = _make_init_wrapper(orig_init)
            return
        except Exception as exc:
            reason = "cannot wrap %s.__init__: %s" % (name, type(exc).__name__)
    if _settings and not _in_child_process():
        _warn("DLBN_SET not applied: %s" % reason)
    _settings = ()


def _refuse(reason):
    """This torch's DataLoader is left alone: no wrappers, so no marks and no
    replay.  The trace gets a process-level note (iter_id 0) that the
    analyzer turns into a reason line; stderr gets one line (not from
    multiprocessing children - spawned DataLoader workers import torch too -
    whose parent said it already)."""
    global _status, _replay
    _status = "incompatible"
    replay, _replay = _replay, 0
    try:
        reason, torch_version = _note_text(reason), _module_version("torch")
        _note("bootstrap=incompatible;torch=%s;reason=%s" % (torch_version, reason))
        message = ("this torch's DataLoader (torch %s) differs from what the bootstrap "
                   "knows: %s; DataLoaders are left alone (no fetch marks, the analyzer "
                   "uses the IPC view)" % (torch_version, reason))
        if _in_child_process():
            return
        if replay:
            # Not informational: the run does not do what DLBN_REPLAY asked.
            _warn(message + "; DLBN_REPLAY is off: this run loads its data")
        elif _settings_on():  # nor what dlbn-run --set / --max-steps asked
            _warn(message + "; DLBN_SET and DLBN_MAX_STEPS are not applied")
        elif not _quiet(_environ):
            _warn(message)
    except Exception:
        pass


def _note(text):
    """A process-level note in the trace (CONFIG with iter_id 0)."""
    try:
        _api.config(0, text.encode("utf-8", "replace"))
    except Exception:
        pass


def _unpatch(*saved):
    for cls, name, orig in saved:
        try:
            setattr(cls, name, orig)
        except Exception:
            pass


def patch_stateful_module(module):
    """Wrap torchdata's StatefulDataLoader.__iter__ as DataLoader.__iter__ is
    (its iterators' __next__ already runs torch's wrapped one through super(),
    but its __iter__ never calls DataLoader's: without this the iterators are
    only adopted at their first fetch - no loader in CONFIG, no new iter_id
    when persistent workers reuse one, no replay).  Only after torch's
    DataLoader was wrapped; on a mismatch its iterators are left alone too."""
    global _stateful_done, _skip_iter_types
    if _stateful_done or _status != "ok":
        return
    _stateful_done = True
    try:
        version = _module_version("torchdata")
    except Exception:
        version = "unknown"
    try:
        reason = _stateful_incompatibility(module, _torch_module)
    except Exception as exc:  # a module too strange to inspect
        reason = "check failed with %s" % type(exc).__name__
    if reason is not None:
        try:
            # the wrapped __next__ passes these through untouched
            _skip_iter_types = (module._StatefulBaseDataLoaderIter,)
        except Exception:
            pass
        try:
            reason = _note_text(reason)
            _note("stateful_dataloader=incompatible;torchdata=%s;stateful_reason=%s"
                  % (version, reason))
            message = ("torchdata's StatefulDataLoader (torchdata %s) differs from what "
                       "the bootstrap knows: %s; it is left alone (no fetch marks)"
                       % (version, reason))
            if _in_child_process():
                return
            if _replay:
                _warn(message + "; DLBN_REPLAY does not apply to it")
            elif not _quiet(_environ):
                _warn(message)
        except Exception:
            pass
        return
    saved = []
    try:
        loader_cls = module.StatefulDataLoader
        orig_iter = loader_cls.__dict__["__iter__"]
        saved.append((loader_cls, "__iter__", orig_iter))
        loader_cls.__iter__ = _make_iter_wrapper(orig_iter)
    except Exception:
        _unpatch(*saved)
        return
    if _settings and "__init__" in loader_cls.__dict__:  # dlbn-run --set
        _wrap_init(loader_cls, "StatefulDataLoader")
    _note("stateful_dataloader=ok;torchdata=%s" % version)


# ---------------------------------------------------------------------------
# Localization (python/_dlbn_profile.py, loaded from this file's directory):
# per-stage times and sampled Python stacks in the fetching processes, and
# the loop's next() call site.  Only with the library's marker API (tests
# that pass their own api, and replay without the recorder, get none).

_profile = None   # the _dlbn_profile module once it is on


def _sibling_module(name):
    """A module of dlbn's bootstrap, from this file's directory (not from
    sys.path: the program's own modules cannot shadow it)."""
    import os
    import sys
    module = sys.modules.get(name)
    if module is None:
        import _frozen_importlib
        import _frozen_importlib_external
        spec = _frozen_importlib_external.PathFinder.find_spec(
            name, [os.path.dirname(_OWN_FILE)])
        if spec is None:
            return None
        module = _frozen_importlib.module_from_spec(spec)
        spec.loader.exec_module(module)
        sys.modules[name] = module
    return module


def _install_profile(api, environ):
    global _profile
    if api is not None or not isinstance(_api, _MarkerApi):
        return
    try:
        module = _sibling_module("_dlbn_profile")
        if module is not None and module.install(environ=environ):
            _profile = module
    except Exception:
        _profile = None


# ---------------------------------------------------------------------------
# Hand-off (python/_dlbn_handoff.py): when the fetch's caller is a wrapper
# iterable's generator __iter__, the time its next yield comes, so that the
# analyzer can charge the wrapper's work on the batch, which a Replay of what
# the loop iterates removes.  Any marker API but the null one (marks that go
# nowhere need no hand-off), and only on the main thread: the mark carries the
# loop's counters there alone, without which the analyzer cannot use it.
# DLBN_HANDOFF=0 turns it off.

_handoff = None    # the _dlbn_handoff module once it is on
_getframe = None   # sys._getframe
_get_ident = None  # _thread.get_ident
_main_ident = None


def _install_handoff(environ):
    global _handoff, _getframe, _get_ident, _main_ident
    if isinstance(_api, _NullApi) or environ.get("DLBN_HANDOFF", "1") == "0":
        return
    try:
        import _thread
        import sys
        import threading
        _getframe, _get_ident = sys._getframe, _thread.get_ident
        _main_ident = threading.main_thread().ident
        _handoff = _sibling_module("_dlbn_handoff")
    except Exception:
        _handoff = None


def _arm_handoff(iter_id, index):
    try:
        if _get_ident() != _main_ident:
            return
        frame = _handoff.wrapper_frame(_getframe(2))  # the caller of __next__
        if frame is not None and frame.f_code.co_filename not in _OWN_FILES:
            _handoff.arm(frame, lambda: _emit(MARK_HANDOFF, iter_id, index))
            if _wrappers is not None:  # replay: the wrapper's class, next time
                _wrappers.learn(frame)
    except Exception:
        pass


def _new_iter_id():
    global _next_iter_id
    iter_id = _next_iter_id
    _next_iter_id += 1
    return iter_id


# Exceptions that pass through a wrapper keep the traceback they would have
# without dlbn: the wrapper removes its own frames (and those of the replay
# code it called) from the head of the traceback, then re-raises with a bare
# `raise`, which - unlike `raise exc` - adds no entry for the re-raising frame.
# Python 3.11 and later re-raise exc.__traceback__ as set here.  3.10 and
# earlier re-raise the traceback saved when the handler was entered, so
# there the handler's saved exception is replaced too (PyErr_SetExcInfo,
# which steals one reference of each argument).
def _drop_own_frames(exc):
    try:
        tb = exc.__traceback__
        while tb is not None and tb.tb_frame.f_code.co_filename in _OWN_FILES:
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


def _old_reraise():
    import sys
    return sys.version_info < (3, 11) and sys.implementation.name == "cpython"


def _own_files():
    """This file, _dlbn_loaders.py and _dlbn_wrappers.py beside it: a
    traceback that passes through their wrappers loses their frames."""
    import os
    here = _drop_own_frames.__code__.co_filename
    return frozenset([here] + [os.path.join(os.path.dirname(here), name)
                               for name in ("_dlbn_loaders.py", "_dlbn_wrappers.py")])


_OLD_RERAISE = _old_reraise()
_OWN_FILE = _drop_own_frames.__code__.co_filename
_OWN_FILES = _own_files()


def _make_iter_wrapper(orig_iter):
    def __iter__(self):
        iter_id = 0
        if _wrappers is not None:
            seen = _wrappers.filling()
            if seen is not None:  # inside a wrapper's replay fill: no marks
                seen.append(self)
                return _unmarked_replay(self, orig_iter)
        if _replay and not _replay_prefilled:
            # before any mark: no loader's wait holds the fills
            _prefill_other_loaders()
        try:
            iter_id = _new_iter_id()
            epoch = self.__dict__.get("_dlbn_epochs", 0)
            self.__dict__["_dlbn_epochs"] = epoch + 1
            _emit(MARK_ITER_BEGIN, iter_id, epoch)
            if _max_steps:  # dlbn-run --max-steps
                _max_steps_iter(self, iter_id)
        except Exception:
            iter_id = 0
        try:
            it = None
            if iter_id and _replay:
                it = _replay_iterator(self, orig_iter, iter_id)
            if it is None:
                it = orig_iter(self)
        except BaseException as exc:
            _drop_own_frames(exc)
            raise
        if iter_id and type(it) is not _ReplayIterator:
            try:
                it._dlbn_iter_id = iter_id
                _emit_config(iter_id, self, it, replay=0 if _replay else None)
            except Exception:
                pass
        return it

    _copy_names(__iter__, orig_iter)
    return __iter__


def _make_next_wrapper(orig_next):
    def __next__(self):
        try:
            if _handoff is not None:
                _handoff.disarm()
            iter_id = self.__dict__.get("_dlbn_iter_id")
            if iter_id is None:
                filling = _wrappers is not None and _wrappers.filling() is not None
                iter_id = 0 if filling else _adopt_iterator(self)
            if _loaders is not None and _loaders.fetch_open():
                iter_id = 0  # inside another loader's fetch (it is the loop's)
            index = self.__dict__.get("_num_yielded", -1)
            stop = _max_steps_due(iter_id, index) if _max_steps and iter_id else None
            if iter_id and stop is None:
                _emit(MARK_FETCH_BEGIN, iter_id, index)
                if _profile is not None:
                    _profile.fetch_begins(iter_id, self)
        except Exception:
            iter_id, stop = 0, None
        if stop is not None:  # dlbn-run --max-steps: the bounded run ends
            raise stop
        try:
            data = orig_next(self)
        except StopIteration as exc:
            if iter_id:
                _emit(MARK_FETCH_STOP, iter_id, index)
            _drop_own_frames(exc)
            raise
        except BaseException as exc:
            if iter_id:
                _emit(MARK_FETCH_STOP, iter_id, -1)
            _drop_own_frames(exc)
            raise
        if iter_id:
            _emit(MARK_FETCH_END, iter_id, index)
            if _max_steps:
                _max_steps_count(iter_id)
            if _handoff is not None:
                _arm_handoff(iter_id, index)
        return data

    _copy_names(__next__, orig_next)
    return __next__


def _copy_names(wrapper, orig):
    for attr in ("__module__", "__name__", "__qualname__", "__doc__"):
        try:
            setattr(wrapper, attr, getattr(orig, attr))
        except Exception:
            pass
    wrapper.__wrapped__ = orig


def _adopt_iterator(it):
    """An iterator made without a wrapped __iter__ (a subclass overriding it,
    or a direct _get_iterator()): announce it at its first fetch.  Returns 0
    (no marks, ever) for the iterators of a loader left alone."""
    if _skip_iter_types and isinstance(it, _skip_iter_types):
        it._dlbn_iter_id = 0
        return 0
    iter_id = _new_iter_id()
    it._dlbn_iter_id = iter_id
    _emit(MARK_ITER_BEGIN, iter_id, 0)
    _emit_config(iter_id, None, it)
    return iter_id


# The CONFIG text stays under this many bytes (the worker list is cut first).
_CONFIG_MAX = 500
_WORKERS_MAX = 64


def _emit_config(iter_id, loader, it, replay=None):
    try:
        _api.config(iter_id, _config_text(loader, it, replay, iter_id))
    except Exception:
        pass


def _config_text(loader, it, replay=None, iter_id=0):
    """ "key=value;..." (bytes) from the loader (when known) and its iterator."""
    def pick(loader_attr, iter_attr, default=None):
        if loader is not None and hasattr(loader, loader_attr):
            return getattr(loader, loader_attr)
        if it is not None and hasattr(it, iter_attr):
            return getattr(it, iter_attr)
        return default

    num_workers = int(pick("num_workers", "_num_workers", 0) or 0)
    items = [("num_workers", num_workers)]

    batch_size = pick("batch_size", "_dlbn_none")
    if batch_size is None:
        sampler = pick("batch_sampler", "_index_sampler")
        batch_size = getattr(sampler, "batch_size", None)
    items.append(("batch_size", batch_size))

    prefetch = pick("prefetch_factor", "_prefetch_factor")
    if prefetch is None and num_workers > 0:
        prefetch = 2    # torch 2.x stores None and uses 2
    items.append(("prefetch_factor", prefetch))

    requested_pin = pick("pin_memory", "_pin_memory", False)
    effective_pin = getattr(it, "_pin_memory", requested_pin)
    items.append(("pin_memory", effective_pin))
    if bool(requested_pin) != bool(effective_pin):
        items.append(("pin_memory_requested", requested_pin))

    items.append(("persistent_workers",
                  pick("persistent_workers", "_persistent_workers", False)))
    items.append(("start_method", _start_method(loader, num_workers)))
    items.append(("dataset_kind", _dataset_kind(loader, it)))
    items.append(("drop_last", pick("drop_last", "_drop_last")))
    items.append(("timeout", pick("timeout", "_timeout")))
    items.extend(_cpu_items())
    if loader is not None:
        items.append(("loader", id(loader)))
        items.append(("loader_class", type(loader).__name__))
        items.extend(_dali_proxy_items(loader))
    items.append(("sampler", _sampler_name(loader, it)))
    if replay is not None:
        items.append(("replay", replay))
        if replay and loader is not None:  # _dlbn_wrappers replays a wrapper of it
            items.append(("wrapper_replay", loader.__dict__.get("_dlbn_wrapped_by")))
    text = ";".join("%s=%s" % (key, _config_value(value))
                    for key, value in items if value is not None)
    if _settings or _max_steps:  # dlbn-run --set / --max-steps
        for key, value in _settings_config(loader, iter_id):
            text += ";%s=%s" % (key, value)
    return _add_workers(text.encode("utf-8", "replace"), it)


def _dali_proxy_items(loader):
    """DALI's proxy DataLoader (nvidia.dali.plugin.pytorch.experimental.proxy):
    its workers gather each sample's inputs, a DALI pipeline in this process
    makes the batch.  That pipeline's threads and device."""
    if not type(loader).__module__.startswith("nvidia.dali."):
        return []
    pipe = getattr(getattr(loader, "dali_server", None), "_pipe", None)
    if pipe is None:
        return []
    device = "cpu" if getattr(pipe, "device_id", None) is None else "gpu"
    return [("dali_proxy", 1), ("threads", getattr(pipe, "num_threads", None)),
            ("device", device)]


def _add_workers(text, it):
    """text + ";workers=pid,pid,..." for a multiprocess iterator: the pids
    of its worker processes (the analyzer gives each worker to its loader),
    as many as fit in _CONFIG_MAX.  Persistent workers are listed again for
    every iter(): the iterator object, and its _workers, are reused."""
    workers = getattr(it, "_workers", None)
    if not workers:
        return text
    pids = []
    for worker in list(workers)[:_WORKERS_MAX]:
        pid = getattr(worker, "pid", None)
        if isinstance(pid, int) and pid > 0:
            pids.append(b"%d" % pid)
    if not pids:
        return text
    text += b";workers=" + pids[0]
    if len(text) >= _CONFIG_MAX:
        return text.rsplit(b";workers=", 1)[0]
    for pid in pids[1:]:
        if len(text) + 1 + len(pid) >= _CONFIG_MAX:
            break
        text += b"," + pid
    return text


def _cpu_count():
    """CPUs this process may run on (its affinity mask, what a cgroup or
    taskset left it): the analyzer's --what-if limit on useful workers."""
    import os
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count()


def _cpu_items():
    """What the training process's CPU side looks like: the CPUs it may run
    on, its cgroup's CPU quota (in CPUs, when one is set) and torch's
    intra-op thread count, the threads a CPU model runs on."""
    import sys
    items = [("cpus", _cpu_count()), ("cpu_quota", _cpu_quota())]
    torch = sys.modules.get("torch")
    try:
        items.append(("intraop_threads", torch.get_num_threads()))
    except Exception:  # no torch yet, or one without it
        pass
    return items


def _cpu_quota():
    """The cgroup's CPU limit in CPUs (cgroup v2 cpu.max, else v1's CFS
    quota), None when there is none or it cannot be read."""
    import os
    try:
        with open("/proc/self/cgroup") as f:
            lines = f.read().splitlines()
    except OSError:
        return None
    for line in lines:
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        path = parts[2].lstrip("/")
        try:
            if parts[0] == "0" and parts[1] == "":
                with open(os.path.join("/sys/fs/cgroup", path, "cpu.max")) as f:
                    quota, period = f.read().split()[:2]
                if quota == "max":
                    return None
            elif "cpu" in parts[1].split(","):
                base = os.path.join("/sys/fs/cgroup", parts[1])
                if not os.path.isdir(base):
                    base = "/sys/fs/cgroup/cpu"
                with open(os.path.join(base, path, "cpu.cfs_quota_us")) as f:
                    quota = f.read().strip()
                with open(os.path.join(base, path, "cpu.cfs_period_us")) as f:
                    period = f.read().strip()
                if int(quota) <= 0:
                    return None
            else:
                continue
            return round(int(quota) / int(period), 2)
        except (OSError, ValueError, ZeroDivisionError):
            continue
    return None


def _sampler_name(loader, it):
    """Class name of what orders the samples: the loader's sampler, or the
    user's batch sampler (then loader.sampler is a placeholder torch made)."""
    if loader is not None:
        sampler = getattr(loader, "sampler", None)
        batch_sampler = getattr(loader, "batch_sampler", None)
    else:
        sampler, batch_sampler = None, getattr(it, "_index_sampler", None)
    if batch_sampler is not None and (
            sampler is None or type(batch_sampler).__name__ != "BatchSampler"):
        # A user's batch sampler, or one wrapping torch's (timm's
        # MultiEpochsDataLoader repeats it forever): the sampler inside.
        sampler = batch_sampler
        for _ in range(4):
            inner = getattr(sampler, "sampler", None)
            if inner is None:
                break
            sampler = inner
            if "BatchSampler" not in type(sampler).__name__:
                break
    if sampler is None:
        return None
    return type(sampler).__name__


def _config_value(value):
    if isinstance(value, bool):
        return "1" if value else "0"
    text = str(value)
    return text.replace(";", ",").replace("=", ":")[:120]


def _start_method(loader, num_workers):
    """The workers' start method.  Never fixes the default context: by the
    time this runs torch has already used (and so fixed) it."""
    if num_workers <= 0:
        return "none"
    ctx = getattr(loader, "multiprocessing_context", None)
    if ctx is not None:
        return ctx.get_start_method()
    import multiprocessing
    return multiprocessing.get_start_method(allow_none=True) or "default"


def _dataset_kind(loader, it):
    kind = None
    if loader is not None:
        kind = getattr(loader, "_dataset_kind", None)
    if kind is None and it is not None:
        kind = getattr(it, "_dataset_kind", None)
    if kind is None:
        return None
    return "iterable" if kind == 1 else "map"   # torch's _DatasetKind.Iterable == 1


# ---------------------------------------------------------------------------
# Replay (DLBN_REPLAY, see the module comment)


_replay_loaders = None  # weakref.WeakSet: the DataLoaders made (under replay)
_replay_prefilled = False


def _replay_made(loader):
    global _replay_loaders
    if _replay_loaders is None:
        import weakref
        _replay_loaders = weakref.WeakSet()
    _replay_loaders.add(loader)


def _prefill_other_loaders():
    """At the process's first iter() of a DataLoader, before its marks (so
    that no loader's wait holds the fills, which would make it look like
    the loader the loop waits on most): fill the cache of every DataLoader
    made so far, that one included - a validation loader first
    iterated after the first training epoch would otherwise start its
    workers and load its batches inside the replayed steps, where the
    reference Replay (and LoaderEvaluator), which cache every loader before
    the loop, have none of that.  The real iterator is made with the
    unwrapped __iter__: no marks, no epoch.  A loader whose fill fails is
    left to fill at its own first iter(), where its error reaches the loop
    as in a real run."""
    global _replay_prefilled
    if _replay_prefilled or not _replay_loaders:
        return
    _replay_prefilled = True
    for loader in list(_replay_loaders):
        try:
            if "_dlbn_replay" in loader.__dict__:
                continue
            len(loader)   # no length: it loads normally (said at its iter())
            orig_iter = getattr(type(loader).__iter__, "__wrapped__", None)
        except Exception:
            continue
        if orig_iter is None:   # a subclass's own __iter__: at its first iter()
            continue
        try:
            state = _ReplayState(orig_iter(loader))
            state.fill()
        except Exception as exc:
            _warn("DLBN_REPLAY: a DataLoader not iterated yet could not be cached before "
                  "the loop (%s); it fills its cache at its first iter()" % type(exc).__name__)
            continue
        loader.__dict__["_dlbn_replay"] = state


class _ReplayState:
    """One DataLoader's replay: the real iterator until the cache is
    filled, then the cached batches.  Lives in the loader's __dict__."""

    def __init__(self, real_iter):
        self.real_iter = real_iter
        self.cache = None
        self.pin_memory = getattr(real_iter, "_pin_memory", None)

    def fill(self):
        """Take up to _replay batches from the real iterator, then let it go.
        Exceptions of the real loader pass through (as in a real run)."""
        cache = []
        real_iter, self.real_iter = self.real_iter, None
        if real_iter is None:  # an earlier fill raised: nothing left
            self.cache = cache
            return
        try:
            while len(cache) < _replay:
                try:
                    batch = _orig_next(real_iter)
                except StopIteration:
                    break
                cache.append(_copy_batch(batch))
                del batch
        finally:
            del real_iter  # non-persistent workers shut down here
        self.cache = cache

    def batch(self, index):
        if self.cache is None:
            self.fill()
        if not self.cache:
            raise StopIteration
        cached = self.cache[index % len(self.cache)]
        return _copy_batch(cached) if _replay_copy else cached


class _ReplayIterator:
    """What iter(loader) returns under replay: len(loader) cached batches.
    Only the iterator protocol (and len) of torch's iterators."""

    def __init__(self, state, iter_id, steps, pin_memory):
        self._dlbn_iter_id = iter_id
        self._dlbn_state = state
        self._num_yielded = 0
        self._steps = steps
        self._pin_memory = pin_memory

    def __iter__(self):
        return self

    def __len__(self):
        return self._steps

    def __next__(self):
        if _handoff is not None:
            _handoff.disarm()
        iter_id = self._dlbn_iter_id
        index = self._num_yielded
        stop = _max_steps_due(iter_id, index) if _max_steps else None
        if stop is not None:  # dlbn-run --max-steps: the bounded run ends
            raise stop
        _emit(MARK_FETCH_BEGIN, iter_id, index)
        try:
            if index >= self._steps:
                raise StopIteration
            data = self._dlbn_state.batch(index)
        except StopIteration as exc:
            _emit(MARK_FETCH_STOP, iter_id, index)
            _drop_own_frames(exc)
            raise
        except BaseException as exc:
            _emit(MARK_FETCH_STOP, iter_id, -1)
            _drop_own_frames(exc)
            raise
        self._num_yielded = index + 1
        _emit(MARK_FETCH_END, iter_id, index)
        if _max_steps:
            _max_steps_count(iter_id)
        if _handoff is not None:  # the replay run's wrapper still works on it
            _arm_handoff(iter_id, index)
        return data


def _unmarked_replay(loader, orig_iter):
    """iter(loader) inside a wrapper's replay fill (_dlbn_wrappers): one
    epoch of its cached batches, cycled, without marks (the cache is
    filled here when it is not yet); its real iterator where it is not
    replayed (no len())."""
    state = loader.__dict__.get("_dlbn_replay")
    try:
        steps = len(loader)
    except Exception:
        steps = None
    if state is False or steps is None:
        return orig_iter(loader)
    if state is None:
        state = _ReplayState(orig_iter(loader))
        loader.__dict__["_dlbn_replay"] = state
    return _cached_epoch(state, steps)


def _cached_epoch(state, steps):
    if state.cache is None:
        state.fill()
    for index in range(steps if state.cache else 0):
        yield state.batch(index)


def _replay_iterator(loader, orig_iter, iter_id):
    """The replay iterator for this iter(loader), or None to load normally
    (no len(), or a dlbn failure).  The real iterator is made here, as
    iter() would, so that its errors surface where they would."""
    try:
        state = loader.__dict__.get("_dlbn_replay")
    except Exception:
        return None
    if state is False:
        return None
    try:
        steps = len(loader)
    except Exception:
        steps = None
    if steps is None:
        if state is None:
            loader.__dict__["_dlbn_replay"] = False
            _warn("DLBN_REPLAY: this DataLoader has no len() (an IterableDataset "
                  "without __len__): no epoch length to replay, it loads normally")
        return None
    if state is None:
        state = _ReplayState(orig_iter(loader))
        loader.__dict__["_dlbn_replay"] = state
    it = _ReplayIterator(state, iter_id, steps, state.pin_memory)
    # The real iterator, while it lives (first epoch), names the workers.
    real_iter = state.real_iter
    _emit_config(iter_id, loader, it if real_iter is None else real_iter, replay=_replay)
    return it


def _copy_batch(obj):
    """A copy of a collated batch that shares no mutable state with obj:
    tensors cloned (pinned ones stay pinned), containers rebuilt, anything
    else deep-copied when it can be (else shared: immutable or opaque)."""
    import torch
    if isinstance(obj, torch.Tensor):
        return _clone_tensor(obj)
    if isinstance(obj, (str, bytes, int, float, bool, type(None))):
        return obj
    if isinstance(obj, tuple):
        items = [_copy_batch(item) for item in obj]
        if hasattr(obj, "_fields"):  # namedtuple
            try:
                return type(obj)(*items)
            except Exception:
                pass
        return tuple(items)
    if isinstance(obj, list):
        return [_copy_batch(item) for item in obj]
    if isinstance(obj, dict):
        copied = {key: _copy_batch(value) for key, value in obj.items()}
        if type(obj) is dict:
            return copied
        try:
            return type(obj)(copied)
        except Exception:
            return copied
    try:
        import copy
        return copy.deepcopy(obj)
    except Exception:
        return obj


def _clone_tensor(tensor):
    try:
        pinned = tensor.device.type == "cpu" and tensor.is_pinned()
    except Exception:
        pinned = False
    try:
        copied = tensor.clone()
    except Exception:
        return tensor  # a tensor type that cannot be cloned: shared
    if pinned:
        try:
            copied = copied.pin_memory()
        except Exception:
            pass
    return copied


# ---------------------------------------------------------------------------
# Settings and bounded runs (dlbn-run --set / --max-steps; DLBN_SET,
# DLBN_MAX_STEPS).  All of --set and --max-steps lives in this block; the
# wrappers above call _settings_init (DataLoader.__init__), _max_steps_iter
# (__iter__), _max_steps_due / _max_steps_count (__next__) and
# _settings_config (the CONFIG text), each only when a setting is on.
#
# DLBN_SET: items separated by ";", each [SELECTOR:]KEY=VALUE.
#   KEY       num_workers (int >= 0), prefetch_factor (int >= 1),
#             persistent_workers, pin_memory (0/1/true/false),
#             batch_size (int >= 1)
#   SELECTOR  none: every DataLoader; "train": loaders whose sampler is not
#             sequential (shuffled, a user's or batch sampler, an
#             IterableDataset); "eval" (or "val"): loaders with torch's
#             SequentialSampler, or a DistributedSampler with shuffle=False;
#             an integer N: the N-th DataLoader the process creates,
#             counting from 0 (re-creations, e.g. by Lightning, count too).
#   Later items win.  Applied when DataLoader.__init__ returns (the loader's
#   own arguments were validated by torch), by writing the attributes torch
#   reads when it makes the iterator; then kept consistent the way torch's
#   __init__ would: num_workers=0 puts prefetch_factor back to torch's
#   default for 0 workers and persistent_workers to 0 (a --set of either is
#   then ignored, said once on stderr, and noted as set_ignored); workers
#   where there were none get prefetch_factor 2 when it was None (torch 2.x).
#   pin_memory without an accelerator is dropped by torch, as without dlbn
#   (CONFIG's pin_memory_requested says so).  batch_size replaces the
#   loader's BatchSampler with torch's own over the same sampler and
#   drop_last, as __init__ makes it from batch_size; a loader that does not
#   batch that way (batch_size=None: a batch_sampler of the program's, or
#   no automatic batching) keeps its own, said on stderr and in
#   set_ignored.
#   CONFIG of each iterator: set=KEY=VALUE,... (the values dlbn-run asked
#   for that apply to it, equal to its own or not, and the forced
#   consequences), set_from=KEY=VALUE,... (the loader's own values that
#   changed), set_ignored=KEY,...; the process note: set=[SEL:]KEY=VALUE,...
#
# DLBN_MAX_STEPS=N: the run ends after N training steps past warm-up.  The
#   training loader, as far as the bootstrap can tell while the run goes:
#   the first loader iterated whose sampler is not sequential, else the first
#   loader iterated (a later non-sequential one takes over: Lightning's
#   sanity check iterates the val loader first).  Warm-up is the analyzer's
#   default, prefetch depth + 1 steps (num_workers x prefetch_factor + 1),
#   so the analysis window holds N steps.  At the fetch after warm-up + N
#   batches (counted over all its epochs) the fetch is closed as an end of
#   epoch (FETCH_STOP) and SystemExit(0) is raised from it: finally blocks
#   and context managers run, workers shut down, the trace is completed at
#   exit and the status is 0 (Lightning re-raises it after its teardown).
#   Code after the training loop does not run.  Fetched from another thread
#   than the main one, StopIteration is raised instead (a SystemExit there
#   would end that thread only), at that fetch and every later one.
#   CONFIG: max_steps=N on that loader's iterators and in the process note.

_SETTING_KEYS = ("num_workers", "prefetch_factor", "persistent_workers", "pin_memory")
# Set by replacing the batch sampler, not an attribute (_set_batch_size);
# also torchdata.nodes' Batcher and DALI's pipeline.
_BATCH_KEY = "batch_size"
# DALI's pipeline knobs (_dlbn_loaders applies them); num_workers and
# prefetch_factor also set torchdata.nodes' ParallelMapper and Prefetcher.
_OTHER_SETTING_KEYS = ("num_threads", "prefetch_queue_depth")
_settings = ()        # parsed DLBN_SET: (selector, key, value), in order
_max_steps = 0        # DLBN_MAX_STEPS, 0 = off
_loaders_made = 0     # DataLoaders whose __init__ returned (creation order)
_ignored_said = set()  # (key, reason) already said on stderr
_stop_key = None      # the loader --max-steps counts (its _dlbn_stop_key)
_stop_sequential = True  # ... and whether its sampler is sequential
_stop_iters = set()   # iter_ids of its iterators
_stop_count = 0       # batches it yielded, all epochs
_stop_at = 0          # warm-up + _max_steps
_stop_keys_made = 0
_stop_said = []       # the end of the run was said on stderr


def setting_value(key, text):
    """The value of KEY=text, or raise ValueError with the reason (also
    used by tests; dlbn-run validates the same way before the run)."""
    text = text.strip()
    if key in ("num_workers", "prefetch_factor", _BATCH_KEY) + _OTHER_SETTING_KEYS:
        try:
            value = int(text, 10)
        except ValueError:
            raise ValueError("%s takes an integer, not %r" % (key, text))
        least = 0 if key == "num_workers" else 1
        if value < least:
            raise ValueError("%s must be >= %d, not %d" % (key, least, value))
        return value
    if key in ("persistent_workers", "pin_memory"):
        lowered = text.lower()
        if lowered in ("1", "true"):
            return True
        if lowered in ("0", "false"):
            return False
        raise ValueError("%s takes 0, 1, true or false, not %r" % (key, text))
    raise ValueError("unknown setting %r (known: %s)"
                     % (key, ", ".join(_SETTING_KEYS + (_BATCH_KEY,) + _OTHER_SETTING_KEYS)))


def parse_settings(text):
    """[(selector, key, value)] from DLBN_SET; selector None, "train",
    "eval" or an int.  Raises ValueError naming the bad item."""
    items = []
    for item in text.replace("\n", ";").split(";"):
        item = item.strip()
        if not item:
            continue
        head, eq, value = item.partition("=")
        if not eq:
            raise ValueError("%r is not [SELECTOR:]KEY=VALUE" % item)
        selector, colon, key = head.rpartition(":")
        selector, key = selector.strip(), key.strip()
        if not colon:
            selector = None
        elif selector in ("train", "eval", "val"):
            selector = "eval" if selector == "val" else selector
        elif selector.isdigit():
            selector = int(selector)
        else:
            raise ValueError("%r: selector %r is not train, eval or a loader number"
                             % (item, selector))
        try:
            items.append((selector, key, setting_value(key, value)))
        except ValueError as exc:
            raise ValueError("%r: %s" % (item, exc))
    return items


def _settings_setup(environ):
    """Read DLBN_SET and DLBN_MAX_STEPS; a bad value is said on stderr and
    switches that setting off (dlbn-run refuses it before the run)."""
    global _settings, _max_steps
    _settings, _max_steps = (), 0
    text = environ.get("DLBN_SET", "").strip()
    if text:
        try:
            _settings = tuple(parse_settings(text))
        except ValueError as exc:
            _warn("DLBN_SET: %s; no setting applied" % exc)
    steps = environ.get("DLBN_MAX_STEPS", "").strip()
    if steps and steps != "0":
        try:
            _max_steps = int(steps, 10)
        except ValueError:
            _max_steps = -1
        if _max_steps < 1:
            _warn("DLBN_MAX_STEPS=%r is not a positive step count; the run is not bounded"
                  % steps)
            _max_steps = 0


def _settings_on():
    return bool(_settings) or _max_steps > 0


def _settings_note():
    """The process note's part: ";set=...;max_steps=N" (or "")."""
    text = ""
    if _settings:
        text += ";set=" + ",".join(
            "%s%s=%s" % ("" if sel is None else "%s:" % sel, key, _config_value(value))
            for sel, key, value in _settings)
    if _max_steps:
        text += ";max_steps=%d" % _max_steps
    return text


def _sequential(loader):
    """Whether the loader's samples come in order (torch's SequentialSampler,
    or a DistributedSampler that does not shuffle): an evaluation loader."""
    sampler = getattr(loader, "sampler", None)
    batch_sampler = getattr(loader, "batch_sampler", None)
    if batch_sampler is not None and type(batch_sampler).__name__ != "BatchSampler":
        return False
    name = type(sampler).__name__
    if name == "SequentialSampler":
        return True
    if name == "DistributedSampler":
        return getattr(sampler, "shuffle", True) is False
    return False


def _selected(selector, index, sequential):
    if selector is None:
        return True
    if selector == "train":
        return not sequential
    if selector == "eval":
        return sequential
    return selector == index


def _make_init_wrapper(orig_init):
    defaults = getattr(orig_init, "__kwdefaults__", None) or {}

    def __init__(self, *args, **kwargs):
        try:
            orig_init(self, *args, **kwargs)
        except BaseException as exc:
            _drop_own_frames(exc)
            raise
        try:
            _settings_init(self, defaults)
            if _replay:
                _replay_made(self)
        except Exception:
            pass

    _copy_names(__init__, orig_init)
    return __init__


def _settings_init(loader, defaults):
    """At the end of DataLoader.__init__: count the loader, apply the
    settings that select it."""
    global _loaders_made
    d = loader.__dict__
    if "_dlbn_index" in d:  # a subclass's __init__ wrapped as well
        return
    index = _loaders_made
    _loaders_made += 1
    d["_dlbn_index"] = index
    if not _settings:
        return
    sequential = _sequential(loader)
    wanted = {}
    for selector, key, value in _settings:
        if key in _SETTING_KEYS + (_BATCH_KEY,) and _selected(selector, index, sequential):
            wanted[key] = value
    batch = _set_batch_size(loader, wanted.pop(_BATCH_KEY)) if _BATCH_KEY in wanted else None
    if not wanted:
        if batch:
            d["_dlbn_set"] = batch
        return
    own = {key: getattr(loader, key, None) for key in _SETTING_KEYS}
    new = dict(own, **wanted)
    ignored = []
    if new["num_workers"] == 0:
        zero_default = defaults.get("prefetch_factor", own["prefetch_factor"])
        if "prefetch_factor" in wanted and wanted["prefetch_factor"] != zero_default:
            ignored.append("prefetch_factor")
        new["prefetch_factor"] = zero_default
        if wanted.get("persistent_workers"):
            ignored.append("persistent_workers")
        new["persistent_workers"] = False
    elif new["prefetch_factor"] is None:
        new["prefetch_factor"] = 2  # what torch 2.x's __init__ makes of None
    changed = [key for key in _SETTING_KEYS if new[key] != own[key]]
    for key in changed:
        d[key] = new[key]
    lost = [key for key in changed if getattr(loader, key, None) != new[key]]
    if lost:  # a property in the way: put everything back
        for key in changed:
            d[key] = own[key]
        ignored, changed, wanted = [key for key in wanted], [], {}
        _say_ignored(ignored, "this DataLoader class does not keep them as attributes")
    elif ignored:
        _say_ignored(ignored, "num_workers is 0")
    # set=: every value dlbn-run asked for that applies (equal to the
    # loader's own or not) and the forced ones; set_from=: what changed.
    shown = [key for key in _SETTING_KEYS
             if key in changed or (key in wanted and key not in ignored)]
    applied = (
        ",".join("%s=%s" % (key, _config_value(new[key])) for key in shown),
        ",".join("%s=%s" % (key, _config_value(own[key])) for key in changed),
        ",".join(ignored))
    if batch:
        applied = tuple(",".join(part for part in pair if part)
                        for pair in zip(batch, applied))
    d["_dlbn_set"] = applied


def _set_batch_size(loader, size):
    """--set batch_size on a DataLoader whose __init__ returned: torch's
    BatchSampler over the loader's sampler and drop_last, made as __init__
    makes it from batch_size.  The (set, set_from, set_ignored) texts."""
    d = loader.__dict__
    own = d.get("batch_size")
    current = d.get("batch_sampler")
    reason = None
    try:
        from torch.utils.data import BatchSampler
        kind = type(current)
        # torch's, or a library's subclass made the same way (torchdata's
        # StatefulDataLoader has one); a program's own class is its own
        library = kind.__module__.split(".")[0] in ("torch", "torchdata")
        if own is None:
            reason = ("it does not batch by batch_size (a batch_sampler of the program's, "
                      "or batch_size=None)")
        elif not (isinstance(current, BatchSampler) and library):
            reason = "its batch sampler (%s) is the program's own" % kind.__name__
        elif size != own:
            d["batch_sampler"] = kind(d["sampler"], size, d.get("drop_last", False))
            d["batch_size"] = size
    except Exception as exc:
        reason = "%s: %s" % (type(exc).__name__, exc)
    if reason is None and getattr(loader, "batch_size", None) != size:
        reason = "this DataLoader class does not keep it as an attribute"
        d["batch_sampler"], d["batch_size"] = current, own  # as it was"
    if reason is not None:
        _say_ignored([_BATCH_KEY], reason)
        return "", "", _BATCH_KEY
    return ("batch_size=%d" % size, "batch_size=%d" % own if own != size else "", "")


def _say_ignored(keys, reason):
    for key in keys:
        if (key, reason) in _ignored_said:
            continue
        _ignored_said.add((key, reason))
        if not _in_child_process():
            _warn("DLBN_SET %s not applied to a DataLoader: %s" % (key, reason))


def _settings_config(loader, iter_id):
    """CONFIG items of the settings for this iterator: [(key, text)]."""
    items = []
    applied = loader.__dict__.get("_dlbn_set") if loader is not None else None
    if applied:
        for key, text in zip(("set", "set_from", "set_ignored"), applied):
            if text:
                items.append((key, text))
    if _max_steps and iter_id in _stop_iters:
        items.append(("max_steps", "%d" % _max_steps))
    return items


def _max_steps_iter(loader, iter_id, workers=None, prefetch=None):
    """At each iter(loader): is this the loader --max-steps counts?
    workers/prefetch: the prefetch depth's factors of a loader that is not
    a DataLoader (_dlbn_loaders), else read from the loader."""
    global _stop_key, _stop_sequential, _stop_count, _stop_at, _stop_keys_made
    d = loader.__dict__
    key = d.get("_dlbn_stop_key")
    if key is None:
        _stop_keys_made += 1
        key = d["_dlbn_stop_key"] = _stop_keys_made
    if key != _stop_key:
        sequential = _sequential(loader)
        if _stop_key is not None and (sequential or not _stop_sequential):
            return
        # the first loader, or the first shuffled one after sequential ones
        _stop_key, _stop_sequential = key, sequential
        _stop_iters.clear()
        _stop_count = 0
        if workers is None:
            workers = int(getattr(loader, "num_workers", 0) or 0)
            prefetch = getattr(loader, "prefetch_factor", None) or 2
        prefetch = prefetch or 2
        _stop_at = (workers * prefetch if workers > 0 else 0) + 1 + _max_steps
    _stop_iters.add(iter_id)


def _max_steps_due(iter_id, index):
    """Before a fetch: None, or the exception that ends the bounded run (the
    caller raises it) once the counted loader yielded warm-up + N batches.
    Emits the marks that close the fetch as an end of epoch."""
    try:
        if iter_id not in _stop_iters or _stop_count < _stop_at:
            return None
        _emit(MARK_FETCH_BEGIN, iter_id, index)
        _emit(MARK_FETCH_STOP, iter_id, index)
        import threading
        if threading.current_thread() is not threading.main_thread():
            return StopIteration
        if not (_quiet(_environ) or _stop_said):
            _warn("--max-steps %d: %d steps done (%d of warm-up), ending the run"
                  % (_max_steps, _stop_count, _stop_at - _max_steps))
        _stop_said.append(True)
        return SystemExit(0)
    except Exception:
        return None


def _max_steps_count(iter_id):
    global _stop_count
    if iter_id in _stop_iters:
        _stop_count += 1
