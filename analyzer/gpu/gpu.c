/*
 * gpu.c - GPU-aware split of the loader waits and the host-side GPU
 * evidence (see gpu.h for the rule and its handling of missing probes).
 *
 * One streaming pass, inside the model's second pass.  Each view of the
 * model (Python marks, IPC, NVTX) is a *track*: a window of its steps by
 * position (= step index; waits come in begin order), from the oldest step
 * whose split is not final (base) to the next step to come (n).  A wait's
 * cutoff becomes final once the records have moved past it; every probe
 * is filed under the *epoch* of the first wait whose cutoff was still open
 * when the probe was issued (possibly the step still to come), so it
 * counts for that wait and all later ones.  PROBE_DONE can come much later
 * than its PROBE: pending probes sit in a fixed ring (id -> epochs) and a
 * completion raises maxdone[epoch].  busy_until at a wait is the running
 * maximum of maxdone over the epochs up to it.
 *
 * CUDA records are queued until the model's horizon passes them: only
 * then are all waits that begin before them known.  A step's split is
 * final when its cutoff has passed, no probe of its epoch (or earlier) is
 * pending, no lost probe that may cover it awaits the next probe on its
 * stream, its loop period's host records are all in, and (when its split
 * charges a refill bubble) the loop has queued GPU work again after it, or
 * none for REFILL_WAIT_NS.
 *
 * A probe issued in a step's lead is also a gap probe (gpu_gaps.c).  The
 * step's split waits for it like for any probe of its epoch or earlier.
 *
 * Invariants:
 *   - base <= cut <= n, base <= period <= n, refill_next <= n (positions
 *     below base are final and gone; the slot of position n exists).
 *   - Cursors only move forward; epochs are positions.
 *   - slot(p).pending counts the ring's probes filed under epoch p.
 *   - A stream's unprobed_since is the oldest queued work on it not yet
 *     covered by a probe (or a sync): a wait that begins after it is
 *     uncovered until a probe on that stream is issued.
 */
#include <stdlib.h>
#include <string.h>

#include "gpu/gpu_pass.h"
#include "util/lines.h"

void dlbn_gpu_default_opts(struct dlbn_gpu_opts *o)
{
	o->probe_slack_ns = DEFAULT_PROBE_SLACK_NS;
}

/* ---- streams ------------------------------------------------------------ */

static void stream_init(struct stream_ent *e, int64_t stream)
{
	e->used = 1;
	e->stream = stream;
	e->unprobed_since = NO_TIME;
	for (int k = 0; k < NTRACKS; k++)
		e->lost_open[k] = NO_EPOCH;
}

static struct stream_ent *stream_get(struct dlbn_gpu_pass *ps, int64_t stream)
{
	uint64_t h = (uint64_t)stream * 0x9e3779b97f4a7c15ull;
	size_t i = (size_t)(h >> 40) & (STREAM_TABLE - 1);

	for (size_t n = 0; n < STREAM_TABLE; n++, i = (i + 1) & (STREAM_TABLE - 1)) {
		struct stream_ent *e = &ps->streams[i];

		if (e->used && e->stream == stream)
			return e;
		if (!e->used) {
			stream_init(e, stream);
			ps->g->streams++;
			return e;
		}
	}
	/* Table full: all further streams share one conservative entry. */
	ps->g->streams_saturated = 1;
	struct stream_ent *o = &ps->streams[STREAM_TABLE];
	if (!o->used)
		stream_init(o, stream);
	return o;
}

static void stream_work(struct dlbn_gpu_pass *ps, int64_t stream, int64_t t)
{
	struct stream_ent *e = stream_get(ps, stream);

	if (e->unprobed_since == NO_TIME) {
		e->unprobed_since = t;
		ps->nstreams_unprobed++;
	}
	e->last_work = max64(e->last_work, t);
	if (ps->first_work == NO_TIME)
		ps->first_work = t;
}

static void stream_covered(struct dlbn_gpu_pass *ps, struct stream_ent *e)
{
	if (e->unprobed_since != NO_TIME) {
		e->unprobed_since = NO_TIME;
		ps->nstreams_unprobed--;
	}
}

