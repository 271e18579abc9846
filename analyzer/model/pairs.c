/*
 * pairs.c - NVTX ranges and worker batches paired while streaming (see
 * pairs.h).
 */
#include <stdlib.h>
#include <string.h>

#include "model/pairs.h"
#include "trace/recnames.h"
#include "util/buf.h"
#include "util/hashtab.h"

#define PUSH_DEPTH_MAX 64
#define BATCH_QUEUE    16

struct open_range {
	int64_t begin;
	uint32_t thread;
	int64_t domain_id;
	char *name;
};

struct push_stack {
	struct open_range v[PUSH_DEPTH_MAX];
	int n;
};

struct batch_queue {
	int64_t start[BATCH_QUEUE];
	uint32_t thread[BATCH_QUEUE];
	unsigned head, n;
	uint64_t seq;
};

struct dlbn_pairs {
	const struct dlbn_model *m;
	struct dlbn_hashtab strings; /* pkey(proc, STRING id) -> char * */
	struct dlbn_hashtab domains; /* pkey(proc, domain id) -> char * */
	struct dlbn_hashtab started; /* pkey(proc, range id) -> struct open_range * */
	struct push_stack **stacks;  /* per thread, allocated on first push */
	struct batch_queue *batches; /* per process */
	struct dlbn_buf msg;	     /* inline message, NUL terminated */
};

static uint64_t pkey(uint32_t proc, int64_t id)
{
	return (uint64_t)proc << 32 | (uint32_t)id;
}

struct dlbn_pairs *dlbn_pairs_new(const struct dlbn_model *m)
{
	struct dlbn_pairs *p = calloc(1, sizeof(*p));
	if (!p)
		return NULL;
	p->m = m;
	p->stacks = calloc(m->nthreads ? m->nthreads : 1, sizeof(*p->stacks));
	p->batches = calloc(m->nprocs ? m->nprocs : 1, sizeof(*p->batches));
	if (!p->stacks || !p->batches) {
		dlbn_pairs_free(p);
		return NULL;
	}
	return p;
}

/* Free a table and the values its entries point to. */
static void free_values(struct dlbn_hashtab *t)
{
	for (struct dlbn_hash_entry *e = NULL; (e = dlbn_hashtab_next(t, e));)
		free(e->val.ptr);
	dlbn_hashtab_free(t);
}

void dlbn_pairs_free(struct dlbn_pairs *p)
{
	if (!p)
		return;
	free_values(&p->strings);
	free_values(&p->domains);
	for (struct dlbn_hash_entry *e = NULL; (e = dlbn_hashtab_next(&p->started, e));) {
		struct open_range *o = e->val.ptr;
		free(o->name);
	}
	free_values(&p->started);
	for (size_t i = 0; p->stacks && i < p->m->nthreads; i++) {
		if (!p->stacks[i])
			continue;
		for (int k = 0; k < p->stacks[i]->n; k++)
			free(p->stacks[i]->v[k].name);
		free(p->stacks[i]);
	}
	free(p->stacks);
	free(p->batches);
	dlbn_buf_free(&p->msg);
	free(p);
}

static char *copy_str(const char *s, size_t n)
{
	char *c = malloc(n + 1);
	if (c) {
		memcpy(c, s, n);
		c[n] = 0;
	}
	return c;
}

/* Remember an interned text (STRING or DOMAIN record); -1 out of memory. */
static int remember(struct dlbn_hashtab *map, uint32_t proc, const struct dlbn_record *r)
{
	if (r->nfields < 2 || r->kind[0] != DLBN_V_INT || r->kind[1] != DLBN_V_STR)
		return 0;
	char *c = copy_str(r->str[1], (size_t)r->f[1]);
	struct dlbn_hash_entry *e = c ? dlbn_hashtab_put(map, pkey(proc, r->f[0]), NULL) : NULL;
	if (!e) {
		free(c);
		return -1;
	}
	free(e->val.ptr); /* re-announced after a fork: same text */
	e->val.ptr = c;
	return 0;
}

