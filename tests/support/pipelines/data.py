"""data.py - the test data of the real-pipeline programs, made on the spot.

Nothing is downloaded: every maker writes deterministic files into a given
directory and returns their path.  Each result is cached in that directory
(a finished tree carries a marker file named after its parameters, and a
lock file serialises makers), so a test session - or a series of runs with
the same --data-dir - makes each once.

    imagefolder(root, count, classes=4, size=(480, 360), split="train")
        an ImageFolder tree  <root>/imagefolder-<W>x<H>-n<count>/<split>/c<k>/*.jpg
    hf_dataset(root, count, ...)
        a Hugging Face datasets Dataset saved with save_to_disk (Arrow):
        columns image (datasets.Image, the JPEG bytes) and label (int)
    wds_shards(root, count, shards, ...)
        WebDataset shards <root>/wds-.../shard-000000.tar ..., each sample
        a .jpg and a .cls member, written with the tarfile module

The JPEGs are photo-like (smooth gradients, soft shapes and sensor noise,
quality 90) so that decoding costs what it costs on photographs: at
480x360 PIL decodes one in about 2.5 ms on these machines, and the ImageNet
training transforms take about as long again.  Unique pictures come from a
pool of POOL per size; larger trees hard-link (or copy) pool files, which
keeps making them fast while every sample is still a real file that is
opened, read and decoded.

Command line (for a look at the data):  data.py DIR [count]
"""

import contextlib
import fcntl
import io
import json
import os
import shutil
import sys
import tarfile

POOL = 48                 # unique pictures per size
QUALITY = 90
DEFAULT_SIZE = (480, 360)


def _marker(path):
    return os.path.join(path, ".dlbn-data-done")


