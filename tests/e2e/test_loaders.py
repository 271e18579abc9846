"""DataLoader variants, all input-bound by construction (supply 30 ms per
batch vs 10 ms loop work, expected speedup ~3): each must be DETECTED and
the analyzer must see the right workers, steps and start-up structure.

Variants: num_workers 1/2/4; fork, spawn and forkserver; persistent and
non-persistent workers over 3 epochs; IterableDataset; the pin-memory thread
path (CPU torch turns it off, --pin-memory-standin stands in for the CUDA
pieces so the real thread and queue.Queue run).  Some variants also run with
DLBN_PYTHON=0, where the verdict must come from the IPC view alone.
"""

import pytest

from e2e_common import check_timing

BATCH = 4
STEP_MS = 10
SUPPLY_MS = 30      # per batch, all workers together


def input_bound(workers, steps=48, extra=()):
    sample_ms = SUPPLY_MS * workers / BATCH
    return ["--workers", str(workers), "--batch-size", str(BATCH),
            "--sample-ms", "%g" % sample_ms, "--step-ms", str(STEP_MS),
            "--steps-per-epoch", str(steps)] + list(extra)


def check_detected(run, view="python"):
    analysis = run.analysis
    assert analysis["verdict"] == "DETECTED", run.describe()
    assert analysis["view"] == view, run.describe()
    return analysis


def check_steps(analysis, run):
    """Exact with the bootstrap's marks.  The IPC view infers steps from
    hand-offs (pipe reads, or semaphore posts by the pin-memory thread) and
    may count one wake-up at shut-down that carried no batch: +-1."""
    total, expected = analysis["steps"]["total"], run.record["steps"]
    if analysis["view"] == "python":
        assert total == expected, run.describe()
    else:
        assert abs(total - expected) <= 1, run.describe()


def worker_pids(analysis):
    return sorted(w["pid"] for w in analysis["workers"])


@pytest.mark.parametrize("workers", [1, 2, 4])
def test_num_workers(runs, workers):
    run = runs("workers%d" % workers, input_bound(workers))
    analysis = check_detected(run)
    assert len(analysis["workers"]) == workers, run.describe()
    # workers[].batches counts the batches each worker finished inside the
    # window; the window's batch hand-offs can lag them by the prefetch depth.
    depth = workers * 2
    window_steps = analysis["steps"]["window"]
    produced = sum(w["batches"] for w in analysis["workers"])
    assert abs(produced - window_steps) <= depth, (produced, analysis["workers"])
    per_batch_ms = SUPPLY_MS * workers      # what one worker spends on a batch
    for w in analysis["workers"]:
        # Input-bound: every worker always has a request queued.
        assert w["busy_fraction"] > 0.8, analysis["workers"]
        assert w["batches"] >= window_steps // workers - depth, analysis["workers"]
        # The recommendation ("num_workers N -> M") is built on this figure.
        check_timing(0.75 * per_batch_ms < w["mean_batch_ms"] < 1.35 * per_batch_ms,
                     "mean_batch_ms %.2f, expected ~%d: %s" % (
                         w["mean_batch_ms"], per_batch_ms, analysis["workers"]), run)


@pytest.mark.parametrize("context,ipc_only", [
    ("fork", False), ("spawn", False), ("forkserver", False), ("spawn", True)])
def test_start_methods(runs, context, ipc_only):
    env = {"DLBN_PYTHON": "0"} if ipc_only else None
    run = runs("ctx_%s%s" % (context, "_ipc" if ipc_only else ""),
               input_bound(2, steps=40, extra=["--context", context]), env=env)
    analysis = check_detected(run, view="ipc" if ipc_only else "python")
    assert analysis["path"] == "direct", run.describe()
    # Only DataLoader workers: not the forkserver or a spawn helper.
    assert len(analysis["workers"]) == 2, analysis["workers"]
    assert all(w["batches"] > 0 for w in analysis["workers"]), analysis["workers"]
    check_steps(analysis, run)


@pytest.mark.parametrize("persistent", [False, True])
def test_epochs(runs, persistent):
    extra = ["--epochs", "3"] + (["--persistent"] if persistent else [])
    run = runs("epochs_%s" % ("persistent" if persistent else "respawn"),
               input_bound(2, steps=20, extra=extra))
    analysis = check_detected(run)
    assert analysis["steps"]["total"] == 60, run.describe()
    assert analysis["steps"]["epochs"] == 3, run.describe()
    # Non-persistent workers are started again for every epoch.
    expected_workers = 2 if persistent else 6
    assert len(worker_pids(analysis)) == expected_workers, analysis["workers"]


def test_iterable_dataset(runs):
    run = runs("iterable", input_bound(2, extra=["--iterable"]))
    analysis = check_detected(run)
    assert analysis["steps"]["total"] == run.record["steps"] == 48, run.describe()
    assert len(analysis["workers"]) == 2, run.describe()


@pytest.mark.parametrize("ipc_only", [False, True])
def test_pin_memory_thread(runs, ipc_only):
    """The main thread waits on a queue.Queue that the pin thread fills."""
    env = {"DLBN_PYTHON": "0"} if ipc_only else None
    run = runs("pin%s" % ("_ipc" if ipc_only else ""),
               input_bound(2, extra=["--pin-memory-standin"]), env=env)
    analysis = check_detected(run, view="ipc" if ipc_only else "python")
    # The stand-in really ran the pin thread, and the analyzer followed the
    # main thread's wait on the queue semaphore.
    assert analysis["path"] == "pin_memory", run.describe()
    check_steps(analysis, run)
    assert len(analysis["workers"]) == 2, run.describe()
