"""A DataLoader worker killed with SIGKILL mid-run: the DataLoader raises in
the main process (the workload exits 3), the worker's data up to shortly
before the kill survives, and the analyzer still analyses the trace (exit 0)
and says that a worker was killed."""

import pytest

from e2e_common import analyze

ARGS = ["--workers", "2", "--batch-size", "4", "--sample-ms", "15",
        "--step-ms", "10", "--steps-per-epoch", "100", "--kill-worker-after", "1.0"]


@pytest.fixture(scope="module")
def killed(runs):
    return runs("kill", ARGS, expect_rc=3)


def test_workload_saw_the_kill(killed):
    assert killed.record["killed_pid"], killed.record
    assert "killed" in (killed.record["error"] or "").lower() or \
        "exited unexpectedly" in (killed.record["error"] or ""), killed.record["error"]


def test_trace_still_analysable(killed):
    analysis = killed.analysis      # asserts exit 0 and valid JSON
    assert analysis["steps"]["total"] >= 10, killed.describe()
    pids = [w["pid"] for w in analysis["workers"]]
    assert killed.record["killed_pid"] in pids, (killed.record["killed_pid"], pids)


def test_report_says_a_worker_was_killed(killed):
    text = analyze(killed.trace)
    assert text.returncode == 0, text.stderr
    assert "kill" in text.stdout.lower(), text.stdout
    assert "kill" in str(killed.analysis).lower(), killed.describe()
