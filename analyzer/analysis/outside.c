/*
 * outside.c - the loading costs that land outside the loader waits, and
 * the part of them Replay removes (rule in outside.h; the recorder's side
 * in libintercept/loop_cost.c, the GPU's idle time per loop period in
 * gpu.c lead_idle).
 *
 * A batch of real size costs the loop more than its wait: after next()
 * returns, the previous batch is dropped (its shared-memory storages are
 * unmapped and their fds closed, which frees the pages a worker wrote),
 * the new batch's pages fault in at their first touch, and the loop's
 * thread may queue for a CPU behind the busy workers.  A Replay run has
 * none of these.  Dropping and queueing are exact per loop period
 * (munmap/close wall time, schedstat run-queue time) and are weighed
 * against the GPU's idle time of the same period; the first touch is the
 * thread's kernel time outside the frees, which getrusage splits from the
 * exact run time by tick samples: right as a window sum, not per period,
 * so it takes the idle time the per-period charges left, summed.  Where a
 * wrapper iterable fetched the batch, its work up to the hand-off is timed
 * by the HANDOFF mark (the other counters start there) and weighed against
 * the GPU's idle time inside that part of the period.  Where the model's
 * own threads shared the cores with the workers (shared_cores.h), the
 * loop's CPU time holds their slowdown: a window figure, charged like the
 * first touch.
 */
#include <stdio.h>
#include <string.h>

#include "analysis/outside.h"
#include "model/loaders.h"
#include "model/model.h"

static double sec(int64_t ns)
{
	return (double)ns / 1e9;
}

/*
 * Whose the interpreter lock's holders are.  A loader other than torch's
 * DataLoader runs Python threads in the training process (nodes' mapper
 * and prefetch threads, DALI's iterator, a named loader's producer) that
 * go idle in a Replay; a DataLoader's loading runs in worker processes
 * (the pin-memory thread's Python share is small) or in the loop's own
 * thread, so the lock's holders there are the program's other threads,
 * which Replay keeps.  Returns why the wait is kept, or NULL.
 */
static const char *gil_kept(const struct dlbn_model *m)
{
	if (!m->config.present)
		return "no loader configuration in the trace";
	if (!strcmp(dlbn_loader_kind(&m->config), "dataloader"))
		return "torch's DataLoader loads in worker processes or the loop's thread: the "
		       "holders are the program's other threads";
	return NULL;
}

/* The CPU time of the training process's other threads in the window
 * (thread census), -1 unknown.  Its samples come at most every 100 ms, at
 * fetch begins: each thread's figure is scaled from the span between its
 * samples to the window's, so that the edges do not cut the bound short. */
static double census_cpu_s(const struct dlbn_model *m)
{
	double run_s = 0;
	int known = 0;
	int64_t wall = m->steps ? m->steps->w.we - m->steps->w.ws : 0;
	for (size_t i = 0; i < m->ncensus; i++) {
		const struct dlbn_census_thread *c = &m->census[i];
		int64_t run, wait;
		dlbn_census_window(m, i, &run, &wait);
		known |= c->has_end;
		double scale = 1;
		if (c->has_end && wall > 0 && c->end_t > c->base_t && c->end_t - c->base_t < wall)
			scale = (double)wall / (double)(c->end_t - c->base_t);
		run_s += run > 0 ? (double)run / 1e9 * scale : 0;
	}
	return known ? run_s : -1;
}

