"""timm_loader.py - timm's own input pipeline: create_dataset over an image
folder, create_loader with is_training=True (it builds the transforms with
create_transform: RandomResizedCropAndInterpolation, flip, colour jitter
0.4, and with the prefetcher uint8 tensors collated by fast_collate), and
the PrefetchLoader that create_loader wraps around the DataLoader
(use_prefetcher=True: it moves each batch to the device and normalises it
there - on this CPU-only torch, device="cpu", in the main process, as timm
does without CUDA).  The loop iterates the PrefetchLoader, as timm's
train.py does; loop.py has the modes, knobs, record and exit status.

    timm_loader.py --setting input|compute --mode real|replay|le-log|le-replay
                   [--json-out FILE] [--workers N] [--batch-size B] [--steps S] ...

create_loader's defaults hold: persistent_workers=True, drop_last for
training, prefetch_factor 2 (--prefetch-factor is not timm's to take: only
the recorded prefetch depth follows it).  Replay caches what the loop gets,
the PrefetchLoader's normalised batches, and shuts the persistent workers
down.  Presets (timm's training transforms cost about 4.5 ms per 640x480
picture and 2.5 ms per 320x240 one here, colour jitter included):
  input    640x480, 16 per batch, 2 workers, 4 ms kernel -> Replay ~5x;
  compute  320x240, 8 per batch, 2 workers, 40 ms kernel and no sync (timm's
           train.py reads the loss only every log_interval steps): the host
           runs ahead of the GPU -> Replay ~1.0x.
"""

import sys

import loop

PRESETS = {
    "input": dict(image_size="640x480", batch_size=16, workers=2, steps=30, kernel_us=4000),
    "compute": dict(image_size="320x240", batch_size=8, workers=2, steps=30, kernel_us=40000),
}


def build(args):
    timm_data = loop.require("timm.data")
    import os

    import data
    import torch
    root = data.imagefolder(args.data_dir, args.steps * args.batch_size, size=args.image_size)
    dataset = timm_data.create_dataset("", root=os.path.dirname(root), split="train",
                                       is_training=True)
    return timm_data.create_loader(dataset, input_size=(3, 224, 224), batch_size=args.batch_size,
                                   is_training=True, use_prefetcher=True,
                                   num_workers=args.workers, device=torch.device("cpu"))


if __name__ == "__main__":
    sys.exit(loop.main(__doc__.split("\n")[0], PRESETS, build=build))
