"""dlbn's ground-truth scenario suite (`make eval`).

For every scenario of scenarios.py, eval_workload.py runs three ways, in
rounds (real, replay, preload; real, replay, preload; ...), one run at a
time (parallel runs corrupt timings on 2 cores):
  real     the DataLoader loop, no preload;
  replay   the same loop over cached batches, no preload (same kernels,
           copies, syncs and host work);
  preload  the real loop under LD_PRELOAD=libdlbn.so, then
           dlbn-analyze --format json on its trace.
S = median real window / median replay window (the window: see
eval_workload.py; the steps the analyzer's window spans).  predicted and
verdict come from the analyzer on round 1's trace (what a user gets from one
run; later rounds are kept in results.json).  overhead = median preload
window / median real window; S_own = round 1's preload window / median
replay window (the ratio its own prediction is made from).

A verdict is right when it is S's class (> 1.50 DETECTED, (1.10, 1.50]
POTENTIAL, <= 1.10 NOT_DETECTED), or either neighbour when S is within 5%
of a threshold.  The figures are the output, not a gate: the exit status is
1 only when a run broke (a workload or the analyzer failed), 0 otherwise.

Other programs' CPU use distorts timings on 2 cores: each run measures it
(foreign load, in cores); a scenario whose runs saw more than
BUSY_CORES is run again (once, up to MAX_RETRIES for the suite) and flagged
"busy" if it still was.

A run without the preload (Real or Replay) that crashes is run once more: a
spawn DataLoader worker has been seen to abort ("terminate called without an
active exception") in a plain run, where dlbn is not even loaded.  Such
reruns are listed in the summary and results.json.  A crash with the preload
is never rerun: it breaks the scenario.
"""

import argparse
import datetime
import hashlib
import json
import os
import platform
import shutil
import socket
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
from scenarios import SCENARIOS  # noqa: E402

DETECTED_ABOVE = 1.50
POTENTIAL_ABOVE = 1.10
NEAR = 0.05            # "within 5% of a threshold"
BUSY_CORES = 0.5       # foreign load above which a scenario's timings are suspect
MAX_RETRIES = 4        # scenario re-runs for a busy machine, whole suite
RUN_TIMEOUT_S = 180
PREDICTION_BUDGET = 0.10  # DESIGN section 8: predicted within 10% of measured


def speedup_class(s):
    if s > DETECTED_ABOVE:
        return "DETECTED"
    if s > POTENTIAL_ABOVE:
        return "POTENTIAL"
    return "NOT_DETECTED"


def acceptable_verdicts(s):
    """S's class, plus the neighbour across any threshold S is within 5% of."""
    ok = {speedup_class(s)}
    for threshold, (low, high) in ((POTENTIAL_ABOVE, ("NOT_DETECTED", "POTENTIAL")),
                                   (DETECTED_ABOVE, ("POTENTIAL", "DETECTED"))):
        if abs(s / threshold - 1.0) <= NEAR:
            ok.update((low, high))
    return ok


def expected_text(s):
    classes = acceptable_verdicts(s)
    main = speedup_class(s)
    others = sorted(classes - {main})
    return main + "".join("|" + o for o in others)


class Broken(Exception):
    """A run that did not produce its figures."""


