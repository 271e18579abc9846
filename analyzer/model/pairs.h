/*
 * pairs.h - intervals the model does not keep, paired while the records
 * stream by (for the exports and the HTML report): NVTX push/pop and
 * start/end ranges, and a worker's batches from the index it received to
 * the result it wrote.
 *
 * Memory grows with the interned NVTX strings and domains and the ranges
 * open at once, never with the number of records: nested pushes deeper
 * than PUSH_DEPTH_MAX (pairs.c) keep the outer ranges, and a worker's
 * batches waiting for their result are at most BATCH_QUEUE.
 */
#ifndef DLBN_PAIRS_H
#define DLBN_PAIRS_H

#include <stdint.h>

#include "model/model.h"
#include "trace/reader.h"

/*
 * Feed every record in reader order; completed intervals come out through
 * the callback, at most one per record fed.  dlbn_pairs_finish() reports
 * the ranges still open at the end of the trace with end = -1: the pushed
 * ones by thread and depth, then the started ones (in an order fixed by
 * their ids and the order they came in).
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

#endif /* DLBN_PAIRS_H */
