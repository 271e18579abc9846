"""gpu_workload.py - DataLoader training loops on the simulated GPU, one per
GPU scenario of issue 3, for recorder-level tests (tests/cuda) and the
end-to-end analyzer tests.

    gpu_workload.py SCENARIO [--steps N] [--reach runtime|direct]

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
Prints stream=<handle> and steps=<n> at the end.  The simulated driver and
the reach path are chosen as in simgpu.py.
"""
import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import simgpu  # noqa: E402
import torch  # noqa: E402
from torch.utils.data import DataLoader, Dataset  # noqa: E402

# name: (load_ms, workers, gpu_us, sync, host_ms, h2d_pageable_bytes)
SCENARIOS = {
    "input_bound": (30, 1, 10_000, False, 0, 0),
    "compute_ahead": (40, 1, 60_000, False, 0, 0),
    "sync_each_step": (20, 1, 40_000, True, 0, 0),
    "host_bound": (5, 2, 5_000, False, 30, 0),
    "pageable_h2d": (5, 2, 10_000, False, 0, 64 << 20),
}


class Samples(Dataset):
    def __init__(self, n, load_ms):
        self.n, self.load_s = n, load_ms / 1000.0

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        time.sleep(self.load_s)
        return torch.zeros(16)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("scenario", choices=sorted(SCENARIOS))
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--reach", choices=["runtime", "direct"], default=None)
    args = ap.parse_args()
    load_ms, workers, gpu_us, sync, host_ms, h2d = SCENARIOS[args.scenario]
    gpu = simgpu.SimGPU(args.reach)
    s = gpu.stream()
    loader = DataLoader(Samples(args.steps, load_ms), batch_size=1, num_workers=workers)
    steps = 0
    for _batch in loader:
        if h2d:
            gpu.htod(s, h2d, pinned=False, async_=True)
        gpu.launch_us(s, gpu_us)
        if sync:
            gpu.stream_sync(s)
        if host_ms:
            time.sleep(host_ms / 1000.0)
        steps += 1
    gpu.stream_sync(s)
    print("stream=%d\nsteps=%d" % (s, steps))


if __name__ == "__main__":
    main()
