"""dlbn Python bootstrap: the CONFIG record of a DataLoader iterator
(docs/DESIGN.md, "Python bootstrap").

_dlbn_patch emits it right after the iterator is made (so pin_memory is
the effective value), iter_id its iterator's; "key=value;..." under
CONFIG_MAX bytes: num_workers, batch_size, prefetch_factor, pin_memory
(and pin_memory_requested when torch dropped it), persistent_workers,
start_method, dataset_kind, drop_last, timeout, batches (len(loader)),
cpus, cpu_quota,
intraop_threads, loader (its id()), loader_class, sampler (class name of
what orders the samples), dali_proxy, threads and device (DALI's proxy
DataLoader: its pipeline's), replay (with DLBN_REPLAY; wrapper_replay=
MODULE:QUALNAME when the loop gets a wrapper iterable's cached items
instead, _dlbn_wrappers), set, set_from, set_ignored, max_steps (dlbn-run
--set/--max-steps, _dlbn_settings), workers (pids of a multiprocess
iterator's workers, up to 64; cut first when the text is too long).
_dlbn_loaders writes the other loaders' CONFIG with cpu_items and
CONFIG_MAX of this module.
"""

import _dlbn_common as _common
import _dlbn_marks as _marks

# The CONFIG text stays under this many bytes (the worker list is cut first).
CONFIG_MAX = 500
_WORKERS_MAX = 64


def emit_config(iter_id, loader, it, replay=None):
    try:
        _marks.api.config(iter_id, config_text(loader, it, replay, iter_id))
    except Exception:
        pass


def config_text(loader, it, replay=None, iter_id=0):
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
    items.append(("batches", _epoch_batches(loader)))
    items.extend(cpu_items())
    if loader is not None:
        items.append(("loader", id(loader)))
        items.append(("loader_class", type(loader).__name__))
        items.extend(_dali_proxy_items(loader))
    items.append(("sampler", sampler_name(loader, it)))
    if replay is not None:
        items.append(("replay", replay))
        if replay and loader is not None:  # _dlbn_wrappers replays a wrapper of it
            items.append(("wrapper_replay", loader.__dict__.get("_dlbn_wrapped_by")))
    text = ";".join("%s=%s" % (key, _common.config_value(value))
                    for key, value in items if value is not None)
    settings = _common.settings
    if settings is not None:  # dlbn-run --set / --max-steps
        for key, value in settings.config_items(loader, iter_id):
            text += ";%s=%s" % (key, value)
    return _add_workers(text.encode("utf-8", "replace"), it)


def _epoch_batches(loader):
    """len(loader): the batches of an epoch, where the loader knows it (the
    analyzer sizes a worker's copy-on-write growth by the epoch's end)."""
    try:
        n = len(loader) if loader is not None else None
    except Exception:
        return None
    return n if isinstance(n, int) and n > 0 else None


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
    as many as fit in CONFIG_MAX.  Persistent workers are listed again for
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
    if len(text) >= CONFIG_MAX:
        return text.rsplit(b";workers=", 1)[0]
    for pid in pids[1:]:
        if len(text) + 1 + len(pid) >= CONFIG_MAX:
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


def cpu_items():
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


def sampler_name(loader, it):
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
