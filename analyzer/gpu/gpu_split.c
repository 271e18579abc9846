/*
 * gpu_split.c - a step's final GPU split (the rule in gpu.h): the wait's
 * GPU-busy and GPU-idle parts from busy_until, the refill bubble after a
 * drained wait, the GPU's idle time in the step's lead (the loop period
 * before its wait, outside.h), the host-side CUDA evidence of its loop
 * period, and the view's sums.  When a split is final, and handing the
 * step on, is gpu.c's to decide: this file only does the arithmetic.
 */
#include <string.h>

#include "gpu/gpu_pass.h"

void gpu_add_launch(struct dlbn_gpu_host *h, const struct event *ev)
{
	(void)ev;
	h->launches++;
}

static int sync_kind(int64_t api)
{
	switch (api) {
	case DLBN_CU_STREAM_SYNC:
		return DLBN_GPU_SYNC_STREAM;
	case DLBN_CU_CTX_SYNC:
		return DLBN_GPU_SYNC_CTX;
	case DLBN_CU_EVENT_SYNC:
		return DLBN_GPU_SYNC_EVENT;
	default:
		return DLBN_GPU_SYNC_OTHER;
	}
}

void gpu_add_sync(struct dlbn_gpu_host *h, const struct event *ev)
{
	h->syncs++;
	h->sync_ns[sync_kind(ev->f[1])] += dur_of(ev);
}

static int copy_dir(int64_t dir)
{
	switch (dir) {
	case DLBN_COPY_HTOD:
		return DLBN_GPU_COPY_HTOD;
	case DLBN_COPY_DTOH:
		return DLBN_GPU_COPY_DTOH;
	case DLBN_COPY_DTOD:
		return DLBN_GPU_COPY_DTOD;
	default:
		return DLBN_GPU_COPY_OTHER;
	}
}

void gpu_add_copy(struct dlbn_gpu_host *h, const struct event *ev)
{
	int64_t d = dur_of(ev), bytes = bounded(ev->f[3], DLBN_DUR_LIMIT);
	int dir = copy_dir(ev->f[4]);

	h->copy_blocked_ns[dir] += d;
	if (ev->f[5])
		h->async_copies++;
	else
		h->sync_copies++;
	if (dir != DLBN_GPU_COPY_HTOD)
		return;
	if (ev->f[6] == DLBN_HOSTMEM_PAGEABLE) {
		h->pageable_h2d++;
		h->pageable_h2d_bytes += bytes;
		h->pageable_h2d_ns += d;
	} else if (ev->f[6] == DLBN_HOSTMEM_PINNED) {
		h->pinned_h2d++;
		h->pinned_h2d_bytes += bytes;
	}
}

/*
 * Split the wait of sl (see the rule in gpu.h), given busy_until at it and
 * whether evidence for it is known to be missing.  refill_known: the next
 * GPU work after the step is known (or never comes); without it, returns 1
 * when the split would charge a refill bubble it cannot size yet.
 */
static int split_step(struct slot *sl, int64_t busy_until, int unknown, int refill_known)
{
	struct dlbn_step *s = &sl->s;
	struct dlbn_gpu_step *gs = &sl->gs;
	int64_t wait = sl->we - sl->wb, busy = 0;

	s->gpu_refill_ns = 0;
	gs->refill_ns = 0;
	gs->gpu_done = busy_until > 0 ? busy_until : 0;
	if (wait <= 0) {
		gs->evidence = DLBN_GPU_EV_NONE;
		s->gpu_busy_ns = 0;
		s->gpu_idle_ns = s->wait_ns;
		return 0;
	}
	if (sl->no_work) {
		gs->evidence = DLBN_GPU_EV_NO_WORK;
	} else {
		if (busy_until > sl->wb)
			busy = busy_until - sl->wb < wait ? busy_until - sl->wb : wait;
		/* Known busy for the whole wait: whatever is missing cannot
		 * make it idle. */
		gs->evidence = (sl->uncovered || unknown) && busy < wait ? DLBN_GPU_EV_UNKNOWN
									 : DLBN_GPU_EV_PROBE;
	}
	/* Wait outside the probed interval (see wait_interval) has no GPU
	 * evidence of its own: counted idle, like Replay removes it. */
	int64_t outside = s->wait_ns > wait ? s->wait_ns - wait : 0;
	int64_t idle = wait - busy + outside;
	s->gpu_busy_ns = busy;
	s->gpu_idle_ns = idle;
	/* The GPU drained inside the wait: it stays idle until the loop queues
	 * work again, a bubble that would have overlapped earlier GPU work had
	 * the batch been ready.  Charged to the stall, at most the wait itself
	 * (so host work between steps, which Replay keeps, cannot grow the
	 * stall past the waits). */
	if (gs->evidence != DLBN_GPU_EV_PROBE || busy >= wait)
		return 0;
	if (!refill_known)
		return s->wait_ns > idle; /* a bubble is capped at wait - idle = busy */
	if (gs->next_enqueue > s->end) {
		int64_t refill = gs->next_enqueue - s->end;
		if (idle + refill > s->wait_ns)
			refill = s->wait_ns > idle ? s->wait_ns - idle : 0;
		gs->refill_ns = refill;
		s->gpu_refill_ns = refill;
	}
	return 0;
}

