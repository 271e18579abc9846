"""whatif_check.py - ground truth for dlbn-analyze --what-if: run an eval
workload with setting A under the preload, ask
--what-if what setting B would give, run B, and compare the predicted with
the measured step time.

    whatif_check.py [--python PY] [--build DIR] [--out DIR] [--rounds N]
                    [--only NAME[,NAME]] [--target 0.10] [--list]

Checks (tests/perf/eval/eval_workload.py, its loader from tests/e2e/workload.py,
GPU work on the simulated driver's virtual timeline):
  more_workers    input-bound with free cores: 1 worker sleeping 20 ms per
                  batch (storage), GPU 8 ms per step; B = the fewest workers
                  the curve says reach the best step.
  persistent      non-persistent workers over 5 epochs of 12 steps, GPU 8 ms
                  and a sync each step; B = persistent_workers=True.
  fewer_workers   CPU-saturated: 4 workers burning 12 ms of CPU per batch on
                  a 2-core machine; B = the fewest workers the curve gives
                  the same step with.
  dali_threads    DALI's CPU pipeline (tests/support/pipelines/other_loaders.py,
                  input preset): A = 2 threads, B = num_threads=1 (its
                  operators' ranges split among the threads).
  nodes_threads   torchdata.nodes with 2 thread workers sleeping 5 ms per
                  sample (input preset); B = 4 threads.
  cow_knee        copy-on-read without a limit, the run of docs/EVAL.md
                  ("Memory"): 3 million Python str, 2 workers sleeping
                  12 ms a sample, batches of 8;
                  B = the advice's count, where each worker's copies of the
                  pages it reads cost kernel CPU on the 2 cores (the model
                  that once predicted 36% too fast there); bound 15%.
  memory_limit    copy-on-read (tests/e2e/memory_workload.py: a dataset of
                  Python str that each worker copies as it reads it), 2
                  workers sleeping 8 ms a sample, recorded inside a memory
                  cgroup sized from an unlimited calibration run to hold half
                  the extra workers its what-if wants; B = the advice's count
                  (it must be predicted to fit), run inside the same limit:
                  an OOM kill breaks the check; the bound is 15% (the memory
                  work's own: the recommended setting within 15% inside the
                  limit), not --target.  Needs root and a writable memory
                  cgroup (tests/e2e/e2e_limits.py); skipped, said, without.
The last two need DALI / torchdata.nodes (torch 2.x) and are skipped, said,
where the interpreter lacks them.
The measured step time of B is the workload's own clock (window_s over its
steady-state window: done[k0-1] .. done[last], k0 = prefetch depth + 1,
the analyzer's window), never dlbn's; with --rounds N, A and B run N times
each and the medians of the predictions and of the measurements compare
(B is read off the first A's curve).  Each result line gives predicted, measured, the error and the other
CPU load seen during the run (foreign_load_cores): on a shared machine a
miss next to a high load is noise, not the model.

Output: a table on stdout and OUT/whatif.json (default build/eval/whatif).
Exit status: 0 every check within --target (a miss while other programs
used more than 0.5 cores is reported as noise and not counted, as eval.py
does); 1 a miss on a quiet machine; 2 a run broke.
Hook into make eval by running it after eval.py (see the report of the
what-if work: `/usr/bin/python3 tests/perf/eval/whatif_check.py --python "$PY"`).
"""

import argparse
import contextlib
import json
import math
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
WORKLOAD = os.path.join(HERE, "eval_workload.py")
MEMORY_WORKLOAD = os.path.join(ROOT, "tests", "e2e", "memory_workload.py")
OTHER_LOADERS = os.path.join(ROOT, "tests", "support", "pipelines", "other_loaders.py")
RUN_TIMEOUT_S = 180
BUSY_CORES = 0.5  # foreign load above which timings are suspect (as eval.py)

