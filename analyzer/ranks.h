/*
 * ranks.h - several traces, one per rank of a data-parallel job: each
 * rank's line of the per-rank table and the job over all ranks.
 *
 * Synchronous data-parallel training meets at every collective (the
 * gradient all-reduce), so the ranks' step times equalise: a rank that
 * waits for its input holds the others at the next collective, and their
 * steps take as long as its own.  Step time cannot name the straggler;
 * its stall can: the straggler is the rank whose loop stalls longest per
 * step on its loader, and the others show that time as extra time outside
 * their own stall (waiting at the collective; blocked in GPU syncs where
 * NCCL's wait is visible to the host).
 */
#ifndef DLBN_RANKS_H
#define DLBN_RANKS_H

#include <stddef.h>

#include "model.h"
#include "verdict.h"

/* One rank's line of the per-rank table (ranks.c). */
struct dlbn_rank_row {
	const char *path;
	int rank;	/* PROCESS rank of the training process, else the trace's index */
	int rank_known; /* rank came from the trace (RANK/SLURM_PROCID ...) */
	int world_size; /* -1 unknown */
	char host[64];	/* argv0 of the training process when no host is known */
	int verdict;
	double speedup; /* 0: none */
	double stall_s, stall_fraction, wall_s;
	double step_ms;		  /* window wall / window steps; 0: no window */
	double stall_ms_per_step; /* stall / window steps */
	double loop_ms;		  /* per step, outside the stall (verdict.h loop_ms) */
	double sync_s;		  /* host blocked in GPU syncs in the window; -1: no CUDA */
	size_t steps_window;
	char cause[32];
};

/*
 * The job over all ranks.  Synchronous data-parallel training runs at the
 * slowest rank's pace, so the job verdict is the worst rank's: the highest
 * verdict (ties: the higher predicted speedup), except that a job whose
 * conclusive ranks are all NOT_DETECTED but has an INCONCLUSIVE rank is
 * INCONCLUSIVE (the unjudged rank may be the slow one) and its worst rank is
 * the first INCONCLUSIVE one, whose report says why.
 */
struct dlbn_job {
	int verdict;
	size_t worst; /* index into the rows */
	/* The straggler (see the top): the row with the largest stall per
	 * step, when it stalls at least DLBN_STRAGGLER_SHARE of its step time
	 * more than the least stalled rank; else none (ranks stall alike). */
	int has_straggler;
	size_t straggler, least_stalled;
	/* Step times (rows with a window): a spread, not a ranking. */
	double step_ms_min, step_ms_max;
	double step_skew; /* step_ms_max / step_ms_min; 0: n/a */
	double stall_min_s, stall_max_s;
	size_t ninconclusive;
};

#define DLBN_STRAGGLER_SHARE 0.05

/* Row i waits for the straggler: its extra time per step outside its
 * stall (its loop_ms over the straggler's), >= 0; 0 when there is no
 * straggler or i is it. */
double dlbn_job_wait_ms(const struct dlbn_job *job, const struct dlbn_rank_row *rows, size_t i);

void dlbn_rank_row_fill(struct dlbn_rank_row *row, const char *path, int index,
			const struct dlbn_model *m, const struct dlbn_analysis *a);
void dlbn_job_summarize(struct dlbn_job *job, const struct dlbn_rank_row *rows, size_t n);
/* Put rows in rank order (numeric; equal ranks keep their order: a trace's
 * position stands for a rank it does not know).  order[k] is then the
 * position on the command line of row k.  0, or -1 out of memory (rows
 * left as they were, order the identity). */
int dlbn_rank_rows_sort(struct dlbn_rank_row *rows, size_t n, size_t *order);

#endif /* DLBN_RANKS_H */
