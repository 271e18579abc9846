"""dlbn Python bootstrap, the loaders that are not torch's DataLoader.

The unit of analysis is the loop's fetch of its next batch, whatever
produces it.  _dlbn_patch marks torch's DataLoader (and torchdata's
StatefulDataLoader); this module marks the other loaders a PyTorch loop
iterates, with the same marks (ITER_BEGIN, CONFIG, FETCH_BEGIN/END/STOP),
so that the analyzer treats each like a DataLoader:

  nodes  torchdata.nodes.  Loader.__iter__ starts an epoch (ITER_BEGIN, the
         iterator's CONFIG); BaseNode.__next__ is a fetch when the loop calls
         it: not when torchdata.nodes' own code does (the Loader's iterator
         asking its root, a Prefetcher's thread asking its source), and not
         inside another fetch of the same thread (a user's node asking its
         source).  A BaseNode the loop iterates without a Loader starts an
         epoch at its first fetch and after each StopIteration.
  dali   DALI's PyTorch iterators (nvidia.dali.plugin.pytorch:
         DALIGenericIterator, DALIClassificationIterator, DALIRaggedIterator):
         their __next__, called by the loop (DALI's own first-batch prefetch
         in the constructor is not a fetch).  An epoch starts at the first
         fetch and after each StopIteration.
  named  DLBN_LOADER=MODULE:QUALNAME[,MODULE:QUALNAME...] (dlbn-run
         --loader): a class whose iterators yield batches (its __next__ when
         it has one, else what its __iter__ returns), or a function that
         returns an iterable (a generator function: a thread-fed prefetcher).
         MODULE is patched when it is imported; a class defined in the script
         itself is __main__:QUALNAME (caught as the class statement runs).
         A function defined in the script itself cannot be reached before
         the loop calls it: put it in a module.

CONFIG of each epoch: kind (nodes, dali, named), loader (id of the object),
loader_class, and what the kind tells: batch_size, num_workers (nodes'
ParallelMapper workers; DALI runs none: 0), prefetch_factor (nodes'
Prefetcher; DALI's prefetch_queue_depth), worker_method (nodes: thread or
process), threads (DALI's num_threads), device (DALI: cpu or gpu), cpus.

Replay (DLBN_REPLAY=N) serves N copies of the first batches, cycled, as for
a DataLoader: len(loader) batches an epoch where the loader has a length
(DALI's iterators), else without end (the loop's own bound, or dlbn-run
--max-steps, ends the run; said once on stderr).  DALI reuses its output
buffers, so cached batches are always copies.

The same rules as _dlbn_patch: dlbn's failures never raise into the program,
the program's exceptions pass through with the traceback they would have.
"""

import sys

import _dlbn_common as _common
import _dlbn_config as _config
import _dlbn_marks as _marks
import _dlbn_patch as _patch

KIND_NODES = "nodes"
KIND_DALI = "dali"
KIND_NAMED = "named"

NODES_MODULES = ("torchdata.nodes.base_node", "torchdata.nodes.loader", "torchdata.nodes.map")
DALI_MODULE = "nvidia.dali.plugin.pytorch"
DALI_ITERATORS = ("DALIGenericIterator", "DALIClassificationIterator", "DALIRaggedIterator")

_load_module = None  # _dlbn_boot.sibling_module (for _dlbn_threads)
_named = {}        # DLBN_LOADER: module name -> [qualname, ...] still to patch
_patched = set()   # modules handled
_local = None      # threading.local(): .open, a fetch of this thread is open


def setup(environ, load_module):
    """Called once by _dlbn_boot after the marker API is set up; load_module
    loads a module of the bootstrap by name."""
    global _load_module, _local
    _load_module = load_module
    import threading
    _local = threading.local()
    _named.clear()
    for module, qualname in parse_loader_names(environ.get("DLBN_LOADER", "")):
        _named.setdefault(module, []).append(qualname)
    if "__main__" in _named:
        _watch_main_classes()


def parse_loader_names(text, variable="DLBN_LOADER"):
    """[(module, qualname)] of DLBN_LOADER ("MODULE:QUALNAME,..."), or of
    another variable of that form; a bad item is said on stderr and left
    out."""
    items = []
    for item in text.replace(";", ",").split(","):
        item = item.strip()
        if not item:
            continue
        module, colon, qualname = item.partition(":")
        module, qualname = module.strip(), qualname.strip()
        ok = colon and module and qualname and all(
            part.isidentifier() for part in module.split(".") + qualname.split("."))
        if not ok:
            _common.warn("%s: %r is not MODULE:QUALNAME; left out" % (variable, item))
            continue
        items.append((module, qualname))
    return items


