"""dlbn-run and dlbn-preflight: the wrappers users start from."""
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PYTHON = os.environ.get("PYTHON", "/usr/bin/python3")
RUN = ROOT / "scripts" / "dlbn-run"
PREFLIGHT = ROOT / "scripts" / "dlbn-preflight"

LOOP = """
import sys, time, torch
from torch.utils.data import DataLoader, Dataset
class D(Dataset):
    def __len__(self): return 160
    def __getitem__(self, i):
        time.sleep(0.004)
        return torch.zeros(16)
if __name__ == "__main__":
    for _ in DataLoader(D(), batch_size=8, num_workers=2):
        time.sleep(0.002)
    sys.exit(int(sys.argv[1]) if len(sys.argv) > 1 else 0)
"""


def run(args, cwd, **kw):
    env = dict(os.environ)
    env.pop("LD_PRELOAD", None)
    env.pop("DLBN_OUTPUT", None)
    return subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=120, **kw)


def test_dlbn_run_analyze_reports_the_trace_it_wrote(tmp_path):
    (tmp_path / "loop.py").write_text(LOOP)
    r = run([str(RUN), "-a", "-o", "t-%p.bin", "--", PYTHON, "loop.py"], tmp_path)
    assert r.returncode == 0, r.stderr
    traces = sorted(tmp_path.glob("t-*.bin"))
    # One trace for the whole tree (workers joined it), none for the wrapper.
    assert len(traces) == 1, (traces, r.stderr)
    assert "VERDICT:" in r.stdout
    assert str(traces[0]) in r.stdout


def test_dlbn_run_passes_on_the_exit_status(tmp_path):
    (tmp_path / "loop.py").write_text(LOOP)
    r = run([str(RUN), "-o", "x.bin", "--", PYTHON, "loop.py", "7"], tmp_path)
    assert r.returncode == 7
    assert (tmp_path / "x.bin").exists()


def test_dlbn_run_usage_errors_exit_2(tmp_path):
    assert run([str(RUN)], tmp_path).returncode == 2
    r = run([str(RUN), "--bogus", "--", "true"], tmp_path)
    assert r.returncode == 2 and "unknown option" in r.stderr


def test_preflight_json_is_valid_and_names_each_check(tmp_path):
    r = run([str(PREFLIGHT), "--json", "--python", PYTHON, "--output-dir", str(tmp_path)],
            tmp_path)
    doc = json.loads(r.stdout)
    names = {c["check"] for c in doc["checks"]}
    assert {"preload", "python", "cuda", "nvtx", "shm", "nofile", "disk"} <= names
    assert doc["ready"] is (r.returncode == 0)
    python = next(c for c in doc["checks"] if c["check"] == "python")
    assert python["status"] == "ok" and "torch" in python["detail"]


def test_preflight_fails_on_an_unwritable_output_dir(tmp_path):
    if os.geteuid() == 0:
        target = "/proc"  # not writable even for root
    else:
        target = str(tmp_path / "ro")
        os.mkdir(target, 0o500)
    r = run([str(PREFLIGHT), "--python", PYTHON, "--output-dir", target], tmp_path)
    assert r.returncode == 1
    assert "disk" in r.stdout and "fail" in r.stdout


LAUNCHER = """
import os, subprocess, sys
# two ranks, as torchrun would start them
procs = [subprocess.Popen([sys.executable, "loop.py"],
                          env=dict(os.environ, RANK=str(r), LOCAL_RANK=str(r), WORLD_SIZE="2"))
         for r in (0, 1)]
sys.exit(max(p.wait() for p in procs))
"""


def test_dlbn_run_analyze_prints_the_job_table_over_all_ranks(tmp_path):
    (tmp_path / "loop.py").write_text(LOOP)
    (tmp_path / "launch.py").write_text(LAUNCHER)
    r = run([str(RUN), "-a", "-o", "t-r%r-%p.bin", "--", PYTHON, "launch.py"], tmp_path)
    assert r.returncode == 0, r.stderr
    ranks = sorted(p.name.split("-")[1] for p in tmp_path.glob("t-r*.bin"))
    assert ranks.count("r0") == 1 and ranks.count("r1") == 1, ranks
    # one report: the per-rank table of the job, not one report per trace
    assert "dlbn-analyze: 2 ranks" in r.stdout, r.stdout
    assert r.stdout.count("JOB VERDICT:") == 1, r.stdout
    assert r.stdout.count("Trace: format") == 1, r.stdout  # the worst rank's sections
    assert r.stdout.count("<- worst") == 1, r.stdout
    for trace in tmp_path.glob("t-r*.bin"):
        assert str(trace) in r.stdout


def test_dlbn_run_analyze_says_when_recording_was_disabled(tmp_path):
    (tmp_path / "loop.py").write_text(LOOP)
    env_extra = dict(os.environ, DLBN_DISABLE="1")
    env_extra.pop("LD_PRELOAD", None)
    r = subprocess.run([str(RUN), "-a", "-o", "t-%p.bin", "--", PYTHON, "loop.py"],
                       cwd=tmp_path, env=env_extra, capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    assert "recording was disabled (DLBN_DISABLE=1)" in r.stderr
    assert "no trace was written" not in r.stderr
    assert not list(tmp_path.glob("t-*.bin"))


def test_dlbn_run_names_many_traces_by_their_pattern(tmp_path):
    """Past four traces the closing line gives their directory, their
    verdicts counted, and the output template as a pattern of their
    summaries; with --no-summary, of the traces."""
    ranks = "for r in 0 1 2 3 4; do RANK=$r WORLD_SIZE=5 %s -c pass || exit 1; done" % PYTHON
    r = run([str(RUN), "-o", "t-r%r-%p.bin", "--", "sh", "-c", ranks], tmp_path)
    assert r.returncode == 0, r.stderr
    traces = list(tmp_path.glob("t-r*.bin"))
    assert len(traces) >= 5
    last = r.stderr.rstrip().splitlines()[-1]
    assert last.startswith("dlbn-run: %d traces written in %s/ (" % (len(traces), tmp_path)), last
    assert last.endswith("; again: dlbn-analyze 't-r*-*.summary.json'"), last
    r = run([str(RUN), "--no-summary", "-a", "-o", "u-r%r-%p.bin", "--", "sh", "-c", ranks],
            tmp_path)
    last = r.stderr.rstrip().splitlines()[-1]
    assert r.returncode == 0 and last.endswith("; again: dlbn-analyze 'u-r*-*.bin'"), last
    assert " (" not in last.split(" written in ")[1].split(";")[0]  # no summaries: no verdicts
