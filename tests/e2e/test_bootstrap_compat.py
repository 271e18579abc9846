"""The bootstrap's compatibility check, its exception transparency, the
CONFIG keys about workers and loaders, and the pipelines users run.

1. Unit level (in this process, no torch): patch_dataloader_module() and
   patch_stateful_module() of a fresh _dlbn_boot on fake dataloader modules
   shaped like torch's, intact or broken one way at a time: a broken one is
   left exactly as it was, the marker API gets the process-level note
   "bootstrap=incompatible;...;reason=..." and stderr one line.
2. Under the real preload: a script whose torch.utils.data.dataloader is
   broken on purpose as a future torch might ship it (a meta-path finder
   hands out the real module, then renames an attribute in the iterator's
   code, or turns __next__ into a non-function), run with and without dlbn:
   same stdout, stderr (less dlbn's lines) and exit status, tracebacks
   included; the trace holds the note and no mark, and dlbn-analyze uses
   the IPC view and gives the reason.  Intact, the same
   script's tracebacks (worker exception, StopIteration on an exhausted
   iterator, an uncaught loader error) are identical with and without dlbn.
3. torchdata's StatefulDataLoader, Lightning's Trainer.fit, timm's
   create_loader and webdataset's WebLoader (where installed: the 2.x
   environment) get FETCH marks for every batch and one CONFIG per iterator.
"""

import importlib.util
import itertools
import os
import subprocess
import sys
import types

import pytest

from e2e_common import (BOOT_DIR, LIB, PYTHON, RUN_TIMEOUT_S, analyze_ok, clean_env,
                        require_binaries)

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support",
                                "pylib"))
from dlbntrace import Trace  # noqa: E402

BEGIN, END, STOP, ITER = 1, 2, 3, 4
STATEFUL_MODULE = "torchdata.stateful_dataloader.stateful_dataloader"

# Breakages that leave the loader's behaviour as it was (the runs without
# dlbn must behave the same) but take away what the bootstrap relies on.
# Shared by the child scripts (as source) and the unit tests (exec'd here).
BREAKERS = r'''
import functools
import types


def _renamed(code, old, new):
    consts = tuple(_renamed(c, old, new) if hasattr(c, "co_names") else c
                   for c in code.co_consts)
    return code.replace(co_names=tuple(new if n == old else n for n in code.co_names),
                        co_consts=consts)


def rename_attr(classes, old, new):
    """As if the release had renamed attribute `old`: every method of
    `classes` uses `new` instead."""
    for cls in classes:
        for value in list(vars(cls).values()):
            if isinstance(value, types.FunctionType):
                value.__code__ = _renamed(value.__code__, old, new)


def not_a_function(cls, name):
    """cls.name stays callable but is no plain function any more."""
    setattr(cls, name, functools.partialmethod(cls.__dict__[name]))


def break_module(module, what):
    if what.startswith("stateful_"):
        if what == "stateful_next_not_function":
            not_a_function(module._StatefulBaseDataLoaderIter, "__next__")
        return
    iters = [module._BaseDataLoaderIter, module._SingleProcessDataLoaderIter,
             module._MultiProcessingDataLoaderIter]
    if what == "next_not_function":
        not_a_function(module._BaseDataLoaderIter, "__next__")
    elif what == "iter_not_function":
        not_a_function(module.DataLoader, "__iter__")
    elif what == "num_yielded_renamed":
        rename_attr(iters, "_num_yielded", "_batches_yielded")
    elif what == "workers_renamed":
        rename_attr(iters, "_workers", "_worker_processes")
    elif what == "subclass_next":
        base_next = module._BaseDataLoaderIter.__dict__["__next__"]
        module._MultiProcessingDataLoaderIter.__next__ = lambda self: base_next(self)
    elif what == "no_single_iter":
        del module._SingleProcessDataLoaderIter
    elif what == "dataset_kind":
        module._DatasetKind.Iterable, module._DatasetKind.Map = 5, 4
    else:
        raise ValueError(what)


class _BreakingLoader:
    def __init__(self, loader, what):
        self.loader, self.what = loader, what

    def create_module(self, spec):
        return self.loader.create_module(spec)

    def exec_module(self, module):
        self.loader.exec_module(module)
        break_module(module, self.what)


class _Breaker:
    """A meta-path finder that hands out the real module `name`, broken on
    purpose right after it executed."""

    def __init__(self, name, what):
        self.name, self.what = name, what

    def find_spec(self, fullname, path=None, target=None):
        if fullname != self.name:
            return None
        import importlib.machinery
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is not None:
            spec.loader = _BreakingLoader(spec.loader, self.what)
        return spec


def install_breaker(name, what):
    """Right behind dlbn's import hook when there is one: dlbn then patches
    the broken module, as it would a future release."""
    import sys
    at = [i for i, f in enumerate(sys.meta_path) if type(f).__name__ == "_DlbnDataLoaderHook"]
    sys.meta_path.insert(at[0] + 1 if at else 0, _Breaker(name, what))
'''

breakers = types.ModuleType("compat_breakers")
exec(compile(BREAKERS, "<compat_breakers>", "exec"), breakers.__dict__)


