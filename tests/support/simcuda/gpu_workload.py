"""gpu_workload.py - DataLoader training loops on the simulated GPU, one per
GPU scenario, for recorder-level tests (tests/recorder/cuda) and the
end-to-end analyzer tests (tests/e2e/test_gpu.py).

    gpu_workload.py SCENARIO [--steps N] [--reach runtime|direct]
                    [--mode real|replay] [--replay-batches K] [--json-out FILE]
                    [--pin-memory-standin]

Scenarios (times per step; batch_size 1, one sample per batch):
  input_bound     loading 30 ms (1 worker), GPU 10 ms: the GPU idles ~20 ms
                  in every batch wait -> a data-loading stall
  compute_ahead   loading 40 ms (1 worker), GPU 60 ms, no sync: the host runs
                  ahead, every batch wait is long but the GPU is busy
  sync_each_step  loading 20 ms (1 worker), GPU 40 ms, a stream sync after
                  every step (like loss.item()): host blocked on the GPU
  host_bound      loading 5 ms (2 workers), GPU 5 ms, 30 ms of other host work
                  per step (Python overhead, logging): GPU idle, no waits
  pageable_h2d    loading 5 ms (2 workers), a 64 MiB host-to-device copy from
                  pageable memory (6.4 ms at 10 GB/s, blocks the host) and a
                  10 ms kernel per step
  wrapped_sync    loading 30 ms (1 worker), GPU 10 ms and a stream sync per
                  step, the loop iterating a wrapper iterable (a generator
                  __iter__, as timm's PrefetchLoader is) that spends 8 ms of
                  CPU on each batch before yielding it: the GPU idles in the
                  waits and in the wrapper's work, and Replay (caching what
                  the loop iterates) removes both -> ~3x
Prints stream=<handle> and steps=<n> at the end.  The simulated driver and
the reach path are chosen as in simgpu.py.

--mode real (default) iterates the DataLoader; --mode replay first caches
--replay-batches batches from it, shuts its workers down, then runs the same
steps (same copies, kernels, syncs and host work) over the cached batches,
cycled: the reference method's "Replay" run.

--pin-memory-standin runs the DataLoader with pin_memory=True and stands in
for the CUDA-only pieces of CPU torch (tests/e2e/workload.py), so that the
real pin-memory thread hands the batches to the loop.

--json-out FILE writes the timings (time.monotonic(), the recorder's
CLOCK_MONOTONIC), in the names tests/e2e/e2e_common.py reads:
  step_times[k]  when batch k was obtained (next() returned);
  host_end[k]    when the host finished step k's work;
  gpu_end[k]     when the GPU finished the work step k enqueued: an event
                 recorded after each step's work (cuEventRecord is not
                 watched by the recorder and adds no synchronisation),
                 placed on the host clock through a reference event recorded
                 while the GPU was idle;
  done[k]        max(host_end[k], gpu_end[k]): step k complete;
  window_first_step  P+1 (P = num_workers x prefetch_factor), the default
                 steady-state window's first step; window_s = done[-1] -
                 done[P]; foreign_load_cores (see tests/e2e/workload.py).
Real time over Replay time between done[] times is the loop's throughput
ratio whether or not the host runs ahead of the GPU (step_times alone would
overstate Replay's speed when launches return at once).

Exit status: 0 done, 1 the GPU work failed, 2 bad arguments.
"""
import argparse
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(HERE)), "e2e"))
import simgpu  # noqa: E402
import torch  # noqa: E402
from torch.utils.data import DataLoader, Dataset  # noqa: E402
from workload import ForeignLoad, Wrapper, install_pin_memory_standin  # noqa: E402  tests/e2e

# name: (load_ms, workers, gpu_us, sync, host_ms, h2d_pageable_bytes)
SCENARIOS = {
    "input_bound": (30, 1, 10_000, False, 0, 0),
    "compute_ahead": (40, 1, 60_000, False, 0, 0),
    "sync_each_step": (20, 1, 40_000, True, 0, 0),
    "host_bound": (5, 2, 5_000, False, 30, 0),
    "pageable_h2d": (5, 2, 10_000, False, 0, 64 << 20),
    "wrapped_sync": (30, 1, 10_000, True, 0, 0),
}
WRAPPER_CPU_MS = {"wrapped_sync": 8}
PREFETCH_FACTOR = 2


class Samples(Dataset):
    def __init__(self, n, load_ms):
        self.n, self.load_s = n, load_ms / 1000.0

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        time.sleep(self.load_s)
        return torch.zeros(16)


