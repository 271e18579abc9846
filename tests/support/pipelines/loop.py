"""loop.py - the training-loop driver of the real-pipeline programs.

Every program in tests/support/pipelines/ (torchvision_imagefolder.py,
timm_loader.py, hf_datasets.py, webdataset_shards.py, torchdata_stateful.py,
lightning_fit.py, train_val.py) builds its input pipeline the way its library's
users do, over files that data.py makes, and hands it to this module, which
runs the training loop and times it:

    prog.py --setting input|compute --mode real|replay|le-log|le-replay
            --json-out FILE [knobs]

writing the record tests/perf/eval/eval_workload.py writes (same keys, same
meaning), so that the eval suite runs these programs as scenarios and
tests/e2e/test_pipelines.py judges dlbn's verdicts against them.

Modes (all on the same loop, the same per-step work):
  real       iterate the pipeline;
  replay     first take --replay-batches batches from each loader, shut its
             workers down, then run the same steps over the cached batches,
             cycled, each epoch as long as the real one (len() of the loader,
             or the program's own count): the reference method's Replay run,
             as eval_workload.py's run_replay does it;
  le-log     the loop over DALI's LoaderEvaluator(loader, mode="log");
  le-replay  over LoaderEvaluator(loader, mode="replay",
             num_cached_batches=--replay-batches) (it caches a whole epoch
             when constructed, before the loop); LoaderEvaluator comes from
             loader_evaluator.py (on torch 1.13 too).  The record adds
             le_cache_s, le_total_s (LoaderEvaluator's own time per epoch of
             the first loader) and le_origin.
A program with several loaders (train_val.py, lightning_fit.py) wraps each.

The per-step "model" is the simulated GPU (tests/support/simcuda/simgpu.py),
so that compute costs no CPU on a 2-core machine: each step copies --h2d-kib
KiB host-to-device (pinned, async: the copy engine's time, no host CPU; a
stand-in for the batch's copy) and launches a --kernel-us kernel on
one stream; --sync step synchronises the stream after it (like
loss.item()).  The host touches the batch (reads one element, as a loss
would) and sleeps --host-ms (logging, Python overhead).  --gpu runtime
reaches the simulated driver as libcudart does (dlopen of libcuda.so.1:
LD_LIBRARY_PATH must hold build/tests/simcuda), direct through a linked
libcuda.so.1, none runs no GPU work; the default is runtime when
LD_LIBRARY_PATH holds that directory, else direct.

Timing, as eval_workload.py: fetch[k] when batch k was in hand, host_end[k]
when the host finished step k, gpu_end[k] when the GPU finished the work
step k enqueued (an event after it, placed on the host clock through a
reference event), done[k] = max of the two.  The window skips the first
P+1 steps (P = num_workers x prefetch_factor of the training loader) and
window_s = done[last] - done[P]; fetch_window_s the same span on fetch[].

Presets: --setting input|compute fills every knob the command line does not
give from the program's PRESETS (input-bound: the workers' decode and
transforms take well more than the kernel per batch; compute-bound: the
kernel takes well more than loading), then from BASE below.

Exit status: 0 done, 1 the loop failed (record written with its error),
2 bad arguments, 77 (SKIP_STATUS) the program's packages do not import
under this interpreter (one line on stderr says which).
"""

import argparse
import ctypes
import importlib
import json
import os
import random
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
TESTS = os.path.dirname(os.path.dirname(HERE))
ROOT = os.path.dirname(TESTS)
SIM_DIR = os.path.join(ROOT, "build", "tests", "simcuda")
for _p in (os.path.join(TESTS, "support", "simcuda"), os.path.join(TESTS, "e2e"), HERE):
    if _p not in sys.path:
        sys.path.insert(0, _p)

SKIP_STATUS = 77
MODES = ("real", "replay", "le-log", "le-replay")
BASE = dict(epochs=1, steps=40, batch_size=8, workers=2, prefetch_factor=2,
            image_size="480x360", kernel_us=5000, h2d_kib=64.0, sync="none",
            host_ms=0.0, val_steps=4, val_kernel_us=None)


def require(*modules):
    """Import `modules`; exit SKIP_STATUS with one line on stderr when one
    does not import here (the program does not apply to this interpreter)."""
    loaded = []
    for name in modules:
        try:
            loaded.append(importlib.import_module(name))
        except Exception as exc:  # ImportError, or a package broken on this torch
            import torch
            sys.stderr.write("%s: skipped: %s does not import with torch %s (%s: %s)\n"
                             % (os.path.basename(sys.argv[0]), name, torch.__version__,
                                type(exc).__name__,
                                str(exc).splitlines()[0] if str(exc) else ""))
            sys.exit(SKIP_STATUS)
    return loaded[0] if len(loaded) == 1 else loaded


