"""dlbn Python bootstrap, localization half: where the input pipeline's time
goes, in Python terms (docs/DESIGN.md, "Python bootstrap").

_dlbn_boot calls install() once torch's DataLoader is wrapped, and _dlbn_patch
fetch_begins(iter_id, iterator) at every fetch of the training loop.  In
every process that fetches batches - each DataLoader worker, and the main
process for num_workers=0 - this module then measures, aggregated in the
process (no per-sample or per-batch records):

  exact     the whole fetch of a batch (torch's dataset fetcher: the
            samples' __getitem__ plus collate; in a worker also the
            fetching thread's run-queue time, which the main thread's
            fetch marks already carry), the collate_fn, each stage
            of a torchvision Compose (v1 __call__, v2 forward; timm's
            transforms are torchvision Composes), a Hugging Face
            set_transform function (in workers), and in workers the
            pickling of the batch for the hand-off (ForkingPickler.dumps,
            run by the queue's feeder thread): count, wall ns and the
            thread's CPU ns of each;
  sampled   the Python stack of the fetching thread, SIGPROF at a low rate
            (DLBN_PROFILE_INTERVAL_MS of process CPU time, default 10),
            taken only while it fetches: the timer counts the fetching
            thread's CPU time, so a worker blocked waiting for its next
            index gets no signal, and
            one that comes between fetches is dropped at once.  Each sample
            is weighted by the thread CPU time since the previous one
            (intervals are cut at fetch and stage edges), so a long C call
            (a JPEG decode holding the GIL, which delays the Python handler
            and merges expirations) counts in full.  The aggregate: (the
            library function the dataset's code called, its file and line,
            in a timed stage or not, three callers, the innermost frame) ->
            samples, CPU ns.

Why SIGPROF on a CPU-time timer: it is the conventional profiling signal
(few programs use it; a program that does keeps it - see below), and the
timer (libdlbn's dlbn_profile_timer: a POSIX timer on the fetching thread's
CPU clock that signals that thread; not ITIMER_PROF, a process-wide CPU
timer, which makes Linux step the program's time.process_time() in
scheduler ticks while armed) fires only
while the thread is on the CPU, so it practically never interrupts a
blocking system call (a worker reading a file, a C library that does not
retry EINTR), and the handler runs in Python, which is what can read the
Python frames.  Time spent off the CPU (storage, sleeps, locks) is not
sampled; it is the difference between the exact wall and CPU times, and the
analyzer splits it with the recorder's file-read hooks.

Staying out of the way: the sampler starts only if SIGPROF has the default
disposition and no ITIMER_PROF timer runs when the process first fetches,
and only on the main thread (Python runs signal handlers there only).
At every fetch it checks that SIGPROF still has its handler; a program
that installed its own later keeps it (the sampler stops for good, its
timer is stopped unless the program set another interval, the exact times
go on) and the trace says so (PROF_STAGE kind SAMPLER).  A signal that
lands while a thread blocks in a system call interrupts it (CPython's
handlers are installed without SA_RESTART); Python's own calls retry
(PEP 475), and the CPU-time timer makes that rare, since it fires while
the process runs, not while it waits.  In the main process the timer runs
only inside fetches: the fetch marks arm and disarm it there
(dlbn_profile_fetch_timer), a fetch without marks arms it itself.
DLBN_PROFILE=0 turns this module off; DLBN_PROFILE=exact keeps the exact
times without sampling.

Output: cumulative summaries (PROF_STAGE, PROF_SAMPLE, libintercept/
marker_profile.c) written at the end of a fetch once a second has passed
since the last ones, and when the process exits (atexit in the main
process; multiprocessing's exit finalizers in a worker, which run before
os._exit): a worker killed with SIGKILL leaves what it wrote in its last
second of fetching.  CALLSITE: the training loop's next() call site, once
per iterator.

A loader's own threads in the training process (nodes' thread workers, a
named loader's producer) are out of the SIGPROF sampler's reach:
_dlbn_threads samples them from a thread of its own, with stack_key and
sample_text of this module.

Rules: as _dlbn_patch - dlbn's failures never reach the program, exceptions
of the wrapped calls pass through unchanged (the wrappers take their own
frame out of the traceback).
"""
import sys

import _dlbn_common as _common

PROF_FETCH = 1
PROF_TRANSFORM = 2
PROF_HF = 3
PROF_COLLATE = 4
PROF_SEND = 5
PROF_GETITEM = 6
PROF_SAMPLER = 7
PROF_RUNQ = 8

