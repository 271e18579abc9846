/*
 * whatif.c - the --what-if model (see whatif.h for the formula and what it
 * leaves out).  Every input is a figure of the analysis or of the model's
 * window; nothing here reads the trace or writes a report.  It also settles
 * the count the verdict's recommendation names (dlbn_whatif_settle_advice),
 * so that the recommendation and the curve give one answer.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/whatif.h"
#include "model/loaders.h"
#include "util/lines.h"

#define MAX_CURVE_WORKERS 32
#define GPU_PACED_SYNC	  0.20 /* host blocked in syncs: the GPU sets the pace */
#define GPU_PACED_BUSY	  0.50 /* ... or the GPU was busy through most waits */
#define SATURATED_SHARE	  0.75 /* traced threads use this share of the CPUs: theirs is the load */

static void mark_current(struct dlbn_whatif *w, struct dlbn_whatif_row *r)
{
	if (!r)
		return;
	r->current = 1;
	r->measured_ms = w->measured_ms;
}

/* Worker figures over the window: time per batch, file share, CPU per
 * batch.  per_loop_batch: the workers map samples (nodes' ParallelMapper),
 * so their figures are summed per batch the loop took. */
static void worker_inputs(const struct dlbn_model *m, const struct dlbn_analysis *a,
			  struct dlbn_whatif *w, int per_loop_batch)
{
	double ms = 0, busy = 0, file = 0;
	uint64_t batches = 0;
	for (size_t i = 0; i < a->nworkers; i++) {
		const struct dlbn_worker_stats *ws = &a->workers[i];
		/* Both figures overstate a worker's time per batch: a batch's
		 * segment (index got .. result written) also holds the feeder
		 * thread's hand-off, which overlaps the next batch; busy time
		 * (not waiting for an index) also holds the worker's start-up,
		 * every epoch with non-persistent workers.  The smaller one. */
		double per = ws->mean_batch_ms;
		if (ws->busy_fraction >= 0 && ws->batches) {
			double busy_per = ws->busy_s * 1e3 / (double)ws->batches;
			if (busy_per < per || per <= 0)
				per = busy_per;
		}
		ms += per * (double)ws->batches;
		batches += ws->batches;
		busy += ws->busy_s;
		file += ws->file_read_s;
	}
	if (per_loop_batch && batches)
		batches = a->steps_window;
	double raw = batches ? ms / (double)batches : 0;
	w->file_share = busy > 0 ? file / busy : 0;
	w->batch_ms = raw;
	w->batch_raw_ms = raw;
	w->worker_cpu_ms = raw * (1 - w->file_share);

	/* schedstat: the workers' time on a CPU, and queued for one, per batch. */
	int64_t run_all = 0, wait_all = 0;
	int sampled = 0;
	for (size_t k = 0; k < m->nsched_threads; k++) {
		size_t ti = m->sched_threads[k];
		if (!dlbn_training_worker(m, m->threads[ti].proc_index))
			continue;
		int64_t run, wait;
		dlbn_sched_window(m, ti, &run, &wait);
		if (run + wait > 0) {
			run_all += run;
			wait_all += wait;
			sampled = 1;
		}
	}
	if (!sampled || !batches)
		return;
	/* The CPU time is the window's, edges included; the batches counted
	 * are those whose segment fits in it, one short per worker whose batch
	 * straddles an edge (4 workers: 47 for 51 steps).  In steady state the
	 * workers make the batches the loop takes: per batch, per step. */
	double made = a->steps_window ? (double)a->steps_window : (double)batches;
	w->worker_cpu_ms = (double)run_all / 1e6 / made;
	w->cpu_known = 1;
	/* Queueing for a CPU while the job's own threads fill them: the core
	 * limit stands for it (and fewer workers queue less), so it leaves
	 * the per-batch time, which keeps at least the batch's CPU.  Behind
	 * other programs' load it stays: the trace does not size that load. */
	double queued = (double)wait_all / 1e6 / made;
	if (w->saturated && queued > 0) {
		w->batch_ms = raw - queued > w->worker_cpu_ms ? raw - queued : w->worker_cpu_ms;
		if (w->batch_ms > raw)
			w->batch_ms = raw;
		dlbn_whatif_note(
			w,
			"a worker needs %.1f ms per batch, %.1f ms of it queued for a CPU: %.1f ms "
			"with a core of its own",
			raw, raw - w->batch_ms, w->batch_ms);
	}
}

