"""dlbn-run --set, --max-steps and --sweep.

The settings are checked where they act: the DataLoader attributes the
script sees, the iterators' CONFIG in the trace (set=, set_from=,
set_ignored=, max_steps=), and torch accepting the result (num_workers=0
with a prefetch_factor or persistent_workers it would refuse in __init__).
--max-steps is checked on the analysis: its window holds exactly N steps,
the program exits 0 and its finally blocks ran.  --sweep runs each value,
reports a failed one and goes on; the what-if predictions it prints come
from the JSON of an analyzer that has --what-if (a wrapper of the real one
adds a what_if list here).
"""

import importlib.util
import json
import os
import re
import stat
import subprocess
import sys

import pytest

from e2e_common import ANALYZE, BOOT_DIR, LIB, PYTHON, ROOT, clean_env, require_binaries

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support",
                                "pylib"))
from dlbntrace import Trace  # noqa: E402

RUN = ROOT / "scripts" / "dlbn-run"

SCRIPT = r'''
import json, os, sys, threading, time
import torch
from torch.utils.data import DataLoader, Dataset


class Items(Dataset):
    def __init__(self, n):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        time.sleep(0.001)
        return torch.tensor([i])


def describe(loader):
    return {k: getattr(loader, k) for k in
            ("num_workers", "prefetch_factor", "persistent_workers", "pin_memory")}


mode = sys.argv[1]
print("pid=%d" % os.getpid())
if mode == "two":
    # a shuffled train loader and a sequential val loader
    train = DataLoader(Items(32), batch_size=2, shuffle=True, num_workers=1)
    val = DataLoader(Items(8), batch_size=2, num_workers=2, persistent_workers=True)
    print(json.dumps({"train": describe(train), "val": describe(val)}))
    for epoch in range(2):
        print("epoch", epoch, sum(int(b.sum()) for b in train), sum(int(b.sum()) for b in val))
elif mode == "bounded":
    val = DataLoader(Items(8), batch_size=2)                   # iterated first
    train = DataLoader(Items(40), batch_size=2, shuffle=True, num_workers=1)
    steps = 0
    try:
        for b in val:
            pass
        for epoch in range(4):                                 # 80 batches
            for b in train:
                steps += 1
        print("after the loop")
    finally:
        print("finally steps=%d" % steps)
elif mode == "thread":
    train = DataLoader(Items(40), batch_size=2, shuffle=True)
    seen = []

    def consume():
        for epoch in range(3):
            for b in train:
                seen.append(1)

    t = threading.Thread(target=consume)
    t.start()
    t.join()
    print("thread steps=%d" % len(seen))
elif mode == "batch":
    class Stream(torch.utils.data.IterableDataset):
        def __iter__(self):
            return iter([torch.tensor([i]) for i in range(12)])

        def __len__(self):
            return 12

    loaders = {"train": DataLoader(Items(32), batch_size=2, shuffle=True, num_workers=1),
               "stream": DataLoader(Stream(), batch_size=3),
               "own": DataLoader(Items(8), batch_sampler=[[0, 1], [2, 3, 4], [5, 6, 7]])}
    out = {}
    for name, loader in loaders.items():
        batches = [b for b in loader]
        out[name] = {"sizes": sorted(set(len(b) for b in batches)), "n": len(batches),
                     "len": len(loader), "sum": sum(int(b.sum()) for b in batches),
                     "batch_size": loader.batch_size}
    print(json.dumps(out))
elif mode == "distributed":
    # one rank's share, as under DDP (no process group: the rank is given)
    from torch.utils.data.distributed import DistributedSampler
    sampler = DistributedSampler(Items(30), num_replicas=2, rank=1, shuffle=True, seed=3)
    loader = DataLoader(Items(30), batch_size=2, sampler=sampler, num_workers=1)
    sampler.set_epoch(1)
    batches = [b for b in loader]
    print(json.dumps({"sizes": sorted(len(b) for b in batches), "n": len(batches),
                      "len": len(loader), "batch_size": loader.batch_size,
                      "seen": sorted(int(i) for b in batches for i in b),
                      "rank_indices": sorted(iter(sampler))}))
elif mode == "stateful":
    try:
        from torchdata.stateful_dataloader import StatefulDataLoader
    except ImportError:
        print(json.dumps({"skip": "no torchdata.stateful_dataloader"}))
        sys.exit(0)
    loader = StatefulDataLoader(Items(32), batch_size=2, shuffle=True)
    print(json.dumps({"sizes": sorted(set(len(b) for b in loader)), "len": len(loader),
                      "sampler": type(loader.batch_sampler).__module__}))
elif mode == "sweep":
    loader = DataLoader(Items(400), batch_size=2, shuffle=True, num_workers=1)
    if loader.num_workers == 2:
        sys.exit(3)                                            # a run that fails
    for epoch in range(3):
        for b in loader:
            time.sleep(0.001)
'''


