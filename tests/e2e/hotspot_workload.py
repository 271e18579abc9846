"""hotspot_workload.py - DataLoader programs whose expensive stage is known by
construction, for tests/e2e/test_hotspots.py (its ground truth).

    hotspot_workload.py SCENARIO DATA_DIR RESULT.json [--workers N] [--batches B]

Scenarios (each dataset times its own stages with time.perf_counter_ns and
the loop collects the sums from the workers through the batches, so the
test knows what share each stage really took):
  decode    JPEGs made here with PIL, decoded in __getitem__ (Image.open +
            convert), then a cheap torchvision Compose (ToTensor)
  resize    a small decode, then a torchvision Compose whose Resize to a large
            size dominates
  sleep     __getitem__ waits on "storage" (time.sleep) then does little
  tokenize  a pure-Python tokenizer over generated text (a Hugging Face
            style set_transform-like function called from __getitem__)
  numpy     a numpy transform (FFT of an array) in __getitem__
  pickle    cheap samples but a large batch: the hand-off (pickling into
            shared memory) dominates
RESULT.json gets {"stages": {name: ns}, "busy_ns": ns} summed over all
samples the workers made, with "collate" (timed by the collate_fn), "fetch"
(each batch from its first __getitem__ to the end of its collate) and
"send" (pickling such batches, measured in the main process after the
run); busy_ns = fetch + send, the workers' busy time as the scenario sees it.
With --workers 0 the loop fetches in its own process and nothing is pickled,
so there is no "send" and busy_ns is the fetch alone.
"""
import io
import json
import os
import sys
import time

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset

SCENARIOS = ("decode", "resize", "sleep", "tokenize", "numpy", "pickle")


def make_jpegs(directory, count, size):
    from PIL import Image
    os.makedirs(directory, exist_ok=True)
    paths = []
    rng = np.random.default_rng(7)
    w, h = size
    yy, xx = np.mgrid[0:h, 0:w]
    for i in range(count):
        path = os.path.join(directory, "img%03d-%dx%d.jpg" % (i, w, h))
        if not os.path.exists(path):
            base = (np.sin(xx / (17.0 + i)) + np.cos(yy / (23.0 + i))) * 60 + 128
            rgb = np.stack([base, base[::-1], base[:, ::-1]], axis=-1)
            rgb = rgb + rng.normal(0, 12, rgb.shape)
            img = Image.fromarray(np.clip(rgb, 0, 255).astype(np.uint8))
            img.save(path + ".tmp", format="JPEG", quality=92)
            os.replace(path + ".tmp", path)
        paths.append(path)
    return paths


WORDS = ("the quick brown fox jumps over a lazy dog while data loaders keep "
         "feeding hungry accelerators with batches of tokens").split()


def tokenize(text, vocab):
    """A deliberately plain Python tokenizer: lower, split on spaces and
    punctuation, look up ids, pad."""
    ids = []
    word = []
    for ch in text.lower():
        if ch.isalnum():
            word.append(ch)
        elif word:
            ids.append(vocab.get("".join(word), 1))
            word = []
    if word:
        ids.append(vocab.get("".join(word), 1))
    ids = ids[:512] + [0] * max(0, 512 - len(ids))
    return ids