# ---------------------------------------------------------------------------
# Arguments


def image_size(text):
    try:
        w, h = (int(x) for x in text.lower().split("x"))
    except ValueError:
        raise argparse.ArgumentTypeError("WxH expected, not %r" % text)
    if w < 32 or h < 32:
        raise argparse.ArgumentTypeError("image size at least 32x32")
    return (w, h)


def parser(description, settings=("input", "compute")):
    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("--setting", choices=settings, default="input",
                    help="preset: input-bound or compute-bound (knobs override it)")
    ap.add_argument("--mode", choices=MODES, default="real")
    ap.add_argument("--json-out", default=None)
    ap.add_argument("--replay-batches", type=int, default=8)
    ap.add_argument("--data-dir", default=None,
                    help="where data.py makes (and caches) the files")
    ap.add_argument("--seed", type=int, default=0)
    # Loader knobs.
    ap.add_argument("--epochs", type=int)
    ap.add_argument("--steps", type=int, help="training steps per epoch")
    ap.add_argument("--batch-size", type=int)
    ap.add_argument("--workers", type=int)
    ap.add_argument("--prefetch-factor", type=int)
    ap.add_argument("--image-size", type=image_size, help="WxH of the JPEGs")
    ap.add_argument("--val-steps", type=int, help="validation batches (programs with one)")
    # Per-step work.
    ap.add_argument("--gpu", choices=("runtime", "direct", "none"), default=None)
    ap.add_argument("--kernel-us", type=int)
    ap.add_argument("--val-kernel-us", type=int, help="default: a third of --kernel-us")
    ap.add_argument("--h2d-kib", type=float)
    ap.add_argument("--sync", choices=("none", "step"))
    ap.add_argument("--host-ms", type=float)
    return ap


def parse(ap, presets, argv=None):
    """Arguments with the setting's preset, then BASE, for what is not given."""
    pre, _ = ap.parse_known_args(argv)
    defaults = dict(BASE)
    # presets: {setting: knobs}, or a function of the first parse (for
    # presets that depend on another option, e.g. train_val.py --zipped).
    defaults.update(presets(pre) if callable(presets) else presets.get(pre.setting, {}))
    for key, value in defaults.items():
        if key == "image_size" and isinstance(value, str):
            value = image_size(value)
        ap.set_defaults(**{key: value})
    args = ap.parse_args(argv)
    if args.val_kernel_us is None:
        args.val_kernel_us = args.kernel_us // 3
    if (args.workers < 0 or args.epochs < 1 or args.steps < 2 or args.batch_size < 1
            or args.prefetch_factor < 1 or args.replay_batches < 1 or args.val_steps < 1):
        ap.error("workers >= 0, epochs >= 1, steps >= 2, batch-size, prefetch-factor, "
                 "replay-batches, val-steps >= 1")
    if args.gpu is None:
        paths = os.environ.get("LD_LIBRARY_PATH", "").split(":")
        args.gpu = "runtime" if any(os.path.realpath(p) == os.path.realpath(SIM_DIR)
                                    for p in paths if p) else "direct"
    if args.gpu == "none":
        args.kernel_us = args.val_kernel_us = 0
        args.h2d_kib = 0.0
        args.sync = "none"
    if args.data_dir is None:
        import data
        args.data_dir = data.default_root()
    return args


def loader_kwargs(args):
    """DataLoader keyword arguments every program shares."""
    kwargs = dict(batch_size=args.batch_size, num_workers=args.workers)
    if args.workers > 0:
        kwargs["prefetch_factor"] = args.prefetch_factor
    return kwargs


# ---------------------------------------------------------------------------
# The per-step work


class NoGPU:
    def work(self, kernel_us, h2d_bytes, sync):
        return None

    def queued_s(self):
        return None

    def sync(self):
        pass

    def finish(self, events):
        return [None] * len(events)