/*
 * The CPU time of the training process's threads that only the thread
 * census saw, with the model's work at full speed (shared_cores.h): the
 * model's threads each do the loop's kept work, and the loop's own slowed
 * part goes.  Seconds over the window.
 */
static double model_threads_cpu_s(const struct dlbn_model *m, const struct dlbn_analysis *a,
				  double *spin_s)
{
	size_t n;
	double census_s = dlbn_census_run_s(m, &n);
	const struct dlbn_outside *o = &a->outside;
	*spin_s = 0;
	if (!(o->slowed_s > 0))
		return census_s;
	double gang_s = 0;
	for (size_t i = 0; i < o->cores.gang; i++)
		gang_s += o->cores.gang_threads[i].run_s;
	double kept = o->cpu_s - o->slowed_s;
	double full = (double)o->cores.gang * kept;
	*spin_s = gang_s > full ? gang_s - full : 0;
	*spin_s += o->slowed_s;
	return census_s - gang_s + full - o->slowed_s;
}

/* The training process's own CPU per step (schedstat, else an estimate). */
static int main_cpu(const struct dlbn_model *m, const struct dlbn_analysis *a,
		    struct dlbn_whatif *w)
{
	int64_t run_all = 0;
	int sampled = 0;
	for (size_t k = 0; k < m->nsched_threads; k++) {
		size_t ti = m->sched_threads[k];
		if ((ssize_t)m->threads[ti].proc_index != m->training)
			continue;
		int64_t run, wait;
		dlbn_sched_window(m, ti, &run, &wait);
		if (run + wait > 0) {
			run_all += run;
			sampled = 1;
		}
	}
	double steps = (double)a->steps_window;
	if (sampled) {
		double spin_s;
		w->main_cpu_ms =
			((double)run_all / 1e9 + model_threads_cpu_s(m, a, &spin_s)) * 1e3 / steps;
		w->model_spin_ms = spin_s * 1e3 / steps;
		return 1;
	}
	w->main_cpu_ms = a->loop_ms - (a->gpu ? a->sync_fraction * a->wall_s * 1e3 / steps : 0);
	if (w->main_cpu_ms < 0)
		w->main_cpu_ms = 0;
	return 0;
}

/* The GPU's own time per step, from the window pass (struct
 * dlbn_gpu_pace in model.h). */
static void gpu_step(const struct dlbn_model *m, const struct dlbn_analysis *a,
		     struct dlbn_whatif *w)
{
	if (!a->gpu || !m->steps)
		return;
	const struct dlbn_gpu_pace *g = &m->steps->w.gpu_pace;
	w->gpu_samples = g->samples;
	if (g->samples >= 3 && g->samples >= g->backlog) {
		w->gpu_step_ms = g->sum_ms / (double)g->samples;
		dlbn_whatif_note(w,
				 "the GPU needs %.2f ms per step (%zu steps where it started idle)",
				 w->gpu_step_ms, g->samples);
	} else if (g->backlog >= 3) {
		/* Never idle at a launch: it sets the pace, at the measured rate. */
		w->gpu_paced = 1;
		w->gpu_step_ms = w->loop_ms;
		dlbn_whatif_note(
			w,
			"the GPU still had work at %zu of the launches: it sets the pace (%.2f ms "
			"per step)",
			g->backlog, w->gpu_step_ms);
	}
}

/* The loop thread's run-queue wait over its runnable time (schedstat), 0 none. */
static double main_runq_share(const struct dlbn_model *m)
{
	int64_t run = 0, wait = 0;
	if (m->main_thread < 0)
		return 0;
	dlbn_sched_window(m, (size_t)m->main_thread, &run, &wait);
	return run + wait > 0 ? (double)wait / (double)(run + wait) : 0;
}