# ---------------------------------------------------------------------------
# 1. Unit level: fake modules

_boot_count = itertools.count()


def fresh_boot():
    """A new _dlbn_boot with new modules of its own (their state is
    once-per-process): the earlier ones leave sys.modules, where the boot
    loads them from."""
    require_binaries(lib=False)
    path = BOOT_DIR / "_dlbn_boot.py"
    if not path.exists():
        pytest.fail("%s not built (make)" % path, pytrace=False)
    for name in [name for name in sys.modules if name.startswith("_dlbn_")]:
        del sys.modules[name]
    spec = importlib.util.spec_from_file_location("_dlbn_boot_t%d" % next(_boot_count), path)
    boot = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(boot)
    return boot


class Recorder:
    def __init__(self):
        self.log = []

    def mark(self, kind, iter_id, arg):
        self.log.append(("mark", kind, iter_id, arg))

    def config(self, iter_id, text):
        self.log.append(("config", iter_id, text.decode()))

    def notes(self):
        return [dict(kv.split("=", 1) for kv in e[2].split(";"))
                for e in self.log if e[0] == "config" and e[1] == 0]

    def marks(self):
        return [e[1:] for e in self.log if e[0] == "mark"]


class FakeProcess:
    def __init__(self, pid):
        self.pid = pid


class FakeSampler:
    pass


def fake_dataloader_module():
    """A module shaped like torch.utils.data.dataloader where it matters to
    the bootstrap (the loader yields slices of a list)."""
    m = types.ModuleType("fake_dataloader")

    class _DatasetKind:
        Map = 0
        Iterable = 1

    class DataLoader:
        def __init__(self, data, batch_size=2, num_workers=0, workers=2):
            self.dataset = data
            self.num_workers = num_workers
            self.batch_size = batch_size
            self.batch_sampler = None
            self.sampler = FakeSampler()
            self.prefetch_factor = None
            self.pin_memory = False
            self.persistent_workers = False
            self.multiprocessing_context = None
            self._dataset_kind = _DatasetKind.Map
            self.drop_last = False
            self.timeout = 0
            self.fake_workers = workers

        def __iter__(self):
            if self.num_workers == 0:
                return m._SingleProcessDataLoaderIter(self)
            return m._MultiProcessingDataLoaderIter(self)

        def __len__(self):
            return (len(self.dataset) + self.batch_size - 1) // self.batch_size

    class _BaseDataLoaderIter:
        def __init__(self, loader):
            self._loader = loader
            self._num_yielded = 0
            self._pin_memory = loader.pin_memory
            self._index_sampler = loader.sampler
            self._dataset_kind = loader._dataset_kind
            self._num_workers = loader.num_workers
            self._drop_last = loader.drop_last
            self._timeout = loader.timeout
            self._persistent_workers = loader.persistent_workers
            self._prefetch_factor = loader.prefetch_factor

        def __iter__(self):
            return self

        def __next__(self):
            size = self._loader.batch_size
            batch = self._loader.dataset[self._num_yielded * size:][:size]
            if not batch:
                raise StopIteration
            if batch[0] is None:
                raise ValueError("a broken sample")
            self._num_yielded += 1
            return batch

    class _SingleProcessDataLoaderIter(_BaseDataLoaderIter):
        pass

    class _MultiProcessingDataLoaderIter(_BaseDataLoaderIter):
        def __init__(self, loader):
            super().__init__(loader)
            self._workers = [FakeProcess(1000 + k) for k in range(loader.fake_workers)]

    for cls in (_DatasetKind, DataLoader, _BaseDataLoaderIter,
                _SingleProcessDataLoaderIter, _MultiProcessingDataLoaderIter):
        setattr(m, cls.__name__, cls)
    return m


def fake_stateful_module(torch_module):
    """torchdata's stateful_dataloader module, where it matters."""
    m = types.ModuleType("fake_stateful")

    class StatefulDataLoader(torch_module.DataLoader):
        def __iter__(self):  # does not call DataLoader.__iter__
            if self.num_workers == 0:
                return m._StatefulSingleProcessDataLoaderIter(self)
            return m._StatefulMultiProcessingDataLoaderIter(self)

    class _StatefulBaseDataLoaderIter(torch_module._BaseDataLoaderIter):
        def __next__(self):
            return super().__next__()

    class _StatefulSingleProcessDataLoaderIter(_StatefulBaseDataLoaderIter):
        pass

    class _StatefulMultiProcessingDataLoaderIter(_StatefulBaseDataLoaderIter):
        def __init__(self, loader):
            super().__init__(loader)
            self._workers = [FakeProcess(2000)]

    for cls in (StatefulDataLoader, _StatefulBaseDataLoaderIter,
                _StatefulSingleProcessDataLoaderIter, _StatefulMultiProcessingDataLoaderIter):
        setattr(m, cls.__name__, cls)
    return m


def class_dicts(module):
    return {name: dict(vars(cls)) for name, cls in vars(module).items()
            if isinstance(cls, type)}


