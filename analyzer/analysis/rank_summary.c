/*
 * rank_summary.c - a rank's row as a small JSON file and back
 * (rank_summary.h).  One table of fields drives both directions, so that
 * what is written is exactly what is read.
 */
#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "analysis/rank_summary.h"
#include "util/json.h"
#include "util/json_read.h"
#include "util/outfile.h"

enum field_type { F_STR, F_DBL, F_INT, F_SIZE, F_U64 };

/* One member: its key, where it lives in the struct, and the value that
 * stands for "unknown" (written as null, and what null reads back as). */
struct field {
	const char *key;
	size_t off, size;
	double unknown;
	int type;
	int has_unknown;
};

#define FIELD(S, k, m, t)                                                                          \
	{                                                                                          \
		k, offsetof(S, m), sizeof(((S *)0)->m), 0, t, 0                                    \
	}
#define FIELD_OR(S, k, m, t, u)                                                                    \
	{                                                                                          \
		k, offsetof(S, m), sizeof(((S *)0)->m), u, t, 1                                    \
	}

#define ROW struct dlbn_rank_row
static const struct field row_fields[] = {
	FIELD(ROW, "trace", trace, F_STR),
	FIELD(ROW, "host", host, F_STR),
	FIELD_OR(ROW, "local_rank", local_rank, F_INT, -1),
	FIELD_OR(ROW, "world_size", world_size, F_INT, -1),
	FIELD(ROW, "state_note", state_note, F_STR),
	FIELD_OR(ROW, "predicted_speedup", speedup, F_DBL, 0),
	FIELD_OR(ROW, "predicted_speedup_low", speedup_low, F_DBL, 0),
	FIELD(ROW, "stall_s", stall_s, F_DBL),
	FIELD(ROW, "stall_fraction", stall_fraction, F_DBL),
	FIELD(ROW, "wall_s", wall_s, F_DBL),
	FIELD(ROW, "step_ms", step_ms, F_DBL),
	FIELD(ROW, "stall_ms_per_step", stall_ms_per_step, F_DBL),
	FIELD(ROW, "rest_ms_per_step", loop_ms, F_DBL),
	FIELD_OR(ROW, "gpu_sync_s", sync_s, F_DBL, -1),
	FIELD(ROW, "steps_window", steps_window, F_SIZE),
	FIELD(ROW, "cause", cause, F_STR),
	FIELD(ROW, "view", view, F_STR),
	FIELD_OR(ROW, "num_workers", num_workers, F_INT, -1),
	FIELD(ROW, "workers", nworkers, F_SIZE),
	FIELD_OR(ROW, "workers_busy_fraction", mean_busy, F_DBL, -1),
	FIELD(ROW, "records", records, F_U64),
	FIELD(ROW, "loaders_total", nloaders, F_SIZE),
};

#define LOADER struct dlbn_rank_loader
static const struct field loader_fields[] = {
	FIELD(LOADER, "kind", kind, F_STR),
	FIELD(LOADER, "description", desc, F_STR),
	FIELD(LOADER, "training", training, F_INT),
	FIELD_OR(LOADER, "num_workers", num_workers, F_INT, -1),
	FIELD_OR(LOADER, "batch_size", batch_size, F_INT, -1),
	FIELD(LOADER, "wait_s", wait_s, F_DBL),
	FIELD(LOADER, "stall_s", stall_s, F_DBL),
};

#define HOT struct dlbn_rank_hot
static const struct field hot_fields[] = {
	FIELD(HOT, "name", name, F_STR),
	FIELD(HOT, "where", where, F_STR),
	FIELD(HOT, "share", share, F_DBL),
};

#define NFIELDS(t) (sizeof(t) / sizeof((t)[0]))

static const char *const state_names[] = {"whole", "damaged", "cut"};

void dlbn_summary_path(const char *trace, char *out, size_t len)
{
	size_t n = strlen(trace);
	if (n > 4 && !strcmp(trace + n - 4, ".bin"))
		n -= 4;
	snprintf(out, len, "%.*s.summary.json", (int)n, trace);
}

/* ---- writing ----------------------------------------------------------- */

static double field_get(const void *base, const struct field *f)
{
	const char *p = (const char *)base + f->off;
	switch (f->type) {
	case F_DBL:
		return *(const double *)(const void *)p;
	case F_INT:
		return *(const int *)(const void *)p;
	case F_SIZE:
		return (double)*(const size_t *)(const void *)p;
	default:
		return (double)*(const uint64_t *)(const void *)p;
	}
}

static uint64_t field_u64(const void *base, const struct field *f)
{
	return *(const uint64_t *)(const void *)((const char *)base + f->off);
}