@pytest.fixture(scope="module")
def script(rundir):
    path = rundir / "settings_script.py"
    path.write_text(SCRIPT)
    return path


def dlbn_run(args, cwd, env=None, timeout=180):
    require_binaries(analyzer=True)
    return subprocess.run([str(RUN)] + args, cwd=str(cwd), env=clean_env(env),
                          capture_output=True, text=True, timeout=timeout)


def fields(text):
    return dict(kv.split("=", 1) for kv in text.split(";"))


def configs(trace, pid):
    """(iter_id, fields) of the main process's CONFIG records."""
    return [(c["iter_id"], fields(c["text"]))
            for c in Trace(trace).records_of_pid(pid, "CONFIG")]


def pid_of(stdout):
    return int(stdout.splitlines()[0].split("=")[1])


# ---------------------------------------------------------------------------
# Parsing and validation

def settings_module():
    """_dlbn_settings, loaded by a _dlbn_boot of its own (which loads the
    modules it imports first)."""
    spec = importlib.util.spec_from_file_location("_dlbn_boot_settings", BOOT_DIR / "_dlbn_boot.py")
    boot = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(boot)
    return boot.sibling_module("_dlbn_settings")


def test_parse_settings():
    settings = settings_module()
    assert settings.parse_settings("num_workers=8; train:prefetch_factor=4;1:pin_memory=true;"
                                   "val:persistent_workers=0") == [
        (None, "num_workers", 8), ("train", "prefetch_factor", 4), (1, "pin_memory", True),
        ("eval", "persistent_workers", False)]
    assert settings.parse_settings("train:batch_size=64") == [("train", "batch_size", 64)]
    for bad, why in [("num_workers", "not [SELECTOR:]KEY=VALUE"),
                     ("batch=4", "unknown setting"), ("batch_size=0", ">= 1"),
                     ("num_workers=-1", ">= 0"), ("num_workers=two", "integer"),
                     ("prefetch_factor=0", ">= 1"), ("pin_memory=yes", "0, 1, true or false"),
                     ("test:num_workers=1", "selector")]:
        with pytest.raises(ValueError, match=re.escape(why)):
            settings.parse_settings(bad)


