"""scenarios.py - the eval suite's workloads (eval_workload.py arguments),
each with what it covers and what its ground truth was built to be.

The ground truth is never this file's word: every scenario's speedup S is
measured (Real time / Replay time) and the expected verdict is S's class.
`built_for` only documents the design, so that a reader can tell when the
machine did not produce the workload it was meant to (e.g. a busy machine).

Parameters are chosen for a stable S on a 2-core machine: storage is sleep,
GPU work is the simulated driver's virtual timeline (no CPU), CPU-bound
loading uses one worker so that the loop keeps a core, and each Real loop
lasts about a second (50 steps after start-up) - except the two threshold
scenarios, whose point is an S close to 1.10 and 1.50.

Times per step below: "supply" is what the workers deliver a batch in
(batch_size x per-sample time / num_workers), "GPU" the kernel.

PIPELINES (after SCENARIOS) are the real input pipelines of
tests/support/pipelines/ (torchvision, timm, Hugging Face datasets, ...): a
scenario with a `program` runs that program instead of eval_workload.py, with
the same --mode and --json-out (and --data-dir, where it makes and caches its
JPEGs), and its args; `--setting input|compute` picks the program's preset,
other knobs override it.  Their runs take several seconds each (decoding real
JPEGs), and one run moves by 10-20% on 2 cores, so they run PIPELINE_ROUNDS
rounds like the synthetic ones (`rounds`, a cap on --rounds: 1 gives a quicker,
noisier eval).  A program whose packages do not import under an interpreter
exits 77: skipped there.
"""

# Loader knobs shared by most scenarios: 50 steps of 4 samples of 16 KiB.
BASE = ["--steps-per-epoch", "50", "--batch-size", "4"]

