/*
 * verdict_cause.c - where the stall comes from, for torch's DataLoader:
 * the cause (enum dlbn_cause), the reasons that show it and what to change
 * (CPU contention and the cores the model shares with the workers, slow or
 * uneven workers, storage, the hand-off path, epoch start-up, loading in
 * the loop).  verdict.c calls it once the window's figures and the verdict
 * are in; other loaders' causes are verdict_loaders.c's.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "analysis/verdict_int.h"

/*
 * The model's own threads share the cores with the workers (shared_cores.h):
 * what gives the model its cores back.  Fewer intra-op threads than cores
 * left by the workers keeps a parallel region from waiting on a queued
 * thread; separate cores for workers and model keep them from taking
 * turns; decoding on the GPU takes the workers' CPU use away.
 */
static void shared_cores_advice(struct dlbn_analysis *a)
{
	const struct dlbn_outside *o = &a->outside;
	const struct dlbn_shared_cores *c = &o->cores;
	int cpus = c->cpus > 0 ? c->cpus : 0;
	if (c->cpu_quota > 0 && (cpus == 0 || c->cpu_quota < cpus))
		cpus = (int)c->cpu_quota;
	int threads = c->intraop_threads > 0 ? c->intraop_threads : (int)c->gang + 1;
	char cores[64] = "the cores";
	if (cpus > 0)
		snprintf(cores, sizeof(cores), "%d CPU%s", cpus, cpus == 1 ? "" : "s");
	REASON("CPU contention: the model runs on %d threads (the loop's and %zu more) that "
	       "share %s with %zu busy worker%s: %.3f s of the loop's own CPU time "
	       "(%.0f%% of the window) is the model's work slowed by the workers' CPU use, "
	       "which Replay does not have",
	       threads, c->gang, cores, a->nworkers, a->nworkers == 1 ? "" : "s", o->slowed_s,
	       o->slowed_s / a->wall_s * 100);
	REC("the model's threads and %zu workers share %s and take turns on them: give each "
	    "its own cores (os.sched_setaffinity in worker_init_fn for the workers, "
	    "torch.set_num_threads to the cores left for the model), or fewer workers "
	    "(--what-if), or decode on the GPU (DALI, torchvision.io.decode_jpeg on cuda)",
	    a->nworkers, cores);
}

static void contention_reasons(struct dlbn_analysis *a)
{
	if (a->workers_runq_share >= DLBN_WORKER_RUNQ_SHARE)
		REASON("CPU contention: the workers wait for a CPU %.0f%% of their busy time (%zu "
		       "worker process%s; the traced threads themselves use %.1f CPUs on average): "
		       "the CPUs are saturated, more workers will not help",
		       a->workers_runq_share * 100, a->nworkers, a->nworkers == 1 ? "" : "es",
		       a->cpus_used);
	if (a->main_runq_fraction >= DLBN_MAIN_RUNQ_SHARE) {
		REASON("CPU contention: the training loop's thread waits for a CPU %.0f%% of the "
		       "window (runnable but not running)",
		       a->main_runq_fraction * 100);
		if (a->contention_stall_s > 0)
			REASON("%.3f s of the stall is that queueing outside the loader waits: "
			       "without busy workers (Replay) the loop gets its core back",
			       a->contention_stall_s);
		if (a->nworkers && !(a->outside.charged_slowed_s > 0))
			REC("the training loop's thread waits for a CPU %.0f%% of the window while "
			    "%zu workers share the cores: fewer workers, or fewer threads per "
			    "worker (torch.set_num_threads(1) in worker_init_fn), give it its core "
			    "back",
			    a->main_runq_fraction * 100, a->nworkers);
	}
	if (a->nworkers && a->outside.charged_slowed_s > 0)
		shared_cores_advice(a);
}

