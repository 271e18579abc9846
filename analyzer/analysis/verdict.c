/*
 * verdict.c - window, stall, predicted speedup, verdict and the GPU
 * evidence (see verdict.h); the cause, its reasons and recommendations are
 * verdict_cause.c's and verdict_loaders.c's, called from here.
 *
 * Window: the first prefetch-depth + 1 steps of the first epoch are warm-up
 * (worker start-up and the prefetched batches); everything after counts,
 * epoch boundaries included, because Replay removes their cost too.
 *   wall  = end of fetch of step k0-1 .. end of fetch of the last step
 *   stall = sum of the GPU-idle part of the exposed waits of steps k0..N-1
 *   predicted_speedup = wall / (wall - stall)
 * Every claim in the reasons is computed from the window's data.
 *
 * With GPU figures (gpu.h, same window): the GPU rule follows gpu.present;
 * unprobed waits bound the stall from above, and a verdict they decide is
 * lowered (INCONCLUSIVE, or POTENTIAL with the range); when loading is not
 * the problem, host blocked in syncs names a compute-bound cause and a GPU
 * drained at every wait a host-bound one; pageable H2D copies always get a
 * pin_memory recommendation.  CPU contention (SCHED samples) replaces a
 * num_workers increase by "cores are the limit".
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/verdict.h"
#include "analysis/damage.h"
#include "analysis/shared_cores.h"
#include "analysis/verdict_int.h"
#include "util/quantiles.h"

void dlbn_verdict_default_opts(struct dlbn_verdict_opts *o)
{
	o->detected_above = DLBN_DETECTED_ABOVE;
	o->potential_above = DLBN_POTENTIAL_ABOVE;
	o->min_margin = DLBN_MIN_STEPS_MARGIN;
}

const char *dlbn_verdict_name(int v)
{
	switch (v) {
	case DLBN_VERDICT_DETECTED:
		return "DETECTED";
	case DLBN_VERDICT_POTENTIAL:
		return "POTENTIAL";
	case DLBN_VERDICT_NOT_DETECTED:
		return "NOT_DETECTED";
	default:
		return "INCONCLUSIVE";
	}
}

const char *dlbn_view_name(int v)
{
	return v == DLBN_VIEW_PYTHON ? "python"
	       : v == DLBN_VIEW_IPC  ? "ipc"
	       : v == DLBN_VIEW_NVTX ? "nvtx"
				     : "none";
}

const char *dlbn_path_name(int p)
{
	return p == DLBN_PATH_DIRECT ? "direct" : p == DLBN_PATH_PIN ? "pin_memory" : "none";
}

const char *dlbn_cause_name(enum dlbn_cause cause)
{
	static const char *const names[] = {
		[DLBN_CAUSE_NOT_SET] = "",
		[DLBN_CAUSE_NO_TRAINING_PROCESS] = "no_training_process",
		[DLBN_CAUSE_NO_LOADER] = "no_loader",
		[DLBN_CAUSE_NO_HANDOFF] = "no_handoff",
		[DLBN_CAUSE_TOO_FEW_STEPS] = "too_few_steps",
		[DLBN_CAUSE_UNMATCHED_WAITS] = "unmatched_waits",
		[DLBN_CAUSE_GPU_EVIDENCE_MISSING] = "gpu_evidence_missing",
		[DLBN_CAUSE_DAMAGED_TRACE] = "damaged_trace",
		[DLBN_CAUSE_RECORDING_STOPPED] = "recording_stopped",
		[DLBN_CAUSE_MAIN_THREAD_LOADING] = "main_thread_loading",
		[DLBN_CAUSE_EPOCH_STARTUP] = "epoch_startup",
		[DLBN_CAUSE_CPU_CONTENTION] = "cpu_contention",
		[DLBN_CAUSE_STORAGE] = "storage",
		[DLBN_CAUSE_WORKERS_SATURATED] = "workers_saturated",
		[DLBN_CAUSE_PIN_MEMORY_THREAD] = "pin_memory_thread",
		[DLBN_CAUSE_IPC_TRANSFER] = "ipc_transfer",
		[DLBN_CAUSE_STRAGGLER] = "straggler",
		[DLBN_CAUSE_DALI_PIPELINE] = "dali_pipeline",
		[DLBN_CAUSE_LOADER_THROUGHPUT] = "loader_throughput",
		[DLBN_CAUSE_GIL_CONTENTION] = "gil_contention",
		[DLBN_CAUSE_UNKNOWN] = "unknown",
		[DLBN_CAUSE_NONE] = "none",
		[DLBN_CAUSE_COMPUTE_BOUND] = "compute_bound",
		[DLBN_CAUSE_HOST_BOUND] = "host_bound",
	};
	return (unsigned)cause < sizeof(names) / sizeof(names[0]) && names[cause] ? names[cause]
										  : "";
}

int dlbn_classify(double speedup, size_t window_steps, int prefetch_depth,
		  const struct dlbn_verdict_opts *o)
{
	if (window_steps < (size_t)(prefetch_depth + o->min_margin) || !(speedup >= 1.0))
		return DLBN_VERDICT_INCONCLUSIVE;
	if (speedup > o->detected_above)
		return DLBN_VERDICT_DETECTED;
	if (speedup > o->potential_above)
		return DLBN_VERDICT_POTENTIAL;
	return DLBN_VERDICT_NOT_DETECTED;
}

static double rel_s(const struct dlbn_model *m, int64_t t)
{
	return (double)(t - m->t0) / 1e9;
}

/*
 * Processes without an EXIT record.  A worker killed mid-run is reported but
 * does not cut the window: the loop cannot complete the batch it never
 * delivered (that fetch never ends, so it is no step), and the batches
 * other workers delivered afterwards are ordinary steps.
 */
