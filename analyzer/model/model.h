/*
 * model.h - what the analyzer reconstructs from a trace: processes and
 * their roles, the training loop's steps and waits, DataLoader workers, and
 * the loader configuration (docs/DESIGN.md, "Analyzer layers").
 *
 * Built in two streaming passes over the reader: pass 1 finds processes,
 * threads and pipe identities (who reads / writes which pipe inode) and
 * decides roles; pass 2 follows the training threads and the workers with
 * roles known (steps of the three views, the GPU split of their waits
 * (gpu.h), worker evidence, CPU samples, NVTX ranges, native stacks).
 *
 * Steps are not kept: each is folded into its view's window figures as it
 * ends and again once its GPU split is final, then dropped (model option
 * keep_steps keeps them, for tests; a step sink sees each one, for the
 * exports).  Memory grows with processes, threads, pipes, registered NVTX
 * strings and loaded modules, never with the number of records or steps.
 */
#ifndef DLBN_MODEL_H
#define DLBN_MODEL_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "model/gpu_figures.h"
#include "model/lib_ops.h"
#include "model/loaders.h"
#include "model/memory.h"
#include "model/ranges.h"
#include "model/waitstacks.h"
#include "trace/config.h"
#include "trace/reader.h"

struct dlbn_timings;

enum dlbn_role { DLBN_ROLE_OTHER = 0, DLBN_ROLE_TRAINING = 1, DLBN_ROLE_WORKER = 2 };

enum dlbn_view { DLBN_VIEW_NONE = 0, DLBN_VIEW_PYTHON = 1, DLBN_VIEW_IPC = 2, DLBN_VIEW_NVTX = 3 };

enum dlbn_path { DLBN_PATH_NONE = 0, DLBN_PATH_DIRECT = 1, DLBN_PATH_PIN = 2 };

/* A closed time interval [begin, end] in CLOCK_MONOTONIC ns. */
struct dlbn_quantiles;

struct dlbn_ival {
	int64_t begin, end;
};

/* One batch a worker produced: index received .. result written. */
struct dlbn_batch_seg {
	int64_t begin, end;
	int64_t file_ns; /* regular-file read time inside the segment */
};

struct dlbn_proc {
	uint32_t proc_id;
	int pid, ppid;
	int64_t parent_proc_id; /* -1: none */
	ssize_t parent_index;	/* parent in procs[], -1 unknown (after pass 1) */
	int start;		/* DLBN_START_* */
	char argv0[64];
	char host[64];
	int rank, local_rank, world_size; /* PROCESS record; -1 unknown */
	int64_t t_first, t_last;	  /* first record, end of the last record */
	int has_process_rec;
	int has_exit;
	int exit_status, exit_how;
	uint64_t records;
	uint64_t fetch_marks;
	int role;
	/* Worker evidence (pass 2).  Idle intervals and batch segments wait
	 * in small pending arrays until the chosen view's next step end folds
	 * them into the window accumulators (window.c). */
	uint64_t result_msgs;	     /* messages written to result pipes */
	uint64_t index_msgs;	     /* index messages read */
	struct dlbn_batch_seg *segs; /* pending batches (index got .. result written) */
	size_t nsegs, capsegs;
	struct dlbn_ival *idle; /* pending waits on the index pipe */
	size_t nidle, capidle;
#define DLBN_SEG_QUEUE 16
	int64_t seg_q[DLBN_SEG_QUEUE];	  /* batch starts awaiting their result */
	int64_t seg_file[DLBN_SEG_QUEUE]; /* file_ns_total at each start */
	unsigned seg_head, seg_n;
	int64_t file_ns_total;
	/* Window accumulators. */
	int64_t win_idle_ns, win_batch_ns, win_file_ns;
	uint64_t win_batches;
	int64_t file_bytes;
	int loader;		  /* worker: index of the loader that started it; -1 unknown */
	struct dlbn_proc_mem mem; /* MEM samples (memory.h; pass 2, training and workers) */
};

