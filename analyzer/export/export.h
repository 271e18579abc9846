/*
 * export.h - the analyzer's two exports of the whole model (docs/DESIGN.md,
 * "Analyzer layers"): `--sqlite FILE`, one SQLite database for SQL queries, and
 * `--perfetto FILE`, a Chrome trace-event JSON timeline that
 * ui.perfetto.dev and chrome://tracing open.
 *
 * Both stream the trace, after the model, the GPU split and the verdict
 * are done: the steps by building the model once more with a step sink
 * (dlbn_model_each_step; the model keeps no steps; --sqlite in the python
 * and nvtx views also builds the IPC view's steps once, into a temporary
 * table, for the steps' hand-off columns), then the records in one pass.
 * Their memory grows with processes, threads, interned strings and open
 * NVTX ranges, never with the number of records or steps.
 *
 * Output files are replaced atomically: the export writes a temporary file
 * next to FILE and renames it over FILE only when complete, so FILE is
 * either the previous content or a whole export, never a partial one.  The
 * trace itself is never overwritten.  The Perfetto JSON can also go to an
 * existing pipe or device (--perfetto /dev/stdout), written in place.
 *
 * Times: ns since the model's t0 (the trace's first record); the absolute
 * CLOCK_MONOTONIC origin is in the SQLite meta table (t0_ns) and in the
 * JSON's otherData.
 *
 * export_common.c holds what both share: the output file, names of enum
 * values, JSON string escaping, NVTX range pairing and worker batch
 * segments.
 */
#ifndef DLBN_EXPORT_H
#define DLBN_EXPORT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "gpu/gpu.h"
#include "model/model.h"
#include "util/outfile.h"
#include "trace/reader.h"
#include "analysis/verdict.h"

struct dlbn_export_input {
	const char *trace_path;
	struct dlbn_reader *r;	    /* rewound and read once more */
	const struct dlbn_model *m; /* built from r */
	const struct dlbn_analysis *a;
	const struct dlbn_gpu *gpu; /* NULL or !present: CPU-only */
	const char *version;	    /* dlbn version string, NULL: unknown */
};

/*
 * Write the SQLite database (tables, indexes and views: man
 * dlbn-analyze(1)).  Returns 0, or -1 with a one-line reason in err; on
 * failure no file is left at path (a previous file there is kept).
 * If stats is not NULL it gets the event rows and the seconds spent
 * inserting them (for benchmarks).
 */
struct dlbn_export_stats {
	uint64_t events;
	double insert_s; /* the event pass alone */
	double total_s;
};
int dlbn_export_sqlite(const char *path, const struct dlbn_export_input *in,
		       struct dlbn_export_stats *stats, char *err, size_t errlen);

/* Write the Chrome trace-event JSON.  Same contract as dlbn_export_sqlite. */
int dlbn_export_perfetto(const char *path, const struct dlbn_export_input *in,
			 struct dlbn_export_stats *stats, char *err, size_t errlen);

/* ---- shared by the two exports (export_common.c) ------------------------ */

const char *dlbn_fd_kind_name(int64_t kind);
const char *dlbn_role_name(int role);
const char *dlbn_start_name(int64_t start);
const char *dlbn_exit_how_name(int64_t how);
const char *dlbn_mark_name(int64_t kind);
const char *dlbn_cu_api_name(int64_t api);
/* A step's GPU evidence (gpu.h DLBN_GPU_EV_*), NULL for none. */
const char *dlbn_evidence_name(int ev);
/* "main", "pin", "worker-main", "feeder" ... for thread index ti. */
const char *dlbn_thread_role(const struct dlbn_model *m, size_t ti);
double dlbn_now_s(void);

/* A growable byte buffer (texts built per record). */
struct dlbn_buf {
	char *p;
	size_t n, cap;
	int oom;
};
void dlbn_buf_put(struct dlbn_buf *b, const char *s, size_t n);
void dlbn_buf_puts(struct dlbn_buf *b, const char *s);
void dlbn_buf_int(struct dlbn_buf *b, int64_t v);
/* v ns as microseconds with three decimals ("12.345"), exact. */
void dlbn_buf_us(struct dlbn_buf *b, int64_t ns);
/* A JSON string literal, quotes included.  Valid UTF-8 is kept; other
 * bytes become \u00XX (their Latin-1 reading), so the output is always
 * valid JSON. */
void dlbn_buf_json_str(struct dlbn_buf *b, const char *s, size_t n);
/* s as valid UTF-8: valid UTF-8 is kept, other bytes become the character
 * of their Latin-1 reading (the same string a JSON reader gets from
 * dlbn_buf_json_str), NULs U+FFFD (SQLite TEXT
 * must be UTF-8 for its readers, e.g. Python's sqlite3). */
void dlbn_buf_utf8(struct dlbn_buf *b, const char *s, size_t n);
void dlbn_buf_free(struct dlbn_buf *b);

/*
 * Record layout: which field of a record type holds dur_ns, fd, fd_kind,
 * ino and ret (-1: none), from the names in recnames.c.  MEMCPY's bytes
 * count as its ret.
 */
struct dlbn_rec_layout {
	int8_t dur, fd, fd_kind, ino, ret;
};
const struct dlbn_rec_layout *dlbn_rec_layout(int type);
/* The record's duration: field dur, clamped to [0, DLBN_DUR_LIMIT]. */
int64_t dlbn_rec_dur(const struct dlbn_record *r);
/* A record's fields as JSON object members ("name":value, comma
 * separated, `open` before the first), leaving out those in its layout
 * columns; the caller closes the object.  Returns the members written
 * (0: nothing appended). */
int dlbn_rec_detail_json(struct dlbn_buf *b, const struct dlbn_record *r, const char *open);

/*
 * Interval pairing while streaming (NVTX ranges, worker batches).  Feed
 * every record in reader order; completed intervals come out through the
 * callback, at most one per record fed.  dlbn_pairs_finish() reports the
 * ranges still open at the end of the trace with end = -1.
 */
enum dlbn_interval_kind {
	DLBN_IV_PUSH = 0,  /* NVTX push/pop (nested, one thread) */
	DLBN_IV_START = 1, /* NVTX start/end (may cross threads) */
	DLBN_IV_BATCH = 2, /* a worker's batch: index received .. result written */
};
struct dlbn_interval {
	int kind;
	uint32_t proc_index, thread_index; /* where it began */
	uint32_t end_thread_index;	   /* where it ended (START/END may differ) */
	int64_t begin, end;		   /* absolute ns; end -1: still open */
	int depth;			   /* PUSH nesting level, 0 = outermost */
	uint64_t id;			   /* START range id; BATCH sequence number */
	const char *name, *domain;	   /* NUL-terminated, "" unknown; valid in the callback */
};
typedef int (*dlbn_interval_fn)(void *ctx, const struct dlbn_interval *iv);
struct dlbn_pairs;
struct dlbn_pairs *dlbn_pairs_new(const struct dlbn_model *m);
/* Returns the callback's non-zero value, or -1 when out of memory. */
int dlbn_pairs_feed(struct dlbn_pairs *p, const struct dlbn_record *r, dlbn_interval_fn fn,
		    void *ctx);
int dlbn_pairs_finish(struct dlbn_pairs *p, dlbn_interval_fn fn, void *ctx);
/* Message of an NVTX record (inline text or interned STRING), "" if none. */
const char *dlbn_pairs_msg(struct dlbn_pairs *p, const struct dlbn_record *r, int msg_id_field);
void dlbn_pairs_free(struct dlbn_pairs *p);

#endif /* DLBN_EXPORT_H */