static void report_deaths(const struct dlbn_model *m, const struct dlbn_reader_stats *rs,
			  struct dlbn_analysis *a, int64_t last_step_end)
{
	for (size_t i = 0; i < m->nprocs; i++) {
		const struct dlbn_proc *p = &m->procs[i];
		if (p->has_exit || p->role == DLBN_ROLE_OTHER)
			continue;
		if (p->role == DLBN_ROLE_TRAINING) {
			WARN("training process pid %d has no exit record (killed, or still running "
			     "when the trace was copied)",
			     p->pid);
			continue;
		}
		int mid_run = p->t_last < last_step_end;
		WARN("worker pid %d ended without exit (killed?) at t=%.3f s%s%s", p->pid,
		     rel_s(m, p->t_last), mid_run ? ", before the training loop's last step" : "",
		     rs->truncated ? " (the trace is truncated: its exit may be lost)" : "");
	}
}

/*
 * Sums over the window's steps, gathered by the model as each step's wait
 * and its GPU-idle part became final (window.c).
 */
static void loader_wait_stats(const struct dlbn_model *m, struct dlbn_analysis *a)
{
	const struct dlbn_window *w = &m->steps->w;
	size_t cnt = w->window;
	a->exposed_s = (double)w->exposed_ns / 1e9;
	a->stall_s = (double)w->stall_ns / 1e9;
	a->startup_stall_s = (double)w->startup_ns / 1e9;
	if (a->wall_s > 0) {
		a->exposed_fraction = a->exposed_s / a->wall_s;
		a->stall_fraction = a->stall_s / a->wall_s;
	}
	if (cnt) {
		a->mean_ms = (double)w->exposed_ns / (double)cnt / 1e6;
		a->p50_ms = (double)dlbn_quantiles_at(w->waits, 0.5) / 1e6;
		a->p95_ms = (double)dlbn_quantiles_at(w->waits, 0.95) / 1e6;
		a->max_ms = (double)dlbn_quantiles_at(w->waits, 1.0) / 1e6;
		a->loop_ms = (a->wall_s - a->stall_s) * 1e3 / (double)cnt;
	}
	/* Other loaders' fetches inside the window (Python view only: the
	 * other views do not tell loaders apart). */
	for (size_t i = 0; m->view == DLBN_VIEW_PYTHON && i < m->loaders.n; i++) {
		const struct dlbn_loader_sums *in = &m->loaders.v[i].in_train_window;
		a->other_loaders_steps += in->steps;
		a->other_loaders_wait_s += (double)in->wait_ns / 1e9;
		a->other_loaders_stall_s += (double)in->stall_ns / 1e9;
	}
	a->stall_s += a->other_loaders_stall_s;
	if (a->wall_s > 0)
		a->stall_fraction = a->stall_s / a->wall_s;
	if (cnt)
		a->loop_ms = (a->wall_s - a->stall_s) * 1e3 / (double)cnt;
	/* Hand-off cost per batch: IPC steps inside the chosen view's window. */
	const struct dlbn_window *iw = &m->ipc_steps.w;
	a->steady_wait_ms = w->nsteady ? (double)w->steady_wait_ns / (double)w->nsteady / 1e6 : -1;
	a->arrive_ms = iw->narrive ? (double)iw->arrive_ns / (double)iw->narrive / 1e6 : -1;
	if (iw->nrecv) {
		a->recv_ms = (double)iw->recv_ns / (double)iw->nrecv / 1e6;
		a->recv_kib = (double)iw->bytes / (double)iw->nrecv / 1024.0;
		a->recv_fds = (double)iw->nfds / (double)iw->nrecv;
	}
}

