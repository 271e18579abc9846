/*
 * test_loaders.c - several DataLoaders in one training process (loaders.h).
 *
 * Python-view traces written by hand (tracegen): a train loader and a val
 * loader run after each training epoch; two train loaders zipped (each step
 * fetches from both); a lone iterator without a CONFIG next to a named
 * loader; and the bootstrap's note that it left an incompatible DataLoader
 * alone.  All times follow from the constants below, so the figures are
 * asserted exactly.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "gpu/gpu.h"
#include "model/model.h"
#include "trace/reader.h"
#include "tracegen.h"
#include "analysis/verdict.h"

#define MS 1000000LL

static char path[] = "/tmp/dlbn-test-loaders-XXXXXX";

#define TRAIN_CFG                                                                                  \
	"num_workers=2;batch_size=32;prefetch_factor=2;pin_memory=0;persistent_workers=0;"         \
	"start_method=fork;dataset_kind=map;sampler=RandomSampler;loader_class=DataLoader;"        \
	"loader=1111"
#define VAL_CFG                                                                                    \
	"num_workers=1;batch_size=64;prefetch_factor=2;pin_memory=0;persistent_workers=0;"         \
	"start_method=fork;dataset_kind=map;sampler=SequentialSampler;loader_class=DataLoader;"    \
	"loader=2222"

struct run {
	struct dlbn_reader *r;
	struct dlbn_model m;
	struct dlbn_analysis a;
};

static int force_train; /* the model option, 0: the model chooses */

static int open_run(struct run *x)
{
	char err[256];
	struct dlbn_model_opts mo;
	struct dlbn_verdict_opts vo;
	memset(x, 0, sizeof(*x));
	if (!(x->r = dlbn_reader_open(path, err, sizeof(err)))) {
		fprintf(stderr, "%s\n", err);
		return -1;
	}
	dlbn_gpu_model_opts(&mo);
	mo.keep_steps = 1;
	mo.force_train = force_train;
	dlbn_verdict_default_opts(&vo);
	if (dlbn_model_build(&x->m, x->r, &mo) != 0 ||
	    dlbn_analyze(&x->m, dlbn_reader_stats(x->r), &vo, &x->a) != 0)
		return -1;
	return 0;
}

static void close_run(struct run *x)
{
	dlbn_analysis_free(&x->a);
	dlbn_model_free(&x->m);
	dlbn_reader_close(x->r);
}

static struct tg_stream *start_trace(struct tg **g, int64_t t)
{
	*g = tg_open(path, 0);
	struct tg_stream *s = tg_stream(*g, 0, 0, 100, 100);
	tg_process(s, t, 100, 1, -1, DLBN_START_ROOT, "python3");
	tg_thread(s, t, 100, 1);
	return s;
}

/* One epoch of `steps` fetches of `wait` ms each, `loop` ms apart, then
 * the StopIteration fetch of `stop` ms.  Returns the time after it. */
static int64_t epoch(struct tg_stream *s, int64_t t, int64_t iter, const char *cfg, int steps,
		     int64_t wait, int64_t loop, int64_t iter_ms, int64_t stop)
{
	tg_mark(s, t, DLBN_MARK_ITER_BEGIN, iter, 0);
	t += iter_ms * MS;
	if (cfg)
		tg_config(s, t, iter, cfg);
	for (int k = 0; k < steps; k++) {
		tg_mark(s, t, DLBN_MARK_FETCH_BEGIN, iter, k);
		t += wait * MS;
		tg_mark(s, t, DLBN_MARK_FETCH_END, iter, k);
		t += loop * MS;
	}
	tg_mark(s, t, DLBN_MARK_FETCH_BEGIN, iter, steps);
	t += stop * MS;
	tg_mark(s, t, DLBN_MARK_FETCH_STOP, iter, steps);
	return t;
}

/*
 * imagenet main.py's shape: 3 epochs of 40 training steps (fetch 6 ms,
 * compute 4 ms), each followed by validation: 10 val steps (fetch 3 ms,
 * compute 2 ms), iter() 20 ms, stop fetch 5 ms.  The train iter() takes
 * 10 ms and its stop fetch 7 ms.
 */
