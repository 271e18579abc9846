"""Measured confirmation (docs/DESIGN.md, "Replay and ground truth"):
`dlbn-run --replay N` and the baseline comparison.

Two parts:
  - the bootstrap's replay on its own (a fake marker API, no library): what
    the loop receives (N cached batches cycled, len(loader) per epoch, copies
    the loop cannot corrupt), what is marked, what the real loader is spared
    (workers shut down, no iterator in later epochs), and the refusals
    (loader without len(), a bad DLBN_REPLAY);
  - a real input-bound DataLoader run (tests/e2e/workload.py) under plain
    dlbn-run and under dlbn-run --replay 8: the replay run is much faster,
    has the same steps, and the measured speedup dlbn computes from the two
    traces is within 10% of the workload's own Real/Replay measurement
    (its --mode replay, the reference method).  The comparison goes through
    `dlbn-analyze --baseline` when the analyzer has it, else through
    build/tests/test_baseline REAL REPLAY (the same C function).
"""

import json
import subprocess
import time

import pytest

from e2e_common import (ANALYZE, BOOT_DIR, BUILD, PYTHON, ROOT, WORKLOAD, Run, check_timing,
                        clean_env, measured_speedup, require_binaries, run_workload)

RUN = ROOT / "scripts" / "dlbn-run"
BASELINE_TOOL = BUILD / "tests" / "test_baseline"
BEGIN, END, STOP, ITER = 1, 2, 3, 4

# Input-bound by construction (see test_speedup.py): 30 ms/batch supply
# against 10 ms of loop work -> Real/Replay ~3.0.
INPUT_BOUND = ["--workers", "2", "--batch-size", "4", "--sample-ms", "15",
               "--step-ms", "10", "--steps-per-epoch", "64"]
REPLAY_BATCHES = 8
TOLERANCE = 0.10

# ---------------------------------------------------------------------------
# The bootstrap's replay alone

