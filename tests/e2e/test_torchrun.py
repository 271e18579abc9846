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
import subprocess
from pathlib import Path

from e2e_common import ANALYZE, PYTHON, ROOT, clean_env, require_binaries

TRAIN = """
import os, time, torch, torch.distributed as dist
from torch.utils.data import DataLoader, Dataset
SLOW = int(os.environ["RANK"]) == 1
class D(Dataset):
    def __len__(self): return 96
    def __getitem__(self, i):
        time.sleep(0.008 if SLOW else 0.001)
        return torch.zeros(16)
if __name__ == "__main__":
    dist.init_process_group("gloo")
    w = torch.zeros(16)
    for x in DataLoader(D(), batch_size=4, num_workers=1):
        time.sleep(0.003)
        dist.all_reduce(w)
    dist.destroy_process_group()
"""


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
    (tmp_path / "train.py").write_text(TRAIN)
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
