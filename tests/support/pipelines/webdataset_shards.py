"""webdataset_shards.py - WebDataset over tar shards (an IterableDataset):
wds.WebDataset(shards) -> shuffle -> decode("pil") -> to_tuple("jpg", "cls")
-> map_tuple(ImageNet training transforms, int) -> batched(B) inside the
workers, and a torch DataLoader(batch_size=None) over it, the way
WebDataset's own examples feed PyTorch.  Each worker reads its own shards
(split_by_worker); the DataLoader takes batches from the workers in turn.
The loop is loop.py's (modes, knobs, record, exit status).

    webdataset_shards.py --setting input|compute --mode real|replay|le-log|le-replay
                         [--shards K] [--json-out FILE] ...

The shards hold steps x batch_size samples in all, --shards of them (default
2 per worker), so that every worker yields whole batches and an epoch is
--steps steps; with_length(steps) gives the loader its len() (which
LoaderEvaluator and Replay need for the epoch length).  Presets:
  input    640x480, 16 per batch, 2 workers, 4 ms kernel -> Replay ~5x;
  compute  320x240, 8 per batch, 2 workers, 40 ms kernel, no sync -> ~1.0x.
"""

import sys

import loop

PRESETS = {
    "input": dict(image_size="640x480", batch_size=16, workers=2, steps=32, kernel_us=4000),
    "compute": dict(image_size="320x240", batch_size=8, workers=2, steps=32, kernel_us=40000),
}


def add_args(ap):
    ap.add_argument("--shards", type=int, default=None,
                    help="number of shards (default 2 per worker, at least 1)")


def label(value):
    return int(value)


def build(args):
    wds = loop.require("webdataset")
    import data
    from torch.utils.data import DataLoader
    shards = args.shards or max(1, 2 * args.workers)
    if args.steps % shards:
        sys.stderr.write("webdataset_shards: --steps (%d) must be a multiple of the shard "
                         "count (%d) so that every worker yields whole batches\n"
                         % (args.steps, shards))
        sys.exit(2)
    import warnings
    warnings.filterwarnings("ignore", message=r"\.with_length\(\) only sets")
    urls = data.wds_shards(args.data_dir, args.steps * args.batch_size, shards,
                           size=args.image_size)
    dataset = (wds.WebDataset(urls, shardshuffle=False, seed=args.seed)
               .shuffle(64, seed=args.seed)
               .decode("pil")
               .to_tuple("jpg", "cls")
               .map_tuple(data.imagenet_train_transform(), label)
               .batched(args.batch_size, partial=False)
               .with_length(args.steps))
    kwargs = dict(batch_size=None, num_workers=args.workers)
    if args.workers > 0:
        kwargs["prefetch_factor"] = args.prefetch_factor
    return DataLoader(dataset, **kwargs)


if __name__ == "__main__":
    sys.exit(loop.main(__doc__.split("\n")[0], PRESETS, build=build, add_args=add_args))
