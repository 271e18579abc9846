/*
 * test_memory.c - the memory analysis (analyzer/analysis/memory.h) and the
 * what-if's memory (whatif_memory.c) on synthetic runs whose MEM and MEMSYS
 * samples follow from tgsim's parameters: a worker that copies the
 * training process's pages as it reads them (S = 200 MiB reachable, r =
 * 1 MiB a batch at first, 12 us a page) against one that copies nothing;
 * the fitted touch model and copy cost; the figures a worker count needs
 * and whether they fit a memory cgroup's limit, the curve's best and the
 * recommendation kept to what fits; a sibling's exit and a lone
 * smaps_rollup taken for no copies; the kernel CPU of the copies at more
 * workers; and each way a run dies named: an OOM kill from the cgroup's
 * count, a bus error in /dev/shm, a fetch's exception, a training process
 * gone without exiting.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/verdict.h"
#include "analysis/whatif.h"
#include "check.h"
#include "gpu/gpu.h"
#include "model/model.h"
#include "report/report.h"
#include "tgsim.h"
#include "trace/reader.h"

static char path[] = "/tmp/dlbn-test-memory-XXXXXX";

struct result {
	struct dlbn_analysis a;
	struct dlbn_whatif w;
};

/* Analyse p's run; r->a keeps its scalar figures (workers freed). */
static void run(const struct tgsim_params *p, struct result *r)
{
	char err[256];
	struct dlbn_model_opts mo;
	struct dlbn_verdict_opts vo;
	struct dlbn_model m;
	if (tgsim_write(path, p, NULL) != 0)
		exit(2);
	struct dlbn_reader *rd = dlbn_reader_open(path, err, sizeof(err));
	if (!rd)
		exit(2);
	dlbn_gpu_model_opts(&mo);
	dlbn_verdict_default_opts(&vo);
	if (dlbn_model_build(&m, rd, &mo) != 0 ||
	    dlbn_analyze_gpu(&m, dlbn_reader_stats(rd), &vo, &m.gpu, &r->a) != 0)
		exit(2);
	dlbn_whatif_compute(&m, &r->a, NULL, &r->w);
	dlbn_whatif_settle_advice(&r->w, &r->a);
	dlbn_analysis_free(&r->a);
	dlbn_model_free(&m);
	dlbn_reader_close(rd);
}

static int near(double got, double want, double rel)
{
	return fabs(got - want) <= rel * fabs(want);
}

static int has_line(char lines[][DLBN_LINE], size_t n, const char *what)
{
	for (size_t i = 0; i < n; i++)
		if (strstr(lines[i], what))
			return 1;
	return 0;
}

/* 2 workers sleeping most of each 100 ms batch (10 ms CPU), a 2 ms loop on
 * 2 CPUs; a training process of 300 MiB sharing 250 MiB with each worker. */
static void base(struct tgsim_params *p)
{
	tgsim_default(p);
	p->steps = 400;
	p->workers = 2;
	p->batch_ms = 100;
	p->sleep_ms = 90;
	p->loop_ms = 2;
	p->sched = 1;
	p->cpus = 2;
	p->mem_every = 2;
	p->mem_main_mib = 300;
	p->mem_shared_mib = 250;
	p->mem_base_mib = 4;
	p->mem_copy_us = 12;
}

static void copy_on_read(struct tgsim_params *p)
{
	base(p);
	p->mem_touch_mib = 200;
	p->mem_touch_kib = 1024;
}

