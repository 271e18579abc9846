/*
 * gpu_probe.c - GPU drain probes: did the GPU still have work while the
 * training loop waited for a batch?
 *
 * When a main-thread wait begins (the recorder's fan-out calls
 * gpu_probe_wait_begins), a CUDA event is recorded through the real driver
 * on every stream that received work since the previous probe, and a PROBE
 * record is written.  Nothing ever waits for such an event: later wait
 * begin/end points poll the pending ones with cuEventQuery, and a finished
 * one is converted to host time and written as PROBE_DONE.  The stream's
 * work is unchanged (an event record adds no dependency on a non-legacy
 * stream), and the host never blocks.
 *
 * Host time of a GPU event: the anchor.  An event recorded on a private,
 * always idle, non-blocking stream completes as soon as it is recorded, so
 * its GPU timestamp corresponds to the host time of the record call.  Then
 *     complete_ns = anchor_host_ns + cuEventElapsedTime(anchor, probe)
 * The anchor is renewed about once a second so clock drift and float
 * precision stay negligible.
 *
 * Invariants:
 *   - Probe state (pool, anchors, pending list) is touched by the process's
 *     main thread only: the fan-out calls these functions on it.  The stream
 *     table is shared with launching threads and is lock-free.
 *   - No GPU activity since the last probe: no driver call at all.  A process
 *     that never launched anything: nothing but one load and a branch.
 *   - Any driver error: probing stops for good, one CUDA_INFO record says
 *     why; the application is never affected.  Exception: a probe that
 *     cannot be recorded because its stream is gone (destroyed, another
 *     context) skips that stream only.
 *   - A forked child never probes (its parent's CUDA state is not its own).
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "cuda_hooks.h"
#include "loop_cost.h"

#define STREAM_SLOTS	64 /* distinct streams tracked (power of two) */
#define PROBE_POOL	64 /* probes pending at once */
#define ANCHOR_RENEW_NS 1000000000ull

/* ---- stream activity (any thread, lock-free) ---------------------------- */

/* key = stream value + 1 (0 = empty); dirty = launched since last probe. */
static uintptr_t stream_key[STREAM_SLOTS];
static uint8_t stream_dirty[STREAM_SLOTS];
static int cuda_active;	       /* some GPU work was ever submitted */
static int streams_overflowed; /* more streams than STREAM_SLOTS */

static int state; /* enum probe_state (below) */
static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;

static void child_after_fork(void);

static void register_atfork(void)
{
	pthread_atfork(NULL, NULL, child_after_fork);
}

/* First GPU work of the process (any thread, once in practice): from now on
 * a forked child (a DataLoader worker) must know it is not the GPU process. */
static void first_activity(void)
{
	pthread_once(&atfork_once, register_atfork);
	__atomic_store_n(&cuda_active, 1, __ATOMIC_RELAXED);
}

static unsigned stream_slot_hash(uintptr_t key)
{
	return (unsigned)((key >> 4) ^ (key >> 12) ^ key) & (STREAM_SLOTS - 1);
}

bool gpu_probe_stream_used(CUstream stream)
{
	uintptr_t key = (uintptr_t)stream + 1;
	unsigned i = stream_slot_hash(key);

	/* The per-thread default stream of another thread cannot be probed
	 * from the main thread: it names the caller's own stream. */
	if (stream == CU_STREAM_PER_THREAD && !on_main_thread())
		return false;
	if (DLBN_UNLIKELY(!__atomic_load_n(&cuda_active, __ATOMIC_RELAXED)))
		first_activity();
	for (unsigned n = 0; n < STREAM_SLOTS; n++, i = (i + 1) & (STREAM_SLOTS - 1)) {
		uintptr_t k = __atomic_load_n(&stream_key[i], __ATOMIC_ACQUIRE);
		uintptr_t empty = 0;

		if (k == 0) {
			if (!__atomic_compare_exchange_n(&stream_key[i], &empty, key, false,
							 __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE) &&
			    empty != key)
				continue; /* another stream took the slot */
			k = key;
		}
		if (k == key) {
			/* Store only on change: keeps the line shared between launchers. */
			if (!__atomic_load_n(&stream_dirty[i], __ATOMIC_RELAXED))
				__atomic_store_n(&stream_dirty[i], 1, __ATOMIC_RELEASE);
			return __atomic_load_n(&loop_cost_gil_probe_wanted, __ATOMIC_RELAXED);
		}
	}
	__atomic_store_n(&streams_overflowed, 1, __ATOMIC_RELAXED);
	return false;
}

