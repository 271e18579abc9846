"""The Python bootstrap loads only the modules a run asks for.

It runs in every Python process under the preload, DataLoader workers
included: a traced run that iterates a DataLoader without DLBN_REPLAY,
DLBN_SET or DLBN_MAX_STEPS imports neither Replay (_dlbn_replay,
_dlbn_wrappers) nor the settings (_dlbn_settings); each of those variables
imports what it needs and nothing of the other.
"""

import json
import subprocess

import pytest

from e2e_common import LIB, PYTHON, RUN_TIMEOUT_S, clean_env, require_binaries

SCRIPT = r'''
import json
import sys

from torch.utils.data import DataLoader

for epoch in range(2):
    for batch in DataLoader(list(range(6)), batch_size=2):
        pass
print(json.dumps({"modules": sorted(m for m in sys.modules if m.startswith("_dlbn_")),
                  "wrapped": hasattr(DataLoader.__iter__, "__wrapped__")}))
'''

ALWAYS = {"_dlbn_boot", "_dlbn_common", "_dlbn_marks", "_dlbn_compat", "_dlbn_config",
          "_dlbn_patch", "_dlbn_loaders"}
REPLAY = {"_dlbn_replay", "_dlbn_wrappers"}
SETTINGS = {"_dlbn_settings"}


@pytest.mark.parametrize("env,wanted", [
    ({}, set()),
    ({"DLBN_REPLAY": "0", "DLBN_MAX_STEPS": "0"}, set()),
    ({"DLBN_REPLAY": "2"}, REPLAY),
    ({"DLBN_SET": "num_workers=0"}, SETTINGS),
    ({"DLBN_MAX_STEPS": "100"}, SETTINGS),
], ids=["plain", "zeros", "replay", "set", "max_steps"])
def test_modules_loaded(tmp_path, env, wanted):
    require_binaries()
    env = clean_env(dict(env, LD_PRELOAD=str(LIB),
                         DLBN_OUTPUT=str(tmp_path / "trace-%p.bin")))
    proc = subprocess.run([PYTHON, "-c", SCRIPT], env=env, capture_output=True, text=True,
                          timeout=RUN_TIMEOUT_S)
    assert proc.returncode == 0, proc.stderr[-3000:]
    facts = json.loads(proc.stdout.splitlines()[-1])
    assert facts["wrapped"], "torch's DataLoader was not wrapped"
    loaded = set(facts["modules"])
    assert ALWAYS <= loaded, sorted(ALWAYS - loaded)
    assert loaded & (REPLAY | SETTINGS) == wanted
