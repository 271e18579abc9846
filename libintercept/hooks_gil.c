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
 * the interpreter itself makes (its return address lies in the executable
 * segment of the module that defines PyEval_SaveThread: the python
 * executable or libpython) names that variable; from then on only waits on
 * it are timed.  That segment is found once, by the library's constructor
 * (gil_init): the hook runs with the lock's mutex held, and must not take
 * the dynamic loader's lock (dladdr) there.  The other threads' waits on
 * that variable are summed apart (gil_others_ns): a loader's Python threads
 * that queue for the lock among themselves cannot go faster in more
 * threads.  Other condition variables pass straight through: a
 * thread-local flag and a compare.
 *
 * Such a wait also makes the main thread's launches and host-to-device
 * copies record drain probes, until 256 of its waits have gone by without
 * another (gpu_probe_after_lock_wait): the loop that waits for the lock
 * reaches its next fetch, or its next kernel, long after its GPU work may
 * have drained.
 *
 * Each other thread's own sum sits in a small table keyed by its kernel
 * thread id (gil_thread_wait_ns): the bootstrap's thread sampler reads it
 * to tell a loader thread waiting for the lock from one waiting on I/O.
 * A thread of dlbn's own (the sampler, gil_thread_exclude) is counted in
 * neither: its waits are the tool's, not the program's.
 *
 * gil_ns and the probe are the main thread's, as the other loop counters
 * (no atomics); gil_others_ns and the table are added to by any thread,
 * each table slot by its own thread only.
 */
#include <dlfcn.h>
#include <errno.h>
#include <link.h>
#include <pthread.h>
#include <stdbool.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "loop_cost.h"
#include "real.h"

#define GIL_THREADS 64 /* threads with a sum of their own (then only summed) */

static uint64_t gil_ns;
/* The process's other threads' waits for it (atomic: any thread adds). */
static uint64_t gil_others_ns;
/* Written once by the main thread, read by any (atomic). */
static const pthread_cond_t *gil_cond;
/* A main-thread lock wait in this loop period or the one before (loop_cost.h). */
int loop_cost_gil_probe_wanted;

/*
 * Per-thread sums.  A slot is claimed once per thread (tid 0 -> its id),
 * after which only that thread adds to it; a thread id the kernel reuses
 * finds its slot and goes on from its sum (readers take differences).
 * table_gen moves on in a forked child, whose slots are emptied: a
 * thread's cached slot of another generation is looked up again.
 */
struct gil_thread {
	pid_t tid;
	uint64_t ns;
};
static struct gil_thread gil_threads[GIL_THREADS];
static uint32_t table_gen = 1;
static __thread uint32_t tls_slot_gen;
static __thread struct gil_thread *tls_slot; /* NULL: the table was full */
static __thread bool tls_excluded;

/* The interpreter's executable segment; empty outside a Python process
 * (or one that loads the interpreter later, with dlopen). */
static uintptr_t interpreter_lo, interpreter_hi;

static int segment_of(struct dl_phdr_info *info, size_t size, void *data)
{
	(void)size;
	uintptr_t addr = (uintptr_t)data;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		uintptr_t lo = info->dlpi_addr + ph->p_vaddr, hi = lo + ph->p_memsz;
		if (ph->p_type == PT_LOAD && (ph->p_flags & PF_X) && addr >= lo && addr < hi) {
			interpreter_lo = lo;
			interpreter_hi = hi;
			return 1;
		}
	}
	return 0;
}

void gil_init(void)
{
	void *sym = real_dlsym(RTLD_DEFAULT, "PyEval_SaveThread");
	if (sym)
		dl_iterate_phdr(segment_of, sym);
}

static int from_interpreter(const void *ret)
{
	uintptr_t a = (uintptr_t)ret;
	return a >= interpreter_lo && a < interpreter_hi;
}

/* The calling thread's slot, claimed on first use; NULL when all are taken. */
static struct gil_thread *own_slot(void)
{
	uint32_t gen = __atomic_load_n(&table_gen, __ATOMIC_RELAXED);
	if (DLBN_LIKELY(tls_slot_gen == gen))
		return tls_slot;
	pid_t tid = (pid_t)syscall(SYS_gettid);
	struct gil_thread *found = NULL;
	for (int i = 0; i < GIL_THREADS && !found; i++) {
		pid_t seen = __atomic_load_n(&gil_threads[i].tid, __ATOMIC_ACQUIRE);
		if (seen == tid || (seen == 0 && __atomic_compare_exchange_n(
							 &gil_threads[i].tid, &seen, tid, false,
							 __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)))
			found = &gil_threads[i];
	}
	tls_slot = found;
	tls_slot_gen = gen;
	return found;
}

/* Another thread's timed wait: timed when it is on the lock's variable. */
static int other_thread_wait(pthread_cond_t *cond, pthread_mutex_t *mutex,
			     const struct timespec *abstime)
{
	if (cond != __atomic_load_n(&gil_cond, __ATOMIC_RELAXED) || tls_excluded || !recorder_on())
		return REAL(pthread_cond_timedwait)(cond, mutex, abstime);
	uint64_t t0 = clock_now_ns();
	int rc = REAL(pthread_cond_timedwait)(cond, mutex, abstime);
	int err = errno;
	uint64_t waited = clock_now_ns() - t0;
	__atomic_fetch_add(&gil_others_ns, waited, __ATOMIC_RELAXED);
	struct gil_thread *slot = own_slot();
	if (slot)
		__atomic_store_n(&slot->ns, slot->ns + waited, __ATOMIC_RELAXED);
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
		if (!from_interpreter(__builtin_return_address(0)))
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

uint64_t loop_cost_gil_ns(void)
{
	return gil_ns;
}

uint64_t loop_cost_gil_others_ns(void)
{
	return __atomic_load_n(&gil_others_ns, __ATOMIC_RELAXED);
}

int64_t gil_thread_wait_ns(pid_t tid)
{
	if (!__atomic_load_n(&gil_cond, __ATOMIC_RELAXED))
		return -1; /* the lock is not known yet: nothing was timed */
	int free_slots = 0;
	for (int i = 0; i < GIL_THREADS; i++) {
		pid_t seen = __atomic_load_n(&gil_threads[i].tid, __ATOMIC_ACQUIRE);
		if (seen == tid)
			return (int64_t)__atomic_load_n(&gil_threads[i].ns, __ATOMIC_RELAXED);
		free_slots += seen == 0;
	}
	return free_slots ? 0 : -1; /* never waited; or it may be one of the unkept */
}

void gil_thread_exclude(void)
{
	tls_excluded = true;
}

void loop_cost_gil_fork_child(void)
{
	gil_ns = 0;
	gil_others_ns = 0;
	loop_cost_gil_probe_wanted = 0;
	memset(gil_threads, 0, sizeof(gil_threads));
	__atomic_store_n(&table_gen, table_gen + 1, __ATOMIC_RELAXED);
}
