/*
 * whatif_threads.c - the what-if's inputs for a loader whose workers are
 * threads of the training process (DALI's pool, torchdata.nodes' thread
 * workers): their time per batch, the CPU they share with the loop, and
 * the interpreter's lock where their Python work and the loop's take turns
 * on it (outside.h).  Part of the what-if model (whatif.h); it reads
 * figures of the analysis and the model, nothing else.
 */
#include <string.h>

#include "analysis/whatif.h"

/*
 * A loader whose workers are threads of the training process (DALI's
 * pool, nodes' thread workers): no figures per thread, so the time per
 * batch on one thread is what the run's threads took per batch times
 * their number.  DALI names its operators' runs (lib_ops.h): the CPU
 * operators' busy time per batch is the stage its threads share, the GPU
 * and mixed operators' a stage of its own that threads do not shorten.
 * Otherwise the loader delivered a batch every step.  The
 * CPU per step: the traced threads' CPU use over the step.
 */
void dlbn_whatif_thread_inputs(const struct dlbn_model *m, const struct dlbn_analysis *a,
			       struct dlbn_whatif *w)
{
	const struct dlbn_lib_ops *o = &m->lib_ops;
	double steps = (double)a->steps_window;
	int64_t cpu_ns = 0, other_ns = 0;
	for (size_t i = 0; i < o->n; i++) {
		if (strchr(o->v[i].name, '('))
			other_ns += o->v[i].busy_ns;
		else if (strcmp(o->v[i].name, "reader") != 0)
			cpu_ns += o->v[i].busy_ns;
	}
	double units = w->num_workers;
	if (cpu_ns > 0) {
		double ops_ms = (double)cpu_ns / 1e6 / steps;
		w->batch_ms = ops_ms * units;
		w->stage_ms = (double)other_ns / 1e6 / steps;
		/* Threads sharing the cores did not each run at full speed: with
		 * fewer of them, a batch needs at most the process's CPU per
		 * step on one. */
		double cpu_ms = a->cpus_used > 0 ? a->cpus_used * w->measured_ms : 0;
		if (cpu_ms > 0 && cpu_ms < w->batch_ms)
			w->fewer_batch_ms = cpu_ms;
		dlbn_whatif_note(w,
				 "DALI's CPU operators ran %.1f ms per batch on %d thread(s), "
				 "taken as %.1f ms "
				 "on one (they split a batch's samples among the threads)%s%s",
				 ops_ms, w->num_workers, w->batch_ms,
				 w->fewer_batch_ms > 0
					 ? "; with fewer threads at most the process's CPU per "
					   "step"
					 : "",
				 w->stage_ms > 0 ? "; its GPU and mixed operators stay as they are"
						 : "");
	} else {
		w->batch_ms = w->measured_ms * units;
		dlbn_whatif_note(
			w,
			"the loader's %d thread(s) are not measured one by one: taken as busy "
			"through "
			"every step (%.1f ms), which overstates them when the loop barely waits",
			w->num_workers, w->measured_ms);
	}
	w->in_process = 1;
	const struct dlbn_outside *out = &a->outside;
	if (dlbn_outside_lock_bound(out, a->stall_s, a->wall_s) && steps > 0) {
		/* The loader's threads' CPU per batch, all of it under the lock
		 * they queue for, or at least what the loop waited for it. */
		double loop_cpu = out->cpu_s * 1e3 / steps;
		double threads_cpu =
			a->cpus_used > 0 ? a->cpus_used * w->measured_ms - loop_cpu : 0;
		w->lock_ms = out->gil_loader_s * 1e3 / steps;
		if (threads_cpu > w->lock_ms)
			w->lock_ms = threads_cpu;
		w->loop_lock_ms = loop_cpu;
		/* Fewer threads hold the lock as long per batch: one does the
		 * batch in the time they all held it. */
		if (w->fewer_batch_ms <= 0 || w->lock_ms < w->fewer_batch_ms)
			w->fewer_batch_ms = w->lock_ms;
		dlbn_whatif_note(
			w,
			"the loader's threads hold the interpreter's lock (GIL) %.1f ms per "
			"batch: their Python work and the loop's (%.1f ms) take turns on it, "
			"whatever the thread count",
			w->lock_ms, w->loop_lock_ms);
	}
	if (a->cpus_used > 0) {
		/* The loader's threads are the training process's: its CPU holds
		 * theirs, and more threads do the same work. */
		w->main_cpu_ms = a->cpus_used * w->measured_ms;
		w->cpu_known = 1;
	}
	w->worker_cpu_ms = 0;
}
