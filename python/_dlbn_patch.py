"""dlbn Python bootstrap: torch's DataLoader wrapped for exact fetch marks
(docs/DESIGN.md, "Python bootstrap").

_dlbn_boot calls patch_dataloader_module() when torch.utils.data.dataloader
has executed, which wraps
    DataLoader.__iter__           -> ITER_BEGIN mark + CONFIG record
    _BaseDataLoaderIter.__next__  -> FETCH_BEGIN / FETCH_END, or FETCH_STOP
through the marker API (_dlbn_marks).  When torchdata's stateful_dataloader
module is imported too, patch_stateful_module() wraps
StatefulDataLoader.__iter__ (which does not call DataLoader's) the same way.
Under DLBN_SET or DLBN_REPLAY DataLoader.__init__ is wrapped as well, for
_dlbn_settings and _dlbn_replay.

Only a torch whose DataLoader internals are the ones the wrappers use is
patched: before wrapping, _dlbn_compat checks every class, method and
private attribute they rely on.  On a mismatch nothing is wrapped (no marks,
no replay), the trace gets a process-level note (CONFIG, iter_id 0)
"bootstrap=incompatible;torch=V;reason=..." and stderr one "dlbn:" line
(unless DLBN_LOG=quiet; always when DLBN_REPLAY asked for replay, which is
then off).  A compatible torch gets the note "bootstrap=ok;torch=V".

Rules (it runs inside someone else's training job): dlbn's own failures never
raise into the host program - every wrapper body is guarded and falls back to
the unwrapped call; exceptions of the wrapped calls pass through unchanged,
with the traceback they would have without dlbn (the wrappers take their own
frames out of it, _dlbn_common.drop_own_frames).

Mark arguments (the kinds are DLBN_MARK_* of include/dlbn/dlbn_trace.h):
  ITER_BEGIN  iter_id, arg = how many iterators this DataLoader made before
              (the epoch number when there is one iter() per epoch)
  CONFIG      iter_id, "key=value;..." (_dlbn_config)
  FETCH_BEGIN iter_id, arg = batch index within the epoch
  FETCH_END   iter_id, arg = the same batch index
  FETCH_STOP  iter_id, arg = batches yielded in the epoch (StopIteration),
              or -1 when __next__ raised anything else (a worker died ...)
  HANDOFF     iter_id, arg = the batch index of the FETCH_END before it:
              the fetch was made by a wrapper iterable's generator __iter__
              (timm's PrefetchLoader ...) and this is when that generator
              next yielded or ended (_dlbn_handoff; DLBN_HANDOFF=0 turns it
              off)
iter_id is unique per process and new for every iter(loader), including the
reuse of one iterator object by persistent workers.

Hand-off: when the fetch's caller is a wrapper iterable's generator
__iter__, the time its next yield comes, so that the analyzer can charge
the wrapper's work on the batch, which a Replay of what the loop iterates
removes.  Only on the main thread: the mark carries the loop's counters
there alone, without which the analyzer cannot use it.
"""

import _dlbn_common as _common
import _dlbn_compat as _compat
import _dlbn_config as _config
import _dlbn_marks as _marks

# The modules this one patches.
TORCH_MODULE = "torch.utils.data.dataloader"
STATEFUL_MODULE = "torchdata.stateful_dataloader.stateful_dataloader"

status = None        # after patch_dataloader_module: "ok" (wrapped),
                     # "incompatible" or "off" (left alone)
torch_module = None  # the torch.utils.data.dataloader wrapped
orig_next = None     # the unwrapped _BaseDataLoaderIter.__next__
stateful_done = False  # patch_stateful_module ran
# Set by _dlbn_boot as it wires the bootstrap: the modules the wrappers
# hand over to (None while off).
loaders = None       # _dlbn_loaders
wrappers = None      # _dlbn_wrappers (under replay)
profile = None       # _dlbn_profile (localization: per-stage times, stacks)
handoff = None       # _dlbn_handoff (use_handoff)

_patched = False     # patch_dataloader_module ran (it runs once)
_skip_iter_types = ()  # iterator classes of loaders left alone
_getframe = None     # sys._getframe, _thread.get_ident and the main
_get_ident = None    # thread's ident, for the hand-off
_main_ident = None


def patch_dataloader_module(module, on=True):
    """Wrap the DataLoader iterator protocol of a loaded dataloader module,
    if this torch's internals are the ones the wrappers know (else leave it
    alone and say why, in the trace and on stderr); not when the bootstrap
    is off (`on` false).  Runs once; True when it wrapped."""
    global _patched, status, orig_next, torch_module
    if _patched:
        return False
    _patched = True
    if not on:
        status = "off"
        return False
    try:
        reason = _compat.torch_incompatibility(module)
    except Exception as exc:  # a module too strange to inspect
        reason = "check failed with %s" % type(exc).__name__
    if reason is not None:
        _refuse(reason)
        return False
    saved = []
    try:
        loader_cls = module.DataLoader
        base_iter_cls = module._BaseDataLoaderIter
        orig_iter = loader_cls.__dict__["__iter__"]
        orig_next = base_iter_cls.__dict__["__next__"]
        saved.append((loader_cls, "__iter__", orig_iter))
        loader_cls.__iter__ = _make_iter_wrapper(orig_iter)
        saved.append((base_iter_cls, "__next__", orig_next))
        base_iter_cls.__next__ = _make_next_wrapper(orig_next)
    except Exception:
        _unpatch(*saved)
        status, _common.replay = "off", None
        return False
    status, torch_module = "ok", module
    settings = _common.settings
    if (settings is not None and settings.items) or _common.replay is not None:
        # dlbn-run --set; --replay keeps the loaders made
        _wrap_init(module.DataLoader, "DataLoader")
    _marks.note("bootstrap=ok;torch=%s%s" % (_common.module_version("torch"),
                                             settings.note() if settings is not None else ""))
    return True


