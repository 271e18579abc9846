"""Parameterised PyTorch training-loop workload for dlbn's end-to-end tests.

A real torch.utils.data.DataLoader feeds a loop whose "compute" is a sleep, so
the ground truth is known by construction and stable on a small machine:

  supply per batch   = batch_size * (sample_ms + sample_cpu_ms) / num_workers
  consumption        = step_ms per step

--mode real    iterates the DataLoader (what dlbn records and predicts from);
--mode replay  first fetches K batches into a list, then runs the same loop
               (same steps, same per-step work) over the cached batches,
               cycled - the reference method's "Replay" run.  Real time over
               replay time over the same steady-state steps is the measured
               speedup that dlbn's prediction is checked against.

--json-out writes per-step timestamps (time.monotonic(), i.e. CLOCK_MONOTONIC,
the recorder's clock) and the window the analyzer uses by default: skip the
first P+1 steps (P = num_workers * prefetch_factor, the prefetch depth) and
time from obtaining batch k0-1 to obtaining the last batch.

Exit status: 0 done; 3 the loader failed (e.g. a worker was killed: the
DataLoader raises in the main process); 2 bad arguments.
"""

import argparse
import json
import os
import signal
import sys
import time

import torch
from torch.utils.data import DataLoader, Dataset, IterableDataset, get_worker_info


def busy_cpu(ms, chunk=200):
    """Burn `ms` of CPU time in this thread (storage is sleep, CPU is this),
    reading the clock every `chunk` iterations (a wrapper's work takes
    larger ones: few calls, as a tensor op's would be)."""
    if ms <= 0:
        return
    end = time.thread_time() + ms / 1000.0
    x = 0
    while time.thread_time() < end:
        for i in range(chunk):
            x += i * i
    return x


def make_sample(index, numel):
    return torch.full((numel,), float(index % 251), dtype=torch.float32)


class SlowMapDataset(Dataset):
    def __init__(self, length, sample_ms, sample_cpu_ms, numel):
        self.length = length
        self.sample_ms = sample_ms
        self.sample_cpu_ms = sample_cpu_ms
        self.numel = numel

    def __len__(self):
        return self.length

    def __getitem__(self, index):
        if self.sample_ms > 0:
            time.sleep(self.sample_ms / 1000.0)
        busy_cpu(self.sample_cpu_ms)
        return make_sample(index, self.numel), index


class SlowIterableDataset(IterableDataset):
    """Yields indices [0, length), each worker a disjoint contiguous shard."""

    def __init__(self, length, sample_ms, sample_cpu_ms, numel):
        self.length = length
        self.sample_ms = sample_ms
        self.sample_cpu_ms = sample_cpu_ms
        self.numel = numel

    def __len__(self):
        return self.length

    def __iter__(self):
        info = get_worker_info()
        if info is None:
            start, stop = 0, self.length
        else:
            per_worker = -(-self.length // info.num_workers)
            start = info.id * per_worker
            stop = min(start + per_worker, self.length)
        for index in range(start, stop):
            if self.sample_ms > 0:
                time.sleep(self.sample_ms / 1000.0)
            busy_cpu(self.sample_cpu_ms)
            yield make_sample(index, self.numel), index


def install_pin_memory_standin():
    """Stand in for the CUDA-only pieces so that CPU torch runs the real
    pin-memory thread and its queue.Queue (torch 1.13 paths):
      _BaseDataLoaderIter.__init__: pin_memory and torch.cuda.is_available()
      _MultiProcessingDataLoaderIter: torch.cuda.current_device() for the
        thread's device_id
      _utils.pin_memory._pin_memory_loop: torch.cuda.set_device(device_id),
        then pin_memory(data, device) on every batch (module global)."""
    import torch.utils.data._utils.pin_memory as pin_module
    torch.cuda.is_available = lambda: True
    torch.cuda.current_device = lambda: 0
    torch.cuda.set_device = lambda device: None
    pin_module.pin_memory = lambda data, device=None: data
    # torch 2.x asks torch.accelerator instead: the iterator's _pin_memory,
    # the pin thread's device index, and set_device_index in that thread.
    accelerator = getattr(torch, "accelerator", None)
    if accelerator is not None:
        accelerator.is_available = lambda: True
        accelerator.current_accelerator = lambda *args, **kwargs: None
        accelerator.current_device_index = lambda: 0
        accelerator.set_device_index = lambda device: None


def add_loader_args(ap, steps_per_epoch):
    """The DataLoader options make_loader reads (shared with the eval loop)."""
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--context", choices=("fork", "spawn", "forkserver", "default"),
                    default="default")
    ap.add_argument("--persistent", action="store_true")
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--steps-per-epoch", type=int, default=steps_per_epoch)
    ap.add_argument("--batch-size", type=int, default=4)
    ap.add_argument("--prefetch-factor", type=int, default=2)
    ap.add_argument("--sample-ms", type=float, default=0.0,
                    help="per-sample sleep in the dataset (storage-like)")
    ap.add_argument("--sample-cpu-ms", type=float, default=0.0,
                    help="per-sample busy CPU work in the dataset")
    ap.add_argument("--sample-kib", type=float, default=16.0,
                    help="size of one sample tensor")
    ap.add_argument("--iterable", action="store_true")
    ap.add_argument("--pin-memory-standin", action="store_true")


