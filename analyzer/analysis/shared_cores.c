/*
 * shared_cores.c - which threads of the training process are the model's,
 * and the share of the time they all ran at once (rule in shared_cores.h).
 *
 * Evidence: the thread census (TASK records), every thread of the
 * training process but the loop's, with its run and run-queue time in the
 * window.  A census thread that also wrote records of its own (a stream:
 * the pin-memory thread, a feeder, a loader thread that reads files) is
 * not the model's; its schedstat is counted where its own records are.
 * The model's threads are the rest that worked at least
 * DLBN_GANG_MIN_SHARE of the loop's own CPU time, the busiest first, at
 * most intraop_threads - 1 of them when the CONFIG says how many; what the
 * loop waited for them follows the rule in shared_cores.h.
 *
 * The figure applies only where the loader works in other processes (a
 * DataLoader's workers, torchdata.nodes' process workers): where its
 * threads share the training process (DALI, thread workers, a prefetch
 * thread) a census thread may be the loader's own, and removing its
 * queueing would count the loader as the model.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/shared_cores.h"
#include "model/loaders.h"
#include "model/model.h"

/* A thread of the training process that wrote records (it has a stream). */
static int hooked(const struct dlbn_model *m, int tid)
{
	for (size_t i = 0; i < m->nthreads; i++)
		if ((ssize_t)m->threads[i].proc_index == m->training && m->threads[i].tid == tid)
			return 1;
	return 0;
}

double dlbn_census_run_s(const struct dlbn_model *m, size_t *nthreads)
{
	double run_s = 0;
	*nthreads = 0;
	for (size_t i = 0; i < m->ncensus; i++) {
		int64_t run, wait;
		dlbn_census_window(m, i, &run, &wait);
		if (run + wait <= 0 || hooked(m, m->census[i].tid))
			continue;
		(*nthreads)++;
		run_s += (double)run / 1e9;
	}
	return run_s;
}

static int by_run_desc(const void *x, const void *y)
{
	const struct dlbn_gang_thread *a = x, *b = y;
	return (a->run_s < b->run_s) - (a->run_s > b->run_s);
}

static const char *loader_outside(const struct dlbn_config *c)
{
	const char *kind = dlbn_loader_kind(c);
	if (!strcmp(kind, "dataloader"))
		return c->num_workers > 0 ? NULL
					  : "the loader runs in the loop's thread (num_workers=0)";
	if (!strcmp(kind, "nodes") && !strcmp(c->worker_method, "process"))
		return NULL;
	return "the loader's threads share the training process: a busy thread may be the "
	       "loader's";
}

/* The cores the training process may use: its affinity, or its cgroup's
 * quota when that is lower (rounded up); 0 unknown. */
static int job_cores(const struct dlbn_shared_cores *sc)
{
	int cores = sc->cpus > 0 ? sc->cpus : 0;
	if (sc->cpu_quota > 0 && (cores == 0 || sc->cpu_quota < cores))
		cores = (int)ceil(sc->cpu_quota);
	return cores;
}

/* P(at least k of n workers busy), each busy with probability b. */
static double at_least(size_t n, int k, double b)
{
	double p = 0;
	for (size_t i = (size_t)(k > 0 ? k : 0); i <= n; i++) {
		double term = 1;
		for (size_t j = 0; j < i; j++)
			term *= (double)(n - j) / (double)(j + 1) * b;
		for (size_t j = i; j < n; j++)
			term *= 1 - b;
		p += term;
	}
	return p;
}

