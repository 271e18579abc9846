/*
 * test_outside.c - loading costs outside the loader waits (outside.h):
 * after each batch's arrival the loop drops the previous batch, queues for
 * a CPU and faults the new batch's pages in, all before the step's GPU
 * work.  Replay removes them; dlbn charges them to the stall whole on a
 * CPU-only run, as far as the GPU sat idle in the same loop period on a
 * GPU run (all of them when the GPU drained in the wait, none when the
 * GPU's own step outlasts the loop), and the first touch only up to what
 * pages of the batches' shared memory can cost.  Figures follow from tgsim's
 * parameters (tests/unit/tgsim.h).
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
#include "tgsim.h"
#include "analysis/verdict.h"

static char path[] = "/tmp/dlbn-test-outside-XXXXXX";

static void run(const struct tgsim_params *p, struct dlbn_analysis *a)
{
	char err[256];
	struct dlbn_model_opts mo;
	struct dlbn_verdict_opts vo;
	struct dlbn_model m;
	if (tgsim_write(path, p, NULL) != 0)
		exit(2);
	struct dlbn_reader *r = dlbn_reader_open(path, err, sizeof(err));
	if (!r)
		exit(2);
	dlbn_gpu_model_opts(&mo);
	dlbn_verdict_default_opts(&vo);
	if (dlbn_model_build(&m, r, &mo) != 0)
		exit(2);
	struct dlbn_gpu g = m.gpu;
	if (dlbn_analyze_gpu(&m, dlbn_reader_stats(r), &vo, &g, a) != 0)
		exit(2);
	const struct dlbn_outside *o = &a->outside;
	printf("# %s %.3f stall %.3f exposed %.3f wall %.3f | known %d rule %s periods %zu "
	       "free %.4f runq %.4f touch %.4f cpu %.4f charged %.4f (%.4f %.4f %.4f) "
	       "gpu idle %.4f refill %.4f other %.4f\n",
	       dlbn_verdict_name(a->verdict), a->predicted_speedup, a->stall_s, a->exposed_s,
	       a->wall_s, o->known, o->gpu_rule ? "gpu" : "cpu", o->steps, o->free_s, o->runq_s,
	       o->touch_s, o->cpu_s, o->charged_s, o->charged_free_s, o->charged_runq_s,
	       o->charged_touch_s, o->gpu_idle_s, o->refill_s, o->other_host_s);
	dlbn_analysis_free(a); /* the scalar figures stay readable */
	dlbn_model_free(&m);
	dlbn_reader_close(r);
}

/* Workers that keep up (20 ms a batch, 4 of them, loop 10 ms): the waits
 * are short and the costs after the arrival are most of the loss. */
static void base(struct tgsim_params *p)
{
	tgsim_default(p);
	p->workers = 4;
	p->batch_ms = 20;
	p->loop_ms = 10;
	p->lead_free_ms = 3;
	p->lead_runq_ms = 2;
	p->lead_touch_ms = 1;
	p->shm_kib = 4096; /* 2 x 4 MiB: first touch at most 4.2 ms a step */
}

static int near(double got, double want, double rel)
{
	return fabs(got - want) <= rel * fabs(want) + 1e-6;
}