/* ---- driver entry points used by the probes ----------------------------- */

static struct {
	CUresult (*ctx_get_current)(CUcontext *);
	CUresult (*stream_create)(CUstream *, unsigned int);
	CUresult (*event_create)(CUevent *, unsigned int);
	CUresult (*event_record)(CUevent, CUstream);
	CUresult (*event_query)(CUevent);
	CUresult (*event_elapsed)(float *, CUevent, CUevent);
} drv;

static bool resolve_driver(void)
{
	drv.ctx_get_current = (CUresult(*)(CUcontext *))cu_driver_sym("cuCtxGetCurrent");
	drv.stream_create = (CUresult(*)(CUstream *, unsigned int))cu_driver_sym("cuStreamCreate");
	drv.event_create = (CUresult(*)(CUevent *, unsigned int))cu_driver_sym("cuEventCreate");
	drv.event_record = (CUresult(*)(CUevent, CUstream))cu_driver_sym("cuEventRecord");
	drv.event_query = (CUresult(*)(CUevent))cu_driver_sym("cuEventQuery");
	drv.event_elapsed =
		(CUresult(*)(float *, CUevent, CUevent))cu_driver_sym("cuEventElapsedTime");
	return drv.ctx_get_current && drv.stream_create && drv.event_create && drv.event_record &&
	       drv.event_query && drv.event_elapsed;
}

/* ---- probe state (main thread only) ------------------------------------- */

enum probe_state { PROBE_UNSET = 0, PROBE_READY, PROBE_OFF };

struct probe {
	CUevent event;
	uint64_t id;
	bool pending;
	bool lock; /* recorded after a launch or copy (lock probes), not at a wait */
};

struct anchor {
	CUevent event;
	uint64_t host_ns; /* host time of the record call */
	bool recorded;	  /* recorded, maybe not complete yet */
};

static CUcontext probe_ctx;    /* context the pool belongs to */
static CUstream anchor_stream; /* private, never given work */
static struct probe pool[PROBE_POOL];
static int npending;	  /* pool entries pending: a poll with none scans nothing */
static int npending_lock; /* of them, lock probes */
static struct anchor anchors[2];
static int anchor_cur = -1;  /* complete anchor in use, -1 none */
static int anchor_next = -1; /* recorded, waiting to complete, -1 none */
static uint64_t next_probe_id = 1;
/* Sync drains: one event, recorded where a stream synchronisation begins. */
static CUevent sync_event;
static uint64_t sync_event_ns; /* when it was last recorded (0 never); atomic */

/* Emit without hook_enter: the fan-out calls us from inside a hook. */
static void emit_info(int64_t code, int64_t ret, const char *text)
{
	int64_t f[2] = {code, ret};

	rec_emit_str(DLBN_REC_CUDA_INFO, clock_now_ns(), f, 2, text, strlen(text));
}

static void stop_probing(CUresult r, const char *what)
{
	state = PROBE_OFF;
	emit_info(DLBN_CUDA_INFO_PROBE_OFF, r, what);
}

static void child_after_fork(void)
{
	state = PROBE_OFF;
	__atomic_store_n(&cuda_active, 0, __ATOMIC_RELAXED);
}

/*
 * Record an anchor; its host time is the middle of the record call, so its
 * error is at most half the call's duration.  A call that took long (the
 * thread was preempted inside it) is simply recorded again.
 */
