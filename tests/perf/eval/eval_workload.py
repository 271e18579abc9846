"""eval_workload.py - one training loop of the eval suite: a real
torch.utils.data.DataLoader feeding a loop that drives the simulated GPU.

    eval_workload.py --mode real|replay|le-log|le-replay --json-out FILE
                     [loader] [gpu] [host]

The loader part is tests/e2e/workload.py's (its datasets, make_loader and
pin-memory stand-in are imported, so there is one loader): --workers,
--context, --persistent, --epochs, --steps-per-epoch, --batch-size,
--prefetch-factor, --sample-ms (sleep: storage), --sample-cpu-ms (busy CPU:
transforms), --sample-kib, --iterable, --pin-memory-standin.

Every step, in every mode, does the same thing with the batch it obtained:
  touch the batch: read one element, as a loss would (--touch element, the
                   default), or one byte of every page (--touch pages), as
                   a pageable H2D copy or the first op on a CPU batch reads
                   all of it, before the step's GPU work: a batch fresh
                   from a worker's shared memory faults its pages in there,
                   a cached Replay batch does not;
  --h2d-kib K      copy K KiB host-to-device (async; pinned memory, or pageable
                   with --h2d-pageable: then the host blocks until it is done);
  --kernel-us U    launch a U-microsecond kernel on the stream;
  --sync step      synchronise the stream (like loss.item()), or none;
  --host-ms M      other host work (sleep: logging, Python overhead) and
  --host-cpu-ms C  busy CPU on the main thread.
--gpu runtime|direct picks the driver reach path
(tests/support/simcuda/simgpu.py); --gpu none runs no GPU work.  After the
loop the stream is synchronised.

--mode real iterates the DataLoader; --mode replay first caches
--replay-batches batches from it, lets its workers go, then runs the same
steps over the cached batches (cycled): the reference method's Replay run.
--mode le-log and --mode le-replay run the same loop over DALI's
LoaderEvaluator (nvidia.dali.plugin.pytorch.loader_evaluator) wrapped around
the DataLoader, as its authors use it: LoaderEvaluator(loader, mode="log")
resp. LoaderEvaluator(loader, mode="replay", num_cached_batches=
--replay-batches), iterated once per epoch.  In replay mode its constructor
iterates one whole epoch of the loader into a deque of the last N batches
(before the loop starts: not in the timed steps), and every epoch then
yields len(loader) batches cycled from that cache - the cached objects
themselves.  The record adds le_cache_s (the constructor's time) and
le_total_s (LoaderEvaluator's own start-to-end time of each epoch).

Timing (all time.monotonic(), the recorder's CLOCK_MONOTONIC):
  fetch[k]  when batch k was obtained (next() returned);
  done[k]   when step k was complete: the host had finished its work and
            the GPU the work step k enqueued.  The GPU part comes from an
            event recorded after each step's work (cuEventRecord is not
            something the recorder watches; no sync is added), placed on
            the host clock through a reference event recorded while the GPU
            was idle.
The steady-state window skips the first P+1 steps (P = num_workers x
prefetch_factor), as the analyzer does (analyzer/model/window.c), and lasts from
step k0-1 to the last step.  window_s measures it between done[] times:
the loop's throughput whether or not the host runs ahead of the GPU (the
analyzer's own window, fetch[k0-1]..fetch[last], is the same span shifted
by one step's work when the loop is steady, and is reported as
fetch_window_s; it overstates Replay's speed when the host runs ahead).
runq_window_s is the loop thread's run-queue wait (schedstat) over
fetch[k0-1]..fetch[last]: time it was runnable but kept off the CPU, by
the workers or by other programs.

Exit status: 0 done, 1 the loop failed, 2 bad arguments.
"""

import argparse
import ctypes
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
TESTS = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(TESTS, "e2e"))
sys.path.insert(0, os.path.join(TESTS, "support", "simcuda"))

import torch  # noqa: E402
import workload  # noqa: E402  tests/e2e/workload.py: datasets, loader


