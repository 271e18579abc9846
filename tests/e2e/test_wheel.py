"""The pip-installable dlbn: `make wheel`, installed as a user would.

The wheel (dist/dlbn-VERSION-py3-none-manylinux_*.whl, built from the sdist
by `make wheel`) goes into a fresh virtual environment that has torch and
nothing else, and runs with no compiler, linker or make on PATH:

  torch 2.x   a venv of Debian's python3 whose only packages are torch and
              what torch requires, taken from .venv (a .pth file naming a
              directory of links to exactly those distributions);
  torch 1.13  a venv of Debian's python3 with its system packages, where
              Debian's torch 1.13 is (the 1.13 interpreter's run).

There `dlbn run -- python train.py` must record an input-bound DataLoader
program, print the report, name the trace and exit with the program's
status; `python -m dlbn analyze` must read the traces the checkout's own
recorder writes, as build/dlbn-analyze does.
"""

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

import pytest

from e2e_common import ANALYZE, LIB, ROOT, clean_env, require_binaries
from test_torchrun import train_script

VENV_PYTHON = ROOT / ".venv" / "bin" / "python"
VERSION = (ROOT / "VERSION").read_text().strip()
# What a wheel's programs may link: the libraries every manylinux system has.
SYSTEM_LIBS = {"libc.so.6", "libm.so.6", "libdl.so.2", "libpthread.so.0", "librt.so.1",
               "ld-linux-x86-64.so.2"}
# Never on the fresh environment's PATH.
BUILD_TOOLS = re.compile(r"^(cc|c\+\+|c89|c99|cpp|gcc|g\+\+|clang|clang\+\+|ld|ld\..*|as|make"
                         r"|gmake|x86_64-linux-gnu-.*|.*-gcc(-[0-9.]+)?|gcc-.*|g\+\+-.*"
                         r"|cpp-.*|clang-.*)$")

TRAIN = r'''
import sys, time
import torch
from torch.utils.data import DataLoader, Dataset

class Slow(Dataset):
    """Each sample costs its worker 8 ms: the loop waits for every batch."""
    def __len__(self):
        return 240
    def __getitem__(self, i):
        time.sleep(0.008)
        return torch.full((16,), float(i))

if __name__ == "__main__":
    total = 0.0
    for batch in DataLoader(Slow(), batch_size=4, num_workers=1):
        total += float(batch.sum())   # the step: next to nothing
        time.sleep(0.001)
    if len(sys.argv) > 1 and sys.argv[1] == "fail":
        raise RuntimeError("the program fails after its epoch")
    sys.exit(int(sys.argv[1]) if len(sys.argv) > 1 else 0)
'''


def generation():
    import torch

    return "1" if torch.__version__.startswith("1.") else "2"