static int collect_workers(const struct dlbn_model *m, struct dlbn_analysis *a)
{
	a->workers = calloc(m->nprocs ? m->nprocs : 1, sizeof(*a->workers));
	if (!a->workers)
		return -1;
	double busy = 0;
	size_t nbusy = 0;
	for (size_t i = 0; i < m->nprocs; i++) {
		if (!dlbn_training_worker(m, i))
			continue;
		struct dlbn_worker_stats ws;
		dlbn_worker_window_stats(m, i, &ws);
		if (ws.busy_fraction < 0 && ws.batches == 0)
			continue; /* not alive in the window */
		a->workers[a->nworkers++] = ws;
		if (ws.busy_fraction >= 0) {
			busy += ws.busy_fraction;
			nbusy++;
		}
	}
	a->mean_busy = nbusy ? busy / (double)nbusy : -1;
	return 0;
}

/* CPU contention figures over the window (docs/DESIGN.md, "Verdict rules"). */
static void cpu_contention(const struct dlbn_model *m, struct dlbn_analysis *a)
{
	int64_t wrun = 0, wwait = 0, run_all = 0, mrun = 0, mwait = 0;
	a->main_runq_fraction = a->workers_runq_share = a->cpus_used = -1;
	for (size_t k = 0; k < m->nsched_threads; k++) {
		size_t ti = m->sched_threads[k];
		int64_t run, wait;
		dlbn_sched_window(m, ti, &run, &wait);
		if (run + wait <= 0)
			continue;
		a->sched_threads++;
		run_all += run;
		if (dlbn_training_worker(m, m->threads[ti].proc_index)) {
			wrun += run;
			wwait += wait;
		} else if ((ssize_t)ti == m->main_thread) {
			mrun = run;
			mwait = wait;
		}
	}
	if (!a->sched_threads || a->wall_s <= 0)
		return;
	/* The training process's threads that call no hook (an intra-op
	 * pool's) use CPUs too. */
	double census_s = dlbn_census_run_s(m, &a->census_threads);
	a->cpus_used = ((double)run_all / 1e9 + census_s) / a->wall_s;
	if (mrun + mwait > 0)
		a->main_runq_fraction = (double)mwait / 1e9 / a->wall_s;
	/* Share of the workers' busy wall time (index received .. result
	 * written), not of their CPU time: a worker that mostly sleeps or
	 * reads files is not short of cores because its little CPU time
	 * queued. */
	double busy_s = 0;
	for (size_t i = 0; i < a->nworkers; i++)
		busy_s += a->workers[i].busy_s;
	if (wrun + wwait > 0 && busy_s > 0) {
		a->workers_runq_share = (double)wwait / 1e9 / busy_s;
		if (a->workers_runq_share > 1)
			a->workers_runq_share = 1;
	}
	a->cpu_contended = a->workers_runq_share >= DLBN_WORKER_RUNQ_SHARE ||
			   a->main_runq_fraction >= DLBN_MAIN_RUNQ_SHARE;
}

