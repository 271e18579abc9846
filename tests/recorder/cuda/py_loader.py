"""py_loader.py - a DataLoader training loop on the simulated GPU, for
test_cuda.py: each step launches a COMPUTE_US kernel on one stream; each
sample takes LOAD_MS in a worker.  Prints stream=<handle> at the end.

    py_loader.py STEPS LOAD_MS COMPUTE_US NUM_WORKERS
"""
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "support",
                                "simcuda"))
import simgpu  # noqa: E402
import torch  # noqa: E402
from torch.utils.data import DataLoader, Dataset  # noqa: E402


class Slow(Dataset):
    def __init__(self, n, load_ms):
        self.n, self.load_s = n, load_ms / 1000.0

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        time.sleep(self.load_s)
        return torch.zeros(4)


def main():
    steps, load_ms, compute_us, workers = (int(a) for a in sys.argv[1:5])
    gpu = simgpu.SimGPU()
    s = gpu.stream()
    for _batch in DataLoader(Slow(steps, load_ms), batch_size=1, num_workers=workers):
        gpu.launch_us(s, compute_us)
    gpu.stream_sync(s)
    print("stream=%d" % s)


if __name__ == "__main__":
    main()