@pytest.fixture(scope="module")
def wheel():
    if not VENV_PYTHON.exists():
        pytest.skip(".venv missing (make deps): make wheel builds with its tools")
    proc = subprocess.run(["make", "-s", "-C", str(ROOT), "wheel"], capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    found = sorted((ROOT / "dist").glob("dlbn-%s-py3-none-manylinux_*_x86_64.whl" % VERSION))
    assert len(found) == 1, found
    return found[0]


def torch_only_site(dest):
    """DEST holds links to the files of torch and of every distribution it
    requires, from .venv, resolved with .venv's own interpreter (markers
    evaluated there).  A top-level directory that other distributions
    share (nvidia/) is made here and only the required ones linked in it."""
    script = r'''
import json, sys
from importlib import metadata
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name as canon
dists = {canon(d.metadata["Name"]): d for d in metadata.distributions()}
want, seen, todo = set(), set(), [("torch", "")]
while todo:  # (distribution, extra asked of it), extras included
    name, extra = todo.pop()
    name = canon(name)
    if (name, extra) in seen or name not in dists:
        continue
    seen.add((name, extra))
    want.add(name)
    for text in dists[name].requires or ():
        req = Requirement(text)
        if req.marker is None or req.marker.evaluate({"extra": extra}):
            todo.extend([(req.name, "")] + [(req.name, e) for e in req.extras])
def tops(d):
    out = set()
    for f in d.files or ():
        parts = f.parts
        if parts and parts[0] != ".." and not parts[0].endswith(".pth"):
            out.add(parts[0] if len(parts) == 1 or parts[0].endswith(".dist-info")
                    else "/".join(parts[:2]))
    return out
site = str(dists["torch"].locate_file(""))
mine = sorted(set().union(*(tops(dists[n]) for n in want)))
others = set().union(*(tops(d) for n, d in dists.items() if n not in want))
print(json.dumps({"site": site, "want": sorted(want), "mine": mine, "others": sorted(others)}))
'''
    out = subprocess.run([str(VENV_PYTHON), "-c", script], capture_output=True, text=True,
                         check=True).stdout
    info = json.loads(out)
    site = Path(info["site"])
    shared = {p.split("/")[0] for p in info["others"]}
    for entry in info["mine"]:
        top, _, sub = entry.partition("/")
        if top in shared and sub:
            # a directory other distributions also fill: link only ours
            (dest / top).mkdir(parents=True, exist_ok=True)
            link, target = dest / top / sub, site / top / sub
        else:
            link, target = dest / top, site / top
        if target.exists() and not link.exists():
            link.symlink_to(target)
    assert "torch" in info["want"] and not any(n.startswith("torchvision") for n in info["want"])
    return info["want"]


def no_build_tools_path(dest):
    """A directory of links to /usr/bin without compilers, linkers or make."""
    dest.mkdir()
    for entry in sorted(os.listdir("/usr/bin")):
        if not BUILD_TOOLS.match(entry):
            (dest / entry).symlink_to(Path("/usr/bin") / entry)
    return str(dest)


def install_in_fresh_venv(wheel, base, user=(), env=None):
    """BASE/venv: a venv of Debian's python3 with torch (this generation's,
    see the module's doc) and the wheel, made as USER (a command prefix)."""
    venv = base / "venv"
    gen = generation()
    options = ["--system-site-packages"] if gen == "1" else []
    subprocess.run(list(user) + ["/usr/bin/python3", "-m", "venv"] + options + [str(venv)],
                   env=env, check=True, timeout=300)
    if gen == "2":
        torch_site = base / "torch-only"
        torch_site.mkdir()
        torch_only_site(torch_site)
        site = next((venv / "lib").glob("python3*/site-packages"))
        (site / "torch-only.pth").write_text(str(torch_site) + "\n")
    subprocess.run(list(user) + [str(venv / "bin" / "python"), "-m", "pip", "install", "-q",
                                 "--no-index", "--no-deps", str(wheel)],
                   env=env, check=True, timeout=300)
    return venv


@pytest.fixture(scope="module")
def fresh(wheel, tmp_path_factory):
    """The fresh environment with the wheel installed: (venv, env, base)."""
    base = tmp_path_factory.mktemp("wheel")
    venv = install_in_fresh_venv(wheel, base)
    env = clean_env({"PATH": "%s:%s" % (venv / "bin", no_build_tools_path(base / "bin")),
                     "VIRTUAL_ENV": str(venv), "PYTHONDONTWRITEBYTECODE": "1",
                     "CUDA_HOME": None})
    return venv, env, base


def test_wheel_is_manylinux_small_and_self_contained(wheel, tmp_path):
    assert wheel.stat().st_size < 10 * 1024 * 1024
    tag = re.search(r"-py3-none-(manylinux_\d+_\d+_x86_64)\.whl$", wheel.name).group(1)
    shown = subprocess.run([str(VENV_PYTHON), "-m", "auditwheel", "show", str(wheel)],
                           capture_output=True, text=True, check=True).stdout
    assert '"%s"' % tag in " ".join(shown.split()), shown
    names = zipfile.ZipFile(wheel).namelist()
    for part in ("dlbn/cli.py", "dlbn/_native/bin/dlbn-run", "dlbn/_native/bin/dlbn-analyze",
                 "dlbn/_native/lib/dlbn/libdlbn.so",
                 "dlbn/_native/lib/dlbn/dlbn-python/sitecustomize.py",
                 "dlbn/_native/include/dlbn/dlbn_trace.h",
                 "dlbn-%s.data/data/share/man/man1/dlbn-analyze.1" % VERSION):
        assert part in names, part
    assert not [n for n in names if "__pycache__" in n or n.endswith(".pyc")]
    # SQLite is inside the analyzer: nothing but the C library's own files
    with zipfile.ZipFile(wheel) as z:
        for name in ("dlbn/_native/bin/dlbn-analyze", "dlbn/_native/lib/dlbn/libdlbn.so"):
            path = tmp_path / Path(name).name
            path.write_bytes(z.read(name))
            needed = set(re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]",
                                    subprocess.run(["readelf", "-d", str(path)],
                                                   capture_output=True, text=True).stdout))
            assert needed and needed <= SYSTEM_LIBS, (name, needed)


