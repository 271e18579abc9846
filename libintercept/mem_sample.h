/*
 * mem_sample.h - each process's memory and the job's memory limit, at a
 * low rate (MEM and MEMSYS records, dlbn_trace.h; docs/DESIGN.md,
 * "Recorder").
 *
 * Callers hold the hook guard.  mem_sample_due is the whole cost on the
 * paths that call it (a load and a compare); the sample itself reads a few
 * /proc and /sys files with raw syscalls and allocates nothing.
 */
#ifndef DLBN_MEM_SAMPLE_H
#define DLBN_MEM_SAMPLE_H

#include "recorder.h"

/* When this process's next sample is due (CLOCK_MONOTONIC ns); UINT64_MAX
 * when memory is not recorded (DLBN_MEM=0). */
extern uint64_t mem_next_ns DLBN_HIDDEN;

/* Take a sample now (rate-limited per process, one thread at a time);
 * returns the time after it, for the caller's own timing. */
uint64_t mem_sample_take(uint64_t now_ns) DLBN_HIDDEN;

/* A thread is about to block (a wait on a pipe, socket or semaphore, or a
 * main-thread fetch begin): the sample goes before the wait, where it costs
 * the program least.  Returns now_ns, or the time after a sample. */
static inline uint64_t mem_sample_due(uint64_t now_ns)
{
	if (DLBN_LIKELY(now_ns < __atomic_load_n(&mem_next_ns, __ATOMIC_RELAXED)))
		return now_ns;
	return mem_sample_take(now_ns);
}

/* The loop's fetch begins (the bootstrap's mark on the main thread): the
 * same, but the first smaps_rollup at once, in the first fetch (warm-up),
 * where a second into the process's life would land inside the steady
 * state the analysis measures. */
uint64_t mem_sample_fetch(uint64_t now_ns) DLBN_HIDDEN;

/* The process is about to exit (how: DLBN_EXIT_*): a last sample and the
 * job's figures, if this process took samples at all; with smaps_rollup
 * only through _exit (a DataLoader worker's os._exit: its memory as it
 * worked; an interpreter that returns has freed its objects by then). */
void mem_sample_exit(int how) DLBN_HIDDEN;

/* Constructor: DLBN_MEM, DLBN_MEM_INTERVAL_MS. */
void mem_sample_init(void) DLBN_HIDDEN;
/* Fork child: its own samples start over (its first one at once). */
void mem_sample_fork_child(void) DLBN_HIDDEN;

#endif /* DLBN_MEM_SAMPLE_H */
