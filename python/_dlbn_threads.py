"""dlbn Python bootstrap: where a loader's own threads spend their time.

A loader other than torch's DataLoader often works in threads of the
training process: torchdata.nodes' thread workers (ParallelMapper with
method="thread") and its Prefetcher's thread, a named prefetcher's
producer thread (DLBN_LOADER).  The SIGPROF sampler of _dlbn_profile
reaches only the main thread (Python runs signal handlers there), so these
threads are sampled from a thread of dlbn's own:

  which     the Python threads a loader's iteration started: those alive
            after the first two fetches of an epoch that were not before
            the epoch began (_dlbn_loaders calls watch_new), at most
            MAX_WATCHED;
  how       every DLBN_PROFILE_INTERVAL_MS of wall time (default 10) the
            sampling thread reads the watched threads' Python stacks
            (sys._current_frames) and CPU clocks (pthread_getcpuclockid);
            each sample stands for the wall time since that thread's
            previous one;
  idle      a thread whose innermost frames show it waiting for another
            thread - a queue's get or put (the standard library's queue,
            multiprocessing's), a Condition, Event or Semaphore of
            threading (nodes' prefetch threads wait on a semaphore for
            room) - waits for work or for room to hand its result over:
            idle.  Everything else, sleeps and file reads included, is the
            thread's work: busy.  busy / watched is its busy share, the
            figure that tells whether the producer holds the loop back.

Output, cumulative (as _dlbn_profile's), at exit and every quarter of the
time since the sampling began (at least 0.2 s, at most a second), with
scope = the iterator id of the epoch whose fetches found the thread:
PROF_STAGE PROF_THREAD (count = busy samples, wall = busy wall, cpu = the
thread's CPU time in those intervals, text "thread NAME<TAB>target file")
and PROF_THREAD_WATCHED (the same over all samples), and the busy samples
as PROF_SAMPLE keyed as _dlbn_profile keys its own, in_stage 2 (the thread
used the CPU for at least half of the interval) or 3 (it mostly waited:
I/O, sleeps, locks), weight = wall ns.

Native threads: a library's C++ pool runs no Python; DALI names its pool
threads "[DALI][TP<n>]", found under /proc/self/task by that name when the
epoch's first fetches end.  Their busy time is their CPU time (schedstat,
read at each flush: such a pool waits for work off the CPU), their watched
time the wall time since they were found; PROF_THREAD records with count 0,
no samples.

Cost: one wake-up per interval while some watched thread lives, taking the
GIL for the stack walk (tens of microseconds); nothing runs when no loader
thread is watched, and nothing in processes other than the training one.
The sampling thread is a daemon named "dlbn-thread-sampler"; it never
raises into the program, and it stops when the watched threads are gone.
"""
import sys

PROF_THREAD = 9
PROF_THREAD_WATCHED = 10
MAX_WATCHED = 16
FLUSH_NS = 1000000000
FLUSH_FIRST_NS = 200000000
SAMPLER_NAME = "dlbn-thread-sampler"
# Names native (C++) threads give themselves, of the pools loaders run:
# DALI's thread pool ("[DALI][TP<n>]...")
NATIVE_PREFIXES = ("[DALI][TP",)
# (standard library file, functions): waiting for another thread, idle
_IDLE_CALLS = (("/queue.py", ("get", "put")),
               ("/threading.py", ("wait", "wait_for", "acquire")),
               ("/multiprocessing/queues.py", ("get", "put")),
               ("/multiprocessing/synchronize.py", ("wait", "acquire")))
_IDLE_DEPTH = 6     # frames from the innermost searched for those calls

_profile = None     # the _dlbn_profile module (its marker API, interval, stack keys)
_sampler = None     # the running _Sampler of this process


class _Watched:
    """One watched thread's totals and its last sample's clocks."""

    __slots__ = ("ident", "scope", "name", "target", "clock", "last_wall", "last_cpu",
                 "busy", "watched")

    def __init__(self, thread, scope, clock, now, cpu):
        self.ident = thread.ident
        self.scope = scope
        self.name = thread.name
        target = getattr(thread, "_target", None)
        code = getattr(target, "__code__", None)
        self.target = code.co_filename if code is not None else ""
        self.clock = clock
        self.last_wall, self.last_cpu = now, cpu
        self.busy = [0, 0, 0]     # samples, wall ns, CPU ns
        self.watched = [0, 0, 0]


