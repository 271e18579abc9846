"""Real resource limits for dlbn's end-to-end memory tests (test_memory.py).

  MemoryCgroup(limit_bytes)  a fresh memory cgroup with that limit, under
                             this process's own (cgroup v1 where the memory
                             controller is mounted as v1, else cgroup v2 where
                             the memory controller is delegated to it); its
                             wrap(cmd) moves the command's shell into the group
                             before it execs the command, so everything the
                             command allocates is charged there.  A context
                             manager: the group is removed on exit (its
                             leftover processes, all started by the command,
                             are given a few seconds to exit, then SIGKILLed
                             by pid), also when the test failed.
  small_shm_wrap(cmd, kib)   the command in a new mount namespace whose
                             /dev/shm is a tmpfs of that size.
  run_limited(...)           runs a workload under the preload, wrapped,
                             like e2e_common.run_workload (any exit status;
                             the caller asserts it).

A limit that cannot be set here (not root, a read-only or absent memory
controller, no unshare/mount) skips the test with the reason, never fails it.
Trace files must not live in /dev/shm: a small /dev/shm would hide them, and
tmpfs pages count in the memory cgroup (assert_not_in_dev_shm).
"""

import errno
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from e2e_common import LIB, PYTHON, RUN_TIMEOUT_S, Run, clean_env, require_binaries

MEMORY_WORKLOAD = Path(__file__).resolve().parent / "memory_workload.py"

# Exit status of the wrapper shell when it could not join the cgroup or
# mount the tmpfs (the workload itself exits 0, 2, 3 or by a signal).
JOIN_FAILED = 97
MOUNT_FAILED = 98

_seq = [0]


def _mountinfo():
    """(root, mount point, fstype, super options) per line of mountinfo."""
    rows = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            left, _, right = line.partition(" - ")
            fields, rfields = left.split(), right.split()
            if len(fields) < 5 or len(rfields) < 3:
                continue
            rows.append((fields[3], fields[4], rfields[0], rfields[2]))
    return rows


def _own_cgroups():
    """{"v1:memory": path, "v2": path} from /proc/self/cgroup."""
    out = {}
    with open("/proc/self/cgroup") as f:
        for line in f:
            parts = line.rstrip("\n").split(":", 2)
            if len(parts) != 3:
                continue
            ident, controllers, path = parts
            if ident == "0" and controllers == "":
                out["v2"] = path
            elif "memory" in controllers.split(","):
                out["v1:memory"] = path
    return out


def _under_mount(point, root, path):
    """The directory of cgroup `path` in a hierarchy mounted at `point`
    whose root is `root` (a container without its own cgroup namespace
    sees the host's paths: strip the mount's root), or None."""
    if root != "/":
        if not (path == root or path.startswith(root.rstrip("/") + "/")):
            return None
        path = path[len(root.rstrip("/")):] or "/"
    return os.path.join(point, path.lstrip("/")).rstrip("/") or "/"


def _read(path, default=None):
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return default


def find_memory_parent():
    """(version, parent directory) where a memory cgroup can be made, or
    (None, reason)."""
    own = _own_cgroups()
    mounts = _mountinfo()
    reasons = []
    v1 = [(root, point) for root, point, fstype, opts in mounts
          if fstype == "cgroup" and "memory" in opts.split(",")]
    if v1 and "v1:memory" in own:
        for root, point in v1:
            # Under this process's own group (its limits and accounting
            # still apply), else at the hierarchy's root.
            here = _under_mount(point, root, own["v1:memory"])
            for parent in ([here] if here and here != point else []) + [point]:
                if not os.path.exists(os.path.join(parent, "memory.limit_in_bytes")):
                    continue
                if os.access(parent, os.W_OK):
                    return 1, parent
                reasons.append("cgroup v1 memory directory %s is not writable" % parent)
    elif v1:
        reasons.append("cgroup v1 memory controller mounted but /proc/self/cgroup "
                       "names no memory group")
    v2 = [(root, point) for root, point, fstype, _ in mounts if fstype == "cgroup2"]
    if v2 and "v2" in own:
        for root, point in v2:
            here = _under_mount(point, root, own["v2"])
            if not here:
                continue
            controllers = (_read(os.path.join(here, "cgroup.subtree_control"), "") or "").split()
            if "memory" not in controllers:
                reasons.append("cgroup v2 at %s: the memory controller is not enabled for "
                               "its children (cgroup.subtree_control: %r); enabling it would "
                               "change a group this test did not make"
                               % (here, " ".join(controllers)))
                continue
            if not os.access(here, os.W_OK):
                reasons.append("cgroup v2 directory %s is not writable" % here)
                continue
            return 2, here
    if not v1 and not v2:
        reasons.append("no cgroup hierarchy mounted")
    return None, "; ".join(reasons) or "no usable memory cgroup"


