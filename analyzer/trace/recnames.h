/*
 * recnames.h - what the names of a record's fields tell (recnames.c): the
 * names of the values of its enum fields, and its layout, which field
 * holds the duration, fd, fd kind, inode and result.  The names of record
 * types and fields themselves are declared in reader.h.
 */
#ifndef DLBN_RECNAMES_H
#define DLBN_RECNAMES_H

#include <stdint.h>

#include "trace/reader.h"

/* Names of the values of the trace's enums (dlbn_trace.h); the "unknown"
 * or generic name for a value the format does not define. */
const char *dlbn_fd_kind_name(int64_t kind); /* DLBN_FD_* */
const char *dlbn_start_name(int64_t start);  /* DLBN_START_* */
const char *dlbn_exit_how_name(int64_t how); /* DLBN_EXIT_* */
const char *dlbn_mark_name(int64_t kind);    /* DLBN_MARK_* */
const char *dlbn_cu_api_name(int64_t api);   /* DLBN_CU_* */
/* The name of value v of field i of a record type, when that field holds
 * one of the enums above; NULL for a plain number. */
const char *dlbn_field_value_name(int type, int i, int64_t v);

/*
 * Record layout: which field of a record type holds dur_ns, fd, fd_kind,
 * ino and ret (-1: none), from the field names.  MEMCPY's bytes count as
 * its ret.
 */
struct dlbn_rec_layout {
	int8_t dur, fd, fd_kind, ino, ret;
};
const struct dlbn_rec_layout *dlbn_rec_layout(int type);
/* The record's duration: field dur, clamped to [0, DLBN_DUR_LIMIT]. */
int64_t dlbn_rec_dur(const struct dlbn_record *r);

#endif /* DLBN_RECNAMES_H */
