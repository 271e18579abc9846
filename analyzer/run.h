/*
 * run.h - one trace read and analysed: the reader, the model, the
 * verdict, the what-if, the hot spots and (--baseline) the Replay
 * comparison, kept together until the trace's report is written.  The
 * unit of work of dlbn-analyze: a job of many ranks analyses many runs,
 * -j at a time, and keeps only the one its report is about (inputs.h).
 */
#ifndef DLBN_RUN_H
#define DLBN_RUN_H

#include <stddef.h>

#include "analysis/baseline.h"
#include "analysis/hotspots.h"
#include "analysis/sweep.h"
#include "analysis/verdict.h"
#include "analysis/whatif.h"
#include "model/model.h"
#include "trace/reader.h"
#include "util/timings.h"

struct dlbn_run_opts {
	struct dlbn_model_opts mo;
	struct dlbn_verdict_opts vo;
	const char *baseline;		/* --baseline REPLAY, NULL none */
	const struct dlbn_sweep *sweep; /* --sweep-results points, NULL none */
	int timings;			/* --timings: time each phase */
	unsigned reader_flags;		/* dlbn_reader_open_flags */
};

struct dlbn_run {
	const char *path;
	struct dlbn_reader *r;
	struct dlbn_model m;
	struct dlbn_analysis a;
	int built;
	struct dlbn_baseline baseline; /* --baseline: valid iff has_baseline */
	int has_baseline;
	struct dlbn_whatif whatif; /* always; printed with --what-if / --html */
	struct dlbn_hotspots hot;  /* where the workers' time goes (hotspots.h) */
	struct dlbn_timings times; /* --timings */
};

/* Read and analyse x->path.  0, or -1 with a one-line reason in err
 * (unreadable trace, out of memory, bad --baseline); free with
 * dlbn_run_free either way. */
int dlbn_run_analyze(struct dlbn_run *x, const struct dlbn_run_opts *o, char *err, size_t errlen);
void dlbn_run_free(struct dlbn_run *x);

/* Whether the trace is damaged or cut short (reader.h); if so, the line
 * dlbn-analyze prints about it, in buf. */
int dlbn_run_damage_note(const char *path, const struct dlbn_reader_stats *rs, char *buf,
			 size_t len);
/* The --timings table of one trace, on stderr. */
void dlbn_run_print_timings(const char *path, const struct dlbn_timings *t);

#endif /* DLBN_RUN_H */
