"""Loading costs that land outside next() (analyzer/analysis/outside.h), on real
DataLoaders: 32 MiB batches (8 samples of 4 MiB) from two workers.  After
each batch arrives the loop drops the previous one (its shared memory is
unmapped and released on the loop's thread) - measured by the recorder's
munmap/close timing on the main thread and carried on the fetch marks.
Without a GPU every such cost counts in the stall whole.
"""

import json

from e2e_common import analyze, check_timing

ARGS = ["--workers", "2", "--batch-size", "8", "--sample-kib", "4096",
        "--step-ms", "5", "--steps-per-epoch", "30", "--mode", "real"]


def test_big_batches_costs_after_arrival(runs):
    run = runs("big", ARGS)
    a = run.analysis
    o = a["outside_waits"]
    assert a["view"] == "python", run.describe()
    assert o is not None, run.describe()
    assert o["rule"] == "cpu", o
    assert o["periods"] == a["steps"]["window"], (o, a["steps"])
    # The loop maps each batch: 8 tensors x 4 MiB (or one 32 MiB storage).
    assert 28 <= o["shm_mib_per_step"] <= 36, o
    # Unmapping and releasing 32 MiB of worker-written memory is not free.
    assert o["batch_drop_s"] > 0.0001 * a["steps"]["window"], o
    assert o["batch_drop_in_stall_s"] == o["batch_drop_s"], o
    stall = a["loader_wait"]["stall_s"]
    exposed = a["loader_wait"]["exposed_s"]
    assert abs(stall - (exposed + o["in_stall_s"])) < 1e-3, (stall, exposed, o)
    text = analyze(run.trace).stdout
    assert "batch drop" in text and "first touch" in text, text


def test_small_batches_little_outside(runs):
    run = runs("small", ["--workers", "2", "--batch-size", "4", "--sample-kib", "16",
                         "--step-ms", "5", "--steps-per-epoch", "30", "--mode", "real"])
    o = run.analysis["outside_waits"]
    assert o is not None, run.describe()
    assert o["shm_mib_per_step"] < 1, o
    # First touch is bounded by the pages mapped (2 us per 4 KiB page).
    assert o["first_touch_s"] <= 2e-6 * (o["shm_mib_per_step"] * 256 + 1) * o["periods"], o


def test_pin_memory_thread_maps_the_loop_drops(runs):
    """On the pin-memory path the pin thread receives (maps) each batch and
    the loop drops it: the drop is still timed on the loop's thread."""
    run = runs("big_pin", ARGS + ["--pin-memory-standin"])
    a = run.analysis
    o = a["outside_waits"]
    assert a["path"] == "pin_memory", run.describe()
    assert o is not None and o["periods"] == a["steps"]["window"], run.describe()
    assert 28 <= o["shm_mib_per_step"] <= 36, o
    assert o["batch_drop_s"] > 0.0001 * a["steps"]["window"], o


WRAPPED = ["--workers", "2", "--batch-size", "4", "--sample-ms", "15", "--step-ms", "10",
           "--wrapper-cpu-ms", "8", "--steps-per-epoch", "40", "--mode", "real"]


def test_wrapper_work_timed_and_charged_whole_without_gpu(runs):
    """The loop iterates a wrapper iterable that spends 8 ms of CPU on each
    batch before yielding it: the hand-off marks time it, and under the
    CPU-only rule it counts in the stall whole."""
    run = runs("wrapped", WRAPPED)
    a = run.analysis
    o = a["outside_waits"]
    assert o is not None and o["rule"] == "cpu", run.describe()
    assert o["wrapped_periods"] == o["periods"] == a["steps"]["window"], o
    per_step = o["wrapper_s"] / o["periods"]
    assert 0.008 <= per_step < 0.02, o
    assert o["wrapper_in_stall_s"] == o["wrapper_s"], o
    # The wrapper's CPU is not the loop's own work any more.
    assert o["own_cpu_s"] < 0.004 * o["periods"], o
    stall = a["loader_wait"]["stall_s"]
    assert abs(stall - (a["loader_wait"]["exposed_s"] + o["in_stall_s"])) < 1e-3, (stall, o)
    assert "wrapper" in analyze(run.trace).stdout


def test_wrapper_left_alone_with_handoff_off(runs):
    run = runs("wrapped_off", WRAPPED, env={"DLBN_HANDOFF": "0"})
    o = run.analysis["outside_waits"]
    assert o is not None and o["wrapped_periods"] == 0 and o["wrapper_s"] == 0, o
    assert "wrapper" not in analyze(run.trace).stdout


def test_baseline_of_a_replay_that_keeps_the_wrapper(runs):
    """dlbn-run's Replay (DLBN_REPLAY) caches the DataLoader's batches, so the
    wrapper still works on each: the baseline compares its measured speedup
    with the prediction that keeps what the wrapper cost there, and says so."""
    real = runs("wrapped", WRAPPED)
    replay = runs("wrapped_dr", WRAPPED, env={"DLBN_REPLAY": "8"})
    proc = analyze(real.trace, "--baseline", str(replay.trace), "--format", "json")
    assert proc.returncode == 0, proc.stderr
    b = json.loads(proc.stdout)["baseline"]
    full = real.analysis["predicted_speedup"]
    notes = " ".join(b["notes"])
    assert "wrapper iterator" in notes, b
    # The wrapper's work in the replay run is not loading left in it.
    assert "still waited" not in notes and b["replay_own_predicted_speedup"] < 1.1, b
    assert b["predicted_speedup"] < 0.8 * full, (b, full)
    check_timing(abs(b["predicted_speedup"] / b["measured_speedup"] - 1) <= 0.15,
                 "baseline %s (full prediction %.2f)" % (b, full), real, replay)
