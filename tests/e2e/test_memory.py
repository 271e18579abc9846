"""The memory evidence under real limits (no mocks): real DataLoaders
(memory_workload.py) under the preload, some inside a memory cgroup or with
a small /dev/shm (e2e_limits.py), analysed by dlbn-analyze.

  a  a dataset of Python str, 2 workers, no limit: each worker copies the
     pages it reads (copy-on-read); the JSON "memory" has the processes,
     their growth agrees with /proc/PID/smaps_rollup read by the workload,
     a "copy-on-read:" reason and a numpy recommendation, no failure.
  b  the same data in a numpy array: no growth named.
  c  the str dataset with 10 workers inside a memory cgroup whose limit
     (from run a's own figures) holds the start but not the copies: the run
     is OOM-killed, "failure" says out_of_memory with the limit, the text
     says RUN FAILED, the job's cgroup and limit are the ones set.
  d  batches larger than a tmpfs /dev/shm holds: a worker dies of SIGBUS
     (torch 1.x) or torch raises "unable to allocate shared memory" (2.x):
     "failure" says out_of_shared_memory.
  e  --what-if of a run recorded inside a limit: the recommended worker
     count is predicted to fit, and a rerun with it inside the same limit
     is not killed and takes the predicted step time (within 15%).  The
     count that just ran inside a limit is predicted to fit it.
  f  dlbn-run --sweep past the limit: with --sweep-all the point that does
     not fit is OOM-killed, named ("out of memory at num_workers=10") and
     the sweep keeps the other; without, it is skipped as predicted not to
     fit.

Each run is a few seconds on 2 cores; runs are module-scoped and shared.
DLBN_E2E_KEEP=1 keeps the traces (paths printed with -s).
"""

import json
import math
import subprocess

import pytest

from e2e_common import PYTHON, ROOT, analyze, check_timing, clean_env
from e2e_limits import MEMORY_WORKLOAD, MemoryCgroup, require_small_shm, run_limited

# ~31 MiB of str objects (400000 x 80 B): a worker that reads 200 items a
# sample, 8 samples a batch, 40 batches copies nearly all of it.
COMMON = ["--items", "400000", "--touch", "200", "--sleep-ms", "5", "--cpu-ms", "1",
          "--batch-size", "8", "--steps", "80", "--step-ms", "5", "--sample-kib", "16"]
OBJECTS = ["--kind", "objects"] + COMMON
NUMPY = ["--kind", "numpy"] + COMMON
OOM_WORKERS = 10
# The what-if's runs: twice the steps, for a steady-state window of ~150.
WHATIF = OBJECTS + ["--steps", "160"]
# /dev/shm starved: 4 workers x prefetch 2 x 512 KiB batches in flight = 4 MiB
# in a 2 MiB tmpfs.
SHM_KIB = 2048
SHM_ARGS = ["--kind", "numpy", "--items", "20000", "--touch", "0", "--sleep-ms", "2",
            "--cpu-ms", "0", "--workers", "4", "--prefetch-factor", "2",
            "--batch-size", "8", "--sample-kib", "64", "--steps", "60", "--step-ms", "2"]
STEP_TOLERANCE = 0.15
MIB = 1048576


def analysis_of(run):
    """dlbn-analyze --format json of a run whatever its exit status (a
    failed run's trace must still be analysable: exit 0)."""
    if run._analysis is None:
        proc = analyze(run.trace, "--format", "json")
        assert proc.returncode == 0, "dlbn-analyze %s exited %d\n%s" % (
            run.trace, proc.returncode, proc.stderr[-3000:])
        run._analysis = json.loads(proc.stdout)
    return run._analysis


def text_of(run):
    proc = analyze(run.trace)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout


def what_if_of(run):
    proc = analyze(run.trace, "--what-if", "--format", "json")
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout)


def brief(run):
    """What to print when an assertion on a run fails."""
    a = run._analysis or {}
    mem = a.get("memory") or {}
    return ("%s: rc=%s trace=%s\nfailure=%s\nmemory=%s\nreasons=%s\nstderr tail: %s" % (
        run.name, run.proc.returncode, run.trace, json.dumps(a.get("failure")),
        json.dumps({k: v for k, v in mem.items() if k != "processes"}),
        a.get("reasons"), run.proc.stderr[-1500:]))


def rows_by_role(memory):
    procs = memory["processes"]
    return ([p for p in procs if p["role"] == "training"],
            [p for p in procs if p["role"] == "worker"])