FLUSH_NS = 1000000000   # summaries at most once a second while fetching
# nodes' map workers: daemon processes their parent may terminate at its
# exit before their loop ends (no exit finalizer then), so more often.
MAP_FLUSH_NS = 200000000
SAMPLES_KEPT = 40       # sampled leaves written per summary (the heaviest)
CALLSITE_FRAMES = 4
# Frames of these files are the DataLoader machinery, not the user's loop.
_MACHINERY = ("/torch/utils/data/", "/torchdata/stateful_dataloader/")

_api = None          # the marker functions once installed
_environ = {}
_sampling = True     # DLBN_PROFILE != "exact"
_interval_s = 0.010
_state = None        # this process's _Profile (new after fork)
_callsites = set()   # iterator ids whose call site was written
_scope = 0           # iterator id of the main process's current fetch
_map_worker = False  # this process is a torchdata.nodes ParallelMapper worker


def _emit_noop(*args):
    return -1


class _Api:
    def __init__(self, stage, sample, callsite, runq=None, timer=None, thread_gil=None,
                 thread_exclude=None, fetch_timer=None):
        self.stage = stage
        self.sample = sample
        self.callsite = callsite
        self.runq = runq or (lambda: -1)
        self.timer = timer   # (first_ns, interval_ns) -> 0; None: ITIMER_PROF
        # (interval_ns) -> 0: the main thread's fetch marks run that timer
        self.fetch_timer = fetch_timer
        # tid -> its waits for the interpreter's lock so far (ns, -1 unknown)
        self.thread_gil = thread_gil or (lambda tid: -1)
        # the calling thread is dlbn's own: its lock waits are not the program's
        self.thread_exclude = thread_exclude or (lambda: None)


def _arm(first_s, interval_s):
    """The sampler's clock: the library's timer on this thread's CPU time
    (ITIMER_PROF, a process-wide CPU timer, would coarsen the program's
    time.process_time() to scheduler ticks while armed), ITIMER_PROF
    where the library has none (tests' own api).  0, 0 disarms."""
    import signal
    timer = getattr(_api, "timer", None)
    if timer is None or timer(int(first_s * 1e9), int(interval_s * 1e9)) != 0:
        signal.setitimer(signal.ITIMER_PROF, first_s, interval_s)


def _load_api():
    import ctypes
    lib = ctypes.PyDLL(None)
    stage, sample, callsite = lib.dlbn_profile_stage, lib.dlbn_profile_sample, lib.dlbn_callsite
    runq = lib.dlbn_thread_runq_ns
    runq.argtypes = ()
    runq.restype = ctypes.c_longlong
    ll = ctypes.c_longlong
    timer = getattr(lib, "dlbn_profile_timer", None)
    if timer is not None:
        timer.argtypes = (ll, ll)
        timer.restype = ctypes.c_int
    fetch_timer = getattr(lib, "dlbn_profile_fetch_timer", None)
    if fetch_timer is not None:
        fetch_timer.argtypes = (ll,)
        fetch_timer.restype = ctypes.c_int
    stage.argtypes = (ctypes.c_int, ll, ll, ll, ll, ll, ctypes.c_char_p)
    sample.argtypes = (ll, ll, ll, ll, ll, ctypes.c_char_p)
    callsite.argtypes = (ll, ctypes.c_char_p)
    for f in (stage, sample, callsite):
        f.restype = ctypes.c_int
    thread_gil = getattr(lib, "dlbn_thread_gil_ns", None)
    if thread_gil is not None:
        thread_gil.argtypes = (ll,)
        thread_gil.restype = ll
    thread_exclude = getattr(lib, "dlbn_thread_exclude", None)
    if thread_exclude is not None:
        thread_exclude.argtypes = ()
        thread_exclude.restype = None
    return _Api(stage, sample, callsite, runq, timer, thread_gil, thread_exclude, fetch_timer)


