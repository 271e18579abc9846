/*
 * test_whatif.c - the --what-if model (analyzer/analysis/whatif.h) on synthetic runs
 * whose figures follow from tgsim's parameters: the curve and its limits
 * for known worker, loop, hand-off and core figures (workers needing
 * 80 ms per batch, a 10 ms loop, 2 cores), core counts inferred from CPU
 * contention, the GPU's step time as a floor, and predictions checked
 * against a second synthetic run made with the predicted setting (more
 * workers, persistent workers).  Also the sweep-results reader (sweep.h)
 * and the JSON rows.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "gpu/gpu.h"
#include "model/model.h"
#include "trace/reader.h"
#include "report/report.h"
#include "analysis/sweep.h"
#include "tgsim.h"
#include "analysis/verdict.h"
#include "analysis/whatif.h"

static char path[] = "/tmp/dlbn-test-whatif-XXXXXX";

static void run(const struct tgsim_params *p, struct dlbn_whatif *w, struct dlbn_analysis *out)
{
	char err[256];
	struct dlbn_model_opts mo;
	struct dlbn_verdict_opts vo;
	struct dlbn_model m;
	struct dlbn_analysis a;
	if (tgsim_write(path, p, NULL) != 0)
		exit(2);
	struct dlbn_reader *r = dlbn_reader_open(path, err, sizeof(err));
	if (!r)
		exit(2);
	dlbn_gpu_model_opts(&mo);
	dlbn_verdict_default_opts(&vo);
	if (dlbn_model_build(&m, r, &mo) != 0 ||
	    dlbn_analyze_gpu(&m, dlbn_reader_stats(r), &vo, &m.gpu, &a) != 0)
		exit(2);
	dlbn_whatif_compute(&m, &a, NULL, w);
	dlbn_whatif_text(stdout, w);
	dlbn_analysis_free(&a); /* the scalar figures stay readable */
	if (out)
		*out = a;
	dlbn_model_free(&m);
	dlbn_reader_close(r);
}

static const struct dlbn_whatif_row *row(const struct dlbn_whatif *w, const char *setting,
					 int value)
{
	for (size_t i = 0; i < w->nrows; i++)
		if (!strcmp(w->rows[i].setting, setting) && w->rows[i].value == value)
			return &w->rows[i];
	return NULL;
}

static int near(double got, double want, double rel)
{
	return fabs(got - want) <= rel * want;
}

/* Step time of row (setting, value), -1 when absent. */
static double step_of(const struct dlbn_whatif *w, const char *setting, int value)
{
	const struct dlbn_whatif_row *r = row(w, setting, value);
	return r ? r->step_ms : -1;
}

static const char *limit_of(const struct dlbn_whatif *w, const char *setting, int value)
{
	const struct dlbn_whatif_row *r = row(w, setting, value);
	return r ? r->limited_by : "(none)";
}

static void one_worker_80ms(struct tgsim_params *p)
{
	tgsim_default(p);
	p->workers = 1;
	p->batch_ms = 80;
	p->loop_ms = 10;
	p->handoff_ms = 0.5;
	p->sched = 1;
}

