/*
 * inputs.c - a job's inputs to rows (inputs.h): summaries read, traces
 * analysed -j at a time and reduced to rows as they finish, one run kept.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "inputs.h"
#include "analysis/rank_summary.h"
#include "util/progress.h"

enum { SLOT_TRACE, SLOT_SUMMARY, SLOT_COVERED };
enum { SLOT_PENDING, SLOT_ROW, SLOT_FAILED };

struct slot {
	int kind, state;
	int found; /* dev, ino: the input's file, when stat found it */
	dev_t dev;
	ino_t ino;
	char why[240];
};

struct pool {
	const struct dlbn_inputs_opts *o;
	char *const *paths;
	struct dlbn_inputs *in;
	struct slot *slots;
	struct dlbn_rank_row *rows; /* one per input */
	size_t n, next;
	size_t ntraces, traces_done; /* the progress line's count */
	pthread_mutex_t lock;	     /* kept, kept_input, damaged, summaries_failed */
	size_t kept_input;
};

static void note(struct dlbn_inputs *in, size_t i, const char *line)
{
	size_t len = strlen(in->notes[i]);
	snprintf(in->notes[i] + len, sizeof(in->notes[i]) - len, "%sdlbn-analyze: %s",
		 len ? "\n" : "", line);
}

static void fail(struct pool *p, size_t i, const char *why)
{
	p->slots[i].state = SLOT_FAILED;
	snprintf(p->slots[i].why, sizeof(p->slots[i].why), "%.*s", (int)sizeof(p->slots[i].why) - 1,
		 why);
	note(p->in, i, why);
}

/* Whether the run's row should replace the kept one (under the lock). */
static int better_kept(const struct pool *p, const struct dlbn_rank_row *row)
{
	const struct dlbn_rank_row *kept = p->in->kept ? &p->rows[p->kept_input] : NULL;
	if (p->o->want_rank >= 0) { /* as main.c picks the row: a rank named first */
		if (row->rank != p->o->want_rank)
			return 0;
		if (!kept || row->rank_known != kept->rank_known)
			return !kept || row->rank_known;
		return row->input_index < kept->input_index;
	}
	if (!kept)
		return 1;
	/* A launcher's trace is set aside when ranks are named: never keep
	 * one over a rank. */
	int l = dlbn_rank_row_maybe_launcher(row), kl = dlbn_rank_row_maybe_launcher(kept);
	return l != kl ? kl : dlbn_rank_row_worse(row, kept);
}

static void summarize(struct pool *p, size_t i, const struct dlbn_rank_row *row)
{
	char path[4096], err[512], line[600];
	dlbn_summary_path(p->paths[i], path, sizeof(path));
	if (dlbn_summary_write(path, row, p->o->version, err, sizeof(err)) == 0) {
		snprintf(line, sizeof(line), "summary written to %.500s", path);
	} else {
		snprintf(line, sizeof(line), "%.200s: summary not written: %.300s", p->paths[i],
			 err);
		pthread_mutex_lock(&p->lock);
		p->in->summaries_failed = 1;
		pthread_mutex_unlock(&p->lock);
	}
	note(p->in, i, line);
}

/* Analyse trace i into its row; keep the run or free it. */
static void analyze_one(struct pool *p, size_t i)
{
	char err[512];
	struct dlbn_run *x = calloc(1, sizeof(*x));
	if (!x) {
		fail(p, i, "out of memory");
		return;
	}
	x->path = p->paths[i];
	/* Several traces at a time: no mapped extents (reader.h). */
	struct dlbn_run_opts ro = p->o->run;
	if (p->o->jobs > 1 && p->ntraces > 1)
		ro.reader_flags |= DLBN_READER_PREAD;
	if (dlbn_run_analyze(x, &ro, err, sizeof(err)) != 0) {
		fail(p, i, err);
		dlbn_run_free(x);
		free(x);
		return;
	}
	const struct dlbn_reader_stats *rs = dlbn_reader_stats(x->r);
	struct dlbn_rank_row *row = &p->rows[i];
	dlbn_rank_row_fill(row, p->paths[i], i, &x->m, &x->a, &x->hot, rs);
	p->slots[i].state = SLOT_ROW;
	int damaged = dlbn_run_damage_note(p->paths[i], rs, err, sizeof(err));
	if (damaged)
		note(p->in, i, err);
	if (p->in->times)
		p->in->times[i] = x->times;
	if (p->o->summarize)
		summarize(p, i, row);
	pthread_mutex_lock(&p->lock);
	p->in->damaged |= damaged;
	if (better_kept(p, row)) {
		struct dlbn_run *old = p->in->kept;
		p->in->kept = x;
		p->kept_input = i;
		x = old;
	}
	pthread_mutex_unlock(&p->lock);
	if (x) {
		dlbn_run_free(x);
		free(x);
	}
}

