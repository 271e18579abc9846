"""Exceptions through the bootstrap keep the traceback they have without dlbn:
the same script, every way a DataLoader error reaches
the loop, run with and without the preload - plain, with --set (the
wrapped DataLoader.__init__) and with --max-steps armed - prints the same
tracebacks, byte for byte, and exits with the same status.  Run it under
both PyTorch generations (PYTHON=... or the venv's interpreter)."""

import re
import subprocess

import pytest

from e2e_common import LIB, PYTHON, RUN_TIMEOUT_S, clean_env, require_binaries

SCRIPT = r'''
import gc
import sys
import traceback

import torch
import torch.utils.data._utils
from torch.utils.data import DataLoader, Dataset, IterableDataset

# A worker's error ends its iterator, which joins its workers with this
# timeout (5 s): seven such cases made each run take 36 s, with or without
# dlbn.  Shorter, the same tracebacks in 6 s.
torch.utils.data._utils.MP_STATUS_CHECK_INTERVAL = 0.2


class Items(Dataset):
    def __init__(self, n, fail_at=None, chained=False):
        self.n, self.fail_at, self.chained = n, fail_at, chained

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if i == self.fail_at:
            if self.chained:
                try:
                    {}["missing %d" % i]
                except KeyError as exc:
                    raise RuntimeError("sample %d lookup failed" % i) from exc
            raise ValueError("sample %d is broken" % i)
        return torch.tensor([i])


class Stream(IterableDataset):
    def __iter__(self):
        yield torch.tensor([0])
        raise OSError("stream broke")


class BadSampler:
    def __init__(self, fail_on_iter):
        self.fail_on_iter = fail_on_iter

    def __len__(self):
        return 4

    def __iter__(self):
        if self.fail_on_iter:
            raise LookupError("sampler cannot start")
        return self.indices()

    def indices(self):
        yield 0
        raise IndexError("sampler ran out")


def broken_collate(batch):
    raise TypeError("cannot collate %d samples" % len(batch))


def from_generator(loader):
    yield from loader


def case(name, body):
    try:
        body()
    except BaseException:
        print("== %s\n%s" % (name, traceback.format_exc()))
    else:
        print("== %s: no error" % name)
    # A failed iterator lives on in the traceback's reference cycles; left
    # to the next case, its workers' fork inherits it and a collection in
    # the child runs its __del__ there ("can only test a child process"),
    # printed line by line amid the parent's output, with or without dlbn.
    gc.collect()


def loop(loader):
    for _ in loader:
        pass


def next_until_error(loader):
    it = iter(loader)
    while True:
        next(it)


def persistent_second_epoch():
    data = Items(6)
    loader = DataLoader(data, batch_size=2, num_workers=1, persistent_workers=True)
    loop(loader)
    data.fail_at = 3        # the worker holds its own copy: same in both runs
    loop(DataLoader(data, batch_size=2, num_workers=1, persistent_workers=True))


def exhausted():
    it = iter(DataLoader(Items(4), batch_size=2))
    list(it)
    next(it)


for workers in (0, 1):
    case("for %d" % workers, lambda: loop(DataLoader(Items(6, 3), batch_size=2,
                                                      num_workers=workers)))
    case("chained %d" % workers, lambda: loop(DataLoader(Items(6, 1, True), batch_size=2,
                                                          num_workers=workers)))
    case("iterable %d" % workers, lambda: loop(DataLoader(Stream(), num_workers=workers)))
case("next", lambda: next_until_error(DataLoader(Items(6, 4), batch_size=2)))
case("zip", lambda: [None for _ in zip(DataLoader(Items(6)), DataLoader(Items(6, 2)))])
case("enumerate", lambda: [None for _ in enumerate(DataLoader(Items(6, 5), num_workers=1))])
case("generator", lambda: loop(from_generator(DataLoader(Items(6, 2), batch_size=2))))
case("sampler next", lambda: loop(DataLoader(Items(6), sampler=BadSampler(False))))
case("sampler iter", lambda: loop(DataLoader(Items(6), sampler=BadSampler(True))))
case("collate", lambda: loop(DataLoader(Items(6), batch_size=2, collate_fn=broken_collate)))
case("persistent", persistent_second_epoch)
case("stop", exhausted)
case("init", lambda: DataLoader(Items(6), num_workers=-1))
# And one the script does not catch: the traceback on stderr, exit status 1.
loop(DataLoader(Items(4, 2), batch_size=2, num_workers=int(sys.argv[1])))
'''

