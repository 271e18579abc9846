"""other_loaders.py - training loops fed by loaders that are not torch's
DataLoader, for the eval suite (loop.py's modes, knobs, record, exit status):

    other_loaders.py --loader nodes-process|nodes-thread|named|dali|dali-proxy
                     --setting input|compute --mode real|replay|le-log|le-replay ...

  nodes-process  torchdata.nodes: SamplerWrapper -> ParallelMapper(--workers
                 process workers, --sample-ms of CPU per sample) -> Batcher ->
                 Mapper(torch.stack) -> Prefetcher(--prefetch-factor) -> Loader
  nodes-thread   the same with thread workers sleeping --sample-ms per sample
                 (work that releases the GIL: reads, decoding in C; with
                 --map-work python, pure Python that holds it)
  named          a generator fed by a background thread through queue.Queue
                 (tests/e2e/loaders_feeder.py: --sample-ms x batch size per
                 batch, --map-work as for nodes), for
                 DLBN_LOADER=loaders_feeder:prefetched
  (--loop-py-ms: the loop's own pure-Python work per step, which needs the
  GIL too)
  dali           DALI's DALIGenericIterator over a CPU-only pipeline (file
                 reader -> decoders.image -> resize -> crop_mirror_normalize,
                 --workers threads) over the ImageFolder JPEGs data.py makes
  dali-proxy     DALI's proxy DataLoader: --workers persistent DataLoader
                 workers read each sample's path from the same ImageFolder, a
                 DALIServer in the training process runs the same pipeline
                 (external source, file read, decode, resize, normalize)

Replay (eval's own) reads the loader's first epoch to its end before the
loop, keeping the first --replay-batches batches, as LoaderEvaluator does,
so that the loader's threads and processes have nothing left to do while
the replayed steps run.  LoaderEvaluator needs len() of what it wraps:
nodes' Loader and a generator have none (the scenarios say so); DALI's
iterators have.  torchdata.nodes and DALI install with torch 2.x only: on
torch 1.13 those loaders exit 77.  Presets (GPU: the simulated driver):
  input    the loader well slower than the kernel (Replay ~3-8x);
  compute  the kernel well longer than a batch's loading (~1.0x).
"""

import os
import sys

import loop

LOADERS = ("nodes-process", "nodes-thread", "named", "dali", "dali-proxy")


def presets(pre):
    dali = pre.loader in ("dali", "dali-proxy")
    knobs = dict(steps=40, batch_size=8 if dali else 4, workers=2, prefetch_factor=2)
    if pre.loader == "named":
        knobs["workers"] = 0   # one producer thread; no worker processes
    if pre.setting == "input":
        knobs.update(kernel_us=5000 if dali else 3000)
    else:
        knobs.update(kernel_us=90000 if dali else 30000, sync="step")
    return knobs


def add_args(ap):
    ap.add_argument("--loader", choices=LOADERS, required=True)
    ap.add_argument("--sample-ms", type=float, default=5.0,
                    help="work per sample (nodes, named)")
    ap.add_argument("--map-work", choices=("sleep", "cpu", "python"), default=None,
                    help="nodes' per-sample work (a named loader's per batch): a sleep "
                    "(thread and named default), CPU in any code (process default), or "
                    "pure-Python CPU that holds the GIL")
    ap.add_argument("--loop-py-ms", type=float, default=0.0,
                    help="pure-Python CPU work of the loop per step (holds the GIL)")


class SleepWork:
    """Picklable per-sample work that sleeps (thread workers)."""

    def __init__(self, ms):
        self.ms = ms

    def __call__(self, i):
        import time
        import torch
        time.sleep(self.ms / 1000.0)
        return torch.full((64,), float(i))


class CpuWork(SleepWork):
    """Picklable per-sample CPU work (process workers)."""

    def __call__(self, i):
        import time
        import torch
        t = time.process_time()
        while time.process_time() - t < self.ms / 1000.0:
            pass
        return torch.full((64,), float(i))


def python_spin(ms):
    """Pure-Python work for `ms` of this thread's CPU: it holds the GIL but
    for the interpreter's switch interval."""
    import time
    t = time.thread_time()
    while time.thread_time() - t < ms / 1000.0:
        sum(range(200))


class PythonWork(SleepWork):
    """Picklable per-sample pure-Python work (holds the GIL)."""

    def __call__(self, i):
        import torch
        python_spin(self.ms)
        return torch.full((64,), float(i))


WORK = {"sleep": SleepWork, "cpu": CpuWork, "python": PythonWork}


def build(args):
    """(loader, epoch length or None)."""
    if args.loader.startswith("nodes-"):
        import torch
        tn = loop.require("torchdata.nodes")
        method = args.loader[len("nodes-"):]
        node = tn.SamplerWrapper(torch.utils.data.SequentialSampler(
            range(args.steps * args.batch_size)))
        kind = args.map_work or ("cpu" if method == "process" else "sleep")
        work = WORK[kind](args.sample_ms)
        node = tn.ParallelMapper(node, map_fn=work, num_workers=args.workers, method=method)
        node = tn.Batcher(node, batch_size=args.batch_size)
        node = tn.Mapper(node, torch.stack)
        node = tn.Prefetcher(node, prefetch_factor=args.prefetch_factor)
        return tn.Loader(node), None
    if args.loader == "named":
        import loaders_feeder
        return NamedEpochs(loaders_feeder, args), None
    if args.loader == "dali-proxy":
        loader = dali_proxy_loader(args)
        return loader, len(loader)
    return dali_iterator(args), None


