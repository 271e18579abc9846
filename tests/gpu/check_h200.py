#!/usr/bin/env python3
"""check_h200.py - check dlbn on a real GPU (written for a lent NVIDIA H200
with PyTorch 2.x + CUDA; any recent NVIDIA GPU works).

    make all                               # this script builds nothing
    python3 tests/gpu/check_h200.py [--out DIR] [--tolerance 0.10]

Runs a small real CUDA training loop (an MLP on synthetic data, SGD, the
DataLoader with pin_memory=True so PyTorch's own pin-memory thread runs) in
two configurations, each under LD_PRELOAD=build/libdlbn.so ("Real") and
again over cached batches ("Replay", the reference method):

  input   slow dataset (a 60 ms sleep per batch, 2 workers: a batch every
          ~30 ms), fast model (~12 ms of GPU work per step): the GPU idles
          in the loader waits -> dlbn must say DETECTED
  compute fast dataset (4 workers, no sleep), big model (~60 ms of GPU work
          per step), no sync per step: the host runs ahead of the GPU ->
          dlbn must say NOT_DETECTED
  dali    NVIDIA DALI's DALIGenericIterator over a GPU pipeline (file reader
          -> decoders.image device="mixed" -> resize -> crop_mirror_normalize
          on the GPU, 2 threads, 128 JPEGs of 640x480 per batch that it
          writes), the input-config model on the first 256 values of each
          image: no regime is built in; dlbn's verdict must match the
          measured one, the loader is seen as DALI's with device=gpu, and
          DALI's own GPU/mixed operator ranges are in the report.  Skipped
          (said) when DALI is not installed for --python.

The model depth of each configuration is calibrated first (a short run
without the preload) so that the GPU time per step hits its target on
whatever GPU this is.  For each Real run it checks:
  - the driver was found and launches were seen: PyTorch's libcudart gets
    every driver entry point through cuGetProcAddress, so gpu.run.launches
    > 0 proves the wrapped pointers were handed back (gpu.driver_version
    > 0 is the CUDA_INFO "driver found" record);
  - drain probes were resolved (gpu.probes_resolved > 0, probing not
    stopped) and few waits lack GPU evidence;
  - the pin-memory thread path was seen (path == "pin_memory");
  - the verdict is the expected one, and agrees with the measured one;
  - the predicted speedup is within --tolerance of the measured one:
    Real time / Replay time between the steps' completion times (host
    work and GPU work done, from CUDA events) over the analyzer's window.
Prints a compact summary; everything (traces, JSON and text reports, run
logs) stays in --out.

Exit status: 0 every check passed; 1 a check failed (wrong verdict,
speedup off, launches or probes not seen, a run failed); 2 cannot check
here (dlbn not built, no torch, no CUDA device) - a clear message says why;
3 the checks of dlbn passed but a configuration did not produce its regime
on this machine (see the message: adjust --input-gpu-ms etc.).
"""

import argparse
import json
import os
import struct
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))

EXIT_OK, EXIT_FAIL, EXIT_CANNOT, EXIT_REGIME = 0, 1, 2, 3

# Model and data shapes: big enough matmuls that the GPU, not kernel
# launches, sets each step's time (512 x 4096 x 4096 per hidden layer).
BATCH = 512
FEATURES = 256
WIDTH = 4096
CLASSES = 10
PREFETCH_FACTOR = 2
REPLAY_BATCHES = 8

# name: workers, dataset sleep per batch (ms), target GPU ms per step, steps,
#       expected verdict
CONFIGS = {
    "input": dict(workers=2, batch_sleep_ms=60.0, gpu_ms=12.0, steps=100,
                  expected="DETECTED"),
    "compute": dict(workers=4, batch_sleep_ms=0.0, gpu_ms=60.0, steps=50,
                    expected="NOT_DETECTED"),
    # The input config's model depth; the regime is whatever DALI gives here.
    "dali": dict(workers=0, batch_sleep_ms=0.0, gpu_ms=12.0, steps=64, expected=None),
}
DALI_BATCH, DALI_THREADS, DALI_FILES = 128, 2, 1024