# ---------------------------------------------------------------------------
# Settings (dlbn-run --set, DLBN_SET): these loaders' own knobs, given to
# the constructors that take them as their objects are made.  Selectors:
# none or "train" apply (these loaders have no sampler to tell an
# evaluation loader by, nor a creation count shared with the DataLoaders);
# "eval" and loader numbers are said once on stderr and not applied.  A
# mapper without workers (nodes' Mapper is a ParallelMapper of 0 workers,
# mapping inline) keeps none.

# (module, class) -> the DLBN_SET keys its __init__ takes
SETTABLE = {
    ("torchdata.nodes.map", "ParallelMapper"): ("num_workers",),
    ("torchdata.nodes.prefetch", "Prefetcher"): ("prefetch_factor",),
    ("torchdata.nodes.batch", "Batcher"): ("batch_size",),
    ("nvidia.dali.pipeline", "Pipeline"): ("num_threads", "prefetch_queue_depth", "batch_size"),
}
_said = set()


def _wanted_settings(keys):
    """{key: value} of DLBN_SET for these keys (later items win)."""
    out = {}
    for selector, key, value in _setting_items():
        if key not in keys:
            continue
        if selector not in (None, "train"):
            if (key, selector) not in _said and not _common.in_child_process():
                _said.add((key, selector))
                _common.warn("DLBN_SET %s:%s=%s not applied: selectors other than train "
                             "apply to DataLoaders only" % (selector, key, value))
            continue
        out[key] = value
    return out


def _setting_items():
    settings = _common.settings
    return settings.items if settings is not None else ()


def _settings_modules():
    """The modules whose classes DLBN_SET changes (sitecustomize's hook)."""
    keys = set(key for _, key, _ in _setting_items())
    return tuple(module for (module, _), takes in SETTABLE.items() if keys & set(takes))


def _patch_settings(module):
    for (name, cls_name), keys in SETTABLE.items():
        if name != module.__name__:
            continue
        wanted = _wanted_settings(keys)
        cls = getattr(module, cls_name, None)
        orig_init = cls.__dict__.get("__init__") if isinstance(cls, type) else None
        if not wanted or orig_init is None:
            continue
        try:
            import inspect
            signature = inspect.signature(orig_init)
            if any(key not in signature.parameters for key in wanted):
                raise ValueError("no such argument")
        except Exception:
            if not _common.in_child_process():
                _common.warn("DLBN_SET %s not applied: %s.__init__ does not take it"
                             % (",".join(wanted), cls_name))
            continue
        cls.__init__ = _init_with_settings(orig_init, signature, wanted)


def _init_with_settings(orig_init, signature, wanted):
    """__init__ called with the wanted arguments in place of the caller's;
    the object keeps what was set (set=, set_from= in its loader's CONFIG)."""

    def __init__(self, *args, **kwargs):
        own = None
        try:
            bound = signature.bind(self, *args, **kwargs)
            own = {key: bound.arguments.get(key, signature.parameters[key].default)
                   for key in wanted}
            if own.get("num_workers", 1) != 0:  # nodes' Mapper: inline, stays so
                bound.arguments.update(wanted)
                args, kwargs = bound.args[1:], bound.kwargs
            else:
                own = None
        except Exception:
            own = None  # arguments the signature does not take: the call's error
        try:
            orig_init(self, *args, **kwargs)
        except BaseException as exc:
            _common.drop_own_frames(exc)
            raise
        if own is not None:
            try:
                self._dlbn_set = ",".join("%s=%s" % kv for kv in sorted(wanted.items()))
                self._dlbn_set_from = ",".join(
                    "%s=%s" % (key, own[key]) for key in sorted(wanted)
                    if own[key] != wanted[key])
            except Exception:
                pass

    _common.copy_names(__init__, orig_init)
    return __init__


def fetch_open():
    """A fetch of one of these loaders is open on this thread: a DataLoader
    it iterates inside is part of that fetch, not a fetch of the loop."""
    return getattr(_local, "open", False)


