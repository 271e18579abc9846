/*
 * reader.h - streaming reader of dlbn trace files (format v1, dlbn_trace.h).
 *
 * The reader scans the extent headers once, groups extents into streams
 * (one per (proc_id, thread_no), ordered by extent_seq) and then hands out
 * the records of all streams merged by timestamp.  Each stream holds one
 * small buffer filled with pread(), so memory is bounded by the number of
 * streams, never by the length of the trace.
 *
 * Damage is tolerated and counted, never fatal once the file header is
 * good: uninitialised extents are skipped, bytes past `committed` are
 * ignored, an extent cut by the end of the file is read up to the file end,
 * and an undecodable record ends its extent.  A bad magic, an unknown major
 * version or a file too short for a header is fatal (dlbn_reader_open
 * fails with a message).
 */
#ifndef DLBN_READER_H
#define DLBN_READER_H

#include <stddef.h>
#include <stdint.h>

#include "dlbn_trace.h"

/* Record times are clamped to +-2^61 ns (73 years) so that arithmetic on
 * them cannot overflow whatever the file says; durations: DLBN_DUR_LIMIT. */
#define DLBN_TIME_LIMIT	    (INT64_C(1) << 61)
#define DLBN_DUR_LIMIT	    (INT64_C(1) << 42) /* 73 minutes */
#define DLBN_REC_MAX_FIELDS 16		       /* fields after [type, dt] that are kept */
#define DLBN_REC_MAX_ARR    64		       /* elements kept of the first array field */

enum dlbn_val_kind {
	DLBN_V_NONE = 0, /* field absent */
	DLBN_V_INT = 1,
	DLBN_V_STR = 2, /* str or bin: str[i] points at f[i] bytes */
	DLBN_V_NIL = 3,
	DLBN_V_ARR = 4,	  /* f[i] = element count; elements in rec->arr */
	DLBN_V_OTHER = 5, /* float, map, bool ...: skipped, f[i] = 0 */
};

/* One thread of one process instance, as the extent headers describe it. */
struct dlbn_stream_info {
	uint32_t proc_id;
	uint32_t thread_no;
	uint32_t pid;
	uint32_t tid;
	uint32_t index;	  /* position in dlbn_reader_stream() order */
	uint64_t records; /* decoded so far */
	int ended_final;  /* an extent carried DLBN_EXTENT_FINAL */
};

/*
 * A decoded record.  f[i] is field i after [type, dt] (so the fields of
 * dlbn_trace.h are numbered from 0).  String pointers stay valid until the
 * next call of dlbn_reader_next(); they are not NUL terminated.
 */
struct dlbn_record {
	int type;
	int nfields;  /* fields present (capped at DLBN_REC_MAX_FIELDS) */
	int64_t t_ns; /* absolute CLOCK_MONOTONIC time */
	const struct dlbn_stream_info *stream;
	int narr; /* elements kept of the first array field */
	uint8_t kind[DLBN_REC_MAX_FIELDS];
	int64_t f[DLBN_REC_MAX_FIELDS];
	const char *str[DLBN_REC_MAX_FIELDS];
	int64_t arr[DLBN_REC_MAX_ARR];
};

/* What the reader found, for reports and exit status. */
struct dlbn_reader_stats {
	unsigned version_major, version_minor;
	uint32_t extent_size;
	uint32_t file_flags;
	uint64_t created_monotonic_ns;
	uint64_t created_realtime_ns;
	char host[65];
	uint64_t file_size;
	uint64_t extents;	    /* extent slots present in the file */
	uint64_t extents_announced; /* next_extent from the file header */
	uint64_t extents_uninit;    /* allocated, never initialised */
	uint64_t extents_cut;	    /* committed bytes beyond the file end */
	uint64_t extents_corrupt;   /* undecodable record inside committed */
	uint64_t seq_gaps;	    /* missing extent_seq inside a stream */
	uint64_t streams;
	uint64_t records;   /* records handed out (all passes: last) */
	uint64_t bytes;	    /* committed record bytes */
	int truncated;	    /* file shorter than its extents claim */
	unsigned nwarnings; /* warnings issued (first few kept) */
#define DLBN_READER_MAX_WARN 16
	char warnings[DLBN_READER_MAX_WARN][160];
};

struct dlbn_reader;

/*
 * Open a trace.  On failure returns NULL and writes a one-line reason to
 * err (wrong magic, unknown version, unreadable file ...).
 */
struct dlbn_reader *dlbn_reader_open(const char *path, char *err, size_t errlen);
void dlbn_reader_close(struct dlbn_reader *r);

/* Next record in timestamp order; NULL at the end of the trace. */
const struct dlbn_record *dlbn_reader_next(struct dlbn_reader *r);

/* Start again from the first record (for a second pass). */
void dlbn_reader_rewind(struct dlbn_reader *r);

const struct dlbn_reader_stats *dlbn_reader_stats(const struct dlbn_reader *r);

size_t dlbn_reader_nstreams(const struct dlbn_reader *r);
/* Streams found by the scan (index 0 .. streams-1). */
const struct dlbn_stream_info *dlbn_reader_stream(const struct dlbn_reader *r, size_t i);

/*
 * Decode one msgpack record from buf[0..len).  Returns the bytes used,
 * 0 if the record is incomplete (needs more bytes), -1 if malformed.
 * Exposed for tests and the fuzzer.
 */
long dlbn_decode_record(const uint8_t *buf, size_t len, struct dlbn_record *rec, int64_t *dt_ns);

/* Record type names and field names, for --dump and messages. */
const char *dlbn_record_name(int type);
/* Name of field i of a record type, or NULL if not known. */
const char *dlbn_field_name(int type, int i);

#endif /* DLBN_READER_H */
