/*
 * hotspots.c - the workers' time by stage and Python function (hotspots.h).
 *
 * Pass: every PROF_STAGE / PROF_SAMPLE record replaces the value of its key
 * (the summaries are cumulative), CALLSITE records of the training process
 * are kept (the first few).  Finish: keys -> loaders (a worker's loader is
 * the model's; a main-process key's scope is the iterator id of its
 * fetches), per loader the busy time, the exact stages, the sampled
 * functions sharing out the CPU time outside the stages, and one waiting
 * entry for the rest.
 */
#include "analysis/hotspots.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "model/loaders.h"

struct dlbn_hot_key {
	uint32_t proc;
	int type, kind, line, in_stage;
	int64_t scope;
	uint64_t hash;
	int64_t a, b, c; /* STAGE: count, wall, cpu; SAMPLE: samples, weight */
	char text[320];
	int32_t next; /* hash chain */
};

#define HOT_BUCKETS	       4096
#define HOT_ENTRIES_PER_LOADER 12
/* A loader thread busier than this is the producer holding the loop back. */
#define HOT_THREAD_SATURATED 0.8
/* Loader threads that waited for the interpreter's lock this share of their
 * busy time do not go faster in more threads. */
#define HOT_THREAD_LOCKED 0.2

static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
	const unsigned char *s = p;
	for (size_t i = 0; i < n; i++)
		h = (h ^ s[i]) * 1099511628211ull;
	return h;
}

static int key_put(struct dlbn_hotspots *h, int32_t *buckets, const struct dlbn_hot_key *k)
{
	uint64_t hv = k->hash;
	for (int32_t i = buckets[hv % HOT_BUCKETS]; i >= 0; i = h->keys[i].next) {
		struct dlbn_hot_key *e = &h->keys[i];
		if (e->hash == hv && e->proc == k->proc && e->type == k->type &&
		    e->kind == k->kind && e->line == k->line && e->in_stage == k->in_stage &&
		    e->scope == k->scope && !strcmp(e->text, k->text)) {
			e->a = k->a, e->b = k->b, e->c = k->c;
			return 0;
		}
	}
	if (h->nkeys == h->capkeys) {
		size_t cap = h->capkeys ? 2 * h->capkeys : 256;
		struct dlbn_hot_key *v = realloc(h->keys, cap * sizeof(*v));
		if (!v)
			return -1;
		h->keys = v, h->capkeys = cap;
	}
	struct dlbn_hot_key *e = &h->keys[h->nkeys];
	*e = *k;
	e->next = buckets[hv % HOT_BUCKETS];
	buckets[hv % HOT_BUCKETS] = (int32_t)h->nkeys++;
	return 0;
}

static void copy_str(char *dst, size_t cap, const char *s, int64_t len)
{
	size_t n = len < 0 ? 0 : (size_t)len;
	if (n >= cap)
		n = cap - 1;
	memcpy(dst, s, n);
	dst[n] = 0;
}

/* The heaviest sample of an entry names it: its line, and its callers text
 * "chain<TAB>leaf" split into the two fields (each cut to fit). */
static void name_by_sample(struct dlbn_hotspot *e, int line, const char *callers)
{
	const char *tab = strchr(callers, '\t');
	size_t chain = tab ? (size_t)(tab - callers) : strlen(callers);
	const char *leaf = tab ? tab + 1 : "";
	e->line = line;
	copy_str(e->callers, sizeof(e->callers), callers, (int64_t)chain);
	copy_str(e->leaf, sizeof(e->leaf), leaf, (int64_t)strlen(leaf));
}

static int take_profile(struct dlbn_hotspots *h, int32_t *buckets, const struct dlbn_model *m,
			const struct dlbn_record *r)
{
	int stage = r->type == DLBN_REC_PROF_STAGE;
	int tf = stage ? 6 : 5; /* the text field */
	if (r->nfields <= tf || r->kind[tf] != DLBN_V_STR)
		return 0;
	for (int i = 0; i < tf; i++)
		if (r->kind[i] != DLBN_V_INT)
			return 0;
	struct dlbn_hot_key k;
	memset(&k, 0, sizeof(k));
	k.proc = m->threads[r->stream->index].proc_index;
	k.type = r->type;
	if (stage) {
		k.kind = (int)r->f[0], k.scope = r->f[1], k.a = r->f[2], k.b = r->f[3];
		k.c = r->f[4], k.line = (int)r->f[5];
	} else {
		k.scope = r->f[0], k.b = r->f[1], k.a = r->f[2];
		k.in_stage = r->f[3] >= 0 && r->f[3] <= DLBN_PROF_THREAD_GIL ? (int)r->f[3] : 1;
		k.line = (int)r->f[4];
	}
	if (k.a < 0 || k.b < 0)
		return 0;
	copy_str(k.text, sizeof(k.text), r->str[tf], r->f[tf]);
	uint64_t hv = 1469598103934665603ull;
	hv = fnv(hv, &k.proc, sizeof(k.proc));
	hv = fnv(hv, &k.type, sizeof(k.type));
	hv = fnv(hv, &k.kind, sizeof(k.kind));
	hv = fnv(hv, &k.scope, sizeof(k.scope));
	hv = fnv(hv, &k.line, sizeof(k.line));
	hv = fnv(hv, k.text, strlen(k.text));
	k.hash = hv + (uint64_t)k.in_stage;
	h->present = 1;
	return key_put(h, buckets, &k);
}

