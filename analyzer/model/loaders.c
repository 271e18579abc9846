/*
 * loaders.c - the DataLoaders of the training process: iterators to
 * loaders, the training loader, the others' roles, workers to loaders (see
 * loaders.h).
 *
 * The training loader is the one whose epochs the loop spent the most time
 * in: for each loader, the sum over its iterators of ITER_BEGIN .. its last
 * mark.  A val loader's epochs are short beside the training ones; two
 * zipped train loaders have the same epochs, and then the one whose fetches
 * took longer is the training loader (it is the one the loop waits for;
 * the other's stall counts in the prediction either way).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/model.h"

/* Spans closer than this share are "the same epochs" (zipped loaders). */
#define SAME_SPAN_SHARE 0.10
/* A loader whose iterators overlap the training loader's for at least this
 * share of its own span is fetched in the same epochs: zipped. */
#define ZIPPED_OVERLAP_SHARE 0.5

const char *dlbn_loader_role_name(int role)
{
	switch (role) {
	case DLBN_LOADER_TRAIN:
		return "train";
	case DLBN_LOADER_ZIPPED:
		return "zipped";
	case DLBN_LOADER_EVAL:
		return "eval";
	default:
		return "other";
	}
}

static inline int64_t fld(const struct dlbn_record *r, int i)
{
	return r->kind[i] == DLBN_V_INT ? r->f[i] : 0;
}

/* The loader of (proc, key), made when new; the last slot takes every
 * loader past the ceiling.  -1 only when the table has no slot at all. */
static int loader_get(struct dlbn_loader_table *t, uint32_t proc_index, int64_t key, int64_t t_ns)
{
	for (size_t i = 0; i < t->n; i++)
		if (t->v[i].proc_index == proc_index && t->v[i].key == key)
			return (int)i;
	if (t->n == DLBN_LOADERS_MAX)
		return DLBN_LOADERS_MAX - 1;
	struct dlbn_loader *l = &t->v[t->n];
	memset(l, 0, sizeof(*l));
	l->key = key;
	l->proc_index = proc_index;
	l->role = DLBN_LOADER_OTHER;
	l->t_first = t_ns;
	l->py_open = l->py_iter_begin = -1;
	l->fetch_thread = -1;
	l->steps.depth = -1;
	return (int)t->n++;
}

/* The entry of iterator (proc, id), most recent first (the live ones). */
static struct dlbn_iter_ent *iter_find(struct dlbn_loader_table *t, uint32_t proc_index,
				       int64_t iter_id)
{
	if (t->last_hit < t->niters && t->iters[t->last_hit].iter_id == iter_id &&
	    t->iters[t->last_hit].proc_index == proc_index)
		return &t->iters[t->last_hit];
	for (size_t i = t->niters; i-- > 0;) {
		if (t->iters[i].iter_id == iter_id && t->iters[i].proc_index == proc_index) {
			t->last_hit = i;
			return &t->iters[i];
		}
	}
	return NULL;
}

static struct dlbn_iter_ent *iter_add(struct dlbn_loader_table *t, uint32_t proc_index,
				      int64_t iter_id, int64_t t_ns)
{
	if (t->niters == t->capiters) {
		size_t ncap = t->capiters ? t->capiters * 2 : 64;
		struct dlbn_iter_ent *nv = realloc(t->iters, ncap * sizeof(*nv));
		if (!nv)
			return NULL;
		t->iters = nv;
		t->capiters = ncap;
	}
	struct dlbn_iter_ent *e = &t->iters[t->niters++];
	*e = (struct dlbn_iter_ent){.iter_id = iter_id,
				    .proc_index = proc_index,
				    .loader = -1,
				    .t_begin = t_ns,
				    .t_last = t_ns,
				    .open_t = -1};
	return e;
}

static int claim_add(struct dlbn_loader_table *t, int pid, int loader, int64_t t_begin)
{
	if (t->nclaims == t->capclaims) {
		size_t ncap = t->capclaims ? t->capclaims * 2 : 64;
		struct dlbn_worker_claim *nv = realloc(t->claims, ncap * sizeof(*nv));
		if (!nv)
			return -1;
		t->claims = nv;
		t->capclaims = ncap;
	}
	t->claims[t->nclaims++] = (struct dlbn_worker_claim){pid, loader, t_begin};
	return 0;
}

