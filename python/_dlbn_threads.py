"""dlbn Python bootstrap: where a loader's own threads spend their time.

A loader other than torch's DataLoader often works in threads of the
training process: torchdata.nodes' thread workers (ParallelMapper with
method="thread") and its Prefetcher's thread, a named prefetcher's
producer thread (DLBN_LOADER).  The SIGPROF sampler of _dlbn_profile
reaches only the main thread (Python runs signal handlers there), so these
threads are sampled from a thread of dlbn's own:

  which     the Python threads a loader started: those that appeared
            during its iter() and first fetch, or during its second fetch
            (not those the loop's own step started in between), of each
            epoch (_dlbn_loaders calls watch_new with the threads alive
            before), identified by their kernel thread id (a Thread's
            ident is reused once it ends); at most MAX_WATCHED alive;
  how       every DLBN_PROFILE_INTERVAL_MS of wall time (default 10; up to
            BACKOFF_MAX times that while the lock is contended, below) the
            sampling thread reads the watched threads' Python stacks
            (sys._current_frames) and CPU clocks; each sample stands for
            the wall time since that thread's previous one;
  idle      a thread whose innermost frames show it waiting for another
            thread - a queue's get or put (the standard library's queue,
            multiprocessing's), a Condition, Event or Semaphore of
            threading (nodes' prefetch threads wait on a semaphore for
            room), a concurrent.futures worker waiting for its next work
            item - waits for work or for room to hand its result over:
            idle.  Everything else, sleeps and file reads included, is the
            thread's work: busy.  busy / watched is its busy share, the
            figure that tells whether the producer holds the loop back.
  lock      a busy sample whose thread waited for the interpreter's lock
            for a third of its interval or more (the library's per-thread
            sum of such waits, dlbn_thread_gil_ns, grew by that much).
  off CPU   any other busy sample whose thread used the CPU for less than
            half its interval: I/O, sleeps, other locks.  The sampling
            thread's own waits for the lock are left out of the program's
            (dlbn_thread_exclude).

Output, cumulative (as _dlbn_profile's), at exit and every quarter of the
time since the sampling began (at least 0.2 s, at most a second), with
scope = the iterator id of the epoch whose fetches found the thread:
PROF_STAGE PROF_THREAD (count = busy samples, wall = busy wall, cpu = the
thread's CPU time in those intervals, text "thread NAME<TAB>target
file<TAB>tid"), PROF_THREAD_WATCHED (the same over all samples),
PROF_THREAD_GIL_WAIT (its busy samples' waits for the interpreter's lock, where
the library timed them: count = busy samples, wall = the waits), and
the busy samples as PROF_SAMPLE keyed as _dlbn_profile keys its own,
in_stage 4 (it waited for the interpreter's lock a third of the interval
or more), else 2 (it used the CPU for at least half of the interval) or 3
(it mostly waited: I/O, sleeps, other locks), weight = wall ns.

Native threads: a library's C++ pool runs no Python.  DALI names its pool
threads "[DALI][TP<n>]"; after a DALI epoch's first fetches the sampling
thread looks them up by that name under /proc/self/task (on its own
thread: the loop's makes no extra reads).  Their busy time is their CPU
time (their kernel CPU clock, read at each flush: such a pool waits for
work off the CPU), their watched time the wall time since they were found:
PROF_THREAD and PROF_THREAD_WATCHED with count 0 and no samples.

Cost: one wake-up per interval while a watched Python thread lives, taking
the GIL for the stack walk (tens of microseconds), five a second while only
native threads are watched (they are read at the flushes).  A wake-up that
comes late (LATE_NS past its time: the program's threads hold the
interpreter's lock, or the CPUs) doubles the interval, up to BACKOFF_MAX
times the set one, and one on time halves it again: where the lock is
contended, each stack walk takes a turn of it from the loop.  (Thread
workers and a loop both running Python, the eval's nodes_gil_balanced:
dlbn slowed the loop 2.4% with a sample every 10 ms, 1.0% every 100 ms;
with this back-off, which samples it every 37 ms on average, 1.9-2.3%.)
A sample stands for the wall time since the previous one whatever the
interval, so the shares keep their weights.  Nothing runs
before a loader thread is found, and nothing in processes other than the
training one.  The sampling thread is a daemon named "dlbn-thread-sampler";
it never raises into the program, and it ends when no watched thread is
left.
"""
import sys

PROF_THREAD = 9
PROF_THREAD_WATCHED = 10
PROF_THREAD_GIL_WAIT = 11
MAX_WATCHED = 16      # Python threads watched at once
MAX_ENDED = 64        # ended threads whose totals are still written
FLUSH_NS = 1000000000
FLUSH_FIRST_NS = 200000000
LATE_NS = 1000000      # a wake-up this late: the lock or the CPUs are contended
BACKOFF_MAX = 4        # the interval grows to at most this many times the set one
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
# Innermost frames that wait in C for the next work item (SimpleQueue.get)
_IDLE_LEAVES = (("/concurrent/futures/thread.py", "_worker"),)