SCENARIOS = [
    dict(name="storage_bound",
         covers="storage-bound: sleep in __getitem__; supply 20 ms vs GPU 5 ms",
         built_for="DETECTED (~4x)",
         args=BASE + ["--workers", "2", "--sample-ms", "10", "--kernel-us", "5000",
                      "--h2d-kib", "64", "--host-ms", "1"]),
    dict(name="cpu_transform",
         covers="CPU-transform-bound: busy CPU in 1 worker (2 cores); supply 16 ms "
                "vs GPU 6 ms",
         built_for="DETECTED (~2.5x)",
         args=["--steps-per-epoch", "50", "--batch-size", "2", "--workers", "1",
               "--sample-cpu-ms", "8", "--kernel-us", "6000", "--h2d-kib", "32",
               "--host-ms", "1"]),
    dict(name="ipc_heavy",
         covers="IPC-heavy: 16 x 256 KiB cheap samples per batch (4 MiB), 2 workers, "
                "GPU 3 ms",
         built_for="DETECTED (~1.7-2x): hand-off and the workers' CPU are the cost",
         args=["--steps-per-epoch", "100", "--batch-size", "16", "--sample-kib", "256",
               "--workers", "2", "--kernel-us", "3000", "--h2d-kib", "64",
               "--host-ms", "0.5"]),
    dict(name="pin_memory",
         covers="pin-memory thread path (CPU stand-in), pinned H2D; supply 16 ms vs "
                "GPU 6 ms",
         built_for="DETECTED (~2.5x)",
         args=BASE + ["--workers", "2", "--sample-ms", "8", "--pin-memory-standin",
                      "--kernel-us", "6000", "--h2d-kib", "64", "--host-ms", "0.5"]),
    dict(name="spawn",
         covers="spawn context, persistent workers; supply 14 ms vs GPU 8 ms",
         built_for="DETECTED (~1.75x)",
         args=BASE + ["--workers", "2", "--context", "spawn", "--persistent",
                      "--sample-ms", "7", "--kernel-us", "8000", "--h2d-kib", "64"]),
    dict(name="iterable",
         covers="IterableDataset, 2 worker shards; supply 12 ms vs GPU 10 ms",
         built_for="POTENTIAL (~1.2x)",
         args=BASE + ["--workers", "2", "--iterable", "--sample-ms", "6",
                      "--kernel-us", "10000", "--h2d-kib", "64"]),
    dict(name="epochs_nonpersistent",
         covers="non-persistent workers, 5 epochs x 12 steps, sync each step: workers "
                "re-started every epoch; supply 6 ms vs GPU 8 ms",
         built_for="POTENTIAL: only the epoch start-ups stall",
         args=["--epochs", "5", "--steps-per-epoch", "12", "--batch-size", "4",
               "--workers", "2", "--sample-ms", "3", "--kernel-us", "8000",
               "--sync", "step", "--h2d-kib", "64"]),
    dict(name="workers0",
         covers="num_workers=0: loading in the main thread, 16 ms vs GPU 8 ms",
         built_for="DETECTED (~2x)",
         args=BASE + ["--workers", "0", "--sample-ms", "4", "--kernel-us", "8000",
                      "--h2d-kib", "64"]),
    dict(name="compute_sync",
         covers="compute-bound, stream sync each step (loss.item()); supply 20 ms vs "
                "GPU 40 ms",
         built_for="NOT_DETECTED (1.0x)",
         args=["--steps-per-epoch", "40", "--batch-size", "1", "--workers", "1",
               "--sample-ms", "20", "--kernel-us", "40000", "--sync", "step"]),
    dict(name="compute_ahead",
         covers="compute-bound, host runs ahead (no sync): long loader waits while "
                "the GPU is busy; supply 40 ms vs GPU 60 ms",
         built_for="NOT_DETECTED (1.0x)",
         args=["--steps-per-epoch", "30", "--batch-size", "1", "--workers", "1",
               "--sample-ms", "40", "--kernel-us", "60000"]),
    dict(name="host_bound",
         covers="host-bound: 30 ms other host work per step, GPU 5 ms, supply 2.5 ms",
         built_for="NOT_DETECTED (1.0x)",
         args=["--steps-per-epoch", "40", "--batch-size", "1", "--workers", "2",
               "--sample-ms", "5", "--kernel-us", "5000", "--host-ms", "30"]),
    dict(name="pageable_h2d",
         covers="64 MiB pageable H2D copy per step (host blocks), GPU 10 ms, "
                "supply 2.5 ms",
         built_for="NOT_DETECTED (1.0x)",
         args=["--steps-per-epoch", "40", "--batch-size", "1", "--workers", "2",
               "--sample-ms", "5", "--h2d-kib", "65536", "--h2d-pageable",
               "--kernel-us", "10000"]),
    dict(name="near_1.10",
         covers="near the 1.10 threshold: supply 10.5 ms (+ hand-off) vs GPU 10 ms",
         built_for="S close to 1.10",
         args=["--steps-per-epoch", "60", "--batch-size", "4", "--workers", "2",
               "--sample-ms", "5.25", "--kernel-us", "10000", "--h2d-kib", "64"]),
    dict(name="near_1.50",
         covers="near the 1.50 threshold: supply 14 ms (+ hand-off) vs GPU 10 ms",
         built_for="S close to 1.50",
         args=["--steps-per-epoch", "60", "--batch-size", "4", "--workers", "2",
               "--sample-ms", "7", "--kernel-us", "10000", "--h2d-kib", "64"]),
    dict(name="direct_input",
         covers="direct-link reach path (PLT calls into libcuda): storage-bound, "
                "supply 16 ms vs GPU 6 ms",
         built_for="DETECTED (~2.7x)",
         args=BASE + ["--gpu", "direct", "--workers", "2", "--sample-ms", "8",
                      "--kernel-us", "6000", "--h2d-kib", "64", "--host-ms", "1"]),
    dict(name="direct_compute",
         covers="direct-link reach path: compute-bound with a sync each step",
         built_for="NOT_DETECTED (1.0x)",
         args=["--steps-per-epoch", "40", "--batch-size", "1", "--gpu", "direct",
               "--workers", "1", "--sample-ms", "20", "--kernel-us", "40000",
               "--sync", "step"]),
    # Batches of real size: the costs of a batch that land outside next()
    # (unmapping the previous batch's shared memory, first touch of the new
    # one, the loop queued behind busy workers) are what Replay removes too.
    dict(name="big_fork",
         covers="32 MiB batches (8 x 4 MiB samples, no per-sample work), 2 fork "
                "workers, every page read by the step (pageable H2D), GPU 6 ms",
         built_for="the hand-off of large batches: S well above 1",
         args=["--steps-per-epoch", "40", "--batch-size", "8", "--sample-kib", "4096",
               "--workers", "2", "--touch", "pages", "--h2d-kib", "64",
               "--kernel-us", "6000"]),
    dict(name="big_spawn",
         covers="the same 32 MiB batches from 2 spawn workers (persistent)",
         built_for="as big_fork",
         torch_min=("2.0", "torch 1.13's spawn workers abort (std::terminate) as the plain "
                    "Replay run lets them go after caching 32 MiB batches: no ground truth"),
         args=["--steps-per-epoch", "40", "--batch-size", "8", "--sample-kib", "4096",
               "--workers", "2", "--context", "spawn", "--persistent", "--touch", "pages",
               "--h2d-kib", "64", "--kernel-us", "6000"]),
    dict(name="big_pinned",
         covers="32 MiB batches through the pin-memory thread (stand-in copy into "
                "pinned memory), pinned H2D of the whole batch (3.4 ms), GPU 4 ms",
         built_for="as big_fork, the first touch moved to the pin-memory thread",
         args=["--steps-per-epoch", "40", "--batch-size", "8", "--sample-kib", "4096",
               "--workers", "2", "--pin-memory-standin", "--touch", "pages",
               "--h2d-kib", "32768", "--kernel-us", "4000"]),
    dict(name="image_batch",
         covers="16 x 3 x 224 x 224 float batches (9.2 MiB), 4 ms of CPU per sample "
                "in 2 workers (decode-like), pages read by the step, GPU 10 ms",
         built_for="DETECTED: decode-bound with ImageNet-size batches",
         args=["--steps-per-epoch", "30", "--batch-size", "16", "--sample-kib", "588",
               "--sample-cpu-ms", "4", "--workers", "2", "--touch", "pages",
               "--h2d-kib", "64", "--kernel-us", "10000"]),
]