struct dlbn_thread {
	uint32_t proc_index;
	uint32_t thread_no;
	int tid, is_main;
	uint64_t fetch_marks;
	uint64_t result_reads; /* reads of result pipes (after roles) */
	uint64_t nvtx_data;    /* NVTX data-loading ranges opened (pass 1) */
	/* CPU contention (docs/DESIGN.md, "Verdict rules"): cumulative /proc
	 * schedstat samples (SCHED: time on a CPU, time runnable waiting for one).  base: the
	 * last sample by the end of warm-up (or the thread's first sample);
	 * end: the last sample by the end of the latest window step; the
	 * window's figures are end - base. */
	int sched_samples;
	int64_t sched_cur[2], sched_base[2], sched_end[2]; /* [run_ns, runq_wait_ns] */
	int sched_has_end;
};

/*
 * A thread of the training process seen by the thread census (TASK
 * records, libintercept/thread_census.c): every thread but the loop's,
 * including those that call no hook (an intra-op pool's).  Same
 * cumulative counters and window edges as struct dlbn_thread's schedstat.
 * A recorder that takes a census at a batch's arrival and again at the
 * next fetch begin bounds that loop period exactly: period[] sums the
 * thread's run and queueing over such periods, and their wall time, so
 * that the periods' figures need not be guessed from the span's.
 */
#define DLBN_CENSUS_MAX 256
struct dlbn_census_thread {
	int tid;
	char name[16]; /* its comm, "" unknown */
	int samples;
	int64_t cur[2], base[2], end[2]; /* [run_ns, runq_wait_ns] */
	int64_t cur_t, base_t, end_t;	 /* when those were sampled */
	int has_end;
	int64_t arrived[2], arrived_t; /* the sample at the last arrival; arrived_t -1: none */
	/* [run_ns, runq_wait_ns, wall_ns, periods] over the bounded periods,
	 * cumulative; the window's edges as for cur. */
	int64_t period[4], period_base[4], period_end[4];
};

/* One step of the training loop: the fetch of one batch. */
struct dlbn_step {
	int64_t begin, end;  /* fetch start and end (end: batch in hand) */
	int64_t wait_ns;     /* exposed loader wait of this step */
	int64_t recv_ns;     /* IPC: message header read .. last hand-off op */
	int64_t bytes;	     /* IPC: message payload bytes */
	int32_t nfds;	     /* IPC: shared-memory fds received */
	int32_t epoch;	     /* 0-based epoch (ITER_BEGIN or new result pipe) */
	int32_t epoch_start; /* first step of its epoch */
	/* GPU seam: the wait split by what the GPU did meanwhile.  Without
	 * CUDA records gpu_idle_ns = wait_ns (CPU-only: wait is stall). */
	int64_t gpu_busy_ns, gpu_idle_ns;
	/* The GPU drained inside the wait and stayed idle after it until the
	 * loop queued work again: a bubble that would have overlapped earlier
	 * GPU work had the batch been ready.  Part of the stall; capped so
	 * that gpu_idle_ns + gpu_refill_ns <= wait_ns (host work between
	 * steps, which Replay keeps, cannot grow the stall past the waits). */
	int64_t gpu_refill_ns;
	/* The loop period before the fetch (lead.h): its counters, the GPU's
	 * idle time in it (gpu.c lead_idle; -1 unknown or no GPU) and the
	 * part of that idle time charged already as the previous step's
	 * refill bubble. */
	struct dlbn_lead lead;
	int64_t gpu_lead_idle_ns, gpu_lead_refill_ns;
	int64_t gpu_lead_wrap_idle_ns; /* of the idle time, in lead.wrap_ns */
	/* Where the lead ends: the fetch's begin, or the iter() before it
	 * when the wait carries that iterator's worker start-up (the
	 * start-up is the wait's, not the lead's); 0 for views without
	 * leads. */
	int64_t lead_end;
	uint32_t in_epoch; /* position in its epoch (0: its first step) */
	uint8_t warmup;	   /* before the steady-state window */
	/* Python view: a step of another loader than the training one
	 * (loaders.h); it has its own steps and window, and the GPU split
	 * sees it in time order with the training loader's. */
	uint8_t aside;
	int16_t loader; /* index into m->loaders.v; -1 unknown */
};

