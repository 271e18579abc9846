"""NVTX injection tests (nvtx_inject.c).

Each test runs build/tests/nvtx/nvtx_app, an ordinary NVTX v3 client linked
with two shared libraries that carry their own NVTX instances, under a
preload:
  standin  build/tests/nvtx/libdlbn_standin.so: nvtx_inject.c + stacks.c
           with a minimal recorder (standin_recorder.c), always available;
  real     build/libdlbn.so with the real recorder core; skipped only while
           that library is not built.
Run: /usr/bin/python3 -m pytest tests/recorder/nvtx   (after `make tests-aux`).
"""
import os
import pathlib
import subprocess
import sys

import pytest

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parents[2]
BUILD = ROOT / "build"
T = BUILD / "tests" / "nvtx"
sys.path.insert(0, str(ROOT / "tests" / "support" / "pylib"))
import dlbntrace  # noqa: E402
from dlbntrace import of_type  # noqa: E402

APP = T / "nvtx_app"
STANDIN = T / "libdlbn_standin.so"
REAL = pathlib.Path(os.environ.get("DLBN_TEST_LIB", BUILD / "libdlbn.so"))  # override: another build
FAKETOOL = T / "libfaketool.so"


@pytest.fixture(scope="session", autouse=True)
def built():
    subprocess.run(["make", "-s", "-C", str(ROOT), str(APP.relative_to(ROOT)),
                    str(STANDIN.relative_to(ROOT)), str(FAKETOOL.relative_to(ROOT))],
                   check=True)


def clean_env():
    env = dict(os.environ)
    for k in list(env):
        if k.startswith(("DLBN_", "NVTX_", "LD_PRELOAD")):
            del env[k]
    return env