PROBE = r"""
import json, os, sys, time
sys.path.insert(0, sys.argv[1])
import _dlbn_boot
sys.path.pop(0)
import torch
import torch.utils.data.dataloader as dlmod
from torch.utils.data import DataLoader, Dataset, IterableDataset

log = []
class Fake:
    def mark(self, kind, iter_id, arg): log.append(["mark", kind, iter_id, arg])
    def config(self, iter_id, text): log.append(["config", iter_id, text.decode()])

environ = json.loads(sys.argv[3])
_dlbn_boot.patch_dataloader_module(dlmod, api=Fake(), environ=environ)

fetched = []
class Items(Dataset):
    def __init__(self, n, fail_at=None): self.n, self.fail_at = n, fail_at
    def __len__(self): return self.n
    def __getitem__(self, i):
        if i == self.fail_at:
            raise ValueError("sample %d is broken" % i)
        fetched.append(i)
        return {"x": torch.full((2,), float(i)), "i": i}

class Stream(IterableDataset):
    def __iter__(self): return iter(range(6))

facts = {}
scenario = sys.argv[2]
if scenario == "cycle":
    loader = DataLoader(Items(20), batch_size=2)          # 10 batches per epoch
    epochs = []
    for _ in range(2):
        seen = []
        for batch in loader:
            seen.append(int(batch["x"][0][0]))
            batch["x"].mul_(100)                         # in-place, as x.div_(255)
            batch["extra"] = 1                           # structural change
        epochs.append(seen)
    facts["epochs"] = epochs
    facts["fetched"] = sorted(set(fetched))
elif scenario == "workers":
    loader = DataLoader(Items(40), batch_size=4, num_workers=2,
                        multiprocessing_context="fork")
    it = iter(loader)
    first = next(it)
    real = loader.__dict__["_dlbn_replay"]
    facts["real_iter_dropped"] = real.real_iter is None
    import multiprocessing
    deadline = time.monotonic() + 10
    while multiprocessing.active_children() and time.monotonic() < deadline:
        time.sleep(0.05)
    facts["children_after_fill"] = len(multiprocessing.active_children())
    rest = [int(b["x"][0][0]) for b in it]
    facts["epoch0"] = [int(first["x"][0][0])] + rest
    t0 = time.monotonic()
    facts["epoch1"] = [int(b["x"][0][0]) for b in loader]
    facts["epoch1_children"] = len(multiprocessing.active_children())
    facts["iter_type"] = type(iter(loader)).__name__
elif scenario == "short":
    facts["epochs"] = [[int(b["x"][0][0]) for b in DataLoader(Items(3), batch_size=1)]]
elif scenario == "nolen":
    facts["epochs"] = [[int(b[0]) for b in DataLoader(Stream(), batch_size=2)]]
elif scenario == "error":
    try:
        list(DataLoader(Items(8, fail_at=3), batch_size=2))
    except ValueError as exc:
        facts["error"] = str(exc)
elif scenario in ("trainval", "val_error"):
    val_fetched = []
    class Val(Dataset):
        def __len__(self): return 8
        def __getitem__(self, i):
            if scenario == "val_error" and i == 1:
                raise ValueError("val sample %d is broken" % i)
            val_fetched.append(i)
            return {"x": torch.full((2,), 100.0 + i)}
    train = DataLoader(Items(20), batch_size=2)
    val = DataLoader(Val(), batch_size=2)
    it = iter(train)
    next(it)
    facts["val_fetched_at_first_train_batch"] = sorted(val_fetched)
    for _ in it:
        pass
    before = len(val_fetched)
    try:
        facts["val_epoch"] = [int(b["x"][0][0]) for b in val]
    except ValueError as exc:
        facts["error"] = str(exc)
    facts["val_fetched_in_its_epoch"] = len(val_fetched) - before
elif scenario in ("wrapper", "wrapper_learned", "wrapper_two"):
    import types
    work = []
    class Prefetch:
        # timm's PrefetchLoader in miniature: works on each batch, one ahead
        def __init__(self, *loaders): self.loaders = loaders
        def __len__(self): return len(self.loaders[0])
        def __iter__(self):
            first = True
            for batches in zip(*self.loaders):
                work.append(1)
                following = batches[0]["x"] * 10 + 1
                if not first:
                    yield out
                first = False
                out = following
            yield out
    Prefetch.__module__ = "wrapmod"
    mod = types.ModuleType("wrapmod")
    mod.Prefetch = Prefetch
    sys.modules["wrapmod"] = mod
    _dlbn_boot.patch_module("wrapmod", mod)
    loaders = [DataLoader(Items(20), batch_size=2)]
    if scenario == "wrapper_two":
        loaders.append(DataLoader(Items(20), batch_size=2))
    wrapper = Prefetch(*loaders)
    epochs, work_per_epoch = [], []
    for _ in range(2):
        before = len(work)
        epochs.append([int(b[0][0]) for b in wrapper])
        work_per_epoch.append(len(work) - before)
    facts["epochs"] = epochs
    facts["work"] = work_per_epoch
    facts["fetched"] = sorted(set(fetched))
print(json.dumps({"facts": facts, "log": log}))
"""


