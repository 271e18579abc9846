"""train_val.py - a training script with a train and a val DataLoader, in
the shape of pytorch/examples imagenet/main.py: torchvision ImageFolder
trees, the ImageNet training transforms for training and resize 256 /
centre crop 224 for validation, pin_memory=True and -j workers on both
loaders (not persistent), and validation after every epoch; the loss is
read every step (loss.item(): a sync) in training and in validation, as
main.py's AverageMeters do.  --zipped trains on two loaders zipped, a
labelled and an unlabelled one (semi-supervised training, FixMatch-like:
the unlabelled batch is --unlabelled-ratio times larger), still validating
after every epoch.  The loop's clock, modes, knobs, record and exit status
are loop.py's; the record's steps are the training steps (validation
batches are counted in val_batches), its window spans the validations
between the training epochs, as Replay caches every loader.

    train_val.py --setting input|compute --mode real|replay|le-log|le-replay
                 [--zipped] [--unlabelled-ratio R] [--json-out FILE] ...

On CPU-only torch pin_memory=True has no effect (torch 2 warns once; the
warning is silenced).  Presets (2 epochs):
  input    640x480, 8 per batch (x2 unlabelled), 2 workers per loader (not
           persistent: main.py's), 4 ms kernel -> ~10x;
  compute  320x240, 4 per batch (x2 unlabelled), 1 persistent worker per
           loader, 150 ms kernel, 16 steps per epoch -> ~1.06x (80 ms gave
           1.11 on an Intel Xeon VM: the validation fetches and the epoch
           start cost ~0.17 s whatever the kernel); --zipped:
           250 ms kernel, 10 steps per epoch -> ~1.06x (140 ms gave 1.11-1.12
           on an Intel Xeon VM: over the 1.10 the preset is built for).
           Persistent, because with
           main.py's workers every epoch and every validation starts its
           workers again while the GPU (synchronised) idles: on epochs this
           short (20 steps) that alone costs ~10% (~1.10x), where an
           ImageNet epoch of thousands of steps hides it.
"""

import sys

import loop

PRESETS = {
    "input": dict(image_size="640x480", batch_size=8, workers=2, steps=20, epochs=2,
                  val_steps=3, kernel_us=4000, sync="step"),
    "compute": dict(image_size="320x240", batch_size=4, workers=1, steps=16, epochs=2,
                    val_steps=3, kernel_us=150000, sync="step", persistent=1),
}
# --zipped, compute: two hand-offs per step (each ~3-5 ms here: the fd of a
# batch comes from a worker's resource-sharer thread, which waits for the
# GIL while that worker decodes) would be 5% of a 150 ms step: a longer
# kernel over fewer steps keeps the loading share small.
ZIPPED = {"compute": dict(kernel_us=250000, steps=10)}
loop.BASE.setdefault("persistent", 0)


def presets(pre):
    knobs = dict(PRESETS[pre.setting])
    if pre.zipped:
        knobs.update(ZIPPED.get(pre.setting, {}))
    return knobs


def add_args(ap):
    ap.add_argument("--zipped", action="store_true",
                    help="train on a labelled and an unlabelled loader zipped")
    ap.add_argument("--persistent", type=int, choices=(0, 1),
                    help="persistent_workers on every loader (main.py: 0)")
    ap.add_argument("--unlabelled-ratio", type=int, default=2,
                    help="unlabelled batch size / labelled batch size (--zipped)")


def loaders(args):
    loop.require("torchvision")
    import warnings

    import data
    from torch.utils.data import DataLoader
    from torchvision.datasets import ImageFolder
    warnings.filterwarnings("ignore", ".*pin_memory.*")
    warnings.filterwarnings("ignore", "CUDA initialization.*")
    kwargs = loop.loader_kwargs(args)
    kwargs["pin_memory"] = True
    if args.workers > 0:
        kwargs["persistent_workers"] = bool(args.persistent)

    def folder(count, split, transform):
        return ImageFolder(data.imagefolder(args.data_dir, count, size=args.image_size,
                                            split=split), transform=transform)

    bs = args.batch_size
    train = DataLoader(folder(args.steps * bs, "train", data.imagenet_train_transform()),
                       shuffle=True, **kwargs)
    val = DataLoader(folder(args.val_steps * bs, "val", data.imagenet_val_transform()),
                     shuffle=False, **kwargs)
    unlabelled = None
    if args.zipped:
        ukwargs = dict(kwargs, batch_size=bs * args.unlabelled_ratio)
        unlabelled = DataLoader(folder(args.steps * bs * args.unlabelled_ratio, "unlabelled",
                                       data.imagenet_train_transform()),
                                shuffle=True, drop_last=True, **ukwargs)
    return train, unlabelled, val


def run(args, rec):
    train, unlabelled, val = loaders(args)
    train_src = loop.source(args, rec, train)
    unl_src = loop.source(args, rec, unlabelled, train=False) if unlabelled is not None else None
    val_src = loop.source(args, rec, val, train=False)
    for _ in range(args.epochs):
        rec.epoch_start()
        batches = zip(train_src, unl_src) if unl_src is not None else train_src
        for batch in batches:
            rec.step(batch)
        rec.le_epoch_done()
        for batch in val_src:
            rec.val_step(batch)
        rec.val_end()


if __name__ == "__main__":
    sys.exit(loop.main(__doc__.split("\n")[0], presets, run=run, add_args=add_args))
