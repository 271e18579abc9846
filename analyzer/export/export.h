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
 * What they share lies below them: the output file (util/outfile.h), the
 * byte buffer with JSON escaping (util/buf.h), names of enum values and
 * the record layout (trace/recnames.h), role names (model/model.h), NVTX
 * range and worker batch pairing (model/pairs.h).  export_common.c holds
 * the little that is the exports' own.
 */
#ifndef DLBN_EXPORT_H
#define DLBN_EXPORT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "analysis/verdict.h"
#include "gpu/gpu.h"
#include "model/model.h"
#include "trace/reader.h"
#include "util/buf.h"
#include "util/outfile.h"

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

/* A step's GPU evidence (gpu.h DLBN_GPU_EV_*), NULL for none. */
const char *dlbn_evidence_name(int ev);
/* CLOCK_MONOTONIC in seconds (struct dlbn_export_stats). */
double dlbn_now_s(void);
/* A record's fields as JSON object members ("name":value, comma
 * separated, `open` before the first), leaving out those in its layout
 * columns (trace/recnames.h); the caller closes the object.  Returns the
 * members written (0: nothing appended). */
int dlbn_rec_detail_json(struct dlbn_buf *b, const struct dlbn_record *r, const char *open);

#endif /* DLBN_EXPORT_H */
