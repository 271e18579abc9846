/*
 * gpu.c - GPU-aware split of the loader waits and the host-side GPU
 * evidence (see gpu.h for the rule and its handling of missing probes).
 *
 * One streaming pass over the records of the training process.  Each view
 * of the model (Python marks, IPC) is a *track*: its steps' waits sorted by
 * begin, walked with a cursor.  A wait's cutoff becomes final once the
 * records have moved past it; every probe is filed under the *epoch* of the
 * first wait whose cutoff was still open when the probe was issued, so it
 * counts for that wait and all later ones.  PROBE_DONE can come much later
 * than its PROBE: pending probes sit in a fixed ring (id -> epochs) and a
 * completion just raises maxdone[epoch].  After the pass a running maximum
 * over the epochs gives busy_until at every wait's cutoff.
 *
 * Invariants:
 *   - Cursors only move forward; epochs are positions in wait order.
 *   - maxdone[k] is the latest completion (or completion lower bound) of
 *     the probes of epoch k; busy_until(position p) = max(maxdone[0..p]).
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

#define NTRACKS		       3    /* the model's views: python, ipc, nvtx */
#define PROBE_RING	       1024 /* pending probes tracked at once (power of two) */
#define STREAM_TABLE	       256  /* distinct streams tracked (power of two) */
#define NO_TIME		       INT64_MAX
#define NO_EPOCH	       UINT32_MAX
#define DEFAULT_PROBE_SLACK_NS 1000000

void dlbn_gpu_default_opts(struct dlbn_gpu_opts *o)
{
	o->probe_slack_ns = DEFAULT_PROBE_SLACK_NS;
}

/* ---- state of the pass -------------------------------------------------- */

struct track {
	struct dlbn_steps *st;
	struct dlbn_gpu_step *gs; /* parallel to st->v */
	size_t n;
	size_t *order;	       /* step indices by wait begin */
	int64_t *wb, *we;      /* wait interval, by position */
	int64_t *maxdone;      /* by epoch (= position) */
	int32_t *unknown_diff; /* +1/-1 at lost-probe range ends, by position */
	uint8_t *uncovered;    /* queued work no probe covered, by position */
	uint8_t *no_work;      /* no GPU work queued before the wait, by position */
	size_t cut;	       /* first position whose cutoff is still open */
	int64_t first_probe;   /* first probe inside wait `cut`, NO_TIME none */
	size_t period;	       /* host attribution: first step with end >= t */
	size_t refill_next;    /* first step (by end) still without next_enqueue */
};

struct pending_probe {
	uint64_t id; /* 0: free slot */
	int64_t stream;
	uint32_t epoch[NTRACKS];
	uint32_t next_epoch[NTRACKS]; /* epoch of the next probe on the stream */
};

struct stream_ent {
	int used;
	int64_t stream;
	int64_t unprobed_since; /* oldest work not covered, NO_TIME none */
	int64_t last_work;
	uint64_t last_probe_id;
	uint32_t lost_open[NTRACKS]; /* lost probe not superseded yet, NO_EPOCH none */
};

struct gpu_pass {
	struct dlbn_gpu *g;
	int64_t slack;
	struct track tr[NTRACKS];
	int ntr;
	struct pending_probe ring[PROBE_RING];
	struct stream_ent streams[STREAM_TABLE + 1]; /* last: every stream that did not fit */
	size_t nstreams_unprobed;		     /* entries with unprobed_since set */
	int64_t first_work;			     /* NO_TIME: none yet */
	/* A lost probe's lower bound waits one record: a CUDA_INFO "probing
	 * stopped" right after it means a driver error, not a full pool. */
	int stash;
	uint32_t stash_thread; /* stream index of the PROBE_DONE */
	uint32_t stash_epoch[NTRACKS];
	int64_t stash_t;
	int oom;
};

static inline int64_t fld(const struct dlbn_record *r, int i)
{
	return r->kind[i] == DLBN_V_INT ? r->f[i] : 0;
}