static void take_callsite(struct dlbn_hotspots *h, struct dlbn_model *m,
			  const struct dlbn_record *r)
{
	const struct dlbn_thread *t = &m->threads[r->stream->index];
	if (m->procs[t->proc_index].role != DLBN_ROLE_TRAINING || r->nfields < 2 ||
	    r->kind[0] != DLBN_V_INT || r->kind[1] != DLBN_V_STR)
		return;
	int loader = dlbn_loaders_of_iter(m, r->f[0]);
	for (size_t i = 0; i < h->ncallsites; i++)
		if (h->callsites[i].loader == loader)
			return; /* one per loader: its first iterator's */
	if (h->ncallsites == DLBN_HOT_CALLSITES)
		return;
	struct dlbn_callsite *c = &h->callsites[h->ncallsites++];
	c->loader = loader;
	c->iter_id = r->f[0];
	copy_str(c->text, sizeof(c->text), r->str[1], r->f[1]);
}

/* ---- categories ---------------------------------------------------------- */

static int has(const char *hay, const char *needle)
{
	return strcasestr(hay, needle) != NULL;
}

static int categorize(const char *name, const char *file, const char *callers)
{
	char all[600];
	snprintf(all, sizeof(all), "%s|%s|%s", name, file, callers);
	if (has(name, "token") || has(file, "tokeniz") || has(callers, "tokeniz"))
		return DLBN_HOT_TOKENIZE;
	if (has(all, "decode") || has(all, "PIL/ImageFile.py") || has(all, "JpegImagePlugin") ||
	    has(all, "imread") || has(all, "read_image") || has(all, "decode_jpeg") ||
	    has(name, "loader") || has(all, "PngImagePlugin") ||
	    (has(file, "PIL/Image.py") && strcmp(name, "open") == 0))
		return DLBN_HOT_DECODE; /* Image.open: the header, and the format plugins' import */
	if (has(name, "resize") || has(name, "crop") || has(name, "interpolat") ||
	    has(name, "scale"))
		return DLBN_HOT_RESIZE;
	if (has(name, "flip") || has(name, "jitter") || has(name, "rotat") || has(name, "affine") ||
	    has(name, "augment") || has(name, "normaliz") || has(name, "erasing") ||
	    has(name, "blur") || has(name, "color") || has(name, "totensor") ||
	    has(name, "mixup") || has(name, "autoaug") || has(file, "torchvision/transforms") ||
	    has(file, "timm/data"))
		return DLBN_HOT_AUGMENT;
	if (has(file, "/numpy/") || has(callers, "/numpy/"))
		return DLBN_HOT_NUMPY;
	return DLBN_HOT_OTHER;
}

const char *dlbn_hot_category_name(int c)
{
	static const char *names[] = {"other",	 "decode",   "resize",	"augmentation",
				      "storage", "tokenize", "collate", "send",
				      "numpy",	 "waiting",  "gil"};
	return c >= 0 && c <= DLBN_HOT_LOCK ? names[c] : "other";
}

