"""Memory workload for dlbn's end-to-end memory tests (test_memory.py).

A real torch.utils.data.DataLoader over a map-style dataset whose per-sample
data (--items strings) lives either

  --kind objects  in a Python list of str: reading an item writes its
                  reference count, so each forked worker copies every page it
                  reads from the training process (copy-on-read: the worker's
                  private memory grows while its RSS holds), or
  --kind numpy    in one numpy fixed-width bytes array holding the same
                  strings: reading copies the bytes out, the array's pages
                  stay shared (no growth).

Each sample sleeps --sleep-ms (storage), burns --cpu-ms of CPU, reads
--touch items at pseudo-random indices and returns a float32 tensor of
--sample-kib KiB (collated into /dev/shm by the worker) and its index.  The
loop takes --steps batches (a seeded random sample of the items: len(loader)
is --steps) and sleeps --step-ms per step.

--json-out writes per-step timestamps (time.monotonic(), the recorder's
clock), the steady-state window the other e2e workloads use (skip the first
P+1 steps, P = num_workers * prefetch_factor), the worker pids, and what
/proc/PID/smaps_rollup said of the training process and each worker after
the first batch and after the last one (while the workers are still alive):
the ground truth the analyzer's memory figures are held against.

Exit status: 0 done; 3 the loader failed (a worker was killed or raised:
the DataLoader raises in the main process; the message is in the JSON);
2 bad arguments.
"""

import argparse
import json
import os
import sys
import time

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset, RandomSampler

from workload import ForeignLoad, busy_cpu, window

ITEM_FORMAT = "sample-%08d"     # 15 characters, twice: a 30-character item


def objects_items(n):
    """n Python str of 30 characters (80-byte objects, ~51 to a page)."""
    return [(ITEM_FORMAT % i) * 2 for i in range(n)]


def numpy_items(n):
    """The same n strings as one fixed-width bytes array, built without a
    Python object per item (so no freed objects are left to reuse)."""
    digits = np.char.zfill(np.arange(n).astype("S8"), 8)
    one = np.char.add(np.array(b"sample-", dtype="S7"), digits)
    return np.char.add(one, one)


class TouchDataset(Dataset):
    def __init__(self, args):
        self.items = objects_items(args.items) if args.kind == "objects" \
            else numpy_items(args.items)
        self.n = args.items
        self.touch = args.touch
        self.sleep_ms = args.sleep_ms
        self.cpu_ms = args.cpu_ms
        self.numel = max(1, int(args.sample_kib * 1024 / 4))

    def __len__(self):
        return self.n

    def __getitem__(self, index):
        if self.sleep_ms > 0:
            time.sleep(self.sleep_ms / 1000.0)
        busy_cpu(self.cpu_ms)
        items = self.items
        n = self.n
        # A 64-bit LCG seeded by the index: the same items every run.
        x = (index * 2654435761 + 12345) & 0xFFFFFFFFFFFFFFFF
        acc = len(items[index])
        for _ in range(self.touch):
            x = (x * 6364136223846793005 + 1442695040888963407) & 0xFFFFFFFFFFFFFFFF
            acc += len(items[(x >> 33) % n])
        return torch.full((self.numel,), float(acc % 251), dtype=torch.float32), index


def smaps_rollup(pid):
    """Rss, Pss, Private_Dirty, Private_Clean, Shared_Dirty of pid in KiB
    (None when it is gone or unreadable)."""
    wanted = ("Rss", "Pss", "Private_Dirty", "Private_Clean", "Shared_Dirty")
    out = {}
    try:
        with open("/proc/%d/smaps_rollup" % pid) as f:
            for line in f:
                key, _, rest = line.partition(":")
                if key in wanted:
                    out[key] = int(rest.split()[0])
    except (OSError, ValueError):
        return None
    return out


def probe(record, key, iterator):
    pids = [w.pid for w in getattr(iterator, "_workers", [])]
    if pids and not record["worker_pids"]:
        record["worker_pids"] = pids
    record[key] = {"t": time.monotonic(), "main": smaps_rollup(os.getpid()),
                   "workers": {str(pid): smaps_rollup(pid) for pid in pids}}