/* Oldest queued work that no probe or sync has covered, NO_TIME none. */
static int64_t oldest_unprobed(const struct dlbn_gpu_pass *ps)
{
	int64_t oldest = NO_TIME;

	if (!ps->nstreams_unprobed)
		return NO_TIME;
	for (size_t i = 0; i <= STREAM_TABLE; i++)
		if (ps->streams[i].used && ps->streams[i].unprobed_since < oldest)
			oldest = ps->streams[i].unprobed_since;
	return oldest;
}

static void set_lost_open(struct dlbn_gpu_pass *ps, struct stream_ent *e, int k, uint64_t epoch)
{
	if (e->lost_open[k] == NO_EPOCH)
		ps->nlost_open++;
	e->lost_open[k] = epoch;
}

static void clear_lost_open(struct dlbn_gpu_pass *ps, struct stream_ent *e, int k)
{
	if (e->lost_open[k] != NO_EPOCH)
		ps->nlost_open--;
	e->lost_open[k] = NO_EPOCH;
}

/* Oldest epoch of track k a lost probe may still cover, NO_EPOCH none. */
static uint64_t oldest_lost_open(const struct dlbn_gpu_pass *ps, int k)
{
	uint64_t oldest = NO_EPOCH;

	if (!ps->nlost_open)
		return NO_EPOCH;
	for (size_t i = 0; i <= STREAM_TABLE; i++)
		if (ps->streams[i].used && ps->streams[i].lost_open[k] < oldest)
			oldest = ps->streams[i].lost_open[k];
	return oldest;
}

/* ---- tracks ------------------------------------------------------------- */

static void slot_clear(struct slot *sl)
{
	memset(sl, 0, sizeof(*sl));
	sl->maxdone = INT64_MIN;
}

static int track_init(struct track *tr, int k, int pin)
{
	memset(tr, 0, sizeof(*tr));
	tr->k = k;
	tr->pin = pin;
	tr->cap = 16;
	tr->first_probe = NO_TIME;
	tr->last_wb = INT64_MIN;
	tr->busy_until = INT64_MIN;
	tr->prev_end = NO_TIME;
	tr->ring = malloc(tr->cap * sizeof(*tr->ring));
	if (!tr->ring)
		return -1;
	slot_clear(SLOT(tr, 0));
	return 0;
}

/* Room for positions base .. n + 1; 0, -1 at the ceiling, -2 out of memory. */
static int track_room(struct track *tr)
{
	size_t need = (size_t)(tr->n + 2 - tr->base);
	if (need <= tr->cap)
		return 0;
	if (tr->cap >= GPU_PASS_STEPS_MAX)
		return -1;
	size_t ncap = tr->cap * 2;
	struct slot *nv = malloc(ncap * sizeof(*nv));
	if (!nv)
		return -2;
	for (uint64_t p = tr->base; p <= tr->n; p++)
		nv[p & (ncap - 1)] = *SLOT(tr, p);
	free(tr->ring);
	tr->ring = nv;
	tr->cap = ncap;
	return 0;
}

/*
 * Where a step's wait lies.  Python marks, NVTX and the direct IPC path:
 * the wait is the fetch [begin, begin + wait].  The pin-memory path sums
 * the main thread's semaphore waits, which end just after the pin thread
 * delivers: [end - wait, end] is the nearest interval the steps still
 * describe (the model keeps no wait begin; see the integration notes).
 */
static void wait_interval(const struct track *tr, const struct dlbn_step *s, int64_t *wb,
			  int64_t *we)
{
	int64_t w = bounded(s->wait_ns, DLBN_TIME_LIMIT);

	if (tr->pin) {
		*we = s->end;
		*wb = s->end - w;
	} else {
		*wb = s->begin;
		*we = s->begin + w;
		/* A Python-view step can carry loader time from between epochs
		 * (worker shutdown and start-up) beyond its fetch; that part
		 * lies outside [begin, end] and is split_step's `outside`. */
		if (s->end > s->begin && *we > s->end)
			*we = s->end;
	}
}