def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_loader_args(ap, steps_per_epoch=60)
    ap.add_argument("--step-ms", type=float, default=10.0,
                    help="per-step loop 'compute' (sleep)")
    ap.add_argument("--mode", choices=("real", "replay"), default="real")
    ap.add_argument("--replay-batches", type=int, default=8)
    ap.add_argument("--wrapper-cpu-ms", type=float, default=0.0,
                    help="iterate a wrapper iterable (generator __iter__, like timm's "
                         "PrefetchLoader) that burns this much CPU on each batch")
    ap.add_argument("--kill-worker-after", type=float, default=None, metavar="S",
                    help="SIGKILL one worker S seconds into the loop")
    ap.add_argument("--json-out", default=None)
    args = ap.parse_args(argv)
    if args.workers < 0 or args.epochs < 1 or args.steps_per_epoch < 1:
        ap.error("workers >= 0, epochs >= 1, steps-per-epoch >= 1")
    if args.kill_worker_after is not None and args.workers < 1:
        ap.error("--kill-worker-after needs --workers >= 1")
    return args


def make_loader(args):
    numel = max(1, int(args.sample_kib * 1024 / 4))
    length = args.steps_per_epoch * args.batch_size
    cls = SlowIterableDataset if args.iterable else SlowMapDataset
    dataset = cls(length, args.sample_ms, args.sample_cpu_ms, numel)
    kwargs = dict(batch_size=args.batch_size, num_workers=args.workers,
                  pin_memory=args.pin_memory_standin)
    if args.workers > 0:
        kwargs["prefetch_factor"] = args.prefetch_factor
        kwargs["persistent_workers"] = args.persistent
        if args.context != "default":
            kwargs["multiprocessing_context"] = args.context
    return DataLoader(dataset, **kwargs)


def compute(batch, step_ms):
    """The loop's per-step work: identical in real and replay mode."""
    data = batch[0]
    checksum = float(data[0, 0])
    time.sleep(step_ms / 1000.0)
    return checksum


class WorkerKiller:
    def __init__(self, after_s):
        self.after_s = after_s
        self.killed_pid = None

    def maybe_kill(self, iterator, t0):
        if self.after_s is None or self.killed_pid is not None:
            return
        if time.monotonic() - t0 < self.after_s:
            return
        workers = getattr(iterator, "_workers", [])
        if workers:
            self.killed_pid = workers[0].pid
            os.kill(self.killed_pid, signal.SIGKILL)


class Wrapper:
    """What the loop iterates with --wrapper-cpu-ms: an iterable around the
    DataLoader whose generator __iter__ works on each batch, then yields it
    (timm's PrefetchLoader shape).  Replay caches its batches."""

    def __init__(self, loader, cpu_ms):
        self.loader, self.cpu_ms = loader, cpu_ms

    def __iter__(self):
        for batch in self.loader:
            busy_cpu(self.cpu_ms, chunk=5000)
            yield batch