/* The brief's example: 80 ms per batch, a 10 ms loop, 2 cores. */
static void test_two_cores(void)
{
	struct tgsim_params p;
	struct dlbn_whatif w;
	one_worker_80ms(&p);
	p.cpus = 2;
	run(&p, &w, NULL);
	CHECK(w.valid, "2 cores: a prediction");
	CHECK(w.cores == 2 && strstr(w.cores_from, "affinity"), "cores from cpus=2 (%g, %s)",
	      w.cores, w.cores_from);
	CHECK(near(w.batch_ms, 80, 0.03) && near(w.loop_ms, 10, 0.05),
	      "inputs: 80 ms per batch (%.2f), 10 ms loop (%.2f)", w.batch_ms, w.loop_ms);
	CHECK(near(w.main_cpu_ms, 10, 0.05) && near(w.worker_cpu_ms, 80, 0.03),
	      "CPU per step from schedstat: loop 10 (%.2f), worker 80 (%.2f)", w.main_cpu_ms,
	      w.worker_cpu_ms);
	const struct dlbn_whatif_row *cur = row(&w, "num_workers", 1);
	CHECK(cur && cur->current && near(cur->measured_ms, 80, 0.03),
	      "num_workers=1 is this run, measured ~80 ms (%.2f)", cur ? cur->measured_ms : -1);
	CHECK(near(step_of(&w, "num_workers", 1), 80, 0.03) &&
		      !strcmp(limit_of(&w, "num_workers", 1), "workers"),
	      "num_workers=1: ~80 ms, limited by workers (%.2f, %s)", step_of(&w, "num_workers", 1),
	      limit_of(&w, "num_workers", 1));
	CHECK(near(step_of(&w, "num_workers", 0), 90, 0.03) &&
		      !strcmp(limit_of(&w, "num_workers", 0), DLBN_LIMIT_LOADING),
	      "num_workers=0: loop + batch = ~90 ms in the loop's thread (%.2f, %s)",
	      step_of(&w, "num_workers", 0), limit_of(&w, "num_workers", 0));
	for (int n = 2; n <= 4; n++)
		CHECK(near(step_of(&w, "num_workers", n), 45, 0.03) &&
			      !strcmp(limit_of(&w, "num_workers", n), "cores"),
		      "num_workers=%d: (80 + 10) ms CPU / 2 cores = ~45 ms, limited by cores "
		      "(%.2f, "
		      "%s)",
		      n, step_of(&w, "num_workers", n), limit_of(&w, "num_workers", n));
	CHECK(w.best_workers == 2, "2 workers are enough on 2 cores (%d)", w.best_workers);
	const struct dlbn_whatif_row *r2 = row(&w, "num_workers", 2);
	CHECK(r2 && near(r2->speedup, 80.0 / 45.0, 0.04), "speedup at 2 workers ~1.78 (%.3f)",
	      r2 ? r2->speedup : -1);
	CHECK(w.max_workers >= 3 && w.max_workers <= 8, "the curve stops near the cores (%d)",
	      w.max_workers);
	CHECK(row(&w, "persistent_workers", 1) == NULL, "one epoch: no persistent_workers row");
	CHECK(row(&w, "pin_memory", 1) == NULL, "no GPU: no pin_memory row");
}

/* Without schedstat samples the CPU a batch costs is unknown (a sleeping
 * worker looks like a computing one): no core limit, and a note says so. */
static void test_no_samples_no_core_limit(void)
{
	struct tgsim_params p;
	struct dlbn_whatif w;
	one_worker_80ms(&p);
	p.cpus = 2;
	p.sched = 0;
	run(&p, &w, NULL);
	CHECK(w.cores == 2 && !w.cpu_known, "cores known, CPU per batch not");
	CHECK(near(step_of(&w, "num_workers", 2), 40, 0.03) &&
		      !strcmp(limit_of(&w, "num_workers", 2), "workers"),
	      "num_workers=2: 40 ms, workers (%.2f, %s)", step_of(&w, "num_workers", 2),
	      limit_of(&w, "num_workers", 2));
	int said = 0;
	for (size_t i = 0; i < w.nnotes; i++)
		said |= strstr(w.notes[i], "no core limit") != NULL;
	CHECK(said, "a note says no core limit was applied");
}

/* No core count: the workers scale until the loop's floor, and a second
 * run with the predicted num_workers measures what was predicted. */
