"""CUDA interception tests: libdlbn.so against the simulated driver.

Run with `/usr/bin/python3 -m pytest tests/recorder/cuda` after `make all`
(the programs and the simulated driver are tests-aux products under
build/tests/).  The library under test is $DLBN_LIB, default
build/libdlbn.so.  Traces are decoded with tests/support/pylib/dlbntrace.py
(Python msgpack).

What is checked:
  - libdlbn.so exports dlsym in both glibc versions and never needs libcuda;
  - launches, copies, syncs and cuStreamWaitEvent are recorded through both
    reach paths (dlopen + cuGetProcAddress_v2 like libcudart, and PLT calls of
    a library linked to libcuda), with legacy and per-thread default streams,
    while libcuda is only ever loaded RTLD_LOCAL;
  - the application's results (return codes, its own event timings) are the
    same with and without the preload;
  - dlsym(RTLD_NEXT) from other libraries, non-cu lookups, failed lookups and
    cuGetProcAddress answers keep their meaning (same variant, same errors);
  - drain probes: a probe recorded when the main thread starts waiting
    resolves, without blocking, to the kernel's completion time (+-5 ms);
    a main-thread stream sync carries the GPU's completion time of the work
    it waited for;
  - a process without CUDA activity writes no GPU records;
  - the simulated driver's async copy from pinned memory costs its caller
    no memmove (a copy engine's work), and its bytes still arrive.
"""
import os
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
sys.path.insert(0, os.path.join(ROOT, "tests", "support", "pylib"))
import dlbntrace  # noqa: E402

BUILD = os.path.join(ROOT, "build")
LIB = os.path.abspath(os.environ.get("DLBN_LIB", os.path.join(BUILD, "libdlbn.so")))
SIM = os.path.join(BUILD, "tests", "simcuda")
SIM_SRC = os.path.join(ROOT, "tests", "support", "simcuda")
BIN = os.path.join(BUILD, "tests", "cuda")
REACH = {"runtime": os.path.join(SIM, "libsimrt.so"),
         "direct": os.path.join(SIM, "libsimrt_direct.so")}
GPU_TYPES = {"LAUNCH", "MEMCPY", "SYNC", "WAITEVT", "PROBE", "PROBE_DONE", "CUDA_INFO"}


@pytest.fixture(scope="module", autouse=True)
def built():
    needed = [LIB, os.path.join(SIM, "libcuda.so.1"), REACH["runtime"], REACH["direct"],
              os.path.join(BIN, "cuda_app"), os.path.join(BIN, "dlsym_app"),
              os.path.join(BIN, "launchbench")]
    missing = [p for p in needed if not os.path.exists(p)]
    if missing:
        pytest.fail("not built (run `make all`): %s" % ", ".join(missing))