def test_intact_fake_is_patched():
    boot, api, m = fresh_boot(), Recorder(), fake_dataloader_module()
    boot.patch_dataloader_module(m, api=api, environ={})
    assert hasattr(m.DataLoader.__iter__, "__wrapped__")
    assert hasattr(m._BaseDataLoaderIter.__next__, "__wrapped__")
    assert api.notes() == [{"bootstrap": "ok", "torch": api.notes()[0]["torch"]}]
    assert [b for b in m.DataLoader(list(range(5)))] == [[0, 1], [2, 3], [4]]
    assert api.marks() == [(ITER, 1, 0), (BEGIN, 1, 0), (END, 1, 0), (BEGIN, 1, 1), (END, 1, 1),
                           (BEGIN, 1, 2), (END, 1, 2), (BEGIN, 1, 3), (STOP, 1, 3)]


def test_config_workers_sampler_and_loader_class():
    boot, api, m = fresh_boot(), Recorder(), fake_dataloader_module()
    boot.patch_dataloader_module(m, api=api, environ={})
    loader = m.DataLoader(list(range(4)), num_workers=2)
    list(loader)
    text = [e[2] for e in api.log if e[0] == "config" and e[1] == 1][0]
    fields = dict(kv.split("=", 1) for kv in text.split(";"))
    assert fields["workers"] == "1000,1001"
    assert fields["sampler"] == "FakeSampler" and fields["loader_class"] == "DataLoader"
    assert fields["loader"] == str(id(loader))
    # num_workers=0: no workers key
    list(m.DataLoader([1]))
    text = [e[2] for e in api.log if e[0] == "config" and e[1] == 2][0]
    assert ";workers=" not in text


def test_sampler_name_looks_inside_batch_samplers():
    boot = fresh_boot()
    wrap = lambda name, inner=None: type(name, (), {"sampler": inner})()  # noqa: E731
    plain = lambda name: type(name, (), {})()  # noqa: E731
    ns = types.SimpleNamespace
    cases = [
        # torch's BatchSampler: the loader's sampler
        (ns(sampler=plain("RandomSampler"), batch_sampler=wrap("BatchSampler")), "RandomSampler"),
        # batch_size=None: no batch sampler
        (ns(sampler=plain("DistributedSampler"), batch_sampler=None), "DistributedSampler"),
        # a user's batch sampler: loader.sampler is torch's placeholder
        (ns(sampler=plain("SequentialSampler"), batch_sampler=plain("BucketSampler")),
         "BucketSampler"),
        (ns(sampler=plain("SequentialSampler"),
            batch_sampler=wrap("GroupedBatchSampler", plain("RandomSampler"))), "RandomSampler"),
        # timm's MultiEpochsDataLoader: _RepeatSampler(BatchSampler(sampler))
        (ns(sampler=plain("SequentialSampler"), batch_sampler=wrap(
            "_RepeatSampler", wrap("BatchSampler", plain("RandomSampler")))), "RandomSampler"),
    ]
    for loader, expect in cases:
        assert boot._config.sampler_name(loader, None) == expect, (loader, expect)
    it = ns(_index_sampler=wrap("BatchSampler", plain("RandomSampler")))
    assert boot._config.sampler_name(None, it) == "RandomSampler"


def test_config_stays_under_500_bytes_with_many_workers():
    boot, api, m = fresh_boot(), Recorder(), fake_dataloader_module()
    boot.patch_dataloader_module(m, api=api, environ={})
    loader = m.DataLoader(list(range(4)), num_workers=100, workers=100)
    it = iter(loader)
    for k, worker in enumerate(it._workers):
        worker.pid = 4000000 + k     # 7-digit pids, as on big hosts
    text = boot._config.config_text(loader, it)
    assert len(text) < 500, len(text)
    pids = dict(kv.split(b"=", 1) for kv in text.split(b";"))[b"workers"].split(b",")
    assert 20 < len(pids) <= 64 and pids[0] == b"4000000"
    # a short list stays whole, whatever the other keys
    for worker in it._workers:
        worker.pid = 7
    text = boot._config.config_text(loader, it)
    pids = dict(kv.split(b"=", 1) for kv in text.split(b";"))[b"workers"].split(b",")
    assert len(pids) == 64 and len(text) < 500


@pytest.mark.parametrize("what,reason", [
    ("next_not_function", "_BaseDataLoaderIter.__next__ is a partialmethod not a function"),
    ("iter_not_function", "DataLoader.__iter__ is a partialmethod not a function"),
    ("num_yielded_renamed", "_BaseDataLoaderIter.__next__ does not count _num_yielded"),
    ("workers_renamed", "iterator __init__ sets no _workers"),
    ("subclass_next", "_MultiProcessingDataLoaderIter overrides __next__"),
    ("no_single_iter", "no class _SingleProcessDataLoaderIter"),
    ("dataset_kind", "_DatasetKind differs"),
])
def test_broken_fake_is_left_alone(what, reason, capsys):
    boot, api, m = fresh_boot(), Recorder(), fake_dataloader_module()
    breakers.break_module(m, what)
    before = class_dicts(m)
    boot.patch_dataloader_module(m, api=api, environ={"DLBN_REPLAY": "2"})
    assert class_dicts(m) == before, "a class of an incompatible module was changed"
    note, = api.notes()
    assert note["bootstrap"] == "incompatible" and note["reason"] == reason, note
    assert set(note) == {"bootstrap", "torch", "reason"}
    line, = capsys.readouterr().err.splitlines()
    assert line.startswith("dlbn: ") and reason in line and "DLBN_REPLAY is off" in line
    if what != "no_single_iter":
        assert list(m.DataLoader(list(range(3)), num_workers=1)) == [[0, 1], [2]]
    assert api.marks() == []
    assert boot._common.replay is None