static void test_cpu_only_whole(void)
{
	struct tgsim_params p;
	struct dlbn_analysis a;
	base(&p);
	run(&p, &a);
	const struct dlbn_outside *o = &a.outside;
	double n = (double)a.steps_window;
	CHECK(o->known && !o->gpu_rule, "cpu-only: counters known, CPU rule");
	CHECK(o->steps == a.steps_window, "cpu-only: one lead per window step (%zu, %zu)", o->steps,
	      a.steps_window);
	CHECK(near(o->free_s, n * 0.003, 0.01), "cpu-only: batch drop %.4f, want %.4f", o->free_s,
	      n * 0.003);
	CHECK(near(o->runq_s, n * 0.002, 0.01), "cpu-only: queueing %.4f, want %.4f", o->runq_s,
	      n * 0.002);
	CHECK(near(o->touch_s, n * 0.001, 0.01), "cpu-only: first touch %.4f, want %.4f",
	      o->touch_s, n * 0.001);
	CHECK(near(o->cpu_s, n * 0.010, 0.01), "cpu-only: own work %.4f, want %.4f (kept)",
	      o->cpu_s, n * 0.010);
	CHECK(near(o->charged_s, n * 0.006, 0.01), "cpu-only: all 6 ms a step charged (%.4f)",
	      o->charged_s);
	CHECK(near(a.stall_s, a.exposed_s + o->charged_s, 1e-6),
	      "cpu-only: stall = exposed wait + charged (%.4f, %.4f + %.4f)", a.stall_s,
	      a.exposed_s, o->charged_s);
	CHECK(near(a.predicted_speedup, a.wall_s / (a.wall_s - a.stall_s), 1e-6),
	      "cpu-only: the prediction includes the charge");
}

static void test_first_touch_bounded_by_pages(void)
{
	struct tgsim_params p;
	struct dlbn_analysis a;
	base(&p);
	p.shm_kib = 128; /* 2 x 32 pages: at most 128 us a step */
	run(&p, &a);
	double n = (double)a.steps_window;
	double cap = n * 2 * 32 * DLBN_FIRST_TOUCH_NS_PER_PAGE_MAX / 1e9;
	CHECK(near(a.outside.touch_s, cap, 0.01),
	      "small batches: first touch capped by the pages mapped (%.5f, cap %.5f)",
	      a.outside.touch_s, cap);
	CHECK(near(a.outside.cpu_s, n * 0.011 - cap, 0.01),
	      "small batches: the rest of the kernel time is the loop's own (%.4f)",
	      a.outside.cpu_s);
}

static void test_gpu_drained_all_charged(void)
{
	struct tgsim_params p;
	struct dlbn_analysis a;
	base(&p);
	p.gpu_ms = 4; /* done well before the next wait: idle in every wait */
	run(&p, &a);
	const struct dlbn_outside *o = &a.outside;
	double n = (double)a.steps_window;
	CHECK(o->known && o->gpu_rule, "gpu drained: GPU rule");
	CHECK(o->gpu_steps == o->steps, "gpu drained: GPU idle known in every lead (%zu/%zu)",
	      o->gpu_steps, o->steps);
	/* The GPU is idle from the arrival to the launch after the costs. */
	CHECK(o->gpu_idle_s >= n * 0.006, "gpu drained: idle after arrival %.4f >= %.4f",
	      o->gpu_idle_s, n * 0.006);
	CHECK(near(o->charged_s, n * 0.006, 0.01),
	      "gpu drained: all costs charged (%.4f, want %.4f)", o->charged_s, n * 0.006);
	CHECK(near(o->charged_free_s, n * 0.003, 0.01) &&
		      near(o->charged_runq_s, n * 0.002, 0.01) &&
		      near(o->charged_touch_s, n * 0.001, 0.02),
	      "gpu drained: split by cost (%.4f %.4f %.4f)", o->charged_free_s, o->charged_runq_s,
	      o->charged_touch_s);
}

/* loss.item() right after the kernel: the sync shows the GPU drained
 * 4 ms into the loop's 10 ms of own work, which the probe at the next
 * wait (the GPU idle by then) cannot show.  That idle time is other host
 * work, kept by Replay: not charged. */
