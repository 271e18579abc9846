/*
 * verdict.h - from the model to the answer: steady-state window, stall,
 * predicted speedup, verdict, reasons, localisation and recommendations
 * (docs/DESIGN.md, "Verdict rules").
 */
#ifndef DLBN_VERDICT_H
#define DLBN_VERDICT_H

#include <stddef.h>
#include <stdint.h>

#include "analysis/memory.h"
#include "analysis/outside.h"
#include "gpu/gpu.h"
#include "model/model.h"
#include "trace/reader.h"

/* Ordered so that "at or above" works for --fail-on. */
enum dlbn_verdict {
	DLBN_VERDICT_INCONCLUSIVE = 0,
	DLBN_VERDICT_NOT_DETECTED = 1,
	DLBN_VERDICT_POTENTIAL = 2,
	DLBN_VERDICT_DETECTED = 3,
};

/*
 * The verdict's cause (docs/DESIGN.md, "Verdict rules"): why there is no
 * verdict, what the stall is made of, or what paces the loop instead.
 * Reports and summaries print dlbn_cause_name's word; DLBN_CAUSE_NOT_SET
 * (an analysis that named none) prints as "".
 */
enum dlbn_cause {
	DLBN_CAUSE_NOT_SET = 0,
	/* No verdict. */
	DLBN_CAUSE_NO_TRAINING_PROCESS,
	DLBN_CAUSE_NO_LOADER,
	DLBN_CAUSE_NO_HANDOFF,
	DLBN_CAUSE_TOO_FEW_STEPS,
	DLBN_CAUSE_UNMATCHED_WAITS,
	DLBN_CAUSE_GPU_EVIDENCE_MISSING,
	DLBN_CAUSE_DAMAGED_TRACE,
	DLBN_CAUSE_RECORDING_STOPPED,
	/* Loading is the answer. */
	DLBN_CAUSE_MAIN_THREAD_LOADING,
	DLBN_CAUSE_EPOCH_STARTUP,
	DLBN_CAUSE_CPU_CONTENTION,
	DLBN_CAUSE_STORAGE,
	DLBN_CAUSE_WORKERS_SATURATED,
	DLBN_CAUSE_PIN_MEMORY_THREAD,
	DLBN_CAUSE_IPC_TRANSFER,
	DLBN_CAUSE_STRAGGLER,
	DLBN_CAUSE_DALI_PIPELINE,
	DLBN_CAUSE_LOADER_THROUGHPUT,
	DLBN_CAUSE_GIL_CONTENTION,
	DLBN_CAUSE_UNKNOWN,
	/* Loading is not. */
	DLBN_CAUSE_NONE,
	DLBN_CAUSE_COMPUTE_BOUND,
	DLBN_CAUSE_HOST_BOUND,
};

#define DLBN_DETECTED_ABOVE    1.50
#define DLBN_POTENTIAL_ABOVE   1.10
#define DLBN_MIN_STEPS_MARGIN  8    /* window steps needed beyond the prefetch depth */
#define DLBN_WORKER_RUNQ_SHARE 0.20 /* workers runnable-not-running: contention */
#define DLBN_MAIN_RUNQ_SHARE   0.10 /* the loop's thread likewise, share of the window */

struct dlbn_verdict_opts {
	double detected_above;	/* speedup > this: DETECTED */
	double potential_above; /* speedup > this: POTENTIAL */
	int min_margin;		/* window needs prefetch depth + this many steps */
};

#define DLBN_MAX_LINES 24
#define DLBN_LINE      320

/*
 * The recommendation line that names a count of the loader's own workers
 * or threads ("num_workers 2 -> 5: ..."), kept in parts so that the what-if
 * (whatif.h), which models every count, can settle the count and the
 * report gives one answer.  The line reads prefix name from -> to suffix.
 */
struct dlbn_advice {
	int present;
	size_t rec;		/* its index in recs */
	char knob[24];		/* the what-if curve's setting: num_workers, num_threads */
	char name[40];		/* as the line names it: "num_workers", "DALI num_threads" */
	int from, to;		/* the run's count, the advised one */
	char prefix[160];	/* before the name ("" or a sentence ending ", or ") */
	char suffix[DLBN_LINE]; /* after the count: ": why" or " (if ...)" */
	char alt[120];		/* what else to change whatever the count, "" none */
};