# Verdict thresholds (docs/DESIGN.md, "Verdict rules"; the measured speedup's verdict).
DETECTED_ABOVE, POTENTIAL_ABOVE = 1.50, 1.10


# =====================================================================
# Child side: the training loop (runs in its own interpreter).
# =====================================================================

def child_main(argv):
    ap = argparse.ArgumentParser(prog="check_h200.py --child")
    ap.add_argument("what", choices=("probe", "calibrate", "run"))
    ap.add_argument("--config", choices=sorted(CONFIGS))
    ap.add_argument("--mode", choices=("real", "replay"), default="real")
    ap.add_argument("--depth", type=int, default=4)
    ap.add_argument("--json-out", required=True)
    args = ap.parse_args(argv)
    if args.what == "probe":
        result = child_probe()
    elif args.what == "calibrate":
        result = child_calibrate()
    else:
        result = child_run(args.config, args.mode, args.depth)
    with open(args.json_out, "w") as out:
        json.dump(result, out)
    return 0


def child_probe():
    """What this interpreter's torch can do (no CUDA work beyond init)."""
    import torch
    info = {"torch": torch.__version__, "cuda_build": torch.version.cuda,
            "cuda_available": bool(torch.cuda.is_available())}
    try:
        import nvidia.dali
        info["dali"] = nvidia.dali.__version__
    except Exception:
        info["dali"] = None
    if info["cuda_available"]:
        info["device"] = torch.cuda.get_device_name(0)
        info["device_count"] = torch.cuda.device_count()
        info["capability"] = list(torch.cuda.get_device_capability(0))
    return info


def make_model(depth, device):
    import torch.nn as nn
    layers = [nn.Linear(FEATURES, WIDTH, device=device), nn.ReLU()]
    for _ in range(depth):
        layers += [nn.Linear(WIDTH, WIDTH, device=device), nn.ReLU()]
    layers.append(nn.Linear(WIDTH, CLASSES, device=device))
    return nn.Sequential(*layers)


class Trainer:
    """One training step per batch: H2D (non_blocking, from pinned memory),
    forward, loss, backward, SGD step.  No host sync: the loss is summed on
    the GPU and read once at the end, so the host may run ahead."""

    def __init__(self, depth):
        import torch
        self.torch = torch
        self.device = torch.device("cuda", 0)
        torch.cuda.set_device(self.device)
        torch.manual_seed(0)
        self.model = make_model(depth, self.device)
        self.opt = torch.optim.SGD(self.model.parameters(), lr=1e-4, momentum=0.9)
        self.loss_sum = torch.zeros((), device=self.device)

    def step(self, batch):
        import torch.nn.functional as F
        x, y = batch
        x = x.to(self.device, non_blocking=True)
        y = y.to(self.device, non_blocking=True)
        self.opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(self.model(x), y)
        loss.backward()
        self.opt.step()
        self.loss_sum += loss.detach()

    def synthetic_batch(self):
        torch = self.torch
        return (torch.randn(BATCH, FEATURES).pin_memory(),
                torch.randint(0, CLASSES, (BATCH,)).pin_memory())

    def warm_up(self, steps=3):
        batch = self.synthetic_batch()
        for _ in range(steps):
            self.step(batch)
        self.torch.cuda.synchronize()

    def gpu_ms_per_step(self, steps=5):
        """GPU time per step with the GPU kept busy (host runs ahead)."""
        torch = self.torch
        batch = self.synthetic_batch()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize()
        start.record()
        for _ in range(steps):
            self.step(batch)
        end.record()
        torch.cuda.synchronize()
        return start.elapsed_time(end) / steps