static void test_sync_shows_drain(void)
{
	struct tgsim_params p;
	struct dlbn_analysis a, plain;
	base(&p);
	p.gpu_ms = 4;
	run(&p, &plain);
	p.drain_sync = 1;
	run(&p, &a);
	const struct dlbn_outside *o = &a.outside;
	double n = (double)a.steps_window;
	CHECK(plain.outside.other_host_s < 0.01 * n * 0.001,
	      "no sync: the drain before the wait is not seen (other host %.4f)",
	      plain.outside.other_host_s);
	CHECK(o->other_host_s > n * 0.0055, "sync: other host work after the drain %.4f (>= %.4f)",
	      o->other_host_s, n * 0.0055);
	CHECK(near(o->charged_s, n * 0.006, 0.01),
	      "sync: the loading costs are charged as before (%.4f)", o->charged_s);
	CHECK(near(a.predicted_speedup, plain.predicted_speedup, 0.001),
	      "sync: the prediction does not change (%.3f, %.3f)", a.predicted_speedup,
	      plain.predicted_speedup);
}

/* loss.item() as cuStreamSynchronize, returning 2 ms after the GPU is
 * done (the loop thread queued for a CPU on a saturated machine).  From
 * the sync's return alone those 2 ms look like GPU work; the sync's drain
 * event shows them idle. */
static void test_sync_drain_event(void)
{
	struct tgsim_params p;
	struct dlbn_analysis on_time, late, shown;
	base(&p);
	p.gpu_ms = 4;
	p.drain_sync = 2;
	run(&p, &on_time);
	p.sync_late_ms = 2;
	run(&p, &late);
	p.sync_drain_event = 1;
	run(&p, &shown);
	double n = (double)shown.steps_window;
	CHECK(near(on_time.outside.other_host_s, n * 0.006, 0.05),
	      "stream sync on time: its return shows the drain (other host %.4f)",
	      on_time.outside.other_host_s);
	CHECK(near(late.outside.other_host_s, on_time.outside.other_host_s - n * 0.002, 0.05),
	      "late return without the drain event: 2 ms a step look busy (other host %.4f)",
	      late.outside.other_host_s);
	CHECK(near(shown.outside.other_host_s, on_time.outside.other_host_s, 0.01),
	      "drain event: the GPU idle from its own completion (other host %.4f, want %.4f)",
	      shown.outside.other_host_s, on_time.outside.other_host_s);
}

static void test_gpu_busy_nothing_charged(void)
{
	struct tgsim_params p;
	struct dlbn_analysis a;
	base(&p);
	p.gpu_ms = 40; /* the GPU's step outlasts wait and loop: never idle */
	run(&p, &a);
	const struct dlbn_outside *o = &a.outside;
	CHECK(o->known && o->gpu_rule, "gpu bound: GPU rule");
	CHECK(o->gpu_idle_s < 0.001, "gpu bound: no GPU idle after arrivals (%.4f)", o->gpu_idle_s);
	CHECK(o->charged_s < 0.001, "gpu bound: nothing charged (%.4f)", o->charged_s);
	CHECK(a.verdict == DLBN_VERDICT_NOT_DETECTED, "gpu bound: NOT_DETECTED (%s %.3f)",
	      dlbn_verdict_name(a.verdict), a.predicted_speedup);
}

/*
 * Non-persistent workers started again every epoch, by a loop that leaves
 * each iterator after its last batch (no StopIteration, as Lightning's
 * limit_train_batches does): the previous arrival is known when the next
 * iter() starts 200 ms of worker start-up.  That time is the first fetch's
 * wait; the lead before it ends at the iter(), so neither its wall time,
 * its kernel time (a fork's, not a first touch) nor the GPU's idle time in
 * it count twice.
 */
