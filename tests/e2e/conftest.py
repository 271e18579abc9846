"""pytest fixtures of dlbn's end-to-end tests (helpers: e2e_common.py).

Module names here are prefixed e2e_ because tests/recorder/ is collected in
the same pytest session and plain names (conftest, a trace decoder) would collide
in sys.modules.
"""

import os
import shutil

import pytest

from e2e_common import run_workload


@pytest.fixture(scope="module")
def rundir(tmp_path_factory, request):
    name = request.module.__name__.rsplit(".", 1)[-1]
    directory = tmp_path_factory.mktemp(name)
    yield directory
    if not os.environ.get("DLBN_E2E_KEEP"):
        shutil.rmtree(directory, ignore_errors=True)


@pytest.fixture(scope="module")
def runs(rundir):
    """runs(name, args, **run_workload kwargs) -> Run, each run done once
    per module however many tests ask for it."""
    cache = {}

    def get(name, args, **kwargs):
        if name not in cache:
            cache[name] = run_workload(rundir, name, args, **kwargs)
        return cache[name]

    return get
