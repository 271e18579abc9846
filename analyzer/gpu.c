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
 * Invariants:
 *   - base <= cut <= n, base <= period <= n, refill_next <= n (positions
 *     below base are final and gone; the slot of position n exists).
 *   - Cursors only move forward; epochs are positions.
 *   - slot(p).pending counts the ring's probes filed under epoch p.
 *   - A stream's unprobed_since is the oldest queued work on it not yet
 *     covered by a probe (or a sync): a wait that begins after it is
 *     uncovered until a probe on that stream is issued.
 */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "gpu.h"
#include "model.h"
#include "reader.h"

#define NTRACKS		       DLBN_GPU_VIEWS /* the model's views: python, ipc, nvtx */
#define PROBE_RING	       1024	      /* pending probes tracked at once (power of two) */
#define STREAM_TABLE	       256	      /* distinct streams tracked (power of two) */
#define GPU_PASS_STEPS_MAX     (1u << 14)     /* steps of a track not final yet, at most */
#define GPU_PASS_QUEUE_MAX     (1u << 16)     /* CUDA records waiting for the horizon */
#define REFILL_WAIT_NS	       10000000000    /* no GPU work this long after a step: none to come */
#define NO_TIME		       INT64_MAX
#define NO_EPOCH	       UINT64_MAX
#define DEFAULT_PROBE_SLACK_NS 1000000
#define EV_TICK		       0 /* a non-CUDA record on the thread of a lost probe */

void dlbn_gpu_default_opts(struct dlbn_gpu_opts *o)
{
	o->probe_slack_ns = DEFAULT_PROBE_SLACK_NS;
}

/* ---- state of the pass -------------------------------------------------- */

/* One position (= step index) of a track. */
struct slot {
	struct dlbn_step s;
	struct dlbn_gpu_step gs;
	int64_t wb, we;	      /* wait interval */
	int64_t maxdone;      /* latest completion of the probes of this epoch */
	int32_t unknown_diff; /* +1/-1 at lost-probe range ends */
	uint32_t pending;     /* probes of this epoch without their PROBE_DONE */
	uint8_t uncovered;    /* queued work no probe covered */
	uint8_t no_work;      /* no GPU work queued before the wait */
	uint8_t cut;	      /* wait begin moved past records weighed without it */
};

struct track {
	int k;		      /* view index */
	int pin;	      /* IPC view on the pin-memory path (wait_interval) */
	struct slot *ring;    /* positions base .. n, by position & (cap - 1) */
	size_t cap;	      /* power of two */
	uint64_t base, n;     /* oldest not final; steps handed over so far */
	uint64_t cut;	      /* first position whose cutoff is still open */
	uint64_t period;      /* host attribution: first step with end >= t */
	uint64_t refill_next; /* first step (by end) still without next_enqueue */
	int64_t first_probe;  /* first probe inside wait `cut`, NO_TIME none */
	int64_t last_wb;      /* waits are kept in begin order */
	int64_t busy_until;   /* running max of maxdone over final positions */
	int32_t lost;	      /* running sum of unknown_diff over final positions */
	/* The last final step, for the next step's lead (the loop period from
	 * its batch's arrival to the next wait, see lead_idle). */
	int64_t prev_end;	   /* its batch's arrival, NO_TIME none yet */
	int64_t prev_drained;	   /* the GPU had nothing left by then (>= prev_end) */
	int64_t prev_next_enqueue; /* first GPU work after its arrival, 0 none yet */
	int64_t prev_refill;	   /* its refill bubble: charged, and in the next lead */
	uint8_t prev_probed;	   /* its split had probe evidence */
};

struct pending_probe {
	uint64_t id; /* 0: free slot */
	int64_t stream;
	uint64_t epoch[NTRACKS];
	uint64_t next_epoch[NTRACKS]; /* epoch of the next probe on the stream */
};

struct stream_ent {
	int used;
	int64_t stream;
	int64_t unprobed_since; /* oldest work not covered, NO_TIME none */
	int64_t last_work;
	uint64_t last_probe_id;
	uint64_t lost_open[NTRACKS]; /* lost probe not superseded yet, NO_EPOCH none */
};

/* A CUDA record waiting for the horizon: the fields the handlers read. */
struct event {
	int64_t t;
	int64_t f[7];
	uint32_t thread;
	uint16_t type; /* DLBN_REC_*, or EV_TICK */
};