/* The cutoff of the open wait has passed once a record is later than it. */
static int cutoff_passed(const struct track *tr, int64_t slack, int64_t t)
{
	const struct slot *sl = &tr->ring[tr->cut & (tr->cap - 1)];
	int64_t b = sl->wb, e = sl->we, c;

	if (tr->first_probe == NO_TIME) {
		c = e; /* the first probe inside the wait would still count */
	} else {
		c = b + slack < e ? b + slack : e;
		c = max64(c, tr->first_probe);
	}
	return t > c;
}

static void finalize_wait(struct dlbn_gpu_pass *ps, struct track *tr)
{
	struct slot *sl = SLOT(tr, tr->cut);
	int64_t oldest = oldest_unprobed(ps);

	sl->last_enqueue = ps->last_enqueue;
	sl->drained_by_sync = ps->drained_by_sync;
	if (ps->first_work == NO_TIME || ps->first_work >= sl->wb)
		sl->no_work = 1;
	else if (oldest < sl->wb)
		sl->uncovered = 1;
	tr->cut++;
	tr->first_probe = NO_TIME;
}

static void advance(struct dlbn_gpu_pass *ps, int64_t t)
{
	for (int k = 0; k < NTRACKS; k++) {
		struct track *tr = &ps->tr[k];

		while (tr->cut < tr->n && cutoff_passed(tr, ps->slack, t))
			finalize_wait(ps, tr);
	}
}

/* Host-side figures go to the loop period (previous end, end] holding t. */
static void attribute_host(struct dlbn_gpu_pass *ps, int64_t t,
			   void (*add)(struct dlbn_gpu_host *, const struct event *),
			   const struct event *ev)
{
	add(&ps->g->host, ev);
	for (int k = 0; k < NTRACKS; k++) {
		struct track *tr = &ps->tr[k];

		if (tr->period < tr->base) /* only after a forced split */
			tr->period = tr->base;
		while (tr->period < tr->n && t > SLOT(tr, tr->period)->s.end)
			tr->period++;
		add(&SLOT(tr, tr->period)->gs.host, ev);
	}
}

/* ---- probes ------------------------------------------------------------- */

/* Waits [from, to) of track k lack the lost probe's completion. */
static void mark_unknown(struct track *tr, uint64_t from, uint64_t to)
{
	if (from < tr->base)
		from = tr->base; /* the final ones (forced) are past changing */
	if (to > tr->n)
		to = tr->n;
	if (to <= from)
		return;
	SLOT(tr, from)->unknown_diff++;
	SLOT(tr, to)->unknown_diff--;
}

/* A probe of epoch e completed no earlier than t. */
static void raise_done(struct track *tr, uint64_t e, int64_t t)
{
	if (e == NO_EPOCH)
		return;
	if (e < tr->base)
		tr->busy_until = max64(tr->busy_until, t); /* counts for later waits */
	else if (e <= tr->n)
		SLOT(tr, e)->maxdone = max64(SLOT(tr, e)->maxdone, t);
}

static void apply_bound(struct dlbn_gpu_pass *ps, const uint64_t *epoch, int64_t t)
{
	for (int k = 0; k < NTRACKS; k++)
		raise_done(&ps->tr[k], epoch[k], t);
}

static void flush_stash(struct dlbn_gpu_pass *ps)
{
	if (ps->stash) {
		apply_bound(ps, ps->stash_epoch, ps->stash_t);
		ps->g->probes_lost_bounded++;
		ps->stash = 0;
	}
}

/* The ring slot is free again: its epoch no longer waits for it. */
static void probe_release(struct dlbn_gpu_pass *ps, struct pending_probe *p)
{
	for (int k = 0; k < NTRACKS; k++) {
		struct track *tr = &ps->tr[k];

		if (p->epoch[k] != NO_EPOCH && p->epoch[k] >= tr->base && p->epoch[k] <= tr->n)
			SLOT(tr, p->epoch[k])->pending--;
	}
	p->id = 0;
}