const char *dlbn_hot_category_fix(int c)
{
	switch (c) {
	case DLBN_HOT_DECODE:
		return "decode on the GPU (DALI's image decoder, or "
		       "torchvision.io.decode_jpeg(device=\"cuda\")), or store smaller images";
	case DLBN_HOT_RESIZE:
	case DLBN_HOT_AUGMENT:
		return "move it to the GPU (batched, after the transfer) or to an offline "
		       "preprocessing step";
	case DLBN_HOT_STORAGE:
		return "local copies of the data (or a faster file system), larger reads "
		       "(packed shards), or more workers to overlap the reads";
	case DLBN_HOT_WAIT:
		return "find what it waits for (network, sleeps, locks); more workers or "
		       "threads overlap such waits";
	case DLBN_HOT_LOCK:
		return "worker processes (DataLoader num_workers, ParallelMapper("
		       "method=\"process\")), or code that releases the GIL (numpy, torch)";
	case DLBN_HOT_TOKENIZE:
		return "tokenize in batches (a fast tokenizer's batch call) or pre-tokenize the "
		       "dataset offline";
	case DLBN_HOT_COLLATE:
		return "a cheaper collate_fn: fewer Python objects per sample, arrays made "
		       "in __getitem__ ready to stack";
	case DLBN_HOT_SEND:
		return "smaller batches on the wire: uint8 rather than float tensors, "
		       "normalise on the GPU after the transfer";
	case DLBN_HOT_NUMPY:
		return "vectorise it over the batch, or move it to the GPU";
	default:
		return "make this function cheaper, or move the work out of the loader "
		       "(offline, or to the GPU)";
	}
}

const char *dlbn_hot_short_file(const char *file)
{
	const char *last = strrchr(file, '/');
	if (!last)
		return file;
	for (const char *p = last - 1; p > file; p--)
		if (*p == '/')
			return p + 1;
	return file;
}

/* ---- finish -------------------------------------------------------------- */

static struct dlbn_hot_loader *loader_slot(struct dlbn_hotspots *h, int loader)
{
	for (size_t i = 0; i < h->nloaders; i++)
		if (h->loaders[i].loader == loader)
			return &h->loaders[i];
	if (h->nloaders == DLBN_HOT_LOADERS)
		return NULL;
	struct dlbn_hot_loader *l = &h->loaders[h->nloaders++];
	memset(l, 0, sizeof(*l));
	l->loader = loader;
	return l;
}

static int key_loader(struct dlbn_model *m, const struct dlbn_hot_key *k)
{
	const struct dlbn_proc *p = &m->procs[k->proc];
	if (p->role == DLBN_ROLE_WORKER) /* unknown: a single loader's own */
		return p->loader >= 0 ? p->loader : m->loaders.n == 1 ? 0 : -1;
	if (p->role == DLBN_ROLE_TRAINING && k->scope > 0)
		return dlbn_loaders_of_iter(m, k->scope);
	return -1;
}

/* name<TAB>file[<TAB>callers] -> parts (in place in a copy). */
static void split_text(const char *text, char *name, size_t nn, char *file, size_t fn,
		       char *callers, size_t cn)
{
	const char *t1 = strchr(text, '\t');
	const char *t2 = t1 ? strchr(t1 + 1, '\t') : NULL;
	copy_str(name, nn, text, t1 ? t1 - text : (int64_t)strlen(text));
	if (t1)
		copy_str(file, fn, t1 + 1, t2 ? t2 - t1 - 1 : (int64_t)strlen(t1 + 1));
	else
		file[0] = 0;
	if (t2 && callers)
		copy_str(callers, cn, t2 + 1, (int64_t)strlen(t2 + 1));
	else if (callers)
		callers[0] = 0;
}

static struct dlbn_hotspot *entry_add(struct dlbn_hotspots *h, size_t *cap, int loader, int kind,
				      const char *name, const char *file, int line, int merge_lines)
{
	for (size_t i = 0; i < h->n; i++) {
		struct dlbn_hotspot *e = &h->v[i];
		if (e->loader == loader && e->kind == kind && !strcmp(e->file, file) &&
		    !strcmp(e->name, name) && (merge_lines || e->line == line))
			return e;
	}
	if (h->n == *cap) {
		size_t nc = *cap ? 2 * *cap : 32;
		struct dlbn_hotspot *v = realloc(h->v, nc * sizeof(*v));
		if (!v)
			return NULL;
		h->v = v, *cap = nc;
	}
	struct dlbn_hotspot *e = &h->v[h->n++];
	memset(e, 0, sizeof(*e));
	e->loader = loader, e->kind = kind, e->line = line;
	snprintf(e->name, sizeof(e->name), "%s", name);
	snprintf(e->file, sizeof(e->file), "%s", file);
	return e;
}

/* A loader thread's summaries (PROF_THREAD, PROF_THREAD_WATCHED,
 * PROF_THREAD_GIL_WAIT), told apart by name and kernel thread id (text
 * "thread NAME<TAB>file<TAB>tid"): a name can be reused, by a thread of
 * each epoch. */
struct thread_sum {
	int loader;
	uint32_t proc;
	char name[96], tid[24]; /* as split_text gives them */
	int64_t busy, watched, samples, watched_samples;
	int64_t lock; /* of busy, waiting for the interpreter's lock */
};

#define HOT_THREADS 128

