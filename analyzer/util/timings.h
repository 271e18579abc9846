/*
 * timings.h - what each phase of an analysis costs (dlbn-analyze --timings).
 *
 * A phase is timed by a stopwatch started before it and added to the
 * table after it: CPU time of the calling thread (one trace's analysis
 * runs on one thread, whatever -j says) and wall time.  Work
 * done a little at every record (the GPU pass inside pass 2) is timed on
 * a sample of records by wall clock only: the CPU clocks are system
 * calls, far dearer than the work.
 */
#ifndef DLBN_TIMINGS_H
#define DLBN_TIMINGS_H

#include <stdint.h>
#include <time.h>

enum dlbn_phase {
	DLBN_PHASE_OPEN,     /* header, extent scan and checks */
	DLBN_PHASE_READ,     /* decode and merge alone: an extra pass, for comparison */
	DLBN_PHASE_PASS1,    /* the model's first pass: roles, loaders, pipes */
	DLBN_PHASE_PASS2,    /* the second: steps, workers, IPC, GPU split */
	DLBN_PHASE_GPU,	     /* inside pass 2: the GPU pass's records (wall) */
	DLBN_PHASE_VERDICT,  /* verdict and what-if, from the model */
	DLBN_PHASE_HOTSPOTS, /* hot spots (a pass when the trace has profiles) */
	DLBN_PHASE_REPORT,   /* reports and exports */
	DLBN_PHASE_COUNT
};

struct dlbn_timings {
	int64_t cpu_ns[DLBN_PHASE_COUNT];
	int64_t wall_ns[DLBN_PHASE_COUNT];
	unsigned char ran[DLBN_PHASE_COUNT];
	uint64_t records;      /* records of one pass */
	int64_t clock_read_ns; /* what one clock_gettime(CLOCK_MONOTONIC) costs */
};

struct dlbn_stopwatch {
	int64_t cpu_ns, wall_ns;
};

static inline int64_t dlbn_clock_ns(clockid_t id)
{
	struct timespec ts;
	clock_gettime(id, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static inline void dlbn_stopwatch_start(struct dlbn_stopwatch *w)
{
	w->cpu_ns = dlbn_clock_ns(CLOCK_THREAD_CPUTIME_ID);
	w->wall_ns = dlbn_clock_ns(CLOCK_MONOTONIC);
}

/* Sets clock_read_ns: the least of a few back-to-back reads. */
static inline void dlbn_timings_calibrate(struct dlbn_timings *t)
{
	int64_t best = INT64_MAX;
	for (int i = 0; i < 1000; i++) {
		int64_t a = dlbn_clock_ns(CLOCK_MONOTONIC), b = dlbn_clock_ns(CLOCK_MONOTONIC);
		if (b - a < best)
			best = b - a;
	}
	t->clock_read_ns = best;
}

/* Adds the time since w started to phase p (t NULL: not timing). */
static inline void dlbn_timings_add(struct dlbn_timings *t, enum dlbn_phase p,
				    const struct dlbn_stopwatch *w)
{
	if (!t)
		return;
	t->cpu_ns[p] += dlbn_clock_ns(CLOCK_THREAD_CPUTIME_ID) - w->cpu_ns;
	t->wall_ns[p] += dlbn_clock_ns(CLOCK_MONOTONIC) - w->wall_ns;
	t->ran[p] = 1;
}

#endif