def step_ms(record):
    """The workload's own steady-state step time (e2e rule: skip P+1 steps)."""
    steps = record["steps"] - record["window_first_step"]
    assert record.get("window_s") and steps >= 10, record
    return record["window_s"] * 1000.0 / steps


def num_workers_rows(result):
    return {r["value"]: r for r in result.get("what_if") or []
            if r["setting"] == "num_workers"}


# ---- runs -----------------------------------------------------------------

@pytest.fixture(scope="module")
def objects_run(rundir):
    run = run_limited(rundir, "objects", OBJECTS + ["--workers", "2"])
    assert run.proc.returncode == 0, run.proc.stderr[-3000:]
    return run


@pytest.fixture(scope="module")
def numpy_run(rundir):
    run = run_limited(rundir, "numpy", NUMPY + ["--workers", "2"])
    assert run.proc.returncode == 0, run.proc.stderr[-3000:]
    return run


def anon_main_mib(memory):
    """The training process's dirty pages at its first sample: what it
    charges a cgroup that it starts in (its file pages are page cache
    that other runs already brought in)."""
    main = rows_by_role(memory)[0][0]
    return main["shared_dirty_mib"] + main["private_dirty_mib"][0]


def per_worker_mib(memory):
    cow = memory["copy_on_write"]
    return cow["worker_base_mib"] + cow["touched_mib"]


@pytest.fixture(scope="module")
def oom_run(rundir, objects_run):
    """OOM_WORKERS workers in a limit that holds the training process and the
    workers' start but only half of the copies they make (from run a's
    figures): killed by the cgroup's OOM killer a few batches in."""
    memory = analysis_of(objects_run)["memory"]
    assert memory and memory["copy_on_write"]["named"], brief(objects_run)
    cow = memory["copy_on_write"]
    limit_mib = (anon_main_mib(memory)
                 + OOM_WORKERS * (cow["worker_base_mib"] + 0.5 * cow["touched_mib"]))
    with MemoryCgroup(limit_mib * MIB, "oom") as cg:
        run = run_limited(rundir, "oom", OBJECTS + ["--workers", str(OOM_WORKERS),
                                                    "--steps", "120"], cgroup=cg)
        run.cgroup = dict(version=cg.version, limit_mib=cg.limit_mib,
                          oom_kills=cg.oom_kills(), peak_bytes=cg.peak_bytes(),
                          path=cg.path)
    return run


@pytest.fixture(scope="module")
def shm_run(rundir):
    require_small_shm()
    return run_limited(rundir, "shm", SHM_ARGS, shm_kib=SHM_KIB)


# ---- a: copy-on-read, no limit ----------------------------------------------

def test_objects_memory_rows(objects_run):
    """The training process and both workers, with smaps_rollup figures
    that /proc agrees with."""
    a = analysis_of(objects_run)
    memory = a["memory"]
    assert memory is not None and memory["smaps_rollup"] is True, brief(objects_run)
    mains, workers = rows_by_role(memory)
    record = objects_run.record
    assert [m["pid"] for m in mains] == [record["pid"]], (mains, record["pid"])
    assert memory["workers"] == 2, brief(objects_run)
    assert sorted(w["pid"] for w in workers) == sorted(record["worker_pids"]), (
        workers, record["worker_pids"])
    truth = record["proc_last"]["workers"]
    for w in workers:
        proc_last = truth[str(w["pid"])]
        assert proc_last, "the workload could not read /proc/%d/smaps_rollup" % w["pid"]
        # The worker's last sample (before it exits) and the workload's
        # reading after the last batch see the same private pages.
        seen = proc_last["Private_Dirty"] / 1024.0
        assert abs(w["private_dirty_mib"][1] - seen) <= max(3.0, 0.1 * seen), (w, proc_last)
        # PSS divides each shared page among the processes mapping it, so it
        # moves as a sibling exits first or the parent frees pages between
        # the workload's reading and the worker's exit.  On a busy machine
        # the last smaps_rollup may come a second before the end, which the
        # analysis puts forward from the faults with each copy whole in PSS
        # (the pessimistic end): bounded by the worker's own pages below
        # and its RSS above, near the reading, above it rather than under.
        pss = proc_last["Pss"] / 1024.0
        assert w["uss_mib"][1] <= w["pss_mib"][1] <= w["rss_mib"][1], w
        assert -max(5.0, 0.2 * pss) <= w["pss_mib"][1] - pss <= max(5.0, 0.3 * pss), (
            w, proc_last)
        assert w["ended"] == "exited" and w["end_code"] == 0, w
    m = mains[0]
    main_first = record["proc_first"]["main"]
    assert m["rss_mib"][0] > 0 and abs(m["rss_mib"][1] - main_first["Rss"] / 1024.0) \
        <= 0.1 * m["rss_mib"][1], (m, main_first)
    assert m["uss_mib"][0] > 0 and m["pss_mib"][0] >= m["uss_mib"][0], m
    # PSS summed once per process: between the largest process's and the
    # sum of every RSS.
    total = memory["total_pss_mib"]
    assert max(p["pss_mib"][1] for p in memory["processes"]) < total \
        <= sum(p["rss_mib"][1] for p in memory["processes"]), memory