#define ANCHOR_MAX_CALL_NS 50000
#define ANCHOR_TRIES	   4

static bool record_anchor(int slot)
{
	uint64_t t0 = 0, t1 = 0;

	for (int i = 0; i < ANCHOR_TRIES; i++) {
		CUresult r;

		t0 = clock_now_ns();
		r = drv.event_record(anchors[slot].event, anchor_stream);
		t1 = clock_now_ns();
		if (r != CUDA_SUCCESS) {
			stop_probing(r, "probe: cuEventRecord(anchor) failed");
			return false;
		}
		if (t1 - t0 <= ANCHOR_MAX_CALL_NS)
			break;
	}
	anchors[slot].host_ns = t0 + (t1 - t0) / 2;
	anchors[slot].recorded = true;
	anchor_next = slot;
	return true;
}

/* First probe: create the private stream, the anchor and the event pool in
 * the current context.  Returns false (and retries later) without one. */
static bool setup(void)
{
	CUcontext ctx = NULL;
	CUresult r;

	if (!drv.event_elapsed && !resolve_driver()) {
		stop_probing(CUDA_ERROR_NOT_FOUND, "probe: driver entry points not found");
		return false;
	}
	if (drv.ctx_get_current(&ctx) != CUDA_SUCCESS || !ctx)
		return false; /* no context on the main thread yet */
	r = drv.stream_create(&anchor_stream, CU_STREAM_NON_BLOCKING);
	for (int i = 0; r == CUDA_SUCCESS && i < 2; i++)
		r = drv.event_create(&anchors[i].event, CU_EVENT_DEFAULT);
	for (int i = 0; r == CUDA_SUCCESS && i < PROBE_POOL; i++)
		r = drv.event_create(&pool[i].event, CU_EVENT_DEFAULT);
	if (r == CUDA_SUCCESS)
		r = drv.event_create(&sync_event, CU_EVENT_DEFAULT);
	if (r != CUDA_SUCCESS) {
		stop_probing(r, "probe: cannot create private stream/events");
		return false;
	}
	probe_ctx = ctx;
	state = PROBE_READY;
	return record_anchor(0);
}

/* Promote a completed anchor; start a new one when the current is old. */
static bool maintain_anchor(uint64_t now)
{
	if (anchor_next >= 0) {
		CUresult r = drv.event_query(anchors[anchor_next].event);

		if (r == CUDA_SUCCESS) {
			anchor_cur = anchor_next;
			anchor_next = -1;
		} else if (r != CUDA_ERROR_NOT_READY) {
			stop_probing(r, "probe: cuEventQuery(anchor) failed");
			return false;
		}
	}
	if (anchor_cur >= 0 && anchor_next < 0 &&
	    now - anchors[anchor_cur].host_ns > ANCHOR_RENEW_NS)
		return record_anchor(anchor_cur ^ 1);
	return true;
}

/* Host time of an event ms milliseconds after the anchor's (the header). */
static uint64_t host_time_after(const struct anchor *a, float ms)
{
	return (uint64_t)((int64_t)a->host_ns + (int64_t)((double)ms * 1e6));
}

static void emit_done(struct probe *p, uint64_t complete_ns, int status)
{
	int64_t f[3] = {(int64_t)p->id, (int64_t)complete_ns, status};

	rec_emit(DLBN_REC_PROBE_DONE, clock_now_ns(), f, 3);
	p->pending = false;
	npending--;
	npending_lock -= p->lock;
}

/* Poll every pending probe once; never waits. */
static void resolve_pending(void)
{
	if (anchor_cur < 0)
		return; /* no complete anchor to measure against yet */
	for (int i = 0; i < PROBE_POOL && npending > 0 && state == PROBE_READY; i++) {
		struct probe *p = &pool[i];
		const struct anchor *a = &anchors[anchor_cur];
		float ms = 0;
		CUresult r;

		if (!p->pending)
			continue;
		r = drv.event_query(p->event);
		if (r == CUDA_ERROR_NOT_READY)
			continue;
		if (r == CUDA_SUCCESS)
			r = drv.event_elapsed(&ms, a->event, p->event);
		if (r != CUDA_SUCCESS) {
			emit_done(p, 0, 1);
			stop_probing(r, "probe: cuEventQuery/cuEventElapsedTime failed");
			return;
		}
		emit_done(p, host_time_after(a, ms), 0);
	}
}

