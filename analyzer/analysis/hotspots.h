/*
 * hotspots.h - where the DataLoader workers' time goes, in Python terms
 * (docs/DESIGN.md, "Analyzer layers"): the bootstrap's PROF_STAGE and
 * PROF_SAMPLE summaries (python/_dlbn_profile.py) per loader, turned into
 * shares of the workers' busy time, and the training loop's next() call
 * sites (CALLSITE).
 *
 * Busy time of a loader = the fetches of its workers (or of the main
 * process for num_workers=0) plus the pickling of the batches for the
 * hand-off, plus its threads' busy time.  Exact entries are timed stages
 * (Compose stages, a Hugging Face transform, collate, send); the rest of
 * the fetch - __getitem__ outside the timed stages - is split into its CPU
 * part, shared out over the sampled Python functions (sampled entries),
 * and its off-CPU part (a waiting entry, with the recorder's file-read time
 * of the workers).
 *
 * A loader's own threads in the training process (python/_dlbn_threads.py)
 * add their busy time, sampled by wall time: their entries are shares of
 * it, on or off the CPU as the samples found them.
 *
 * Summaries are cumulative: the last record per (process, key) counts.
 * One pass over the trace after the model; memory grows with processes
 * times distinct keys (stages, sampled functions), not with records.
 */
#ifndef DLBN_HOTSPOTS_H
#define DLBN_HOTSPOTS_H

#include <stddef.h>
#include <stdint.h>

#include "model/model.h"
#include "trace/reader.h"

enum dlbn_hot_category {
	DLBN_HOT_OTHER = 0,
	DLBN_HOT_DECODE = 1,
	DLBN_HOT_RESIZE = 2,
	DLBN_HOT_AUGMENT = 3,
	DLBN_HOT_STORAGE = 4,
	DLBN_HOT_TOKENIZE = 5,
	DLBN_HOT_COLLATE = 6,
	DLBN_HOT_SEND = 7,
	DLBN_HOT_NUMPY = 8,
	DLBN_HOT_WAIT = 9,
	DLBN_HOT_LOCK = 10, /* waiting for the Python interpreter's lock */
};

struct dlbn_hotspot {
	int loader;	   /* index into m->loaders.v; -1 unknown */
	int kind;	   /* DLBN_PROF_* of an exact entry; 0 sampled, -1 waiting,
			    * DLBN_HOT_THREAD_SAMPLED sampled in a loader thread */
	char name[96];	   /* stage or function */
	char file[200];	   /* "" unknown */
	int line;	   /* 0 unknown */
	int64_t ns;	   /* time it stands for */
	int64_t cpu_ns;	   /* exact entries: the thread's CPU time in it */
	int64_t lock_ns;   /* sampled in a thread: of ns, mostly waiting for the
			    * interpreter's lock */
	double share;	   /* of the loader's busy time, 0..1 */
	int exact;	   /* 1 timed, 0 sampled */
	int io;		   /* 1: mostly off the CPU (waiting on I/O ...) */
	int lock;	   /* 1: of that, mostly waiting for the interpreter's lock */
	int category;	   /* DLBN_HOT_* */
	char callers[120]; /* sampled: "function:line<..." of its callers */
	char leaf[240];	   /* sampled: "function file:line" of the innermost frame
			    * when it is not the entry itself */
};

/* kind of an entry sampled in a loader's own thread (by wall time) */
#define DLBN_HOT_THREAD_SAMPLED (-2)

#define DLBN_HOT_LOADERS 8

struct dlbn_hot_loader {
	int loader;	  /* -1: processes whose loader is unknown */
	int procs;	  /* processes that fetched for it */
	int main_process; /* fetched in the main process (num_workers=0) */
	uint64_t batches;
	int64_t busy_ns, fetch_ns, fetch_cpu_ns, send_ns, collate_ns, file_ns;
	int64_t runq_ns;	 /* fetching threads runnable, not running */
	int runq_written;	 /* runq_ns from the profile (else the marks') */
	int64_t sampler_cost_ns; /* in the sampler's handler and timer calls */
	uint64_t samples;
	int sampler_on, sampler_off; /* processes that sampled / did not */
	char sampler_note[96];	     /* why not (the first process's reason) */
	/* The loader's own threads in the training process (nodes' thread
	 * workers and prefetcher, a named loader's producer), sampled: busy =
	 * not waiting for another thread (a queue, a condition, a semaphore). */
	int threads;
	int native_threads; /* of them: a library's C++ pool (DALI's), read as
			     * CPU time, never sampled */
	int64_t thread_busy_ns, thread_watched_ns, thread_samples;
	int64_t thread_lock_ns;	     /* of thread_busy_ns, waiting for the interpreter's lock */
	char busiest_thread[64];     /* "" none */
	double busiest_thread_share; /* its busy / watched, 0..1 */
};

#define DLBN_HOT_CALLSITES 4

struct dlbn_callsite {
	int loader;
	int64_t iter_id;
	char text[512]; /* "file:function:line" frames, newline separated */
};

struct dlbn_hot_key;

struct dlbn_hotspots {
	int present; /* some PROF_* record was seen */
	struct dlbn_hot_loader loaders[DLBN_HOT_LOADERS];
	size_t nloaders;
	struct dlbn_hotspot *v; /* largest share first */
	size_t n;
	struct dlbn_callsite callsites[DLBN_HOT_CALLSITES];
	size_t ncallsites;
	char recommendation[512]; /* "" none */
	/* working state of the pass */
	struct dlbn_hot_key *keys;
	size_t nkeys, capkeys;
};

/* One more pass over the trace (rewound here).  0, or -1 out of memory. */
int dlbn_hotspots_build(struct dlbn_hotspots *h, struct dlbn_reader *r, struct dlbn_model *m);
void dlbn_hotspots_free(struct dlbn_hotspots *h);

const char *dlbn_hot_category_name(int category);
/* "decode on the GPU ...": what usually fixes a cost of this category. */
const char *dlbn_hot_category_fix(int category);
/* The last two path components of file ("PIL/ImageFile.py"). */
const char *dlbn_hot_short_file(const char *file);

#endif /* DLBN_HOTSPOTS_H */