def child_calibrate():
    """GPU ms per step at two depths: t(depth) = fixed + per_layer * depth."""
    import torch
    if not torch.cuda.is_available():
        raise SystemExit("torch.cuda is not available")
    times = {}
    for depth in (2, 10):
        trainer = Trainer(depth)
        trainer.warm_up()
        times[depth] = trainer.gpu_ms_per_step()
        del trainer
        torch.cuda.empty_cache()
    per_layer = (times[10] - times[2]) / 8.0
    return {"t2_ms": times[2], "t10_ms": times[10], "per_layer_ms": per_layer,
            "fixed_ms": times[2] - 2 * per_layer}


def make_dataset(length, batch_sleep_ms):
    import torch
    from torch.utils.data import Dataset

    class SyntheticSamples(Dataset):
        """Synthetic samples; with batch_sleep_ms, the first sample of every
        batch sleeps (the sampler hands each worker whole batches of
        consecutive indices), so each batch costs that much to load."""

        def __len__(self):
            return length

        def __getitem__(self, i):
            if batch_sleep_ms > 0 and i % BATCH == 0:
                time.sleep(batch_sleep_ms / 1000.0)
            return torch.randn(FEATURES), i % CLASSES

    return SyntheticSamples()


def make_jpegs(root, n):
    """n JPEGs of 640x480 noise (costly to decode) under root/c0, once."""
    import numpy as np
    from PIL import Image
    d = os.path.join(root, "c0")
    os.makedirs(d, exist_ok=True)
    rng = np.random.default_rng(0)
    for i in range(n):
        path = os.path.join(d, "%04d.jpg" % i)
        if not os.path.exists(path):
            Image.fromarray(rng.integers(0, 255, (480, 640, 3), dtype=np.uint8)).save(
                path, quality=90)
    return root


class DaliBatches:
    """DALI's iterator over a GPU pipeline, its batches as (x, y) for the
    Trainer: the first FEATURES values of each image, the label mod
    CLASSES.  Epoch after epoch (auto_reset) until `steps` batches."""

    def __init__(self, steps):
        from nvidia.dali import fn, pipeline_def, types
        from nvidia.dali.plugin.pytorch import DALIGenericIterator
        root = make_jpegs(os.path.abspath("jpegs"), DALI_FILES)

        @pipeline_def(batch_size=DALI_BATCH, num_threads=DALI_THREADS, device_id=0)
        def pipe():
            jpegs, labels = fn.readers.file(file_root=root, random_shuffle=True,
                                            name="Reader")
            images = fn.decoders.image(jpegs, device="mixed")
            images = fn.resize(images, resize_x=224, resize_y=224)
            images = fn.crop_mirror_normalize(images, dtype=types.FLOAT, output_layout="CHW",
                                              mean=[0.485 * 255] * 3, std=[0.229 * 255] * 3)
            return images, labels.gpu()

        p = pipe()
        p.build()
        self.iterator = DALIGenericIterator(p, ["data", "label"], reader_name="Reader",
                                            auto_reset=True)
        self.steps = steps

    def __iter__(self):
        done = 0
        while done < self.steps:
            for out in self.iterator:  # the loop's fetch: DALI's __next__
                yield self.adapt(out)
                done += 1
                if done >= self.steps:
                    return

    @staticmethod
    def adapt(out):
        data, label = out[0]["data"], out[0]["label"]
        return (data.flatten(1)[:, :FEATURES].contiguous(),
                label.reshape(-1).long() % CLASSES)


