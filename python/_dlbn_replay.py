"""dlbn Python bootstrap: Replay (docs/DESIGN.md, "Replay and ground truth";
`dlbn-run --replay N`).

With DLBN_REPLAY=N (N >= 1) every DataLoader serves N cached batches, cycled,
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

_dlbn_boot loads this module only when DLBN_REPLAY asks for replay; while
it is on, _dlbn_common.replay is this module (None again when torch's
DataLoader is left alone: the run then loads its data).  _dlbn_patch's
wrappers call made() (DataLoader.__init__), prefill() and iterator()
(__iter__); _dlbn_wrappers replays a wrapper iterable with unmarked_epoch(),
ReplayState and copy_batch(); _dlbn_loaders the other loaders with
copy_batch().
"""

import _dlbn_common as _common
import _dlbn_config as _config
import _dlbn_marks as _marks
import _dlbn_patch as _patch

batches = 0      # DLBN_REPLAY: cached batches per loader
copy = False     # DLBN_REPLAY_COPY=1: a fresh copy per step


def setup(environ):
    """Read DLBN_REPLAY / DLBN_REPLAY_COPY; True when replay is on.  A bad
    value switches replay off with one line on stderr (never raises)."""
    global batches, copy
    text = environ.get("DLBN_REPLAY", "").strip()
    copy = environ.get("DLBN_REPLAY_COPY", "0").strip() not in ("", "0")
    batches = 0
    if not text or text == "0":
        return False
    try:
        batches = int(text)
    except ValueError:
        batches = -1
    if batches < 1:
        _common.warn("DLBN_REPLAY=%r is not a positive batch count; replay off" % text)
        batches = 0
    return batches > 0


_loaders_made = None  # weakref.WeakSet: the DataLoaders made so far
_prefilled = False


def made(loader):
    """At the end of DataLoader.__init__: one more loader to cache before
    the loop (prefill)."""
    global _loaders_made
    if _loaders_made is None:
        import weakref
        _loaders_made = weakref.WeakSet()
    _loaders_made.add(loader)


def prefill():
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
    global _prefilled
    if _prefilled or not _loaders_made:
        return
    _prefilled = True
    for loader in list(_loaders_made):
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
            state = ReplayState(orig_iter(loader))
            state.fill()
        except Exception as exc:
            _common.warn("DLBN_REPLAY: a DataLoader not iterated yet could not be cached "
                         "before the loop (%s); it fills its cache at its first iter()"
                         % type(exc).__name__)
            continue
        loader.__dict__["_dlbn_replay"] = state


class ReplayState:
    """One DataLoader's replay: the real iterator until the cache is
    filled, then the cached batches.  Lives in the loader's __dict__."""

    def __init__(self, real_iter):
        self.real_iter = real_iter
        self.cache = None
        self.pin_memory = getattr(real_iter, "_pin_memory", None)

    def fill(self):
        """Take up to `batches` batches from the real iterator, then let it go.
        Exceptions of the real loader pass through (as in a real run)."""
        cache = []
        real_iter, self.real_iter = self.real_iter, None
        if real_iter is None:  # an earlier fill raised: nothing left
            self.cache = cache
            return
        try:
            while len(cache) < batches:
                try:
                    batch = _patch.orig_next(real_iter)
                except StopIteration:
                    break
                cache.append(copy_batch(batch))
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
        return copy_batch(cached) if copy else cached


class ReplayIterator:
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
        handoff, settings = _patch.handoff, _common.settings
        if handoff is not None:
            handoff.disarm()
        iter_id = self._dlbn_iter_id
        index = self._num_yielded
        stop = settings.due(iter_id, index) if settings is not None else None
        if stop is not None:  # dlbn-run --max-steps: the bounded run ends
            raise stop
        _marks.emit(_marks.MARK_FETCH_BEGIN, iter_id, index)
        try:
            if index >= self._steps:
                raise StopIteration
            data = self._dlbn_state.batch(index)
        except StopIteration as exc:
            _marks.emit(_marks.MARK_FETCH_STOP, iter_id, index)
            _common.drop_own_frames(exc)
            raise
        except BaseException as exc:
            _marks.emit(_marks.MARK_FETCH_STOP, iter_id, -1)
            _common.drop_own_frames(exc)
            raise
        self._num_yielded = index + 1
        _marks.emit(_marks.MARK_FETCH_END, iter_id, index)
        if settings is not None:
            settings.count(iter_id)
        if handoff is not None:  # the replay run's wrapper still works on it
            _patch.arm_handoff(iter_id, index)
        return data


def unmarked_epoch(loader, orig_iter):
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
        state = ReplayState(orig_iter(loader))
        loader.__dict__["_dlbn_replay"] = state
    return _cached_epoch(state, steps)


def _cached_epoch(state, steps):
    if state.cache is None:
        state.fill()
    for index in range(steps if state.cache else 0):
        yield state.batch(index)


def iterator(loader, orig_iter, iter_id):
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
            _common.warn("DLBN_REPLAY: this DataLoader has no len() (an IterableDataset "
                         "without __len__): no epoch length to replay, it loads normally")
        return None
    if state is None:
        state = ReplayState(orig_iter(loader))
        loader.__dict__["_dlbn_replay"] = state
    it = ReplayIterator(state, iter_id, steps, state.pin_memory)
    # The real iterator, while it lives (first epoch), names the workers.
    real_iter = state.real_iter
    _config.emit_config(iter_id, loader, it if real_iter is None else real_iter, replay=batches)
    return it


def copy_batch(obj):
    """A copy of a collated batch that shares no mutable state with obj:
    tensors cloned (pinned ones stay pinned), containers rebuilt, anything
    else deep-copied when it can be (else shared: immutable or opaque)."""
    import torch
    if isinstance(obj, torch.Tensor):
        return _clone_tensor(obj)
    if isinstance(obj, (str, bytes, int, float, bool, type(None))):
        return obj
    if isinstance(obj, tuple):
        items = [copy_batch(item) for item in obj]
        if hasattr(obj, "_fields"):  # namedtuple
            try:
                return type(obj)(*items)
            except Exception:
                pass
        return tuple(items)
    if isinstance(obj, list):
        return [copy_batch(item) for item in obj]
    if isinstance(obj, dict):
        copied = {key: copy_batch(value) for key, value in obj.items()}
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