# A: the loop as traced; B: chosen from A's what-if (pick_b) unless fixed.
CHECKS = [
    dict(name="more_workers",
         covers="input-bound, free cores: 1 worker, 20 ms sleep per batch, GPU 8 ms",
         setting="num_workers",
         args=["--steps-per-epoch", "60", "--batch-size", "4", "--sample-ms", "5",
               "--kernel-us", "8000", "--h2d-kib", "64", "--host-ms", "1"],
         a=1, pick="best"),
    dict(name="persistent",
         covers="non-persistent workers, 5 epochs x 12 steps, GPU 8 ms, sync each step",
         setting="persistent_workers",
         args=["--epochs", "5", "--steps-per-epoch", "12", "--batch-size", "4",
               "--workers", "2", "--sample-ms", "3", "--kernel-us", "8000",
               "--sync", "step", "--h2d-kib", "64"],
         a=0, b=1),
    dict(name="fewer_workers",
         covers="CPU-saturated: 4 workers, 12 ms CPU per batch, 2 cores, GPU 2 ms",
         setting="num_workers",
         args=["--steps-per-epoch", "60", "--batch-size", "4", "--sample-cpu-ms", "3",
               "--kernel-us", "2000", "--host-ms", "1"],
         a=4, pick="fewest_same"),
    dict(name="dali_threads",
         covers="DALI CPU pipeline (decode, resize, normalize), 8 JPEGs a batch, GPU 5 ms",
         program=OTHER_LOADERS, requires="nvidia.dali.plugin.pytorch",
         setting="num_threads", args=["--loader", "dali", "--setting", "input"],
         a=2, b=1),
    dict(name="nodes_threads",
         covers="torchdata.nodes, thread workers sleeping 5 ms a sample, GPU 3 ms",
         program=OTHER_LOADERS, requires="torchdata.nodes",
         setting="num_workers", args=["--loader", "nodes-thread", "--setting", "input"],
         a=2, b=4),
    dict(name="memory_limit",
         covers="copy-on-read, 2 workers, inside a memory cgroup holding half the extra "
                "workers; B = the advice",
         program=MEMORY_WORKLOAD, setting="num_workers", limited=True, target=0.15,
         args=["--kind", "objects", "--items", "400000", "--touch", "200", "--sleep-ms", "8",
               "--cpu-ms", "1", "--batch-size", "8", "--steps", "240", "--step-ms", "3",
               "--sample-kib", "16"],
         a=2, pick="advice"),
    dict(name="cow_knee",
         covers="copy-on-read, 3M Python str, 2 workers sleeping 12 ms a sample, no limit; "
                "B = the advice (the copies' kernel CPU at its count)",
         program=MEMORY_WORKLOAD, setting="num_workers", target=0.15,
         args=["--kind", "objects", "--items", "3000000", "--touch", "64", "--sleep-ms", "12",
               "--cpu-ms", "1.8", "--batch-size", "8", "--steps", "400", "--step-ms", "1",
               "--sample-kib", "16"],
         a=2, pick="advice"),
]


class Broken(Exception):
    pass


class Skip(Exception):
    """The check cannot run here (no memory cgroup can be made)."""


@contextlib.contextmanager
def memory_cgroup(limit_bytes, tag):
    """tests/e2e/e2e_limits.py's MemoryCgroup outside pytest: where none can
    be made it raises Skip with the reason."""
    sys.path.insert(0, os.path.join(ROOT, "tests", "e2e"))
    try:
        import pytest
        from e2e_limits import MemoryCgroup
    except ImportError as exc:
        raise Skip("tests/e2e/e2e_limits.py cannot be loaded: %s" % exc)
    finally:
        sys.path.pop(0)
    try:
        with MemoryCgroup(limit_bytes, "whatif-" + tag) as cg:
            yield cg
    except pytest.skip.Exception as exc:
        raise Skip(str(exc))


def setting_args(setting, value):
    if setting in ("num_workers", "num_threads"):  # other_loaders.py: DALI's threads
        return ["--workers", str(value)]
    if setting == "persistent_workers":
        return ["--persistent"] if value else []
    raise ValueError(setting)


