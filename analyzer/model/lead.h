/*
 * lead.h - a step's lead: the loop period before its fetch, from the
 * previous batch's arrival (any loader's) to this fetch's begin, from the
 * counters the Python view's fetch marks carry (libintercept/loop_cost.c),
 * and the window sums that outside.c turns into the loading costs outside
 * the waits.
 *
 * Replay removes three costs of the lead (its batches are never freed,
 * never fresh from a worker, and no worker holds the cores): dropping the
 * previous batch (free_ns), the thread queued for a CPU outside that
 * (runq_ns), and the first touch of the new batch's pages (the kernel time
 * outside the frees, sys_ns - free_cpu_ns, bounded by the pages mapped).
 * It keeps the loop's own work.  They count as far as the GPU sat idle in
 * the same lead (gpu_lead_idle_ns in model.h).
 *
 * When a wrapper iterable fetched the batch (a HANDOFF mark: timm's
 * PrefetchLoader, python/_dlbn_handoff.py), the lead begins with the
 * wrapper's work on it, from the arrival to the hand-off (wrap_ns), which a
 * Replay of what the loop iterates removes whole; it counts as far as the
 * GPU sat idle in it (gpu_lead_wrap_idle_ns), and the counters above then
 * start at the hand-off, so that nothing is counted twice.
 */
#ifndef DLBN_LEAD_H
#define DLBN_LEAD_H

#include <stdint.h>

struct dlbn_lead {
	int64_t wall_ns;       /* previous arrival .. this fetch's begin */
	int64_t free_ns;       /* inside munmap/close: dropping the previous batch */
	int64_t free_cpu_ns;   /* CPU time inside those calls */
	int64_t runq_ns;       /* runnable but not running, outside those calls */
	int64_t cpu_ns;	       /* running outside those calls: the loop's own work
				* and the first touch of the new batch */
	int64_t sys_ns;	       /* kernel time (tick-sampled: exact as a sum only) */
	int64_t minflt;	       /* minor faults (first touch of worker-written pages) */
	int64_t shm_bytes;     /* the batch's shared memory mapped (any thread) */
	int64_t gil_ns;	       /* off the CPU waiting for the interpreter's lock */
	int64_t gil_others_ns; /* the process's other threads' waits for it, over
				* the whole loop period (the lead and the fetch) */
	int64_t wrap_ns;       /* arrival .. the wrapper's hand-off (0: none) */
	int64_t wrapped;       /* steps with a hand-off */
	int64_t known;	       /* steps with counters (1 or 0 for one step) */
};

static inline void dlbn_lead_add(struct dlbn_lead *sum, const struct dlbn_lead *x)
{
	if (!x->known)
		return;
	sum->wall_ns += x->wall_ns;
	sum->free_ns += x->free_ns;
	sum->free_cpu_ns += x->free_cpu_ns;
	sum->runq_ns += x->runq_ns;
	sum->cpu_ns += x->cpu_ns;
	sum->sys_ns += x->sys_ns;
	sum->minflt += x->minflt;
	sum->shm_bytes += x->shm_bytes;
	sum->gil_ns += x->gil_ns;
	sum->gil_others_ns += x->gil_others_ns;
	sum->wrap_ns += x->wrap_ns;
	sum->wrapped += x->wrapped;
	sum->known += x->known;
}

/*
 * Leads over a window.  Per step, the wrapper's part counts as far as the
 * GPU sat idle in it beyond the refill bubble already charged there (both
 * begin at the arrival), then free + runq up to the lead's remaining GPU
 * idle time (charged_ns); what idle time is left (room_ns) bounds the
 * first-touch cost, which is only known as a window sum.
 */
struct dlbn_lead_sums {
	struct dlbn_lead lead;	     /* the steps with counters */
	int64_t gpu_known;	     /* of them, steps whose lead GPU idle is known */
	int64_t gpu_idle_ns;	     /* GPU idle in the leads (GPU rule) */
	int64_t gpu_refill_ns;	     /* of it, refill bubbles charged with the waits */
	int64_t gpu_wrap_charged_ns; /* min(wrap idle - refill, idle - refill) */
	int64_t gpu_charged_ns;	     /* min(free + runq, what is left), per step */
	int64_t gpu_room_ns;	     /* idle - refill - both charges, per step */
	int64_t gpu_gil_ns;	     /* min(gil, room), per step: charged only where
				      * the lock's holders are the loader's (outside.c) */
};

/* A step's lead with the GPU's idle time in it (-1: unknown), the refill
 * bubble of the step before that lies in it, and the idle time in its
 * wrapper part (0 without one). */
static inline void dlbn_lead_sums_add(struct dlbn_lead_sums *w, const struct dlbn_lead *l,
				      int64_t gpu_idle, int64_t gpu_refill, int64_t gpu_wrap_idle)
{
	if (!l->known)
		return;
	dlbn_lead_add(&w->lead, l);
	if (gpu_idle < 0)
		return;
	int64_t room = gpu_idle > gpu_refill ? gpu_idle - gpu_refill : 0;
	int64_t wrap = gpu_wrap_idle > gpu_refill ? gpu_wrap_idle - gpu_refill : 0;
	if (wrap > room)
		wrap = room;
	room -= wrap;
	int64_t cost = l->free_ns + l->runq_ns;
	int64_t charged = cost < room ? cost : room;
	w->gpu_known++;
	w->gpu_idle_ns += gpu_idle;
	w->gpu_refill_ns += gpu_refill < gpu_idle ? gpu_refill : gpu_idle;
	w->gpu_wrap_charged_ns += wrap;
	w->gpu_charged_ns += charged;
	w->gpu_room_ns += room - charged;
	w->gpu_gil_ns += l->gil_ns < room - charged ? l->gil_ns : room - charged;
}

static inline void dlbn_lead_sums_merge(struct dlbn_lead_sums *w, const struct dlbn_lead_sums *x)
{
	dlbn_lead_add(&w->lead, &x->lead);
	w->gpu_known += x->gpu_known;
	w->gpu_idle_ns += x->gpu_idle_ns;
	w->gpu_refill_ns += x->gpu_refill_ns;
	w->gpu_wrap_charged_ns += x->gpu_wrap_charged_ns;
	w->gpu_charged_ns += x->gpu_charged_ns;
	w->gpu_gil_ns += x->gpu_gil_ns;
	w->gpu_room_ns += x->gpu_room_ns;
}

#endif /* DLBN_LEAD_H */