def run_app(lib, tmp_path, *args, env_extra=None):
    """Run nvtx_app under lib; returns (stdout, records)."""
    trace = tmp_path / "trace.bin"
    env = clean_env()
    env["LD_PRELOAD"] = str(lib)
    if lib == STANDIN:
        env["DLBN_STANDIN_OUT"] = str(trace)
    else:
        env["DLBN_OUTPUT"] = str(trace)
    env.update(env_extra or {})
    p = subprocess.run([str(APP), *args], env=env, cwd=tmp_path, capture_output=True,
                       text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    # the stand-in writes a bare msgpack stream, the real library a trace file
    records = (dlbntrace.read_records(trace, allow_bare=lib == STANDIN)
                if trace.exists() else [])
    return p.stdout, records


LIBS = [pytest.param("standin", id="standin"), pytest.param("real", id="real")]


def library(kind):
    if kind == "standin":
        return STANDIN
    if not REAL.exists():
        pytest.skip("build/libdlbn.so not built yet")
    return REAL


def names(records):
    """Per process: domain id -> name, string id -> text."""
    domains, strings = {0: "<default>"}, {}
    for r in records:
        if r["type"] == "DOMAIN":
            domains[(r["proc_id"], r["domain_id"])] = r["name"]
        elif r["type"] == "STRING":
            strings[(r["proc_id"], r["id"])] = r["text"]
    return domains, strings


def text_of(r, strings):
    msg_id, msg = r["msg_id"], r["msg"]
    if msg_id:
        assert msg is None
        return strings[(r["proc_id"], msg_id)]
    return msg


def ranges(records):
    """Completed push/pop ranges per stream and domain: (domain, text, depth)."""
    domains, strings = names(records)
    out, stacks = [], {}
    for r in records:
        if r["type"] == "RANGE_PUSH":
            key = ((r["proc_id"], r["thread_no"]), r["domain_id"])
            stacks.setdefault(key, []).append(r)
        elif r["type"] == "RANGE_POP":
            key = ((r["proc_id"], r["thread_no"]), r["domain_id"])
            push = stacks[key].pop()
            dom = domains[(r["proc_id"], r["domain_id"])] if r["domain_id"] else "<default>"
            out.append((dom, text_of(push, strings), len(stacks[key]), push["t"], r["t"]))
    assert all(not s for s in stacks.values()), "unbalanced push/pop in the trace"
    return out


@pytest.mark.parametrize("kind", LIBS)
def test_push_pop_names_and_nesting(kind, tmp_path):
    out, recs = run_app(library(kind), tmp_path, "ranges")
    assert "nvtx_app done" in out
    rs = ranges(recs)
    by_text = {r[1]: r for r in rs}
    assert by_text["outer"][2] == 0 and by_text["inner"][2] == 1
    # inner lies within outer in time
    assert by_text["outer"][3] <= by_text["inner"][3] <= by_text["inner"][4] <= by_text["outer"][4]
    assert by_text["thread_outer"][2] == 0 and by_text["thread_inner"][2] == 1
    steps = [r for r in rs if r[1] == "step"]
    assert len(steps) == 3 and all(r[0] == "mydomain" for r in steps)
    # wide strings are converted to UTF-8
    assert "wide \u00e9\u2713" in by_text
    # long ad-hoc messages are truncated to 128 bytes
    longs = [r[1] for r in rs if r[1].startswith("L")]
    assert longs == ["L" * 128]
    marks = of_type(recs, "NVTX_MARK")
    _, strings = names(recs)
    assert [text_of(m, strings) for m in marks] == ["mark1", "data", "wstr \u00fc", "wmark",
                                                   "wmark2"]
    domains, _ = names(recs)
    assert domains[(marks[2]["proc_id"], marks[2]["domain_id"])] == "wdomain"


@pytest.mark.parametrize("kind", LIBS)
def test_registered_strings_and_domains_announced_once(kind, tmp_path):
    _, recs = run_app(library(kind), tmp_path, "ranges")
    strings = [r["text"] for r in of_type(recs, "STRING")]
    assert strings.count("step") == 1
    doms = [r["name"] for r in of_type(recs, "DOMAIN")]
    assert doms.count("mydomain") == 1
    # both libraries created "shared": one id
    assert doms.count("shared") == 1
    step_pushes = [r for r in of_type(recs, "RANGE_PUSH") if r["msg_id"] != 0]
    assert len(step_pushes) == 3
    step_id = [r["id"] for r in of_type(recs, "STRING") if r["text"] == "step"][0]
    assert all(r["msg_id"] == step_id and r["msg"] is None for r in step_pushes)


@pytest.mark.parametrize("kind", LIBS)
def test_two_instances_both_report(kind, tmp_path):
    _, recs = run_app(library(kind), tmp_path, "ranges")
    rs = ranges(recs)
    texts = {r[1]: r for r in rs}
    for lib in ("a", "b"):
        assert texts["from_" + lib][0] == "<default>"
        assert texts["lib_" + lib][0] == "shared"


@pytest.mark.parametrize("kind", LIBS)
def test_start_end_ranges(kind, tmp_path):
    _, recs = run_app(library(kind), tmp_path, "ranges")
    domains, strings = names(recs)
    starts = {r["range_id"]: r for r in of_type(recs, "RANGE_START")}
    ends = {r["range_id"]: r for r in of_type(recs, "RANGE_END")}
    assert set(starts) == set(ends) and len(starts) == 2
    by_text = {text_of(r, strings): r for r in starts.values()}
    data = by_text["data"]
    assert domains[(data["proc_id"], data["domain_id"])] == "mydomain"
    assert by_text["plain_start"]["domain_id"] == 0
    for rid, s in starts.items():
        assert ends[rid]["t"] >= s["t"]


@pytest.mark.parametrize("kind", LIBS)
def test_injection_path_set_to_self(kind, tmp_path):
    lib = library(kind)
    out, _ = run_app(lib, tmp_path, "bench", "10")
    assert f"injection={lib.resolve()}" in out


@pytest.mark.parametrize("kind", LIBS)
def test_fork_child_reannounces(kind, tmp_path):
    _, recs = run_app(library(kind), tmp_path, "fork")
    strings = of_type(recs, "STRING")
    doms = of_type(recs, "DOMAIN")
    assert [r["text"] for r in strings] == ["forkstr", "forkstr"]
    assert [r["name"] for r in doms] == ["forkdomain", "forkdomain"]
    pushes = of_type(recs, "RANGE_PUSH")
    assert len(pushes) == 2
    if kind == "real":  # separate process streams: each announces before use
        for p in pushes:
            mine = [s for s in strings if s["proc_id"] == p["proc_id"]]
            assert mine and mine[0]["t"] <= p["t"]


@pytest.mark.parametrize("kind", LIBS)
def test_disabled_by_env(kind, tmp_path):
    out, recs = run_app(library(kind), tmp_path, "ranges", env_extra={"DLBN_NVTX": "0"})
    assert "injection=(unset)" in out
    nvtx_types = {"RANGE_PUSH", "RANGE_POP", "RANGE_START", "RANGE_END", "NVTX_MARK", "DOMAIN"}
    assert not [r for r in recs if r["type"] in nvtx_types]


@pytest.mark.parametrize("kind", LIBS)
def test_other_tool_keeps_injection_and_gets_dlbn_waits(kind, tmp_path):
    log = tmp_path / "faketool.log"
    out, recs = run_app(library(kind), tmp_path, "ranges",
                        env_extra={"NVTX_INJECTION64_PATH": str(FAKETOOL),
                                   "FAKETOOL_LOG": str(log)})
    assert f"injection={FAKETOOL}" in out
    lines = log.read_text().splitlines()
    # the application's ranges went to the other tool, not to dlbn
    assert "pushA outer" in lines and "push mydomain step" in lines
    assert "push shared lib_a" in lines and "push shared lib_b" in lines
    assert not of_type(recs, "RANGE_PUSH") and not of_type(recs, "DOMAIN")
    # dlbn's loader wait arrived as a balanced range in the dlbn domain
    assert "domain dlbn" in lines
    i = lines.index("push dlbn loader wait")
    assert "pop dlbn" in lines[i + 1:]


def test_callback_cost(tmp_path):
    """Cost of a push+pop pair through the callbacks, records dropped
    (stand-in with DLBN_STANDIN_OUT=-); printed, with a loose sanity bound."""
    env = clean_env()
    env.update(LD_PRELOAD=str(STANDIN), DLBN_STANDIN_OUT="-")
    p = subprocess.run([str(APP), "bench", "200000"], env=env, capture_output=True,
                       text=True, check=True)
    ns = float(p.stdout.split()[1])
    print(f"\nNVTX push+pop pair through dlbn callbacks (no writer): {ns:.1f} ns")
    assert ns < 5000