/*
 * A probe whose completion will never be known.  Later probes on the same
 * stream complete after it (FIFO), so only the waits before the next one
 * on its stream lack evidence.
 */
static void probe_lost(struct dlbn_gpu_pass *ps, struct pending_probe *p)
{
	struct stream_ent *e = stream_get(ps, p->stream);

	for (int k = 0; k < NTRACKS; k++) {
		if (p->next_epoch[k] != NO_EPOCH)
			mark_unknown(&ps->tr[k], p->epoch[k], p->next_epoch[k]);
		else if (e->lost_open[k] == NO_EPOCH || p->epoch[k] < e->lost_open[k])
			set_lost_open(ps, e, k, p->epoch[k]);
	}
	probe_release(ps, p);
}

/* ---- record handlers ---------------------------------------------------- */

/* A sync that returned: work queued on the stream (or all streams) before
 * it is done, so it needs no probe any more. */
static void sync_covers(struct dlbn_gpu_pass *ps, const struct event *ev)
{
	int64_t api = ev->f[1], t = ev->t;

	if (api == DLBN_CU_STREAM_SYNC) {
		struct stream_ent *e = stream_get(ps, ev->f[2]);

		if (e != &ps->streams[STREAM_TABLE] && e->last_work <= t)
			stream_covered(ps, e);
	} else if (api == DLBN_CU_CTX_SYNC) {
		for (size_t i = 0; i <= STREAM_TABLE; i++)
			if (ps->streams[i].used && ps->streams[i].last_work <= t)
				stream_covered(ps, &ps->streams[i]);
	}
}

/* GPU work queued on stream at t. */
static void note_work(struct dlbn_gpu_pass *ps, int64_t stream, int64_t t)
{
	if (ps->last_enqueue && stream != ps->last_enqueue_stream)
		ps->multi_stream = 1;
	ps->last_enqueue = t;
	ps->last_enqueue_stream = stream;
	gpu_gap_enqueue(ps, t);
}

/* A context synchronisation, or a stream's while only that stream has had
 * work, that began after the last work was queued: the GPU had nothing
 * left when it returned - or, when the stream sync carries the GPU's own
 * completion time of that work (its drain event, dlbn-trace(5)), from
 * then: a loop thread queued for a CPU returns later than the GPU drained. */
static void sync_drains(struct dlbn_gpu_pass *ps, const struct event *ev)
{
	int64_t api = ev->f[1], end = ev->t + dur_of(ev), gpu_done = ev->f[3];
	int all = api == DLBN_CU_CTX_SYNC || (api == DLBN_CU_STREAM_SYNC && !ps->multi_stream &&
					      ev->f[2] == ps->last_enqueue_stream);
	if (!all || !ps->last_enqueue || ps->last_enqueue > ev->t)
		return;
	if (api == DLBN_CU_STREAM_SYNC && gpu_done > 0 && gpu_done < end)
		end = gpu_done > ps->last_enqueue ? gpu_done : ps->last_enqueue;
	ps->drained_by_sync = end;
}