CASES = 16
ADDRESS = re.compile(r"0x[0-9a-f]{6,}")


@pytest.fixture(scope="module")
def script(rundir):
    path = rundir / "tracebacks.py"
    path.write_text(SCRIPT)
    return path


def run(script, workers, env=None):
    proc = subprocess.run([PYTHON, str(script), str(workers)], env=clean_env(env),
                          cwd=str(script.parent), capture_output=True, text=True,
                          timeout=RUN_TIMEOUT_S)
    stderr = "\n".join(ln for ln in proc.stderr.splitlines() if not ln.startswith("dlbn: "))
    # object addresses ("Exception ignored in: <function ... at 0x7f...>",
    # torch's worker shutdown at exit) differ from run to run
    return proc.returncode, ADDRESS.sub("0x?", proc.stdout), uncaught(stderr)


def uncaught(stderr):
    """The uncaught exception's traceback on stderr.  Torch's own "Exception
    ignored in: <function _MultiProcessingDataLoaderIter.__del__ ...>"
    reports, printed at exit or not depending on when workers go (with or
    without dlbn), are left out."""
    lines, kept, skipping = stderr.splitlines(), [], False
    for i, line in enumerate(lines):
        if line.startswith("Exception ignored in:"):
            skipping = True
            continue
        if skipping:
            # its traceback ends at the first unindented line after the header
            if not line.startswith(" ") and not line.startswith("Traceback"):
                skipping = False
            continue
        kept.append(line)
    return ADDRESS.sub("0x?", "\n".join(kept))


@pytest.fixture(scope="module")
def plain(script):
    cache = {}

    def get(workers):
        if workers not in cache:
            cache[workers] = run(script, workers)
            rc, out, err = cache[workers]
            headers = [ln for ln in out.splitlines() if ln.startswith("== ")]
            assert rc == 1 and len(headers) == CASES, out
            assert not any(h.endswith("no error") for h in headers), headers
            assert err.rstrip().endswith("ValueError: sample 2 is broken"), err
        return cache[workers]
    return get


@pytest.mark.parametrize("workers", [0, 1])
@pytest.mark.parametrize("extra", [
    {},
    {"DLBN_SET": "eval:pin_memory=0"},     # DataLoader.__init__ wrapped
    {"DLBN_MAX_STEPS": "1000"},             # the bounded-run checks armed
], ids=["plain", "set", "max_steps"])
def test_tracebacks_are_the_same_as_without_dlbn(rundir, script, plain, workers, extra):
    require_binaries()
    env = dict(extra, LD_PRELOAD=str(LIB),
               DLBN_OUTPUT=str(rundir / ("tb-%d-%s-%%p.bin" % (workers, "-".join(extra)))))
    rc, out, err = run(script, workers, env)
    ref_rc, ref_out, ref_err = plain(workers)
    assert "_dlbn_" not in out + err
    assert out == ref_out
    assert err == ref_err
    assert rc == ref_rc


def test_import_error_of_the_dataloader_module_keeps_its_traceback(tmp_path):
    """sitecustomize's import hook executes torch.utils.data.dataloader: an
    error there (a broken dependency) shows no frame of the hook.  A stand-in
    torch package (on PYTHONPATH) whose dataloader module fails to import."""
    require_binaries()
    package = tmp_path / "fake" / "torch" / "utils" / "data"
    package.mkdir(parents=True)
    for d in (package, package.parent, package.parent.parent):
        (d / "__init__.py").write_text("")
    (package / "dataloader.py").write_text(
        "import os\n\ndef load():\n    raise ImportError('numpy is broken')\n\nload()\n")
    script = tmp_path / "imp.py"
    script.write_text("import torch.utils.data.dataloader\n")
    results = []
    for extra in ({}, {"LD_PRELOAD": str(LIB), "DLBN_OUTPUT": str(tmp_path / "t.bin")}):
        proc = subprocess.run([PYTHON, str(script)], cwd=str(tmp_path), timeout=RUN_TIMEOUT_S,
                              env=clean_env(dict(extra, PYTHONPATH=str(tmp_path / "fake"))),
                              capture_output=True, text=True)
        results.append((proc.returncode,
                        [ln for ln in proc.stderr.splitlines() if not ln.startswith("dlbn: ")]))
    assert results[0][0] == 1 and results[0][1][-1] == "ImportError: numpy is broken", results
    assert results[1] == results[0]
