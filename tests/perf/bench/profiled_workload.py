"""Run tests/e2e/workload.py's training loop under torch.profiler.

    profiled_workload.py [--script PATH] ARGS...

With --script, PATH (any training script that honours --json-out the way
workload.py does) runs instead, as __main__ via runpy, with ARGS as its argv.

What a user would otherwise reach for to see where a training step's time
goes: the whole loop inside torch.profiler.profile(activities=[CPU]).  The
arguments are workload.py's own (--help there); the per-step timings it
writes with --json-out cover the loop only, so the ratio against a plain run
is the profiler's overhead on step time, comparable with dlbn's.

The profiler's post-processing at exit (building the event tree) comes after
the loop and is reported separately as profiler_exit_s in the JSON file.
"""

import json
import os
import runpy
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "e2e"))

import torch.profiler  # noqa: E402

import workload  # noqa: E402


def json_out_path(argv):
    for i, arg in enumerate(argv):
        if arg == "--json-out" and i + 1 < len(argv):
            return argv[i + 1]
        if arg.startswith("--json-out="):
            return arg.split("=", 1)[1]
    return None


def run_script(path, argv):
    """Run path as __main__ with argv; its exit status."""
    saved = sys.argv
    sys.argv = [path] + argv
    try:
        runpy.run_path(path, run_name="__main__")
        return 0
    except SystemExit as exc:
        code = exc.code
        return code if isinstance(code, int) else (0 if code is None else 1)
    finally:
        sys.argv = saved


def main(argv):
    script = None
    if len(argv) >= 2 and argv[0] == "--script":
        script, argv = argv[1], argv[2:]
    activities = [torch.profiler.ProfilerActivity.CPU]
    prof = torch.profiler.profile(activities=activities)
    prof.__enter__()
    status = run_script(script, argv) if script else workload.main(argv)
    t0 = time.monotonic()
    prof.__exit__(None, None, None)
    exit_s = time.monotonic() - t0
    path = json_out_path(argv)
    if path:
        with open(path) as f:
            record = json.load(f)
        record["profiler_exit_s"] = exit_s
        record["profiler_events"] = len(prof.events())
        with open(path, "w") as f:
            json.dump(record, f)
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