static void find_cores(const struct dlbn_model *m, const struct dlbn_analysis *a,
		       struct dlbn_whatif *w)
{
	int cfg = m->config.cpus;
	/* Queueing while the traced threads fill most CPUs: they are the
	 * load, and what they got is the limit.  Queueing while they use a
	 * fraction of them: other programs' load, which the trace does not
	 * size; the affinity count stays the limit (a note says so). */
	int contended = a->cpu_contended && a->cpus_used > 0;
	int saturated = contended && a->cpus_used >= (cfg > 0 ? SATURATED_SHARE * cfg : 0.9);
	w->saturated = saturated;
	/* The queueing model's cores: the job's, or where its threads fill
	 * them and queue, what they got (the rest goes to the kernel's own
	 * work and other programs: 1.8 of 2 on the 2-core VM), the same as
	 * the core limit's below; a quota lower still. */
	double quota = m->config.present ? m->config.cpu_quota : 0;
	w->queue_cores = cfg > 0 ? cfg : saturated ? a->cpus_used : 0;
	if (saturated && a->cpus_used < w->queue_cores)
		w->queue_cores = a->cpus_used;
	if (quota > 0 && (w->queue_cores <= 0 || quota < w->queue_cores))
		w->queue_cores = quota;
	if (cfg > 0) {
		w->cores = cfg;
		snprintf(w->cores_from, sizeof(w->cores_from), "CPU affinity: %d CPUs", cfg);
		if (saturated && a->cpus_used < cfg) {
			w->cores = a->cpus_used;
			snprintf(w->cores_from, sizeof(w->cores_from),
				 "%.1f of the %d CPUs (the traced threads queued for one)",
				 a->cpus_used, cfg);
		}
		if (contended && !saturated)
			dlbn_whatif_note(w,
					 "the threads queued for a CPU while using %.1f of the %d "
					 "CPUs: other "
					 "programs load this machine; the curve assumes that load "
					 "stays as it "
					 "was (fewer workers then get a smaller share of the CPUs)",
					 a->cpus_used, cfg);
	} else if (saturated) {
		w->cores = a->cpus_used;
		snprintf(w->cores_from, sizeof(w->cores_from),
			 "%.1f CPUs (what the traced threads got while queueing for one)",
			 a->cpus_used);
	} else {
		snprintf(w->cores_from, sizeof(w->cores_from), "unknown");
	}
}

/* Epoch start-up stall per step beyond what those steps would stall anyway. */
static double startup_excess_ms(const struct dlbn_analysis *a)
{
	if (a->epochs < 2 || a->startup_stall_s <= 0 || !a->steps_window)
		return 0;
	double restarts = (double)(a->epochs - 1);
	double startup_steps = restarts * (double)(a->prefetch_depth + 1);
	double other_steps = (double)a->steps_window - startup_steps;
	double steady_stall = other_steps > 0 ? (a->stall_s - a->startup_stall_s) / other_steps : 0;
	double excess = a->startup_stall_s - startup_steps * (steady_stall > 0 ? steady_stall : 0);
	return excess > 0 ? excess * 1e3 / (double)a->steps_window : 0;
}

/* The fewest units within 2% of the curve's best step, over the counts
 * up to last (the most that fit, or MAX_CURVE_WORKERS). */
static int fewest_for_best(const struct dlbn_whatif *w, int last)
{
	double best = 0;
	for (int n = w->min_units; n <= last; n++) {
		double s = dlbn_whatif_workers_ms(w, n, NULL);
		if (n == w->min_units || s < best)
			best = s;
	}
	for (int n = w->min_units; n <= last; n++)
		if (dlbn_whatif_workers_ms(w, n, NULL) <= best * DLBN_WHATIF_BEST_WITHIN)
			return n;
	return w->min_units;
}

static void workers_curve(struct dlbn_whatif *w)
{
	int unfit = fewest_for_best(w, MAX_CURVE_WORKERS);
	w->best_workers = unfit;
	w->best_unfit = -1;
	if (w->fit_max >= w->min_units && w->fit_max < unfit) {
		w->best_workers = fewest_for_best(w, w->fit_max);
		w->best_unfit = unfit;
	}
	int max = (w->best_unfit > w->best_workers ? w->best_unfit : w->best_workers) + 2;
	if (max < w->num_workers + 2)
		max = w->num_workers + 2;
	if (w->cores > 0 && max < (int)ceil(w->cores) + 1)
		max = (int)ceil(w->cores) + 1;
	if (max < 4)
		max = 4;
	if (max > MAX_CURVE_WORKERS)
		max = MAX_CURVE_WORKERS;
	w->max_workers = max;
	for (int n = w->min_units; n <= max; n++) {
		const char *lim;
		double s = dlbn_whatif_workers_ms(w, n, &lim);
		if (n > 0 && w->startup_ms > 0 && w->startup_ms >= 0.5 * s)
			lim = DLBN_LIMIT_STARTUP;
		struct dlbn_whatif_row *r = dlbn_whatif_add_row(w, w->knob, n, s, lim);
		if (n == w->num_workers)
			mark_current(w, r);
	}
}

