"""dlbn Python bootstrap: Replay of what the loop iterates when that is a
wrapper iterable around a DataLoader.

Many pipelines put an iterable of their own between the DataLoader and the
loop: timm's PrefetchLoader, a generator __iter__ that takes each batch
from the loader, moves it to the device and normalises it.  The reference
Replay (DALI's LoaderEvaluator) caches what the loop iterates, so it
removes the wrapper's work with the loader's; a Replay that caches the
DataLoader's batches leaves that work in every replayed step (timm's, on
a CPU: a third of the replayed step).  Under DLBN_REPLAY=N the bootstrap
therefore replays the wrapper itself:

  - the first iter(wrapper) runs the wrapper's own iterator for N items
    before the loop's first fetch, unmarked (the DataLoader it iterates
    serves its own replay cache, cycled, without marks), keeps copies of
    what it yielded, and closes it;
  - every iter(wrapper), that one included, iterates the DataLoader
    inside it as the loop would (patched DataLoader.__iter__: ITER_BEGIN,
    CONFIG, FETCH marks, len(loader) replayed steps, dlbn-run --max-steps),
    and hands the loop cached item k mod N at the k-th fetch instead of the
    DataLoader's batch: the trace keeps the DataLoader's marks, so a
    Replay trace lines up step for step with the real one.

Which classes: timm's PrefetchLoader (KNOWN), those named in DLBN_WRAPPER
(dlbn-run --wrapper MODULE:QUALNAME, patched when MODULE is imported), and
one the replay run finds at run time - a generator __iter__ of a class
that fetched from a replayed DataLoader (_dlbn_patch's hand-off check) -
from its next iter() on; the epoch under way keeps its work (said on
stderr).  A wrapper that iterates no DataLoader, or several, or whose fill
raises, is left to run as it is (said on stderr; its error then reaches
the loop as in a real run).
"""

import threading

import _dlbn_common as _common
import _dlbn_marks as _marks
import _dlbn_patch as _patch
import _dlbn_replay as _replay

KNOWN = (("timm.data.loader", "PrefetchLoader"),)

_named = {}         # module name -> [qualname, ...] to patch when imported
_patched = set()    # modules handled
_local = threading.local()  # .filling: DataLoaders iterated inside a fill
_learned = set()    # code objects looked at (run-time finds)


def setup(environ, loaders):
    """Called by _dlbn_boot under DLBN_REPLAY, after _dlbn_loaders (which
    parses DLBN_WRAPPER; None if it could not be set up)."""
    _named.clear()
    for module, qualname in KNOWN:
        _named.setdefault(module, []).append(qualname)
    if loaders is not None:
        for module, qualname in loaders.parse_loader_names(environ.get("DLBN_WRAPPER", ""),
                                                           "DLBN_WRAPPER"):
            _named.setdefault(module, []).append(qualname)


def wanted():
    """The modules still to patch when imported."""
    return tuple(name for name in _named if name not in _patched)


def patch(name, module):
    """Patch the wrapper classes of one module sitecustomize saw executed."""
    if name in _patched:
        return
    _patched.add(name)
    for qualname in _named.get(name, ()):
        try:
            cls = module
            for part in qualname.split("."):
                cls = getattr(cls, part, None)
            if not isinstance(cls, type):
                if (name, qualname) not in KNOWN and not _common.in_child_process():
                    _common.warn("DLBN_WRAPPER: %s:%s is not a class; not replayed"
                                 % (name, qualname))
                continue
            _patch_class(cls, "%s:%s" % (name, qualname))
        except Exception:
            pass


def filling():
    """The list that collects the DataLoaders a wrapper's fill iterates on
    this thread, or None outside a fill."""
    return getattr(_local, "filling", None)


def learn(frame):
    """A replayed DataLoader was fetched from by the generator running in
    frame (an __iter__): replay its class from its next iter() on."""
    code = frame.f_code
    if code in _learned:
        return
    _learned.add(code)
    try:
        wrapper = frame.f_locals.get("self")
        cls = type(wrapper)
        orig = getattr(cls, "__iter__", None)
        if getattr(orig, "__code__", None) is not code or "_dlbn_wrapper" in cls.__dict__:
            return
        torch_module = _patch.torch_module
        if torch_module is not None and isinstance(wrapper, torch_module.DataLoader):
            return  # a DataLoader subclass's own __iter__: its batches are replayed
        label = "%s:%s" % (cls.__module__, cls.__qualname__)
        if _patch_class(cls, label) and not _common.in_child_process():
            _common.warn("DLBN_REPLAY: the loop iterates %s, a wrapper around the DataLoader: "
                         "what it yields is replayed from its next iter() on; this epoch keeps "
                         "its work in the replayed steps (dlbn-run --wrapper %s replays it "
                         "from the start)" % (label, label))
    except Exception:
        pass