static struct thread_sum *thread_slot(struct thread_sum *v, size_t *n, int loader, uint32_t proc,
				      const char *name, const char *tid)
{
	for (size_t i = 0; i < *n; i++)
		if (v[i].loader == loader && v[i].proc == proc && !strcmp(v[i].name, name) &&
		    !strncmp(v[i].tid, tid, sizeof(v[i].tid) - 1))
			return &v[i];
	if (*n == HOT_THREADS)
		return NULL;
	struct thread_sum *t = &v[(*n)++];
	memset(t, 0, sizeof(*t));
	t->loader = loader, t->proc = proc;
	snprintf(t->name, sizeof(t->name), "%s", name);
	snprintf(t->tid, sizeof(t->tid), "%.23s", tid);
	return t;
}

/* Per loader: its threads' count, busy and watched time, the busiest. */
static void threads_finish(struct dlbn_hotspots *h, const struct thread_sum *v, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		struct dlbn_hot_loader *l = loader_slot(h, v[i].loader);
		if (!l || v[i].watched <= 0)
			continue;
		double share = (double)v[i].busy / (double)v[i].watched;
		l->threads++;
		l->native_threads += v[i].watched_samples == 0; /* read, not sampled */
		l->thread_busy_ns += v[i].busy;
		l->thread_watched_ns += v[i].watched;
		l->thread_samples += v[i].samples;
		l->thread_lock_ns += v[i].lock < v[i].busy ? v[i].lock : v[i].busy;
		if (!l->busiest_thread[0] || share > l->busiest_thread_share) {
			l->busiest_thread_share = share;
			const char *name = v[i].name;
			if (!strncmp(name, "thread ", 7))
				name += 7;
			snprintf(l->busiest_thread, sizeof(l->busiest_thread), "%.63s", name);
		}
	}
}

struct getitem_name {
	int loader;
	char name[96], file[200];
	int line;
};

static int by_share(const void *a, const void *b)
{
	const struct dlbn_hotspot *x = a, *y = b;
	if (x->share != y->share)
		return x->share < y->share ? 1 : -1;
	return x->loader - y->loader;
}

/* What finish gathers from the keys before it makes the entries: per
 * loader (h->loaders' index) the timed stages and the sampled weight, the
 * loader threads' sums, the __getitem__ each loader names. */
struct hot_tally {
	size_t cap; /* h->v's room (entry_add) */
	int64_t stage_cpu[DLBN_HOT_LOADERS], stage_wall[DLBN_HOT_LOADERS];
	int64_t sampled_w[DLBN_HOT_LOADERS];  /* samples outside the stages */
	int64_t sampled_in[DLBN_HOT_LOADERS]; /* samples inside a timed stage */
	struct getitem_name gi[DLBN_HOT_LOADERS];
	size_t ngi;
	struct thread_sum ths[HOT_THREADS];
	size_t nths;
	char *proc_seen; /* per process: counted in its loader's procs */
};

/* A key's text in parts (split_text). */
struct key_text {
	char name[96], file[200], callers[320];
};

/* A loader thread's sample: wall time, on the CPU or not; the heaviest
 * key's line and callers name the entry (share holds that weight until
 * the shares are made).  -1: out of memory. */
static int tally_thread_sample(struct dlbn_hotspots *h, struct hot_tally *t, int loader,
			       const struct dlbn_hot_key *k, const struct key_text *kt)
{
	struct dlbn_hotspot *e =
		entry_add(h, &t->cap, loader, DLBN_HOT_THREAD_SAMPLED, kt->name, kt->file, 0, 1);
	if (!e)
		return -1;
	if ((double)k->b > e->share) {
		e->share = (double)k->b;
		name_by_sample(e, k->line, kt->callers);
	}
	e->ns += k->b;
	if (k->in_stage == DLBN_PROF_THREAD_CPU)
		e->cpu_ns += k->b;
	else if (k->in_stage == DLBN_PROF_THREAD_GIL)
		e->lock_ns += k->b;
	return 0;
}

/* A worker's or the loop's sample.  -1: out of memory. */
static int tally_sample(struct dlbn_hotspots *h, struct hot_tally *t, struct dlbn_hot_loader *l,
			const struct dlbn_hot_key *k, const struct key_text *kt)
{
	size_t li = (size_t)(l - h->loaders);
	if (k->in_stage) { /* inside a stage that has its exact time */
		t->sampled_in[li] += k->b;
		return 0;
	}
	/* One entry per (function, file) the dataset's code called; its
	 * heaviest line names it.  callers = "chain<TAB>leaf". */
	struct dlbn_hotspot *e = entry_add(h, &t->cap, l->loader, 0, kt->name, kt->file, 0, 1);
	if (!e)
		return -1;
	if (k->b > e->cpu_ns) {
		e->cpu_ns = k->b;
		name_by_sample(e, k->line, kt->callers);
	}
	e->ns += k->b; /* sampled CPU weight until scaled below */
	t->sampled_w[li] += k->b;
	l->samples += (uint64_t)k->a;
	return 0;
}