/*
 * The GPU's own time per step, seen from consecutive steps' GPU records:
 * when the GPU had drained step k-1's work before the loop's next launch
 * (it started idle), step k's work took from that launch to step k's
 * drain-probe completion.  A launch onto a GPU still busy is a backlog
 * step: the GPU, not the host, set that step's pace.
 */
struct dlbn_gpu_pace {
	int have_prev;
	int64_t prev_next_enqueue, prev_gpu_done; /* the previous step's, 0 unknown */
	double sum_ms;				  /* over the `samples` window steps */
	size_t samples, backlog;
};

/*
 * The steady-state window of one view, decided as the steps arrive (so
 * that worker evidence can be folded into it on the fly, see window.c).
 * Step i (0-based) is warm-up while i < P + 1 in the first epoch (or
 * i < the --warmup override), and step 0 always is: the window's wall
 * clock starts at the end of the last warm-up step.  Window steps are
 * v[warmup .. warmup + window - 1].
 */
struct dlbn_window {
	size_t warmup, window;	      /* steps */
	int64_t ws, we;		      /* window begin and end (ns) */
	int64_t last_end;	      /* end of the last step */
	int64_t recv_ns, bytes, nfds; /* IPC hand-off detail inside the chosen window */
	/* Outside later epochs' start-up steps: the IPC waits' part before
	 * the batch's header came (hand-off detail, over narrive steps), and
	 * the view's own waits (over nsteady window steps). */
	int64_t arrive_ns, steady_wait_ns;
	size_t narrive, nsteady;
	size_t nrecv;
	size_t in_epoch; /* index of the last step within its epoch */
	/* Sums over the window's steps, added as each step's GPU split
	 * becomes final (all of them by the end of the build). */
	int64_t exposed_ns;	      /* loader wait */
	int64_t stall_ns;	      /* GPU-idle part plus refill bubbles */
	int64_t startup_ns;	      /* GPU-idle in later epochs' warm-up */
	struct dlbn_lead_sums leads;  /* the window steps' lead periods */
	struct dlbn_quantiles *waits; /* the chosen view's waits */
	struct dlbn_gpu_pace
		gpu_pace; /* steps with a GPU record (the previous one may be warm-up) */
};

/* The steps of one view: counts and window figures; the steps themselves
 * only with keep_steps. */
struct dlbn_steps {
	int depth;     /* >= 0: prefetch depth of its own loader (another loader
			* than the training one); -1: the model's */
	size_t n;      /* steps produced */
	size_t nfinal; /* steps whose GPU split is final */
	int epochs;
	struct dlbn_window w;
	struct dlbn_step *v;	  /* keep_steps: every step, final */
	struct dlbn_gpu_step *gs; /* keep_steps: its GPU record (zero without CUDA) */
	size_t nkept, cap;
};

/* Sees each step of the chosen view once its split is final, in order;
 * gs is NULL when the training process has no CUDA records. */
typedef void (*dlbn_step_sink)(void *ctx, size_t index, const struct dlbn_step *s,
			       const struct dlbn_gpu_step *gs);