def run(cmd, trace=None, per_thread=False, extra_env=None):
    """Run cmd with the simulated libcuda.so.1 on the library path, under
    the preload when `trace` is a path.  Returns (key=value dict, process)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DLBN_", "SIMRT_"))}
    env.pop("LD_PRELOAD", None)
    env["LD_LIBRARY_PATH"] = SIM
    if per_thread:
        env["SIMRT_PER_THREAD"] = "1"
    if trace:
        env["LD_PRELOAD"] = LIB
        env["DLBN_OUTPUT"] = str(trace)
    env.update(extra_env or {})
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
    facts = dict(line.split("=", 1) for line in p.stdout.splitlines() if "=" in line)
    return facts, p


def gpu_records(trace):
    return [r for r in dlbntrace.read_records(str(trace)) if r["type"] in GPU_TYPES]


# ---- the library itself -------------------------------------------------------

def test_exports_dlsym_both_versions_and_no_libcuda():
    out = subprocess.run(["objdump", "-T", LIB], capture_output=True, text=True,
                         check=True).stdout
    dlsym_versions = {line.split()[-2] for line in out.splitlines()
                      if line.split() and line.split()[-1] == "dlsym" and "*UND*" not in line}
    assert dlsym_versions == {"GLIBC_2.34", "(GLIBC_2.2.5)"}, out
    exported = {line.split()[-1]: line.split()[-2] for line in out.splitlines()
                if ".text" in line}
    for name in ("cuLaunchKernel", "cuLaunchKernel_ptsz", "cuGetProcAddress",
                 "cuGetProcAddress_v2", "cuMemcpyHtoDAsync_v2_ptsz", "cuStreamSynchronize"):
        # Unversioned: a named version would not match callers' references.
        assert exported.get(name) == "Base", (name, exported.get(name))
    assert not any(n.startswith("__dlbn_dlsym") for n in exported)
    needed = subprocess.run(["readelf", "-d", LIB], capture_output=True, text=True,
                            check=True).stdout
    assert "libcuda" not in needed


# ---- recording through both reach paths ----------------------------------------

@pytest.mark.parametrize("per_thread", [False, True], ids=["legacy", "per_thread"])
@pytest.mark.parametrize("reach", ["runtime", "direct"])
def test_gpu_calls_recorded_and_results_unchanged(tmp_path, reach, per_thread):
    app = [os.path.join(BIN, "cuda_app"), REACH[reach], "basic"]
    plain, p0 = run(app, per_thread=per_thread)
    assert p0.returncode == 0, p0.stderr
    traced, p1 = run(app, trace=tmp_path / "t.bin", per_thread=per_thread)
    assert p1.returncode == 0, p1.stderr
    assert traced["reach"] == reach

    # Same return codes, and the app's own GPU timings are undisturbed.
    rcs = {k: v for k, v in plain.items() if k.startswith("rc_")}
    assert rcs and all(v == "0" for v in rcs.values()), rcs
    assert rcs == {k: v for k, v in traced.items() if k.startswith("rc_")}
    for facts in (plain, traced):
        assert abs(float(facts["elapsed_ms"]) - 5.0) < 0.5, facts
        assert abs(float(facts["elapsed_wait_ms"]) - 7.0) < 0.5, facts

    recs = gpu_records(tmp_path / "t.bin")
    s, s2 = int(traced["stream"]), int(traced["stream2"])
    default = dlbntrace.STREAM_PER_THREAD if per_thread else 0
    launches = [(r["stream"], r["api"]) for r in recs if r["type"] == "LAUNCH"]
    assert launches == [(s, dlbntrace.CU_LAUNCH_KERNEL),
                        (s, dlbntrace.CU_LAUNCH_KERNEL), (s, dlbntrace.CU_LAUNCH_KERNEL_EX),
                        (default, dlbntrace.CU_LAUNCH_KERNEL), (s2, dlbntrace.CU_LAUNCH_KERNEL),
                        (s, dlbntrace.CU_GRAPH_LAUNCH)]
    waits = [(r["stream"]) for r in recs if r["type"] == "WAITEVT"]
    assert waits == [s2]

    copies = [r for r in recs if r["type"] == "MEMCPY"]
    assert [(c["dir"], c["async"], c["host_mem"], c["bytes"]) for c in copies] == [
        (dlbntrace.COPY_HTOD, 1, dlbntrace.HOSTMEM_PINNED, 1 << 20),
        (dlbntrace.COPY_HTOD, 1, dlbntrace.HOSTMEM_PAGEABLE, 1 << 20),
        (dlbntrace.COPY_HTOD, 0, dlbntrace.HOSTMEM_PAGEABLE, 1 << 20),
        (dlbntrace.COPY_DTOH, 0, dlbntrace.HOSTMEM_PINNED, 1 << 20)]
    assert [c["stream"] for c in copies] == [s, s, default, default]
    # The pageable async copy blocked until the 105 ms of kernels queued on
    # s had run (the driver stages it through a pinned buffer): they
    # started no earlier than the first launch's record.
    head = [r for r in recs if r["type"] == "LAUNCH"][0]
    assert copies[1]["t"] + copies[1]["dur"] >= head["t"] + 105_000_000

    syncs = [(r["api"]) for r in recs if r["type"] == "SYNC"]
    assert syncs == [dlbntrace.CU_STREAM_SYNC, dlbntrace.CU_EVENT_SYNC, dlbntrace.CU_CTX_SYNC]
    infos = [r for r in recs if r["type"] == "CUDA_INFO"]
    assert infos and infos[0]["ret"] == 12040, infos
    # Everything before the first wait: no probes yet.
    assert not [r for r in recs if r["type"] in ("PROBE", "PROBE_DONE")]


# ---- dlsym and cuGetProcAddress semantics ---------------------------------------

def test_dlsym_semantics_kept(tmp_path):
    app = [os.path.join(BIN, "dlsym_app")]
    plain, p0 = run(app)
    traced, p1 = run(app, trace=tmp_path / "t.bin")
    assert p0.returncode == 0 and p1.returncode == 0, (p0.stderr, p1.stderr)
    for facts in (plain, traced):
        # RTLD_NEXT from a library still means "after that library".
        assert facts["next_new"] == "2" and facts["next_old"] == "2", facts
        assert facts["cos_same"] == "1"
        assert facts["missing_null"] == "1" and facts["missing_err"] == "1"
        assert facts["cuInit_obj"] == "libcuda.so.1"  # not hooked: untouched
    hooked = ["cuLaunchKernel", "cuLaunchKernel_ptsz", "cuGetProcAddress_v2",
              "cuMemcpyHtoDAsync_v2", "cuStreamSynchronize"]
    for name in hooked:
        assert plain[name + "_obj"] == "libcuda.so.1"
        assert traced[name + "_obj"] == "libdlbn.so", name

    # cuGetProcAddress: the same variant (symbol name) with and without the
    # preload, the same return codes and statuses; only the object changes.
    cases = ["launch", "launch_pt", "launch_default", "htod_pt", "htod_old", "ctxsync_pt",
             "elapsed", "missing"]
    for case in cases:
        for key in ("rc", "status", "sym"):
            k = "gpa_%s_%s" % (case, key)
            assert plain[k] == traced[k], k
    assert plain["gpa_launch_pt_sym"] == "cuLaunchKernel_ptsz"
    assert plain["gpa_launch_sym"] == plain["gpa_launch_default_sym"] == "cuLaunchKernel"
    assert plain["gpa_htod_pt_sym"] == "cuMemcpyHtoD_v2_ptds"
    for case in ("launch", "launch_pt", "launch_default", "htod_pt", "ctxsync_pt"):
        assert traced["gpa_%s_obj" % case] == "libdlbn.so", case
    # Not hooked (or not found): handed back untouched.
    assert traced["gpa_elapsed_obj"] == "libcuda.so.1"
    assert traced["gpa_htod_old_obj"] == traced["gpa_missing_obj"] == "none"
    assert plain["gpa_missing_rc"] != "0"
    # The 11.3 cuGetProcAddress, itself obtained through cuGetProcAddress_v2.
    assert plain["gpa1_sym"] == traced["gpa1_sym"] == "cuGetProcAddress"
    assert traced["gpa1_obj"] == traced["gpa1_launch_obj"] == "libdlbn.so"
    assert traced["gpa1_launch_sym"] == plain["gpa1_launch_sym"] == "cuLaunchKernel_ptsz"


# ---- drain probes ----------------------------------------------------------------

def probe_run(tmp_path, reach, kernel_us, wait_ms, wait2_ms=0):
    app = [os.path.join(BIN, "cuda_app"), REACH[reach], "probe", str(kernel_us), str(wait_ms)]
    if wait2_ms:
        app.append(str(wait2_ms))
    facts, p = run(app, trace=tmp_path / "p.bin")
    assert p.returncode == 0, p.stderr
    recs = [r for r in dlbntrace.read_records(str(tmp_path / "p.bin"))
            if r["pid"] == r["tid"] and r["type"] in GPU_TYPES | {"READ"}]
    return facts, recs


def test_simulated_pinned_async_copy_moves_its_bytes_later():
    """The simulated driver, as a copy engine: an async copy from pinned
    memory costs its caller no memmove (the bytes move at the next call that
    can read them), one from pageable memory is staged in the call; a copy
    back gets the bytes either way."""
    facts, p = run([os.path.join(BIN, "cuda_app"), REACH["runtime"], "copies"])
    assert p.returncode == 0, p.stderr
    assert facts["pinned_moved_in_call"] == "0", facts
    assert facts["pageable_moved_in_call"] == "1", facts
    assert facts["pinned_read_back"] == "1" and facts["pageable_read_back"] == "1", facts


@pytest.mark.parametrize("reach", ["runtime", "direct"])
def test_probe_resolves_to_kernel_end_when_gpu_went_idle(tmp_path, reach):
    """50 ms kernel, then a 100 ms pipe read: the GPU idled for the last
    ~50 ms of the wait, and the probe says when it went idle."""
    facts, recs = probe_run(tmp_path, reach, 50_000, 100)
    s, launch_ns = int(facts["stream"]), int(facts["launch_ns"])
    probes = [r for r in recs if r["type"] == "PROBE"]
    dones = [r for r in recs if r["type"] == "PROBE_DONE"]
    assert len(probes) == 1 and probes[0]["stream"] == s, recs
    reads = [r for r in recs if r["type"] == "READ" and r["dur"] > 50_000_000]
    assert reads and probes[0]["t"] <= reads[0]["t"] + 1_000_000
    assert len(dones) == 1 and dones[0]["probe_id"] == probes[0]["probe_id"]
    assert dones[0]["status"] == 0
    gpu_busy_ms = (dones[0]["complete_ns"] - launch_ns) / 1e6
    assert abs(gpu_busy_ms - 50.0) < 5.0, gpu_busy_ms
    # Resolved without blocking: only once the wait had ended.
    assert dones[0]["t"] >= reads[0]["t"] + reads[0]["dur"]


def test_probe_pending_across_waits_when_gpu_stays_busy(tmp_path):
    """200 ms kernel, waits of 100 ms and 150 ms: the first wait ends with the
    GPU still busy (probe pending), the second resolves it; no new probe
    since nothing was launched in between."""
    facts, recs = probe_run(tmp_path, "runtime", 200_000, 100, 150)
    launch_ns = int(facts["launch_ns"])
    probes = [r for r in recs if r["type"] == "PROBE"]
    dones = [r for r in recs if r["type"] == "PROBE_DONE"]
    reads = [r for r in recs if r["type"] == "READ" and r["dur"] > 50_000_000]
    assert len(reads) == 2 and len(probes) == 1 and len(dones) == 1, recs
    first_wait_end = reads[0]["t"] + reads[0]["dur"]
    assert dones[0]["t"] > first_wait_end + 50_000_000  # not resolved at the first end
    assert abs((dones[0]["complete_ns"] - launch_ns) / 1e6 - 200.0) < 5.0


def test_no_cuda_activity_no_gpu_records(tmp_path):
    """CPU-only process with main-thread pipe waits: nothing GPU-related."""
    _, p = run(["/bin/sh", "-c", "sleep 0.05 | cat"], trace=tmp_path / "c.bin")
    assert p.returncode == 0, p.stderr
    recs = dlbntrace.read_records(str(tmp_path / "c.bin"))
    assert recs and not [r for r in recs if r["type"] in GPU_TYPES]


# ---- cost ------------------------------------------------------------------------

def test_launch_wrapper_cost(tmp_path):
    """Not a timed test: reports ns per cuLaunchKernel with and without the
    preload and checks every launch was recorded."""
    n = 20000
    bench = [os.path.join(BIN, "launchbench"), str(n)]
    plain, p0 = run(bench)
    traced, p1 = run(bench, trace=tmp_path / "b.bin")
    assert p0.returncode == 0 and p1.returncode == 0, (p0.stderr, p1.stderr)
    base, hooked = float(plain["ns_per_launch"]), float(traced["ns_per_launch"])
    print("\nlaunch cost: %.1f ns without, %.1f ns with libdlbn.so (+%.1f ns)"
          % (base, hooked, hooked - base))
    launches = [r for r in dlbntrace.read_records(str(tmp_path / "b.bin"))
                if r["type"] == "LAUNCH"]
    assert len(launches) == 5 * n


# ---- a real DataLoader loop on the simulated GPU (Python, ctypes) ------------------

@pytest.mark.parametrize("reach", ["runtime", "direct"])
def test_dataloader_loop_probes_every_wait(tmp_path, reach):
    """20 steps, a worker needs 30 ms per batch, the GPU 10 ms per step: the
    loop waits every step with the GPU idle after 10 ms.  Every wait gets one
    probe on the training stream, resolved to its last launch + 10 ms; the
    worker process (forked after CUDA started) records no GPU activity."""
    steps = 20
    app = ["/usr/bin/python3", os.path.join(HERE, "py_loader.py"), str(steps), "30", "10000",
           "1"]
    facts, p = run(app, trace=tmp_path / "l.bin", extra_env={"SIMGPU_REACH": reach})
    assert p.returncode == 0, p.stderr
    s = int(facts["stream"])
    recs = dlbntrace.read_records(str(tmp_path / "l.bin"))
    gpu = [r for r in recs if r["type"] in GPU_TYPES]
    assert len({r["pid"] for r in gpu}) == 1, "GPU records outside the main process"
    launches = [r for r in gpu if r["type"] == "LAUNCH"]
    assert len(launches) == steps and all(r["stream"] == s for r in launches)
    probes = {r["probe_id"]: r for r in gpu if r["type"] == "PROBE"}
    dones = [r for r in gpu if r["type"] == "PROBE_DONE"]
    assert len(probes) >= steps - 2 and len(dones) == len(probes), (len(probes), len(dones))
    # The stream is FIFO: kernel k ends at max(launch_k, end_k-1) + 10 ms.
    # (Usually launch_k + 10 ms, but batches prefetched during start-up
    # arrive back to back and queue kernels behind each other.)
    end, end_after = 0, []
    for r in launches:
        end = max(r["t"], end) + 10_000_000
        end_after.append((r["t"], end))
    for d in dones:
        assert d["status"] == 0
        probe = probes[d["probe_id"]]
        expected = max(e for t, e in end_after if t <= probe["t"])
        assert abs(d["complete_ns"] - expected) / 1e6 < 5.0, (d, expected)


# ---- failure paths: the application is never affected ---------------------------------

@pytest.mark.parametrize("failing", ["cuEventCreate", "cuEventRecord", "cuEventQuery"])
def test_driver_errors_stop_probing_quietly(tmp_path, failing):
    """The probes' own driver calls fail: probing stops with one CUDA_INFO
    record, the launches are still recorded and the app runs as before."""
    app = [os.path.join(BIN, "cuda_app"), REACH["runtime"], "probe", "20000", "50", "50"]
    facts, p = run(app, trace=tmp_path / "f.bin", extra_env={"SIMCUDA_FAIL": failing})
    assert p.returncode == 0 and "launch_ns" in facts, p.stderr
    recs = gpu_records(tmp_path / "f.bin")
    off = [r for r in recs if r["type"] == "CUDA_INFO" and r["api"] == 101]
    assert len(off) == 1, recs
    assert [r for r in recs if r["type"] == "LAUNCH"]
    # Nothing resolved after probing stopped; at most the failing probe's loss.
    assert all(r["status"] == 1 for r in recs if r["type"] == "PROBE_DONE")


def test_no_context_on_main_thread(tmp_path):
    """CUDA only on a second thread: launches recorded there, the main
    thread's waits find no current context and probe nothing, gracefully."""
    app = [os.path.join(BIN, "cuda_app"), REACH["runtime"], "thread", "60"]
    facts, p = run(app, trace=tmp_path / "n.bin")
    assert p.returncode == 0 and facts.get("done") == "1", p.stderr
    recs = gpu_records(tmp_path / "n.bin")
    launches = [r for r in recs if r["type"] == "LAUNCH"]
    assert len(launches) == 1 and launches[0]["tid"] != launches[0]["pid"]
    assert not [r for r in recs if r["type"] in ("PROBE", "PROBE_DONE")]
    assert not [r for r in recs if r["type"] == "CUDA_INFO" and r["api"] == 101]