static void test_copy_on_read(void)
{
	struct tgsim_params p;
	struct result r;
	copy_on_read(&p);
	run(&p, &r);
	const struct dlbn_memory *mem = &r.a.memory;
	CHECK(mem->present && mem->rollup && mem->has_main && mem->nworkers == 2,
	      "memory figures of the training process and 2 workers (%d %d %d %zu)", mem->present,
	      mem->rollup, mem->has_main, mem->nworkers);
	CHECK(near(mem->main.rss[1], 650, 0.02),
	      "training process RSS 650 MiB, its libraries' 100 included (%.1f)", mem->main.rss[1]);
	/* Held (anonymous): 300 of its own + 250 shared, each worker's own. */
	CHECK(near(mem->shared_mib, 250 - 2 * (200 * (1 - exp(-1.0))) / 3, 0.1) &&
		      near(mem->main_uss_mib, 300, 0.01),
	      "held memory: the training process's own 300 MiB (%.1f), the shared pages once "
	      "(%.1f), the libraries' file pages left out",
	      mem->main_uss_mib, mem->shared_mib);
	/* After ~200 batches each: 200 (1 - e^(-200/200)) = 126 MiB copied. */
	double copied = 200 * (1 - exp(-1.0 * 200 / 200));
	CHECK(mem->nrows == 2 &&
		      near(mem->workers[0].private_dirty[1] - mem->workers[0].private_dirty[0],
			   copied, 0.08),
	      "a worker's private pages grew ~%.0f MiB (%.1f)", copied,
	      mem->nrows ? mem->workers[0].private_dirty[1] - mem->workers[0].private_dirty[0]
			 : -1);
	CHECK(mem->cow, "copy-on-read named");
	CHECK(mem->touch_saturates && near(mem->touch_mib, 200, 0.25),
	      "the touch model's S from the slowdown: ~200 MiB (%.1f, seen %d)", mem->touch_mib,
	      mem->touch_saturates);
	CHECK(near(mem->touch_kib, 1024, 0.25), "and its r: ~1024 KiB a batch at first (%.0f)",
	      mem->touch_kib);
	CHECK(mem->copy_us_fitted && near(mem->copy_us, 12, 0.3),
	      "the kernel CPU a copied page costs, fitted: ~12 us (%.2f, fitted %d)", mem->copy_us,
	      mem->copy_us_fitted);
	CHECK(near(mem->copyable_mib, 250, 0.05), "what a worker could copy: 250 MiB (%.1f)",
	      mem->copyable_mib);
	CHECK(has_line(r.a.reasons, r.a.nreasons, "copy-on-read:"), "a copy-on-read reason");
	CHECK(has_line(r.a.recs, r.a.nrecs, "numpy"), "the fix: numpy arrays, Arrow, a buffer");
	CHECK(mem->failure == DLBN_FAIL_NONE, "no failure (%d)", mem->failure);
	/* Predicted memory: shared once + the training process's own + per
	 * worker base + all it reaches (an epoch of unknown length). */
	double need2 = dlbn_memory_need_mib(mem, 2, 1, NULL);
	double need4 = dlbn_memory_need_mib(mem, 4, 1, NULL);
	CHECK(need2 > 0 &&
		      near(need4 - need2, 2 * (4 + mem->touch_mib + mem->per_process_mib), 0.05),
	      "each worker more needs its base, its copies and what the cgroup charges a "
	      "process beyond them, %.1f MiB (%.0f -> %.0f)",
	      mem->per_process_mib, need2, need4);
	/* More workers each copy their own: more kernel CPU in a window. */
	double c2 = dlbn_memory_copy_ms(mem, 2), c8 = dlbn_memory_copy_ms(mem, 8);
	/* Over the run's 395 window steps: 2 workers reach 1 - e^-1 of S
	 * (~200 batches each), 8 only 1 - e^-0.25 (~50 each). */
	double k0 = 5, k1 = 400, S = mem->touch_mib, rr = mem->touch_kib / 1024;
	double want2 = 2 * S * (exp(-rr * k0 / 2 / S) - exp(-rr * k1 / 2 / S));
	double want8 = 8 * S * (exp(-rr * k0 / 8 / S) - exp(-rr * k1 / 8 / S));
	CHECK(c2 > 0 && near(c8 / c2, want8 / want2, 0.1),
	      "copies cost more CPU per step with 8 workers (%.2f -> %.2f ms, x%.2f; the model "
	      "x%.2f)",
	      c2, c8, c8 / c2, want8 / want2);
	CHECK(near(c2, want2 * 256 * mem->copy_us / 1000 / 395, 0.1),
	      "at 2: the copies of the window times their cost per step (%.2f)", c2);
}

/* The first smaps_rollup after a worker copied most of what it reads (the
 * recorder takes it a second into a life): its start is put back from its
 * faults, and the growth and the touch model come out as before. */