static void on_probe(struct dlbn_gpu_pass *ps, const struct event *ev)
{
	uint64_t id = (uint64_t)ev->f[0];
	int64_t t = ev->t;
	struct stream_ent *e = stream_get(ps, ev->f[1]);
	struct pending_probe *slot = &ps->ring[id & (PROBE_RING - 1)];
	struct pending_probe *prev = NULL;
	uint64_t epoch[NTRACKS];

	ps->g->probes++;
	if (!id)
		return; /* not a valid probe id: the recorder starts at 1 */
	for (int k = 0; k < NTRACKS; k++) {
		struct track *tr = &ps->tr[k];
		const struct slot *open = SLOT(tr, tr->cut);

		epoch[k] = tr->cut;
		if (tr->cut < tr->n && tr->first_probe == NO_TIME && t >= open->wb && t <= open->we)
			tr->first_probe = t;
	}
	/* Chain to the previous probe on this stream (lost-range ends). */
	if (e->last_probe_id) {
		prev = &ps->ring[e->last_probe_id & (PROBE_RING - 1)];
		if (prev->id != e->last_probe_id)
			prev = NULL;
	}
	for (int k = 0; k < NTRACKS; k++) {
		if (prev)
			prev->next_epoch[k] = epoch[k];
		if (e->lost_open[k] != NO_EPOCH) {
			mark_unknown(&ps->tr[k], e->lost_open[k], epoch[k]);
			clear_lost_open(ps, e, k);
		}
	}
	e->last_probe_id = id;
	stream_covered(ps, e);
	/* The ring is far larger than the recorder's pool: an occupied slot
	 * is a probe that never got its PROBE_DONE. */
	if (slot->id) {
		ps->g->probes_unresolved++;
		probe_lost(ps, slot);
	}
	slot->id = id;
	slot->stream = ev->f[1];
	for (int k = 0; k < NTRACKS; k++) {
		slot->epoch[k] = epoch[k];
		slot->next_epoch[k] = NO_EPOCH;
		SLOT(&ps->tr[k], epoch[k])->pending++;
	}
	gpu_gap_open(ps, id, t);
}

static void on_probe_done(struct dlbn_gpu_pass *ps, const struct event *ev)
{
	uint64_t id = (uint64_t)ev->f[0];
	struct pending_probe *p = &ps->ring[id & (PROBE_RING - 1)];

	if (!id || p->id != id) {
		ps->g->probe_done_unmatched++;
		return;
	}
	if (ev->f[2] == 0) {
		int64_t done = bounded(ev->f[1], DLBN_TIME_LIMIT);
		ps->g->probes_resolved++;
		apply_bound(ps, p->epoch, done);
		gpu_gap_done(ps, id, done);
		probe_release(ps, p);
		return;
	}
	ps->g->probes_lost++;
	gpu_gap_done(ps, id, NO_TIME);
	flush_stash(ps);
	ps->stash = 1;
	ps->stash_thread = ev->thread;
	memcpy(ps->stash_epoch, p->epoch, sizeof(ps->stash_epoch));
	ps->stash_t = ev->t;
	probe_lost(ps, p);
}

/* Work queued at t is the first after every step that ended before t. */
static void note_enqueue(struct dlbn_gpu_pass *ps, int64_t t)
{
	for (int k = 0; k < NTRACKS; k++) {
		struct track *tr = &ps->tr[k];

		if (tr->refill_next < tr->base) /* only after a forced split */
			tr->refill_next = tr->base;
		if (tr->prev_end != NO_TIME && !tr->prev_next_enqueue && t > tr->prev_end)
			tr->prev_next_enqueue = t;
		while (tr->refill_next < tr->n && SLOT(tr, tr->refill_next)->s.end < t)
			SLOT(tr, tr->refill_next++)->gs.next_enqueue = t;
	}
}

static void on_event(struct dlbn_gpu_pass *ps, const struct event *ev)
{
	if (ps->stash && ev->type != DLBN_REC_CUDA_INFO && ev->thread == ps->stash_thread)
		flush_stash(ps);
	advance(ps, ev->t);
	switch (ev->type) {
	case DLBN_REC_LAUNCH:
		note_enqueue(ps, ev->t);
		note_work(ps, ev->f[0], ev->t);
		stream_work(ps, ev->f[0], ev->t);
		attribute_host(ps, ev->t, gpu_add_launch, ev);
		break;
	case DLBN_REC_MEMCPY:
		note_enqueue(ps, ev->t);
		note_work(ps, ev->f[2], ev->t);
		if (ev->f[5])
			stream_work(ps, ev->f[2], ev->t);
		attribute_host(ps, ev->t, gpu_add_copy, ev);
		break;
	case DLBN_REC_SYNC:
		sync_covers(ps, ev);
		sync_drains(ps, ev);
		attribute_host(ps, ev->t, gpu_add_sync, ev);
		break;
	case DLBN_REC_PROBE:
		on_probe(ps, ev);
		break;
	case DLBN_REC_PROBE_DONE:
		on_probe_done(ps, ev);
		break;
	case DLBN_REC_CUDA_INFO:
		if (ev->f[0] == DLBN_CUDA_INFO_PROBE_OFF)
			ps->stash = 0; /* the loss was a driver error: no bound */
		break;
	default:
		break;
	}
}