static void test_worker_start_up_not_in_lead(void)
{
	struct tgsim_params p;
	struct dlbn_analysis one, four, bare;
	base(&p);
	p.gpu_ms = 4;
	p.steps = 160;
	run(&p, &one);
	p.epochs = 4;
	p.abandon_epochs = 1;
	p.startup_ms = 200;
	run(&p, &four);
	p.iter_marks_bare = 1;
	run(&p, &bare);
	const struct dlbn_outside *o1 = &one.outside, *o4 = &four.outside, *ob = &bare.outside;
	CHECK(o4->known && o4->steps == four.steps_window,
	      "start-ups: every lead known, ending at its iter() (%zu of %zu)", o4->steps,
	      four.steps_window);
	CHECK(ob->known && ob->steps == bare.steps_window - 3,
	      "iter() marks without counters: the 3 leads before a start-up unknown (%zu of %zu)",
	      ob->steps, bare.steps_window);
	const struct dlbn_outside *v[] = {o4, ob};
	for (int k = 0; k < 2; k++) {
		const char *what = k ? "bare iter() marks" : "start-ups";
		double n = (double)v[k]->steps, n1 = (double)o1->steps;
		CHECK(near(v[k]->wall_s / n, o1->wall_s / n1, 0.05),
		      "%s: lead %.2f ms a period, %.2f ms without start-ups", what,
		      v[k]->wall_s / n * 1e3, o1->wall_s / n1 * 1e3);
		CHECK(near(v[k]->touch_s / n, o1->touch_s / n1, 0.05),
		      "%s: first touch %.3f ms a period, %.3f ms without start-ups", what,
		      v[k]->touch_s / n * 1e3, o1->touch_s / n1 * 1e3);
		CHECK(v[k]->gpu_steps == v[k]->steps,
		      "%s: GPU idle known in every lead (%zu of %zu)", what, v[k]->gpu_steps,
		      v[k]->steps);
		CHECK(near(v[k]->gpu_idle_s / n, o1->gpu_idle_s / n1, 0.05),
		      "%s: GPU idle after arrivals %.2f ms a period, %.2f ms without start-ups",
		      what, v[k]->gpu_idle_s / n * 1e3, o1->gpu_idle_s / n1 * 1e3);
	}
	/* The start-ups are the waits' (3 x 203 ms), charged once. */
	CHECK(four.stall_s - one.stall_s > 0.55 && four.stall_s - one.stall_s < 0.7,
	      "start-ups: in the stall once (%.3f s more than one epoch)",
	      four.stall_s - one.stall_s);
}

/*
 * A wrapper iterable works 4 ms on each batch before the loop gets it
 * (HANDOFF marks).  Replay of what the loop iterates removes it: whole on
 * a CPU-only run, and on a GPU run when the GPU drained in the wait; not
 * when the GPU's step outlasts the period.  The other costs are counted
 * from the hand-off, so none is counted twice.
 */
/* Four epochs, each ended by a fetch that raises StopIteration: the
 * loop's work on an epoch's last batch is the lead of the next epoch's
 * first step (that step has no arrival of its own before it), so every
 * window step has one and the queueing in all of them is charged. */
static void test_epoch_end_lead(void)
{
	struct tgsim_params p;
	struct dlbn_analysis a;
	base(&p);
	p.steps = 160;
	p.epochs = 4;
	p.stop_fetch_ms = 0.5;
	run(&p, &a);
	const struct dlbn_outside *o = &a.outside;
	double n = (double)a.steps_window;
	CHECK(o->known && o->steps == a.steps_window,
	      "epoch ends: one lead per window step, after a StopIteration too (%zu of %zu)",
	      o->steps, a.steps_window);
	CHECK(near(o->runq_s, n * 0.002, 0.01), "epoch ends: queueing %.4f, want %.4f", o->runq_s,
	      n * 0.002);
	CHECK(near(o->charged_s, n * 0.006, 0.01), "epoch ends: all 6 ms a step charged (%.4f)",
	      o->charged_s);
}