class Runner:
    def __init__(self, python, build, out_dir):
        # Runs start in out_dir: a relative interpreter path is the caller's.
        self.python = os.path.abspath(python) if os.sep in python else python
        self.build = build
        self.out_dir = out_dir
        self.lib = os.path.join(build, "libdlbn.so")
        self.analyzer = os.path.join(build, "dlbn-analyze")
        sim = os.path.join(build, "tests", "simcuda")
        for path in (self.lib, self.analyzer, os.path.join(sim, "libcuda.so.1")):
            if not os.path.exists(path):
                raise Broken("not built: %s (run make all)" % path)
        env = {k: v for k, v in os.environ.items()
               if not k.startswith("DLBN_") and k not in ("LD_PRELOAD", "PYTHONPATH")}
        env["PYTHONUNBUFFERED"] = "1"
        old = env.get("LD_LIBRARY_PATH")
        env["LD_LIBRARY_PATH"] = sim + (":" + old if old else "")
        self.env = env
        os.makedirs(out_dir, exist_ok=True)

    def has(self, module):
        proc = subprocess.run([self.python, "-c", "import " + module], env=self.env,
                              capture_output=True, timeout=RUN_TIMEOUT_S)
        return proc.returncode == 0

    def run(self, tag, args, preload, program=WORKLOAD, limit_bytes=None):
        """One run; with limit_bytes inside a memory cgroup of that limit,
        an OOM kill (or any failure) breaking the check."""
        if limit_bytes is not None:
            with memory_cgroup(limit_bytes, tag) as cg:
                r = self.run_wrapped(tag, args, preload, program, wrap=cg.wrap)
                kills = cg.oom_kills()
            if kills:
                raise Broken("%s: %d OOM kill(s) inside %.0f MiB" % (tag, kills,
                                                                   cg.limit_mib))
            r["limit_mib"] = cg.limit_mib
            return r
        return self.run_wrapped(tag, args, preload, program)

    def run_wrapped(self, tag, args, preload, program=WORKLOAD, wrap=None):
        json_out = os.path.join(self.out_dir, tag + ".json")
        trace = os.path.join(self.out_dir, tag + ".bin")
        for path in (json_out, trace):
            if os.path.exists(path):
                os.unlink(path)
        env = dict(self.env)
        if preload:
            env["LD_PRELOAD"] = self.lib
            env["DLBN_OUTPUT"] = trace
        cmd = [self.python, program, "--mode", "real", "--json-out", json_out] + args
        if wrap is not None:
            cmd = wrap(cmd)
        try:
            proc = subprocess.run(cmd, env=env, cwd=self.out_dir, capture_output=True,
                                  text=True, timeout=RUN_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            raise Broken("%s: timed out" % tag)
        if proc.returncode != 0 or not os.path.exists(json_out):
            raise Broken("%s: exited %d\n  cmd: %s\n  stderr: %s" % (
                tag, proc.returncode, " ".join(cmd), proc.stderr[-1500:]))
        with open(json_out) as f:
            record = json.load(f)
        steps = record["steps"] - record["window_first_step"]
        if not record.get("window_s") or steps < 2:
            raise Broken("%s: no steady-state window" % tag)
        return dict(step_ms=record["window_s"] * 1e3 / steps, steps=steps,
                    load=record.get("foreign_load_cores"), trace=trace if preload else None)

    def what_if(self, trace):
        proc = subprocess.run([self.analyzer, "--what-if", "--format", "json", trace],
                              capture_output=True, text=True, timeout=120)
        if proc.returncode != 0:
            raise Broken("dlbn-analyze %s exited %d: %s" % (trace, proc.returncode,
                                                           proc.stderr[-800:]))
        return json.loads(proc.stdout)


def rows_of(result, setting):
    return {r["value"]: r for r in result.get("what_if") or [] if r["setting"] == setting}


def pick_b(check, result):
    """B: fixed, the advice's count (it must be predicted to fit), or read
    off A's curve."""
    if "b" in check:
        return check["b"]
    if check["pick"] == "advice":
        advice = result.get("advice") or {}
        to = advice.get("to")
        row = rows_of(result, check["setting"]).get(to) or {}
        if not to or to == check["a"]:
            raise Broken("%s: no advice to change %s (%s)" % (check["name"], check["setting"],
                                                              advice))
        if row.get("fits") is not True:
            raise Broken("%s: the advice's %s=%s is not predicted to fit (%s)" % (
                check["name"], check["setting"], to, row))
        return to
    rows = rows_of(result, check["setting"])
    if not rows:
        raise Broken("%s: no what-if rows for %s (%s)" % (
            check["name"], check["setting"], (result.get("what_if_basis") or {}).get("why_not")))
    best = min(r["predicted_step_ms"] for r in rows.values())
    if check["pick"] == "best":
        b = min(v for v, r in rows.items() if r["predicted_step_ms"] <= best * 1.02 and v > 0)
        return b if b != check["a"] else b + 1
    # fewest_same: the fewest workers predicted within 5% of A's own step time
    a_ms = rows[check["a"]]["predicted_step_ms"]
    fewer = [v for v, r in rows.items()
             if 0 < v < check["a"] and r["predicted_step_ms"] <= a_ms * 1.05]
    return min(fewer) if fewer else check["a"] - 1


def limit_for(runner, check, a_args, program):
    """A memory limit that holds the training process and about half the
    extra workers an unlimited run's what-if asks for: from a calibration
    run, its held memory and a worker's own memory and copies."""
    cal = runner.run("%s-calibration" % check["name"], a_args, preload=True, program=program)
    result = runner.what_if(cal["trace"])
    memory = result.get("memory") or {}
    cow = memory.get("copy_on_write") or {}
    want = (result.get("advice") or {}).get("to")
    if not memory.get("held_mib") or cow.get("worker_base_mib") is None or not want or \
            want <= check["a"]:
        raise Broken("%s: the calibration run gives no limit to set (memory %s, advice %s)"
                     % (check["name"], {k: memory.get(k) for k in ("held_mib",)},
                        result.get("advice")))
    per_worker = cow["worker_base_mib"] + (cow.get("touched_mib") or 0)
    return (memory["held_mib"] + math.ceil((want - check["a"]) / 2.0) * per_worker) / 0.9 \
        * 1048576


def run_check(runner, check, rounds):
    name = check["name"]
    a_args = check["args"] + setting_args(check["setting"], check["a"])
    program = check.get("program", WORKLOAD)
    limit = limit_for(runner, check, a_args, program) if check.get("limited") else None
    a_runs, predictions = [], []
    for k in range(rounds):
        a = runner.run("%s-A-r%d" % (name, k), a_args, preload=True, program=program,
                       limit_bytes=limit)
        result = runner.what_if(a["trace"])
        if k == 0:
            first, b_value = result, pick_b(check, result)
        rows = rows_of(result, check["setting"])
        if b_value not in rows:
            raise Broken("%s: the what-if has no row %s=%s" % (name, check["setting"],
                                                              b_value))
        a_runs.append(a)
        predictions.append(rows[b_value]["predicted_step_ms"])
    result = first
    rows = rows_of(result, check["setting"])
    predicted = statistics.median(predictions)
    b_args = check["args"] + setting_args(check["setting"], b_value)
    b_runs = [runner.run("%s-B-r%d" % (name, k), b_args, preload=False, program=program,
                         limit_bytes=limit)
              for k in range(rounds)]
    measured = statistics.median(r["step_ms"] for r in b_runs)
    current = rows.get(check["a"], {})
    return dict(name=name, covers=check["covers"], setting=check["setting"],
                a_value=check["a"], a_measured_ms=statistics.median(r["step_ms"] for r in a_runs),
                a_model_ms=current.get("predicted_step_ms"), predictions=predictions,
                verdict=result.get("verdict"),
                b_value=b_value, predicted_ms=predicted, limited_by=rows[b_value]["limited_by"],
                measured_ms=measured, b_rounds=[r["step_ms"] for r in b_runs],
                error=predicted / measured - 1,
                load=[r["load"] for r in a_runs + b_runs],
                basis=result.get("what_if_basis"),
                limit_mib=limit / 1048576 if limit else None,
                b_memory_mib=rows[b_value].get("predicted_memory_mib"))


def fmt_load(loads):
    vals = [x for x in loads if isinstance(x, (int, float))]
    return "%.1f" % max(vals) if vals else "-"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--python", default=sys.executable)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--out", default=None, help="default BUILD/eval/whatif")
    ap.add_argument("--rounds", type=int, default=1,
                    help="runs of A and of B (medians of the predictions and measurements)")
    ap.add_argument("--only", default=None, help="comma-separated check names")
    ap.add_argument("--target", type=float, default=0.10,
                    help="largest |predicted / measured - 1| that passes")
    ap.add_argument("--list", action="store_true")
    args = ap.parse_args(argv)
    if args.list:
        for c in CHECKS:
            print("%-14s %s" % (c["name"], c["covers"]))
        return 0
    if args.rounds < 1:
        ap.error("--rounds >= 1")
    names = set(args.only.split(",")) if args.only else None
    unknown = names - {c["name"] for c in CHECKS} if names else set()
    if unknown:
        ap.error("unknown check(s): %s" % ", ".join(sorted(unknown)))
    out_dir = args.out or os.path.join(args.build, "eval", "whatif")
    try:
        runner = Runner(args.python, os.path.abspath(args.build), os.path.abspath(out_dir))
    except Broken as exc:
        print("whatif_check: %s" % exc, file=sys.stderr)
        return 2
    results, broken = [], []
    started = time.monotonic()
    print("%-14s %-22s %-22s %9s %9s %7s %-12s %5s" % (
        "check", "A (measured, model)", "B", "predicted", "measured", "error", "limited by",
        "load"))
    skipped = []
    for check in CHECKS:
        if names and check["name"] not in names:
            continue
        if check.get("requires") and not runner.has(check["requires"]):
            skipped.append(check["name"])
            print("%-14s skipped: %s is not installed for %s" % (
                check["name"], check["requires"], args.python))
            continue
        try:
            r = run_check(runner, check, args.rounds)
        except Skip as exc:
            skipped.append(check["name"])
            print("%-14s skipped: %s" % (check["name"], exc))
            continue
        except Broken as exc:
            broken.append(str(exc))
            print("%-14s BROKEN: %s" % (check["name"], exc))
            continue
        r["target"] = check.get("target", args.target)
        r["passed"] = abs(r["error"]) <= r["target"]
        loads = [x for x in r["load"] if isinstance(x, (int, float))]
        r["suspect"] = bool(loads) and max(loads) > BUSY_CORES
        results.append(r)
        a_model = ("%.2f" % r["a_model_ms"]) if r["a_model_ms"] else "-"
        print("%-14s %-22s %-22s %9.2f %9.2f %+6.1f%% %-12s %5s %s" % (
            r["name"], "%s=%s %.2f, %s" % (r["setting"][:11], r["a_value"], r["a_measured_ms"],
                                            a_model),
            "%s=%s" % (r["setting"], r["b_value"]), r["predicted_ms"], r["measured_ms"],
            r["error"] * 100, r["limited_by"], fmt_load(r["load"]),
            "ok" if r["passed"] else "miss (busy machine)" if r["suspect"] else "MISS"),
            flush=True)
    doc = dict(target=args.target, rounds=args.rounds, python=args.python,
               elapsed_s=time.monotonic() - started, results=results, broken=broken,
               skipped=skipped)
    with open(os.path.join(runner.out_dir, "whatif.json"), "w") as f:
        json.dump(doc, f, indent=1)
    passed = sum(r["passed"] for r in results)
    suspect = sum(1 for r in results if not r["passed"] and r["suspect"])
    own = sorted({r["target"] for r in results if r["target"] != args.target})
    print("what-if: %d/%d within %.0f%%%s of the measured step time%s%s%s" % (
        passed, len(results), args.target * 100,
        " (%s: %s)" % (", ".join(r["name"] for r in results if r["target"] != args.target),
                       ", ".join("%.0f%%" % (t * 100) for t in own)) if own else "",
        "; %d miss(es) on a busy machine (other programs used > %.1f cores): noise, not "
        "counted" % (suspect, BUSY_CORES) if suspect else "",
        "; %d broken" % len(broken) if broken else "",
        "; %d skipped (%s)" % (len(skipped), ", ".join(skipped)) if skipped else ""))
    if broken:
        return 2
    return 0 if passed + suspect == len(results) else 1


if __name__ == "__main__":
    sys.exit(main())
