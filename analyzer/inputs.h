/*
 * inputs.h - the inputs of one dlbn-analyze call, traces and rank
 * summaries mixed, turned into the job's rows (ranks.h).
 *
 * Summaries are read first (small files); a trace that a given summary
 * stands for (the same file) is not analysed again.  The other traces are
 * analysed by up to `jobs` threads at a time, each reduced to its row
 * as soon as it is done (and, with summarize, written as a summary
 * beside it) and freed, so memory is bounded by what `jobs` traces need,
 * however many ranks the job had.  Of the analysed traces one run is
 * kept whole for the rank report: the worst for the job (ranks.h's
 * order) or the one of want_rank.
 *
 * An input that cannot be read becomes a failure with its reason, not
 * the end of the job: the report says what it rests on.
 */
#ifndef DLBN_INPUTS_H
#define DLBN_INPUTS_H

#include <stddef.h>

#include "analysis/ranks.h"
#include "run.h"

struct dlbn_inputs_opts {
	struct dlbn_run_opts run;
	size_t jobs;	     /* traces analysed at a time, >= 1 */
	int want_rank;	     /* --rank N: keep that rank's run; -1 the worst */
	int summarize;	     /* write each analysed trace's summary beside it */
	const char *version; /* dlbn's, written into summaries */
};

struct dlbn_inputs {
	struct dlbn_rank_row *rows; /* the inputs that gave a row, input order */
	size_t nrows;
	struct dlbn_rank_failure *failures;
	size_t nfailures;
	struct dlbn_run *kept;	    /* NULL: no trace analysed (or none of want_rank) */
	int damaged;		    /* some trace is damaged or cut short */
	int summaries_failed;	    /* some summary could not be written */
	struct dlbn_timings *times; /* --timings: per input */
	char (*notes)[600];	    /* per input: the stderr line, "" none */
	size_t n;		    /* inputs */
};

/* Analyse paths[0..n).  0 (rows and failures set; messages not printed
 * yet), or -1 out of memory. */
int dlbn_inputs_analyze(struct dlbn_inputs *in, char *const *paths, size_t n,
			const struct dlbn_inputs_opts *o);
/* The inputs' stderr lines, in input order (failures, damage, summaries
 * written). */
void dlbn_inputs_print_notes(const struct dlbn_inputs *in);
void dlbn_inputs_free(struct dlbn_inputs *in);

#endif /* DLBN_INPUTS_H */
