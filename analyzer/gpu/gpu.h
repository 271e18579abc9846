/*
 * gpu.h - the GPU side of the analysis (docs/DESIGN.md, "Analyzer layers"):
 * split every loader wait of the training loop into the part during which
 * the GPU still had queued work (hidden by prefetch, not a stall) and the
 * part during which it had none (the stall), from the recorder's drain
 * probes; and gather the host-side GPU evidence (launches, host blocked in
 * syncs, copies from pageable memory) that the verdict and the reports cite.
 *
 * Use: the model runs the split inside its second pass (model.c), one
 * streaming pass with the steps: pass 2 hands every training-process record
 * to dlbn_gpu_pass_record, every step a view produces to
 * dlbn_gpu_pass_step, and after each record a horizon (no step still to
 * come has its wait begin before it) to dlbn_gpu_pass_horizon.  CUDA
 * records wait in a queue until the horizon passes them, so that each is
 * weighed against the waits around it exactly as if all steps were known;
 * a step is handed back, split, once nothing later can change its split.
 * The model's window (m->gpu.win) and evidence lines are then final after
 * dlbn_gpu_finish.
 *
 * When the training process has no CUDA records, nothing is touched: the
 * steps keep the CPU-only rule (gpu_idle_ns = wait_ns) and gpu.present = 0.
 *
 * The probe rule.  A probe is a CUDA event the recorder records on each
 * stream used since the previous probe, at the moment a main-thread wait
 * begins; it completes when all work queued on its stream before it is
 * done.  So the GPU is busy at least until
 *     busy_until(t) = max complete_ns over probes issued at or before t
 * (a stream without newer work was drained by an earlier probe).  For a
 * wait [b, e] the probes that count are those issued up to the cutoff
 *     cutoff = max(first probe issued inside [b, e], min(b + slack, e))
 * (or e when none was issued inside), and
 *     busy = clamp(busy_until(cutoff) - b, 0, e - b),  idle = wait - busy.
 *
 * Missing evidence (the rule, stated once; the reports repeat it):
 *   - A wait is *unknown* when the process had queued GPU work before the
 *     wait that no probe up to the cutoff covers (probing off, a context
 *     not current, an unprobed stream), or when a probe that would count
 *     for it was lost and no later probe on the same stream supersedes it.
 *   - An unknown wait keeps what is known: busy = the part covered by the
 *     probes that did resolve (a lower bound), the rest counts as GPU-idle,
 *     so its stall is an upper bound and never hides a loading problem.
 *     Unknown waits are counted (waits_unknown, wait_unknown_s) and named
 *     in a reason so the verdict can lower its confidence.
 *   - A probe the recorder gave up (status 1) when its pool filled was
 *     polled unfinished just before: its completion is taken to be at least
 *     the PROBE_DONE record's time (a lower bound; strong compute-bound
 *     evidence).  When the give-up came from a driver error (a CUDA_INFO
 *     "probing stopped" record follows), no bound is used.
 *   - Waits before the process ever queued GPU work are GPU-idle (known).
 *
 * Memory: the steps not final yet (those whose probes are still pending,
 * a few in a training loop) and the CUDA records not yet past the horizon
 * (about one step's worth); pending probes live in a fixed ring, streams
 * in a fixed table.  Nothing grows with the number of records or steps.
 * Both queues have a ceiling (GPU_PASS_STEPS_MAX, GPU_PASS_QUEUE_MAX in
 * gpu.c); a trace that reaches one (a lost probe never superseded, a view
 * whose step never closes) has its oldest step split with what is known
 * then (steps_forced; an unknown wait when a probe's answer was still
 * missing: steps_forced_unknown), or its oldest CUDA record weighed early
 * (records_forced).  A wait that would begin before records already
 * weighed without it is cut there and counts as unknown (waits_cut: only
 * pin-path waits far longer than the horizon's lag, or after
 * records_forced).
 */
#ifndef DLBN_GPU_H
#define DLBN_GPU_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "dlbn/dlbn_trace.h"

struct dlbn_model;
struct dlbn_steps;
struct dlbn_step;
struct dlbn_record;

