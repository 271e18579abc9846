/*
 * test_epoch_carry.c - loader time between epochs in the Python view.
 *
 * With non-persistent workers, the fetch that ends an epoch (StopIteration:
 * the workers are shut down) and iter() up to the next fetch (they are
 * started again) return no batch, yet Replay removes both.  The model
 * charges them to the first step of the next epoch, so the stall over a
 * window that spans epochs includes them; the first iter() stays warm-up,
 * and user code between the end of an epoch and the next iter() (e.g.
 * validation) is not charged.
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

static char path[] = "/tmp/dlbn-test-epoch-carry-XXXXXX";

/*
 * Three epochs of 20 steps: each fetch waits 2 ms, the loop computes 8 ms.
 * Between epochs: stop fetch 30 ms, then 50 ms of "validation" (user code),
 * then iter() 40 ms before the first fetch of the next epoch.
 */
static int64_t write_trace(void)
{
	struct tg *g = tg_open(path, 0);
	struct tg_stream *s = tg_stream(g, 0, 0, 100, 100);
	int64_t t = 1000 * MS;
	tg_process(s, t, 100, 1, -1, DLBN_START_ROOT, "python3");
	tg_thread(s, t, 100, 1);
	for (int e = 0; e < 3; e++) {
		tg_mark(s, t, DLBN_MARK_ITER_BEGIN, e + 1, e);
		t += 40 * MS;
		tg_config(s, t, e + 1, "num_workers=2;prefetch_factor=2;persistent_workers=0");
		for (int k = 0; k < 20; k++) {
			tg_mark(s, t, DLBN_MARK_FETCH_BEGIN, e + 1, 0);
			t += 2 * MS;
			tg_mark(s, t, DLBN_MARK_FETCH_END, e + 1, k);
			t += 8 * MS;
		}
		tg_mark(s, t, DLBN_MARK_FETCH_BEGIN, e + 1, 0);
		t += 30 * MS;
		tg_mark(s, t, DLBN_MARK_FETCH_STOP, e + 1, 20);
		t += 50 * MS;
	}
	tg_exit(s, t, 0, DLBN_EXIT_EXIT);
	if (tg_close(g) != 0)
		exit(2);
	return t;
}

int main(void)
{
	int fd = mkstemp(path);
	if (fd < 0)
		return 2;
	close(fd);
	write_trace();

	char err[256];
	struct dlbn_model_opts mo;
	struct dlbn_verdict_opts vo;
	struct dlbn_model m;
	struct dlbn_analysis a;
	struct dlbn_reader *r = dlbn_reader_open(path, err, sizeof(err));
	if (!r)
		return 2;
	dlbn_gpu_model_opts(&mo);
	mo.keep_steps = 1;
	dlbn_verdict_default_opts(&vo);
	if (dlbn_model_build(&m, r, &mo) != 0 || dlbn_analyze(&m, dlbn_reader_stats(r), &vo, &a))
		return 2;

	const struct dlbn_steps *st = &m.py_steps;
	CHECK(m.view == DLBN_VIEW_PYTHON && st->n == 60 && st->epochs == 3,
	      "60 steps in 3 epochs, python view (got %zu steps, %d epochs)", st->n, st->epochs);
	CHECK(st->n == 60 && st->v[0].wait_ns == 2 * MS,
	      "first epoch's first step: its fetch only (the first iter() is warm-up)");
	CHECK(st->n == 60 && st->v[20].wait_ns == (2 + 30 + 40) * MS &&
		      st->v[40].wait_ns == 72 * MS,
	      "first step of a later epoch: fetch + stop fetch + iter() = 72 ms (got %.1f, %.1f)",
	      (double)st->v[20].wait_ns / MS, (double)st->v[40].wait_ns / MS);
	CHECK(st->n == 60 && st->v[21].wait_ns == 2 * MS &&
		      st->v[20].end - st->v[20].begin == 2 * MS,
	      "other steps unchanged; the step's own interval stays its fetch");
	/* The window (after the warm-up steps of the first epoch) holds both
	 * epoch boundaries; its stall is the sum of its steps' waits. */
	double expect_stall = 0;
	for (size_t i = st->w.warmup; i < st->w.warmup + st->w.window; i++)
		expect_stall += (double)st->v[i].wait_ns / 1e9;
	CHECK(fabs(a.stall_s - expect_stall) < 1e-9 && a.stall_s > 0.2,
	      "the stall holds both boundaries' 72 ms (stall %.3f s)", a.stall_s);
	CHECK(a.wall_s > a.stall_s + 0.4 &&
		      fabs(a.predicted_speedup - a.wall_s / (a.wall_s - a.stall_s)) < 1e-9,
	      "validation time between epochs stays out of the stall (wall %.3f s)", a.wall_s);
	dlbn_analysis_free(&a);
	dlbn_model_free(&m);
	dlbn_reader_close(r);
	unlink(path);
	CHECK_EXIT();
}