/* Mean per-batch worker time and the file-read share of worker busy time. */
static void worker_totals(const struct dlbn_analysis *a, double *batch_ms, double *file_share)
{
	double ms = 0, busy = 0, file = 0;
	uint64_t b = 0;
	for (size_t i = 0; i < a->nworkers; i++) {
		ms += a->workers[i].mean_batch_ms * (double)a->workers[i].batches;
		b += a->workers[i].batches;
		busy += a->workers[i].busy_s;
		file += a->workers[i].file_read_s;
	}
	*batch_ms = b ? ms / (double)b : 0;
	*file_share = busy > 0 ? file / busy : 0;
}

static void straggler(struct dlbn_analysis *a)
{
	if (a->nworkers < 2)
		return;
	for (size_t i = 0; i < a->nworkers; i++) {
		double others = 0;
		size_t n = 0;
		for (size_t k = 0; k < a->nworkers; k++) {
			if (k == i || !a->workers[k].batches)
				continue;
			others += a->workers[k].mean_batch_ms;
			n++;
		}
		if (!n || !a->workers[i].batches)
			continue;
		others /= (double)n;
		if (a->workers[i].mean_batch_ms > 1.5 * others && others > 0) {
			REASON("straggler: worker pid %d needs %.1f ms per batch, the others %.1f "
			       "ms "
			       "on average",
			       a->workers[i].pid, a->workers[i].mean_batch_ms, others);
			if (a->cause == DLBN_CAUSE_NOT_SET)
				a->cause = DLBN_CAUSE_STRAGGLER;
		}
	}
}

/* Loading is not the answer: the loop's wait in figures, cause none. */
static void not_detected_reasons(struct dlbn_analysis *a)
{
	/* With GPU evidence the exposed wait can be large and harmless:
	 * say both, so a long wait is not read as a missed bottleneck. */
	if (a->verdict == DLBN_VERDICT_NOT_DETECTED && a->stall_s < 0.99 * a->exposed_s)
		REASON("the loop waits %.2f ms per step for data (%.1f%% of the window), "
		       "but the "
		       "GPU still had work during most of it: stall %.1f%% of the window",
		       a->mean_ms, a->exposed_fraction * 100, a->stall_fraction * 100);
	else if (a->verdict == DLBN_VERDICT_NOT_DETECTED)
		REASON("the loop waits %.2f ms per step for data (%.1f%% of the window): "
		       "the input pipeline keeps up",
		       a->mean_ms, a->exposed_fraction * 100);
	a->cause = DLBN_CAUSE_NONE;
}

/* The loader runs in the loop's thread: num_workers=0, or (NVTX view, no
 * bootstrap) no worker process in the trace at all.  1 when it does. */
static int loop_loading(const struct dlbn_model *m, struct dlbn_analysis *a)
{
	int nw = a->num_workers;
	int in_loop = nw == 0 || (nw < 0 && m->nworkers_total == 0 && a->view == DLBN_VIEW_NVTX);
	if (!in_loop || (a->view != DLBN_VIEW_PYTHON && a->view != DLBN_VIEW_NVTX))
		return 0;
	int need = a->loop_ms > 0 ? ceil_ratio(a->mean_ms, a->loop_ms) : 1;
	if (need < 1)
		need = 1;
	a->cause = DLBN_CAUSE_MAIN_THREAD_LOADING;
	REASON("the dataset runs in the training loop's thread (%s): loading costs %.1f ms "
	       "per step, %.0f%% of the window",
	       nw == 0 ? "num_workers=0" : "no DataLoader worker process in the trace", a->mean_ms,
	       a->stall_fraction * 100);
	verdict_advise(a, "num_workers", "num_workers", 0, need, "",
		       ": loading a batch takes %.1f ms, the loop consumes one every %.1f ms",
		       a->mean_ms, a->loop_ms);
	return 1;
}