static void test_late_first_rollup(void)
{
	struct tgsim_params p;
	struct result r;
	copy_on_read(&p);
	p.mem_late_rollup = 20; /* sample 20 of every 2nd batch: 40 batches in */
	run(&p, &r);
	const struct dlbn_memory *mem = &r.a.memory;
	double copied = 200 * (1 - exp(-1.0 * 200 / 200));
	CHECK(mem->nrows == 2 &&
		      near(mem->workers[0].private_dirty[1] - mem->workers[0].private_dirty[0],
			   copied, 0.1),
	      "late first rollup: the growth since the start put back, ~%.0f MiB (%.1f)", copied,
	      mem->nrows ? mem->workers[0].private_dirty[1] - mem->workers[0].private_dirty[0]
			 : -1);
	CHECK(mem->cow && near(mem->worker_base_mib, 3.5, 0.2),
	      "copy-on-read named, a worker's own at its start ~3.5 MiB (%.2f)",
	      mem->worker_base_mib);
	CHECK(near(mem->touch_mib, 200, 0.3), "S still ~200 MiB (%.1f)", mem->touch_mib);
}

static void test_no_growth(void)
{
	struct tgsim_params p;
	struct result r;
	base(&p);
	run(&p, &r);
	const struct dlbn_memory *mem = &r.a.memory;
	CHECK(mem->present && !mem->cow, "numpy-like: no copy-on-read (%d)", mem->cow);
	CHECK(!has_line(r.a.reasons, r.a.nreasons, "copy-on-read:"), "and no such reason");
	CHECK(dlbn_memory_copy_ms(mem, 8) == 0, "no copy CPU");
	double need2 = dlbn_memory_need_mib(mem, 2, 1, NULL);
	double need3 = dlbn_memory_need_mib(mem, 3, 1, NULL);
	CHECK(near(need3 - need2 - mem->per_process_mib, 4, 0.2),
	      "a worker more needs its own 4 MiB and the cgroup's per process (%.1f)",
	      need3 - need2);
}

/* Shared pages that turn private as a sibling exits are no copies: the
 * worker that outlives the first to go sees 30 MiB more private pages at
 * its exit, with no fault; its growth is what it copied. */
static void test_sibling_exit(void)
{
	struct tgsim_params p;
	struct result r;
	copy_on_read(&p);
	p.mem_handed_mib = 30;
	run(&p, &r);
	const struct dlbn_memory *mem = &r.a.memory;
	double copied = 200 * (1 - exp(-1.0 * 200 / 200));
	CHECK(mem->nrows == 2, "2 worker rows (%zu)", mem->nrows);
	for (size_t i = 0; i < mem->nrows; i++) {
		const struct dlbn_mem_row *w = &mem->workers[i];
		CHECK(near(w->private_dirty[1] - w->private_dirty[0], copied, 0.1),
		      "worker %zu grew ~%.0f MiB, not the 30 handed over at a sibling's exit "
		      "(%.1f)",
		      i, copied, w->private_dirty[1] - w->private_dirty[0]);
	}
	CHECK(mem->cow && near(mem->touch_mib, 200, 0.3), "the touch model as before (%.1f)",
	      mem->touch_mib);
}

/* A worker with one smaps_rollup, a batch making 128 faults of its own
 * (its tensors, its shared memory) and copying nothing: its start and end
 * put from its faults take the quietest stretch's faults as a batch's own,
 * not as copies (~20 MiB over 40 batches). */
static void test_one_rollup(void)
{
	struct tgsim_params p;
	struct result r;
	base(&p);
	p.mem_batch_faults = 128;
	p.mem_late_rollup = 20;
	p.mem_rollups_max = 1;
	run(&p, &r);
	const struct dlbn_memory *mem = &r.a.memory;
	CHECK(!mem->cow, "one rollup, many faults a batch: no copy-on-read (%d, %.1f MiB)",
	      mem->cow, mem->cow_mib);
	for (size_t i = 0; i < mem->nrows; i++) {
		const struct dlbn_mem_row *w = &mem->workers[i];
		CHECK(fabs(w->private_dirty[1] - w->private_dirty[0]) < 2,
		      "worker %zu: no growth (%.1f -> %.1f MiB)", i, w->private_dirty[0],
		      w->private_dirty[1]);
	}
}