static void train_val(void)
{
	struct tg *g;
	int64_t t = 1000 * MS;
	struct tg_stream *s = start_trace(&g, t);
	int64_t iter = 1;
	for (int e = 0; e < 3; e++) {
		t = epoch(s, t, iter++, TRAIN_CFG, 40, 6, 4, 10, 7);
		t = epoch(s, t + MS, iter++, VAL_CFG, 10, 3, 2, 20, 5);
		t += MS;
	}
	tg_exit(s, t, 0, DLBN_EXIT_EXIT);
	if (tg_close(g) != 0)
		exit(2);

	struct run x;
	if (open_run(&x) != 0)
		exit(2);
	const struct dlbn_loader_table *lt = &x.m.loaders;
	CHECK(lt->n == 2 && lt->train == 0 && lt->v[0].role == DLBN_LOADER_TRAIN &&
		      lt->v[1].role == DLBN_LOADER_EVAL,
	      "train + val: two loaders, the first is the training one, the second eval "
	      "(n %zu, train %d)",
	      lt->n, lt->train);
	CHECK(x.m.py_steps.n == 120 && x.m.py_steps.epochs == 3,
	      "the training loader's steps are its own: 120 in 3 epochs (got %zu in %d)",
	      x.m.py_steps.n, x.m.py_steps.epochs);
	const struct dlbn_steps *vs = &lt->v[1].steps;
	CHECK(vs->n == 30 && vs->epochs == 3 && vs->w.warmup == 3 && vs->w.window == 27,
	      "the val loader has its own 30 steps in 3 epochs, warm-up 1 x 2 + 1 = 3 (got %zu, "
	      "%d, warm-up %zu)",
	      vs->n, vs->epochs, vs->w.warmup);
	CHECK(x.m.config.present && x.m.config.batch_size == 32 && x.m.prefetch_depth == 4,
	      "the model's config is the training loader's (batch 32, prefetch depth 4)");
	/* Training window: steps 5..119.  A fetch that ends an epoch is
	 * carried by the next batch the loop gets, from either loader; iter()
	 * by its loader's next step.  The first step of training epochs 2 and
	 * 3 carries the val loader's stop fetch and the train iter(): 6 + 5 +
	 * 10 ms. */
	CHECK(x.a.steps_window == 115 && x.a.epochs == 3, "window of 115 training steps");
	double own = (113 * 6 + 2 * (6 + 5 + 10)) * 1e-3;
	/* Val inside the window, its own warm-up included (the reference
	 * Replay caches every loader before the loop): epochs 1 and 2, 10
	 * steps each, the first with its iter() and the training loader's
	 * stop fetch (3 + 20 + 7); epoch 3 comes after the last training
	 * step.  Every stop fetch between two window steps counts once. */
	double val = 2 * (9 * 3 + (3 + 20 + 7)) * 1e-3;
	const struct dlbn_loader_sums *in = &lt->v[1].in_train_window;
	CHECK(in->steps == 20 && llabs(in->wait_ns - (int64_t)llround(val * 1e9)) < 1000,
	      "val fetches inside the training window: 20, waiting %.3f s (got %zu, %.3f s)", val,
	      in->steps, (double)in->wait_ns / 1e9);
	CHECK(fabs(x.a.exposed_s - own) < 1e-6 && fabs(x.a.stall_s - own - val) < 1e-6 &&
		      fabs(x.a.other_loaders_stall_s - val) < 1e-6,
	      "stall = the training loader's %.3f s + val's %.3f s (got %.3f, %.3f)", own, val,
	      x.a.exposed_s, x.a.stall_s);
	CHECK(fabs(x.a.predicted_speedup - x.a.wall_s / (x.a.wall_s - own - val)) < 1e-9,
	      "prediction from the whole stall (%.3f)", x.a.predicted_speedup);
	int named = 0;
	for (size_t i = 0; i < x.a.nreasons; i++)
		named += strstr(x.a.reasons[i], "2 DataLoaders") != NULL &&
			 strstr(x.a.reasons[i], "most time in") != NULL;
	CHECK(named == 1, "a reason says how the training loader was chosen");
	close_run(&x);
}