class SimGPU:
    """The per-step GPU work on one stream of the simulated driver."""

    def __init__(self, reach):
        import simgpu
        self.gpu = simgpu.SimGPU(reach)
        self.stream = self.gpu.stream()
        self.gpu.stream_sync(self.stream)
        # The GPU is idle: the reference event completes when recorded.
        before = time.monotonic()
        self.ref = self.gpu.event(self.stream)
        self.ref_t = (before + time.monotonic()) / 2
        elapsed = self.gpu.lib.simrt_event_elapsed_ms
        elapsed.argtypes = [ctypes.c_uint64, ctypes.c_uint64, ctypes.POINTER(ctypes.c_float)]
        elapsed.restype = ctypes.c_int
        self._elapsed = elapsed
        self.queued_s = self.gpu.compute_queued_s

    def work(self, kernel_us, h2d_bytes, sync):
        g, s = self.gpu, self.stream
        if h2d_bytes:
            g.htod(s, h2d_bytes, pinned=True, async_=True)
        if kernel_us:
            g.launch_us(s, kernel_us)
        event = g.event(s)
        if sync:
            g.stream_sync(s)
        return event

    def sync(self):
        self.gpu.stream_sync(self.stream)

    def finish(self, events):
        """GPU completion time of each step's work on the host clock."""
        self.gpu.stream_sync(self.stream)
        out = []
        ms = ctypes.c_float()
        for event in events:
            rc = self._elapsed(self.ref, event, ctypes.byref(ms))
            if rc != 0:
                raise RuntimeError("event_elapsed failed: CUresult %d" % rc)
            out.append(self.ref_t + ms.value / 1000.0)
        return out


def first_tensor(batch):
    """The first tensor of a batch (tensor, tuple/list, dict), or None."""
    import torch
    if isinstance(batch, torch.Tensor):
        return batch
    if isinstance(batch, dict):
        batch = list(batch.values())
    if isinstance(batch, (list, tuple)):
        for item in batch:
            found = first_tensor(item)
            if found is not None:
                return found
    return None


def touch(batch):
    """Read one element of the batch, as a loss would."""
    t = first_tensor(batch)
    return float(t.reshape(-1)[0]) if t is not None and t.numel() else 0.0


def runq_wait_s():
    """This thread's time runnable but not running so far (schedstat)."""
    try:
        with open("/proc/thread-self/schedstat") as f:
            return int(f.read().split()[1]) / 1e9
    except (OSError, ValueError, IndexError):
        return None


class Recorder:
    """The loop's clock and its per-step work; owns the run's record."""

    def __init__(self, args, pipeline):
        import torch
        import workload  # tests/e2e/workload.py: ForeignLoad
        self.args = args
        self.gpu = NoGPU() if args.gpu == "none" else SimGPU(args.gpu)
        self.h2d_bytes = int(args.h2d_kib * 1024)
        self.events = []
        self.evaluators = []  # LoaderEvaluators whose epoch times are recorded
        self.record = {"mode": args.mode, "pipeline": pipeline, "setting": args.setting,
                       "args": {k: (list(v) if isinstance(v, tuple) else v)
                                for k, v in vars(args).items()},
                       "pid": os.getpid(), "torch": torch.__version__,
                       "python": sys.executable,
                       "epoch_starts": [], "fetch": [], "host_end": [], "gpu_end": [],
                       "done": [], "runq": [], "gpu_queued": [], "val_batches": 0,
                       "error": None}
        self.prefetch_depth = args.workers * args.prefetch_factor if args.workers > 0 else 0
        self._load = workload.ForeignLoad()

    # Steps, split in three for loops that call back (Lightning).
    def epoch_start(self):
        self.record["epoch_starts"].append(time.monotonic())

    def fetched(self):
        self.record["fetch"].append(time.monotonic())
        self.record["runq"].append(runq_wait_s())

    def work(self, batch, kernel_us=None):
        a = self.args
        self.events.append(self.gpu.work(a.kernel_us if kernel_us is None else kernel_us,
                                         self.h2d_bytes, a.sync == "step"))
        touch(batch)
        if a.host_ms > 0:
            time.sleep(a.host_ms / 1000.0)

    def step_end(self):
        self.record["host_end"].append(time.monotonic())
        self.record["gpu_queued"].append(self.gpu.queued_s())

    def step(self, batch):
        """One training step on a batch just obtained."""
        self.fetched()
        self.work(batch)
        self.step_end()

    # Validation: a shorter kernel per batch, not a training step.
    def val_step(self, batch):
        self.record["val_batches"] += 1
        self.gpu.work(self.args.val_kernel_us, self.h2d_bytes, self.args.sync == "step")
        touch(batch)

    def val_end(self):
        """The end of a validation pass reads its metrics (a sync)."""
        self.gpu.sync()

    def le_epoch_done(self):
        """After each epoch over LoaderEvaluators: the first one's own time."""
        if self.evaluators:
            total = self.evaluators[0].get_metrics().get("total_time")
            # None when the epoch's generator was not run to its end (a
            # framework that stops at its own batch limit never finishes it).
            self.record.setdefault("le_total_s", []).append(total or None)

    def finish(self, error=None):
        r = self.record
        if error is None:
            try:
                # Steps of a loop without GPU work (cpu_train.py) queued no event.
                r["gpu_end"] = (self.gpu.finish(self.events)
                                + [None] * (len(r["host_end"]) - len(self.events)))
            except Exception as exc:
                error = "%s: %s" % (type(exc).__name__, exc)
        if error is not None:
            r["error"] = error
            r["gpu_end"] = r["gpu_end"] or [None] * len(r["host_end"])
        r["done"] = [max(h, g) if g is not None else h
                     for h, g in zip(r["host_end"], r["gpu_end"])]
        r["foreign_load_cores"] = self._load.cores()
        first_kept = self.prefetch_depth + 1
        r["steps"] = len(r["fetch"])
        r["prefetch_depth"] = self.prefetch_depth
        r["window_first_step"] = first_kept
        r["window_s"] = window(r["done"], first_kept)
        r["fetch_window_s"] = window(r["fetch"], first_kept)
        q = r["gpu_queued"]
        # Kernel time the window's steps (and validation between them)
        # queued: the GPU's busy time in the window.
        r["gpu_busy_window_s"] = (q[-1] - q[first_kept - 1]
                                  if len(q) > first_kept and None not in
                                  (q[-1], q[first_kept - 1]) else None)
        runq = r["runq"]
        r["runq_window_s"] = (runq[-1] - runq[first_kept - 1]
                              if len(runq) > first_kept and None not in
                              (runq[-1], runq[first_kept - 1]) else None)
        return r


