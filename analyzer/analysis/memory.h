/*
 * memory.h - the run's memory, what more workers would need, and why a run
 * died (docs/DESIGN.md, "Memory").
 *
 * From the model's samples (model/memory.h): the training process and
 * each of the training loader's workers at the window's start and end
 * (RSS from every sample, proportional and unique set size from those
 * with smaps_rollup), the job's limit and headroom, /dev/shm.
 *
 * Copy-on-write growth.  A forked worker shares the training process's
 * pages until one of them is written; reading a Python object writes its
 * reference count, so a worker that reads the dataset's objects copies,
 * page by page, what it touches (copy-on-read).  Its private pages grow
 * while its RSS stays.  Per worker, with k the batches it has made:
 *
 *   copied(k) = S (1 - exp(-r k / S))
 *
 * the touch model of a worker that reads random samples: r pages a batch
 * at first, fewer as more of the S pages it reads are copied already.  r
 * and S come from the workers' own samples: the private pages of the
 * samples with smaps_rollup anchor the curve, the minor faults between
 * them (less the faults a batch costs anyway) shape it; without a visible
 * slowdown S is the most a worker can copy, the dirty pages it shares at
 * its start (the pessimistic end).  Each copy is a page fault and a 4 KiB
 * copy in the kernel: c microseconds, fitted from the workers' system time
 * against their copies, CPU that grows with the workers (each copies its
 * own) and that the what-if's core limit counts.
 *
 * Predicted memory of n workers, at the horizon a worker lives (to the
 * epoch's end, batches_per_epoch / n batches, for workers started every
 * epoch; the whole copy for persistent ones):
 *
 *   need(n) = shared + main_own + n x (worker_base + copied(horizon))
 *             + shm(n) + (n + 1) x per_process + others,
 *   shm(n) = (n x prefetch_factor + 2) x batch_shm
 *
 * in the memory a limit counts and the kernel cannot give back: anonymous
 * pages (a library's clean file pages can be dropped under pressure, and
 * are charged to whichever cgroup read them first); own: private dirty
 * pages; shared: the anonymous pages several of the processes map,
 * counted once (pss_anon less own, summed); without pss_anon samples PSS
 * and USS, the pessimistic end.  The batches in flight sit in /dev/shm and
 * count in the cgroup too.  per_process and others: what the memory
 * cgroup charged at the window's end beyond the samples (the kernel's per
 * process, processes the trace does not see).  A setting fits when need(n) is under 90% of what the
 * job may hold (its memory cgroup's limit, else what it held plus the host's least available
 * memory) and shm(n) under 90% of /dev/shm.
 */
#ifndef DLBN_ANALYSIS_MEMORY_H
#define DLBN_ANALYSIS_MEMORY_H

#include <stddef.h>
#include <stdint.h>

#include "model/model.h"

struct dlbn_analysis;

#define DLBN_MEM_ROWS	   32
#define DLBN_MEM_FIT_SHARE 0.90 /* of the job's memory / of /dev/shm a setting may need */
#define DLBN_MEM_LINE	   400

/* A process at the window's start and end; sizes in MiB, -1 unknown. */
struct dlbn_mem_row {
	int pid, role;
	double rss[2];	       /* window start and end (or the nearest samples) */
	double pss[2], uss[2]; /* samples with smaps_rollup nearest to those */
	double rollup_s[2];    /* when those were taken, relative to t0 */
	double private_dirty[2];
	double shared_dirty; /* at its first smaps_rollup sample */
	double peak_rss;
	double anon_grown;	     /* a worker's anonymous RSS, start to end (-1 unknown) */
	uint64_t batches;	     /* a worker's, between its two rollup samples */
	double growth_kib_per_batch; /* private pages a batch added (-1 unknown) */
	int ended;		     /* DLBN_MEM_END_*: how it ended, if it did */
	int end_code;
};

enum dlbn_mem_end { DLBN_MEM_END_RUNNING = 0, DLBN_MEM_END_EXITED, DLBN_MEM_END_SIGNAL };

enum dlbn_mem_failure {
	DLBN_FAIL_NONE = 0,
	DLBN_FAIL_OOM,	  /* the OOM killer: a cgroup's count rose, or SIGKILL near the limit */
	DLBN_FAIL_SHM,	  /* a bus error or an allocation failure in /dev/shm */
	DLBN_FAIL_KILLED, /* killed by a signal, the cause unknown */
	DLBN_FAIL_ERROR,  /* the loader raised (the message says what) */
};