def child_run(config, mode, depth):
    import torch
    from torch.utils.data import DataLoader
    cfg = CONFIGS[config]
    trainer = Trainer(depth)
    trainer.warm_up()
    steps = cfg["steps"]
    if config == "dali":
        loader = DaliBatches(steps)
    else:
        loader = DataLoader(make_dataset(steps * BATCH, cfg["batch_sleep_ms"]),
                            batch_size=BATCH, num_workers=cfg["workers"],
                            prefetch_factor=PREFETCH_FACTOR, pin_memory=True,
                            persistent_workers=False)
    # Reference event: recorded while the GPU is idle, it completes at once,
    # so its completion is (almost) the host time around the record.
    torch.cuda.synchronize()
    ref = torch.cuda.Event(enable_timing=True)
    before = time.monotonic()
    ref.record()
    ref_t = (before + time.monotonic()) / 2
    step_times, host_end, events = [], [], []
    pin_thread = False

    def one_step(batch):
        step_times.append(time.monotonic())
        trainer.step(batch)
        event = torch.cuda.Event(enable_timing=True)
        event.record()
        events.append(event)
        host_end.append(time.monotonic())

    iterator = iter(loader)
    pin_thread = getattr(iterator, "_pin_memory_thread", None) is not None
    if mode == "real":
        for batch in iterator:
            one_step(batch)
    else:
        cache = []
        for batch in iterator:
            # DALI reuses its output buffers: keep copies
            cache.append(tuple(t.clone() for t in batch) if config == "dali" else batch)
            if len(cache) >= REPLAY_BATCHES:
                break
        # The workers and the pin thread must not compete with the loop.
        if hasattr(iterator, "_shutdown_workers"):
            iterator._shutdown_workers()
        del iterator
        for k in range(steps):
            one_step(cache[k % len(cache)])
    torch.cuda.synchronize()
    loss_mean = float(trainer.loss_sum) / max(1, len(step_times))
    gpu_end = [ref_t + ref.elapsed_time(e) / 1000.0 for e in events]
    done = [max(h, g) for h, g in zip(host_end, gpu_end)]
    first_kept = max(cfg["workers"], 1) * PREFETCH_FACTOR + 1
    return {"config": config, "mode": mode, "depth": depth, "pid": os.getpid(),
            "steps": len(step_times), "step_times": step_times, "host_end": host_end,
            "gpu_end": gpu_end, "done": done, "window_first_step": first_kept,
            "window_s": done[-1] - done[first_kept - 1] if len(done) > first_kept else None,
            "pin_memory_thread": pin_thread, "loss_mean": loss_mean,
            "device": torch.cuda.get_device_name(0), "torch": torch.__version__}


# =====================================================================
# Parent side: run, analyse, check, summarise.
# =====================================================================

class CannotCheck(Exception):
    """This machine cannot run the check (exit 2)."""


