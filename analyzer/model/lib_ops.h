/*
 * lib_ops.h - where a loader library's own threads spend their time, from
 * the NVTX ranges the library emits: DALI names every operator run
 * ("[DALI][CPU op] Run decoders__Image", "[DALI][GPU op] Run ...",
 * "[DALI][Mixed op] Run ...") and every sample its reader reads
 * ("[DALI][Loader] ReadOne").  Their busy time per operator, over the
 * verdict's window, says which stage of the pipeline costs the time.
 * These ranges are evidence of where the loader works, never the loop's
 * waits (ranges.c does not class a "[DALI]" range as data loading).
 *
 * Fed by the model's second pass with the training process's range
 * records, in time order.  Memory: a fixed table of operators and a small
 * stack of open ranges per thread; never grows with records.
 */
#ifndef DLBN_LIB_OPS_H
#define DLBN_LIB_OPS_H

#include <stddef.h>
#include <stdint.h>

#include "trace/reader.h"

#define DLBN_LIB_OPS_MAX 24
#define DLBN_LIB_OP_NAME 48

struct dlbn_lib_op {
	char name[DLBN_LIB_OP_NAME]; /* "decoders__Image", "Resize (GPU)", "reader" */
	int64_t busy_ns;	     /* closed inside the window */
	uint64_t runs;
};

struct dlbn_lib_stack; /* per thread: the open ranges */

struct dlbn_lib_ops {
	struct dlbn_lib_op v[DLBN_LIB_OPS_MAX];
	size_t n;
	int64_t busy_ns; /* all operators, inside the window */
	struct dlbn_lib_stack *stacks;
	size_t nstacks;
};

/* nthreads: the trace's streams (record->stream->index < nthreads). */
int dlbn_lib_ops_init(struct dlbn_lib_ops *o, size_t nthreads);
/* A RANGE_PUSH or RANGE_POP of the training process (others are
 * ignored); in_window: the verdict's window has begun. */
void dlbn_lib_ops_record(struct dlbn_lib_ops *o, const struct dlbn_record *r, int in_window);
/* The operators by busy time, most first (sorts o->v). */
void dlbn_lib_ops_sort(struct dlbn_lib_ops *o);
void dlbn_lib_ops_free(struct dlbn_lib_ops *o);

#endif /* DLBN_LIB_OPS_H */
