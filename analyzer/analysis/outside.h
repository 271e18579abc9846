/*
 * outside.h - the loading costs that land outside the loader waits, over
 * the training window, and the part of them Replay removes (outside.c).
 *
 * Replay removes three costs of the loop periods between a batch's arrival
 * and the next fetch along with the waits: dropping the previous batch (its
 * shared memory unmapped and released), the loop's thread queued for a CPU
 * behind the workers, and the first touch of the new batch's pages (page
 * faults on worker-written shared memory; a cached batch is warm).  It
 * removes a fourth where a wrapper iterable fetched the batch (timm's
 * PrefetchLoader): the wrapper's work on it up to its hand-off to the loop
 * (lead.h).  And where the model's own threads share the cores with the
 * workers (shared_cores.h), the part of the loop's own CPU time that is
 * the model's work slowed by them: the time the loop waited for the
 * model's other threads while they were off a CPU.  They
 * are charged to the stall as far as the GPU sat idle for them: under the
 * GPU rule at most the GPU's idle time in the same loop period less the
 * refill bubble already charged there (the wrapper's part only with the
 * idle time inside it; the slowed part with what the first touch left, as
 * a window sum); under the CPU-only rule whole.  A fifth is the loop's
 * wait for the Python interpreter's lock (libintercept/hooks_gil.c) while a
 * loader's threads in the training process held it (not a DataLoader's:
 * its loading runs elsewhere), at most the CPU time of the process's other
 * threads, charged after dropping and queueing in each period.  The rest
 * of the loop's own work is kept, as Replay keeps it.
 */
#ifndef DLBN_OUTSIDE_H
#define DLBN_OUTSIDE_H

#include <stddef.h>

#include "analysis/shared_cores.h"

struct dlbn_model;

/* The kernel time charged as first touch is at most this per 4 KiB page
 * mapped for the batches (measured here: about 0.5 us per page, faulted 16 at a
 * time): other kernel work of the loop is not charged. */
#define DLBN_FIRST_TOUCH_NS_PER_PAGE_MAX 2000

struct dlbn_outside {
	int known;			/* the fetch marks carried the loop's counters */
	int gpu_rule;			/* charged by the GPU's idle time (else whole) */
	size_t steps;			/* window loop periods with counters */
	size_t gpu_steps;		/* of them, with the GPU's idle time known */
	size_t wrapped;			/* of them, with a wrapper's hand-off */
	double wall_s;			/* arrival .. next fetch, summed */
	double free_s;			/* inside munmap/close */
	double runq_s;			/* runnable but not running, outside those calls */
	double touch_s;			/* kernel time outside them, bounded by the pages mapped */
	double wrap_s;			/* arrival .. the wrapper's hand-off */
	double cpu_s;			/* the loop's own CPU time (running, less the two above) */
	double slowed_s;		/* of it, the model's work slowed by the loader's CPU use */
	double gil_s;			/* off the CPU waiting for the interpreter's lock */
	double gil_loader_s;		/* of it, the loader's threads holding it (bounded) */
	char gil_why_kept[160];		/* why none is the loader's, when gil_s > 0 */
	double gil_others_s;		/* the process's other threads' waits for it,
					 * over the same loop periods, fetches included */
	struct dlbn_shared_cores cores; /* the model's threads (census) */
	double minflt_per_step, shm_mib_per_step;
	double gpu_idle_s; /* GPU idle in those periods (GPU rule) */
	double refill_s;   /* of which charged with the waits as refill bubbles */
	double charged_s;  /* wrap + free + runq + touch as far as the GPU sat idle */
	double charged_wrap_s, charged_free_s, charged_runq_s, charged_touch_s;
	double charged_slowed_s, charged_gil_s;
	double other_host_s; /* GPU idle in them that Replay keeps */
};

/* The loader's Python work and the loop's take turns on the interpreter's
 * lock: the loop's waits for it that the loader's threads held are more
 * than LOCK_BOUND_SHARE of the stall, or the process's other threads
 * queued for it more than LOCK_QUEUE_SHARE of the window, summed (a
 * loader's Python threads taking turns).  More threads change neither. */
#define DLBN_LOCK_BOUND_SHARE 0.3
#define DLBN_LOCK_QUEUE_SHARE 0.25
int dlbn_outside_lock_bound(const struct dlbn_outside *o, double stall_s, double wall_s);

/* Of a stall of stall_s, the part in the loop's waits: under the GPU rule
 * less what was charged after the arrivals and the refill bubbles; >= 0. */
double dlbn_outside_stall_in_waits(const struct dlbn_outside *o, double stall_s);

/* The figures over the training window: its own steps' leads and those of
 * the other loaders' steps inside it (the loop body before a zipped
 * loader's fetch is that fetch's lead).  gpu_rule: whether the GPU rule
 * applies (else the CPU-only rule); workers_busy (-1 unknown) and
 * nworkers: the workers' mean busy share of the window and their count
 * (shared_cores.h). */
void dlbn_outside_waits(const struct dlbn_model *m, int gpu_rule, double workers_busy,
			size_t nworkers, struct dlbn_outside *o);

#endif /* DLBN_OUTSIDE_H */