struct dlbn_gpu_pass {
	struct dlbn_gpu *g;
	int64_t slack;
	dlbn_gpu_final_fn fn;
	void *ctx;
	struct track tr[NTRACKS];
	struct pending_probe ring[PROBE_RING];
	struct stream_ent streams[STREAM_TABLE + 1]; /* last: every stream that did not fit */
	size_t nstreams_unprobed;		     /* entries with unprobed_since set */
	size_t nlost_open;			     /* lost_open entries set */
	int64_t first_work;			     /* NO_TIME: none yet */
	/* A lost probe's lower bound waits one record: a CUDA_INFO "probing
	 * stopped" right after it means a driver error, not a full pool. */
	int stash;
	uint32_t stash_thread; /* stream index of the PROBE_DONE */
	uint64_t stash_epoch[NTRACKS];
	int64_t stash_t;
	uint32_t watch_thread; /* thread of the last lost PROBE_DONE queued, UINT32_MAX none */
	/* Queue of CUDA records before the horizon (a ring, power of two). */
	struct event *q;
	size_t qcap, qhead, qlen;
	int64_t hdone; /* every record before it has been weighed */
	int ending;    /* end of trace: nothing more will come */
	int oom;
};

#define SLOT(tr, p) (&(tr)->ring[(p) & ((tr)->cap - 1)])

static inline int64_t fld(const struct dlbn_record *r, int i)
{
	return r->kind[i] == DLBN_V_INT ? r->f[i] : 0;
}

static inline int64_t dur_of(const struct event *ev)
{
	int64_t d = ev->f[0];
	return d <= 0 ? 0 : d > DLBN_DUR_LIMIT ? DLBN_DUR_LIMIT : d;
}

static inline int64_t bounded(int64_t v, int64_t max)
{
	return v < 0 ? 0 : v > max ? max : v;
}

static inline int64_t max64(int64_t a, int64_t b)
{
	return a > b ? a : b;
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

static void add_launch(struct dlbn_gpu_host *h, const struct event *ev)
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

static void add_sync(struct dlbn_gpu_host *h, const struct event *ev)
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

static void add_copy(struct dlbn_gpu_host *h, const struct event *ev)
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
		ps->g->probes_resolved++;
		apply_bound(ps, p->epoch, bounded(ev->f[1], DLBN_TIME_LIMIT));
		probe_release(ps, p);
		return;
	}
	ps->g->probes_lost++;
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
		stream_work(ps, ev->f[0], ev->t);
		attribute_host(ps, ev->t, add_launch, ev);
		break;
	case DLBN_REC_MEMCPY:
		note_enqueue(ps, ev->t);
		if (ev->f[5])
			stream_work(ps, ev->f[2], ev->t);
		attribute_host(ps, ev->t, add_copy, ev);
		break;
	case DLBN_REC_SYNC:
		sync_covers(ps, ev);
		attribute_host(ps, ev->t, add_sync, ev);
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