def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--kind", choices=("objects", "numpy"), default="objects")
    ap.add_argument("--items", type=int, default=400000,
                    help="dataset size (strings of 30 characters)")
    ap.add_argument("--touch", type=int, default=200,
                    help="items each sample reads at pseudo-random indices")
    ap.add_argument("--sleep-ms", type=float, default=5.0, help="per-sample sleep (I/O)")
    ap.add_argument("--cpu-ms", type=float, default=1.0, help="per-sample busy CPU")
    ap.add_argument("--sample-kib", type=float, default=16.0,
                    help="size of the tensor each sample returns")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--batch-size", type=int, default=8)
    ap.add_argument("--prefetch-factor", type=int, default=2)
    ap.add_argument("--persistent", action="store_true")
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--steps", type=int, default=80, help="batches per epoch")
    ap.add_argument("--step-ms", type=float, default=5.0,
                    help="the loop's own work per step (sleep)")
    ap.add_argument("--json-out", default=None)
    ap.add_argument("--mode", choices=("real",), default="real",
                    help="accepted for tests/perf/eval/whatif_check.py: always real")
    args = ap.parse_args(argv)
    if (args.workers < 0 or args.steps < 1 or args.epochs < 1 or args.items < 1
            or args.batch_size < 1 or args.touch < 0):
        ap.error("workers >= 0, steps, epochs, items, batch-size >= 1, touch >= 0")
    if args.persistent and args.workers < 1:
        ap.error("--persistent needs --workers >= 1")
    return args


def make_loader(args, dataset):
    sampler = RandomSampler(dataset, replacement=False,
                            num_samples=min(args.steps * args.batch_size, len(dataset)),
                            generator=torch.Generator().manual_seed(1))
    kwargs = dict(batch_size=args.batch_size, sampler=sampler, num_workers=args.workers)
    if args.workers > 0:
        kwargs["prefetch_factor"] = args.prefetch_factor
        kwargs["persistent_workers"] = args.persistent
    return DataLoader(dataset, **kwargs)


def main(argv=None):
    args = parse_args(argv)
    torch.set_num_threads(1)
    dataset = TouchDataset(args)
    loader = make_loader(args, dataset)
    record = {"args": vars(args), "pid": os.getpid(), "worker_pids": [],
              "epoch_starts": [], "step_times": [], "error": None, "error_type": None,
              "proc_first": None, "proc_last": None}
    load = ForeignLoad()
    status = 0
    total = args.epochs * len(loader)
    try:
        for epoch in range(args.epochs):
            record["epoch_starts"].append(time.monotonic())
            iterator = iter(loader)
            for batch in iterator:
                record["step_times"].append(time.monotonic())
                step = len(record["step_times"])
                checksum = float(batch[0][0, 0])
                time.sleep(args.step_ms / 1000.0)
                if step == 1:
                    probe(record, "proc_first", iterator)
                elif step == total:
                    probe(record, "proc_last", iterator)
                del batch, checksum
    except Exception as exc:  # noqa: BLE001 - a killed worker, a full /dev/shm
        record["error"] = str(exc)
        record["error_type"] = type(exc).__name__
        status = 3
    record["foreign_load_cores"] = load.cores()
    record["end"] = time.monotonic()
    prefetch_depth = args.workers * args.prefetch_factor
    record["steps"] = len(record["step_times"])
    record["prefetch_depth"] = prefetch_depth
    record["window_first_step"] = prefetch_depth + 1
    record["window_s"] = window(record["step_times"], prefetch_depth + 1)
    if args.json_out:
        with open(args.json_out, "w") as out:
            json.dump(record, out)
    if record["error"]:
        print("memory_workload: loader failed: %s: %s" % (
            record["error_type"], record["error"]), file=sys.stderr)
    return status


if __name__ == "__main__":
    sys.exit(main())
