/*
 * model_int.h - what the model's source files share and nothing else
 * includes: the growable arrays, the pipe table of pass 1, the record
 * field helpers, and the state of pass 2 (struct pass2) with the handlers
 * each view's file provides.
 *
 *   model.c          options, config text, setup, the two passes, the view
 *                    choice
 *   model_steps.c    a view's step ended: epoch, window, split pass
 *   model_roles.c    pass 1: processes, pipe identity, roles
 *   model_ipc.c      the IPC view (direct and pin-memory paths)
 *   model_marks.c    the views the program declares: Python fetch marks
 *                    (with the loop's counters, lead.h) and NVTX ranges
 *   model_workers.c  worker batches, idle time, schedstat samples
 *   model_mem.c      memory samples, the job's memory, children's ends
 */
#ifndef DLBN_MODEL_INT_H
#define DLBN_MODEL_INT_H

#include <stdint.h>
#include <stdlib.h>

#include "model/model.h"
#include "trace/reader.h"
#include "util/hashtab.h"

/* ---- growable arrays -------------------------------------------------- */

static inline int grow(void **v, size_t *cap, size_t need, size_t elem)
{
	if (need <= *cap)
		return 0;
	size_t ncap = *cap ? *cap * 2 : 16;
	while (ncap < need)
		ncap *= 2;
	void *nv = realloc(*v, ncap * elem);
	if (!nv)
		return -1;
	*v = nv;
	*cap = ncap;
	return 0;
}

#define PUSH(arr, n, cap, val)                                                                     \
	(grow((void **)&(arr), &(cap), (n) + 1, sizeof(*(arr))) ? -1 : ((arr)[(n)++] = (val), 0))

struct who {
	uint32_t thread;
	uint32_t count;
};

struct pipe_ent {
	int64_t ino;
	struct who *readers, *writers;
	size_t nreaders, capreaders, nwriters, capwriters;
	int polled_by_reader; /* some reader thread POLLed it (queue.get) */
	int is_result, is_index, seen_by_ipc;
};

/* The pipes in the order pass 1 first saw them, found by inode. */
struct pipe_table {
	struct pipe_ent *ents;
	size_t n, cap;
	struct dlbn_hashtab by_ino; /* ino -> index in ents */
};

static inline struct pipe_ent *pipe_find(const struct pipe_table *t, int64_t ino)
{
	const struct dlbn_hash_entry *e = ino ? dlbn_hashtab_get(&t->by_ino, (uint64_t)ino) : NULL;
	return e ? &t->ents[e->val.num] : NULL;
}

static inline int64_t fld(const struct dlbn_record *r, int i)
{
	return r->kind[i] == DLBN_V_INT ? r->f[i] : 0;
}

/* Duration field of a record type, or 0 for instantaneous ones. */
static inline int64_t rec_dur(const struct dlbn_record *r)
{
	switch (r->type) {
	case DLBN_REC_FORK:
	case DLBN_REC_READ:
	case DLBN_REC_WRITE:
	case DLBN_REC_PREAD:
	case DLBN_REC_RECVMSG:
	case DLBN_REC_SENDMSG:
	case DLBN_REC_POLL:
	case DLBN_REC_CONNECT:
	case DLBN_REC_ACCEPT:
	case DLBN_REC_SEM_WAIT:
	case DLBN_REC_MEMCPY:
	case DLBN_REC_SYNC: {
		int64_t d = fld(r, 0);
		return d <= 0 ? 0 : d > DLBN_DUR_LIMIT ? DLBN_DUR_LIMIT : d;
	}
	default:
		return 0;
	}
}

/* A count or size from the file, limited so that sums of them cannot overflow. */
static inline int64_t bounded(int64_t v, int64_t max)
{
	return v < 0 ? 0 : v > max ? max : v;
}

static inline int64_t min64(int64_t a, int64_t b)
{
	return a < b ? a : b;
}

static inline int64_t max64(int64_t a, int64_t b)
{
	return a > b ? a : b;
}

enum ipc_state { IPC_IDLE, IPC_WAITING, IPC_RECEIVING, IPC_HANDOFF };

struct ipc_fsm {
	int state;
	int64_t begin, hdr_t, last_end, bytes;
	int32_t nfds;
	int new_epoch; /* the next step reads a result pipe never read before */
};

/* The counters a main-thread fetch mark carries after its 3 fields:
 * run_ns, runq_ns, sys_ns, minflt, free_ns, free_cpu_ns, and since the
 * recorder times the interpreter's lock, gil_ns and gil_others_ns (0 where
 * a trace has only the first six) (MARK in dlbn_trace.h). */
#define LOOP_COUNTERS_MIN 6
#define LOOP_COUNTERS	  8
enum { LC_RUN, LC_RUNQ, LC_SYS, LC_MINFLT, LC_FREE, LC_FREE_CPU, LC_GIL, LC_GIL_OTHERS };

struct pending_wait {
	uint64_t sem;
	int64_t begin, end;
};

#define PENDING_MAX 64

/* Open NVTX ranges of the followed thread: push/pop nest per domain,
 * start/end pair by range id (and may end on another thread). */
#define NVTX_OPEN_MAX 64
enum { NVTX_OPEN_OTHER, NVTX_OPEN_DATA, NVTX_OPEN_DATA_INNER, NVTX_OPEN_STEP };
struct nvtx_open {
	int64_t key; /* domain (push) or range id (start) */
	int64_t begin;
	int what; /* NVTX_OPEN_* */
};
struct nvtx_state {
	struct nvtx_open pushed[NVTX_OPEN_MAX], started[NVTX_OPEN_MAX];
	size_t npushed, nstarted;
	int data_open; /* data ranges open (the outermost one makes the step) */
};