/*
 * persistent_workers: the workers' start-up goes, a cold pipeline stays.
 * At each later epoch the loop waits for the first batch whole (a worker's
 * time for it plus the hand-off) where the steady state has it wait
 * steady - loop: that difference per restart.
 */
static void persistent_rows(const struct dlbn_model *m, const struct dlbn_analysis *a,
			    struct dlbn_whatif *w)
{
	int pw = m->config.persistent_workers;
	if (w->num_workers <= 0)
		return;
	if (a->epochs < 2) {
		dlbn_whatif_note(
			w, "one epoch in the window: persistent_workers changes nothing here (it "
			   "saves the worker start-up of every later epoch)");
		return;
	}
	const char *lim;
	double steady = dlbn_whatif_steady_ms(w, w->num_workers, &lim);
	double now = steady + w->startup_ms;
	const char *now_lim = w->startup_ms >= 0.5 * now ? DLBN_LIMIT_STARTUP : lim;
	if (pw == 1) {
		mark_current(w, dlbn_whatif_add_row(w, "persistent_workers", 1, now, now_lim));
		return;
	}
	double cold = w->batch_ms + w->handoff_ms + w->loop_ms - steady;
	double per_step = cold > 0 ? cold * (double)(a->epochs - 1) / (double)a->steps_window : 0;
	if (per_step > w->startup_ms)
		per_step = w->startup_ms; /* never more than the run's own start-up */
	mark_current(w, dlbn_whatif_add_row(w, "persistent_workers", 0, now, now_lim));
	dlbn_whatif_add_row(w, "persistent_workers", 1, steady + per_step, lim);
}

/* prefetch_factor (nodes' Prefetcher, DALI's prefetch_queue_depth): no
 * more throughput, only the jitter a deeper queue absorbs. */
static void prefetch_rows(const struct dlbn_model *m, struct dlbn_whatif *w, const char *setting)
{
	if (w->num_workers <= 0)
		return;
	int pf = m->config.prefetch_factor;
	if (pf <= 0)
		pf = m->prefetch_depth > 0 ? m->prefetch_depth / w->num_workers : 2;
	if (pf <= 0)
		pf = 1;
	const char *lim;
	double fluid = dlbn_whatif_workers_ms(w, w->num_workers, &lim);
	double now = w->measured_ms;
	mark_current(w, dlbn_whatif_add_row(w, setting, pf, now, lim));
	for (int v = pf * 2; v <= pf * 4 && w->nrows < DLBN_WHATIF_ROWS; v *= 2)
		dlbn_whatif_add_row(w, setting, v, fluid < 0.99 * now ? fluid : now, lim);
}

static void pin_rows(const struct dlbn_model *m, const struct dlbn_analysis *a,
		     struct dlbn_whatif *w)
{
	if (!a->gpu) {
		dlbn_whatif_note(w, "pin_memory: no GPU activity in the trace, nothing to pin for");
		return;
	}
	int pin = m->config.pin_memory;
	if (a->pageable_ms > 0 && pin != 1) {
		const char *lim;
		double floor = dlbn_whatif_floor_ms(w, 1, &lim);
		mark_current(w, dlbn_whatif_add_row(w, "pin_memory", 0, w->measured_ms, lim));
		double s = w->measured_ms - a->pageable_ms;
		if (s < floor - a->pageable_ms)
			s = floor - a->pageable_ms;
		dlbn_whatif_add_row(w, "pin_memory", 1, s > 0 ? s : w->measured_ms, lim);
		dlbn_whatif_note(
			w,
			"pin_memory=True saves the %.2f ms per step the host is blocked in H2D "
			"copies "
			"from pageable memory, if the copies become .to(device, non_blocking=True)",
			a->pageable_ms);
	} else if (pin == 1 && a->path == DLBN_PATH_PIN && a->mean_busy >= 0 &&
		   a->mean_busy < 0.7) {
		dlbn_whatif_note(
			w,
			"pin_memory: the pin-memory thread may lag (workers idle %.0f%%); its cost "
			"per batch is not in the trace, so pin_memory=False is not predicted",
			(1 - a->mean_busy) * 100);
	}
}