def test_objects_workers_grow(objects_run):
    """Each worker's private pages grow by tens of MiB while its RSS holds;
    growth_kib_per_batch is that growth over the batches between the samples."""
    memory = analysis_of(objects_run)["memory"]
    _, workers = rows_by_role(memory)
    steps = objects_run.record["steps"]
    record = objects_run.record
    for w in workers:
        grown = w["private_dirty_mib"][1] - w["private_dirty_mib"][0]
        assert grown >= 10, (w, brief(objects_run))
        assert w["uss_mib"][1] - w["uss_mib"][0] >= 10, w
        assert w["rss_mib"][1] - w["rss_mib"][0] < 0.5 * grown, w   # RSS holds
        assert 0 < w["batches"] <= steps, (w, steps)
        assert w["growth_kib_per_batch"] > 0, w
        assert abs(w["growth_kib_per_batch"] * w["batches"] - grown * 1024) \
            <= 0.02 * grown * 1024 + 8, w
        # /proc's own view over the same run: the workload read each worker
        # after the first and the last batch.
        first = record["proc_first"]["workers"][str(w["pid"])]
        last = record["proc_last"]["workers"][str(w["pid"])]
        assert (last["Private_Dirty"] - first["Private_Dirty"]) / 1024.0 >= 5, (first, last)
    cow = memory["copy_on_write"]
    assert cow["named"] is True, (cow, brief(objects_run))
    assert cow["mib_per_worker"] >= 10 and cow["kib_per_batch"] > 0, cow
    # A worker cannot copy more than it shared when it started.
    assert cow["mib_per_worker"] <= cow["copyable_mib"], cow
    assert 0 < cow["touched_mib"] <= cow["copyable_mib"], cow
    assert cow["epoch_batches"] == steps, cow


def test_objects_reason_and_recommendation(objects_run):
    a = analysis_of(objects_run)
    cow = [r for r in a["reasons"] if r.startswith("copy-on-read:")]
    assert len(cow) == 1, a["reasons"]
    # The line is whole (a cut line ends in an open parenthesis).
    assert cow[0].count("(") == cow[0].count(")"), cow[0]
    recs = [r for r in a["recommendations"] if "numpy" in r]
    assert recs and ("pyarrow" in recs[0] or "numpy arrays" in recs[0]), a["recommendations"]
    assert a["failure"] is None, a["failure"]


def test_objects_text_has_memory_table(objects_run):
    text = text_of(objects_run)
    lines = text.splitlines()
    header = [l for l in lines if l.strip().startswith("memory ") and "pid" in l
              and "pss" in l.lower()]
    assert header, text
    memory = analysis_of(objects_run)["memory"]
    for p in memory["processes"]:
        row = [l for l in lines if l.split()[:2] == [str(p["pid"]), p["role"]]]
        assert row, (p["pid"], text)
    assert "RUN FAILED" not in text


# ---- b: the same data in numpy ---------------------------------------------

def test_numpy_no_copy_on_read(numpy_run, objects_run):
    a = analysis_of(numpy_run)
    memory = a["memory"]
    assert memory is not None and memory["workers"] == 2, brief(numpy_run)
    assert memory["copy_on_write"]["named"] is False, memory["copy_on_write"]
    assert not [r for r in a["reasons"] if r.startswith("copy-on-read:")], a["reasons"]
    assert a["failure"] is None, a["failure"]
    # The workers' growth is a part of the str dataset's.
    _, workers = rows_by_role(memory)
    _, object_workers = rows_by_role(analysis_of(objects_run)["memory"])
    grown = max(w["private_dirty_mib"][1] - w["private_dirty_mib"][0] for w in workers)
    object_grown = min(w["private_dirty_mib"][1] - w["private_dirty_mib"][0]
                       for w in object_workers)
    # Both grow by the worker's own heap (its batches, the interpreter's
    # arenas: ~10 MiB here); only the str workers also copy the ~31 MiB
    # of objects they read.
    assert grown < 0.4 * object_grown and object_grown - grown > 15.0, (
        workers, object_workers)