class MemoryCgroup:
    """A memory cgroup of its own with a limit, for one command."""

    def __init__(self, limit_bytes, tag="mem"):
        self.limit_bytes = int(limit_bytes) // 4096 * 4096
        self.tag = tag
        self.version = None
        self.path = None

    # ---- setup / teardown ------------------------------------------------
    def __enter__(self):
        version, parent = find_memory_parent()
        if version is None:
            pytest.skip("no memory cgroup can be made here: %s" % parent)
        _seq[0] += 1
        name = "dlbn-e2e-%s-%d-%d" % (self.tag, os.getpid(), _seq[0])
        path = os.path.join(parent, name)
        try:
            os.mkdir(path)
        except OSError as exc:
            if exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
                pytest.skip("cannot make a memory cgroup in %s: %s (needs root and a "
                            "writable cgroup mount)" % (parent, exc))
            raise
        self.version, self.path = version, path
        limit_file = "memory.limit_in_bytes" if version == 1 else "memory.max"
        try:
            self._write(limit_file, str(self.limit_bytes))
            if version == 2 and os.path.exists(os.path.join(path, "memory.swap.max")):
                self._write("memory.swap.max", "0")
        except OSError as exc:
            self.remove()
            pytest.skip("cannot set %s in %s: %s" % (limit_file, path, exc))
        return self

    def __exit__(self, *exc):
        self.remove()
        return False

    def _write(self, name, value):
        with open(os.path.join(self.path, name), "w") as f:
            f.write(value)

    def read(self, name):
        return _read(os.path.join(self.path, name))

    def procs(self):
        text = self.read("cgroup.procs") or ""
        return [int(x) for x in text.split()]

    def remove(self, grace_s=8.0):
        """Wait up to grace_s for the command's leftover processes (workers
        whose parent was killed notice within torch's 5 s status check),
        SIGKILL those still there by pid, then rmdir the group."""
        if not self.path or not os.path.isdir(self.path):
            return
        deadline = time.monotonic() + grace_s
        while self.procs() and time.monotonic() < deadline:
            time.sleep(0.1)
        for _ in range(50):
            pids = self.procs()
            if not pids:
                try:
                    os.rmdir(self.path)
                    break
                except OSError as exc:
                    if exc.errno == errno.ENOENT:
                        break
                    if exc.errno != errno.EBUSY:
                        raise
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            time.sleep(0.1)
        else:
            raise AssertionError("could not remove cgroup %s (processes %s)"
                                 % (self.path, self.procs()))
        self.path = None

    # ---- use -------------------------------------------------------------
    @property
    def limit_mib(self):
        return self.limit_bytes / 1048576.0

    def wrap(self, cmd):
        """cmd run by a shell that first moves itself into the group."""
        return ["sh", "-c",
                'echo $$ > "$0/cgroup.procs" || { echo "e2e_limits: cannot join cgroup '
                '$0" >&2; exit %d; }; exec "$@"' % JOIN_FAILED,
                self.path] + list(cmd)

    def oom_kills(self):
        """OOM kills in the group so far (None when it does not say)."""
        text = self.read("memory.oom_control" if self.version == 1 else "memory.events")
        for line in (text or "").splitlines():
            key, _, value = line.partition(" ")
            if key == "oom_kill":
                return int(value)
        return None

    def peak_bytes(self):
        text = self.read("memory.max_usage_in_bytes" if self.version == 1 else "memory.peak")
        try:
            return int(text)
        except (TypeError, ValueError):
            return None


def small_shm_wrap(cmd, kib):
    """cmd in a new mount namespace with a tmpfs of `kib` KiB on /dev/shm."""
    return ["unshare", "-m", "--propagation", "private", "sh", "-c",
            'mount -t tmpfs -o size=%dk tmpfs /dev/shm || exit %d; exec "$@"'
            % (int(kib), MOUNT_FAILED), "sh"] + list(cmd)


