"""Probe of the Python bootstrap without libdlbn.so (run by test_bootstrap.py).

Run with PYTHONPATH=build/dlbn-python (as the library would arrange) and
  bootstrap_probe.py BOOT_DIR SCENARIO [fake]
With "fake", the marker API is replaced before torch is imported by one that
logs the marks; the probe prints one JSON object: the marks and configs in
order, plus facts about the import hook.
"""

import json
import sys

boot_dir, scenario = sys.argv[1], sys.argv[2]
use_fake = len(sys.argv) > 3 and sys.argv[3] == "fake"
log = []
facts = {"boot_loaded_before_torch": "_dlbn_boot" in sys.modules,
         "boot_dir_on_sys_path": any(p.rstrip("/") == boot_dir.rstrip("/")
                                     for p in sys.path),
         "hook_installed": any(type(f).__name__ == "_DlbnDataLoaderHook"
                               for f in sys.meta_path)}


class FakeApi:
    def mark(self, kind, iter_id, arg):
        log.append(["mark", kind, iter_id, arg])

    def config(self, iter_id, text):
        log.append(["config", iter_id, text.decode()])


if use_fake:
    sys.path.insert(0, boot_dir)
    import _dlbn_boot
    sys.path.remove(boot_dir)
    _dlbn_boot._marks.load_marker_api = lambda: FakeApi()

import torch  # noqa: E402  (after the fake is in place, as in real life)
from torch.utils.data import DataLoader, Dataset, IterableDataset  # noqa: E402

hooks = [f for f in sys.meta_path if type(f).__name__ == "_DlbnDataLoaderHook"]
facts["hook_left_after_import"] = bool(hooks)
# what a hook left in place still answers for (torchdata's module, if installed)
facts["hook_pending"] = sorted(hooks[0].pending) if hooks else []
import importlib.util  # noqa: E402
facts["torchdata_installed"] = importlib.util.find_spec("torchdata") is not None
facts["iter_wrapped"] = hasattr(DataLoader.__iter__, "__wrapped__")
facts["boot_loaded_after_torch"] = "_dlbn_boot" in sys.modules


class Items(Dataset):
    def __init__(self, n, fail_at=None):
        self.n, self.fail_at = n, fail_at

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if i == self.fail_at:
            raise ValueError("sample %d is broken" % i)
        return torch.tensor([i])


class Stream(IterableDataset):
    def __iter__(self):
        return iter(torch.arange(6))


def main():
    if scenario == "persistent":
        loader = DataLoader(Items(8), batch_size=2, num_workers=2,
                            persistent_workers=True, multiprocessing_context="fork")
        facts["batches"] = [len(list(loader)) for _ in range(2)]
    elif scenario == "respawn":
        loader = DataLoader(Items(6), batch_size=2, num_workers=1)
        facts["batches"] = [len(list(loader)) for _ in range(2)]
    elif scenario == "nw0":
        facts["batches"] = [len(list(DataLoader(Items(5), batch_size=2)))]
    elif scenario == "error":
        try:
            list(DataLoader(Items(8, fail_at=3), batch_size=2))
        except ValueError as exc:
            facts["error"] = str(exc)
    elif scenario == "config":
        loader = DataLoader(Stream(), batch_size=3, num_workers=1, prefetch_factor=3,
                            persistent_workers=True, drop_last=True,
                            multiprocessing_context="spawn")
        it = iter(loader)
        facts["worker_pids"] = [w.pid for w in it._workers]
        facts["batches"] = [len(list(it))]
        facts["loader_id"] = id(loader)
    elif scenario == "direct_iterator":
        loader = DataLoader(Items(4), batch_size=2)
        facts["batches"] = [len(list(loader._get_iterator()))]
    print(json.dumps({"facts": facts, "log": log}))


if __name__ == "__main__":
    main()
