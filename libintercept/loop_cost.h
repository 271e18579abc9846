/*
 * loop_cost.h - the main thread's cumulative counters that the fetch marks
 * carry (see loop_cost.c and MARK in dlbn_trace.h).
 */
#ifndef DLBN_LOOP_COST_H
#define DLBN_LOOP_COST_H

#include <stdint.h>

#include <stddef.h>
#include <sys/types.h>

#include "dlbn/dlbn_trace.h"
#include "fdtable.h"
#include "recorder.h"

/* run_ns, runq_ns, sys_ns, minflt, free_ns, free_cpu_ns, gil_ns,
 * gil_others_ns (-1: unknown) */
#define DLBN_LOOP_COST_FIELDS 8

/* Fill out with this thread's counters now (main thread). */
void loop_cost_sample(int64_t out[DLBN_LOOP_COST_FIELDS]) DLBN_HIDDEN;
/* Its runq_ns alone, from the same kept-open file (main thread). */
int64_t loop_cost_runq_ns(void) DLBN_HIDDEN;
/*
 * Time the calls that free a batch's shared memory on the main thread:
 * munmap of a range the process mapped from a /dev/shm fd (any thread:
 * loop_cost_mapped), close of an fd known to be such a file (the close
 * hook's one fd-table load tells).  Any other munmap or close costs a load
 * and a compare.  begin returns 0 when there is nothing to time.
 */
struct loop_cost_free {
	uint64_t t0, c0;
};
/* This process mapped len bytes at p from a /dev/shm fd (any thread). */
void loop_cost_mapped(void *p, size_t len) DLBN_HIDDEN;
int loop_cost_free_begin(struct loop_cost_free *f) DLBN_HIDDEN;
void loop_cost_free_end(const struct loop_cost_free *f) DLBN_HIDDEN;
/* In a forked child, before it records (atfork). */
void loop_cost_fork_child(void) DLBN_HIDDEN;
/* Find the Python interpreter's code, if this is a Python process
 * (constructor; hooks_gil.c). */
void gil_init(void) DLBN_HIDDEN;
/* Wall time the main thread waited for the interpreter's lock (hooks_gil.c). */
uint64_t loop_cost_gil_ns(void) DLBN_HIDDEN;
/* The same for the process's other threads, summed. */
uint64_t loop_cost_gil_others_ns(void) DLBN_HIDDEN;
/* The main thread waited for that lock within its last 256 waits (set by
 * the lock's hook, cleared at a wait begin by gpu_probe.c; read by any
 * launching thread: the launch hook's one load). */
extern int loop_cost_gil_probe_wanted DLBN_HIDDEN;
void loop_cost_gil_fork_child(void) DLBN_HIDDEN;
/* Kernel thread tid's waits for the interpreter's lock so far, in ns; -1
 * when unknown (the lock not seen yet, or tid not among the kept).  The
 * main thread's are loop_cost_gil_ns. */
int64_t gil_thread_wait_ns(pid_t tid) DLBN_HIDDEN;
/* The calling thread is dlbn's own: its waits for the lock are not counted. */
void gil_thread_exclude(void) DLBN_HIDDEN;

#endif /* DLBN_LOOP_COST_H */
