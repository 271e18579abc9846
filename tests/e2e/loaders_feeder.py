"""A thread-fed prefetcher, as training scripts write them: a background
thread makes batches (20 ms each: a sleep, or with work="python" pure
Python that holds the GIL) and puts them on a queue.Queue; the generator
the loop iterates takes them off.  Named for dlbn with
DLBN_LOADER=loaders_feeder:prefetched (tests/e2e/loaders_workload.py)."""
import queue
import threading
import time


def python_spin(seconds):
    """Pure-Python work for `seconds` of this thread's CPU time."""
    t = time.thread_time()
    while time.thread_time() - t < seconds:
        sum(range(200))


def produce(n, ms, work="sleep"):
    import torch
    for i in range(n):
        if work == "python":
            python_spin(ms / 1000.0)
        else:
            time.sleep(ms / 1000.0)
        yield torch.full((64,), float(i))


def prefetched(n, ms=20, depth=2, work="sleep"):
    q = queue.Queue(maxsize=depth)
    done = object()

    def run():
        for batch in produce(n, ms, work):
            q.put(batch)
        q.put(done)

    threading.Thread(target=run, daemon=True).start()
    while True:
        batch = q.get()
        if batch is done:
            return
        yield batch
