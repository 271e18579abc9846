/*
 * gpu.h - the GPU side of the analysis (docs/DESIGN.md, "Analyzer layers"):
 * split every loader wait of the training loop into the part during which
 * the GPU still had queued work (hidden by prefetch, not a stall) and the
 * part during which it had none (the stall), from the recorder's drain
 * probes; and gather the host-side GPU evidence (launches, host blocked in
 * syncs, copies from pageable memory) that the verdict and the reports cite.
 *
 * Use: the model runs the split inside its second pass, one streaming pass
 * with the steps, through the table dlbn_gpu_split (struct dlbn_split_pass
 * in model/model.h: the model does not include this header).  Pass 2 hands
 * it every training-process record, every step a view produces, and after
 * each record a horizon (no step still to come has its wait begin before
 * it); the pass itself (gpu_pass.h) is the GPU layer's own.
 * CUDA records wait in a queue until the horizon passes them, so that each
 * is weighed against the waits around it exactly as if all steps were
 * known; a step is handed back, split, once nothing later can change its
 * split.  The model's window (m->gpu.win) and evidence lines are then final
 * after dlbn_gpu_finish.  dlbn_gpu_model_opts gives the model options with
 * the split attached, as dlbn-analyze builds every model.
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
#include "model/gpu_figures.h"
#include "model/model.h"

struct dlbn_gpu_opts {
	int64_t probe_slack_ns; /* probes this long after a wait begins count for it */
};

void dlbn_gpu_default_opts(struct dlbn_gpu_opts *o);

/*
 * After the pass: whole-run wait figures from view `whole` (the model
 * passes the Python view if it has steps, else the IPC one), the window
 * figures of view k (the chosen view; its window is (ws, we]) and the
 * evidence lines about them.  Safe when !g->present (gives the "no GPU
 * activity" line).
 */
void dlbn_gpu_finish(struct dlbn_gpu *g, int whole, int k, int64_t ws, int64_t we);

/* The split as the model's second pass runs it (struct dlbn_split_pass). */
extern const struct dlbn_split_pass dlbn_gpu_split;

/* The model's default options with the GPU split attached. */
void dlbn_gpu_model_opts(struct dlbn_model_opts *o);

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

#endif /* DLBN_GPU_H */