static void write_fields(FILE *out, const void *base, const struct field *t, size_t n, int *first)
{
	for (size_t i = 0; i < n; i++) {
		const struct field *f = &t[i];
		dlbn_json_key(out, f->key, first);
		if (f->type == F_STR) {
			dlbn_json_str(out, (const char *)base + f->off);
			continue;
		}
		double v = field_get(base, f);
		if (f->has_unknown && v == f->unknown)
			fputs("null", out);
		else if (f->type == F_U64)
			fprintf(out, "%llu", (unsigned long long)field_u64(base, f));
		else if (f->type != F_DBL)
			fprintf(out, "%.0f", v);
		else if (isfinite(v)) /* all the digits: a row read back is the same row */
			fprintf(out, "%.17g", v);
		else /* never from an analysis; null only where it reads as unknown */
			fputs(f->has_unknown ? "null" : "0", out);
	}
}

void dlbn_summary_json(FILE *out, const struct dlbn_rank_row *row, const char *version)
{
	int first = 1;
	fputc('{', out);
	dlbn_json_key_str(out, "format", DLBN_SUMMARY_FORMAT, &first);
	dlbn_json_key_int(out, "version", DLBN_SUMMARY_VERSION, &first);
	dlbn_json_key_str(out, "dlbn_version", version, &first);
	dlbn_json_key_int_or_null(out, "rank", row->rank, row->rank_known, &first);
	dlbn_json_key_str(out, "verdict", dlbn_verdict_name(row->verdict), &first);
	dlbn_json_key_str(out, "state", state_names[row->state], &first);
	write_fields(out, row, row_fields, NFIELDS(row_fields), &first);
	int items = dlbn_json_open(out, "loaders", '[', &first);
	for (size_t i = 0; i < row->nloaders && i < DLBN_ROW_LOADERS; i++) {
		int f = dlbn_json_open(out, NULL, '{', &items);
		write_fields(out, &row->loaders[i], loader_fields, NFIELDS(loader_fields), &f);
		fputc('}', out);
	}
	fputc(']', out);
	items = dlbn_json_open(out, "hot_spots", '[', &first);
	for (size_t i = 0; i < row->nhot; i++) {
		int f = dlbn_json_open(out, NULL, '{', &items);
		write_fields(out, &row->hot[i], hot_fields, NFIELDS(hot_fields), &f);
		fputc('}', out);
	}
	fputc(']', out);
	dlbn_json_key_lines(out, "reasons", DLBN_JSON_TABLE(row->reasons), row->nreasons, &first);
	dlbn_json_key_lines(out, "recommendations", DLBN_JSON_TABLE(row->recs), row->nrecs, &first);
	dlbn_json_key_lines(out, "warnings", DLBN_JSON_TABLE(row->warnings), row->nwarnings,
			    &first);
	fputc('}', out);
}

struct write_ctx {
	const struct dlbn_rank_row *row;
	const char *version;
};

static void write_summary(FILE *out, const void *ctx)
{
	const struct write_ctx *c = ctx;
	dlbn_summary_json(out, c->row, c->version);
	fputc('\n', out);
}

int dlbn_summary_write(const char *path, const struct dlbn_rank_row *row, const char *version,
		       char *err, size_t errlen)
{
	struct write_ctx c = {row, version};
	return dlbn_out_write(path, row->trace, write_summary, &c, err, errlen);
}

/* ---- reading ----------------------------------------------------------- */

static int read_number_into(struct dlbn_jr *p, void *base, const struct field *f)
{
	double v;
	char *at = (char *)base + f->off;
	if (dlbn_jr_peek(p) == 'n') {
		if (!f->has_unknown)
			return dlbn_jr_fail(p, "\"%s\" may not be null", f->key);
		v = f->unknown;
		if (dlbn_jr_literal(p, "null"))
			return -1;
	} else if (f->type == F_U64) { /* past 2^53: not through a double */
		return dlbn_jr_uint(p, (uint64_t *)(void *)at);
	} else if (dlbn_jr_number(p, &v)) {
		return -1;
	}
	switch (f->type) {
	case F_DBL:
		*(double *)(void *)at = v;
		break;
	case F_INT:
		if (v < INT32_MIN || v > INT32_MAX)
			return dlbn_jr_fail(p, "\"%s\" out of range", f->key);
		*(int *)(void *)at = (int)v;
		break;
	case F_SIZE:
		if (!(v >= 0 && v < 0x1p53))
			return dlbn_jr_fail(p, "\"%s\" out of range", f->key);
		*(size_t *)(void *)at = (size_t)v;
		break;
	default: /* F_U64's null */
		*(uint64_t *)(void *)at = (uint64_t)v;
	}
	return 0;
}

