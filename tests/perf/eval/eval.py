"""dlbn's ground-truth scenario suite (`make eval`).

Every scenario of scenarios.py runs, on each PyTorch generation, in rounds,
one run at a time (parallel runs corrupt timings on 2 cores).  A round is
  real         the training loop, no preload;
  replay       the same loop over cached batches, no preload (same kernels,
               copies, syncs and host work): eval's own Replay run;
  preload      the real loop under LD_PRELOAD=libdlbn.so, then
               dlbn-analyze --format json on its trace;
and, in the first --ref-rounds rounds, the two other ways of measuring the
speedup:
  le-log       the loop over DALI's LoaderEvaluator(loader, mode="log"), no
               preload;
  le-replay    the loop over LoaderEvaluator(loader, mode="replay",
               num_cached_batches=N), no preload: the reference method the
               way its authors run it;
  dlbn-replay  the real loop under the preload with DLBN_REPLAY=N (what
               `dlbn-run --replay N` sets): dlbn's own Replay run, compared
               with the same round's preload trace by
               dlbn-analyze PRELOAD --baseline DLBN-REPLAY.
N is the scenario's replay_batches (8).  A scenario is eval_workload.py with
its args, or a program of its own (`program`, e.g. a real pipeline under
tests/support/pipelines/) that takes the same --mode and --json-out and
writes the same record.

Figures (windows: the steps the analyzer's window spans, eval_workload.py):
  S          median real window / median replay window (the ground truth the
             verdict is judged by);
  predicted  and verdict: the analyzer on one round's preload trace (what a
             user gets from one run): the round whose prediction is the
             median of the rounds', as S is a median over them (the other
             rounds are kept in results.json, and the table notes a verdict
             that differs and predictions more than 5% apart);
  S_dr       dlbn's measured speedup: dlbn-analyze's baseline
             measured_speedup (median over the reference rounds);
  S_dr_w     the same two runs on eval's clock: median preload window /
             median dlbn-replay window (whether dlbn's Replay run itself is
             faithful, apart from how the analyzer measures it);
  S_LE       median le-log window / median le-replay window;
  overhead   median preload window / median real window, over the rounds'
             runs and the extra pairs the overhead check adds (below);
  S_own      that round's preload window / median replay window (the ratio
             its own prediction is made from).
Where predicted, S_dr and S_LE are more than 5% apart (largest / smallest)
the table says so ("agree?" column) and results.json carries the spread.
dlbn's Replay caches what the loop iterates: a wrapper iterable around the
DataLoader (timm's PrefetchLoader) is replayed itself.  One it finds only at
run time keeps its work in the first epoch; its baseline then predicts
keeping what the wrapper cost in that run and says so, and S_dr is held
against that prediction.

A verdict is right when it is S's class (> 1.50 DETECTED, (1.10, 1.50]
POTENTIAL, <= 1.10 NOT_DETECTED), or either neighbour when S is within 5%
of a threshold.  The figures are the output, not a gate: the exit status is
1 only when a run broke (a workload or the analyzer failed) or a
generation's interpreter has no torch, 0 otherwise.

Generations: with PYTHON set, that interpreter only; otherwise torch 1.13
(.venv-torch1/bin/python, else /usr/bin/python3) and torch 2.x
(.venv/bin/python), each with its own output directory OUT/<torch-X.Y>/.
A scenario whose program exits 77 (its packages do not import under that
interpreter, tests/support/pipelines/loop.py) is listed as skipped for that
generation.  A scenario's `rounds` caps --rounds for it (the real-pipeline
scenarios take several seconds a run).

The overhead check (docs/DESIGN.md, "Budgets": within 1%): one run of a
real pipeline on 2 cores moves by more than that, so a scenario whose
overhead is over OVERHEAD_BUDGET after its rounds gets extra interleaved
pairs of a real run and a preloaded one (no analysis), up to
OVERHEAD_MAX_PAIRS in all, stopping once it is within the budget.  Then,
as `make bench` judges step time: within the budget "ok"; over it by no
more than the spread of the real runs (largest - smallest, over their
median) "unresolved", which no number of runs on this machine settles;
otherwise "over".

Other programs' CPU use distorts timings on 2 cores: each run measures it
(foreign load, in cores); a scenario whose runs saw more than
BUSY_CORES is run again (once, up to MAX_RETRIES per generation) and
flagged "busy" if it still was.

A run without the preload that crashes is run once more: a spawn DataLoader
worker has been seen to abort ("terminate called without an active
exception") in a plain run, where dlbn is not even loaded.  Such reruns are
listed in the summary and results.json.  A crash with the preload is never
rerun: it breaks the scenario.
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
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
sys.path.insert(0, HERE)
from scenarios import SCENARIOS  # noqa: E402

DETECTED_ABOVE = 1.50
POTENTIAL_ABOVE = 1.10
NEAR = 0.05            # "within 5% of a threshold"
AGREE = 0.05           # predicted, S_dr and S_LE agree when within 5% of each other
BUSY_CORES = 0.5       # foreign load above which a scenario's timings are suspect
MAX_RETRIES = 4        # scenario re-runs for a busy machine, per generation
RUN_TIMEOUT_S = 180
PREDICTION_BUDGET = 0.10  # docs/DESIGN.md, "Budgets": predicted within 10% of measured
OVERHEAD_BUDGET = 0.01    # docs/DESIGN.md, "Budgets": the loop's step time within 1%
OVERHEAD_MAX_PAIRS = 6    # real + preloaded runs per scenario for the overhead check
REPLAY_BATCHES = 8     # N: eval's replay, LoaderEvaluator's cache, DLBN_REPLAY
SKIP_STATUS = 77       # a scenario program's "does not apply here"

BASE_KINDS = ("real", "replay", "preload")
REF_KINDS = ("le-log", "le-replay", "dlbn-replay")
# The overhead check's extra pairs: a real run, and one preloaded whose
# trace is not analysed (and not kept).
EXTRA_KINDS = ("overhead-real", "overhead-preload")
PRELOADED = ("preload", "dlbn-replay", "overhead-preload")


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


def is_number(x):
    return isinstance(x, (int, float)) and not isinstance(x, bool) and x > 0


def median_or_none(values):
    values = [v for v in values if is_number(v)]
    return statistics.median(values) if values else None


class Broken(Exception):
    """A run that did not produce its figures."""


class Skipped(Exception):
    """A scenario that does not apply on this interpreter (exit 77)."""


class Snapshot:
    """Copies of libdlbn.so (with its dlbn-python/ bootstrap, which it finds
    beside itself) and dlbn-analyze in OUT/bin, used by every run: a rebuild
    during the run (a shared tree) must not mix versions."""

    def __init__(self, build, out_dir):
        self.build = build
        self.bin_dir = os.path.join(out_dir, "bin")
        self.lib = os.path.join(build, "libdlbn.so")
        self.analyzer = os.path.join(build, "dlbn-analyze")
        self.sim = os.path.join(build, "tests", "simcuda")
        self.info = {}

    def check_built(self):
        need = [self.lib, self.analyzer,
                os.path.join(self.sim, "libcuda.so.1"),
                os.path.join(self.sim, "libsimrt.so"),
                os.path.join(self.sim, "libsimrt_direct.so")]
        missing = [p for p in need if not os.path.exists(p)]
        if missing:
            raise SystemExit("eval: not built: %s (run make all)" % ", ".join(missing))

    def take(self):
        if os.path.isdir(self.bin_dir):
            shutil.rmtree(self.bin_dir)
        os.makedirs(self.bin_dir)
        shutil.copy2(self.lib, self.bin_dir)
        shutil.copy2(self.analyzer, self.bin_dir)
        boot = os.path.join(self.build, "dlbn-python")
        if os.path.isdir(boot):
            shutil.copytree(boot, os.path.join(self.bin_dir, "dlbn-python"))
        for path in (self.lib, self.analyzer):
            with open(path, "rb") as f:
                self.info[os.path.basename(path)] = {
                    "sha256": hashlib.sha256(f.read()).hexdigest()[:16],
                    "built": datetime.datetime.fromtimestamp(
                        os.path.getmtime(path), datetime.timezone.utc).strftime("%H:%M:%S")}
        self.lib = os.path.join(self.bin_dir, "libdlbn.so")
        self.analyzer = os.path.join(self.bin_dir, "dlbn-analyze")
        return self.info


class Runner:
    """The runs of one generation (one interpreter) into out_dir."""

    def __init__(self, snapshot, python, out_dir):
        self.snap = snapshot
        self.python = python
        self.out_dir = out_dir
        self.plain_reruns = []  # "tag: first stderr line" of crashed plain runs
        self.workload = os.path.join(HERE, "eval_workload.py")
        # The real-pipeline programs make (and cache) their data files here,
        # shared by the generations: made once, by the first run that needs them.
        self.data_dir = os.path.join(os.path.dirname(out_dir), "data")
        env = {k: v for k, v in os.environ.items()
               if not k.startswith("DLBN_") and k not in ("LD_PRELOAD", "PYTHONPATH")}
        env["PYTHONUNBUFFERED"] = "1"
        # The runtime reach path dlopen()s libcuda.so.1 by soname, like libcudart.
        old = env.get("LD_LIBRARY_PATH")
        env["LD_LIBRARY_PATH"] = snapshot.sim + (":" + old if old else "")
        self.env = env
        for sub in ("runs", "traces"):
            os.makedirs(os.path.join(out_dir, sub), exist_ok=True)

    def command(self, scenario, mode, json_out):
        program = scenario.get("program")
        path = os.path.join(ROOT, program) if program else self.workload
        cmd = [self.python, path, "--mode", mode, "--json-out", json_out]
        if program:
            cmd += ["--data-dir", self.data_dir]
        if scenario.get("replay_batches"):
            cmd += ["--replay-batches", str(scenario["replay_batches"])]
        return cmd + list(scenario["args"])

    def run(self, scenario, kind, round_no):
        """One run; returns its record summary (plus the trace for preloaded
        runs and the analysis for preload)."""
        tag = "%s-%s-r%d" % (scenario["name"], kind, round_no)
        json_out = os.path.join(self.out_dir, "runs", tag + ".json")
        trace = os.path.join(self.out_dir, "traces", tag + ".bin")
        for path in (json_out, trace):
            if os.path.exists(path):
                os.unlink(path)
        env = dict(self.env)
        env.update(scenario.get("env") or {})
        mode = "real" if kind in PRELOADED or kind == "overhead-real" else kind
        if kind in PRELOADED:
            env["LD_PRELOAD"] = self.snap.lib
            env["DLBN_OUTPUT"] = trace
        if kind == "dlbn-replay":
            env["DLBN_REPLAY"] = str(scenario.get("replay_batches") or REPLAY_BATCHES)
        cmd = self.command(scenario, mode, json_out)
        started = time.monotonic()
        for attempt in (1, 2):
            try:
                proc = subprocess.run(cmd, env=env, cwd=self.out_dir, capture_output=True,
                                      text=True, timeout=RUN_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                raise Broken("%s: timed out after %d s" % (tag, RUN_TIMEOUT_S))
            if proc.returncode == SKIP_STATUS:
                lines = [x for x in proc.stderr.splitlines() if x.strip()]
                raise Skipped(lines[-1] if lines else "exit %d (does not apply here)"
                              % SKIP_STATUS)
            crashed = proc.returncode != 0 or not os.path.exists(json_out)
            if not crashed or kind in PRELOADED or attempt == 2:
                break
            lines = [x for x in proc.stderr.splitlines() if x.strip()]
            self.plain_reruns.append("%s: exited %d (%s)" % (
                tag, proc.returncode, lines[0] if lines else "no stderr"))
            print("  %s: crashed without dlbn (exit %d), running it again" % (
                tag, proc.returncode), flush=True)
        if proc.returncode != 0 or not os.path.exists(json_out):
            raise Broken("%s: exited %d\n  cmd: %s\n  stderr: %s" % (
                tag, proc.returncode, " ".join(cmd), proc.stderr[-1500:]))
        with open(json_out) as f:
            record = json.load(f)
        if not record.get("window_s") or record["window_s"] <= 0:
            raise Broken("%s: no steady-state window (%s steps)" % (tag, record.get("steps")))
        result = {"window_s": record["window_s"],
                  "run_s": time.monotonic() - started,
                  "fetch_window_s": record.get("fetch_window_s"),
                  "steps": record["steps"],
                  "runq_window_s": record.get("runq_window_s"),
                  "gpu_busy_window_s": record.get("gpu_busy_window_s"),
                  "foreign_load_cores": record.get("foreign_load_cores")}
        if kind.startswith("le-"):
            totals = record.get("le_total_s") or []
            result["le_total_s"] = (sum(totals) if totals and all(is_number(t) for t in totals)
                                    else None)
            result["le_cache_s"] = record.get("le_cache_s")
            result["le_origin"] = record.get("le_origin")
        if kind in PRELOADED:
            if not os.path.exists(trace):
                raise Broken("%s: no trace written at %s" % (tag, trace))
            if kind == "overhead-preload":
                os.unlink(trace)
            else:
                result["trace"] = shown(trace)
        if kind == "preload":
            result["analysis"] = self.analyze(tag, [trace])
        return result

    def analyze(self, tag, args):
        proc = subprocess.run([self.snap.analyzer, "--format", "json"] + args,
                              capture_output=True, text=True, timeout=120)
        if proc.returncode != 0:
            raise Broken("%s: dlbn-analyze exited %d: %s" % (tag, proc.returncode,
                                                              proc.stderr[-1500:]))
        try:
            return json.loads(proc.stdout)
        except ValueError as exc:
            raise Broken("%s: dlbn-analyze printed invalid JSON: %s" % (tag, exc))

    def baseline(self, scenario, round_no, real_trace, replay_trace):
        """dlbn-analyze REAL --baseline REPLAY: dlbn's own measured speedup."""
        tag = "%s-baseline-r%d" % (scenario["name"], round_no)
        a = self.analyze(tag, [os.path.join(ROOT, real_trace) if not os.path.isabs(real_trace)
                               else real_trace, "--baseline",
                               os.path.join(ROOT, replay_trace)
                               if not os.path.isabs(replay_trace) else replay_trace])
        b = a.get("baseline") or {}
        return {"measured_speedup": b.get("measured_speedup"),
                "predicted_speedup": b.get("predicted_speedup"),
                "replay_batches": b.get("replay_batches"),
                "window": b.get("window"),
                "replay_own_predicted_speedup": b.get("replay_own_predicted_speedup"),
                "equivalent": b.get("equivalent"),
                "notes": b.get("notes")}


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