/*
 * While workers run, the loop's thread can be runnable but queued behind
 * them for a CPU; Replay has no busy workers and gives it the core back, so
 * that time is a loading cost too.  The part of it inside the stall is
 * already counted: add the share that falls outside, assuming the queueing
 * is spread like the loop's runnable time.
 */
static void add_contention_stall(struct dlbn_analysis *a)
{
	/* Below the contention threshold the queueing is background noise
	 * (other processes, the loop's own threads), not the workers.  With
	 * GPU evidence the loop's queueing costs time only while the GPU has
	 * nothing queued, which the probes do not show outside the waits:
	 * the eval's ipc_heavy run queued 30% of the window with the GPU busy
	 * and Replay gained a fraction of it.  So the CPU-only rule alone. */
	if (a->gpu || a->outside.known || !a->nworkers ||
	    a->main_runq_fraction < DLBN_MAIN_RUNQ_SHARE || a->wall_s <= 0)
		return;
	double extra = a->main_runq_fraction * a->wall_s * (1 - a->stall_fraction);
	if (extra <= 0)
		return;
	a->contention_stall_s = extra;
	a->stall_s += extra;
	a->stall_fraction = a->stall_s / a->wall_s;
	double rest = a->wall_s - a->stall_s;
	a->predicted_speedup = rest > 1e-9 ? a->wall_s / rest : 1e9;
	a->predicted_speedup_low = a->predicted_speedup;
}

/* Loading costs outside the waits (outside.c): into the stall. */
static void outside_waits(const struct dlbn_model *m, struct dlbn_analysis *a)
{
	dlbn_outside_waits(m, a->gpu, a->mean_busy, a->nworkers, &a->outside);
	if (a->outside.charged_s <= 0)
		return;
	a->stall_s += a->outside.charged_s;
	a->stall_fraction = a->wall_s > 0 ? a->stall_s / a->wall_s : 0;
	if (a->steps_window)
		a->loop_ms = (a->wall_s - a->stall_s) * 1e3 / (double)a->steps_window;
}

/* The stall's part outside the waits, when there is one (the evidence
 * lines of the reports give each cost). */
static void outside_reasons(struct dlbn_analysis *a)
{
	const struct dlbn_outside *o = &a->outside;
	if (!o->known || o->charged_s <= 0)
		return;
	char wrap[96] = "";
	if (o->wrapped)
		snprintf(wrap, sizeof(wrap), "the wrapper iterator's work on the batch %.3f s, ",
			 o->charged_wrap_s);
	char slowed[96] = "";
	if (o->charged_slowed_s > 0)
		snprintf(slowed, sizeof(slowed),
			 ", the model's work slowed by the workers' CPU use %.3f s",
			 o->charged_slowed_s);
	char gil[96] = "";
	if (o->charged_gil_s > 0)
		snprintf(gil, sizeof(gil),
			 ", the loop waiting for the interpreter's lock the loader's threads held "
			 "%.3f s",
			 o->charged_gil_s);
	REASON("%.3f s of the stall is loading outside the waits, after the batches arrived "
	       "(%sdropping the previous batch %.3f s, the loop queued for a CPU %.3f s, first "
	       "touch of the new batch %.3f s%s%s)%s",
	       o->charged_s, wrap, o->charged_free_s, o->charged_runq_s, o->charged_touch_s, slowed,
	       gil, o->gpu_rule ? ": the part of them the GPU sat idle for" : "");
}

/* The stall wording follows the rule actually applied: gpu.present, not
 * m->has_cuda (another process's CUDA records set that one). */
