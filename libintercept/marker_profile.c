/*
 * marker_profile.c - the exported entry points of the Python-level
 * localization (python/_dlbn_profile.py): per-stage times, sampled Python
 * stacks and the training loop's next() call site, as PROF_STAGE,
 * PROF_SAMPLE and CALLSITE records (dlbn_trace.h, man/dlbn-trace.5).
 *
 * Also the sampler's clock, a timer on the fetching thread's CPU time
 * (armed by the Python profiler, or for a main-thread fetch by its fetch
 * marks), and for the thread sampler (python/_dlbn_threads.py) a
 * thread's waits for the interpreter's lock (hooks_gil.c).
 *
 * The bootstrap calls these through ctypes.PyDLL(None) (the GIL stays
 * held), once per summary entry and second of fetching, never per sample:
 * the aggregation happens in Python, these only put records in the
 * calling thread's stream.  Like marker.c they return 0 when the record
 * was taken and -1 when this process is not recording.  Texts are cut at
 * 1 KiB.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "loop_cost.h"
#include "marker.h"
#include "recorder.h"

DLBN_EXPORT int dlbn_profile_stage(int kind, long long scope, long long count, long long wall_ns,
				   long long cpu_ns, long long line, const char *text);
DLBN_EXPORT int dlbn_profile_sample(long long scope, long long weight_ns, long long samples,
				    long long in_stage, long long line, const char *text);
DLBN_EXPORT int dlbn_callsite(long long iter_id, const char *text);
DLBN_EXPORT long long dlbn_thread_runq_ns(void);
DLBN_EXPORT int dlbn_profile_timer(long long first_ns, long long interval_ns);
DLBN_EXPORT int dlbn_profile_fetch_timer(long long interval_ns);
DLBN_EXPORT long long dlbn_thread_gil_ns(long long tid);
DLBN_EXPORT void dlbn_thread_exclude(void);

#define PROFILE_TEXT_MAX 1024

static int emit_text(uint8_t type, const int64_t *f, unsigned n, const char *text)
{
	if (!recorder_on() || !text || !hook_enter())
		return -1;
	rec_emit_str(type, clock_now_ns(), f, n, text, strnlen(text, PROFILE_TEXT_MAX));
	hook_leave();
	return recorder_on() ? 0 : -1;
}

int dlbn_profile_stage(int kind, long long scope, long long count, long long wall_ns,
		       long long cpu_ns, long long line, const char *text)
{
	int64_t f[6] = {kind, scope, count, wall_ns, cpu_ns, line};
	return emit_text(DLBN_REC_PROF_STAGE, f, 6, text);
}

int dlbn_profile_sample(long long scope, long long weight_ns, long long samples, long long in_stage,
			long long line, const char *text)
{
	int64_t f[5] = {scope, weight_ns, samples, in_stage, line};
	return emit_text(DLBN_REC_PROF_SAMPLE, f, 5, text);
}

int dlbn_callsite(long long iter_id, const char *text)
{
	int64_t f[1] = {iter_id};
	return emit_text(DLBN_REC_CALLSITE, f, 1, text);
}

/*
 * Wall time kernel thread tid (not the main thread) has waited for the
 * Python interpreter's lock, in ns, -1 unknown.  The thread sampler takes
 * its difference over a sample's interval: a loader thread off the CPU
 * because another thread holds the lock is not waiting on I/O.
 */
long long dlbn_thread_gil_ns(long long tid)
{
	return gil_thread_wait_ns((pid_t)tid);
}

/* The calling thread is dlbn's own (the thread sampler): its waits for the
 * interpreter's lock are left out of the program's. */
void dlbn_thread_exclude(void)
{
	gil_thread_exclude();
}

/*
 * The calling thread's time spent runnable but not running (the second
 * field of /proc/thread-self/schedstat), -1 unknown.  The bootstrap reads
 * it around each fetch to tell a worker waiting for a CPU (a busy machine)
 * from one waiting on I/O.  Raw system calls: the file hooks must not
 * count this read as the dataset's file reading.  The main thread (a
 * worker's fetching thread) reads the file the fetch marks keep open: an
 * open of /proc/thread-self costs the fetch more than the read.
 */
long long dlbn_thread_runq_ns(void)
{
	int saved = errno;
	if (on_main_thread()) {
		long long kept = loop_cost_runq_ns();
		errno = saved;
		return kept;
	}
	char buf[96];
	long long wait = -1;
	int fd = (int)syscall(SYS_openat, AT_FDCWD, "/proc/thread-self/schedstat",
			      O_RDONLY | O_CLOEXEC, 0);
	if (fd >= 0) {
		ssize_t n = syscall(SYS_read, fd, buf, sizeof(buf) - 1);
		syscall(SYS_close, fd);
		if (n > 0) {
			buf[n] = 0;
			char *end;
			strtoull(buf, &end, 10);
			if (end != buf)
				wait = (long long)strtoull(end, NULL, 10);
		}
	}
	errno = saved;
	return wait;
}

