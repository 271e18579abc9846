"""A thread-fed prefetcher, as training scripts write them: a background
thread makes batches (20 ms each) and puts them on a queue.Queue; the
generator the loop iterates takes them off.  Named for dlbn with
DLBN_LOADER=loaders_feeder:prefetched (tests/e2e/loaders_workload.py)."""
import queue
import threading
import time


def produce(n, ms):
    import torch
    for i in range(n):
        time.sleep(ms / 1000.0)
        yield torch.full((64,), float(i))


def prefetched(n, ms=20, depth=2):
    q = queue.Queue(maxsize=depth)
    done = object()

    def run():
        for batch in produce(n, ms):
            q.put(batch)
        q.put(done)

    threading.Thread(target=run, daemon=True).start()
    while True:
        batch = q.get()
        if batch is done:
            return
        yield batch