def patch_stateful_module(module):
    """Wrap torchdata's StatefulDataLoader.__iter__ as DataLoader.__iter__ is
    (its iterators' __next__ already runs torch's wrapped one through super(),
    but its __iter__ never calls DataLoader's: without this the iterators are
    only adopted at their first fetch - no loader in CONFIG, no new iter_id
    when persistent workers reuse one, no replay).  Only after torch's
    DataLoader was wrapped; on a mismatch its iterators are left alone too."""
    global stateful_done, _skip_iter_types
    if stateful_done or status != "ok":
        return
    stateful_done = True
    try:
        version = _common.module_version("torchdata")
    except Exception:
        version = "unknown"
    try:
        reason = _compat.stateful_incompatibility(module, torch_module)
    except Exception as exc:  # a module too strange to inspect
        reason = "check failed with %s" % type(exc).__name__
    if reason is not None:
        try:
            # the wrapped __next__ passes these through untouched
            _skip_iter_types = (module._StatefulBaseDataLoaderIter,)
        except Exception:
            pass
        _refuse_stateful(reason, version)
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
    settings = _common.settings
    if settings is not None and settings.items and "__init__" in loader_cls.__dict__:
        _wrap_init(loader_cls, "StatefulDataLoader")  # dlbn-run --set
    _marks.note("stateful_dataloader=ok;torchdata=%s" % version)


def use_handoff(module):
    """Time the hand-off to a wrapper iterable with _dlbn_handoff."""
    global handoff, _getframe, _get_ident, _main_ident
    import _thread
    import sys
    import threading
    _getframe, _get_ident = sys._getframe, _thread.get_ident
    _main_ident = threading.main_thread().ident
    handoff = module


def arm_handoff(iter_id, index):
    """After a fetch on the main thread: if its caller is a wrapper
    iterable's generator, a HANDOFF mark at that generator's next yield."""
    try:
        if _get_ident() != _main_ident:
            return
        frame = handoff.wrapper_frame(_getframe(2))  # the caller of __next__
        if frame is not None and frame.f_code.co_filename not in _common.OWN_FILES:
            handoff.arm(frame, lambda: _marks.emit(_marks.MARK_HANDOFF, iter_id, index))
            if wrappers is not None:  # replay: the wrapper's class, next time
                wrappers.learn(frame)
    except Exception:
        pass


def _wrap_init(loader_cls, name):
    """DataLoader.__init__ (or StatefulDataLoader's) wrapped for --set and
    for --replay (which keeps the loaders made, to cache them all before the
    loop); a class whose __init__ is not a plain function gets no settings
    (and replay caches each loader at its first iter())."""
    orig_init, reason = _compat.own_function(loader_cls, "__init__")
    if reason is None:
        try:
            loader_cls.__init__ = _make_init_wrapper(orig_init)
            return
        except Exception as exc:
            reason = "cannot wrap %s.__init__: %s" % (name, type(exc).__name__)
    settings = _common.settings
    if settings is not None:
        if settings.items and not _common.in_child_process():
            _common.warn("DLBN_SET not applied: %s" % reason)
        settings.items = ()


def _refuse(reason):
    """This torch's DataLoader is left alone: no wrappers, so no marks and no
    replay.  The trace gets a process-level note (iter_id 0) that the
    analyzer turns into a reason line; stderr gets one line (not from
    multiprocessing children - spawned DataLoader workers import torch too -
    whose parent said it already)."""
    global status
    status = "incompatible"
    replay, _common.replay = _common.replay, None
    try:
        reason, torch_version = _common.note_text(reason), _common.module_version("torch")
        _marks.note("bootstrap=incompatible;torch=%s;reason=%s" % (torch_version, reason))
        message = ("this torch's DataLoader (torch %s) differs from what the bootstrap "
                   "knows: %s; DataLoaders are left alone (no fetch marks, the analyzer "
                   "uses the IPC view)" % (torch_version, reason))
        if _common.in_child_process():
            return
        if replay is not None:
            # Not informational: the run does not do what DLBN_REPLAY asked.
            _common.warn(message + "; DLBN_REPLAY is off: this run loads its data")
        elif _common.settings is not None:  # nor what dlbn-run --set / --max-steps asked
            _common.warn(message + "; DLBN_SET and DLBN_MAX_STEPS are not applied")
        elif not _common.quiet():
            _common.warn(message)
    except Exception:
        pass


