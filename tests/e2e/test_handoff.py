"""The wrapper hand-off timer (python/_dlbn_handoff.py) on every Python this
machine has: the interpreter under test (sys.setprofile below 3.12) and,
where installed, 3.12+ ones without torch (sys.monitoring), through
handoff_probe.py.  The torch side - the marks in a trace and the analyzer
charging the wrapper's work - is test_gpu.py's wrapped_sync and
test_outside_waits.py's wrapper tests.
"""

import glob
import json
import subprocess
import sys

import pytest

from e2e_common import ROOT

PROBE = ROOT / "tests" / "e2e" / "handoff_probe.py"
BOOT_SRC = ROOT / "python"


def interpreters():
    found = {sys.executable}
    for pattern in ("/root/.pyenv/versions/3.1[2-9]*/bin/python3",
                    "/usr/bin/python3.1[2-9]", "/usr/local/bin/python3.1[2-9]"):
        found.update(glob.glob(pattern))
    return sorted(found)


@pytest.fixture(scope="module", params=interpreters())
def probe(request):
    proc = subprocess.run([request.param, str(PROBE), str(BOOT_SRC)], capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def pairs(kind_index):
    return [tuple(x) for x in kind_index]


def test_hand_off_after_the_wrappers_work(probe):
    """Each batch: fetched, handed off after the wrapper's 5 ms, then the loop."""
    assert pairs(probe["plain"]) == [(k, i) for i in (1, 2, 3)
                                     for k in ("end", "handoff", "loop")], probe
    assert all(0.004 < gap < 0.05 for gap in probe["plain_gap_s"]), probe
    assert probe["profile_after"] == "None", probe


def test_two_fetches_per_yield_mark_the_last(probe):
    events = pairs(probe["skipping"])
    assert [i for k, i in events if k == "handoff"] == [2, 4, 6], events
    assert [i for k, i in events if k == "end"] == [1, 2, 3, 4, 5, 6], events


def test_generator_of_the_programs_own_is_not_a_wrapper(probe):
    assert not [e for e in probe["not_a_wrapper"] if e[0] == "handoff"], probe


def test_programs_profile_function_kept(probe):
    assert probe["program_profile_kept"], probe
    marked = [e for e in probe["program_profile"] if e[0] == "handoff"]
    if tuple(map(int, probe["version"].split("."))) >= (3, 12):
        assert len(marked) == 2, probe  # sys.monitoring is apart from sys.setprofile
    else:
        assert not marked, probe


def test_busy_wrapper_given_up_below_312(probe):
    """More profile events than the budget: no mark, and after GIVE_UP_AFTER
    windows that wrapper is not armed again; sys.monitoring costs nothing
    per call, so it marks every batch."""
    marked = [i for k, i in pairs(probe["busy"]) if k == "handoff"]
    if tuple(map(int, probe["version"].split("."))) >= (3, 12):
        assert marked == [1, 2, 3, 4, 5], probe
    else:
        assert marked == [], probe
