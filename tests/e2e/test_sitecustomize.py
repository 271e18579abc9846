"""dlbn's sitecustomize must chain to the one it shadows - the user's (a
script directory on PYTHONPATH) or the distribution's (Debian ships
/usr/lib/python3.X/sitecustomize.py) - exactly once, and still mark fetches.

Each check runs two ways: "preload" (LD_PRELOAD=libdlbn.so, whose constructor
prepends dlbn's directory to PYTHONPATH: the real path) and "pythonpath"
(dlbn's directory put first on PYTHONPATH by hand: the bootstrap alone)."""

import os
import subprocess
import sys

import pytest

from e2e_common import BOOT_DIR, LIB, PYTHON, clean_env, require_binaries

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support",
                                "pylib"))
from dlbntrace import Trace  # noqa: E402

USER_SITE = '''\
import os, sys
with open(os.environ["USER_SITE_LOG"], "a") as log:
    log.write("%d %s\\n" % (os.getpid(), __name__))
sys.user_site_marker = "ran"
'''

FAILING_SITE = 'raise RuntimeError("user sitecustomize failed on purpose")\n'

SHOW = ("import sys, sitecustomize; "
        "print(getattr(sitecustomize, '__file__', None)); "
        "print(getattr(sys, 'user_site_marker', None)); "
        "print(any('dlbn-python' in p for p in sys.path)); "
        "print('_dlbn_boot' in sys.modules)")


def env_for(how, user_dir=None, extra=None):
    paths = [str(user_dir)] if user_dir else []
    env = dict(extra or {})
    if how == "preload":
        require_binaries()
        env["LD_PRELOAD"] = str(LIB)
    else:
        paths.insert(0, str(BOOT_DIR))
    if paths:
        env["PYTHONPATH"] = ":".join(paths)
    return env


def python(args, env, cwd):
    return subprocess.run([PYTHON] + args, env=clean_env(env), cwd=str(cwd),
                          capture_output=True, text=True, timeout=120)


@pytest.fixture
def user_dir(tmp_path):
    d = tmp_path / "userdir"
    d.mkdir()
    (d / "sitecustomize.py").write_text(USER_SITE)
    return d


@pytest.mark.parametrize("how", ["pythonpath", "preload"])
def test_user_sitecustomize_runs_once(tmp_path, user_dir, how):
    log = tmp_path / "site.log"
    extra = {"USER_SITE_LOG": str(log), "DLBN_OUTPUT": str(tmp_path / "t.dlbn")}
    proc = python(["-c", SHOW], env_for(how, user_dir, extra), tmp_path)
    assert proc.returncode == 0, proc.stderr
    site_file, marker, dlbn_on_path, _ = proc.stdout.split()
    assert site_file == str(user_dir / "sitecustomize.py")
    assert marker == "ran"
    assert dlbn_on_path == "False"
    lines = log.read_text().splitlines()
    assert len(lines) == 1 and lines[0].endswith(" sitecustomize"), lines


@pytest.mark.parametrize("how", ["pythonpath", "preload"])
def test_distribution_sitecustomize_still_runs(tmp_path, how):
    plain = python(["-c", "import sitecustomize; print(sitecustomize.__file__)"],
                   {}, tmp_path)
    with_dlbn = python(["-c", "import sitecustomize; print(sitecustomize.__file__)"],
                       env_for(how, extra={"DLBN_OUTPUT": str(tmp_path / "t.dlbn")}),
                       tmp_path)
    assert with_dlbn.returncode == plain.returncode, with_dlbn.stderr
    assert with_dlbn.stdout == plain.stdout


@pytest.mark.parametrize("how", ["pythonpath", "preload"])
def test_failing_user_sitecustomize_reported_as_without_dlbn(tmp_path, how):
    d = tmp_path / "failing"
    d.mkdir()
    (d / "sitecustomize.py").write_text(FAILING_SITE)
    args = ["-c", "print('program ran')"]
    plain = python(args, {"PYTHONPATH": str(d)}, tmp_path)
    with_dlbn = python(args, env_for(how, d, {"DLBN_OUTPUT": str(tmp_path / "t.dlbn")}),
                       tmp_path)
    assert plain.stdout == with_dlbn.stdout == "program ran\n"
    assert "Error in sitecustomize" in plain.stderr
    assert "user sitecustomize failed on purpose" in with_dlbn.stderr
    assert "Error in sitecustomize" in with_dlbn.stderr


def test_isolated_mode_has_no_bootstrap(tmp_path):
    proc = python(["-I", "-c", SHOW], env_for("preload", extra={
        "DLBN_OUTPUT": str(tmp_path / "t.dlbn")}), tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split()[3] == "False"


def test_switch_off(tmp_path):
    proc = python(["-c", SHOW], env_for("preload", extra={
        "DLBN_PYTHON": "0", "DLBN_OUTPUT": str(tmp_path / "t.dlbn")}), tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split()[2:] == ["False", "False"]


def test_marks_happen_with_user_sitecustomize(runs, rundir, user_dir):
    """A training script whose directory has its own sitecustomize.py."""
    log = rundir / "train-site.log"
    run = runs("user_site", [
        "--workers", "2", "--batch-size", "4", "--sample-ms", "15",
        "--step-ms", "10", "--steps-per-epoch", "40"],
        env={"PYTHONPATH": str(user_dir), "USER_SITE_LOG": str(log)})
    lines = log.read_text().splitlines()
    main_pid = run.record["pid"]
    assert [l for l in lines if l.startswith("%d " % main_pid)] == [
        "%d sitecustomize" % main_pid], lines
    trace = Trace(run.trace)
    ends = [m for m in trace.records_of_pid(main_pid, "MARK") if m["kind"] == 2]
    assert len(ends) == 40
    assert run.analysis["view"] == "python", run.describe()
    assert run.analysis["verdict"] == "DETECTED", run.describe()