class Loop:
    """One scenario's per-step work on one stream, and its timings."""

    def __init__(self, scenario, reach):
        _, _, self.gpu_us, self.sync, self.host_ms, self.h2d = SCENARIOS[scenario]
        self.gpu = simgpu.SimGPU(reach)
        self.stream = self.gpu.stream()
        self.gpu.stream_sync(self.stream)
        # The GPU is idle: the reference event completes when recorded.
        before = time.monotonic()
        self.ref = self.gpu.event(self.stream)
        self.ref_t = (before + time.monotonic()) / 2
        self.events = []
        self.step_times, self.host_end = [], []

    def step(self, batch):
        """The work done with every batch: identical in real and replay."""
        g, s = self.gpu, self.stream
        self.step_times.append(time.monotonic())
        float(batch[0, 0])  # touch the batch, as a loss would
        if self.h2d:
            g.htod(s, self.h2d, pinned=False, async_=True)
        g.launch_us(s, self.gpu_us)
        self.events.append(g.event(s))
        if self.sync:
            g.stream_sync(s)
        if self.host_ms:
            time.sleep(self.host_ms / 1000.0)
        self.host_end.append(time.monotonic())

    def finish(self):
        """Synchronise, then place every step's GPU completion on the host clock."""
        self.gpu.stream_sync(self.stream)
        return [self.ref_t + self.gpu.elapsed_ms(self.ref, e) / 1000.0 for e in self.events]


def run_real(loader, loop):
    for batch in loader:
        loop.step(batch)


def run_replay(loader, loop, steps, replay_batches):
    """Caches what the loop iterates (the wrapper's batches, if any)."""
    cache = []
    iterator = iter(loader)
    for batch in iterator:
        cache.append(batch)
        if len(cache) >= replay_batches:
            break
    # The workers must not compete with the loop for the CPUs.
    if hasattr(iterator, "_shutdown_workers"):
        iterator._shutdown_workers()
    if hasattr(iterator, "close"):  # a wrapper's generator: drops the loader's iterator
        iterator.close()
    del iterator
    for k in range(steps):
        loop.step(cache[k % len(cache)])


def window(times, first_kept):
    if first_kept < 1 or first_kept >= len(times):
        return None
    return times[-1] - times[first_kept - 1]


def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("scenario", choices=sorted(SCENARIOS))
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--reach", choices=["runtime", "direct"], default=None)
    ap.add_argument("--mode", choices=["real", "replay"], default="real")
    ap.add_argument("--replay-batches", type=int, default=8)
    ap.add_argument("--json-out", default=None)
    ap.add_argument("--pin-memory-standin", action="store_true")
    args = ap.parse_args(argv)
    if args.steps < 2 or args.replay_batches < 1:
        ap.error("--steps >= 2, --replay-batches >= 1")
    return args


def main(argv=None):
    args = parse_args(argv)
    load_ms, workers, _, _, _, _ = SCENARIOS[args.scenario]
    if args.pin_memory_standin:
        install_pin_memory_standin()
    torch.set_num_threads(1)
    loop = Loop(args.scenario, args.reach)
    loader = DataLoader(Samples(args.steps, load_ms), batch_size=1, num_workers=workers,
                        prefetch_factor=PREFETCH_FACTOR, pin_memory=args.pin_memory_standin)
    if args.scenario in WRAPPER_CPU_MS:
        loader = Wrapper(loader, WRAPPER_CPU_MS[args.scenario])
    load = ForeignLoad()
    try:
        if args.mode == "real":
            run_real(loader, loop)
        else:
            run_replay(loader, loop, args.steps, args.replay_batches)
        gpu_end = loop.finish()
    except simgpu.SimGPUError as exc:
        print("gpu_workload: %s" % exc, file=sys.stderr)
        return 1
    steps = len(loop.step_times)
    first_kept = workers * PREFETCH_FACTOR + 1
    done = [max(h, g) for h, g in zip(loop.host_end, gpu_end)]
    record = {
        "scenario": args.scenario, "mode": args.mode, "reach": loop.gpu.reach,
        "pin_memory": args.pin_memory_standin, "pid": os.getpid(), "steps": steps, "step_times": loop.step_times,
        "host_end": loop.host_end, "gpu_end": gpu_end, "done": done,
        "prefetch_depth": workers * PREFETCH_FACTOR, "window_first_step": first_kept,
        "window_s": window(done, first_kept),
        "foreign_load_cores": load.cores(),
    }
    if args.json_out:
        with open(args.json_out, "w") as out:
            json.dump(record, out)
    print("stream=%d\nsteps=%d" % (loop.stream, steps))
    return 0


if __name__ == "__main__":
    sys.exit(main())
