/*
 * marker.c - the exported marker API used by the Python bootstrap.
 *
 * python/sitecustomize.py reaches these through ctypes.CDLL(None) to mark
 * the exact start and end of each DataLoader fetch (MARK), to record each
 * iterator's configuration (CONFIG) and a loader's Python-level events,
 * such as the exception a fetch raised (NOTE).  All return 0 when the record was
 * taken and -1 when this process is not recording (off, passive, or called
 * re-entrantly from a signal handler).
 */
#include <string.h>

#include "loop_cost.h"
#include "marker.h"
#include "mem_sample.h"
#include "recorder.h"
#include "thread_census.h"

DLBN_EXPORT int dlbn_active(void);
DLBN_EXPORT int dlbn_mark(int kind, long long iter_id, long long arg);
DLBN_EXPORT int dlbn_config(long long iter_id, const char *text);
DLBN_EXPORT int dlbn_note(long long iter_id, int kind, const char *text);

int dlbn_active(void)
{
	return recorder_on() ? 1 : 0;
}

/*
 * A fetch is the loop's wait for its next batch as Python sees it, so its
 * begin and end are passed on like the libc hooks' waits: the drain probes
 * then cover num_workers=0 loaders too, which make no IPC call at all.
 * Begin/end pairs are kept per thread (only the loop's thread fetches).
 * On the main thread a fetch's begin and end, and iter(), also carry the
 * loop's cumulative counters (loop_cost.c): from one batch's arrival to
 * the next wait (or to the iter() whose worker start-up that wait carries)
 * they give the loading costs that land outside the waits.  A batch's
 * arrival and the next fetch begin also take the thread census
 * (thread_census.c), at most every 100 ms.  A fetch begin is where the
 * loop's process takes its memory sample when one is due (mem_sample.c),
 * before the mark: in the loop's own time, which Replay keeps, not in the
 * wait, which the analyzer would count as loading.
 */
static __thread uint64_t tls_fetch_begin_ns;

_Static_assert(DLBN_LOOP_COST_FIELDS == DLBN_MARK_COUNTERS, "a MARK carries every loop counter");

int dlbn_mark(int kind, long long iter_id, long long arg)
{
	if (!recorder_on() || !hook_enter())
		return -1;
	uint64_t now = clock_now_ns();
	int64_t f[3 + DLBN_LOOP_COST_FIELDS] = {kind, iter_id, arg};
	/* iter() too: a lead that a worker start-up follows ends there; and
	 * the hand-off, where the wrapper's part of a lead ends. */
	int counted = kind == DLBN_MARK_FETCH_BEGIN || kind == DLBN_MARK_FETCH_END ||
		      kind == DLBN_MARK_FETCH_STOP || kind == DLBN_MARK_ITER_BEGIN ||
		      kind == DLBN_MARK_HANDOFF;
	int main_thread = on_main_thread();
	if (kind == DLBN_MARK_FETCH_BEGIN && main_thread)
		now = mem_sample_fetch(now);
	if (counted && main_thread)
		loop_cost_sample(f + 3);
	rec_emit_mark(now, f, counted && main_thread ? 3 + DLBN_LOOP_COST_FIELDS : 3);
	if (main_thread) {
		if (kind == DLBN_MARK_FETCH_BEGIN) {
			tls_fetch_begin_ns = now;
			loader_wait_begins(now);
			/* A loop period just ended: the census that closes it. */
			thread_census_fetch_begin(now);
			profile_fetch_timer(1);
		} else if ((kind == DLBN_MARK_FETCH_END || kind == DLBN_MARK_FETCH_STOP) &&
			   tls_fetch_begin_ns) {
			uint64_t t0 = tls_fetch_begin_ns;
			tls_fetch_begin_ns = 0;
			profile_fetch_timer(0);
			loader_wait_finished(DLBN_REC_MARK, t0, now - t0);
			if (kind == DLBN_MARK_FETCH_END)
				thread_census_arrival(now);
		}
	}
	hook_leave();
	return recorder_on() ? 0 : -1;
}

int dlbn_config(long long iter_id, const char *text)
{
	if (!recorder_on() || !text || !hook_enter())
		return -1;
	int64_t f[1] = {iter_id};
	rec_emit_str(DLBN_REC_CONFIG, clock_now_ns(), f, 1, text, strnlen(text, 4096));
	hook_leave();
	return recorder_on() ? 0 : -1;
}

int dlbn_note(long long iter_id, int kind, const char *text)
{
	if (!recorder_on() || !text || !hook_enter())
		return -1;
	int64_t f[2] = {iter_id, kind};
	rec_emit_str(DLBN_REC_NOTE, clock_now_ns(), f, 2, text, strnlen(text, 1000));
	hook_leave();
	return recorder_on() ? 0 : -1;
}