def _refuse_stateful(reason, version):
    try:
        reason = _common.note_text(reason)
        _marks.note("stateful_dataloader=incompatible;torchdata=%s;stateful_reason=%s"
                    % (version, reason))
        message = ("torchdata's StatefulDataLoader (torchdata %s) differs from what "
                   "the bootstrap knows: %s; it is left alone (no fetch marks)"
                   % (version, reason))
        if _common.in_child_process():
            return
        if _common.replay is not None:
            _common.warn(message + "; DLBN_REPLAY does not apply to it")
        elif not _common.quiet():
            _common.warn(message)
    except Exception:
        pass


def _unpatch(*saved):
    for cls, name, orig in saved:
        try:
            setattr(cls, name, orig)
        except Exception:
            pass


def _make_init_wrapper(orig_init):
    defaults = getattr(orig_init, "__kwdefaults__", None) or {}

    def __init__(self, *args, **kwargs):
        try:
            orig_init(self, *args, **kwargs)
        except BaseException as exc:
            _common.drop_own_frames(exc)
            raise
        try:
            settings, replay = _common.settings, _common.replay
            if settings is not None:
                settings.init(self, defaults)
            if replay is not None:
                replay.made(self)
        except Exception:
            pass

    _common.copy_names(__init__, orig_init)
    return __init__


def _make_iter_wrapper(orig_iter):
    def __iter__(self):
        iter_id = 0
        replay = _common.replay
        if wrappers is not None:
            seen = wrappers.filling()
            if seen is not None:  # inside a wrapper's replay fill: no marks
                seen.append(self)
                return replay.unmarked_epoch(self, orig_iter)
        if replay is not None:
            replay.prefill()  # before any mark: no loader's wait holds the fills
        try:
            iter_id = _marks.new_iter_id()
            epoch = self.__dict__.get("_dlbn_epochs", 0)
            self.__dict__["_dlbn_epochs"] = epoch + 1
            _marks.emit(_marks.MARK_ITER_BEGIN, iter_id, epoch)
            settings = _common.settings
            if settings is not None:  # dlbn-run --max-steps
                settings.iter_begins(self, iter_id)
        except Exception:
            iter_id = 0
        try:
            it = None
            if iter_id and replay is not None:
                it = replay.iterator(self, orig_iter, iter_id)
            if it is None:
                it = orig_iter(self)
        except BaseException as exc:
            _common.drop_own_frames(exc)
            raise
        if iter_id and (replay is None or type(it) is not replay.ReplayIterator):
            try:
                it._dlbn_iter_id = iter_id
                _config.emit_config(iter_id, self, it, replay=None if replay is None else 0)
            except Exception:
                pass
        return it

    _common.copy_names(__iter__, orig_iter)
    return __iter__


def _make_next_wrapper(orig_next):
    def __next__(self):
        try:
            if handoff is not None:
                handoff.disarm()
            iter_id = self.__dict__.get("_dlbn_iter_id")
            if iter_id is None:
                filling = wrappers is not None and wrappers.filling() is not None
                iter_id = 0 if filling else _adopt_iterator(self)
            if loaders is not None and loaders.fetch_open():
                iter_id = 0  # inside another loader's fetch (it is the loop's)
            index = self.__dict__.get("_num_yielded", -1)
            settings = _common.settings
            stop = settings.due(iter_id, index) if settings is not None and iter_id else None
            if iter_id and stop is None:
                _marks.emit(_marks.MARK_FETCH_BEGIN, iter_id, index)
                if profile is not None:
                    profile.fetch_begins(iter_id, self)
        except Exception:
            iter_id, stop, settings = 0, None, None
        if stop is not None:  # dlbn-run --max-steps: the bounded run ends
            raise stop
        try:
            data = orig_next(self)
        except StopIteration as exc:
            if iter_id:
                _marks.emit(_marks.MARK_FETCH_STOP, iter_id, index)
            _common.drop_own_frames(exc)
            raise
        except BaseException as exc:
            if iter_id:
                _marks.emit(_marks.MARK_FETCH_STOP, iter_id, -1)
                _marks.fetch_error(iter_id, exc)
            _common.drop_own_frames(exc)
            raise
        if iter_id:
            _marks.emit(_marks.MARK_FETCH_END, iter_id, index)
            if settings is not None:
                settings.count(iter_id)
            if handoff is not None:
                arm_handoff(iter_id, index)
        return data

    _common.copy_names(__next__, orig_next)
    return __next__


def _adopt_iterator(it):
    """An iterator made without a wrapped __iter__ (a subclass overriding it,
    or a direct _get_iterator()): announce it at its first fetch.  Returns 0
    (no marks, ever) for the iterators of a loader left alone."""
    if _skip_iter_types and isinstance(it, _skip_iter_types):
        it._dlbn_iter_id = 0
        return 0
    iter_id = _marks.new_iter_id()
    it._dlbn_iter_id = iter_id
    _marks.emit(_marks.MARK_ITER_BEGIN, iter_id, 0)
    _config.emit_config(iter_id, None, it)
    return iter_id
