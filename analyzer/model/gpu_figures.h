/*
 * gpu_figures.h - the GPU figures the model carries: per step of a view
 * (its loop period's host-side CUDA work and the evidence behind its wait's
 * split), per window of steps, and for the whole run (struct dlbn_gpu, the
 * model's `gpu`).  The GPU split (gpu/gpu.h), a layer above the model, fills
 * them in while the model's second pass runs; the model only keeps them
 * (docs/DESIGN.md, "Analyzer layers").
 */
#ifndef DLBN_GPU_FIGURES_H
#define DLBN_GPU_FIGURES_H

#include <stddef.h>
#include <stdint.h>

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

/* Time the host spent blocked in syncs of every kind. */
static inline int64_t dlbn_gpu_sync_total(const struct dlbn_gpu_host *h)
{
	int64_t s = 0;

	for (int k = 0; k < DLBN_GPU_SYNC_KINDS; k++)
		s += h->sync_ns[k];
	return s;
}

#endif /* DLBN_GPU_FIGURES_H */