def probe(scenario, replay="3", **more_env):
    for name in ("sitecustomize.py", "_dlbn_boot.py"):
        if not (BOOT_DIR / name).exists():
            pytest.fail("%s not built (make)" % (BOOT_DIR / name), pytrace=False)
    environ = {"DLBN_REPLAY": replay} if replay is not None else {}
    environ.update(more_env)
    proc = subprocess.run([PYTHON, "-c", PROBE, str(BOOT_DIR), scenario, json.dumps(environ)],
                          env=clean_env(), capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    result["stderr"] = proc.stderr
    return result


def marks(result):
    return [tuple(e[1:]) for e in result["log"] if e[0] == "mark"]


def configs(result):
    return [dict(kv.split("=", 1) for kv in e[2].split(";"))
            for e in result["log"] if e[0] == "config" and e[1] != 0]


def epoch_marks(iter_id, batches, epoch):
    seq = [(ITER, iter_id, epoch)]
    for index in range(batches):
        seq += [(BEGIN, iter_id, index), (END, iter_id, index)]
    return seq + [(BEGIN, iter_id, batches), (STOP, iter_id, batches)]


def test_replay_cycles_the_first_n_batches_for_the_epoch_length():
    result = probe("cycle", "3", DLBN_REPLAY_COPY="1")
    facts = result["facts"]
    # Batches 0, 2, 4 (first value of each) cycled; 10 steps per epoch as
    # len(loader); with a copy per step the loop's in-place changes never
    # reach the cache.
    assert facts["epochs"] == [[0, 2, 4] * 3 + [0]] * 2
    # Only the first 3 batches were ever loaded (6 samples), in both epochs.
    assert facts["fetched"] == list(range(6))
    assert marks(result) == epoch_marks(1, 10, 0) + epoch_marks(2, 10, 1)
    for config in configs(result):
        assert config["replay"] == "3" and config["num_workers"] == "0"


@pytest.mark.parametrize("copy", [None, "0"])
def test_replay_hands_out_the_cached_objects(copy):
    """By default (and DLBN_REPLAY_COPY=0), as LoaderEvaluator does: the
    loop's in-place change reaches the cache (batch 2 is seen x100 on its
    second visit) - DLBN_REPLAY_COPY=1's copy is what stops it."""
    env = {} if copy is None else {"DLBN_REPLAY_COPY": copy}
    epoch = probe("cycle", "3", **env)["facts"]["epochs"][0]
    assert epoch[:3] == [0, 2, 4] and epoch[4] == 200


def test_replay_spares_the_workers():
    facts = probe("workers", "2")["facts"]
    assert facts["real_iter_dropped"]
    assert facts["children_after_fill"] == 0, "workers still running after the cache fill"
    assert facts["epoch0"] == [0, 4] * 5 and facts["epoch1"] == [0, 4] * 5
    assert facts["epoch1_children"] == 0, "a later epoch started workers again"
    assert facts["iter_type"] == "ReplayIterator"


def test_replay_with_fewer_batches_than_n_cycles_them_all():
    assert probe("short", "8")["facts"]["epochs"] == [[0, 1, 2]]


def test_loader_without_len_loads_normally_and_says_so():
    result = probe("nolen", "2")
    assert result["facts"]["epochs"] == [[0, 2, 4]]
    assert "no len()" in result["stderr"]
    assert configs(result)[0]["replay"] == "0"


def test_loader_errors_during_the_fill_reach_the_loop():
    result = probe("error", "4")
    assert result["facts"]["error"] == "sample 3 is broken"
    assert (STOP, 1, -1) in marks(result)


def test_replay_caches_a_validation_loader_before_the_loop():
    """A loader made before the loop and first iterated after the first
    training epoch (validation) fills its cache at the first fill of the
    process, as the reference Replay caches every loader before the loop:
    its epoch inside the replayed steps loads nothing.  No marks for that
    fill: the val loader's only epoch is the one the loop iterates."""
    result = probe("trainval", "3")
    facts = result["facts"]
    assert facts["val_fetched_at_first_train_batch"] == list(range(6)), facts
    assert facts["val_epoch"] == [100, 102, 104, 100], facts
    assert facts["val_fetched_in_its_epoch"] == 0, facts
    iters = [m for m in marks(result) if m[0] == ITER]
    assert iters == [(ITER, 1, 0), (ITER, 2, 0)], iters


def test_a_validation_loader_that_fails_its_early_fill_fails_in_the_loop():
    """An error of the early fill is not the program's: said on stderr, and
    the loader fills at its own first iter(), where the error reaches the
    loop as in a real run."""
    result = probe("val_error", "3")
    assert result["facts"]["error"] == "val sample 1 is broken", result["facts"]
    assert "could not be cached before the loop (ValueError)" in result["stderr"]


def test_replay_caches_what_a_named_wrapper_iterable_yields():
    """A wrapper iterable around the DataLoader (timm's PrefetchLoader;
    here one named with DLBN_WRAPPER): its first N items are taken before
    the loop, unmarked, and every epoch hands them out cycled, the
    wrapper's work done only for them; the marks are the DataLoader's own
    epochs, one fetch per item, as in a real run."""
    result = probe("wrapper", "3", DLBN_WRAPPER="wrapmod:Prefetch")
    facts = result["facts"]
    assert facts["epochs"] == [[1, 21, 41] * 3 + [1]] * 2, facts
    assert facts["work"] == [4, 0], facts      # the fill reads one ahead
    assert facts["fetched"] == list(range(6)), facts
    assert marks(result) == epoch_marks(1, 10, 0) + epoch_marks(2, 10, 1)
    assert {c.get("wrapper_replay") for c in configs(result)} == {"wrapmod:Prefetch"}
    assert "dlbn:" not in result["stderr"], result["stderr"]


def test_replay_finds_a_wrapper_iterable_at_run_time():
    """Unnamed, the wrapper is found at its first fetch (a generator
    __iter__ fetching from the DataLoader): that epoch keeps its work, said
    on stderr; from the next iter() on what it yields is replayed."""
    result = probe("wrapper_learned", "3")
    facts = result["facts"]
    assert facts["epochs"][0] == [1, 21, 41, 1, 21, 41, 1, 21, 41, 1], facts
    assert facts["epochs"][1] == facts["epochs"][0], facts
    assert facts["work"] == [10, 4], facts     # the second epoch's: its fill
    assert "wrapmod:Prefetch, a wrapper around the DataLoader" in result["stderr"]
    assert "dlbn-run --wrapper wrapmod:Prefetch" in result["stderr"]


def test_a_wrapper_of_two_dataloaders_is_not_replayed_itself():
    result = probe("wrapper_two", "3", DLBN_WRAPPER="wrapmod:Prefetch")
    facts = result["facts"]
    assert facts["work"] == [4 + 10, 10], facts  # the fill that found two, then as is
    assert ("wrapmod:Prefetch is not replayed itself, it iterated 2 DataLoaders, not one"
            in result["stderr"]), result["stderr"]


@pytest.mark.parametrize("value", ["0", None])
def test_replay_off_leaves_the_loader_alone(value):
    result = probe("cycle", value)
    assert result["facts"]["epochs"] == [list(range(0, 20, 2))] * 2
    assert "replay" not in configs(result)[0]


def test_bad_replay_value_is_refused_with_a_message():
    result = probe("cycle", "many")
    assert result["facts"]["epochs"] == [list(range(0, 20, 2))] * 2
    assert "DLBN_REPLAY='many'" in result["stderr"]


# ---------------------------------------------------------------------------
# dlbn-run --replay on a real input-bound run


def dlbn_run(directory, name, options, workload_args):
    """workload.py under scripts/dlbn-run; returns a Run (trace + record)."""
    require_binaries(analyzer=True)
    trace = directory / (name + ".bin")
    json_out = directory / (name + ".json")
    cmd = ([str(RUN)] + options + ["-o", str(trace), "--", PYTHON, str(WORKLOAD),
                                   "--json-out", str(json_out)] + workload_args)
    t0 = time.monotonic()
    proc = subprocess.run(cmd, env=clean_env(), cwd=str(directory), capture_output=True,
                          text=True, timeout=120)
    elapsed = time.monotonic() - t0
    assert proc.returncode == 0, "%s exited %d\n%s" % (name, proc.returncode, proc.stderr)
    assert trace.exists(), proc.stderr
    return Run(directory, name, proc, trace, json.loads(json_out.read_text()), elapsed)


def analyzer_has_baseline():
    help_text = subprocess.run([str(ANALYZE), "--help"], capture_output=True, text=True).stdout
    return "--baseline" in help_text


def baseline(real, replay):
    """The "baseline" object for real vs replay (dlbn-analyze, else the
    test program around the same C function)."""
    if analyzer_has_baseline():
        proc = subprocess.run([str(ANALYZE), str(real.trace), "--baseline", str(replay.trace),
                               "--format", "json"], capture_output=True, text=True, timeout=60)
        assert proc.returncode == 0, proc.stderr
        return json.loads(proc.stdout)["baseline"]
    if not BASELINE_TOOL.exists():
        pytest.fail("%s not built (make %s)" % (BASELINE_TOOL, BASELINE_TOOL), pytrace=False)
    proc = subprocess.run([str(BASELINE_TOOL), str(real.trace), str(replay.trace)],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    print(proc.stdout)
    return json.loads(proc.stdout.splitlines()[0])


@pytest.fixture(scope="module")
def replay_runs(rundir):
    real = dlbn_run(rundir, "real", [], INPUT_BOUND + ["--mode", "real"])
    replay = dlbn_run(rundir, "replay", ["--replay", str(REPLAY_BATCHES)],
                      INPUT_BOUND + ["--mode", "real"])
    reference = run_workload(rundir, "reference", INPUT_BOUND + [
        "--mode", "replay", "--replay-batches", str(REPLAY_BATCHES)])
    return real, replay, reference


def test_replay_run_is_much_faster_with_the_same_steps(replay_runs):
    real, replay, _ = replay_runs
    assert replay.record["steps"] == real.record["steps"] == 64
    real_a, replay_a = real.analysis, replay.analysis
    assert replay_a["steps"]["total"] == real_a["steps"]["total"] == 64
    assert replay_a["config"] and real_a["config"]
    check_timing(real.record["window_s"] > 2.0 * replay.record["window_s"],
                 "real window %.3f s, replay %.3f s" % (real.record["window_s"],
                                                       replay.record["window_s"]),
                 real, replay)
    check_timing(replay_a["verdict"] == "NOT_DETECTED",
                 "the replay run still waits: %s" % replay.describe(), replay)


def test_measured_speedup_matches_the_reference_method(replay_runs):
    real, replay, reference = replay_runs
    result = baseline(real, replay)
    reference_speedup = measured_speedup(real, reference)
    print("baseline: measured %.3f (dlbn), reference %.3f, predicted %.3f, equivalent %s" % (
        result["measured_speedup"], reference_speedup, result["predicted_speedup"],
        result["equivalent"]))
    assert result["equivalent"], result["notes"]
    assert result["replay_batches"] == REPLAY_BATCHES
    assert result["steps"] == {"real": 64, "replay": 64}
    check_timing(abs(result["measured_speedup"] / reference_speedup - 1.0) <= TOLERANCE,
                 "dlbn measured %.3f vs the reference %.3f" % (
                     result["measured_speedup"], reference_speedup), real, replay, reference)
    # The measured figure sits next to the prediction it checks.
    assert result["predicted_speedup"] == pytest.approx(real.analysis["predicted_speedup"],
                                                        rel=1e-4)
    assert result["error_pct"] == pytest.approx(
        (result["predicted_speedup"] / result["measured_speedup"] - 1) * 100, abs=0.01)


def test_baseline_flags_a_run_that_was_not_replayed(replay_runs):
    real, _, _ = replay_runs
    result = baseline(real, real)
    assert not result["equivalent"]
    assert any("not a Replay run" in n for n in result["notes"]), result["notes"]


# ---------------------------------------------------------------------------
# dlbn-run --replay: the option itself

SHOW_ENV = ["sh", "-c", 'echo "replay=${DLBN_REPLAY:-unset} output=$DLBN_OUTPUT"']


def run_wrapper(args, cwd, env=None):
    return subprocess.run([str(RUN)] + args, cwd=str(cwd), env=clean_env(env),
                          capture_output=True, text=True, timeout=60)


def test_dlbn_run_replay_sets_the_count_and_a_replay_output_name(tmp_path):
    r = run_wrapper(["--replay", "8", "--"] + SHOW_ENV, tmp_path)
    assert r.returncode == 0, r.stderr
    assert "replay=8 output=dlbn-replay-%h-r%r-%p.bin" in r.stdout
    r = run_wrapper(["--replay=3", "-o", "mine-%p.bin", "--"] + SHOW_ENV, tmp_path)
    assert "replay=3 output=mine-%p.bin" in r.stdout


def test_dlbn_run_without_replay_runs_for_real(tmp_path):
    r = run_wrapper(["--"] + SHOW_ENV, tmp_path)
    assert "replay=unset output=dlbn-%h-r%r-%p.bin" in r.stdout
    # An inherited DLBN_REPLAY counts as --replay; 0 means off.
    r = run_wrapper(["--"] + SHOW_ENV, tmp_path, {"DLBN_REPLAY": "5"})
    assert "replay=5 output=dlbn-replay-" in r.stdout
    r = run_wrapper(["--"] + SHOW_ENV, tmp_path, {"DLBN_REPLAY": "0"})
    assert "replay=unset output=dlbn-%h" in r.stdout


@pytest.mark.parametrize("args", [["--replay", "0"], ["--replay", "x8"], ["--replay", "-1"],
                                  ["--replay=", ], ["--replay", "4", "--no-python"],
                                  ["--replay"], ["--wrapper", "m:C"],
                                  ["--replay", "4", "--wrapper", "m C"]])
def test_dlbn_run_replay_usage_errors_exit_2(tmp_path, args):
    r = run_wrapper(args + ["--", "true"], tmp_path)
    assert r.returncode == 2, (args, r.stdout, r.stderr)
    assert "replay" in r.stderr or "usage" in r.stderr or "MODULE:QUALNAME" in r.stderr


def test_dlbn_run_wrapper_sets_dlbn_wrapper(tmp_path):
    r = run_wrapper(["--replay", "4", "--wrapper", "a.b:C", "--wrapper=d:E.F", "--",
                     "sh", "-c", "echo wrapper=$DLBN_WRAPPER"], tmp_path)
    assert r.returncode == 0, r.stderr
    assert "wrapper=a.b:C,d:E.F" in r.stdout
