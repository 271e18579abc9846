"""dlbn-analyze --what-if, --html and --sweep-results on the command line,
with synthetic traces from build/tests/dlbn-gentrace (their figures follow
from its parameters): the text, Markdown and JSON sections agree, the JSON
rows carry the agreed keys, and bad usage or a bad sweep file gets a clear
error without losing the report.  The browser side is test_html_report.py.
"""

import json
import subprocess

import pytest

from e2e_common import ANALYZE, BUILD, analyze, require_binaries

GENTRACE = BUILD / "tests" / "dlbn-gentrace"
ROW_KEYS = {"setting", "value", "predicted_step_ms", "predicted_speedup", "limited_by",
            "predicted_steps_per_s", "predicted_samples_per_s", "current",
            "measured_step_ms"}


@pytest.fixture(scope="module")
def trace(rundir):
    require_binaries(lib=False, analyzer=True)
    if not GENTRACE.exists():
        pytest.fail("not built: %s (make)" % GENTRACE, pytrace=False)
    path = rundir / "w1.bin"
    subprocess.run([str(GENTRACE), "-o", str(path), "--steps", "120", "--workers", "1",
                    "--batch-ms", "80", "--loop-ms", "10", "--sched", "--cpus", "2"],
                   check=True, capture_output=True)
    return path


def test_json_rows(trace):
    proc = analyze(trace, "--what-if", "--format", "json")
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    rows = result["what_if"]
    assert rows and all(set(r) == ROW_KEYS for r in rows), rows[:2]
    workers = {r["value"]: r for r in rows if r["setting"] == "num_workers"}
    assert sorted(workers)[:3] == [0, 1, 2]
    assert workers[1]["current"] and workers[1]["measured_step_ms"] > 0
    assert workers[2]["limited_by"] == "cores"          # (80 + 10) ms CPU / 2 CPUs
    assert abs(workers[2]["predicted_step_ms"] - 45) < 2
    assert abs(workers[2]["predicted_speedup"]
               - workers[1]["measured_step_ms"] / workers[2]["predicted_step_ms"]) < 1e-3
    two = workers[2]
    assert abs(two["predicted_steps_per_s"] * two["predicted_step_ms"] - 1000) < 0.1
    assert abs(two["predicted_samples_per_s"] - 32 * two["predicted_steps_per_s"]) < 0.1
    basis = result["what_if_basis"]
    assert basis["valid"] and basis["cores"] == 2 and basis["num_workers"] == 1
    plain = json.loads(analyze(trace, "--format", "json").stdout)
    assert plain["what_if"] is None and plain["what_if_basis"] is None


def test_text_and_markdown(trace):
    text = analyze(trace, "--what-if").stdout
    assert "What-if (predicted step time per setting" in text
    assert "<- this run (measured" in text
    md = analyze(trace, "--what-if", "--format", "markdown").stdout
    assert "## What-if" in md and "| num_workers | 1 (this run) |" in md
    assert "What-if" not in analyze(trace).stdout


def test_usage_errors(trace, rundir):
    proc = analyze(trace, "--sweep-results", str(rundir / "none.json"))
    assert proc.returncode == 2 and "--sweep-results goes with --html" in proc.stderr
    proc = analyze(trace, trace, "--html", str(rundir / "two.html"))
    assert proc.returncode == 2 and "take one trace" in proc.stderr
    assert "--what-if" in subprocess.run([str(ANALYZE), "--help"], capture_output=True,
                                         text=True).stdout


def test_bad_sweep_file_keeps_the_report(trace, rundir):
    bad = rundir / "bad.json"
    bad.write_text('[{"setting": "num_workers", "value": 2, "measured_step_ms": }]')
    page = rundir / "bad.html"
    proc = analyze(trace, "--html", str(page), "--sweep-results", str(bad))
    assert proc.returncode == 1
    assert "--sweep-results" in proc.stderr and "at byte" in proc.stderr, proc.stderr
    assert proc.stdout.startswith("dlbn-analyze:") and "VERDICT" in proc.stdout
    assert not page.exists()


def test_html_file(trace, rundir):
    page = rundir / "ok.html"
    sweep = rundir / "sweep.json"
    sweep.write_text(json.dumps([{"setting": "num_workers", "value": 2,
                                  "measured_step_ms": 46.0}]))
    proc = analyze(trace, "--html", str(page), "--sweep-results", str(sweep))
    assert proc.returncode == 0, proc.stderr
    html = page.read_text()
    assert html.count('class="whatif-point') >= 4
    assert 'data-measured-ms="46.000"' in html
    assert "<script" not in html
    proc = analyze(trace, "--html", str(rundir))         # a directory: refused
    assert proc.returncode == 1 and "--html" in proc.stderr


def gentrace(rundir, name, *args):
    path = rundir / name
    subprocess.run([str(GENTRACE), "-o", str(path)] + list(args), check=True,
                   capture_output=True)
    return path


@pytest.mark.parametrize("with_what_if", [False, True])
def test_recommendation_count_is_the_what_ifs(trace, rundir, with_what_if):
    """One answer per report: the worker count the recommendation names is
    the what-if's fewest for its best step, --what-if or not.  One worker
    at 40 ms per batch, the loop 10 ms and a hand-off: the verdict's own
    rule (batch / loop, rounded up) says 5, the curve is within 2% of its
    best from 4 on."""
    path = gentrace(rundir, "advice.bin", "--steps", "2000", "--workers", "1",
                    "--batch-ms", "40", "--loop-ms", "10", "--gpu-ms", "3")
    extra = ["--what-if"] if with_what_if else []
    result = json.loads(analyze(path, "--format", "json", *extra).stdout)
    advice = result["advice"]
    assert advice and advice["setting"] == "num_workers" and advice["from"] == 1, advice
    line = result["recommendations"][advice["recommendation"]]
    assert line.startswith("num_workers 1 -> %d:" % advice["to"]), line
    assert "the what-if gives" in line, line
    basis = json.loads(analyze(path, "--format", "json", "--what-if").stdout)["what_if_basis"]
    assert advice["to"] == basis["best_workers"] == 4, (advice, basis["best_workers"])


def test_recommendation_when_more_workers_do_not_help(rundir):
    """Workers busy 91% but the step already at the loop's own time plus
    the hand-off: no "num_workers 4 -> 5", the count is said to be enough
    and the limit named."""
    path = gentrace(rundir, "enough.bin", "--steps", "3000", "--workers", "4",
                    "--gpu-ms", "5", "--sched", "--cpus", "8")
    result = json.loads(analyze(path, "--format", "json").stdout)
    advice = result["advice"]
    assert advice and advice["from"] == advice["to"] == 4, advice
    line = result["recommendations"][advice["recommendation"]]
    assert line.startswith("num_workers 4 is enough:"), line
    assert "not by the number of workers" in line and "->" not in line, line
    text = analyze(path).stdout
    assert "num_workers 4 ->" not in text and "num_workers 4 is enough" in text