# ---------------------------------------------------------------------------
# Real pipelines (tests/support/pipelines/, loop.py's modes and record).

PIPELINE_ROUNDS = 3


def pipeline(name, program, args, covers, built_for):
    return dict(name=name, program="tests/support/pipelines/%s.py" % program,
                args=args, covers=covers, built_for=built_for, rounds=PIPELINE_ROUNDS)


PIPELINES = [
    pipeline("torchvision_input", "torchvision_imagefolder", ["--setting", "input"],
             "torchvision ImageFolder + ImageNet training transforms over JPEGs, "
             "shuffling DataLoader; input preset",
             "DETECTED (decode-bound)"),
    pipeline("torchvision_potential", "torchvision_imagefolder",
             ["--setting", "compute", "--steps", "60", "--image-size", "320x240",
              "--batch-size", "8", "--workers", "2", "--sync", "none",
              "--kernel-us", "6500"],
             "torchvision ImageFolder, 320x240 JPEGs, 8 per batch, 2 workers (about "
             "5 ms of decoding per batch), GPU 6.5 ms, no sync",
             "POTENTIAL (supply a little slower than the GPU)"),
    pipeline("torchvision_compute", "torchvision_imagefolder", ["--setting", "compute"],
             "torchvision ImageFolder; compute preset (long kernel)",
             "NOT_DETECTED (1.0x)"),
    pipeline("timm_input", "timm_loader", ["--setting", "input"],
             "timm create_dataset/create_loader (its training transforms, fast_collate, "
             "PrefetchLoader, persistent workers); input preset",
             "DETECTED"),
    pipeline("timm_compute", "timm_loader", ["--setting", "compute"],
             "timm's loader; compute preset",
             "NOT_DETECTED (1.0x)"),
    pipeline("hf_input", "hf_datasets", ["--setting", "input"],
             "Hugging Face datasets from Arrow on disk, set_transform (decode + ImageNet "
             "transforms per batch); input preset",
             "DETECTED"),
    pipeline("hf_compute", "hf_datasets", ["--setting", "compute"],
             "Hugging Face datasets, with_format(\"torch\"); compute preset",
             "NOT_DETECTED (1.0x)"),
    pipeline("wds_input", "webdataset_shards", ["--setting", "input"],
             "WebDataset tar shards (IterableDataset: decode, transforms and batched() in "
             "the workers, DataLoader(batch_size=None)); input preset",
             "DETECTED"),
    pipeline("wds_compute", "webdataset_shards", ["--setting", "compute"],
             "WebDataset shards; compute preset",
             "NOT_DETECTED (1.0x)"),
    pipeline("torchdata_input", "torchdata_stateful", ["--setting", "input"],
             "torchdata StatefulDataLoader over ImageFolder, state_dict() every 10 steps; "
             "input preset",
             "DETECTED"),
    pipeline("torchdata_compute", "torchdata_stateful", ["--setting", "compute"],
             "torchdata StatefulDataLoader; compute preset",
             "NOT_DETECTED (1.0x)"),
    pipeline("lightning_input", "lightning_fit", ["--setting", "input"],
             "Lightning Trainer.fit (its fetcher and loops), train + val loaders, epochs "
             "with validation and the sanity check; input preset",
             "DETECTED"),
    pipeline("lightning_compute", "lightning_fit", ["--setting", "compute"],
             "Lightning Trainer.fit; compute preset (persistent workers)",
             "NOT_DETECTED (1.0x)"),
    pipeline("train_val_input", "train_val", ["--setting", "input"],
             "pytorch/examples imagenet/main.py shape: train + val loaders, validation "
             "every epoch, pin_memory, loss.item() every step; input preset",
             "DETECTED"),
    pipeline("train_val_compute", "train_val", ["--setting", "compute"],
             "imagenet/main.py shape; compute preset (persistent workers, long kernel)",
             "NOT_DETECTED (~1.05x)"),
    pipeline("train_val_zipped", "train_val", ["--setting", "input", "--zipped"],
             "two training loaders zipped (labelled + unlabelled, FixMatch-like) and a "
             "val loader; input preset",
             "DETECTED"),
    # A model trained on the CPU on 2 intra-op threads (Debian's torch 1.13
    # defaults to 1): its threads and the workers share the two cores, and
    # the loop's own work runs slower for it.
    pipeline("cpu_train_input", "cpu_train", ["--setting", "input", "--threads", "2"],
             "torchvision mobilenet_v3_small trained on the CPU (torch's intra-op "
             "threads) over 1600x1200 JPEGs, train + val loaders, 2 workers each",
             "DETECTED (the model's threads share the cores with the workers)"),
    pipeline("cpu_train_heavy", "cpu_train",
             ["--setting", "input", "--image-size", "2400x1800", "--threads", "2"],
             "mobilenet_v3_small on the CPU over 2400x1800 JPEGs, 2 workers: decoding "
             "dwarfs the step",
             "DETECTED (~5-6)"),
    pipeline("cpu_train_balanced", "cpu_train", ["--setting", "balanced", "--threads", "2"],
             "mobilenet_v3_small on the CPU over 640x480 JPEGs, 2 workers",
             "POTENTIAL (~1.2)"),
    pipeline("cpu_train_compute", "cpu_train", ["--setting", "compute", "--threads", "2"],
             "resnet18 on the CPU over 320x240 JPEGs, 1 worker",
             "NOT_DETECTED (~1.0)"),
]

