"""torchvision_imagefolder.py - torchvision's ImageFolder over JPEGs with the
ImageNet training transforms (RandomResizedCrop(224), RandomHorizontalFlip,
ToTensor, Normalize), a shuffling torch DataLoader, and the training loop of
loop.py (modes, knobs, record and exit status: see loop.py).

    torchvision_imagefolder.py --setting input|compute --mode real|replay|le-log|le-replay
                               [--json-out FILE] [--workers N] [--batch-size B]
                               [--steps S] [--epochs E] [--image-size WxH]
                               [--kernel-us U] [--persistent] ...

The tree holds exactly steps x batch_size pictures, so an epoch is --steps
steps.  Presets (per-sample cost on these 2-core machines: about 2.7 ms at
640x480, 1.3 ms at 320x240, decode and transforms):
  input    640x480, 16 per batch, 2 workers, 4 ms kernel: the workers need
           about 45 ms of CPU per batch each, the GPU 4 ms -> Replay ~5x;
  compute  320x240, 8 per batch, 2 workers, 40 ms kernel, no sync (the host
           runs ahead of the GPU): loading ~10 ms per batch per worker, well
           under the kernel -> Replay ~1.0x.  (train_val.py has the loop that
           synchronises every step.)
"""

import sys

import loop

PRESETS = {
    "input": dict(image_size="640x480", batch_size=16, workers=2, steps=30, kernel_us=4000),
    "compute": dict(image_size="320x240", batch_size=8, workers=2, steps=30, kernel_us=40000),
}


def add_args(ap):
    ap.add_argument("--persistent", action="store_true", help="persistent_workers=True")


def build(args):
    loop.require("torchvision")
    import data
    from torch.utils.data import DataLoader
    from torchvision.datasets import ImageFolder
    root = data.imagefolder(args.data_dir, args.steps * args.batch_size, size=args.image_size)
    dataset = ImageFolder(root, transform=data.imagenet_train_transform())
    kwargs = loop.loader_kwargs(args)
    if args.workers > 0:
        kwargs["persistent_workers"] = args.persistent
    return DataLoader(dataset, shuffle=True, drop_last=True, **kwargs)


if __name__ == "__main__":
    sys.exit(loop.main(__doc__.split("\n")[0], PRESETS, build=build, add_args=add_args))