const char *dlbn_pairs_msg(struct dlbn_pairs *p, const struct dlbn_record *r, int msg_id_field)
{
	int mi = msg_id_field + 1;
	if (mi < r->nfields && r->kind[mi] == DLBN_V_STR) {
		p->msg.n = 0;
		dlbn_buf_put(&p->msg, r->str[mi], (size_t)r->f[mi]);
		return p->msg.oom || !p->msg.p ? "" : p->msg.p;
	}
	if (msg_id_field < r->nfields && r->kind[msg_id_field] == DLBN_V_INT) {
		uint32_t proc = p->m->threads[r->stream->index].proc_index;
		const struct dlbn_hash_entry *e =
			dlbn_hashtab_get(&p->strings, pkey(proc, r->f[msg_id_field]));
		if (e)
			return e->val.ptr;
	}
	return "";
}

static const char *domain_name(struct dlbn_pairs *p, uint32_t proc, int64_t id)
{
	const struct dlbn_hash_entry *e = id ? dlbn_hashtab_get(&p->domains, pkey(proc, id)) : NULL;
	return e ? e->val.ptr : "";
}

static int64_t ifld(const struct dlbn_record *r, int i)
{
	return i < r->nfields && r->kind[i] == DLBN_V_INT ? r->f[i] : 0;
}

static int range_push(struct dlbn_pairs *p, const struct dlbn_record *r)
{
	uint32_t ti = r->stream->index;
	if (!p->stacks[ti] && !(p->stacks[ti] = calloc(1, sizeof(struct push_stack))))
		return -1;
	struct push_stack *s = p->stacks[ti];
	if (s->n == PUSH_DEPTH_MAX) /* runaway nesting: keep the outer ranges */
		return 0;
	struct open_range *o = &s->v[s->n];
	if (!(o->name = strdup(dlbn_pairs_msg(p, r, 1))))
		return -1;
	o->begin = r->t_ns;
	o->thread = ti;
	o->domain_id = ifld(r, 0);
	s->n++;
	return 0;
}

static int range_pop(struct dlbn_pairs *p, const struct dlbn_record *r, dlbn_interval_fn fn,
		     void *ctx)
{
	uint32_t ti = r->stream->index;
	struct push_stack *s = p->stacks[ti];
	int64_t dom = ifld(r, 0);
	int k = s ? s->n - 1 : -1;
	while (k >= 0 && s->v[k].domain_id != dom) /* NVTX stacks are per domain */
		k--;
	if (k < 0)
		return 0;
	struct open_range o = s->v[k];
	memmove(&s->v[k], &s->v[k + 1], (size_t)(s->n - k - 1) * sizeof(s->v[0]));
	s->n--;
	uint32_t proc = p->m->threads[ti].proc_index;
	struct dlbn_interval iv = {DLBN_IV_PUSH, proc, ti, ti,	   o.begin,
				   r->t_ns,	 k,    0,  o.name, domain_name(p, proc, dom)};
	int rc = fn(ctx, &iv);
	free(o.name);
	return rc;
}

static int range_start(struct dlbn_pairs *p, const struct dlbn_record *r)
{
	uint32_t ti = r->stream->index, proc = p->m->threads[ti].proc_index;
	struct open_range *o = malloc(sizeof(*o));
	if (!o || !(o->name = strdup(dlbn_pairs_msg(p, r, 2)))) {
		free(o);
		return -1;
	}
	o->begin = r->t_ns;
	o->thread = ti;
	o->domain_id = ifld(r, 1);
	struct dlbn_hash_entry *e = dlbn_hashtab_put(&p->started, pkey(proc, ifld(r, 0)), NULL);
	if (!e) {
		free(o->name);
		free(o);
		return -1;
	}
	struct open_range *old = e->val.ptr;
	if (old) { /* range id reused without an END: drop the older one */
		free(old->name);
		free(old);
	}
	e->val.ptr = o;
	return 0;
}

static int range_end(struct dlbn_pairs *p, const struct dlbn_record *r, dlbn_interval_fn fn,
		     void *ctx)
{
	uint32_t ti = r->stream->index, proc = p->m->threads[ti].proc_index;
	uint64_t id = (uint64_t)ifld(r, 0);
	struct dlbn_hash_entry *e = dlbn_hashtab_get(&p->started, pkey(proc, (int64_t)id));
	if (!e)
		return 0;
	struct open_range *o = e->val.ptr;
	dlbn_hashtab_delete(&p->started, e);
	struct dlbn_interval iv = {
		DLBN_IV_START, proc, o->thread, ti,	 o->begin,
		r->t_ns,       0,    id,	o->name, domain_name(p, proc, o->domain_id)};
	int rc = fn(ctx, &iv);
	free(o->name);
	free(o);
	return rc;
}