@pytest.mark.parametrize("what", ["slots", "missing_loader_attr", "module_raises"])
def test_other_mismatches(what, capsys):
    boot, api, m = fresh_boot(), Recorder(), fake_dataloader_module()
    if what == "slots":
        base = m._BaseDataLoaderIter
        slotted = type("_BaseDataLoaderIter", (), dict(
            {k: v for k, v in vars(base).items() if k not in ("__dict__", "__weakref__")},
            __slots__=("_loader",)))
        m._BaseDataLoaderIter = slotted
        m._SingleProcessDataLoaderIter = type("_SingleProcessDataLoaderIter", (slotted,),
                                              {"__slots__": ()})
        expect = "_BaseDataLoaderIter has no instance __dict__"
    elif what == "missing_loader_attr":
        breakers.rename_attr([m.DataLoader], "prefetch_factor", "prefetch_depth")
        expect = "DataLoader.__init__ sets no prefetch_factor"
    else:
        class Strange(types.ModuleType):
            def __getattr__(self, name):
                raise RuntimeError("strange")
        m = Strange("strange")
        expect = "check failed with RuntimeError"
    boot.patch_dataloader_module(m, api=api, environ={"DLBN_LOG": "quiet"})
    note, = api.notes()
    assert note["bootstrap"] == "incompatible" and note["reason"] == expect, note
    assert capsys.readouterr().err == "", "DLBN_LOG=quiet printed"


def test_no_note_and_no_message_when_the_recorder_is_off(capsys):
    """No library (api None) and no replay: nothing to record, nothing said."""
    boot, m = fresh_boot(), fake_dataloader_module()
    breakers.break_module(m, "next_not_function")
    boot._marks.load_marker_api = lambda: None
    boot.patch_dataloader_module(m, environ={})
    assert capsys.readouterr().err == ""
    assert boot._patch.status == "off"


def test_wrappers_keep_the_traceback():
    """An exception through the wrappers has no frame of the bootstrap (before
    Python 3.11 through PyErr_SetExcInfo: a bare raise there re-raises the
    traceback saved when the handler was entered)."""
    import traceback
    boot, api, m = fresh_boot(), Recorder(), fake_dataloader_module()
    boot.patch_dataloader_module(m, api=api, environ={})
    for data in ([None, 1], [1, 2]):
        it = iter(m.DataLoader(data))
        if data[0] is not None:
            list(it)
        try:
            next(it)
        except (ValueError, StopIteration) as exc:
            files = [f.filename for f in traceback.extract_tb(exc.__traceback__)]
        assert files and not any("_dlbn_" in f for f in files), files
        assert files[-1] == m._BaseDataLoaderIter.__next__.__wrapped__.__code__.co_filename
    assert api.marks()[-1] == (STOP, 2, 1)


def test_stateful_loader_patched_like_dataloader():
    boot, api, m = fresh_boot(), Recorder(), fake_dataloader_module()
    boot.patch_dataloader_module(m, api=api, environ={})
    sm = fake_stateful_module(m)
    boot._patch.patch_stateful_module(sm)
    assert hasattr(sm.StatefulDataLoader.__iter__, "__wrapped__")
    loader = sm.StatefulDataLoader(list(range(4)), num_workers=1)
    for _ in range(2):
        assert list(loader) == [[0, 1], [2, 3]]
    configs = [dict(kv.split("=", 1) for kv in e[2].split(";"))
               for e in api.log if e[0] == "config" and e[1] != 0]
    assert [c["loader_class"] for c in configs] == ["StatefulDataLoader"] * 2
    assert [c["workers"] for c in configs] == ["2000"] * 2
    assert [mk for mk in api.marks() if mk[0] == ITER] == [(ITER, 1, 0), (ITER, 2, 1)]
    assert api.notes()[1]["stateful_dataloader"] == "ok"


def test_broken_stateful_loader_is_left_alone(capsys):
    boot, api, m = fresh_boot(), Recorder(), fake_dataloader_module()
    boot.patch_dataloader_module(m, api=api, environ={})
    sm = fake_stateful_module(m)
    breakers.break_module(sm, "stateful_next_not_function")
    before = class_dicts(sm)
    boot._patch.patch_stateful_module(sm)
    assert class_dicts(sm) == before
    note = api.notes()[1]
    assert note["stateful_dataloader"] == "incompatible"
    assert "partialmethod" in note["stateful_reason"], note
    assert "StatefulDataLoader" in capsys.readouterr().err
    # Its iterators run torch's wrapped __next__ (through super()) but
    # make no marks; a plain DataLoader still does.
    assert list(sm.StatefulDataLoader(list(range(4)))) == [[0, 1], [2, 3]]
    assert api.marks() == []
    list(m.DataLoader([1]))
    assert api.marks()[0] == (ITER, 1, 0)


