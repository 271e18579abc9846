"""dlbn-analyze --timings: what each phase of an analysis costs, on stderr,
without changing the report.  Synthetic traces from build/tests/dlbn-gentrace:
one with CUDA records (the GPU pass is timed inside pass 2) and one
without; neither has worker profiles, so the hot-spot pass is not made.
"""

import json
import re
import subprocess

import pytest

from e2e_common import BUILD, analyze, require_binaries

GENTRACE = BUILD / "tests" / "dlbn-gentrace"
PHASES = ("open:", "decode + merge alone", "model pass 1", "model pass 2",
          "of which the GPU pass", "verdict, what-if", "hot spots", "reports, exports",
          "total, without the extra pass")


def gentrace(rundir, name, *args):
    require_binaries(lib=False, analyzer=True)
    if not GENTRACE.exists():
        pytest.fail("not built: %s (make)" % GENTRACE, pytrace=False)
    path = rundir / name
    subprocess.run([str(GENTRACE), "-o", str(path)] + list(args), check=True,
                   capture_output=True)
    return path


def phase_lines(stderr):
    lines = {}
    for line in stderr.splitlines():
        for name in PHASES:
            if line.strip().startswith(name):
                lines[name] = line
    return lines


def seconds(line):
    """The numbers after the phase's name (a '-' where there is none)."""
    return re.findall(r"(?<![\w.])(\d+\.\d+|-|not run)(?![\w.])", line)


@pytest.mark.parametrize("gpu", [False, True])
def test_timings_cover_every_phase_and_leave_the_report(rundir, gpu):
    extra = ["--gpu-ms", "15"] if gpu else []
    # Long enough (~0.5M records) that no pass rounds to 0.000 s, however
    # fast the machine.
    path = gentrace(rundir, "timed-%d.bin" % gpu, "--steps", "20000", *extra)
    plain = analyze(path, "--format", "json")
    timed = analyze(path, "--format", "json", "--timings")
    assert plain.returncode == 0 and timed.returncode == 0, timed.stderr
    assert timed.stdout == plain.stdout, "--timings changed the report"
    assert plain.stderr == "", plain.stderr
    records = json.loads(plain.stdout)["trace"]["records"]
    head = "dlbn-analyze: timings of %s (%d records)" % (path, records)
    assert head in timed.stderr, timed.stderr
    lines = phase_lines(timed.stderr)
    assert set(lines) == set(PHASES), timed.stderr
    for name in ("model pass 1", "model pass 2", "decode + merge alone"):
        cpu, wall, rate = (float(x) for x in seconds(lines[name])[:3])
        assert cpu > 0 and wall > 0 and rate > 0, lines[name]
        # Records per CPU-second is the trace's records over the phase's CPU
        # time (printed to the millisecond: the bounds allow for its rounding).
        low, high = records / 1e6 / (cpu + 0.0005), records / 1e6 / max(cpu - 0.0005, 1e-9)
        assert low - 0.05 <= rate <= high + 0.05, lines[name]
    # A sampled figure inside pass 2, only where there are CUDA records.
    gpu_fields = seconds(lines["of which the GPU pass"])
    if gpu:
        assert gpu_fields[0] == "-" and float(gpu_fields[1]) > 0, lines["of which the GPU pass"]
    else:
        assert "not run" in lines["of which the GPU pass"]
    # No worker profiles in a generated trace: no pass for the hot spots.
    assert "not run" in lines["hot spots"]
    total = float(seconds(lines["total, without the extra pass"])[0])
    parts = sum(float(seconds(lines[n])[0]) for n in ("open:", "model pass 1", "model pass 2"))
    assert total >= parts - 0.002, timed.stderr