class _Native:
    """A thread without Python frames (a library's C++ thread pool), known
    by the name it gave itself: its CPU time from /proc schedstat, read at
    each flush, is its busy time (such a pool waits off the CPU)."""

    __slots__ = ("tid", "scope", "name", "first_wall", "first_run", "wall", "run")

    def __init__(self, tid, scope, name, now, run):
        self.tid, self.scope, self.name = tid, scope, name
        self.first_wall, self.first_run = now, run
        self.wall, self.run = now, run

    def update(self, now):
        run = _schedstat_run_ns(self.tid)
        if run is not None:   # else it ended: its last reading stays
            self.wall, self.run = now, run


def _schedstat_run_ns(tid):
    try:
        with open("/proc/self/task/%d/schedstat" % tid, "rb") as f:
            return int(f.read().split()[0])
    except Exception:
        return None


def _native_threads(known):
    """(tid, name) of this process's threads named by a NATIVE_PREFIXES
    library, not in known."""
    import os
    found = []
    try:
        tids = os.listdir("/proc/self/task")
    except Exception:
        return found
    for entry in tids:
        if not entry.isdigit() or int(entry) in known:
            continue
        try:
            with open("/proc/self/task/%s/comm" % entry, "rb") as f:
                name = f.read().decode("utf-8", "replace").strip()
        except Exception:
            continue
        if name.startswith(NATIVE_PREFIXES):
            found.append((int(entry), name))
    return found


