/*
 * extent_state.c - records of format 2.0 and later made whole again: the
 * fd and semaphore announcements of their extent, and (3.0) what OPEN, FD,
 * STACK and MARK records write as differences from the extent's previous
 * ones (dlbn_trace.h; extent_state.h for the contract).
 *
 * Invariant: after extent_state_complete, a record reads as its 1.x
 * layout (the field lists of dlbn_trace.h), so the model, the exports and
 * --dump never see a version.  Differences are added modulo 2^64, as the
 * writer took them, so hostile input wraps instead of overflowing.
 */
#include <stdlib.h>
#include <string.h>

#include "trace/extent_state.h"

const struct dlbn_field_gap extent_fd_gaps[256] = {
	[DLBN_REC_READ] = {2, 2},    [DLBN_REC_WRITE] = {2, 2}, [DLBN_REC_RECVMSG] = {2, 2},
	[DLBN_REC_SENDMSG] = {2, 2}, [DLBN_REC_PREAD] = {2, 1},
};

const uint8_t extent_state_other_types[256] = {
	[DLBN_REC_FD] = 1,	 [DLBN_REC_OPEN] = 1, [DLBN_REC_SEM] = 1,   [DLBN_REC_SEM_WAIT] = 1,
	[DLBN_REC_SEM_POST] = 1, [DLBN_REC_MARK] = 1, [DLBN_REC_STACK] = 1,
};

void extent_state_reset(struct extent_state *x, unsigned major, int64_t base_ns)
{
	x->major = major;
	for (unsigned k = 0; k < DLBN_FD_SLOTS; k++)
		x->fds[k].fd = -1;
	x->fd_ino = 0;
	memset(x->sems, 0, sizeof(x->sems));
	x->open_count = 0;
	x->open_ino = 0;
	x->mark_iter = x->mark_arg = 0;
	x->mark_t = base_ns;
	memset(x->mark_counters, 0, sizeof(x->mark_counters));
	x->stack_len = 0;
}

void extent_state_free(struct extent_state *x)
{
	for (unsigned k = 0; k <= EXTENT_OPEN_PATHS; k++) {
		free(x->paths[k].text);
		x->paths[k] = (struct extent_path){NULL, 0, 0};
	}
	x->open_count = 0;
}

static inline int64_t wrap_add(int64_t a, int64_t b)
{
	return (int64_t)((uint64_t)a + (uint64_t)b);
}

static inline int64_t int_field(const struct dlbn_record *rec, int i)
{
	return i < rec->nfields && rec->kind[i] == DLBN_V_INT ? rec->f[i] : 0;
}

/* Field `at` taken out of the record, what follows moved up. */
static int64_t take_field(struct dlbn_record *rec, int at)
{
	int64_t v = int_field(rec, at);
	if (at >= rec->nfields)
		return v;
	for (int i = at; i + 1 < rec->nfields; i++) {
		rec->kind[i] = rec->kind[i + 1];
		rec->f[i] = rec->f[i + 1];
		rec->str[i] = rec->str[i + 1];
	}
	rec->kind[--rec->nfields] = DLBN_V_NONE;
	return v;
}

/* The spare, where an OPEN's path was put together (len bytes), becomes
 * the newest of the kept paths, and the oldest's buffer the spare. */
static struct extent_path *keep_path(struct extent_state *x, size_t len)
{
	unsigned slot = (x->open_newest + 1) % EXTENT_OPEN_PATHS;
	struct extent_path evicted = x->paths[slot];
	x->paths[slot] = x->paths[EXTENT_OPEN_PATHS];
	x->paths[slot].len = len;
	x->paths[EXTENT_OPEN_PATHS] = evicted;
	x->open_newest = slot;
	if (x->open_count < EXTENT_OPEN_PATHS)
		x->open_count++;
	return &x->paths[slot];
}

/*
 * An OPEN's whole path: the first `shared` bytes of a recent OPEN's path
 * (the previous one's, or in 4.0 the one `age` OPENs before it), its own,
 * then (3.0) the last `tail` bytes of that one; the counts are taken out
 * of the record.  The record's string then points into the state's
 * buffer for it, which stays as it is until the stream's next OPEN is
 * decoded.
 */
