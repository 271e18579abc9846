"""Native stacks (stacks.c) and C++ exceptions under the preload.

build/tests/cxx/cxx_throw first waits ~20 ms on the main thread (a capture
with DLBN_STACKS=all, which dlopen()s libunwind), then throws and catches
exceptions 7 ways (across libthrower.so in both directions, std::thread,
std::async, rethrow, the standard library).  Libraries: the stand-in
(build/tests/nvtx/libdlbn_standin.so, always) and build/libdlbn.so (skipped
while not built).  Run: /usr/bin/python3 -m pytest tests/recorder/cxx
"""
import os
import pathlib
import subprocess
import sys

import pytest

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parents[2]
BUILD = ROOT / "build"
sys.path.insert(0, str(ROOT / "tests" / "support" / "pylib"))
import dlbntrace  # noqa: E402
from dlbntrace import of_type  # noqa: E402

APP = BUILD / "tests" / "cxx" / "cxx_throw"
STANDIN = BUILD / "tests" / "nvtx" / "libdlbn_standin.so"
REAL = pathlib.Path(os.environ.get("DLBN_TEST_LIB", BUILD / "libdlbn.so"))  # override: another build
LIBS = [pytest.param("standin", id="standin"), pytest.param("real", id="real")]


@pytest.fixture(scope="session", autouse=True)
def built():
    subprocess.run(["make", "-s", "-C", str(ROOT), str(APP.relative_to(ROOT)),
                    str(STANDIN.relative_to(ROOT))], check=True)


def library(kind):
    if kind == "standin":
        return STANDIN
    if not REAL.exists():
        pytest.skip("build/libdlbn.so not built yet")
    return REAL


def run(lib, tmp_path, *args, stacks="all"):
    trace = tmp_path / "trace.bin"
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("DLBN_", "NVTX_", "LD_PRELOAD"))}
    env["LD_PRELOAD"] = str(lib)
    env["DLBN_STACKS"] = stacks
    env["DLBN_STANDIN_OUT" if lib == STANDIN else "DLBN_OUTPUT"] = str(trace)
    p = subprocess.run([str(APP), *args], env=env, cwd=tmp_path, capture_output=True,
                       text=True, timeout=60)
    # the stand-in writes a bare msgpack stream, the real library a trace file
    recs = (dlbntrace.read_records(trace, allow_bare=lib == STANDIN)
             if trace.exists() else [])
    return p, recs


@pytest.mark.parametrize("kind", LIBS)
def test_exceptions_after_capture(kind, tmp_path):
    p, recs = run(library(kind), tmp_path)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "caught 7/7" in p.stdout
    # a capture really happened before the throws
    assert "libunwind_loaded=1" in p.stdout
    stacks = of_type(recs, "STACK")
    assert stacks, "no STACK record"
    # the program sees the C++ runtime's unwinder and libc's backtrace
    assert "unwind_raise=/lib/x86_64-linux-gnu/libgcc_s.so.1" in p.stdout
    assert "backtrace=/lib/x86_64-linux-gnu/libc.so.6" in p.stdout


@pytest.mark.parametrize("kind", LIBS)
def test_stack_refers_to_announced_modules(kind, tmp_path):
    p, recs = run(library(kind), tmp_path)
    assert p.returncode == 0
    modules = {}
    for r in recs:
        if r["type"] == "MODULE":
            modules[(r["proc_id"], r["module_id"])] = r
    stacks = of_type(recs, "STACK")
    s = stacks[0]
    frames = s["frames"]
    assert len(frames) % 2 == 0 and 2 <= len(frames) <= 64
    for mid in frames[0::2]:
        m = modules[(s["proc_id"], mid)]
        assert m["t"] <= s["t"]  # announced before use
    paths = [modules[(s["proc_id"], mid)]["path"] for mid in frames[0::2]]
    # innermost frame is the program's wait, not the preload library itself
    assert paths[0].endswith("/cxx_throw")
    assert not any(path.endswith(pathlib.Path(library(kind)).name) for path in paths)
    assert s["wait_type"] in (15, 20, 10, 13)  # a wait record type
    assert s["wait_ts_delta"] >= 1_000_000  # the wait began >= 1 ms before


@pytest.mark.parametrize("kind", LIBS)
def test_stacks_off(kind, tmp_path):
    p, recs = run(library(kind), tmp_path, stacks="0")
    assert p.returncode == 0 and "caught 7/7" in p.stdout
    assert "libunwind_loaded=0" in p.stdout
    assert not of_type(recs, "STACK")


@pytest.mark.parametrize("kind", LIBS)
def test_no_unwinder_symbols_exported(kind):
    out = subprocess.run(["nm", "-D", "--defined-only", str(library(kind))],
                         capture_output=True, text=True, check=True).stdout
    names = [line.split()[-1] for line in out.splitlines() if line.strip()]
    bad = [n for n in names if n.startswith("_Unwind_") or n.split("@")[0] == "backtrace"
           or n.startswith("unw_") or n.startswith("_U")]
    assert not bad
    needed = subprocess.run(["readelf", "-d", str(library(kind))], capture_output=True,
                            text=True, check=True).stdout
    assert "libunwind" not in needed


def test_adaptive_policy(tmp_path):
    """Default policy: the 16 longest so far, >= 1 ms, at most a burst of
    20 captures (10/s refill; the reported waits take no time)."""
    p, recs = run(STANDIN, tmp_path, "policy", stacks="1")
    assert p.returncode == 0 and "reported 36" in p.stdout
    durs = [s["wait_ts_delta"] for s in of_type(recs, "STACK")]
    # 16 decreasing: all (top-K filling); 4 shorter than every kept: none;
    # 10 ms: beats the 16th; then increasing: 3 more until the burst is spent;
    # 0.9 ms: never.
    assert len(durs) == 20, durs
    assert durs[:16] == sorted(durs[:16], reverse=True) and durs[0] >= 5_000_000
    assert 10_000_000 <= durs[16] < 10_500_000
    assert all(d >= 11_000_000 for d in durs[17:])


def test_all_policy_still_needs_1ms(tmp_path):
    p, recs = run(STANDIN, tmp_path, "policy", stacks="all")
    assert p.returncode == 0
    assert len(of_type(recs, "STACK")) == 31  # every wait but the five 0.9 ms ones


def test_capture_cost(tmp_path):
    """Cost of one capture 30+ frames deep (stand-in, records dropped);
    printed, with a loose sanity bound."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("DLBN_", "NVTX_", "LD_PRELOAD"))}
    env.update(LD_PRELOAD=str(STANDIN), DLBN_STACKS="all", DLBN_STANDIN_OUT="-")
    p = subprocess.run([str(APP), "bench", "50"], env=env, capture_output=True, text=True,
                       check=True)
    vals = dict(line.split() for line in p.stdout.splitlines())
    print(f"\nstack capture: first (dlopen libunwind) {vals['first_capture_us']} us, "
          f"then {vals['capture_us']} us each")
    assert float(vals["capture_us"]) < 1000