static void tally_fetch(const struct dlbn_model *m, struct hot_tally *t, struct dlbn_hot_loader *l,
			const struct dlbn_hot_key *k)
{
	l->batches += (uint64_t)k->a;
	l->fetch_ns += k->b;
	l->fetch_cpu_ns += k->c > 0 ? k->c : 0;
	if (t->proc_seen[k->proc])
		return;
	t->proc_seen[k->proc] = 1;
	l->procs++;
	const struct dlbn_proc *p = &m->procs[k->proc];
	if (p->role == DLBN_ROLE_WORKER)
		l->file_ns += p->file_ns_total;
	else
		l->main_process = 1;
}

/* The first __getitem__ each loader names. */
static void tally_getitem(struct hot_tally *t, int loader, const struct dlbn_hot_key *k,
			  const struct key_text *kt)
{
	if (t->ngi >= DLBN_HOT_LOADERS)
		return;
	for (size_t g = 0; g < t->ngi; g++)
		if (t->gi[g].loader == loader)
			return;
	struct getitem_name *g = &t->gi[t->ngi++];
	g->loader = loader, g->line = k->line;
	snprintf(g->name, sizeof(g->name), "%s", kt->name);
	snprintf(g->file, sizeof(g->file), "%s", kt->file);
}

static void tally_thread(struct hot_tally *t, int loader, const struct dlbn_hot_key *k,
			 const struct key_text *kt)
{
	struct thread_sum *s =
		thread_slot(t->ths, &t->nths, loader, k->proc, kt->name, kt->callers);
	if (s && k->kind == DLBN_PROF_THREAD)
		s->busy = k->b, s->samples = k->a;
	else if (s && k->kind == DLBN_PROF_THREAD_WATCHED)
		s->watched = k->b, s->watched_samples = k->a;
	else if (s)
		s->lock = k->b;
}

/* A stage summary (PROF_STAGE) by its kind.  -1: out of memory. */
static int tally_stage(struct dlbn_hotspots *h, const struct dlbn_model *m, struct hot_tally *t,
		       struct dlbn_hot_loader *l, const struct dlbn_hot_key *k,
		       const struct key_text *kt)
{
	size_t li = (size_t)(l - h->loaders);
	switch (k->kind) {
	case DLBN_PROF_FETCH:
		tally_fetch(m, t, l, k);
		break;
	case DLBN_PROF_SEND:
		/* CPU time: the feeder thread's write blocks while the pipe is
		 * full (the loop is slow to read), which is no worker cost */
		l->send_ns += k->c >= 0 ? k->c : k->b;
		break;
	case DLBN_PROF_RUNQ:
		l->runq_ns += k->b;
		l->runq_written = 1;
		break;
	case DLBN_PROF_THREAD:
	case DLBN_PROF_THREAD_WATCHED:
	case DLBN_PROF_THREAD_GIL_WAIT:
		tally_thread(t, l->loader, k, kt);
		break;
	case DLBN_PROF_SAMPLER:
		l->sampler_cost_ns += k->b;
		if (k->a)
			l->sampler_on++;
		else {
			l->sampler_off++;
			const char *why =
				strncmp(kt->name, "sampler ", 8) ? kt->name : kt->name + 8;
			if (!l->sampler_note[0])
				snprintf(l->sampler_note, sizeof(l->sampler_note), "%s", why);
		}
		break;
	case DLBN_PROF_GETITEM:
		tally_getitem(t, l->loader, k, kt);
		break;
	case DLBN_PROF_TRANSFORM:
	case DLBN_PROF_HF:
	case DLBN_PROF_COLLATE: {
		struct dlbn_hotspot *e =
			entry_add(h, &t->cap, l->loader, k->kind, kt->name, kt->file, k->line, 0);
		if (!e)
			return -1;
		e->ns += k->b;
		e->exact = 1;
		t->stage_wall[li] += k->b;
		t->stage_cpu[li] += k->c > 0 ? k->c : 0;
		e->cpu_ns += k->c > 0 ? k->c : 0;
		if (k->kind == DLBN_PROF_COLLATE)
			l->collate_ns += k->b;
		break;
	}
	default:
		break;
	}
	return 0;
}

