/*
 * report.h - the analyzer's outputs: terminal text, Markdown and JSON
 * (stable keys, see man/dlbn-analyze.1), plus the --dump record listing.
 */
#ifndef DLBN_REPORT_H
#define DLBN_REPORT_H

#include <stdio.h>

#include "analysis/baseline.h"
#include "analysis/hotspots.h"
#include "analysis/ranks.h"
#include "analysis/verdict.h"
#include "analysis/whatif.h"
#include "gpu/gpu.h"
#include "model/model.h"
#include "trace/reader.h"

struct dlbn_report_input {
	const char *path;
	/* The rank's analysis.  All NULL when the rank reported on is known
	 * only from its summary: the reports then give the summary's lines. */
	const struct dlbn_reader_stats *rs;
	const struct dlbn_model *m;
	const struct dlbn_analysis *a;
	const struct dlbn_gpu *gpu; /* NULL or !present: CPU-only ("gpu": null) */
	/* All ranks, in rank order (nranks >= 1).  NULL/0: a single trace
	 * without a table.  subject: the row the rank report is about (the
	 * job's worst, or --rank N's); subject_requested: --rank N chose it. */
	const struct dlbn_rank_row *ranks;
	size_t nranks;
	const struct dlbn_job *job;
	const struct dlbn_rank_row *subject;
	int subject_requested;
	/* Inputs that gave no row (unreadable, neither trace nor summary). */
	const struct dlbn_rank_failure *failures;
	size_t nfailures;
	/* Inputs that are not ranks (dlbn_rank_rows_set_aside). */
	const struct dlbn_rank_failure *aside;
	size_t naside;
	const struct dlbn_baseline *baseline; /* NULL: no --baseline ("baseline": null) */
	/* --what-if (whatif.h): NULL when not asked ("what_if": null). */
	const struct dlbn_whatif *whatif;
	/* report_hotspots.c: where the workers' time goes, the loop's call
	 * sites; NULL: none.  native_stacks: --native-stacks. */
	const struct dlbn_hotspots *hot;
	int native_stacks;
	const char *version; /* dlbn's, as summaries carry it */
};

/* report_hotspots.c: the table per loader, the loop's next() call sites,
 * and the "hotspots" / "callsites" JSON members.  The JSON writers that
 * take `first` write members of the object being written, with its comma
 * flag (util/json.h). */
void dlbn_hotspots_text(FILE *out, const struct dlbn_report_input *in);
void dlbn_hotspots_markdown(FILE *out, const struct dlbn_report_input *in);
void dlbn_hotspots_json(FILE *out, const struct dlbn_report_input *in, int *first);
void dlbn_callsites_text(FILE *out, const struct dlbn_report_input *in);
/* The longest waits: Python frames, native ones where none or --native-stacks. */
void dlbn_waits_text(FILE *out, const struct dlbn_report_input *in);
void dlbn_waits_markdown(FILE *out, const struct dlbn_report_input *in);

/* report_ranks.c: the job section (text / Markdown), printed when
 * several ranks or inputs were given; the rank report of a rank known
 * from its summary alone (in->subject; md: Markdown); the job verdict's
 * reason.  report_ranks_json.c: the "ranks", "job" and "subject" members. */
void dlbn_ranks_text(FILE *out, const struct dlbn_report_input *in);
void dlbn_ranks_markdown(FILE *out, const struct dlbn_report_input *in);
void dlbn_subject_text(FILE *out, const struct dlbn_report_input *in, int md);
const char *dlbn_ranks_why(const struct dlbn_job *job);
void dlbn_ranks_json(FILE *out, const struct dlbn_report_input *in, int *first);

/* report_memory.c: the memory lines of the evidence (text, Markdown), the
 * failed run's cause under the verdict, and the "memory" and "failure"
 * JSON members. */
void dlbn_memory_text(FILE *out, const struct dlbn_analysis *a);
void dlbn_failure_text(FILE *out, const struct dlbn_analysis *a);
void dlbn_memory_markdown(FILE *out, const struct dlbn_analysis *a);
void dlbn_memory_json(FILE *out, const struct dlbn_analysis *a, int *first);

/* report_gpu.c: the "gpu" JSON value (stable keys) and the text GPU section. */
void dlbn_gpu_json(FILE *out, const struct dlbn_gpu *g);
void dlbn_gpu_text(FILE *out, const struct dlbn_gpu *g);

/* report_whatif.c: the --what-if section and the "what_if" JSON values. */
void dlbn_whatif_text(FILE *out, const struct dlbn_whatif *w);
void dlbn_whatif_markdown(FILE *out, const struct dlbn_whatif *w);
void dlbn_whatif_json(FILE *out, const struct dlbn_whatif *w);
/* report_outside.c: the loading costs outside the waits (outside.h). */
void dlbn_outside_text(FILE *out, const struct dlbn_analysis *a);
void dlbn_outside_markdown(FILE *out, const struct dlbn_analysis *a);
void dlbn_outside_json(FILE *out, const struct dlbn_analysis *a);

void dlbn_report_text(FILE *out, const struct dlbn_report_input *in);
void dlbn_report_json(FILE *out, const struct dlbn_report_input *in);
void dlbn_report_markdown(FILE *out, const struct dlbn_report_input *in);

/* One line per record: time, proc, tid, type name, named fields. */
void dlbn_dump_record(FILE *out, const struct dlbn_record *r, int64_t t0);

/* Whether IN is a job's (several ranks, or inputs that failed or are not
 * ranks beside the one that gave a row): the job section is printed and the
 * single-trace outputs (exports, the rank page) are not. */
int dlbn_report_is_job(const struct dlbn_report_input *in);

#endif /* DLBN_REPORT_H */