enum dlbn_gpu_sync_kind {
	DLBN_GPU_SYNC_STREAM = 0, /* cuStreamSynchronize */
	DLBN_GPU_SYNC_CTX = 1,	  /* cuCtxSynchronize */
	DLBN_GPU_SYNC_EVENT = 2,  /* cuEventSynchronize */
	DLBN_GPU_SYNC_OTHER = 3,
	DLBN_GPU_SYNC_KINDS = 4,
};

enum dlbn_gpu_copy_dir { /* index of copy_blocked_ns */
			 DLBN_GPU_COPY_HTOD = 0,
			 DLBN_GPU_COPY_DTOH = 1,
			 DLBN_GPU_COPY_DTOD = 2,
			 DLBN_GPU_COPY_OTHER = 3,
			 DLBN_GPU_COPY_DIRS = 4,
};

/* Host-side GPU figures over an interval (a loop period or a window). */
struct dlbn_gpu_host {
	int64_t launches;
	int64_t syncs;
	int64_t sync_ns[DLBN_GPU_SYNC_KINDS];	     /* host blocked in syncs */
	int64_t copy_blocked_ns[DLBN_GPU_COPY_DIRS]; /* host time inside copy calls */
	int64_t pageable_h2d, pageable_h2d_bytes, pageable_h2d_ns;
	int64_t pinned_h2d, pinned_h2d_bytes;
	int64_t async_copies, sync_copies;
};

/* Evidence behind one step's split. */
enum dlbn_gpu_evidence {
	DLBN_GPU_EV_NONE = 0,	 /* step without a wait */
	DLBN_GPU_EV_PROBE = 1,	 /* probes covered all queued work */
	DLBN_GPU_EV_NO_WORK = 2, /* no GPU work queued yet: idle */
	DLBN_GPU_EV_UNKNOWN = 3, /* uncovered work or a lost probe (see rule) */
};

/* Per step of a view: its loop period's host figures and its evidence. */
struct dlbn_gpu_step {
	struct dlbn_gpu_host host; /* records in (end of previous step, end] */
	uint8_t evidence;	   /* DLBN_GPU_EV_* */
	int64_t next_enqueue;	   /* first launch/copy after the step's end, 0 none */
	int64_t refill_ns;	   /* = the step's gpu_refill_ns (model.h) */
	/* The GPU had finished everything queued before the step's wait by
	 * this time (busy_until of the probes that count for it); 0 unknown
	 * (no probe, or none resolved).  With the step's end: when the step
	 * was complete on both sides (--baseline's clock). */
	int64_t gpu_done;
};

struct dlbn_gpu_opts {
	int64_t probe_slack_ns; /* probes this long after a wait begins count for it */
};

/* Figures over a window of steps (dlbn_gpu_window). */
struct dlbn_gpu_win {
	int valid;
	size_t steps;
	double wall_s;
	size_t waits, waits_with_probe, waits_no_work, waits_unknown;
	double wait_s, wait_gpu_busy_s, wait_gpu_idle_s, wait_unknown_s;
	/* GPU-idle part of the unknown waits: the stall's uncertainty.  The
	 * stall lies in [idle - unknown_idle, idle]; a verdict that holds at
	 * both ends does not depend on the missing probes. */
	double wait_unknown_idle_s;
	struct dlbn_gpu_host host;
};

#define DLBN_GPU_MAX_NOTES   4
#define DLBN_GPU_MAX_REASONS 8
#define DLBN_GPU_LINE	     256