struct pass2 {
	struct dlbn_model *m;
	const struct dlbn_model_opts *o;
	uint64_t gpu_timing_count; /* --timings: records through the GPU pass */
	struct ipc_fsm fsm;
	int64_t first_result_read; /* -1 until seen */
	struct pending_wait pend[PENDING_MAX];
	size_t npend;
	/* Pin path: a pin-thread step is held back one step, because the
	 * post that ends the main thread's wait for it may come after it
	 * closed; waits ending during the next hand-off go to pin_acc. */
	struct dlbn_step pin_held;
	int has_pin_held;
	int64_t pin_acc;
	int64_t main_sem_wait; /* the loop thread's semaphore waits since the window began */
	/* Earliest begin and latest end of the waits summed into pin_acc /
	 * pin_held (the horizon: a pin-path wait interval ends at its step's
	 * end and is as long as its sum, so it begins no earlier than the
	 * first wait's begin less how far the waits ran past the step). */
	int64_t pin_acc_first, pin_held_first, pin_acc_last, pin_held_last;
	struct nvtx_state nvtx;
	void *split; /* o->split's state; NULL: no CUDA records, CPU-only rule */
	int oom;
	/* The loop's counters at the last batch's arrival (a FETCH_END that
	 * carried them; loop_cost.c), the start of the next step's lead. */
	int64_t arrival_t, arrival_counters[LOOP_COUNTERS];
	int arrival_known;
	/* The iterator that made the arrival, and the wrapper's hand-off of
	 * that batch (0: none yet); the counters are the hand-off's then. */
	int64_t arrival_iter, handoff_t;
	/* The batches' shared memory mapped (MMAP records of /dev/shm files, any thread), in all
	 * and up to the last arrival: the pages the batch's first touch faults in. */
	int64_t shm_mapped, shm_at_arrival, arrival_shm;
	/* Time the loop has spent in any loader's fetches and iter() start-up
	 * so far: a loader's iter() time up to its first fetch excludes what
	 * other loaders' fetches took meanwhile (zip() starts both iterators,
	 * then waits for one while the other's workers start too). */
	int64_t waited_ns;
	/* Fetches that ended an epoch (StopIteration) since the last batch,
	 * and the first one's lead: the loop's work on the epoch's last batch,
	 * which becomes the lead of the next step that has none of its own. */
	int64_t stop_carry_ns;
	struct dlbn_lead stop_lead;
	int64_t stop_lead_end;
	/* Census samples that bound a loop period (model_census_record): the
	 * last batch's arrival since a fetch began (-1: none), and the period
	 * the last fetch begin ended (from -1: it had no arrival). */
	int64_t census_arrival_t, census_from_t, census_to_t;
};

/* ---- handlers in the other files ---------------------------------------- */

/* model_roles.c */
struct pipe_ent *model_pipe_get(struct pipe_table *t, int64_t ino);
void model_pipe_table_free(struct pipe_table *t);
int model_pass1_record(struct dlbn_model *m, const struct dlbn_record *r);
void model_decide_roles(struct dlbn_model *m);
/* model_steps.c: a view's step ended; its epoch; the views by index (0
 * python, 1 ipc, 2 nvtx) and back; the split pass's callback. */
void model_feed(struct pass2 *ps, struct dlbn_steps *st, struct dlbn_step *s);
void model_number_epoch(struct dlbn_steps *st, struct dlbn_step *s, int new_epoch);
int model_view_index(const struct dlbn_model *m, const struct dlbn_steps *st);
struct dlbn_steps *model_view_steps(struct dlbn_model *m, int k);
void model_step_split(void *ctx, int k, struct dlbn_step *s, const struct dlbn_gpu_step *gs);
/* model_ipc.c */
void model_ipc_record(struct pass2 *ps, const struct dlbn_record *r);
void model_ipc_close(struct pass2 *ps); /* the hand-off in progress ends */
void model_pin_wait_record(struct pass2 *ps, const struct dlbn_record *r);
void model_pin_post_record(struct pass2 *ps, const struct dlbn_record *r);
/* model_marks.c */
void model_mark_record(struct pass2 *ps, const struct dlbn_record *r);
void model_nvtx_record(struct pass2 *ps, const struct dlbn_record *r, int on_nvtx_thread);
/* model_workers.c */
void model_worker_record(struct pass2 *ps, struct dlbn_proc *p, const struct dlbn_record *r);
void model_sched_record(struct pass2 *ps, const struct dlbn_record *r);
/* A TASK record of the training process (struct dlbn_census_thread). */
void model_census_record(struct pass2 *ps, const struct dlbn_record *r);
/* model_mem.c (memory.h): a MEM sample of p, a MEMSYS sample, a CHILD
 * and a NOTE record of process proc, the window's edges. */
void model_mem_record(struct dlbn_proc *p, const struct dlbn_record *r);
void model_memsys_record(struct dlbn_model *m, const struct dlbn_record *r);
void model_child_record(struct dlbn_model *m, uint32_t proc, const struct dlbn_record *r);
void model_note_record(struct dlbn_model *m, uint32_t proc, const struct dlbn_record *r);
void model_mem_mark(struct dlbn_model *m, int in_window);

#endif /* DLBN_MODEL_INT_H */