/* Workers re-started every epoch: their start-up stall in later epochs. */
static void epoch_startup(const struct dlbn_config *c, struct dlbn_analysis *a)
{
	if (a->startup_stall_s > 0.5 * a->stall_s && a->epochs > 1) {
		a->cause = DLBN_CAUSE_EPOCH_STARTUP;
		REASON("epoch start-up: %.2f s of the %.2f s stall falls in the first batches of "
		       "epochs 2..%d (workers re-started every epoch)",
		       a->startup_stall_s, a->stall_s, a->epochs);
		if (c->persistent_workers != 1)
			REC("persistent_workers=True: keeps the workers across epochs and saves "
			    "%.2f s of start-up stall",
			    a->startup_stall_s);
	} else if (a->startup_stall_s > 0.1 * a->stall_s && a->epochs > 1) {
		REASON("epoch start-up: %.2f s of the %.2f s stall is at the start of later epochs",
		       a->startup_stall_s, a->stall_s);
		if (c->persistent_workers != 1)
			REC("persistent_workers=True would save about %.2f s", a->startup_stall_s);
	}
}

/* DALI's proxy DataLoader: its workers only gather each sample's inputs,
 * DALI's pipeline in this process makes the batch.  1 when it is one. */
static int dali_proxy(const struct dlbn_model *m, const struct dlbn_config *c,
		      struct dlbn_analysis *a)
{
	if (c->dali_proxy != 1 || !(a->loop_ms > 0) || !(a->mean_busy < 0.5))
		return 0;
	REASON("DALI proxy DataLoader: its workers only gather the inputs (busy %.0f%% of "
	       "the window); DALI's pipeline in the training process makes each batch",
	       a->mean_busy > 0 ? a->mean_busy * 100 : 0);
	verdict_dali_pipeline(m, c, a, verdict_loader_period_ms(a), verdict_cores_full(c, a));
	return 1;
}

/* Saturated workers: more of them, unless the cores are the limit (more
 * processes on saturated cores only queue longer). */
static void saturated_advice(struct dlbn_analysis *a, double batch_ms, int need)
{
	int nw = a->num_workers;
	if (a->cpu_contended) {
		double wq = a->workers_runq_share > 0 ? a->workers_runq_share : 0;
		if (a->cause == DLBN_CAUSE_WORKERS_SATURATED)
			a->cause = DLBN_CAUSE_CPU_CONTENTION;
		REC("cores are the limit, not num_workers: the %zu worker%s wait%s for a "
		    "CPU %.0f%% of their busy time and the loop's thread %.0f%% of the "
		    "window (%.1f CPUs in use); %d workers would keep up only with about "
		    "%d "
		    "free cores: make __getitem__/transforms cheaper, or run on more cores",
		    a->nworkers, a->nworkers == 1 ? "" : "s", a->nworkers == 1 ? "s" : "", wq * 100,
		    a->main_runq_fraction > 0 ? a->main_runq_fraction * 100 : 0, a->cpus_used, need,
		    (int)ceil(batch_ms * (1 - wq) / a->loop_ms));
	} else if (nw > 0) {
		verdict_advise(a, "num_workers", "num_workers", nw, need, "",
			       ": each worker needs %.1f ms per batch, the loop consumes "
			       "one every "
			       "%.1f ms (if the machine has the cores; otherwise make "
			       "__getitem__/transforms cheaper)",
			       batch_ms, a->loop_ms);
		ADVICE_ALT("make __getitem__/transforms cheaper");
	} else {
		REC("about %d workers would keep up: each needs %.1f ms per batch, the "
		    "loop consumes one every %.1f ms",
		    need, batch_ms, a->loop_ms);
	}
}

/* Workers busy nearly all the window: they, or the storage they read,
 * set the pace. */
static void workers_saturated(struct dlbn_analysis *a, double batch_ms, double file_share)
{
	if (!(a->mean_busy >= 0.9) || !(batch_ms > 0) || !(a->loop_ms > 0))
		return;
	int need = ceil_ratio(batch_ms, a->loop_ms);
	if (need <= a->num_workers)
		need = a->num_workers + 1;
	if (a->cause == DLBN_CAUSE_NOT_SET)
		a->cause = file_share >= 0.5 ? DLBN_CAUSE_STORAGE : DLBN_CAUSE_WORKERS_SATURATED;
	REASON("workers saturated: busy %.0f%%, each needs %.1f ms per batch while the "
	       "loop consumes one every %.1f ms",
	       a->mean_busy * 100, batch_ms, a->loop_ms);
	if (file_share >= 0.3) {
		REASON("storage: %.0f%% of the workers' busy time is spent in file reads",
		       file_share * 100);
		REC("storage-bound: faster or local storage, caching the dataset, or "
		    "larger sequential reads; more workers help only while storage has "
		    "spare bandwidth");
	}
	saturated_advice(a, batch_ms, need);
}

