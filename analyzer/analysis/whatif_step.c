/*
 * whatif_step.c - the what-if's step time (the formula in whatif.h): at a
 * batch scale and a count of units, the steady step and what limits it,
 * with and without the epoch start-up (the workers' queueing for the
 * cores where it applies); and the table's rows and notes,
 * which every part of the what-if writes.  whatif.c, whatif_batch.c and
 * whatif_threads.c call in here; this file calls none of them.
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "analysis/memory.h"
#include "analysis/whatif.h"
#include "util/lines.h"

#define FILE_BOUND_SHARE 0.50 /* worker time mostly file reads: storage */
#define HANDOFF_SHARE	 0.50 /* floor mostly hand-off */

void dlbn_whatif_note(struct dlbn_whatif *w, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	w->nnotes += dlbn_lines_vadd(DLBN_LINES(w->notes), w->nnotes, fmt, ap);
	va_end(ap);
}

/*
 * At batch scale k (batch size / the run's; 1: the run's own), each input
 * per step or per batch: the hand-off grows with the samples; the loader's
 * time per batch (and its CPU with it), the loop's host work and the GPU's
 * time per step are a fixed part plus one that grows (batch_fixed_ms,
 * loop_fixed_ms, gpu_fixed_ms; 0 unless measured).
 * Written as x * k + fixed * (1 - k), which is x itself at k = 1.
 */
static double scaled(double x, double fixed, double k)
{
	return x * k + fixed * (1 - k);
}

/* The floor: the loop's own work (+ hand-off with workers) or the GPU's
 * time per step, whichever is longer, and its limit. */
static double floor_at(const struct dlbn_whatif *w, double k, int n, const char **lim)
{
	double handoff = n > 0 ? w->handoff_ms * k : 0;
	double host = scaled(w->loop_ms, w->loop_fixed_ms, k) + handoff;
	double gpu = w->gpu_step_ms > 0 ? scaled(w->gpu_step_ms, w->gpu_fixed_ms, k) : 0;
	if (gpu > host) {
		*lim = DLBN_LIMIT_GPU;
		return gpu;
	}
	/* A loop that waits for the GPU every step holds the GPU's time in its
	 * own: then the hand-off is weighed against what the step takes beyond
	 * the GPU's time. */
	double beyond = w->gpu_paced ? host - gpu : host;
	if (handoff > 0 && handoff >= HANDOFF_SHARE * beyond)
		*lim = DLBN_LIMIT_HANDOFF;
	else
		*lim = w->gpu_paced ? DLBN_LIMIT_GPU : DLBN_LIMIT_LOOP;
	return host;
}

double dlbn_whatif_cycle_ms(double think_ms, double cpu_ms, double cores, int n)
{
	/* Exact mean value analysis with one load-dependent station (the
	 * cores: j batches on them are served at min(j, cores) / cpu_ms) and a
	 * delay (think_ms); p[j] is the chance of j on the cores with one
	 * worker fewer (the arrival theorem). */
	double p[DLBN_WHATIF_MVA_MAX + 1] = {1}, q[DLBN_WHATIF_MVA_MAX + 1];
	double cycle = think_ms + cpu_ms;
	if (n > DLBN_WHATIF_MVA_MAX)
		n = DLBN_WHATIF_MVA_MAX;
	if (!(cores > 0) || !(cpu_ms > 0))
		return cycle;
	for (int k = 1; k <= n; k++) {
		double resid = 0, rest = 1;
		for (int j = 1; j <= k; j++)
			resid += j * cpu_ms / (j < cores ? j : cores) * p[j - 1];
		cycle = think_ms + resid;
		double x = k / cycle;
		for (int j = 1; j <= k; j++) {
			q[j] = x * cpu_ms / (j < cores ? j : cores) * p[j - 1];
			rest -= q[j];
		}
		q[0] = rest > 0 ? rest : 0;
		memcpy(p, q, sizeof(double) * (size_t)(k + 1));
	}
	return cycle;
}

/* The cores the workers have: the job's less the training process's use
 * at step time step_ms (what its CPU per step takes of them). */
double dlbn_whatif_worker_cores(double cores, double main_cpu_ms, double step_ms)
{
	double used = step_ms > 0 ? main_cpu_ms / step_ms : 0;
	if (used > cores - 0.05 * cores)
		used = cores - 0.05 * cores;
	return cores - used;
}

/*
 * Process workers queueing for the cores (whatif.h): the step the supply
 * of n of them allows, not below floor, at growth `grow` of their time per
 * batch, and its limit: the cores once n workers' demand would fill them,
 * else the workers' own time (or storage).  The training process's CPU
 * takes its share of the cores at the step time it gets, so the two are
 * found together (a fixed point; a few rounds settle it).
 */
static double queued_supply(const struct dlbn_whatif *w, int n, double grow, double main_cpu,
			    double floor, const char **lim)
{
	double copies = w->memory ? dlbn_memory_copy_ms(w->memory, n) : 0;
	double own = w->worker_cpu_ms - w->copy_ms_run;
	double cpu = ((own > 0 ? own : 0) + copies) * grow;
	double think = w->think_ms * grow;
	double step = floor, supply = 0;
	double bound = (cpu + main_cpu) / w->queue_cores;
	if ((think + cpu) / n > step)
		step = (think + cpu) / n;
	if (bound > step)
		step = bound;
	for (int round = 0; round < 30; round++) {
		double cores = dlbn_whatif_worker_cores(w->queue_cores, main_cpu, step);
		supply = dlbn_whatif_cycle_ms(think, cpu, cores, n) / n;
		double next = supply > floor ? supply : floor;
		if (fabs(next - step) < 1e-6 * step)
			break;
		step = next;
	}
	if ((double)n * (cpu + main_cpu) >= w->queue_cores * (think + cpu))
		*lim = DLBN_LIMIT_CORES;
	else
		*lim = w->file_share >= FILE_BOUND_SHARE ? DLBN_LIMIT_STORAGE : DLBN_LIMIT_WORKERS;
	return supply;
}