struct dlbn_gpu {
	int present; /* the training process did any CUDA work */
	/* Whole run, training process. */
	struct dlbn_gpu_host host;
	size_t streams;	       /* distinct streams given work */
	int streams_saturated; /* more than the table holds: `streams` is a floor */
	uint64_t probes, probes_resolved, probes_lost, probes_unresolved;
	uint64_t probes_lost_bounded;  /* lost, completion bounded below */
	uint64_t probe_done_unmatched; /* PROBE_DONE for no known probe */
	size_t waits, waits_with_probe, waits_no_work, waits_unknown;
	double wait_s, wait_gpu_busy_s, wait_gpu_idle_s, wait_unknown_s;
	int probing_stopped; /* CUDA_INFO "probing stopped" seen */
	int driver_version;  /* CUDA_INFO driver, 0 unknown */
	size_t nnotes;	     /* CUDA_INFO texts (first few) */
	char notes[DLBN_GPU_MAX_NOTES][DLBN_GPU_LINE];
	/* The window (dlbn_gpu_window) and the evidence lines about it. */
	struct dlbn_gpu_win win;
	size_t nreasons;
	char reasons[DLBN_GPU_MAX_REASONS][DLBN_GPU_LINE];
	/* Ceilings and cuts of the streaming pass (see Memory). */
	uint64_t steps_forced, steps_forced_unknown, records_forced, waits_cut;
	/* Window and whole-run sums per view (python, ipc, nvtx), gathered as
	 * steps become final; dlbn_gpu_finish picks from them. */
#define DLBN_GPU_VIEWS 3
	struct dlbn_gpu_win view_win[DLBN_GPU_VIEWS], view_all[DLBN_GPU_VIEWS];
};

void dlbn_gpu_default_opts(struct dlbn_gpu_opts *o);

/* ---- the streaming pass (driven by model.c's second pass) -------------- */

struct dlbn_gpu_pass;

/* A step of view k (0 python, 1 ipc, 2 nvtx) whose split is final: s has
 * gpu_busy_ns, gpu_idle_ns and gpu_refill_ns set; gs is its GPU record.
 * Steps of one view come in step order. */
typedef void (*dlbn_gpu_final_fn)(void *ctx, int k, struct dlbn_step *s,
				  const struct dlbn_gpu_step *gs);

/* Start the split for m's training process (roles decided).  o may be
 * NULL (defaults).  NULL when out of memory. */
struct dlbn_gpu_pass *dlbn_gpu_pass_new(const struct dlbn_model *m, struct dlbn_gpu *g,
					const struct dlbn_gpu_opts *o, dlbn_gpu_final_fn fn,
					void *ctx);
/* A record of the training process, in reader order (others ignored). */
void dlbn_gpu_pass_record(struct dlbn_gpu_pass *ps, const struct dlbn_record *r);
/* View k produced step s (its wait not split yet). */
void dlbn_gpu_pass_step(struct dlbn_gpu_pass *ps, int k, const struct dlbn_step *s);
/* Every record before h has been handed over, and no step still to come
 * has its wait begin before h: queued records before h are weighed, and
 * steps whose split is final are handed to fn. */
void dlbn_gpu_pass_horizon(struct dlbn_gpu_pass *ps, int64_t h);
/* End of the trace: every remaining step is split and handed to fn. */
void dlbn_gpu_pass_end(struct dlbn_gpu_pass *ps);
/* Nonzero when memory ran out (some steps then never reached fn). */
int dlbn_gpu_pass_failed(const struct dlbn_gpu_pass *ps);
void dlbn_gpu_pass_free(struct dlbn_gpu_pass *ps);

/*
 * After the pass: whole-run wait figures from view `whole` (the model
 * passes the Python view if it has steps, else the IPC one), the window
 * figures of view k (the chosen view; its window is (ws, we]) and the
 * evidence lines about them.  Safe when !g->present (gives the "no GPU
 * activity" line).
 */
void dlbn_gpu_finish(struct dlbn_gpu *g, int whole, int k, int64_t ws, int64_t we);

/*
 * Window figures and evidence lines over the steps of st whose end lies in
 * (ws, we], from the per-step records st keeps (model option keep_steps;
 * tests use it to look at any interval).  Without kept records it gives
 * the same lines as dlbn_gpu_finish with empty sums.
 */
void dlbn_gpu_window(struct dlbn_gpu *g, const struct dlbn_steps *st, int64_t ws, int64_t we);

/* The per-step GPU records st keeps (keep_steps), or NULL. */
const struct dlbn_gpu_step *dlbn_gpu_steps_of(const struct dlbn_gpu *g,
					      const struct dlbn_steps *st);

/* Time the host spent blocked in syncs of every kind. */
static inline int64_t dlbn_gpu_sync_total(const struct dlbn_gpu_host *h)
{
	int64_t s = 0;

	for (int k = 0; k < DLBN_GPU_SYNC_KINDS; k++)
		s += h->sync_ns[k];
	return s;
}

#endif /* DLBN_GPU_H */