/*
 * A free pool entry; when all are pending, one is given up (lost): the
 * oldest lock probe, else the oldest.  A loop far ahead of the GPU keeps
 * its waits' probes, which time its steps' ends (--baseline's Replay).
 */
static struct probe *take_probe(void)
{
	struct probe *oldest = NULL, *oldest_lock = NULL;

	for (int i = 0; i < PROBE_POOL; i++) {
		struct probe *p = &pool[i];

		if (!p->pending)
			return p;
		if (!oldest || p->id < oldest->id)
			oldest = p;
		if (p->lock && (!oldest_lock || p->id < oldest_lock->id))
			oldest_lock = p;
	}
	if (oldest_lock)
		oldest = oldest_lock;
	emit_done(oldest, 0, 1);
	return oldest;
}

/*
 * The stream was destroyed after its last work, or belongs to another
 * context (several devices in one process): skip it this time, keep probing.
 * Not remembered: a handle that gets work again is alive (or reused).
 */
static bool stream_gone(CUresult r)
{
	return r == CUDA_ERROR_INVALID_HANDLE || r == CUDA_ERROR_INVALID_CONTEXT ||
	       r == CUDA_ERROR_CONTEXT_IS_DESTROYED;
}

static void note_skipped_stream(CUresult r, uintptr_t stream)
{
	static bool reported;
	char text[80];

	if (reported)
		return;
	reported = true;
	snprintf(text, sizeof(text), "probe: stream %#lx skipped (destroyed or other context)",
		 (unsigned long)stream);
	emit_info(DLBN_CUDA_INFO_STREAM_SKIPPED, r, text);
}

static void probe_dirty_streams(uint64_t t_ns, bool lock)
{
	static bool overflow_reported;

	if (!overflow_reported && __atomic_load_n(&streams_overflowed, __ATOMIC_RELAXED)) {
		overflow_reported = true;
		emit_info(DLBN_CUDA_INFO_STREAMS_OVERFLOW, STREAM_SLOTS,
			  "probe: more streams than tracked; some are not probed");
	}
	for (int i = 0; i < STREAM_SLOTS; i++) {
		uintptr_t key;
		struct probe *p;
		CUresult r;
		int64_t f[2];

		if (!__atomic_load_n(&stream_dirty[i], __ATOMIC_ACQUIRE))
			continue;
		__atomic_store_n(&stream_dirty[i], 0, __ATOMIC_RELAXED);
		key = __atomic_load_n(&stream_key[i], __ATOMIC_ACQUIRE);
		p = take_probe();
		r = drv.event_record(p->event, (CUstream)(key - 1));
		if (stream_gone(r)) {
			note_skipped_stream(r, key - 1);
			continue;
		}
		if (r != CUDA_SUCCESS) {
			stop_probing(r, "probe: cuEventRecord failed");
			return;
		}
		p->id = next_probe_id++;
		p->pending = true;
		p->lock = lock;
		npending++;
		npending_lock += lock;
		f[0] = (int64_t)p->id;
		f[1] = (int64_t)(key - 1);
		rec_emit(DLBN_REC_PROBE, t_ns, f, 2);
	}
}

/* The common case of a process without GPU work: one load, one branch. */
static inline bool gpu_was_used(void)
{
	return DLBN_UNLIKELY(__atomic_load_n(&cuda_active, __ATOMIC_RELAXED) != 0);
}

/* Whether to probe now; sets the probes up on first use (driver calls). */
static bool probing_possible(void)
{
	if (state == PROBE_OFF || !recorder_on() || !on_main_thread())
		return false;
	if (state == PROBE_UNSET && !setup())
		return false;
	return state == PROBE_READY;
}