def test_concurrent_launchers(tmp_path):
    """4 threads x 5000 launches on 4 streams: every launch recorded in its
    thread's stream, and the main thread's wait probes each stream once."""
    app = [os.path.join(BIN, "cuda_app"), REACH["runtime"], "threads", "50"]
    facts, p = run(app, trace=tmp_path / "m.bin")
    assert p.returncode == 0, p.stderr
    streams = {int(facts["stream%d" % i]) for i in range(4)}
    recs = gpu_records(tmp_path / "m.bin")
    launches = [r for r in recs if r["type"] == "LAUNCH"]
    assert len(launches) == int(facts["launches"]) == 20000
    assert {r["stream"] for r in launches} == streams
    assert len({r["tid"] for r in launches}) == 4
    probes = [r for r in recs if r["type"] == "PROBE"]
    assert sorted(r["stream"] for r in probes) == sorted(streams)
    dones = [r for r in recs if r["type"] == "PROBE_DONE"]
    assert len(dones) == 4 and all(r["status"] == 0 for r in dones)


def test_destroyed_stream_is_skipped_not_fatal(tmp_path):
    """Work on a stream the app destroys before waiting: that probe cannot be
    recorded; the recorder says so once and keeps probing other streams."""
    app = [os.path.join(BIN, "cuda_app"), REACH["runtime"], "destroyed", "40"]
    facts, p = run(app, trace=tmp_path / "d.bin")
    assert p.returncode == 0, p.stderr
    dead, live = int(facts["dead"]), int(facts["live"])
    recs = gpu_records(tmp_path / "d.bin")
    skipped = [r for r in recs if r["type"] == "CUDA_INFO" and r["api"] == 104]
    assert len(skipped) == 1 and "%#x" % dead in skipped[0]["text"], recs
    assert not [r for r in recs if r["type"] == "CUDA_INFO" and r["api"] == 101]
    probes = [r for r in recs if r["type"] == "PROBE"]
    assert [r["stream"] for r in probes] == [live]
    dones = [r for r in recs if r["type"] == "PROBE_DONE"]
    assert len(dones) == 1 and dones[0]["status"] == 0