static void loaders_reasons(const struct dlbn_model *m, struct dlbn_analysis *a)
{
	const struct dlbn_loader_table *t = &m->loaders;
	if (t->boot_incompatible)
		REASON("the Python bootstrap left the DataLoader alone: %s; no fetch marks, so the "
		       "%s view is used",
		       t->boot_reason[0] ? t->boot_reason
					 : "this torch's DataLoader internals "
					   "differ from what it knows",
		       dlbn_view_name(m->view));
	if (m->view != DLBN_VIEW_PYTHON || t->train < 0 || t->n < 2)
		return;
	struct dlbn_loader_summary ls;
	char what[160];
	dlbn_loader_summary(m, (size_t)t->train, &ls);
	dlbn_loader_describe(&ls, what, sizeof(what));
	REASON("%zu DataLoaders in the training process; the verdict's is loader #%d (%s), "
	       "chosen as %s",
	       t->n, ls.id, what, t->chosen_by);
	if (a->other_loaders_steps)
		REASON("the other loaders' %zu fetches inside the window waited %.3f s, stall %.3f "
		       "s: part of the stall (Replay caches every loader)",
		       a->other_loaders_steps, a->other_loaders_wait_s, a->other_loaders_stall_s);
}

static void basis_reason(struct dlbn_analysis *a)
{
	if (a->predicted_speedup > 0)
		REASON("predicted speedup %.2f = window %.3f s / (%.3f s - stall %.3f s) over "
		       "%zu steps%s",
		       a->predicted_speedup, a->wall_s, a->wall_s, a->stall_s, a->steps_window,
		       a->gpu ? (a->outside.charged_s > 0
					 ? " (stall: the GPU-idle part of the loop's waits and of "
					   "the "
					   "loading after them)"
					 : " (stall: the GPU-idle part of the loop's waits)")
		       : a->outside.charged_s > 0
			       ? " (no GPU activity recorded: the exposed wait and the loading "
				 "after "
				 "it are the stall)"
			       : " (no GPU activity recorded: the exposed wait is the stall)");
}

/* ---- GPU evidence (gpu.c figures over the same window) ----------------- */

#define GPU_COMPUTE_BOUND_SHARE 0.20 /* host blocked in syncs: GPU sets the pace */
#define GPU_HOST_BOUND_SYNC_MAX 0.05 /* ... below this the host does not wait on it */
#define GPU_HOST_BOUND_BUSY_MAX 0.20 /* GPU-busy share of the waits: it had drained */

static double speedup_of(double wall, double stall)
{
	double rest = wall - stall;
	return wall > 0 ? (rest > 1e-9 ? wall / rest : 1e9) : 0;
}

static void gpu_figures(const struct dlbn_gpu *g, struct dlbn_analysis *a)
{
	const struct dlbn_gpu_win *w = &g->win;
	int64_t sync = 0;
	for (int k = 0; k < DLBN_GPU_SYNC_KINDS; k++)
		sync += w->host.sync_ns[k];
	a->sync_fraction = a->wall_s > 0 ? (double)sync / 1e9 / a->wall_s : 0;
	a->pageable_ms = w->steps ? (double)w->host.pageable_h2d_ns / 1e6 / (double)w->steps : 0;
	for (size_t i = 0; i < g->nreasons; i++)
		REASON("GPU: %s", g->reasons[i]);
}

/*
 * Unprobed waits count as GPU-idle (an upper bound of the stall).  When
 * taking their GPU-idle part out moves the speedup into a lower class, the
 * missing probes decide the answer: NOT_DETECTED at the low end makes the
 * verdict INCONCLUSIVE; POTENTIAL at the low end of a DETECTED one is
 * reported as POTENTIAL (data loading costs time either way) with the range.
 * Returns 1 when the verdict became INCONCLUSIVE.
 */