def install(fetch_module=None, api=None, environ=None):
    """Wrap torch's dataset fetchers (fetch_module: torch.utils.data._utils
    .fetch).  Returns True when the profile is on.  `api` replaces the
    library's functions (tests: an object with stage/sample/callsite)."""
    global _api, _environ, _sampling, _interval_s
    try:
        import os
        if environ is None:
            environ = os.environ
        _environ = environ
        mode = environ.get("DLBN_PROFILE", "1").strip().lower()
        if mode in ("0", "off", "no"):
            return False
        _sampling = mode != "exact"
        try:
            ms = float(environ.get("DLBN_PROFILE_INTERVAL_MS", "10"))
            if ms >= 1:
                _interval_s = ms / 1000.0
        except ValueError:
            pass
        _api = api if api is not None else _load_api()
        if hasattr(os, "register_at_fork"):
            os.register_at_fork(after_in_child=_forget_in_child)
        if fetch_module is None:
            import torch.utils.data._utils.fetch as fetch_module
        patched = []
        for name in ("_MapDatasetFetcher", "_IterableDatasetFetcher"):
            cls = getattr(fetch_module, name, None)
            orig = cls.__dict__.get("fetch") if isinstance(cls, type) else None
            if orig is None or not hasattr(orig, "__code__"):
                continue
            if "collate_fn" not in orig.__code__.co_names:
                continue    # a fetcher that does not collate as expected
            cls.fetch = _make_fetch_wrapper(orig)
            patched.append(name)
        return bool(patched)
    except Exception:
        return False


# ---------------------------------------------------------------------------
# The training loop's side (called by _dlbn_patch's __next__ wrapper)


def fetch_begins(iter_id, it):
    """A fetch of iterator iter_id begins in this (main) process: its scope
    for num_workers=0 profiles, and its next() call site, once."""
    global _scope
    try:
        _scope = iter_id
        if iter_id in _callsites or _api is None:
            return
        _callsites.add(iter_id)
        text = _callsite_text(sys._getframe(2))
        if text:
            _api.callsite(iter_id, text.encode("utf-8", "replace"))
    except Exception:
        pass


def _callsite_text(frame):
    frames = []
    while frame is not None and len(frames) < CALLSITE_FRAMES:
        code = frame.f_code
        name = code.co_filename
        if name not in _common.OWN_FILES and not any(m in name for m in _MACHINERY):
            frames.append("%s:%s:%d" % (name, code.co_name, frame.f_lineno))
        elif frames:
            break   # machinery above the loop: the loop's frames are the call site
        frame = frame.f_back
    return "\n".join(frames)


def map_function(udf):
    """udf, profiled as a worker's fetch of one item: torchdata.nodes'
    ParallelMapper calls it once per item in a worker process
    (_dlbn_loaders wraps its worker loop).  Its call is the "fetch", the
    stages and samples inside it are the worker's, as in a DataLoader
    worker; the pickling of its results for the queue is the hand-off."""
    global _map_worker
    try:
        if _api is None or not callable(udf):
            return udf
        _map_worker = True
        state = _profile_for_process()
    except Exception:
        return udf

    def mapped(item):
        if state.busy:
            return udf(item)
        try:
            return state.fetch(_call_map, udf, item)
        except BaseException as exc:
            _common.drop_own_frames(exc)
            raise

    _common.copy_names(mapped, udf)
    return mapped


def _call_map(udf, item):
    return udf(item)


# ---------------------------------------------------------------------------
# Per process aggregation


def _now():
    import time
    return time.perf_counter_ns()