/* ---- handing steps over --------------------------------------------------- */

/* Is the split of the oldest step of tr final?  See the file comment. */
static int step_ready(const struct dlbn_gpu_pass *ps, const struct track *tr)
{
	uint64_t p = tr->base;
	const struct slot *sl = SLOT(tr, p);

	if (p >= tr->cut || sl->pending)
		return 0;
	if (ps->ending)
		return 1;
	if (ps->stash && ps->stash_epoch[tr->k] <= p)
		return 0;
	if (ps->nlost_open && oldest_lost_open(ps, tr->k) <= p)
		return 0;
	return ps->hdone > sl->s.end; /* its loop period's host records are in */
}

/*
 * Split the oldest step and hand it over.  forced: before all evidence is
 * in (a ceiling was reached); a probe answer still missing makes it an
 * unknown wait.  Returns 0, leaving the step, when its refill bubble
 * cannot be sized yet (the loop has queued no GPU work since).
 */
static int step_final(struct dlbn_gpu_pass *ps, struct track *tr, int forced)
{
	uint64_t p = tr->base;
	struct slot *sl = SLOT(tr, p);
	int unknown = sl->cut;

	if (forced) {
		while (tr->cut <= p)
			finalize_wait(ps, tr);
		int missing = sl->pending || (ps->stash && ps->stash_epoch[tr->k] <= p) ||
			      oldest_lost_open(ps, tr->k) <= p;
		ps->g->steps_forced++;
		ps->g->steps_forced_unknown += (uint64_t)missing;
		unknown |= missing;
	}
	int64_t busy_until = max64(tr->busy_until, sl->maxdone);
	int32_t lost = tr->lost + sl->unknown_diff;
	/* The next GPU work after the step sizes its refill bubble; a loop that
	 * queued none for REFILL_WAIT_NS has stopped using the GPU, and the
	 * step is taken as the trace's last GPU step would be (no bubble). */
	int refill_known = forced || ps->ending || tr->refill_next > p ||
			   ps->hdone - sl->s.end > REFILL_WAIT_NS;
	if (!gpu_split_final(ps, tr, sl, busy_until, unknown || lost > 0, refill_known))
		return 0;
	tr->busy_until = busy_until;
	tr->lost = lost;
	if (ps->fn)
		ps->fn(ps->ctx, tr->k, &sl->s, &sl->gs);
	tr->base++;
	return 1;
}

/* Hand over every step of tr whose split is final. */
static void track_drain(struct dlbn_gpu_pass *ps, struct track *tr)
{
	while (tr->base < tr->n && step_ready(ps, tr) && step_final(ps, tr, 0))
		;
}

/* ---- the pass ----------------------------------------------------------- */

struct dlbn_gpu_pass *dlbn_gpu_pass_new(const struct dlbn_model *m, struct dlbn_gpu *g,
					const struct dlbn_gpu_opts *o, dlbn_split_final_fn fn,
					void *ctx)
{
	struct dlbn_gpu_opts defaults;
	struct dlbn_gpu_pass *ps = calloc(1, sizeof(*ps));

	if (!ps)
		return NULL;
	if (!o) {
		dlbn_gpu_default_opts(&defaults);
		o = &defaults;
	}
	ps->g = g;
	ps->fn = fn;
	ps->ctx = ctx;
	ps->slack = o->probe_slack_ns < 0 ? 0 : o->probe_slack_ns;
	ps->first_work = NO_TIME;
	ps->hdone = INT64_MIN;
	ps->watch_thread = UINT32_MAX;
	ps->qcap = 256;
	ps->q = malloc(ps->qcap * sizeof(*ps->q));
	int fail = !ps->q;
	for (int k = 0; k < NTRACKS; k++)
		fail |= track_init(&ps->tr[k], k, k == 1 && m->path == DLBN_PATH_PIN) != 0;
	if (fail) {
		dlbn_gpu_pass_free(ps);
		return NULL;
	}
	return ps;
}