/* A 1400 MiB limit: the curve's best (many sleeping workers) does not fit. */
static void test_limit(void)
{
	struct tgsim_params p;
	struct result r;
	copy_on_read(&p);
	p.mem_limit_mib = 1400;
	run(&p, &r);
	const struct dlbn_memory *mem = &r.a.memory;
	const struct dlbn_whatif *w = &r.w;
	CHECK(near(mem->budget_mib, 1400, 0.001), "the job may hold the cgroup's 1400 MiB (%.0f)",
	      mem->budget_mib);
	CHECK(w->valid && w->fit_max >= 2, "the what-if knows what fits (%d)", w->fit_max);
	double need_max = dlbn_memory_need_mib(mem, w->fit_max, 1, NULL);
	double need_over = dlbn_memory_need_mib(mem, w->fit_max + 1, 1, NULL);
	CHECK(need_max <= 0.9 * 1400 && need_over > 0.9 * 1400,
	      "%d workers fit (%.0f MiB), %d do not (%.0f)", w->fit_max, need_max, w->fit_max + 1,
	      need_over);
	CHECK(w->best_workers <= w->fit_max && w->best_unfit > w->best_workers,
	      "the curve's best is the best that fits (%d; %d without the limit)", w->best_workers,
	      w->best_unfit);
	int rows_checked = 0, bad = 0;
	for (size_t i = 0; i < w->nrows; i++) {
		const struct dlbn_whatif_row *row = &w->rows[i];
		if (strcmp(row->setting, "num_workers") != 0)
			continue;
		rows_checked++;
		int should = row->value <= w->fit_max;
		if (row->fits != should ||
		    (!should && strcmp(row->limited_by, DLBN_LIMIT_MEMORY) != 0))
			bad++;
	}
	CHECK(rows_checked > w->fit_max && !bad,
	      "num_workers rows past %d: fits false, limited by memory (%d bad of %d)", w->fit_max,
	      bad, rows_checked);
	CHECK(r.a.advice.present && r.a.advice.to <= w->fit_max,
	      "the recommendation names a count that fits (%d)", r.a.advice.to);
	CHECK(r.a.advice.present && strstr(r.a.recs[r.a.advice.rec], "the most that fit: "),
	      "and says what stops it: %s", r.a.advice.present ? r.a.recs[r.a.advice.rec] : "");
	int cells = 0, unfit_best = 0;
	for (size_t i = 0; i < w->ngrid; i++) {
		cells += w->grid[i].fits == 0;
		if ((int)i == w->grid_best && w->grid[i].fits == 0)
			unfit_best = 1;
	}
	CHECK(cells > 0 && !unfit_best, "grid points that do not fit, none of them the best (%d)",
	      cells);
}

/* The run's own count does not fit a smaller limit: fewer are advised. */
static void test_run_does_not_fit(void)
{
	struct tgsim_params p;
	struct result r;
	copy_on_read(&p);
	p.workers = 4;
	p.mem_limit_mib = 1000;
	run(&p, &r);
	const struct dlbn_whatif *w = &r.w;
	CHECK(w->valid && w->fit_max >= 1 && w->fit_max < 4, "fewer than 4 fit (%d)", w->fit_max);
	CHECK(r.a.advice.present && r.a.advice.to <= w->fit_max && r.a.advice.to >= 1 &&
		      strstr(r.a.recs[r.a.advice.rec], "predicted not to fit"),
	      "advice: fewer workers, the run's own predicted not to fit (%d: %s)", r.a.advice.to,
	      r.a.advice.present ? r.a.recs[r.a.advice.rec] : "");
}