static void *worker(void *arg)
{
	struct pool *p = arg;
	for (;;) {
		size_t i = __atomic_fetch_add(&p->next, 1, __ATOMIC_RELAXED);
		if (i >= p->n)
			break;
		if (p->slots[i].kind != SLOT_TRACE)
			continue;
		analyze_one(p, i);
		size_t done = __atomic_add_fetch(&p->traces_done, 1, __ATOMIC_RELAXED);
		if (p->ntraces > 1)
			dlbn_progress_count("traces analysed", done, p->ntraces);
	}
	return NULL;
}

struct file_key {
	dev_t dev;
	ino_t ino;
	size_t at;
};

/* The same file: dev and ino. */
static int same_file_key(const void *a, const void *b)
{
	const struct file_key *x = a, *y = b;
	if (x->dev != y->dev)
		return x->dev < y->dev ? -1 : 1;
	return x->ino < y->ino ? -1 : (x->ino > y->ino);
}

/* By file, then by input order. */
static int file_key_cmp(const void *a, const void *b)
{
	const struct file_key *x = a, *y = b;
	int c = same_file_key(a, b);
	return c ? c : (x->at < y->at ? -1 : (x->at > y->at));
}

/* An input given twice (a glob and its own name) counts once: the later
 * ones are covered by the first.  Inputs that cannot be stat'ed are left
 * to the readers, which say why. */
static int drop_repeats(struct pool *p)
{
	struct file_key *k = malloc((p->n ? p->n : 1) * sizeof(*k));
	struct stat st;
	size_t nk = 0;
	if (!k)
		return -1;
	for (size_t i = 0; i < p->n; i++) {
		if (stat(p->paths[i], &st) != 0)
			continue;
		p->slots[i] = (struct slot){
			.kind = p->slots[i].kind, .found = 1, .dev = st.st_dev, .ino = st.st_ino};
		k[nk++] = (struct file_key){st.st_dev, st.st_ino, i};
	}
	qsort(k, nk, sizeof(*k), file_key_cmp);
	for (size_t j = 1; j < nk; j++) {
		if (k[j].dev != k[j - 1].dev || k[j].ino != k[j - 1].ino)
			continue;
		p->slots[k[j].at].kind = SLOT_COVERED;
		char line[600];
		snprintf(line, sizeof(line), "%.280s: the same file as %.280s; read once",
			 p->paths[k[j].at], p->paths[k[j - 1].at]);
		note(p->in, k[j].at, line);
		k[j].at = k[j - 1].at; /* a third copy names the first too */
	}
	free(k);
	return 0;
}

/* Read the summaries; mark the traces they stand for as covered. */
static void read_summaries(struct pool *p)
{
	char err[512];
	size_t nsum = 0;
	for (size_t i = 0; i < p->n; i++) {
		if (p->slots[i].kind == SLOT_COVERED)
			continue;
		int s = dlbn_summary_sniff(p->paths[i]);
		if (s != 1)
			continue; /* a trace, or unreadable: the reader says why */
		p->slots[i].kind = SLOT_SUMMARY;
		if (dlbn_summary_read(p->paths[i], i, &p->rows[i], err, sizeof(err)) != 0) {
			fail(p, i, err);
			continue;
		}
		p->slots[i].state = SLOT_ROW;
		nsum++;
	}
	if (!nsum || nsum == p->n)
		return;
	/* The files the summaries stand for, sorted: one stat each, and a
	 * search per trace (a job gives thousands of both). */
	struct file_key *k = malloc(nsum * sizeof(*k));
	struct stat st;
	size_t nk = 0;
	if (!k)
		return; /* the traces are then read: slower, not wrong */
	for (size_t j = 0; j < p->n; j++)
		if (p->slots[j].kind == SLOT_SUMMARY && p->slots[j].state == SLOT_ROW &&
		    stat(p->rows[j].trace, &st) == 0)
			k[nk++] = (struct file_key){st.st_dev, st.st_ino, 0};
	qsort(k, nk, sizeof(*k), file_key_cmp);
	for (size_t i = 0; i < p->n; i++) {
		const struct slot *t = &p->slots[i];
		struct file_key want = {t->dev, t->ino, 0};
		if (t->kind == SLOT_TRACE && t->found &&
		    bsearch(&want, k, nk, sizeof(*k), same_file_key))
			p->slots[i].kind = SLOT_COVERED;
	}
	free(k);
}

