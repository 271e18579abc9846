/*
 * verdict_loaders.c - the verdict's causes for the loaders other than
 * torch's DataLoader (dlbn_loader_kind: DALI's iterators, torchdata.nodes,
 * a loader named with --loader), and for DALI's proxy DataLoader, whose
 * batches DALI's pipeline makes.  Their workers are threads of the training
 * process or map samples, so what the loop sees is the loader's throughput;
 * the lines say it in the loader's own knobs.
 */
#include <stdio.h>
#include <string.h>

#include "analysis/verdict_int.h"
#include "model/loaders.h"

/*
 * DALI: the pipeline's throughput, and its operators' busy time in the
 * window (lib_ops.h) naming the stage that costs it.  Decoding on the CPU
 * first: the GPU decoder is the fix DALI is made for.
 */
void verdict_dali_pipeline(const struct dlbn_model *m, const struct dlbn_config *c,
			   struct dlbn_analysis *a, double period, int cpus_full)
{
	const struct dlbn_lib_ops *o = &m->lib_ops;
	int threads = c->threads > 0 ? c->threads : 1;
	int need = ceil_ratio(threads * period, a->loop_ms);
	const char *device = dlbn_config_value(c, "device");
	int gpu = device && !strcmp(device, "gpu");
	if (a->cause == DLBN_CAUSE_NOT_SET)
		a->cause = DLBN_CAUSE_DALI_PIPELINE;
	REASON("DALI pipeline (%d thread%s, %s): it delivers a batch every %.1f ms, the loop "
	       "consumes one every %.1f ms",
	       threads, threads == 1 ? "" : "s", gpu ? "GPU pipeline" : "CPU-only pipeline", period,
	       a->loop_ms);
	if (o->n && o->busy_ns > 0) {
		char list[200];
		size_t len = 0;
		for (size_t i = 0; i < o->n && i < 4 && len < sizeof(list); i++)
			len += (size_t)snprintf(list + len, sizeof(list) - len,
						"%s%s %.0f%% (%.2f s)", i ? ", " : "", o->v[i].name,
						100.0 * (double)o->v[i].busy_ns /
							(double)o->busy_ns,
						(double)o->v[i].busy_ns / 1e9);
		REASON("DALI's operators by busy time in the window: %s", list);
	}
	int cpu_decode = !gpu && o->n && o->busy_ns > 0 && strcasestr(o->v[0].name, "decode") &&
			 !strstr(o->v[0].name, "(");
	if (cpus_full)
		REC("decode on the GPU (decoders.image device=\"mixed\") and move the other "
		    "operators with it, or run on more cores: more DALI threads than num_threads "
		    "%d would only queue for the %d CPUs (%.1f in use)",
		    threads, c->cpus, a->cpus_used);
	else if (cpu_decode) {
		char prefix[160];
		snprintf(prefix, sizeof(prefix),
			 "decoding is DALI's costliest operator (%.0f%% of its busy time): decode "
			 "on the GPU (decoders.image device=\"mixed\"), or ",
			 100.0 * (double)o->v[0].busy_ns / (double)o->busy_ns);
		verdict_advise(a, "num_threads", "DALI num_threads", threads,
			       need > threads ? need : threads + 1, prefix,
			       " if the machine has the cores");
		ADVICE_ALT("decode on the GPU (decoders.image device=\"mixed\")");
	} else {
		verdict_advise(a, "num_threads", "DALI num_threads", threads,
			       need > threads ? need : threads + 1, "",
			       " (if the machine has the cores), or move decoding to the GPU "
			       "(decoders.image device=\"mixed\") and the other operators with it");
		ADVICE_ALT("move decoding to the GPU (decoders.image device=\"mixed\")");
	}
}

static int lock_bound(const struct dlbn_analysis *a)
{
	return dlbn_outside_lock_bound(&a->outside, a->stall_s, a->wall_s);
}

static void lock_reason(struct dlbn_analysis *a, const char *holders)
{
	const struct dlbn_outside *o = &a->outside;
	a->cause = DLBN_CAUSE_GIL_CONTENTION;
	if (o->charged_gil_s > DLBN_LOCK_BOUND_SHARE * a->stall_s)
		REASON("the loop waited %.3f s (%.0f%% of the stall) for the Python interpreter's "
		       "lock (GIL) while %s held it: their Python work and the loop's take turns "
		       "on it",
		       o->charged_gil_s, 100.0 * o->charged_gil_s / a->stall_s, holders);
	if (o->gil_others_s > DLBN_LOCK_QUEUE_SHARE * a->wall_s)
		REASON("the training process's other threads (%s) waited %.3f s for the Python "
		       "interpreter's lock (GIL) in the %.3f s window, summed: they take turns "
		       "on it",
		       holders, o->gil_others_s, a->wall_s);
}

