/*
 * gpu_pass.h - the state of the streaming GPU split (gpu.c's file comment
 * has its rules and invariants), shared by its four files and nothing
 * else:
 *
 *   gpu.c         the pass: streams, tracks of waits, probes, CUDA records
 *                 queued until the model's horizon passes them, and when
 *                 each step's split is final (then it is handed on)
 *   gpu_split.c   a step's final split: the wait's GPU-busy and idle parts,
 *                 its refill bubble, the GPU's idle time in its lead, the
 *                 host-side evidence of its loop period
 *   gpu_gaps.c    gap probes: GPU idle time between a lead's own GPU work
 *   gpu_window.c  the window's figures and evidence lines
 */
#ifndef DLBN_GPU_PASS_H
#define DLBN_GPU_PASS_H

#include <stdint.h>

#include "gpu/gpu.h"
#include "model/model.h"
#include "trace/reader.h"

#define NTRACKS		       DLBN_GPU_VIEWS /* the model's views: python, ipc, nvtx */
#define PROBE_RING	       1024	      /* pending probes tracked at once (power of two) */
#define STREAM_TABLE	       256	      /* distinct streams tracked (power of two) */
#define GPU_PASS_STEPS_MAX     (1u << 14)     /* steps of a track not final yet, at most */
#define GPU_PASS_QUEUE_MAX     (1u << 16)     /* CUDA records waiting for the horizon */
#define REFILL_WAIT_NS	       10000000000    /* no GPU work this long after a step: none to come */
#define NO_TIME		       INT64_MAX
#define NO_EPOCH	       UINT64_MAX
#define DEFAULT_PROBE_SLACK_NS 1000000
#define EV_TICK		       0 /* a non-CUDA record on the thread of a lost probe */
#define GAP_PROBES	       8 /* lead probes awaiting their next work or completion */

/* One position (= step index) of a track. */
struct slot {
	struct dlbn_step s;
	struct dlbn_gpu_step gs;
	int64_t wb, we; /* wait interval */
	/* At the wait's begin: the latest GPU work queued, and the end of the
	 * latest synchronisation that waited for all work queued before it
	 * (the GPU had drained then; 0 none). */
	int64_t last_enqueue, drained_by_sync;
	int64_t maxdone;      /* latest completion of the probes of this epoch */
	int64_t lead_gap_ns;  /* GPU idle between its lead's own GPU work (gap probes) */
	int32_t unknown_diff; /* +1/-1 at lost-probe range ends */
	uint32_t pending;     /* probes of this epoch without their PROBE_DONE */
	uint8_t uncovered;    /* queued work no probe covered */
	uint8_t no_work;      /* no GPU work queued before the wait */
	uint8_t cut;	      /* wait begin moved past records weighed without it */
};

struct track {
	int k;		      /* view index */
	int pin;	      /* IPC view on the pin-memory path (wait_interval) */
	struct slot *ring;    /* positions base .. n, by position & (cap - 1) */
	size_t cap;	      /* power of two */
	uint64_t base, n;     /* oldest not final; steps handed over so far */
	uint64_t cut;	      /* first position whose cutoff is still open */
	uint64_t period;      /* host attribution: first step with end >= t */
	uint64_t refill_next; /* first step (by end) still without next_enqueue */
	int64_t first_probe;  /* first probe inside wait `cut`, NO_TIME none */
	int64_t last_wb;      /* waits are kept in begin order */
	int64_t busy_until;   /* running max of maxdone over final positions */
	int32_t lost;	      /* running sum of unknown_diff over final positions */
	/* The last final step, for the next step's lead (the loop period from
	 * its batch's arrival to the next wait, see lead_idle). */
	int64_t prev_end;	   /* its batch's arrival, NO_TIME none yet */
	int64_t prev_drained;	   /* the GPU had nothing left by then (>= prev_end) */
	int64_t prev_next_enqueue; /* first GPU work after its arrival, 0 none yet */
	int64_t prev_refill;	   /* its refill bubble: charged, and in the next lead */
	uint8_t prev_probed;	   /* its split had probe evidence */
};

struct pending_probe {
	uint64_t id; /* 0: free slot */
	int64_t stream;
	uint64_t epoch[NTRACKS];
	uint64_t next_epoch[NTRACKS]; /* epoch of the next probe on the stream */
};

/*
 * A probe issued in a step's lead (after the previous batch's arrival, before
 * the step's wait), waiting for the next GPU work queued after it and for
 * its completion: the GPU had nothing left from max(completion, issue) to
 * that work, a gap inside the lead's own GPU work (gpu_split.c, lead_idle).
 */
struct gap_probe {
	uint64_t id;		/* 0: free */
	int64_t t;		/* issued */
	int64_t done;		/* completion, NO_TIME not yet */
	int64_t next_enqueue;	/* the next work queued after it, 0 not yet */
	uint64_t step[NTRACKS]; /* the step whose lead holds it, NO_EPOCH none */
};