/* Every key to its loader's tally and entries.  -1: out of memory. */
static int tally_keys(struct dlbn_hotspots *h, struct dlbn_model *m, struct hot_tally *t)
{
	t->proc_seen = calloc(m->nprocs ? m->nprocs : 1, 1);
	if (!t->proc_seen)
		return -1;
	int rc = 0;
	for (size_t i = 0; i < h->nkeys && rc == 0; i++) {
		const struct dlbn_hot_key *k = &h->keys[i];
		struct dlbn_hot_loader *l = loader_slot(h, key_loader(m, k));
		if (!l)
			continue;
		struct key_text kt;
		split_text(k->text, kt.name, sizeof(kt.name), kt.file, sizeof(kt.file), kt.callers,
			   sizeof(kt.callers));
		if (k->type == DLBN_REC_PROF_SAMPLE && k->in_stage >= DLBN_PROF_THREAD_CPU)
			rc = tally_thread_sample(h, t, l->loader, k, &kt);
		else if (k->type == DLBN_REC_PROF_SAMPLE)
			rc = tally_sample(h, t, l, k, &kt);
		else
			rc = tally_stage(h, m, t, l, k, &kt);
	}
	free(t->proc_seen);
	t->proc_seen = NULL;
	return rc;
}

/* Exact stages: their CPU time is the samples taken inside them when
 * there are any (the recorder times stages by wall clock only), else the
 * fetches' CPU share; plus their share of the run-queue time (runnable is
 * not waiting on I/O). */
static void exact_stages_cpu(struct dlbn_hotspots *h, const struct hot_tally *t, size_t nstaged)
{
	for (size_t i = 0; i < nstaged; i++) {
		struct dlbn_hotspot *e = &h->v[i];
		if (!e->exact)
			continue;
		struct dlbn_hot_loader *l = loader_slot(h, e->loader);
		size_t li = l ? (size_t)(l - h->loaders) : 0;
		double wall = l ? (double)t->stage_wall[li] : 0;
		double frac = 0;
		if (l && t->sampled_in[li] > 0 && wall > 0)
			frac = (double)t->sampled_in[li] / wall;
		else if (l && l->fetch_ns > 0)
			frac = (double)l->fetch_cpu_ns / (double)l->fetch_ns;
		if (l && l->fetch_ns > 0)
			frac += (double)l->runq_ns / (double)l->fetch_ns;
		if (e->cpu_ns <= 0)
			e->cpu_ns = (int64_t)((double)e->ns * (frac < 1 ? frac : 1));
		e->io = e->ns > 0 && 2 * (double)e->cpu_ns < (double)e->ns;
		e->category = e->kind == DLBN_PROF_COLLATE ? DLBN_HOT_COLLATE
							   : categorize(e->name, e->file, "");
	}
}

/* Loader li's fetch time outside the timed stages (*rest), and of it the
 * CPU part (*rest_cpu) that the samples share out. */
static void rest_of_fetches(const struct dlbn_hot_loader *l, const struct hot_tally *t, size_t li,
			    int64_t *rest, int64_t *rest_cpu)
{
	*rest = l->fetch_ns - t->stage_wall[li];
	int64_t in_stages = t->sampled_in[li] ? t->sampled_in[li] : t->stage_cpu[li];
	if (!in_stages && l->fetch_ns > 0) /* no samples: the fetches' CPU share */
		in_stages = (int64_t)((double)t->stage_wall[li] * (double)l->fetch_cpu_ns /
				      (double)l->fetch_ns);
	if (in_stages > t->stage_wall[li])
		in_stages = t->stage_wall[li];
	*rest_cpu = l->fetch_cpu_ns - in_stages;
	if (*rest < 0)
		*rest = 0;
	if (*rest_cpu < 0)
		*rest_cpu = 0;
	/* Runnable but not running (a busy machine) is CPU work delayed, not
	 * waiting on I/O: its share of the rest joins the CPU part that the
	 * samples share out. */
	if (l->fetch_ns > 0)
		*rest_cpu += (int64_t)((double)l->runq_ns * (double)*rest / (double)l->fetch_ns);
	if (*rest_cpu > *rest)
		*rest_cpu = *rest;
}

/* Loader li's sampled entries: a loader thread's wall time as sampled, a
 * function's its share of the CPU time outside the stages. */