def wanted():
    """The modules still worth being handed (sitecustomize's hook): the
    named ones, and nodes' and DALI's where those are installed."""
    names = [name for name in _named if name != "__main__" and name not in _patched]
    for package, modules in (("torchdata.nodes", NODES_MODULES + _settings_modules()),
                             ("nvidia.dali", (DALI_MODULE,) + _settings_modules())):
        if _installed(package):
            names.extend(name for name in modules
                         if name.startswith(package) and name not in _patched
                         and name not in names)
    return tuple(names)


_installed_cache = {}


def _installed(dotted):
    """Whether package `dotted` can be imported, found without importing
    it (nor its parents: "nvidia" is a namespace other wheels share)."""
    found = _installed_cache.get(dotted)
    if found is None:
        found = False
        try:
            import _frozen_importlib_external
            path = None
            for part in dotted.split("."):
                spec = _frozen_importlib_external.PathFinder.find_spec(part, path)
                if spec is None:
                    break
                path = spec.submodule_search_locations
            else:
                found = True
        except Exception:
            found = False
        _installed_cache[dotted] = found
    return found


def patch(name, module):
    """Patch one module sitecustomize saw executed (or found loaded)."""
    if name in _patched or name == "__main__":
        return
    _patched.add(name)
    try:
        if any(name == settable for settable, _ in SETTABLE):
            _patch_settings(module)
        if name == "torchdata.nodes.base_node":
            _patch_nodes_base(module)
        elif name == "torchdata.nodes.loader":
            _patch_nodes_loader(module)
        elif name == "torchdata.nodes.map":
            _patch_nodes_map(module)
        elif name == DALI_MODULE:
            _patch_dali(module)
        for qualname in _named.get(name, ()):
            _patch_named(module, qualname)
    except Exception:
        pass


# ---------------------------------------------------------------------------
# The fetch: marks around the real __next__ (or a cached batch under replay)


class _Epoch:
    """One epoch of one loader: its iter_id and the batches it yielded."""

    __slots__ = ("iter_id", "index", "ended", "replay", "kind", "threads_before")

    def __init__(self, iter_id, kind=None):
        self.iter_id = iter_id
        self.index = 0
        self.ended = False
        self.replay = None  # _Replay of the loader, under DLBN_REPLAY
        self.kind = kind
        self.threads_before = None  # thread ids before its start (_watch_threads)


def _begin_epoch(loader, kind, config=True):
    """ITER_BEGIN (and, with config, the CONFIG) of a new epoch of loader;
    returns its _Epoch.  A loader whose iter() starts its workers marks
    the epoch before that and its CONFIG after (_epoch_config), as the
    DataLoader's does: the start-up is the first fetch's wait."""
    iter_id = _marks.new_iter_id()
    count = getattr(loader, "_dlbn_epochs", 0)
    try:
        loader._dlbn_epochs = count + 1
    except Exception:
        pass
    _marks.emit(_marks.MARK_ITER_BEGIN, iter_id, count)
    settings = _common.settings
    if settings is not None and settings.max_steps:
        settings.iter_begins(loader, iter_id, *_depth(loader, kind))
    epoch = _Epoch(iter_id, kind)
    threads = _threads_module()
    if threads is not None:
        epoch.threads_before = threads.thread_ids()
    if _common.replay is not None:
        epoch.replay = _replay_of(loader)
    if config:
        _epoch_config(epoch, loader, kind)
    return epoch


def _epoch_config(epoch, loader, kind):
    try:
        text = config_text(kind, loader)
        settings, replay = _common.settings, _common.replay
        if settings is not None:
            for key, value in settings.config_items(None, epoch.iter_id):
                text += ";%s=%s" % (key, value)
        if replay is not None:
            text += ";replay=%d" % replay.batches
        _marks.api.config(epoch.iter_id, text.encode("utf-8", "replace"))
    except Exception:
        pass