static void cannot_know(const struct dlbn_analysis *a, struct dlbn_whatif *w, int sampled,
			int threads)
{
	if (w->cores <= 0)
		dlbn_whatif_note(
			w, "the CPUs the job may use are not in the trace (no cpus= in the loader "
			   "config, no CPU contention seen): the curve applies no core limit");
	if (w->cores > 0 && !w->cpu_known)
		dlbn_whatif_note(
			w,
			"no schedstat samples of the %s: the CPU a batch costs is unknown (sleep "
			"and CPU look alike), so the curve applies no core limit",
			threads		     ? "training process"
			: w->num_workers > 0 ? "workers"
					     : "training loop");
	else if (!sampled)
		dlbn_whatif_note(
			w,
			"no schedstat samples of the training process: its CPU per step is taken "
			"as the loop's time less host syncs");
	if (w->file_share >= 0.3)
		dlbn_whatif_note(
			w,
			"file reads are %.0f%% of the workers' time: the curve assumes the storage "
			"serves that many readers in parallel (its spare bandwidth is not in the "
			"trace)",
			w->file_share * 100);
	if (w->startup_ms > 0)
		dlbn_whatif_note(
			w,
			"epoch start-up (%.2f ms per step) is taken as the same for any %s; more "
			"workers usually start slower",
			w->startup_ms, w->knob);
	double kib = a->recv_kib > 0 ? a->recv_kib : 0;
	if (w->memory_known)
		; /* memory is in the rows (whatif_memory.c) */
	else if (threads)
		dlbn_whatif_note(
			w, "not in the trace: the host memory each further thread's batches in "
			   "flight take");
	else if (kib >= 1)
		dlbn_whatif_note(
			w,
			"not in the trace: host memory per worker (each is a copy of the loader's "
			"process: a recorder before trace format 4.1, or no smaps_rollup) and the "
			"/dev/shm room for the batches in flight (num_workers x prefetch_factor x "
			"%.0f KiB); dlbn-preflight shows /dev/shm",
			kib);
	else
		dlbn_whatif_note(
			w,
			"not in the trace: host memory per worker (each is a copy of the loader's "
			"process: a recorder before trace format 4.1, or no smaps_rollup) and the "
			"/dev/shm room for the batches in flight; dlbn-preflight shows /dev/shm");
}

/* The loader's kind and the setting the curve varies (w->knob); how its
 * producers run: *dali, *process_workers (torchdata.nodes' processes),
 * *threads (the loader's threads, not processes).  0 for a named loader,
 * with w->why_not: nothing dlbn knows how to change. */
static int loader_knob(const struct dlbn_model *m, const struct dlbn_analysis *a,
		       struct dlbn_whatif *w, int *dali, int *process_workers, int *threads)
{
	const struct dlbn_config *c = &m->config;
	snprintf(w->kind, sizeof(w->kind), "%s", dlbn_loader_kind(c));
	snprintf(w->knob, sizeof(w->knob), "num_workers");
	*dali = !strcmp(w->kind, "dali");
	*process_workers = !strcmp(w->kind, "nodes") && a->nworkers > 0;
	if (!strcmp(w->kind, "named")) {
		snprintf(w->why_not, sizeof(w->why_not),
			 "a named loader has no setting dlbn knows how to change (how many "
			 "producers it runs is the program's own); the verdict's stall is the "
			 "figure");
		return 0;
	}
	*threads = *dali ||
		   (strcmp(w->kind, "dataloader") != 0 && w->num_workers > 0 && !*process_workers);
	if (*dali) {
		snprintf(w->knob, sizeof(w->knob), "num_threads");
		w->num_workers = c->threads > 0 ? c->threads : 1;
		w->min_units = 1;
	}
	return 1;
}

/* The producers' cost per batch and their CPU: the loader's threads, the
 * loop itself (num_workers=0) or the worker processes.  0 with
 * w->why_not when the window has no such figure. */
static int producer_inputs(const struct dlbn_model *m, const struct dlbn_analysis *a,
			   struct dlbn_whatif *w, int threads, int process_workers, int sampled)
{
	if (threads) {
		dlbn_whatif_thread_inputs(m, a, w);
	} else if (w->num_workers == 0) {
		/* Loading in the loop: the wait is the batch's cost, and the
		 * loop's CPU holds it. */
		w->batch_ms = a->mean_ms;
		w->worker_cpu_ms = w->batch_ms;
		w->main_cpu_ms -= sampled ? w->batch_ms : 0;
		w->cpu_known = sampled; /* the loop thread's CPU holds both */
		if (w->main_cpu_ms < 0)
			w->main_cpu_ms = 0;
		dlbn_whatif_note(
			w,
			"num_workers=0 in this run: workers' hand-off cost is unknown (receiving a "
			"batch costs the loop about 1-2 ms per 256 KiB on a small machine)");
	} else if (a->nworkers) {
		worker_inputs(m, a, w, process_workers);
	} else {
		snprintf(w->why_not, sizeof(w->why_not),
			 "no worker figures in the window (num_workers=%d)", w->num_workers);
		return 0;
	}
	if (!(w->batch_ms > 0)) {
		snprintf(w->why_not, sizeof(w->why_not), "no time per batch in the window");
		return 0;
	}
	return 1;
}