static void open_path(struct extent_state *x, struct dlbn_record *rec)
{
	int64_t age_f = x->major >= 4 && rec->nfields >= 8 ? take_field(rec, 7) : 0;
	int64_t tail_f = rec->nfields >= 7 ? take_field(rec, 6) : 0;
	int64_t shared_f = rec->nfields >= 6 ? take_field(rec, 5) : 0;
	struct extent_path *spare = &x->paths[EXTENT_OPEN_PATHS];
	if (rec->nfields < 5 || rec->kind[4] != DLBN_V_STR) {
		(void)keep_path(x, 0);
		return;
	}
	const struct extent_path *from = NULL;
	if (age_f >= 0 && (uint64_t)age_f < x->open_count)
		from = &x->paths[(x->open_newest + EXTENT_OPEN_PATHS - (unsigned)age_f) %
				 EXTENT_OPEN_PATHS];
	size_t prev = from ? from->len : 0;
	size_t shared = shared_f > 0 ? ((uint64_t)shared_f < prev ? (size_t)shared_f : prev) : 0;
	size_t tail = tail_f > 0
			      ? ((uint64_t)tail_f < prev - shared ? (size_t)tail_f : prev - shared)
			      : 0;
	size_t own = (size_t)rec->f[4], n = shared + own + tail;
	if (n > EXTENT_PATH_MAX) {
		(void)keep_path(x, 0); /* the record keeps its own bytes only */
		return;
	}
	if (n > spare->cap) {
		char *nb = realloc(spare->text, n);
		if (!nb) {
			(void)keep_path(x, 0); /* the record keeps its own bytes only */
			return;
		}
		spare->text = nb;
		spare->cap = n;
	}
	if (shared)
		memcpy(spare->text, from->text, shared);
	if (own)
		memcpy(spare->text + shared, rec->str[4], own);
	if (tail)
		memcpy(spare->text + shared + own, from->text + prev - tail, tail);
	struct extent_path *kept = keep_path(x, n);
	rec->str[4] = kept->text;
	rec->f[4] = (int64_t)n;
}

/* 3.0: an OPEN's inode from the previous OPEN's, its flags unXORed. */
static void open_fields(struct extent_state *x, struct dlbn_record *rec)
{
	if (rec->nfields < 4)
		return;
	if (rec->kind[2] == DLBN_V_INT)
		x->open_ino = rec->f[2] = wrap_add(x->open_ino, rec->f[2]);
	if (rec->kind[3] == DLBN_V_INT)
		rec->f[3] ^= DLBN_OPEN_FLAGS_USUAL;
}

/* 3.0: a MARK's iter_id, arg and counters from their differences
 * (dlbn_trace.h, MARK). */
static void mark_fields(struct extent_state *x, struct dlbn_record *rec, int64_t t_ns)
{
	if (rec->nfields < 3)
		return;
	if (rec->kind[1] == DLBN_V_INT)
		x->mark_iter = rec->f[1] = wrap_add(x->mark_iter, rec->f[1]);
	if (rec->kind[2] == DLBN_V_INT)
		x->mark_arg = rec->f[2] = wrap_add(x->mark_arg, rec->f[2]);
	if (rec->nfields == 3)
		return;
	/* One value: counter 0's; more: the mask, then the values. */
	uint64_t present = rec->nfields == 4 ? 1 : (uint64_t)int_field(rec, 3);
	int next = rec->nfields == 4 ? 3 : 4;
	int64_t *c = x->mark_counters;
	for (int i = 0; i < DLBN_MARK_COUNTERS; i++) {
		int64_t d = (present >> i) & 1 ? int_field(rec, next++) : 0;
		if (i == 0) /* written: the wall time since the last not run */
			d = (int64_t)((uint64_t)t_ns - (uint64_t)x->mark_t - (uint64_t)d);
		c[i] = wrap_add(c[i], d);
	}
	x->mark_t = t_ns;
	for (int i = 0; i < DLBN_MARK_COUNTERS; i++) {
		rec->kind[3 + i] = DLBN_V_INT;
		rec->f[3 + i] = c[i];
		rec->str[3 + i] = NULL;
	}
	rec->nfields = 3 + DLBN_MARK_COUNTERS;
}