double verdict_loader_period_ms(const struct dlbn_analysis *a)
{
	return a->wall_s * 1e3 / (double)a->steps_window;
}

int verdict_cores_full(const struct dlbn_config *c, const struct dlbn_analysis *a)
{
	return a->cpu_contended || (c->cpus > 0 && a->cpus_used >= CORES_FULL_SHARE * c->cpus);
}

/*
 * A loader other than torch's DataLoader, without worker processes to
 * measure (DALI's thread pool, nodes' thread workers, a named loader):
 * its throughput is what the loop sees.  It delivers one batch every
 * wait + loop period with its N workers (or threads) busy, so keeping up
 * with the loop takes N x (wait + loop) / loop of them, cores permitting.
 * Said in the loader's own terms.  0 when c is torch's DataLoader.
 */
int verdict_other_loader(const struct dlbn_model *m, const struct dlbn_config *c,
			 struct dlbn_analysis *a)
{
	const char *kind = dlbn_loader_kind(c);
	if (!strcmp(kind, "dataloader") || a->loop_ms <= 0 || !a->steps_window)
		return 0;
	double period = verdict_loader_period_ms(a);
	if (!strcmp(kind, "dali")) {
		verdict_dali_pipeline(m, c, a, period, verdict_cores_full(c, a));
		return 1;
	}
	int workers = c->num_workers > 0 ? c->num_workers : 0;
	a->cause = DLBN_CAUSE_LOADER_THROUGHPUT;
	if (!strcmp(kind, "nodes") && workers > 0 && lock_bound(a) &&
	    strcmp(c->worker_method, "process") != 0) {
		REASON("torchdata.nodes: its %d thread worker%s deliver a batch every %.1f ms, the "
		       "loop consumes one every %.1f ms",
		       workers, workers == 1 ? "" : "s", period, a->loop_ms);
		lock_reason(a, "the map function's threads");
		REC("ParallelMapper(method=\"process\"): the map function holds the GIL, so more "
		    "thread workers would only take turns on it; or make the map function release "
		    "it (work in C: torchvision's decoders, numpy, PIL)");
		ADVICE_ALT("a cheaper map function");
	} else if (!strcmp(kind, "nodes") && workers > 0) {
		int need = ceil_ratio(workers * period, a->loop_ms);
		REASON("torchdata.nodes: its %d %s worker%s deliver a batch every %.1f ms, the "
		       "loop consumes one every %.1f ms",
		       workers, c->worker_method[0] ? c->worker_method : "map",
		       workers == 1 ? "" : "s", period, a->loop_ms);
		if (verdict_cores_full(c, a))
			REC("cores are the limit: ParallelMapper num_workers %d -> %d would keep "
			    "up only with the cores for them (%.1f CPUs in use%s); make the map "
			    "function cheaper, or run on more cores",
			    workers, need > workers ? need : workers + 1, a->cpus_used,
			    a->cpu_contended ? ", the threads queueing for one" : "");
		else
			verdict_advise(
				a, "num_workers", "ParallelMapper num_workers", workers,
				need > workers ? need : workers + 1, "",
				" (if the machine has the cores; method=\"process\" when the map "
				"function holds the GIL), or a cheaper map function");
		ADVICE_ALT("a cheaper map function");
	} else if (!strcmp(kind, "nodes")) {
		REASON("torchdata.nodes: the map runs in the loop's thread (no ParallelMapper "
		       "workers): loading costs %.1f ms per step",
		       a->mean_ms);
		REC("ParallelMapper with about %d workers: a batch takes %.1f ms, the loop "
		    "consumes one every %.1f ms",
		    ceil_ratio(a->mean_ms, a->loop_ms), a->mean_ms, a->loop_ms);
	} else if (lock_bound(a)) {
		REASON("the named loader delivers a batch every %.1f ms, the loop consumes one "
		       "every %.1f ms",
		       period, a->loop_ms);
		lock_reason(a, "the loader's threads");
		REC("produce the batches in processes (a DataLoader with num_workers, or "
		    "torchdata.nodes ParallelMapper(method=\"process\")): the producer holds the "
		    "GIL, so more producer threads would only take turns on it");
	} else {
		REASON("the named loader delivers a batch every %.1f ms, the loop consumes one "
		       "every %.1f ms",
		       period, a->loop_ms);
		REC("the named loader must produce batches %.1fx as fast: more producer threads "
		    "or processes, or cheaper per-batch work",
		    period / a->loop_ms);
	}
	return 1;
}