static void boot_note(struct dlbn_loader_table *t, const char *text, size_t len)
{
	char v[sizeof(t->boot_reason)];
	t->boot_note = 1;
	if (dlbn_config_text_value(text, len, "bootstrap", v, sizeof(v)) &&
	    !strcmp(v, "incompatible"))
		t->boot_incompatible = 1;
	if ((dlbn_config_text_value(text, len, "stateful_dataloader", v, sizeof(v)) ||
	     dlbn_config_text_value(text, len, "loaders", v, sizeof(v))) &&
	    !strcmp(v, "incompatible"))
		t->boot_partial = 1;
	if (dlbn_config_text_value(text, len, "reason", v, sizeof(v)))
		snprintf(t->boot_reason, sizeof(t->boot_reason), "%s", v);
	if (dlbn_config_text_value(text, len, "torch", v, sizeof(t->torch_version)))
		memcpy(t->torch_version, v, sizeof(t->torch_version));
}

static int config_record(struct dlbn_loader_table *t, uint32_t pi, const struct dlbn_record *r)
{
	if (r->kind[1] != DLBN_V_STR)
		return 0;
	const char *text = r->str[1];
	size_t len = (size_t)r->f[1];
	int64_t iter_id = fld(r, 0);
	if (iter_id == 0) {
		boot_note(t, text, len);
		return 0;
	}
	char v[1024];
	int64_t key = 0;
	if (dlbn_config_text_value(text, len, "loader", v, sizeof(v))) {
		key = strtoll(v, NULL, 10);
		if (key == 0)
			key = -1; /* a loader id of 0 is not the "no id" loader */
	}
	struct dlbn_iter_ent *e = iter_find(t, pi, iter_id);
	if (!e && !(e = iter_add(t, pi, iter_id, r->t_ns)))
		return -1;
	int li = loader_get(t, pi, key, e->t_begin);
	if (li < 0)
		return 0;
	struct dlbn_loader *l = &t->v[li];
	if (e->loader < 0) {
		e->loader = li;
		l->iterators++;
	}
	if (!l->has_config) {
		dlbn_config_parse(&l->config, text, len);
		l->has_config = 1;
	}
	if (!dlbn_config_text_value(text, len, "workers", v, sizeof(v)))
		return 0;
	for (char *p = v; *p;) {
		char *end;
		long pid = strtol(p, &end, 10);
		if (end == p)
			break;
		if (pid > 0 && pid < INT32_MAX && claim_add(t, (int)pid, li, e->t_begin) != 0)
			return -1;
		p = *end ? end + 1 : end;
	}
	return 0;
}

int dlbn_loaders_record(struct dlbn_model *m, uint32_t pi, const struct dlbn_record *r)
{
	struct dlbn_loader_table *t = &m->loaders;
	if (r->type == DLBN_REC_CONFIG)
		return config_record(t, pi, r);
	if (r->type != DLBN_REC_MARK)
		return 0;
	int64_t kind = fld(r, 0), iter_id = fld(r, 1);
	if (kind == DLBN_MARK_ITER_BEGIN)
		return iter_add(t, pi, iter_id, r->t_ns) ? 0 : -1;
	if (kind != DLBN_MARK_FETCH_BEGIN && kind != DLBN_MARK_FETCH_END &&
	    kind != DLBN_MARK_FETCH_STOP)
		return 0;
	struct dlbn_iter_ent *e = iter_find(t, pi, iter_id);
	if (!e && !(e = iter_add(t, pi, iter_id, r->t_ns)))
		return -1;
	if (r->t_ns > e->t_last)
		e->t_last = r->t_ns;
	if (kind == DLBN_MARK_FETCH_BEGIN) {
		e->open_t = r->t_ns;
		return 0;
	}
	if (e->loader < 0) { /* no CONFIG before its first fetch: the loader of key 0 */
		int li = loader_get(t, pi, 0, e->t_begin);
		if (li < 0)
			return 0;
		e->loader = li;
		t->v[li].iterators++;
	}
	struct dlbn_loader *l = &t->v[e->loader];
	if (l->fetch_thread < 0 && r->stream)
		l->fetch_thread = r->stream->index;
	if (kind == DLBN_MARK_FETCH_END && e->open_t >= 0) {
		l->fetches++;
		l->fetch_ns += r->t_ns - e->open_t;
	}
	e->open_t = -1;
	return 0;
}