class _Profile:
    """One fetching process's aggregates and sampler."""

    def __init__(self, pid):
        import os
        import threading
        import time
        self.pid = pid
        self.clock = time.perf_counter_ns
        self.cpu = time.thread_time_ns
        self.main_ident = threading.main_thread().ident
        self.stages = {}     # (kind, scope, name, file, line) -> [count, wall, cpu]
        self.samples = {}    # (scope, file, line, func, in_stage, callers) -> [n, cpu]
        self.in_stage = 0
        self.stage_wall = 0    # wall ns in timed stages since the last sample
        self.busy = False
        self.last_cpu = 0
        self.last_flush = self.clock()
        self.prepared = set()  # ids of fetchers seen (kept alive by the loop)
        self.worker = self._in_worker()
        self.sampler = None    # "on", or why not
        self.sampler_cost = [0, 0]  # samples, CPU ns spent in the handler
        self.send = [0, 0, 0]  # ForkingPickler.dumps: count, wall, cpu
        self.runq = _api.runq
        self.scope = 0
        self.get_ident = threading.get_ident
        self.timer = getattr(_api, "timer", None)
        self.by_marks = False  # the fetch marks run the timer (main thread)
        if self.worker:
            self._wrap_pickler()
        self._register_exit(os)

    @staticmethod
    def _in_worker():
        if _map_worker:
            return True
        try:
            from torch.utils.data import get_worker_info
            return get_worker_info() is not None
        except Exception:
            return False

    def _register_exit(self, os):
        try:
            if self.worker:
                from multiprocessing import util
                util.Finalize(None, self.at_exit, exitpriority=100)
            else:
                import atexit
                atexit.register(self.at_exit)
        except Exception:
            pass

    def at_exit(self):
        self.stop_timer()
        self.flush()

    # -- sampler ------------------------------------------------------------

    def _start_sampler(self):
        """Decide once per process whether to sample (see the module text)."""
        import signal
        if not _sampling:
            return "off (DLBN_PROFILE=exact)"
        if not hasattr(signal, "SIGPROF") or not hasattr(signal, "setitimer"):
            return "off (no SIGPROF)"
        import threading
        if threading.get_ident() != self.main_ident:
            return "off (fetching outside the main thread)"
        current = signal.getsignal(signal.SIGPROF)
        if current is not _on_sigprof and current != signal.SIG_DFL:
            return "off (the program handles SIGPROF)"
        if signal.getitimer(signal.ITIMER_PROF) != (0.0, 0.0):
            return "off (the program runs an ITIMER_PROF timer)"
        signal.signal(signal.SIGPROF, _on_sigprof)
        import random
        self.uniform = random.uniform
        if self.worker:
            # A worker: one timer for its life, never re-armed.  Linux keeps
            # CPU timers in scheduler ticks (4 ms at HZ=250) and rounds a
            # re-armed value up, so arming per fetch would lose the elapsed
            # part each time and never fire for fetches shorter than the
            # interval.  It counts CPU time only, so a worker blocked waiting
            # for its next index gets no signal; one that arrives between
            # fetches finds busy False and returns at once.
            _arm(_interval_s, _interval_s)
        else:
            # The main thread: its fetch marks arm and disarm the timer
            # (libdlbn, dlbn_profile_fetch_timer), two ctypes calls a fetch
            # fewer; a fetch without marks still arms it here.
            fetch_timer = getattr(_api, "fetch_timer", None)
            self.by_marks = fetch_timer is not None and \
                fetch_timer(int(_interval_s * 1e9)) == 0
        return "on"

    def _arm_fetch(self):
        """The main process (num_workers=0), a fetch without marks: the
        timer runs only while it fetches (its training step, and any exec()
        it makes, stay untouched), started at a random phase so that
        fetches shorter than the interval are still sampled in proportion
        to their CPU time (fetches of more than a few scheduler ticks: the
        kernel checks CPU timers at its ticks)."""
        interval_ns = int(_interval_s * 1e9)
        first_ns = int(self.uniform(500000, interval_ns))
        if self.timer is None or self.timer(first_ns, interval_ns) != 0:
            _arm(first_ns / 1e9, _interval_s)

    def _disarm_fetch(self):
        if self.timer is None or self.timer(0, 0) != 0:
            _arm(0.0, 0.0)

    def stop_timer(self):
        """At exit: CPython restores SIGPROF's default action (terminate)
        when it finalizes, so a timer left running could kill the process."""
        try:
            import signal
            if self.sampler == "on" and signal.getsignal(signal.SIGPROF) is _on_sigprof:
                self._marks_stop()
                _arm(0.0, 0.0)
        except Exception:
            pass

    def _marks_stop(self):
        if self.by_marks:
            self.by_marks = False
            _api.fetch_timer(0)

    def _still_ours(self):
        """False (and the sampler stopped for good) once the program put its
        own SIGPROF handler in place; its timer, when it set one (another
        interval than ours), is left alone.  _signal's getsignal: signal's
        wraps the answer in an enum lookup that costs 50 times the call."""
        if _getsignal(_SIGPROF) is _on_sigprof:
            return True
        import signal
        self.sampler = "stopped (the program installed its own SIGPROF handler)"
        try:
            self._marks_stop()
            if getattr(_api, "timer", None) is not None:
                _api.timer(0, 0)   # ours; the program's ITIMER_PROF stays
            elif abs(signal.getitimer(signal.ITIMER_PROF)[1] - _interval_s) < 1e-6:
                signal.setitimer(signal.ITIMER_PROF, 0.0, 0.0)
        except Exception:
            pass
        return False

    def sample(self, frame, cpu):
        weight = cpu - self.last_cpu
        if not self.in_stage:
            # CPU time spent in timed stages since the previous sample is
            # theirs, not this sample's (bounded by their wall time)
            weight -= self.stage_wall
        self.stage_wall = 0
        if frame is not None and frame.f_code.co_filename == _OWN_FILE and not self.in_stage:
            # Python runs a handler at its next check point, so a signal
            # that came during a long C call (a decode holding the GIL) is
            # often handled at the entry of the next Python function called,
            # here one of this module's wrappers: the frame says nothing
            # about where that CPU time went, so the sample is dropped (the
            # others are scaled to the measured CPU time).
            return
        while frame is not None and frame.f_code.co_filename == _OWN_FILE:
            frame = frame.f_back
        if frame is None or weight <= 0:
            return
        found = stack_key(frame)
        if found is None:
            return
        key = (self.scope, found[0], found[1], 1 if self.in_stage else 0) + found[2:]
        agg = self.samples.get(key)
        if agg is None:
            self.samples[key] = [1, weight]
        else:
            agg[0] += 1
            agg[1] += weight

    # -- fetches -------------------------------------------------------------

    def fetch(self, orig, fetcher, index):
        self.scope = 0 if self.worker else _scope
        if id(fetcher) not in self.prepared:
            self._prepare(fetcher)
        if self.sampler is None:
            try:
                self.sampler = self._start_sampler()
            except Exception:
                self.sampler = "off (could not install)"
        sampling = self.sampler == "on"
        # A marked fetch on the main thread lies between two fetch marks
        # whose counters hold its run-queue time (the analyzer takes it from
        # there); reading it here too would cost the loop two system calls.
        marked = self.scope and self.get_ident() == self.main_ident
        q0 = -1 if marked else self.runq()
        t0, c0 = self.clock(), self.cpu()
        self.last_cpu = c0
        self.stage_wall = 0
        self.busy = True
        # the timer is this wrapper's to arm: the main process's, unless the
        # fetch marks run it
        arming = sampling and not self.worker and not (marked and self.by_marks)
        if sampling:
            try:
                if self._still_ours() and arming:
                    self._arm_fetch()
            except Exception:
                self.sampler = "off (signal check failed)"
        try:
            return orig(fetcher, index)
        finally:
            self.busy = False
            if arming and self.sampler == "on":
                try:
                    self._disarm_fetch()
                except Exception:
                    pass
            t1, c1 = self.clock(), self.cpu()
            q1 = -1 if marked else self.runq()
            self.add(PROF_FETCH, "fetch", "", 0, t1 - t0, c1 - c0)
            if q0 >= 0 and q1 >= q0:
                self.add(PROF_RUNQ, "run queue", "", 0, q1 - q0, 0)
            if t1 - self.last_flush >= (MAP_FLUSH_NS if _map_worker else FLUSH_NS):
                self.flush()

    def add(self, kind, name, filename, line, wall, cpu):
        key = (kind, self.scope, name, filename, line)
        agg = self.stages.get(key)
        if agg is None:
            self.stages[key] = [1, wall, cpu]
        else:
            agg[0] += 1
            agg[1] += wall
            agg[2] += cpu

    def timed(self, kind, name, filename, line, func, args):
        """func(*args), timed as one stage (nested stages are not timed).

        Wall time only (perf_counter_ns, no system call): the thread's CPU
        clock is a system call, and on a loaded machine each one can cost
        the caller its CPU for milliseconds (measured: a 60 us crop took
        2-9 ms with two CPU-clock reads around it, 40-170 us without).
        The stage's CPU share comes from the samples taken inside it."""
        self.in_stage += 1
        t0 = self.clock()
        try:
            return func(*args)
        finally:
            t1 = self.clock()
            self.in_stage -= 1
            self.stage_wall += t1 - t0
            self.add(kind, name, filename, line, t1 - t0, 0)

    def _prepare(self, fetcher):
        """First fetch through this fetcher: time its collate_fn, name the
        dataset's __getitem__, wrap the stage containers now imported."""
        self.prepared.add(id(fetcher))
        _patch_composes()
        collate = getattr(fetcher, "collate_fn", None)
        if callable(collate) and not isinstance(collate, _TimedCall):
            name, filename, line = _describe(collate)
            fetcher.collate_fn = _TimedCall(self, PROF_COLLATE, "collate_fn " + name,
                                            filename, line, collate)
        dataset = getattr(fetcher, "dataset", None)
        inner = dataset
        for _ in range(4):  # Subset and similar wrappers: the dataset inside
            below = getattr(inner, "dataset", None)
            if below is None or below is inner:
                break
            inner = below
        # an IterableDataset's fetcher pulls from its iterator (__iter__)
        which = "__iter__" if hasattr(fetcher, "dataset_iter") else "__getitem__"
        getitem = getattr(type(dataset), which, None)
        code = getattr(getitem, "__code__", None)
        if code is not None:
            self.stages.setdefault(
                (PROF_GETITEM, self.scope, type(dataset).__qualname__ + "." + code.co_name,
                 code.co_filename, code.co_firstlineno), [0, 0, 0])
        if self.worker and inner is not None:
            self._wrap_hf_transform(inner)
        if dataset is None and callable(fetcher):   # a map function (map_function)
            name, filename, line = _describe(fetcher)
            self.stages.setdefault((PROF_GETITEM, self.scope, "map " + name, filename, line),
                                   [0, 0, 0])

    def _wrap_hf_transform(self, dataset):
        """A Hugging Face datasets.Dataset with set_transform/with_transform:
        its transform function, timed (only in workers: their copy of the
        dataset is private, the main process's may be pickled again)."""
        if not type(dataset).__module__.startswith("datasets."):
            return
        if getattr(dataset, "_format_type", None) != "custom":
            return
        kwargs = getattr(dataset, "_format_kwargs", None)
        func = kwargs.get("transform") if isinstance(kwargs, dict) else None
        if not callable(func) or isinstance(func, _TimedCall):
            return
        name, filename, line = _describe(func)
        kwargs["transform"] = _TimedCall(self, PROF_HF, name, filename, line, func)

    def _wrap_pickler(self):
        try:
            from multiprocessing.reduction import ForkingPickler
            orig = ForkingPickler.__dict__["dumps"].__func__
        except Exception:
            return
        send, clock, cpu = self.send, self.clock, self.cpu

        def dumps(cls, obj, protocol=None):
            t0, c0 = clock(), cpu()
            try:
                return orig(cls, obj, protocol)
            finally:
                send[0] += 1
                send[1] += clock() - t0
                send[2] += cpu() - c0

        dumps.__wrapped__ = orig
        ForkingPickler.dumps = classmethod(dumps)

    # -- output --------------------------------------------------------------

    def flush(self):
        """Write the cumulative summaries (never raises)."""
        try:
            self.last_flush = self.clock()
            stage = _api.stage
            for (kind, scope, name, filename, line), agg in list(self.stages.items()):
                text = ("%s\t%s" % (name, filename)).encode("utf-8", "replace")
                cpu = agg[2] if kind == PROF_FETCH else -1   # stages: wall only
                stage(kind, scope, agg[0], agg[1], cpu, line, text)
            if self.send[0]:
                stage(PROF_SEND, 0, self.send[0], self.send[1], self.send[2], 0,
                      b"send (pickle the batch for the hand-off)\t")
            if self.sampler is not None:
                stage(PROF_SAMPLER, self.scope, 1 if self.sampler == "on" else 0,
                      self.sampler_cost[1], self.sampler_cost[0], 0,
                      ("sampler %s\t" % self.sampler).encode())
            heavy = sorted(self.samples.items(), key=lambda kv: -kv[1][1])[:SAMPLES_KEPT]
            sample = _api.sample
            for (scope, code, line, in_stage, callers, leaf, leaf_line), agg in heavy:
                sample(scope, agg[1], agg[0], in_stage, line,
                       sample_text(code, callers, leaf, leaf_line))
        except Exception:
            pass


