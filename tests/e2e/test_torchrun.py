"""The README's cluster command, run: dlbn-run around torchrun with the
options the README gives (2 processes instead of 8, CPU, gloo, a tiny
loop), on the PyTorch generation of this interpreter.  torch 1.13 refuses
--nproc-per-node and, on Python 3.11, fails in its own option handling
unless given --redirects/--tee, so the README's line must be one both
generations run.  Each rank writes its trace, and the job analysis of
them names the rank that loads slowly as the straggler although both
ranks' step times are equal (they meet at every all-reduce)."""

import json
import os
import re
import shlex
import socket
import subprocess
from pathlib import Path

from e2e_common import ANALYZE, PYTHON, ROOT, clean_env, require_binaries

def train_script(slow_when, samples, slow_s):
    """A tiny DDP loop (gloo, CPU): the ranks for which slow_when (a
    Python expression) holds load each sample in slow_s seconds."""
    return """
import os, time, torch, torch.distributed as dist
from torch.utils.data import DataLoader, Dataset
SLOW = %s
class D(Dataset):
    def __len__(self): return %d
    def __getitem__(self, i):
        time.sleep(%g if SLOW else 0.001)
        return torch.zeros(16)
if __name__ == "__main__":
    dist.init_process_group("gloo")
    w = torch.zeros(16)
    for x in DataLoader(D(), batch_size=4, num_workers=1):
        time.sleep(0.003)
        dist.all_reduce(w)
    dist.destroy_process_group()
""" % (slow_when, samples, slow_s)


def readme_command():
    """The README's `dlbn-run ... torchrun ...` command, as argument lists
    (dlbn-run's options, torchrun's options)."""
    text = (ROOT / "README.md").read_text().replace("\\\n", " ")
    line = next(l for l in text.splitlines() if "dlbn-run" in l and " torchrun " in l)
    args = shlex.split(line)
    run, tr = args.index("scripts/dlbn-run"), args.index("torchrun")
    assert args[tr - 1] == "--" and args[-1] == "train.py", args
    return args[run + 1:tr - 1], args[tr + 1:-1]


def torchrun():
    """The torchrun of this interpreter's torch (the script pip or Debian
    installs beside it), else its module."""
    beside = Path(PYTHON).parent / "torchrun"
    return [str(beside)] if beside.exists() else [PYTHON, "-m", "torch.distributed.run"]


def test_readme_torchrun_command(tmp_path):
    require_binaries(lib=True, analyzer=True)
    run_opts, tr_opts = readme_command()
    assert "--nproc_per_node" in tr_opts, tr_opts
    tr_opts[tr_opts.index("--nproc_per_node") + 1] = "2"
    (tmp_path / "train.py").write_text(train_script('int(os.environ["RANK"]) == 1', 96, 0.008))
    cmd = ([str(ROOT / "scripts" / "dlbn-run")] + run_opts + ["--"] + torchrun() +
           tr_opts + ["train.py"])
    env = clean_env()
    env.pop("LD_PRELOAD", None)
    env.pop("DLBN_OUTPUT", None)
    proc = subprocess.run(cmd, cwd=str(tmp_path), env=env, capture_output=True, text=True,
                          timeout=240)
    assert proc.returncode == 0, "%s\n%s" % (" ".join(cmd), proc.stderr[-4000:])
    pattern = re.sub(r"%[a-z]", "*", run_opts[run_opts.index("-o") + 1])
    traces = sorted(tmp_path.glob(pattern))
    assert len(traces) == 2, (pattern, os.listdir(tmp_path))
    out = subprocess.run([str(ANALYZE), "--format", "json"] + [str(t) for t in traces],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert sorted(r["rank"] for r in report["ranks"]) == [0, 1], report["ranks"]
    assert all(r["rank_source"] == "trace" and r["world_size"] == 2
               for r in report["ranks"]), report["ranks"]
    job = report["job"]
    # Lockstep: equal step times; the slow loader is named by its stall.
    assert job["step_skew"] < 1.3, job
    assert job["straggler_rank"] == 1 and job["waiting_ranks"] == [0], job


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_two_hosts_summarised_where_they_ran(tmp_path):
    """Two nodes of two ranks each, one torchrun per node under dlbn-run as
    on a cluster, the node's name set per process (DLBN_HOST, which %h
    and the trace take): each node writes its ranks' summaries when its
    ranks end, and the job report from the summaries alone names the node
    whose ranks load slowly."""
    require_binaries(lib=True, analyzer=True)
    (tmp_path / "train.py").write_text(train_script('os.environ["DLBN_HOST"] == "node1"', 160, 0.010))
    port = str(free_port())
    procs = []
    for node in (0, 1):
        env = clean_env()
        env.pop("LD_PRELOAD", None)
        env.pop("DLBN_OUTPUT", None)
        env["DLBN_HOST"] = "node%d" % node
        cmd = ([str(ROOT / "scripts" / "dlbn-run"), "-o", "trace-%h-r%r.bin", "--"] +
               torchrun() + ["--nnodes", "2", "--node_rank", str(node), "--nproc_per_node",
                             "2", "--master_addr", "127.0.0.1", "--master_port", port,
                             "--redirects", "2", "--tee", "2", "train.py"])
        procs.append(subprocess.Popen(cmd, cwd=str(tmp_path), env=env, text=True,
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE))
    for p in procs:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err[-4000:]
    names = sorted(s.name for s in tmp_path.glob("trace-node*-r*.summary.json"))
    # torchrun's agent of node 1 (no RANK of its own) has a trace of its own
    # (node 0's shares rank 0's): set aside in the job view.
    assert names == ["trace-node%d-r%d.summary.json" % nr
                     for nr in ((0, 0), (0, 1), (1, 0), (1, 2), (1, 3))], names
    summaries = [tmp_path / n for n in names]
    out = subprocess.run([str(ANALYZE), "--format", "json"] + [str(s) for s in summaries],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert [(r["rank"], r["host"], r["local_rank"]) for r in report["ranks"]] == [
        (0, "node0", 0), (1, "node0", 1), (2, "node1", 0), (3, "node1", 1)], report["ranks"]
    job = report["job"]
    assert job["from_summaries"] == 4 and job["world_size"] == 4, job
    assert [n["path"] for n in job["not_ranks"]] == [str(summaries[2])], job["not_ranks"]
    # Lockstep: of node 1's two slow ranks one shows the stall, the other
    # loads while it waits for it at the all-reduce; both are input-bound.
    assert job["slow_hosts"] == ["node1"], job["hosts"]
    assert job["straggler_rank"] in (2, 3) and job["straggler_host"] == "node1", job