/* One DataLoader of the training process (loaders.h). */
struct dlbn_loader {
	int64_t key; /* id(loader) from its CONFIG; 0: iterators without one */
	uint32_t proc_index;
	int role; /* DLBN_LOADER_* */
	int has_config;
	struct dlbn_config config; /* its first CONFIG */
	/* Pass 1. */
	int64_t fetch_thread; /* thread (stream index) of its first fetch; -1 none */
	int feeder;	      /* fetched on another thread than the loop's: it
			       * feeds the loop's loader (a thread prefetcher) */
	uint64_t iterators, fetches;
	int64_t fetch_ns; /* sum of its fetches (begin .. end) */
	int64_t span_ns;  /* sum of its iterators' ITER_BEGIN .. last mark */
	int64_t t_first;
	size_t worker_procs; /* worker processes it started (CONFIG workers=) */
	/* Pass 2: the Python view's fetch state (see model.c python_record). */
	int64_t py_open, py_carry_ns, py_iter_begin;
	int64_t py_iter_waited; /* the loop's waited_ns at its iter() */
	int py_new_epoch;
	struct dlbn_lead py_lead; /* of the open fetch */
	int64_t py_lead_end;	  /* its end (dlbn_step.lead_end) */
	int64_t py_gil_others_at; /* the open fetch's gil_others_ns counter (-1) */
	int64_t py_runq_at;	  /* and its runq_ns counter (-1) */
	/* The loop thread's run-queue time inside its fetches of this loader
	 * (their marks' counters, the main thread's only): with num_workers=0
	 * the fetch's own, which the profile does not write there. */
	int64_t fetch_runq_ns;
	struct dlbn_lead py_iter_lead; /* the lead up to its last iter() */
	struct dlbn_steps steps;       /* another loader's steps (the training
					* loader's are m->py_steps) */
	/* Its window steps that lie inside the training loader's window:
	 * pending until the next training window step ends, then counted. */
	struct dlbn_loader_sums pending, in_train_window;
};

struct dlbn_iter_ent {
	int64_t iter_id;
	uint32_t proc_index;
	int32_t loader; /* -1: not known yet */
	int64_t t_begin, t_last, open_t;
};

struct dlbn_worker_claim {
	int pid;
	int32_t loader;
	int64_t t_begin; /* the iterator's ITER_BEGIN */
};

struct dlbn_loader_table {
	struct dlbn_loader v[DLBN_LOADERS_MAX];
	size_t n;
	struct dlbn_iter_ent *iters;
	size_t niters, capiters, last_hit;
	struct dlbn_worker_claim *claims;
	size_t nclaims, capclaims;
	int train;	     /* index of the training loader; -1 none */
	size_t ntrain_proc;  /* loaders of the training process */
	char chosen_by[200]; /* how the training loader was chosen */
	/* The bootstrap's process-level note (CONFIG of iter_id 0). */
	int boot_note;	       /* a note was seen */
	int boot_incompatible; /* bootstrap=incompatible: it left the loaders alone */
	int boot_partial;      /* it left some loaders alone (StatefulDataLoader,
				* torchdata.nodes or DALI of another layout) */
	char boot_reason[200];
	char torch_version[40];
};

/*
 * A pass that runs alongside pass 2 over the training process's records and
 * settles each step's wait split some time after the step ends: the GPU
 * split (gpu/gpu.h, dlbn_gpu_split) is the one there is.  The model knows it
 * only through this table, so that the layers point one way (docs/DESIGN.md,
 * "Analyzer layers").  The model hands it every record of the training
 * process, every step a view produces, and after each record a horizon (no
 * step still to come has its wait begin before it); it hands each step back
 * through `final`, in step order per view, once nothing can change its
 * split.  Without one (opts.split NULL) every wait keeps the CPU-only rule,
 * all of it stall, final at once.
 */
typedef void (*dlbn_split_final_fn)(void *ctx, int view, struct dlbn_step *s,
				    const struct dlbn_gpu_step *gs);
struct dlbn_split_pass {
	/* Begin for m's training process (roles decided), filling in *g.
	 * NULL when out of memory. */
	void *(*start)(const struct dlbn_model *m, struct dlbn_gpu *g, dlbn_split_final_fn final,
		       void *ctx);
	void (*record)(void *pass, const struct dlbn_record *r);
	void (*step)(void *pass, int view, const struct dlbn_step *s);
	void (*horizon)(void *pass, int64_t h);
	/* End of the trace: every step left is handed back.  Nonzero when
	 * memory ran out (some steps then never came back).  Frees the pass. */
	int (*end)(void *pass);
	/* After pass 2, CUDA records or not: the whole-run figures from view
	 * `whole`, the window (ws, we] of view `view` and the evidence lines. */
	void (*finish)(struct dlbn_gpu *g, int whole, int view, int64_t ws, int64_t we);
};