/*
 * The GPU's idle time in the lead of sl's step: the loop period from the
 * previous batch's arrival to this wait, or to the iter() whose worker
 * start-up the wait carries (model.h, gpu_lead_idle_ns, lead_end).  Idle
 * from when the GPU had nothing left after the arrival to the first GPU
 * work queued in the period, and from when that work was done to the wait:
 * by this wait's probes (they complete when the wait begins if the GPU is
 * idle then, so they show a drain only after it), or by a synchronisation
 * in the period that waited for all of it; and gaps between the period's
 * own GPU work that a probe in the period showed (gpu_gaps.c: the
 * GPU drained before the next work was queued), at most the time from the
 * first work to the drain.  Other gaps, and a drain before the wait that
 * neither shows, are not observed (counted busy).  No GPU work in the
 * period: idle from the drain to the wait.  Unknown (-1) without probe
 * evidence at both ends (an arrival before any GPU work was queued is
 * known: idle).  Of it, the idle time up to the hand-off of a wrapper's
 * part (lead.h): from the drain to the hand-off or the first GPU work,
 * whichever comes first.
 */
static void lead_idle(const struct track *tr, struct slot *sl, int64_t busy_until)
{
	struct dlbn_step *s = &sl->s;
	int64_t from = tr->prev_drained, e = tr->prev_next_enqueue, idle;
	int64_t end = s->lead_end > 0 && s->lead_end < sl->wb ? s->lead_end : sl->wb;

	s->gpu_lead_idle_ns = -1;
	s->gpu_lead_refill_ns = 0;
	s->gpu_lead_wrap_idle_ns = 0;
	if (tr->prev_end == NO_TIME || !tr->prev_probed || end < tr->prev_end)
		return;
	if (s->lead.wrap_ns > 0) {
		int64_t stop = tr->prev_end + s->lead.wrap_ns;
		if (e > 0 && e < stop)
			stop = e;
		if (stop > end)
			stop = end;
		s->gpu_lead_wrap_idle_ns = stop > from ? stop - from : 0;
	}
	if (e <= 0 || e >= end) {
		idle = end > from ? end - from : 0;
	} else {
		if (sl->gs.evidence != DLBN_GPU_EV_PROBE || busy_until <= 0)
			return;
		idle = e > from ? e - from : 0;
		int64_t done = max64(busy_until, e);
		if (sl->drained_by_sync > e && sl->drained_by_sync >= sl->last_enqueue &&
		    sl->drained_by_sync < done)
			done = sl->drained_by_sync;
		idle += sl->lead_gap_ns < done - e ? sl->lead_gap_ns : done - e;
		idle += end > done ? end - done : 0;
	}
	s->gpu_lead_idle_ns = idle;
	s->gpu_lead_refill_ns = tr->prev_refill < idle ? tr->prev_refill : idle;
}

/* sl is final: the next step's lead starts at its arrival.  first_work:
 * the first GPU work of the run (NO_TIME none yet). */