/* The batch's way from the workers to the loop: the pin-memory thread
 * lagging, or receiving it costing most of the wait. */
static void handoff_path(struct dlbn_analysis *a)
{
	if (a->path == DLBN_PATH_PIN && a->mean_busy >= 0 && a->mean_busy < 0.7) {
		if (a->cause == DLBN_CAUSE_NOT_SET)
			a->cause = DLBN_CAUSE_PIN_MEMORY_THREAD;
		REASON("pin-memory thread lagging: the main thread waits on it while the "
		       "workers are idle %.0f%% of the time",
		       (1 - a->mean_busy) * 100);
		REC("the pin-memory thread competes for the GIL and CPU with the loop: try "
		    "pin_memory=False, or fewer/larger tensors per batch");
	}
	if (a->path == DLBN_PATH_DIRECT && a->recv_ms > 0) {
		double share = a->mean_ms > 0 ? a->recv_ms / a->mean_ms : 0;
		REASON("hand-off: the main thread spends %.2f ms per batch receiving it (%.1f KiB, "
		       "%.1f shared-memory fds per batch), %.0f%% of its wait",
		       a->recv_ms, a->recv_kib, a->recv_fds, share * 100);
		if (share >= 0.5 && (a->mean_busy < 0.9 || a->mean_busy < 0)) {
			if (a->cause == DLBN_CAUSE_NOT_SET)
				a->cause = DLBN_CAUSE_IPC_TRANSFER;
			REC("IPC/transfer-bound: fewer and larger tensors per batch (each tensor "
			    "costs one fd exchange), smaller dtypes, or decode on the GPU");
		}
	}
}

/*
 * Localisation: what the wait is made of, and what to change.  Each step
 * names the cause only when none before it has (the first that applies
 * is the answer); their reasons and advice add up.
 */
void verdict_localise(const struct dlbn_model *m, struct dlbn_analysis *a)
{
	const struct dlbn_config *c = &m->config;
	int detected = a->verdict == DLBN_VERDICT_DETECTED || a->verdict == DLBN_VERDICT_POTENTIAL;
	double batch_ms, file_share;
	worker_totals(a, &batch_ms, &file_share);

	if (a->nworkers && a->mean_busy >= 0)
		REASON("workers busy %.0f%% of the window on average (%zu worker process%s)",
		       a->mean_busy * 100, a->nworkers, a->nworkers == 1 ? "" : "es");
	contention_reasons(a);
	if (!detected) {
		not_detected_reasons(a);
		return;
	}
	if (a->mean_busy < 0 && verdict_other_loader(m, c, a))
		return;
	if (loop_loading(m, a))
		return;
	epoch_startup(c, a);
	/* Most of the stall is the loop queued or slowed behind busy workers,
	 * not waiting for a batch: the cores are what the loader takes. */
	if (a->cause == DLBN_CAUSE_NOT_SET &&
	    a->outside.charged_runq_s + a->outside.charged_slowed_s > 0.5 * a->stall_s)
		a->cause = DLBN_CAUSE_CPU_CONTENTION;
	if (dali_proxy(m, c, a))
		return;
	workers_saturated(a, batch_ms, file_share);
	handoff_path(a);
	straggler(a);
	if (a->mean_busy >= 0 && a->mean_busy < 0.5)
		REASON("workers idle %.0f%% of the window: they are not the bottleneck",
		       (1 - a->mean_busy) * 100);
	if (a->cause == DLBN_CAUSE_NOT_SET && verdict_other_loader(m, c, a))
		return;
	if (a->cause == DLBN_CAUSE_NOT_SET) {
		a->cause = DLBN_CAUSE_UNKNOWN;
		REASON("the loop waits for data but no single cause stands out in the evidence");
	}
}