class Checker:
    def __init__(self, args):
        self.args = args
        self.build = os.path.abspath(args.build)
        self.lib = os.path.join(self.build, "libdlbn.so")
        self.analyzer = os.path.join(self.build, "dlbn-analyze")
        self.out = os.path.abspath(args.out or tempfile.mkdtemp(prefix="dlbn-h200-"))
        os.makedirs(self.out, exist_ok=True)
        self.t0 = time.monotonic()
        self.failures = []
        self.regime_problems = []
        self.rows = []

    # ---- helpers --------------------------------------------------------

    def log(self, text):
        print("[%5.1fs] %s" % (time.monotonic() - self.t0, text), flush=True)

    def time_left(self):
        return self.args.budget_s - (time.monotonic() - self.t0)

    def fail(self, text):
        self.failures.append(text)
        self.log("FAIL: " + text)

    def child_env(self, trace):
        env = {k: v for k, v in os.environ.items()
               if not k.startswith("DLBN_") and k != "LD_PRELOAD"}
        env["PYTHONUNBUFFERED"] = "1"
        if trace:
            env["LD_PRELOAD"] = self.lib
            env["DLBN_OUTPUT"] = trace
        return env

    def child(self, name, what, extra, preload, timeout_s):
        """Run this script's child side; returns its JSON result."""
        timeout_s = min(timeout_s, max(10.0, self.time_left()))
        result = os.path.join(self.out, name + ".json")
        trace = os.path.join(self.out, name + ".dlbn") if preload else None
        cmd = [self.args.python, os.path.abspath(__file__), "--child", what,
               "--json-out", result] + extra
        logpath = os.path.join(self.out, name + ".log")
        self.log("%s: %s%s" % (name, "LD_PRELOAD=libdlbn.so " if preload else "",
                               " ".join(cmd[2:])))
        with open(logpath, "w") as logf:
            try:
                proc = subprocess.run(cmd, env=self.child_env(trace), cwd=self.out,
                                      stdout=logf, stderr=subprocess.STDOUT,
                                      timeout=timeout_s)
            except subprocess.TimeoutExpired:
                raise RuntimeError("%s timed out after %.0f s (log: %s)" % (
                    name, timeout_s, logpath))
        if proc.returncode != 0 or not os.path.exists(result):
            with open(logpath) as f:
                tail = f.read()[-3000:]
            raise RuntimeError("%s exited %d (log %s):\n%s" % (
                name, proc.returncode, logpath, tail))
        with open(result) as f:
            data = json.load(f)
        if trace:
            if not os.path.exists(trace) or os.path.getsize(trace) == 0:
                raise RuntimeError("%s wrote no trace at %s" % (name, trace))
            data["_trace"] = trace
        return data

    def analyze(self, trace, name):
        proc = subprocess.run([self.analyzer, trace, "--format", "json"],
                              capture_output=True, text=True, timeout=120)
        if proc.returncode != 0:
            raise RuntimeError("dlbn-analyze %s exited %d: %s" % (
                trace, proc.returncode, proc.stderr[-2000:]))
        with open(os.path.join(self.out, name + ".analysis.json"), "w") as f:
            f.write(proc.stdout)
        text = subprocess.run([self.analyzer, trace], capture_output=True, text=True,
                              timeout=120)
        with open(os.path.join(self.out, name + ".report.txt"), "w") as f:
            f.write(text.stdout + text.stderr)
        return json.loads(proc.stdout)

    def cuda_records(self, trace):
        """Counts of the trace's GPU records and its CUDA_INFO lines (from
        --dump), or None when the dump fails or takes too long."""
        try:
            proc = subprocess.run([self.analyzer, "--dump", trace], capture_output=True,
                                  text=True, timeout=min(120, max(10, self.time_left())))
        except subprocess.TimeoutExpired:
            return None
        counts, infos = {}, []
        for line in proc.stdout.splitlines():
            fields = line.split(None, 5)
            if len(fields) < 5:
                continue
            kind = fields[4]
            if kind in ("LAUNCH", "MEMCPY", "SYNC", "PROBE", "PROBE_DONE", "CUDA_INFO"):
                counts[kind] = counts.get(kind, 0) + 1
            if kind == "CUDA_INFO" and len(infos) < 8:
                infos.append(fields[5] if len(fields) > 5 else "")
        return {"counts": counts, "cuda_info": infos}

    # ---- steps ----------------------------------------------------------

    def preflight(self):
        for path in (self.lib, self.analyzer):
            if not os.path.exists(path):
                raise CannotCheck("%s is missing: run `make all` in %s first" % (path, ROOT))
        try:
            info = self.child("probe", "probe", [], preload=False, timeout_s=180)
        except RuntimeError as exc:
            raise CannotCheck("cannot import torch / initialise CUDA with %s: %s" % (
                self.args.python, exc))
        self.log("torch %s (CUDA %s), cuda available: %s, device: %s" % (
            info["torch"], info["cuda_build"], info["cuda_available"], info.get("device")))
        if not info["cuda_available"]:
            raise CannotCheck("torch.cuda.is_available() is False for %s (torch %s, built "
                              "for CUDA %s): no usable NVIDIA GPU/driver here, or a CPU-only "
                              "torch; use --python to pick a CUDA-enabled interpreter" % (
                                  self.args.python, info["torch"], info["cuda_build"]))
        if not info["torch"].split(".")[0].isdigit() or int(info["torch"].split(".")[0]) < 2:
            self.log("note: torch %s is older than 2.x; the check was written for 2.x" %
                     info["torch"])
        return info

    def calibrate(self):
        cal = self.child("calibrate", "calibrate", [], preload=False, timeout_s=180)
        per_layer, fixed = cal["per_layer_ms"], cal["fixed_ms"]
        self.log("calibration: %.2f ms per step at depth 2, %.2f at depth 10 "
                 "(%.3f ms per layer)" % (cal["t2_ms"], cal["t10_ms"], per_layer))
        depths = {}
        for name, cfg in CONFIGS.items():
            target = self.args.compute_gpu_ms if name == "compute" else self.args.input_gpu_ms
            if per_layer > 0.01:
                depth = int(round((target - fixed) / per_layer))
            else:  # implausible fit: scale from depth 2
                depth = int(round(2 * target / max(cal["t2_ms"], 0.01)))
            depths[name] = max(1, min(256, depth))
            if depths[name] != depth:
                self.log("note: %s's target of %.0f ms is out of reach at depths 1..256; "
                         "its regime check will tell whether it still holds" % (name, target))
            self.log("%s: depth %d for ~%.0f ms of GPU work per step" % (
                name, depths[name], target))
        return depths

    def check_config(self, name, depth):
        cfg = CONFIGS[name]
        extra = ["--config", name, "--depth", str(depth)]
        real = self.child(name + "_real", "run", extra + ["--mode", "real"], preload=True,
                          timeout_s=150)
        replay = self.child(name + "_replay", "run", extra + ["--mode", "replay"],
                            preload=True, timeout_s=150)
        analysis = self.analyze(real["_trace"], name + "_real")
        records = self.cuda_records(real["_trace"])
        gpu = analysis.get("gpu") or {}
        run = gpu.get("run") or {}
        row = {"config": name, "expected": cfg["expected"], "verdict": analysis.get("verdict"),
               "predicted": analysis.get("predicted_speedup"), "path": analysis.get("path"),
               "launches": run.get("launches"), "probes": gpu.get("probes"),
               "probes_resolved": gpu.get("probes_resolved"),
               "waits": gpu.get("waits"), "waits_unknown": gpu.get("waits_unknown"),
               "exposed_fraction": (analysis.get("loader_wait") or {}).get("exposed_fraction"),
               "stall_fraction": (analysis.get("loader_wait") or {}).get("stall_fraction"),
               "busy_fraction": (gpu.get("window") or {}).get("wait_gpu_busy_fraction"),
               "pin_thread": real.get("pin_memory_thread"), "records": records}
        row["measured"] = measured_speedup(real, replay, analysis)
        self.rows.append(row)
        self.judge(row, analysis)

    def judge(self, row, analysis):
        name, gpu = row["config"], analysis.get("gpu") or {}
        where = "(%s; reasons: %s)" % (name, analysis.get("reasons"))
        if not gpu.get("present"):
            self.fail("%s: no GPU activity in the trace: the driver was not intercepted %s"
                      % (name, where))
            return
        if not row["launches"]:
            self.fail("%s: gpu.run.launches = 0: no launch seen through cuGetProcAddress %s"
                      % (name, where))
        if not gpu.get("driver_version"):
            self.fail("%s: no CUDA_INFO driver-found record (gpu.driver_version = %s)" % (
                name, gpu.get("driver_version")))
        if not row["probes_resolved"] or gpu.get("probing_stopped"):
            self.fail("%s: drain probes not resolved (probes %s, resolved %s, stopped %s, "
                      "notes %s)" % (name, row["probes"], row["probes_resolved"],
                                     gpu.get("probing_stopped"), gpu.get("driver_notes")))
        if row["waits"] and (row["waits_unknown"] or 0) > 0.1 * row["waits"]:
            self.fail("%s: %d of %d waits without GPU evidence" % (
                name, row["waits_unknown"], row["waits"]))
        if name == "dali":
            self.judge_dali(analysis)
        elif row["path"] != "pin_memory" or not row["pin_thread"]:
            self.fail("%s: pin-memory thread path not seen (analyzer path %r, thread "
                      "started %s)" % (name, row["path"], row["pin_thread"]))
        measured_verdict = verdict_of(row["measured"])
        if row["expected"] is None:
            row["expected"] = measured_verdict + " (measured)"
            expected = measured_verdict
        else:
            expected = row["expected"]
        if measured_verdict != expected:
            self.regime_problems.append(
                "%s: the configuration did not produce its regime here: measured Replay "
                "speedup %.2f (%s), built for %s; adjust --%s-gpu-ms" % (
                    name, row["measured"], measured_verdict, row["expected"], name))
        if row["verdict"] != expected and row["verdict"] != measured_verdict:
            self.fail("%s: verdict %s, expected %s (measured speedup %.2f -> %s) %s" % (
                name, row["verdict"], row["expected"], row["measured"], measured_verdict,
                where))
        elif row["verdict"] != measured_verdict:
            self.fail("%s: verdict %s disagrees with the measured speedup %.2f (%s) %s" % (
                name, row["verdict"], row["measured"], measured_verdict, where))
        predicted = row["predicted"]
        if not isinstance(predicted, (int, float)):
            self.fail("%s: no predicted speedup %s" % (name, where))
        elif abs(predicted / row["measured"] - 1.0) > self.args.tolerance:
            self.fail("%s: predicted speedup %.3f vs measured %.3f: off by more than %.0f%%"
                      % (name, predicted, row["measured"], 100 * self.args.tolerance))

    def judge_dali(self, analysis):
        """DALI's loader recognised (its GPU pipeline said), its own
        operator ranges read, the GPU and mixed ones told apart."""
        loaders = [l for l in analysis.get("loaders") or () if l.get("training")]
        kind = loaders[0].get("kind") if loaders else None
        if kind != "dali":
            self.fail("dali: the loop's loader is %r, not DALI's (loaders %s)" % (
                kind, analysis.get("loaders")))
        config = analysis.get("config") or {}
        if config.get("device") != "gpu":
            self.fail("dali: CONFIG device=%r, expected gpu (config %s)" % (
                config.get("device"), config))
        ops = [op.get("name", "") for op in analysis.get("library_operators") or ()]
        if not any(n.endswith(" (GPU)") or n.endswith(" (mixed)") for n in ops):
            self.fail("dali: no GPU or mixed operator among DALI's ranges: %s" % ops)

    def summary(self, info):
        print()
        print("dlbn real-GPU check: %s, torch %s (CUDA %s); outputs in %s" % (
            info.get("device"), info.get("torch"), info.get("cuda_build"), self.out))
        head = "%-8s %-13s %-13s %9s %9s %7s %9s %9s %7s %7s %-10s" % (
            "config", "verdict", "expected", "predicted", "measured", "error", "launches",
            "probes", "exposed", "stall", "path")
        print(head)
        print("-" * len(head))
        for r in self.rows:
            err = (r["predicted"] / r["measured"] - 1.0
                   if isinstance(r["predicted"], (int, float)) else float("nan"))
            print("%-8s %-13s %-13s %9s %9.3f %+6.1f%% %9s %9s %7s %7s %-10s" % (
                r["config"], r["verdict"], r["expected"], fmt(r["predicted"]), r["measured"],
                100 * err, r["launches"], "%s/%s" % (r["probes_resolved"], r["probes"]),
                fmt(r["exposed_fraction"], 2), fmt(r["stall_fraction"], 2), r["path"]))
            if r["records"]:
                print("         records %s; CUDA_INFO %s" % (
                    r["records"]["counts"], r["records"]["cuda_info"]))
        for text in self.regime_problems:
            print("REGIME: " + text)
        for text in self.failures:
            print("FAIL: " + text)
        print("total %.0f s" % (time.monotonic() - self.t0))