void dlbn_outside_waits(const struct dlbn_model *m, int gpu_rule, double workers_busy,
			size_t nworkers, struct dlbn_outside *o)
{
	memset(o, 0, sizeof(*o));
	if (!m->steps)
		return;
	struct dlbn_lead_sums sum = m->steps->w.leads;
	for (size_t i = 0; m->steps == &m->py_steps && i < m->loaders.n; i++)
		dlbn_lead_sums_merge(&sum, &m->loaders.v[i].in_train_window.leads);
	const struct dlbn_lead *l = &sum.lead;
	if (!l->known)
		return;
	o->known = 1;
	o->gpu_rule = gpu_rule;
	o->steps = (size_t)l->known;
	o->wrapped = (size_t)l->wrapped;
	o->wall_s = sec(l->wall_ns);
	o->wrap_s = sec(l->wrap_ns);
	o->free_s = sec(l->free_ns);
	o->runq_s = sec(l->runq_ns);
	int64_t kernel = l->sys_ns > l->free_cpu_ns ? l->sys_ns - l->free_cpu_ns : 0;
	int64_t touch_max = l->shm_bytes / 4096 * DLBN_FIRST_TOUCH_NS_PER_PAGE_MAX;
	int64_t touch = kernel < touch_max ? kernel : touch_max;
	if (touch > l->cpu_ns)
		touch = l->cpu_ns;
	o->touch_s = sec(touch);
	o->cpu_s = sec(l->cpu_ns - touch);
	o->gil_s = sec(l->gil_ns);
	o->gil_others_s = sec(l->gil_others_ns);
	const char *kept = o->gil_s > 0 || o->gil_others_s > 0 ? gil_kept(m) : NULL;
	double holders = census_cpu_s(m);
	o->gil_loader_s = kept ? 0 : o->gil_s;
	if (holders >= 0 && o->gil_loader_s > holders)
		o->gil_loader_s = holders;
	if (kept)
		snprintf(o->gil_why_kept, sizeof(o->gil_why_kept), "%s", kept);
	struct dlbn_loop_load load = {o->wall_s, o->cpu_s, o->runq_s, workers_busy, nworkers};
	dlbn_shared_cores(m, &load, &o->cores);
	if (o->cores.applies)
		o->slowed_s = o->cores.waited_s;
	o->minflt_per_step = (double)l->minflt / (double)l->known;
	o->shm_mib_per_step = (double)l->shm_bytes / (double)l->known / (1024.0 * 1024.0);
	if (!gpu_rule) {
		o->charged_wrap_s = o->wrap_s;
		o->charged_free_s = o->free_s;
		o->charged_runq_s = o->runq_s;
		o->charged_touch_s = o->touch_s;
		o->charged_slowed_s = o->slowed_s;
		o->charged_gil_s = o->gil_loader_s;
		o->charged_s = o->wrap_s + o->free_s + o->runq_s + o->touch_s + o->slowed_s +
			       o->gil_loader_s;
		return;
	}
	o->gpu_steps = (size_t)sum.gpu_known;
	o->gpu_idle_s = sec(sum.gpu_idle_ns);
	o->refill_s = sec(sum.gpu_refill_ns);
	/* Dropping and queueing were weighed per period; split the charge
	 * between them by their totals over those periods. */
	double cost = o->free_s + o->runq_s;
	double charged = sec(sum.gpu_charged_ns);
	if (cost > 0) {
		o->charged_free_s = charged * o->free_s / cost;
		o->charged_runq_s = charged - o->charged_free_s;
	}
	/* The lock's wait was weighed per period, after dropping and
	 * queueing; the census bounds it as a window sum. */
	double room = sec(sum.gpu_room_ns);
	if (o->gil_loader_s > 0) {
		double gil_idle = sec(sum.gpu_gil_ns);
		o->charged_gil_s = gil_idle < o->gil_loader_s ? gil_idle : o->gil_loader_s;
		room -= o->charged_gil_s;
	}
	/* Only the periods with the GPU's idle time known carry a first-touch
	 * share. */
	double touch_known = o->touch_s * (double)sum.gpu_known / (double)l->known;
	o->charged_touch_s = touch_known < room ? touch_known : room;
	room -= o->charged_touch_s;
	double slowed_known = o->slowed_s * (double)sum.gpu_known / (double)l->known;
	o->charged_slowed_s = slowed_known < room ? slowed_known : room;
	o->charged_wrap_s = sec(sum.gpu_wrap_charged_ns);
	o->charged_s = o->charged_wrap_s + charged + o->charged_gil_s + o->charged_touch_s +
		       o->charged_slowed_s;
	double loading = o->refill_s + o->charged_s;
	o->other_host_s = o->gpu_idle_s > loading ? o->gpu_idle_s - loading : 0;
}

double dlbn_outside_stall_in_waits(const struct dlbn_outside *o, double stall_s)
{
	double in_waits = o->gpu_rule ? stall_s - o->charged_s - o->refill_s : stall_s;
	return in_waits > 0 ? in_waits : 0;
}

int dlbn_outside_lock_bound(const struct dlbn_outside *o, double stall_s, double wall_s)
{
	return !o->gil_why_kept[0] && stall_s > 0 &&
	       (o->charged_gil_s > DLBN_LOCK_BOUND_SHARE * stall_s ||
		o->gil_others_s > DLBN_LOCK_QUEUE_SHARE * wall_s);
}