static int gpu_range(const struct dlbn_gpu *g, const struct dlbn_verdict_opts *o,
		     struct dlbn_analysis *a, int prefetch_depth)
{
	double unknown = g->win.wait_unknown_idle_s;
	if (a->verdict < DLBN_VERDICT_POTENTIAL || !(unknown > 0))
		return 0;
	double low_stall = a->stall_s > unknown ? a->stall_s - unknown : 0;
	a->predicted_speedup_low = speedup_of(a->wall_s, low_stall);
	int low = dlbn_classify(a->predicted_speedup_low, a->steps_window, prefetch_depth, o);
	if (low >= a->verdict)
		return 0;
	REASON("%.3f s of the %.3f s stall falls in waits without usable GPU probes: the "
	       "predicted speedup lies between %.2f and %.2f (%s .. %s)",
	       unknown, a->stall_s, a->predicted_speedup_low, a->predicted_speedup,
	       dlbn_verdict_name(low), dlbn_verdict_name(a->verdict));
	if (low >= DLBN_VERDICT_POTENTIAL) {
		a->verdict = low;
		return 0;
	}
	a->verdict = DLBN_VERDICT_INCONCLUSIVE;
	a->cause = DLBN_CAUSE_GPU_EVIDENCE_MISSING;
	REASON("the verdict depends on GPU work the probes did not cover (see the GPU lines "
	       "above for why they are missing)");
	return 1;
}

/* Causes that are not data loading, named only when loading is not the answer. */
static void gpu_causes(const struct dlbn_gpu *g, struct dlbn_analysis *a)
{
	const struct dlbn_gpu_win *w = &g->win;
	if (a->sync_fraction >= GPU_COMPUTE_BOUND_SHARE) {
		REASON("host blocked on the GPU %.0f%% of the window: compute-bound; faster input "
		       "would not help",
		       a->sync_fraction * 100);
		a->cause = DLBN_CAUSE_COMPUTE_BOUND;
		return;
	}
	/* The GPU had drained by the time the loop came back for data, the host
	 * did not wait on it, and the waits are short: the host's own work
	 * between batches (Python, logging, launches) sets the pace. */
	if (w->waits_with_probe == 0 || w->wait_s <= 0 || w->host.launches == 0 ||
	    a->sync_fraction >= GPU_HOST_BOUND_SYNC_MAX ||
	    w->wait_gpu_busy_s / w->wait_s > GPU_HOST_BOUND_BUSY_MAX)
		return;
	REASON("host-bound: the GPU had no queued work at the loop's waits (%.0f%% of the wait "
	       "time GPU-idle) while the host spends %.1f ms per step between batches and is "
	       "blocked on the GPU only %.0f%% of the window: host-side work (Python, logging, "
	       "launch overhead), not data loading, leaves the GPU idle",
	       (1 - w->wait_gpu_busy_s / w->wait_s) * 100, a->loop_ms, a->sync_fraction * 100);
	a->cause = DLBN_CAUSE_HOST_BOUND;
	REC("host-bound: profile the loop between batches (torch.profiler, py-spy); CUDA graphs "
	    "or fewer synchronous calls cut launch overhead");
}

/* Pageable H2D copies: a recommendation whatever the verdict (Replay keeps them). */
static void gpu_pageable(const struct dlbn_gpu *g, struct dlbn_analysis *a)
{
	const struct dlbn_gpu_host *h = &g->win.host;
	if (h->pageable_h2d == 0)
		return;
	REC("pin_memory=True with .to(device, non_blocking=True): the host is blocked %.2f ms per "
	    "step (%.1f%% of the window) in %lld H2D copies from pageable memory; Replay keeps "
	    "these copies, so they are not part of the predicted speedup",
	    a->pageable_ms, a->wall_s > 0 ? (double)h->pageable_h2d_ns / 1e9 / a->wall_s * 100 : 0,
	    (long long)h->pageable_h2d);
}

/*
 * The IPC view's pin path ties the loop thread's waits to batches through
 * the pin-memory thread's posts.  A loop thread blocked most of the window
 * on other threads of its process while the view ties hardly any of it to
 * a batch is fed by something else (another loader's threads with the
 * bootstrap off: torchdata.nodes, a thread prefetcher), whose pipe
 * traffic the view took for batches: no verdict rests on that.
 */
#define UNMATCHED_BLOCKED_SHARE 0.5 /* of the window, blocked on its process's threads */
#define UNMATCHED_TIED_SHARE	0.2 /* of that, tied to batches by the view */