def stack_key(frame):
    """A sampled stack's key: (entry code, its line, callers, leaf code,
    leaf line), or None for no frame.  The entry is the library function
    the dataset's own code called (numpy's fft2, PIL's convert), found by
    walking out from the leaf to the first frame outside the libraries; a
    leaf in the user's code is its own entry.  The key holds code objects
    and line numbers only: the text is made when the summary is written
    (sample_text), so that taking a sample stays cheap."""
    if frame is None:
        return None
    leaf = frame
    entry = frame
    up = frame
    while up is not None and _is_library(up.f_code.co_filename) and \
            not _is_machinery(up.f_code.co_filename):
        entry = up
        up = up.f_back
    if up is None:      # no user or DataLoader frame above: the leaf
        entry = leaf
    # else up is the dataset's code, or torch's fetcher calling a library
    # dataset directly (a Hugging Face __getitems__): entry is the library
    # function it called
    callers = []
    up = entry.f_back
    while up is not None and len(callers) < 6:
        if up.f_code.co_filename not in _common.OWN_FILES:  # dlbn's wrappers
            callers.append(up.f_code)
            callers.append(up.f_lineno)
        up = up.f_back
    return (entry.f_code, entry.f_lineno, tuple(callers),
            None if leaf is entry else leaf.f_code,
            None if leaf is entry else leaf.f_lineno)