@pytest.mark.parametrize("args,message", [
    (["--set", "bogus=1"], "unknown setting 'bogus'"),
    (["--set", "num_workers=x"], "num_workers takes an integer"),
    (["--set", "prefetch_factor=0"], "prefetch_factor must be >= 1"),
    (["--set", "batch_size=0"], "batch_size must be >= 1"),
    (["--set", "batch_size=big"], "batch_size takes an integer"),
    (["--set", "pin_memory=maybe"], "pin_memory takes 0, 1, true or false"),
    (["--set", "first:num_workers=1"], "selector 'first'"),
    (["--max-steps", "0"], "--max-steps takes a step count >= 1"),
    (["--max-steps", "x"], "--max-steps takes a step count >= 1"),
    (["--sweep", "num_workers=1,x"], "--sweep num_workers=x"),
    (["--sweep", "num_workers=1", "-o", "fixed.bin"], "put %v"),
    (["--sweep", "num_workers=1", "--sweep", "num_workers=2"], "--sweep num_workers given twice"),
    (["--sweep", "num_workers=1", "--sweep", "train:num_workers=2"],
     "--sweep num_workers given twice"),
    (["--sweep", "num_workers=1", "--sweep", "batch_size=0"], "batch_size must be >= 1"),
    (["--sweep-out", "x.json"], "--sweep-out goes with --sweep"),
    (["--no-python", "--set", "num_workers=1"], "need the Python bootstrap"),
])
def test_bad_settings_exit_2_before_the_program_starts(tmp_path, args, message):
    marker = tmp_path / "started"
    r = dlbn_run(args + ["--", "touch", str(marker)], tmp_path)
    assert r.returncode == 2, r.stderr
    assert message in r.stderr, r.stderr
    assert not marker.exists()


def test_settings_need_the_recorder(tmp_path):
    r = dlbn_run(["--max-steps", "3", "--", "true"], tmp_path, {"DLBN_DISABLE": "1"})
    assert r.returncode == 2 and "DLBN_DISABLE=1" in r.stderr, r.stderr


# ---------------------------------------------------------------------------
# --set under the preload

def run_two(rundir, script, name, settings):
    args = ["-o", str(rundir / (name + ".bin"))]
    for item in settings:
        args += ["--set", item]
    r = dlbn_run(args + ["--", PYTHON, str(script), "two"], rundir)
    assert r.returncode == 0, r.stderr[-3000:]
    seen = json.loads(r.stdout.splitlines()[1])
    return r, seen, configs(rundir / (name + ".bin"), pid_of(r.stdout))


def test_set_every_loader(rundir, script):
    r, seen, cfgs = run_two(rundir, script, "all", ["num_workers=3"])
    assert seen["train"]["num_workers"] == 3 and seen["val"]["num_workers"] == 3
    note = cfgs[0][1]
    assert note["bootstrap"] == "ok" and note["set"] == "num_workers=3", note
    iters = [c for i, c in cfgs if i]
    assert len(iters) == 4  # 2 loaders x 2 epochs
    for c in iters:
        assert c["num_workers"] == "3" and c["set"] == "num_workers=3", c
        assert len(c["workers"].split(",")) == 3
    assert {c["set_from"] for c in iters} == {"num_workers=1", "num_workers=2"}
    # the loop saw the same batches as without dlbn
    assert [ln for ln in r.stdout.splitlines() if ln.startswith("epoch")] == [
        "epoch 0 496 28", "epoch 1 496 28"]


def test_set_by_role_and_by_order(rundir, script):
    # train: the shuffled loader; eval: the sequential one, made to load in
    # the main process - so its persistent_workers goes, as torch requires.
    r, seen, cfgs = run_two(rundir, script, "roles",
                            ["train:prefetch_factor=4", "eval:num_workers=0",
                             "1:prefetch_factor=3"])
    assert seen["train"] == {"num_workers": 1, "prefetch_factor": 4,
                             "persistent_workers": False, "pin_memory": False}
    assert seen["val"]["num_workers"] == 0 and seen["val"]["persistent_workers"] is False
    default_prefetch = 2 if seen["val"]["prefetch_factor"] == 2 else None  # torch 1.x / 2.x
    assert seen["val"]["prefetch_factor"] == default_prefetch
    train = [c for i, c in cfgs if i and c["sampler"] == "RandomSampler"]
    val = [c for i, c in cfgs if i and c["sampler"] == "SequentialSampler"]
    assert train[0]["set"] == "prefetch_factor=4" and train[0]["set_from"] == "prefetch_factor=2"
    assert val[0]["num_workers"] == "0" and val[0]["persistent_workers"] == "0"
    assert val[0]["set"].startswith("num_workers=0"), val[0]
    assert "persistent_workers=0" in val[0]["set"]
    # loader 1's prefetch_factor=3 cannot apply with 0 workers: said, noted
    assert val[0]["set_ignored"] == "prefetch_factor", val[0]
    assert "prefetch_factor not applied to a DataLoader: num_workers is 0" in r.stderr
    assert [ln for ln in r.stdout.splitlines() if ln.startswith("epoch")] == [
        "epoch 0 496 28", "epoch 1 496 28"]