def _fetch(epoch, call, arg):
    """One marked fetch: call(arg) is the real __next__ (or the replay's).
    Exceptions pass through; the outermost wrapper frame drops dlbn's
    frames from them."""
    iter_id, index = epoch.iter_id, epoch.index
    settings = _common.settings
    stop = settings.due(iter_id, index) if settings is not None else None
    if stop is not None:
        raise stop
    before = None
    if index < WATCH_FETCHES and epoch.threads_before is not None:
        # the first fetch: since the epoch began (its iter() starts
        # threads too); later ones: since they began, leaving out what the
        # loop's own step started
        before = epoch.threads_before if index == 0 else _thread_ids()
    _marks.emit(_marks.MARK_FETCH_BEGIN, iter_id, index)
    was_open, _local.open = getattr(_local, "open", False), True
    try:
        data = call(arg)
    except StopIteration:
        epoch.ended = True
        _marks.emit(_marks.MARK_FETCH_STOP, iter_id, index)
        raise
    except BaseException as exc:
        _marks.emit(_marks.MARK_FETCH_STOP, iter_id, -1)
        _marks.fetch_error(iter_id, exc)
        raise
    finally:
        _local.open = was_open
    epoch.index = index + 1
    _marks.emit(_marks.MARK_FETCH_END, iter_id, index)
    if settings is not None:
        settings.count(iter_id)
    if before is not None:
        _watch_threads(epoch, before)
    return data


# The threads an epoch's first fetches start are the loader's (its workers,
# prefetcher, producer): sampled by _dlbn_threads.
WATCH_FETCHES = 2


def _threads_module():
    """_dlbn_threads, when the loaders' threads are sampled here (the
    profile on, in the training process), else None."""
    profile = _patch.profile
    if profile is None or _common.in_child_process() or not profile.sampling_threads():
        return None
    try:
        return _load_module("_dlbn_threads")
    except Exception:
        return None


def _thread_ids():
    threads = _threads_module()
    return threads.thread_ids() if threads is not None else None


def _watch_threads(epoch, before):
    try:
        threads = _threads_module()
        if threads is not None:
            threads.watch_new(_patch.profile, epoch.iter_id, before,
                              native=epoch.kind == KIND_DALI)
    except Exception:
        pass


def _caller_module(depth):
    try:
        return sys._getframe(depth).f_globals.get("__name__") or ""
    except Exception:
        return ""


def _depth(loader, kind):
    """(workers, prefetch) for --max-steps' warm-up (prefetch depth + 1)."""
    try:
        info = _describe(kind, loader)
        return int(info.get("num_workers") or 0), int(info.get("prefetch_factor") or 0)
    except Exception:
        return 0, 0


# ---------------------------------------------------------------------------
# Replay (DLBN_REPLAY): N copies of the first batches, cycled


class _Replay:
    """One loader's replay: filled from the real iterator at the first
    fetch, then served.  Lives on the loader object.

    The fill takes the first N batches (copies), then reads the rest of
    that epoch, as DALI's LoaderEvaluator caches a whole epoch before the
    loop: a loader without len() thus tells its epoch length, and the
    loader's own machinery (nodes' mappers and prefetch thread, DALI's
    executor, a producer thread) ends the epoch with nothing queued, so
    none of its work overlaps the replayed steps.  A loader whose epoch
    is not over after DRAIN_LIMIT_S is left where it is: its epochs then
    have its len(), or no end (said once on stderr).  Then it waits, up to
    QUIET_LIMIT_S, until the process stops using CPU (work the loader had
    already queued, e.g. DALI's prefetched runs past the epoch's end)."""

    DRAIN_LIMIT_S = 60.0
    QUIET_LIMIT_S = 2.0

    def __init__(self, loader):
        self.loader = loader
        self.cache = None
        self.replay = _common.replay  # the _dlbn_replay module
        try:
            self.steps = len(loader)  # batches per epoch, None: no length
        except Exception:
            self.steps = None

    def fill(self, real_next):
        import time
        replay = self.replay
        cache, count = [], 0
        deadline = time.monotonic() + self.DRAIN_LIMIT_S
        try:
            while True:
                try:
                    batch = real_next()
                except StopIteration:
                    if self.steps is None:
                        self.steps = count
                    break
                count += 1
                if len(cache) < replay.batches:
                    cache.append(replay.copy_batch(batch))
                del batch
                if len(cache) >= replay.batches and time.monotonic() > deadline:
                    break
        finally:
            self.cache = cache
        if self.steps is None:
            _say_endless(self.loader)
        _wait_quiet(self.QUIET_LIMIT_S)

    def batch(self, epoch, real_next):
        if self.cache is None:
            self.fill(real_next)
        if not self.cache or (self.steps is not None and epoch.index >= self.steps):
            raise StopIteration
        cached = self.cache[epoch.index % len(self.cache)]
        replay = self.replay
        return replay.copy_batch(cached) if replay.copy else cached