class Timed(Dataset):
    def __init__(self, scenario, data_dir, n, batch_size):
        self.scenario = scenario
        self.batch_size = batch_size
        self.n = n
        self.paths = []
        if scenario == "decode":
            self.paths = make_jpegs(os.path.join(data_dir, "jpeg"), 16, (640, 480))
        elif scenario == "resize":
            self.paths = make_jpegs(os.path.join(data_dir, "jpeg"), 16, (64, 48))
        self.transform = None
        if scenario in ("decode", "resize"):
            from torchvision import transforms
            if scenario == "decode":
                self.transform = transforms.Compose([transforms.CenterCrop(32)])
            else:
                self.transform = transforms.Compose([transforms.Resize((900, 900)),
                                                     transforms.CenterCrop(8)])
        if self.transform is not None:
            # once here, before the workers fork: the first call of a
            # torchvision transform imports and sets up what it needs
            # (a one-off cost that is not the stage's)
            from PIL import Image
            self.transform(Image.new("RGB", (64, 48)))
            # and PIL's first Image.open imports its format plugins
            with Image.open(self.paths[0]) as im:
                im.convert("RGB")
        self.vocab = {w: i + 2 for i, w in enumerate(WORDS)}
        self.text = " ".join(WORDS[(i * 7) % len(WORDS)] for i in range(12000))

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        clock = time.perf_counter_ns
        t0 = clock()
        stage = {}
        if i % self.batch_size == 0:
            stage["t_first"] = t0
        if self.scenario in ("decode", "resize"):
            from PIL import Image
            with Image.open(self.paths[i % len(self.paths)]) as im:
                img = im.convert("RGB")
            t1 = clock()
            stage["decode"] = t1 - t0
            out = self.transform(img)
            t2 = clock()
            stage["transform"] = t2 - t1
            x = torch.from_numpy(np.asarray(out, dtype=np.float32)).mean().reshape(1)
        elif self.scenario == "sleep":
            time.sleep(0.008)
            t1 = clock()
            stage["sleep"] = t1 - t0
            x = torch.zeros(4)
        elif self.scenario == "tokenize":
            ids = tokenize(self.text, self.vocab)
            t1 = clock()
            stage["tokenize"] = t1 - t0
            x = torch.tensor(ids[:8], dtype=torch.float32)
        elif self.scenario == "numpy":
            a = np.random.default_rng(i).random((256, 256))
            t0 = clock()
            for _ in range(8):    # all of it inside numpy's fft module
                a = np.fft.fft2(a).real
            t1 = clock()
            stage["numpy"] = t1 - t0
            x = torch.from_numpy(a[:2, :2].copy()).reshape(-1).float()
        else:  # pickle: a big tensor per sample, made cheaply
            x = torch.empty(2 * 1024 * 1024 // 4 * 4)   # 8 MiB
            x[0] = i
            stage["sample"] = clock() - t0
        return x, json.dumps(stage)


def collate(items):
    t0 = time.perf_counter_ns()
    if items[0][0].numel() > 1 << 20:   # pickle: the tensors as they are
        xs = [x for x, _ in items]
    else:
        xs = torch.stack([x for x, _ in items])
    stages = [s for _, s in items]
    t1 = time.perf_counter_ns()
    # the fetch as the worker spends it: the batch's first __getitem__ to
    # the end of collate (samples, the loader's loop, GIL hand-overs)
    first = json.loads(stages[0]).pop("t_first")
    stages.append(json.dumps({"collate": t1 - t0, "fetch": t1 - first}))
    return xs, stages


def send_cost(ds, batch_size, batches):
    """What pickling the batches for the hand-off costs: ForkingPickler.dumps
    of freshly collated batches (tensors not yet in shared memory, as in a
    worker), measured here in the main process after the run."""
    from multiprocessing.reduction import ForkingPickler
    import torch.multiprocessing  # noqa: F401  (registers the tensor reductions)
    total, rounds = 0, min(batches, 4)
    for k in range(rounds):
        batch = collate([ds[k * batch_size + j] for j in range(batch_size)])
        t0 = time.perf_counter_ns()
        ForkingPickler.dumps((k, batch))
        total += time.perf_counter_ns() - t0
    return total * batches // rounds


def main(argv):
    scenario, data_dir, result = argv[1], argv[2], argv[3]
    workers = int(argv[argv.index("--workers") + 1]) if "--workers" in argv else 2
    batches = int(argv[argv.index("--batches") + 1]) if "--batches" in argv else 30
    batch_size = 4 if scenario != "pickle" else 8
    ds = Timed(scenario, data_dir, batches * batch_size, batch_size)
    loader = DataLoader(ds, batch_size=batch_size, num_workers=workers,
                        collate_fn=collate)
    sums = {}
    for _ in loader:
        xs, stages = _
        for text in stages:
            for key, ns in json.loads(text).items():
                if key != "t_first":
                    sums[key] = sums.get(key, 0) + ns
        time.sleep(0.001)
    if workers:
        sums["send"] = send_cost(ds, batch_size, batches)
    with open(result, "w") as f:
        json.dump({"stages": sums, "busy_ns": sums["fetch"] + sums.get("send", 0)}, f)


if __name__ == "__main__":
    main(sys.argv)
