"""dlbn Python bootstrap: settings and bounded runs (dlbn-run --set /
--max-steps; DLBN_SET, DLBN_MAX_STEPS; docs/DESIGN.md, "Python bootstrap").

_dlbn_boot loads this module only when DLBN_SET or DLBN_MAX_STEPS is given;
while one of them is on, _dlbn_common.settings is this module.  The
wrappers call init() (DataLoader.__init__), iter_begins() (__iter__),
due() and count() (__next__) and config_items() (the CONFIG text).

DLBN_SET: items separated by ";", each [SELECTOR:]KEY=VALUE.
  KEY       num_workers (int >= 0), prefetch_factor (int >= 1),
            persistent_workers, pin_memory (0/1/true/false),
            batch_size (int >= 1)
  SELECTOR  none: every DataLoader; "train": loaders whose sampler is not
            sequential (shuffled, a user's or batch sampler, an
            IterableDataset); "eval" (or "val"): loaders with torch's
            SequentialSampler, or a DistributedSampler with shuffle=False;
            an integer N: the N-th DataLoader the process creates,
            counting from 0 (re-creations, e.g. by Lightning, count too).
  Later items win.  Applied when DataLoader.__init__ returns (the loader's
  own arguments were validated by torch), by writing the attributes torch
  reads when it makes the iterator; then kept consistent the way torch's
  __init__ would: num_workers=0 puts prefetch_factor back to torch's
  default for 0 workers and persistent_workers to 0 (a --set of either is
  then ignored, said once on stderr, and noted as set_ignored); workers
  where there were none get prefetch_factor 2 when it was None (torch 2.x).
  pin_memory without an accelerator is dropped by torch, as without dlbn
  (CONFIG's pin_memory_requested says so).  batch_size replaces the
  loader's BatchSampler with torch's own over the same sampler and
  drop_last, as __init__ makes it from batch_size; a loader that does not
  batch that way (batch_size=None: a batch_sampler of the program's, or
  no automatic batching) keeps its own, said on stderr and in
  set_ignored.  So does DALI's proxy DataLoader asked for larger batches
  than its pipeline makes (a numbered selector: the pipeline, built
  before the DataLoader, kept its own size, and DALI would refuse the
  batches, the loop waiting for them forever).
  CONFIG of each iterator: set=KEY=VALUE,... (the values dlbn-run asked
  for that apply to it, equal to its own or not, and the forced
  consequences), set_from=KEY=VALUE,... (the loader's own values that
  changed), set_ignored=KEY,...; the process note: set=[SEL:]KEY=VALUE,...

DLBN_MAX_STEPS=N: the run ends after N training steps past warm-up.  The
  training loader, as far as the bootstrap can tell while the run goes:
  the first loader iterated whose sampler is not sequential, else the first
  loader iterated (a later non-sequential one takes over: Lightning's
  sanity check iterates the val loader first).  Warm-up is the analyzer's
  default, prefetch depth + 1 steps (num_workers x prefetch_factor + 1),
  so the analysis window holds N steps.  At the fetch after warm-up + N
  batches (counted over all its epochs) the fetch is closed as an end of
  epoch (FETCH_STOP) and SystemExit(0) is raised from it: finally blocks
  and context managers run, workers shut down, the trace is completed at
  exit and the status is 0 (Lightning re-raises it after its teardown).
  Code after the training loop does not run.  Fetched from another thread
  than the main one, StopIteration is raised instead (a SystemExit there
  would end that thread only), at that fetch and every later one.
  CONFIG: max_steps=N on that loader's iterators and in the process note.
"""
import sys

import _dlbn_common as _common
import _dlbn_marks as _marks

_SETTING_KEYS = ("num_workers", "prefetch_factor", "persistent_workers", "pin_memory")
# Set by replacing the batch sampler, not an attribute (_set_batch_size);
# also torchdata.nodes' Batcher and DALI's pipeline.
_BATCH_KEY = "batch_size"
# DALI's pipeline knobs (_dlbn_loaders applies them); num_workers and
# prefetch_factor also set torchdata.nodes' ParallelMapper and Prefetcher.
_OTHER_SETTING_KEYS = ("num_threads", "prefetch_queue_depth")
items = ()           # parsed DLBN_SET: (selector, key, value), in order
max_steps = 0        # DLBN_MAX_STEPS, 0 = off
_loaders_made = 0     # DataLoaders whose __init__ returned (creation order)
_ignored_said = set()  # (key, reason) already said on stderr
_stop_key = None      # the loader --max-steps counts (its _dlbn_stop_key)
_stop_sequential = True  # ... and whether its sampler is sequential
_stop_iters = set()   # iter_ids of its iterators
_stop_count = 0       # batches it yielded, all epochs
_stop_at = 0          # warm-up + max_steps
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


