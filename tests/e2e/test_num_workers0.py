"""num_workers=0: the dataset runs inside next() on the main thread, so there
is no IPC to see.  With the bootstrap the fetch marks make the loader wait
exact (DETECTED, predicted speedup checked against Replay); without it
(DLBN_PYTHON=0) the loader cannot be told apart from other host work and the
analyzer must say so instead of guessing.

Ground truth: 4 samples x 5 ms = 20 ms per fetch vs 10 ms loop work -> ~3.0.
"""

from e2e_common import check_timing, measured_speedup

ARGS = ["--workers", "0", "--batch-size", "4", "--sample-ms", "5",
        "--step-ms", "10", "--steps-per-epoch", "60"]


def test_detected_through_bootstrap(runs):
    run = runs("nw0", ARGS + ["--mode", "real"])
    analysis = run.analysis
    assert analysis["view"] == "python", run.describe()
    assert analysis["verdict"] == "DETECTED", run.describe()
    assert analysis["steps"]["total"] == 60, run.describe()
    assert analysis["workers"] == [], run.describe()


def test_predicted_speedup_matches_replay(runs):
    real = runs("nw0", ARGS + ["--mode", "real"])
    replay = runs("nw0_replay", ARGS + ["--mode", "replay"])
    predicted = real.analysis["predicted_speedup"]
    measured = measured_speedup(real, replay)
    print("num_workers=0: predicted %.3f measured %.3f" % (predicted, measured))
    check_timing(2.4 < measured < 3.6 and abs(predicted / measured - 1.0) <= 0.10,
                 "predicted %.3f measured %.3f\n%s" % (predicted, measured, real.describe()),
                 real, replay)


def test_without_bootstrap_no_guess(runs):
    run = runs("nw0_ipc", ARGS + ["--mode", "real"], env={"DLBN_PYTHON": "0"})
    analysis = run.analysis
    assert analysis["verdict"] in ("INCONCLUSIVE", "POTENTIAL"), run.describe()
    assert analysis["reasons"], run.describe()
    assert analysis["view"] != "python", run.describe()
