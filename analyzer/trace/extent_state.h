/*
 * extent_state.h - what an extent of format 2.0 or later says once and its
 * records then leave out (dlbn_trace.h, "Fd announcements" and
 * "Differences within an extent").
 *
 * The reader keeps one per stream, resets it at the start of each extent
 * and passes every decoded record through extent_state_complete, so that
 * records come out with their 1.x fields whatever version wrote them.
 * Nothing here outlives an extent: each extent reads on its own.
 */
#ifndef DLBN_EXTENT_STATE_H
#define DLBN_EXTENT_STATE_H

#include <stddef.h>
#include <stdint.h>

#include "dlbn/dlbn_trace.h"
#include "trace/reader.h"

/* OPEN records whose paths a 4.0 OPEN may share bytes with (dlbn_trace.h,
 * "Recent paths"). */
#define EXTENT_OPEN_PATHS 16
/* The longest OPEN path put back.  The kernel opens none longer than
 * PATH_MAX (4096): a longer one is a damaged or hostile trace's, each of
 * whose OPENs could otherwise add its bytes to an earlier path, up to the
 * extent's size for each of the 16 kept. */
#define EXTENT_PATH_MAX 65536

/* The last FD record of an announcement slot in the current extent. */
struct fd_said {
	int64_t fd; /* -1: none */
	int64_t kind, ino;
};

struct extent_state {
	unsigned major; /* the trace's format major (2 or later) */
	struct fd_said fds[DLBN_FD_SLOTS];
	int64_t fd_ino;		      /* the last FD record's inode (3.0), 0 none */
	int64_t sems[DLBN_SEM_SLOTS]; /* each slot's semaphore address, 0 none */
	/* The whole paths of the extent's last open_count OPENs, the newest
	 * at paths[open_newest] (2.0 and 3.0 refer to it only; 4.0 to any),
	 * paths[EXTENT_OPEN_PATHS] a spare the next is put together in; and
	 * (3.0) the last OPEN's inode. */
	struct extent_path {
		char *text;
		size_t len, cap;
	} paths[EXTENT_OPEN_PATHS + 1];
	unsigned open_count, open_newest;
	int64_t open_ino;
	/* The extent's last MARK (3.0): its iter_id and arg (zeros before the
	 * first); the last with counters: its time and counters (the extent's
	 * base time and zeros before the first). */
	int64_t mark_iter, mark_arg;
	int64_t mark_t;
	int64_t mark_counters[DLBN_MARK_COUNTERS];
	/* The extent's last STACK's frame list (3.0), 0 elements: none, or
	 * more than a record keeps. */
	int stack_len;
	int64_t stack[DLBN_REC_MAX_ARR];
};

/* Where records of 2.0 and later leave out the 1.x fields fd_kind and
 * ino: the decoder leaves room there (dlbn_decode_record_gap). */
extern const struct dlbn_field_gap extent_fd_gaps[256];
/* The types extent_state_other completes (announcements, semaphores, and
 * the OPEN, MARK and STACK differences); every other is whole as decoded. */
extern const uint8_t extent_state_other_types[256];

void extent_state_reset(struct extent_state *x, unsigned major, int64_t base_ns);
int extent_state_other(struct extent_state *x, struct dlbn_record *rec, int64_t t_ns);

/*
 * Put back what rec (decoded with extent_fd_gaps, at time t_ns) leaves
 * out.  0 when rec is an announcement, which is not handed out.  Inline:
 * every record of a trace comes through here, most of them a READ or a
 * WRITE whose fd's kind and inode fill the decoder's gap.
 */
static inline int extent_state_complete(struct extent_state *x, struct dlbn_record *rec,
					int64_t t_ns)
{
	struct dlbn_field_gap gap = extent_fd_gaps[rec->type];
	if (!gap.width)
		return extent_state_other_types[rec->type] ? extent_state_other(x, rec, t_ns) : 1;
	if (rec->nfields < gap.at + gap.width)
		return 1;
	int64_t kind = 0, ino = 0;
	if (rec->kind[1] == DLBN_V_INT && rec->f[1] >= 0) {
		const struct fd_said *said = &x->fds[rec->f[1] % DLBN_FD_SLOTS];
		if (said->fd == rec->f[1])
			kind = said->kind, ino = said->ino;
	}
	int at = gap.at;
	if (gap.width == 2) {
		rec->kind[at] = DLBN_V_INT;
		rec->f[at++] = kind;
	}
	rec->kind[at] = DLBN_V_INT;
	rec->f[at] = ino;
	return 1;
}

void extent_state_free(struct extent_state *x);

#endif /* DLBN_EXTENT_STATE_H */