# ---- c: OOM-killed inside a memory cgroup ----------------------------------

def test_oom_run_was_killed(oom_run):
    """Precondition of the other c tests: the limit did kill the run."""
    cg = oom_run.cgroup
    assert oom_run.proc.returncode != 0, (
        "not killed inside %.0f MiB (cgroup peak %s MiB)\n%s" % (
            cg["limit_mib"], cg["peak_bytes"] and cg["peak_bytes"] // MIB,
            oom_run.proc.stderr[-2000:]))
    assert cg["oom_kills"] and cg["oom_kills"] >= 1, cg


def test_oom_failure_named(oom_run):
    a = analysis_of(oom_run)
    failure = a["failure"]
    cg = oom_run.cgroup
    assert failure is not None and failure["kind"] == "out_of_memory", brief(oom_run)
    text = failure["text"].lower()
    assert "oom kill" in text, failure
    assert "limit %.0f mib" % cg["limit_mib"] in text, (failure, cg)
    assert 0 < failure["t_s"] < oom_run.elapsed + 1, (failure, oom_run.elapsed)
    assert failure["memory_before"], failure


def test_oom_job_memory(oom_run):
    a = analysis_of(oom_run)
    job = (a["memory"] or {}).get("job")
    cg = oom_run.cgroup
    assert job is not None, brief(oom_run)
    assert job["cgroup_version"] in (1, 2) and job["cgroup_version"] == cg["version"], job
    assert job["limit_mib"] is not None and abs(job["limit_mib"] - cg["limit_mib"]) <= 1, (
        job, cg)
    assert job["budget_mib"] is not None and abs(job["budget_mib"] - cg["limit_mib"]) <= 1, job
    if job["oom_kills"] is not None:
        assert 1 <= job["oom_kills"] <= cg["oom_kills"], (job, cg)
    assert job["peak_mib"] <= cg["limit_mib"] + 1, job


def test_oom_text_report(oom_run):
    text = text_of(oom_run)
    assert "RUN FAILED" in text, text[:3000]
    line = [l for l in text.splitlines() if "RUN FAILED" in l][0]
    assert "out of memory" in line.lower(), line


# ---- d: /dev/shm too small --------------------------------------------------

def test_shm_failure_named(shm_run):
    in_flight_kib = 4 * 2 * 8 * 64
    assert in_flight_kib >= 2 * SHM_KIB       # the sizes do not fit by far
    assert shm_run.proc.returncode != 0, (
        "the run did not fail with %d KiB of batches in flight in a %d KiB /dev/shm\n%s"
        % (in_flight_kib, SHM_KIB, shm_run.proc.stderr[-2000:]))
    a = analysis_of(shm_run)
    failure = a["failure"]
    assert failure is not None and failure["kind"] == "out_of_shared_memory", (
        "%s\nworkload's error: %s" % (brief(shm_run),
                                      ((shm_run.record or {}).get("error") or "")[-400:]))
    assert "shared memory" in failure["text"].lower() or "/dev/shm" in failure["text"], failure


def test_shm_job_sees_the_small_dev_shm(shm_run):
    a = analysis_of(shm_run)
    job = (a["memory"] or {}).get("job")
    assert job is not None, brief(shm_run)
    assert abs(job["shm_size_mib"] - SHM_KIB / 1024.0) <= 0.1, job
    assert 0 <= job["shm_free_mib"] <= job["shm_size_mib"], job


def test_shm_text_report(shm_run):
    text = text_of(shm_run)
    assert "RUN FAILED" in text, (text[:3000], brief(shm_run))


# ---- e: the what-if's memory ------------------------------------------------
# NOTE: these hold up the what-if's memory part (predicted_memory_mib, fits,
# limited_by "memory"/"shm", what_if_basis.memory_budget_mib, an advice that
# never names a count that does not fit); written before it was implemented,
# they fail without it.  Not skipped on purpose.