def sample_text(code, callers, leaf, leaf_line):
    """PROF_SAMPLE's text of a stack_key: function, file, callers, leaf."""
    chain = "<".join("%s:%d" % (callers[i].co_name, callers[i + 1])
                     for i in range(0, len(callers), 2))
    where = "" if leaf is None else "%s %s:%d" % (leaf.co_name, leaf.co_filename, leaf_line)
    text = "%s\t%s\t%s\t%s" % (code.co_name, code.co_filename, chain, where)
    return text.encode("utf-8", "replace")


def sampling_threads():
    """Whether the loaders' own threads are sampled (_dlbn_threads): the
    profile is on with its sampler, in the training process."""
    return _api is not None and _sampling and not _map_worker


def interval_s():
    return _interval_s


class _TimedCall:
    """A callable timed as one stage: a loader's collate_fn, a Hugging Face
    transform.  Lives only in the process that made it."""

    def __init__(self, profile, kind, name, filename, line, func):
        self._profile = profile
        self._what = (kind, name, filename, line)
        self.__wrapped__ = func

    def __call__(self, *args, **kwargs):
        profile = self._profile
        if profile.in_stage or kwargs:
            return self.__wrapped__(*args, **kwargs)
        kind, name, filename, line = self._what
        try:
            return profile.timed(kind, name, filename, line, self.__wrapped__, args)
        except BaseException as exc:
            _common.drop_own_frames(exc)
            raise

    def __getattr__(self, name):  # collate_fn attributes the loader may read
        if name.startswith("__") or name in ("_profile", "_what"):
            raise AttributeError(name)   # (a copy being made has no __wrapped__ yet)
        return getattr(self.__wrapped__, name)