def fmt(value, digits=3):
    return ("%.*f" % (digits, value)) if isinstance(value, (int, float)) else str(value)


def verdict_of(speedup):
    if speedup > DETECTED_ABOVE:
        return "DETECTED"
    if speedup > POTENTIAL_ABOVE:
        return "POTENTIAL"
    return "NOT_DETECTED"


def trace_origin_s(trace):
    """created_monotonic_ns of the trace's file header (dlbn_trace.h), in
    seconds: the origin of the analyzer's window.start_s/end_s."""
    with open(trace, "rb") as f:
        header = f.read(64)
    return struct.unpack_from("<Q", header, 40)[0] / 1e9


def measured_speedup(real, replay, analysis):
    """Real over Replay time between step completions over the analyzer's
    window of the Real run (located on its step_times; the default window
    when it does not fall on at least 10 steps)."""
    fetch, real_done, replay_done = real["step_times"], real["done"], replay["done"]
    if len(real_done) != len(replay_done):
        raise RuntimeError("real and replay ran different step counts (%d, %d)" % (
            len(real_done), len(replay_done)))
    first, last = real["window_first_step"] - 1, len(fetch) - 1
    win = analysis.get("window") or {}
    start, end = win.get("start_s"), win.get("end_s")
    if isinstance(start, (int, float)) and isinstance(end, (int, float)):
        origin = trace_origin_s(real["_trace"])
        inside = [k for k, t in enumerate(fetch) if start - 1e-3 <= t - origin <= end + 1e-3]
        if len(inside) >= 10:
            first, last = inside[0], inside[-1]
    return (real_done[last] - real_done[first]) / (replay_done[last] - replay_done[first])


