/*
 * whatif.h - predicted step time for other DataLoader settings (--what-if,
 * docs/DESIGN.md, "Analyzer layers"): num_workers from 0 to a maximum the job's CPUs
 * allow, persistent_workers, prefetch_factor and pin_memory where the
 * evidence supports a figure, each with the limit that stops it.
 *
 * Built on the verdict layer (the analysis and the model's window), never
 * on a report.  The model, per training step of the steady state:
 *
 *   step(n) = max(floor, batch / n, cpu_per_step / cores) + startup
 *
 * where process workers share the job's cores with the training process,
 * the middle two terms are one: the mean value analysis of the workers
 * queueing for the cores (below), which meets both bounds far from where
 * they cross and falls short of them near it;
 *
 *   floor   = max(loop + hand-off, gpu): the loop's own time per step
 *             without the stall (loop_ms) plus what taking a batch from a
 *             worker costs it however many workers there are (n >= 1
 *             only): receiving a batch that has arrived (the whole fetch
 *             less the wait for the arrival on the direct path: the fd
 *             exchange, which waits for the worker's own threads, and
 *             rebuilding the batch) as far as the GPU sat idle in the
 *             waits, and the loading after the fetch that the stall
 *             charged (dropping the previous batch, queueing for a CPU,
 *             first touch, a wrapper's work); and the GPU's own time per
 *             step (gpu_step_ms: from a launch onto an idle GPU to the
 *             drain probe's completion, mean over the window);
 *   batch   = a worker's time per batch (the smaller of its busy time per
 *             batch and its mean batch segment: both overstate it); when the traced threads
 *             saturate the CPUs, without its run-queue waits (x (1 - the
 *             workers' runq share)), which the core limit then stands for
 *             (the hand-off likewise); queueing behind other programs stays;
 *   cpu     = CPU a batch costs in a worker (schedstat run time per batch)
 *             + the training process's own CPU per step (schedstat, else
 *             loop_ms without host syncs); without the workers' samples
 *             (the loop thread's for num_workers=0) the core limit is not
 *             applied: a sleeping and a computing worker look alike;
 *   cores   = the CPUs the job can use: the affinity count the bootstrap
 *             records (CONFIG cpus=), lowered to the CPUs the traced
 *             threads actually got when they fill most of them and queue
 *             for one (saturated); unknown without either (then no core
 *             limit is applied);
 *   startup = the stall of later epochs' first steps beyond the steady
 *             state's, per step (workers re-started, or with persistent
 *             workers the pipeline refilling).
 *
 * n = 0 loads in the loop's thread: step(0) = loop + batch (no hand-off),
 * the loader overlapping only GPU work the host does not wait for.  The
 * row of the run's own setting also carries the measured step time, so
 * the reader sees how well the model reproduces it.
 *
 * Loaders other than torch's DataLoader (the CONFIG kind) keep the same
 * formula in their own terms.  torchdata.nodes' ParallelMapper with
 * process workers is measured as a DataLoader's workers are, but its
 * workers map samples: their figures are taken per loop batch.  Threads
 * inside the training process (DALI's pool, nodes' thread workers) are
 * not measured one by one: the loader's time per batch on one thread is
 * what the run's threads took per batch (DALI: its CPU operators' busy
 * time from its own ranges, a GPU stage kept as a floor of its own, else
 * the loop's wait + loop period) times their number, and the CPU per step
 * is the traced threads' CPU use.  The curve's setting is the loader's
 * own knob (num_workers, DALI num_threads); persistent_workers and
 * pin_memory rows are the DataLoader's only; a named loader has no knob
 * and gets no rows.
 *
 * Queueing for the cores (process workers with their CPU measured): a
 * worker's batch is think_ms off a CPU (I/O, sleeps) and cpu ms on one
 * (its own CPU per batch, with the kernel's copy-on-write copies at that
 * worker count, analysis/memory.h); n workers share `cores` CPUs with the
 * training process.  Mean
 * value analysis of that closed network (exact, the cores one station
 * serving j batches at min(j, cores) / cpu, the training process's CPU per
 * step taking its share of the cores at the step time it gets) gives the
 * batches a ms; think_ms is calibrated so that the run's own count gives
 * the run's own time per batch.  Without it, at the knee where n / (think + cpu) meets
 * cores / cpu, the max() above promises what a 2-core machine with 12
 * sleeping-and-computing workers does not deliver (9.8 ms predicted, 11.6
 * measured; the queueing model 11.6).
 *
 * Memory (analysis/memory.h): every row and grid point carries the memory
 * and /dev/shm it needs; one over 90% of what the job may hold or of
 * /dev/shm does not fit (limited_by memory or shm), and the curve's best,
 * the grid's and the recommendation are the best of the points that fit.
 *
 * What it cannot know, said in its notes: the storage's spare bandwidth,
 * the start-up cost of more workers; without smaps_rollup samples, the
 * memory per worker.
 */
