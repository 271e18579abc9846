/*
 * rank_summary.h - a rank's summary: the row of the job view (ranks.h) as
 * a small versioned JSON file, written where the rank ran (dlbn-analyze
 * --summarize, which dlbn-run calls when the rank's program ends) and
 * read back in place of the trace.  A job report from a thousand
 * summaries reads a thousand files of a few KiB, not the traces.
 *
 *   {"format": "dlbn-rank-summary", "version": 1, "dlbn_version": "0.1.0",
 *    "trace": PATH, "host": ..., "rank": N | null, "local_rank": ...,
 *    "world_size": ..., "state": "whole" | "damaged" | "cut", ...,
 *    "verdict": ..., "predicted_speedup": ..., "stall_s": ..., "cause": ...,
 *    "loaders": [...], "hot_spots": [...], "reasons": [...],
 *    "recommendations": [...], "warnings": [...]}
 *
 * The keys are listed in dlbn-analyze(1).  A reader takes every version
 * 1.x document (members it does not know are skipped) and refuses
 * another "format" or a newer major version with a message that says so.
 * Its size is bounded whatever the run (the row's fixed arrays: well
 * under DLBN_SUMMARY_MAX_BYTES).
 */
#ifndef DLBN_RANK_SUMMARY_H
#define DLBN_RANK_SUMMARY_H

#include <stddef.h>
#include <stdio.h>

#include "analysis/ranks.h"

#define DLBN_SUMMARY_FORMAT    "dlbn-rank-summary"
#define DLBN_SUMMARY_VERSION   1
#define DLBN_SUMMARY_MAX_BYTES (64 << 10)

/* The summary's path for a trace: TRACE without ".bin", plus
 * ".summary.json" (out cut to len; the caller sizes it PATH_MAX). */
void dlbn_summary_path(const char *trace, char *out, size_t len);
/* Write row as a summary at path (atomically).  0, or -1 with err set. */
int dlbn_summary_write(const char *path, const struct dlbn_rank_row *row, const char *version,
		       char *err, size_t errlen);
/* The summary's JSON object alone (no newline): the reports' "subject". */
void dlbn_summary_json(FILE *out, const struct dlbn_rank_row *row, const char *version);
/* Whether the file at path begins like a summary (a JSON object), not a
 * trace: 1 yes, 0 no, -1 unreadable (errno set). */
int dlbn_summary_sniff(const char *path);
/* Read the summary at path into row (input, input_index as given).  0, or
 * -1 with a one-line reason in err. */
int dlbn_summary_read(const char *path, size_t input_index, struct dlbn_rank_row *row, char *err,
		      size_t errlen);
/* The same from text (tests). */
int dlbn_summary_parse(const char *text, size_t len, struct dlbn_rank_row *row, char *err,
		       size_t errlen);

#endif /* DLBN_RANK_SUMMARY_H */