def test_set_zero_workers_with_prefetch_and_persistent(rundir, script):
    """The combinations torch's __init__ refuses are resolved, not raised."""
    r, seen, cfgs = run_two(rundir, script, "zero",
                            ["num_workers=0", "prefetch_factor=4", "persistent_workers=1",
                             "pin_memory=1"])
    for name in ("train", "val"):
        assert seen[name]["num_workers"] == 0 and seen[name]["persistent_workers"] is False
        assert seen[name]["pin_memory"] is True
    iters = [c for i, c in cfgs if i]
    assert all(c["set_ignored"] == "prefetch_factor,persistent_workers" for c in iters), iters
    assert all("pin_memory=1" in c["set"] for c in iters)
    assert "workers" not in iters[0]


def test_set_batch_size(rundir, script):
    """batch_size: torch's BatchSampler of the new size over the loader's
    own sampler (a map dataset, shuffled, and an IterableDataset); a loader
    with a batch sampler of the program's keeps its batches, and says so."""
    trace = rundir / "batch.bin"
    r = dlbn_run(["-o", str(trace), "--set", "train:batch_size=4", "--", PYTHON, str(script),
                  "batch"], rundir)
    assert r.returncode == 0, r.stderr[-3000:]
    seen = json.loads(r.stdout.splitlines()[1])
    assert seen["train"] == {"sizes": [4], "n": 8, "len": 8, "sum": 496, "batch_size": 4}, seen
    assert seen["stream"] == {"sizes": [4], "n": 3, "len": 3, "sum": 66, "batch_size": 4}, seen
    assert seen["own"] == {"sizes": [2, 3], "n": 3, "len": 3, "sum": 28,
                           "batch_size": None}, seen
    assert "DLBN_SET batch_size not applied to a DataLoader: it does not batch by " \
           "batch_size" in r.stderr, r.stderr
    iters = [c for i, c in configs(trace, pid_of(r.stdout)) if i]
    by_sampler = {c["sampler"]: c for c in iters}
    train = by_sampler["RandomSampler"]
    assert train["batch_size"] == "4", train
    assert train["set"] == "batch_size=4" and train["set_from"] == "batch_size=2", train
    own = [c for c in iters if c.get("set_ignored")]
    assert len(own) == 1 and own[0]["set_ignored"] == "batch_size", iters


def test_set_batch_size_distributed_sampler(rundir, script):
    """Under DDP each rank's DataLoader batches its DistributedSampler's
    share: at the new size the batches still hold exactly that rank's
    indices of the epoch, each once (the sampler is kept, set_epoch too)."""
    trace = rundir / "distributed.bin"
    r = dlbn_run(["-o", str(trace), "--set", "batch_size=4", "--", PYTHON, str(script),
                  "distributed"], rundir)
    assert r.returncode == 0, r.stderr[-3000:]
    seen = json.loads(r.stdout.splitlines()[1])
    assert seen["sizes"] == [3, 4, 4, 4] and seen["n"] == seen["len"] == 4, seen
    assert seen["batch_size"] == 4, seen
    assert len(seen["rank_indices"]) == 15 and seen["seen"] == seen["rank_indices"], seen
    assert "not applied" not in r.stderr, r.stderr
    iters = [c for i, c in configs(trace, pid_of(r.stdout)) if i]
    assert iters and iters[0]["sampler"] == "DistributedSampler", iters
    assert iters[0]["set"] == "batch_size=4" and iters[0]["set_from"] == "batch_size=2", iters