def window(times, first_kept):
    if first_kept < 1 or first_kept >= len(times):
        return None
    return times[-1] - times[first_kept - 1]


# ---------------------------------------------------------------------------
# What the loop iterates, per mode


def shutdown_workers(loader, iterator=None):
    """Stop the worker processes behind `loader` (and its iterator): a
    generator is closed, every DataLoader iterator found (the iterator, a
    persistent one kept by the loader, one inside a wrapper's .loader or
    .dataloader) shuts its workers down."""
    if iterator is not None and hasattr(iterator, "close") and hasattr(iterator, "gi_frame"):
        iterator.close()
    seen = set()
    todo = [iterator, loader]
    while todo:
        obj = todo.pop()
        if obj is None or id(obj) in seen:
            continue
        seen.add(id(obj))
        if hasattr(obj, "_shutdown_workers"):
            try:
                obj._shutdown_workers()
            except Exception:
                pass
        inner = getattr(obj, "__dict__", {})
        for name in ("_iterator", "loader", "dataloader", "_loader"):
            if name in inner:
                todo.append(inner[name])
        if "_iterator" in inner and inner.get("persistent_workers"):
            obj._iterator = None


def wait_quiet(limit_s):
    """Sleep until this process used under a fifth of a CPU over 20 ms, or
    limit_s passed."""
    end = time.monotonic() + limit_s
    while time.monotonic() < end:
        cpu, wall = time.process_time(), time.monotonic()
        time.sleep(0.02)
        if time.process_time() - cpu < 0.2 * (time.monotonic() - wall):
            return


def epoch_length(loader, length=None):
    if length is not None:
        return length
    try:
        return len(loader)
    except TypeError:
        raise RuntimeError("replay needs the epoch length: %r has no len() and the "
                           "program gave none" % type(loader).__name__)


class Replay:
    """The reference method's Replay source: the first n batches of a loader,
    taken before the loop (its workers then shut down), cycled for the
    epoch length of the real loader - the cached objects themselves.

    drain: read the rest of that first epoch too, as LoaderEvaluator does
    (it caches a whole epoch before the loop): for loaders whose workers
    shutdown_workers cannot stop (torchdata.nodes' mappers and prefetch
    thread, DALI's executor, a producer thread), so that they have nothing
    left to do while the replayed steps run; the epoch's length is then
    the count read when the loader has no len().  Then it waits for the
    process's CPU use to settle (work queued past the epoch's end)."""

    def __init__(self, loader, n, length=None, drain=False):
        self.cache = []
        iterator = iter(loader)
        count = 0
        for batch in iterator:
            count += 1
            if len(self.cache) < n:
                self.cache.append(batch)
            if len(self.cache) >= n and not drain:
                break
        if length is None and drain:
            try:
                length = len(loader)
            except TypeError:
                length = count
        self.length = epoch_length(loader, length)
        shutdown_workers(loader, iterator)
        del iterator
        if drain:
            wait_quiet(2.0)
        if not self.cache:
            raise RuntimeError("replay: the loader yielded no batch")

    def __len__(self):
        return self.length

    def __iter__(self):
        cache = self.cache
        for i in range(self.length):
            yield cache[i % len(cache)]