#ifndef DLBN_WHATIF_H
#define DLBN_WHATIF_H

#include <stddef.h>

#include "analysis/sweep.h"
#include "analysis/verdict.h"
#include "model/model.h"

#define DLBN_WHATIF_ROWS  48
#define DLBN_WHATIF_NOTES 20
#define DLBN_WHATIF_BEST_WITHIN                                                                    \
	1.02			 /* "best": the fewest units (the grid: the least                  \
				  * change) within 2% of the best */
#define DLBN_WHATIF_BATCHES    5 /* batch sizes of the grid: /4, /2, x1, x2, x4 */
#define DLBN_WHATIF_GRID_UNITS 8 /* worker (thread) counts of the grid */

/* What stops a setting from going faster. */
#define DLBN_LIMIT_WORKERS "workers"	   /* the workers' throughput */
#define DLBN_LIMIT_CORES   "cores"	   /* CPU time per step / the job's CPUs */
#define DLBN_LIMIT_GPU	   "gpu"	   /* the GPU's own step time */
#define DLBN_LIMIT_LOOP	   "loop"	   /* the loop's host work per step */
#define DLBN_LIMIT_HANDOFF "handoff"	   /* receiving the batch in the loop */
#define DLBN_LIMIT_STORAGE "storage"	   /* worker time is file reads */
#define DLBN_LIMIT_LOADING "main_thread"   /* num_workers=0: loading in the loop */
#define DLBN_LIMIT_STARTUP "epoch_startup" /* workers re-started every epoch */
#define DLBN_LIMIT_LOCK	   "gil"	   /* the interpreter's lock, loader and loop */
#define DLBN_LIMIT_MEMORY  "memory"	   /* predicted not to fit the job's memory */
#define DLBN_LIMIT_SHM	   "shm"	   /* predicted not to fit /dev/shm */

struct dlbn_whatif_row {
	char setting[24]; /* num_workers, persistent_workers, prefetch_factor, pin_memory,
			   * batch_size (at the run's num_workers) */
	int value;	  /* booleans 0/1 */
	double step_ms;	  /* predicted step time */
	double speedup;	  /* measured step time / step_ms */
	char limited_by[16];
	int current;	    /* the run's own setting */
	double measured_ms; /* current row: the measured step time; else 0 */
	double mem_mib;	    /* predicted memory of the training process and workers; -1 unknown */
	double shm_mib;	    /* /dev/shm its batches in flight need */
	int fits;	    /* 1 yes, 0 no (limited_by memory or shm), -1 unknown */
};

/* One point of the batch size x units grid. */
struct dlbn_whatif_cell {
	int batch_size, units;
	double step_ms;	      /* predicted */
	double samples_per_s; /* batch_size * 1000 / step_ms */
	double shm_mib;	      /* shared memory of the batches in flight; 0 unknown */
	char limited_by[16];
	int current;	    /* the run's own setting */
	double measured_ms; /* a measured point (--sweep-results) or the run; 0 none */
	double mem_mib;	    /* as the row's */
	int fits;
};

