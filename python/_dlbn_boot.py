"""dlbn Python bootstrap, DataLoader half: exact fetch marks (DESIGN section 3).

sitecustomize.py (the start-up half) loads this module when torch imports
torch.utils.data.dataloader and calls patch_dataloader_module(), which wraps
    DataLoader.__iter__           -> ITER_BEGIN mark + CONFIG record
    _BaseDataLoaderIter.__next__  -> FETCH_BEGIN / FETCH_END, or FETCH_STOP
through the marker API that libdlbn.so exports (dlbn_mark, dlbn_config,
dlbn_active), reached with ctypes.PyDLL(None).  Without the library (symbols
missing) or with dlbn_active() == 0 nothing is wrapped.

Rules (it runs inside someone else's training job): dlbn's own failures never
raise into the host program - every wrapper body is guarded and falls back to
the unwrapped call; exceptions of the wrapped calls pass through unchanged.

Mark arguments (the kinds are DLBN_MARK_* of libintercept/dlbn_trace.h):
  ITER_BEGIN  iter_id, arg = how many iterators this DataLoader made before
              (the epoch number when there is one iter() per epoch)
  CONFIG      iter_id, "key=value;..." (emitted right after the iterator is
              made, so pin_memory is the effective value)
  FETCH_BEGIN iter_id, arg = batch index within the epoch
  FETCH_END   iter_id, arg = the same batch index
  FETCH_STOP  iter_id, arg = batches yielded in the epoch (StopIteration),
              or -1 when __next__ raised anything else (a worker died ...)
iter_id is unique per process and new for every iter(loader), including the
reuse of one iterator object by persistent workers.

Replay (DESIGN section 6, `dlbn-run --replay N`): with DLBN_REPLAY=N (N >= 1)
every DataLoader serves N cached batches, cycled, instead of loading - the
reference method's "Replay" run, whose time over the same steps measures
the speedup dlbn predicts (dlbn-analyze REAL --baseline REPLAY).  Per loader:
  - the first iter() makes the real iterator as usual (workers start); its
    first __next__ takes the first N batches from it (inside the FETCH of
    step 0, which the analyzer's window always skips), copies them (tensors
    cloned, so shared memory of the workers is released and nothing the loop
    does later can change them) and drops the real iterator: workers go idle
    (persistent) or shut down, and no later step touches the loader again;
  - every epoch, this one included, yields len(loader) batches, batch k
    being a copy of cached batch k mod N (a fresh copy per step, so that a
    loop which mutates its batch in place - x.div_(255) - keeps seeing the
    values a real run would; DLBN_REPLAY_COPY=0 hands out the cached
    objects themselves, as the plain reference method does);
  - later iter() calls make no real iterator at all (no worker start-up);
  - marks continue (ITER_BEGIN, FETCH_BEGIN/END, FETCH_STOP at the end of
    the epoch) and CONFIG carries replay=N.
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

_patched = False
_api = None          # the marker API once patched
_next_iter_id = 1    # incremented under the GIL
_replay = 0          # DLBN_REPLAY: cached batches per loader, 0 = off
_replay_copy = True  # DLBN_REPLAY_COPY != "0": a fresh copy per step
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
    copy = environ.get("DLBN_REPLAY_COPY", "1").strip() != "0"
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
# Patching


def patch_dataloader_module(module, api=None, environ=None):
    """Wrap the DataLoader iterator protocol of a loaded dataloader module.

    `api` replaces the library's marker API (tests pass a recorder object
    with mark(kind, iter_id, arg) and config(iter_id, bytes) methods);
    `environ` replaces os.environ for the replay settings.
    """
    global _api, _patched, _replay, _replay_copy, _orig_next
    if _patched:
        return
    try:
        if environ is None:
            import os
            environ = os.environ
        _replay, _replay_copy = _replay_setting(environ)
        _api = api if api is not None else _load_marker_api()
        if _api is None and _replay:
            _api = _NullApi()
        if _api is None:
            return
        loader_cls = module.DataLoader
        base_iter_cls = module._BaseDataLoaderIter
        orig_iter = loader_cls.__dict__["__iter__"]
        orig_next = base_iter_cls.__dict__["__next__"]
    except Exception:
        return
    _orig_next = orig_next
    loader_cls.__iter__ = _make_iter_wrapper(orig_iter)
    base_iter_cls.__next__ = _make_next_wrapper(orig_next)
    _patched = True


def _new_iter_id():
    global _next_iter_id
    iter_id = _next_iter_id
    _next_iter_id += 1
    return iter_id


def _make_iter_wrapper(orig_iter):
    def __iter__(self):
        try:
            iter_id = _new_iter_id()
            epoch = self.__dict__.get("_dlbn_epochs", 0)
            self.__dict__["_dlbn_epochs"] = epoch + 1
            _emit(MARK_ITER_BEGIN, iter_id, epoch)
        except Exception:
            return orig_iter(self)
        if _replay:
            replaying = _replay_iterator(self, orig_iter, iter_id)
            if replaying is not None:
                return replaying
        it = orig_iter(self)
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
            iter_id = self.__dict__.get("_dlbn_iter_id")
            if iter_id is None:
                iter_id = _adopt_iterator(self)
            index = self.__dict__.get("_num_yielded", -1)
            _emit(MARK_FETCH_BEGIN, iter_id, index)
        except Exception:
            return orig_next(self)
        try:
            data = orig_next(self)
        except StopIteration:
            _emit(MARK_FETCH_STOP, iter_id, index)
            raise
        except BaseException:
            _emit(MARK_FETCH_STOP, iter_id, -1)
            raise
        _emit(MARK_FETCH_END, iter_id, index)
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
    """An iterator made without DataLoader.__iter__ (a subclass overriding
    it, or a direct _get_iterator()): announce it at its first fetch."""
    iter_id = _new_iter_id()
    it._dlbn_iter_id = iter_id
    _emit(MARK_ITER_BEGIN, iter_id, 0)
    _emit_config(iter_id, None, it)
    return iter_id


def _emit_config(iter_id, loader, it, replay=None):
    try:
        text = _config_text(loader, it)
        if replay is not None:
            text += ";replay=%d" % replay
        text = text.encode("utf-8", "replace")
        _api.config(iter_id, text)
    except Exception:
        pass


def _config_text(loader, it):
    """ "key=value;..." from the loader (when known) and its iterator."""
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
    if loader is not None:
        items.append(("loader", id(loader)))
    return ";".join("%s=%s" % (key, _config_value(value))
                    for key, value in items if value is not None)


def _config_value(value):
    if isinstance(value, bool):
        return "1" if value else "0"
    text = str(value)
    return text.replace(";", ",").replace("=", ":")


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
        iter_id = self._dlbn_iter_id
        index = self._num_yielded
        _emit(MARK_FETCH_BEGIN, iter_id, index)
        try:
            if index >= self._steps:
                raise StopIteration
            data = self._dlbn_state.batch(index)
        except StopIteration:
            _emit(MARK_FETCH_STOP, iter_id, index)
            raise
        except BaseException:
            _emit(MARK_FETCH_STOP, iter_id, -1)
            raise
        self._num_yielded = index + 1
        _emit(MARK_FETCH_END, iter_id, index)
        return data


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
    _emit_config(iter_id, loader, it, replay=_replay)
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
