/*
 * report.h - the analyzer's outputs: terminal text, Markdown and JSON
 * (stable keys, see man/dlbn-analyze.1), plus the --dump record listing.
 */
#ifndef DLBN_REPORT_H
#define DLBN_REPORT_H

#include <stdio.h>

#include "gpu.h"
#include "model.h"
#include "reader.h"
#include "verdict.h"

struct dlbn_report_input {
	const char *path;
	const struct dlbn_reader_stats *rs;
	const struct dlbn_model *m;
	const struct dlbn_analysis *a;
	const struct dlbn_gpu *gpu; /* NULL or !present: CPU-only ("gpu": null) */
};

void dlbn_report_text(FILE *out, const struct dlbn_report_input *in);
void dlbn_report_json(FILE *out, const struct dlbn_report_input *in);
void dlbn_report_markdown(FILE *out, const struct dlbn_report_input *in);

/* One line per record: time, proc, tid, type name, named fields. */
void dlbn_dump_record(FILE *out, const struct dlbn_record *r, int64_t t0);

/* Write s (len bytes) as a JSON string literal, quotes included. */
void dlbn_json_string(FILE *out, const char *s, size_t len);

#endif /* DLBN_REPORT_H */
