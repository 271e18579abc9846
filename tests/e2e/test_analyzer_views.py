"""dlbn-analyze end to end on what the recorder really writes, for the
analyzer parts that synthetic traces cannot vouch for alone:

- NVTX view: a C program that declares its data loading with NVTX ranges
  (a registered string in its own domain) and no DataLoader; the recorder's
  injection writes the ranges, the analyzer takes them as the loop's waits.
- native stacks: a DataLoader run with DLBN_STACKS=all; the longest waits
  come back with symbolised frames ("function+0xoff (module)").
- ranks: two runs with RANK=0 / RANK=1 (a fast and a slow loader) analysed
  together: per-rank rows from the PROCESS records, the job verdict is the
  slow rank's.
"""

import json
import shutil
import subprocess

import pytest

from e2e_common import ANALYZE, LIB, analyze, analyze_ok, clean_env, require_binaries

NVTX_APP = r"""
#include <nvtx3/nvToolsExt.h>
#include <time.h>

static void sleep_ms(int ms)
{
	struct timespec ts = {0, ms * 1000000L};
	nanosleep(&ts, 0);
}

int main(void)
{
	nvtxDomainHandle_t d = nvtxDomainCreateA("trainer");
	nvtxStringHandle_t s = nvtxDomainRegisterStringA(d, "fetch_batch");
	nvtxEventAttributes_t a = {0};
	a.version = NVTX_VERSION;
	a.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
	a.messageType = NVTX_MESSAGE_TYPE_REGISTERED;
	a.message.registered = s;
	for (int i = 0; i < 40; i++) {
		nvtxRangePushA("train_step");
		nvtxDomainRangePushEx(d, &a); /* the loop obtaining its batch: 6 ms */
		sleep_ms(6);
		nvtxDomainRangePop(d);
		sleep_ms(4); /* compute */
		nvtxRangePop();
	}
	return 0;
}
"""


def test_nvtx_ranges_are_the_loader_waits(rundir):
    require_binaries(lib=True, analyzer=True)
    cc = shutil.which("cc") or shutil.which("gcc")
    if not cc:
        pytest.skip("no C compiler")
    src, app, trace = rundir / "nvtx_app.c", rundir / "nvtx_app", rundir / "nvtx.dlbn"
    src.write_text(NVTX_APP)
    subprocess.run([cc, "-O1", "-I/usr/local/cuda/include", str(src), "-o", str(app), "-ldl"],
                   check=True)
    subprocess.run([str(app)], env=clean_env({"LD_PRELOAD": str(LIB),
                                              "DLBN_OUTPUT": str(trace)}),
                   check=True, timeout=60)
    a = analyze_ok(trace)
    assert a["view"] == "nvtx", a
    assert a["steps"]["total"] == 40, a["steps"]
    assert a["nvtx"]["data_ranges"] == 40 and a["nvtx"]["step_ranges"] == 40, a["nvtx"]
    # 6 ms of loading per 10 ms step: 2.5x; sleeps overshoot a little under load.
    assert 2.0 < a["predicted_speedup"] < 3.2, a
    assert a["verdict"] == "DETECTED" and a["cause"] == "main_thread_loading", a


def test_native_stacks_symbolised(runs):
    run = runs("stacks", ["--workers", "2", "--steps-per-epoch", "40",
                          "--sample-ms", "15", "--step-ms", "5"],
               env={"DLBN_STACKS": "all"})
    a = run.analysis
    stacks = a["stacks"]
    assert stacks, run.describe()
    assert stacks == sorted(stacks, key=lambda s: (not s["in_window"], -s["wait_ms"])), stacks
    frames = [f for s in stacks for f in s["frames"]]
    named = [f for f in frames if "+0x" in f and f.endswith(")")]
    assert named, frames[:20]
    # The interpreter's own evaluation loop is on every Python-level wait.
    assert any("PyEval" in f or "_PyEval" in f for f in frames), frames[:40]
    # The text shows the waits at the loop's Python call site (workload.py's
    # next()), native frames only on request, interpreter frames folded.
    text = analyze(run.trace).stdout
    assert "Longest waits (Python frames of the loop's next()" in text, text
    section = text.split("Longest waits", 1)[1].split("\nTrace:", 1)[0]
    assert "workload.py:" in section and "PyEval" not in section, section
    native = analyze(run.trace, "--native-stacks").stdout
    section = native.split("Longest waits", 1)[1].split("\nTrace:", 1)[0]
    assert "+0x" in section and "interpreter frame(s)" in section, section


def test_ranks_job_verdict(runs):
    fast = runs("rank0", ["--workers", "2", "--steps-per-epoch", "40", "--sample-ms", "2",
                          "--step-ms", "10"], env={"RANK": "0", "WORLD_SIZE": "2"})
    slow = runs("rank1", ["--workers", "1", "--steps-per-epoch", "40", "--sample-ms", "12",
                          "--step-ms", "5"], env={"RANK": "1", "WORLD_SIZE": "2"})
    proc = subprocess.run([str(ANALYZE), "--format", "json", str(slow.trace), str(fast.trace)],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    a = json.loads(proc.stdout)
    ranks = {r["rank"]: r for r in a["ranks"]}
    assert sorted(ranks) == [0, 1] and all(r["rank_source"] == "trace" for r in ranks.values()), a["ranks"]
    assert all(r["world_size"] == 2 for r in ranks.values()), a["ranks"]
    assert ranks[1]["verdict"] in ("DETECTED", "POTENTIAL"), ranks
    assert a["job"]["worst_rank"] == 1 and a["verdict"] == ranks[1]["verdict"], a["job"]
    assert ranks[1]["step_ms"] > ranks[0]["step_ms"] * 0.8, ranks