static void probe_wait_begins(uint64_t t_ns, bool lock)
{
	CUcontext ctx = NULL;

	if (!maintain_anchor(clock_now_ns()))
		return;
	resolve_pending();
	if (state != PROBE_READY)
		return;
	/* Streams belong to a context: probe only while ours is current. */
	if (drv.ctx_get_current(&ctx) != CUDA_SUCCESS || ctx != probe_ctx)
		return;
	probe_dirty_streams(t_ns, lock);
}

static void poll_pending(void)
{
	if (maintain_anchor(clock_now_ns()))
		resolve_pending();
}

/*
 * A wait begins: the lock probes' request stands while the main thread
 * waited for the lock within its last LOCK_PROBE_HOLD_WAITS waits, then
 * goes.  One loop period without a lock wait says little about the next:
 * a thread-worker loader's map function takes the lock at its own pace,
 * and a period whose launch went unprobed because the one before had no
 * lock wait can then wait for the lock tens of ms after that launch, the
 * GPU's drain unseen until the next fetch (counted busy).
 */
#define LOCK_PROBE_HOLD_WAITS 256

static void lock_probe_period_ends(void)
{
	static uint64_t gil_seen; /* both main thread only */
	static unsigned waits_left;

	if (!__atomic_load_n(&loop_cost_gil_probe_wanted, __ATOMIC_RELAXED) || !on_main_thread())
		return;
	uint64_t gil = loop_cost_gil_ns();
	if (gil != gil_seen) {
		gil_seen = gil;
		waits_left = LOCK_PROBE_HOLD_WAITS;
	} else if (waits_left == 0 || --waits_left == 0) {
		__atomic_store_n(&loop_cost_gil_probe_wanted, 0, __ATOMIC_RELAXED);
	}
}

/* The entry points keep errno: they run inside libc hooks, next to the
 * application's EINTR/EAGAIN. */
void gpu_probe_wait_begins(uint64_t t_ns)
{
	int saved_errno;

	if (!gpu_was_used())
		return;
	saved_errno = errno;
	lock_probe_period_ends();
	if (probing_possible())
		probe_wait_begins(t_ns, false);
	errno = saved_errno;
}

/*
 * The loop waiting for the interpreter's lock between its launches is off
 * the CPU long after its work may have drained: a probe right after its
 * launches' records (not inside the lock wait, which holds the lock's
 * mutex) shows when the work queued up to there was done, and one after a
 * host-to-device copy (a step's batch, before its kernels) when the copy
 * was, so a lock wait between the copy and the kernels is seen as the
 * GPU's idle time up to the next launch (the analyzer's gap probes).  The
 * request stands while the main thread's recent waits include a lock wait
 * (lock_probe_period_ends).  At most one launch probe and one copy probe
 * per LOCK_PROBE_MIN_GAP_NS (a loop that waits for the lock before every
 * op of hundreds a step pays a bounded cost), but a loop period's first
 * launch and first copy always probe: a step whose batch came at once can
 * follow the last one's launch within that gap, and its own launch be the
 * last before a long lock wait.  Filed like any probe under the next wait.
 * None while LOCK_PROBES_PENDING_MAX of them are still pending once polled
 * (four loop periods' copies and launches the GPU has not reached): the
 * loop runs ahead of the GPU, as a Replay run on cached batches does, and
 * the waits' own probes, which the lock probes make needless while they
 * stand, keep the pool's room (take_probe).  A gap after that much queued
 * work goes unseen.
 */
#define LOCK_PROBE_MIN_GAP_NS	500000ull
#define LOCK_PROBES_PENDING_MAX 8

/* Main thread only; launches and copies apart, so that a step's copy does
 * not take the turn of the launch right after it.  0: probe the next. */
static uint64_t lock_probe_launch_ns, lock_probe_copy_ns;

