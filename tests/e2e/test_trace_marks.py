"""The bootstrap's marks as the recorder writes them (read with the test
reader tests/support/pylib/dlbntrace.py, independently of dlbn-analyze): on the
main thread of the training process, one ITER_BEGIN + CONFIG per epoch and
a FETCH_BEGIN / FETCH_END pair around every batch, ending in FETCH_STOP;
FETCH_END lands just before the loop sees the batch (same CLOCK_MONOTONIC
as time.monotonic()).  With DLBN_PYTHON=0 there are none."""

import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support",
                                "pylib"))
from dlbntrace import Trace  # noqa: E402

BEGIN, END, STOP, ITER = 1, 2, 3, 4
ARGS = ["--workers", "2", "--batch-size", "4", "--sample-ms", "2",
        "--step-ms", "2", "--steps-per-epoch", "15", "--epochs", "2"]


@pytest.fixture(scope="module")
def marked(runs):
    run = runs("marks", ARGS + ["--persistent"])
    trace = Trace(run.trace)
    configs = trace.records_of_pid(run.record["pid"], "CONFIG")
    # iter_id 0: the bootstrap's process-level note, before any iterator's
    assert configs[0]["iter_id"] == 0 and configs[0]["text"].startswith("bootstrap=ok;")
    return run, trace.records_of_pid(run.record["pid"], "MARK"), configs[1:]


def test_mark_sequence(marked):
    run, marks, configs = marked
    got = [(m["kind"], m["iter_id"], m["arg"]) for m in marks]
    expected = []
    for epoch, iter_id in ((0, 1), (1, 2)):
        expected.append((ITER, iter_id, epoch))
        for k in range(15):
            expected += [(BEGIN, iter_id, k), (END, iter_id, k)]
        expected += [(BEGIN, iter_id, 15), (STOP, iter_id, 15)]
    assert got == expected


def test_config_per_iterator(marked):
    run, marks, configs = marked
    assert [c["iter_id"] for c in configs] == [1, 2]
    fields = dict(kv.split("=", 1) for kv in configs[0]["text"].split(";"))
    assert fields["num_workers"] == "2" and fields["batch_size"] == "4"
    assert fields["persistent_workers"] == "1" and fields["start_method"] == "fork"
    assert fields["prefetch_factor"] == "2" and fields["dataset_kind"] == "map"


def test_fetch_end_matches_the_loop(marked):
    run, marks, configs = marked
    ends = [m["t"] / 1e9 for m in marks if m["kind"] == END]
    steps = run.record["step_times"]
    assert len(ends) == len(steps) == 30
    for end, step in zip(ends, steps):
        assert 0 <= step - end < 0.005, (end, step)


def test_no_marks_when_switched_off(runs):
    run = runs("marks_off", ARGS, env={"DLBN_PYTHON": "0"})
    trace = Trace(run.trace)
    assert trace.records_of_pid(run.record["pid"], "MARK") == []
    assert trace.records_of_pid(run.record["pid"], "CONFIG") == []


def test_marks_carry_the_loop_counters(marked):
    """FETCH_* and ITER_BEGIN on the main thread append the loop's eight
    cumulative counters (loop_cost.c): the analyzer ends a lead at an
    iter() whose worker start-up the next fetch carries.  The last two
    are the waits for the interpreter's lock (hooks_gil.c), the loop's and
    the other threads'."""
    run, marks, configs = marked
    names = ("run_ns", "runq_ns", "sys_ns", "minflt", "free_ns", "free_cpu_ns", "gil_ns",
             "gil_others_ns")
    for m in marks:
        assert all(n in m for n in names), m
        assert m["run_ns"] > 0 and m["runq_ns"] >= 0, m
        assert m["gil_ns"] >= 0 and m["gil_others_ns"] >= 0, m
    for n in ("run_ns", "sys_ns", "minflt"):
        values = [m[n] for m in marks]
        assert values == sorted(values), "cumulative counter %s goes backwards" % n
    # Format 3.0 writes them as differences from the extent's previous
    # MARK, only those that moved (32-47 bytes a MARK in 2.0; ~25 here,
    # the bound leaving room for more counters moving on a loaded machine):
    # a counter written whole, or a difference taken from the wrong MARK,
    # costs 4-8 bytes a counter.
    size = sum(m["size"] for m in marks) / len(marks)
    print("bytes per fetch MARK: %.1f" % size)
    assert size < 32