static int unmatched_waits(const struct dlbn_model *m, struct dlbn_analysis *a)
{
	double blocked = (double)m->main_sem_wait_ns / 1e9;
	if (m->view != DLBN_VIEW_IPC || m->path != DLBN_PATH_PIN || a->wall_s <= 0 ||
	    blocked < UNMATCHED_BLOCKED_SHARE * a->wall_s ||
	    a->exposed_s > UNMATCHED_TIED_SHARE * blocked)
		return 0;
	a->verdict = DLBN_VERDICT_INCONCLUSIVE;
	a->cause = DLBN_CAUSE_UNMATCHED_WAITS;
	REASON("the loop's thread was blocked %.2f s (%.0f%% of the window) waiting on other "
	       "threads of its process, of which the IPC view ties %.2f s to batch hand-offs: "
	       "the loop is fed by something other than the DataLoader traffic the view reads "
	       "(another loader's threads: torchdata.nodes, a thread prefetcher)",
	       blocked, blocked / a->wall_s * 100, a->exposed_s);
	REC("record with the Python bootstrap on (it is unless DLBN_PYTHON=0) so that the loop's "
	    "fetches are marked, and name a loader dlbn does not know: dlbn-run --loader "
	    "MODULE:QUALNAME");
	return 1;
}

static int inconclusive_without_steps(const struct dlbn_model *m, struct dlbn_analysis *a)
{
	a->verdict = DLBN_VERDICT_INCONCLUSIVE;
	if (m->nprocs == 0) {
		a->cause = DLBN_CAUSE_NO_TRAINING_PROCESS;
		REASON("no training process found: the trace holds no process records");
		return 0;
	}
	if (dlbn_model_loader_unrecognised(m)) {
		a->cause = DLBN_CAUSE_NO_LOADER;
		REASON("no loader recognised: the loop fetched from no DataLoader, torchdata.nodes "
		       "or DALI iterator; name what it iterates: dlbn-run --loader MODULE:QUALNAME "
		       "(DLBN_LOADER), a class whose iterators yield batches or a function "
		       "returning an iterable");
		return 0;
	}
	a->cause = DLBN_CAUSE_NO_HANDOFF;
	if (m->training < 0)
		REASON("no batch hand-off found: no process receives batches from DataLoader "
		       "workers and there are no Python fetch marks (num_workers=0 with the "
		       "bootstrap off, or not a DataLoader job?); the loader's work cannot be "
		       "told apart from other host work");
	else if (m->config.present && m->config.num_workers == 0)
		REASON("no batch hand-off found: num_workers=0 and no fetch marks; the loader's "
		       "work cannot be told apart from other host work");
	else
		REASON("no batch hand-off found: workers write results but the training "
		       "process never completed a batch read");
	return 0;
}

int dlbn_analyze(const struct dlbn_model *m, const struct dlbn_reader_stats *rs,
		 const struct dlbn_verdict_opts *o, struct dlbn_analysis *a)
{
	return dlbn_analyze_gpu(m, rs, o, NULL, a);
}

static int analyze_intact(const struct dlbn_model *m, const struct dlbn_reader_stats *rs,
			  const struct dlbn_verdict_opts *o, const struct dlbn_gpu *gpu,
			  struct dlbn_analysis *a);

/* The analysis of what the trace holds; damage that touches it (damage.h)
 * makes the verdict INCONCLUSIVE with the loss as its reason. */
int dlbn_analyze_gpu(const struct dlbn_model *m, const struct dlbn_reader_stats *rs,
		     const struct dlbn_verdict_opts *o, const struct dlbn_gpu *gpu,
		     struct dlbn_analysis *a)
{
	if (analyze_intact(m, rs, o, gpu, a) != 0)
		return -1;
	/* Large: not on the stack; one per thread (traces are analysed in
	 * parallel, -j). */
	static _Thread_local struct dlbn_damage d;
	dlbn_damage_assess(m, rs, a, &d);
	if (d.blocks_verdict) {
		/* The first reason: the others describe what is left. */
		a->verdict = DLBN_VERDICT_INCONCLUSIVE;
		a->cause = d.cause;
		size_t n = a->nreasons < DLBN_MAX_LINES ? a->nreasons : DLBN_MAX_LINES - 1;
		memmove(a->reasons[1], a->reasons[0], n * sizeof(a->reasons[0]));
		snprintf(a->reasons[0], DLBN_LINE, "%s", d.reason);
		a->nreasons = n + 1;
	}
	dlbn_memory_compute(m, a);
	return 0;
}