/* Time iterators of loader a overlap iterators of loader b. */
static int64_t iter_overlap(const struct dlbn_loader_table *t, int a, int b)
{
	int64_t sum = 0;
	for (size_t i = 0; i < t->niters; i++) {
		const struct dlbn_iter_ent *x = &t->iters[i];
		if (x->loader != a)
			continue;
		for (size_t k = 0; k < t->niters; k++) {
			const struct dlbn_iter_ent *y = &t->iters[k];
			if (y->loader != b)
				continue;
			int64_t lo = x->t_begin > y->t_begin ? x->t_begin : y->t_begin;
			int64_t hi = x->t_last < y->t_last ? x->t_last : y->t_last;
			if (hi > lo)
				sum += hi - lo;
		}
	}
	return sum;
}

static int sequential_sampler(const struct dlbn_loader *l)
{
	const char *sampler = dlbn_config_value(&l->config, "sampler");
	return sampler && !strcmp(sampler, "SequentialSampler");
}

/* Drop the loaders of other processes; the survivors keep their order. */
static void keep_process(struct dlbn_loader_table *t, uint32_t tp)
{
	int map[DLBN_LOADERS_MAX];
	size_t n = 0;
	for (size_t i = 0; i < t->n; i++) {
		if (t->v[i].proc_index != tp) {
			map[i] = -1;
			continue;
		}
		map[i] = (int)n;
		if (n != i)
			t->v[n] = t->v[i];
		n++;
	}
	t->n = n;
	size_t k = 0;
	for (size_t i = 0; i < t->niters; i++) {
		struct dlbn_iter_ent e = t->iters[i];
		if (e.proc_index != tp)
			continue;
		e.loader = e.loader >= 0 ? map[e.loader] : -1;
		t->iters[k++] = e;
	}
	t->niters = k;
	t->last_hit = 0;
	k = 0;
	for (size_t i = 0; i < t->nclaims; i++) {
		struct dlbn_worker_claim c = t->claims[i];
		if (map[c.loader] < 0)
			continue;
		c.loader = map[c.loader];
		t->claims[k++] = c;
	}
	t->nclaims = k;
}

/* Iterators without a CONFIG beside exactly one loader that has one: a
 * lost CONFIG record, not another loader; they are that loader's. */
static void merge_unnamed(struct dlbn_loader_table *t)
{
	int unnamed = -1, named = -1, nnamed = 0;
	for (size_t i = 0; i < t->n; i++) {
		if (t->v[i].key == 0)
			unnamed = (int)i;
		else if (nnamed++ == 0)
			named = (int)i;
	}
	if (unnamed < 0 || nnamed != 1)
		return;
	struct dlbn_loader *to = &t->v[named], *from = &t->v[unnamed];
	to->iterators += from->iterators;
	to->fetches += from->fetches;
	to->fetch_ns += from->fetch_ns;
	if (from->t_first < to->t_first)
		to->t_first = from->t_first;
	for (size_t i = 0; i < t->niters; i++)
		if (t->iters[i].loader == unnamed)
			t->iters[i].loader = named;
	for (size_t i = 0; i < t->nclaims; i++)
		if (t->claims[i].loader == unnamed)
			t->claims[i].loader = named;
	/* Close the gap left by the unnamed loader. */
	for (size_t i = (size_t)unnamed + 1; i < t->n; i++)
		t->v[i - 1] = t->v[i];
	t->n--;
	for (size_t i = 0; i < t->niters; i++)
		if (t->iters[i].loader > unnamed)
			t->iters[i].loader--;
	for (size_t i = 0; i < t->nclaims; i++)
		if (t->claims[i].loader > unnamed)
			t->claims[i].loader--;
}