def test_set_batch_size_stateful_dataloader(rundir, script):
    """torchdata's StatefulDataLoader batches with its own BatchSampler
    subclass: --set batch_size rebuilds that class at the new size."""
    r = dlbn_run(["-o", str(rundir / "stateful.bin"), "--set", "batch_size=8", "--", PYTHON,
                  str(script), "stateful"], rundir)
    assert r.returncode == 0, r.stderr[-3000:]
    seen = json.loads(r.stdout.splitlines()[1])
    if "skip" in seen:
        pytest.skip(seen["skip"])
    assert seen["sizes"] == [8] and seen["len"] == 4, seen
    assert seen["sampler"].startswith("torchdata"), seen
    assert "not applied" not in r.stderr, r.stderr


# ---------------------------------------------------------------------------
# --max-steps

def test_max_steps_ends_the_run_cleanly(rundir, script):
    trace = rundir / "bounded.bin"
    r = dlbn_run(["--max-steps", "20", "-o", str(trace), "--", PYTHON, str(script), "bounded"],
                 rundir)
    assert r.returncode == 0, r.stderr[-3000:]
    # 1 worker x prefetch 2 + 1 = 3 warm-up steps, then 20: the loop's finally ran
    assert "finally steps=23" in r.stdout and "after the loop" not in r.stdout, r.stdout
    assert "--max-steps 20: 23 steps done (3 of warm-up), ending the run" in r.stderr
    a = json.loads(subprocess.run([str(ANALYZE), "--format", "json", str(trace)],
                                  capture_output=True, text=True, timeout=60).stdout)
    assert a["steps"]["window"] == 20 and a["steps"]["warmup"] == 3, a["steps"]
    assert a["config"]["max_steps"] == "20" and a["config"]["sampler"] == "RandomSampler"
    cfgs = configs(trace, pid_of(r.stdout))
    assert cfgs[0][1]["max_steps"] == "20"
    # the val loader's iterator was the counted one until the shuffled
    # loader's first iter(): each carries it
    assert [c.get("max_steps") for i, c in cfgs if i] == ["20", "20", "20"]
    assert Trace(trace).records_of_pid(pid_of(r.stdout), "MARK")[-1]["kind"] == 3  # FETCH_STOP


def test_max_steps_in_another_thread_stops_its_epochs(rundir, script):
    r = dlbn_run(["--max-steps", "5", "-o", str(rundir / "thread.bin"), "--", PYTHON,
                  str(script), "thread"], rundir)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "thread steps=6" in r.stdout, r.stdout  # 0 workers: 1 warm-up step + 5


# ---------------------------------------------------------------------------
# --sweep

FAKE_ANALYZER = r'''#!%(python)s
"""The real dlbn-analyze, plus --what-if's JSON key."""
import json, subprocess, sys
real = %(real)r
args = sys.argv[1:]
if "--help" in args:
    out = subprocess.run([real, "--help"], capture_output=True, text=True)
    sys.stdout.write(out.stdout + "      --what-if  (test stand-in)\n")
    sys.exit(0)
what_if = "--what-if" in args
out = subprocess.run([real] + [a for a in args if a != "--what-if"],
                     capture_output=True, text=True)
if out.returncode or not what_if:
    sys.stdout.write(out.stdout); sys.stderr.write(out.stderr); sys.exit(out.returncode)
doc = json.loads(out.stdout)
nw = int(doc["config"]["num_workers"])
doc["what_if"] = [{"setting": "num_workers", "value": v, "predicted_step_ms": 100.0 + v + nw,
                   "predicted_speedup": 1.5, "limited_by": "cores"} for v in range(5)]
json.dump(doc, sys.stdout)
'''


