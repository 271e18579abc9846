"""profile_faults.py - the worker profile under a hostile program, for
tests/e2e/test_hotspots.py.

    profile_faults.py kill RESULT.json
        numpy work per sample; worker 0 kills itself with SIGKILL after 2.5 s
        of fetching (the loop then stops with torch's "worker killed" error,
        which is expected): its partial summaries must be in the trace.
    profile_faults.py own-sigprof RESULT.json
        at its 3rd sample each worker installs its own SIGPROF handler and
        ITIMER_PROF timer (5 ms): the profile must give the signal back -
        the program's handler keeps receiving its signals to the end.
RESULT.json: {"pids": [...], "ticks": [per batch: the program's SIGPROF
count in the worker that made it], "error": str or null}.
"""
import json
import os
import signal
import sys
import time

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset, get_worker_info

TICKS = [0]


def _own_handler(signum, frame):
    TICKS[0] += 1


class Work(Dataset):
    def __init__(self, mode):
        self.mode = mode
        self.t0 = None
        self.count = 0

    def __len__(self):
        return 3200

    def __getitem__(self, i):
        info = get_worker_info()
        if self.t0 is None:
            self.t0 = time.monotonic()
        self.count += 1
        if self.mode == "own-sigprof" and self.count == 3:
            signal.signal(signal.SIGPROF, _own_handler)
            signal.setitimer(signal.ITIMER_PROF, 0.005, 0.005)
        if self.mode == "kill" and info.id == 0 and time.monotonic() - self.t0 > 2.5:
            os.kill(os.getpid(), signal.SIGKILL)
        a = np.random.default_rng(i).random((128, 128))
        for _ in range(6):
            a = np.fft.fft2(a).real
        return torch.tensor([float(a[0, 0]), float(TICKS[0]), float(os.getpid())])


def main(mode, result):
    loader = DataLoader(Work(mode), batch_size=4, num_workers=2)
    ticks, pids, error = [], set(), None
    batches = iter(loader)
    # torch's SIGCHLD handler (set by iter()) raises from whatever bytecode
    # runs when the killed worker's signal lands, our own except block and
    # json.dump included; without it the loop still sees the death, at the
    # fd hand-off or torch's worker status check.
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    try:
        for batch in batches:
            ticks.append(int(batch[:, 1].max()))
            pids.update(int(p) for p in batch[:, 2])
            time.sleep(0.002)
    except (RuntimeError, OSError, EOFError) as exc:
        # the worker killed: torch's "exited unexpectedly" (its status
        # check), or - killed while it passed a shared-memory fd - the fd
        # hand-off's reset connection
        error = "%s: %s" % (type(exc).__name__, exc)
    with open(result, "w") as f:
        json.dump({"pids": sorted(pids), "ticks": ticks, "error": error}, f)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