/* Of the loop's waits, the share the GPU sat idle for (1 without a GPU). */
static double waits_gpu_idle_share(const struct dlbn_analysis *a)
{
	if (!a->gpu || !(a->exposed_s > 0))
		return 1;
	double share = dlbn_outside_stall_in_waits(&a->outside, a->stall_s) / a->exposed_s;
	return share > 1 ? 1 : share;
}

/*
 * What taking a batch from a worker costs the loop however many workers
 * there are, per step, as far as the GPU sat idle for it: receiving it
 * once it has arrived (on the direct path the whole fetch less the wait for
 * its arrival: the fd exchange with the worker, which waits for the
 * worker's own threads, and rebuilding the batch; else the fd exchange
 * alone) and the loading after the fetch (dropping the previous batch,
 * queueing for a CPU, first touch, a wrapper's work on it).  More workers
 * shorten only the wait for the arrival.
 */
static double handoff_cost_ms(const struct dlbn_analysis *a)
{
	double receive = a->recv_ms;
	if (a->path == DLBN_PATH_DIRECT && a->steady_wait_ms >= 0 && a->arrive_ms >= 0 &&
	    a->steady_wait_ms - a->arrive_ms > receive)
		receive = a->steady_wait_ms - a->arrive_ms;
	double after = 0;
	const struct dlbn_outside *o = &a->outside;
	if (o->known && a->steps_window)
		after = (o->charged_wrap_s + o->charged_free_s + o->charged_runq_s +
			 o->charged_touch_s) *
			1e3 / (double)a->steps_window;
	return receive * waits_gpu_idle_share(a) + after;
}

/* The loop's costs beside loading: taking each batch from worker
 * processes, epoch start-up, the GPU's step, and the loop's own floor. */
static void loop_costs(const struct dlbn_model *m, const struct dlbn_analysis *a,
		       struct dlbn_whatif *w, int threads)
{
	if (w->num_workers > 0 && !threads && a->recv_ms > 0) {
		w->handoff_ms = handoff_cost_ms(a);
		/* Under contention the loop's thread also queued for a CPU while
		 * receiving; the core limit stands for that. */
		double q = main_runq_share(m);
		if (w->saturated && q > 0)
			w->handoff_ms *= 1 - q;
	}
	if (w->num_workers > 0)
		w->startup_ms = startup_excess_ms(a);
	gpu_step(m, a, w);
	if (w->gpu_step_ms > 0) {
		/* loop_ms counts the waits' GPU-busy part (hidden by prefetch):
		 * with the GPU's time as a floor of its own, the loop's floor is
		 * its host work alone. */
		double hidden = (a->exposed_s - a->stall_s) * 1e3 / (double)a->steps_window;
		if (hidden > 0)
			w->loop_ms = a->loop_ms > hidden ? a->loop_ms - hidden : 0;
	}
}

/*
 * Queueing for the cores (whatif.h): process workers whose CPU is known on
 * cores the job can name.  think_ms is found so that the run's own count
 * gives the run's own time per batch (the cycle grows with think_ms; the
 * queueing it adds does not), by bisection.
 */