def test_stateful_loader_needs_torch_patched():
    boot, api, m = fresh_boot(), Recorder(), fake_dataloader_module()
    breakers.break_module(m, "next_not_function")
    boot.patch_dataloader_module(m, api=api, environ={"DLBN_LOG": "quiet"})
    sm = fake_stateful_module(m)
    before = class_dicts(sm)
    boot._patch.patch_stateful_module(sm)
    assert class_dicts(sm) == before and len(api.notes()) == 1


# ---------------------------------------------------------------------------
# 2. Under the preload: a broken torch, and tracebacks

SCRIPT = BREAKERS + r'''
import os
import sys
import traceback

BREAK = os.environ.get("COMPAT_BREAK", "")
if BREAK:
    install_breaker("torch.utils.data.dataloader", BREAK)

import torch
from torch.utils.data import DataLoader, Dataset


class Items(Dataset):
    def __init__(self, n, fail_at=None):
        self.n, self.fail_at = n, fail_at

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if i == self.fail_at:
            raise ValueError("sample %d is broken" % i)
        return torch.tensor([i])


def main():
    print("pid=%d" % os.getpid())
    for workers in (0, 1):
        loader = DataLoader(Items(6), batch_size=2, num_workers=workers,
                            persistent_workers=workers > 0)
        for epoch in range(2):
            print(workers, epoch, [int(b.sum()) for b in loader])
    # Errors the loop catches, as traceback.format_exc() prints them.  One
    # worker: its results come in order, so torch takes the same path
    # through _next_data every time.
    for workers in (0, 1):
        try:
            for _ in DataLoader(Items(6, fail_at=3), batch_size=2, num_workers=workers):
                pass
        except ValueError:
            print(traceback.format_exc())
    it = iter(DataLoader(Items(4), batch_size=2))
    list(it)
    try:
        next(it)
    except StopIteration:
        print(traceback.format_exc())
    # And one it does not catch: traceback on stderr, exit status 1.
    for _ in DataLoader(Items(4, fail_at=1), batch_size=2):
        pass


main()
'''


def run_script(directory, name, preload, env=None, script=SCRIPT):
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "compat_script.py"
    if not path.exists() or path.read_text() != script:
        path.write_text(script)
    trace = directory / (name + ".dlbn")
    extra = dict(env or {})
    if preload:
        require_binaries()
        extra.update({"LD_PRELOAD": str(LIB), "DLBN_OUTPUT": str(trace)})
    proc = subprocess.run([PYTHON, str(path)], env=clean_env(extra), cwd=str(directory),
                          capture_output=True, text=True, timeout=RUN_TIMEOUT_S)
    lines = proc.stdout.splitlines()
    pid = int(lines[0].split("=")[1]) if lines and lines[0].startswith("pid=") else None
    return types.SimpleNamespace(
        proc=proc, rc=proc.returncode, pid=pid, trace=trace if preload else None,
        stdout="\n".join(lines[1:]),
        # dlbn's own lines apart, stderr must be what it is without dlbn
        stderr=[ln for ln in proc.stderr.splitlines() if not ln.startswith("dlbn: ")],
        dlbn_lines=[ln for ln in proc.stderr.splitlines() if ln.startswith("dlbn: ")])


def same_behaviour(got, ref):
    assert got.rc == ref.rc, (got.rc, ref.rc, got.proc.stderr[-3000:])
    assert got.stdout == ref.stdout
    assert got.stderr == ref.stderr


def configs_of(run):
    trace = Trace(run.trace)
    return [(c["iter_id"], dict(kv.split("=", 1) for kv in c["text"].split(";")))
            for c in trace.records_of_pid(run.pid, "CONFIG")]


@pytest.fixture(scope="module")
def plain(rundir):
    cache = {}

    def get(what):
        if what not in cache:
            env = {"COMPAT_BREAK": what} if what else None
            cache[what] = run_script(rundir, "plain_" + (what or "intact"), False, env)
            assert cache[what].rc == 1 and "sample 1 is broken" in cache[what].stderr[-1], \
                cache[what].proc.stderr[-3000:]
        return cache[what]
    return get


def test_intact_torch_keeps_output_and_tracebacks(rundir, plain):
    ref = plain(None)
    run = run_script(rundir, "dlbn_intact", True)
    same_behaviour(run, ref)
    assert run.dlbn_lines == []
    # The tracebacks the script printed: worker exception, single-process
    # exception, StopIteration, and the uncaught one - none shows dlbn.
    assert run.stdout.count("\nTraceback (most recent call last)") == 3
    assert "_dlbn_" not in run.stdout and "_dlbn_" not in run.proc.stderr
    configs = configs_of(run)
    assert configs[0][0] == 0 and configs[0][1]["bootstrap"] == "ok", configs[0]
    assert configs[0][1]["torch"] == run_torch_version()
    # The persistent one-worker loader: its CONFIG lists its worker in both
    # epochs (one iterator object reused), and says what the loader is.
    persistent = [c for i, c in configs if c.get("persistent_workers") == "1"]
    assert len(persistent) == 2, configs
    assert persistent[0]["workers"] == persistent[1]["workers"]
    assert persistent[0]["workers"].isdigit()
    assert all(c["loader_class"] == "DataLoader" and c["sampler"] == "SequentialSampler"
               for _, c in configs[1:])
    assert all("workers" not in c for _, c in configs[1:] if c["num_workers"] == "0")
    marks = Trace(run.trace).records_of_pid(run.pid, "MARK")
    # 2 loaders x 2 epochs x 3 batches, 1 before each caught error, 2 before
    # the StopIteration, none before the uncaught error
    assert sum(1 for m in marks if m["kind"] == END) == 12 + 2 + 2 + 0, marks