struct dlbn_model_opts {
	int64_t handoff_gap_ns; /* hand-off ops closer than this belong to one batch */
	int force_view;		/* DLBN_VIEW_NONE = auto */
	int force_train;	/* 1 + the training loader's index (--baseline: the
				 * Real run's, whose loaders a Replay run makes in the
				 * same order); 0: chosen from the trace */
	int warmup_steps;	/* -1: prefetch depth + 1 */
	int keep_steps;		/* keep every step in its view (tests) */
	dlbn_step_sink sink;	/* NULL: none */
	void *sink_ctx;
	struct dlbn_timings *timings; /* --timings: the passes' costs added here; NULL none */
	const struct dlbn_split_pass *split; /* NULL: CPU-only rule (see above) */
};

/* IPC hand-offs whose bytes are kept for --baseline (bytes per batch of
 * the first batches). */
#define DLBN_HEAD_STEPS 1024

struct dlbn_model {
	struct dlbn_proc *procs;
	size_t nprocs;
	struct dlbn_thread *threads; /* indexed by stream index */
	size_t nthreads;
	int64_t t0;    /* time origin for reports */
	int64_t t_end; /* end of the last record */
	uint64_t records;
	uint64_t profile_records; /* PROF_STAGE, PROF_SAMPLE and CALLSITE: hot spots' input */
	int has_cuda;		  /* CUDA records present (GPU rule pending) */
	int has_marks;

	ssize_t training;    /* proc index, -1 none */
	ssize_t main_thread; /* thread index, -1 none */
	ssize_t pin_thread;  /* thread index, -1 none */
	ssize_t mark_thread; /* thread with FETCH marks, -1 none */
	ssize_t nvtx_thread; /* main thread when it has NVTX data ranges, -1 none */
	int path;	     /* DLBN_PATH_* */
	/* Pin path: the loop thread's semaphore waits (on other threads of
	 * its process: queues, locks) inside the chosen view's window, up to
	 * its last step, matched to a batch or not. */
	int64_t main_sem_wait_ns;
	size_t nworkers_total;	  /* worker processes over the whole run */
	int num_workers_inferred; /* workers of the first result pipe */
	int prefetch_writes;	  /* index messages before the first result */
	int prefetch_depth;	  /* P used for the window */
	int prefetch_from_config;
	int prefetch_known; /* P fixed (at the first step) */
	int warmup_steps;   /* override, -1 none */

	struct dlbn_steps py_steps;	/* Python view (FETCH marks) */
	struct dlbn_steps ipc_steps;	/* IPC view */
	struct dlbn_steps nvtx_steps;	/* NVTX view (data ranges of the main thread) */
	int view;			/* DLBN_VIEW_* chosen */
	const struct dlbn_steps *steps; /* the chosen view's steps */

	struct dlbn_config config; /* the training loader's (first CONFIG) */
	struct dlbn_loader_table loaders;

	/* Pipes (opaque hash of inode -> readers/writers). */
	struct pipe_table *pipes;

	/* Threads with SCHED samples (indices into threads[]). */
	uint32_t *sched_threads;
	size_t nsched_threads, capsched_threads;

	/* The training process's other threads (thread census). */
	struct dlbn_census_thread *census;
	size_t ncensus, capcensus;

	/* Native stacks at the training process's longest waits (symbolised). */
	struct dlbn_wait_stacks stacks;

	/* NVTX (ranges.h): names of registered strings and domains, and what
	 * the followed thread's ranges were (outermost data ranges are the
	 * NVTX view's steps; step ranges are counted). */
	struct dlbn_range_names *range_names;
	uint64_t nvtx_ranges;	   /* ranges opened by the training process */
	uint64_t nvtx_data_ranges; /* outermost data ranges closed on nvtx_thread */
	uint64_t nvtx_step_ranges; /* step ranges closed on nvtx_thread */
	int64_t nvtx_step_ns;	   /* their total duration */