void dlbn_gpu_pass_free(struct dlbn_gpu_pass *ps)
{
	if (!ps)
		return;
	for (int k = 0; k < NTRACKS; k++)
		free(ps->tr[k].ring);
	free(ps->q);
	free(ps);
}

int dlbn_gpu_pass_failed(const struct dlbn_gpu_pass *ps)
{
	return ps->oom;
}

void dlbn_gpu_pass_step(struct dlbn_gpu_pass *ps, int k, const struct dlbn_step *s)
{
	struct track *tr = &ps->tr[k];

	for (int rc; (rc = track_room(tr)) != 0;) {
		if (rc == -2) {
			ps->oom = 1;
			return;
		}
		step_final(ps, tr, 1); /* at the ceiling: the oldest goes now */
	}
	struct slot *sl = SLOT(tr, tr->n);
	int64_t wb, we;

	sl->s = *s;
	wait_interval(tr, s, &wb, &we);
	/* Waits stay in begin order, and a wait cannot begin before records
	 * already weighed without it (a pin-path sum far longer than the
	 * horizon's lag, or after records_forced): it is cut there, what lies
	 * before counts idle (`outside`) and the wait as unknown. */
	int64_t floor = max64(tr->last_wb, ps->hdone);
	if (wb < floor && we > wb) {
		sl->cut = 1;
		ps->g->waits_cut++;
	}
	wb = max64(wb, floor);
	sl->wb = wb;
	sl->we = max64(we, wb);
	tr->last_wb = wb;
	tr->n++;
	slot_clear(SLOT(tr, tr->n));
}

static void queue_pop_one(struct dlbn_gpu_pass *ps)
{
	const struct event *ev = &ps->q[ps->qhead];

	on_event(ps, ev);
	ps->qhead = (ps->qhead + 1) & (ps->qcap - 1);
	ps->qlen--;
}

static struct event *queue_push(struct dlbn_gpu_pass *ps)
{
	if (ps->qlen == ps->qcap) {
		size_t ncap = ps->qcap * 2;
		struct event *nq = ncap <= GPU_PASS_QUEUE_MAX ? malloc(ncap * sizeof(*nq)) : NULL;
		if (!nq) {
			/* At the ceiling (or out of memory): weigh the oldest
			 * record now. */
			int64_t t = ps->q[ps->qhead].t;
			ps->oom |= ncap <= GPU_PASS_QUEUE_MAX;
			ps->g->records_forced++;
			queue_pop_one(ps);
			ps->hdone = max64(ps->hdone, t);
		} else {
			for (size_t i = 0; i < ps->qlen; i++)
				nq[i] = ps->q[(ps->qhead + i) & (ps->qcap - 1)];
			free(ps->q);
			ps->q = nq;
			ps->qcap = ncap;
			ps->qhead = 0;
		}
	}
	struct event *ev = &ps->q[(ps->qhead + ps->qlen) & (ps->qcap - 1)];
	ps->qlen++;
	return ev;
}

