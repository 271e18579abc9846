"""profile_cost.py - what the worker profile (python/_dlbn_profile.py) costs
the DataLoader workers, in CPU time (docs/DESIGN.md, "Budgets": worker
sampling under 1% of worker CPU).  Part of `make bench` (bench.py --only profile);
alone:

    profile_cost.py [--reps N] [--batches B] [--interval-ms MS]

Every run is preloaded with libdlbn.so; only DLBN_PROFILE changes:
  off      DLBN_PROFILE=0: no profile (the reference)
  exact    DLBN_PROFILE=exact: the per-stage timing, no sampling
  sampled  the default: per-stage timing plus the SIGPROF sampler
Two figures: the sampler's own time, measured in the workers (its Python
handler's CPU time, against their fetch CPU time - the kernel's signal delivery, a few
microseconds per sample, is not in it; the PROF_SAMPLER
summary, read back with dlbn-analyze) - the figure the budget is checked
on, as it does not drown in the machine's noise - and, as a cross-check,
the workers' CPU time per mode.  The workers' CPU time is the children's rusage of a loop that runs one
epoch over a dataset doing fixed Python and numpy work per sample through a
torchvision Compose of three stages (2 workers; non-persistent, so they are
reaped at the epoch's end and counted).  Runs are interleaved (off exact
sampled off ...) and each figure is the median over the repeats.  Prints
one table and, with --json FILE, writes the figures.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
LIB = os.path.join(ROOT, "build", "libdlbn.so")
ANALYZE = os.path.join(ROOT, "build", "dlbn-analyze")
MODES = (("off", "0"), ("exact", "exact"), ("sampled", "1"))

CHILD = r'''
import json, resource, sys, time
import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset
from torchvision import transforms

class Work(Dataset):
    def __init__(self, n):
        self.n = n
        self.t = transforms.Compose([transforms.Lambda(lambda a: a * 0.5),
                                     transforms.Lambda(np.sqrt),
                                     transforms.Lambda(lambda a: a.sum(axis=0))])
    def __len__(self):
        return self.n
    def __getitem__(self, i):
        a = np.random.default_rng(i).random((64, 64))
        for _ in range(12):               # ~1 ms of numpy per sample
            a = np.abs(np.fft.fft2(a).real) / a.size + 1.0
        s = 0
        for k in range(3000):             # and some plain Python
            s += k * k % 7
        return torch.from_numpy(self.t(a).copy()).float()

batches = int(sys.argv[1])
loader = DataLoader(Work(batches * 4), batch_size=4, num_workers=2)
before = resource.getrusage(resource.RUSAGE_CHILDREN)
t0 = time.perf_counter()
for batch in loader:
    pass
del loader, batch
wall = time.perf_counter() - t0
after = resource.getrusage(resource.RUSAGE_CHILDREN)
cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
print(json.dumps({"worker_cpu_s": cpu, "wall_s": wall}))
'''


def run(mode_value, batches, interval_ms, tmp):
    env = {k: v for k, v in os.environ.items() if not k.startswith("DLBN_")}
    env.update(LD_PRELOAD=LIB, DLBN_OUTPUT=os.path.join(tmp, "t-%p.bin"),
               DLBN_PROFILE=mode_value, DLBN_PROFILE_INTERVAL_MS=str(interval_ms),
               DLBN_STACKS="0")
    out = subprocess.run([sys.executable, "-c", CHILD, str(batches)], env=env,
                         capture_output=True, text=True, timeout=600, check=True).stdout
    res = json.loads(out.strip().splitlines()[-1])
    traces = [os.path.join(tmp, n) for n in os.listdir(tmp)]
    if mode_value == "1" and len(traces) == 1:
        report = json.loads(subprocess.run([ANALYZE, "--format", "json", traces[0]],
                                           capture_output=True, text=True, timeout=120,
                                           check=True).stdout)
        loaders = report.get("hotspot_loaders") or [{}]
        res["sampler_cost_share"] = loaders[0].get("sampler_cost_share")
        res["samples"] = loaders[0].get("samples")
    for path in traces:
        os.unlink(path)
    return res


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--batches", type=int, default=150)
    ap.add_argument("--interval-ms", type=float, default=10)
    ap.add_argument("--json", default=None)
    opts = ap.parse_args(argv)
    if not os.path.exists(LIB):
        raise SystemExit("profile_cost: build/libdlbn.so missing; run `make all` first")
    cpu = {m: [] for m, _ in MODES}
    inside, samples = [], []
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(opts.reps):
            for mode, value in MODES:
                r = run(value, opts.batches, opts.interval_ms, tmp)
                cpu[mode].append(r["worker_cpu_s"])
                if r.get("sampler_cost_share") is not None:
                    inside.append(r["sampler_cost_share"])
                    samples.append(r["samples"])
    med = {m: statistics.median(v) for m, v in cpu.items()}
    off = med["off"]
    spread = (max(cpu["off"]) - min(cpu["off"])) / off if off else 0
    res = {"batches": opts.batches, "reps": opts.reps, "interval_ms": opts.interval_ms,
           "worker_cpu_s": med, "runs": cpu,
           "stage_timing_overhead": med["exact"] / off - 1,
           "sampling_overhead": (med["sampled"] - med["exact"]) / off,
           "total_overhead": med["sampled"] / off - 1,
           "off_spread": spread,
           "sampler_cost_share": statistics.median(inside) if inside else None,
           "samples": statistics.median(samples) if samples else None}
    print("Worker profile cost (2 workers, %d batches, %d reps, SIGPROF every %g ms CPU)"
          % (opts.batches, opts.reps, opts.interval_ms))
    print("  %-8s %12s %10s" % ("mode", "worker CPU", "vs off"))
    for mode, _ in MODES:
        print("  %-8s %10.3f s %+9.2f%%" % (mode, med[mode], (med[mode] / off - 1) * 100))
    print("  cross-check by the workers' CPU time: sampling %+.2f%%, per-stage timing "
          "%+.2f%%; the off runs spread %.1f%%, which is what such a difference can "
          "resolve on this machine"
          % (res["sampling_overhead"] * 100, res["stage_timing_overhead"] * 100,
             spread * 100))
    if inside:
        print("  measured in the workers: the sampler's handler took "
              "%.3f%% of their fetch CPU time, %d samples per run (budget < 1%%)"
              % (res["sampler_cost_share"] * 100, res["samples"]))
    if opts.json:
        with open(opts.json, "w") as f:
            json.dump(res, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