/* The steps' window: its wall time, stall, workers, CPU contention and
 * predicted speedup.  -1: out of memory. */
static int window_figures(const struct dlbn_model *m, const struct dlbn_reader_stats *rs,
			  struct dlbn_analysis *a)
{
	const struct dlbn_steps *st = m->steps;
	const struct dlbn_window *w = &st->w;
	a->steps_total = st->n;
	a->epochs = st->epochs;
	a->steps_warmup = w->warmup;
	a->steps_window = w->window;
	report_deaths(m, rs, a, w->last_end);
	if (w->window > 0) {
		a->window_begin = w->ws;
		a->window_end = w->we;
		a->start_s = rel_s(m, w->ws);
		a->end_s = rel_s(m, w->we);
		a->wall_s = (double)(w->we - w->ws) / 1e9;
		loader_wait_stats(m, a);
	}
	/* The workers' busy share sizes how the model's threads share the
	 * cores with them (outside.h). */
	if (collect_workers(m, a) != 0)
		return -1;
	if (w->window > 0) {
		outside_waits(m, a);
		double rest = a->wall_s - a->stall_s;
		if (a->wall_s > 0)
			a->predicted_speedup = rest > 1e-9 ? a->wall_s / rest : 1e9;
	}
	a->predicted_speedup_low = a->predicted_speedup;
	cpu_contention(m, a);
	add_contention_stall(a);
	return 0;
}

static int analyze_intact(const struct dlbn_model *m, const struct dlbn_reader_stats *rs,
			  const struct dlbn_verdict_opts *o, const struct dlbn_gpu *gpu,
			  struct dlbn_analysis *a)
{
	memset(a, 0, sizeof(*a));
	if (gpu && !gpu->present)
		gpu = NULL;
	a->main_runq_fraction = a->workers_runq_share = a->cpus_used = -1;
	a->gpu = gpu != NULL;
	a->view = m->view;
	a->path = m->path;
	a->prefetch_depth = m->prefetch_depth;
	a->num_workers = m->config.present && m->config.num_workers >= 0
				 ? m->config.num_workers
				 : (m->nworkers_total ? m->num_workers_inferred : -1);
	a->mean_busy = -1;
	if (m->view == DLBN_VIEW_NONE || !m->steps || m->steps->n == 0) {
		report_deaths(m, rs, a, m->t_end);
		loaders_reasons(m, a);
		return inconclusive_without_steps(m, a);
	}
	if (window_figures(m, rs, a) != 0)
		return -1;
	loaders_reasons(m, a);
	a->verdict = dlbn_classify(a->predicted_speedup, a->steps_window, m->prefetch_depth, o);
	if (gpu)
		gpu_figures(gpu, a);
	if (a->verdict == DLBN_VERDICT_INCONCLUSIVE) {
		a->cause = DLBN_CAUSE_TOO_FEW_STEPS;
		REASON("only %zu step(s) after the %zu warm-up step(s); at least %d are needed "
		       "(prefetch depth %d + %d)",
		       a->steps_window, a->steps_warmup, m->prefetch_depth + o->min_margin,
		       m->prefetch_depth, o->min_margin);
		basis_reason(a);
		return 0;
	}
	if (unmatched_waits(m, a))
		return 0;
	basis_reason(a);
	outside_reasons(a);
	if (gpu && gpu_range(gpu, o, a, m->prefetch_depth)) {
		gpu_pageable(gpu, a);
		return 0;
	}
	verdict_localise(m, a);
	if (gpu) {
		if (a->verdict == DLBN_VERDICT_NOT_DETECTED)
			gpu_causes(gpu, a);
		gpu_pageable(gpu, a);
	}
	return 0;
}

void dlbn_analysis_free(struct dlbn_analysis *a)
{
	free(a->workers);
	a->workers = NULL;
}