void gpu_probe_after_lock_wait(bool launch)
{
	uint64_t *last_ns = launch ? &lock_probe_launch_ns : &lock_probe_copy_ns;
	int saved_errno;

	if (!on_main_thread())
		return;
	uint64_t now = clock_now_ns();
	if (*last_ns && now - *last_ns < LOCK_PROBE_MIN_GAP_NS)
		return;
	if (!hook_enter())
		return; /* inside another hook: the next launch or copy probes */
	saved_errno = errno;
	if (probing_possible()) {
		if (npending_lock >= LOCK_PROBES_PENDING_MAX)
			poll_pending(); /* those the GPU has done give their room back */
		if (npending_lock < LOCK_PROBES_PENDING_MAX) {
			probe_wait_begins(now, true);
			*last_ns = now;
		}
	}
	errno = saved_errno;
	hook_leave();
}

void gpu_probe_wait_finished(uint8_t rec_type, uint64_t t0_ns, uint64_t dur_ns)
{
	int saved_errno;

	(void)t0_ns;
	(void)dur_ns;
	if (!gpu_was_used())
		return;
	if (rec_type == DLBN_REC_MARK && on_main_thread()) /* a batch arrived */
		lock_probe_launch_ns = lock_probe_copy_ns = 0;
	saved_errno = errno;
	if (probing_possible())
		poll_pending();
	errno = saved_errno;
}

void gpu_probe_poll(void)
{
	int saved_errno;

	if (state != PROBE_READY || !recorder_on() || !on_main_thread())
		return;
	saved_errno = errno;
	poll_pending();
	errno = saved_errno;
}

/* ---- sync drains (main thread) ------------------------------------------ */

/*
 * When did the GPU finish the work a cuStreamSynchronize waited for?  The
 * sync's return says "no earlier than this", and a loop thread that has to
 * queue for a CPU before it runs again returns late: on a machine whose
 * cores the DataLoader workers hold, by a scheduler tick or more, GPU idle
 * time that looks like GPU work.  An event recorded on the stream as the
 * sync begins completes with that work; once the sync has returned it is
 * complete, and one query and one elapsed-time call place it on the host
 * clock (the probes' anchor).  At most one per SYNC_DRAIN_MIN_GAP_NS, so
 * that a loop syncing in a tight loop pays a bounded cost; the other syncs
 * keep their return as the drain.
 */
#define SYNC_DRAIN_MIN_GAP_NS 500000ull

bool gpu_probe_sync_begins(CUstream stream, uint64_t now)
{
	CUcontext ctx = NULL;
	CUresult r;

	uint64_t last = __atomic_load_n(&sync_event_ns, __ATOMIC_RELAXED);

	/* First, before any other check: a loop syncing often pays only this.
	 * Written by the main thread only; other threads just read it. */
	if (last && now - last < SYNC_DRAIN_MIN_GAP_NS)
		return false;
	if (!gpu_was_used() || !probing_possible() || anchor_cur < 0)
		return false;
	if (drv.ctx_get_current(&ctx) != CUDA_SUCCESS || ctx != probe_ctx)
		return false;
	r = drv.event_record(sync_event, stream);
	if (r != CUDA_SUCCESS) {
		if (!stream_gone(r))
			stop_probing(r, "probe: cuEventRecord(sync) failed");
		return false;
	}
	__atomic_store_n(&sync_event_ns, now, __ATOMIC_RELAXED);
	return true;
}

uint64_t gpu_probe_sync_drained(void)
{
	float ms = 0;

	if (state != PROBE_READY || anchor_cur < 0)
		return 0;
	/* Complete after a successful sync; NOT_READY would be a driver that
	 * returned early: no figure, not an error. */
	if (drv.event_query(sync_event) != CUDA_SUCCESS ||
	    drv.event_elapsed(&ms, anchors[anchor_cur].event, sync_event) != CUDA_SUCCESS)
		return 0;
	return host_time_after(&anchors[anchor_cur], ms);
}