def _patch_class(cls, label):
    orig_iter = cls.__dict__.get("__iter__")
    if orig_iter is None or not callable(orig_iter) or "_dlbn_wrapper" in cls.__dict__:
        return False
    cls._dlbn_wrapper = label

    def __iter__(self):
        it = None
        try:
            it = _replay_iter(self, orig_iter, label)
        except Exception:
            it = None
        return orig_iter(self) if it is None else it

    _common.copy_names(__iter__, orig_iter)
    cls.__iter__ = __iter__
    return True


class _Filled:
    """A wrapper object's replay: the DataLoader inside it and copies of the
    first items the wrapper yielded.  Lives in the wrapper's __dict__."""

    __slots__ = ("loader", "cache", "label")

    def __init__(self, loader, cache, label):
        self.loader = loader
        self.cache = cache
        self.label = label


def _replay_iter(wrapper, orig_iter, label):
    """The replay iterator of this iter(wrapper), or None to run the
    wrapper as it is."""
    d = wrapper.__dict__
    filled = d.get("_dlbn_wrapper_replay")
    if filled is False or _marks.api is None or _common.replay is None:
        return None
    if filled is None:
        filled = _fill(wrapper, orig_iter, label)
        d["_dlbn_wrapper_replay"] = filled
        if filled is False:
            return None
    loader = filled.loader
    loader.__dict__["_dlbn_wrapped_by"] = label  # CONFIG wrapper_replay=
    it = iter(loader)  # the loop's epoch of it: marks and its own replay
    if type(it) is not _replay.ReplayIterator:
        return None  # it loads for real (no len()): the wrapper runs on it
    return _WrapperReplayIterator(filled, it)


def _fill(wrapper, orig_iter, label):
    """N copies of what the wrapper yields, from its own iterator run
    before the loop's first fetch; False when it cannot be replayed."""
    _replay.prefill()
    seen = _local.filling = []
    cache, why = [], None
    try:
        it = iter(orig_iter(wrapper))
        try:
            while len(cache) < _replay.batches:
                try:
                    item = next(it)
                except StopIteration:
                    break
                cache.append(_replay.copy_batch(item))
                del item
        finally:
            close = getattr(it, "close", None)
            if close is not None:
                close()
            del it
    except Exception as exc:
        why = "its first items could not be taken (%s)" % type(exc).__name__
    finally:
        _local.filling = None
    loaders = []
    for loader in seen:
        if all(loader is not other for other in loaders):
            loaders.append(loader)
    if why is None and len(loaders) != 1:
        why = "it iterated %d DataLoaders, not one" % len(loaders)
    if why is None and not cache:
        why = "it yielded nothing"
    if why is None and not isinstance(loaders[0].__dict__.get("_dlbn_replay"),
                                      _replay.ReplayState):
        why = "its DataLoader is not replayed (no len())"
    if why is not None:
        if not _common.in_child_process():
            _common.warn("DLBN_REPLAY: %s is not replayed itself, %s: its work stays in the "
                         "replayed steps" % (label, why))
        return False
    return _Filled(loaders[0], cache, label)


class _WrapperReplayIterator:
    """What iter(wrapper) returns under replay: one cached item per fetch of
    the DataLoader's replay iterator (whose marks are the loop's fetches,
    and whose end is the epoch's)."""

    def __init__(self, filled, loader_iter):
        self._dlbn_filled = filled
        self._dlbn_loader_iter = loader_iter
        self._index = 0

    def __iter__(self):
        return self

    def __len__(self):
        return len(self._dlbn_loader_iter)

    def __next__(self):
        try:
            next(self._dlbn_loader_iter)
        except BaseException as exc:  # StopIteration, --max-steps: the loop's
            _common.drop_own_frames(exc)
            raise
        cache = self._dlbn_filled.cache
        cached = cache[self._index % len(cache)]
        self._index += 1
        return _replay.copy_batch(cached) if _replay.copy else cached
