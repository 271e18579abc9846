"""dlbn-analyze -j N: the traces of a job analysed N at a time, on threads.
The job report must not depend on N (nor on which trace finishes first),
nor on the order the traces are given in (rows come in rank order), a
trace that cannot be read fails the run the same way, and bad counts are
usage errors.  Synthetic rank traces from build/tests/dlbn-gentrace, each
rank with its own batch time, so their verdicts and rows differ.
"""

import json
import subprocess

import pytest

from e2e_common import BUILD, analyze, require_binaries

GENTRACE = BUILD / "tests" / "dlbn-gentrace"
RANKS = 5


@pytest.fixture(scope="module")
def ranks(tmp_path_factory):
    require_binaries(lib=False, analyzer=True)
    if not GENTRACE.exists():
        pytest.fail("not built: %s (make)" % GENTRACE, pytrace=False)
    d = tmp_path_factory.mktemp("ranks")
    paths = []
    for r in range(RANKS):
        path = d / ("rank%d.bin" % r)
        # The first rank the longest, so that with several threads the
        # later ones finish first.
        subprocess.run([str(GENTRACE), "-o", str(path), "--steps", str(6000 - 1000 * r),
                        "--rank", str(r), "--world-size", str(RANKS),
                        "--batch-ms", str(8 + 4 * r)], check=True, capture_output=True)
        paths.append(str(path))
    return paths


@pytest.mark.parametrize("fmt", ["json", "text"])
def test_the_job_report_does_not_depend_on_the_jobs(ranks, fmt):
    outs = {}
    for jobs in ("1", "2", str(RANKS + 3)):
        proc = analyze(ranks[0], *ranks[1:], "--format", fmt, "-j", jobs)
        assert proc.returncode == 0, proc.stderr
        outs[jobs] = proc.stdout
    assert len(set(outs.values())) == 1, "the report changed with -j"
    if fmt == "json":
        job = json.loads(outs["1"])
        rows = job["ranks"]
        assert [r["rank"] for r in rows] == list(range(RANKS)), rows
        # Different ranks, different figures: a mixed-up row would show.
        assert len({round(r["stall_s"], 6) for r in rows}) == RANKS, rows


def test_rows_come_in_rank_order_whatever_the_arguments(ranks):
    """A shell lists trace-r10 before trace-r2: the table is by rank, and
    the report is the same as for the traces given in rank order."""
    ordered = analyze(ranks[0], *ranks[1:], "--format", "json")
    shuffled = [ranks[i] for i in (3, 0, 4, 2, 1)]
    mixed = analyze(shuffled[0], *shuffled[1:], "--format", "json")
    assert ordered.returncode == 0 and mixed.returncode == 0, mixed.stderr
    assert mixed.stdout == ordered.stdout
    rows = json.loads(mixed.stdout)["ranks"]
    assert [r["rank"] for r in rows] == list(range(RANKS)), rows
    text = analyze(shuffled[0], *shuffled[1:])
    listed = [line.split()[0] for line in text.stdout.splitlines()
              if "(%s)" % ranks[0] in line or "(%s)" % ranks[-1] in line]
    assert listed[:2] == ["0", str(RANKS - 1)], text.stdout[:2000]


@pytest.mark.parametrize("jobs", ["1", "3"])
def test_an_unreadable_trace_is_named_and_the_rest_reported(ranks, tmp_path, jobs):
    """A rank that cannot be read does not cost the job its report: the
    report says what the verdict rests on, and the exit status says an
    input was lost."""
    missing = str(tmp_path / "gone.bin")
    proc = analyze(ranks[0], missing, *ranks[1:], "-j", jobs, "--format", "json")
    assert proc.returncode == 1, (proc.returncode, proc.stderr)
    assert "gone.bin" in proc.stderr and "cannot open" in proc.stderr, proc.stderr
    job = json.loads(proc.stdout)
    assert [r["rank"] for r in job["ranks"]] == list(range(RANKS))
    assert [u["path"] for u in job["job"]["unreadable"]] == [missing], job["job"]
    assert "cannot open" in job["job"]["unreadable"][0]["why"]
    alone = analyze(missing)
    assert alone.returncode == 1 and alone.stdout == "", "nothing to report on"


@pytest.mark.parametrize("bad", ["0", "-2", "x", "5000"])
def test_bad_job_counts_are_usage_errors(ranks, bad):
    proc = analyze(ranks[0], "-j", bad)
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    assert "--jobs" in proc.stderr, proc.stderr
