"""dlbn benchmarks (`make bench`): hook cost, step-time overhead, analyzer.

Three parts, each a table on stdout and a section of build/bench/results.json:

  hooks     ns per call with and without LD_PRELOAD=libdlbn.so, in the same
            run: read() on an fd dlbn ignores, a recorded pipe read, poll on
            a pipe, cuLaunchKernel through the simulated driver reached via
            cuGetProcAddress (build/tests/bench/hookcost, pinned to one CPU,
            plain and preloaded processes alternating).
  e2e       step time of tests/e2e/workload.py training loops run plainly,
            under dlbn, and under torch.profiler; runs interleaved (A B C A B
            C ...), ratio of the medians over repeats.  WORKLOADS below is the
            list; --workloads FILE (JSON) adds more, e.g. the eval suite's.
  profile   what the worker profile (python/_dlbn_profile.py) costs the
            DataLoader workers: its sampler's time measured in the workers,
            and their CPU time with the profile off / exact / sampled
            (tests/perf/bench/profile_cost.py).
  analyzer  dlbn-analyze records/s and peak RSS on generated traces of 1M
            and 20M records (CPU-only, and with CUDA launches and probes),
            and bytes per record (also of the real traces the e2e part
            recorded).

Every figure is compared with its budget (docs/DESIGN.md, "Budgets"); missed budgets are
listed at the end and in results.json ("budgets").  Timing figures are
medians: the machine is small and shared, so single runs are noisy, and the
e2e table shows the spread of the plain runs to say what a ratio can resolve.
"""

import argparse
import datetime
import json
import os
import platform
import shutil
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
BUILD = os.path.join(ROOT, "build")

# End-to-end workloads: name -> (what it stands for, workload.py arguments).
# Keep each loop about a second long; startup is not part of the figure (the
# window is the steady-state steps, as the analyzer uses).  Extend here or
# with --workloads FILE: a JSON list of {"name", "note", "args"} objects, with
# an optional "script" (path from the repository root) to run instead of
# tests/e2e/workload.py; it must take --steps-per-epoch and --json-out and
# write window_s, steps and window_first_step as workload.py does.
WORKLOADS = [
    ("input_bound", "workers too slow: 2 workers x 16 ms per batch, 5 ms steps",
     ["--workers", "2", "--sample-ms", "8", "--batch-size", "4", "--step-ms", "5"]),
    ("compute_bound", "loader keeps up: 2 ms per batch, 15 ms steps",
     ["--workers", "2", "--sample-ms", "1", "--batch-size", "4", "--step-ms", "15"]),
    ("ipc_heavy", "large cheap batches: 16 x 256 KiB per batch, 5 ms steps",
     ["--workers", "2", "--batch-size", "16", "--sample-kib", "256", "--step-ms", "5"]),
    ("pin_memory", "pin-memory thread path (CPU stand-in for CUDA pieces)",
     ["--workers", "2", "--sample-ms", "2", "--step-ms", "10", "--pin-memory-standin"]),
    ("spawn", "spawn start method, persistent workers",
     ["--workers", "2", "--sample-ms", "2", "--step-ms", "10", "--context", "spawn",
      "--persistent"]),
    ("workers0", "num_workers=0: loading in the main thread",
     ["--workers", "0", "--sample-ms", "0.5", "--step-ms", "10"]),
]

# docs/DESIGN.md, "Budgets".
BUDGET_IGNORED_NS = 5.0
BUDGET_RECORDED_NS = 50.0
BUDGET_STEP_MEDIAN = 0.005    # the median workload's step-time ratio
BUDGET_STEP_ANY = 0.01        # every workload's
BUDGET_ANALYZER_RPS = 50e6
BUDGET_RECORD_BYTES = 16.0
BUDGET_SAMPLER_SHARE = 0.01   # worker sampling: < 1% of worker CPU
BUDGET_MEM_SHARE = 0.01       # memory sampling: < 1% of the window (training process)
# "Independent of length": a 20x longer trace may cost at most this much more.
BUDGET_RSS_GROWTH = 1.25
BUDGET_JOB_S = 2.0            # a job report from the summaries of 1024 ranks
BUDGET_JOB_RSS_MIB = 64.0     # and its peak memory

HOOK_CASES = [
    # name, what, kind of budget ("ignored" / "recorded")
    ("read_ignored", "read() 1 B, /dev/zero (ignored fd)", "ignored"),
    ("read_pipe", "read() 1 B, pipe (recorded)", "recorded"),
    ("poll_pipe", "poll() timeout 0, pipe ready (recorded)", "recorded"),
    ("poll_pipe_wait", "poll() timeout 1 s, pipe ready, main thread", "recorded"),
    ("cu_launch", "cuLaunchKernel via cuGetProcAddress (sim driver)", "recorded"),
    # A recorded SYNC, and the sync drain event (gpu_probe.c) at most every
    # 0.5 ms: the loss.item() path.
    ("cu_sync", "cuStreamSynchronize after a kernel, main thread (sim driver)", "recorded"),
    # The frees the loop's counters time (loop_cost.c) are only a batch's
    # shared memory; every other munmap/close takes the ignored path.
    # Budgeted on calls the kernel refuses at once (the same hook path), so
    # that a 2 us syscall's variance does not hide a few ns; the real calls
    # follow as references.
    ("munmap_ignored", "munmap() len 0 (EINVAL), batches mapped (ignored)", "ignored"),
    ("close_ignored", "close() of an fd not open (EBADF; ignored fd)", "ignored"),
    ("munmap_4k", "munmap() 4 KiB anonymous, batches mapped (reference)", None),
    ("close_dup", "close() of a /dev/zero dup (reference)", None),
    # Context, not a hook: a recorded call reads this clock twice.
    ("clock", "clock_gettime(MONOTONIC), not hooked (reference)", None),
]


def log(msg):
    print(msg, flush=True)


