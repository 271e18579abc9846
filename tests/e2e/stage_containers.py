"""stage_containers.py - a DataLoader over each kind of stage container the
worker profile times exactly, for tests/e2e/test_hotspots.py.

    stage_containers.py KIND   (v1, v2, timm, hf)

v1: torchvision.transforms.Compose; v2: torchvision.transforms.v2.Compose;
timm: timm.data.create_transform (torchvision Composes of timm's classes);
hf: a Hugging Face datasets.Dataset with set_transform.  Two workers, one
epoch; the images are made here.
"""
import sys

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset


def images(n):
    from PIL import Image
    rng = np.random.default_rng(3)
    return [Image.fromarray(rng.integers(0, 255, (96, 128, 3), dtype=np.uint8))
            for _ in range(n)]


class Pictures(Dataset):
    def __init__(self, transform, n=32):
        self.imgs = images(n)
        self.transform = transform

    def __len__(self):
        return len(self.imgs)

    def __getitem__(self, i):
        return self.transform(self.imgs[i])


def to_batch(example):
    """The set_transform function of the hf case."""
    arrays = [np.asarray(img, dtype=np.float32).mean(axis=2) for img in example["image"]]
    return {"x": [torch.from_numpy(a[:8, :8].copy()) for a in arrays]}


def main(kind):
    if kind == "v1":
        from torchvision import transforms as T
        ds = Pictures(T.Compose([T.RandomHorizontalFlip(), T.Resize((64, 64)), T.ToTensor()]))
    elif kind == "v2":
        from torchvision.transforms import v2
        ds = Pictures(v2.Compose([v2.PILToTensor(), v2.Resize((64, 64), antialias=True),
                                  v2.ToDtype(torch.float32, scale=True)]))
    elif kind == "timm":
        from timm.data import create_transform
        ds = Pictures(create_transform(64, is_training=True))
    else:
        import datasets
        ds = datasets.Dataset.from_dict({"image": images(32)},
                                        features=datasets.Features({"image": datasets.Image()}))
        ds.set_transform(to_batch)
    loader = DataLoader(ds, batch_size=4, num_workers=2,
                        collate_fn=(lambda items: items) if kind == "hf" else None)
    for _ in loader:
        pass


if __name__ == "__main__":
    main(sys.argv[1])