class _Sampler:
    def __init__(self, interval_s):
        import os
        import threading
        import time
        self.pid = os.getpid()
        self.interval_s = interval_s
        self.now = time.perf_counter_ns
        self.cpu_of = time.clock_gettime_ns
        self.lock = threading.Lock()
        self.watched = {}        # ident -> _Watched (live ones)
        self.done = []           # _Watched of threads that ended
        self.native = {}         # tid -> _Native
        self.samples = {}        # (scope, stack key..., on_cpu) -> [n, wall ns]
        self.last_flush = self.started = self.now()
        self.thread = None
        self.stopped = False

    def watch(self, thread, scope):
        import threading
        import time
        try:
            clock = time.pthread_getcpuclockid(thread.ident)
            cpu = self.cpu_of(clock)
        except Exception:
            return    # ended already, or no per-thread CPU clock here
        with self.lock:
            if thread.ident in self.watched or self.stopped or \
                    len(self.watched) + len(self.done) >= MAX_WATCHED:
                return
            self.watched[thread.ident] = _Watched(thread, scope, clock, self.now(), cpu)
            runner = self._runner()
        if runner is not None:
            runner.start()

    def watch_native(self, scope):
        """The threads named by NATIVE_PREFIXES not watched yet."""
        found = _native_threads(self.native)
        if not found:
            return
        now = self.now()
        with self.lock:
            for tid, name in found:
                run = _schedstat_run_ns(tid)
                if run is not None and len(self.native) < MAX_WATCHED and not self.stopped:
                    self.native[tid] = _Native(tid, scope, name, now, run)
            runner = self._runner()
        if runner is not None:
            runner.start()

    def _runner(self):
        """The sampling thread to start, when none runs (under the lock)."""
        if self.thread is not None or self.stopped:
            return None
        import threading
        self.thread = threading.Thread(target=self.run, name=SAMPLER_NAME, daemon=True)
        return self.thread

    def run(self):
        """The sampling thread: until no watched thread is left (a later
        watch starts another) or the process exits."""
        import time
        while True:
            # only native threads: nothing to sample, a flush a second
            time.sleep(self.interval_s if self.watched else FLUSH_NS / 1e9)
            try:
                self.tick()
            except Exception:
                pass
            with self.lock:
                if self.stopped or not (self.watched or self.native):
                    self.thread = None
                    break
        self.flush()

    def tick(self):
        """One sample of every watched thread."""
        frames = sys._current_frames() if self.watched else {}
        now = self.now()
        with self.lock:
            for ident, w in list(self.watched.items()):
                frame = frames.get(ident)
                try:
                    cpu = self.cpu_of(w.clock) if frame is not None else None
                except Exception:
                    cpu = None
                if cpu is None:   # the thread ended
                    del self.watched[ident]
                    self.done.append(w)
                    continue
                wall, used = now - w.last_wall, cpu - w.last_cpu
                w.last_wall, w.last_cpu = now, cpu
                _add(w.watched, wall, used)
                if _waiting_for_a_thread(frame):
                    continue
                _add(w.busy, wall, used)
                key = _profile.stack_key(frame)
                if key is not None:
                    key = (w.scope, 2 if 2 * used >= wall else 3) + key
                    agg = self.samples.get(key)
                    if agg is None:
                        self.samples[key] = [1, wall]
                    else:
                        agg[0] += 1
                        agg[1] += wall
        # Flushes come often while the run is young (a program that leaves
        # with os._exit runs no exit handler), then every FLUSH_NS at most.
        due = min(max((now - self.started) // 4, FLUSH_FIRST_NS), FLUSH_NS)
        if now - self.last_flush >= due:
            self.flush()

    def flush(self):
        """Write the cumulative summaries (never raises; not after a fork)."""
        import os
        try:
            if os.getpid() != self.pid:
                return
            api = _profile._api
            with self.lock:
                now = self.last_flush = self.now()
                threads = list(self.watched.values()) + self.done
                native = list(self.native.values())
                heavy = sorted(self.samples.items(), key=lambda kv: -kv[1][1])
                heavy = heavy[:_profile.SAMPLES_KEPT]
            for w in threads:
                text = ("thread %s\t%s" % (w.name, w.target)).encode("utf-8", "replace")
                for kind, agg in ((PROF_THREAD, w.busy), (PROF_THREAD_WATCHED, w.watched)):
                    api.stage(kind, w.scope, agg[0], agg[1], agg[2], 0, text)
            for n in native:
                n.update(now)
                text = ("thread %s\t" % n.name).encode("utf-8", "replace")
                busy = n.run - n.first_run
                api.stage(PROF_THREAD, n.scope, 0, busy, busy, 0, text)
                api.stage(PROF_THREAD_WATCHED, n.scope, 0, n.wall - n.first_wall, busy, 0, text)
            for (scope, on_cpu, code, line, callers, leaf, leaf_line), agg in heavy:
                text = _profile.sample_text(code, callers, leaf, leaf_line)
                api.sample(scope, agg[1], agg[0], on_cpu, line, text)
        except Exception:
            pass

    def stop(self):
        self.stopped = True
        self.flush()


def _add(agg, wall, cpu):
    agg[0] += 1
    agg[1] += wall
    agg[2] += cpu if cpu > 0 else 0


def _waiting_for_a_thread(frame):
    """The thread waits for another one (for work, or for room to hand its
    result over), as far as its innermost frames tell."""
    depth = 0
    while frame is not None and depth < _IDLE_DEPTH:
        code = frame.f_code
        for suffix, names in _IDLE_CALLS:
            if code.co_name in names and code.co_filename.endswith(suffix) and \
                    code.co_filename.startswith(_profile._STDLIB):
                return True
        frame = frame.f_back
        depth += 1
    return False


def thread_idents():
    """The idents of the threads alive now (an epoch's "before")."""
    try:
        import threading
        return frozenset(t.ident for t in threading.enumerate())
    except Exception:
        return None


def watch_new(profile, scope, before):
    """Watch the threads started since `before` (thread_idents()) as the
    loader's of iterator `scope`.  profile: the _dlbn_profile module, on."""
    global _profile, _sampler
    try:
        import os
        import threading
        if before is None or not profile.sampling_threads():
            return
        _profile = profile
        if _sampler is None or _sampler.pid != os.getpid():
            _sampler = _Sampler(profile.interval_s())
            import atexit
            atexit.register(_sampler.stop)
        me = threading.current_thread()
        for thread in threading.enumerate():
            if thread.ident in before or thread is me or thread.name == SAMPLER_NAME:
                continue
            _sampler.watch(thread, scope)
        _sampler.watch_native(scope)
    except Exception:
        pass