def _wait_quiet(limit_s):
    """Sleep until the process used under a fifth of a CPU over 20 ms (its
    loop is here, sleeping: what runs is the loader's queued work), or
    limit_s passed."""
    import time
    end = time.monotonic() + limit_s
    while time.monotonic() < end:
        cpu, wall = time.process_time(), time.monotonic()
        time.sleep(0.02)
        if time.process_time() - cpu < 0.2 * (time.monotonic() - wall):
            return


_endless_said = []


def _say_endless(loader):
    if _endless_said or _common.in_child_process():
        return
    _endless_said.append(True)
    _common.warn("DLBN_REPLAY: %s has no len() and its first epoch did not end within "
                 "%d s: the replayed batches do not end an epoch; the loop's own bound "
                 "or --max-steps ends the run"
                 % (type(loader).__name__, _Replay.DRAIN_LIMIT_S))


def _replay_of(loader):
    """The loader's _Replay, made at its first epoch."""
    replay = getattr(loader, "_dlbn_replay_state", None)
    if replay is None:
        replay = _Replay(loader)
        try:
            loader._dlbn_replay_state = replay
        except Exception:
            pass
    return replay


def _replay_filled(loader):
    """The loader's _Replay once its cache is filled, else None: from then
    on no epoch starts on the real loader (no reset, no worker start), as a
    replayed DataLoader makes no real iterator after its first epoch."""
    if _common.replay is None:
        return None
    replay = getattr(loader, "_dlbn_replay_state", None)
    return replay if replay is not None and replay.cache is not None else None


# ---------------------------------------------------------------------------
# Iterator objects (DALI's iterators, a bare BaseNode, a named iterator
# class): their own __next__ wrapped, the epoch kept on the object.


def _object_next_wrapper(orig_next, kind, internal):
    """__next__ for iterator classes whose objects live across epochs.
    internal: module-name prefix of the library's own callers (their
    calls are not the loop's fetches)."""

    def __next__(self):
        try:
            epoch = _loop_epoch(self, kind, internal)
        except Exception:
            epoch = None
        try:
            if epoch is None:
                return orig_next(self)
            if epoch.replay is not None:
                return _fetch(epoch, _replayed, (epoch, self, orig_next))
            return _fetch(epoch, orig_next, self)
        except BaseException as exc:  # the program's: without dlbn's frames
            _common.drop_own_frames(exc)
            raise

    _common.copy_names(__next__, orig_next)
    return __next__


def _loop_epoch(obj, kind, internal):
    """The epoch a fetch from obj belongs to when the loop makes it, else
    None: the recorder is off, a fetch of this thread is open already, or
    the caller (frame 3: the wrapper's) is the library's own code.  A nodes
    Loader's iterator carries the epoch its iter() began; any other object
    begins one at its first fetch and after each StopIteration."""
    if _marks.api is None or getattr(_local, "open", False):
        return None
    if internal and _caller_module(3).startswith(internal):
        return None
    d = obj.__dict__
    epoch = d.get("_dlbn_loader_epoch")
    if epoch is not None:
        return epoch
    epoch = d.get("_dlbn_epoch")
    if epoch is None or epoch.ended:
        epoch = d["_dlbn_epoch"] = _begin_epoch(obj, kind)
    return epoch


def _replayed(args):
    epoch, obj, orig_next = args
    return epoch.replay.batch(epoch, lambda: orig_next(obj))


# ---------------------------------------------------------------------------
# Iterables (nodes' Loader, a named iterable class or function): what their
# __iter__ returns is marked.


class _MarkedIterator:
    """The iterator of a named iterable (or the iterable a named function
    returned), its fetches marked.  Attributes, len(), send(), throw() and
    close() reach the real iterator."""

    def __init__(self, inner, epoch):
        self._dlbn_inner = inner
        self._dlbn_epoch = epoch

    def __iter__(self):
        return self

    def __next__(self):
        epoch = self._dlbn_epoch
        try:
            if getattr(_local, "open", False):  # inside another loader's fetch
                return next(self._dlbn_inner)
            if epoch.replay is not None:
                return _fetch(epoch, _replayed_inner, self)
            return _fetch(epoch, _next_of, self._dlbn_inner)
        except BaseException as exc:  # the program's: without dlbn's frames
            _common.drop_own_frames(exc)
            raise

    def __len__(self):
        return len(self._dlbn_inner)

    def __getattr__(self, name):
        return getattr(self.__dict__["_dlbn_inner"], name)


