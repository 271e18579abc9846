"""grid_check.py - ground truth for the batch size x num_workers grid of
dlbn-analyze --what-if: trace the loop at one setting A, trace it once more
at another batch size (the calibration run, as one point of `dlbn-run
--sweep batch_size=...` would), ask A's --what-if (given the calibration
run's figures with --sweep-results) for the samples/s of every point of a
3 x 3 grid around A, and run every point without dlbn to measure it.

    grid_check.py [--python PY] [--build DIR] [--out DIR] [--rounds N]
                  [--only NAME[,NAME]] [--target 0.15] [--list]

Grids:
  grid_sim   the simulated GPU (tests/perf/eval/eval_workload.py): 8 ms of
             kernel and 1 ms of host work per step whatever the batch, workers
             sleeping 2 ms per sample; num_workers 1, 2, 4 x batch size 4,
             8, 16; A = 2 workers, 8 a batch; calibration 2 x 16.
  grid_jpeg  torchvision's ImageFolder over 320x240 JPEGs with the ImageNet
             training transforms
             (tests/support/pipelines/torchvision_imagefolder.py), a 20 ms
             kernel and a sync per step; num_workers 1, 2, 4 x batch size 8,
             16, 32; A = 2 workers, 16 a batch; calibration 2 x 32.
             Decoding is CPU work: on a 2-core machine 4 workers queue for the
             cores, which the model's core limit has to see.

A point passes when the predicted samples/s is within --target (15%) of
the measured; a grid passes when at least 8 of its 9 points do and the
point the analyzer marks best (what_if_grid's "best") measures within 5%
of the best measured.  Also shown:
the prediction from A alone (no calibration run: the loop's and the GPU's
time per step taken as proportional to the batch), for what the second
batch size adds.  Measurements are the programs' own clocks (window_s over
the steady-state window, as whatif_check.py), medians over --rounds runs;
A and the calibration run are traced --rounds times each, and the run of
the median step time is the one analysed.

Output: a table per grid on stdout and OUT/grid.json (default
build/eval/grid).  Exit status: 0 every grid passes (a point missed while
other programs used more than 0.5 cores counts as noise, said); 1 a grid
fails on a quiet machine; 2 a run broke.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from whatif_check import BUSY_CORES, ROOT, WORKLOAD, Broken, Runner  # noqa: E402

TORCHVISION = os.path.join(ROOT, "tests", "support", "pipelines",
                           "torchvision_imagefolder.py")
POINTS_NEEDED = 8  # of the 9
BEST_WITHIN = 0.05

GRIDS = [
    dict(name="grid_sim",
         covers="simulated GPU: 8 ms kernel + 1 ms host per step, workers 2 ms per sample",
         program=WORKLOAD,
         args=["--steps-per-epoch", "60", "--sample-ms", "2", "--kernel-us", "8000",
               "--host-ms", "1", "--h2d-kib", "64", "--sync", "step"],
         workers=(1, 2, 4), batches=(4, 8, 16), a=(2, 8), calibrate=(2, 16)),
    dict(name="grid_jpeg",
         covers="torchvision ImageFolder 320x240 JPEGs, 20 ms kernel, sync per step",
         program=TORCHVISION, requires="torchvision",
         args=["--setting", "compute", "--image-size", "320x240", "--steps", "80",
               "--kernel-us", "20000", "--sync", "step"],
         workers=(1, 2, 4), batches=(8, 16, 32), a=(2, 16), calibrate=(2, 32)),
]


def point_args(grid, workers, batch):
    return grid["args"] + ["--workers", str(workers), "--batch-size", str(batch)]


def sweep_point(result, measured_ms):
    """A --sweep-results entry from an analysed calibration run."""
    basis = result.get("what_if_basis") or {}
    config = result.get("config") or {}
    return {"setting": "batch_size", "value": int(config.get("batch_size")),
            "measured_step_ms": measured_ms, "batch_size": int(config.get("batch_size")),
            "num_workers": int(config.get("num_workers")), "units": basis.get("num_workers"),
            "loop_ms": basis.get("loop_ms"),
            "gpu_step_ms": basis.get("gpu_step_ms"), "batch_ms": basis.get("batch_ms")}


def analyse(runner, trace, points_path=None):
    cmd = [runner.analyzer, "--what-if", "--format", "json", trace]
    if points_path:
        cmd += ["--sweep-results", points_path]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    if proc.returncode != 0:
        raise Broken("dlbn-analyze %s exited %d: %s" % (trace, proc.returncode,
                                                       proc.stderr[-800:]))
    return json.loads(proc.stdout)


def cells_of(result):
    return {(c["batch_size"], c["num_workers"]): c for c in result.get("what_if_grid") or []}


def median_run(runner, tag, args, program, rounds):
    runs = [runner.run("%s-r%d" % (tag, k), args, preload=True, program=program)
            for k in range(rounds)]
    return sorted(runs, key=lambda r: r["step_ms"])[(len(runs) - 1) // 2]


def run_grid(runner, grid, rounds):
    name = grid["name"]
    program = grid["program"]
    # A and the calibration run are traced --rounds times each and the run
    # of the median step time is analysed: one slow traced run would carry
    # this machine's spread into every prediction.
    a = median_run(runner, "%s-A" % name, point_args(grid, *grid["a"]), program, rounds)
    cal = median_run(runner, "%s-cal" % name, point_args(grid, *grid["calibrate"]), program,
                     rounds)
    plain = analyse(runner, a["trace"])
    points_path = os.path.join(runner.out_dir, name + "-points.json")
    with open(points_path, "w") as f:
        json.dump([sweep_point(analyse(runner, cal["trace"]), cal["step_ms"])], f)
    fitted = analyse(runner, a["trace"], points_path)
    cells, alone = cells_of(fitted), cells_of(plain)
    rows = []
    for w in grid["workers"]:
        for b in grid["batches"]:
            runs = [runner.run("%s-w%d-b%d-r%d" % (name, w, b, k), point_args(grid, w, b),
                               preload=False, program=program) for k in range(rounds)]
            measured_ms = statistics.median(r["step_ms"] for r in runs)
            cell = cells.get((b, w))
            if cell is None:
                raise Broken("%s: the grid has no point batch_size=%d num_workers=%d"
                             % (name, b, w))
            own = alone.get((b, w)) or {}
            measured = b * 1e3 / measured_ms
            predicted = cell["predicted_samples_per_s"]
            rows.append(dict(num_workers=w, batch_size=b, measured_ms=measured_ms,
                             measured_per_s=measured, predicted_per_s=predicted,
                             predicted_ms=cell["predicted_step_ms"],
                             limited_by=cell["limited_by"],
                             error=predicted / measured - 1,
                             alone_per_s=own.get("predicted_samples_per_s"),
                             best=bool(cell.get("best")),
                             load=[r["load"] for r in runs]))
    return dict(name=name, covers=grid["covers"], a=grid["a"], calibrate=grid["calibrate"],
                verdict=fitted.get("verdict"), basis=fitted.get("what_if_basis"),
                a_measured_ms=a["step_ms"], rows=rows)


def judge(result, target):
    rows = result["rows"]
    for r in rows:
        loads = [x for x in r["load"] if isinstance(x, (int, float))]
        r["passed"] = abs(r["error"]) <= target
        r["suspect"] = not r["passed"] and bool(loads) and max(loads) > BUSY_CORES
    best_measured = max(rows, key=lambda r: r["measured_per_s"])
    # the point the analyzer marks best (the most samples/s; within 2% of
    # it the run's batch size, then the fewest workers): what a user is told
    marked = [r for r in rows if r["best"]]
    # a best outside the 3 x 3 grid was not measured: judged is then the
    # most predicted of the nine, said so
    result["best_outside"] = not marked
    best_predicted = marked[0] if marked else max(rows, key=lambda r: r["predicted_per_s"])
    result["best_measured"] = (best_measured["batch_size"], best_measured["num_workers"])
    result["best_predicted"] = (best_predicted["batch_size"], best_predicted["num_workers"])
    result["best_gap"] = best_predicted["measured_per_s"] / best_measured["measured_per_s"] - 1
    result["points_passed"] = sum(r["passed"] for r in rows)
    result["points_suspect"] = sum(r["suspect"] for r in rows)
    result["passed"] = (result["points_passed"] + result["points_suspect"] >= POINTS_NEEDED
                        and result["best_gap"] >= -BEST_WITHIN)
    return result


def print_grid(r):
    print("%s: %s; A = num_workers %d, batch_size %d; calibration %d x %d" % (
        r["name"], r["covers"], r["a"][0], r["a"][1], r["calibrate"][0], r["calibrate"][1]))
    print("  %-11s %-10s %11s %11s %7s %-12s %11s" % (
        "num_workers", "batch_size", "measured/s", "predicted/s", "error", "limited by",
        "A alone/s"))
    for p in r["rows"]:
        print("  %-11d %-10d %11.0f %11.0f %+6.1f%% %-12s %11s %s" % (
            p["num_workers"], p["batch_size"], p["measured_per_s"], p["predicted_per_s"],
            100 * p["error"], p["limited_by"],
            "%.0f" % p["alone_per_s"] if p["alone_per_s"] else "-",
            "ok" if p["passed"] else "miss (busy machine)" if p["suspect"] else "MISS"))
    print("  best measured: batch_size %d, num_workers %d; best predicted%s: batch_size %d, "
          "num_workers %d (measures %+.1f%% from the best)" % (
              r["best_measured"][0], r["best_measured"][1],
              " of the nine (the analyzer's best lies outside them)" if r["best_outside"]
              else "", r["best_predicted"][0], r["best_predicted"][1], 100 * r["best_gap"]),
          flush=True)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--python", default=sys.executable)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--out", default=None, help="default BUILD/eval/grid")
    ap.add_argument("--rounds", type=int, default=1, help="measured runs per point (median)")
    ap.add_argument("--only", default=None, help="comma-separated grid names")
    ap.add_argument("--target", type=float, default=0.15,
                    help="largest |predicted / measured - 1| of samples/s that passes")
    ap.add_argument("--list", action="store_true")
    args = ap.parse_args(argv)
    if args.list:
        for g in GRIDS:
            print("%-10s %s" % (g["name"], g["covers"]))
        return 0
    if args.rounds < 1:
        ap.error("--rounds >= 1")
    names = set(args.only.split(",")) if args.only else None
    unknown = names - {g["name"] for g in GRIDS} if names else set()
    if unknown:
        ap.error("unknown grid(s): %s" % ", ".join(sorted(unknown)))
    out_dir = args.out or os.path.join(args.build, "eval", "grid")
    try:
        runner = Runner(args.python, os.path.abspath(args.build), os.path.abspath(out_dir))
    except Broken as exc:
        print("grid_check: %s" % exc, file=sys.stderr)
        return 2
    results, broken, skipped = [], [], []
    started = time.monotonic()
    for grid in GRIDS:
        if names and grid["name"] not in names:
            continue
        if grid.get("requires") and not runner.has(grid["requires"]):
            skipped.append(grid["name"])
            print("%s skipped: %s is not installed for %s" % (
                grid["name"], grid["requires"], args.python))
            continue
        try:
            r = judge(run_grid(runner, grid, args.rounds), args.target)
        except Broken as exc:
            broken.append(str(exc))
            print("%s BROKEN: %s" % (grid["name"], exc))
            continue
        results.append(r)
        print_grid(r)
    doc = dict(target=args.target, rounds=args.rounds, python=args.python,
               elapsed_s=time.monotonic() - started, results=results, broken=broken,
               skipped=skipped)
    with open(os.path.join(runner.out_dir, "grid.json"), "w") as f:
        json.dump(doc, f, indent=1)
    print("grid: %s%s%s" % (
        "; ".join("%s %d/9 points within %.0f%%%s, best %s" % (
            r["name"], r["points_passed"], 100 * args.target,
            " (+%d on a busy machine)" % r["points_suspect"] if r["points_suspect"] else "",
            "right" if r["best_gap"] >= -BEST_WITHIN else "off by %.0f%%" % (-100 * r["best_gap"]))
            for r in results) or "no grid run",
        "; %d broken" % len(broken) if broken else "",
        "; %d skipped (%s)" % (len(skipped), ", ".join(skipped)) if skipped else ""))
    if broken:
        return 2
    return 0 if all(r["passed"] for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