static void choose_training(struct dlbn_model *m)
{
	struct dlbn_loader_table *t = &m->loaders;
	int best = -1;
	for (size_t i = 0; i < t->niters; i++) {
		const struct dlbn_iter_ent *e = &t->iters[i];
		if (e->loader >= 0)
			t->v[e->loader].span_ns += e->t_last - e->t_begin;
	}
	int64_t total = 0;
	for (size_t i = 0; i < t->n; i++) {
		struct dlbn_loader *l = &t->v[i];
		total += l->span_ns;
		/* Fetched by another thread than the loop's (a thread that fills
		 * a queue the loop's own loader reads): not the loop's steps. */
		l->feeder = m->mark_thread >= 0 && l->fetch_thread >= 0 &&
			    l->fetch_thread != m->mark_thread;
		if (!l->fetches || l->feeder)
			continue;
		if (best < 0) {
			best = (int)i;
			continue;
		}
		const struct dlbn_loader *b = &t->v[best];
		int64_t hi = l->span_ns > b->span_ns ? l->span_ns : b->span_ns;
		int64_t diff =
			l->span_ns > b->span_ns ? l->span_ns - b->span_ns : b->span_ns - l->span_ns;
		if ((double)diff > SAME_SPAN_SHARE * (double)hi) {
			if (l->span_ns > b->span_ns)
				best = (int)i;
		} else if (l->fetch_ns > b->fetch_ns) {
			best = (int)i; /* the same epochs: the one the loop waits for */
		}
	}
	/* A Replay run waits for no loader: two loaders of the same epochs
	 * tie there, and its choice would be noise.  Its Real run's stands. */
	int forced = m->opts.force_train - 1, is_forced = 0;
	if (forced >= 0 && (size_t)forced < t->n && t->v[forced].fetches && !t->v[forced].feeder) {
		best = forced;
		is_forced = 1;
	}
	t->train = best;
	if (best < 0)
		return;
	const struct dlbn_loader *b = &t->v[best];
	t->v[best].role = DLBN_LOADER_TRAIN;
	int tie = 0;
	for (size_t i = 0; i < t->n; i++) {
		struct dlbn_loader *l = &t->v[i];
		if ((int)i == best || !l->fetches || l->feeder)
			continue;
		int64_t ov = iter_overlap(t, (int)i, best);
		if (l->span_ns > 0 && (double)ov >= ZIPPED_OVERLAP_SHARE * (double)l->span_ns) {
			l->role = DLBN_LOADER_ZIPPED;
			tie = 1;
		} else {
			l->role = sequential_sampler(l) ? DLBN_LOADER_EVAL : DLBN_LOADER_OTHER;
		}
	}
	if (t->n == 1)
		snprintf(t->chosen_by, sizeof(t->chosen_by), "the only DataLoader");
	else if (is_forced)
		snprintf(t->chosen_by, sizeof(t->chosen_by),
			 "the training loader of the run it is compared with (loader #%d there)",
			 best + 1);
	else if (tie)
		snprintf(t->chosen_by, sizeof(t->chosen_by),
			 "the one the loop waited for longest of the loaders fetched in the "
			 "same epochs (%.3f s over %llu fetches)",
			 (double)b->fetch_ns / 1e9, (unsigned long long)b->fetches);
	else
		snprintf(t->chosen_by, sizeof(t->chosen_by),
			 "the loader the loop spent the most time in (%.3f s of %.3f s, over "
			 "%llu iterator(s))",
			 (double)b->span_ns / 1e9, (double)total / 1e9,
			 (unsigned long long)b->iterators);
}

/* Each claimed pid is the earliest worker process with that pid that
 * started after its iterator began (pids are reused, but not while the
 * worker lives). */
static void tag_workers(struct dlbn_model *m)
{
	struct dlbn_loader_table *t = &m->loaders;
	const int64_t slack = 100000000;
	for (size_t c = 0; c < t->nclaims; c++) {
		const struct dlbn_worker_claim *cl = &t->claims[c];
		ssize_t best = -1;
		for (size_t pi = 0; pi < m->nprocs; pi++) {
			const struct dlbn_proc *p = &m->procs[pi];
			if (p->role != DLBN_ROLE_WORKER || p->pid != cl->pid ||
			    p->t_first < cl->t_begin - slack)
				continue;
			if (best < 0 || p->t_first < m->procs[best].t_first)
				best = (ssize_t)pi;
		}
		if (best < 0 || m->procs[best].loader == cl->loader)
			continue;
		if (m->procs[best].loader < 0)
			t->v[cl->loader].worker_procs++;
		m->procs[best].loader = cl->loader;
	}
}