static void test_wrapper_part(void)
{
	struct tgsim_params p;
	struct dlbn_analysis cpu, plain, drained, busy;
	base(&p);
	run(&p, &plain);
	p.lead_wrap_ms = 4;
	run(&p, &cpu);
	double n = (double)cpu.steps_window;
	const struct dlbn_outside *o = &cpu.outside;
	CHECK(o->wrapped == o->steps && o->steps == cpu.steps_window,
	      "wrapper: a hand-off in every period (%zu of %zu)", o->wrapped, o->steps);
	CHECK(near(o->wrap_s, n * 0.004, 0.02), "wrapper: %.4f s, want %.4f", o->wrap_s, n * 0.004);
	CHECK(near(o->charged_wrap_s, o->wrap_s, 1e-6), "wrapper, cpu-only: charged whole");
	CHECK(near(o->cpu_s, plain.outside.cpu_s, 0.01) && near(o->free_s, n * 0.003, 0.01) &&
		      near(o->touch_s, n * 0.001, 0.01),
	      "wrapper: own work %.4f, drop %.4f, touch %.4f as without it (counted from the "
	      "hand-off)",
	      o->cpu_s, o->free_s, o->touch_s);
	CHECK(near(o->charged_s, n * 0.010, 0.01), "wrapper, cpu-only: 4 + 6 ms a step (%.4f)",
	      o->charged_s);
	p.gpu_ms = 4;
	run(&p, &drained);
	o = &drained.outside;
	CHECK(o->gpu_rule && near(o->charged_wrap_s, n * 0.004, 0.02),
	      "wrapper, GPU drained: charged %.4f, want %.4f", o->charged_wrap_s, n * 0.004);
	CHECK(near(o->charged_s, n * 0.010, 0.02), "wrapper, GPU drained: all 10 ms (%.4f)",
	      o->charged_s);
	p.gpu_ms = 40;
	run(&p, &busy);
	CHECK(busy.outside.wrapped == busy.outside.steps && busy.outside.charged_wrap_s < 0.001,
	      "wrapper, GPU bound: timed, not charged (%.4f)", busy.outside.charged_wrap_s);
}

static void test_without_counters(void)
{
	struct tgsim_params p;
	struct dlbn_analysis a;
	base(&p);
	p.lead_free_ms = p.lead_runq_ms = p.lead_touch_ms = 0;
	run(&p, &a);
	CHECK(!a.outside.known && a.outside.charged_s == 0,
	      "marks without counters (older recorder): nothing known, nothing charged");
	CHECK(near(a.stall_s, a.exposed_s, 1e-6), "without counters: stall = exposed wait");
}

/*
 * A model on the CPU: its intra-op threads besides the loop's queue for a
 * CPU while the workers run (shared_cores.h).  The loop's own CPU time
 * holds what waiting for them cost: the union of the model threads' times
 * off a CPU while the loop ran (each one's queueing in the loop periods,
 * the periods' share of the census's span, bounded by the periods' wall
 * time less its own run time there), less the loop's own queueing.  With
 * 64 CPUs the 4 workers never hold every core: the times off never
 * overlap and add up.  A logger thread that runs 1% of the loop's time is
 * not the model's.
 */
static void test_model_threads_slowed(void)
{
	struct tgsim_params p;
	struct dlbn_analysis plain, a;
	base(&p);
	p.sched = 1;
	p.cpus = 64;
	run(&p, &plain);
	p.model_threads = 1;
	p.model_runq = 0.1; /* 1.1 ms queued a step: under the 2 ms bound */
	run(&p, &a);
	const struct dlbn_outside *o = &a.outside;
	const struct dlbn_shared_cores *c = &o->cores;
	double n = (double)a.steps_window;
	CHECK(c->known && c->applies && c->gang == 1,
	      "model threads: one found besides the loop's, logger aside (known %d applies %d "
	      "gang %zu threads %zu)",
	      c->known, c->applies, c->gang, c->threads);
	CHECK(c->threads == 2 && c->intraop_threads == 2,
	      "model threads: the census saw 2 threads; intraop_threads %d", c->intraop_threads);
	CHECK(c->all_cores_busy == 0, "model threads: 4 workers cannot hold 64 cores (%.3f)",
	      c->all_cores_busy);
	/* The census spans the periods and the short receives between them. */
	double share = o->wall_s / c->gang_threads[0].span_s;
	CHECK(share > 0.85 && share <= 1, "model threads: the periods' share of the census %.3f",
	      share);
	CHECK(near(o->slowed_s, n * 0.010 / 9 * share, 0.03),
	      "model threads: its queueing in the periods is what the loop waited (%.4f, want "
	      "%.4f)",
	      o->slowed_s, n * 0.010 / 9 * share);
	CHECK(near(c->gang_threads[0].off_s, o->slowed_s, 1e-9), "model threads: off %.4f",
	      c->gang_threads[0].off_s);
	CHECK(near(o->charged_s, plain.outside.charged_s + o->slowed_s, 0.01),
	      "model threads: charged whole on a CPU-only run (%.4f = %.4f + %.4f)", o->charged_s,
	      plain.outside.charged_s, o->slowed_s);
	CHECK(a.predicted_speedup > plain.predicted_speedup * 1.01,
	      "model threads: the prediction grows (%.3f, without %.3f)", a.predicted_speedup,
	      plain.predicted_speedup);
	CHECK(a.census_threads == 2 && a.cpus_used > plain.cpus_used,
	      "model threads: their CPU counts in use (%zu threads, %.2f > %.2f CPUs)",
	      a.census_threads, a.cpus_used, plain.cpus_used);
}