/* Read the value of key into base when the table has it.  1 read, 0 not
 * in the table (value not consumed), -1 error. */
static int read_field(struct dlbn_jr *p, void *base, const struct field *t, size_t n,
		      const char *key)
{
	for (size_t i = 0; i < n; i++) {
		if (strcmp(key, t[i].key) != 0)
			continue;
		if (t[i].type == F_STR)
			return dlbn_jr_string(p, (char *)base + t[i].off, t[i].size) ? -1 : 1;
		return read_number_into(p, base, &t[i]) ? -1 : 1;
	}
	return 0;
}

/* An array of objects, each read through table t into base + k * stride
 * (k < cap; more are skipped).  *count: objects read. */
static int read_objects(struct dlbn_jr *p, void *base, size_t stride, size_t cap,
			const struct field *t, size_t n, size_t *count)
{
	int first = 1, rc;
	*count = 0;
	while ((rc = dlbn_jr_element(p, &first)) == 1) {
		if (*count >= cap) {
			if (dlbn_jr_skip(p))
				return -1;
			continue;
		}
		char *obj = (char *)base + *count * stride;
		char key[64];
		int f1 = 1, rm;
		while ((rm = dlbn_jr_member(p, key, sizeof(key), &f1)) == 1) {
			int got = read_field(p, obj, t, n, key);
			if (got < 0 || (got == 0 && dlbn_jr_skip(p)))
				return -1;
		}
		if (rm < 0)
			return -1;
		(*count)++;
	}
	return rc;
}

static int read_lines(struct dlbn_jr *p, char (*lines)[DLBN_LINE], size_t *count)
{
	int first = 1, rc;
	*count = 0;
	while ((rc = dlbn_jr_element(p, &first)) == 1) {
		if (*count < DLBN_ROW_LINES ? dlbn_jr_string(p, lines[*count], DLBN_LINE)
					    : dlbn_jr_skip(p))
			return -1;
		*count += *count < DLBN_ROW_LINES;
	}
	return rc;
}

static int read_name(struct dlbn_jr *p, const char *key, const char *const *names, size_t n,
		     int *out)
{
	char s[32];
	if (dlbn_jr_string(p, s, sizeof(s)))
		return -1;
	for (size_t i = 0; i < n; i++)
		if (names[i] && !strcmp(s, names[i])) {
			*out = (int)i;
			return 0;
		}
	return dlbn_jr_fail(p, "unknown %s \"%s\"", key, s);
}

/* format, version, rank, verdict: what makes the object a summary and
 * whose rank.  1 read, 0 another key, -1 error; have[] marks the first
 * three's presence. */
static int read_identity(struct dlbn_jr *p, struct dlbn_rank_row *row, const char *key, int *have)
{
	const char *const verdicts[] = {dlbn_verdict_name(DLBN_VERDICT_INCONCLUSIVE),
					dlbn_verdict_name(DLBN_VERDICT_NOT_DETECTED),
					dlbn_verdict_name(DLBN_VERDICT_POTENTIAL),
					dlbn_verdict_name(DLBN_VERDICT_DETECTED)};
	char s[32];
	double v;
	if (!strcmp(key, "format")) {
		if (dlbn_jr_string(p, s, sizeof(s)))
			return -1;
		if (strcmp(s, DLBN_SUMMARY_FORMAT) != 0)
			return dlbn_jr_fail(p, "not a dlbn rank summary (format \"%s\")", s);
		return have[0] = 1;
	}
	if (!strcmp(key, "version")) {
		if (dlbn_jr_number(p, &v))
			return -1;
		if (v != DLBN_SUMMARY_VERSION)
			return dlbn_jr_fail(p,
					    "summary version %g; this dlbn-analyze reads version "
					    "%d (analyse the trace instead)",
					    v, DLBN_SUMMARY_VERSION);
		return have[1] = 1;
	}
	if (!strcmp(key, "verdict"))
		return read_name(p, key, verdicts, 4, &row->verdict) ? -1 : (have[2] = 1);
	if (strcmp(key, "rank") != 0)
		return 0;
	if (dlbn_jr_peek(p) == 'n')
		return dlbn_jr_literal(p, "null") ? -1 : 1;
	if (dlbn_jr_number(p, &v))
		return -1;
	if (!(v >= 0 && v <= INT32_MAX))
		return dlbn_jr_fail(p, "bad rank");
	row->rank = (int)v;
	row->rank_known = 1;
	return 1;
}