def test_what_if_advice_fits_and_holds(rundir, objects_run):
    """A 2-worker run recorded inside a limit that holds about half of the
    extra workers that run a's own what-if would add: the advice's count is
    predicted to fit, some larger count is not (the limit binds), and a rerun
    with the advice's count inside the same limit is not killed and takes
    the predicted step time within 15% (the workload's own clock)."""
    a = analysis_of(objects_run)
    memory = a["memory"]
    assert memory and memory["copy_on_write"]["named"], brief(objects_run)
    unlimited = (a.get("advice") or {}).get("to")
    assert unlimited and unlimited > 2, ("run a should want more workers", a.get("advice"))
    # The analyzer's model counts the memory a limit cannot reclaim
    # (held_mib: anonymous pages, shared ones once) and keeps a 10% margin;
    # this limit gives it room for about half the extra workers.
    limit_mib = (memory["held_mib"]
                 + math.ceil((unlimited - 2) / 2.0) * per_worker_mib(memory)) / 0.9
    with MemoryCgroup(limit_mib * MIB, "whatif") as cg:
        base = run_limited(rundir, "whatif-base", WHATIF + ["--workers", "2"], cgroup=cg)
        base_kills = cg.oom_kills()
    assert base.proc.returncode == 0 and not base_kills, base.proc.stderr[-2000:]
    result = what_if_of(base)
    basis = result["what_if_basis"]
    assert basis and basis.get("valid"), basis
    assert basis.get("memory_budget_mib") is not None and \
        abs(basis["memory_budget_mib"] - cg.limit_mib) <= 1, (basis, cg.limit_mib)
    rows = num_workers_rows(result)
    for r in rows.values():
        assert "fits" in r and "predicted_memory_mib" in r and "predicted_shm_mib" in r, r
        if r["fits"] is False:
            assert r["limited_by"] in ("memory", "shm"), r
    assert any(r["fits"] is False for r in rows.values()), (
        "no count is predicted not to fit inside %.0f MiB (run a wanted %d workers)"
        % (cg.limit_mib, unlimited), [(v, r["predicted_memory_mib"], r["fits"])
                                      for v, r in sorted(rows.items())])
    fit_mem = [r["predicted_memory_mib"] for r in rows.values() if r["fits"]]
    nofit_mem = [r["predicted_memory_mib"] for r in rows.values()
                 if r["fits"] is False and r["limited_by"] == "memory"]
    if fit_mem and nofit_mem:
        assert max(fit_mem) < min(nofit_mem), sorted(
            (v, r["predicted_memory_mib"], r["fits"]) for v, r in rows.items())
    advice = result.get("advice")
    assert advice and advice["setting"] == "num_workers" and advice["from"] == 2, advice
    to = advice["to"]
    assert to in rows and rows[to]["fits"] is True, (advice, rows.get(to))
    predicted = rows[to]["predicted_step_ms"]

    with MemoryCgroup(limit_mib * MIB, "whatif") as cg2:
        rerun = run_limited(rundir, "whatif-rerun", WHATIF + ["--workers", str(to)],
                            cgroup=cg2, preload=False)
        kills, peak = cg2.oom_kills(), cg2.peak_bytes()
    assert rerun.proc.returncode == 0 and not kills, (
        "num_workers=%d, predicted to fit in %.0f MiB (%.0f MiB predicted), was killed "
        "(exit %d, %s OOM kills, peak %s MiB)\n%s" % (
            to, cg2.limit_mib, rows[to]["predicted_memory_mib"], rerun.proc.returncode,
            kills, peak and peak // MIB, rerun.proc.stderr[-1500:]))
    measured = step_ms(rerun.record)
    error = predicted / measured - 1
    print("what-if inside %.0f MiB: run a wanted %d workers, advice %d -> %d (%.0f MiB "
          "predicted, rerun's cgroup peak %s MiB); step %.2f ms predicted, %.2f measured "
          "(%+.1f%%)" % (cg2.limit_mib, unlimited, advice["from"], to,
                         rows[to]["predicted_memory_mib"], peak and peak // MIB, predicted,
                         measured, 100 * error))
    check_timing(abs(error) <= STEP_TOLERANCE,
                 "num_workers=%d: predicted %.2f ms per step, measured %.2f ms (%+.0f%%, "
                 "limit %.0f%%)" % (to, predicted, measured, 100 * error,
                                    100 * STEP_TOLERANCE),
                 rerun, base)


def test_what_if_says_the_run_fits_where_it_ran(rundir, objects_run):
    """A 2-worker run inside a limit that its measured peak stays well under
    (a quarter of it free): the what-if must not say that the count that
    just ran there does not fit.  The limit is from run a's anonymous pages
    (what a cgroup is charged for and cannot reclaim), not its PSS."""
    memory = analysis_of(objects_run)["memory"]
    assert memory and memory["copy_on_write"]["named"], brief(objects_run)
    limit_mib = (anon_main_mib(memory) + 2 * per_worker_mib(memory)) / 0.7
    with MemoryCgroup(limit_mib * MIB, "fits") as cg:
        run = run_limited(rundir, "fits-base", OBJECTS + ["--workers", "2"], cgroup=cg)
        peak, kills = cg.peak_bytes(), cg.oom_kills()
    assert run.proc.returncode == 0 and not kills, run.proc.stderr[-2000:]
    assert peak is not None and peak / MIB <= 0.8 * cg.limit_mib, (
        "precondition: the run's cgroup peak %.0f MiB should be under 80%% of the "
        "%.0f MiB limit" % (peak / MIB, cg.limit_mib))
    result = what_if_of(run)
    rows = num_workers_rows(result)
    current = [r for r in rows.values() if r["current"]]
    assert len(current) == 1 and current[0]["value"] == 2, rows
    row = current[0]
    assert row.get("fits") is True, (
        "num_workers=2 ran inside %.0f MiB with its peak at %.0f MiB (cgroup), but the "
        "what-if predicts %s MiB and fits=%s; the run's memory: %s" % (
            cg.limit_mib, peak / MIB, row.get("predicted_memory_mib"), row.get("fits"),
            json.dumps({k: v for k, v in (analysis_of(run)["memory"] or {}).items()
                        if k in ("total_pss_mib", "shared_mib", "job")})))


# ---- f: a sweep past the limit ------------------------------------------------

DLBN_RUN = ROOT / "scripts" / "dlbn-run"


def sweep_in_limit(rundir, objects_run, tag, extra):
    """dlbn-run --sweep num_workers=2,OOM_WORKERS inside the limit of the OOM
    run (2 workers fit, OOM_WORKERS do not); its JSON rows and output."""
    memory = analysis_of(objects_run)["memory"]
    cow = memory["copy_on_write"]
    limit_mib = (anon_main_mib(memory)
                 + OOM_WORKERS * (cow["worker_base_mib"] + 0.5 * cow["touched_mib"]))
    out = rundir / ("sweep-%s.json" % tag)
    cmd = [str(DLBN_RUN), "--sweep", "num_workers=2,%d" % OOM_WORKERS, "--sweep-out", str(out),
           "-o", str(rundir / ("sweep-%s-%%v.bin" % tag))] + extra + [
        "--", PYTHON, str(MEMORY_WORKLOAD)] + OBJECTS + ["--steps", "120"]
    with MemoryCgroup(limit_mib * MIB, "sweep") as cg:
        proc = subprocess.run(cg.wrap(cmd), capture_output=True, text=True, cwd=str(rundir),
                              env=clean_env(), timeout=600)
    rows = json.loads(out.read_text()) if out.exists() else None
    assert rows is not None, (proc.returncode, proc.stderr[-3000:])
    return proc, {r["value"]: r for r in rows}


def test_sweep_past_the_limit_names_the_point_that_ran_out(rundir, objects_run):
    """--sweep-all runs the count that does not fit: it is OOM-killed, the
    sweep goes on, names it, and keeps the point that fit."""
    proc, rows = sweep_in_limit(rundir, objects_run, "all", ["--sweep-all"])
    assert proc.returncode == 1, (proc.returncode, proc.stderr[-3000:])
    assert rows[2]["status"] == "ok" and rows[2]["measured_step_ms"] > 0, rows[2]
    over = rows[OOM_WORKERS]
    assert over["status"].startswith("out of memory") and \
        "num_workers=%d" % OOM_WORKERS in over["status"], over
    assert (over.get("failure") or {}).get("kind") == "out_of_memory", over
    assert "out of memory" in proc.stdout and "sweep goes on" in proc.stderr, (
        proc.stdout, proc.stderr[-2000:])


def test_sweep_skips_what_does_not_fit(rundir, objects_run):
    """Without --sweep-all the count predicted not to fit is skipped, said."""
    proc, rows = sweep_in_limit(rundir, objects_run, "skip", [])
    assert proc.returncode == 0, (proc.returncode, proc.stderr[-3000:])
    assert rows[2]["status"] == "ok", rows[2]
    over = rows[OOM_WORKERS]
    assert over["status"].startswith("skipped: predicted not to fit") and over["skipped"], over
    assert over["fits"] is False and over["predicted_memory_mib"] > 0, over
    assert "skipped, predicted not to fit" in proc.stderr, proc.stderr[-2000:]
