/*
 * lib_ops.c - busy time per operator of a loader library, from its own
 * NVTX ranges (see lib_ops.h).
 *
 * Pushes and pops pair per thread: every push is stacked (an operator's
 * index, or -1 for a range that is not one), so that a pop closes the
 * range it belongs to whatever else the thread pushed.  Ranges nested
 * deeper than STACK_DEPTH are counted, not kept: their pops only unwind.
 */
#include <stdlib.h>
#include <string.h>

#include "model/lib_ops.h"

#define STACK_DEPTH 16

struct dlbn_lib_stack {
	int depth; /* open ranges, kept or not */
	int16_t op[STACK_DEPTH];
	int64_t t[STACK_DEPTH];
};

/* Range names that are operator runs: prefix, and what follows the name. */
static const struct {
	const char *prefix, *suffix;
} op_names[] = {
	{"[DALI][CPU op] Run ", ""},
	{"[DALI][GPU op] Run ", " (GPU)"},
	{"[DALI][Mixed op] Run ", " (mixed)"},
};
static const char reader_range[] = "[DALI][Loader] ReadOne";

int dlbn_lib_ops_init(struct dlbn_lib_ops *o, size_t nthreads)
{
	memset(o, 0, sizeof(*o));
	o->stacks = calloc(nthreads ? nthreads : 1, sizeof(*o->stacks));
	o->nstacks = nthreads;
	return o->stacks ? 0 : -1;
}

void dlbn_lib_ops_free(struct dlbn_lib_ops *o)
{
	free(o->stacks);
	o->stacks = NULL;
	o->nstacks = 0;
}

/* The table index of the operator a range name runs; -1 when it is none
 * (or the table is full). */
static int op_of(struct dlbn_lib_ops *o, const char *s, size_t len)
{
	char name[DLBN_LIB_OP_NAME];
	name[0] = 0;
	if (len == sizeof(reader_range) - 1 && !memcmp(s, reader_range, len))
		strcpy(name, "reader");
	for (size_t i = 0; !name[0] && i < sizeof(op_names) / sizeof(op_names[0]); i++) {
		size_t pl = strlen(op_names[i].prefix), sl = strlen(op_names[i].suffix);
		if (len <= pl || memcmp(s, op_names[i].prefix, pl) != 0)
			continue;
		size_t n = len - pl;
		if (n + sl >= sizeof(name))
			n = sizeof(name) - 1 - sl;
		memcpy(name, s + pl, n);
		memcpy(name + n, op_names[i].suffix, sl + 1);
	}
	if (!name[0])
		return -1;
	for (size_t i = 0; i < o->n; i++)
		if (!strcmp(o->v[i].name, name))
			return (int)i;
	if (o->n == DLBN_LIB_OPS_MAX)
		return -1;
	memcpy(o->v[o->n].name, name, sizeof(name));
	return (int)o->n++;
}

void dlbn_lib_ops_record(struct dlbn_lib_ops *o, const struct dlbn_record *r, int in_window)
{
	if (!r->stream || r->stream->index >= o->nstacks)
		return;
	struct dlbn_lib_stack *st = &o->stacks[r->stream->index];
	if (r->type == DLBN_REC_RANGE_PUSH) {
		if (st->depth < STACK_DEPTH) {
			int op = r->nfields > 2 && r->kind[2] == DLBN_V_STR && r->str[2]
					 ? op_of(o, r->str[2], (size_t)r->f[2])
					 : -1;
			st->op[st->depth] = (int16_t)op;
			st->t[st->depth] = r->t_ns;
		}
		st->depth++;
	} else if (r->type == DLBN_REC_RANGE_POP && st->depth > 0) {
		st->depth--;
		if (st->depth < STACK_DEPTH && st->op[st->depth] >= 0 && in_window) {
			struct dlbn_lib_op *op = &o->v[st->op[st->depth]];
			int64_t d = r->t_ns - st->t[st->depth];
			if (d > 0) {
				op->busy_ns += d;
				o->busy_ns += d;
			}
			op->runs++;
		}
	}
}

static int by_busy(const void *a, const void *b)
{
	const struct dlbn_lib_op *x = a, *y = b;
	return x->busy_ns < y->busy_ns	 ? 1
	       : x->busy_ns > y->busy_ns ? -1
					 : strcmp(x->name, y->name);
}

void dlbn_lib_ops_sort(struct dlbn_lib_ops *o)
{
	qsort(o->v, o->n, sizeof(o->v[0]), by_busy);
}