def disagreement(values):
    """How far apart the available speedups are: spread = largest /
    smallest - 1 over predicted, S_dr and S_LE; every pair (S included)
    with its ratio - 1."""
    have = {k: v for k, v in values.items() if is_number(v)}
    # dlbn's Replay keeps a wrapper iterable's work (the baseline says so and
    # predicts without it): S_dr is held against that prediction.
    dr = have.pop("predicted_dr", None)
    three = [have[k] for k in ("predicted", "S_dr", "S_LE") if k in have]
    spread = (max(three) / min(three) - 1.0) if len(three) >= 2 else None
    pairs = {}
    keys = [k for k in ("S", "predicted", "S_dr", "S_LE") if k in have]
    for i, a in enumerate(keys):
        for b in keys[i + 1:]:
            pairs["%s/%s" % (a, b)] = have[a] / have[b] - 1.0
    if dr is not None and "S_dr" in have:
        pairs["predicted/S_dr"] = dr / have["S_dr"] - 1.0
        rest = [have[k] for k in ("predicted", "S_LE") if k in have]
        spread = max(max(rest) / min(rest), max(dr, have["S_dr"]) / min(dr, have["S_dr"])) - 1.0
    over = [p for p, d in pairs.items()
            if abs(d) > AGREE and not p.startswith("S/")]
    return {"values": have, "spread": spread, "over_5pct": spread is not None
            and spread > AGREE, "pairs": pairs, "pairs_over_5pct": over}