static void sampled_entries(struct dlbn_hotspots *h, const struct hot_tally *t, size_t li,
			    size_t nstaged, int64_t rest_cpu)
{
	int loader = h->loaders[li].loader;
	for (size_t i = 0; i < nstaged; i++) {
		struct dlbn_hotspot *e = &h->v[i];
		if (e->loader != loader || e->exact)
			continue;
		if (e->kind == DLBN_HOT_THREAD_SAMPLED) {
			e->io = 2 * e->cpu_ns < e->ns;
			e->lock = e->io && 2 * e->lock_ns >= e->ns - e->cpu_ns;
			e->category = categorize(e->name, e->file, e->leaf);
			if (e->io && e->category == DLBN_HOT_OTHER)
				e->category = e->lock ? DLBN_HOT_LOCK : DLBN_HOT_WAIT;
			continue;
		}
		e->ns = t->sampled_w[li] ? (int64_t)((double)e->ns / (double)t->sampled_w[li] *
						     (double)rest_cpu)
					 : 0;
		e->cpu_ns = e->ns;
		e->category = categorize(e->name, e->file, e->leaf);
	}
}

/* Loader li's entries beside the stages and samples: its CPU time outside
 * the stages when nothing was sampled, its waiting, its sends.  -1: out of
 * memory. */
static int rest_entries(struct dlbn_hotspots *h, struct hot_tally *t, size_t li, int64_t rest,
			int64_t rest_cpu)
{
	const struct dlbn_hot_loader *l = &h->loaders[li];
	const struct getitem_name *g = NULL;
	for (size_t k = 0; k < t->ngi; k++)
		if (t->gi[k].loader == l->loader)
			g = &t->gi[k];
	char outside[100], nm[200];
	snprintf(outside, sizeof(outside), "%s", g ? g->name : "__getitem__");
	struct dlbn_hotspot *e;
	if (!t->sampled_w[li] && rest_cpu > 0) {
		snprintf(nm, sizeof(nm), "%s outside the timed stages", outside);
		e = entry_add(h, &t->cap, l->loader, DLBN_PROF_GETITEM, nm, g ? g->file : "",
			      g ? g->line : 0, 0);
		if (!e)
			return -1;
		e->ns = e->cpu_ns = rest_cpu, e->exact = 1;
		e->category = categorize(outside, g ? g->file : "", "");
	}
	int64_t waiting = rest - rest_cpu;
	if (waiting > 0) {
		int storage = l->file_ns * 2 >= waiting;
		snprintf(nm, sizeof(nm), "%s waiting off the CPU (%s)", outside,
			 storage ? "file reads" : "I/O, sleeps, locks");
		e = entry_add(h, &t->cap, l->loader, -1, nm, g ? g->file : "", g ? g->line : 0, 0);
		if (!e)
			return -1;
		e->ns = waiting, e->exact = 1, e->io = 1;
		e->category = storage ? DLBN_HOT_STORAGE : DLBN_HOT_WAIT;
	}
	if (l->send_ns > 0) {
		e = entry_add(h, &t->cap, l->loader, DLBN_PROF_SEND,
			      "send: pickling the batch for the hand-off",
			      "multiprocessing/reduction.py", 0, 0);
		if (!e)
			return -1;
		e->ns = l->send_ns, e->exact = 1, e->category = DLBN_HOT_SEND;
	}
	return 0;
}

/* Each entry's share of its loader's busy time; the tail dropped: entries
 * under 0.5% and beyond the per-loader cap. */
static void shares_and_tail(struct dlbn_hotspots *h)
{
	for (size_t i = 0; i < h->n; i++) {
		struct dlbn_hotspot *e = &h->v[i];
		const struct dlbn_hot_loader *l = loader_slot(h, e->loader);
		e->share = l && l->busy_ns > 0 ? (double)e->ns / (double)l->busy_ns : 0;
	}
	if (h->n > 1) /* qsort wants a non-null base even for no entries */
		qsort(h->v, h->n, sizeof(*h->v), by_share);
	size_t out = 0;
	for (size_t i = 0; i < h->n; i++) {
		size_t same = 0;
		for (size_t j = 0; j < out; j++)
			same += h->v[j].loader == h->v[i].loader;
		if (h->v[i].share >= 0.005 && same < HOT_ENTRIES_PER_LOADER)
			h->v[out++] = h->v[i];
	}
	h->n = out;
}

/* The recommendation: the top entry of the training loader (else the
 * busiest loader's). */