	/* A loader library's operators, from its own ranges (lib_ops.h),
	 * sorted by busy time after the build. */
	struct dlbn_lib_ops lib_ops;

	/* The job's memory (MEMSYS samples of any process) and the processes
	 * that ended badly (CHILD records, the loader's NOTE records): memory.h. */
	struct dlbn_job_mem job_mem;
	struct dlbn_failures failures;

	/* The GPU split and evidence (gpu.h), final after the build. */
	struct dlbn_gpu gpu;
	struct dlbn_model_opts opts; /* as built */
	/* Bytes of the first IPC hand-offs that carried any. */
	int64_t ipc_head_bytes[DLBN_HEAD_STEPS];
	size_t nipc_head;
};

void dlbn_model_default_opts(struct dlbn_model_opts *o);
/* Two passes over r; 0 on success, -1 out of memory. */
int dlbn_model_build(struct dlbn_model *m, struct dlbn_reader *r, const struct dlbn_model_opts *o);
/*
 * Build a second model from r with m's options and view and call sink on
 * each of its steps (what m saw, again: the exports' and --baseline's way
 * to every step without keeping them).  0, or -1 out of memory.
 */
int dlbn_model_each_step(const struct dlbn_model *m, struct dlbn_reader *r, dlbn_step_sink sink,
			 void *ctx);
void dlbn_model_free(struct dlbn_model *m);
/* Names of a process role ("training", "worker", "other") and of thread
 * index ti's part ("main", "pin", "worker", "feeder", "other"). */
const char *dlbn_role_name(int role);
const char *dlbn_thread_role(const struct dlbn_model *m, size_t ti);

/* The bootstrap ran, wrapped every loader it knows and saw none fetched:
 * whatever the loop iterates is not a loader dlbn recognises. */
int dlbn_model_loader_unrecognised(const struct dlbn_model *m);

/* Worker figures over the chosen view's window. */
struct dlbn_worker_stats {
	int pid;
	uint64_t batches;
	double busy_fraction; /* -1: no lifetime inside the window */
	double mean_batch_ms;
	double file_read_s;
	double busy_s;
	int exited;	/* has an EXIT record */
	double ended_s; /* last record, relative to t0 */
};
void dlbn_worker_window_stats(const struct dlbn_model *m, size_t proc_index,
			      struct dlbn_worker_stats *out);

/* A worker of the training loader (or of no known loader). */
static inline int dlbn_training_worker(const struct dlbn_model *m, size_t proc_index)
{
	const struct dlbn_proc *p = &m->procs[proc_index];
	return p->role == DLBN_ROLE_WORKER && (p->loader < 0 || p->loader == m->loaders.train);
}

/* window.c: the prefetch depth P (config, index writes, or 2 x workers). */
void dlbn_prefetch_depth(struct dlbn_model *m);
/* window.c: a thread's time on a CPU and runnable-waiting inside the window. */
void dlbn_sched_window(const struct dlbn_model *m, size_t thread_index, int64_t *run_ns,
		       int64_t *wait_ns);
/* window.c: the same for census thread i (m->census[i]). */
void dlbn_census_window(const struct dlbn_model *m, size_t i, int64_t *run_ns, int64_t *wait_ns);
/* window.c: census thread i's figures over the loop periods the census
 * bounded inside the window: [run_ns, runq_wait_ns, wall_ns, periods]
 * (all 0 from a recorder that takes no census at a batch's arrival). */
void dlbn_census_periods(const struct dlbn_model *m, size_t i, int64_t out[4]);
/* window.c: account one step of view st as it ends (the chosen one folds
 * workers); sets s->warmup and s->in_epoch. */
void dlbn_window_feed(struct dlbn_model *m, struct dlbn_steps *st, struct dlbn_step *s);
/* window.c: the step's GPU split is final: window sums, keep, sink. */
int dlbn_window_final(struct dlbn_model *m, struct dlbn_steps *st, const struct dlbn_step *s,
		      const struct dlbn_gpu_step *gs);

#endif /* DLBN_MODEL_H */
