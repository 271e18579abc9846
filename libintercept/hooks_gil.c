/*
 * hooks_gil.c - the main thread's waits for the Python interpreter's lock
 * (the GIL), a counter the fetch marks carry (loop_cost.c, gil_ns).
 *
 * A loader whose workers are threads of the training process (torchdata.nodes
 * thread workers, a prefetch thread feeding a queue) runs its Python code
 * under the lock the loop's Python code needs too.  While they hold it the
 * loop's thread waits for it off the CPU: not queued for a CPU, not in any
 * call the other hooks see, so between batches that time looked like the
 * loop's own host work, which Replay keeps (docs/DESIGN.md, "Loading after
 * arrival").  A Replay run's loader threads are idle, and the wait goes.
 *
 * CPython takes the lock in take_gil: pthread_cond_timedwait on one
 * condition variable, at most the switch interval (5 ms) per call, repeated
 * until the holder lets go.  The first timed wait of the main thread that
 * the interpreter itself makes (its return address lies in the module that
 * defines PyEval_SaveThread: the python executable or libpython) names that
 * variable; from then on only waits on it are timed.  Until then each new
 * call site is looked up once with dladdr and remembered.  The other
 * threads' waits on that variable are summed apart (gil_others_ns): a
 * loader's Python threads that queue for the lock among themselves cannot
 * go faster in more threads.  Other condition variables pass straight
 * through: a thread-local flag and a compare.
 *
 * Such a wait also makes the main thread's next launch record a drain probe
 * (gpu_probe_after_lock_wait): the loop that waits for the lock reaches its
 * next fetch long after its GPU work may have drained.
 *
 * Main thread only, as the other loop counters.
 */
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>

#include "loop_cost.h"
#include "real.h"

static uint64_t gil_ns;
/* The process's other threads' waits for it (atomic: any thread adds). */
static uint64_t gil_others_ns;
/* Written once by the main thread, read by any (atomic). */
static const pthread_cond_t *gil_cond;
/* A main-thread lock wait since the last launch probe (loop_cost.h). */
int loop_cost_gil_probe_wanted __attribute__((aligned(64)));

/* Call sites of the main thread's timed waits already looked up, and
 * whether they are the interpreter's (only until gil_cond is known). */
#define GIL_CALLERS 8
static struct {
	const void *ret;
	int interpreter;
} gil_callers[GIL_CALLERS];
static unsigned gil_ncallers;
#define NOT_PYTHON ((const void *)-1)
static const void *interpreter_base; /* NOT_PYTHON: not a Python process */

static int from_interpreter(const void *ret)
{
	for (unsigned i = 0; i < gil_ncallers; i++)
		if (gil_callers[i].ret == ret)
			return gil_callers[i].interpreter;
	if (!interpreter_base) {
		Dl_info info;
		void *sym = real_dlsym(RTLD_DEFAULT, "PyEval_SaveThread");
		interpreter_base = sym && dladdr(sym, &info) && info.dli_fbase ? info.dli_fbase
									       : (const void *)-1;
	}
	Dl_info info;
	int interpreter = interpreter_base != NOT_PYTHON && dladdr(ret, &info) &&
			  info.dli_fbase == interpreter_base;
	if (gil_ncallers < GIL_CALLERS) {
		gil_callers[gil_ncallers].ret = ret;
		gil_callers[gil_ncallers].interpreter = interpreter;
		gil_ncallers++;
	}
	return interpreter;
}

/* Another thread's timed wait: timed when it is on the lock's variable. */
static int other_thread_wait(pthread_cond_t *cond, pthread_mutex_t *mutex,
			     const struct timespec *abstime)
{
	if (cond != __atomic_load_n(&gil_cond, __ATOMIC_RELAXED) || !recorder_on())
		return REAL(pthread_cond_timedwait)(cond, mutex, abstime);
	uint64_t t0 = clock_now_ns();
	int rc = REAL(pthread_cond_timedwait)(cond, mutex, abstime);
	int err = errno;
	__atomic_fetch_add(&gil_others_ns, clock_now_ns() - t0, __ATOMIC_RELAXED);
	errno = err;
	return rc;
}

DLBN_EXPORT int pthread_cond_timedwait(pthread_cond_t *restrict cond,
				       pthread_mutex_t *restrict mutex,
				       const struct timespec *restrict abstime)
{
	if (!on_main_thread())
		return other_thread_wait(cond, mutex, abstime);
	if (!recorder_on())
		return REAL(pthread_cond_timedwait)(cond, mutex, abstime);
	if (DLBN_UNLIKELY(gil_cond == NULL)) {
		if (interpreter_base == NOT_PYTHON ||
		    !from_interpreter(__builtin_return_address(0)))
			return REAL(pthread_cond_timedwait)(cond, mutex, abstime);
		__atomic_store_n(&gil_cond, cond, __ATOMIC_RELAXED);
	} else if (cond != gil_cond) {
		return REAL(pthread_cond_timedwait)(cond, mutex, abstime);
	}
	uint64_t t0 = clock_now_ns();
	int rc = REAL(pthread_cond_timedwait)(cond, mutex, abstime);
	int err = errno;
	gil_ns += clock_now_ns() - t0;
	__atomic_store_n(&loop_cost_gil_probe_wanted, 1, __ATOMIC_RELAXED);
	errno = err;
	return rc;
}

bool loop_cost_gil_probe_take(void)
{
	if (DLBN_LIKELY(!__atomic_load_n(&loop_cost_gil_probe_wanted, __ATOMIC_RELAXED)) ||
	    !on_main_thread())
		return false;
	__atomic_store_n(&loop_cost_gil_probe_wanted, 0, __ATOMIC_RELAXED);
	return true;
}

uint64_t loop_cost_gil_ns(void)
{
	return gil_ns;
}

uint64_t loop_cost_gil_others_ns(void)
{
	return __atomic_load_n(&gil_others_ns, __ATOMIC_RELAXED);
}

void loop_cost_gil_fork_child(void)
{
	gil_ns = 0;
	gil_others_ns = 0;
	loop_cost_gil_probe_wanted = 0;
}