struct dlbn_memory {
	int present; /* MEM samples of the training process or its workers */
	int rollup;  /* some carry smaps_rollup: PSS, USS, private pages */
	int job;     /* MEMSYS samples */
	struct dlbn_mem_row main;
	int has_main;
	size_t nworkers, nrows; /* training workers with samples; rows kept */
	struct dlbn_mem_row workers[DLBN_MEM_ROWS];
	/* What taking the samples cost the recorder (sample_ns summed): in all,
	 * as a share of the sampled processes' lifetimes, and the training
	 * process's share of its own. */
	double sampling_ms, sampling_share, sampling_main_share;
	double sampling_window_share; /* the training process's, inside the window */
	double total_pss_mib; /* the training process and its workers, at the window's end */
	double held_mib;      /* of it, what their memory limit counts and cannot reclaim:
			       * anonymous pages (PSS without pss_anon samples) */
	double shared_mib;    /* of that, pages several of them map (counted once) */
	/* The memory cgroup charged more at the window's end than the samples
	 * hold: per process, and for the rest (memory.c calibrate). */
	double per_process_mib, others_mib;
	double main_uss_mib; /* the training process's own (private dirty) */
	int64_t cutoff_ns;   /* samples after it are left out: the training process
			      * died (its last record), else INT64_MAX */
	double worker_pss_mib, worker_uss_mib; /* means over the workers at the end */
	double worker_own_mib;		       /* and their own held memory (private dirty) */
	double worker_base_mib;		       /* a worker's own at its start */
	/* Copy-on-write growth (above). */
	int cow;		     /* named: the workers' private pages grow, RSS holds */
	double cow_kib_per_batch;    /* pages copied per batch a worker made (mean) */
	double cow_mib;		     /* per worker over its samples (mean) */
	double copyable_mib;	     /* shared dirty pages at a worker's start (mean) */
	double touch_mib, touch_kib; /* S and r of the touch model */
	int touch_saturates;	     /* S from a slowdown seen (else the copyable pages) */
	double copy_us;		     /* kernel CPU per page copied (c) */
	int copy_us_fitted;	     /* c from the run (else a typical figure) */
	double nocow_faults;	     /* minor faults a batch costs beside the copies */
	int epoch_batches;	     /* batches in an epoch (CONFIG batches=, a complete
				      * epoch); -1 unknown */
	int persistent;		     /* persistent_workers */
	int run_workers, prefetch;   /* the run's num_workers and prefetch_factor */
	double batch_shm_kib;	     /* /dev/shm a batch in flight takes */
	/* Window placement, for the copies over a window like the run's. */
	size_t window_first_step, window_steps, epoch_steps;
	/* The job. */
	int cg_version; /* 0: no memory cgroup found */
	double cg_limit_mib, cg_usage_mib, cg_peak_mib, cg_anon_mib, cg_shmem_mib, cg_file_mib;
	long oom_kills;			       /* during the run; -1 unknown */
	long limit_hits;		       /* during the run; -1 unknown */
	double host_total_mib, host_avail_mib; /* the least available seen */
	double shm_size_mib, shm_free_mib;     /* the least free seen */
	double rlimit_as_mib;		       /* -1 unlimited */
	double budget_mib; /* what the training process and its workers may hold; -1 unknown */
	char budget_from[120];
	char budget_short[24]; /* the same in a word: "limit", "the host has for it" */
	double headroom_mib;   /* budget less the peak seen (-1 unknown) */
	/* Why the run died, when it did. */
	int failure; /* enum dlbn_mem_failure */
	double failure_s;
	char failure_line[DLBN_MEM_LINE];
	char failure_detail[DLBN_MEM_LINE];
};

/*
 * Fill a->memory from m and the rest of a (its window and workers), and
 * add the memory's reasons, recommendations and warnings to a.
 */
void dlbn_memory_compute(const struct dlbn_model *m, struct dlbn_analysis *a);

/*
 * Predicted memory of n workers (MiB) at batch scale k (batch size / the
 * run's), the /dev/shm the batches in flight need (*shm_mib), and whether
 * it fits: NULL when it does, else what it exceeds ("memory", "shm").
 * Returns -1 (and NULL) when the run's figures cannot tell.
 */
double dlbn_memory_need_mib(const struct dlbn_memory *mem, int n, double k, double *shm_mib);
const char *dlbn_memory_exceeds(const struct dlbn_memory *mem, double need_mib, double shm_mib);

/* A worker's own memory by its horizon with n workers (MiB; -1 unknown),
 * and that horizon in its batches (INFINITY: a long run). */
double dlbn_memory_worker_at_mib(const struct dlbn_memory *mem, int n, double *batches);

/*
 * The kernel CPU per step that workers' copies cost over a window like the
 * run's, with n workers (ms); 0 without copy-on-write growth.
 */
double dlbn_memory_copy_ms(const struct dlbn_memory *mem, int n);

const char *dlbn_mem_failure_name(int failure);

#endif /* DLBN_ANALYSIS_MEMORY_H */