def _next_of(inner):
    return next(inner)


def _replayed_inner(marked):
    epoch = marked._dlbn_epoch
    return epoch.replay.batch(epoch, lambda: next(marked._dlbn_inner))


def _marked(loader, start, kind):
    """An epoch of loader: start() makes its iterable (not called once a
    replay's cache is filled), iterated with its fetches marked.  Without
    the recorder the iterable itself.  The caller, the outermost wrapper
    frame, takes dlbn's frames off the program's exceptions."""
    if _marks.api is None:
        return start()
    try:
        epoch = _begin_epoch(loader, kind)
    except Exception:
        return iter(start())
    inner = iter(start() if _replay_filled(loader) is None else ())
    return _MarkedIterator(inner, epoch)


def _iter_wrapper(orig_iter, kind):
    def __iter__(self):
        try:
            return _marked(self, lambda: orig_iter(self), kind)
        except BaseException as exc:
            _common.drop_own_frames(exc)
            raise

    _common.copy_names(__iter__, orig_iter)
    return __iter__


def _function_wrapper(func, label):
    """A named function: each call's iterable is an epoch of one loader,
    the function (its id and label in CONFIG)."""
    import functools

    @functools.wraps(func)
    def call(*args, **kwargs):
        try:
            return _marked(call, lambda: func(*args, **kwargs), KIND_NAMED)
        except BaseException as exc:
            _common.drop_own_frames(exc)
            raise

    call._dlbn_named = label
    return call


# ---------------------------------------------------------------------------
# torchdata.nodes


def _patch_nodes_base(module):
    base = getattr(module, "BaseNode", None)
    orig_next = base.__dict__.get("__next__") if isinstance(base, type) else None
    if orig_next is None:
        _refused("torchdata.nodes", "BaseNode.__next__ missing")
        return
    # A fetch of the Loader's iterator (tagged by the wrapped Loader.__iter__)
    # or of a node the loop iterates itself; has_next() reads ahead from
    # inside the Loader (torchdata.nodes' own call: not a fetch).
    base.__next__ = _object_next_wrapper(orig_next, KIND_NODES, "torchdata.nodes")


def _patch_nodes_loader(module):
    loader_cls = getattr(module, "Loader", None)
    orig_iter = loader_cls.__dict__.get("__iter__") if isinstance(loader_cls, type) else None
    if orig_iter is None:
        _refused("torchdata.nodes", "Loader.__iter__ missing")
        return

    def __iter__(self):
        epoch = None
        try:
            if _marks.api is not None:
                epoch = _begin_epoch(self, KIND_NODES, config=False)
            it = self.__dict__.get("_it") if _replay_filled(self) else None
        except Exception:
            it = None
        if it is None:
            try:
                it = orig_iter(self)  # resets the graph: workers start here
            except BaseException as exc:
                _common.drop_own_frames(exc)
                raise
        if epoch is not None:
            try:
                _epoch_config(epoch, self, KIND_NODES)
                it.__dict__["_dlbn_loader_epoch"] = epoch
            except Exception:
                pass
        return it

    _common.copy_names(__iter__, orig_iter)
    loader_cls.__iter__ = __iter__


def _nodes_graph(root):
    """The nodes of a torchdata.nodes graph from its root (sources followed
    through .source / .root / ._source, a few dozen at most)."""
    seen, todo, out = set(), [root], []
    while todo and len(out) < 64:
        node = todo.pop()
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))
        out.append(node)
        d = getattr(node, "__dict__", {})
        for attr in ("root", "source", "_source", "_it"):
            child = d.get(attr)
            if child is not None and hasattr(child, "__next__"):
                todo.append(child)
        for child in d.get("sources", None) or ():
            if hasattr(child, "__next__"):
                todo.append(child)
    return out