def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    workload.add_loader_args(ap, steps_per_epoch=50)
    # GPU and host work per step.
    ap.add_argument("--gpu", choices=("runtime", "direct", "none"), default="runtime")
    ap.add_argument("--kernel-us", type=int, default=None, help="default 5000")
    ap.add_argument("--h2d-kib", type=float, default=0.0)
    ap.add_argument("--h2d-pageable", action="store_true")
    ap.add_argument("--sync", choices=("none", "step"), default="none")
    ap.add_argument("--host-ms", type=float, default=0.0)
    ap.add_argument("--host-cpu-ms", type=float, default=0.0)
    ap.add_argument("--touch", choices=("element", "pages"), default="element")
    # Run.
    ap.add_argument("--mode", choices=("real", "replay", "le-log", "le-replay"),
                    default="real")
    ap.add_argument("--replay-batches", type=int, default=8)
    ap.add_argument("--json-out", default=None)
    args = ap.parse_args(argv)
    if args.workers < 0 or args.epochs < 1 or args.steps_per_epoch < 2:
        ap.error("workers >= 0, epochs >= 1, steps-per-epoch >= 2")
    if args.gpu == "none":
        if args.kernel_us is not None or args.h2d_kib or args.sync != "none":
            ap.error("--gpu none takes no --kernel-us, --h2d-kib or --sync")
    elif args.kernel_us is None:
        args.kernel_us = 5000
    return args


class NoGPU:
    """Stand-in when the loop has no GPU work: every step is host-only."""

    def step(self):
        return None

    def queued_s(self):
        return None

    def finish(self, events):
        return [None] * len(events)


class StepGPU:
    """The per-step GPU work on one stream of the simulated driver."""

    def __init__(self, args):
        import simgpu  # only here: --gpu none needs no simulated driver
        self.gpu = simgpu.SimGPU(args.gpu)
        self.args = args
        self.stream = self.gpu.stream()
        self.queued_s = self.gpu.compute_queued_s
        self.h2d_bytes = int(args.h2d_kib * 1024)
        self.gpu.stream_sync(self.stream)
        # The GPU is idle: the reference event completes when recorded.
        before = time.monotonic()
        self.ref = self.gpu.event(self.stream)
        self.ref_t = (before + time.monotonic()) / 2
        elapsed = self.gpu.lib.simrt_event_elapsed_ms  # simgpu.py does not wrap it
        elapsed.argtypes = [ctypes.c_uint64, ctypes.c_uint64, ctypes.POINTER(ctypes.c_float)]
        elapsed.restype = ctypes.c_int
        self._elapsed = elapsed

    def step(self):
        a, g, s = self.args, self.gpu, self.stream
        if self.h2d_bytes:
            g.htod(s, self.h2d_bytes, pinned=not a.h2d_pageable, async_=True)
        if a.kernel_us:
            g.launch_us(s, a.kernel_us)
        event = g.event(s)
        if a.sync == "step":
            g.stream_sync(s)
        return event

    def finish(self, events):
        """GPU completion time of each step's work on the host clock."""
        self.gpu.stream_sync(self.stream)
        out = []
        ms = ctypes.c_float()
        for event in events:
            rc = self._elapsed(self.ref, event, ctypes.byref(ms))
            if rc != 0:
                raise RuntimeError("event_elapsed failed: CUresult %d" % rc)
            out.append(self.ref_t + ms.value / 1000.0)
        return out


def touch_batch(args, batch):
    """Read the batch as the step's first use of it does: one element (a
    loss), or with --touch pages one float32 of every 4 KiB page, before the
    step's GPU work, as the host-to-device copy of a pageable batch reads
    all of it before the kernels that use it."""
    data = batch[0]
    checksum = float(data[0, 0])
    if args.touch == "pages":
        checksum += float(data.reshape(-1)[::1024].sum())
    return checksum


def host_work(args):
    """The loop's own host work: identical in real and replay mode."""
    if args.host_ms > 0:
        time.sleep(args.host_ms / 1000.0)
    workload.busy_cpu(args.host_cpu_ms)


def runq_wait_s():
    """This thread's time runnable but not running so far (schedstat), or
    None: how much the loop itself was kept off the CPU."""
    try:
        with open("/proc/thread-self/schedstat") as f:
            return int(f.read().split()[1]) / 1e9
    except (OSError, ValueError, IndexError):
        return None


def gpu_busy_window(queued, first_kept):
    """Kernel time the window's steps queued: the GPU's busy time in the
    window (its utilization is this over window_s), None without a GPU."""
    if first_kept < 1 or first_kept >= len(queued) or None in (queued[-1],
                                                                queued[first_kept - 1]):
        return None
    return queued[-1] - queued[first_kept - 1]


def one_step(args, gpu, batch, record, events):
    record["fetch"].append(time.monotonic())
    record["runq"].append(runq_wait_s())
    touch_batch(args, batch)
    events.append(gpu.step())
    host_work(args)
    record["host_end"].append(time.monotonic())
    record["gpu_queued"].append(gpu.queued_s())