def require_small_shm():
    """Skip unless a private tmpfs can be mounted on /dev/shm here."""
    probe = small_shm_wrap(["sh", "-c", "df -k /dev/shm | tail -n 1"], 1024)
    try:
        proc = subprocess.run(probe, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        pytest.skip("cannot run unshare -m: %s" % exc)
    if proc.returncode != 0:
        pytest.skip("cannot mount a small tmpfs on /dev/shm in a mount namespace "
                    "(unshare -m; mount): exit %d: %s" % (proc.returncode,
                                                         proc.stderr.strip()[-300:]))
    fields = proc.stdout.split()
    if len(fields) < 2 or not fields[1].isdigit() or int(fields[1]) > 2048:
        pytest.skip("the tmpfs mounted on /dev/shm did not take its size: %r" % proc.stdout)


def assert_not_in_dev_shm(path):
    real = os.path.realpath(str(path))
    assert not (real == "/dev/shm" or real.startswith("/dev/shm/")), (
        "trace directory %s is in /dev/shm: a small /dev/shm would hide it and its "
        "pages would count in the memory cgroup" % real)
    assert not (real == "/run/shm" or real.startswith("/run/shm/")), real


KEEP_DIR = "/tmp/memtest-traces"


def _keep_trace(trace):
    """A copy of a hung run's trace outside the test's directory (removed
    after the module unless DLBN_E2E_KEEP)."""
    import shutil

    try:
        os.makedirs(KEEP_DIR, exist_ok=True)
        dest = os.path.join(KEEP_DIR, "%s-%d" % (Path(trace).name, os.getpid()))
        shutil.copyfile(str(trace), dest)
        return dest
    except OSError as exc:
        return "%s (not copied: %s)" % (trace, exc)


def _run_in_own_group(cmd, env, cwd, timeout, name, trace):
    """subprocess.run in a session of its own: on a timeout every process
    of the run (workers included) is SIGKILLed by its process group, and
    the failure says what the run printed."""
    popen = subprocess.Popen(cmd, env=env, cwd=str(cwd), stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        out, err = popen.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(popen.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        out, err = popen.communicate()
        kept = _keep_trace(trace)
        raise AssertionError("%s: no exit after %d s (killed); trace kept at %s\ncmd: %s\n"
                             "stderr tail:\n%s" % (name, timeout, kept, " ".join(cmd),
                                                    (err or "")[-3000:]))
    return subprocess.CompletedProcess(cmd, popen.returncode, out, err)


def run_limited(directory, name, args, cgroup=None, shm_kib=None, preload=True,
                timeout=RUN_TIMEOUT_S):
    """Run memory_workload.py with `args` under the preload, in `cgroup`
    (a MemoryCgroup, entered) and/or with a /dev/shm of `shm_kib` KiB.
    Returns a Run whatever the exit status (proc.returncode; record is None
    when the workload was killed before writing its JSON)."""
    import json

    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    assert_not_in_dev_shm(directory)
    trace = directory / (name + ".dlbn")
    json_out = directory / (name + ".json")
    extra = {}
    if preload:
        require_binaries()
        extra = {"DLBN_OUTPUT": str(trace), "LD_PRELOAD": str(LIB)}
    cmd = [PYTHON, str(MEMORY_WORKLOAD), "--json-out", str(json_out)] + list(args)
    if shm_kib is not None:
        cmd = small_shm_wrap(cmd, shm_kib)
    if cgroup is not None:
        cmd = cgroup.wrap(cmd)
    t0 = time.monotonic()
    proc = _run_in_own_group(cmd, clean_env(extra), directory, timeout, name, trace)
    elapsed = time.monotonic() - t0
    if os.environ.get("DLBN_E2E_KEEP"):
        print("kept run %s in %s" % (name, directory))
    if proc.returncode == JOIN_FAILED:
        raise AssertionError("%s: could not join the cgroup: %s" % (name, proc.stderr[-500:]))
    if proc.returncode == MOUNT_FAILED:
        pytest.skip("%s: could not mount the small /dev/shm: %s" % (name, proc.stderr[-500:]))
    record = json.loads(json_out.read_text()) if json_out.exists() else None
    if preload:
        assert trace.exists() and trace.stat().st_size > 0, (
            "no trace written at %s (exit %d)\nstderr:\n%s" % (
                trace, proc.returncode, proc.stderr[-4000:]))
    return Run(directory, name, proc, trace, record, elapsed)
