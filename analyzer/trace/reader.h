/*
 * reader.h - streaming reader of dlbn trace files (format 1.x, dlbn_trace.h).
 *
 * The reader scans the extent headers once, groups extents into streams
 * (one per (proc_id, thread_no), ordered by extent_seq) and then hands out
 * the records of all streams merged by timestamp.  Each stream holds one
 * small buffer filled with pread(), so memory is bounded by the number of
 * streams, never by the length of the trace.
 *
 * Damage is tolerated and counted, never fatal once the file header is
 * good, and never silent: every extent of a format 1.1 trace is checked
 * when the trace is opened (header CRC, commit word parity, CRC-32C of the
 * committed records, dlbn_trace.h).  A single flipped bit is repaired when
 * the CRC locates it (the records are then exactly the recorder's); an
 * extent that fails otherwise is dropped.  Uninitialised extents (magic 0)
 * are skipped, bytes past `committed` are ignored, an extent cut by the end
 * of the file is read up to the file end, an undecodable record ends its
 * extent, and extents the file header announces but the file lacks mark
 * the trace truncated.  Each loss is described in dlbn_reader_stats.losses
 * (which stream, how many extents and bytes, which time range), the
 * processes that stopped recording in .passive.  A bad magic, an unknown
 * major version or a file too short for a header is fatal
 * (dlbn_reader_open fails with a message).
 */
#ifndef DLBN_READER_H
#define DLBN_READER_H

#include <stddef.h>
#include <stdint.h>

#include "dlbn/dlbn_trace.h"

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

enum dlbn_loss_kind {
	DLBN_LOSS_CORRUPT = 1, /* records failed their check (CRC, decoding): dropped */
	DLBN_LOSS_CUT = 2,     /* the file ends inside the extent's committed records */
	DLBN_LOSS_GAP = 3,     /* extents of the stream are missing (extent_seq gap) */
	DLBN_LOSS_HEADER = 4,  /* an extent header failed its check: stream unknown */
	DLBN_LOSS_MISSING = 5, /* extents announced by the file header, past the file end */
};

#define DLBN_LOSS_T_UNKNOWN INT64_MIN

/* One thing a damaged trace lost. */
struct dlbn_loss {
	int kind;	  /* DLBN_LOSS_* */
	int known_stream; /* proc_id .. tid name the stream (not for HEADER, MISSING) */
	uint32_t proc_id, thread_no, pid, tid;
	uint64_t extents;     /* extents whose records are lost (CUT: 1, partly) */
	uint64_t bytes;	      /* committed record bytes lost; 0 unknown */
	int64_t t_from, t_to; /* CLOCK_MONOTONIC bounds of the lost records, or
			       * DLBN_LOSS_T_UNKNOWN (from the start / to the end) */
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
	uint64_t extents;	     /* extent slots present in the file */
	uint64_t extents_announced;  /* next_extent from the file header */
	uint64_t extents_uninit;     /* allocated, never initialised */
	uint64_t extents_cut;	     /* committed bytes beyond the file end */
	uint64_t extents_corrupt;    /* failed a check or undecodable: records dropped */
	uint64_t extents_bad_header; /* extent header failed its check: dropped */
	uint64_t extents_repaired;   /* one flipped bit found by its CRC and undone */
	uint64_t extents_missing;    /* announced by the file header, not in the file */
	uint64_t seq_gaps;	     /* missing extent_seq inside a stream */
	int checked;		     /* format >= 1.1: extents carry CRCs */
	uint64_t streams;
	uint64_t records; /* records handed out (all passes: last) */
	uint64_t bytes;	  /* committed record bytes */
	int truncated;	  /* file shorter than its extents or header claim */
	unsigned nlosses; /* losses found (the first DLBN_READER_MAX_LOSS kept) */
#define DLBN_READER_MAX_LOSS 32
	struct dlbn_loss losses[DLBN_READER_MAX_LOSS];
	/* Processes that stopped recording (file header, format 1.1). */
	uint32_t passive_count; /* processes that said so (entries: min(count, MAX)) */
	unsigned npassive;	/* complete entries in passive[] */
	struct dlbn_passive_entry passive[DLBN_MAX_PASSIVE];
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
/*
 * The same, with DLBN_READER_* flags.  DLBN_READER_PREAD: read the extents
 * with pread() instead of mapping them, as DLBN_NO_MMAP=1 does.  For
 * traces read side by side on several threads of one process: each
 * extent mapped and unmapped there (and each decoded part given back)
 * makes the kernel interrupt the other CPUs to flush their TLBs, which
 * costs more than the copy that pread() makes.
 */
#define DLBN_READER_PREAD 1u
struct dlbn_reader *dlbn_reader_open_flags(const char *path, unsigned flags, char *err,
					   size_t errlen);
void dlbn_reader_close(struct dlbn_reader *r);

/* Next record in timestamp order; NULL at the end of the trace. */
const struct dlbn_record *dlbn_reader_next(struct dlbn_reader *r);

/* Start again from the first record (for a second pass). */
void dlbn_reader_rewind(struct dlbn_reader *r);

const struct dlbn_reader_stats *dlbn_reader_stats(const struct dlbn_reader *r);

/*
 * Whether the trace is not the whole record of the run: damaged (checks
 * failed, repaired, cut, extents missing) or cut short (a process went
 * passive).  dlbn-analyze exits 1 then.  Valid once the first pass over
 * the records is done (undecodable records are found while decoding).
 */
int dlbn_reader_damaged(const struct dlbn_reader_stats *rs);
/* Whether some process stopped recording (DLBN_FILE_PASSIVE). */
int dlbn_reader_cut_short(const struct dlbn_reader_stats *rs);

size_t dlbn_reader_nstreams(const struct dlbn_reader *r);
/* Streams found by the scan (index 0 .. streams-1). */
const struct dlbn_stream_info *dlbn_reader_stream(const struct dlbn_reader *r, size_t i);

/*
 * Decode one msgpack record from buf[0..len).  Returns the bytes used,
 * 0 if the record is incomplete (needs more bytes), -1 if malformed.
 * Exposed for tests and the fuzzer.
 */
long dlbn_decode_record(const uint8_t *buf, size_t len, struct dlbn_record *rec, int64_t *dt_ns);
/*
 * The same, leaving room in the fields of some record types: gaps[type]
 * (NULL: none) says from which field on (at) the fields are stored how
 * many places further (width); a record of fewer than `at` fields gets no
 * gap.  The reader decodes format 2.0 and later so, to put back the fields of the
 * 1.x layout that an announcement stands for.
 */
struct dlbn_field_gap {
	uint8_t at, width;
};
long dlbn_decode_record_gap(const uint8_t *buf, size_t len, struct dlbn_record *rec, int64_t *dt_ns,
			    const struct dlbn_field_gap *gaps);

/* Record type names and field names, for --dump and messages. */
const char *dlbn_record_name(int type);
/* Name of field i of a record type, or NULL if not known. */
const char *dlbn_field_name(int type, int i);

#endif /* DLBN_READER_H */