_torch_version = []


def run_torch_version():
    if not _torch_version:
        out = subprocess.run([PYTHON, "-c", "import torch; print(torch.__version__)"],
                             env=clean_env(), capture_output=True, text=True, timeout=120)
        _torch_version.append(out.stdout.strip())
    return _torch_version[0]


@pytest.mark.parametrize("what,env,reason", [
    ("next_not_function", {}, "_BaseDataLoaderIter.__next__ is a partialmethod not a function"),
    ("num_yielded_renamed", {"DLBN_LOG": "quiet"},
     "_BaseDataLoaderIter.__next__ does not count _num_yielded"),
    ("workers_renamed", {"DLBN_LOG": "quiet", "DLBN_REPLAY": "2"},
     "iterator __init__ sets no _workers"),
])
def test_incompatible_torch_is_left_alone(rundir, plain, what, env, reason):
    ref = plain(what)
    run = run_script(rundir, "dlbn_" + what, True, dict(env, COMPAT_BREAK=what))
    same_behaviour(run, ref)
    if env.get("DLBN_REPLAY"):
        # replay asked for and not done: said even with DLBN_LOG=quiet
        assert len(run.dlbn_lines) == 1 and "DLBN_REPLAY is off" in run.dlbn_lines[0]
    elif env.get("DLBN_LOG") == "quiet":
        assert run.dlbn_lines == []
    else:
        assert len(run.dlbn_lines) == 1 and reason in run.dlbn_lines[0], run.dlbn_lines
    trace = Trace(run.trace)
    assert list(trace.records("MARK")) == [], "marks from a loader left alone"
    configs = [c for c in trace.records("CONFIG")]
    assert [(c["pid"], c["iter_id"]) for c in configs] == [(run.pid, 0)], configs
    note = dict(kv.split("=", 1) for kv in configs[0]["text"].split(";"))
    assert note == {"bootstrap": "incompatible", "torch": run_torch_version(),
                    "reason": reason}
    # The analyzer falls back to the IPC view and passes the reason on.
    analysis = analyze_ok(run.trace)
    assert analysis["view"] == "ipc", analysis["reasons"]
    assert any(reason in r for r in analysis["reasons"]), analysis["reasons"]


# ---------------------------------------------------------------------------
# 3. torchdata's StatefulDataLoader and the pipelines (2.x environment)

def installed(module):
    try:
        return importlib.util.find_spec(module) is not None
    except ImportError:  # a parent package missing
        return False


def needs(*modules):
    """The children run this interpreter: what it finds, they find."""
    missing = [m for m in modules if not installed(m)]
    return pytest.mark.skipif(bool(missing), reason="not installed here: %s" % ", ".join(missing))


STATEFUL_SCRIPT = BREAKERS + r'''
import os
import sys
import traceback

BREAK = os.environ.get("COMPAT_BREAK", "")
if BREAK:
    install_breaker("torchdata.stateful_dataloader.stateful_dataloader", BREAK)
if os.environ.get("COMPAT_TORCHDATA_FIRST"):
    from torchdata.stateful_dataloader import StatefulDataLoader
import torch
from torch.utils.data import DataLoader, Dataset
from torchdata.stateful_dataloader import StatefulDataLoader


class Items(Dataset):
    def __init__(self, n, fail_at=None):
        self.n, self.fail_at = n, fail_at

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if i == self.fail_at:
            raise ValueError("sample %d is broken" % i)
        return torch.tensor([i])


print("pid=%d" % os.getpid())
for workers in (0, 2):
    loader = StatefulDataLoader(Items(8), batch_size=2, num_workers=workers,
                                persistent_workers=workers > 0)
    print("loader", workers, id(loader))
    for epoch in range(2):
        print(workers, epoch, [b.flatten().tolist() for b in loader])
plain = DataLoader(Items(4), batch_size=2)
print("loader plain", id(plain))
print("plain", [b.flatten().tolist() for b in plain])
try:
    for _ in StatefulDataLoader(Items(6, fail_at=3), batch_size=2, num_workers=1):
        pass
except ValueError:
    print(traceback.format_exc())
'''


def loader_ids(run):
    return {ln.split()[1]: int(ln.split()[2]) for ln in run.stdout.splitlines()
            if ln.startswith("loader ")}


@pytest.fixture(scope="module")
def stateful_plain(rundir):
    run = run_script(rundir, "stateful_plain", False, script=STATEFUL_SCRIPT)
    assert run.rc == 0, run.proc.stderr[-3000:]
    return run


def fetches_per_iterator(run):
    marks = Trace(run.trace).records_of_pid(run.pid, "MARK")
    ends = {}
    for m in marks:
        if m["kind"] == END:
            ends[m["iter_id"]] = ends.get(m["iter_id"], 0) + 1
    return marks, ends