_profile = None     # the _dlbn_profile module (its marker API, interval, stack keys)
_sampler = None     # the running _Sampler of this process


class _Watched:
    """One watched thread's totals and its last sample's clocks."""

    __slots__ = ("ident", "tid", "scope", "name", "target", "clock", "last_wall",
                 "last_cpu", "last_gil", "busy", "watched", "locked")

    def __init__(self, thread, scope, clock, now, cpu, gil):
        self.ident = thread.ident
        self.tid = thread.native_id
        self.scope = scope
        self.name = thread.name
        target = getattr(thread, "_target", None)
        code = getattr(target, "__code__", None)
        self.target = code.co_filename if code is not None else ""
        self.clock = clock
        self.last_wall, self.last_cpu, self.last_gil = now, cpu, gil
        self.busy = [0, 0, 0]     # samples, wall ns, CPU ns
        self.watched = [0, 0, 0]
        self.locked = None        # ns waiting for the lock in busy samples (None unknown)

    def text(self):
        return ("thread %s\t%s\t%d" % (self.name, self.target, self.tid)).encode(
            "utf-8", "replace")


class _Native:
    """A thread without Python frames (a library's C++ thread pool), known
    by the name it gave itself."""

    __slots__ = ("tid", "scope", "name", "clock", "first_wall", "first_run", "wall", "run")

    def __init__(self, tid, scope, name, clock, now, run):
        self.tid, self.scope, self.name, self.clock = tid, scope, name, clock
        self.first_wall, self.first_run = now, run
        self.wall, self.run = now, run

    def update(self, now, cpu_of):
        try:
            self.wall, self.run = now, cpu_of(self.clock)
        except Exception:
            pass      # it ended: its last reading stays

    def text(self):
        return ("thread %s\t\t%d" % (self.name, self.tid)).encode("utf-8", "replace")