static void test_more_workers_confirmed(void)
{
	struct tgsim_params p;
	struct dlbn_whatif w, w4;
	one_worker_80ms(&p);
	run(&p, &w, NULL);
	CHECK(w.cores == 0 && !strcmp(w.cores_from, "unknown"), "no cpus=, no contention: cores "
								"unknown");
	CHECK(near(step_of(&w, "num_workers", 2), 40, 0.03) &&
		      near(step_of(&w, "num_workers", 4), 20, 0.03),
	      "80 ms / n workers: 2 -> 40 (%.2f), 4 -> 20 (%.2f)", step_of(&w, "num_workers", 2),
	      step_of(&w, "num_workers", 4));
	double floor = w.loop_ms + w.handoff_ms;
	CHECK(near(w.handoff_ms, 0.5, 0.3), "hand-off ~0.5 ms per batch (%.3f)", w.handoff_ms);
	CHECK(near(step_of(&w, "num_workers", 9), floor, 0.01) &&
		      !strcmp(limit_of(&w, "num_workers", 9), "loop"),
	      "num_workers=9: the loop's floor %.2f ms (%.2f, %s)", floor,
	      step_of(&w, "num_workers", 9), limit_of(&w, "num_workers", 9));
	CHECK(w.best_workers == 8, "8 workers reach the floor (%d)", w.best_workers);
	double predicted = step_of(&w, "num_workers", 4);
	p.workers = 4;
	run(&p, &w4, NULL);
	CHECK(near(w4.measured_ms, predicted, 0.05),
	      "rerun with num_workers=4 measures %.2f ms, predicted %.2f", w4.measured_ms,
	      predicted);
}

/* CPU-saturated: the workers queue for a CPU half their busy time; the
 * cores are what the traced threads got, and fewer workers do as well. */
static void test_contended_fewer_workers(void)
{
	struct tgsim_params p;
	struct dlbn_whatif w;
	struct dlbn_analysis a;
	tgsim_default(&p);
	p.workers = 4;
	p.batch_ms = 40;
	p.loop_ms = 5;
	p.sched = 1;
	p.worker_runq = 0.5;
	run(&p, &w, &a);
	CHECK(a.cpu_contended, "contended run");
	CHECK(near(w.batch_ms, 20, 0.04), "20 ms per batch with a core of its own (%.2f)",
	      w.batch_ms);
	CHECK(near(w.cores, a.cpus_used, 1e-9) && strstr(w.cores_from, "queueing"),
	      "cores = the CPUs the threads got (%.2f, %s)", w.cores, w.cores_from);
	CHECK(near(step_of(&w, "num_workers", 4), w.measured_ms, 0.05),
	      "the model reproduces this run: %.2f vs %.2f ms", step_of(&w, "num_workers", 4),
	      w.measured_ms);
	CHECK(near(step_of(&w, "num_workers", 2), w.measured_ms, 0.05),
	      "2 workers give the same step (%.2f vs %.2f ms)", step_of(&w, "num_workers", 2),
	      w.measured_ms);
	CHECK(w.max_workers == 6, "the curve goes to num_workers + 2 = 6 (%d)", w.max_workers);
	CHECK(near(step_of(&w, "num_workers", 6), w.measured_ms, 0.05) &&
		      !strcmp(limit_of(&w, "num_workers", 6), "cores"),
	      "6 workers: no faster, limited by cores (%.2f, %s)", step_of(&w, "num_workers", 6),
	      limit_of(&w, "num_workers", 6));
	CHECK(w.best_workers == 2, "fewest workers for the best step: 2 (%d)", w.best_workers);
}

/* Non-persistent workers re-start every epoch: persistent_workers=True is
 * predicted, then measured in a second run. */
static void test_persistent_confirmed(void)
{
	struct tgsim_params p;
	struct dlbn_whatif w, wp;
	tgsim_default(&p);
	p.workers = 2;
	p.batch_ms = 20;
	p.loop_ms = 15;
	p.epochs = 4;
	p.steps = 160;
	run(&p, &w, NULL);
	CHECK(w.startup_ms > 0, "epoch start-up per step %.3f ms", w.startup_ms);
	const struct dlbn_whatif_row *r0 = row(&w, "persistent_workers", 0),
				     *r1 = row(&w, "persistent_workers", 1);
	CHECK(r0 && r0->current && near(r0->step_ms, w.measured_ms, 0.05),
	      "persistent_workers=False is this run, model %.2f vs %.2f ms", r0 ? r0->step_ms : -1,
	      w.measured_ms);
	CHECK(r1 && r0 && r1->step_ms < r0->step_ms, "persistent_workers=True is faster");
	p.persistent = 1;
	run(&p, &wp, NULL);
	CHECK(r1 && near(wp.measured_ms, r1->step_ms, 0.05),
	      "rerun with persistent workers measures %.2f ms, predicted %.2f", wp.measured_ms,
	      r1 ? r1->step_ms : -1);
	CHECK(row(&wp, "persistent_workers", 1) && row(&wp, "persistent_workers", 1)->current,
	      "the persistent run's row is current");
}