static void queueing_inputs(struct dlbn_whatif *w, int threads)
{
	if (threads || w->in_process || w->num_workers <= 0 || !w->cpu_known ||
	    !(w->queue_cores > 0) || !(w->batch_raw_ms > 0))
		return;
	double spin = w->model_spin_ms > 0 ? w->model_spin_ms : 0;
	double cpu = w->worker_cpu_ms;
	double cores =
		dlbn_whatif_worker_cores(w->queue_cores, w->main_cpu_ms + spin, w->measured_ms);
	double lo = 0, hi = w->batch_raw_ms;
	if (dlbn_whatif_cycle_ms(0, cpu, cores, w->num_workers) >= w->batch_raw_ms) {
		hi = 0; /* all of it CPU and queueing, as far as the model sees */
	} else {
		for (int i = 0; i < 60; i++) {
			double mid = (lo + hi) / 2;
			if (dlbn_whatif_cycle_ms(mid, cpu, cores, w->num_workers) < w->batch_raw_ms)
				lo = mid;
			else
				hi = mid;
		}
	}
	w->think_ms = hi;
	w->queueing = 1;
	double cycle = dlbn_whatif_cycle_ms(w->think_ms, cpu, cores, w->num_workers);
	dlbn_whatif_note(w,
			 "the workers queue for the CPUs: a batch is %.1f ms off a CPU and %.1f ms "
			 "on one%s, %.1f ms in all at %d worker(s) on the %.1f of the %.1f CPUs "
			 "the training process leaves them (mean value analysis)",
			 w->think_ms, cpu,
			 w->copy_ms_run > 0 ? " (copy-on-write copies included)" : "", cycle,
			 w->num_workers, cores, w->queue_cores);
}

/* The curve, the other settings' rows, and how the model compares with
 * the run it was made from. */
static void curves(const struct dlbn_model *m, const struct dlbn_analysis *a, struct dlbn_whatif *w,
		   int dali)
{
	workers_curve(w);
	if (!strcmp(w->kind, "dataloader")) {
		persistent_rows(m, a, w);
		prefetch_rows(m, w, "prefetch_factor");
		pin_rows(m, a, w);
	} else {
		prefetch_rows(m, w, dali ? "prefetch_queue_depth" : "prefetch_factor");
	}
	double model = dlbn_whatif_steady_ms(w, w->num_workers, NULL) +
		       (w->num_workers > 0 ? w->startup_ms : 0);
	dlbn_whatif_note(
		w,
		"at the run's %s=%d the model gives %.2f ms per step, %.2f ms measured (%+.0f%%)",
		w->knob, w->num_workers, model, w->measured_ms, (model / w->measured_ms - 1) * 100);
	if (a->verdict == DLBN_VERDICT_INCONCLUSIVE)
		dlbn_whatif_note(
			w, "the verdict is INCONCLUSIVE: these figures rest on thin evidence");
}

void dlbn_whatif_compute(const struct dlbn_model *m, const struct dlbn_analysis *a,
			 const struct dlbn_sweep *points, struct dlbn_whatif *w)
{
	memset(w, 0, sizeof(*w));
	w->batch_size = m->config.present ? m->config.batch_size : -1;
	if (!a->steps_window || a->wall_s <= 0 || !(a->loop_ms > 0)) {
		snprintf(w->why_not, sizeof(w->why_not),
			 "no steady-state window to model (%zu window steps)", a->steps_window);
		return;
	}
	w->measured_ms = a->wall_s * 1e3 / (double)a->steps_window;
	w->num_workers = a->num_workers >= 0 ? a->num_workers : (int)a->nworkers;
	w->loop_ms = a->loop_ms;
	const struct dlbn_gpu_win *gw = &m->gpu.win;
	w->gpu_paced =
		a->gpu && (a->sync_fraction >= GPU_PACED_SYNC ||
			   (gw->wait_s > 0 && gw->wait_gpu_busy_s / gw->wait_s >= GPU_PACED_BUSY));
	find_cores(m, a, w); /* first: w->saturated decides which waits stay */
	int sampled = main_cpu(m, a, w);
	int dali, process_workers, threads = 0;
	if (!loader_knob(m, a, w, &dali, &process_workers, &threads) ||
	    !producer_inputs(m, a, w, threads, process_workers, sampled))
		return;
	loop_costs(m, a, w, threads);
	w->valid = 1;
	w->prefetch = m->config.prefetch_factor > 0 ? m->config.prefetch_factor : 2;
	dlbn_whatif_memory_inputs(a, w);
	queueing_inputs(w, threads);
	curves(m, a, w, dali);
	cannot_know(a, w, sampled || threads, threads);
	dlbn_whatif_batch(a, points, w);
	dlbn_whatif_memory_rows(w);
}