# ---- the GPU scenarios, at the recorder level ----------------------------------------

def gpu_split(recs):
    """Reference split of the main thread's waits into GPU-busy and GPU-idle
    time, from the drain probes (what the analyzer does; kept here as an
    executable statement of the probe semantics).  At a wait beginning at
    w0, each stream is busy until the completion of its latest probe
    recorded at or before w0 (FIFO: later probes cover earlier work, and a
    stream without a new probe got no new work).  Returns (wait_ns, idle_ns)
    summed over main-thread waits longer than 1 ms that began after the
    first launch (before it, the GPU is not in use yet: start-up)."""
    gpu_pid = [r for r in recs if r["type"] == "LAUNCH"][0]["pid"]
    main = [r for r in recs if r["pid"] == r["tid"] == gpu_pid]  # not the workers
    first_launch = min(r["t"] for r in main if r["type"] == "LAUNCH")
    done = {r["probe_id"]: r["complete_ns"] for r in main
            if r["type"] == "PROBE_DONE" and r["status"] == 0}
    probes = [r for r in main if r["type"] == "PROBE"]
    waits = [r for r in main if r["type"] in ("POLL", "READ", "SEM_WAIT")
             and r["dur"] > 1_000_000 and r["t"] > first_launch]
    wait_ns = idle_ns = 0
    for w in waits:
        latest = {}
        for p in probes:
            if p["t"] <= w["t"] and p["probe_id"] in done:
                latest[p["stream"]] = done[p["probe_id"]]
        busy_until = max(latest.values(), default=0)
        busy = min(max(busy_until - w["t"], 0), w["dur"])
        wait_ns += w["dur"]
        idle_ns += w["dur"] - busy
    print("\nloader waits %.1f ms, GPU idle in them %.1f ms" % (wait_ns / 1e6, idle_ns / 1e6))
    return wait_ns, idle_ns