def _describe_nodes(loader):
    """What the graph tells: its widest mapper's workers and method, the
    first Batcher's batch size and Prefetcher's depth."""
    root = getattr(loader, "root", loader)
    workers, method, prefetch, batch = 0, None, None, None
    info_set = {}
    for node in _nodes_graph(root):
        d = getattr(node, "__dict__", None)
        if not isinstance(d, dict):
            continue
        name = type(node).__name__
        count = d.get("num_workers")
        if isinstance(count, int) and count > workers:
            workers, method = count, d.get("method")
        if "prefetch_factor" in d and prefetch is None:
            prefetch = d.get("prefetch_factor")
        if "batch_size" in d and batch is None and "Batch" in name:
            batch = d.get("batch_size")
        _add_set(info_set, d)
    info = {"num_workers": workers, "prefetch_factor": prefetch, "batch_size": batch}
    info.update(info_set)
    if workers and method is not None:
        info["worker_method"] = method
    info["workers"] = _nodes_worker_pids(root) if method == "process" else []
    return info


def _nodes_worker_pids(root):
    """Pids of a ParallelMapper's worker processes (method="process")."""
    pids = []
    for node in _nodes_graph(root):
        it = getattr(node, "__dict__", {}).get("_it")
        for holder in (node, it):
            procs = getattr(holder, "_workers", None) if holder is not None else None
            for proc in procs or ():
                pid = getattr(proc, "pid", None)
                if isinstance(pid, int) and pid > 0 and pid not in pids:
                    pids.append(pid)
    return pids[:64]


def _patch_nodes_map(module):
    """ParallelMapper's worker loop (_apply_udf, the target of its worker
    processes and threads) profiles the map function in worker processes
    (_dlbn_profile).  It is replaced under its own name in both modules
    that hold it: a spawned worker receives its target by name, and finds
    the original there when dlbn is not in that process."""
    orig = module.__dict__.get("_apply_udf")
    home = sys.modules.get(getattr(orig, "__module__", None) or "")
    if not callable(orig) or getattr(home, "_apply_udf", None) is not orig:
        return

    def _apply_udf(worker_id, in_q, out_q, udf, stop_event):
        try:
            profile = _patch.profile
            if profile is not None and _common.in_child_process():
                udf = profile.map_function(udf)  # a thread worker: not profiled
        except Exception:
            pass
        return orig(worker_id, in_q, out_q, udf, stop_event)

    _common.copy_names(_apply_udf, orig)
    home._apply_udf = _apply_udf
    module._apply_udf = _apply_udf


# ---------------------------------------------------------------------------
# DALI


def _patch_dali(module):
    done = 0
    for name in DALI_ITERATORS:
        cls = getattr(module, name, None)
        orig_next = cls.__dict__.get("__next__") if isinstance(cls, type) else None
        if orig_next is None:
            continue  # a subclass that inherits the wrapped __next__
        cls.__next__ = _object_next_wrapper(orig_next, KIND_DALI, "nvidia.dali")
        cls.__iter__ = _dali_iter_wrapper(cls.__iter__)
        done += 1
    if not done:
        _refused("DALI", "no iterator class with its own __next__")


def _dali_iter_wrapper(orig_iter):
    """iter() of a DALI iterator resets its pipeline for the next epoch;
    not once a replay's cache is filled (the pipeline stays idle)."""

    def __iter__(self):
        if _replay_filled(self) is not None:
            return self
        try:
            return orig_iter(self)
        except BaseException as exc:
            _common.drop_own_frames(exc)
            raise

    _common.copy_names(__iter__, orig_iter)
    return __iter__


def _describe_dali(it):
    info = {"num_workers": 0}
    info["batch_size"] = getattr(it, "batch_size", None)
    pipes = getattr(it, "_pipes", None) or ()
    pipe = pipes[0] if pipes else None
    if pipe is not None:
        info["threads"] = _int_or_none(getattr(pipe, "num_threads", None))
        depth = getattr(pipe, "prefetch_queue_depth", None)
        if isinstance(depth, dict):
            depth = depth.get("cpu_size")
        info["prefetch_factor"] = _int_or_none(depth)
        device_id = getattr(pipe, "device_id", None)
        info["device"] = "cpu" if device_id is None else "gpu"
        info["pipelines"] = len(pipes)
        _add_set(info, getattr(pipe, "__dict__", {}))
    return info


def _add_set(info, d):
    """What --set changed on an object (set=, set_from=), added to info."""
    for key in ("set", "set_from"):
        text = d.get("_dlbn_" + key)
        if text:
            info[key] = info[key] + "," + text if info.get(key) else text


def _int_or_none(value):
    try:
        return int(value)
    except Exception:
        return None