/* The members other than the table's.  1 read, 0 unknown key, -1 error. */
static int read_special(struct dlbn_jr *p, struct dlbn_rank_row *row, const char *key, int *have)
{
	size_t k = 0;
	int rc = read_identity(p, row, key, have);
	if (rc != 0)
		return rc;
	if (!strcmp(key, "state"))
		rc = read_name(p, key, state_names, NFIELDS(state_names), &row->state);
	else if (!strcmp(key, "loaders")) {
		rc = read_objects(p, row->loaders, sizeof(row->loaders[0]), DLBN_ROW_LOADERS,
				  loader_fields, NFIELDS(loader_fields), &k);
		have[3] = (int)k;
	} else if (!strcmp(key, "hot_spots"))
		rc = read_objects(p, row->hot, sizeof(row->hot[0]), DLBN_ROW_HOT, hot_fields,
				  NFIELDS(hot_fields), &row->nhot);
	else if (!strcmp(key, "reasons"))
		rc = read_lines(p, row->reasons, &row->nreasons);
	else if (!strcmp(key, "recommendations"))
		rc = read_lines(p, row->recs, &row->nrecs);
	else if (!strcmp(key, "warnings"))
		rc = read_lines(p, row->warnings, &row->nwarnings);
	else
		return 0;
	return rc ? -1 : 1;
}

int dlbn_summary_parse(const char *text, size_t len, struct dlbn_rank_row *row, char *err,
		       size_t errlen)
{
	struct dlbn_jr p;
	char key[64];
	int first = 1, rc, have[4] = {0, 0, 0, -1}; /* format, version, verdict, loaders read */
	const char *input = row->input;
	size_t input_index = row->input_index;
	memset(row, 0, sizeof(*row));
	row->input = input;
	row->input_index = input_index;
	row->source = DLBN_RANK_FROM_SUMMARY;
	row->rank = (int)input_index;
	row->local_rank = row->world_size = row->num_workers = -1;
	row->sync_s = row->mean_busy = -1;
	dlbn_jr_init(&p, text, len, err, errlen);
	if (dlbn_jr_peek(&p) != '{')
		return dlbn_jr_fail(&p, "not a dlbn rank summary (no JSON object)");
	while ((rc = dlbn_jr_member(&p, key, sizeof(key), &first)) == 1) {
		int got = read_special(&p, row, key, have);
		if (got == 0)
			got = read_field(&p, row, row_fields, NFIELDS(row_fields), key);
		if (got < 0 || (got == 0 && dlbn_jr_skip(&p)))
			return -1;
	}
	if (rc < 0 || dlbn_jr_end(&p))
		return -1;
	if (!have[0] || !have[1] || !have[2] || !row->trace[0])
		return dlbn_jr_fail(&p, "not a dlbn rank summary (format, version, verdict or "
					"trace missing)");
	/* loaders_total counts them all; the list has the first few. */
	if (have[3] >= 0 && have[3] < DLBN_ROW_LOADERS && row->nloaders > (size_t)have[3])
		row->nloaders = (size_t)have[3];
	return 0;
}

/* The summary lies beside its trace: where the trace path it names does
 * not lead to a file from here (written relative to another directory,
 * or the job's folder moved), the trace of that name beside the summary. */
static void find_trace(struct dlbn_rank_row *row, const char *summary)
{
	struct stat st;
	if (stat(row->trace, &st) == 0)
		return;
	const char *slash = strrchr(summary, '/'), *base = strrchr(row->trace, '/');
	base = base ? base + 1 : row->trace;
	char beside[sizeof(row->trace)];
	int n = snprintf(beside, sizeof(beside), "%.*s%s", slash ? (int)(slash - summary + 1) : 0,
			 summary, base);
	if (n > 0 && (size_t)n < sizeof(beside) && stat(beside, &st) == 0)
		memcpy(row->trace, beside, sizeof(beside));
}

int dlbn_summary_read(const char *path, size_t input_index, struct dlbn_rank_row *row, char *err,
		      size_t errlen)
{
	char *text, why[256];
	size_t n;
	if (dlbn_jr_load(path, DLBN_SUMMARY_MAX_BYTES, &text, &n, why, sizeof(why)) != 0) {
		snprintf(err, errlen, "%s: %s", path, why);
		return -1;
	}
	row->input = path;
	row->input_index = input_index;
	int rc = dlbn_summary_parse(text, n, row, why, sizeof(why));
	free(text);
	if (rc)
		snprintf(err, errlen, "%s: %s", path, why);
	else
		find_trace(row, path);
	return rc;
}

int dlbn_summary_sniff(const char *path)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return -1;
	int c;
	while ((c = getc(f)) != EOF && (c == ' ' || c == '\t' || c == '\n' || c == '\r'))
		;
	int err = ferror(f) ? errno : 0;
	fclose(f);
	if (err) {
		errno = err;
		return -1;
	}
	return c == '{';
}
