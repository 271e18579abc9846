/*
 * hooks_sem.c - POSIX semaphore waits and posts.
 *
 * With pin_memory=True the main thread's batch wait is queue.Queue.get: a
 * CPython lock acquire, i.e. sem_clockwait/sem_timedwait/sem_wait, woken by
 * the pin-memory thread's sem_post.  Only waits that really blocked (at
 * least DLBN_SEM_MIN_NS) are recorded: a sem_trywait first tells the
 * uncontended case apart cheaply.
 *
 * Every Python lock release is a sem_post, so posts are recorded only for
 * semaphores some thread of the process has waited on.  Those addresses
 * live in a small lock-free open-addressing set, inserted at wait *entry*:
 * CPython's Condition.wait allocates a fresh lock per wait, and the post
 * that wakes the waiter may come before the waiter blocks.  The set is
 * lossy (a full probe window overwrites a slot), which only costs a
 * missing SEM_POST record.
 */
#include <errno.h>

#include "mem_sample.h"
#include "real.h"
#include "session.h"

#define WAITER_SLOTS  4096u /* power of two */
#define WAITER_PROBES 8u

static uintptr_t waiter_set[WAITER_SLOTS];

static unsigned waiter_hash(uintptr_t a)
{
	return (unsigned)(((uint64_t)a * 0x9e3779b97f4a7c15ull) >> 52) & (WAITER_SLOTS - 1);
}

static void waiter_insert(const sem_t *sem)
{
	uintptr_t a = (uintptr_t)sem;
	unsigned h = waiter_hash(a);
	for (unsigned i = 0; i < WAITER_PROBES; i++) {
		uintptr_t *slot = &waiter_set[(h + i) & (WAITER_SLOTS - 1)];
		uintptr_t cur = __atomic_load_n(slot, __ATOMIC_RELAXED);
		if (cur == a)
			return;
		if (cur == 0 && __atomic_compare_exchange_n(slot, &cur, a, false, __ATOMIC_RELAXED,
							    __ATOMIC_RELAXED))
			return;
		if (cur == a)
			return;
	}
	__atomic_store_n(&waiter_set[h], a, __ATOMIC_RELAXED);
}

static bool waiter_known(const sem_t *sem)
{
	uintptr_t a = (uintptr_t)sem;
	unsigned h = waiter_hash(a);
	for (unsigned i = 0; i < WAITER_PROBES; i++) {
		uintptr_t cur = __atomic_load_n(&waiter_set[(h + i) & (WAITER_SLOTS - 1)],
						__ATOMIC_RELAXED);
		if (cur == a)
			return true;
		if (cur == 0)
			return false;
	}
	return false;
}

/* sem_trywait succeeded: the wait would not have blocked. */
static bool acquired_at_once(sem_t *sem)
{
	int saved = errno;
	bool got = REAL(sem_trywait)(sem) == 0;
	errno = saved;
	return got;
}

static void sem_wait_done(sem_t *sem, int call, uint64_t t0, int rc, int err, bool main_wait)
{
	uint64_t t1 = clock_now_ns();
	if (t1 - t0 < DLBN_SEM_MIN_NS)
		return;
	int64_t f[4] = {(int64_t)(t1 - t0), (int64_t)(uintptr_t)sem, rc < 0 ? -err : rc, call};
	rec_emit_sem(DLBN_REC_SEM_WAIT, t0, f, 4, 1);
	recorder_sched_sample(t1);
	if (main_wait)
		loader_wait_finished(DLBN_REC_SEM_WAIT, t0, t1 - t0);
}

#define SEM_WAIT_HOOK(call_kind, call, real_call)                                                  \
	do {                                                                                       \
		if (!recorder_on())                                                                \
			return real_call;                                                          \
		waiter_insert(sem);                                                                \
		if (acquired_at_once(sem))                                                         \
			return 0;                                                                  \
		if (!hook_enter())                                                                 \
			return real_call;                                                          \
		uint64_t t0_ = mem_sample_due(clock_now_ns());                                     \
		bool main_ = on_main_thread();                                                     \
		if (main_)                                                                         \
			loader_wait_begins(t0_);                                                   \
		int rc_ = call;                                                                    \
		int err_ = errno;                                                                  \
		sem_wait_done(sem, call_kind, t0_, rc_, err_, main_);                              \
		hook_leave();                                                                      \
		errno = err_;                                                                      \
		return rc_;                                                                        \
	} while (0)

DLBN_EXPORT int sem_wait(sem_t *sem)
{
	SEM_WAIT_HOOK(DLBN_SEM_WAIT, real_sem_wait(sem), REAL(sem_wait)(sem));
}

DLBN_EXPORT int sem_timedwait(sem_t *sem, const struct timespec *abstime)
{
	SEM_WAIT_HOOK(DLBN_SEM_TIMEDWAIT, real_sem_timedwait(sem, abstime),
		      REAL(sem_timedwait)(sem, abstime));
}

DLBN_EXPORT int sem_clockwait(sem_t *sem, clockid_t clock, const struct timespec *abstime)
{
	SEM_WAIT_HOOK(DLBN_SEM_CLOCKWAIT, real_sem_clockwait(sem, clock, abstime),
		      REAL(sem_clockwait)(sem, clock, abstime));
}

DLBN_EXPORT int sem_post(sem_t *sem)
{
	if (!recorder_on() || !waiter_known(sem) || !hook_enter())
		return REAL(sem_post)(sem);
	uint64_t t = clock_now_ns();
	int rc = real_sem_post(sem);
	int err = errno;
	int64_t f[1] = {(int64_t)(uintptr_t)sem};
	rec_emit_sem(DLBN_REC_SEM_POST, t, f, 1, 0);
	hook_leave();
	errno = err;
	return rc;
}