/*
 * Worker batches, the model's rule without its pipe table: in a worker an
 * index message is a pipe read of more than its 4-byte length header, and
 * the result is a pipe write of more than 4 bytes (workers read only their
 * index queue and write only the result queue).  The write's start ends
 * the batch; starts queue up because the feeder thread writes late.
 */
static int batch_record(struct dlbn_pairs *p, const struct dlbn_record *r, dlbn_interval_fn fn,
			void *ctx)
{
	uint32_t ti = r->stream->index, proc = p->m->threads[ti].proc_index;
	if (p->m->procs[proc].role != DLBN_ROLE_WORKER || ifld(r, 2) != DLBN_FD_PIPE ||
	    ifld(r, 4) <= 4)
		return 0;
	struct batch_queue *q = &p->batches[proc];
	if (r->type == DLBN_REC_READ) {
		if (q->n == BATCH_QUEUE) { /* results never written: drop the oldest */
			q->head = (q->head + 1) % BATCH_QUEUE;
			q->n--;
		}
		unsigned tail = (q->head + q->n) % BATCH_QUEUE;
		q->start[tail] = r->t_ns + dlbn_rec_dur(r);
		q->thread[tail] = ti;
		q->n++;
		return 0;
	}
	if (!q->n)
		return 0;
	struct dlbn_interval iv = {DLBN_IV_BATCH, proc, q->thread[q->head], ti, q->start[q->head],
				   r->t_ns,	  0,	q->seq++,	    "", ""};
	q->head = (q->head + 1) % BATCH_QUEUE;
	q->n--;
	return fn(ctx, &iv);
}

int dlbn_pairs_feed(struct dlbn_pairs *p, const struct dlbn_record *r, dlbn_interval_fn fn,
		    void *ctx)
{
	uint32_t proc = p->m->threads[r->stream->index].proc_index;
	switch (r->type) {
	case DLBN_REC_STRING:
		return remember(&p->strings, proc, r);
	case DLBN_REC_DOMAIN:
		return remember(&p->domains, proc, r);
	case DLBN_REC_RANGE_PUSH:
		return range_push(p, r);
	case DLBN_REC_RANGE_POP:
		return range_pop(p, r, fn, ctx);
	case DLBN_REC_RANGE_START:
		return range_start(p, r);
	case DLBN_REC_RANGE_END:
		return range_end(p, r, fn, ctx);
	case DLBN_REC_READ:
	case DLBN_REC_WRITE:
		return batch_record(p, r, fn, ctx);
	default:
		return 0;
	}
}

int dlbn_pairs_finish(struct dlbn_pairs *p, dlbn_interval_fn fn, void *ctx)
{
	int rc = 0;
	for (size_t ti = 0; !rc && ti < p->m->nthreads; ti++) {
		struct push_stack *s = p->stacks[ti];
		uint32_t proc = p->m->threads[ti].proc_index;
		for (int k = 0; !rc && s && k < s->n; k++) {
			struct dlbn_interval iv = {DLBN_IV_PUSH,
						   proc,
						   (uint32_t)ti,
						   (uint32_t)ti,
						   s->v[k].begin,
						   -1,
						   k,
						   0,
						   s->v[k].name,
						   domain_name(p, proc, s->v[k].domain_id)};
			rc = fn(ctx, &iv);
		}
	}
	for (struct dlbn_hash_entry *e = NULL; !rc && (e = dlbn_hashtab_next(&p->started, e));) {
		const struct open_range *o = e->val.ptr;
		uint32_t proc = (uint32_t)(e->key >> 32);
		struct dlbn_interval iv = {DLBN_IV_START,
					   proc,
					   o->thread,
					   o->thread,
					   o->begin,
					   -1,
					   0,
					   (uint32_t)e->key,
					   o->name,
					   domain_name(p, proc, o->domain_id)};
		rc = fn(ctx, &iv);
	}
	return rc;
}