struct stream_ent {
	int used;
	int64_t stream;
	int64_t unprobed_since; /* oldest work not covered, NO_TIME none */
	int64_t last_work;
	uint64_t last_probe_id;
	uint64_t lost_open[NTRACKS]; /* lost probe not superseded yet, NO_EPOCH none */
};

/* A CUDA record waiting for the horizon: the fields the handlers read. */
struct event {
	int64_t t;
	int64_t f[7];
	uint32_t thread;
	uint16_t type; /* DLBN_REC_*, or EV_TICK */
};

struct dlbn_gpu_pass {
	struct dlbn_gpu *g;
	int64_t slack;
	dlbn_split_final_fn fn;
	void *ctx;
	struct track tr[NTRACKS];
	struct pending_probe ring[PROBE_RING];
	struct stream_ent streams[STREAM_TABLE + 1]; /* last: every stream that did not fit */
	size_t nstreams_unprobed;		     /* entries with unprobed_since set */
	size_t nlost_open;			     /* lost_open entries set */
	int64_t first_work;			     /* NO_TIME: none yet */
	int64_t last_enqueue;			     /* latest launch or copy */
	int64_t last_enqueue_stream;		     /* its stream */
	int multi_stream;			     /* work went to more than one stream */
	int64_t drained_by_sync;		     /* see struct slot */
	struct gap_probe gaps[GAP_PROBES];
	/* A lost probe's lower bound waits one record: a CUDA_INFO "probing
	 * stopped" right after it means a driver error, not a full pool. */
	int stash;
	uint32_t stash_thread; /* stream index of the PROBE_DONE */
	uint64_t stash_epoch[NTRACKS];
	int64_t stash_t;
	uint32_t watch_thread; /* thread of the last lost PROBE_DONE queued, UINT32_MAX none */
	/* Queue of CUDA records before the horizon (a ring, power of two). */
	struct event *q;
	size_t qcap, qhead, qlen;
	int64_t hdone; /* every record before it has been weighed */
	int ending;    /* end of trace: nothing more will come */
	int oom;
};

/* ---- the pass, as dlbn_gpu_split runs it (gpu.c) ------------------------ */

/* Start the split for m's training process (roles decided).  o may be
 * NULL (defaults).  NULL when out of memory.  fn gets each step of view k
 * (0 python, 1 ipc, 2 nvtx) whose split is final: s has gpu_busy_ns,
 * gpu_idle_ns and gpu_refill_ns set, gs is its GPU record; the steps of
 * one view come in step order. */
struct dlbn_gpu_pass *dlbn_gpu_pass_new(const struct dlbn_model *m, struct dlbn_gpu *g,
					const struct dlbn_gpu_opts *o, dlbn_split_final_fn fn,
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

#define SLOT(tr, p) (&(tr)->ring[(p) & ((tr)->cap - 1)])

static inline int64_t fld(const struct dlbn_record *r, int i)
{
	return r->kind[i] == DLBN_V_INT ? r->f[i] : 0;
}

static inline int64_t dur_of(const struct event *ev)
{
	int64_t d = ev->f[0];
	return d <= 0 ? 0 : d > DLBN_DUR_LIMIT ? DLBN_DUR_LIMIT : d;
}

static inline int64_t bounded(int64_t v, int64_t max)
{
	return v < 0 ? 0 : v > max ? max : v;
}

static inline int64_t max64(int64_t a, int64_t b)
{
	return a > b ? a : b;
}

/* gpu_gaps.c: a probe issued at t; GPU work queued at t; probe id done at
 * done (NO_TIME: lost). */
void gpu_gap_open(struct dlbn_gpu_pass *ps, uint64_t id, int64_t t);
void gpu_gap_enqueue(struct dlbn_gpu_pass *ps, int64_t t);
void gpu_gap_done(struct dlbn_gpu_pass *ps, uint64_t id, int64_t done);
/* gpu_split.c: host evidence of a loop period (attribute_host's adders) */
void gpu_add_launch(struct dlbn_gpu_host *h, const struct event *ev);
void gpu_add_sync(struct dlbn_gpu_host *h, const struct event *ev);
void gpu_add_copy(struct dlbn_gpu_host *h, const struct event *ev);
/* gpu_split.c: one step into a window's sums; the final split of tr's
 * oldest step sl (0: its refill bubble cannot be sized yet). */
void gpu_win_add(struct dlbn_gpu_win *w, const struct dlbn_step *s, const struct dlbn_gpu_step *gs);
int gpu_split_final(struct dlbn_gpu_pass *ps, struct track *tr, struct slot *sl, int64_t busy_until,
		    int unknown, int refill_known);

#endif /* DLBN_GPU_PASS_H */
