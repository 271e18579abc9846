/*
 * ranks.h - several traces, one per rank of a data-parallel job: each
 * rank's line of the per-rank table and the job over all ranks.
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
	double step_ms; /* window wall / window steps; 0: no window */
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
	size_t worst;		 /* index into the rows */
	size_t slowest, fastest; /* by step time (rows with a window) */
	double step_skew;	 /* slowest / fastest step time; 0: n/a */
	double stall_min_s, stall_max_s;
	size_t ninconclusive;
};

void dlbn_rank_row_fill(struct dlbn_rank_row *row, const char *path, int index,
			const struct dlbn_model *m, const struct dlbn_analysis *a);
void dlbn_job_summarize(struct dlbn_job *job, const struct dlbn_rank_row *rows, size_t n);

#endif /* DLBN_RANKS_H */
