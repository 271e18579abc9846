/*
 * loop_cost.c - what the training loop's thread spends outside its loader
 * waits that is still the cost of loading: the costs Replay removes along
 * with the waits (docs/DESIGN.md, "Loading after arrival").
 *
 * Between one batch's arrival and the next wait the loop drops the previous
 * batch (its shared-memory storages are unmapped and their fds closed: the
 * last close of a worker's unlinked segment frees its pages),
 * first touches the new one (page faults on the pages a worker wrote: in
 * the H2D copy of pageable memory or in the first op that reads it), and is
 * runnable but queued behind the busy workers for a CPU.  A cached Replay
 * batch is warm, never freed, and no worker holds the cores: all three go.
 *
 * The recorder samples the thread's cumulative counters at each fetch mark
 * and iter() mark of the main thread (per step, not per call): the
 * analyzer takes the differences over the interval between a FETCH_END and
 * the next FETCH_BEGIN, or the ITER_BEGIN before it whose worker start-up
 * that fetch carries.  Counters:
 *   run_ns, runq_ns  /proc/thread-self/schedstat (exact, scheduler clock);
 *   sys_ns           getrusage(RUSAGE_THREAD) system time (the kernel
 *                    splits the exact run time by its tick samples, so this
 *                    one is statistical over a short interval);
 *   minflt           minor faults (exact);
 *   free_ns          wall time inside munmap() and close() of the batches'
 *                    shared memory on this thread (the hooks: munmap of a
 *                    range the process mapped from a /dev/shm fd, on this
 *                    thread or the pin-memory thread, close of such an fd): unmapping and releasing
 * 32 MiB of worker-written shared memory takes milliseconds, much of it queued for a CPU;
 *   free_cpu_ns      the CPU time inside those calls (thread CPU clock,
 *                    exact): with run_ns it separates the CPU time outside
 *                    them (first touch, the loop's own work);
 *   gil_ns           wall time waiting for the Python interpreter's lock
 *                    (hooks_gil.c): a loader's threads in this process
 *                    holding it;
 *   gil_others_ns    the process's other threads' waits for it, summed
 *                    (any thread: a loader's threads queueing for it).
 * The getrusage system time is the kernel's tick-sampled split of the run
 * time: kept for the record, too coarse per step to charge anything.
 * Cost: one getrusage and one pread of a kept-open procfs file per mark,
 * a few microseconds per step; a timed munmap or close gains two clock
 * reads and two thread-CPU-clock reads (a syscall each); any other munmap
 * reads one bucket count (and scans the small range table, 128 slots, when
 * a batch's range shares its bucket), any other close one fdtable word.
 *
 * Main thread only: the DataLoader's consumer.  The schedstat fd names the
 * thread that opened it, so a forked child drops it (loop_cost_fork_child).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "loop_cost.h"
#include "real.h"

/* The main thread's /proc/thread-self/schedstat, open from its first read
 * until a fork (loop_cost_fork_child: the fd names the thread that opened
 * it); -1 not open (an open that failed, say at the fd limit, is tried
 * again at the next read). */
static int schedstat_fd = -1;
/* Main thread only: no atomics needed. */
static uint64_t free_ns, free_cpu_ns;

/*
 * The /dev/shm ranges this process has mapped and not unmapped yet: the
 * batches in flight, a few tensors each, mapped by the thread that
 * receives them (the main thread, or the pin-memory thread) and dropped by
 * the loop.  Lock-free slots: a mapping claims a free slot with a CAS on
 * its address (its length is stored after), an munmap of a matching range
 * on any thread frees it, and only the main thread's is timed.  Full: later
 * ranges go untimed.
 *
 * Every other munmap must cost next to nothing while batches are mapped
 * (allocators unmap all the time), so the ranges are also counted per
 * bucket of their start address: an munmap whose bucket counts none skips
 * the scan.  A range is counted after its slot is complete and uncounted
 * after its slot is freed, so a count of zero is never wrong about a
 * matching slot that could be found.
 */
#define SHM_RANGES  128
#define SHM_BUCKETS 4096 /* 16 batch tensors mapped: 0.4% of munmaps scan */
static struct {
	uintptr_t addr; /* 0: free */
	size_t len;
} shm_ranges[SHM_RANGES];
static uint8_t shm_bucket_count[SHM_BUCKETS]; /* at most SHM_RANGES each */
_Static_assert(SHM_RANGES < 256, "a bucket's count is one byte");

static inline unsigned shm_bucket(uintptr_t addr)
{
	/* Page number times 2^64 / golden ratio, top 12 bits. */
	return (unsigned)(((addr >> 12) * 0x9e3779b97f4a7c15ull) >> 52);
}

void loop_cost_mapped(void *p, size_t len)
{
	if (!recorder_on())
		return;
	for (unsigned i = 0; i < SHM_RANGES; i++) {
		uintptr_t free_slot = 0;
		if (__atomic_load_n(&shm_ranges[i].addr, __ATOMIC_RELAXED) == 0 &&
		    __atomic_compare_exchange_n(&shm_ranges[i].addr, &free_slot, (uintptr_t)p,
						false, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED)) {
			__atomic_store_n(&shm_ranges[i].len, len, __ATOMIC_RELEASE);
			__atomic_fetch_add(&shm_bucket_count[shm_bucket((uintptr_t)p)], 1,
					   __ATOMIC_RELEASE);
			return;
		}
	}
}

