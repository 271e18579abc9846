"""Shared helpers of dlbn's end-to-end tests.

Every test runs real PyTorch DataLoaders (tests/e2e/workload.py) in a child
interpreter under LD_PRELOAD=build/libdlbn.so and analyses the trace with
build/dlbn-analyze --format json.  Runs are expensive (a torch import each),
so test modules share them through module-scoped fixtures and make several
assertions on one run.

Environment: DLBN_E2E_KEEP=1 keeps the run directories (paths printed).
"""

import json
import os
import struct
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BUILD = Path(os.environ.get("BUILD", ROOT / "build"))
if not BUILD.is_absolute():
    BUILD = ROOT / BUILD
LIB = BUILD / "libdlbn.so"
ANALYZE = BUILD / "dlbn-analyze"
BOOT_DIR = BUILD / "dlbn-python"
WORKLOAD = Path(__file__).resolve().parent / "workload.py"
PYTHON = sys.executable

VERDICTS = ("DETECTED", "POTENTIAL", "NOT_DETECTED", "INCONCLUSIVE")

# One workload run must never hang the suite.
RUN_TIMEOUT_S = 120


def require_binaries(lib=True, analyzer=False):
    """Fail (not skip: make check builds them) when a needed output is missing."""
    wanted = ([LIB, BOOT_DIR / "sitecustomize.py", BOOT_DIR / "_dlbn_boot.py"]
              if lib else []) + ([ANALYZE] if analyzer else [])
    missing = [str(p) for p in wanted if not p.exists()]
    if missing:
        pytest.fail("not built: %s (run make)" % ", ".join(missing), pytrace=False)


def clean_env(extra=None):
    """The child's environment: no inherited dlbn/Python-path settings."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("DLBN_") and k not in ("LD_PRELOAD", "PYTHONPATH")}
    env["PYTHONUNBUFFERED"] = "1"
    if extra:
        for key, value in extra.items():
            if value is None:
                env.pop(key, None)
            else:
                env[key] = value
    return env


class Run:
    """One workload run: its trace, its timings and the analyzer's view."""

    def __init__(self, directory, name, proc, trace, record, elapsed):
        self.directory = directory
        self.name = name
        self.proc = proc
        self.trace = trace
        self.record = record
        self.elapsed = elapsed
        self._analysis = None

    @property
    def analysis(self):
        """dlbn-analyze --format json of this run (exit 0 asserted)."""
        if self._analysis is None:
            self._analysis = analyze_ok(self.trace)
        return self._analysis

    def describe(self):
        a = self._analysis or {}
        return ("%s: rc=%s verdict=%s predicted=%s view=%s steps=%s reasons=%s\n"
                "stderr tail: %s" % (
                    self.name, self.proc.returncode, a.get("verdict"),
                    a.get("predicted_speedup"), a.get("view"), a.get("steps"),
                    a.get("reasons"), self.proc.stderr[-2000:]))


def run_workload(directory, name, args, preload=True, env=None, expect_rc=0):
    """Run workload.py with `args` (list of str) and return a Run."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    trace = directory / (name + ".dlbn")
    json_out = directory / (name + ".json")
    extra = {"DLBN_OUTPUT": str(trace)}
    if preload:
        require_binaries()
        extra["LD_PRELOAD"] = str(LIB)
    if env:
        extra.update(env)
    cmd = [PYTHON, str(WORKLOAD), "--json-out", str(json_out)] + list(args)
    t0 = time.monotonic()
    proc = subprocess.run(cmd, env=clean_env(extra), cwd=str(directory),
                          capture_output=True, text=True, timeout=RUN_TIMEOUT_S)
    elapsed = time.monotonic() - t0
    if os.environ.get("DLBN_E2E_KEEP"):
        print("kept run %s in %s" % (name, directory))
    assert proc.returncode == expect_rc, (
        "workload %s exited %d (expected %d)\ncmd: %s\nstderr:\n%s" % (
            name, proc.returncode, expect_rc, " ".join(cmd), proc.stderr[-4000:]))
    record = json.loads(json_out.read_text()) if json_out.exists() else None
    if preload:
        assert trace.exists() and trace.stat().st_size > 0, (
            "no trace written at %s\nstderr:\n%s" % (trace, proc.stderr[-4000:]))
    return Run(directory, name, proc, trace, record, elapsed)


def analyze(trace, *extra_args):
    """Run dlbn-analyze; returns the CompletedProcess (never raises on rc)."""
    require_binaries(lib=False, analyzer=True)
    return subprocess.run([str(ANALYZE), str(trace)] + list(extra_args),
                          capture_output=True, text=True, timeout=60)


def analyze_ok(trace):
    proc = analyze(trace, "--format", "json")
    assert proc.returncode == 0, "dlbn-analyze %s exited %d\nstderr:\n%s" % (
        trace, proc.returncode, proc.stderr[-4000:])
    try:
        result = json.loads(proc.stdout)
    except ValueError as exc:
        raise AssertionError("dlbn-analyze --format json printed invalid JSON "
                             "(%s):\n%s" % (exc, proc.stdout[:2000]))
    assert result.get("verdict") in VERDICTS, result
    return result


def trace_origin_s(trace):
    """created_monotonic_ns of the trace's file header, in seconds: the
    origin of the analyzer's window.start_s/end_s."""
    with open(trace, "rb") as f:
        header = f.read(64)
    return struct.unpack_from("<Q", header, 40)[0] / 1e9


def measured_speedup(real, replay):
    """Real time over Replay time over the same steady-state steps.

    The steps are the analyzer's window (its bounds are seconds since the
    trace's creation; time.monotonic() is the recorder's CLOCK_MONOTONIC)
    when they fall on the run's steps, otherwise the workload's own window
    (skip P+1 steps, P = prefetch depth) - the same rule."""
    rt = real.record["step_times"]
    pt = replay.record["step_times"]
    assert len(rt) == len(pt), "real and replay ran different step counts"
    first, last = real.record["window_first_step"] - 1, len(rt) - 1
    win = (real._analysis or {}).get("window") or {}
    start, end = win.get("start_s"), win.get("end_s")
    if isinstance(start, (int, float)) and isinstance(end, (int, float)):
        origin = trace_origin_s(real.trace)
        inside = [k for k, t in enumerate(rt)
                  if start - 1e-3 <= t - origin <= end + 1e-3]
        if len(inside) >= 10:
            first, last = inside[0], inside[-1]
    return (rt[last] - rt[first]) / (pt[last] - pt[first])


def report_text(analysis):
    """All human-readable strings of an analysis, lower-cased (for 'says X')."""
    return json.dumps(analysis).lower()


# Other programs' CPU use (in cores, measured by the workload over its run)
# above which a failed timing assertion is reported as a skip: a loaded
# 2-core machine changes the physics being tested (hand-offs wait for a CPU,
# Real and Replay runs see different loads), so it proves nothing either way.
FOREIGN_LOAD_LIMIT = 0.5


def check_timing(ok, message, *runs):
    """Assert a timing-dependent property of `runs`.  A failure on a quiet
    machine fails the test; on a machine that other programs loaded it skips
    it with the measured load and the failure in the reason."""
    if ok:
        return
    loads = [r.record.get("foreign_load_cores") for r in runs if r.record]
    loads = [x for x in loads if x is not None]
    if loads and max(loads) > FOREIGN_LOAD_LIMIT:
        pytest.skip("machine busy: other programs used %.2f cores during the run "
                    "(limit %.2f); timing assertion not meaningful: %s" % (
                        max(loads), FOREIGN_LOAD_LIMIT, message))
    pytest.fail(message, pytrace=False)