def strip_ids(stdout):
    return "\n".join(ln for ln in stdout.splitlines() if not ln.startswith("loader "))


@needs("torchdata.stateful_dataloader")
@pytest.mark.parametrize("torchdata_first", [False, True])
def test_stateful_dataloader(rundir, stateful_plain, torchdata_first):
    env = {"COMPAT_TORCHDATA_FIRST": "1"} if torchdata_first else None
    run = run_script(rundir, "stateful%s" % ("_first" if torchdata_first else ""), True,
                     env, script=STATEFUL_SCRIPT)
    assert run.rc == 0, run.proc.stderr[-3000:]
    assert strip_ids(run.stdout) == strip_ids(stateful_plain.stdout)
    assert run.stderr == stateful_plain.stderr and run.dlbn_lines == []
    assert "_dlbn_" not in run.stdout
    ids = loader_ids(run)
    configs = configs_of(run)
    notes = [c for i, c in configs if i == 0]
    assert notes[0]["bootstrap"] == "ok" and notes[1]["stateful_dataloader"] == "ok", notes
    by_loader = {}
    for iter_id, c in configs:
        if iter_id:
            by_loader.setdefault(int(c["loader"]), []).append((iter_id, c))
    # One CONFIG per iter(): two epochs each, a new iter_id every time, even
    # for the persistent workers' reused iterator; its workers listed twice.
    for key in ("0", "2"):
        entries = by_loader[ids[key]]
        assert len(entries) == 2 and entries[0][0] != entries[1][0], entries
        assert all(c["loader_class"] == "StatefulDataLoader" for _, c in entries)
        assert all(c["sampler"] == "SequentialSampler" for _, c in entries)
    w = [c["workers"] for _, c in by_loader[ids["2"]]]
    assert w[0] == w[1] and len(w[0].split(",")) == 2, w
    assert "workers" not in by_loader[ids["0"]][0][1]
    assert by_loader[ids["plain"]][0][1]["loader_class"] == "DataLoader"
    marks, ends = fetches_per_iterator(run)
    for key in ("0", "2"):
        for iter_id, _ in by_loader[ids[key]]:
            assert ends[iter_id] == 4, ends      # every batch fetched is marked
            seq = [(m["kind"], m["arg"]) for m in marks if m["iter_id"] == iter_id]
            assert seq[0][0] == ITER and seq[-1] == (STOP, 4), seq


@needs("torchdata.stateful_dataloader")
def test_stateful_dataloader_replay(rundir):
    run = run_script(rundir, "stateful_replay", True, {"DLBN_REPLAY": "1"},
                     script=STATEFUL_SCRIPT)
    assert run.rc == 0, run.proc.stderr[-3000:]
    lines = run.stdout.splitlines()
    # every epoch of every loader: len(loader) copies of its first batch
    assert "0 1 [[0, 1], [0, 1], [0, 1], [0, 1]]" in lines
    assert "2 1 [[0, 1], [0, 1], [0, 1], [0, 1]]" in lines
    assert "0 0 [[0, 1], [0, 1], [0, 1], [0, 1]]" in lines
    assert "plain [[0, 1], [0, 1]]" in lines
    configs = [c for i, c in configs_of(run) if i]
    assert configs and all(c["replay"] == "1" for c in configs), configs


@needs("torchdata.stateful_dataloader")
def test_incompatible_stateful_dataloader_is_left_alone(rundir, stateful_plain):
    env = {"COMPAT_BREAK": "stateful_next_not_function"}
    ref = run_script(rundir, "stateful_broken_plain", False, env, script=STATEFUL_SCRIPT)
    run = run_script(rundir, "stateful_broken", True, env, script=STATEFUL_SCRIPT)
    assert run.rc == ref.rc == 0, run.proc.stderr[-3000:]
    assert strip_ids(run.stdout) == strip_ids(ref.stdout) and run.stderr == ref.stderr
    assert len(run.dlbn_lines) == 1 and "StatefulDataLoader" in run.dlbn_lines[0]
    configs = configs_of(run)
    notes = [c for i, c in configs if i == 0]
    assert notes[0]["bootstrap"] == "ok"
    assert notes[1]["stateful_dataloader"] == "incompatible", notes
    # Only the plain DataLoader is marked.
    ids = loader_ids(run)
    assert [int(c["loader"]) for i, c in configs if i] == [ids["plain"]]
    marks, ends = fetches_per_iterator(run)
    assert set(m["iter_id"] for m in marks) == {1} and ends == {1: 2}