static inline int64_t dur_field(const struct dlbn_record *r)
{
	int64_t d = fld(r, 0);
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

static struct stream_ent *stream_get(struct gpu_pass *ps, int64_t stream)
{
	uint64_t h = (uint64_t)stream * 0x9e3779b97f4a7c15ull;
	size_t i = (size_t)(h >> 40) & (STREAM_TABLE - 1);

	for (size_t n = 0; n < STREAM_TABLE; n++, i = (i + 1) & (STREAM_TABLE - 1)) {
		struct stream_ent *e = &ps->streams[i];

		if (e->used && e->stream == stream)
			return e;
		if (!e->used) {
			e->used = 1;
			e->stream = stream;
			e->unprobed_since = NO_TIME;
			e->lost_open[0] = e->lost_open[1] = NO_EPOCH;
			ps->g->streams++;
			return e;
		}
	}
	/* Table full: all further streams share one conservative entry. */
	ps->g->streams_saturated = 1;
	struct stream_ent *o = &ps->streams[STREAM_TABLE];
	if (!o->used) {
		o->used = 1;
		o->stream = stream;
		o->unprobed_since = NO_TIME;
		o->lost_open[0] = o->lost_open[1] = NO_EPOCH;
	}
	return o;
}

static void stream_work(struct gpu_pass *ps, int64_t stream, int64_t t)
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

static void stream_covered(struct gpu_pass *ps, struct stream_ent *e)
{
	if (e->unprobed_since != NO_TIME) {
		e->unprobed_since = NO_TIME;
		ps->nstreams_unprobed--;
	}
}

/* Oldest queued work that no probe or sync has covered, NO_TIME none. */
static int64_t oldest_unprobed(const struct gpu_pass *ps)
{
	int64_t oldest = NO_TIME;

	if (!ps->nstreams_unprobed)
		return NO_TIME;
	for (size_t i = 0; i <= STREAM_TABLE; i++)
		if (ps->streams[i].used && ps->streams[i].unprobed_since < oldest)
			oldest = ps->streams[i].unprobed_since;
	return oldest;
}

/* ---- tracks ------------------------------------------------------------- */

static const int64_t *sort_key; /* qsort has no context argument */

/* Wait begin order; ties keep step order. */
static int cmp_wait_begin(const void *x, const void *y)
{
	size_t i = *(const size_t *)x, j = *(const size_t *)y;
	int64_t a = sort_key[i], b = sort_key[j];

	if (a != b)
		return a < b ? -1 : 1;
	return i < j ? -1 : i > j;
}

/*
 * Where a step's wait lies.  Python marks and the direct IPC path: the
 * wait is the fetch [begin, begin + wait].  The pin-memory path sums the
 * main thread's semaphore waits, which end just after the pin thread
 * delivers: [end - wait, end] is the nearest interval the steps still
 * describe (the model keeps no wait begin; see the integration notes).
 */
static void wait_interval(const struct dlbn_model *m, const struct dlbn_steps *st,
			  const struct dlbn_step *s, int64_t *wb, int64_t *we)
{
	int64_t w = bounded(s->wait_ns, DLBN_TIME_LIMIT);

	if (st == &m->ipc_steps && m->path == DLBN_PATH_PIN) {
		*we = s->end;
		*wb = s->end - w;
	} else {
		*wb = s->begin;
		*we = s->begin + w;
		/* A Python-view step can carry loader time from between epochs
		 * (worker shutdown and start-up) beyond its fetch; that part
		 * lies outside [begin, end] and is split_track's `outside`. */
		if (s->end > s->begin && *we > s->end)
			*we = s->end;
	}
}

static int track_init(struct gpu_pass *ps, struct track *tr, const struct dlbn_model *m,
		      struct dlbn_steps *st)
{
	size_t n = st->n;

	memset(tr, 0, sizeof(*tr));
	tr->st = st;
	tr->n = n;
	tr->first_probe = NO_TIME;
	tr->gs = calloc(n ? n : 1, sizeof(*tr->gs));
	tr->order = malloc((n ? n : 1) * sizeof(*tr->order));
	tr->wb = malloc((n ? n : 1) * sizeof(*tr->wb));
	tr->we = malloc((n ? n : 1) * sizeof(*tr->we));
	tr->maxdone = malloc((n ? n : 1) * sizeof(*tr->maxdone));
	tr->unknown_diff = calloc(n + 1, sizeof(*tr->unknown_diff));
	tr->uncovered = calloc(n ? n : 1, 1);
	tr->no_work = calloc(n ? n : 1, 1);
	if (!tr->gs || !tr->order || !tr->wb || !tr->we || !tr->maxdone || !tr->unknown_diff ||
	    !tr->uncovered || !tr->no_work) {
		ps->oom = 1;
		return -1;
	}
	/* maxdone holds the wait begins by step index while sorting. */
	for (size_t i = 0; i < n; i++) {
		int64_t we;

		tr->order[i] = i;
		wait_interval(m, st, &st->v[i], &tr->maxdone[i], &we);
	}
	sort_key = tr->maxdone;
	qsort(tr->order, n, sizeof(*tr->order), cmp_wait_begin);
	for (size_t p = 0; p < n; p++)
		wait_interval(m, st, &st->v[tr->order[p]], &tr->wb[p], &tr->we[p]);
	for (size_t p = 0; p < n; p++)
		tr->maxdone[p] = INT64_MIN;
	return 0;
}

static void track_free_scratch(struct track *tr)
{
	free(tr->order);
	free(tr->wb);
	free(tr->we);
	free(tr->maxdone);
	free(tr->unknown_diff);
	free(tr->uncovered);
	free(tr->no_work);
	tr->order = NULL;
	tr->wb = tr->we = tr->maxdone = NULL;
	tr->unknown_diff = NULL;
	tr->uncovered = tr->no_work = NULL;
}

/* The cutoff of the open wait has passed once a record is later than it. */
static int cutoff_passed(const struct track *tr, int64_t slack, int64_t t)
{
	int64_t b = tr->wb[tr->cut], e = tr->we[tr->cut], c;

	if (tr->first_probe == NO_TIME) {
		c = e; /* the first probe inside the wait would still count */
	} else {
		c = b + slack < e ? b + slack : e;
		c = max64(c, tr->first_probe);
	}
	return t > c;
}

static void finalize_wait(struct gpu_pass *ps, struct track *tr)
{
	size_t p = tr->cut;
	int64_t oldest = oldest_unprobed(ps);

	if (ps->first_work == NO_TIME || ps->first_work >= tr->wb[p])
		tr->no_work[p] = 1;
	else if (oldest < tr->wb[p])
		tr->uncovered[p] = 1;
	tr->cut++;
	tr->first_probe = NO_TIME;
}

static void advance(struct gpu_pass *ps, int64_t t)
{
	for (int k = 0; k < ps->ntr; k++) {
		struct track *tr = &ps->tr[k];

		while (tr->cut < tr->n && cutoff_passed(tr, ps->slack, t))
			finalize_wait(ps, tr);
	}
}

/* Host-side figures go to the loop period (previous end, end] holding t. */
static void attribute_host(struct gpu_pass *ps, int64_t t,
			   void (*add)(struct dlbn_gpu_host *, const struct dlbn_record *),
			   const struct dlbn_record *r)
{
	add(&ps->g->host, r);
	for (int k = 0; k < ps->ntr; k++) {
		struct track *tr = &ps->tr[k];

		while (tr->period < tr->n && t > tr->st->v[tr->period].end)
			tr->period++;
		if (tr->period < tr->n)
			add(&tr->gs[tr->period].host, r);
	}
}

/* ---- lost probe ranges -------------------------------------------------- */

/* Waits [from, to) of track k lack the lost probe's completion. */
static void mark_unknown(struct track *tr, uint32_t from, uint32_t to)
{
	if (from >= tr->n || to <= from)
		return;
	if (to > tr->n)
		to = (uint32_t)tr->n;
	tr->unknown_diff[from]++;
	tr->unknown_diff[to]--;
}

static void apply_bound(struct gpu_pass *ps, const uint32_t *epoch, int64_t t)
{
	for (int k = 0; k < ps->ntr; k++)
		if (epoch[k] < ps->tr[k].n)
			ps->tr[k].maxdone[epoch[k]] = max64(ps->tr[k].maxdone[epoch[k]], t);
}

static void flush_stash(struct gpu_pass *ps)
{
	if (ps->stash) {
		apply_bound(ps, ps->stash_epoch, ps->stash_t);
		ps->g->probes_lost_bounded++;
		ps->stash = 0;
	}
}

/*
 * A probe whose completion will never be known.  Later probes on the same
 * stream complete after it (FIFO), so only the waits before the next one
 * on its stream lack evidence.
 */
static void probe_lost(struct gpu_pass *ps, struct pending_probe *p)
{
	struct stream_ent *e = stream_get(ps, p->stream);

	for (int k = 0; k < ps->ntr; k++) {
		if (p->next_epoch[k] != NO_EPOCH)
			mark_unknown(&ps->tr[k], p->epoch[k], p->next_epoch[k]);
		else if (e->lost_open[k] == NO_EPOCH || p->epoch[k] < e->lost_open[k])
			e->lost_open[k] = p->epoch[k];
	}
	p->id = 0;
}

/* ---- record handlers ---------------------------------------------------- */

static void add_launch(struct dlbn_gpu_host *h, const struct dlbn_record *r)
{
	(void)r;
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

static void add_sync(struct dlbn_gpu_host *h, const struct dlbn_record *r)
{
	h->syncs++;
	h->sync_ns[sync_kind(fld(r, 1))] += dur_field(r);
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

static void add_copy(struct dlbn_gpu_host *h, const struct dlbn_record *r)
{
	int64_t d = dur_field(r), bytes = bounded(fld(r, 3), DLBN_DUR_LIMIT);
	int dir = copy_dir(fld(r, 4));

	h->copy_blocked_ns[dir] += d;
	if (fld(r, 5))
		h->async_copies++;
	else
		h->sync_copies++;
	if (dir != DLBN_GPU_COPY_HTOD)
		return;
	if (fld(r, 6) == DLBN_HOSTMEM_PAGEABLE) {
		h->pageable_h2d++;
		h->pageable_h2d_bytes += bytes;
		h->pageable_h2d_ns += d;
	} else if (fld(r, 6) == DLBN_HOSTMEM_PINNED) {
		h->pinned_h2d++;
		h->pinned_h2d_bytes += bytes;
	}
}

/* A sync that returned: work queued on the stream (or all streams) before
 * it is done, so it needs no probe any more. */
static void sync_covers(struct gpu_pass *ps, const struct dlbn_record *r)
{
	int64_t api = fld(r, 1), t = r->t_ns;

	if (api == DLBN_CU_STREAM_SYNC) {
		struct stream_ent *e = stream_get(ps, fld(r, 2));

		if (e != &ps->streams[STREAM_TABLE] && e->last_work <= t)
			stream_covered(ps, e);
	} else if (api == DLBN_CU_CTX_SYNC) {
		for (size_t i = 0; i <= STREAM_TABLE; i++)
			if (ps->streams[i].used && ps->streams[i].last_work <= t)
				stream_covered(ps, &ps->streams[i]);
	}
}

static void on_probe(struct gpu_pass *ps, const struct dlbn_record *r)
{
	uint64_t id = (uint64_t)fld(r, 0);
	int64_t t = r->t_ns;
	struct stream_ent *e = stream_get(ps, fld(r, 1));
	struct pending_probe *slot = &ps->ring[id & (PROBE_RING - 1)];
	struct pending_probe *prev = NULL;
	uint32_t epoch[NTRACKS] = {NO_EPOCH, NO_EPOCH, NO_EPOCH};

	ps->g->probes++;
	if (!id)
		return; /* not a valid probe id: the recorder starts at 1 */
	for (int k = 0; k < ps->ntr; k++) {
		struct track *tr = &ps->tr[k];

		epoch[k] = (uint32_t)tr->cut;
		if (tr->cut < tr->n && tr->first_probe == NO_TIME && t >= tr->wb[tr->cut] &&
		    t <= tr->we[tr->cut])
			tr->first_probe = t;
	}
	/* Chain to the previous probe on this stream (lost-range ends). */
	if (e->last_probe_id) {
		prev = &ps->ring[e->last_probe_id & (PROBE_RING - 1)];
		if (prev->id != e->last_probe_id)
			prev = NULL;
	}
	for (int k = 0; k < ps->ntr; k++) {
		if (prev)
			prev->next_epoch[k] = epoch[k];
		if (e->lost_open[k] != NO_EPOCH) {
			mark_unknown(&ps->tr[k], e->lost_open[k], epoch[k]);
			e->lost_open[k] = NO_EPOCH;
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
	slot->stream = fld(r, 1);
	for (int k = 0; k < NTRACKS; k++) {
		slot->epoch[k] = epoch[k];
		slot->next_epoch[k] = NO_EPOCH;
	}
}

static void on_probe_done(struct gpu_pass *ps, const struct dlbn_record *r)
{
	uint64_t id = (uint64_t)fld(r, 0);
	struct pending_probe *p = &ps->ring[id & (PROBE_RING - 1)];

	if (!id || p->id != id) {
		ps->g->probe_done_unmatched++;
		return;
	}
	if (fld(r, 2) == 0) {
		ps->g->probes_resolved++;
		apply_bound(ps, p->epoch, bounded(fld(r, 1), DLBN_TIME_LIMIT));
		p->id = 0;
		return;
	}
	ps->g->probes_lost++;
	flush_stash(ps);
	ps->stash = 1;
	ps->stash_thread = r->stream->index;
	memcpy(ps->stash_epoch, p->epoch, sizeof(ps->stash_epoch));
	ps->stash_t = r->t_ns;
	probe_lost(ps, p);
}

static void on_cuda_info(struct gpu_pass *ps, const struct dlbn_record *r)
{
	struct dlbn_gpu *g = ps->g;
	int64_t api = fld(r, 0);

	if (api == DLBN_CUDA_INFO_PROBE_OFF) {
		g->probing_stopped = 1;
		ps->stash = 0; /* the loss was a driver error: no bound */
	}
	if (api == DLBN_CUDA_INFO_DRIVER)
		g->driver_version = (int)bounded(fld(r, 1), 1000000000);
	if (g->nnotes < DLBN_GPU_MAX_NOTES && r->kind[2] == DLBN_V_STR) {
		int len = (int)bounded(r->f[2], DLBN_GPU_LINE - 1);

		snprintf(g->notes[g->nnotes++], DLBN_GPU_LINE, "%.*s", len, r->str[2]);
	}
}

/* Work queued at t is the first after every step that ended before t. */
static void note_enqueue(struct gpu_pass *ps, int64_t t)
{
	for (int k = 0; k < ps->ntr; k++) {
		struct track *tr = &ps->tr[k];

		while (tr->refill_next < tr->n && tr->st->v[tr->refill_next].end < t)
			tr->gs[tr->refill_next++].next_enqueue = t;
	}
}

static void on_record(struct gpu_pass *ps, const struct dlbn_record *r)
{
	if (ps->stash && r->type != DLBN_REC_CUDA_INFO && r->stream->index == ps->stash_thread)
		flush_stash(ps);
	advance(ps, r->t_ns);
	switch (r->type) {
	case DLBN_REC_LAUNCH:
		ps->g->present = 1;
		note_enqueue(ps, r->t_ns);
		stream_work(ps, fld(r, 0), r->t_ns);
		attribute_host(ps, r->t_ns, add_launch, r);
		break;
	case DLBN_REC_MEMCPY:
		ps->g->present = 1;
		note_enqueue(ps, r->t_ns);
		if (fld(r, 5))
			stream_work(ps, fld(r, 2), r->t_ns);
		attribute_host(ps, r->t_ns, add_copy, r);
		break;
	case DLBN_REC_SYNC:
		ps->g->present = 1;
		sync_covers(ps, r);
		attribute_host(ps, r->t_ns, add_sync, r);
		break;
	case DLBN_REC_PROBE:
		ps->g->present = 1;
		on_probe(ps, r);
		break;
	case DLBN_REC_PROBE_DONE:
		on_probe_done(ps, r);
		break;
	case DLBN_REC_CUDA_INFO:
		on_cuda_info(ps, r);
		break;
	default:
		break;
	}
}

/* ---- after the pass ----------------------------------------------------- */

static void end_of_trace(struct gpu_pass *ps)
{
	flush_stash(ps);
	advance(ps, INT64_MAX);
	for (size_t i = 0; i < PROBE_RING; i++) {
		if (ps->ring[i].id) {
			ps->g->probes_unresolved++;
			probe_lost(ps, &ps->ring[i]);
		}
	}
	for (size_t i = 0; i <= STREAM_TABLE; i++)
		for (int k = 0; k < ps->ntr; k++)
			if (ps->streams[i].used && ps->streams[i].lost_open[k] != NO_EPOCH)
				mark_unknown(&ps->tr[k], ps->streams[i].lost_open[k],
					     (uint32_t)ps->tr[k].n);
}

/* Split every wait of the track; see the rule in gpu.h. */
static void split_track(struct track *tr)
{
	int64_t busy_until = INT64_MIN;
	int32_t lost = 0;

	for (size_t p = 0; p < tr->n; p++) {
		struct dlbn_step *s = &tr->st->v[tr->order[p]];
		struct dlbn_gpu_step *gs = &tr->gs[tr->order[p]];
		int64_t wait = tr->we[p] - tr->wb[p], busy = 0;

		busy_until = max64(busy_until, tr->maxdone[p]);
		lost += tr->unknown_diff[p];
		if (wait <= 0) {
			gs->evidence = DLBN_GPU_EV_NONE;
			s->gpu_busy_ns = 0;
			s->gpu_idle_ns = s->wait_ns;
			continue;
		}
		if (tr->no_work[p]) {
			gs->evidence = DLBN_GPU_EV_NO_WORK;
		} else {
			if (busy_until > tr->wb[p])
				busy = busy_until - tr->wb[p] < wait ? busy_until - tr->wb[p]
								     : wait;
			/* Known busy for the whole wait: whatever is missing
			 * cannot make it idle. */
			gs->evidence = (tr->uncovered[p] || lost > 0) && busy < wait
					       ? DLBN_GPU_EV_UNKNOWN
					       : DLBN_GPU_EV_PROBE;
		}
		/* Wait outside the probed interval (see wait_interval) has no
		 * GPU evidence of its own: counted idle, like Replay removes it. */
		int64_t outside = s->wait_ns > wait ? s->wait_ns - wait : 0;
		int64_t idle = wait - busy + outside;
		/* The GPU drained inside the wait: it stays idle until the loop
		 * queues work again, a bubble that would have overlapped
		 * earlier GPU work had the batch been ready.  Charged to the
		 * stall, at most the wait itself (so host work between steps,
		 * which Replay keeps, cannot grow the stall past the waits). */
		s->gpu_refill_ns = 0;
		if (gs->evidence == DLBN_GPU_EV_PROBE && busy < wait && gs->next_enqueue > s->end) {
			int64_t refill = gs->next_enqueue - s->end;
			if (idle + refill > s->wait_ns)
				refill = s->wait_ns > idle ? s->wait_ns - idle : 0;
			gs->refill_ns = refill;
			s->gpu_refill_ns = refill;
		}
		s->gpu_busy_ns = busy;
		s->gpu_idle_ns = idle;
	}
}

/* Sums over the steps of one view whose end is in (ws, we]. */
static void sum_window(const struct dlbn_steps *st, const struct dlbn_gpu_step *gs, int64_t ws,
		       int64_t we, struct dlbn_gpu_win *w)
{
	memset(w, 0, sizeof(*w));
	w->valid = 1;
	w->wall_s = we > ws ? ((double)we - (double)ws) / 1e9 : 0; /* ws may be INT64_MIN */
	for (size_t i = 0; i < st->n; i++) {
		const struct dlbn_step *s = &st->v[i];
		const struct dlbn_gpu_host *h = &gs[i].host;

		if (s->end <= ws || s->end > we)
			continue;
		w->steps++;
		w->host.launches += h->launches;
		w->host.syncs += h->syncs;
		for (int k = 0; k < DLBN_GPU_SYNC_KINDS; k++)
			w->host.sync_ns[k] += h->sync_ns[k];
		for (int k = 0; k < DLBN_GPU_COPY_DIRS; k++)
			w->host.copy_blocked_ns[k] += h->copy_blocked_ns[k];
		w->host.pageable_h2d += h->pageable_h2d;
		w->host.pageable_h2d_bytes += h->pageable_h2d_bytes;
		w->host.pageable_h2d_ns += h->pageable_h2d_ns;
		w->host.pinned_h2d += h->pinned_h2d;
		w->host.pinned_h2d_bytes += h->pinned_h2d_bytes;
		w->host.async_copies += h->async_copies;
		w->host.sync_copies += h->sync_copies;
		if (gs[i].evidence == DLBN_GPU_EV_NONE)
			continue;
		w->waits++;
		w->wait_s += (double)(s->gpu_busy_ns + s->gpu_idle_ns) / 1e9;
		w->wait_gpu_busy_s += (double)s->gpu_busy_ns / 1e9;
		w->wait_gpu_idle_s += (double)s->gpu_idle_ns / 1e9;
		if (gs[i].evidence == DLBN_GPU_EV_PROBE)
			w->waits_with_probe++;
		else if (gs[i].evidence == DLBN_GPU_EV_NO_WORK)
			w->waits_no_work++;
		else {
			w->waits_unknown++;
			w->wait_unknown_s += (double)(s->gpu_busy_ns + s->gpu_idle_ns) / 1e9;
			w->wait_unknown_idle_s += (double)s->gpu_idle_ns / 1e9;
		}
	}
}

/* Whole-run wait figures of the view the model prefers (Python if any). */
static void whole_run_waits(struct dlbn_gpu *g)
{
	int k = g->view_steps[0] && g->view_steps[0]->n ? 0 : 1;
	struct dlbn_gpu_win w;

	if (!g->view_steps[k] || !g->view_step[k])
		return;
	sum_window(g->view_steps[k], g->view_step[k], INT64_MIN, INT64_MAX, &w);
	g->waits = w.waits;
	g->waits_with_probe = w.waits_with_probe;
	g->waits_no_work = w.waits_no_work;
	g->waits_unknown = w.waits_unknown;
	g->wait_s = w.wait_s;
	g->wait_gpu_busy_s = w.wait_gpu_busy_s;
	g->wait_gpu_idle_s = w.wait_gpu_idle_s;
	g->wait_unknown_s = w.wait_unknown_s;
}

int dlbn_gpu_analyze(struct dlbn_model *m, struct dlbn_reader *r, const struct dlbn_gpu_opts *o,
		     struct dlbn_gpu *g)
{
	struct dlbn_gpu_opts defaults;
	struct gpu_pass *ps;
	struct dlbn_steps *views[NTRACKS] = {&m->py_steps, &m->ipc_steps, &m->nvtx_steps};
	const struct dlbn_record *rec;

	memset(g, 0, sizeof(*g));
	if (!o) {
		dlbn_gpu_default_opts(&defaults);
		o = &defaults;
	}
	if (m->training < 0)
		return 0;
	ps = calloc(1, sizeof(*ps));
	if (!ps)
		return -1;
	ps->g = g;
	ps->slack = o->probe_slack_ns < 0 ? 0 : o->probe_slack_ns;
	ps->first_work = NO_TIME;
	for (int k = 0; k < NTRACKS; k++) {
		struct track *tr = &ps->tr[ps->ntr];

		if (track_init(ps, tr, m, views[k]) != 0)
			goto fail;
		g->view_steps[k] = views[k];
		g->view_step[k] = tr->gs;
		ps->ntr++;
	}
	dlbn_reader_rewind(r);
	while ((rec = dlbn_reader_next(r))) {
		if (m->threads[rec->stream->index].proc_index != (uint32_t)m->training)
			continue;
		on_record(ps, rec);
	}
	end_of_trace(ps);
	if (g->present)
		for (int k = 0; k < ps->ntr; k++)
			split_track(&ps->tr[k]);
	for (int k = 0; k < ps->ntr; k++)
		track_free_scratch(&ps->tr[k]);
	free(ps);
	if (g->present)
		whole_run_waits(g);
	return 0;
fail:
	for (int k = 0; k < NTRACKS; k++)
		track_free_scratch(&ps->tr[k]);
	if (ps->ntr < NTRACKS)
		free(ps->tr[ps->ntr].gs); /* the track that failed was not handed to g */
	free(ps);
	return -1;
}

void dlbn_gpu_free(struct dlbn_gpu *g)
{
	for (int k = 0; k < NTRACKS; k++)
		free(g->view_step[k]);
	memset(g, 0, sizeof(*g));
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

static int64_t sync_total(const struct dlbn_gpu_host *h)
{
	int64_t s = 0;

	for (int k = 0; k < DLBN_GPU_SYNC_KINDS; k++)
		s += h->sync_ns[k];
	return s;
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
	int64_t total = sync_total(&w->host);
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

void dlbn_gpu_window(struct dlbn_gpu *g, const struct dlbn_steps *st, int64_t ws, int64_t we)
{
	int k;

	g->nreasons = 0;
	memset(&g->win, 0, sizeof(g->win));
	if (!g->present) {
		add_reason(g, "no GPU activity recorded in the training process: the exposed "
			      "wait is the stall (CPU-only rule)");
		return;
	}
	if (!st)
		return;
	for (k = 0; k < NTRACKS; k++)
		if (g->view_steps[k] == st && g->view_step[k])
			break;
	if (k == NTRACKS)
		return;
	sum_window(st, g->view_step[k], ws, we, &g->win);
	reason_split(g, &g->win);
	reason_sync(g, &g->win);
	reason_pageable(g, &g->win);
	reason_evidence(g, &g->win);
}

/* ---- output ------------------------------------------------------------- */

static void json_string(FILE *out, const char *s)
{
	fputc('"', out);
	for (const unsigned char *c = (const unsigned char *)s; *c; c++) {
		if (*c == '"' || *c == '\\')
			fprintf(out, "\\%c", *c);
		else if (*c < 0x20 || *c >= 0x7f)
			fprintf(out, "\\u%04x", *c);
		else
			fputc(*c, out);
	}
	fputc('"', out);
}

static void json_num(FILE *out, double v)
{
	if (v == v && v < 1e300 && v > -1e300)
		fprintf(out, "%.6g", v);
	else
		fputs("null", out);
}

static void json_host(FILE *out, const struct dlbn_gpu_host *h, size_t steps)
{
	fprintf(out, "{\"launches\":%lld,\"syncs\":%lld,\"host_sync_s\":{", (long long)h->launches,
		(long long)h->syncs);
	fputs("\"stream\":", out);
	json_num(out, (double)h->sync_ns[DLBN_GPU_SYNC_STREAM] / 1e9);
	fputs(",\"context\":", out);
	json_num(out, (double)h->sync_ns[DLBN_GPU_SYNC_CTX] / 1e9);
	fputs(",\"event\":", out);
	json_num(out, (double)h->sync_ns[DLBN_GPU_SYNC_EVENT] / 1e9);
	fputs(",\"other\":", out);
	json_num(out, (double)h->sync_ns[DLBN_GPU_SYNC_OTHER] / 1e9);
	fputs(",\"total\":", out);
	json_num(out, (double)sync_total(h) / 1e9);
	fputs("},\"copy_blocked_s\":{\"htod\":", out);
	json_num(out, (double)h->copy_blocked_ns[DLBN_GPU_COPY_HTOD] / 1e9);
	fputs(",\"dtoh\":", out);
	json_num(out, (double)h->copy_blocked_ns[DLBN_GPU_COPY_DTOH] / 1e9);
	fputs(",\"dtod\":", out);
	json_num(out, (double)h->copy_blocked_ns[DLBN_GPU_COPY_DTOD] / 1e9);
	fputs(",\"other\":", out);
	json_num(out, (double)h->copy_blocked_ns[DLBN_GPU_COPY_OTHER] / 1e9);
	fprintf(out, "},\"pageable_h2d\":{\"count\":%lld,\"bytes\":%lld,\"blocked_s\":",
		(long long)h->pageable_h2d, (long long)h->pageable_h2d_bytes);
	json_num(out, (double)h->pageable_h2d_ns / 1e9);
	fputs(",\"per_step_ms\":", out);
	json_num(out, steps ? (double)h->pageable_h2d_ns / 1e6 / (double)steps : 0);
	fprintf(out,
		"},\"pinned_h2d\":{\"count\":%lld,\"bytes\":%lld},\"async_copies\":%lld,"
		"\"sync_copies\":%lld}",
		(long long)h->pinned_h2d, (long long)h->pinned_h2d_bytes,
		(long long)h->async_copies, (long long)h->sync_copies);
}

static void json_waits(FILE *out, size_t waits, size_t probed, size_t no_work, size_t unknown,
		       double wait_s, double busy_s, double idle_s, double unknown_s)
{
	fprintf(out,
		"\"waits\":%zu,\"waits_with_probe\":%zu,\"waits_no_gpu_work\":%zu,"
		"\"waits_unknown\":%zu,\"wait_s\":",
		waits, probed, no_work, unknown);
	json_num(out, wait_s);
	fputs(",\"wait_gpu_busy_s\":", out);
	json_num(out, busy_s);
	fputs(",\"wait_gpu_idle_s\":", out);
	json_num(out, idle_s);
	fputs(",\"wait_unknown_s\":", out);
	json_num(out, unknown_s);
	fputs(",\"wait_gpu_busy_fraction\":", out);
	if (wait_s > 0)
		json_num(out, busy_s / wait_s);
	else
		fputs("null", out);
}

void dlbn_gpu_json(FILE *out, const struct dlbn_gpu *g)
{
	const struct dlbn_gpu_win *w = &g->win;

	fprintf(out, "{\"present\":%s,\"streams\":%zu,\"streams_saturated\":%s,",
		g->present ? "true" : "false", g->streams, g->streams_saturated ? "true" : "false");
	fprintf(out,
		"\"probes\":%llu,\"probes_resolved\":%llu,\"probes_lost\":%llu,"
		"\"probes_lost_bounded\":%llu,\"probes_unresolved\":%llu,"
		"\"probing_stopped\":%s,\"driver_version\":%d,",
		(unsigned long long)g->probes, (unsigned long long)g->probes_resolved,
		(unsigned long long)g->probes_lost, (unsigned long long)g->probes_lost_bounded,
		(unsigned long long)g->probes_unresolved, g->probing_stopped ? "true" : "false",
		g->driver_version);
	json_waits(out, g->waits, g->waits_with_probe, g->waits_no_work, g->waits_unknown,
		   g->wait_s, g->wait_gpu_busy_s, g->wait_gpu_idle_s, g->wait_unknown_s);
	fputs(",\"run\":", out);
	json_host(out, &g->host, g->waits);
	fputs(",\"window\":", out);
	if (w->valid) {
		fprintf(out, "{\"steps\":%zu,\"wall_s\":", w->steps);
		json_num(out, w->wall_s);
		fputc(',', out);
		json_waits(out, w->waits, w->waits_with_probe, w->waits_no_work, w->waits_unknown,
			   w->wait_s, w->wait_gpu_busy_s, w->wait_gpu_idle_s, w->wait_unknown_s);
		fputs(",\"wait_unknown_idle_s\":", out);
		json_num(out, w->wait_unknown_idle_s);
		fputs(",\"host_sync_fraction\":", out);
		json_num(out, w->wall_s > 0 ? (double)sync_total(&w->host) / 1e9 / w->wall_s : 0);
		fputs(",\"host\":", out);
		json_host(out, &w->host, w->steps);
		fputc('}', out);
	} else {
		fputs("null", out);
	}
	fputs(",\"driver_notes\":[", out);
	for (size_t i = 0; i < g->nnotes; i++) {
		if (i)
			fputc(',', out);
		json_string(out, g->notes[i]);
	}
	fputs("],\"reasons\":[", out);
	for (size_t i = 0; i < g->nreasons; i++) {
		if (i)
			fputc(',', out);
		json_string(out, g->reasons[i]);
	}
	fputs("]}", out);
}

void dlbn_gpu_text(FILE *out, const struct dlbn_gpu *g)
{
	const struct dlbn_gpu_win *w = &g->win;

	fputs("GPU\n", out);
	if (!g->present) {
		fputs("  no GPU activity recorded: the exposed wait is the stall (CPU-only rule)\n",
		      out);
		return;
	}
	fprintf(out,
		"  %lld launches on %zu%s stream(s); %llu probes: %llu resolved, %llu lost, "
		"%llu unresolved\n",
		(long long)g->host.launches, g->streams, g->streams_saturated ? "+" : "",
		(unsigned long long)g->probes, (unsigned long long)g->probes_resolved,
		(unsigned long long)g->probes_lost, (unsigned long long)g->probes_unresolved);
	if (w->valid && w->wait_s > 0)
		fprintf(out,
			"  window loader wait %.3f s: GPU busy %.3f s (%.0f%%), GPU idle "
			"%.3f s (stall); %zu of %zu waits probed, %zu unknown\n",
			w->wait_s, w->wait_gpu_busy_s, w->wait_gpu_busy_s / w->wait_s * 100,
			w->wait_gpu_idle_s, w->waits_with_probe + w->waits_no_work, w->waits,
			w->waits_unknown);
	if (w->valid && w->wall_s > 0 && sync_total(&w->host) > 0)
		fprintf(out,
			"  host blocked on the GPU %.3f s (%.0f%% of the window) in %lld syncs\n",
			(double)sync_total(&w->host) / 1e9,
			(double)sync_total(&w->host) / 1e9 / w->wall_s * 100,
			(long long)w->host.syncs);
	if (w->valid && w->host.pageable_h2d > 0)
		fprintf(out,
			"  pageable H2D: %lld copies, %.1f MiB, host in the copy calls %.3f s\n",
			(long long)w->host.pageable_h2d,
			(double)w->host.pageable_h2d_bytes / (1024.0 * 1024.0),
			(double)w->host.pageable_h2d_ns / 1e9);
	for (size_t i = 0; i < g->nreasons; i++)
		fprintf(out, "  - %s\n", g->reasons[i]);
}

const struct dlbn_gpu_step *dlbn_gpu_steps_of(const struct dlbn_gpu *g, const struct dlbn_steps *st)
{
	if (!g || !g->present)
		return NULL;
	for (int k = 0; k < DLBN_GPU_VIEWS; k++)
		if (g->view_steps[k] == st && g->view_step[k])
			return g->view_step[k];
	return NULL;
}