# ---------------------------------------------------------------------------
# Named loaders (DLBN_LOADER)


def _patch_named(module, qualname):
    owner, _, name = qualname.rpartition(".")
    holder = module
    for part in owner.split(".") if owner else ():
        holder = getattr(holder, part, None)
    target = getattr(holder, name, None) if holder is not None else None
    if target is None:
        _refused_named(module.__name__, qualname, "not found")
        return
    if isinstance(target, type):
        _wrap_named_class(target, "%s:%s" % (module.__name__, qualname))
    elif callable(target):
        setattr(holder, name, _function_wrapper(target, "%s:%s" % (module.__name__, qualname)))
    else:
        _refused_named(module.__name__, qualname, "neither a class nor a function")


def _wrap_named_class(cls, label):
    if "_dlbn_named" in cls.__dict__:
        return
    cls._dlbn_named = label
    orig_next = _own_in_mro(cls, "__next__")
    if orig_next is not None:
        cls.__next__ = _object_next_wrapper(orig_next, KIND_NAMED, None)
        return
    orig_iter = _own_in_mro(cls, "__iter__")
    if orig_iter is None:
        _refused_named(label, "", "has neither __next__ nor __iter__")
        return
    cls.__iter__ = _iter_wrapper(orig_iter, KIND_NAMED)


def _own_in_mro(cls, name):
    import types
    for klass in cls.__mro__:
        value = klass.__dict__.get(name)
        if isinstance(value, types.FunctionType):
            return value
        if value is not None:
            return None
    return None


def _watch_main_classes():
    """A class of the script itself (__main__:QUALNAME): wrapped as its
    class statement completes (builtins.__build_class__)."""
    import builtins
    wanted_names = set(_named.get("__main__", ()))
    orig_build = builtins.__build_class__

    def __build_class__(func, name, *args, **kwargs):
        cls = orig_build(func, name, *args, **kwargs)
        try:
            if (name in wanted_names and isinstance(cls, type)
                    and getattr(cls, "__module__", None) == "__main__"
                    and cls.__qualname__ in wanted_names):
                _wrap_named_class(cls, "__main__:%s" % cls.__qualname__)
        except Exception:
            pass
        return cls

    builtins.__build_class__ = __build_class__


def _refused_named(module, qualname, why):
    label = "%s:%s" % (module, qualname) if qualname else module
    if not _common.in_child_process():
        _common.warn("DLBN_LOADER: %s %s; it is not marked" % (label, why))


def _refused(library, why):
    _marks.note("loaders=incompatible;library=%s;reason=%s"
                % (library, _common.note_text(why)))
    if not (_common.in_child_process() or _common.quiet()):
        _common.warn("%s differs from what the bootstrap knows (%s): its batches are not "
                     "marked" % (library, why))


# ---------------------------------------------------------------------------
# CONFIG


def _describe(kind, loader):
    if kind == KIND_NODES:
        return _describe_nodes(loader)
    if kind == KIND_DALI:
        return _describe_dali(loader)
    info = {}
    for key in ("batch_size", "num_workers", "prefetch_factor"):
        value = getattr(loader, key, None)
        if isinstance(value, int) and not isinstance(value, bool):
            info[key] = value
    return info


def config_text(kind, loader):
    """The CONFIG text of an epoch of loader (str, under the 500-byte cap)."""
    info = _describe(kind, loader)
    items = [("kind", kind)]
    for key in ("num_workers", "batch_size", "prefetch_factor", "worker_method",
                "threads", "device", "pipelines"):
        if info.get(key) is not None:
            items.append((key, info[key]))
    items.extend((k, v) for k, v in _config.cpu_items() if v is not None)
    items.append(("loader", id(loader)))
    label = getattr(loader, "_dlbn_named", None)  # a named class's or function's
    items.append(("loader_class", label or type(loader).__name__))
    text = ";".join("%s=%s" % (key, _common.config_value(value)) for key, value in items)
    for key in ("set", "set_from"):  # KEY=VALUE lists, kept as they are
        if info.get(key):
            text += ";%s=%s" % (key, info[key])
    pids = info.get("workers") or ()
    if pids:
        text += ";workers=" + ",".join(str(pid) for pid in pids)
        while len(text) >= _config.CONFIG_MAX and "," in text.rsplit(";workers=", 1)[1]:
            text = text.rsplit(",", 1)[0]
    return text