class NamedEpochs:
    """Each iter() is one epoch of loaders_feeder.prefetched (the function
    DLBN_LOADER names: looked up at each call, so the bootstrap's wrapper
    is the one called)."""

    def __init__(self, module, args):
        self.module, self.args = module, args

    def __iter__(self):
        a = self.args
        return iter(self.module.prefetched(a.steps, ms=a.sample_ms * a.batch_size,
                                           work=a.map_work or "sleep"))


def dali_iterator(args):
    loop.require("nvidia.dali.plugin.pytorch")
    import data
    from nvidia.dali import fn, pipeline_def, types
    from nvidia.dali.plugin.pytorch import DALIGenericIterator
    root = data.imagefolder(args.data_dir, args.steps * args.batch_size, size=args.image_size)

    @pipeline_def(batch_size=args.batch_size, num_threads=args.workers, device_id=None,
                  prefetch_queue_depth=args.prefetch_factor, seed=args.seed + 1)
    def pipe():
        jpegs, labels = fn.readers.file(file_root=root, random_shuffle=True, name="Reader")
        images = fn.decoders.image(jpegs, device="cpu")
        images = fn.resize(images, resize_x=224, resize_y=224)
        images = fn.crop_mirror_normalize(images, dtype=types.FLOAT, output_layout="CHW",
                                          mean=[0.485 * 255] * 3, std=[0.229 * 255] * 3)
        return images, labels

    p = pipe()
    p.build()
    return DALIGenericIterator(p, ["data", "label"], reader_name="Reader")


def path_bytes(path):
    """ImageFolder's loader for the DALI proxy: the path, for DALI to read."""
    import numpy as np
    return np.frombuffer(path.encode(), dtype=np.int8)


def dali_proxy_loader(args):
    loop.require("nvidia.dali.plugin.pytorch")
    import data
    import torchvision
    from nvidia.dali import fn, pipeline_def, types
    from nvidia.dali.plugin.pytorch.experimental import proxy
    root = data.imagefolder(args.data_dir, args.steps * args.batch_size, size=args.image_size)

    @pipeline_def(batch_size=args.batch_size, num_threads=args.workers, device_id=None,
                  prefetch_queue_depth=args.prefetch_factor * args.workers,
                  seed=args.seed + 1)
    def pipe():
        paths = fn.external_source(name="images", no_copy=True)
        images = fn.decoders.image(fn.io.file.read(paths), device="cpu")
        images = fn.resize(images, resize_x=224, resize_y=224)
        return fn.crop_mirror_normalize(images, dtype=types.FLOAT, output_layout="CHW",
                                        mean=[0.485 * 255] * 3, std=[0.229 * 255] * 3)

    server = proxy.DALIServer(pipe())   # the loader starts it at its first batch
    dataset = torchvision.datasets.ImageFolder(root, transform=server.proxy,
                                               loader=path_bytes)
    return proxy.DataLoader(server, dataset, batch_size=args.batch_size,
                            num_workers=args.workers, persistent_workers=True,
                            drop_last=True)


def run(args, rec):
    loader, length = build(args)
    if args.loader == "dali" or args.loader == "named":
        # No worker processes: the analyzer's warm-up is 1 step.
        rec.prefetch_depth = 0
    if args.mode == "replay":
        src = loop.Replay(loader, args.replay_batches, length, drain=True)
    elif args.mode.startswith("le-") and not args.loader.startswith("dali"):
        sys.stderr.write("other_loaders.py: skipped: LoaderEvaluator needs len() of what "
                         "it wraps; %s has none\n" % args.loader)
        sys.exit(loop.SKIP_STATUS)
    else:
        src = loop.source(args, rec, loader, length)
    for _ in range(args.epochs):
        rec.epoch_start()
        for batch in src:
            rec.fetched()
            rec.work(batch)
            if args.loop_py_ms > 0:
                python_spin(args.loop_py_ms)
            rec.step_end()
        rec.le_epoch_done()
    if args.loader.startswith("nodes-"):
        shutdown_nodes(loader)


def shutdown_nodes(loader):
    """Stop and join nodes' mapper threads or processes before the record
    is made: the CPU of children still alive would count as other
    programs' load (getrusage sees reaped children only)."""
    seen, todo = set(), [loader]
    while todo:
        obj = todo.pop()
        if obj is None or id(obj) in seen:
            continue
        seen.add(id(obj))
        if hasattr(obj, "_shutdown"):
            obj._shutdown()
        d = getattr(obj, "__dict__", None) or {}
        todo.extend(d.get(name) for name in ("root", "source", "_source", "_it"))


def main():
    sys.path.insert(0, os.path.join(loop.TESTS, "e2e"))
    status = loop.main(__doc__.split("\n")[0], presets, run=run, add_args=add_args)
    if "--loader" in sys.argv and sys.argv[sys.argv.index("--loader") + 1] in (
            "nodes-thread", "named", "dali-proxy"):
        # The record is written.  An interpreter exit while nodes' mapper
        # threads (or the producer) are still alive can abort in torch's C++
        # destructors ("terminate called without an active exception"),
        # and one with DALI's proxy server thread alive can hang in its
        # teardown, with or without dlbn: leave without that teardown.
        # (nodes' process workers are shut down the ordinary way: an _exit
        # would leave them holding the output pipes; the proxy's DataLoader
        # workers leave when their parent is gone.)
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(status)
    return status


if __name__ == "__main__":
    sys.exit(main())