def _active():
    """This process's profile while it fetches, else None."""
    state = _state
    if state is not None and state.busy:
        return state
    return None


def _profile_for_process():
    """This process's profile: made at its first fetch, forgotten by a
    forked child (_forget_in_child), so no getpid at every fetch."""
    global _state
    state = _state
    if state is None:
        import os
        state = _state = _Profile(os.getpid())
    return state


def _forget_in_child():
    global _state
    _state = None


def _make_fetch_wrapper(orig):
    def fetch(self, possibly_batched_index):
        try:
            state = _profile_for_process() if _api is not None else None
        except Exception:
            state = None
        if state is None or state.busy:
            return orig(self, possibly_batched_index)
        try:
            return state.fetch(orig, self, possibly_batched_index)
        except BaseException as exc:
            _common.drop_own_frames(exc)
            raise

    _common.copy_names(fetch, orig)
    return fetch


_library_cache = {}
_machinery_cache = {}


def _is_machinery(filename):
    known = _machinery_cache.get(filename)
    if known is None:
        known = any(m in filename for m in _MACHINERY)
        if len(_machinery_cache) < 4096:
            _machinery_cache[filename] = known
    return known


def _is_library(filename):
    """A file of an installed package or of the standard library (or an
    interpreter-made one such as "<__array_function__ internals>")."""
    known = _library_cache.get(filename)
    if known is None:
        known = (filename.startswith("<") or "/site-packages/" in filename or
                 "/dist-packages/" in filename or filename.startswith(_STDLIB))
        if len(_library_cache) < 4096:
            _library_cache[filename] = known
    return known


def _stdlib_prefix():
    try:
        import sysconfig
        return sysconfig.get_paths()["stdlib"] + "/"
    except Exception:
        return "\0"


_STDLIB = _stdlib_prefix()

try:
    from _signal import SIGPROF as _SIGPROF, getsignal as _getsignal
except ImportError:     # no SIGPROF here: the sampler never starts
    _SIGPROF, _getsignal = 0, lambda signum: None


def _on_sigprof(signum, frame):
    try:
        state = _state
        if state is None or not state.busy:
            return
        c0 = state.cpu()
        state.sample(frame, c0)
        c1 = state.cpu()
        # the handler's own CPU time: the sampler's cost, and no sample's
        state.last_cpu = c1
        cost = state.sampler_cost
        cost[0] += 1
        cost[1] += c1 - c0
    except Exception:
        pass


# ---------------------------------------------------------------------------
# Stage containers: torchvision Compose (v1 __call__, v2 forward)

_compose_types = ()
_compose_done = set()


