"""Several DataLoaders in one process, on real PyTorch (both generations).

A script with a train loader and a val loader (validation after every
epoch, as pytorch/examples' imagenet/main.py does), and one with two train
loaders zipped (labelled + unlabelled).  What is asserted is structure, not
timing: each loader has its own steps and epochs, the training loader is
the one the loop spends its time on, the other is named by its role, the
workers table holds the training loader's workers only, and the JSON
report's "loaders" list and the SQLite export agree.  The verdict's figures
against a measured Replay are tests/e2e/test_pipelines.py's.
"""

import sqlite3
import subprocess
import textwrap

import pytest

from e2e_common import LIB, PYTHON, RUN_TIMEOUT_S, analyze, analyze_ok, clean_env, \
    require_binaries

# train: 24 batches of 4 (10 ms per sample) over 2 workers, non-persistent;
# val: 6 batches of 4 (1 ms per sample), 1 worker, no shuffle; 2 epochs.
SCRIPT = textwrap.dedent("""
    import sys, time
    import torch
    from torch.utils.data import DataLoader, Dataset

    class Sleepy(Dataset):
        def __init__(self, n, ms):
            self.n, self.ms = n, ms
        def __len__(self):
            return self.n
        def __getitem__(self, i):
            time.sleep(self.ms / 1000.0)
            return torch.full((8,), float(i))

    train = DataLoader(Sleepy(96, 10), batch_size=4, shuffle=True, num_workers=2)
    if sys.argv[1] == "zipped":
        other = DataLoader(Sleepy(96, 1), batch_size=4, shuffle=True, num_workers=1)
        for epoch in range(2):
            for labelled, unlabelled in zip(train, other):
                time.sleep(0.002)
    else:
        val = DataLoader(Sleepy(24, 1), batch_size=4, shuffle=False, num_workers=1)
        for epoch in range(2):
            for x in train:
                time.sleep(0.002)
            with torch.no_grad():
                for x in val:
                    time.sleep(0.001)
    """)


def run_script(tmp_path, shape):
    require_binaries(analyzer=True)
    script = tmp_path / "two_loaders.py"
    script.write_text(SCRIPT)
    trace = tmp_path / (shape + ".dlbn")
    env = clean_env({"LD_PRELOAD": str(LIB), "DLBN_OUTPUT": str(trace)})
    proc = subprocess.run([PYTHON, str(script), shape], env=env, cwd=str(tmp_path),
                          capture_output=True, text=True, timeout=RUN_TIMEOUT_S)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return trace


@pytest.fixture(scope="module")
def train_val(tmp_path_factory):
    trace = run_script(tmp_path_factory.mktemp("train_val"), "train_val")
    return trace, analyze_ok(trace)


@pytest.fixture(scope="module")
def zipped(tmp_path_factory):
    trace = run_script(tmp_path_factory.mktemp("zipped"), "zipped")
    return trace, analyze_ok(trace)


def by_role(report):
    return {l["role"]: l for l in report["loaders"]}


def test_train_val_each_loader_its_own_steps(train_val):
    _, report = train_val
    assert report["view"] == "python", report["reasons"]
    loaders = by_role(report)
    assert set(loaders) == {"train", "eval"}, report["loaders"]
    train, val = loaders["train"], loaders["eval"]
    assert train["training"] and not val["training"]
    assert (train["steps"], train["epochs"]) == (48, 2), train
    assert (val["steps"], val["epochs"]) == (12, 2), val
    assert train["sampler"] == "RandomSampler" and val["sampler"] == "SequentialSampler"
    assert (train["workers"], val["workers"]) == (2, 1)
    # non-persistent: a fresh set of workers every epoch
    assert (train["worker_processes"], val["worker_processes"]) == (4, 2), report["loaders"]
    assert "most time in" in train["chosen_by"], train["chosen_by"]
    # the top-level keys are the training loader's
    assert report["steps"]["total"] == 48 and report["steps"]["epochs"] == 2
    assert report["config"]["batch_size"] == "4" and report["config"]["num_workers"] == "2"


def test_train_val_window_and_stall(train_val):
    _, report = train_val
    val = by_role(report)["eval"]
    # epoch 1's validation lies inside the training window (all of it: the
    # reference Replay caches every loader before the loop), epoch 2's
    # after its last step
    assert val["in_window"]["steps"] == 6, val
    other = report["loader_wait"]["other_loaders_stall_s"]
    assert other == pytest.approx(val["in_window"]["stall_s"], abs=1e-6)
    assert report["loader_wait"]["stall_s"] >= other > 0


def test_train_val_workers_are_the_training_loaders(train_val, tmp_path):
    trace, report = train_val
    db = tmp_path / "run.db"
    proc = analyze(trace, "--sqlite", str(db))
    assert proc.returncode == 0, proc.stderr
    con = sqlite3.connect(str(db))
    try:
        rows = con.execute("SELECT pid, loader FROM workers").fetchall()
        loaders = con.execute("SELECT id, role FROM loaders ORDER BY id").fetchall()
    finally:
        con.close()
    role_of = dict(loaders)
    assert sorted(role_of.values()) == ["eval", "train"], loaders
    assert len(rows) == 6 and all(loader in role_of for _, loader in rows), rows
    train_pids = {pid for pid, loader in rows if role_of[loader] == "train"}
    shown = {w["pid"] for w in report["workers"]}
    assert shown and shown <= train_pids, (shown, rows)


def test_train_val_report_sections(train_val):
    trace, _ = train_val
    text = analyze(trace).stdout
    assert "DataLoaders (2 in the training process)" in text, text
    assert "eval" in text and "inside the verdict's window" in text
    md = analyze(trace, "--format", "markdown").stdout
    assert "### DataLoaders" in md and "| 2 | eval |" in md, md


def test_zipped_loaders(zipped):
    _, report = zipped
    loaders = by_role(report)
    assert set(loaders) == {"train", "zipped"}, report["loaders"]
    train, other = loaders["train"], loaders["zipped"]
    # the slow loader (10 ms per sample over 2 workers) is the one waited for
    assert train["workers"] == 2 and other["workers"] == 1, report["loaders"]
    assert "same epochs" in train["chosen_by"], train["chosen_by"]
    assert train["steps"] == other["steps"] == 48
    assert other["in_window"]["steps"] > 30, other