/* ---- final splits ------------------------------------------------------- */

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
 * previous batch's arrival to this wait (model.h, gpu_lead_idle_ns).  Idle
 * from when the GPU had nothing left after the arrival to the first GPU
 * work queued in the period, and from when that work (all work queued
 * before this wait, by this wait's probes) was done to the wait; gaps
 * between the period's own GPU work are not observed (counted busy).  No
 * GPU work in the period: idle from the drain to the wait.  Unknown (-1)
 * without probe evidence at both ends.
 */
static void lead_idle(const struct track *tr, struct slot *sl, int64_t busy_until)
{
	struct dlbn_step *s = &sl->s;
	int64_t from = tr->prev_drained, e = tr->prev_next_enqueue, idle;

	s->gpu_lead_idle_ns = -1;
	s->gpu_lead_refill_ns = 0;
	if (tr->prev_end == NO_TIME || !tr->prev_probed || sl->wb < tr->prev_end)
		return;
	if (e <= 0 || e >= sl->wb) {
		idle = sl->wb > from ? sl->wb - from : 0;
	} else {
		if (sl->gs.evidence != DLBN_GPU_EV_PROBE || busy_until <= 0)
			return;
		idle = e > from ? e - from : 0;
		int64_t done = max64(busy_until, e);
		idle += sl->wb > done ? sl->wb - done : 0;
	}
	s->gpu_lead_idle_ns = idle;
	s->gpu_lead_refill_ns = tr->prev_refill < idle ? tr->prev_refill : idle;
}

/* sl is final: the next step's lead starts at its arrival. */
static void lead_next(struct track *tr, const struct slot *sl, int64_t busy_until)
{
	const struct dlbn_step *s = &sl->s;
	tr->prev_end = s->end;
	tr->prev_probed = sl->gs.evidence == DLBN_GPU_EV_PROBE;
	/* Still busy at the arrival: it drains when the work queued before
	 * the wait is done (later work counts as the lead's own). */
	tr->prev_drained = s->gpu_busy_ns >= sl->we - sl->wb && busy_until > s->end ? busy_until
										     : s->end;
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
static void win_add(struct dlbn_gpu_win *w, const struct dlbn_step *s,
		    const struct dlbn_gpu_step *gs)
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
	if (split_step(sl, busy_until, unknown || lost > 0, refill_known))
		return 0;
	lead_idle(tr, sl, busy_until);
	lead_next(tr, sl, busy_until);
	tr->busy_until = busy_until;
	tr->lost = lost;
	win_add(&ps->g->view_all[tr->k], &sl->s, &sl->gs);
	if (sl->s.aside) /* another loader's fetch: its loop period's host work only */
		add_host(&ps->g->view_win[tr->k].host, &sl->gs.host);
	else if (!sl->s.warmup)
		win_add(&ps->g->view_win[tr->k], &sl->s, &sl->gs);
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
					const struct dlbn_gpu_opts *o, dlbn_gpu_final_fn fn,
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
		if (g->nnotes < DLBN_GPU_MAX_NOTES && r->kind[2] == DLBN_V_STR) {
			int len = (int)bounded(r->f[2], DLBN_GPU_LINE - 1);
			snprintf(g->notes[g->nnotes++], DLBN_GPU_LINE, "%.*s", len, r->str[2]);
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

/* ---- window and evidence lines ------------------------------------------ */

static void add_reason(struct dlbn_gpu *g, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void add_reason(struct dlbn_gpu *g, const char *fmt, ...)
{
	va_list ap;

	if (g->nreasons >= DLBN_GPU_MAX_REASONS)
		return;
	va_start(ap, fmt);
	vsnprintf(g->reasons[g->nreasons++], DLBN_GPU_LINE, fmt, ap);
	va_end(ap);
}

static const char *sync_api_name(int k)
{
	static const char *const names[DLBN_GPU_SYNC_KINDS] = {
		"cuStreamSynchronize", "cuCtxSynchronize", "cuEventSynchronize", "other syncs"};
	return names[k];
}

/* Thresholds of the evidence lines (shares of the window / of the wait). */
#define HIDDEN_SHARE	 0.5  /* wait mostly GPU-busy: prefetch hides it */
#define SYNC_NOTE_SHARE	 0.05 /* host blocked in syncs worth a line */
#define SYNC_BOUND_SHARE 0.2  /* ... and called compute-bound evidence */

static void reason_split(struct dlbn_gpu *g, const struct dlbn_gpu_win *w)
{
	if (w->waits == 0 || w->wait_s <= 0) {
		add_reason(g, "no loader wait to split in the window");
		return;
	}
	double busy = w->wait_gpu_busy_s / w->wait_s;

	if (busy >= HIDDEN_SHARE)
		add_reason(g,
			   "the GPU still had queued work during %.0f%% of the loader wait "
			   "(%.3f of %.3f s): prefetch hides it, only the GPU-idle %.3f s is stall",
			   busy * 100, w->wait_gpu_busy_s, w->wait_s, w->wait_gpu_idle_s);
	else
		add_reason(g,
			   "the GPU had no work left during %.0f%% of the loader wait (%.3f of "
			   "%.3f s, %.2f ms per step, %.1f%% of the window): that part is the "
			   "data-loading stall",
			   (1 - busy) * 100, w->wait_gpu_idle_s, w->wait_s,
			   w->wait_gpu_idle_s * 1e3 / (double)w->waits,
			   w->wall_s > 0 ? w->wait_gpu_idle_s / w->wall_s * 100 : 0);
}

static void reason_sync(struct dlbn_gpu *g, const struct dlbn_gpu_win *w)
{
	int64_t total = dlbn_gpu_sync_total(&w->host);
	int top = 0;
	double share;

	if (w->wall_s <= 0 || total <= 0)
		return;
	for (int k = 1; k < DLBN_GPU_SYNC_KINDS; k++)
		if (w->host.sync_ns[k] > w->host.sync_ns[top])
			top = k;
	share = (double)total / 1e9 / w->wall_s;
	if (share >= SYNC_BOUND_SHARE)
		add_reason(g,
			   "host blocked on the GPU %.0f%% of the window (%.3f s, mostly in %s, "
			   "%lld syncs): compute-bound, the GPU sets the pace",
			   share * 100, (double)total / 1e9, sync_api_name(top),
			   (long long)w->host.syncs);
	else if (share >= SYNC_NOTE_SHARE)
		add_reason(g, "host blocked on the GPU %.0f%% of the window (%.3f s, mostly in %s)",
			   share * 100, (double)total / 1e9, sync_api_name(top));
}

static void reason_pageable(struct dlbn_gpu *g, const struct dlbn_gpu_win *w)
{
	const struct dlbn_gpu_host *h = &w->host;
	double per_step_ms, mib;

	if (h->pageable_h2d == 0)
		return;
	per_step_ms = w->steps ? (double)h->pageable_h2d_ns / 1e6 / (double)w->steps : 0;
	mib = (double)h->pageable_h2d_bytes / (1024.0 * 1024.0);
	add_reason(g,
		   "H2D copies from pageable memory block the host %.2f ms per step (%lld copies, "
		   "%.1f MiB in the window): use pin_memory=True with .to(device, "
		   "non_blocking=True); Replay keeps these copies, so they are not a loading stall",
		   per_step_ms, (long long)h->pageable_h2d, mib);
}

static void reason_evidence(struct dlbn_gpu *g, const struct dlbn_gpu_win *w)
{
	if (w->waits_unknown) {
		const char *why = g->probing_stopped ? "probing stopped"
				  : g->probes_lost   ? "probes lost"
				  : g->probes == 0   ? "no probes recorded"
						     : "work on unprobed streams";
		add_reason(
			g,
			"%zu of %zu waits (%.0f%% of the wait time) had no usable GPU probe (%s): "
			"their unexplained part counts as GPU-idle, so the stall is an upper bound",
			w->waits_unknown, w->waits,
			w->wait_s > 0 ? w->wait_unknown_s / w->wait_s * 100 : 0, why);
	}
	if (g->probes_lost)
		add_reason(g,
			   "%llu of %llu GPU probes lost (%llu given up unfinished: the GPU was "
			   "still busy then)",
			   (unsigned long long)g->probes_lost, (unsigned long long)g->probes,
			   (unsigned long long)g->probes_lost_bounded);
	for (size_t i = 0; i < g->nnotes && g->probing_stopped; i++)
		if (strstr(g->notes[i], "probe"))
			add_reason(g, "GPU probing stopped during the run: %s", g->notes[i]);
}

static void window_reasons(struct dlbn_gpu *g)
{
	reason_split(g, &g->win);
	reason_sync(g, &g->win);
	reason_pageable(g, &g->win);
	reason_evidence(g, &g->win);
	if (g->steps_forced || g->records_forced || g->waits_cut)
		add_reason(g,
			   "the GPU split ran out of lookahead (a lost probe never superseded, or "
			   "a step that never closed, held too much back): %llu step(s) split "
			   "early, %llu of them missing a probe's answer (unknown waits); %llu "
			   "CUDA record(s) weighed early; %llu wait(s) cut short (unknown)",
			   (unsigned long long)g->steps_forced,
			   (unsigned long long)g->steps_forced_unknown,
			   (unsigned long long)g->records_forced, (unsigned long long)g->waits_cut);
}

/* Clear the window and its lines; 0 (with the CPU-only line) without GPU work. */
static int window_begin(struct dlbn_gpu *g, int64_t ws, int64_t we)
{
	g->nreasons = 0;
	memset(&g->win, 0, sizeof(g->win));
	if (!g->present) {
		add_reason(g, "no GPU activity recorded in the training process: the exposed "
			      "wait is the stall (CPU-only rule)");
		return 0;
	}
	g->win.wall_s = we > ws ? ((double)we - (double)ws) / 1e9 : 0; /* ws may be INT64_MIN */
	return 1;
}

void dlbn_gpu_finish(struct dlbn_gpu *g, int whole, int k, int64_t ws, int64_t we)
{
	if (!window_begin(g, ws, we))
		return;
	/* Whole run: the Python view if it has steps (exact fetches). */
	const struct dlbn_gpu_win *all =
		&g->view_all[whole >= 0 && whole < DLBN_GPU_VIEWS ? whole : 1];
	g->waits = all->waits;
	g->waits_with_probe = all->waits_with_probe;
	g->waits_no_work = all->waits_no_work;
	g->waits_unknown = all->waits_unknown;
	g->wait_s = all->wait_s;
	g->wait_gpu_busy_s = all->wait_gpu_busy_s;
	g->wait_gpu_idle_s = all->wait_gpu_idle_s;
	g->wait_unknown_s = all->wait_unknown_s;
	if (k < 0 || k >= DLBN_GPU_VIEWS)
		return;
	double wall_s = g->win.wall_s;
	g->win = g->view_win[k];
	g->win.valid = 1;
	g->win.wall_s = wall_s;
	window_reasons(g);
}

void dlbn_gpu_window(struct dlbn_gpu *g, const struct dlbn_steps *st, int64_t ws, int64_t we)
{
	if (!window_begin(g, ws, we) || !st)
		return;
	g->win.valid = 1;
	for (size_t i = 0; st->gs && i < st->nkept; i++)
		if (st->v[i].end > ws && st->v[i].end <= we)
			win_add(&g->win, &st->v[i], &st->gs[i]);
	window_reasons(g);
}

const struct dlbn_gpu_step *dlbn_gpu_steps_of(const struct dlbn_gpu *g, const struct dlbn_steps *st)
{
	if (!g || !g->present || !st)
		return NULL;
	return st->gs;
}