def test_version_from_one_place(fresh):
    venv, env, _ = fresh
    out = subprocess.run([str(venv / "bin" / "dlbn"), "--version"], env=env,
                         capture_output=True, text=True, check=True).stdout.strip()
    built = subprocess.run([str(ANALYZE), "--version"], capture_output=True, text=True,
                           check=True).stdout.strip()
    assert out == built.replace("dlbn-analyze", "dlbn")
    assert out.startswith("dlbn %s (trace format " % VERSION), out
    meta = subprocess.run([str(venv / "bin" / "python"), "-c",
                           "from importlib.metadata import version; print(version('dlbn'))"],
                          env=env, capture_output=True, text=True, check=True).stdout.strip()
    assert meta == VERSION


def test_fresh_env_has_torch_but_no_build_tools(fresh):
    venv, env, _ = fresh
    probe = ("import shutil, torch, sys; "
             "print(torch.__version__, [t for t in ('cc', 'gcc', 'ld', 'make') if shutil.which(t)])")
    out = subprocess.run([str(venv / "bin" / "python"), "-c", probe], env=env,
                         capture_output=True, text=True, check=True).stdout
    assert out.startswith(generation() + ".") and out.rstrip().endswith("[]"), out
    if generation() == "2":
        missing = subprocess.run([str(venv / "bin" / "python"), "-c", "import torchvision"],
                                 env=env, capture_output=True, text=True)
        assert missing.returncode != 0  # only torch, not the test environment's packages