def test_sweep_measures_each_value_and_goes_on_after_a_failure(rundir, script, tmp_path):
    require_binaries(analyzer=True)
    run = with_analyzer(tmp_path, FAKE_ANALYZER)
    out = tmp_path / "sweep.json"
    r = subprocess.run([str(run), "--lib", str(LIB), "--sweep", "num_workers=0,2,1",
                        "--max-steps", "30", "--sweep-out", str(out), "--",
                        PYTHON, str(script), "sweep"],
                       cwd=str(tmp_path), env=clean_env(), capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 1, r.stderr[-3000:]  # one run failed
    rows = json.loads(out.read_text())
    assert [row["value"] for row in rows] == [0, 2, 1]
    # a failure names the point that failed
    assert [row["status"] for row in rows] == ["ok", "exit 3 at num_workers=2", "ok"]
    ok = [rows[0], rows[2]]
    for row in ok:
        assert row["setting"] == "num_workers" and row["window_steps"] == 30
        assert row["measured_step_ms"] > 0
        assert os.path.exists(row["trace"]) and "num_workers-%d" % row["value"] in row["trace"]
        # predictions: the first analysed run's (num_workers 0) what-if list
        assert row["predicted_step_ms"] == 100.0 + row["value"] + 0
        assert row["limited_by"] == "cores"
    assert rows[1]["measured_step_ms"] is None and rows[1]["predicted_step_ms"] == 102.0
    table = r.stdout[r.stdout.index("sweep of num_workers"):].splitlines()
    assert "the what-if of the run with num_workers=0" in table[0]
    assert table[1].split()[:1] == ["num_workers"]
    cells = [line.split() for line in table[2:5]]
    assert [c[0] for c in cells] == ["0", "2", "1"]
    # value, measured ms, predicted ms, measured and predicted samples/s, status
    assert cells[1][1:] == ["-", "102.00", "-", "20", "exit", "3", "at",
                            "num_workers=2"]  # 2 per batch / 102 ms
    assert float(cells[0][3]) == pytest.approx(2 * 1000 / rows[0]["measured_step_ms"], abs=1)
    assert float(cells[0][1]) == pytest.approx(rows[0]["measured_step_ms"], abs=0.006)
    # each run's CONFIG says what it was run with
    a = json.loads(subprocess.run([str(ANALYZE), "--format", "json", rows[2]["trace"]],
                                  capture_output=True, text=True, timeout=60).stdout)
    assert a["config"]["set"] == "num_workers=1" and a["config"]["max_steps"] == "30"


def test_grid_sweep(rundir, script, tmp_path):
    """Two --sweep options run every combination, say how far along the
    sweep is, go on after failed runs (num_workers=2 exits 3 here), and
    predict each point from the first run's what-if, given the runs of
    the other batch size."""
    out = tmp_path / "grid.json"
    r = dlbn_run(["--sweep", "num_workers=1,2", "--sweep", "batch_size=2,4", "--max-steps", "20",
                  "--sweep-out", str(out), "--", PYTHON, str(script), "sweep"], tmp_path,
                 timeout=400)
    assert r.returncode == 1, r.stderr[-3000:]
    progress = [ln for ln in r.stderr.splitlines() if ln.startswith("dlbn-run: sweep ")]
    assert progress[0] == "dlbn-run: sweep num_workers=1 batch_size=2 (1 of 4)", progress
    assert re.match(r"dlbn-run: sweep num_workers=1 batch_size=4 \(2 of 4; about \d+ (s|min) "
                    r"left\)$", progress[1]), progress  # min past 2 minutes (a slow machine)
    assert len(progress) == 4
    rows = json.loads(out.read_text())
    assert [row["settings"] for row in rows] == [
        {"num_workers": 1, "batch_size": 2}, {"num_workers": 1, "batch_size": 4},
        {"num_workers": 2, "batch_size": 2}, {"num_workers": 2, "batch_size": 4}]
    assert [row["status"] for row in rows] == [
        "ok", "ok", "exit 3 at num_workers=2 batch_size=2", "exit 3 at num_workers=2 batch_size=4"]
    for row in rows[:2]:
        assert row["batch_size"] == row["settings"]["batch_size"] and row["num_workers"] == 1
        assert row["loop_ms"] > 0 and row["measured_step_ms"] > 0, row
        assert row["predicted_step_ms"] > 0 and row["limited_by"], row
        assert row["measured_samples_per_s"] == pytest.approx(
            row["batch_size"] * 1000 / row["measured_step_ms"])
        tag = "num_workers-1_batch_size-%d" % row["batch_size"]
        assert tag in row["trace"], row["trace"]
    # a failed run still gets the prediction for what it was asked
    assert rows[3]["predicted_step_ms"] > 0 and rows[3]["measured_step_ms"] is None
    table = r.stdout[r.stdout.index("sweep of num_workers x batch_size"):].splitlines()
    assert table[1].split()[:2] == ["num_workers", "batch_size"]
    assert table[-1].startswith("best measured: num_workers=1, batch_size="), table
    # the points feed the batch-size model of the first run's analysis
    a = json.loads(subprocess.run([str(ANALYZE), "--format", "json", "--what-if",
                                   "--sweep-results", str(out), rows[0]["trace"]],
                                  capture_output=True, text=True, timeout=60).stdout)
    assert a["what_if_basis"]["split_measured"] is True, a["what_if_basis"]["notes"]
    cells = {(c["batch_size"], c["num_workers"]): c for c in a["what_if_grid"]}
    # (the analyzer's JSON numbers carry 6 significant digits)
    assert cells[(4, 1)]["measured_step_ms"] == pytest.approx(rows[1]["measured_step_ms"],
                                                              rel=1e-4)
    assert cells[(4, 1)]["predicted_step_ms"] == pytest.approx(rows[1]["predicted_step_ms"],
                                                               rel=1e-4)


OLD_ANALYZER = r'''#!%(python)s
"""The real dlbn-analyze as one without --what-if would answer."""
import subprocess, sys
real = %(real)r
args = sys.argv[1:]
out = subprocess.run([real] + [a for a in args if a != "--what-if"], capture_output=True,
                     text=True)
text = out.stdout
if "--help" in args:
    text = "".join(l for l in text.splitlines(True) if "what-if" not in l)
sys.stdout.write(text); sys.stderr.write(out.stderr); sys.exit(out.returncode)
'''


def with_analyzer(tmp_path, source):
    """A copy of dlbn-run next to a stand-in dlbn-analyze (source)."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    run = bindir / "dlbn-run"
    run.write_text(RUN.read_text())
    fake = bindir / "dlbn-analyze"
    fake.write_text(source % {"python": sys.executable, "real": str(ANALYZE)})
    for p in (run, fake):
        p.chmod(p.stat().st_mode | stat.S_IXUSR)
    return run


def test_sweep_without_what_if_prints_dashes(rundir, script, tmp_path):
    require_binaries(analyzer=True)
    run = with_analyzer(tmp_path, OLD_ANALYZER)
    r = subprocess.run([str(run), "--lib", str(LIB), "--sweep", "train:prefetch_factor=2",
                        "--max-steps", "5", "--", PYTHON, str(script), "sweep"],
                       cwd=str(tmp_path), env=clean_env(), capture_output=True, text=True,
                       timeout=180)
    assert r.returncode == 0, r.stderr[-3000:]
    table = r.stdout[r.stdout.index("sweep of train:prefetch_factor"):].splitlines()
    assert "no what-if in the analyses" in table[0]
    value, measured, predicted, per_s, predicted_per_s, status = table[2].split()
    assert value == "2" and float(measured) > 0 and predicted == "-" and status == "ok"
    assert float(per_s) > 0 and predicted_per_s == "-"
    assert list(tmp_path.glob("dlbn-sweep-train-prefetch_factor-2-*.bin"))


def test_sweep_with_the_real_what_if_and_its_picture(rundir, script, tmp_path):
    """The sweep reads dlbn-analyze --what-if's predictions, and --html
    plots its measured points beside the curve."""
    out = tmp_path / "sweep.json"
    r = dlbn_run(["--sweep", "num_workers=1,3", "--max-steps", "20", "--sweep-out", str(out),
                  "--", PYTHON, str(script), "sweep"], tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    rows = json.loads(out.read_text())
    assert [row["value"] for row in rows] == [1, 3]
    for row in rows:
        assert row["status"] == "ok" and row["measured_step_ms"] > 0, row
        assert row["predicted_step_ms"] and row["predicted_step_ms"] > 0, row
        assert row["limited_by"], row
    page = tmp_path / "report.html"
    a = subprocess.run([str(ANALYZE), rows[0]["trace"], "--what-if", "--html", str(page),
                        "--sweep-results", str(out)], capture_output=True, text=True,
                       timeout=60)
    assert a.returncode == 0, a.stderr
    html = page.read_text()
    assert "<svg" in html and "http://" not in html.replace("http://www.w3.org", "")
    for row in rows:
        assert ("%.2f" % row["measured_step_ms"]) in html or \
            ("%.1f" % row["measured_step_ms"]) in html, row


LIGHTNING = r'''
import os, sys, time
import torch
from torch.utils.data import DataLoader, Dataset
try:
    import lightning as L
except Exception:
    sys.exit(77)


class Items(Dataset):
    def __len__(self):
        return 48

    def __getitem__(self, i):
        time.sleep(0.001)
        return torch.tensor([float(i)])


class Model(L.LightningModule):
    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.zeros(1))

    def training_step(self, batch, batch_idx):
        return (self.w * batch).sum()

    def validation_step(self, batch, batch_idx):
        pass

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)


print("pid=%d" % os.getpid())
train = DataLoader(Items(), batch_size=2, shuffle=True, num_workers=1)
val = DataLoader(Items(), batch_size=4, num_workers=1)
trainer = L.Trainer(accelerator="cpu", devices=1, max_epochs=3, logger=False,
                    enable_checkpointing=False, enable_progress_bar=False,
                    enable_model_summary=False)
try:
    trainer.fit(Model(), train, val)
    print("fit returned")
finally:
    print("workers seen %d %d" % (train.num_workers, val.num_workers))
'''


def test_max_steps_and_set_under_lightning(rundir):
    """Lightning's sanity check iterates the val loader first; the shuffled
    train loader is the one counted.  Trainer.fit re-raises the SystemExit
    after its teardown: exit status 0, the trace complete."""
    script = rundir / "lightning_fit.py"
    script.write_text(LIGHTNING)
    trace = rundir / "lightning.bin"
    r = dlbn_run(["--set", "train:num_workers=2", "--max-steps", "15", "-o", str(trace),
                  "--", PYTHON, str(script)], rundir, timeout=300)
    if r.returncode == 77:
        pytest.skip("lightning not importable with this torch")
    assert r.returncode == 0, r.stderr[-3000:]
    assert "workers seen 2 1" in r.stdout and "fit returned" not in r.stdout, r.stdout
    # 2 workers x prefetch 2 + 1 warm-up steps, then 15
    assert "--max-steps 15: 20 steps done (5 of warm-up)" in r.stderr, r.stderr[-3000:]
    a = json.loads(subprocess.run([str(ANALYZE), "--format", "json", str(trace)],
                                  capture_output=True, text=True, timeout=60).stdout)
    assert a["steps"]["window"] == 15, a["steps"]
    assert a["config"]["sampler"] == "RandomSampler" and a["config"]["set"] == "num_workers=2"
    assert a["config"]["max_steps"] == "15"