/* With GPU work the GPU's own step time is the floor. */
static void test_gpu_floor(void)
{
	struct tgsim_params p;
	struct dlbn_whatif w;
	tgsim_default(&p);
	p.workers = 1;
	p.batch_ms = 40;
	p.loop_ms = 5;
	p.gpu_ms = 15;
	p.sched = 1;
	run(&p, &w, NULL);
	CHECK(near(w.gpu_step_ms, 15, 0.03), "the GPU needs ~15 ms per step (%.2f, %zu steps)",
	      w.gpu_step_ms, w.gpu_samples);
	CHECK(near(step_of(&w, "num_workers", 4), 15, 0.03) &&
		      !strcmp(limit_of(&w, "num_workers", 4), "gpu"),
	      "num_workers=4: the GPU's 15 ms (%.2f, %s)", step_of(&w, "num_workers", 4),
	      limit_of(&w, "num_workers", 4));
	CHECK(near(step_of(&w, "num_workers", 2), 20, 0.03) &&
		      !strcmp(limit_of(&w, "num_workers", 2), "workers"),
	      "num_workers=2: 40 / 2 = 20 ms, workers (%.2f, %s)", step_of(&w, "num_workers", 2),
	      limit_of(&w, "num_workers", 2));
	CHECK(near(step_of(&w, "num_workers", 0), 45, 0.05),
	      "num_workers=0: host 5 + loading 40 ms, the GPU overlapping (%.2f)",
	      step_of(&w, "num_workers", 0));
}

/*
 * A loop that waits for the GPU every step, fed by workers that are always
 * ahead: each fetch receives a batch that has arrived (the fd exchange, then
 * rebuilding it) and drops the previous one after, all while the GPU is
 * idle.  More workers or a deeper queue shorten none of it: the model keeps
 * the whole of it as the hand-off, and reproduces the run's own step.
 */
static void test_handoff_serial_with_the_gpu(void)
{
	struct tgsim_params p;
	struct dlbn_whatif w;
	tgsim_default(&p);
	p.workers = 2;
	p.batch_ms = 10;
	p.loop_ms = 1;
	p.gpu_ms = 20;
	p.drain_sync = 2;
	p.sync_drain_event = 1;
	p.handoff_ms = 1.5;
	p.rebuild_ms = 1;
	p.lead_free_ms = 0.5;
	p.lead_runq_ms = 0.3;
	run(&p, &w, NULL);
	double taken = 1.5 + 1 + 0.5 + 0.3;
	CHECK(w.valid && near(w.measured_ms, 20 + taken, 0.03),
	      "measured: the GPU's 20 ms and %.1f ms of taking the batch (%.2f)", taken,
	      w.measured_ms);
	CHECK(near(w.handoff_ms, taken, 0.05),
	      "hand-off: receiving, rebuilding and dropping, %.1f ms (%.2f)", taken, w.handoff_ms);
	CHECK(near(step_of(&w, "num_workers", 2), w.measured_ms, 0.02),
	      "the run's own setting: the measured %.2f ms (%.2f)", w.measured_ms,
	      step_of(&w, "num_workers", 2));
	CHECK(near(step_of(&w, "num_workers", 4), w.measured_ms, 0.02) &&
		      !strcmp(limit_of(&w, "num_workers", 4), "handoff"),
	      "num_workers=4 gains nothing: beyond the GPU's time the step is the hand-off "
	      "(%.2f, %s)",
	      step_of(&w, "num_workers", 4), limit_of(&w, "num_workers", 4));
	CHECK(near(step_of(&w, "prefetch_factor", 4), w.measured_ms, 0.02),
	      "prefetch_factor=4 gains nothing: no jitter to absorb (%.2f)",
	      step_of(&w, "prefetch_factor", 4));
}

