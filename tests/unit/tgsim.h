/*
 * tgsim.h - write a synthetic DataLoader training run as a dlbn trace
 * (tests and dlbn-gentrace).  All times in the trace follow from these
 * parameters, so tests can predict the analyzer's figures.
 */
#ifndef DLBN_TGSIM_H
#define DLBN_TGSIM_H

#include <stdint.h>

#define TGSIM_MAX_WORKERS 64

struct tgsim_params {
	long long steps; /* batches over all epochs */
	int workers;	 /* num_workers (>= 1) */
	int prefetch;	 /* prefetch_factor */
	int epochs;
	int persistent;	      /* persistent_workers */
	int pin;	      /* pin-memory thread path */
	int marks;	      /* Python bootstrap FETCH marks and CONFIG */
	int helper;	      /* a forkserver-like helper writing a pipe to the trainer */
	int tensors;	      /* tensors (fd hand-offs) per batch */
	long long kill_at;    /* SIGKILL worker (step % workers) at this step; -1 never */
	double batch_ms;      /* worker time per batch */
	double loop_ms;	      /* training loop time per step */
	double file_ms;	      /* part of batch_ms spent in file preads */
	double sleep_ms;      /* part of batch_ms asleep (off the CPU, no record) */
	double handoff_ms;    /* main-thread receive time per batch */
	double rebuild_ms;    /* after the receive, before the fetch ends: the loop rebuilds
				 the batch (unpickling; no recorded call) */
	double feeder_lag_ms; /* a worker's feeder thread writes each result this late,
				 while the worker already works on its next index */
	int rank, world_size; /* PROCESS rank variables of the training process (-1 unset) */
	int local_rank;	      /* -1: the rank */
	const char *host;     /* the PROCESS record's host; NULL "tracegen" */
	int sched;	      /* SCHED (schedstat) samples of the workers and main thread */
	double worker_runq;   /* share of a worker's busy time spent waiting for a CPU */
	double main_runq;     /* share of the loop's compute time spent waiting for a CPU */
	uint32_t extent_size; /* 0: the format's default */
	double gpu_ms;	      /* > 0: the loop launches a kernel this long per step, with the
				 recorder's drain probe at each fetch (CUDA records) */
	int cpus;	      /* > 0: the CONFIG's cpus= (the job's CPU affinity count) */
	/* Loading costs after each batch's arrival, before the step's GPU
	 * work (outside.h); any > 0: the fetch marks carry the loop's
	 * counters (libintercept/loop_cost.c). */
	double lead_free_ms;	  /* munmap/close of the previous batch (on CPU) */
	double lead_runq_ms;	  /* runnable, not running */
	double lead_touch_ms;	  /* kernel time: first touch of the batch */
	double lead_wrap_ms;	  /* before those, a wrapper iterable's work on the batch (on
				     CPU), ended by a HANDOFF mark */
	double lead_gil_ms;	  /* after those, off the CPU waiting for the interpreter's
				     lock (> 0: the marks carry the seventh counter, gil_ns) */
	const char *config_extra; /* appended to the CONFIG text (";kind=nodes;...") */
	int shm_kib;		  /* shared memory mapped per tensor (default 128) */
	int drain_sync;		  /* right after its kernel the loop synchronises the
				     context until the GPU is done (loss.item()); 2: the
				     kernel's stream instead (cuStreamSynchronize); the
				     next fetch waits for its return (loop_ms covers it) */
	double sync_late_ms;	  /* drain_sync 2: the sync returns this long after the GPU
				     is done (the loop thread queued for a CPU) */
	int sync_drain_event;	  /* drain_sync 2: the SYNC carries the GPU's completion time
				     (the recorder's sync drain event) */
	double sync_ms;		  /* > 0: after its loop work each step blocks this long in
				     cuStreamSynchronize (a rank waiting at an NCCL collective) */
	int abandon_epochs;	  /* the loop leaves each epoch's iterator after its last
				     batch, no StopIteration (Lightning's limit_train_batches) */
	double stop_fetch_ms;	  /* > 0: the fetch that ends each epoch opens with a
				     FETCH_BEGIN (the loop's counters) and raises
				     StopIteration this long after; 0: a FETCH_STOP alone */
	double startup_ms;	  /* iter() .. the epoch's first fetch: the loop's thread
				     starts the workers (fork: kernel time) */
	int iter_marks_bare;	  /* ITER_BEGIN without the loop's counters (recorders
				     before they carried them) */
	int profile;		  /* worker profile summaries (PROF_*) and the loop's CALLSITE:
				   * of each batch's CPU time (batch_ms - file_ms) 50% in a timed
				   * Resize stage, 10% in collate, 30% sampled in PIL (27% in
				   * convert, 3% in Image.open) and 10% in the dataset's
				   * __getitem__; the file time is off the CPU; pickling the
				   * batch adds 5% of batch_ms */
	int loader_threads;	  /* at the end, the training process's summaries of loader
				   * threads of iterator 1 (python/_dlbn_threads.py): a Python
				   * producer busy 900 of its 1000 ms watched (800 ms sampled off
				   * the CPU in produce, 100 ms on it in PIL's convert), a thread
				   * of the same name busy 450 of 500 ms, a Python thread never
				   * busy in 1000 ms, and DALI's native pool thread, 300 ms of
				   * CPU in 1000 ms; 2: the same, with the producers' time off
				   * the CPU spent waiting for the interpreter's lock (produce
				   * sampled so, 500 + 250 ms of lock waits) */
	int model_threads;	  /* > 0: the model runs on that many intra-op threads besides
				   * the loop's (CONFIG intraop_threads = model_threads + 1):
				   * at each fetch begin a thread census (TASK) of them, each
				   * on a CPU loop_ms per step and queued for one model_runq
				   * of its runnable time, and of a logger thread that runs
				   * 1% of loop_ms */
	double model_runq;
	double model_wait_runq_ms; /* each model thread also queued this long in each
				    * fetch wait (an OpenMP thread spinning on) */
	int census_arrival;	   /* the census also at each batch's arrival, as the
				    * recorder takes it: the loop periods bounded */
	/* Memory (MEM, MEMSYS, CHILD, NOTE; analysis/memory.h).  mem_every > 0:
	 * each worker samples before every mem_every-th index wait (with
	 * smaps_rollup the first time, every 4th time and before its exit),
	 * the training process at every mem_every-th fetch begin (rollup the
	 * first and every 4th time), each with a MEMSYS sample.  A worker
	 * holds mem_base_mib of its own and shares mem_shared_mib with the
	 * training process (mem_main_mib of its own); with mem_touch_mib > 0
	 * it copies S(1 - exp(-r k / S)) after k batches (S mem_touch_mib,
	 * r mem_touch_kib), each copied page mem_copy_us of system time. */
	int mem_every;
	double mem_main_mib, mem_shared_mib, mem_base_mib;
	double mem_touch_mib, mem_touch_kib, mem_copy_us;
	double mem_limit_mib;  /* > 0: the memory cgroup's limit in MEMSYS */
	double mem_shm_mib;    /* > 0: /dev/shm's size (else 8 GiB) */
	int mem_oom_kills;     /* the cgroup's OOM kills rise by this at the end */
	int mem_child_signal;  /* > 0: the training process sees worker 0 killed by it */
	const char *mem_note;  /* a fetch error (NOTE) at the end */
	int mem_no_main_exit;  /* the training process ends without EXIT */
	int mem_late_rollup;   /* > 0: a worker's first smaps_rollup at this sample,
				* not its first (the recorder waits a second) */
	int mem_rollups_max;   /* > 0: a worker takes at most this many, its exit's
				* included (a short life on a busy machine) */
	int mem_batch_faults;  /* minor faults a batch makes of its own (else 10) */
	double mem_handed_mib; /* > 0: the workers exit 2 ms apart, and those that
				* outlive the first to go see this many MiB of
				* shared pages turn private (pages the training
				* process wrote after the fork, now theirs alone),
				* with no fault */
	unsigned seed;
};

void tgsim_default(struct tgsim_params *p);
/* Write the run to path; 0 on success.  *records gets the record count. */
int tgsim_write(const char *path, const struct tgsim_params *p, uint64_t *records);

#endif /* DLBN_TGSIM_H */