@contextlib.contextmanager
def _locked(root):
    os.makedirs(root, exist_ok=True)
    with open(os.path.join(root, ".dlbn-data-lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _done(path, params):
    try:
        with open(_marker(path)) as f:
            return json.load(f) == params
    except (OSError, ValueError):
        return False


def _finish(path, params):
    with open(_marker(path), "w") as f:
        json.dump(params, f)


def _fresh(path):
    if os.path.lexists(path):
        shutil.rmtree(path)
    os.makedirs(path)


def photo(index, size):
    """A deterministic photo-like RGB picture (PIL Image) of `size` (w, h):
    the smooth content (gradient, soft objects) at quarter resolution,
    scaled up, then texture and sensor noise at full resolution."""
    import numpy as np
    from PIL import Image
    w, h = size
    rng = np.random.RandomState(1000 + index)
    sw, sh = max(8, w // 4), max(8, h // 4)
    y, x = np.mgrid[0:sh, 0:sw].astype(np.float32)
    small = np.zeros((sh, sw, 3), np.float32)
    base = rng.uniform(40, 200, size=3)
    tilt = rng.uniform(-1.6, 1.6, size=3)
    for c in range(3):
        small[..., c] = base[c] + tilt[c] * (y - sh / 2) + 0.1 * tilt[c] * (x - sw / 2)
    for _ in range(12):
        cx, cy = rng.uniform(0, sw), rng.uniform(0, sh)
        r = rng.uniform(0.05, 0.35) * min(sw, sh)
        colour = rng.uniform(-90, 90, size=3)
        small += np.exp(-(((x - cx) ** 2 + (y - cy) ** 2) / (2 * r * r)))[..., None] * colour
    smooth = Image.fromarray(np.clip(small, 0, 255).astype(np.uint8), "RGB")
    img = np.asarray(smooth.resize((w, h), Image.BILINEAR), dtype=np.float32)
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float32)
    texture = np.zeros((h, w), np.float32)
    for _ in range(3):
        fx, fy = rng.uniform(0.02, 0.25, size=2)
        texture += rng.uniform(4, 14) * np.sin(fx * xx + fy * yy + rng.uniform(0, 6.28))
    img = img + texture[..., None] + rng.normal(0, 6, size=(h, w, 3)).astype(np.float32)
    return Image.fromarray(np.clip(img, 0, 255).astype(np.uint8), "RGB")


def jpeg_bytes(index, size, quality=QUALITY):
    buf = io.BytesIO()
    photo(index, size).save(buf, format="JPEG", quality=quality)
    return buf.getvalue()


def _pool(root, size):
    """POOL unique JPEG files of `size`; returns their paths."""
    path = os.path.join(root, "pool-%dx%d-q%d" % (size[0], size[1], QUALITY))
    params = {"kind": "pool", "size": list(size), "count": POOL, "quality": QUALITY}
    names = [os.path.join(path, "p%03d.jpg" % i) for i in range(POOL)]
    if not _done(path, params):
        _fresh(path)
        for i, name in enumerate(names):
            with open(name, "wb") as f:
                f.write(jpeg_bytes(i, size))
        _finish(path, params)
    return names


def _link(src, dst):
    try:
        os.link(src, dst)
    except OSError:
        shutil.copyfile(src, dst)


def imagefolder(root, count, classes=4, size=DEFAULT_SIZE, split="train"):
    """An ImageFolder tree of `count` JPEGs (class k holds every classes-th
    picture); returns <tree>/<split>, the directory ImageFolder takes."""
    size = tuple(size)
    with _locked(root):
        pool = _pool(root, size)
        tree = os.path.join(root, "imagefolder-%dx%d-n%d-c%d" % (size[0], size[1], count,
                                                                 classes))
        path = os.path.join(tree, split)
        params = {"kind": "imagefolder", "size": list(size), "count": count,
                  "classes": classes, "split": split, "pool": POOL}
        if not _done(path, params):
            _fresh(path)
            for k in range(classes):
                os.makedirs(os.path.join(path, "c%d" % k))
            for i in range(count):
                _link(pool[i % POOL], os.path.join(path, "c%d" % (i % classes),
                                                   "img%05d.jpg" % i))
            _finish(path, params)
        return path


def hf_dataset(root, count, classes=4, size=DEFAULT_SIZE):
    """A datasets.Dataset of `count` rows (image: datasets.Image holding the
    JPEG bytes, label: int) saved with save_to_disk; returns its directory
    (datasets.load_from_disk takes it)."""
    size = tuple(size)
    with _locked(root):
        pool = _pool(root, size)
        path = os.path.join(root, "hf-%dx%d-n%d-c%d" % (size[0], size[1], count, classes))
        params = {"kind": "hf", "size": list(size), "count": count, "classes": classes,
                  "pool": POOL}
        if not _done(path, params):
            import datasets
            datasets.disable_progress_bars()
            blobs = []
            for name in pool:
                with open(name, "rb") as f:
                    blobs.append(f.read())
            features = datasets.Features({"image": datasets.Image(),
                                          "label": datasets.ClassLabel(num_classes=classes)})
            table = {"image": [{"bytes": blobs[i % POOL], "path": None} for i in range(count)],
                     "label": [i % classes for i in range(count)]}
            ds = datasets.Dataset.from_dict(table, features=features)
            if os.path.lexists(path):
                shutil.rmtree(path)
            ds.save_to_disk(path)
            _finish(path, params)
        return path


def wds_shards(root, count, shards, classes=4, size=DEFAULT_SIZE):
    """`shards` WebDataset tar files holding `count` samples in all (count
    must divide evenly), sample i = <key>.jpg + <key>.cls; returns the list
    of shard paths."""
    size = tuple(size)
    if count % shards:
        raise ValueError("count %d does not divide into %d shards" % (count, shards))
    with _locked(root):
        pool = _pool(root, size)
        path = os.path.join(root, "wds-%dx%d-n%d-s%d-c%d" % (size[0], size[1], count, shards,
                                                              classes))
        names = [os.path.join(path, "shard-%06d.tar" % s) for s in range(shards)]
        params = {"kind": "wds", "size": list(size), "count": count, "shards": shards,
                  "classes": classes, "pool": POOL}
        if not _done(path, params):
            _fresh(path)
            per = count // shards
            for s, name in enumerate(names):
                with tarfile.open(name, "w") as tar:
                    for j in range(per):
                        i = s * per + j
                        key = "s%06d" % i
                        with open(pool[i % POOL], "rb") as f:
                            members = [("jpg", f.read()),
                                       ("cls", str(i % classes).encode())]
                        for ext, blob in members:
                            info = tarfile.TarInfo("%s.%s" % (key, ext))
                            info.size = len(blob)
                            info.mtime = 1700000000
                            info.mode = 0o644
                            tar.addfile(info, io.BytesIO(blob))
            _finish(path, params)
        return names


IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)


def imagenet_train_transform(crop=224):
    """The ImageNet training transforms (pytorch/examples imagenet/main.py)."""
    import torchvision.transforms as T
    return T.Compose([T.RandomResizedCrop(crop), T.RandomHorizontalFlip(), T.ToTensor(),
                      T.Normalize(IMAGENET_MEAN, IMAGENET_STD)])


def imagenet_val_transform(crop=224):
    """The ImageNet validation transforms (resize 256, centre crop 224)."""
    import torchvision.transforms as T
    return T.Compose([T.Resize(crop * 256 // 224), T.CenterCrop(crop), T.ToTensor(),
                      T.Normalize(IMAGENET_MEAN, IMAGENET_STD)])


def default_root():
    """Where programs put their data when not told (--data-dir)."""
    return os.path.join(os.environ.get("TMPDIR", "/tmp"), "dlbn-pipelines-data-%d" % os.getuid())


if __name__ == "__main__":
    where = sys.argv[1] if len(sys.argv) > 1 else default_root()
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 64
    print(imagefolder(where, n))