static void test_json_rows(void)
{
	struct tgsim_params p;
	struct dlbn_whatif w;
	char *buf = NULL;
	size_t len = 0;
	one_worker_80ms(&p);
	p.cpus = 2;
	run(&p, &w, NULL);
	FILE *f = open_memstream(&buf, &len);
	dlbn_whatif_json(f, &w);
	fclose(f);
	size_t n = 0;
	for (const char *s = buf; (s = strstr(s, "\"predicted_step_ms\":")); s++)
		n++;
	CHECK(n == w.nrows + w.ngrid, "one JSON row per prediction and grid point (%zu of %zu)", n,
	      w.nrows + w.ngrid);
	CHECK(w.ngrid > 0 && strstr(buf, "\"what_if_grid\":[{\"batch_size\":"),
	      "the grid follows the basis (%zu points)", w.ngrid);
	CHECK(strstr(buf, "{\"setting\":\"num_workers\",\"value\":2,\"predicted_step_ms\":") &&
		      strstr(buf, "\"limited_by\":\"cores\""),
	      "rows carry setting, value, predicted_step_ms, limited_by");
	CHECK(strstr(buf, "\"what_if_basis\":{\"valid\":true") && strstr(buf, "\"cores\":2"),
	      "the basis says valid and cores 2");
	free(buf);
	buf = NULL;
	f = open_memstream(&buf, &len);
	dlbn_whatif_json(f, NULL);
	fclose(f);
	CHECK(!strcmp(buf, "\"what_if\":null,\"what_if_basis\":null,\"what_if_grid\":null"),
	      "without --what-if: null");
	free(buf);
}

/* The step at batch scale k: the loader, hand-off and workers' CPU grow
 * with the samples; the loop and the GPU keep their fixed parts. */
static void test_batch_scale(void)
{
	struct dlbn_whatif w;
	const char *lim = "";
	memset(&w, 0, sizeof(w));
	w.valid = 1;
	w.num_workers = 2;
	w.batch_size = 32;
	w.batch_ms = 40;
	w.worker_cpu_ms = 40;
	w.loop_ms = 10;
	w.loop_fixed_ms = 4;
	w.main_cpu_ms = 10;
	w.handoff_ms = 1;
	w.gpu_step_ms = 12;
	w.gpu_fixed_ms = 8;
	double s = dlbn_whatif_step_ms(&w, 1, 2, &lim);
	CHECK(fabs(s - 20) < 1e-9 && !strcmp(lim, "workers"), "k=1, 2 workers: 40/2 = 20 (%g %s)",
	      s, lim);
	CHECK(s == dlbn_whatif_workers_ms(&w, 2, NULL), "k=1 is the worker curve");
	s = dlbn_whatif_step_ms(&w, 2, 8, &lim);
	CHECK(fabs(s - 18) < 1e-9 && !strcmp(lim, "loop"),
	      "k=2, 8 workers: loop 4 + 6 x 2 + hand-off 2 = 18 (%g %s)", s, lim);
	s = dlbn_whatif_step_ms(&w, 0.5, 8, &lim);
	CHECK(fabs(s - 10) < 1e-9 && !strcmp(lim, "gpu"),
	      "k=0.5: the GPU's 8 + 4 x 0.5 = 10 (%g %s)", s, lim);
	w.cores = 2;
	w.cpu_known = 1;
	s = dlbn_whatif_step_ms(&w, 2, 8, &lim);
	CHECK(fabs(s - 48) < 1e-9 && !strcmp(lim, "cores"),
	      "k=2 on 2 cores: (40 x 2 + 10 x 16/10) / 2 = 48 (%g %s)", s, lim);
}