/* Queued longer than the loop could have waited for them: 10 ms a step
 * each, while a loop period of 16 ms holds its 10 ms of run time, so each
 * thread's time off is bounded by the periods' wall time less its run time
 * in them.  Without the cores in the CONFIG the workers may hold all of
 * them: the four times off (the loop's own 2 ms a step among them) are
 * taken as independent, their union R x (1 - (1 - 2/R)(1 - off/R)^3) over
 * the loop's runnable time R, beyond the loop's own queueing. */
static void test_model_threads_three(void)
{
	struct tgsim_params p;
	struct dlbn_analysis a;
	base(&p);
	p.model_threads = 3;
	p.model_runq = 0.5; /* 10 ms queued a step each */
	run(&p, &a);
	const struct dlbn_outside *o = &a.outside;
	const struct dlbn_shared_cores *c = &o->cores;
	const struct dlbn_gang_thread *g = &c->gang_threads[0];
	double n = (double)a.steps_window;
	double share = o->wall_s / g->span_s;
	double off = o->wall_s - n * 0.010 * share, runnable = o->cpu_s + o->runq_s;
	double want = runnable * (1 - (1 - o->runq_s / runnable) * pow(1 - off / runnable, 3)) -
		      o->runq_s;
	CHECK(c->gang == 3 && c->all_cores_busy == 1,
	      "three model threads: all found (%zu), cores unknown (%.3f)", c->gang,
	      c->all_cores_busy);
	CHECK(share > 0.85 && share <= 1 && near(o->wall_s, n * 0.016, 0.03),
	      "three model threads: 16 ms periods (%.4f s), %.3f of the census", o->wall_s, share);
	CHECK(near(g->off_s, off, 0.03) && g->off_s < g->runq_s * share,
	      "three model threads: each off %.4f, the bound %.4f (queued %.4f)", g->off_s, off,
	      g->runq_s * share);
	CHECK(near(a.outside.slowed_s, want, 0.03),
	      "three model threads: independent times off (%.4f, want %.4f)", a.outside.slowed_s,
	      want);
	CHECK(!strcmp(dlbn_cause_name(a.cause), "cpu_contention"), "three model threads: cause %s",
	      dlbn_cause_name(a.cause));
}

/*
 * The model's thread also queues 5 ms in each fetch wait (an OpenMP
 * thread spinning on while the workers hold the cores), 1.1 ms in each
 * loop period.  With a census at each batch's arrival as well as at the
 * next fetch begin, the periods are bounded and the loop waited for the
 * thread's queueing in them only; from censuses at fetch begins alone the
 * waits' queueing lands in the periods' share of the span.
 */