def _patch_composes():
    """Wrap the Compose classes of the torchvision modules imported so far
    (each once per process; a fork child inherits its parent's wrapping)."""
    global _compose_types
    for modname, attr in (("torchvision.transforms.transforms", "__call__"),
                          ("torchvision.transforms.v2._container", "forward")):
        if modname in _compose_done:
            continue
        module = sys.modules.get(modname)
        if module is None:
            continue
        _compose_done.add(modname)
        try:
            cls = getattr(module, "Compose", None)
            orig = cls.__dict__.get(attr) if isinstance(cls, type) else None
            code = getattr(orig, "__code__", None)
            if code is None or getattr(orig, "_dlbn_stage_loop", False):
                continue
            if "transforms" not in code.co_names:
                continue
            if attr == "forward":
                if "needs_unpacking" not in code.co_varnames:
                    continue   # a v2 Compose whose loop this does not know
                wrapper = _make_v2_forward(orig)
            else:
                if code.co_argcount != 2:
                    continue
                wrapper = _make_v1_call(orig)
            setattr(cls, attr, wrapper)
            _compose_types = _compose_types + (cls,)
        except Exception:
            pass


def _stage_of(transform):
    """(name, file, line) of a transform: its class and the code that runs."""
    cls = type(transform)
    name = cls.__name__
    func = None
    inner = getattr(transform, "lambd", None)   # torchvision Lambda
    if callable(inner) and hasattr(inner, "__code__"):
        func = inner
        name = "%s(%s)" % (name, getattr(inner, "__qualname__", "?"))
    elif hasattr(transform, "__code__"):         # a plain function
        func = transform
        name = getattr(transform, "__qualname__", name)
    else:
        for meth in ("forward", "__call__"):
            for klass in cls.__mro__:
                found = klass.__dict__.get(meth)
                if found is not None and hasattr(found, "__code__") and \
                        klass.__module__ != "torch.nn.modules.module":
                    func = found
                    break
            if func is not None:
                break
    code = getattr(func, "__code__", None)
    if code is None:
        return name, "", 0
    return name, code.co_filename, code.co_firstlineno


_stage_names = {}   # id(transform) -> (transform, (name, file, line))


def _stage_key(transform):
    """(name, file, line) of a transform, worked out once per object (the
    entry keeps the object alive, so its id is not reused)."""
    known = _stage_names.get(id(transform))
    if known is not None and known[0] is transform:
        return known[1]
    key = _stage_of(transform)
    if len(_stage_names) < 4096:
        _stage_names[id(transform)] = (transform, key)
    return key


def _make_v1_call(orig):
    def __call__(self, img):
        state = _active()
        if state is None or state.in_stage:
            return orig(self, img)
        try:
            for t in self.transforms:
                if isinstance(t, _compose_types):
                    img = t(img)
                else:
                    name, filename, line = _stage_key(t)
                    img = state.timed(PROF_TRANSFORM, name, filename, line, t, (img,))
            return img
        except BaseException as exc:
            _common.drop_own_frames(exc)
            raise

    __call__._dlbn_stage_loop = True
    _common.copy_names(__call__, orig)
    return __call__


def _make_v2_forward(orig):
    def forward(self, *inputs):
        state = _active()
        if state is None or state.in_stage:
            return orig(self, *inputs)
        try:
            needs_unpacking = len(inputs) > 1
            outputs = None
            for t in self.transforms:
                if isinstance(t, _compose_types):
                    outputs = t(*inputs)
                else:
                    name, filename, line = _stage_key(t)
                    outputs = state.timed(PROF_TRANSFORM, name, filename, line, t, inputs)
                inputs = outputs if needs_unpacking else (outputs,)
            return outputs
        except BaseException as exc:
            _common.drop_own_frames(exc)
            raise

    forward._dlbn_stage_loop = True
    _common.copy_names(forward, orig)
    return forward


def _describe(func):
    """(name, file, line) of a callable (a function, a partial, an object)."""
    inner = func
    for _ in range(4):
        below = getattr(inner, "func", None) or getattr(inner, "__wrapped__", None)
        if below is None or below is inner:
            break
        inner = below
    code = getattr(inner, "__code__", None)
    if code is None:
        call = getattr(type(inner), "__call__", None)
        code = getattr(call, "__code__", None)
    name = getattr(inner, "__qualname__", None) or type(inner).__name__
    if code is None:
        return name, "", 0
    return name, code.co_filename, code.co_firstlineno


_OWN_FILE = fetch_begins.__code__.co_filename