/* Two train loaders zipped: every step fetches A (1 ms) then B (5 ms). */
static void zipped(void)
{
	struct tg *g;
	int64_t t = 1000 * MS;
	struct tg_stream *s = start_trace(&g, t);
	for (int e = 0; e < 2; e++) {
		int64_t a_iter = 1 + 2 * e, b_iter = 2 + 2 * e;
		tg_mark(s, t, DLBN_MARK_ITER_BEGIN, a_iter, e);
		tg_config(s, t + MS, a_iter, TRAIN_CFG);
		tg_mark(s, t + 2 * MS, DLBN_MARK_ITER_BEGIN, b_iter, e);
		tg_config(s, t + 3 * MS, b_iter,
			  "num_workers=2;batch_size=8;prefetch_factor=2;sampler=RandomSampler;"
			  "loader=3333");
		t += 4 * MS;
		for (int k = 0; k < 30; k++) {
			tg_mark(s, t, DLBN_MARK_FETCH_BEGIN, a_iter, k);
			tg_mark(s, t + 1 * MS, DLBN_MARK_FETCH_END, a_iter, k);
			tg_mark(s, t + 2 * MS, DLBN_MARK_FETCH_BEGIN, b_iter, k);
			tg_mark(s, t + 7 * MS, DLBN_MARK_FETCH_END, b_iter, k);
			t += 10 * MS;
		}
		tg_mark(s, t, DLBN_MARK_FETCH_BEGIN, a_iter, 30);
		tg_mark(s, t, DLBN_MARK_FETCH_STOP, a_iter, 30);
		t += 5 * MS;
	}
	tg_exit(s, t, 0, DLBN_EXIT_EXIT);
	if (tg_close(g) != 0)
		exit(2);

	struct run x;
	if (open_run(&x) != 0)
		exit(2);
	const struct dlbn_loader_table *lt = &x.m.loaders;
	CHECK(lt->n == 2 && lt->train == 1 && lt->v[0].role == DLBN_LOADER_ZIPPED,
	      "zipped: the loader the loop waits for longer is the training one, the other "
	      "is zipped (train %d, role %d)",
	      lt->train, lt->n == 2 ? lt->v[0].role : -1);
	CHECK(strstr(lt->chosen_by, "same epochs") != NULL, "chosen_by says so: %s", lt->chosen_by);
	CHECK(x.m.py_steps.n == 60 && lt->v[0].steps.n == 60,
	      "each loader has its 60 steps (got %zu, %zu)", x.m.py_steps.n, lt->v[0].steps.n);
	CHECK(x.m.config.batch_size == 8, "config of the training loader (batch 8)");
	/* B's window: its steps 5..59.  A's step k comes just before B's step
	 * k: A's steps 5..29 of epoch 1 and all 30 of epoch 2 fall inside (A's
	 * own warm-up is its first 5); A's first step of epoch 2 carries its
	 * iter() (4 ms). */
	const struct dlbn_loader_sums *in = &lt->v[0].in_train_window;
	CHECK(in->steps == 55 && in->wait_ns == 59 * MS,
	      "A's fetches inside B's window: 55 steps, 59 ms (got %zu, %.3f s)", in->steps,
	      (double)in->wait_ns / 1e9);
	CHECK(fabs(x.a.stall_s - x.a.exposed_s - 0.059) < 1e-6, "A's stall adds to B's (%.3f s)",
	      x.a.stall_s);
	close_run(&x);

	/* --baseline's Replay model takes the Real run's choice (its waits
	 * are all near zero: a tie would be noise). */
	force_train = 1;
	if (open_run(&x) != 0)
		exit(2);
	force_train = 0;
	CHECK(lt->train == 0 && lt->v[1].role == DLBN_LOADER_ZIPPED &&
		      strstr(lt->chosen_by, "run it is compared with (loader #1") != NULL,
	      "force_train 1: loader #1 is the training one, the other zipped (%d: %s)", lt->train,
	      lt->chosen_by);
	CHECK(x.m.config.batch_size == 32, "config of loader #1 (batch 32, got %d)",
	      x.m.config.batch_size);
	close_run(&x);
}

/* A CONFIG lost for one epoch: that iterator is the named loader's. */
static void unnamed_iterator(void)
{
	struct tg *g;
	int64_t t = 1000 * MS;
	struct tg_stream *s = start_trace(&g, t);
	t = epoch(s, t, 1, TRAIN_CFG, 20, 2, 8, 5, 3);
	t = epoch(s, t, 2, NULL, 20, 2, 8, 5, 3);
	tg_exit(s, t, 0, DLBN_EXIT_EXIT);
	if (tg_close(g) != 0)
		exit(2);
	struct run x;
	if (open_run(&x) != 0)
		exit(2);
	CHECK(x.m.loaders.n == 1 && x.m.py_steps.n == 40 && x.m.py_steps.epochs == 2,
	      "an iterator without CONFIG beside one named loader joins it (%zu loaders, %zu "
	      "steps)",
	      x.m.loaders.n, x.m.py_steps.n);
	close_run(&x);
}

/* The bootstrap left an incompatible DataLoader alone: no marks, a note. */
static void incompatible_bootstrap(void)
{
	struct tg *g;
	int64_t t = 1000 * MS;
	struct tg_stream *s = start_trace(&g, t);
	tg_config(s, t + MS, 0,
		  "bootstrap=incompatible;reason=_BaseDataLoaderIter.__next__ is not a function");
	tg_exit(s, t + 100 * MS, 0, DLBN_EXIT_EXIT);
	if (tg_close(g) != 0)
		exit(2);
	struct run x;
	if (open_run(&x) != 0)
		exit(2);
	CHECK(x.m.loaders.boot_incompatible && x.m.loaders.n == 0 && !x.m.config.present,
	      "the note is read, and is no loader's config");
	int said = 0;
	for (size_t i = 0; i < x.a.nreasons; i++)
		said += strstr(x.a.reasons[i], "left the DataLoader alone: _BaseDataLoaderIter."
					       "__next__ is not a function") != NULL;
	CHECK(said == 1 && x.a.verdict == DLBN_VERDICT_INCONCLUSIVE,
	      "a reason line says why there are no fetch marks");
	close_run(&x);
}

int main(void)
{
	int fd = mkstemp(path);
	if (fd < 0)
		return 2;
	close(fd);
	train_val();
	zipped();
	unnamed_iterator();
	incompatible_bootstrap();
	unlink(path);
	CHECK_EXIT();
}