static void test_sweep_reader(void)
{
	struct dlbn_sweep s;
	char err[256] = "";
	const char *good =
		" [{\"setting\":\"num_workers\",\"value\":4,\"measured_step_ms\":12.5,"
		"\"predicted_step_ms\":12.0,\"extra\":{\"a\":[1,2,{}]}},\n"
		"{\"setting\":\"num_workers\",\"value\":8,\"measured_step_ms\":null,"
		"\"error\":\"worker killed\"},"
		"{\"value\":true,\"setting\":\"persistent_workers\",\"measured_step_ms\":3}]";
	CHECK(dlbn_sweep_parse(&s, good, strlen(good), err, sizeof(err)) == 0 && s.n == 3,
	      "three sweep points (%s)", err);
	if (s.n == 3) {
		CHECK(!strcmp(s.v[0].setting, "num_workers") && s.v[0].value == 4 &&
			      s.v[0].measured_ms == 12.5,
		      "point 1: num_workers 4 measured 12.5 ms");
		CHECK(s.v[1].measured_ms < 0 && !strcmp(s.v[1].error, "worker killed"),
		      "point 2: a failed run with its error");
		CHECK(s.v[2].value == 1 && s.v[2].measured_ms == 3, "point 3: a boolean value");
	}
	dlbn_sweep_free(&s);
	const char *figures = "[{\"setting\":\"batch_size\",\"value\":64,\"measured_step_ms\":9,"
			      "\"batch_size\":64,\"num_workers\":2,\"loop_ms\":3.5,"
			      "\"gpu_step_ms\":null}]";
	CHECK(dlbn_sweep_parse(&s, figures, strlen(figures), err, sizeof(err)) == 0 && s.n == 1 &&
		      s.v[0].batch_size == 64 && s.v[0].num_workers == 2 && s.v[0].loop_ms == 3.5 &&
		      s.v[0].gpu_step_ms < 0 && s.v[0].units == 2,
	      "a run's figures: batch_size, num_workers (units too), loop_ms; null gpu_step_ms "
	      "(%s)",
	      err);
	dlbn_sweep_free(&s);
	const char *threads = "[{\"setting\":\"num_threads\",\"value\":3,\"num_workers\":0,"
			      "\"units\":3}]";
	CHECK(dlbn_sweep_parse(&s, threads, strlen(threads), err, sizeof(err)) == 0 && s.n == 1 &&
		      s.v[0].units == 3 && s.v[0].num_workers == 0,
	      "units: the run's count of the curve's setting (DALI's threads) (%s)", err);
	dlbn_sweep_free(&s);
	CHECK(dlbn_sweep_parse(&s, "[]", 2, err, sizeof(err)) == 0 && s.n == 0, "empty list");
	static const char *const bad[] = {
		"{\"setting\":\"num_workers\"}",
		"[{\"setting\":\"num_workers\",\"value\":4",
		"[{\"value\":4,\"measured_step_ms\":5}]",
		"[{\"setting\":\"num_workers\",\"value\":4,\"measured_step_ms\":-3}]",
		"[{\"setting\":\"num_workers\",\"value\":x}]",
		"[{\"setting\":\"batch_size\",\"value\":8,\"loop_ms\":-1}]",
		"[] trailing",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		err[0] = 0;
		int rc = dlbn_sweep_parse(&s, bad[i], strlen(bad[i]), err, sizeof(err));
		CHECK(rc == -1 && strstr(err, "at byte") && s.n == 0 && !s.v,
		      "rejected with a position: %s -> %s", bad[i], err);
	}
}

/* The queueing model (whatif_step.c): exact mean value analysis of n
 * workers, each 90 ms off a CPU and 10 ms on one per batch, on 2 cores
 * (figures from the recursion worked by hand). */
