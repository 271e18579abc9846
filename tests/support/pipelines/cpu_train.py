"""cpu_train.py - a torchvision model trained on the CPU: the first try of a
data-loading tool on a laptop, or any job whose workers and model share too
few cores.  ImageFolder trees of JPEGs with the ImageNet training transforms
(RandomResizedCrop(--crop), flip, ToTensor, Normalize) for training and
resize / centre crop for validation, a shuffling DataLoader with -j workers
for each, an SGD step of --model per training batch (forward, cross-entropy,
backward, step) and a no-grad forward per validation batch, validation
after every epoch.  No GPU: the model's own work is CPU work on torch's
intra-op threads (--threads, default torch's own count), competing with the
loader's workers for the cores.  Loop, modes, record and exit status:
loop.py's.

    cpu_train.py --setting input|balanced|compute --mode real|replay
                 [--model mobilenet_v3_small|resnet18|...] [--crop C]
                 [--threads N] [--json-out FILE] [loop.py's knobs]

Presets (2-core machines; S is the Replay speedup they are built for):
  input     1600x1200 JPEGs, mobilenet_v3_small at 128 px, 8 per batch:
            decoding a large JPEG costs far more than the small model's
            step, and the step itself runs slower while workers hold the
            cores -> S ~3-4;
  balanced  640x480, mobilenet_v3_small at 160 px, 8 per batch -> S ~1.3;
  compute   320x240, resnet18 at 160 px, 8 per batch, 1 worker, 40 steps
            (16 left S to the run-to-run spread of a 2-core machine:
            1.04-1.19 across runs) -> S ~1.0-1.1.
`--setting input --image-size 2400x1800` decodes 2.25 times the pixels a
batch for the same step -> S ~5-6 (eval's cpu_train_heavy).
Debian's torch 1.13 (no MKL) runs these models about 3 times slower: under
torch 1 the crops are 64, 96 and 112 px, for about the same balance.
"""

import sys

import loop

PRESETS = {
    "input": dict(image_size="1600x1200", batch_size=8, workers=2, steps=24, epochs=1,
                  val_steps=3, gpu="none", model="mobilenet_v3_small", crop=128),
    "balanced": dict(image_size="640x480", batch_size=8, workers=2, steps=24, epochs=1,
                     val_steps=3, gpu="none", model="mobilenet_v3_small", crop=160),
    "compute": dict(image_size="320x240", batch_size=8, workers=1, steps=40, epochs=1,
                    val_steps=3, gpu="none", model="resnet18", crop=160),
}


# Under torch 1: the crop that keeps the preset's balance (see above).
TORCH1_CROP = {"input": 64, "balanced": 96, "compute": 112}


def presets(pre):
    knobs = dict(PRESETS[pre.setting])
    import torch
    if int(torch.__version__.split(".")[0]) < 2:
        knobs["crop"] = TORCH1_CROP[pre.setting]
    return knobs


presets.settings = tuple(PRESETS)


def add_args(ap):
    ap.add_argument("--model", help="a torchvision.models constructor name")
    ap.add_argument("--crop", type=int, help="training crop (validation: the same)")
    ap.add_argument("--threads", type=int, default=None,
                    help="torch.set_num_threads (default: torch's own count)")


def loaders(args):
    loop.require("torchvision")
    import data
    from torch.utils.data import DataLoader
    from torchvision.datasets import ImageFolder
    kwargs = loop.loader_kwargs(args)
    bs = args.batch_size
    train = ImageFolder(data.imagefolder(args.data_dir, args.steps * bs, size=args.image_size),
                        transform=data.imagenet_train_transform(args.crop))
    val = ImageFolder(data.imagefolder(args.data_dir, args.val_steps * bs, size=args.image_size,
                                       split="val"),
                      transform=data.imagenet_val_transform(args.crop))
    return (DataLoader(train, shuffle=True, drop_last=True, **kwargs),
            DataLoader(val, shuffle=False, **kwargs))


def run(args, rec):
    import torch
    import torchvision
    if args.threads:
        torch.set_num_threads(args.threads)
    rec.record["threads"] = torch.get_num_threads()
    model = getattr(torchvision.models, args.model)(num_classes=4)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    loss_fn = torch.nn.CrossEntropyLoss()
    train, val = loaders(args)
    train_src = loop.source(args, rec, train)
    val_src = loop.source(args, rec, val, train=False)
    for _ in range(args.epochs):
        rec.epoch_start()
        model.train()
        for images, labels in train_src:
            rec.fetched()
            loss = loss_fn(model(images), labels)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            loss.item()
            rec.step_end()
        model.eval()
        with torch.no_grad():
            for images, _ in val_src:
                rec.record["val_batches"] += 1
                model(images).argmax(1)


if __name__ == "__main__":
    sys.exit(loop.main(__doc__.split("\n")[0], presets, run=run, add_args=add_args,
                       threads=None))