def _thread_cpu_clock(tid):
    """The CPU clock of kernel thread tid, as glibc's pthread_getcpuclockid
    makes it (Linux: ~tid << 3 | CPUCLOCK_PERTHREAD_MASK | CPUCLOCK_SCHED):
    read with clock_gettime, no file to open."""
    return ((~tid) << 3) | 6


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
        self.lock = threading.Lock()        # the tables
        self.flushing = threading.Lock()    # one flush at a time, the newest last
        self.watched = {}        # ident -> _Watched (live ones)
        self.ended = []          # _Watched of threads that ended
        self.native = {}         # tid -> _Native
        self.native_scope = None  # a DALI epoch's iterator id: look for its pool
        self.samples = {}        # (scope, on_cpu, stack key...) -> [n, wall ns]
        self.last_flush = self.started = self.now()
        self.thread = None
        self.stopped = False
        api = _profile._api
        self.thread_gil = getattr(api, "thread_gil", None) or (lambda tid: -1)
        self.thread_exclude = getattr(api, "thread_exclude", None) or (lambda: None)

    def watch(self, thread, scope):
        import time
        try:
            clock = time.pthread_getcpuclockid(thread.ident)
            cpu = self.cpu_of(clock)
        except Exception:
            return    # ended already, or no per-thread CPU clock here
        with self.lock:
            if thread.ident in self.watched or self.stopped or \
                    len(self.watched) >= MAX_WATCHED:
                return
            self.watched[thread.ident] = _Watched(thread, scope, clock, self.now(), cpu,
                                                  self.thread_gil(thread.native_id))
        self._ensure_running()

    def watch_native(self, scope):
        """Look for the native pool threads at the next tick (on the
        sampling thread)."""
        with self.lock:
            self.native_scope = scope
        self._ensure_running()

    def _find_native(self):
        scope = self.native_scope
        self.native_scope = None
        found = _native_threads(self.native)
        now = self.now()
        with self.lock:
            for tid, name in found:
                if len(self.native) >= MAX_WATCHED:
                    break
                clock = _thread_cpu_clock(tid)
                try:
                    run = self.cpu_of(clock)
                except Exception:
                    continue
                self.native[tid] = _Native(tid, scope, name, clock, now, run)

    def _ensure_running(self):
        import threading
        with self.lock:
            if self.thread is not None or self.stopped:
                return
            runner = self.thread = threading.Thread(target=self.run, name=SAMPLER_NAME,
                                                    daemon=True)
        try:
            runner.start()
        except Exception:
            with self.lock:
                self.thread = None

    def run(self):
        """The sampling thread: until no watched thread is left (a later
        watch starts another) or the process exits."""
        import time
        try:
            self.thread_exclude()
        except Exception:
            pass
        interval = self.interval_s
        while True:
            pause = interval if self.watched else FLUSH_FIRST_NS / 1e9
            slept = self.now()
            time.sleep(pause)
            if self.watched:
                late = self.now() - slept - pause * 1e9
                if late > LATE_NS:
                    interval = min(interval * 2, self.interval_s * BACKOFF_MAX)
                else:
                    interval = max(interval / 2, self.interval_s)
            try:
                if self.native_scope is not None:
                    self._find_native()
                self.tick()
            except Exception:
                pass
            with self.lock:
                if self.stopped or not (self.watched or self.native or self.native_scope):
                    self.thread = None
                    break
        self.flush()

    def tick(self):
        """One sample of every watched thread."""
        frames = sys._current_frames() if self.watched else {}
        thread_gil = self.thread_gil
        now = self.now()
        with self.lock:
            for ident, w in list(self.watched.items()):
                frame = frames.get(ident)
                try:
                    # a thread's CPU clock stops working when it ends, even
                    # if a new thread took its ident since
                    cpu = self.cpu_of(w.clock) if frame is not None else None
                except Exception:
                    cpu = None
                if cpu is None:   # the thread ended
                    del self.watched[ident]
                    if len(self.ended) < MAX_ENDED:
                        self.ended.append(w)
                    continue
                gil = thread_gil(w.tid)
                wall, used = now - w.last_wall, cpu - w.last_cpu
                locked = gil - w.last_gil if gil >= 0 and w.last_gil >= 0 else 0
                w.last_wall, w.last_cpu, w.last_gil = now, cpu, gil
                _add(w.watched, wall, used)
                if _waiting_for_a_thread(frame):
                    continue
                _add(w.busy, wall, used)
                if gil >= 0:
                    w.locked = (w.locked or 0) + locked
                key = _profile.stack_key(frame)
                if key is not None:
                    key = (w.scope, _on_cpu(wall, used, locked)) + key
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
            with self.flushing:
                with self.lock:
                    now = self.last_flush = self.now()
                    threads = list(self.watched.values()) + self.ended
                    native = list(self.native.values())
                    heavy = sorted(self.samples.items(), key=lambda kv: -kv[1][1])
                    heavy = heavy[:_profile.SAMPLES_KEPT]
                for w in threads:
                    text = w.text()
                    for kind, agg in ((PROF_THREAD, w.busy), (PROF_THREAD_WATCHED, w.watched)):
                        api.stage(kind, w.scope, agg[0], agg[1], agg[2], 0, text)
                    if w.locked is not None:
                        api.stage(PROF_THREAD_GIL_WAIT, w.scope, w.busy[0], w.locked, 0, 0, text)
                for n in native:
                    n.update(now, self.cpu_of)
                    text = n.text()
                    busy = n.run - n.first_run
                    api.stage(PROF_THREAD, n.scope, 0, busy, busy, 0, text)
                    api.stage(PROF_THREAD_WATCHED, n.scope, 0, n.wall - n.first_wall, busy, 0,
                              text)
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


def _on_cpu(wall, used, locked):
    """A busy sample's in_stage: 4 when a third of it or more went to
    waiting for the interpreter's lock (a thread queued that long is
    throttled by the lock, whatever it does the rest of the time: two
    threads running Python take turns, each waiting about half), else 2
    mostly on the CPU, 3 mostly off it otherwise."""
    if 3 * locked >= wall:
        return 4
    return 2 if 2 * used >= wall else 3


def _waiting_for_a_thread(frame):
    """The thread waits for another one (for work, or for room to hand its
    result over), as far as its innermost frames tell."""
    stdlib = _profile._STDLIB
    code = frame.f_code
    for suffix, name in _IDLE_LEAVES:
        if code.co_name == name and code.co_filename.endswith(suffix) and \
                code.co_filename.startswith(stdlib):
            return True
    depth = 0
    while frame is not None and depth < _IDLE_DEPTH:
        code = frame.f_code
        for suffix, names in _IDLE_CALLS:
            if code.co_name in names and code.co_filename.endswith(suffix) and \
                    code.co_filename.startswith(stdlib):
                return True
        frame = frame.f_back
        depth += 1
    return False


def thread_ids():
    """The kernel ids of the threads alive now (a fetch's "before")."""
    try:
        import threading
        return frozenset(t.native_id for t in threading.enumerate())
    except Exception:
        return None


def watch_new(profile, scope, before, native=False):
    """Watch the threads started since `before` (thread_ids()) as the
    loader's of iterator `scope`; native: also look for the native pool
    threads (a DALI epoch).  profile: the _dlbn_profile module, on."""
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
            if thread.native_id in before or thread is me or thread.name == SAMPLER_NAME:
                continue
            _sampler.watch(thread, scope)
        if native:
            _sampler.watch_native(scope)
    except Exception:
        pass