static void test_model_threads_periods_bounded(void)
{
	struct tgsim_params p;
	struct dlbn_analysis a, begins_only;
	base(&p);
	p.sched = 1;
	p.cpus = 64;
	p.model_threads = 1;
	p.model_runq = 0.1;
	p.model_wait_runq_ms = 5;
	run(&p, &begins_only);
	p.census_arrival = 1;
	run(&p, &a);
	const struct dlbn_outside *o = &a.outside;
	const struct dlbn_gang_thread *g = &o->cores.gang_threads[0];
	double n = (double)a.steps_window;
	CHECK(o->cores.gang == 1 && g->periods + 1 >= (size_t)n &&
		      near(g->period_wall_s, o->wall_s, 0.1),
	      "bounded periods: %zu of %.0f, %.4f s of the periods' %.4f", g->periods, n,
	      g->period_wall_s, o->wall_s);
	CHECK(near(o->slowed_s, n * 0.010 / 9, 0.03),
	      "bounded periods: the loop waited for the queueing in the periods (%.4f, want %.4f)",
	      o->slowed_s, n * 0.010 / 9);
	CHECK(begins_only.outside.slowed_s > 3 * o->slowed_s,
	      "bounded periods: from fetch begins alone the waits' queueing counts (%.4f, %.4f)",
	      begins_only.outside.slowed_s, o->slowed_s);
	CHECK(begins_only.outside.cores.gang_threads[0].periods == 0,
	      "bounded periods: none from fetch begins alone (%zu)",
	      begins_only.outside.cores.gang_threads[0].periods);
}

/* The model's threads never queued: nothing slowed, and the run is the
 * one without them. */
static void test_model_threads_unhindered(void)
{
	struct tgsim_params p;
	struct dlbn_analysis plain, a;
	base(&p);
	run(&p, &plain);
	p.model_threads = 1;
	run(&p, &a);
	CHECK(a.outside.cores.gang == 1 && a.outside.slowed_s < 1e-9,
	      "unhindered model threads: slowed %.4f", a.outside.slowed_s);
	CHECK(near(a.predicted_speedup, plain.predicted_speedup, 1e-6),
	      "unhindered model threads: the prediction does not move (%.4f, %.4f)",
	      a.predicted_speedup, plain.predicted_speedup);
}

/*
 * The loop waits 8 ms a period for the interpreter's lock.  A loader
 * whose threads live in the training process (torchdata.nodes' thread
 * workers) held it: Replay removes the wait, charged whole on a CPU-only
 * run.  Behind torch's DataLoader the holders are the program's other
 * threads: kept, the loop period longer by the wait.  (tgsim's runs have
 * worker processes: the cause, gil_contention, is an e2e test's.)
 */
#define NODES_THREADS ";kind=nodes;worker_method=thread"

static void test_gil_loader_charged(void)
{
	struct tgsim_params p;
	struct dlbn_analysis plain, a;
	base(&p);
	p.config_extra = NODES_THREADS;
	run(&p, &plain);
	p.lead_gil_ms = 8;
	run(&p, &a);
	const struct dlbn_outside *o = &a.outside;
	double n = (double)a.steps_window;
	CHECK(near(o->gil_s, n * 0.008, 0.01) && near(o->gil_loader_s, o->gil_s, 1e-9),
	      "gil, nodes threads: the wait is the loader's (%.4f of %.4f, want %.4f)",
	      o->gil_loader_s, o->gil_s, n * 0.008);
	CHECK(!o->gil_why_kept[0], "gil, nodes threads: nothing kept (%s)", o->gil_why_kept);
	CHECK(near(o->charged_gil_s, o->gil_s, 1e-9) &&
		      near(o->charged_s, plain.outside.charged_s + o->gil_s, 0.01),
	      "gil, nodes threads: charged whole on a CPU-only run (%.4f = %.4f + %.4f)",
	      o->charged_s, plain.outside.charged_s, o->gil_s);
	CHECK(near(o->cpu_s, plain.outside.cpu_s, 1e-6),
	      "gil, nodes threads: the loop's own CPU time unchanged (%.4f, %.4f)", o->cpu_s,
	      plain.outside.cpu_s);
	CHECK(a.predicted_speedup > plain.predicted_speedup * 1.05,
	      "gil, nodes threads: the prediction grows (%.3f, without %.3f)", a.predicted_speedup,
	      plain.predicted_speedup);
}