def workload(tmp_path, scenario, reach="runtime", steps=24):
    app = ["/usr/bin/python3", os.path.join(SIM_SRC, "gpu_workload.py"),
           scenario, "--steps", str(steps), "--reach", reach]
    facts, p = run(app, trace=tmp_path / ("%s.bin" % scenario))
    assert p.returncode == 0, p.stderr
    assert int(facts["steps"]) == steps
    recs = dlbntrace.read_records(str(tmp_path / ("%s.bin" % scenario)))
    assert not [r for r in recs if r["type"] == "CUDA_INFO" and r["api"] in (101, 103)]
    return facts, recs


@pytest.mark.parametrize("reach", ["runtime", "direct"])
def test_scenario_input_bound_gpu_idles_in_waits(tmp_path, reach):
    _, recs = workload(tmp_path, "input_bound", reach)
    wait_ns, idle_ns = gpu_split(recs)
    # ~30 ms per batch, 10 ms of it GPU work: about 2/3 of the waiting is idle.
    assert wait_ns > 24 * 15_000_000
    assert idle_ns > 0.5 * wait_ns, (wait_ns, idle_ns)


def test_scenario_compute_ahead_gpu_busy_in_waits(tmp_path):
    _, recs = workload(tmp_path, "compute_ahead")
    wait_ns, idle_ns = gpu_split(recs)
    # Long exposed waits (a batch every 40 ms), yet the GPU always had work.
    assert wait_ns > 24 * 25_000_000
    assert idle_ns < 0.05 * wait_ns, (wait_ns, idle_ns)