def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--python", default=sys.executable,
                    help="interpreter with PyTorch 2.x + CUDA (default: this one)")
    ap.add_argument("--build", default=os.path.join(ROOT, "build"),
                    help="dlbn build directory (libdlbn.so, dlbn-analyze)")
    ap.add_argument("--out", default=None, help="output directory (default: a new temp dir)")
    ap.add_argument("--tolerance", type=float, default=0.10,
                    help="predicted vs measured speedup, relative (default 0.10)")
    ap.add_argument("--input-gpu-ms", type=float, default=CONFIGS["input"]["gpu_ms"])
    ap.add_argument("--compute-gpu-ms", type=float, default=CONFIGS["compute"]["gpu_ms"])
    ap.add_argument("--only", choices=sorted(CONFIGS), default=None)
    ap.add_argument("--budget-s", type=float, default=420.0,
                    help="stop starting runs after this long (default 420)")
    return ap.parse_args(argv)


def main(argv):
    if argv[:1] == ["--child"]:
        return child_main(argv[1:])
    args = parse_args(argv)
    checker = Checker(args)
    info = {}
    try:
        info = checker.preflight()
        depths = checker.calibrate()
        names = [args.only] if args.only else ["input", "compute", "dali"]
        if "dali" in names and not info.get("dali"):
            checker.log("dali: skipped, DALI is not installed for %s" % args.python)
            names.remove("dali")
        for name in names:
            if checker.time_left() < 60:
                checker.fail("out of time budget before %s" % name)
                break
            try:
                checker.check_config(name, depths[name])
            except (RuntimeError, OSError, ValueError, KeyError,
                    subprocess.TimeoutExpired) as exc:
                checker.fail("%s: %s" % (name, exc))
    except CannotCheck as exc:
        print("check_h200: cannot check here: %s" % exc, file=sys.stderr)
        return EXIT_CANNOT
    except (RuntimeError, OSError, ValueError, KeyError, subprocess.TimeoutExpired) as exc:
        checker.fail(str(exc))
    checker.summary(info)
    if checker.failures:
        return EXIT_FAIL
    if checker.regime_problems:
        return EXIT_REGIME
    print("OK")
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
