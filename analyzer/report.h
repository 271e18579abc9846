/*
 * report.h - the analyzer's outputs: terminal text, Markdown and JSON
 * (stable keys, see man/dlbn-analyze.1), plus the --dump record listing.
 */
#ifndef DLBN_REPORT_H
#define DLBN_REPORT_H

#include <stdio.h>

#include "baseline.h"
#include "gpu.h"
#include "model.h"
#include "reader.h"
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

struct dlbn_report_input {
	const char *path;
	const struct dlbn_reader_stats *rs;
	const struct dlbn_model *m;
	const struct dlbn_analysis *a;
	const struct dlbn_gpu *gpu; /* NULL or !present: CPU-only ("gpu": null) */
	/* All ranks (nranks >= 1; the report above is rows[job->worst]'s).
	 * NULL/0: a single trace without a table. */
	const struct dlbn_rank_row *ranks;
	size_t nranks;
	const struct dlbn_job *job;
	const struct dlbn_baseline *baseline; /* NULL: no --baseline ("baseline": null) */
};

/* ranks.c: the job section (text / Markdown) and the "ranks" / "job" JSON values. */
void dlbn_ranks_text(FILE *out, const struct dlbn_report_input *in);
void dlbn_ranks_markdown(FILE *out, const struct dlbn_report_input *in);
void dlbn_ranks_json(FILE *out, const struct dlbn_report_input *in);

void dlbn_report_text(FILE *out, const struct dlbn_report_input *in);
void dlbn_report_json(FILE *out, const struct dlbn_report_input *in);
void dlbn_report_markdown(FILE *out, const struct dlbn_report_input *in);

/* One line per record: time, proc, tid, type name, named fields. */
void dlbn_dump_record(FILE *out, const struct dlbn_record *r, int64_t t0);

/* Write s (len bytes) as a JSON string literal, quotes included. */
void dlbn_json_string(FILE *out, const char *s, size_t len);
/* Write v as a JSON number (%.6g), or null when it is not finite. */
void dlbn_json_number(FILE *out, double v);

#endif /* DLBN_REPORT_H */