/*
 * The Python sampler's clock: SIGPROF to the calling thread every
 * interval_ns of that thread's CPU time, the first after first_ns;
 * interval_ns 0 disarms it.  Not ITIMER_PROF: while a process-wide CPU
 * timer is armed, Linux keeps the process's CPU clock
 * (CLOCK_PROCESS_CPUTIME_ID, Python's time.process_time()) in scheduler
 * ticks, 4 ms steps instead of 1 us (measured), which the program would
 * see.  A thread CPU-time timer leaves that clock alone, and counts the
 * fetching thread only.  One timer per process, bound to the thread that
 * armed it first (the Python main thread, the only one whose fetches are
 * sampled); a forked child inherits no timer and makes its own.  0, or -1
 * when no timer could be made or set (errno as it was).
 */
static timer_t prof_timer;
static pid_t prof_timer_pid; /* the process that made prof_timer; 0 none */

/* This process's (pid's) timer, made on the calling thread if it has
 * none: 0, or -1 (errno changed). */
static int prof_timer_make(pid_t pid)
{
	if (prof_timer_pid == pid)
		return 0;
	struct sigevent sev;
	memset(&sev, 0, sizeof(sev));
	sev.sigev_notify = SIGEV_THREAD_ID;
	sev.sigev_signo = SIGPROF;
	sev._sigev_un._tid = (pid_t)syscall(SYS_gettid);
	if (timer_create(CLOCK_THREAD_CPUTIME_ID, &sev, &prof_timer) != 0)
		return -1;
	prof_timer_pid = pid;
	return 0;
}

/* Set the made timer: every interval_ns after first_ns (0: the interval),
 * or disarmed for interval_ns 0.  0, or -1 (errno changed). */
static int prof_timer_set(long long first_ns, long long interval_ns)
{
	struct itimerspec its;
	memset(&its, 0, sizeof(its));
	if (interval_ns > 0) {
		long long first = first_ns > 0 ? first_ns : interval_ns;
		its.it_interval.tv_sec = (time_t)(interval_ns / 1000000000LL);
		its.it_interval.tv_nsec = (long)(interval_ns % 1000000000LL);
		its.it_value.tv_sec = (time_t)(first / 1000000000LL);
		its.it_value.tv_nsec = (long)(first % 1000000000LL);
	}
	return timer_settime(prof_timer, 0, &its, NULL);
}

int dlbn_profile_timer(long long first_ns, long long interval_ns)
{
	int saved = errno;
	pid_t pid = getpid();
	if (prof_timer_pid != pid && interval_ns <= 0)
		return 0;
	int rc = prof_timer_make(pid) == 0 ? prof_timer_set(first_ns, interval_ns) : -1;
	errno = saved;
	return rc;
}

/*
 * The same timer, run by the main thread's fetch marks (marker.c): armed
 * at each FETCH_BEGIN, its first expiry at a random point of
 * [FETCH_TIMER_FIRST_NS, interval) of the thread's CPU time, disarmed at
 * the FETCH_END or FETCH_STOP, so the loop's own step is never
 * interrupted.  The kernel checks CPU timers at its scheduler ticks, so a
 * fetch much shorter than a tick is rarely sampled; carrying what is left
 * of the timer from one fetch to the next does not change that (measured).
 * The Python profiler of a num_workers=0 loader turns this on once instead
 * of arming and disarming the timer through ctypes around every fetch,
 * which cost the loop ~10 us a step.  interval_ns 0 turns it off and
 * disarms.  Main thread only: 0, or -1 on another thread or where no timer
 * can be made.
 */
#define FETCH_TIMER_FIRST_NS 500000LL

static long long fetch_timer_ns; /* 0: off; main thread only */
static uint64_t fetch_timer_rng; /* xorshift64 state, never 0 */

int dlbn_profile_fetch_timer(long long interval_ns)
{
	if (!on_main_thread())
		return -1;
	fetch_timer_ns = 0;
	if (interval_ns <= 0)
		return dlbn_profile_timer(0, 0);
	int saved = errno;
	int made = prof_timer_make(getpid());
	errno = saved;
	if (made != 0)
		return -1;
	fetch_timer_rng = clock_now_ns() | 1;
	fetch_timer_ns = interval_ns;
	return 0;
}

void profile_fetch_timer(int fetch_begins)
{
	if (DLBN_LIKELY(fetch_timer_ns == 0))
		return;
	long long first = 0, interval = 0;
	if (fetch_begins) {
		uint64_t x = fetch_timer_rng;
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		fetch_timer_rng = x;
		interval = fetch_timer_ns;
		first = interval > FETCH_TIMER_FIRST_NS
				? FETCH_TIMER_FIRST_NS +
					  (long long)(x %
						      (uint64_t)(interval - FETCH_TIMER_FIRST_NS))
				: interval;
	}
	/* The timer is this process's: a forked child turned this off. */
	int saved = errno;
	if (prof_timer_set(first, interval) != 0)
		fetch_timer_ns = 0; /* the profiler's exact times go on */
	errno = saved;
}

void profile_fork_child(void)
{
	fetch_timer_ns = 0;
}