static void test_failures(void)
{
	struct tgsim_params p;
	struct result r;
	copy_on_read(&p);
	p.mem_limit_mib = 1200;
	p.mem_child_signal = 9;
	p.mem_oom_kills = 1;
	run(&p, &r);
	CHECK(r.a.memory.failure == DLBN_FAIL_OOM &&
		      strstr(r.a.memory.failure_line, "out of memory") &&
		      strstr(r.a.memory.failure_line, "SIGKILL") &&
		      strstr(r.a.memory.failure_line, "1200 MiB"),
	      "a worker SIGKILLed with the cgroup's OOM count up: out of memory (%s)",
	      r.a.memory.failure_line);
	CHECK(strstr(r.a.memory.failure_detail, "memory before it"), "with the memory before (%s)",
	      r.a.memory.failure_detail);

	copy_on_read(&p);
	p.mem_child_signal = 9;
	run(&p, &r);
	CHECK(r.a.memory.failure == DLBN_FAIL_KILLED,
	      "SIGKILL, no OOM count, room: killed (%d: %s)", r.a.memory.failure,
	      r.a.memory.failure_line);

	copy_on_read(&p);
	p.mem_child_signal = 7;
	p.mem_shm_mib = 64;
	run(&p, &r);
	CHECK(r.a.memory.failure == DLBN_FAIL_SHM && strstr(r.a.memory.failure_line, "/dev/shm") &&
		      strstr(r.a.memory.failure_line, "SIGBUS"),
	      "SIGBUS: out of /dev/shm (%s)", r.a.memory.failure_line);
	CHECK(strstr(r.a.memory.failure_detail, "/dev/shm 63 of 64 MiB free"),
	      "the /dev/shm figures before it (%s)", r.a.memory.failure_detail);

	copy_on_read(&p);
	p.mem_note = "RuntimeError: unable to allocate shared memory(shm) for file "
		     "</torch_1_2_3>: Success (0)";
	run(&p, &r);
	CHECK(r.a.memory.failure == DLBN_FAIL_SHM && strstr(r.a.memory.failure_line, "raised"),
	      "torch 2.x's allocation error: out of /dev/shm (%s)", r.a.memory.failure_line);

	copy_on_read(&p);
	p.mem_note = "ValueError: bad sample";
	run(&p, &r);
	CHECK(r.a.memory.failure == DLBN_FAIL_ERROR &&
		      strstr(r.a.memory.failure_line, "bad sample"),
	      "another exception: the loader raised (%s)", r.a.memory.failure_line);

	copy_on_read(&p);
	p.mem_limit_mib = 1200;
	p.mem_oom_kills = 1;
	p.mem_no_main_exit = 1;
	run(&p, &r);
	CHECK(r.a.memory.failure == DLBN_FAIL_OOM &&
		      strstr(r.a.memory.failure_line, "training process") &&
		      strstr(r.a.memory.failure_line, "without exiting"),
	      "the training process gone, the OOM count up: out of memory (%s)",
	      r.a.memory.failure_line);
}

/* The JSON members: memory, failure, and the rows' memory and fit. */
static void test_json(void)
{
	struct tgsim_params p;
	char err[256];
	copy_on_read(&p);
	p.mem_limit_mib = 1200;
	if (tgsim_write(path, &p, NULL) != 0)
		exit(2);
	struct dlbn_reader *rd = dlbn_reader_open(path, err, sizeof(err));
	struct dlbn_model_opts mo;
	struct dlbn_verdict_opts vo;
	struct dlbn_model m;
	struct dlbn_analysis a;
	static struct dlbn_whatif w;
	dlbn_gpu_model_opts(&mo);
	dlbn_verdict_default_opts(&vo);
	if (!rd || dlbn_model_build(&m, rd, &mo) != 0 ||
	    dlbn_analyze_gpu(&m, dlbn_reader_stats(rd), &vo, &m.gpu, &a) != 0)
		exit(2);
	dlbn_whatif_compute(&m, &a, NULL, &w);
	char *buf = NULL;
	size_t len = 0;
	FILE *out = open_memstream(&buf, &len);
	struct dlbn_report_input in = {.path = path,
				       .rs = dlbn_reader_stats(rd),
				       .m = &m,
				       .a = &a,
				       .gpu = &m.gpu,
				       .whatif = &w};
	dlbn_report_json(out, &in);
	fclose(out);
	CHECK(strstr(buf, "\"memory\":{\"smaps_rollup\":true"), "JSON memory");
	CHECK(strstr(buf, "\"copy_on_write\":{\"named\":true"), "JSON copy_on_write named");
	CHECK(strstr(buf, "\"limit_mib\":1200"), "JSON job limit_mib 1200");
	CHECK(strstr(buf, "\"failure\":null"), "JSON failure null");
	CHECK(strstr(buf, "\"fits\":false") && strstr(buf, "\"fits\":true") &&
		      strstr(buf, "\"predicted_memory_mib\":") &&
		      strstr(buf, "\"limited_by\":\"memory\""),
	      "JSON what-if rows with their memory and fit");
	CHECK(strstr(buf, "\"memory_budget_mib\":1200") && strstr(buf, "\"most_that_fit\":"),
	      "JSON what-if basis: the budget and the most that fit");
	free(buf);
	dlbn_analysis_free(&a);
	dlbn_model_free(&m);
	dlbn_reader_close(rd);
}

int main(void)
{
	int fd = mkstemp(path);
	if (fd < 0)
		return 2;
	test_copy_on_read();
	test_late_first_rollup();
	test_no_growth();
	test_sibling_exit();
	test_one_rollup();
	test_limit();
	test_run_does_not_fit();
	test_failures();
	test_json();
	remove(path);
	CHECK_EXIT();
}
