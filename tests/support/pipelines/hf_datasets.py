"""hf_datasets.py - a Hugging Face datasets Dataset read from Arrow files on
disk (save_to_disk / load_from_disk; columns image = datasets.Image holding
JPEG bytes, label) through a shuffling torch DataLoader, in one of the two
ways its users feed images to PyTorch:
  --hf-format transform  ds.set_transform(fn): fn gets the decoded PIL
                         images of each batch and applies the ImageNet
                         training transforms; a collate_fn stacks
                         pixel_values and labels (transformers'
                         run_image_classification.py does this);
  --hf-format torch      ds.with_format("torch"): datasets decodes each
                         image to a uint8 CHW tensor itself; the default
                         collate stacks them (all pictures share one size).
The loop is loop.py's (modes, knobs, record, exit status).

    hf_datasets.py --setting input|compute --mode real|replay|le-log|le-replay
                   [--hf-format transform|torch] [--json-out FILE] ...

Presets:
  input    set_transform, 640x480, 16 per batch, 2 workers, 4 ms kernel:
           decode + transforms ~45 ms of CPU per batch per worker -> ~5x;
  compute  with_format("torch"), 320x240, 8 per batch, 2 workers, 40 ms
           kernel, no sync (the host runs ahead) -> ~1.0x.
"""

import sys

import loop

PRESETS = {
    "input": dict(image_size="640x480", batch_size=16, workers=2, steps=30, kernel_us=4000,
                  hf_format="transform"),
    "compute": dict(image_size="320x240", batch_size=8, workers=2, steps=30, kernel_us=40000,
                    hf_format="torch"),
}
loop.BASE.setdefault("hf_format", "transform")


def add_args(ap):
    ap.add_argument("--hf-format", choices=("transform", "torch"))


class TrainTransform:
    """set_transform's function: decoded PIL images -> pixel_values."""

    def __init__(self):
        import data
        self.tf = data.imagenet_train_transform()

    def __call__(self, batch):
        batch["pixel_values"] = [self.tf(img.convert("RGB")) for img in batch.pop("image")]
        return batch


def collate(examples):
    import torch
    return (torch.stack([e["pixel_values"] for e in examples]),
            torch.tensor([e["label"] for e in examples]))


def collate_torch(examples):
    import torch
    return (torch.stack([e["image"] for e in examples]),
            torch.stack([e["label"] for e in examples]))


def build(args):
    datasets = loop.require("datasets")
    import data
    from torch.utils.data import DataLoader
    datasets.disable_progress_bars()
    path = data.hf_dataset(args.data_dir, args.steps * args.batch_size, size=args.image_size)
    ds = datasets.load_from_disk(path)
    if args.hf_format == "transform":
        ds.set_transform(TrainTransform())
        fn = collate
    else:
        ds = ds.with_format("torch")
        fn = collate_torch
    return DataLoader(ds, shuffle=True, drop_last=True, collate_fn=fn, **loop.loader_kwargs(args))


if __name__ == "__main__":
    sys.exit(loop.main(__doc__.split("\n")[0], PRESETS, build=build, add_args=add_args))