static void lead_next(struct track *tr, const struct slot *sl, int64_t busy_until,
		      int64_t first_work)
{
	const struct dlbn_step *s = &sl->s;
	tr->prev_end = s->end;
	/* Known at the arrival: by the wait's probes, or because no GPU work
	 * had been queued yet (none before the wait, none during it). */
	tr->prev_probed = sl->gs.evidence == DLBN_GPU_EV_PROBE ||
			  (sl->gs.evidence == DLBN_GPU_EV_NO_WORK && first_work >= s->end);
	/* Still busy at the arrival: it drains when the work queued before
	 * the wait is done (later work counts as the lead's own). */
	tr->prev_drained =
		s->gpu_busy_ns >= sl->we - sl->wb && busy_until > s->end ? busy_until : s->end;
	tr->prev_next_enqueue = sl->gs.next_enqueue > s->end ? sl->gs.next_enqueue : 0;
	tr->prev_refill = s->gpu_refill_ns;
}

static void add_host(struct dlbn_gpu_host *w, const struct dlbn_gpu_host *h)
{
	w->launches += h->launches;
	w->syncs += h->syncs;
	for (int k = 0; k < DLBN_GPU_SYNC_KINDS; k++)
		w->sync_ns[k] += h->sync_ns[k];
	for (int k = 0; k < DLBN_GPU_COPY_DIRS; k++)
		w->copy_blocked_ns[k] += h->copy_blocked_ns[k];
	w->pageable_h2d += h->pageable_h2d;
	w->pageable_h2d_bytes += h->pageable_h2d_bytes;
	w->pageable_h2d_ns += h->pageable_h2d_ns;
	w->pinned_h2d += h->pinned_h2d;
	w->pinned_h2d_bytes += h->pinned_h2d_bytes;
	w->async_copies += h->async_copies;
	w->sync_copies += h->sync_copies;
}

/* One step into a window's sums. */
void gpu_win_add(struct dlbn_gpu_win *w, const struct dlbn_step *s, const struct dlbn_gpu_step *gs)
{
	w->steps++;
	add_host(&w->host, &gs->host);
	if (gs->evidence == DLBN_GPU_EV_NONE)
		return;
	w->waits++;
	w->wait_s += (double)(s->gpu_busy_ns + s->gpu_idle_ns) / 1e9;
	w->wait_gpu_busy_s += (double)s->gpu_busy_ns / 1e9;
	w->wait_gpu_idle_s += (double)s->gpu_idle_ns / 1e9;
	if (gs->evidence == DLBN_GPU_EV_PROBE) {
		w->waits_with_probe++;
	} else if (gs->evidence == DLBN_GPU_EV_NO_WORK) {
		w->waits_no_work++;
	} else {
		w->waits_unknown++;
		w->wait_unknown_s += (double)(s->gpu_busy_ns + s->gpu_idle_ns) / 1e9;
		w->wait_unknown_idle_s += (double)s->gpu_idle_ns / 1e9;
	}
}

/*
 * The final split of tr's oldest step sl (the rule in gpu.h), given what
 * the scheduler in gpu.c knows by now: busy_until over the probes that
 * count for it, whether its evidence is incomplete, and whether the loop's
 * next GPU work (which sizes a refill bubble) is known.  Returns 0, leaving
 * sl as it was, when the bubble cannot be sized yet; else 1, with the step
 * added to the view's whole-run and window sums.
 */
int gpu_split_final(struct dlbn_gpu_pass *ps, struct track *tr, struct slot *sl, int64_t busy_until,
		    int unknown, int refill_known)
{
	if (split_step(sl, busy_until, unknown, refill_known))
		return 0;
	lead_idle(tr, sl, busy_until);
	lead_next(tr, sl, busy_until, ps->first_work);
	gpu_win_add(&ps->g->view_all[tr->k], &sl->s, &sl->gs);
	if (sl->s.aside) /* another loader's fetch: its loop period's host work only */
		add_host(&ps->g->view_win[tr->k].host, &sl->gs.host);
	else if (!sl->s.warmup)
		gpu_win_add(&ps->g->view_win[tr->k], &sl->s, &sl->gs);
	return 1;
}
