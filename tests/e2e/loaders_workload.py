"""A training loop fed by a loader that is not torch's DataLoader.

    loaders_workload.py KIND --loop-ms MS [--sleep] --steps N --json-out F

KIND
  nodes-process  torchdata.nodes: SamplerWrapper -> ParallelMapper(2 process
                 workers, 6 ms of CPU per sample) -> Batcher(4) -> Mapper
                 (torch.stack) -> Prefetcher(2) -> Loader
  nodes-thread   the same with thread workers (sleeping 6 ms per sample:
                 I/O-like work that releases the GIL)
  nodes-gil      the same with thread workers running 6 ms of pure Python
                 per sample (they hold the GIL, which the loop needs too;
                 the loop's own work is then MS of its thread's CPU time)
  named          a generator fed by a background thread through queue.Queue
                 (loaders_feeder.prefetched: 20 ms per batch), for
                 DLBN_LOADER=loaders_feeder:prefetched
  named-gil      the same with a producer running pure Python (it holds the
                 GIL; the loop's own work is then MS of its thread's CPU time)
  unnamed        the same generator, not named
  dali           DALI's DALIGenericIterator over a CPU-only pipeline (file
                 reader -> decoders.image -> resize -> crop_mirror_normalize,
                 2 threads, batch 8) over 64 JPEGs it writes
  dali-proxy     DALI's proxy DataLoader (2 persistent workers reading each
                 sample's path, an ImageFolder of the same JPEGs, each 4 times
                 an epoch) feeding the same CPU pipeline run by a DALIServer
                 in this process

The loop does MS of its thread's CPU time per step (--sleep: sleeps MS, the GPU's time
as the host sees it, no CPU).  It bounds itself at N steps (Replay of a
loader without len() serves batches without end).  The JSON holds the
monotonic time at the end of every step, so that a Real and a Replay run
can be compared over the same steps.
"""
import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def sample_cpu(i):
    t = time.process_time()
    while time.process_time() - t < 0.006:
        pass
    import torch
    return torch.full((16,), float(i))


def sample_sleep(i):
    time.sleep(0.006)
    import torch
    return torch.full((16,), float(i))


def python_spin(seconds):
    """Pure-Python work for `seconds` of this thread's CPU time."""
    t = time.thread_time()
    while time.thread_time() - t < seconds:
        sum(range(200))


def sample_python(i):
    python_spin(0.006)
    import torch
    return torch.full((16,), float(i))


def nodes_loader(kind, steps):
    import torch
    import torchdata.nodes as tn
    node = tn.SamplerWrapper(torch.utils.data.SequentialSampler(range((steps + 8) * 4)))
    work = {"process": sample_cpu, "thread": sample_sleep, "gil": sample_python}[kind]
    node = tn.ParallelMapper(node, map_fn=work, num_workers=2,
                             method="process" if kind == "process" else "thread")
    node = tn.Batcher(node, batch_size=4)
    node = tn.Mapper(node, torch.stack)
    node = tn.Prefetcher(node, prefetch_factor=2)
    return tn.Loader(node)


def make_jpegs(root, n, size):
    import numpy as np
    from PIL import Image
    d = os.path.join(root, "c0")
    os.makedirs(d, exist_ok=True)
    rng = np.random.default_rng(0)
    for i in range(n):
        path = os.path.join(d, "%04d.jpg" % i)
        if not os.path.exists(path):
            Image.fromarray(rng.integers(0, 255, (size, size, 3), dtype=np.uint8)).save(
                path, quality=90)


def dali_loader():
    root = os.path.abspath("jpegs")
    make_jpegs(root, 64, 512)
    from nvidia.dali import fn, pipeline_def, types
    from nvidia.dali.plugin.pytorch import DALIGenericIterator

    @pipeline_def(batch_size=8, num_threads=2, device_id=None)
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


def dali_proxy_loader():
    import numpy as np
    import torchvision
    from nvidia.dali import fn, pipeline_def, types
    from nvidia.dali.plugin.pytorch.experimental import proxy
    root = os.path.abspath("jpegs")
    make_jpegs(root, 64, 512)

    @pipeline_def(batch_size=8, num_threads=2, device_id=None, prefetch_queue_depth=4)
    def pipe():
        paths = fn.external_source(name="images", no_copy=True)
        images = fn.decoders.image(fn.io.file.read(paths), device="cpu")
        images = fn.resize(images, resize_x=224, resize_y=224)
        return fn.crop_mirror_normalize(images, dtype=types.FLOAT, output_layout="CHW",
                                        mean=[0.485 * 255] * 3, std=[0.229 * 255] * 3)

    def path_bytes(path):
        return np.frombuffer(path.encode(), dtype=np.int8)

    from torch.utils.data import Subset
    server = proxy.DALIServer(pipe())   # the loader starts it at its first batch
    dataset = torchvision.datasets.ImageFolder(root, transform=server.proxy,
                                               loader=path_bytes)
    dataset = Subset(dataset, list(range(len(dataset))) * 4)  # epochs longer than the run
    return proxy.DataLoader(server, dataset, batch_size=8, num_workers=2, drop_last=True,
                            persistent_workers=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("kind")
    ap.add_argument("--loop-ms", type=float, default=2.0)
    ap.add_argument("--sleep", action="store_true")
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--json-out", required=True)
    args = ap.parse_args()
    import torch  # noqa: F401  (the bootstrap patches as torch loads)
    if args.kind.startswith("nodes-"):
        epochs = [nodes_loader(args.kind[6:], args.steps)]
    elif args.kind in ("named", "unnamed", "named-gil"):
        import loaders_feeder
        work = "python" if args.kind == "named-gil" else "sleep"
        epochs = [loaders_feeder.prefetched(args.steps + 8, work=work)]
    elif args.kind in ("dali", "dali-proxy"):
        it = dali_loader() if args.kind == "dali" else dali_proxy_loader()
        epochs = [it] * (args.steps // max(len(it), 1) + 2)
    else:
        ap.error("unknown kind %r" % args.kind)
    times = []
    for loader in epochs:
        for batch in loader:
            if args.sleep:
                time.sleep(args.loop_ms / 1000.0)
            elif args.kind in ("nodes-gil", "named-gil"):
                python_spin(args.loop_ms / 1000.0)
            else:
                # A fixed amount of the thread's CPU time, as host work
                # costs: queued behind the loader's threads, it takes
                # longer, which Replay gives back.
                t = time.thread_time()
                while time.thread_time() - t < args.loop_ms / 1000.0:
                    pass
            times.append(time.monotonic())
            if len(times) == args.steps:
                break
        if len(times) == args.steps:
            break
    with open(args.json_out, "w") as f:
        json.dump({"step_times": times}, f)
    # Leave without tearing down what the loop left running (nodes' and the
    # feeder's threads, DALI's pipeline mid-epoch): an interpreter exit with
    # them alive can abort in torch's C++ destructors, which is no part of
    # what is measured.  libdlbn completes the trace at _exit too.
    # Process workers are shut down the ordinary way (an _exit would leave
    # them holding the output pipes).
    if args.kind != "nodes-process":
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)


if __name__ == "__main__":
    main()