class _CachedBatches:
    """Map-style dataset of a Replay's cached batches (replay_dataloader)."""

    def __init__(self, replay):
        self.replay = replay

    def __len__(self):
        return self.replay.length

    def __getitem__(self, index):
        cache = self.replay.cache
        return cache[index % len(cache)]


def _identity(batch):
    return batch


def replay_dataloader(loader, n, length=None):
    """A Replay that is itself a torch DataLoader (batch_size=None, no
    workers, identity collate), for frameworks that want a DataLoader."""
    from torch.utils.data import DataLoader
    return DataLoader(_CachedBatches(Replay(loader, n, length)), batch_size=None,
                      num_workers=0, collate_fn=_identity)


def source(args, rec, loader, length=None, as_dataloader=False, train=True):
    """What the loop iterates for `loader` in this run's mode (real: the
    loader itself).  Made before the loop: replay and le-replay cache here."""
    if args.mode == "real":
        return loader
    if args.mode == "replay":
        if as_dataloader:
            return replay_dataloader(loader, args.replay_batches, length)
        return Replay(loader, args.replay_batches, length)
    import loader_evaluator
    cls, origin = loader_evaluator.loader_evaluator()
    rec.record["le_origin"] = origin
    t0 = time.monotonic()
    if args.mode == "le-log":
        evaluator = cls(loader, mode="log")
    else:
        evaluator = cls(loader, mode="replay", num_cached_batches=args.replay_batches)
        # Its cache is full; the loader's workers are not needed any more.
        shutdown_workers(loader)
    rec.record["le_cache_s"] = rec.record.get("le_cache_s", 0.0) + time.monotonic() - t0
    if train:
        rec.evaluators.insert(0, evaluator)
    else:
        rec.evaluators.append(evaluator)
    return evaluator


def run_epochs(args, rec, loader, length=None):
    """The plain loop: epochs of `for batch in loader: step`."""
    src = source(args, rec, loader, length)
    for _ in range(args.epochs):
        rec.epoch_start()
        for batch in src:
            rec.step(batch)
        rec.le_epoch_done()


# ---------------------------------------------------------------------------
# Program entry


def main(description, presets, build=None, run=None, add_args=None, pipeline=None,
         argv=None, threads=1):
    """Parse, build the pipeline (build(args) -> loader, or (loader, length)),
    run it (run(args, rec) when given, else run_epochs), write the record.
    Returns the exit status."""
    ap = parser(description, getattr(presets, "settings", None) or
                (tuple(presets) if isinstance(presets, dict) else ("input", "compute")))
    if add_args:
        add_args(ap)
    args = parse(ap, presets, argv)
    pipeline = pipeline or os.path.splitext(os.path.basename(sys.argv[0]))[0]
    import torch
    # One intra-op thread: the simulated GPU's programs keep the loop's own
    # CPU small; a CPU-training program (cpu_train.py) passes None to keep
    # torch's own count.
    if threads is not None:
        torch.set_num_threads(threads)
    torch.manual_seed(args.seed)
    random.seed(args.seed)
    rec = None
    error = None
    status = 0
    try:
        rec = Recorder(args, pipeline)
        if run is not None:
            run(args, rec)
        else:
            built = build(args)
            loader, length = built if isinstance(built, tuple) else (built, None)
            run_epochs(args, rec, loader, length)
    except SystemExit:
        raise
    except Exception as exc:  # a broken run: reported, not a figure
        import traceback
        traceback.print_exc()
        error = "%s: %s" % (type(exc).__name__, exc)
        status = 1
    if rec is None:
        record = {"mode": args.mode, "pipeline": pipeline, "error": error, "steps": 0,
                  "window_s": None}
    else:
        record = rec.finish(error)
        if record["error"] and not status:
            status = 1
    if args.json_out:
        with open(args.json_out, "w") as out:
            json.dump(record, out)
    if record.get("error"):
        print("%s: %s" % (pipeline, record["error"]), file=sys.stderr)
    return status