struct dlbn_analysis {
	int verdict;
	double predicted_speedup; /* 0 when it could not be computed */
	/* The speedup with the GPU-idle part of the unprobed waits taken out
	 * of the stall (gpu.h, "missing evidence"): the low end of the range.
	 * Equals predicted_speedup when every wait had usable probes. */
	double predicted_speedup_low;
	int gpu;	      /* the GPU rule applied (gpu.present) */
	double sync_fraction; /* host blocked in GPU syncs / window wall */
	double pageable_ms;   /* per step: host blocked in pageable H2D copies */
	int view, path;
	size_t steps_total, steps_warmup, steps_window;
	int64_t window_begin, window_end; /* absolute ns */
	double start_s, end_s, wall_s;	  /* relative to the model's t0 */
	double exposed_s, stall_s, exposed_fraction, stall_fraction;
	double mean_ms, p50_ms, p95_ms, max_ms;
	double loop_ms;			    /* loop time per step without the wait */
	double recv_ms, recv_kib, recv_fds; /* IPC hand-off per batch (direct path) */
	/* Outside later epochs' start-up: the wait per step, and of an IPC
	 * wait the part before the batch arrived (direct path; -1 unknown). */
	double steady_wait_ms, arrive_ms;
	double startup_stall_s;	     /* stall in the warm-up steps of later epochs */
	struct dlbn_outside outside; /* included in stall_s (charged_s) */
	/* Other DataLoaders of the loop (loaders.h): their stall inside the
	 * window, included in stall_s (Replay caches every loader). */
	double other_loaders_stall_s, other_loaders_wait_s;
	size_t other_loaders_steps;
	int epochs;
	int num_workers; /* config, else inferred; -1 unknown */
	int prefetch_depth;
	size_t nworkers;
	struct dlbn_worker_stats *workers; /* workers alive in the window */
	double mean_busy;		   /* -1: no workers */
	/* CPU contention over the window (SCHED samples; -1: no samples). */
	double main_runq_fraction; /* loop thread runnable-not-running / window */
	/* Part of the stall that is the loop thread queued for a CPU the
	 * loader's workers hold (included in stall_s; 0 without SCHED). */
	double contention_stall_s;
	double workers_runq_share; /* workers' runq wait / their busy wall time */
	double cpus_used;	   /* CPU time of sampled threads / window wall */
	size_t sched_threads;	   /* threads with samples in the window */
	size_t census_threads;	   /* and threads only the census saw (their CPU in cpus_used) */
	int cpu_contended;	   /* workers or the loop wait for a CPU (thresholds below) */
	enum dlbn_cause cause;
	struct dlbn_advice advice; /* !present: no line names a count */
	/* The run's memory, copy-on-write growth, the job's limit and how
	 * the run died if it did (memory.h). */
	struct dlbn_memory memory;
	size_t nreasons, nrecs, nwarnings;
	char reasons[DLBN_MAX_LINES][DLBN_LINE];
	char recs[DLBN_MAX_LINES][DLBN_LINE];
	char warnings[DLBN_MAX_LINES][DLBN_LINE];
};

void dlbn_verdict_default_opts(struct dlbn_verdict_opts *o);

/* Rewrite a->recs[a->advice.rec] from a->advice's parts (after a change
 * of its count or suffix). */
void dlbn_advice_format(struct dlbn_analysis *a);

/* The threshold rule alone (docs/DESIGN.md, "Verdict rules"). */
int dlbn_classify(double speedup, size_t window_steps, int prefetch_depth,
		  const struct dlbn_verdict_opts *o);

/*
 * Full analysis; 0 on success, -1 out of memory.  Free with
 * dlbn_analysis_free.  gpu: the GPU figures of the model's chosen window
 * (&m->gpu, as the model build leaves them), or NULL / !present for the
 * CPU-only rule.  The verdict
 * copies the GPU evidence lines into its reasons, applies the stall's
 * uncertainty range, and names compute-bound and host-bound causes.
 */
int dlbn_analyze_gpu(const struct dlbn_model *m, const struct dlbn_reader_stats *rs,
		     const struct dlbn_verdict_opts *o, const struct dlbn_gpu *gpu,
		     struct dlbn_analysis *a);
/* The same without GPU figures (CPU-only rule; tests, baseline). */
int dlbn_analyze(const struct dlbn_model *m, const struct dlbn_reader_stats *rs,
		 const struct dlbn_verdict_opts *o, struct dlbn_analysis *a);
void dlbn_analysis_free(struct dlbn_analysis *a);

const char *dlbn_verdict_name(int verdict);
const char *dlbn_view_name(int view);
const char *dlbn_path_name(int path);
const char *dlbn_cause_name(enum dlbn_cause cause);

#endif /* DLBN_VERDICT_H */
