/*
 * test_hotspots.c - where the workers' time goes (analyzer/analysis/hotspots.c).
 *
 * tgsim runs with the worker profile on (tgsim.h "profile": of each
 * batch's CPU time 50% in a timed Resize, 10% in collate, 30% sampled in
 * PIL (27% convert, 3% Image.open), 10% in __getitem__; file reads off the
 * CPU; pickling 5% of the batch time), so every share follows from the
 * parameters.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "analysis/hotspots.h"
#include "gpu/gpu.h"
#include "model/model.h"
#include "trace/reader.h"
#include "tgsim.h"

static char path[] = "/tmp/dlbn-test-hotspots-XXXXXX";

struct run {
	struct dlbn_reader *r;
	struct dlbn_model m;
	struct dlbn_hotspots h;
};

static int open_run(struct run *x, const struct tgsim_params *p)
{
	char err[256];
	struct dlbn_model_opts mo;
	uint64_t records;
	memset(x, 0, sizeof(*x));
	if (tgsim_write(path, p, &records) != 0 ||
	    !(x->r = dlbn_reader_open(path, err, sizeof(err))))
		return -1;
	dlbn_gpu_model_opts(&mo);
	if (dlbn_model_build(&x->m, x->r, &mo) != 0)
		return -1;
	return dlbn_hotspots_build(&x->h, x->r, &x->m);
}

static void close_run(struct run *x)
{
	dlbn_hotspots_free(&x->h);
	dlbn_model_free(&x->m);
	dlbn_reader_close(x->r);
}

static const struct dlbn_hotspot *find(const struct dlbn_hotspots *h, const char *name)
{
	for (size_t i = 0; i < h->n; i++)
		if (strstr(h->v[i].name, name))
			return &h->v[i];
	return NULL;
}

static void test_cpu_bound(void)
{
	struct tgsim_params p;
	struct run x;
	tgsim_default(&p);
	p.profile = 1;
	p.batch_ms = 40;
	CHECK(open_run(&x, &p) == 0, "cpu-bound run analysed");
	const struct dlbn_hotspots *h = &x.h;
	CHECK(h->present && h->nloaders == 1 && h->loaders[0].loader == 0 &&
		      h->loaders[0].procs == 2 && h->loaders[0].batches == 200,
	      "one loader, its two workers, all 200 batches");
	const struct dlbn_hotspot *resize = find(h, "Resize"), *convert = find(h, "convert"),
				  *getitem = find(h, "__getitem__"), *collate = find(h, "collate"),
				  *send = find(h, "send");
	double busy = 1.05; /* in units of the batches' work */
	CHECK(h->n >= 5 && h->v == resize, "the timed Resize is the top entry");
	CHECK(resize && resize->exact && !resize->io && resize->category == DLBN_HOT_RESIZE &&
		      fabs(resize->share - 0.50 / busy) < 0.005 && resize->line == 338,
	      "Resize: exact, CPU (its samples), 47.6%% of the busy time (%.4f)",
	      resize ? resize->share : -1);
	CHECK(convert && !convert->exact && convert->category == DLBN_HOT_DECODE &&
		      fabs(convert->share - 0.27 / busy) < 0.005 && convert->line == 937 &&
		      strstr(convert->callers, "__getitem__:45"),
	      "convert: sampled, decode (from its PIL ImageFile leaf), scaled to the CPU time "
	      "outside the stages: 25.7%% (%.4f)",
	      convert ? convert->share : -1);
	const struct dlbn_hotspot *open = find(h, "open");
	CHECK(open && !open->exact && open->category == DLBN_HOT_DECODE &&
		      fabs(open->share - 0.03 / busy) < 0.005,
	      "PIL's Image.open (the header; the format plugins' first import): decode, 2.9%%");
	CHECK(getitem && !getitem->exact && fabs(getitem->share - 0.10 / busy) < 0.005,
	      "__getitem__ sampled at 9.5%%");
	CHECK(collate && collate->exact && collate->category == DLBN_HOT_COLLATE &&
		      fabs(collate->share - 0.10 / busy) < 0.005,
	      "collate exact at 9.5%%");
	CHECK(send && send->exact && send->category == DLBN_HOT_SEND &&
		      fabs(send->share - 0.05 / busy) < 0.005,
	      "send (pickling) exact at 4.8%%");
	CHECK(!find(h, "off the CPU"), "no waiting entry when the fetches ran on the CPU");
	for (size_t i = 1; i < h->n; i++)
		CHECK(h->v[i - 1].share >= h->v[i].share, "largest first (%zu)", i);
	CHECK(strstr(h->recommendation, "Resize") && strstr(h->recommendation, "resize") &&
		      strstr(h->recommendation, "GPU"),
	      "the recommendation names Resize and what fixes it: %s", h->recommendation);
	CHECK(h->ncallsites == 1 && h->callsites[0].loader == 0 &&
		      !strcmp(h->callsites[0].text,
			      "/home/u/train.py:train:312\n/home/u/train.py:main:400"),
	      "the loop's next() call site, once per loader");
	CHECK(!strcmp(dlbn_hot_short_file(resize ? resize->file : ""), "transforms/transforms.py"),
	      "short file names keep two components");
	close_run(&x);
}

