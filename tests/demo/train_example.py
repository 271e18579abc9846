"""A small image-classification training script, for `make demo`.

It looks like an ordinary PyTorch script - a Dataset that "decodes" images
and augments them, a DataLoader with worker processes, a small CNN trained
with SGD - and knows nothing about dlbn.  The decode step stands in for
reading and decoding JPEGs from network storage (a fixed latency per image),
so by default the loop is input-bound: the model would consume a batch every
~5 ms but two workers supply one every ~40 ms.

  --decode-ms 0.5 --width 128   makes it compute-bound instead (cheap input,
                               a wider model: ~40 ms per step), the contrast
                               run of the demo.
"""

import argparse
import time

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset


class SyntheticImageFolder(Dataset):
    """Deterministic fake 'images' with labels; __getitem__ decodes and
    augments one sample like a torchvision pipeline would."""

    def __init__(self, size, decode_ms, image_size=64, classes=10):
        self.size = size
        self.decode_ms = decode_ms
        self.image_size = image_size
        self.classes = classes

    def __len__(self):
        return self.size

    def decode(self, index):
        time.sleep(self.decode_ms / 1000.0)         # storage + JPEG decode
        g = torch.Generator().manual_seed(index)
        return torch.rand(3, self.image_size + 8, self.image_size + 8, generator=g)

    def augment(self, image, index):
        top, left = index % 8, (index // 8) % 8      # random crop
        image = image[:, top:top + self.image_size, left:left + self.image_size]
        if index % 2:                                # horizontal flip
            image = image.flip(2)
        mean = torch.tensor([0.485, 0.456, 0.406]).view(3, 1, 1)
        std = torch.tensor([0.229, 0.224, 0.225]).view(3, 1, 1)
        return (image - mean) / std

    def __getitem__(self, index):
        return self.augment(self.decode(index), index), index % self.classes


class SmallNet(nn.Module):
    def __init__(self, width, classes=10):
        super().__init__()
        self.conv1 = nn.Conv2d(3, width, 3, stride=2, padding=1)
        self.conv2 = nn.Conv2d(width, width, 3, stride=2, padding=1)
        self.head = nn.Linear(width, classes)

    def forward(self, x):
        x = F.relu(self.conv1(x))
        x = F.relu(self.conv2(x))
        return self.head(x.mean(dim=(2, 3)))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--steps-per-epoch", type=int, default=40)
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--decode-ms", type=float, default=5.0)
    ap.add_argument("--width", type=int, default=32)
    args = ap.parse_args()

    torch.manual_seed(0)
    dataset = SyntheticImageFolder(args.steps_per_epoch * args.batch_size, args.decode_ms)
    loader = DataLoader(dataset, batch_size=args.batch_size, shuffle=True,
                        num_workers=args.workers, persistent_workers=args.workers > 0)
    model = SmallNet(args.width)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)

    start = time.monotonic()
    for epoch in range(args.epochs):
        total, correct, loss_sum = 0, 0, 0.0
        for images, labels in loader:
            optimizer.zero_grad()
            logits = model(images)
            loss = F.cross_entropy(logits, labels)
            loss.backward()
            optimizer.step()
            loss_sum += loss.item() * len(labels)
            correct += (logits.argmax(1) == labels).sum().item()
            total += len(labels)
        print("epoch %d: loss %.3f, accuracy %.2f, %.1f s" % (
            epoch, loss_sum / total, correct / total, time.monotonic() - start))


if __name__ == "__main__":
    main()
