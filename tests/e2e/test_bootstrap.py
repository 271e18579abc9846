"""The Python bootstrap on its own (no libdlbn.so needed): the lazy import
hook, the exact mark sequence the analyzer relies on, the CONFIG text, and
that it is inert without the library.  The marker API is replaced by a fake
that logs (bootstrap_probe.py)."""

import json
import os
import subprocess
from pathlib import Path

import pytest

from e2e_common import BOOT_DIR, PYTHON, clean_env

PROBE = Path(__file__).resolve().parent / "bootstrap_probe.py"
BEGIN, END, STOP, ITER = 1, 2, 3, 4
STATEFUL_MODULE = "torchdata.stateful_dataloader.stateful_dataloader"


def probe(scenario, fake=True):
    for name in ("sitecustomize.py", "_dlbn_boot.py"):
        if not (BOOT_DIR / name).exists():
            pytest.fail("%s not built (make)" % (BOOT_DIR / name), pytrace=False)
    cmd = [PYTHON, str(PROBE), str(BOOT_DIR), scenario] + (["fake"] if fake else [])
    proc = subprocess.run(cmd, env=clean_env({"PYTHONPATH": str(BOOT_DIR)}),
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def iterator_configs(result):
    """The CONFIG records of iterators (iter_id 0 is the process-level note)."""
    return [e for e in result["log"] if e[0] == "config" and e[1] != 0]


def marks(result):
    return [tuple(entry[1:]) for entry in result["log"] if entry[0] == "mark"]


def epoch_marks(iter_id, batches, epoch=0):
    """The sequence one epoch must produce."""
    seq = [(ITER, iter_id, epoch)]
    for index in range(batches):
        seq += [(BEGIN, iter_id, index), (END, iter_id, index)]
    return seq + [(BEGIN, iter_id, batches), (STOP, iter_id, batches)]


def test_lazy_hook_and_path_hygiene():
    facts = probe("nw0")["facts"]
    assert facts["hook_installed"]
    assert not facts["boot_loaded_before_torch"], "torch-side half loaded at start-up"
    assert not facts["boot_dir_on_sys_path"], "dlbn's directory left on sys.path"
    assert facts["boot_loaded_after_torch"]
    # The hook stays only to see torchdata's StatefulDataLoader and nodes
    # modules and DALI's PyTorch plugin, and only where they are installed.
    import importlib.util
    expected = []
    if facts["torchdata_installed"]:
        expected += [STATEFUL_MODULE, "torchdata.nodes.base_node", "torchdata.nodes.loader",
                     "torchdata.nodes.map"]
    try:
        dali = importlib.util.find_spec("nvidia.dali") is not None
    except (ImportError, ValueError):
        dali = False
    if dali:
        expected.append("nvidia.dali.plugin.pytorch")
    if expected:
        assert facts["hook_pending"] == sorted(expected)
    else:
        assert not facts["hook_left_after_import"], "import hook not removed after firing"
    assert facts["iter_wrapped"]


def test_process_note_says_which_torch():
    """One CONFIG with iter_id 0 at patch time, before any iterator's."""
    log = probe("nw0")["log"]
    notes = [e for e in log if e[0] == "config" and e[1] == 0]
    assert len(notes) == 1 and log[0] == notes[0], log[:3]
    fields = dict(kv.split("=", 1) for kv in notes[0][2].split(";"))
    assert fields["bootstrap"] == "ok" and fields["torch"].split(".")[0] in ("1", "2"), fields


def test_inert_without_library():
    result = probe("persistent", fake=False)
    assert not result["facts"]["iter_wrapped"]
    assert result["facts"]["batches"] == [4, 4]


def test_single_process_marks():
    result = probe("nw0")
    assert marks(result) == epoch_marks(1, 3)


def test_persistent_workers_new_iter_id_each_epoch():
    result = probe("persistent")
    assert result["facts"]["batches"] == [4, 4]
    assert marks(result) == epoch_marks(1, 4, 0) + epoch_marks(2, 4, 1)
    configs = iterator_configs(result)
    assert [c[1] for c in configs] == [1, 2]
    # The reused iterator's workers are listed for every iter().
    workers = [dict(kv.split("=", 1) for kv in c[2].split(";"))["workers"] for c in configs]
    assert workers[0] == workers[1] and len(workers[0].split(",")) == 2, workers


def test_respawned_workers():
    result = probe("respawn")
    assert marks(result) == epoch_marks(1, 3, 0) + epoch_marks(2, 3, 1)


def test_exception_passes_through_and_closes_the_fetch():
    result = probe("error")
    assert result["facts"]["error"] == "sample 3 is broken"
    assert marks(result)[-2:] == [(BEGIN, 1, 1), (STOP, 1, -1)]


def test_iterator_made_without_dataloader_iter_is_adopted():
    result = probe("direct_iterator")
    assert marks(result) == epoch_marks(1, 2)
    announced = [e[0] for e in result["log"] if not (e[0] == "config" and e[1] == 0)]
    assert announced[:2] == ["mark", "config"]
    fields = dict(kv.split("=", 1) for kv in iterator_configs(result)[0][2].split(";"))
    # no loader known: no loader id or class; the sampler from the iterator
    assert "loader" not in fields and "loader_class" not in fields
    assert fields["sampler"] == "SequentialSampler"


def test_config_text():
    result = probe("config")
    configs = iterator_configs(result)
    assert len(configs) == 1
    fields = dict(item.split("=", 1) for item in configs[0][2].split(";"))
    # the process's CPU side: torch's intra-op pool always, the cgroup quota
    # only where one is set
    assert int(fields.pop("intraop_threads")) >= 1
    if "cpu_quota" in fields:
        assert float(fields.pop("cpu_quota")) > 0
    assert fields == {
        "num_workers": "1", "batch_size": "3", "prefetch_factor": "3",
        "pin_memory": "0", "persistent_workers": "1", "start_method": "spawn",
        "dataset_kind": "iterable", "drop_last": "1", "timeout": "0",
        "cpus": str(len(os.sched_getaffinity(0))),
        "loader": str(result["facts"]["loader_id"]), "loader_class": "DataLoader",
        # an IterableDataset's loader gets torch's placeholder sampler
        "sampler": "_InfiniteConstantSampler",
        "workers": ",".join(str(p) for p in result["facts"]["worker_pids"]),
    }