static void test_storage_bound(void)
{
	struct tgsim_params p;
	struct run x;
	tgsim_default(&p);
	p.profile = 1;
	p.batch_ms = 40;
	p.file_ms = 30; /* 30 of the 40 ms in file reads */
	CHECK(open_run(&x, &p) == 0, "storage-bound run analysed");
	const struct dlbn_hotspots *h = &x.h;
	const struct dlbn_hotspot *wait = find(h, "off the CPU");
	const struct dlbn_hot_loader *l = &h->loaders[0];
	double files = (double)l->file_ns / (double)l->busy_ns; /* about 30 / (40 x 1.05) */
	CHECK(wait && h->v == wait && wait->io && wait->category == DLBN_HOT_STORAGE &&
		      files > 0.6 && fabs(wait->share - files) < 0.01 &&
		      strstr(wait->name, "file reads") && wait->line == 40,
	      "the file reads are the top entry, I/O, storage, at __getitem__: %.4f (read "
	      "hooks: %.4f)",
	      wait ? wait->share : -1, files);
	CHECK(strstr(h->recommendation, "storage") && strstr(h->recommendation, "local copies"),
	      "storage recommendation: %s", h->recommendation);
	CHECK(h->loaders[0].file_ns > 0, "file reads from the read hooks");
	close_run(&x);
}

static void test_no_profile(void)
{
	struct tgsim_params p;
	struct run x;
	tgsim_default(&p);
	CHECK(open_run(&x, &p) == 0, "run without the profile analysed");
	CHECK(!x.h.present && x.h.n == 0 && x.h.ncallsites == 0 && !x.h.recommendation[0],
	      "no PROF records: no hotspots, no recommendation");
	close_run(&x);
}

/* A loader's own threads in the training process (tgsim.h loader_threads):
 * Python threads and DALI's native pool thread, no worker profile. */
static void test_loader_threads(void)
{
	struct tgsim_params p;
	struct run x;
	tgsim_default(&p);
	p.loader_threads = 1;
	CHECK(open_run(&x, &p) == 0, "run with loader threads analysed");
	const struct dlbn_hotspots *h = &x.h;
	const struct dlbn_hot_loader *l = &h->loaders[0];
	const int64_t ms = 1000000;
	CHECK(h->present && h->nloaders == 1 && l->loader == 0 && l->procs == 0,
	      "the threads' summaries belong to the loader of their iterator, no process");
	CHECK(l->threads == 4 && l->native_threads == 1 && l->thread_samples == 135,
	      "four threads (two of one name told apart by their ids), one native (the idle "
	      "Python thread is not), 90 + 45 busy samples");
	CHECK(l->busy_ns == 1650 * ms && l->thread_busy_ns == l->busy_ns &&
		      l->thread_watched_ns == 3500 * ms,
	      "busy: 900 + 450 ms of the producers and 300 ms of the pool's CPU, the last "
	      "of each cumulative summary, of 3.5 s watched");
	CHECK(!strcmp(l->busiest_thread, "Thread-1 (run)") &&
		      fabs(l->busiest_thread_share - 0.9) < 1e-9,
	      "the busiest thread: a producer, 90%%");
	const struct dlbn_hotspot *produce = find(h, "produce"), *convert = find(h, "convert");
	CHECK(h->n == 2 && h->v == produce && produce->kind == DLBN_HOT_THREAD_SAMPLED &&
		      !produce->exact && produce->io && produce->category == DLBN_HOT_WAIT &&
		      fabs(produce->share - 800.0 / 1650) < 1e-9 && produce->line == 14,
	      "produce: sampled in a thread, off the CPU, waiting, 800 of the 1650 ms");
	CHECK(convert && !convert->io && convert->category == DLBN_HOT_DECODE &&
		      fabs(convert->share - 100.0 / 1650) < 1e-9,
	      "PIL's convert in the thread: on the CPU, decode (its ImageFile leaf)");
	CHECK(strstr(h->recommendation, "its thread Thread-1 (run) is busy 90%") &&
		      strstr(h->recommendation, "in the loader's threads") &&
		      strstr(h->recommendation, "more threads or workers"),
	      "the saturated producer is named: %s", h->recommendation);
	CHECK(l->thread_lock_ns == 0 && !produce->lock, "no lock waits recorded: none counted");
	close_run(&x);
}

/* The same threads waiting for the interpreter's lock where they were off
 * the CPU: not waiting on I/O, and no more threads to advise. */
static void test_loader_threads_holding_the_lock(void)
{
	struct tgsim_params p;
	struct run x;
	tgsim_default(&p);
	p.loader_threads = 2;
	CHECK(open_run(&x, &p) == 0, "run with loader threads waiting for the lock analysed");
	const struct dlbn_hotspots *h = &x.h;
	const struct dlbn_hot_loader *l = &h->loaders[0];
	const int64_t ms = 1000000;
	CHECK(l->thread_busy_ns == 1650 * ms && l->thread_lock_ns == 750 * ms,
	      "lock waits: the last cumulative summary of each producer, 500 + 250 ms of the "
	      "1650 busy (%lld)",
	      (long long)l->thread_lock_ns);
	const struct dlbn_hotspot *produce = find(h, "produce"), *convert = find(h, "convert");
	CHECK(produce && produce->io && produce->lock && produce->category == DLBN_HOT_LOCK &&
		      produce->lock_ns == 800 * ms &&
		      !strcmp(dlbn_hot_category_name(DLBN_HOT_LOCK), "gil"),
	      "produce: off the CPU waiting for the lock, category gil");
	CHECK(convert && !convert->io && !convert->lock, "convert: on the CPU");
	CHECK(strstr(h->recommendation, "take turns on the interpreter's lock: worker processes") &&
		      !strstr(h->recommendation, "more threads or workers") &&
		      strstr(h->recommendation, "method=\"process\""),
	      "processes, not more threads: %s", h->recommendation);
	close_run(&x);
}

int main(void)
{
	int fd = mkstemp(path);
	if (fd < 0)
		return 2;
	close(fd);
	test_cpu_bound();
	test_storage_bound();
	test_no_profile();
	test_loader_threads();
	test_loader_threads_holding_the_lock();
	unlink(path);
	CHECK_EXIT();
}