PIPELINES_SCRIPT = r'''
import io
import os
import sys
import tarfile

import torch
from torch.utils.data import DataLoader, Dataset, TensorDataset

which = sys.argv[1]
print("pid=%d" % os.getpid())

if which == "lightning":
    import lightning as L

    class Model(L.LightningModule):
        def __init__(self):
            super().__init__()
            self.layer = torch.nn.Linear(4, 1)

        def training_step(self, batch, i):
            x, y = batch
            return torch.nn.functional.mse_loss(self.layer(x), y)

        def validation_step(self, batch, i):
            x, y = batch
            self.log("val", torch.nn.functional.mse_loss(self.layer(x), y))

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), 0.1)

    data = TensorDataset(torch.randn(32, 4), torch.randn(32, 1))
    train = DataLoader(data, batch_size=4, num_workers=2, shuffle=True, persistent_workers=True)
    val = DataLoader(data, batch_size=8)
    print("loader train", id(train))
    print("loader val", id(val))
    trainer = L.Trainer(max_epochs=2, accelerator="cpu", logger=False,
                        enable_checkpointing=False, enable_progress_bar=False,
                        enable_model_summary=False, num_sanity_val_steps=0)
    trainer.fit(Model(), train, val)
elif which == "timm":
    import PIL.Image
    from timm.data import create_loader

    class Images(Dataset):
        def __init__(self):
            self.transform = None

        def __len__(self):
            return 16

        def __getitem__(self, i):
            img = PIL.Image.new("RGB", (40, 40), (i, i, i))
            return (self.transform(img) if self.transform else img), i % 3

    loader = create_loader(Images(), input_size=(3, 32, 32), batch_size=4, is_training=True,
                           num_workers=2, device=torch.device("cpu"), use_prefetcher=True)
    print("loader timm", id(loader.loader), type(loader).__name__)
    for epoch in range(2):
        print("batches", sum(1 for _ in loader))
elif which == "webdataset":
    import webdataset as wds
    path = os.path.abspath("shard-000.tar")
    with tarfile.open(path, "w") as tf:
        for i in range(16):
            data = str(i % 3).encode()
            info = tarfile.TarInfo("%06d.cls" % i)
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    dataset = wds.WebDataset(path, shardshuffle=False).decode().to_tuple("cls").batched(4)
    loader = wds.WebLoader(dataset, batch_size=None, num_workers=1)
    print("loader webdataset", id(loader.pipeline[0]), type(loader).__name__)
    for epoch in range(2):
        print("batches", sum(1 for _ in loader))
'''


def run_pipeline(directory, which):
    directory = directory / which
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "pipeline.py"
    path.write_text(PIPELINES_SCRIPT)
    trace = directory / "trace.dlbn"
    require_binaries()
    proc = subprocess.run([PYTHON, str(path), which], cwd=str(directory), timeout=240,
                          env=clean_env({"LD_PRELOAD": str(LIB), "DLBN_OUTPUT": str(trace)}),
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-4000:]
    lines = proc.stdout.splitlines()
    run = types.SimpleNamespace(pid=int(lines[0].split("=")[1]), trace=trace,
                                stdout="\n".join(lines[1:]), proc=proc)
    assert not [ln for ln in proc.stderr.splitlines() if ln.startswith("dlbn: ")]
    return run


def iterators_of(run, loader_id):
    """iter_id -> CONFIG fields, for one loader."""
    return {i: c for i, c in configs_of(run) if i and int(c["loader"]) == loader_id}


@needs("lightning")
def test_lightning_fit(rundir):
    run = run_pipeline(rundir, "lightning")
    ids = loader_ids(run)
    marks, ends = fetches_per_iterator(run)
    train, val = iterators_of(run, ids["train"]), iterators_of(run, ids["val"])
    # 2 epochs of 8 training batches, a validation pass of 4 after each.
    assert sorted(ends[i] for i in train) == [8, 8], (train, ends)
    assert sorted(ends[i] for i in val) == [4, 4], (val, ends)
    assert all(c["workers"] and c["sampler"] == "RandomSampler" for c in train.values())
    assert all(c["sampler"] == "SequentialSampler" for c in val.values())
    # Lightning stops at len(loader) without asking for one more batch: no
    # FETCH_STOP marks, every iterator still has its ITER_BEGIN.
    assert {m["iter_id"] for m in marks if m["kind"] == ITER} == set(train) | set(val)


@needs("timm", "PIL")
def test_timm_create_loader(rundir):
    run = run_pipeline(rundir, "timm")
    assert "PrefetchLoader" in run.stdout
    its = iterators_of(run, loader_ids(run)["timm"])
    marks, ends = fetches_per_iterator(run)
    # timm's training loader: persistent workers, drop_last, RandomSampler
    assert len(its) == 2 and sorted(ends[i] for i in its) == [4, 4], (its, ends)
    c = list(its.values())
    assert c[0]["workers"] == c[1]["workers"] and c[0]["persistent_workers"] == "1"
    assert c[0]["loader_class"] == "DataLoader" and c[0]["sampler"] == "RandomSampler"


@needs("webdataset")
def test_webdataset_webloader(rundir):
    run = run_pipeline(rundir, "webdataset")
    its = iterators_of(run, loader_ids(run)["webdataset"])
    marks, ends = fetches_per_iterator(run)
    assert len(its) == 2 and sorted(ends[i] for i in its) == [4, 4], (its, ends)
    c = list(its.values())
    # WebLoader wraps a plain DataLoader (that is the loader_class), over an
    # IterableDataset; non-persistent workers: new ones each epoch.
    assert c[0]["loader_class"] == "DataLoader" and c[0]["dataset_kind"] == "iterable"
    assert c[0]["workers"] != c[1]["workers"]
