"""A model trained on the CPU shares the cores with the loader's workers
(analyzer/analysis/shared_cores.h): the thread census sees torch's intra-op threads,
which call no hook, and the analyzer counts the loop's time spent waiting
for them while they queued behind the workers as a loading cost.

tests/support/pipelines/cpu_train.py with two intra-op threads (--threads 2) and
two workers decoding large JPEGs on a 2-core machine: the workers always
hold cores while the model works, so its threads queue; the figures
asserted are the evidence (which threads, that they queued, what the
report says), not timings.  With num_workers=0 the loading runs in the
loop's own thread: the same threads are found but the figure is not used.
"""

import json
import subprocess
from pathlib import Path

import pytest

from e2e_common import LIB, PYTHON, ROOT, RUN_TIMEOUT_S, analyze, analyze_ok, clean_env

PROGRAM = ROOT / "tests" / "support" / "pipelines" / "cpu_train.py"
SKIP_STATUS = 77
SMALL = ["--setting", "input", "--image-size", "1024x768", "--steps", "24", "--val-steps", "1",
         "--threads", "2", "--crop", "112"]


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("cpu-train-data")


def traced(directory, data_dir, name, extra):
    trace = Path(directory) / (name + ".dlbn")
    out = Path(directory) / (name + ".json")
    cmd = [PYTHON, str(PROGRAM), "--mode", "real", "--json-out", str(out),
           "--data-dir", str(data_dir)] + SMALL + extra
    proc = subprocess.run(cmd, env=clean_env({"LD_PRELOAD": str(LIB),
                                              "DLBN_OUTPUT": str(trace)}),
                          cwd=str(directory), capture_output=True, text=True,
                          timeout=RUN_TIMEOUT_S)
    if proc.returncode == SKIP_STATUS:
        pytest.skip(proc.stderr.strip().splitlines()[-1])
    assert proc.returncode == 0, proc.stderr[-3000:]
    record = json.loads(out.read_text())
    if record.get("threads", 0) < 2:
        pytest.skip("torch here runs %s intra-op thread(s)" % record.get("threads"))
    return trace


@pytest.fixture(scope="module")
def workers2(tmp_path_factory, data_dir):
    return traced(tmp_path_factory.mktemp("cpu-train"), data_dir, "workers2",
                  ["--workers", "2"])


def test_census_finds_the_intraop_thread(workers2):
    dump = analyze(workers2, "--dump").stdout
    assert " TASK " in dump and 'name="' in dump, dump[-2000:]
    a = analyze_ok(workers2)
    mt = a["outside_waits"]["model_threads"]
    assert mt is not None, a["outside_waits"]
    assert mt["intraop_threads"] == 2, mt
    # The pool's other thread, the busiest the census saw; the loop's own
    # thread is not in the census.
    assert len(mt["threads"]) == 1, mt
    thread = mt["threads"][0]
    assert thread["run_s"] > 0.25 * a["outside_waits"]["own_cpu_s"], (thread, a["outside_waits"])
    assert a["cpu"]["census_threads"] >= 1, a["cpu"]


def test_census_bounds_loop_periods(workers2):
    """The census at a batch's arrival and at the next fetch begin bounds
    loop periods: the model thread's figures in the periods are measured
    there, not guessed from the census's span."""
    a = analyze_ok(workers2)
    o = a["outside_waits"]
    thread = o["model_threads"]["threads"][0]
    # A census at most every 100 ms: a window of 19 steps of 1024x768
    # decodes (seconds here, well over 100 ms on any machine) bounds at
    # least one period, and no bounded time lies outside the periods.
    assert thread["periods"] >= 1, thread
    assert 0 < thread["period_wall_s"] <= o["wall_s"] + 1e-6, (thread, o)
    text = analyze(workers2).stdout
    if thread["periods"] >= 3:  # DLBN_PERIODS_MIN (shared_cores.h)
        assert "measured in %d of them" % thread["periods"] in text, text
    else:
        assert "the census's span's share" in text, text


def test_waiting_for_queued_model_threads_is_a_loading_cost(workers2):
    a = analyze_ok(workers2)
    o = a["outside_waits"]
    mt = o["model_threads"]
    assert mt["applies"] is True and mt["why_not"] is None, mt
    # Two workers decoding 1024x768 JPEGs hold the 2 cores: the model's
    # thread queued for a CPU.
    thread = mt["threads"][0]
    assert thread["runq_s"] > 0 and 0 < thread["off_s"] <= thread["runq_s"], mt
    # The union of its and the loop's times off, less the loop's own: at
    # most its own time off.
    assert 0 < mt["waited_s"] <= thread["off_s"] + 1e-6, mt
    assert 0 <= mt["all_cores_busy"] <= 1, mt
    assert abs(o["slowed_s"] - mt["waited_s"]) < 1e-6, o
    assert o["slowed_in_stall_s"] == o["slowed_s"], o  # no GPU: whole
    stall = a["loader_wait"]["stall_s"]
    assert abs(stall - (a["loader_wait"]["exposed_s"] + o["in_stall_s"])) < 1e-3, (stall, o)
    text = analyze(workers2).stdout
    assert "model threads" in text and "slowed by the workers' CPU use" in text, text
    assert "sched_setaffinity" in text, text


def test_loading_in_the_loop_thread_is_not_the_model(tmp_path_factory, data_dir):
    """num_workers=0: no worker holds a core while the model runs; the
    model's thread is named, the figure is not used."""
    trace = traced(tmp_path_factory.mktemp("cpu-train-w0"), data_dir, "workers0",
                   ["--workers", "0", "--steps", "8"])
    a = analyze_ok(trace)
    mt = a["outside_waits"]["model_threads"]
    assert mt is not None and mt["applies"] is False, mt
    assert "loop's thread" in mt["why_not"], mt
    assert a["outside_waits"]["slowed_s"] == 0, a["outside_waits"]