/* A limit in words, for the recommendation line. */
static const char *limit_words(const char *limited_by)
{
	static const struct {
		const char *limit, *words;
	} names[] = {
		{DLBN_LIMIT_WORKERS, "the workers"},
		{DLBN_LIMIT_CORES, "the job's cores"},
		{DLBN_LIMIT_GPU, "the GPU"},
		{DLBN_LIMIT_LOOP, "the loop's own work"},
		{DLBN_LIMIT_HANDOFF, "receiving each batch in the loop"},
		{DLBN_LIMIT_STORAGE, "storage"},
		{DLBN_LIMIT_LOADING, "loading in the loop"},
		{DLBN_LIMIT_STARTUP, "epoch start-up"},
		{DLBN_LIMIT_LOCK, "the interpreter's lock (GIL)"},
		{DLBN_LIMIT_MEMORY, "the job's memory"},
		{DLBN_LIMIT_SHM, "/dev/shm"},
	};
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (!strcmp(limited_by, names[i].limit))
			return names[i].words;
	return limited_by;
}

/*
 * What holds the step once more units stop helping, from n on: the limit
 * of the first larger count that the units themselves do not limit.  The
 * curve's best is the fewest units within 2% of its best step, so at that
 * count the units can still be the limit by a hair (workers at 14.34 ms,
 * the cores from the next count on at 14.19): naming them would say "more
 * would not help, limited by the workers".  The units' own limit when no
 * other takes over within the curve.
 */
static const char *limit_beyond(const struct dlbn_whatif *w, int n, const char *at_n)
{
	if (strcmp(at_n, DLBN_LIMIT_WORKERS) != 0)
		return at_n;
	for (int k = n + 1; k <= MAX_CURVE_WORKERS; k++) {
		const char *lim;
		(void)dlbn_whatif_workers_ms(w, k, &lim);
		if (strcmp(lim, DLBN_LIMIT_WORKERS) != 0)
			return lim;
	}
	return at_n;
}

void dlbn_whatif_settle_advice(const struct dlbn_whatif *w, struct dlbn_analysis *a)
{
	struct dlbn_advice *v = &a->advice;
	if (!v->present || !w->valid || strcmp(v->knob, w->knob) != 0 || v->from < w->min_units)
		return;
	const char *lim;
	int best = w->best_workers;
	double best_ms = dlbn_whatif_workers_ms(w, best, &lim);
	lim = limit_beyond(w, best, lim);
	/* Memory stops the curve before its best: that is the limit to say. */
	int capped = w->best_unfit > best;
	if (w->fit_max >= w->min_units && v->from > w->fit_max) {
		/* The run's own count is predicted not to fit: fewer. */
		v->to = best;
		snprintf(a->recs[v->rec], DLBN_LINE,
			 "%s %d -> %d: %d is predicted not to fit (%s); the what-if gives %.2f ms "
			 "per step with %d (%.2f ms measured with %d)",
			 v->name, v->from, best, v->from, w->fit_why, best_ms, best, w->measured_ms,
			 v->from);
		return;
	}
	if (best > v->from) {
		size_t len = strlen(v->suffix);
		v->to = best;
		if (capped)
			snprintf(v->suffix + len, sizeof(v->suffix) - len,
				 "; the what-if gives %.2f ms per step with %d (%.2f ms measured), "
				 "the most that fit: %s",
				 best_ms, best, w->measured_ms, w->fit_why);
		else
			snprintf(v->suffix + len, sizeof(v->suffix) - len,
				 "; the what-if gives %.2f ms per step with %d (%.2f ms measured), "
				 "then "
				 "limited by %s",
				 best_ms, best, w->measured_ms, limit_words(lim));
		dlbn_advice_format(a);
		return;
	}
	if (capped) {
		v->to = v->from;
		snprintf(
			a->recs[v->rec], DLBN_LINE,
			"%s %d is the most the job's memory allows for its best step: the "
			"what-if gives %.2f ms per step with %d (%.2f ms measured); more would not "
			"fit (%s)",
			v->name, v->from, best_ms, best, w->measured_ms, w->fit_why);
		return;
	}
	/* The curve is flat from the run's count on: more would not help.
	 * Where the cores hold it, cheaper work per batch still would. */
	int cheaper =
		v->alt[0] && (!strcmp(lim, DLBN_LIMIT_CORES) || !strcmp(lim, DLBN_LIMIT_STORAGE));
	v->to = v->from;
	snprintf(a->recs[v->rec], DLBN_LINE,
		 "%s %d is enough: the what-if gives %.2f ms per step from %d on (%.2f ms "
		 "measured), limited by %s, not by the number of %s%s%s",
		 v->name, v->from, best_ms, best, w->measured_ms, limit_words(lim),
		 w->in_process || !strcmp(w->knob, "num_threads") ? "threads" : "workers",
		 cheaper ? "; instead: " : "", cheaper ? v->alt : "");
}
