"""lightning_fit.py - Lightning's Trainer.fit on the CPU, with its own data
fetcher and loops: a LightningModule whose training_step is the simulated
GPU step of loop.py, a train DataLoader (torchvision ImageFolder, ImageNet
training transforms) and a val DataLoader (the validation transforms),
validation after every epoch and Lightning's sanity check before the first
one (num_sanity_val_steps left at its default, as users have it).

    lightning_fit.py --setting input|compute --mode real|replay|le-log|le-replay
                     [--json-out FILE] [--epochs E] [--steps S] [--val-steps V] ...

Trainer(accelerator="cpu", devices=1, max_epochs=E, limit_train_batches=S,
limit_val_batches=V, enable_checkpointing=False, logger=False,
enable_progress_bar=False, enable_model_summary=False).  Timestamps come
from a Callback: on_train_epoch_start (epoch start), on_train_batch_start
(the batch is in hand: fetch), on_train_batch_end (host_end); training_step
enqueues the step's GPU work (loop.Recorder.work), validation_step a
shorter kernel, and the end of each validation pass synchronises (its
metrics are read).

Replay: each loader (train and val, as Replay caches every loader) is
replaced by a torch DataLoader over its first --replay-batches batches,
cycled for the loader's length (loop.replay_dataloader: batch_size=None,
no workers).  Why this and not dlbn's own DLBN_REPLAY bootstrap replay:
the ground truth must not come from the system under test (its Replay
copies every batch per step, which a reference Replay does not), and a
DataLoader (rather than a bare iterable) keeps Lightning on the very code
paths it takes in the Real run (DataLoader checks, its fetcher, len()).
le-log / le-replay hand Lightning DALI's LoaderEvaluator objects (it takes
any iterable with len()).

Lightning needs torch >= 2 here (Debian's 1.13.0a0 trips its version gates;
see scripts/venv/requirements-torch1.txt): on such a torch the program
exits 77.  Presets (2 epochs, validation in between inside the window):
  input    640x480, 16 per batch, 2 workers (not persistent: they start
           again every epoch and every validation), 4 ms kernel -> ~10x;
  compute  320x240, 8 per batch, 2 persistent workers (Lightning's advice),
           40 ms kernel, no sync -> ~1.0x.  (With workers that start again
           after each validation, whose end synchronises, the GPU idles
           through every start-up: ~1.2x on 2 x 16 steps.)
"""

import sys

import loop

PRESETS = {
    "input": dict(image_size="640x480", batch_size=16, workers=2, steps=20, epochs=2,
                  val_steps=3, kernel_us=4000, persistent=False),
    "compute": dict(image_size="320x240", batch_size=8, workers=2, steps=20, epochs=2,
                    val_steps=3, kernel_us=40000, persistent=True),
}
loop.BASE.setdefault("persistent", False)


def add_args(ap):
    ap.add_argument("--persistent", type=int, choices=(0, 1),
                    help="persistent_workers of both loaders (Lightning recommends 1)")


def loaders(args):
    loop.require("torchvision")
    import data
    from torch.utils.data import DataLoader
    from torchvision.datasets import ImageFolder
    train_root = data.imagefolder(args.data_dir, args.steps * args.batch_size,
                                  size=args.image_size)
    val_root = data.imagefolder(args.data_dir, args.val_steps * args.batch_size,
                                size=args.image_size, split="val")
    kwargs = loop.loader_kwargs(args)
    if args.workers > 0:
        kwargs["persistent_workers"] = bool(args.persistent)
    train = DataLoader(ImageFolder(train_root, transform=data.imagenet_train_transform()),
                       shuffle=True, drop_last=True, **kwargs)
    val = DataLoader(ImageFolder(val_root, transform=data.imagenet_val_transform()),
                     shuffle=False, **kwargs)
    return train, val


def run(args, rec):
    L = loop.require("lightning")
    import torch

    class Model(L.LightningModule):
        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(torch.zeros(1))

        def training_step(self, batch, batch_idx):
            rec.work(batch)
            return (self.w * 0.0).sum()

        def validation_step(self, batch, batch_idx):
            rec.val_step(batch)

        def on_validation_epoch_end(self):
            rec.val_end()

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.1)

    class Clock(L.Callback):
        def on_train_epoch_start(self, trainer, pl_module):
            rec.epoch_start()

        def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
            rec.fetched()

        def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
            rec.step_end()

        def on_train_epoch_end(self, trainer, pl_module):
            rec.le_epoch_done()

    train, val = loaders(args)
    train_src = loop.source(args, rec, train, as_dataloader=True)
    val_src = loop.source(args, rec, val, as_dataloader=True, train=False)
    import logging
    logging.getLogger("lightning.pytorch").setLevel(logging.ERROR)
    import warnings
    warnings.filterwarnings("ignore", ".*does not have many workers.*")
    warnings.filterwarnings("ignore", ".*persistent_workers.*")
    # Lightning asks torch whether CUDA is there; torch's CUDA runtime then
    # finds the simulated libcuda.so.1 (LD_LIBRARY_PATH) and declines it.
    warnings.filterwarnings("ignore", "CUDA initialization.*")
    warnings.filterwarnings("ignore", ".*LeafSpec.*")
    trainer = L.Trainer(accelerator="cpu", devices=1, max_epochs=args.epochs,
                        limit_train_batches=args.steps, limit_val_batches=args.val_steps,
                        enable_checkpointing=False, logger=False, enable_progress_bar=False,
                        enable_model_summary=False, callbacks=[Clock()])
    trainer.fit(Model(), train_dataloaders=train_src, val_dataloaders=val_src)
    rec.record["lightning"] = L.__version__
    rec.record["sanity_steps"] = trainer.num_sanity_val_steps


if __name__ == "__main__":
    sys.exit(loop.main(__doc__.split("\n")[0], PRESETS, run=run, add_args=add_args))