def median_round(analyses):
    """The round whose prediction is the median of the rounds' (the lower
    one of an even count; round 1 when no round has a number): the
    prediction judged against S, which is a median over the same rounds.
    One run of a real pipeline on 2 cores moves by 10-20%, so one round's
    prediction against the median S measures the machine more than dlbn."""
    have = [(a["predicted"], k) for k, a in enumerate(analyses) if is_number(a.get("predicted"))]
    if not have:
        return 0
    have.sort()
    return have[(len(have) - 1) // 2][1]


def overhead_verdict(real, preload):
    """(overhead, spread, status) of these real and preloaded windows:
    median preload / median real, the real runs' (max - min) / median,
    and "ok", "unresolved" or "over" (the module's docstring)."""
    mid = statistics.median(real)
    overhead = statistics.median(preload) / mid
    spread = (max(real) - min(real)) / mid
    excess = overhead - 1.0
    if excess <= OVERHEAD_BUDGET:
        return overhead, spread, "ok"
    return overhead, spread, "unresolved" if excess <= spread else "over"


def overhead_check(runner, scenario, runs):
    """The overhead check: extra pairs while over the budget."""
    def windows():
        return ([x["window_s"] for x in runs["real"] + runs["overhead-real"]],
                [x["window_s"] for x in runs["preload"] + runs["overhead-preload"]])

    real, preload = windows()
    overhead, spread, status = overhead_verdict(real, preload)
    while status != "ok" and min(len(real), len(preload)) < OVERHEAD_MAX_PAIRS:
        n = len(runs["overhead-real"]) + 1
        for kind in EXTRA_KINDS:
            runs[kind].append(runner.run(scenario, kind, n))
        real, preload = windows()
        overhead, spread, status = overhead_verdict(real, preload)
    return {"overhead": overhead, "spread": spread, "status": status,
            "pairs": min(len(real), len(preload))}


def run_scenario(runner, scenario, rounds, ref_rounds):
    runs = {k: [] for k in BASE_KINDS + REF_KINDS + EXTRA_KINDS}
    ref_kinds = REF_KINDS if scenario.get("le", True) else ("dlbn-replay",)
    for r in range(1, rounds + 1):
        kinds = BASE_KINDS + (ref_kinds if r <= ref_rounds else ())
        for kind in kinds:
            runs[kind].append(runner.run(scenario, kind, r))
    check = overhead_check(runner, scenario, runs)
    real = statistics.median(x["window_s"] for x in runs["real"])
    replay = statistics.median(x["window_s"] for x in runs["replay"])
    preload = statistics.median(x["window_s"] for x in runs["preload"])
    S = real / replay
    analyses = [summarise_analysis(x.pop("analysis")) for x in runs["preload"]]
    for k, a in enumerate(analyses, 1):
        a["round"] = k
    chosen = median_round(analyses)
    judged = analyses[chosen]
    predicted = judged["predicted"]
    verdict = judged["verdict"]

    # The reference columns.
    le_log = median_or_none(x["window_s"] for x in runs["le-log"])
    le_replay = median_or_none(x["window_s"] for x in runs["le-replay"])
    S_LE = le_log / le_replay if le_log and le_replay else None
    le_tot_log = median_or_none(x.get("le_total_s") for x in runs["le-log"])
    le_tot_replay = median_or_none(x.get("le_total_s") for x in runs["le-replay"])
    baselines = []
    for k, dr in enumerate(runs["dlbn-replay"]):
        baselines.append(runner.baseline(scenario, k + 1, runs["preload"][k]["trace"],
                                         dr["trace"]))
    S_dr = median_or_none(b["measured_speedup"] for b in baselines
                          if (b.get("replay_batches") or 0) >= 1)
    predicted_dr = median_or_none(
        b["predicted_speedup"] for b in baselines
        if any("wrapper iterator" in n for n in b.get("notes") or []))
    dr_window = median_or_none(x["window_s"] for x in runs["dlbn-replay"])
    pre_ref = median_or_none(x["window_s"] for x in runs["preload"][:len(runs["dlbn-replay"])])

    # The trivial estimate: 1 / GPU utilization (kernel time queued by the
    # window's steps over the window), of the same runs dlbn analyses (the
    # preload runs): both are one-run estimates, judged by the same S.
    # Right when every idle moment of the GPU is loading; wrong on
    # host-bound loops.
    utils = [x["gpu_busy_window_s"] / x["window_s"] for x in runs["preload"]
             if is_number(x.get("gpu_busy_window_s")) and x["gpu_busy_window_s"] > 0]
    S_util = 1.0 / statistics.median(utils) if utils else None

    offcpu = {}
    for kind, rs in runs.items():
        fr = [x["runq_window_s"] / x["fetch_window_s"] for x in rs
              if x.get("runq_window_s") is not None and x.get("fetch_window_s")]
        offcpu[kind] = statistics.median(fr) if fr else None
    loads = [x["foreign_load_cores"] for k in runs for x in runs[k]
             if x.get("foreign_load_cores") is not None]
    return {
        "name": scenario["name"],
        "covers": scenario["covers"],
        "built_for": scenario["built_for"],
        "program": scenario.get("program"),
        "args": scenario["args"],
        "rounds": rounds,
        "real_s": real, "replay_s": replay, "preload_s": preload,
        "S": S,
        "predicted": predicted,
        "S_util": S_util,
        "error_util": (S_util / S - 1.0) if S_util else None,
        "S_dr": S_dr,
        "S_LE": S_LE,
        "le_applies": scenario.get("le", True),
        "agreement": disagreement({"S": S, "predicted": predicted, "S_dr": S_dr,
                                   "S_LE": S_LE, "predicted_dr": predicted_dr}),
        "expected": expected_text(S),
        "verdict": verdict,
        "right": verdict in acceptable_verdicts(S),
        "error": (predicted / S - 1.0) if is_number(predicted) else None,
        "overhead": check["overhead"],
        "overhead_check": check,
        # The chosen preload run's own Real/Replay ratio: what its prediction
        # is made from, free of run-to-run differences between Real runs.
        "S_own": runs["preload"][chosen]["window_s"] / replay,
        "reference": {
            "rounds": len(runs["le-log"]),
            "le_log_s": le_log, "le_replay_s": le_replay,
            # LoaderEvaluator's own figure: its start-to-end time of the
            # epochs (warm-up included, the GPU's queued work not awaited).
            "S_LE_total": (le_tot_log / le_tot_replay
                           if le_tot_log and le_tot_replay else None),
            "le_cache_s": median_or_none(x.get("le_cache_s") for x in runs["le-replay"]),
            "le_origin": (runs["le-log"] or [{}])[0].get("le_origin"),
            "dlbn_replay_s": dr_window,
            # dlbn's Replay run on eval's clock: preload window / its window.
            "S_dr_window": pre_ref / dr_window if pre_ref and dr_window else None,
            "baselines": baselines,
        },
        "foreign_load_max": max(loads) if loads else None,
        "loop_runq_fraction": offcpu,
        "analysis": judged,
        "predicted_round": chosen + 1,
        "predicted_rounds": [a["predicted"] for a in analyses],
        "other_rounds": [a for k, a in enumerate(analyses) if k != chosen],
        "runs": runs,
    }


def fmt(x, spec):
    return spec % x if is_number(x) or isinstance(x, (int, float)) else "-"


def le_text(r):
    """S_LE, or "n/a" where LoaderEvaluator cannot wrap the loader."""
    return fmt(r["S_LE"], "%.2f") if r.get("le_applies", True) else "n/a"


def agree_text(r):
    a = r.get("agreement") or {}
    if a.get("spread") is None:
        return "-"
    if a["spread"] >= 1.0:
        return "NO %.0fx" % (1.0 + a["spread"])
    return ("NO %.0f%%" if a["over_5pct"] else "yes %.0f%%") % (100 * a["spread"])


def real_spread(r):
    """How far apart the Real runs' windows were (largest / smallest - 1):
    the same work, so the machine's own run-to-run noise, which S (their
    median over the replay's) carries and no one-run prediction can follow."""
    windows = [x["window_s"] for x in (r.get("runs") or {}).get("real") or []
               if is_number(x.get("window_s")) and x["window_s"] > 0]
    return max(windows) / min(windows) - 1.0 if len(windows) > 1 else None


def notes_of(r, markdown=False):
    notes = []
    check = r.get("overhead_check") or {}
    status = check.get("status")
    if status in ("unresolved", "over"):
        if status == "over":
            status = "**OVER**" if markdown else "OVER"
        notes.append("overhead %s in %d pairs (real runs %.1f%% apart)" % (
            status, check["pairs"], 100 * check["spread"]))
    if r["foreign_load_max"] is not None and r["foreign_load_max"] > BUSY_CORES:
        notes.append("busy %.1f cores" % r["foreign_load_max"])
    runq = r["loop_runq_fraction"]
    if (runq.get("real") or 0) > 0.10:
        notes.append(("loop off-CPU %.0f%% real / %.0f%% replay" if markdown else
                      "loop runnable-not-running %.0f%% real, %.0f%% replay") % (
            100 * runq["real"], 100 * (runq.get("replay") or 0)))
    for other in r["other_rounds"]:
        if other["verdict"] != r["verdict"]:
            notes.append("round %d: %s %s" % (other.get("round", 0), other["verdict"],
                                              fmt(other["predicted"], "%.2f")))
    spread = real_spread(r)
    if spread is not None and spread > PREDICTION_BUDGET:
        notes.append("real runs %.0f%% apart" % (100 * spread))
    preds = [x for x in r.get("predicted_rounds") or [] if is_number(x)]
    if len(preds) > 1 and min(preds) > 0 and max(preds) / min(preds) > 1.0 + AGREE:
        notes.append("rounds predicted %.2f-%.2f" % (min(preds), max(preds)))
    for b in r["reference"]["baselines"]:
        if (b.get("replay_batches") or 0) < 1:
            notes.append("dlbn replay did not apply")
        elif b.get("equivalent") is False:
            notes.append("dlbn baseline: not equivalent")
    return notes


HEAD = ("scenario", "S", "predicted", "1/util", "S_dr", "S_dr_w", "S_LE", "agree?", "expected",
        "verdict", "right?", "overhead", "S_own", "note")


def print_table(results, out=sys.stdout):
    row = "%-22s %6s %9s %6s %6s %6s %6s %-9s %-24s %-13s %-6s %8s %6s  %s"
    head = row % HEAD
    print(head, file=out)
    print("-" * len(head), file=out)
    for r in results:
        if r.get("broken"):
            print("%-22s BROKEN: %s" % (r["name"], r["broken"].splitlines()[0]), file=out)
            continue
        if r.get("skipped"):
            print("%-22s skipped: %s" % (r["name"], r["skipped"]), file=out)
            continue
        print(row % (
            r["name"], fmt(r["S"], "%.2f"), fmt(r["predicted"], "%.2f"),
            fmt(r.get("S_util"), "%.2f"),
            fmt(r["S_dr"], "%.2f"), fmt(r["reference"]["S_dr_window"], "%.2f"),
            le_text(r), agree_text(r),
            r["expected"], r["verdict"], "yes" if r["right"] else "WRONG",
            fmt((r["overhead"] - 1) * 100, "%+.1f%%"), fmt(r["S_own"], "%.2f"),
            "; ".join(notes_of(r))), file=out)


def markdown_table(results):
    """The table as Markdown (docs/EVAL.md carries the latest one)."""
    rows = ["| " + " | ".join(HEAD) + " |",
            "|---|---:|---:|---:|---:|---:|---:|---|---|---|---|---:|---:|---|"]
    blank = " |" * (len(HEAD) - 3)
    for r in results:
        if r.get("broken"):
            rows.append("| %s | BROKEN%s %s |" % (
                r["name"], blank, r["broken"].splitlines()[0].replace("|", "/")))
            continue
        if r.get("skipped"):
            rows.append("| %s | skipped%s %s |" % (
                r["name"], blank, r["skipped"].replace("|", "/")))
            continue
        agree = agree_text(r)
        if agree.startswith("NO"):
            agree = "**%s**" % agree
        rows.append("| %s |" % " | ".join((
            r["name"], fmt(r["S"], "%.2f"), fmt(r["predicted"], "%.2f"),
            fmt(r.get("S_util"), "%.2f"),
            fmt(r["S_dr"], "%.2f"), fmt(r["reference"]["S_dr_window"], "%.2f"),
            le_text(r), agree,
            r["expected"].replace("|", " or "), r["verdict"],
            "yes" if r["right"] else "**WRONG**",
            fmt((r["overhead"] - 1) * 100, "%+.1f%%"), fmt(r["S_own"], "%.2f"),
            "; ".join(notes_of(r, markdown=True)))))
    return "\n".join(rows) + "\n"


def summary_line(label, results):
    ok = [r for r in results if not r.get("broken") and not r.get("skipped")]
    right = sum(1 for r in ok if r["right"])
    errors = [abs(r["error"]) for r in ok if r["error"] is not None]
    overheads = [r["overhead"] - 1 for r in ok]
    compared = [r for r in ok if (r.get("agreement") or {}).get("spread") is not None]
    line = "eval %s: %d/%d verdicts right" % (label, right, len(ok))
    if errors:
        line += ", median |predicted/S - 1| = %.1f%% (largest %.1f%%)" % (
            100 * statistics.median(errors), 100 * max(errors))
    util_errors = [abs(r["error_util"]) for r in ok if r.get("error_util") is not None]
    if util_errors:
        line += ", 1/GPU-util median %.1f%% (largest %.1f%%)" % (
            100 * statistics.median(util_errors), 100 * max(util_errors))
    if overheads:
        line += ", median overhead %+.1f%%" % (100 * statistics.median(overheads))
    if compared:
        agree = sum(1 for r in compared if not r["agreement"]["over_5pct"])
        line += ", predicted/S_dr/S_LE within 5%%: %d/%d" % (agree, len(compared))
    skipped = sum(1 for r in results if r.get("skipped"))
    if skipped:
        line += ", %d skipped" % skipped
    broken = sum(1 for r in results if r.get("broken"))
    if broken:
        line += ", %d broken" % broken
    return line


def shown(path):
    """A path as printed: relative to the repository when inside it."""
    rel = os.path.relpath(path, ROOT)
    return path if rel.startswith("..") else rel


def read_text(path):
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return ""


def machine_info():
    cpu = ""
    for line in read_text("/proc/cpuinfo").splitlines():
        if line.startswith("model name"):
            cpu = line.split(":", 1)[1].strip()
            break
    return {"host": socket.gethostname(), "cpu": cpu, "cores": os.cpu_count(),
            "kernel": platform.release(),
            "clocksource": read_text("/sys/devices/system/clocksource/clocksource0/"
                                     "current_clocksource").strip()}


def interpreter_info(python):
    """{"python": version, "torch": version or None}."""
    code = ("import platform\nprint(platform.python_version())\n"
            "try:\n    import torch\n    print(torch.__version__)\n"
            "except Exception as e:\n    print('')\n")
    try:
        out = subprocess.run([python, "-c", code], capture_output=True, text=True,
                             timeout=120).stdout.split("\n")
    except (OSError, subprocess.TimeoutExpired):
        return {"python": None, "torch": None}
    return {"python": out[0].strip() or None,
            "torch": (out[1].strip() if len(out) > 1 else "") or None}


def generations():
    """[(python, wanted)] : PYTHON alone, or both PyTorch generations."""
    python = os.environ.get("PYTHON")
    if python:
        return [(python, None)]
    torch1 = os.path.join(ROOT, ".venv-torch1", "bin", "python")
    if not os.access(torch1, os.X_OK):
        torch1 = "/usr/bin/python3"
    return [(torch1, "torch 1.13"), (os.path.join(ROOT, ".venv", "bin", "python"),
                                     "torch 2.x")]


def absolute_python(python):
    if os.sep in python:
        return os.path.abspath(python)
    return shutil.which(python) or python


def generation_label(torch_version, taken):
    parts = (torch_version or "").split("+")[0].split(".")
    label = "torch-" + ".".join(parts[:2]) if len(parts) >= 2 else "torch-unknown"
    base, k = label, 2
    while label in taken:
        label = "%s-%d" % (base, k)
        k += 1
    return label


def too_old(scenario, gen):
    """Why a scenario does not run on this generation's torch (its
    torch_min, with the reason), or None."""
    need = scenario.get("torch_min")
    have = gen["info"]["torch"] or "0"
    major = lambda v: tuple(int(x) for x in v.split("+")[0].split(".")[:2] if x.isdigit())
    if need and major(have) < major(need[0]):
        return "needs torch >= %s: %s" % need
    return None


def overhead_line(ok):
    """The overhead check's line: how many scenarios held the budget, and
    the others by status (None: no scenario ran)."""
    checked = [r for r in ok if r.get("overhead_check")]
    if not checked:
        return None
    by = {"unresolved": [], "over": []}
    for r in checked:
        c = r["overhead_check"]
        if c["status"] in by:
            by[c["status"]].append("%s (%+.1f%%, real runs %.1f%% apart, %d pairs)" % (
                r["name"], 100 * (c["overhead"] - 1), 100 * c["spread"], c["pairs"]))
    line = "overhead within %.0f%%: %d/%d" % (
        100 * OVERHEAD_BUDGET, len(checked) - len(by["unresolved"]) - len(by["over"]),
        len(checked))
    if by["unresolved"]:
        line += "; unresolved (inside the real runs' spread): " + ", ".join(by["unresolved"])
    if by["over"]:
        line += "; OVER: " + ", ".join(by["over"])
    return line


def replay_check(ok):
    """dlbn's own Replay run against the plain one, by their windows:
    `dlbn-run --replay` must run the loop as the reference Replay does, to
    the prediction's budget (S_dr also divides by another Real run, whose
    spread it carries).  The scenarios off, and the line saying how many
    held (None: no scenario ran dlbn's Replay)."""
    replayed = [r for r in ok if is_number(r["reference"].get("dlbn_replay_s")) and r["replay_s"]]
    off = ["%s (window %+.0f%%, S_dr/S %+.0f%%)" % (
        r["name"], 100 * (r["reference"]["dlbn_replay_s"] / r["replay_s"] - 1),
        100 * (r["S_dr"] / r["S"] - 1) if is_number(r.get("S_dr")) else 0)
        for r in replayed
        if abs(r["reference"]["dlbn_replay_s"] / r["replay_s"] - 1) > PREDICTION_BUDGET]
    if not replayed:
        return off, None
    return off, "dlbn's Replay run within %.0f%% of the plain Replay's window: %d/%d%s" % (
        100 * PREDICTION_BUDGET, len(replayed) - len(off), len(replayed),
        "; off: " + ", ".join(off) if off else "")


def run_generation(snap, gen, scenarios, args, out_dir):
    """Every scenario on one interpreter; returns its results document."""
    label, python = gen["label"], gen["python"]
    runner = Runner(snap, python, out_dir)
    started = time.monotonic()
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    plan = {}
    for scenario in scenarios:
        rounds = min(args.rounds, scenario.get("rounds", args.rounds))
        plan[rounds] = plan.get(rounds, 0) + 1
    print("eval %s: %s (Python %s, torch %s): %s of real, replay, preload, the first "
          "%d of them with le-log, le-replay, dlbn-replay; output in %s" % (
              label, python, gen["info"]["python"], gen["info"]["torch"],
              ", ".join("%d scenarios x %d round(s)" % (n, r)
                        for r, n in sorted(plan.items(), reverse=True)),
              args.ref_rounds, shown(out_dir)), flush=True)
    results = []
    retries = 0
    for scenario in scenarios:
        t0 = time.monotonic()
        rounds = min(args.rounds, scenario.get("rounds", args.rounds))
        why = too_old(scenario, gen)
        if why:
            result = {"name": scenario["name"], "skipped": why}
        else:
            for attempt in (1, 2):
                try:
                    result = run_scenario(runner, scenario, rounds, args.ref_rounds)
                    result["attempts"] = attempt
                except Broken as exc:
                    result = {"name": scenario["name"], "broken": str(exc)}
                    break
                except Skipped as exc:
                    result = {"name": scenario["name"], "skipped": str(exc)}
                    break
                busy = (result["foreign_load_max"] or 0) > BUSY_CORES
                if not busy or retries >= MAX_RETRIES or attempt == 2:
                    break
                retries += 1
                print("  %s: machine busy (%.1f cores of other work), running it again" % (
                    scenario["name"], result["foreign_load_max"]), flush=True)
        result["elapsed_s"] = time.monotonic() - t0
        results.append(result)
        if result.get("broken"):
            print("  %-22s BROKEN (%.0f s)\n%s" % (scenario["name"], result["elapsed_s"],
                                                  result["broken"]), flush=True)
        elif result.get("skipped"):
            print("  %-22s skipped: %s" % (scenario["name"], result["skipped"]), flush=True)
        else:
            print("  %-22s S %.2f  predicted %s  S_dr %s  S_LE %s  %s  %s (%.0f s)" % (
                result["name"], result["S"], fmt(result["predicted"], "%.2f"),
                fmt(result["S_dr"], "%.2f"), fmt(result["S_LE"], "%.2f"),
                result["verdict"], "right" if result["right"] else "WRONG",
                result["elapsed_s"]), flush=True)
    elapsed = time.monotonic() - started

    print()
    print("eval %s (%s, torch %s):" % (label, python, gen["info"]["torch"]))
    print_table(results)
    line = summary_line(label, results)
    ok = [r for r in results if not r.get("broken") and not r.get("skipped")]
    wrong = [r["name"] for r in ok if not r["right"]]
    off = ["%s (%+.0f%%%s)" % (r["name"], 100 * r["error"],
                               "; its real runs %.0f%% apart" % (100 * real_spread(r))
                               if (real_spread(r) or 0) > PREDICTION_BUDGET else "")
           for r in ok if r["error"] is not None and abs(r["error"]) > PREDICTION_BUDGET]
    replay_off, replay_line = replay_check(ok)
    over_line = overhead_line(ok)
    disagree = ["%s (%s)" % (r["name"], ", ".join(
        "%s %+.0f%%" % (p, 100 * r["agreement"]["pairs"][p])
        for p in r["agreement"]["pairs_over_5pct"])) for r in ok
        if r["agreement"]["over_5pct"]]
    broken = [r["name"] for r in results if r.get("broken")]
    skipped = [r["name"] for r in results if r.get("skipped")]
    print()
    if wrong:
        print("eval %s: WRONG verdicts: %s" % (label, ", ".join(wrong)))
    if off:
        print("eval %s: predicted speedup off by more than %.0f%% of S (docs/DESIGN.md budget): %s"
              % (label, 100 * PREDICTION_BUDGET, ", ".join(off)))
    if replay_line:
        print("eval %s: %s" % (label, replay_line))
    if over_line:
        print("eval %s: %s" % (label, over_line))
    if disagree:
        print("eval %s: predicted, S_dr and S_LE more than %.0f%% apart: %s" % (
            label, 100 * AGREE, "; ".join(disagree)))
    if skipped:
        print("eval %s: skipped here: %s" % (label, ", ".join(skipped)))
    if broken:
        print("eval %s: BROKEN runs: %s" % (label, ", ".join(broken)))
    if runner.plain_reruns:
        print("eval %s: runs without dlbn that crashed and were run again: %s" % (
            label, "; ".join(runner.plain_reruns)))
    print("%s (%.0f s)" % (line, elapsed))
    what_if = run_whatif_checks(snap, python, args, out_dir) if args.whatif else None
    if what_if and what_if.get("rc") == 2:
        broken.append("what-if checks")
    grid = run_grid_checks(snap, python, args, out_dir) if args.whatif else None
    if grid and grid.get("rc") == 2:
        broken.append("grid checks")

    doc = {"when": stamp, "generation": label, "interpreter": python,
           "machine": dict(machine_info(), **gen["info"]), "binaries": snap.info,
           "rounds": args.rounds, "ref_rounds": min(args.ref_rounds, args.rounds),
           "replay_batches": REPLAY_BATCHES,
           "elapsed_s": elapsed, "summary": line, "wrong": wrong, "off_budget": off,
           "replay_off": replay_off, "replay_line": replay_line,
           "overhead_line": over_line,
           "disagree": disagree, "skipped": skipped, "broken": broken,
           "plain_reruns": runner.plain_reruns,
           "thresholds": {"detected_above": DETECTED_ABOVE,
                          "potential_above": POTENTIAL_ABOVE, "near": NEAR,
                          "agree": AGREE},
           "scenarios": results, "what_if": what_if, "grid": grid}
    with open(os.path.join(out_dir, "results.json"), "w") as f:
        json.dump(doc, f, indent=1)
    with open(os.path.join(out_dir, "results.md"), "w") as f:
        f.write(results_markdown(doc))
    return doc


WHATIF_CHECK = os.path.join(os.path.dirname(os.path.abspath(__file__)), "whatif_check.py")


def run_check_script(script, name, prefix, snap, python, args, out_dir):
    """One of the check scripts on this generation, output in out_dir/name:
    its name.json with its summary line (the last starting with prefix)
    and exit status."""
    cdir = os.path.join(out_dir, name)
    cmd = [sys.executable, script, "--python", python, "--build", snap.build,
           "--rounds", str(min(args.rounds, 3)), "--out", cdir]
    print("eval: %s checks: %s" % (prefix.rstrip(":"), " ".join(
        shown(c) if os.path.isabs(c) else c for c in cmd)), flush=True)
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    print(proc.stdout, end="", flush=True)
    lines = [x for x in proc.stdout.splitlines() if x.startswith(prefix)]
    try:
        with open(os.path.join(cdir, name + ".json")) as f:
            doc = json.load(f)
    except (OSError, ValueError):
        doc = {}
    doc["summary"] = lines[-1] if lines else "%s no result (exit %d)" % (prefix,
                                                                         proc.returncode)
    doc["rc"] = proc.returncode
    return doc


def run_whatif_checks(snap, python, args, out_dir):
    """tests/perf/eval/whatif_check.py: --what-if's predictions checked by
    rerunning with the setting they predict for."""
    return run_check_script(WHATIF_CHECK, "whatif", "what-if:", snap, python, args, out_dir)


GRID_CHECK = os.path.join(os.path.dirname(os.path.abspath(__file__)), "grid_check.py")


def run_grid_checks(snap, python, args, out_dir):
    """tests/perf/eval/grid_check.py: the batch size x num_workers grid of
    --what-if against every point measured."""
    return run_check_script(GRID_CHECK, "grid", "grid:", snap, python, args, out_dir)


def grid_markdown(g):
    """The grid checks' points (grid_check.py's grid.json), or ""."""
    if not g or not g.get("results"):
        return "\n`%s`\n" % g["summary"] if g else ""
    rows = ["", "Grid checks (`tests/perf/eval/grid_check.py`): samples/s predicted by "
            "the `--what-if` grid of the traced setting A (given one calibration run of "
            "another batch size) against every point run without dlbn; \"A alone\": "
            "without the calibration run."]
    for r in g["results"]:
        rows += ["", "%s: %s; A = num_workers %d, batch_size %d; calibration %d x %d." % (
            r["name"], r["covers"], r["a"][0], r["a"][1], r["calibrate"][0],
            r["calibrate"][1]), "",
            "| num_workers | batch_size | measured/s | predicted/s | error | limited by | "
            "A alone/s | |", "|---:|---:|---:|---:|---:|---|---:|---|"]
        for p in r["rows"]:
            rows.append("| %d | %d | %.0f | %.0f%s | %+.1f%% | %s | %s | %s |" % (
                p["num_workers"], p["batch_size"], p["measured_per_s"], p["predicted_per_s"],
                " (best)" if p.get("best") else "", 100 * p["error"], p["limited_by"],
                "%.0f" % p["alone_per_s"] if p.get("alone_per_s") else "-",
                "ok" if p["passed"] else "miss (busy)" if p.get("suspect") else "MISS"))
    return "\n".join(rows) + "\n\n`%s`\n" % g["summary"]


def results_markdown(doc):
    m = doc["machine"]
    plan = {}
    for r in doc["scenarios"]:
        if r.get("rounds"):
            plan[r["rounds"]] = plan.get(r["rounds"], 0) + 1
    rounds = " + ".join("%d x %d" % (n, k) for k, n in sorted(plan.items(), reverse=True))
    text = ("Run %s on %s (%s, %d cores, Linux %s), %s: Python %s, torch %s; "
            "scenarios x rounds of real/replay/preload: %s, the first %d round(s) with "
            "le-log/le-replay/dlbn-replay; %.0f s.\n\n" % (
                doc["when"], m["host"], m["cpu"], m["cores"] or 0, m["kernel"],
                shown(doc["interpreter"]), m["python"], m["torch"], rounds or "none",
                doc["ref_rounds"], doc["elapsed_s"]))
    text += "Binaries (copied at the start of the run): %s.\n\n" % ", ".join(
        "%s sha256 %s… built %s UTC" % (name, b["sha256"], b["built"])
        for name, b in doc["binaries"].items())
    text += markdown_table(doc["scenarios"])
    text += "\n`%s`\n" % doc["summary"]
    if doc["wrong"]:
        text += "\nWrong verdicts: %s.\n" % ", ".join(doc["wrong"])
    if doc["off_budget"]:
        text += ("\nPredicted speedup off by more than %.0f%% of S (docs/DESIGN.md, "
                 "Budgets): %s.\n" % (100 * PREDICTION_BUDGET, ", ".join(doc["off_budget"])))
    if doc.get("replay_line"):
        text += "\n%s.\n" % doc["replay_line"]
    if doc.get("overhead_line"):
        text += "\nOverhead (docs/DESIGN.md, Budgets), %s.\n" % doc["overhead_line"]
    if doc["disagree"]:
        text += ("\nPredicted, S_dr and S_LE more than %.0f%% apart: %s.\n" % (
            100 * AGREE, "; ".join(doc["disagree"])))
    if doc["skipped"]:
        text += "\nSkipped on this interpreter: %s.\n" % "; ".join(
            "%s (%s)" % (r["name"], r["skipped"]) for r in doc["scenarios"]
            if r.get("skipped"))
    text += whatif_markdown(doc.get("what_if"))
    text += grid_markdown(doc.get("grid"))
    return text


def whatif_markdown(w):
    """The what-if checks' rows (whatif_check.py's whatif.json), or ""."""
    if not w or not w.get("results"):
        return "\n`%s`\n" % w["summary"] if w else ""
    rows = ["", "What-if checks (`tests/perf/eval/whatif_check.py`): the setting A that "
            "was traced, the setting B its `--what-if` predicted for, and B's "
            "measured step time.", "",
            "| check | A | B | predicted ms | measured ms | error | limited by | load | |",
            "|---|---|---|---:|---:|---:|---|---:|---|"]
    for r in w["results"]:
        loads = [x for x in r.get("load") or [] if is_number(x)]
        rows.append("| %s | %s=%s | %s=%s | %.2f | %.2f | %+.1f%% | %s | %s | %s |" % (
            r["name"], r["setting"], r["a_value"], r["setting"], r["b_value"],
            r["predicted_ms"], r["measured_ms"], 100 * r["error"], r["limited_by"],
            "%.1f" % max(loads) if loads else "-",
            "ok" if r["passed"] else "miss (busy)" if r.get("suspect") else "MISS"))
    return "\n".join(rows) + "\n\n`%s`\n" % w["summary"]


def main(argv=None):
    ap = argparse.ArgumentParser(description="dlbn ground-truth scenario suite")
    ap.add_argument("--rounds", type=int, default=3,
                    help="real/replay/preload rounds per scenario (default 3)")
    ap.add_argument("--ref-rounds", type=int, default=1,
                    help="of those, rounds that also run le-log, le-replay and "
                    "dlbn-replay (default 1)")
    ap.add_argument("--only", default=None,
                    help="comma-separated scenario names, or the groups synthetic "
                    "(eval_workload.py) and pipelines (tests/support/pipelines/)")
    ap.add_argument("--list", action="store_true", help="list the scenarios and exit")
    ap.add_argument("--no-whatif", dest="whatif", action="store_false",
                    help="skip the what-if and grid checks (whatif_check.py, "
                    "grid_check.py in tests/perf/eval/; they run unless --only is given)")
    ap.add_argument("--build", default=os.environ.get("BUILD", "build"))
    ap.add_argument("--out", default=None, help="output directory (default BUILD/eval)")
    args = ap.parse_args(argv)
    if args.list:
        for s in SCENARIOS:
            print("%-22s %s%s" % (s["name"], s["covers"], " [%s]" % s["program"]
                                  if s.get("program") else ""))
        return 0
    if args.rounds < 1 or args.ref_rounds < 0:
        ap.error("--rounds must be >= 1, --ref-rounds >= 0")
    build = args.build if os.path.isabs(args.build) else os.path.join(ROOT, args.build)
    out_dir = os.path.abspath(args.out or os.path.join(build, "eval"))
    os.makedirs(out_dir, exist_ok=True)
    scenarios = SCENARIOS
    if args.only:
        groups = {"synthetic": [s["name"] for s in SCENARIOS if not s.get("program")],
                  "pipelines": [s["name"] for s in SCENARIOS if s.get("program")]}
        wanted = []
        for w in args.only.split(","):
            wanted += groups.get(w, [w])
        unknown = [w for w in wanted if w not in {s["name"] for s in SCENARIOS}]
        if unknown:
            ap.error("unknown scenario(s): %s (see --list)" % ", ".join(unknown))
        scenarios = [s for s in SCENARIOS if s["name"] in wanted]
        args.whatif = False
    snap = Snapshot(build, out_dir)
    snap.check_built()
    snap.take()

    started = time.monotonic()
    gens, missing = [], []
    for python, wanted in generations():
        python = absolute_python(python)
        info = interpreter_info(python)
        if not info["torch"]:
            missing.append("%s: %s has no torch%s" % (
                wanted or "PYTHON", python,
                " (scripts/install-deps makes .venv/)" if ".venv" in python else ""))
            print("eval: %s" % missing[-1], flush=True)
            continue
        label = generation_label(info["torch"], {g["label"] for g in gens})
        gens.append({"label": label, "python": python, "info": info})

    docs = []
    for gen in gens:
        gen_dir = os.path.join(out_dir, gen["label"])
        os.makedirs(gen_dir, exist_ok=True)
        docs.append(run_generation(snap, gen, scenarios, args, gen_dir))
        print()
    elapsed = time.monotonic() - started

    for doc in docs:
        print(doc["summary"])
        if doc.get("what_if"):
            print("eval %s: %s" % (doc["generation"], doc["what_if"]["summary"]))
    for line in missing:
        print("eval: not run: %s" % line)
    index = {"elapsed_s": elapsed, "binaries": snap.info, "not_run": missing,
             "generations": [{"label": d["generation"], "interpreter": d["interpreter"],
                              "python": d["machine"]["python"], "torch": d["machine"]["torch"],
                              "summary": d["summary"],
                              "results": shown(os.path.join(out_dir, d["generation"],
                                                            "results.json"))}
                             for d in docs]}
    with open(os.path.join(out_dir, "results.json"), "w") as f:
        json.dump(index, f, indent=1)
    with open(os.path.join(out_dir, "results.md"), "w") as f:
        for doc in docs:
            f.write("### %s\n\n" % doc["generation"].replace("-", " "))
            f.write(results_markdown(doc))
            f.write("\n")
        for line in missing:
            f.write("Not run: %s.\n" % line)
    print("eval: %d generation(s), %.0f s; results in %s/<generation>/results.json, "
          "both tables in %s" % (len(docs), elapsed, shown(out_dir),
                                 shown(os.path.join(out_dir, "results.md"))))
    broken = any(d["broken"] for d in docs)
    return 1 if broken or missing else 0


if __name__ == "__main__":
    sys.exit(main())