static void test_queueing_model(void)
{
	CHECK(near(dlbn_whatif_cycle_ms(90, 10, 2, 1), 100, 1e-9), "one worker: no queueing (%.3f)",
	      dlbn_whatif_cycle_ms(90, 10, 2, 1));
	CHECK(near(dlbn_whatif_cycle_ms(90, 10, 2, 2), 100, 1e-9),
	      "two workers on two cores: no queueing (%.3f)", dlbn_whatif_cycle_ms(90, 10, 2, 2));
	CHECK(near(dlbn_whatif_cycle_ms(90, 10, 2, 10), 101.946, 1e-4),
	      "ten: 101.946 ms a batch (%.3f)", dlbn_whatif_cycle_ms(90, 10, 2, 10));
	/* Where n / (90 + 10) meets 2 / 10 (n = 20) the max() bound says 5 ms
	 * a batch; the workers queue in bursts: 5.69. */
	double knee = dlbn_whatif_cycle_ms(90, 10, 2, 20) / 20;
	CHECK(near(knee, 5.6944, 1e-4), "at the knee, 20 workers: 5.694 ms a batch, not 5 (%.4f)",
	      knee);
	CHECK(near(dlbn_whatif_cycle_ms(90, 10, 2, 40) / 40, 5, 1e-3),
	      "far past it the cores' bound: 5 ms (%.4f)",
	      dlbn_whatif_cycle_ms(90, 10, 2, 40) / 40);
	CHECK(near(dlbn_whatif_cycle_ms(90, 10, 1.5, 1), 100, 1e-9) &&
		      dlbn_whatif_cycle_ms(90, 10, 1.5, 30) / 30 >= 10 / 1.5,
	      "a fractional core count (a quota) bounds it too");
	CHECK(near(dlbn_whatif_worker_cores(2, 1, 10), 1.9, 1e-9),
	      "the training process's 1 ms of CPU per 10 ms step leaves 1.9 cores");
}

/* Sleeping workers near the cores' bound: the curve queues there, and the
 * run's own count reproduces the run. */
static void test_queueing_curve(void)
{
	struct tgsim_params p;
	struct dlbn_whatif w;
	tgsim_default(&p);
	p.steps = 300;
	p.workers = 2;
	p.batch_ms = 100;
	p.sleep_ms = 85;
	p.loop_ms = 1;
	p.handoff_ms = 0.2;
	p.sched = 1;
	p.cpus = 2;
	run(&p, &w, NULL);
	CHECK(w.queueing && w.think_ms > 80 && w.think_ms < 90,
	      "queueing modelled, ~85 ms of each batch off a CPU (%.1f)", w.think_ms);
	const struct dlbn_whatif_row *cur = row(&w, "num_workers", 2);
	CHECK(cur && near(cur->step_ms, cur->measured_ms, 0.03),
	      "the run's own count: as measured (%.2f, %.2f)", cur ? cur->step_ms : -1,
	      cur ? cur->measured_ms : -1);
	/* Around the knee (n near 2 x 100 / 15) the queueing model is slower
	 * than both bounds, and never faster than either. */
	int slower = 0, faster = 0;
	for (int n = 3; n <= 16; n++) {
		const struct dlbn_whatif_row *r = row(&w, "num_workers", n);
		if (!r)
			continue;
		double bound = fmax(w.batch_raw_ms / n, (w.worker_cpu_ms + w.main_cpu_ms) / 2);
		slower += r->step_ms > bound * 1.02;
		faster += r->step_ms < bound * 0.995;
	}
	CHECK(slower >= 2 && !faster,
	      "near the knee slower than max() (%d rows), never faster (%d)", slower, faster);
}

int main(void)
{
	int fd = mkstemp(path);
	if (fd < 0)
		return 2;
	test_two_cores();
	test_no_samples_no_core_limit();
	test_more_workers_confirmed();
	test_contended_fewer_workers();
	test_persistent_confirmed();
	test_gpu_floor();
	test_handoff_serial_with_the_gpu();
	test_json_rows();
	test_batch_scale();
	test_sweep_reader();
	test_queueing_model();
	test_queueing_curve();
	remove(path);
	CHECK_EXIT();
}
