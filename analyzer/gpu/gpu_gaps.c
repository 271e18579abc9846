/*
 * gpu_gaps.c - gap probes: GPU idle time between a lead's own GPU work.
 *
 * A probe issued in a step's lead (after the previous batch's arrival,
 * before the step's wait) that completes before the loop queues its next
 * GPU work shows the GPU had nothing left from max(completion, issue) to
 * that work: a gap inside the lead, which the lead's idle time counts
 * (gpu_split.c, lead_idle).  The recorder probes inside leads after the
 * loop waited for the interpreter's lock (libintercept/gpu_probe.c).
 *
 * Invariants:
 *   - Only while one stream has had work: one stream's drain is not the
 *     GPU's.
 *   - A gap belongs to the step its probe's track had open (position cut)
 *     and is dropped when a wait of that track began before the next work.
 *   - That step is not final before the gap is known: the probe is filed
 *     under an epoch no later than it (gpu.c), and the step's lead's
 *     records are weighed before its split.
 */
#include "gpu/gpu_pass.h"

/* Is t in the lead of position cut, after the arrival that opens it and
 * before its wait?  (Steps come before the records the horizon holds back:
 * positions up to n may be known; any wait that began before t is.) */
static int in_lead(const struct track *tr, int64_t t)
{
	uint64_t p = tr->cut;
	int64_t from;

	if (p == 0)
		return 0;
	if (p - 1 >= tr->base)
		from = SLOT(tr, p - 1)->s.end;
	else if (p == tr->base && tr->prev_end != NO_TIME)
		from = tr->prev_end;
	else
		return 0;
	return t > from && (p == tr->n || t < SLOT(tr, p)->wb);
}

void gpu_gap_open(struct dlbn_gpu_pass *ps, uint64_t id, int64_t t)
{
	struct gap_probe *g = &ps->gaps[0];
	int any = 0;

	if (ps->multi_stream) /* one stream's drain is not the GPU's */
		return;
	for (int i = 0; i < GAP_PROBES; i++) { /* a free entry, else the oldest */
		if (!ps->gaps[i].id) {
			g = &ps->gaps[i];
			break;
		}
		if (ps->gaps[i].t < g->t)
			g = &ps->gaps[i];
	}
	for (int k = 0; k < NTRACKS; k++) {
		const struct track *tr = &ps->tr[k];

		g->step[k] = in_lead(tr, t) ? tr->cut : NO_EPOCH;
		any |= g->step[k] != NO_EPOCH;
	}
	g->id = any ? id : 0;
	g->t = t;
	g->done = NO_TIME;
	g->next_enqueue = 0;
}

static void gap_apply(struct dlbn_gpu_pass *ps, struct gap_probe *g)
{
	int64_t gap = g->next_enqueue - max64(g->done, g->t);

	for (int k = 0; gap > 0 && !ps->multi_stream && k < NTRACKS; k++) {
		struct track *tr = &ps->tr[k];

		if (g->step[k] != NO_EPOCH && g->step[k] >= tr->base && g->step[k] <= tr->n)
			SLOT(tr, g->step[k])->lead_gap_ns += gap;
	}
	g->id = 0;
}

/* GPU work queued at t: the next work of the gap probes before it, when
 * no wait of their track began in between. */
void gpu_gap_enqueue(struct dlbn_gpu_pass *ps, int64_t t)
{
	for (int i = 0; i < GAP_PROBES; i++) {
		struct gap_probe *g = &ps->gaps[i];

		if (!g->id || g->next_enqueue || t <= g->t)
			continue;
		g->next_enqueue = t;
		for (int k = 0; k < NTRACKS; k++)
			if (g->step[k] != ps->tr[k].cut || !in_lead(&ps->tr[k], t))
				g->step[k] = NO_EPOCH;
		if (g->done != NO_TIME)
			gap_apply(ps, g);
	}
}

/* Probe id completed at done (lost: NO_TIME, the entry goes). */
void gpu_gap_done(struct dlbn_gpu_pass *ps, uint64_t id, int64_t done)
{
	for (int i = 0; i < GAP_PROBES; i++) {
		struct gap_probe *g = &ps->gaps[i];

		if (g->id != id)
			continue;
		g->done = done;
		if (done == NO_TIME)
			g->id = 0;
		else if (g->next_enqueue)
			gap_apply(ps, g);
		return;
	}
}