int dlbn_loaders_decide(struct dlbn_model *m)
{
	struct dlbn_loader_table *t = &m->loaders;
	t->train = -1;
	for (size_t pi = 0; pi < m->nprocs; pi++)
		m->procs[pi].loader = -1;
	if (m->training < 0) {
		t->n = t->niters = t->nclaims = 0;
		return 0;
	}
	keep_process(t, (uint32_t)m->training);
	merge_unnamed(t);
	for (size_t i = 0; i < t->n; i++)
		if (t->v[i].proc_index == (uint32_t)m->training)
			t->ntrain_proc++;
	choose_training(m);
	tag_workers(m);
	/* Each other loader's warm-up is its own prefetch depth. */
	for (size_t i = 0; i < t->n; i++) {
		struct dlbn_loader *l = &t->v[i];
		if ((int)i == t->train)
			continue;
		const struct dlbn_config *c = &l->config;
		int pf = c->prefetch_factor > 0 ? c->prefetch_factor : 2;
		l->steps.depth = l->has_config && c->num_workers > 0 ? c->num_workers * pf : 0;
	}
	return 0;
}

int dlbn_loaders_of_iter(struct dlbn_model *m, int64_t iter_id)
{
	struct dlbn_loader_table *t = &m->loaders;
	if (m->training < 0)
		return t->train;
	struct dlbn_iter_ent *e = iter_find(t, (uint32_t)m->training, iter_id);
	return e && e->loader >= 0 ? e->loader : t->train;
}

void dlbn_loaders_free(struct dlbn_model *m)
{
	free(m->loaders.iters);
	free(m->loaders.claims);
	m->loaders.iters = NULL;
	m->loaders.claims = NULL;
}

/* The value of key in c into buf, "" when absent. */
static void config_text(const struct dlbn_config *c, const char *key, char *buf, size_t len)
{
	const char *v = dlbn_config_value(c, key);
	snprintf(buf, len, "%s", v ? v : "");
}

void dlbn_loader_summary(const struct dlbn_model *m, size_t i, struct dlbn_loader_summary *out)
{
	const struct dlbn_loader *l = &m->loaders.v[i];
	int training = (int)i == m->loaders.train;
	const struct dlbn_steps *st = training ? &m->py_steps : &l->steps;
	memset(out, 0, sizeof(*out));
	out->id = (int)i + 1;
	out->role = l->role;
	out->training = training;
	out->steps = st->n;
	out->window_steps = st->w.window;
	out->epochs = st->epochs;
	out->num_workers = l->has_config ? l->config.num_workers : -1;
	out->batch_size = l->has_config ? l->config.batch_size : -1;
	out->worker_procs = l->worker_procs;
	out->wait_s = (double)st->w.exposed_ns / 1e9;
	out->stall_s = (double)st->w.stall_ns / 1e9;
	if (!training)
		out->in_train_window = l->in_train_window;
	config_text(&l->config, "sampler", out->sampler, sizeof(out->sampler));
	config_text(&l->config, "loader_class", out->loader_class, sizeof(out->loader_class));
	snprintf(out->kind, sizeof(out->kind), "%s", dlbn_loader_kind(&l->config));
	out->threads = l->has_config ? l->config.threads : -1;
	out->feeds_another = l->feeder;
}

const char *dlbn_loader_kind(const struct dlbn_config *c)
{
	return c->present && c->kind[0] ? c->kind : "dataloader";
}

void dlbn_loader_describe(const struct dlbn_loader_summary *s, char *buf, size_t len)
{
	const char *lib = !strcmp(s->kind, "nodes")   ? "torchdata.nodes "
			  : !strcmp(s->kind, "dali")  ? "DALI "
			  : !strcmp(s->kind, "named") ? "named loader "
						      : "";
	int n = snprintf(buf, len, "%s%s", lib,
			 s->loader_class[0] ? s->loader_class : "DataLoader");
	if (n < 0 || (size_t)n >= len)
		return;
	if (s->sampler[0])
		n += snprintf(buf + n, len - (size_t)n, ", %s", s->sampler);
	if ((size_t)n < len && s->threads >= 0)
		n += snprintf(buf + n, len - (size_t)n, ", %d thread%s", s->threads,
			      s->threads == 1 ? "" : "s");
	else if ((size_t)n < len && s->num_workers >= 0)
		n += snprintf(buf + n, len - (size_t)n, ", %d worker%s", s->num_workers,
			      s->num_workers == 1 ? "" : "s");
	if ((size_t)n < len && s->batch_size >= 0)
		snprintf(buf + n, len - (size_t)n, ", batch %d", s->batch_size);
}