def test_dlbn_run_reports_and_keeps_the_exit_status(fresh):
    venv, env, base = fresh
    work = base / "run"
    work.mkdir()
    (work / "train.py").write_text(TRAIN)
    proc = subprocess.run([str(venv / "bin" / "dlbn"), "run", "--", "python", "train.py", "5"],
                          cwd=work, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 5, proc.stderr
    assert "VERDICT: DETECTED" in proc.stdout, proc.stdout + proc.stderr
    traces = sorted(work.glob("dlbn-*.bin"))
    assert len(traces) == 1, list(work.iterdir())
    last = proc.stderr.rstrip().splitlines()[-1]
    assert re.match(r"dlbn run: DETECTED, [0-9.]+x; trace written to %s; again: dlbn analyze %s$"
                    % (re.escape(str(traces[0])), re.escape(str(traces[0]))), last), last
    assert traces[0].with_name(traces[0].stem + ".summary.json").exists()


def test_dlbn_run_names_the_trace_when_the_program_fails(fresh):
    venv, env, base = fresh
    work = base / "fails"
    work.mkdir()
    (work / "train.py").write_text(TRAIN)
    proc = subprocess.run([str(venv / "bin" / "python"), "-m",
                           "dlbn", "run", "--no-analyze", "-o", "t-%p.bin", "--", "python",
                           "train.py", "fail"],
                          cwd=work, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 1, proc.stderr
    assert "RuntimeError: the program fails after its epoch" in proc.stderr
    assert "VERDICT" not in proc.stdout  # --no-analyze wins over dlbn run's -a
    traces = sorted(work.glob("t-*.bin"))
    assert len(traces) == 1
    assert proc.stderr.rstrip().splitlines()[-1].startswith(
        "dlbn run: DETECTED, ") and ("trace written to %s;" % traces[0]) in proc.stderr


def test_python_m_dlbn_analyze_reads_the_checkouts_traces(fresh, tmp_path):
    """A trace of build/libdlbn.so reads the same with the wheel's analyzer."""
    require_binaries(lib=True, analyzer=True)
    venv, env, _ = fresh
    (tmp_path / "train.py").write_text(TRAIN)
    trace = tmp_path / "checkout.bin"
    subprocess.run([sys.executable, "train.py"], cwd=tmp_path, timeout=300, check=True,
                   env=clean_env({"LD_PRELOAD": str(LIB), "DLBN_OUTPUT": str(trace)}))
    mine = subprocess.run([str(venv / "bin" / "python"), "-m", "dlbn", "analyze",
                           "--format", "json", str(trace)], env=env, capture_output=True,
                          text=True)
    built = subprocess.run([str(ANALYZE), "--format", "json", str(trace)],
                           capture_output=True, text=True)
    assert mine.returncode == built.returncode == 0, mine.stderr
    assert json.loads(mine.stdout)["verdict"] == "DETECTED"
    drop = re.compile(r'"(analyzer_version|timings)":[^,]*,?')
    assert drop.sub("", mine.stdout) == drop.sub("", built.stdout)


def test_dlbn_preflight_uses_the_environments_interpreter(fresh):
    venv, env, _ = fresh
    proc = subprocess.run([str(venv / "bin" / "dlbn"), "preflight", "--json"], env=env,
                          capture_output=True, text=True, timeout=120)
    doc = json.loads(proc.stdout)
    checks = {c["check"]: c for c in doc["checks"]}
    assert checks["preload"]["status"] == "ok"
    assert str(venv) in checks["preload"]["detail"]
    assert checks["python"]["status"] == "ok" and "torch" in checks["python"]["detail"]


def test_usage_errors(fresh):
    venv, env, _ = fresh
    dlbn = str(venv / "bin" / "dlbn")
    for args, code in (([], 2), (["bogus"], 2), (["run"], 2), (["--help"], 0)):
        proc = subprocess.run([dlbn] + args, env=env, capture_output=True, text=True)
        assert proc.returncode == code, (args, proc.stdout, proc.stderr)
    proc = subprocess.run([dlbn, "run", "--help"], env=env, capture_output=True, text=True)
    assert proc.stdout.startswith("usage: dlbn run [options] -- command")


def torchrun_args(script):
    """torchrun of the environment's torch, 2 ranks, in the spelling both
    generations take (1.13 wants the underscores and, on Python 3.11,
    --redirects/--tee)."""
    return ["python", "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
            "--redirects", "2", "--tee", "2"] + script


def test_dlbn_run_around_torchrun_prints_the_job_view(fresh):
    venv, env, base = fresh
    work = base / "around"
    work.mkdir()
    (work / "train.py").write_text(train_script('int(os.environ["RANK"]) == 1', 96, 0.008))
    proc = subprocess.run([str(venv / "bin" / "dlbn"), "run", "--"] + torchrun_args(["train.py"]),
                          cwd=work, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-4000:]
    traces = sorted(work.glob("dlbn-*-r[01]-*.bin"))
    assert len(traces) == 2, sorted(os.listdir(work))
    assert "JOB VERDICT: DETECTED over 2 ranks" in proc.stdout, proc.stdout[-3000:]
    last = proc.stderr.rstrip().splitlines()[-1]
    assert last.startswith("dlbn run: 2 traces written (") and \
        last.endswith("; again: dlbn analyze %s %s" % (traces[0], traces[1])), last


def test_torchrun_no_python_runs_dlbn_per_rank(fresh):
    """torchrun starts `dlbn run` as each rank: each records and writes its
    summary without a report of its own; one `dlbn analyze` over the
    summaries is the job's."""
    venv, env, base = fresh
    work = base / "per-rank"
    work.mkdir()
    (work / "train.py").write_text(train_script('int(os.environ["RANK"]) == 1', 96, 0.008))
    rank_cmd = ["--no_python", "dlbn", "run", "-o", "t-r%r-%p.bin", "--", "python", "train.py"]
    proc = subprocess.run(torchrun_args(rank_cmd), cwd=work, env=env, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert "VERDICT" not in proc.stdout  # one rank of several: no report per rank
    summaries = sorted(work.glob("t-r*.summary.json"))
    assert [s.name[:4] for s in summaries] == ["t-r0", "t-r1"], sorted(os.listdir(work))
    job = subprocess.run([str(venv / "bin" / "dlbn"), "analyze", "--format", "json"] +
                         [str(s) for s in summaries], env=env, capture_output=True, text=True)
    assert job.returncode == 0, job.stderr
    report = json.loads(job.stdout)
    assert [r["rank"] for r in report["ranks"]] == [0, 1]


def test_pip_install_from_the_checkout(wheel, tmp_path):
    """`pip install .` builds the package from source with the toolchain here
    (.venv's setuptools, no build isolation: no index is asked)."""
    target = tmp_path / "site"
    proc = subprocess.run([str(VENV_PYTHON), "-m", "pip", "install", "-q", "--no-deps",
                           "--no-build-isolation", "--target", str(target), str(ROOT)],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    analyzer = target / "dlbn" / "_native" / "bin" / "dlbn-analyze"
    version = subprocess.run([str(analyzer), "--version"], capture_output=True, text=True)
    assert version.stdout.startswith("dlbn-analyze %s " % VERSION)
    assert (target / "dlbn" / "_native" / "lib" / "dlbn" / "libdlbn.so").exists()


def test_installs_and_runs_without_root(wheel):
    """As an unprivileged user (nobody, where the suite runs as root): a
    venv of one's own, pip install of the wheel, dlbn run."""
    if os.geteuid() == 0:
        if not shutil.which("setpriv"):
            pytest.skip("setpriv (util-linux) missing: cannot drop root")
        user = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
    else:
        user = []
    base = Path(tempfile.mkdtemp(prefix="dlbn-nonroot-"))
    try:
        os.chmod(base, 0o755)
        if user:
            os.chown(base, 65534, 65534)
        env = clean_env({"HOME": str(base), "PIP_NO_CACHE_DIR": "1", "CUDA_HOME": None,
                         "PATH": "%s:%s" % (base / "venv" / "bin", "/usr/bin:/bin"),
                         "PYTHONDONTWRITEBYTECODE": "1"})
        venv = install_in_fresh_venv(wheel, base, user, env)
        work = base / "work"
        subprocess.run(user + ["mkdir", str(work)], check=True)
        (base / "train.py").write_text(TRAIN)
        proc = subprocess.run(user + [str(venv / "bin" / "dlbn"), "run", "--", "python",
                                      str(base / "train.py")],
                              cwd=work, env=env, capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stderr[-3000:]
        assert "VERDICT: DETECTED" in proc.stdout
        traces = list(work.glob("dlbn-*.bin"))
        assert len(traces) == 1
        if user:
            assert traces[0].stat().st_uid == 65534
    finally:
        shutil.rmtree(base, ignore_errors=True)