void dlbn_shared_cores(const struct dlbn_model *m, const struct dlbn_loop_load *load,
		       struct dlbn_shared_cores *sc)
{
	memset(sc, 0, sizeof(*sc));
	sc->intraop_threads = m->config.present ? m->config.intraop_threads : -1;
	sc->cpus = m->config.present ? m->config.cpus : -1;
	sc->cpu_quota = m->config.present ? m->config.cpu_quota : 0;
	/* Every census thread that worked, busiest first: the model's are
	 * among the first. */
	struct dlbn_gang_thread cand[DLBN_CENSUS_MAX] = {{0}};
	size_t ncand = 0;
	for (size_t i = 0; i < m->ncensus; i++) {
		const struct dlbn_census_thread *c = &m->census[i];
		int64_t run, wait;
		dlbn_census_window(m, i, &run, &wait);
		if (c->has_end)
			sc->known = 1;
		if (run + wait <= 0 || hooked(m, c->tid))
			continue;
		sc->threads++;
		sc->threads_run_s += (double)run / 1e9;
		struct dlbn_gang_thread *g = &cand[ncand++];
		g->tid = c->tid;
		memcpy(g->name, c->name, sizeof(g->name));
		g->run_s = (double)run / 1e9;
		g->runq_s = (double)wait / 1e9;
		g->span_s = (double)(c->end_t - c->base_t) / 1e9;
		int64_t per[4];
		dlbn_census_periods(m, i, per);
		g->periods = (size_t)per[3];
		g->period_run_s = (double)per[0] / 1e9;
		g->period_runq_s = (double)per[1] / 1e9;
		g->period_wall_s = (double)per[2] / 1e9;
	}
	qsort(cand, ncand, sizeof(cand[0]), by_run_desc);
	size_t cap = DLBN_GANG_MAX;
	if (sc->intraop_threads >= 1 && (size_t)(sc->intraop_threads - 1) < cap)
		cap = (size_t)(sc->intraop_threads - 1);
	for (size_t i = 0; i < ncand && sc->gang < cap; i++) {
		if (!(load->cpu_s > 0) || cand[i].run_s < DLBN_GANG_MIN_SHARE * load->cpu_s)
			break;
		sc->gang_threads[sc->gang++] = cand[i];
	}
	if (!sc->gang)
		return;
	const char *why = m->config.present ? loader_outside(&m->config)
					    : "no loader configuration in the trace";
	if (why) {
		snprintf(sc->why_not, sizeof(sc->why_not), "%s", why);
		return;
	}
	sc->applies = 1;
	/* The union of the times off, the loop's own queueing among them. */
	double runnable = load->cpu_s + load->runq_s;
	double serial = load->runq_s, kept = 1 - load->runq_s / runnable;
	for (size_t i = 0; i < sc->gang; i++) {
		struct dlbn_gang_thread *g = &sc->gang_threads[i];
		double ran, queued;
		if (g->periods >= DLBN_PERIODS_MIN && g->period_wall_s > 0) {
			/* Scaled to every period, within the thread's whole
			 * figures over the window. */
			double scale = load->wall_s / g->period_wall_s;
			ran = fmin(g->period_run_s * scale, g->run_s);
			queued = fmin(g->period_runq_s * scale, g->runq_s);
		} else {
			double share = g->span_s > load->wall_s ? load->wall_s / g->span_s : 1;
			ran = g->run_s * share;
			queued = g->runq_s * share;
		}
		double room = load->wall_s > ran ? load->wall_s - ran : 0;
		g->off_s = queued < room ? queued : room;
		if (g->off_s > runnable)
			g->off_s = runnable;
		serial += g->off_s;
		kept *= 1 - g->off_s / runnable;
	}
	if (serial > runnable)
		serial = runnable;
	int cores = job_cores(sc);
	sc->all_cores_busy = cores <= 0 || load->workers_busy < 0
				     ? 1
				     : at_least(load->nworkers, cores, load->workers_busy);
	double off = sc->all_cores_busy * runnable * (1 - kept) + (1 - sc->all_cores_busy) * serial;
	sc->waited_s = off - load->runq_s;
	if (sc->waited_s < 0)
		sc->waited_s = 0;
	if (sc->waited_s > load->cpu_s)
		sc->waited_s = load->cpu_s;
}