static void run_pool(struct pool *p)
{
	size_t ntraces = 0;
	for (size_t i = 0; i < p->n; i++)
		ntraces += p->slots[i].kind == SLOT_TRACE;
	p->ntraces = ntraces;
	if (ntraces > 1) /* several traces at a time: a count, not one file's bytes */
		dlbn_progress_count("traces analysed", 0, ntraces);
	size_t nthreads = p->o->jobs < ntraces ? p->o->jobs : ntraces;
	pthread_t *t = nthreads > 1 ? calloc(nthreads - 1, sizeof(*t)) : NULL;
	size_t started = 0;
	while (t && started < nthreads - 1 && pthread_create(&t[started], NULL, worker, p) == 0)
		started++; /* a thread that cannot start leaves its share to the others */
	worker(p);
	for (size_t i = 0; i < started; i++)
		pthread_join(t[i], NULL);
	free(t);
}

/* Rows and failures, in input order, from the slots.  The rows are
 * compacted where they are (a row is a few KiB: a thousand ranks are
 * not copied twice). */
static int collect(struct pool *p)
{
	struct dlbn_inputs *in = p->in;
	in->rows = p->rows;
	p->rows = NULL;
	in->failures = malloc((p->n ? p->n : 1) * sizeof(*in->failures));
	if (!in->failures)
		return -1;
	for (size_t i = 0; i < p->n; i++) {
		if (p->slots[i].state == SLOT_ROW) {
			if (in->nrows != i)
				in->rows[in->nrows] = in->rows[i];
			in->nrows++;
		} else if (p->slots[i].state == SLOT_FAILED) {
			struct dlbn_rank_failure *f = &in->failures[in->nfailures++];
			f->input = p->paths[i];
			snprintf(f->why, sizeof(f->why), "%s", p->slots[i].why);
		}
	}
	return 0;
}

int dlbn_inputs_analyze(struct dlbn_inputs *in, char *const *paths, size_t n,
			const struct dlbn_inputs_opts *o)
{
	memset(in, 0, sizeof(*in));
	in->n = n;
	struct pool p = {.o = o, .paths = paths, .in = in, .n = n};
	p.slots = calloc(n ? n : 1, sizeof(*p.slots));
	p.rows = calloc(n ? n : 1, sizeof(*p.rows));
	in->notes = calloc(n ? n : 1, sizeof(*in->notes));
	in->times = o->run.timings ? calloc(n ? n : 1, sizeof(*in->times)) : NULL;
	int rc = -1;
	if (p.slots && p.rows && in->notes && (in->times || !o->run.timings) &&
	    drop_repeats(&p) == 0 && pthread_mutex_init(&p.lock, NULL) == 0) {
		read_summaries(&p);
		run_pool(&p);
		pthread_mutex_destroy(&p.lock);
		rc = collect(&p);
	}
	free(p.slots);
	free(p.rows);
	return rc;
}

void dlbn_inputs_print_notes(const struct dlbn_inputs *in)
{
	for (size_t i = 0; i < in->n; i++)
		if (in->notes[i][0])
			fprintf(stderr, "%s\n", in->notes[i]);
}

void dlbn_inputs_free(struct dlbn_inputs *in)
{
	if (in->kept) {
		dlbn_run_free(in->kept);
		free(in->kept);
	}
	free(in->rows);
	free(in->failures);
	free(in->times);
	free(in->notes);
	memset(in, 0, sizeof(*in));
}
