"""Loading costs that land outside next() (analyzer/outside.h), on real
DataLoaders: 32 MiB batches (8 samples of 4 MiB) from two workers.  After
each batch arrives the loop drops the previous one (its shared memory is
unmapped and released on the loop's thread) - measured by the recorder's
munmap/close timing on the main thread and carried on the fetch marks.
Without a GPU every such cost counts in the stall whole.
"""

from e2e_common import analyze

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