def run_real(args, loader, gpu, record, events):
    for _ in range(args.epochs):
        record["epoch_starts"].append(time.monotonic())
        for batch in loader:
            one_step(args, gpu, batch, record, events)


def run_replay(args, loader, gpu, record, events):
    cache = []
    iterator = iter(loader)
    for batch in iterator:
        cache.append(batch)
        if len(cache) >= args.replay_batches:
            break
    # Shut the workers down now: they must not compete with the loop.
    if hasattr(iterator, "_shutdown_workers"):
        iterator._shutdown_workers()
    del iterator
    total = args.epochs * args.steps_per_epoch
    for step in range(total):
        if step % args.steps_per_epoch == 0:
            record["epoch_starts"].append(time.monotonic())
        one_step(args, gpu, cache[step % len(cache)], record, events)


def loader_evaluator_class():
    """DALI's LoaderEvaluator class and a line saying where it came from:
    tests/support/pipelines/loader_evaluator.py loads DALI's loader.py on its
    own (also under Debian's python3, which has no DALI; DALI's backend and
    libcuda are never imported)."""
    import importlib.util
    path = os.path.join(TESTS, "support", "pipelines", "loader_evaluator.py")
    spec = importlib.util.spec_from_file_location("dlbn_loader_evaluator_helper", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.loader_evaluator()


def run_le(args, cls, loader, gpu, record, events):
    """The loop over DALI's LoaderEvaluator (cls): mode le-log or le-replay."""
    t0 = time.monotonic()
    if args.mode == "le-log":
        evaluator = cls(loader, mode="log")
    else:
        evaluator = cls(loader, mode="replay", num_cached_batches=args.replay_batches)
    record["le_cache_s"] = time.monotonic() - t0
    record["le_total_s"] = []
    for _ in range(args.epochs):
        record["epoch_starts"].append(time.monotonic())
        for batch in evaluator:
            one_step(args, gpu, batch, record, events)
        metrics = evaluator.get_metrics()
        record["le_total_s"].append(metrics.get("total_time"))


def window(times, first_kept):
    if first_kept < 1 or first_kept >= len(times):
        return None
    return times[-1] - times[first_kept - 1]


def main(argv=None):
    args = parse_args(argv)
    if args.pin_memory_standin:
        workload.install_pin_memory_standin()
    torch.set_num_threads(1)
    le_cls = le_origin = None
    if args.mode.startswith("le-"):
        le_cls, le_origin = loader_evaluator_class()
    loader = workload.make_loader(args)
    gpu = NoGPU() if args.gpu == "none" else StepGPU(args)
    record = {"mode": args.mode, "args": vars(args), "pid": os.getpid(),
              "epoch_starts": [], "fetch": [], "host_end": [], "gpu_end": [],
              "done": [], "runq": [], "gpu_queued": [], "error": None}
    if le_origin:
        record["le_origin"] = le_origin
    events = []
    load = workload.ForeignLoad()
    status = 0
    try:
        if args.mode == "real":
            run_real(args, loader, gpu, record, events)
        elif args.mode == "replay":
            run_replay(args, loader, gpu, record, events)
        else:
            run_le(args, le_cls, loader, gpu, record, events)
        record["gpu_end"] = gpu.finish(events)
    except Exception as exc:  # the driver reports it: a broken run, not a figure
        record["error"] = "%s: %s" % (type(exc).__name__, exc)
        status = 1
    record["done"] = [max(h, g) if g is not None else h
                      for h, g in zip(record["host_end"], record["gpu_end"])]
    record["foreign_load_cores"] = load.cores()
    depth = args.workers * args.prefetch_factor if args.workers > 0 else 0
    first_kept = depth + 1
    record["steps"] = len(record["fetch"])
    record["prefetch_depth"] = depth
    record["window_first_step"] = first_kept
    record["window_s"] = window(record["done"], first_kept)
    record["fetch_window_s"] = window(record["fetch"], first_kept)
    record["gpu_busy_window_s"] = gpu_busy_window(record["gpu_queued"], first_kept)
    runq = record["runq"]
    record["runq_window_s"] = (runq[-1] - runq[first_kept - 1]
                               if len(runq) > first_kept and None not in
                               (runq[-1], runq[first_kept - 1]) else None)
    if args.json_out:
        with open(args.json_out, "w") as out:
            json.dump(record, out)
    if record["error"]:
        print("eval_workload: %s" % record["error"], file=sys.stderr)
    return status


if __name__ == "__main__":
    sys.exit(main())