def setup(environ):
    """Read DLBN_SET and DLBN_MAX_STEPS; True when one of them is on.  A bad
    value is said on stderr and switches that setting off (dlbn-run refuses
    it before the run)."""
    global items, max_steps
    items, max_steps = (), 0
    text = environ.get("DLBN_SET", "").strip()
    if text:
        try:
            items = tuple(parse_settings(text))
        except ValueError as exc:
            _common.warn("DLBN_SET: %s; no setting applied" % exc)
    steps = environ.get("DLBN_MAX_STEPS", "").strip()
    if steps and steps != "0":
        try:
            max_steps = int(steps, 10)
        except ValueError:
            max_steps = -1
        if max_steps < 1:
            _common.warn("DLBN_MAX_STEPS=%r is not a positive step count; the run is not "
                         "bounded" % steps)
            max_steps = 0
    return bool(items) or max_steps > 0


def note():
    """The process note's part: ";set=...;max_steps=N" (or "")."""
    text = ""
    if items:
        text += ";set=" + ",".join(
            "%s%s=%s" % ("" if sel is None else "%s:" % sel, key, _common.config_value(value))
            for sel, key, value in items)
    if max_steps:
        text += ";max_steps=%d" % max_steps
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


def init(loader, defaults):
    """At the end of DataLoader.__init__: count the loader, apply the
    settings that select it."""
    global _loaders_made
    d = loader.__dict__
    if "_dlbn_index" in d:  # a subclass's __init__ wrapped as well
        return
    index = _loaders_made
    _loaders_made += 1
    d["_dlbn_index"] = index
    if not items:
        return
    sequential = _sequential(loader)
    wanted = {}
    for selector, key, value in items:
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
        ",".join("%s=%s" % (key, _common.config_value(new[key])) for key in shown),
        ",".join("%s=%s" % (key, _common.config_value(own[key])) for key in changed),
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
        limit = _dali_proxy_limit(loader)
        if own is None:
            reason = ("it does not batch by batch_size (a batch_sampler of the program's, "
                      "or batch_size=None)")
        elif limit is not None and size > limit:
            reason = ("DALI's proxy pipeline behind it makes batches of at most %d (a "
                      "batch_size without a selector, or with train, sets both)" % limit)
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


def _dali_proxy_limit(loader):
    """The largest batch the pipeline behind DALI's proxy DataLoader
    takes, or None (not one, or not found).  Called at the end of torch's
    DataLoader.__init__, before the proxy's own __init__ keeps its
    server: found in that __init__'s frame."""
    if not type(loader).__module__.startswith("nvidia.dali."):
        return None
    frame = sys._getframe(1)
    while frame is not None:
        found = frame.f_locals
        if found.get("self") is loader and "dali_server" in found:
            break
        frame = frame.f_back
    if frame is None:
        return None
    pipe = getattr(found["dali_server"], "_pipe", None)
    limit = getattr(pipe, "max_batch_size", None)
    return limit if isinstance(limit, int) and limit > 0 else None


def _say_ignored(keys, reason):
    for key in keys:
        if (key, reason) in _ignored_said:
            continue
        _ignored_said.add((key, reason))
        if not _common.in_child_process():
            _common.warn("DLBN_SET %s not applied to a DataLoader: %s" % (key, reason))


def config_items(loader, iter_id):
    """CONFIG items of the settings for this iterator: [(key, text)]."""
    found = []
    applied = loader.__dict__.get("_dlbn_set") if loader is not None else None
    if applied:
        for key, text in zip(("set", "set_from", "set_ignored"), applied):
            if text:
                found.append((key, text))
    if max_steps and iter_id in _stop_iters:
        found.append(("max_steps", "%d" % max_steps))
    return found


def iter_begins(loader, iter_id, workers=None, prefetch=None):
    """At each iter(loader): is this the loader --max-steps counts?
    workers/prefetch: the prefetch depth's factors of a loader that is not
    a DataLoader (_dlbn_loaders), else read from the loader."""
    global _stop_key, _stop_sequential, _stop_count, _stop_at, _stop_keys_made
    if not max_steps:
        return
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
        _stop_at = (workers * prefetch if workers > 0 else 0) + 1 + max_steps
    _stop_iters.add(iter_id)


def due(iter_id, index):
    """Before a fetch: None, or the exception that ends the bounded run (the
    caller raises it) once the counted loader yielded warm-up + N batches.
    Emits the marks that close the fetch as an end of epoch."""
    try:
        if iter_id not in _stop_iters or _stop_count < _stop_at:
            return None
        _marks.emit(_marks.MARK_FETCH_BEGIN, iter_id, index)
        _marks.emit(_marks.MARK_FETCH_STOP, iter_id, index)
        import threading
        if threading.current_thread() is not threading.main_thread():
            return StopIteration
        if not (_common.quiet() or _stop_said):
            _common.warn("--max-steps %d: %d steps done (%d of warm-up), ending the run"
                         % (max_steps, _stop_count, _stop_at - max_steps))
        _stop_said.append(True)
        return SystemExit(0)
    except Exception:
        return None


def count(iter_id):
    """After a fetch: one more batch of the counted loader (if it is that one)."""
    global _stop_count
    if iter_id in _stop_iters:
        _stop_count += 1