struct dlbn_whatif {
	int valid;	    /* rows were computed */
	char why_not[200];  /* !valid: why */
	double measured_ms; /* window wall / window steps */
	int batch_size;	    /* -1 unknown (throughput in samples/s when known) */
	/* The model's inputs (see above), ms per batch or per step. */
	int num_workers;      /* the run's */
	double batch_ms;      /* a worker's time per batch (contended: without runq waits) */
	double worker_cpu_ms; /* CPU per batch in a worker */
	double loop_ms;	      /* loop per step without the stall */
	double main_cpu_ms;   /* training process CPU per step */
	/* Of the CPU the model's threads used per step, what sharing the
	 * cores with the run's workers added (spinning in its parallel
	 * regions: shared_cores.h); main_cpu_ms holds the rest. */
	double model_spin_ms;
	double handoff_ms;     /* exposed hand-off per batch */
	double startup_ms;     /* epoch start-up stall per step */
	double file_share;     /* file reads / worker busy time */
	double cores;	       /* 0: unknown */
	char cores_from[80];   /* how cores was found */
	int saturated;	       /* the traced threads fill the CPUs and queue for them */
	int cpu_known;	       /* schedstat gave the CPU per batch (else no core limit) */
	double gpu_step_ms;    /* the GPU's own time per step; 0 unknown / no GPU */
	size_t gpu_samples;    /* steps that measured it */
	int gpu_paced;	       /* the GPU sets the pace (host waits on it, or never idles) */
	double fewer_batch_ms; /* threads in the process: one thread's time per batch
				* below the run's count (the process's CPU per step);
				* 0: batch_ms */
	double stage_ms;       /* a loader stage the curve's setting does not scale
				* (DALI's GPU/mixed operators per batch); 0 none */
	double lock_ms;	       /* the loader's threads holding the interpreter's lock
				* per batch, as the loop waited for it; 0 none */
	double loop_lock_ms;   /* the loop's own CPU per step, under the same lock */
	char kind[16];	       /* the loader's CONFIG kind (dlbn_loader_kind) */
	char knob[24];	       /* the curve's setting: num_workers, num_threads */
	int min_units;	       /* the curve's first value (DALI: one thread) */
	int in_process;	       /* the loader's workers are threads of the training
				* process: main_cpu_ms holds theirs */
	int max_workers;       /* the curve's last value */
	int best_workers;      /* fewest units within 2% of the curve's best that fit */
	int best_unfit;	       /* the same ignoring memory (> best_workers: memory stops
				* the curve), else -1 */
	/* Queueing for the cores (above). */
	int queueing;	     /* the curve models it */
	double batch_raw_ms; /* a worker's measured time per batch, queueing included */
	double think_ms;     /* of it, off a CPU (calibrated) */
	double queue_cores;  /* the CPUs the workers share (affinity, quota) */
	double copy_ms_run;  /* copy-on-write kernel CPU per step at the run's count */
	/* Memory (analysis/memory.h): the run's, shared with its analysis. */
	const struct dlbn_memory *memory;
	int memory_known;	 /* rows carry a predicted memory */
	int fit_max;		 /* the most units that fit (-1 no limit known) */
	char fit_why[DLBN_LINE]; /* what stops fit_max + 1 */
	/* Batch size (whatif_batch.c).  The loop's host work and the GPU's
	 * time per step are a fixed part plus one that grows with the batch:
	 * the fixed parts come from measured points of another batch size
	 * (split_measured), else 0 (proportional, said in a note). */
	double loop_fixed_ms, gpu_fixed_ms;
	double batch_fixed_ms; /* of the loader's time per batch, likewise */
	int split_measured;
	double batch_kib; /* a batch's bytes through shared memory (hand-off); 0 unknown */
	int prefetch;	  /* batches in flight per worker (prefetch_factor) */
	int grid_best;	  /* index into grid of the most samples/s; -1 none */
	size_t ngrid;
	struct dlbn_whatif_cell grid[DLBN_WHATIF_BATCHES * DLBN_WHATIF_GRID_UNITS];
	size_t nrows;
	struct dlbn_whatif_row rows[DLBN_WHATIF_ROWS];
	size_t nnotes;
	char notes[DLBN_WHATIF_NOTES][DLBN_LINE];
};