class Runner:
    def __init__(self, build, python, out_dir):
        self.build = build
        self.python = python
        self.out_dir = out_dir
        self.lib = os.path.join(build, "libdlbn.so")
        self.plain_reruns = []  # "tag: first stderr line" of crashed plain runs
        self.analyzer = os.path.join(build, "dlbn-analyze")
        self.workload = os.path.join(HERE, "eval_workload.py")
        sim = os.path.join(build, "tests", "simcuda")
        env = {k: v for k, v in os.environ.items()
               if not k.startswith("DLBN_") and k not in ("LD_PRELOAD", "PYTHONPATH")}
        env["PYTHONUNBUFFERED"] = "1"
        # The runtime reach path dlopen()s libcuda.so.1 by soname, like libcudart.
        old = env.get("LD_LIBRARY_PATH")
        env["LD_LIBRARY_PATH"] = sim + (":" + old if old else "")
        self.env = env

    def snapshot(self):
        """Copy libdlbn.so (with its dlbn-python/ bootstrap, which it finds
        beside itself) and dlbn-analyze into OUT/bin and use the copies: a
        rebuild during the run (a shared tree) must not mix versions."""
        bin_dir = os.path.join(self.out_dir, "bin")
        if os.path.isdir(bin_dir):
            shutil.rmtree(bin_dir)
        os.makedirs(bin_dir)
        shutil.copy2(self.lib, bin_dir)
        shutil.copy2(self.analyzer, bin_dir)
        boot = os.path.join(self.build, "dlbn-python")
        if os.path.isdir(boot):
            shutil.copytree(boot, os.path.join(bin_dir, "dlbn-python"))
        info = {}
        for path in (self.lib, self.analyzer):
            with open(path, "rb") as f:
                info[os.path.basename(path)] = {
                    "sha256": hashlib.sha256(f.read()).hexdigest()[:16],
                    "built": datetime.datetime.fromtimestamp(
                        os.path.getmtime(path), datetime.timezone.utc).strftime("%H:%M:%S")}
        self.lib = os.path.join(bin_dir, "libdlbn.so")
        self.analyzer = os.path.join(bin_dir, "dlbn-analyze")
        return info

    def check_built(self):
        need = [self.lib, self.analyzer,
                os.path.join(self.build, "tests", "simcuda", "libcuda.so.1"),
                os.path.join(self.build, "tests", "simcuda", "libsimrt.so"),
                os.path.join(self.build, "tests", "simcuda", "libsimrt_direct.so")]
        missing = [p for p in need if not os.path.exists(p)]
        if missing:
            raise SystemExit("eval: not built: %s (run make all)" % ", ".join(missing))

    def run(self, scenario, kind, round_no):
        """One workload run; returns its record (plus analysis for preload)."""
        tag = "%s-%s-r%d" % (scenario["name"], kind, round_no)
        json_out = os.path.join(self.out_dir, "runs", tag + ".json")
        trace = os.path.join(self.out_dir, "traces", tag + ".bin")
        for path in (json_out, trace):
            if os.path.exists(path):
                os.unlink(path)
        env = dict(self.env)
        mode = "replay" if kind == "replay" else "real"
        if kind == "preload":
            env["LD_PRELOAD"] = self.lib
            env["DLBN_OUTPUT"] = trace
        cmd = [self.python, self.workload, "--mode", mode, "--json-out", json_out]
        cmd += scenario["args"]
        for attempt in (1, 2):
            try:
                proc = subprocess.run(cmd, env=env, cwd=self.out_dir, capture_output=True,
                                      text=True, timeout=RUN_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                raise Broken("%s: timed out after %d s" % (tag, RUN_TIMEOUT_S))
            crashed = proc.returncode != 0 or not os.path.exists(json_out)
            if not crashed or kind == "preload" or attempt == 2:
                break
            lines = [x for x in proc.stderr.splitlines() if x.strip()]
            self.plain_reruns.append("%s: exited %d (%s)" % (
                tag, proc.returncode, lines[0] if lines else "no stderr"))
            print("  %s: crashed without dlbn (exit %d), running it again" % (
                tag, proc.returncode), flush=True)
        if proc.returncode != 0 or not os.path.exists(json_out):
            raise Broken("%s: workload exited %d\n  cmd: %s\n  stderr: %s" % (
                tag, proc.returncode, " ".join(cmd), proc.stderr[-1500:]))
        with open(json_out) as f:
            record = json.load(f)
        if not record.get("window_s") or record["window_s"] <= 0:
            raise Broken("%s: no steady-state window (%s steps)" % (tag, record.get("steps")))
        result = {"window_s": record["window_s"],
                  "fetch_window_s": record["fetch_window_s"],
                  "steps": record["steps"],
                  "runq_window_s": record.get("runq_window_s"),
                  "foreign_load_cores": record["foreign_load_cores"]}
        if kind == "preload":
            result["trace"] = shown(trace)
            result["analysis"] = self.analyze(tag, trace)
        return result

    def analyze(self, tag, trace):
        if not os.path.exists(trace):
            raise Broken("%s: no trace written at %s" % (tag, trace))
        proc = subprocess.run([self.analyzer, "--format", "json", trace],
                              capture_output=True, text=True, timeout=120)
        if proc.returncode != 0:
            raise Broken("%s: dlbn-analyze exited %d: %s" % (tag, proc.returncode,
                                                              proc.stderr[-1500:]))
        try:
            return json.loads(proc.stdout)
        except ValueError as exc:
            raise Broken("%s: dlbn-analyze printed invalid JSON: %s" % (tag, exc))


def summarise_analysis(a):
    gpu_win = (a.get("gpu") or {}).get("window") or {}
    return {"verdict": a.get("verdict"),
            "predicted": a.get("predicted_speedup"),
            "view": a.get("view"),
            "path": a.get("path"),
            "cause": a.get("cause"),
            "steps": a.get("steps"),
            "wall_s": (a.get("window") or {}).get("wall_s"),
            "stall_s": (a.get("loader_wait") or {}).get("stall_s"),
            "exposed_s": (a.get("loader_wait") or {}).get("exposed_s"),
            "gpu_wait_busy_s": gpu_win.get("wait_gpu_busy_s"),
            "reasons": a.get("reasons"),
            "warnings": a.get("warnings")}


def run_scenario(runner, scenario, rounds):
    runs = {"real": [], "replay": [], "preload": []}
    for r in range(1, rounds + 1):
        for kind in ("real", "replay", "preload"):
            runs[kind].append(runner.run(scenario, kind, r))
    real = statistics.median(x["window_s"] for x in runs["real"])
    replay = statistics.median(x["window_s"] for x in runs["replay"])
    preload = statistics.median(x["window_s"] for x in runs["preload"])
    S = real / replay
    analyses = [summarise_analysis(x.pop("analysis")) for x in runs["preload"]]
    first = analyses[0]
    predicted = first["predicted"]
    verdict = first["verdict"]
    offcpu = {}
    for kind, rs in runs.items():
        fr = [x["runq_window_s"] / x["fetch_window_s"] for x in rs
              if x["runq_window_s"] is not None and x["fetch_window_s"]]
        offcpu[kind] = statistics.median(fr) if fr else None
    loads = [x["foreign_load_cores"] for k in runs for x in runs[k]
             if x["foreign_load_cores"] is not None]
    return {
        "name": scenario["name"],
        "covers": scenario["covers"],
        "built_for": scenario["built_for"],
        "args": scenario["args"],
        "real_s": real, "replay_s": replay, "preload_s": preload,
        "S": S,
        "predicted": predicted,
        "expected": expected_text(S),
        "verdict": verdict,
        "right": verdict in acceptable_verdicts(S),
        "error": (predicted / S - 1.0) if isinstance(predicted, (int, float)) else None,
        "overhead": preload / real,
        # The round-1 preload run's own Real/Replay ratio: what its prediction
        # is made from, free of run-to-run differences between Real runs.
        "S_own": runs["preload"][0]["window_s"] / replay,
        "foreign_load_max": max(loads) if loads else None,
        "loop_runq_fraction": offcpu,
        "analysis": first,
        "later_rounds": analyses[1:],
        "runs": runs,
    }


def fmt(x, spec):
    return spec % x if isinstance(x, (int, float)) else "-"


def print_table(results, out=sys.stdout):
    head = "%-22s %6s %9s %-24s %-13s %-6s %8s %6s  %s" % (
        "scenario", "S", "predicted", "expected", "verdict", "right?", "overhead", "S_own",
        "note")
    print(head, file=out)
    print("-" * len(head), file=out)
    for r in results:
        if r.get("broken"):
            print("%-22s BROKEN: %s" % (r["name"], r["broken"].splitlines()[0]), file=out)
            continue
        notes = []
        if r["foreign_load_max"] is not None and r["foreign_load_max"] > BUSY_CORES:
            notes.append("busy %.1f cores" % r["foreign_load_max"])
        runq = r["loop_runq_fraction"]
        if (runq.get("real") or 0) > 0.10:
            notes.append("loop runnable-not-running %.0f%% real, %.0f%% replay" % (
                100 * runq["real"], 100 * (runq.get("replay") or 0)))
        for k, later in enumerate(r["later_rounds"], 2):
            if later["verdict"] != r["verdict"]:
                notes.append("round %d: %s %s" % (k, later["verdict"],
                                                  fmt(later["predicted"], "%.2f")))
        print("%-22s %6.2f %9s %-24s %-13s %-6s %8s %6.2f  %s" % (
            r["name"], r["S"], fmt(r["predicted"], "%.2f"), r["expected"], r["verdict"],
            "yes" if r["right"] else "WRONG", fmt((r["overhead"] - 1) * 100, "%+.1f%%"),
            r["S_own"], "; ".join(notes)), file=out)


def markdown_table(results):
    """The table as Markdown (docs/EVAL.md carries the latest one)."""
    rows = ["| scenario | S | predicted | expected | verdict | right? | overhead | S_own | note |",
            "|---|---:|---:|---|---|---|---:|---:|---|"]
    for r in results:
        if r.get("broken"):
            rows.append("| %s | | | | BROKEN | | | | %s |" % (
                r["name"], r["broken"].splitlines()[0].replace("|", "/")))
            continue
        runq = r["loop_runq_fraction"]
        note = []
        if r["foreign_load_max"] is not None and r["foreign_load_max"] > BUSY_CORES:
            note.append("busy %.1f cores" % r["foreign_load_max"])
        if (runq.get("real") or 0) > 0.10:
            note.append("loop off-CPU %.0f%% real / %.0f%% replay" % (
                100 * runq["real"], 100 * (runq.get("replay") or 0)))
        rows.append("| %s | %.2f | %s | %s | %s | %s | %s | %.2f | %s |" % (
            r["name"], r["S"], fmt(r["predicted"], "%.2f"), r["expected"].replace("|", " or "),
            r["verdict"], "yes" if r["right"] else "**WRONG**",
            fmt((r["overhead"] - 1) * 100, "%+.1f%%"), r["S_own"], "; ".join(note)))
    return "\n".join(rows) + "\n"


def summary_line(results):
    ok = [r for r in results if not r.get("broken")]
    right = sum(1 for r in ok if r["right"])
    errors = [abs(r["error"]) for r in ok if r["error"] is not None]
    overheads = [r["overhead"] - 1 for r in ok]
    line = "eval: %d/%d verdicts right" % (right, len(results))
    if errors:
        line += ", median |predicted/S - 1| = %.1f%%" % (100 * statistics.median(errors))
    if overheads:
        line += ", median overhead %+.1f%%" % (100 * statistics.median(overheads))
    broken = len(results) - len(ok)
    if broken:
        line += ", %d broken" % broken
    return line


def shown(path):
    """A path as printed: relative to the repository when inside it."""
    rel = os.path.relpath(path, ROOT)
    return path if rel.startswith("..") else rel


def machine_info(python):
    def read(path):
        try:
            with open(path) as f:
                return f.read()
        except OSError:
            return ""
    cpu = ""
    for line in read("/proc/cpuinfo").splitlines():
        if line.startswith("model name"):
            cpu = line.split(":", 1)[1].strip()
            break
    info = {"host": socket.gethostname(), "cpu": cpu, "cores": os.cpu_count(),
            "kernel": platform.release(), "python": platform.python_version(),
            "clocksource": read("/sys/devices/system/clocksource/clocksource0/"
                                "current_clocksource").strip()}
    try:
        out = subprocess.run([python, "-c", "import torch; print(torch.__version__)"],
                             capture_output=True, text=True, timeout=60)
        info["torch"] = out.stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        info["torch"] = None
    return info


def main(argv=None):
    ap = argparse.ArgumentParser(description="dlbn ground-truth scenario suite")
    ap.add_argument("--rounds", type=int, default=3,
                    help="real/replay/preload rounds per scenario (default 3)")
    ap.add_argument("--only", default=None, help="comma-separated scenario names")
    ap.add_argument("--list", action="store_true", help="list the scenarios and exit")
    ap.add_argument("--build", default=os.environ.get("BUILD", "build"))
    ap.add_argument("--out", default=None, help="output directory (default BUILD/eval)")
    args = ap.parse_args(argv)
    if args.list:
        for s in SCENARIOS:
            print("%-22s %s" % (s["name"], s["covers"]))
        return 0
    if args.rounds < 1:
        ap.error("--rounds must be >= 1")
    build = args.build if os.path.isabs(args.build) else os.path.join(ROOT, args.build)
    out_dir = os.path.abspath(args.out or os.path.join(build, "eval"))
    for sub in ("runs", "traces"):
        os.makedirs(os.path.join(out_dir, sub), exist_ok=True)
    scenarios = SCENARIOS
    if args.only:
        wanted = args.only.split(",")
        unknown = [w for w in wanted if w not in {s["name"] for s in SCENARIOS}]
        if unknown:
            ap.error("unknown scenario(s): %s (see --list)" % ", ".join(unknown))
        scenarios = [s for s in SCENARIOS if s["name"] in wanted]
    python = os.environ.get("PYTHON") or sys.executable
    runner = Runner(build, python, out_dir)
    runner.check_built()
    binaries = runner.snapshot()

    started = time.monotonic()
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    print("eval: %d scenarios x %d rounds x (real, replay, preload); output in %s" % (
        len(scenarios), args.rounds, shown(out_dir)), flush=True)
    results = []
    retries = 0
    for scenario in scenarios:
        t0 = time.monotonic()
        for attempt in (1, 2):
            try:
                result = run_scenario(runner, scenario, args.rounds)
            except Broken as exc:
                result = {"name": scenario["name"], "broken": str(exc)}
                break
            busy = (result["foreign_load_max"] or 0) > BUSY_CORES
            if not busy or retries >= MAX_RETRIES or attempt == 2:
                break
            retries += 1
            print("  %s: machine busy (%.1f cores of other work), running it again" % (
                scenario["name"], result["foreign_load_max"]), flush=True)
        results.append(result)
        if result.get("broken"):
            print("  %-22s BROKEN (%.0f s)\n%s" % (scenario["name"], time.monotonic() - t0,
                                                  result["broken"]), flush=True)
        else:
            print("  %-22s S %.2f  predicted %s  %s  %s (%.0f s)" % (
                result["name"], result["S"], fmt(result["predicted"], "%.2f"),
                result["verdict"], "right" if result["right"] else "WRONG",
                time.monotonic() - t0), flush=True)
    elapsed = time.monotonic() - started

    print()
    print_table(results)
    line = summary_line(results)
    wrong = [r["name"] for r in results if not r.get("broken") and not r["right"]]
    off = ["%s (%+.0f%%)" % (r["name"], 100 * r["error"]) for r in results
           if not r.get("broken") and r["error"] is not None
           and abs(r["error"]) > PREDICTION_BUDGET]
    broken = [r["name"] for r in results if r.get("broken")]
    print()
    if wrong:
        print("eval: WRONG verdicts: %s" % ", ".join(wrong))
    if off:
        print("eval: predicted speedup off by more than %.0f%% of S (DESIGN budget): %s" % (
            100 * PREDICTION_BUDGET, ", ".join(off)))
    if broken:
        print("eval: BROKEN runs: %s" % ", ".join(broken))
    if runner.plain_reruns:
        print("eval: runs without dlbn that crashed and were run again: %s" % (
            "; ".join(runner.plain_reruns)))
    print("%s (%.0f s)" % (line, elapsed))

    doc = {"when": stamp, "machine": machine_info(python), "binaries": binaries, "rounds": args.rounds,
           "elapsed_s": elapsed, "summary": line, "wrong": wrong, "off_budget": off, "broken": broken,
           "plain_reruns": runner.plain_reruns,
           "thresholds": {"detected_above": DETECTED_ABOVE,
                          "potential_above": POTENTIAL_ABOVE, "near": NEAR},
           "scenarios": results}
    path = os.path.join(out_dir, "results.json")
    with open(path, "w") as f:
        json.dump(doc, f, indent=1)
    m = doc["machine"]
    with open(os.path.join(out_dir, "results.md"), "w") as f:
        f.write("Run %s on %s (%s, %d cores, Linux %s, Python %s, torch %s), "
                "%d round(s), %.0f s.\n\n" % (
                    stamp, m["host"], m["cpu"], m["cores"] or 0, m["kernel"], m["python"],
                    m["torch"], args.rounds, elapsed))
        f.write("Binaries (copied at the start of the run): %s.\n\n" % ", ".join(
            "%s sha256 %s… built %s UTC" % (name, b["sha256"], b["built"])
            for name, b in binaries.items()))
        f.write(markdown_table(results))
        f.write("\n`%s`\n" % line)
        if wrong:
            f.write("\nWrong verdicts: %s.\n" % ", ".join(wrong))
        if off:
            f.write("\nPredicted speedup off by more than %.0f%% of S (DESIGN section 8 "
                    "budget): %s.\n" % (100 * PREDICTION_BUDGET, ", ".join(off)))
    print("eval: results in %s (and results.md)" % shown(path))
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main())