void dlbn_gpu_pass_record(struct dlbn_gpu_pass *ps, const struct dlbn_record *r)
{
	struct dlbn_gpu *g = ps->g;
	uint32_t thread = r->stream->index;

	switch (r->type) {
	case DLBN_REC_LAUNCH:
	case DLBN_REC_MEMCPY:
	case DLBN_REC_SYNC:
	case DLBN_REC_PROBE:
		g->present = 1;
		break;
	case DLBN_REC_PROBE_DONE:
		break;
	case DLBN_REC_CUDA_INFO:
		/* Facts about the run, whenever they come; only the "probing
		 * stopped" code must meet the lost probe before it in order. */
		if (fld(r, 0) == DLBN_CUDA_INFO_PROBE_OFF)
			g->probing_stopped = 1;
		if (fld(r, 0) == DLBN_CUDA_INFO_DRIVER)
			g->driver_version = (int)bounded(fld(r, 1), 1000000000);
		if (r->kind[2] == DLBN_V_STR) {
			int len = (int)bounded(r->f[2], DLBN_GPU_LINE - 1);
			DLBN_LINES_ADD(g->notes, g->nnotes, "%.*s", len, r->str[2]);
		}
		break;
	default:
		/* The first other record on the thread of a lost probe settles
		 * its lower bound (see stash). */
		if (thread != ps->watch_thread)
			return;
		ps->watch_thread = UINT32_MAX;
		struct event *tick = queue_push(ps);
		memset(tick, 0, sizeof(*tick));
		tick->t = r->t_ns;
		tick->thread = thread;
		tick->type = EV_TICK;
		return;
	}
	if (r->type == DLBN_REC_PROBE_DONE && fld(r, 2) != 0)
		ps->watch_thread = thread;
	else if (thread == ps->watch_thread && r->type != DLBN_REC_CUDA_INFO)
		ps->watch_thread = UINT32_MAX;
	struct event *ev = queue_push(ps);
	ev->t = r->t_ns;
	for (int i = 0; i < 7; i++)
		ev->f[i] = i < r->nfields ? fld(r, i) : 0;
	ev->thread = thread;
	ev->type = (uint16_t)r->type;
}

void dlbn_gpu_pass_horizon(struct dlbn_gpu_pass *ps, int64_t h)
{
	if (h <= ps->hdone)
		return;
	while (ps->qlen && ps->q[ps->qhead].t < h)
		queue_pop_one(ps);
	ps->hdone = h;
	advance(ps, h);
	for (int k = 0; k < NTRACKS; k++)
		track_drain(ps, &ps->tr[k]);
}

void dlbn_gpu_pass_end(struct dlbn_gpu_pass *ps)
{
	while (ps->qlen)
		queue_pop_one(ps);
	ps->hdone = INT64_MAX;
	flush_stash(ps);
	advance(ps, INT64_MAX);
	for (size_t i = 0; i < PROBE_RING; i++) {
		if (ps->ring[i].id) {
			ps->g->probes_unresolved++;
			probe_lost(ps, &ps->ring[i]);
		}
	}
	for (size_t i = 0; i <= STREAM_TABLE; i++) {
		for (int k = 0; k < NTRACKS; k++) {
			struct stream_ent *e = &ps->streams[i];
			if (e->used && e->lost_open[k] != NO_EPOCH) {
				mark_unknown(&ps->tr[k], e->lost_open[k], ps->tr[k].n);
				clear_lost_open(ps, e, k);
			}
		}
	}
	ps->ending = 1;
	for (int k = 0; k < NTRACKS; k++)
		track_drain(ps, &ps->tr[k]);
}

/* ---- as the model runs it ------------------------------------------------ */

static void *as_model_start(const struct dlbn_model *m, struct dlbn_gpu *g,
			    dlbn_split_final_fn final, void *ctx)
{
	return dlbn_gpu_pass_new(m, g, NULL, final, ctx);
}

static void as_model_record(void *pass, const struct dlbn_record *r)
{
	dlbn_gpu_pass_record(pass, r);
}

static void as_model_step(void *pass, int view, const struct dlbn_step *s)
{
	dlbn_gpu_pass_step(pass, view, s);
}

static void as_model_horizon(void *pass, int64_t h)
{
	dlbn_gpu_pass_horizon(pass, h);
}

static int as_model_end(void *pass)
{
	dlbn_gpu_pass_end(pass);
	int failed = dlbn_gpu_pass_failed(pass);
	dlbn_gpu_pass_free(pass);
	return failed;
}

const struct dlbn_split_pass dlbn_gpu_split = {
	.start = as_model_start,
	.record = as_model_record,
	.step = as_model_step,
	.horizon = as_model_horizon,
	.end = as_model_end,
	.finish = dlbn_gpu_finish,
};

void dlbn_gpu_model_opts(struct dlbn_model_opts *o)
{
	dlbn_model_default_opts(o);
	o->split = &dlbn_gpu_split;
}