# ---------------------------------------------------------------------------
# Loaders other than torch's DataLoader
# (tests/support/pipelines/other_loaders.py).
# LoaderEvaluator wraps what has len(): DALI's iterators, not nodes' Loader
# nor a generator ("le": False, its column says n/a).


def other_loader(name, loader, setting, covers, built_for, le=False, env=None, extra=()):
    return dict(name=name, program="tests/support/pipelines/other_loaders.py",
                args=["--loader", loader, "--setting", setting] + list(extra), covers=covers,
                built_for=built_for, rounds=PIPELINE_ROUNDS, le=le, env=env or {})


NAMED = {"DLBN_LOADER": "loaders_feeder:prefetched"}
OTHER_LOADERS = [
    other_loader("nodes_process_input", "nodes-process", "input",
                 "torchdata.nodes ParallelMapper, 2 process workers (5 ms of CPU per "
                 "sample, 4 per batch), Prefetcher, Loader; GPU 3 ms",
                 "DETECTED (~3x)"),
    other_loader("nodes_process_compute", "nodes-process", "compute",
                 "torchdata.nodes, process workers; GPU 30 ms with a sync each step",
                 "NOT_DETECTED (1.0x)"),
    other_loader("nodes_thread_input", "nodes-thread", "input",
                 "torchdata.nodes ParallelMapper, 2 thread workers (5 ms of I/O-like "
                 "sleep per sample); GPU 3 ms",
                 "DETECTED (~3x)"),
    other_loader("nodes_thread_compute", "nodes-thread", "compute",
                 "torchdata.nodes, thread workers; GPU 30 ms with a sync each step",
                 "NOT_DETECTED (1.0x)"),
    # Thread workers whose map function is pure Python: they and the loop
    # take turns on the GIL, so the loader's work lengthens the loop's own.
    other_loader("nodes_gil_input", "nodes-thread", "input",
                 "torchdata.nodes, 2 thread workers running 5 ms of pure Python a "
                 "sample (they hold the GIL); GPU 3 ms",
                 "DETECTED (~5x)", extra=["--map-work", "python"]),
    other_loader("nodes_gil_balanced", "nodes-thread", "input",
                 "the same, 2.5 ms a sample, the loop running 10 ms of pure Python a "
                 "step", "DETECTED (~2x: the GIL serialises the loader and the loop)",
                 extra=["--map-work", "python", "--sample-ms", "2.5",
                        "--loop-py-ms", "10"]),
    other_loader("named_input", "named", "input",
                 "a generator fed by a background thread through queue.Queue (20 ms "
                 "a batch), named with DLBN_LOADER; GPU 3 ms",
                 "DETECTED (~6x)", env=NAMED),
    other_loader("named_gil_balanced", "named", "input",
                 "the same producer running 20 ms of pure Python a batch (it holds the "
                 "GIL), the loop 10 ms of pure Python a step; GPU 3 ms",
                 "DETECTED (~3x: the GIL serialises the producer and the loop)", env=NAMED,
                 extra=["--map-work", "python", "--loop-py-ms", "10"]),
    other_loader("named_compute", "named", "compute",
                 "the thread-fed generator, named; GPU 30 ms with a sync each step",
                 "NOT_DETECTED (1.0x)", env=NAMED),
    other_loader("dali_input", "dali", "input",
                 "DALI DALIGenericIterator, CPU-only pipeline (file reader, "
                 "decoders.image, resize, crop_mirror_normalize), 2 threads, 8 JPEGs of "
                 "480x360 a batch; GPU 5 ms",
                 "DETECTED", le=True),
    other_loader("dali_compute", "dali", "compute",
                 "the DALI pipeline; GPU 90 ms with a sync each step",
                 "NOT_DETECTED (1.0x)", le=True),
    other_loader("dali_proxy_input", "dali-proxy", "input",
                 "DALI's proxy DataLoader: 2 persistent workers read the samples' "
                 "paths, a DALIServer runs the same CPU pipeline in the training process "
                 "(2 threads); GPU 5 ms",
                 "DETECTED", le=True),
    other_loader("dali_proxy_compute", "dali-proxy", "compute",
                 "the DALI proxy DataLoader; GPU 90 ms with a sync each step",
                 "NOT_DETECTED (1.0x)", le=True),
]

SCENARIOS = SCENARIOS + PIPELINES + OTHER_LOADERS