def test_scenario_sync_each_step_host_blocked_on_gpu(tmp_path):
    _, recs = workload(tmp_path, "sync_each_step")
    main = [r for r in recs if r["pid"] == r["tid"]]
    sync_ns = sum(r["dur"] for r in main if r["type"] == "SYNC")
    wait_ns, idle_ns = gpu_split(recs)
    # The host spends most of each 40 ms step blocked in the sync.
    assert sync_ns > 24 * 15_000_000, sync_ns
    assert idle_ns < 0.2 * sync_ns, (sync_ns, wait_ns, idle_ns)


@pytest.mark.parametrize("reach", ["runtime", "direct"])
def test_stream_sync_carries_the_gpu_drain(tmp_path, reach):
    """Each main-thread cuStreamSynchronize after a 40 ms kernel carries the
    GPU's own completion time of the work it waited for (its drain event):
    the kernel's end, at or before the sync's return."""
    _, recs = workload(tmp_path, "sync_each_step", reach)
    main = [r for r in recs if r["pid"] == r["tid"]]
    checked = 0
    last_launch = None
    for r in main:
        if r["type"] == "LAUNCH":
            last_launch = r["t"]
        if r["type"] != "SYNC" or r["api"] != dlbntrace.CU_STREAM_SYNC:
            continue
        if not r.get("gpu_done_ns"):
            continue  # before the probes' first anchor, or < 0.5 ms after a drain event
        assert r["gpu_done_ns"] <= r["t"] + r["dur"] + 100_000, r
        if last_launch is not None and r["dur"] > 10_000_000:
            assert abs(r["gpu_done_ns"] - (last_launch + 40_000_000)) < 5_000_000, r
            checked += 1
    assert checked >= 20, checked


def test_scenario_host_bound_gpu_idle_but_not_in_waits(tmp_path):
    _, recs = workload(tmp_path, "host_bound")
    launches = [r for r in recs if r["type"] == "LAUNCH"]
    wall = launches[-1]["t"] - launches[0]["t"]
    wait_ns, idle_ns = gpu_split(recs)
    # GPU busy 5 of every ~35 ms, but the loop hardly waits for batches.
    assert idle_ns < 0.1 * wall, (wall, wait_ns, idle_ns)


def test_scenario_pageable_h2d_copies_recorded(tmp_path):
    _, recs = workload(tmp_path, "pageable_h2d")
    copies = [r for r in recs if r["type"] == "MEMCPY"]
    assert len(copies) == 24
    assert all(c["host_mem"] == dlbntrace.HOSTMEM_PAGEABLE and c["async"] == 1
               and c["dir"] == dlbntrace.COPY_HTOD and c["bytes"] == 64 << 20 for c in copies)
    # 64 MiB at 10 GB/s: the host blocks at least 6.7 ms per copy.
    assert min(c["dur"] for c in copies) > 6_000_000