static void test_gil_dataloader_kept(void)
{
	struct tgsim_params p;
	struct dlbn_analysis plain, a;
	base(&p);
	run(&p, &plain);
	p.lead_gil_ms = 8;
	run(&p, &a);
	const struct dlbn_outside *o = &a.outside;
	CHECK(o->gil_s > 0 && o->gil_loader_s == 0 && o->charged_gil_s == 0,
	      "gil, DataLoader: seen (%.4f), not charged (%.4f)", o->gil_s, o->charged_gil_s);
	CHECK(strstr(o->gil_why_kept, "DataLoader") != NULL, "gil, DataLoader: why kept: %s",
	      o->gil_why_kept);
	CHECK(near(o->charged_s, plain.outside.charged_s, 1e-6),
	      "gil, DataLoader: the charge does not move (%.4f, %.4f)", o->charged_s,
	      plain.outside.charged_s);
	CHECK(a.predicted_speedup < plain.predicted_speedup,
	      "gil, DataLoader: the same stall in a longer period (%.3f < %.3f)",
	      a.predicted_speedup, plain.predicted_speedup);
}

/* The census saw the process's other threads run 10.1 ms a period: the
 * lock's holders cannot have held it longer than that. */
static void test_gil_bounded_by_census(void)
{
	struct tgsim_params p;
	struct dlbn_analysis a;
	base(&p);
	p.config_extra = NODES_THREADS;
	p.model_threads = 1;
	p.lead_gil_ms = 15;
	run(&p, &a);
	const struct dlbn_outside *o = &a.outside;
	double census = a.outside.cores.threads_run_s;
	CHECK(census > 0 && o->gil_s > census * 1.2,
	      "gil bound: the wait (%.4f) outlasts the census' CPU (%.4f)", o->gil_s, census);
	CHECK(near(o->gil_loader_s, census, 0.01),
	      "gil bound: the loader's part is the census' CPU (%.4f, %.4f)", o->gil_loader_s,
	      census);
}

/* With a GPU: as far as it sat idle.  A GPU step longer than the loop
 * period leaves no idle time to charge. */
static void test_gil_gpu_busy(void)
{
	struct tgsim_params p;
	struct dlbn_analysis a;
	base(&p);
	p.config_extra = NODES_THREADS;
	p.lead_gil_ms = 8;
	p.gpu_ms = 4;
	run(&p, &a);
	double n = (double)a.steps_window;
	CHECK(a.outside.gpu_rule && near(a.outside.charged_gil_s, n * 0.008, 0.02),
	      "gil, GPU drained: charged whole (%.4f, want %.4f)", a.outside.charged_gil_s,
	      n * 0.008);
	p.gpu_ms = 60;
	run(&p, &a);
	CHECK(a.outside.gil_s > 0 && a.outside.charged_gil_s < 0.001,
	      "gil, GPU bound: nothing charged (%.4f of %.4f)", a.outside.charged_gil_s,
	      a.outside.gil_s);
}

int main(void)
{
	int fd = mkstemp(path);
	if (fd < 0)
		return 2;
	close(fd);
	test_cpu_only_whole();
	test_first_touch_bounded_by_pages();
	test_gpu_drained_all_charged();
	test_sync_shows_drain();
	test_sync_drain_event();
	test_gpu_busy_nothing_charged();
	test_worker_start_up_not_in_lead();
	test_epoch_end_lead();
	test_wrapper_part();
	test_without_counters();
	test_model_threads_slowed();
	test_model_threads_three();
	test_model_threads_unhindered();
	test_gil_loader_charged();
	test_gil_dataloader_kept();
	test_gil_bounded_by_census();
	test_model_threads_periods_bounded();
	test_gil_gpu_busy();
	unlink(path);
	CHECK_EXIT();
}
