/*
 * memory.h - what the trace says of memory (MEM, MEMSYS records) and of
 * processes that ended badly (CHILD, NOTE), as the model keeps it
 * (docs/DESIGN.md, "Memory").
 *
 * Per process: its first, latest, window-start and window-end samples,
 * the same for the samples that carry smaps_rollup (proportional set size,
 * private and shared-dirty pages), its peaks, and a short track of
 * (time, batches made, faults, CPU time, private pages) through its life,
 * decimated to DLBN_MEM_TRACK points: a worker's copy-on-write growth is a
 * curve in the batches it made.  For the job: its memory cgroup, the
 * host, /dev/shm.  All of it bounded by the number of processes, never by
 * the number of samples.  Sizes in KiB as the trace writes them, -1
 * unknown.
 */
#ifndef DLBN_MODEL_MEMORY_H
#define DLBN_MODEL_MEMORY_H

#include <stddef.h>
#include <stdint.h>

/* One MEM sample. */
struct dlbn_mem_point {
	int64_t t;
	uint64_t batches; /* a worker's results written by then */
	int64_t rss, anon, shmem, swap;
	int64_t minflt, majflt, utime_us, stime_us;
	/* smaps_rollup (pss -1: this sample has none) */
	int64_t pss, pss_anon, pss_shmem, private_clean, private_dirty, shared_dirty;
};

/* A point of a process's track: what the copy-on-write fit needs, and
 * the figures of a sample with smaps_rollup (a worker's last one before
 * the training process died, when it did). */
struct dlbn_mem_track_point {
	int64_t t;
	uint64_t batches;
	int64_t minflt, stime_us, utime_us, rss, anon;
	int64_t private_dirty; /* -1: no smaps_rollup in this sample */
	int64_t pss, pss_anon, private_clean, shared_dirty;
};

#define DLBN_MEM_TRACK 48

struct dlbn_proc_mem {
	size_t samples, rollups;
	int64_t rollup_ns;		       /* the recorder's own time reading smaps_rollup */
	int64_t sample_ns;		       /* and taking its samples, all told */
	int64_t sample_ns_base, sample_ns_end; /* by the window's start and end */
	struct dlbn_mem_point first, cur, base, end;	 /* any sample */
	struct dlbn_mem_point rfirst, rcur, rbase, rend; /* samples with smaps_rollup */
	int has_base, has_end, has_rbase, has_rend;
	int64_t peak_rss, peak_pss;
	/* Decimated: every stride-th sample is kept; when the track fills,
	 * every other point goes and the stride doubles. */
	struct dlbn_mem_track_point track[DLBN_MEM_TRACK];
	size_t ntrack;
	uint64_t stride, seen;
};

/* One MEMSYS sample (dlbn_trace.h). */
struct dlbn_memsys_point {
	int64_t t;
	int cg_version;
	int64_t cg_limit, cg_usage, cg_peak, cg_oom_kills, cg_anon, cg_shmem, cg_file;
	int64_t host_total, host_avail, shm_size, shm_free, rlimit_as, cg_limit_hits;
};

struct dlbn_job_mem {
	size_t samples;
	struct dlbn_memsys_point first, last, base, end;
	int has_base, has_end;
	int64_t max_usage;	  /* the largest cg_usage sampled (-1 none) */
	int64_t min_host_avail;	  /* -1 none */
	int64_t min_shm_free;	  /* -1 none */
	int64_t oom_kills_t;	  /* first sample whose OOM-kill count rose (-1 none) */
	int64_t limit_hits_t;	  /* likewise for hitting the limit */
	int64_t before_oom_usage; /* cg_usage of the last sample before oom_kills_t */
};

/* How a child process ended (CHILD), for the failures a report names. */
struct dlbn_child_end {
	int64_t t;
	uint32_t parent; /* proc index of the waiting process */
	int pid, how, code;
};

/* A loader's Python-level event (NOTE): the exception a fetch raised. */
struct dlbn_note {
	int64_t t;
	uint32_t proc;
	int64_t iter_id;
	int kind;
	char text[1001];
};

#define DLBN_CHILD_ENDS 32
#define DLBN_NOTES	4

struct dlbn_failures {
	/* Children that were killed or exited non-zero (the first ones). */
	struct dlbn_child_end ends[DLBN_CHILD_ENDS];
	size_t nends, nends_all;
	struct dlbn_note notes[DLBN_NOTES];
	size_t nnotes;
};

#endif /* DLBN_MODEL_MEMORY_H */