/*
 * Fill w from the analysis of m (a finished dlbn_analyze_gpu): w->valid,
 * or w->why_not says why there is no prediction.  points: measured runs of
 * other settings (--sweep-results; NULL none), which size the fixed parts
 * of the batch-size model and mark the grid's measured points.  Reads no
 * trace.
 */
void dlbn_whatif_compute(const struct dlbn_model *m, const struct dlbn_analysis *a,
			 const struct dlbn_sweep *points, struct dlbn_whatif *w);

/*
 * The recommendation's count (struct dlbn_advice in verdict.h) from the
 * curve: the fewest units within 2% of its best step when more than the
 * run's, else the line says the count is not what limits the step.  Only
 * when w is valid and models the same setting; a left as it was otherwise.
 */
void dlbn_whatif_settle_advice(const struct dlbn_whatif *w, struct dlbn_analysis *a);

/* The model's step time for num_workers = n (n >= 0), and its limit; w
 * as dlbn_whatif_compute left it (valid). */
double dlbn_whatif_workers_ms(const struct dlbn_whatif *w, int n, const char **limited_by);

/* The same at batch scale k (batch size / the run's batch size). */
double dlbn_whatif_step_ms(const struct dlbn_whatif *w, double k, int n, const char **limited_by);

/* Inside the what-if (whatif.c, whatif_batch.c, whatif_threads.c; the
 * formula and the rows in whatif_step.c): the floor (the loop's or the
 * GPU's time per step) and the steady step without the epoch start-up for
 * n units at the run's batch size; a row of w (NULL when full); the
 * batch-size rows and grid, made last by dlbn_whatif_compute. */
double dlbn_whatif_floor_ms(const struct dlbn_whatif *w, int n, const char **limited_by);
double dlbn_whatif_steady_ms(const struct dlbn_whatif *w, int n, const char **limited_by);
struct dlbn_whatif_row *dlbn_whatif_add_row(struct dlbn_whatif *w, const char *setting, int value,
					    double step_ms, const char *limited_by);
void dlbn_whatif_batch(const struct dlbn_analysis *a, const struct dlbn_sweep *points,
		       struct dlbn_whatif *w);
/* The inputs of a loader whose workers are threads of the training
 * process (whatif_threads.c). */
void dlbn_whatif_thread_inputs(const struct dlbn_model *m, const struct dlbn_analysis *a,
			       struct dlbn_whatif *w);
/* Memory (whatif_memory.c): the inputs from the analysis's memory; at n
 * units, batch scale k, prefetch_factor pf (0: the run's) and persistence
 * (-1: the run's), the memory and /dev/shm needed and whether they fit
 * (1, 0, -1 unknown; *lim the limit exceeded); every row and cell filled
 * in, limited_by memory or shm where it does not fit. */
void dlbn_whatif_memory_inputs(const struct dlbn_analysis *a, struct dlbn_whatif *w);
int dlbn_whatif_fits(const struct dlbn_whatif *w, int n, double k, int pf, int persistent,
		     double *mem_mib, double *shm_mib, const char **lim);
void dlbn_whatif_memory_rows(struct dlbn_whatif *w);
/* The queueing model (whatif_step.c): one worker's batch (ms) with n
 * workers on `cores` CPUs, think_ms calibrated against the run by
 * whatif.c; the CPUs the workers have beside the training process's use
 * at a step time. */
#define DLBN_WHATIF_MVA_MAX 128
double dlbn_whatif_cycle_ms(double think_ms, double cpu_ms, double cores, int n);
double dlbn_whatif_worker_cores(double cores, double main_cpu_ms, double step_ms);
/* A note under the table (dropped past DLBN_WHATIF_NOTES). */
void dlbn_whatif_note(struct dlbn_whatif *w, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

#endif /* DLBN_WHATIF_H */