def median(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def pin_to(cpu):
    """preexec_fn: run the child on one CPU (less migration noise)."""
    def pin():
        if cpu is not None:
            os.sched_setaffinity(0, {cpu})
    return pin


def run_child(argv, env=None, cpu=None, stdout=subprocess.PIPE, timeout=None):
    """Run argv; returns (returncode, stdout text, wall s, rusage)."""
    t0 = time.monotonic()
    proc = subprocess.Popen(argv, env=env, stdout=stdout, stderr=subprocess.PIPE,
                            preexec_fn=pin_to(cpu), cwd=ROOT)
    out, err = proc.communicate(timeout=timeout)
    wall = time.monotonic() - t0
    # communicate() reaped the child; its rusage is gone from wait4, so the
    # analyzer part uses run_measured() instead when it needs peak RSS.
    return proc.returncode, (out or b"").decode(errors="replace"), wall, \
        (err or b"").decode(errors="replace")


PEAKRSS = os.path.join(BUILD, "tests", "bench", "peakrss")


def run_measured(argv, cpu=None, stdout_path=os.devnull):
    """Run argv under peakrss (see peakrss.c: a child forked from Python
    would report Python's RSS as its floor); return (returncode, wall s,
    cpu s, peak RSS KiB, stderr)."""
    with open(stdout_path, "wb") as out, tempfile.TemporaryFile() as err, \
            tempfile.NamedTemporaryFile("r") as figures:
        t0 = time.monotonic()
        proc = subprocess.Popen([PEAKRSS, figures.name] + argv, stdout=out, stderr=err,
                                preexec_fn=pin_to(cpu), cwd=ROOT)
        proc.wait()
        wall = time.monotonic() - t0
        err.seek(0)
        msg = err.read().decode(errors="replace")
        fields = figures.read().split()
    if len(fields) != 4:
        return proc.returncode, wall, 0.0, 0, msg
    return int(fields[0]), wall, float(fields[2]) + float(fields[3]), int(fields[1]), msg


# ---- machine ----------------------------------------------------------------

def read_text(path, default=""):
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        return default


def machine_info(python):
    model = ""
    for line in read_text("/proc/cpuinfo").splitlines():
        if line.startswith("model name"):
            model = line.split(":", 1)[1].strip()
            break
    virt = ""
    if shutil.which("systemd-detect-virt"):
        virt = subprocess.run(["systemd-detect-virt"], capture_output=True,
                              text=True).stdout.strip()
    torch_version = subprocess.run(
        [python, "-c", "import torch; print(torch.__version__)"],
        capture_output=True, text=True).stdout.strip()
    git = {}
    if shutil.which("git"):
        rev = subprocess.run(["git", "-C", ROOT, "rev-parse", "HEAD"],
                             capture_output=True, text=True)
        dirty = subprocess.run(["git", "-C", ROOT, "status", "--porcelain"],
                               capture_output=True, text=True)
        git = {"commit": rev.stdout.strip() or None,
               "dirty": bool(dirty.stdout.strip()) if dirty.returncode == 0 else None}
    return {
        "host": socket.gethostname(),
        "cpu_model": model,
        "cpus_online": os.cpu_count(),
        "cpus_usable": len(os.sched_getaffinity(0)),
        "kernel": platform.release(),
        "clock_source": read_text(
            "/sys/devices/system/clocksource/clocksource0/current_clocksource", "unknown"),
        "virtualization": virt or None,
        "libc": " ".join(platform.libc_ver()),
        "python": subprocess.run([python, "-c", "import sys; print(sys.version.split()[0])"],
                                 capture_output=True, text=True).stdout.strip(),
        "torch": torch_version or None,
        "loadavg_at_start": read_text("/proc/loadavg"),
        "git": git,
    }


# ---- hooks --------------------------------------------------------------------

def parse_kv(text):
    out = {}
    for line in text.splitlines():
        if "=" in line:
            k, v = line.split("=", 1)
            try:
                out[k.strip()] = float(v)
            except ValueError:
                pass
    return out


def bench_hooks(opts, tmp):
    prog = os.path.join(BUILD, "tests", "bench", "hookcost")
    simcuda = os.path.join(BUILD, "tests", "simcuda")
    base_env = dict(os.environ)
    base_env["LD_LIBRARY_PATH"] = simcuda + (":" + base_env["LD_LIBRARY_PATH"]
                                             if base_env.get("LD_LIBRARY_PATH") else "")
    argv = [prog, str(opts.hook_calls), str(opts.hook_rounds)]
    runs = {"plain": [], "dlbn": []}
    for rep in range(opts.hook_reps):
        for mode in ("plain", "dlbn"):
            env = dict(base_env)
            trace = os.path.join(tmp, "hookcost-%d.bin" % rep)
            if mode == "dlbn":
                env.update(LD_PRELOAD=opts.lib, DLBN_OUTPUT=trace, DLBN_LOG="quiet",
                           DLBN_OVERWRITE="1")
            rc, out, _, err = run_child(argv, env=env, cpu=opts.cpu, timeout=600)
            if rc != 0:
                raise SystemExit("bench: hookcost (%s) failed: %s" % (mode, err.strip()))
            runs[mode].append(parse_kv(out))
            if os.path.exists(trace):
                os.unlink(trace)
    cases = []
    for name, what, kind in HOOK_CASES:
        without = median([r.get(name + "_ns") for r in runs["plain"]])
        with_ = median([r.get(name + "_ns") for r in runs["dlbn"]])
        paired_plain = median([r.get(name + "_paired_ns") for r in runs["plain"]])
        paired_dlbn = median([r.get(name + "_paired_ns") for r in runs["dlbn"]])
        if without is None or with_ is None or without != without or with_ != with_:
            added, method = None, "unavailable"
        elif paired_dlbn is not None and paired_plain is not None:
            # Same-process pairs: the hook's cost minus the method's bias.
            added, method = paired_dlbn - paired_plain, "paired"
        else:
            added, method = with_ - without, "processes"
        budget = {"ignored": BUDGET_IGNORED_NS, "recorded": BUDGET_RECORDED_NS}.get(kind)
        cases.append({"name": name, "what": what, "budget_kind": kind,
                      "without_ns": without, "with_ns": with_, "added_ns": added,
                      "added_method": method, "paired_plain_ns": paired_plain,
                      "paired_dlbn_ns": paired_dlbn, "budget_ns": budget,
                      "met": None if added is None or budget is None else added < budget})
    return {"calls_per_round": opts.hook_calls, "rounds": opts.hook_rounds,
            "repetitions": opts.hook_reps, "cpu": opts.cpu, "cases": cases, "raw": runs}


def print_hooks(h):
    log("\nHook cost, ns per call (median of %d plain and %d preloaded runs, each the median"
        " of %d rounds x %d calls; CPU %s)" % (h["repetitions"], h["repetitions"], h["rounds"],
                                               h["calls_per_round"], h["cpu"]))
    log("  %-48s %9s %9s %9s %8s  %s" % ("call", "without", "with", "added", "budget", ""))
    for c in h["cases"]:
        fmt = lambda v: "%9.1f" % v if v is not None else "%9s" % "n/a"  # noqa: E731
        log("  %-48s %s %s %s %8s  %s" % (
            c["what"], fmt(c["without_ns"]), fmt(c["with_ns"]), fmt(c["added_ns"]),
            "<%g" % c["budget_ns"] if c["budget_ns"] else "-",
            "" if c["met"] is None else ("ok" if c["met"] else "MISSED")))
    log("  (added: for libc calls, hooked-minus-libc's-own in alternate rounds of one process,"
        " less the same figure without the preload; cuLaunchKernel: with - without)")


# ---- end to end -----------------------------------------------------------------

MODES = ("plain", "dlbn", "torch.profiler")


def workload_argv(opts, mode, args, json_out, script=None):
    """The command line of one run; script None means tests/e2e/workload.py."""
    target = os.path.join(ROOT, script or os.path.join("tests", "e2e", "workload.py"))
    argv = [opts.python]
    if mode == "torch.profiler":
        argv.append(os.path.join(HERE, "profiled_workload.py"))
        if script:
            argv += ["--script", target]
    else:
        argv.append(target)
    return argv + ["--steps-per-epoch", str(opts.steps)] + args + ["--json-out", json_out]


def step_ms(record):
    """Mean steady-state step time: the workload's window over its steps."""
    window = record.get("window_s")
    steps = record.get("steps", 0) - record.get("window_first_step", 0)
    if window is None or steps <= 0:
        return None
    return window * 1000.0 / steps


def trace_payload(path):
    """(file bytes, record bytes): the sum of extents' committed counters."""
    size = os.path.getsize(path)
    with open(path, "rb") as f:
        head = f.read(32)
        if len(head) < 32 or head[:8] != b"DLBNTRC1":
            return size, None
        header_size, extent_size = struct.unpack_from("<II", head, 12)
        committed = 0
        off = header_size
        while off + 8 <= size:
            f.seek(off)
            magic, used = struct.unpack("<II", f.read(8))
            if magic == 0x58424C44:
                committed += used
            off += extent_size
    return size, committed


def analyze_json(opts, trace):
    rc, out, _, err = run_child([opts.analyzer, "--format", "json", trace], timeout=600)
    if rc not in (0, 3) or not out.strip():
        return None, err.strip()
    try:
        return json.loads(out), None
    except ValueError as exc:
        return None, "unparsable JSON: %s" % exc


def step_status(res):
    """A workload's step-time check: "ok" within BUDGET_STEP_ANY (and not
    above torch.profiler's), "missed" beyond it by more than the plain runs'
    own spread, else "unresolved": this machine's noise cannot tell."""
    r, prof, spread = res.get("dlbn_ratio"), res.get("torch.profiler_ratio"), \
        res.get("plain_spread")
    if r is None:
        return None
    over = max(r - 1 - BUDGET_STEP_ANY, r - prof if prof is not None else 0.0)
    if over <= 0:
        return "ok"
    return "missed" if spread is not None and over > spread else "unresolved"


def summarize_e2e(results):
    for res in results.values():
        plain = [r["step_ms"] for r in res["runs"]["plain"] if r["step_ms"] is not None]
        base = median(plain)
        res["plain_step_ms"] = base
        res["plain_spread"] = (max(plain) - min(plain)) / base if base and len(plain) > 1 \
            else None
        plain_min = min(plain, default=None)
        for mode in MODES[1:]:
            steps = [r["step_ms"] for r in res["runs"][mode] if r["step_ms"] is not None]
            m = median(steps)
            res[mode + "_step_ms"] = m
            res[mode + "_ratio"] = m / base if m and base else None
            # Noise on a shared machine only adds time: the fastest runs
            # are the least disturbed, a second estimate beside the median.
            res[mode + "_min_ratio"] = (min(steps) / plain_min if steps and plain_min
                                        else None)
        res["dlbn_status"] = step_status(res)
        res["dlbn_met"] = {"ok": True, "missed": False}.get(res["dlbn_status"])


def bench_e2e(opts, workloads, tmp):
    results = {name: {"note": note, "args": args, "script": script,
                      "runs": {m: [] for m in MODES}}
               for name, note, args, script in workloads}
    kept_traces = {}
    e2e_repeats(opts, workloads, results, kept_traces, range(opts.reps), tmp)
    summarize_e2e(results)
    # Where the noise hides the answer, more repeats rather than a claim.
    extra = opts.reps
    while extra < opts.max_reps:
        unresolved = [w for w in workloads if results[w[0]]["dlbn_status"] == "unresolved"]
        if not unresolved:
            break
        log("  2 more repeats of %s (unresolved after %d)" % (
            ", ".join(w[0] for w in unresolved), extra))
        e2e_repeats(opts, unresolved, results, kept_traces, range(extra, extra + 2), tmp)
        extra += 2
        summarize_e2e(results)
    for name, res in results.items():
        res["repeats"] = len(res["runs"]["plain"])
        trace = kept_traces.get(name)
        if trace:
            res["trace"] = trace_stats(opts, trace)
    return {"steps_per_run": opts.steps, "repetitions": opts.reps,
            "modes": list(MODES), "workloads": results}


def e2e_repeats(opts, workloads, results, kept_traces, reps, tmp):
    order = list(MODES)
    for rep in reps:
        for name, _, args, script in workloads:
            # Rotate the mode order each repeat so no mode always runs first.
            modes = order[rep % len(order):] + order[:rep % len(order)]
            for mode in modes:
                json_out = os.path.join(tmp, "%s-%s-%d.json" % (name, mode.replace(".", "_"), rep))
                env = dict(os.environ)
                trace = os.path.join(tmp, "%s.bin" % name)
                if mode == "dlbn":
                    env.update(LD_PRELOAD=opts.lib, DLBN_OUTPUT=trace, DLBN_OVERWRITE="1",
                               DLBN_LOG="quiet")
                rc, _, wall, err = run_child(
                    workload_argv(opts, mode, args, json_out, script), env=env, timeout=600)
                record = None
                if rc == 0 and os.path.exists(json_out):
                    with open(json_out) as f:
                        record = json.load(f)
                run = {"step_ms": step_ms(record) if record else None, "wall_s": wall,
                       "rc": rc}
                if record and "profiler_exit_s" in record:
                    run["profiler_exit_s"] = record["profiler_exit_s"]
                if rc != 0:
                    run["error"] = err.strip().splitlines()[-1:] if err.strip() else []
                    log("  %s/%s rep %d failed (rc %d): %s" % (name, mode, rep, rc,
                                                               " ".join(run["error"])))
                results[name]["runs"][mode].append(run)
                if mode == "dlbn" and os.path.exists(trace):
                    kept_traces[name] = trace
        log("  e2e repeat %d done" % (rep + 1))


def trace_stats(opts, trace):
    report, err = analyze_json(opts, trace)
    size, payload = trace_payload(trace)
    stats = {"file_bytes": size, "record_bytes": payload}
    if report is None:
        stats["error"] = err
        return stats
    records = report.get("trace", {}).get("records")
    memory = report.get("memory") or {}
    stats.update(records=records, verdict=report.get("verdict"),
                 predicted_speedup=report.get("predicted_speedup"),
                 # what the recorder's memory samples took, from the trace itself
                 # (MEM's sample_ns): of the training process's time, of all
                 # the sampled processes'
                 mem_sampling_ms=memory.get("sampling_ms"),
                 mem_sampling_share=memory.get("sampling_window_share"),
                 mem_sampling_all_share=memory.get("sampling_share"))
    if records:
        stats["file_bytes_per_record"] = size / records
        if payload is not None:
            stats["bytes_per_record"] = payload / records
    return stats


def print_e2e(e):
    log("\nEnd-to-end step time (median of %d interleaved repeats, %d steps each;"
        " ratio = mode / plain)" % (e["repetitions"], e["steps_per_run"]))
    log("  %-14s %9s %7s %7s %8s %7s %9s %8s %12s  %s" % (
        "workload", "plain ms", "spread", "dlbn", "(min)", "budget", "profiler", "(min)",
        "verdict", "note"))
    for name, r in e["workloads"].items():
        f = lambda v, s="%.3f": (s % v) if v is not None else "n/a"  # noqa: E731
        dl = r.get("dlbn_ratio")
        log("  %-14s %9s %7s %7s %8s %7s %9s %8s %12s  %s" % (
            name, f(r.get("plain_step_ms"), "%.2f"), f(r.get("plain_spread") and
                                                      100 * r["plain_spread"], "%.1f%%"),
            f(dl), f(r.get("dlbn_min_ratio"), "(%.3f)"),
            (r.get("dlbn_status") or "n/a").upper() if r.get("dlbn_status") != "ok" else "ok",
            f(r.get("torch.profiler_ratio")), f(r.get("torch.profiler_min_ratio"), "(%.3f)"),
            (r.get("trace") or {}).get("verdict") or "-", r["note"]))
    log("  (ratio: median step time / plain median; (min): fastest / fastest plain run;"
        " spread: (max - min) / median\n   of the plain runs, what a ratio can resolve here;"
        " budget: within %g%% and not above torch.profiler's, UNRESOLVED\n   where the excess"
        " is inside the spread after up to %d repeats; verdict: dlbn-analyze on the last dlbn"
        " run)" % (100 * BUDGET_STEP_ANY, max(r.get("repeats", 0)
                                                for r in e["workloads"].values())))


# ---- analyzer -------------------------------------------------------------------

def bench_profile(opts, tmp):
    """tests/perf/bench/profile_cost.py in the torch interpreter; its table goes
    to stdout, its figures into results.json."""
    out = os.path.join(tmp, "profile.json")
    reps, batches = (1, 60) if opts.quick else (max(3, opts.reps), 300)
    subprocess.run([opts.python, os.path.join(HERE, "profile_cost.py"),
                    "--reps", str(reps), "--batches", str(batches), "--json", out],
                   check=True, timeout=3600)
    with open(out) as f:
        return json.load(f)


def gentrace(opts, path, extra):
    rc, _, _, err = run_child([opts.gentrace, "-o", path] + extra, timeout=600)
    if rc != 0:
        raise SystemExit("bench: dlbn-gentrace failed: %s" % err.strip())
    # "dlbn-gentrace: PATH: N records, S steps"
    words = err.replace(",", " ").split()
    try:
        records = int(words[words.index("records") - 1])
        steps = int(words[words.index("steps") - 1])
    except (ValueError, IndexError):
        records = steps = None
    return records, steps


# dlbn-analyze --timings lines: label prefix -> key in results.json.
PHASE_LABELS = (("open:", "open"), ("decode + merge alone", "read"),
                ("model pass 1", "pass1"), ("model pass 2", "pass2"),
                ("of which the GPU pass", "gpu"), ("verdict, what-if", "verdict"),
                ("hot spots", "hotspots"), ("reports, exports", "reports"),
                ("total, without the extra pass", "total"))


def analyzer_phases(opts, path):
    """One `dlbn-analyze --timings` run: each phase's CPU seconds (the GPU
    pass: sampled wall seconds inside pass 2), None where it did not run."""
    rc, _, _, err = run_child([opts.analyzer, "--format", "json", "--timings", path],
                              timeout=600)
    phases = {}
    if rc not in (0, 3):
        return phases
    for line in err.splitlines():
        text = line.strip()
        for label, key in PHASE_LABELS:
            if text.startswith(label):
                nums = [w for w in text[len(label):].split() if w.replace(".", "", 1).isdigit()]
                phases[key] = float(nums[0]) if nums else None
    return phases


def bench_analyzer(opts, tmp):
    big = opts.big_records
    small = opts.small_records
    traces = []
    # Realistic shape: steps grow with records.  Then the same number of steps
    # as the small trace with 20x the records (more tensors per batch): what
    # grows is events only, which must not cost memory (docs/DESIGN.md, "Invariants").
    specs = [("%gM" % (small / 1e6), ["--records", str(small)]),
             ("%gM" % (big / 1e6), ["--records", str(big)])]
    results = []
    small_steps = None
    for label, extra in specs:
        path = os.path.join(tmp, "gen-%s.bin" % label)
        records, steps = gentrace(opts, path, extra)
        if small_steps is None:
            small_steps = steps
        traces.append((label, "steps grow with records", path, records, steps, 0))
    # Same steps as the small trace, with the tensors per batch that reach
    # about `big` records (the generator writes ~5 records per tensor-step).
    if small_steps:
        tensors = max(2, int(round(big / small_steps / 5.0)))
        path = os.path.join(tmp, "gen-%gM-fixed-steps.bin" % (big / 1e6))
        records, steps = gentrace(opts, path, ["--steps", str(small_steps),
                                               "--tensors", str(tensors)])
        traces.append(("%.0fM same steps" % (records / 1e6 if records else 0),
                       "steps as the %gM trace, %d tensors per batch" % (small / 1e6, tensors),
                       path, records, steps, 0))
    # With CUDA: a kernel launch and the recorder's drain probe per step,
    # the GPU busy into each wait, so the split holds steps until their
    # probes resolve.  Compared with the small GPU trace.
    gpu_base = len(traces)
    for label, n in (("%gM gpu" % (small / 1e6), small), ("%gM gpu" % (big / 1e6), big)):
        path = os.path.join(tmp, "gen-%s.bin" % label.replace(" ", "-"))
        records, steps = gentrace(opts, path, ["--records", str(n), "--gpu-ms", "15"])
        traces.append((label, "steps grow with records; 15 ms kernel and probe per step",
                       path, records, steps, gpu_base))
    for label, shape, path, records, steps, base_index in traces:
        out_json = os.path.join(tmp, "analyze.json")
        rc, wall, cpu, rss, err = run_measured([opts.analyzer, "--format", "json", path],
                                               cpu=opts.analyzer_cpu, stdout_path=out_json)
        if rc not in (0, 3):
            raise SystemExit("bench: dlbn-analyze %s failed (%d): %s" % (path, rc, err.strip()))
        walls, cpus, rsss = [wall], [cpu], [rss]
        for _ in range(opts.analyzer_reps - 1):
            rc, wall, cpu, rss, err = run_measured([opts.analyzer, "--format", "json", path],
                                                   cpu=opts.analyzer_cpu)
            walls.append(wall)
            cpus.append(cpu)
            rsss.append(rss)
        with open(out_json) as f:
            report = json.load(f)
        counted = report.get("trace", {}).get("records") or records
        size, payload = trace_payload(path)
        phases = analyzer_phases(opts, path)
        results.append({
            "trace": label, "shape": shape, "records": counted, "steps": steps,
            "file_bytes": size, "record_bytes": payload,
            "bytes_per_record": payload / counted if payload is not None else None,
            "file_bytes_per_record": size / counted,
            "wall_s": median(walls), "cpu_s": median(cpus), "walls": walls, "cpus": cpus,
            "records_per_s": counted / median(walls),
            "records_per_cpu_s": counted / median(cpus) if median(cpus) else None,
            "peak_rss_kib": max(rsss), "rss_kib": rsss, "base": base_index,
            "phases_cpu_s": phases,
        })
        if not opts.keep_traces:
            os.unlink(path)
    base = results[0]["peak_rss_kib"]
    for r in results:
        b = results[r["base"]]  # the small trace of its kind
        r["base_trace"] = b["trace"]
        r["rss_vs_small"] = r["peak_rss_kib"] / b["peak_rss_kib"] if b["peak_rss_kib"] else None
    rss_per_step = None
    if len(results) > 1 and results[0]["steps"] and results[1]["steps"] and \
            results[1]["steps"] > results[0]["steps"]:
        rss_per_step = ((results[1]["peak_rss_kib"] - base) * 1024.0
                        / (results[1]["steps"] - results[0]["steps"]))
        if abs(rss_per_step) < 0.5:
            rss_per_step = 0.0  # not "-0": no growth either way
    return {"rss_bytes_per_step": rss_per_step, "repetitions": opts.analyzer_reps, "cpu": opts.analyzer_cpu, "traces": results}


# ---- a job of many ranks ---------------------------------------------------------

JOB_PER_HOST = 8


def job_traces(opts, tmp, ranks, steps, prefix="job"):
    """One generated trace per rank, JOB_PER_HOST ranks per host, one host's
    ranks on slow storage and one rank elsewhere with a slow loader."""
    paths = []
    slow_host, straggler = min(17, ranks // JOB_PER_HOST - 1), ranks // 2 + 5
    for r in range(ranks):
        batch_ms, file_ms = 8, 0
        if r // JOB_PER_HOST == slow_host:
            batch_ms, file_ms = 30, 24
        if r == straggler:
            batch_ms = 60
        path = os.path.join(tmp, "%s-r%d.bin" % (prefix, r))
        gentrace(opts, path, ["--steps", str(steps), "--rank", str(r), "--world-size",
                              str(ranks), "--local-rank", str(r % JOB_PER_HOST), "--host",
                              "h%03d" % (r // JOB_PER_HOST), "--batch-ms", str(batch_ms),
                              "--file-ms", str(file_ms), "--workers", "2", "--seed", str(r)])
        paths.append(path)
    return paths, "h%03d" % slow_host, straggler


def measured(opts, argv, reps, stdout_path=os.devnull):
    """Median wall and CPU seconds and the largest peak RSS of reps runs."""
    walls, cpus, rsss = [], [], []
    for _ in range(reps):
        rc, wall, cpu, rss, err = run_measured(argv, stdout_path=stdout_path)
        if rc not in (0, 3):
            raise SystemExit("bench: %s failed (%d): %s" % (" ".join(argv[:3]), rc,
                                                             err.strip()[-500:]))
        walls.append(wall)
        cpus.append(cpu)
        rsss.append(rss)
    return {"wall_s": median(walls), "cpu_s": median(cpus), "peak_rss_kib": max(rsss)}


def bench_job(opts, tmp):
    """A job of opts.job_ranks ranks: its summaries written where the
    ranks ran (here: --summarize over every trace, one thread and -j the
    CPUs), then the job report from the summaries, and from the traces at
    -j 1 and -j the CPUs, whose peak memory must be that of a few traces,
    not of all."""
    d = os.path.join(tmp, "job")
    os.makedirs(d)
    paths, slow_host, straggler = job_traces(opts, d, opts.job_ranks, opts.job_steps)
    cpus = len(os.sched_getaffinity(0))
    res = {"ranks": opts.job_ranks, "steps_per_rank": opts.job_steps, "cpus": cpus}
    res["one_trace"] = measured(opts, [opts.analyzer, "--format", "json", paths[0]], 3)
    res["summarize_j1"] = measured(opts, [opts.analyzer, "--summarize", "-j", "1", "-o",
                                          os.devnull] + paths, 1)
    res["summarize_jn"] = measured(opts, [opts.analyzer, "--summarize", "-o",
                                          os.devnull] + paths, 1)
    summaries = [os.path.splitext(p)[0] + ".summary.json" for p in paths]
    out_json = os.path.join(d, "job.json")
    res["from_summaries"] = measured(opts, [opts.analyzer, "--format", "json"] + summaries, 5,
                                     stdout_path=out_json)
    with open(out_json) as f:
        job = json.load(f)["job"]
    res["named"] = (job.get("slow_hosts") == [slow_host]
                    and job.get("straggler_rank") == straggler)
    for jobs in ("1", str(cpus)):
        res["from_traces_j" + jobs] = measured(opts, [opts.analyzer, "--format", "json",
                                                      "-j", jobs] + paths, 1)
    res["summary_bytes_max"] = max(os.path.getsize(s) for s in summaries)
    # Fewer ranks with long traces: the memory of the job report must be
    # that of the traces analysed at a time, not of all of them.
    for p in paths + summaries:
        os.unlink(p)
    paths = job_traces(opts, d, opts.job_long_ranks, opts.job_long_steps, "long")[0]
    long_res = {"ranks": opts.job_long_ranks, "steps_per_rank": opts.job_long_steps}
    long_res["one_trace"] = measured(opts, [opts.analyzer, "--format", "json", paths[0]], 1)
    for jobs in ("1", str(cpus)):
        long_res["from_traces_j" + jobs] = measured(opts, [opts.analyzer, "--format", "json",
                                                           "-j", jobs] + paths, 1)
    res["long"] = long_res
    return res


def print_job(j):
    log("\nA job of %d ranks (%d steps each; %d per host; %d CPUs)"
        % (j["ranks"], j["steps_per_rank"], JOB_PER_HOST, j["cpus"]))
    log("  %-44s %8s %8s %10s" % ("", "wall s", "cpu s", "peak RSS"))
    rows = (("one rank's trace", "one_trace"),
            ("--summarize every trace, -j 1", "summarize_j1"),
            ("--summarize every trace, -j %d" % j["cpus"], "summarize_jn"),
            ("job report from the summaries", "from_summaries"),
            ("job report from the traces, -j 1", "from_traces_j1"),
            ("job report from the traces, -j %d" % j["cpus"], "from_traces_j%d" % j["cpus"]))
    for label, key in rows:
        r = j.get(key)
        if r:
            log("  %-44s %8.2f %8.2f %9.1fM" % (label, r["wall_s"], r["cpu_s"],
                                                r["peak_rss_kib"] / 1024.0))
    log("  largest summary %d bytes; slow host and straggler named: %s"
        % (j["summary_bytes_max"], "yes" if j["named"] else "NO"))
    lj = j.get("long")
    if lj:
        log("  %d ranks of %d steps each:" % (lj["ranks"], lj["steps_per_rank"]))
        for label, key in (("one rank's trace", "one_trace"),
                           ("job report from the traces, -j 1", "from_traces_j1"),
                           ("job report from the traces, -j %d" % j["cpus"],
                            "from_traces_j%d" % j["cpus"])):
            r = lj[key]
            log("  %-44s %8.2f %8.2f %9.1fM" % (label, r["wall_s"], r["cpu_s"],
                                                r["peak_rss_kib"] / 1024.0))


def print_analyzer(a):
    log("\nAnalyzer (dlbn-analyze --format json, %s, median of %d runs; peak RSS the max)"
        % ("not pinned" if a["cpu"] is None else "CPU %d" % a["cpu"], a["repetitions"]))
    log("  %-16s %10s %8s %8s %11s %11s %9s %7s %7s  %s" % (
        "trace", "records", "steps", "wall s", "Mrec/s", "Mrec/cpu-s", "peak RSS", "xRSS",
        "B/rec", "shape"))
    for r in a["traces"]:
        log("  %-16s %10d %8s %8.2f %11.2f %11.2f %8.1fM %7.2f %7.2f  %s" % (
            r["trace"], r["records"], r["steps"] if r["steps"] is not None else "?",
            r["wall_s"], r["records_per_s"] / 1e6, (r["records_per_cpu_s"] or 0) / 1e6,
            r["peak_rss_kib"] / 1024.0, r["rss_vs_small"] or 0,
            r["bytes_per_record"] or 0, r["shape"]))
    if a.get("rss_bytes_per_step") is not None:
        log("  (peak RSS grows %.0f bytes per step; budget on records per CPU-second:"
            " wall time on a shared machine includes waiting for a CPU)"
            % a["rss_bytes_per_step"])
    log("\nAnalyzer phases (dlbn-analyze --timings, one run each): M records per CPU-second;"
        " 'read' is decode + merge alone, an extra pass made for the comparison")
    log("  %-16s %7s %7s %7s %9s %9s %7s" % ("trace", "read", "pass 1", "pass 2",
                                            "GPU ms", "hotspots", "total"))
    for r in a["traces"]:
        log("  %-16s %7s %7s %7s %9s %9s %7s" % phase_row(r))


def phase_row(r):
    """A trace's phase figures: its name, M records per CPU-second of
    read, pass 1, pass 2, the GPU pass's ms, hot spots, total ("-": not run)."""
    ph = r.get("phases_cpu_s") or {}

    def rate(key):
        v = ph.get(key)
        return "%.1f" % (r["records"] / v / 1e6) if v else "-"
    gpu = ph.get("gpu")
    return (r["trace"], rate("read"), rate("pass1"), rate("pass2"),
            "%.0f" % (gpu * 1e3) if gpu else "-", rate("hotspots"), rate("total"))


def print_trace_sizes(e):
    rows = [(n, r["trace"]) for n, r in e["workloads"].items() if r.get("trace")]
    if not rows:
        return
    log("\nRecorded traces (the last dlbn run of each workload)")
    log("  %-14s %9s %12s %10s %12s" % ("workload", "records", "B/record", "file MiB",
                                         "file B/rec"))
    for name, t in rows:
        if not t.get("records"):
            log("  %-14s (analyzer: %s)" % (name, t.get("error")))
            continue
        log("  %-14s %9d %12.2f %10.2f %12.1f" % (
            name, t["records"], t.get("bytes_per_record") or 0, t["file_bytes"] / 2**20,
            t.get("file_bytes_per_record") or 0))
    log("  (B/record: committed record bytes / records; the file also holds preallocated,"
        " partly filled extents)")


# ---- budgets --------------------------------------------------------------------

def budgets(res):
    """Every check against the budgets of docs/DESIGN.md, "Budgets".  met:
    True, False, or None where the figure is missing or (status
    "unresolved") inside this machine's noise."""
    out = []

    def add(section, budget, measured, unit, met, status=None, **extra):
        item = {"section": section, "budget": budget, "measured": measured, "unit": unit,
                "met": met, "status": status or ("n/a" if met is None else
                                                 "ok" if met else "missed")}
        item.update(extra)
        out.append(item)

    h = res.get("hooks")
    if h:
        for c in h["cases"]:
            if c["budget_ns"] is not None:
                add("8", "hook %s: added < %g ns" % (c["name"], c["budget_ns"]),
                    c["added_ns"], "ns", c["met"])
    e = res.get("e2e")
    if e:
        for name, r in e["workloads"].items():
            add("8", "step time %s: within %g%%, not above torch.profiler's (%s)"
                % (name, 100 * BUDGET_STEP_ANY,
                   "n/a" if r.get("torch.profiler_ratio") is None
                   else "%.3fx" % r["torch.profiler_ratio"]),
                r.get("dlbn_ratio"), "x", r.get("dlbn_met"), status=r.get("dlbn_status"),
                noise=r.get("plain_spread"), min_ratio=r.get("dlbn_min_ratio"),
                repeats=r.get("repeats"))
        ratios = [r["dlbn_ratio"] for r in e["workloads"].values()
                  if r.get("dlbn_ratio") is not None]
        if ratios:
            mid = median(ratios)
            spreads = [r["plain_spread"] for r in e["workloads"].values()
                       if r.get("plain_spread") is not None]
            noise = median(spreads) if spreads else None
            ok = mid - 1 <= BUDGET_STEP_MEDIAN
            resolved = ok or noise is None or mid - 1 - BUDGET_STEP_MEDIAN > noise
            add("8", "step time, median over the workloads: within %g%%"
                % (100 * BUDGET_STEP_MEDIAN), mid, "x", ok if resolved else None,
                status=None if resolved else "unresolved", noise=noise)
    p = res.get("profile")
    if p and p.get("sampler_cost_share") is not None:
        add("8", "worker sampling: < 1% of worker CPU", p["sampler_cost_share"], "share",
            p["sampler_cost_share"] < BUDGET_SAMPLER_SHARE,
            cpu_cross_check=p.get("sampling_overhead"), noise=p.get("off_spread"))
    j = res.get("job")
    if j:
        r = j["from_summaries"]
        add("8", "job report from %d summaries: < %g s" % (j["ranks"], BUDGET_JOB_S),
            r["wall_s"], "s", r["wall_s"] < BUDGET_JOB_S)
        add("8", "job report from %d summaries: peak RSS < %g MiB" % (j["ranks"],
                                                                      BUDGET_JOB_RSS_MIB),
            r["peak_rss_kib"] / 1024.0, "MiB", r["peak_rss_kib"] / 1024.0 < BUDGET_JOB_RSS_MIB)
        for part in (j, j.get("long")):
            if not part:
                continue
            one = part["one_trace"]["peak_rss_kib"]
            for key in sorted(k for k in part if k.startswith("from_traces_j")):
                n = int(key[len("from_traces_j"):])
                bound = (n + 1) * one + part["ranks"] * 16
                add("8", "job report from %d traces of %d steps, -j %d: peak RSS <= (%d + 1)"
                    " x one trace's + 16 KiB per rank"
                    % (part["ranks"], part["steps_per_rank"], n, n),
                    part[key]["peak_rss_kib"] / 1024.0, "MiB",
                    part[key]["peak_rss_kib"] <= bound, bound_mib=bound / 1024.0)
        add("8", "summary: < 64 KiB", j["summary_bytes_max"], "B",
            j["summary_bytes_max"] < 64 * 1024)
    a = res.get("analyzer")
    if a:
        for r in a["traces"]:
            rate = r["records_per_cpu_s"]
            add("8", "analyzer %s: >= %g M records/s on one core"
                % (r["trace"], BUDGET_ANALYZER_RPS / 1e6), rate,
                "records/cpu-s", rate is not None and rate >= BUDGET_ANALYZER_RPS,
                wall_rate=r["records_per_s"])
        for i, r in enumerate(a["traces"]):
            if r.get("base", 0) == i:
                continue  # the trace the others of its kind are compared with
            add("8", "analyzer %s: peak RSS independent of length (<= %gx the %s trace's)"
                % (r["trace"], BUDGET_RSS_GROWTH, r.get("base_trace", a["traces"][0]["trace"])),
                r["rss_vs_small"], "x",
                r["rss_vs_small"] is not None and r["rss_vs_small"] <= BUDGET_RSS_GROWTH)
        for r in a["traces"]:
            if r.get("bytes_per_record") is not None:
                add("8", "trace %s: < %g bytes per record" % (r["trace"], BUDGET_RECORD_BYTES),
                    r["bytes_per_record"], "B", r["bytes_per_record"] < BUDGET_RECORD_BYTES)
    e = res.get("e2e")
    if e:
        for name, r in e["workloads"].items():
            t = r.get("trace") or {}
            if t.get("mem_sampling_share") is not None:
                add("8", "memory sampling in %s: < %g%% of the window (training process)"
                    % (name, 100 * BUDGET_MEM_SHARE), t["mem_sampling_share"], "share",
                    t["mem_sampling_share"] < BUDGET_MEM_SHARE,
                    all_processes=t.get("mem_sampling_all_share"))
            if t.get("bytes_per_record") is not None:
                add("8", "trace recorded from %s: < %g bytes per record"
                    % (name, BUDGET_RECORD_BYTES),
                    t["bytes_per_record"], "B", t["bytes_per_record"] < BUDGET_RECORD_BYTES)
    return out


def fmt_measured(b):
    v = b["measured"]
    if v is None:
        return "n/a"
    if b["unit"] == "x":
        return "%.3fx" % v
    if b["unit"] == "records/cpu-s":
        return "%.2f M records/cpu-s" % (v / 1e6)
    return "%.4g %s" % (v, b["unit"])


def print_budgets(items):
    missed = [b for b in items if b["status"] == "missed"]
    unresolved = [b for b in items if b["status"] == "unresolved"]
    log("\nBudgets (docs/DESIGN.md, Budgets): %d checked, %d missed, %d not resolved by"
        " this machine's noise" % (len([b for b in items if b["status"] != "n/a"]),
                                   len(missed), len(unresolved)))
    for b in missed:
        log("  MISSED      %-72s %s" % (b["budget"], fmt_measured(b)))
    for b in unresolved:
        log("  UNRESOLVED  %-72s %s (spread %.1f%%)" % (
            b["budget"], fmt_measured(b), 100 * (b.get("noise") or 0)))


def markdown(res):
    """The tables of docs/BENCHMARKS.md, from one run's results."""
    md = []
    m = res["machine"]
    md.append("Run of %s on %s: %s, %d CPUs, kernel %s, clock source %s, %s, Python %s, "
              "torch %s; load average %s at the start, %s at the end; %.0f s.\n" % (
                  res["date"], m["host"], m["cpu_model"], m["cpus_online"], m["kernel"],
                  m["clock_source"], m["libc"], m["python"], m["torch"],
                  " ".join(m["loadavg_at_start"].split()[:3]),
                  " ".join(m.get("loadavg_at_end", "").split()[:3]), res["duration_s"]))
    h = res.get("hooks")
    if h:
        md.append("### Hook cost (ns per call)\n")
        md.append("Median of %d plain and %d preloaded runs, each the median of %d rounds "
                  "of %d calls, pinned to CPU %s.\n" % (h["repetitions"], h["repetitions"],
                                                        h["rounds"], h["calls_per_round"],
                                                        h["cpu"]))
        md.append("| call | without | with | added | budget | |")
        md.append("|---|---:|---:|---:|---:|---|")
        for c in h["cases"]:
            f = lambda v: "%.1f" % v if v is not None else "n/a"  # noqa: E731
            md.append("| %s | %s | %s | %s | %s | %s |" % (
                c["what"], f(c["without_ns"]), f(c["with_ns"]), f(c["added_ns"]),
                "< %g" % c["budget_ns"] if c["budget_ns"] else "-",
                "" if c["met"] is None else ("ok" if c["met"] else "**missed**")))
        md.append("")
    e = res.get("e2e")
    if e:
        md.append("### Step-time overhead\n")
        md.append("Median steady-state step time over %d interleaved repeats of %d steps "
                  "(more, up to %d, where the first left the check inside the noise); "
                  "ratio = mode / plain. (min) = fastest run / fastest plain run. "
                  "Spread = (max - min) / median of the plain runs. Budget: within %g%% and "
                  "not above torch.profiler's, unresolved where the excess is inside the "
                  "spread.\n" % (e["repetitions"], e["steps_per_run"],
                                 max(r.get("repeats", 0) for r in e["workloads"].values()),
                                 100 * BUDGET_STEP_ANY))
        md.append("| workload | plain step ms | spread | repeats | dlbn | (min) | budget | "
                  "torch.profiler | (min) | dlbn verdict |")
        md.append("|---|---:|---:|---:|---:|---:|---|---:|---:|---|")
        for name, r in e["workloads"].items():
            f = lambda v, s="%.3f": (s % v) if v is not None else "n/a"  # noqa: E731
            md.append("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
                name, f(r.get("plain_step_ms"), "%.2f"),
                f(r.get("plain_spread") and 100 * r["plain_spread"], "%.1f%%"),
                r.get("repeats", "n/a"),
                f(r.get("dlbn_ratio")), f(r.get("dlbn_min_ratio")),
                {"ok": "ok", "missed": "**missed**"}.get(r.get("dlbn_status"),
                                                         r.get("dlbn_status") or "n/a"),
                f(r.get("torch.profiler_ratio")), f(r.get("torch.profiler_min_ratio")),
                (r.get("trace") or {}).get("verdict") or "-"))
        md.append("")
        md.append("| workload | what it stands for | recorded records | bytes/record | "
                  "file bytes/record | memory sampling (training / all) |")
        md.append("|---|---|---:|---:|---:|---:|")
        for name, r in e["workloads"].items():
            t = r.get("trace") or {}
            f = lambda v, s="%.1f": (s % v) if v is not None else "n/a"  # noqa: E731
            share = lambda v: ("%.3f%%" % (100 * v)) if v is not None else "n/a"  # noqa: E731
            md.append("| %s | %s | %s | %s | %s | %s / %s |" % (
                name, r["note"], t.get("records", "n/a"), f(t.get("bytes_per_record")),
                f(t.get("file_bytes_per_record")), share(t.get("mem_sampling_share")),
                share(t.get("mem_sampling_all_share"))))
        md.append("")
    a = res.get("analyzer")
    if a:
        md.append("### Analyzer\n")
        md.append("`dlbn-analyze --format json`, median of %d runs (peak RSS: the largest), "
                  "%s.\n" % (a["repetitions"], "not pinned" if a["cpu"] is None
                              else "pinned to CPU %d" % a["cpu"]))
        md.append("| trace | records | steps | wall s | M records/s (wall) | "
                  "M records/cpu-s | peak RSS MiB | RSS vs | bytes/record | shape |")
        md.append("|---|---:|---:|---:|---:|---:|---:|---:|---:|---|")
        for r in a["traces"]:
            md.append("| %s | %d | %s | %.2f | %.2f | %.2f | %.1f | %.2fx %s | %.2f | %s |" % (
                r["trace"], r["records"], r["steps"], r["wall_s"], r["records_per_s"] / 1e6,
                (r["records_per_cpu_s"] or 0) / 1e6, r["peak_rss_kib"] / 1024.0,
                r["rss_vs_small"] or 0, r.get("base_trace", ""), r["bytes_per_record"] or 0,
                r["shape"]))
        if a.get("rss_bytes_per_step") is not None:
            md.append("\nPeak RSS grows by %.0f bytes per step (%s vs %s trace of the same "
                      "shape)." % (a["rss_bytes_per_step"], a["traces"][0]["trace"],
                                   a["traces"][1]["trace"]))
        md.append("")
        md.append("Phases (`dlbn-analyze --timings`, one run each): M records per CPU-second "
                  "of each phase; read = decoding and merging alone, an extra pass made for "
                  "the comparison; GPU = the GPU pass inside pass 2, sampled wall time.\n")
        md.append("| trace | read | pass 1 | pass 2 | GPU ms | hot spots | total |")
        md.append("|---|---:|---:|---:|---:|---:|---:|")
        for r in a["traces"]:
            md.append("| %s | %s | %s | %s | %s | %s | %s |" % phase_row(r))
        md.append("")
    j = res.get("job")
    if j:
        md.append("### A job of %d ranks\n" % j["ranks"])
        md.append("Generated rank traces (%d steps each, %d ranks per host, one host's ranks "
                  "on slow storage, one rank elsewhere with a slow loader); %d CPUs. The "
                  "summaries are what `dlbn-run` writes where each rank ran; the job report "
                  "reads them instead of the traces. Slow host and straggler named: %s; "
                  "largest summary %d bytes.\n" % (
                      j["steps_per_rank"], JOB_PER_HOST, j["cpus"],
                      "yes" if j["named"] else "**no**", j["summary_bytes_max"]))
        md.append("| run | wall s | cpu s | peak RSS MiB |")
        md.append("|---|---:|---:|---:|")
        for label, key in (("one rank's trace", "one_trace"),
                           ("`--summarize` every trace, -j 1", "summarize_j1"),
                           ("`--summarize` every trace, -j %d" % j["cpus"], "summarize_jn"),
                           ("job report from the summaries", "from_summaries"),
                           ("job report from the traces, -j 1", "from_traces_j1"),
                           ("job report from the traces, -j %d" % j["cpus"],
                            "from_traces_j%d" % j["cpus"])):
            r = j.get(key)
            if r:
                md.append("| %s | %.2f | %.2f | %.1f |" % (label, r["wall_s"], r["cpu_s"],
                                                          r["peak_rss_kib"] / 1024.0))
        lj = j.get("long")
        if lj:
            for label, key in (("one rank's trace", "one_trace"),
                               ("job report from the traces, -j 1", "from_traces_j1"),
                               ("job report from the traces, -j %d" % j["cpus"],
                                "from_traces_j%d" % j["cpus"])):
                r = lj[key]
                md.append("| %d ranks of %d steps: %s | %.2f | %.2f | %.1f |" % (
                    lj["ranks"], lj["steps_per_rank"], label, r["wall_s"], r["cpu_s"],
                    r["peak_rss_kib"] / 1024.0))
        md.append("")
    md.append("### Budgets\n")
    md.append("| check | measured | |")
    md.append("|---|---:|---|")
    for b in res.get("budgets", []):
        md.append("| %s | %s | %s |" % (
            b["budget"], fmt_measured(b),
            {"missed": "**missed**"}.get(b["status"], b["status"])))
    return "\n".join(md) + "\n"


# ---- main ----------------------------------------------------------------------

def load_workloads(path):
    with open(path) as f:
        items = json.load(f)
    out = []
    for item in items:
        if not isinstance(item, dict) or "name" not in item or "args" not in item:
            raise SystemExit("bench: %s: each workload needs name and args" % path)
        script = item.get("script")
        if script and not os.path.isfile(os.path.join(ROOT, script)):
            raise SystemExit("bench: %s: workload %s: no script %s" % (path, item["name"],
                                                                       script))
        out.append((item["name"], item.get("note", ""), [str(a) for a in item["args"]],
                    script))
    return out


def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__.split("\n", 2)[2])
    ap.add_argument("--only", default="hooks,e2e,profile,analyzer,job",
                    help="comma-separated parts to run (hooks, e2e, profile, analyzer, job)")
    ap.add_argument("--job-ranks", type=int, default=1024, help="ranks of the job part")
    ap.add_argument("--job-steps", type=int, default=300, help="steps of each rank")
    ap.add_argument("--job-long-ranks", type=int, default=32,
                    help="ranks of the job part's long traces")
    ap.add_argument("--job-long-steps", type=int, default=20000,
                    help="steps of each of those")
    ap.add_argument("--quick", action="store_true",
                    help="small figures for a smoke test (not for the docs)")
    ap.add_argument("--reps", type=int, default=5, help="e2e repeats per mode")
    ap.add_argument("--max-reps", type=int, default=9,
                    help="e2e repeats at most, for workloads whose step-time check the"
                    " first --reps leave inside the noise")
    ap.add_argument("--steps", type=int, default=150, help="e2e steps per run")
    ap.add_argument("--workloads", metavar="FILE", action="append", default=[],
                    help="JSON list of extra e2e workloads {name, note, args}")
    ap.add_argument("--only-workloads", metavar="NAMES", default=None,
                    help="comma-separated e2e workload names to run")
    ap.add_argument("--hook-reps", type=int, default=5)
    # Many short rounds: a round hit by preemption is an outlier the median
    # drops; long rounds all carry some of it.
    ap.add_argument("--hook-calls", type=int, default=5000, help="calls per round")
    ap.add_argument("--hook-rounds", type=int, default=101, help="rounds (at most 256)")
    ap.add_argument("--small-records", type=int, default=1000000)
    ap.add_argument("--big-records", type=int, default=20000000)
    ap.add_argument("--analyzer-reps", type=int, default=3)
    ap.add_argument("--cpu", type=int, default=None,
                    help="CPU to pin microbenchmarks to (default: the last usable one)")
    ap.add_argument("--analyzer-cpu", type=int, default=None,
                    help="CPU to pin dlbn-analyze to (default: not pinned; it is"
                    " single-threaded, and on a loaded 2-core machine a fixed CPU"
                    " is often the busy one)")
    ap.add_argument("--keep-traces", action="store_true")
    ap.add_argument("--out", default=os.path.join(BUILD, "bench", "results.json"))
    opts = ap.parse_args(argv)
    if opts.quick:
        opts.reps, opts.steps, opts.hook_reps, opts.max_reps = 1, 30, 1, 1
        opts.hook_calls, opts.hook_rounds = 2000, 11
        opts.small_records, opts.big_records, opts.analyzer_reps = 100000, 1000000, 1
        opts.job_ranks, opts.job_steps = 64, 100
        opts.job_long_ranks, opts.job_long_steps = 8, 1000
    if min(opts.reps, opts.steps, opts.hook_reps, opts.hook_calls, opts.hook_rounds,
           opts.small_records, opts.analyzer_reps) < 1 or opts.big_records <= opts.small_records \
            or opts.hook_rounds > 256:
        ap.error("counts must be >= 1, --hook-rounds <= 256, --big-records > --small-records")
    opts.parts = set(p.strip() for p in opts.only.split(",") if p.strip())
    unknown = opts.parts - {"hooks", "e2e", "profile", "analyzer", "job"}
    if unknown:
        ap.error("unknown part(s): %s" % ", ".join(sorted(unknown)))
    if opts.cpu is None:
        opts.cpu = max(os.sched_getaffinity(0))
    return opts


def check_inputs(opts):
    opts.python = os.environ.get("PYTHON") or "/usr/bin/python3"
    opts.lib = os.path.join(BUILD, "libdlbn.so")
    opts.analyzer = os.path.join(BUILD, "dlbn-analyze")
    opts.gentrace = os.path.join(BUILD, "tests", "dlbn-gentrace")
    need = {"hooks": [opts.lib, os.path.join(BUILD, "tests", "bench", "hookcost"),
                      os.path.join(BUILD, "tests", "simcuda", "libcuda.so.1")],
            "e2e": [opts.lib, opts.analyzer],
            "profile": [opts.lib, opts.analyzer],
            "analyzer": [opts.analyzer, opts.gentrace, PEAKRSS],
            "job": [opts.analyzer, opts.gentrace, PEAKRSS]}
    missing = sorted({p for part in opts.parts for p in need[part] if not os.path.exists(p)})
    if missing:
        raise SystemExit("bench: missing %s; run `make all` first" % ", ".join(missing))


def main(argv):
    opts = parse_args(argv)
    check_inputs(opts)
    workloads = [w + (None,) for w in WORKLOADS]
    for path in opts.workloads:
        workloads += load_workloads(path)
    if opts.only_workloads:
        keep = set(opts.only_workloads.split(","))
        workloads = [w for w in workloads if w[0] in keep]
    t_start = time.monotonic()
    res = {"schema": 1,
           "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
           "machine": machine_info(opts.python), "quick": opts.quick}
    m = res["machine"]
    log("dlbn bench: %s, %d CPUs, kernel %s, clock %s, torch %s, load %s" % (
        m["cpu_model"], m["cpus_online"], m["kernel"], m["clock_source"], m["torch"],
        " ".join(m["loadavg_at_start"].split()[:3])))
    os.makedirs(os.path.dirname(os.path.abspath(opts.out)), exist_ok=True)
    tmp = tempfile.mkdtemp(prefix="dlbn-bench-", dir=os.path.join(BUILD, "bench")
                           if os.path.isdir(os.path.join(BUILD, "bench")) else None)
    try:
        if "hooks" in opts.parts:
            log("hooks ...")
            t0 = time.monotonic()
            res["hooks"] = bench_hooks(opts, tmp)
            res["hooks"]["duration_s"] = time.monotonic() - t0
            print_hooks(res["hooks"])
        if "e2e" in opts.parts:
            log("\ne2e (%d workloads x %d modes x %d repeats) ..." % (
                len(workloads), len(MODES), opts.reps))
            t0 = time.monotonic()
            res["e2e"] = bench_e2e(opts, workloads, tmp)
            res["e2e"]["duration_s"] = time.monotonic() - t0
            print_e2e(res["e2e"])
            print_trace_sizes(res["e2e"])
        if "profile" in opts.parts:
            log("\nprofile ...")
            t0 = time.monotonic()
            res["profile"] = bench_profile(opts, tmp)
            res["profile"]["duration_s"] = time.monotonic() - t0
        if "job" in opts.parts:
            log("\njob of %d ranks ..." % opts.job_ranks)
            t0 = time.monotonic()
            res["job"] = bench_job(opts, tmp)
            res["job"]["duration_s"] = time.monotonic() - t0
            print_job(res["job"])
        if "analyzer" in opts.parts:
            log("\nanalyzer ...")
            t0 = time.monotonic()
            res["analyzer"] = bench_analyzer(opts, tmp)
            res["analyzer"]["duration_s"] = time.monotonic() - t0
            print_analyzer(res["analyzer"])
    finally:
        if not opts.keep_traces:
            shutil.rmtree(tmp, ignore_errors=True)
        else:
            log("traces kept in %s" % tmp)
    res["machine"]["loadavg_at_end"] = read_text("/proc/loadavg")
    res["budgets"] = budgets(res)
    res["duration_s"] = time.monotonic() - t_start
    print_budgets(res["budgets"])
    with open(opts.out, "w") as f:
        json.dump(res, f, indent=1, sort_keys=True)
    md_path = os.path.splitext(opts.out)[0] + ".md"
    with open(md_path, "w") as f:
        f.write(markdown(res))
    log("\nwrote %s and %s (%.0f s; load average at the end %s)" % (
        os.path.relpath(opts.out, os.getcwd()), os.path.relpath(md_path, os.getcwd()),
        res["duration_s"],
        " ".join(res["machine"]["loadavg_at_end"].split()[:3])))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