static void recommend(struct dlbn_hotspots *h, const struct dlbn_model *m)
{
	int want = m->loaders.train;
	const struct dlbn_hotspot *top = NULL;
	for (size_t i = 0; i < h->n && !top; i++)
		if (h->v[i].loader == want)
			top = &h->v[i];
	if (!top && h->n)
		top = &h->v[0];
	if (!top)
		return;
	char where[240] = "";
	if (top->file[0] && top->line > 0)
		snprintf(where, sizeof(where), " (%s:%d)", dlbn_hot_short_file(top->file),
			 top->line);
	else if (top->file[0])
		snprintf(where, sizeof(where), " (%s)", dlbn_hot_short_file(top->file));
	int thread = top->kind == DLBN_HOT_THREAD_SAMPLED;
	const struct dlbn_hot_loader *tl = loader_slot(h, top->loader);
	char busiest[320] = "";
	if (thread && tl && tl->busiest_thread_share >= HOT_THREAD_SATURATED)
		snprintf(busiest, sizeof(busiest),
			 "its thread %.63s is busy %.0f%% of the time (one thread cannot "
			 "produce faster%s, or cheaper work per batch); ",
			 tl->busiest_thread, tl->busiest_thread_share * 100,
			 (double)tl->thread_lock_ns >=
					 HOT_THREAD_LOCKED * (double)tl->thread_busy_ns
				 ? " and more would take turns on the interpreter's lock: "
				   "worker processes"
				 : ": more threads or workers");
	size_t room = sizeof(h->recommendation);
	int len =
		snprintf(h->recommendation, room,
			 "%s%s, the largest cost is %s%s, %s: %.0f%% of their busy time "
			 "(%s); what usually fixes it: %s",
			 busiest, thread ? "in the loader's threads" : "inside the workers",
			 top->name, where, dlbn_hot_category_name(top->category), top->share * 100,
			 top->exact ? "timed" : "sampled", dlbn_hot_category_fix(top->category));
	if (len >= 0 && (size_t)len >= room) /* a long function name: say it was cut */
		memcpy(h->recommendation + room - 4, "...", 4);
}

/* The main process's fetches (num_workers=0): their run-queue time is
 * in the fetch marks' counters, which the profile leaves it to (a trace
 * whose profile wrote it keeps that figure). */
static void main_process_runq(struct dlbn_hotspots *h, const struct dlbn_model *m)
{
	for (size_t li = 0; li < h->nloaders; li++) {
		struct dlbn_hot_loader *l = &h->loaders[li];
		if (l->main_process && !l->runq_written && l->loader >= 0 &&
		    (size_t)l->loader < m->loaders.n)
			l->runq_ns = m->loaders.v[l->loader].fetch_runq_ns;
	}
}

static int finish(struct dlbn_hotspots *h, struct dlbn_model *m)
{
	struct hot_tally t = {0};
	if (tally_keys(h, m, &t) != 0)
		return -1;
	threads_finish(h, t.ths, t.nths);
	main_process_runq(h, m);
	/* Exact stages: CPU or waiting; sampled: scaled to the CPU time
	 * outside the stages; plus the waiting and send entries. */
	size_t nstaged = h->n;
	exact_stages_cpu(h, &t, nstaged);
	for (size_t li = 0; li < h->nloaders; li++) {
		struct dlbn_hot_loader *l = &h->loaders[li];
		l->busy_ns = l->fetch_ns + l->send_ns + l->thread_busy_ns;
		int64_t rest, rest_cpu;
		rest_of_fetches(l, &t, li, &rest, &rest_cpu);
		sampled_entries(h, &t, li, nstaged, rest_cpu);
		if (rest_entries(h, &t, li, rest, rest_cpu) != 0)
			return -1;
	}
	shares_and_tail(h);
	recommend(h, m);
	return 0;
}

int dlbn_hotspots_build(struct dlbn_hotspots *h, struct dlbn_reader *r, struct dlbn_model *m)
{
	memset(h, 0, sizeof(*h));
	if (!m->profile_records)
		return 0; /* nothing to read: a pass over the trace would find no input */
	int32_t *buckets = malloc(HOT_BUCKETS * sizeof(*buckets));
	if (!buckets)
		return -1;
	for (size_t i = 0; i < HOT_BUCKETS; i++)
		buckets[i] = -1;
	int rc = 0;
	dlbn_reader_rewind(r);
	const struct dlbn_record *rec;
	while ((rec = dlbn_reader_next(r)) && rc == 0) {
		if (rec->type == DLBN_REC_PROF_STAGE || rec->type == DLBN_REC_PROF_SAMPLE)
			rc = take_profile(h, buckets, m, rec);
		else if (rec->type == DLBN_REC_CALLSITE)
			take_callsite(h, m, rec);
	}
	free(buckets);
	if (rc == 0 && h->present)
		rc = finish(h, m);
	free(h->keys);
	h->keys = NULL;
	h->nkeys = h->capkeys = 0;
	return rc;
}

void dlbn_hotspots_free(struct dlbn_hotspots *h)
{
	free(h->v);
	free(h->keys);
	memset(h, 0, sizeof(*h));
}