/* munmap(addr, len) ends one of the ranges (a length not stored yet does
 * not match: that range stays, untimed). */
static int shm_range_unmapped(void *addr, size_t len)
{
	uintptr_t a = (uintptr_t)addr;
	for (unsigned i = 0; i < SHM_RANGES; i++) {
		if (__atomic_load_n(&shm_ranges[i].addr, __ATOMIC_RELAXED) != a ||
		    __atomic_load_n(&shm_ranges[i].len, __ATOMIC_ACQUIRE) != len)
			continue;
		if (__atomic_compare_exchange_n(&shm_ranges[i].addr, &a, 0, false, __ATOMIC_ACQ_REL,
						__ATOMIC_RELAXED)) {
			__atomic_fetch_sub(&shm_bucket_count[shm_bucket(a)], 1, __ATOMIC_RELAXED);
			return 1;
		}
		a = (uintptr_t)addr;
	}
	return 0;
}

static uint64_t thread_cpu_ns(void)
{
	struct timespec ts;
	if (syscall(SYS_clock_gettime, CLOCK_THREAD_CPUTIME_ID, &ts) != 0)
		return 0;
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int munmap_real(void *addr, size_t len)
{
	if (DLBN_LIKELY(real_munmap != NULL))
		return real_munmap(addr, len);
	return (int)syscall(SYS_munmap, addr, len);
}

int loop_cost_free_begin(struct loop_cost_free *f)
{
	if (!recorder_on() || !on_main_thread())
		return 0;
	f->t0 = clock_now_ns();
	f->c0 = thread_cpu_ns();
	return 1;
}

void loop_cost_free_end(const struct loop_cost_free *f)
{
	int err = errno;
	uint64_t c1 = thread_cpu_ns();
	free_ns += clock_now_ns() - f->t0;
	free_cpu_ns += c1 > f->c0 && f->c0 ? c1 - f->c0 : 0;
	errno = err;
}

/* A batch's range, timed on the loop's thread; kept out of munmap so that
 * the common case needs no stack frame (a tail call to libc). */
__attribute__((noinline)) static int munmap_batch(void *addr, size_t len)
{
	struct loop_cost_free f;
	if (!shm_range_unmapped(addr, len) || !loop_cost_free_begin(&f))
		return munmap_real(addr, len);
	int rc = munmap_real(addr, len);
	loop_cost_free_end(&f);
	return rc;
}

DLBN_EXPORT int munmap(void *addr, size_t len)
{
	if (DLBN_LIKELY(__atomic_load_n(&shm_bucket_count[shm_bucket((uintptr_t)addr)],
					__ATOMIC_ACQUIRE) == 0))
		return munmap_real(addr, len);
	return munmap_batch(addr, len);
}

static void read_schedstat(int64_t *run_ns, int64_t *runq_ns)
{
	if (DLBN_UNLIKELY(schedstat_fd < 0))
		schedstat_fd = (int)syscall(SYS_openat, AT_FDCWD, "/proc/thread-self/schedstat",
					    O_RDONLY | O_CLOEXEC, 0);
	char buf[96];
	ssize_t n = schedstat_fd >= 0 ? syscall(SYS_pread64, schedstat_fd, buf, sizeof(buf) - 1, 0)
				      : -1;
	if (n <= 0) {
		*run_ns = *runq_ns = -1;
		return;
	}
	buf[n] = '\0';
	char *end;
	*run_ns = (int64_t)strtoull(buf, &end, 10);
	*runq_ns = (int64_t)strtoull(end, NULL, 10);
}

void loop_cost_sample(int64_t out[DLBN_LOOP_COST_FIELDS])
{
	struct rusage ru;
	read_schedstat(&out[0], &out[1]);
	if (syscall(SYS_getrusage, RUSAGE_THREAD, &ru) == 0) {
		out[2] = (int64_t)ru.ru_stime.tv_sec * 1000000000 + ru.ru_stime.tv_usec * 1000;
		out[3] = ru.ru_minflt;
	} else {
		out[2] = out[3] = -1;
	}
	out[4] = (int64_t)free_ns;
	out[5] = (int64_t)free_cpu_ns;
	out[6] = (int64_t)loop_cost_gil_ns();
	out[7] = (int64_t)loop_cost_gil_others_ns();
}

int64_t loop_cost_runq_ns(void)
{
	int64_t run_ns, runq_ns;
	read_schedstat(&run_ns, &runq_ns);
	return runq_ns;
}

void loop_cost_fork_child(void)
{
	/* The inherited fd reads the parent's thread; the child opens its own. */
	if (schedstat_fd >= 0)
		syscall(SYS_close, schedstat_fd);
	schedstat_fd = -1;
	free_ns = free_cpu_ns = 0;
	loop_cost_gil_fork_child();
	/* The parent's mappings stay mapped in the child, but the child's
	 * loop is not the parent's: start empty. */
	memset(shm_ranges, 0, sizeof(shm_ranges));
	memset(shm_bucket_count, 0, sizeof(shm_bucket_count));
}