/* 3.0: a STACK's frame list with the end it shares with the previous
 * STACK's put back (dlbn_trace.h, STACK). */
static void stack_frames(struct extent_state *x, struct dlbn_record *rec)
{
	if (rec->nfields < 3 || rec->kind[2] != DLBN_V_ARR) {
		x->stack_len = 0;
		return;
	}
	int64_t shared = rec->nfields >= 4 ? take_field(rec, 3) : 0;
	/* A list cut to what a record keeps has no end to share. */
	int whole = rec->f[2] == rec->narr;
	if (shared > 0 && whole) {
		int n = shared < x->stack_len ? (int)shared : x->stack_len;
		if (n > DLBN_REC_MAX_ARR - rec->narr)
			n = DLBN_REC_MAX_ARR - rec->narr;
		memcpy(rec->arr + rec->narr, x->stack + x->stack_len - n,
		       (size_t)n * sizeof(*rec->arr));
		rec->narr += n;
		rec->f[2] = rec->narr;
	}
	x->stack_len = whole ? rec->narr : 0;
	memcpy(x->stack, rec->arr, (size_t)x->stack_len * sizeof(*rec->arr));
}

/* A SEM record fills its slot; SEM_WAIT and SEM_POST get the address of
 * theirs in place of the slot (0: none).  0 when the record is a SEM. */
static int sem_fields(struct extent_state *x, struct dlbn_record *rec)
{
	if (rec->type == DLBN_REC_SEM) {
		if (rec->nfields >= 2 && rec->kind[0] == DLBN_V_INT && rec->f[0] >= 0 &&
		    rec->f[0] < DLBN_SEM_SLOTS)
			x->sems[rec->f[0]] = int_field(rec, 1);
		return 0;
	}
	int at = rec->type == DLBN_REC_SEM_POST ? 0 : 1;
	if (rec->nfields > at && rec->kind[at] == DLBN_V_INT) {
		int64_t slot = rec->f[at];
		rec->f[at] = slot >= 0 && slot < DLBN_SEM_SLOTS ? x->sems[slot] : 0;
	}
	return 1;
}

/* An FD record fills its slot and is not handed out; an OPEN fills it and
 * is (the records that name an fd: extent_state_complete). */
static int fd_announced(struct extent_state *x, struct dlbn_record *rec)
{
	if (rec->type == DLBN_REC_FD && x->major >= 3 && rec->nfields >= 3 &&
	    rec->kind[2] == DLBN_V_INT)
		x->fd_ino = rec->f[2] = wrap_add(x->fd_ino, rec->f[2]);
	if (rec->nfields >= 3 && rec->kind[0] == DLBN_V_INT && rec->f[0] >= 0)
		x->fds[rec->f[0] % DLBN_FD_SLOTS] =
			(struct fd_said){rec->f[0], int_field(rec, 1), int_field(rec, 2)};
	return rec->type != DLBN_REC_FD;
}

int extent_state_other(struct extent_state *x, struct dlbn_record *rec, int64_t t_ns)
{
	switch (rec->type) {
	case DLBN_REC_SEM:
	case DLBN_REC_SEM_WAIT:
	case DLBN_REC_SEM_POST:
		return sem_fields(x, rec);
	case DLBN_REC_MARK:
		if (x->major >= 3)
			mark_fields(x, rec, t_ns);
		return 1;
	case DLBN_REC_STACK:
		if (x->major >= 3)
			stack_frames(x, rec);
		return 1;
	case DLBN_REC_OPEN:
		if (x->major >= 3)
			open_fields(x, rec);
		open_path(x, rec);
		return fd_announced(x, rec);
	case DLBN_REC_FD:
		return fd_announced(x, rec);
	default:
		return 1;
	}
}
