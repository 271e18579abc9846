"""torchdata_stateful.py - torchdata's StatefulDataLoader (a DataLoader
subclass with its own iterators, whose state can be saved mid-epoch) over a
torchvision ImageFolder with the ImageNet training transforms; the loop
saves the loader's state_dict() every --checkpoint-every steps, as a
resumable training script does with its checkpoints.  The loop is
loop.py's (modes, knobs, record, exit status).

    torchdata_stateful.py --setting input|compute --mode real|replay|le-log|le-replay
                          [--checkpoint-every N] [--json-out FILE] ...

Replay and le-replay have no loader left to checkpoint (state_dict() is
part of the loading machinery they take away); le-log checkpoints the
loader LoaderEvaluator wraps.  torchdata >= 0.8 needs torch >= 2.4: on
older torch the program exits 77.  Presets:
  input    640x480, 16 per batch, 2 workers, 4 ms kernel -> Replay ~5x;
  compute  320x240, 8 per batch, 2 workers, 40 ms kernel, no sync -> ~1.0x.
"""

import sys

import loop

PRESETS = {
    "input": dict(image_size="640x480", batch_size=16, workers=2, steps=30, kernel_us=4000),
    "compute": dict(image_size="320x240", batch_size=8, workers=2, steps=30, kernel_us=40000),
}


def add_args(ap):
    ap.add_argument("--checkpoint-every", type=int, default=10,
                    help="state_dict() every N steps (0: never)")
    ap.add_argument("--persistent", action="store_true", help="persistent_workers=True")


def build(args):
    stateful = loop.require("torchdata.stateful_dataloader")
    loop.require("torchvision")
    import data
    from torchvision.datasets import ImageFolder
    root = data.imagefolder(args.data_dir, args.steps * args.batch_size, size=args.image_size)
    dataset = ImageFolder(root, transform=data.imagenet_train_transform())
    kwargs = loop.loader_kwargs(args)
    if args.workers > 0:
        kwargs["persistent_workers"] = args.persistent
    return stateful.StatefulDataLoader(dataset, shuffle=True, drop_last=True, **kwargs)


def run(args, rec):
    loader = build(args)
    src = loop.source(args, rec, loader)
    target = {"real": loader, "le-log": loader}.get(args.mode)
    saved = 0
    for _ in range(args.epochs):
        rec.epoch_start()
        for batch in src:
            rec.step(batch)
            saved += 1
            if target is not None and args.checkpoint_every and \
                    saved % args.checkpoint_every == 0:
                state = target.state_dict()
                rec.record["checkpoints"] = rec.record.get("checkpoints", 0) + 1
                rec.record["state_keys"] = sorted(state)[:8]
        rec.le_epoch_done()


if __name__ == "__main__":
    sys.exit(loop.main(__doc__.split("\n")[0], PRESETS, run=run, add_args=add_args))