def run_real(args, loader, record, killer):
    t0 = time.monotonic()
    for epoch in range(args.epochs):
        record["epoch_starts"].append(time.monotonic())
        iterator = iter(loader)
        for batch in iterator:
            record["step_times"].append(time.monotonic())
            compute(batch, args.step_ms)
            killer.maybe_kill(iterator, t0)


def run_replay(args, loader, record):
    cache = []
    for batch in loader:
        cache.append(batch)
        if len(cache) >= args.replay_batches:
            break
    del loader
    total = args.epochs * args.steps_per_epoch
    for step in range(total):
        if step % args.steps_per_epoch == 0:
            record["epoch_starts"].append(time.monotonic())
        batch = cache[step % len(cache)]
        record["step_times"].append(time.monotonic())
        compute(batch, args.step_ms)


class ForeignLoad:
    """CPU time that other programs used on this machine while we ran, in
    cores: (busy CPU time from /proc/stat - our own, workers included) / wall.
    Timing assertions are only meaningful when this is small: a loaded
    2-core machine changes the physics (hand-offs wait for a CPU)."""

    def __init__(self):
        self.t0 = time.monotonic()
        self.busy0 = self.machine_busy_s()
        self.own0 = self.own_cpu_s()

    @staticmethod
    def machine_busy_s():
        try:
            with open("/proc/stat") as f:
                fields = [int(x) for x in f.readline().split()[1:]]
        except (OSError, ValueError):
            return None
        idle = fields[3] + (fields[4] if len(fields) > 4 else 0)
        return (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK")

    @staticmethod
    def own_cpu_s():
        import resource
        total = 0.0
        for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN):
            usage = resource.getrusage(who)
            total += usage.ru_utime + usage.ru_stime
        return total

    def cores(self):
        busy1 = self.machine_busy_s()
        wall = time.monotonic() - self.t0
        if self.busy0 is None or busy1 is None or wall <= 0:
            return None
        other = (busy1 - self.busy0) - (self.own_cpu_s() - self.own0)
        return max(0.0, other / wall)


def window(step_times, first_kept):
    """Seconds from obtaining batch first_kept-1 to obtaining the last one."""
    if first_kept < 1 or first_kept >= len(step_times):
        return None
    return step_times[-1] - step_times[first_kept - 1]


def main(argv=None):
    args = parse_args(argv)
    if args.pin_memory_standin:
        install_pin_memory_standin()
    torch.set_num_threads(1)
    loader = make_loader(args)
    if args.wrapper_cpu_ms > 0:
        loader = Wrapper(loader, args.wrapper_cpu_ms)
    record = {"mode": args.mode, "args": vars(args), "pid": os.getpid(),
              "epoch_starts": [], "step_times": [], "error": None}
    status = 0
    killer = WorkerKiller(args.kill_worker_after)
    load = ForeignLoad()
    try:
        if args.mode == "real":
            run_real(args, loader, record, killer)
        else:
            run_replay(args, loader, record)
    except RuntimeError as exc:
        # A killed worker surfaces here (SIGCHLD handler / _try_get_data).
        record["error"] = str(exc)
        status = 3
    record["killed_pid"] = killer.killed_pid
    record["foreign_load_cores"] = load.cores()
    record["end"] = time.monotonic()
    prefetch_depth = args.workers * args.prefetch_factor
    first_kept = prefetch_depth + 1
    record["steps"] = len(record["step_times"])
    record["prefetch_depth"] = prefetch_depth
    record["window_first_step"] = first_kept
    record["window_s"] = window(record["step_times"], first_kept)
    if args.json_out:
        with open(args.json_out, "w") as out:
            json.dump(record, out)
    if record["error"]:
        print("workload: loader failed: %s" % record["error"], file=sys.stderr)
    return status


if __name__ == "__main__":
    sys.exit(main())