/* Steady state at batch scale k and n units, without the epoch start-up. */
static double steady_at(const struct dlbn_whatif *w, double k, int n, const char **limited_by)
{
	const char *lim;
	double step = floor_at(w, k, n, &lim);
	/* The training process's own CPU follows its loop's host work, and
	 * the loader's CPU its time per batch. */
	double loop = scaled(w->loop_ms, w->loop_fixed_ms, k);
	double main_cpu = w->loop_ms > 0 ? w->main_cpu_ms * (loop / w->loop_ms) : w->main_cpu_ms;
	/* The model's threads spin while the workers hold the cores: as much
	 * as in the run from its worker count on, less with fewer, none with
	 * the loading in the loop (a first model: the run shows one point). */
	if (n > 0 && w->model_spin_ms > 0 && w->num_workers > 0)
		main_cpu += w->model_spin_ms *
			    (n < w->num_workers ? (double)n / w->num_workers : 1) *
			    (loop / w->loop_ms);
	double batch = scaled(w->batch_ms, w->batch_fixed_ms, k);
	double grow = w->batch_ms > 0 ? batch / w->batch_ms : k;
	if (n == 0) {
		/* In the loop's thread: loading and the loop take turns, except
		 * that queued GPU work the host does not wait for runs on. */
		double host = w->gpu_step_ms > 0 || w->gpu_paced ? main_cpu : loop;
		if (w->in_process && w->lock_ms > 0) {
			/* The loader's threads' CPU (in main_cpu) moves into the loop:
			 * one thread's time per batch, then the loop's own work. */
			batch = w->fewer_batch_ms * grow;
			host = loop;
		}
		if (host + batch > step) {
			step = host + batch;
			lim = DLBN_LIMIT_LOADING;
		}
	} else if (w->queueing) {
		const char *qlim;
		double supply = queued_supply(w, n, grow, main_cpu, step, &qlim);
		if (supply > step) {
			step = supply;
			lim = qlim;
		}
	} else {
		double supply = batch / n;
		if (n < w->num_workers && w->fewer_batch_ms > 0)
			supply = w->fewer_batch_ms * grow / n;
		if (w->stage_ms * grow > supply)
			supply = w->stage_ms * grow;
		if (supply > step) {
			step = supply;
			lim = w->file_share >= FILE_BOUND_SHARE ? DLBN_LIMIT_STORAGE
								: DLBN_LIMIT_WORKERS;
		}
	}
	if (n > 0 && w->lock_ms > 0) {
		/* One lock for the loader's Python work and the loop's, however
		 * many threads share it. */
		double lock = w->lock_ms * grow + w->loop_lock_ms * (loop / w->loop_ms);
		if (lock > step) {
			step = lock;
			lim = DLBN_LIMIT_LOCK;
		}
	}
	if (w->cores > 0 && w->cpu_known && !(n > 0 && w->queueing)) {
		/* Every batch costs its CPU in some process, whoever loads it
		 * (with queueing modelled, in the supply already). */
		double cpu = (w->worker_cpu_ms * grow + main_cpu) / w->cores;
		if (cpu > step * 1.0001) {
			step = cpu;
			lim = DLBN_LIMIT_CORES;
		}
	}
	if (limited_by)
		*limited_by = lim;
	return step;
}

double dlbn_whatif_floor_ms(const struct dlbn_whatif *w, int n, const char **lim)
{
	return floor_at(w, 1, n, lim);
}

double dlbn_whatif_steady_ms(const struct dlbn_whatif *w, int n, const char **limited_by)
{
	return steady_at(w, 1, n, limited_by);
}

double dlbn_whatif_step_ms(const struct dlbn_whatif *w, double k, int n, const char **limited_by)
{
	double step = steady_at(w, k, n, limited_by);
	if (n > 0)
		step += w->startup_ms * k;
	return step;
}

double dlbn_whatif_workers_ms(const struct dlbn_whatif *w, int n, const char **limited_by)
{
	return dlbn_whatif_step_ms(w, 1, n, limited_by);
}

struct dlbn_whatif_row *dlbn_whatif_add_row(struct dlbn_whatif *w, const char *setting, int value,
					    double step_ms, const char *limited_by)
{
	if (w->nrows >= DLBN_WHATIF_ROWS)
		return NULL;
	struct dlbn_whatif_row *r = &w->rows[w->nrows++];
	memset(r, 0, sizeof(*r));
	snprintf(r->setting, sizeof(r->setting), "%s", setting);
	snprintf(r->limited_by, sizeof(r->limited_by), "%s", limited_by);
	r->value = value;
	r->step_ms = step_ms;
	r->mem_mib = -1;
	r->fits = -1;
	r->speedup = step_ms > 0 ? w->measured_ms / step_ms : 0;
	return r;
}
