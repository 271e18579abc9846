/*
 * damage.c - what a damaged or cut-short trace lost, against the analysis
 * window (see damage.h for the rule).
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "analysis/damage.h"

const char *dlbn_touch_text(int touches)
{
	return touches == DLBN_TOUCH_YES   ? "in the analysis window"
	       : touches == DLBN_TOUCH_MAY ? "may touch the analysis window"
					   : "outside the analysis window";
}

const char *dlbn_damage_kind_name(int kind)
{
	switch (kind) {
	case DLBN_LOSS_CORRUPT:
		return "corrupt";
	case DLBN_LOSS_CUT:
		return "cut";
	case DLBN_LOSS_GAP:
		return "gap";
	case DLBN_LOSS_HEADER:
		return "header";
	case DLBN_LOSS_MISSING:
		return "missing";
	case DLBN_DAMAGE_PASSIVE:
		return "stopped";
	default:
		return "repaired";
	}
}

static const char *role_text(int role)
{
	return role == DLBN_ROLE_TRAINING ? "training process"
	       : role == DLBN_ROLE_WORKER ? "worker"
	       : role == DLBN_ROLE_OTHER  ? "not identified as training or worker"
					  : "process not in the trace";
}

static const struct dlbn_proc *find_proc(const struct dlbn_model *m, uint32_t proc_id)
{
	for (size_t i = 0; i < m->nprocs; i++)
		if (m->procs[i].proc_id == proc_id)
			return &m->procs[i];
	return NULL;
}

static struct dlbn_damage_item *new_item(struct dlbn_damage *d, int kind)
{
	if (d->nitems >= DLBN_DAMAGE_MAX_ITEMS) {
		d->more++;
		return NULL;
	}
	struct dlbn_damage_item *it = &d->items[d->nitems++];
	memset(it, 0, sizeof(*it));
	it->kind = kind;
	it->proc_id = -1;
	it->role = -1;
	it->t_from = it->t_to = DLBN_LOSS_T_UNKNOWN;
	return it;
}

/* "t=1.234..2.345 s", "from t=1.234 s on", "up to t=..", "at an unknown time". */
static void range_text(char *buf, size_t n, const struct dlbn_model *m, int64_t from, int64_t to)
{
	/* An unknown end is INT64_MIN: subtract only from known ones. */
	double f = from != DLBN_LOSS_T_UNKNOWN ? (double)(from - m->t0) / 1e9 : 0;
	double t = to != DLBN_LOSS_T_UNKNOWN ? (double)(to - m->t0) / 1e9 : 0;
	if (from != DLBN_LOSS_T_UNKNOWN && to != DLBN_LOSS_T_UNKNOWN)
		snprintf(buf, n, "t=%.3f..%.3f s", f, t);
	else if (from != DLBN_LOSS_T_UNKNOWN)
		snprintf(buf, n, "from t=%.3f s on", f);
	else if (to != DLBN_LOSS_T_UNKNOWN)
		snprintf(buf, n, "up to t=%.3f s", t);
	else
		snprintf(buf, n, "at unknown times");
}

/* Whether [from, to] (unknown ends open) meets the window; no window: may. */
static int overlaps(const struct dlbn_analysis *a, int64_t from, int64_t to)
{
	if (!a || a->steps_window == 0)
		return 1;
	return (from == DLBN_LOSS_T_UNKNOWN || from <= a->window_end) &&
	       (to == DLBN_LOSS_T_UNKNOWN || to >= a->window_begin);
}

static void loss_item(const struct dlbn_model *m, const struct dlbn_analysis *a,
		      const struct dlbn_loss *l, struct dlbn_damage *d)
{
	struct dlbn_damage_item *it = new_item(d, l->kind);
	if (!it)
		return;
	it->extents = l->extents;
	it->bytes = l->bytes;
	it->t_from = l->t_from;
	it->t_to = l->t_to;
	const struct dlbn_proc *p = l->known_stream ? find_proc(m, l->proc_id) : NULL;
	if (l->known_stream) {
		it->proc_id = l->proc_id;
		it->pid = (int)l->pid;
	}
	if (p)
		it->role = p->role;
	/* The first extent of a thread-0 stream holds the PROCESS record:
	 * without it the process's identity, and the roles, are guesses. */
	int identity =
		l->kind == DLBN_LOSS_GAP && l->t_from == DLBN_LOSS_T_UNKNOWN && l->thread_no == 0;
	/* Roles come from the records (pipes, marks): a loss can make a worker
	 * look like an unrelated process, so no role is exempt. */
	if (!overlaps(a, l->t_from, l->t_to) && !identity)
		it->touches = DLBN_TOUCH_NO;
	else if (p && l->t_from != DLBN_LOSS_T_UNKNOWN && l->t_to != DLBN_LOSS_T_UNKNOWN &&
		 !identity)
		it->touches = DLBN_TOUCH_YES;
	else
		it->touches = DLBN_TOUCH_MAY;
	/* The training process's records decide the steps, the window and the
	 * loader configuration: any loss there blocks the verdict. */
	it->blocks =
		it->touches != DLBN_TOUCH_NO || identity || !p || p->role == DLBN_ROLE_TRAINING;

	char range[80], who[96], bytes[48] = "";
	range_text(range, sizeof(range), m, l->t_from, l->t_to);
	if (l->known_stream)
		snprintf(who, sizeof(who), "pid %u (%s), thread %u", l->pid, role_text(it->role),
			 l->thread_no);
	if (l->bytes)
		snprintf(bytes, sizeof(bytes), ", %llu bytes", (unsigned long long)l->bytes);
	switch (l->kind) {
	case DLBN_LOSS_CORRUPT:
		snprintf(it->text, sizeof(it->text),
			 "%s: %llu extent(s)%s of records failed their check and were dropped, "
			 "%s (%s)",
			 who, (unsigned long long)l->extents, bytes, range,
			 dlbn_touch_text(it->touches));
		break;
	case DLBN_LOSS_CUT:
		snprintf(it->text, sizeof(it->text),
			 "%s: the file ends inside its records%s, lost %s (%s)", who, bytes, range,
			 dlbn_touch_text(it->touches));
		break;
	case DLBN_LOSS_GAP:
		snprintf(it->text, sizeof(it->text),
			 "%s: %llu extent(s) of records missing, %s%s (%s)", who,
			 (unsigned long long)l->extents, range,
			 identity ? ", its PROCESS record with them" : "",
			 dlbn_touch_text(it->touches));
		break;
	case DLBN_LOSS_HEADER:
		snprintf(it->text, sizeof(it->text),
			 "%llu extent(s) with a damaged header: whose records they held, and "
			 "when, is unknown (%s)",
			 (unsigned long long)l->extents, dlbn_touch_text(it->touches));
		break;
	default:
		snprintf(it->text, sizeof(it->text),
			 "%llu extent(s) the file header announces are missing past the end of "
			 "the file (%s): whose records they held is unknown (%s)",
			 (unsigned long long)l->extents,
			 d->cut_short ? "handed out when the recording stopped, or a cut copy"
				      : "a cut or unfinished copy",
			 dlbn_touch_text(it->touches));
		break;
	}
}

static void passive_item(const struct dlbn_model *m, const struct dlbn_analysis *a,
			 const struct dlbn_passive_entry *e, struct dlbn_damage *d)
{
	struct dlbn_damage_item *it = new_item(d, DLBN_DAMAGE_PASSIVE);
	if (!it)
		return;
	const struct dlbn_proc *p = find_proc(m, e->proc_id);
	it->proc_id = e->proc_id;
	it->pid = (int)e->pid;
	it->role = p ? p->role : -1;
	it->err = e->err;
	it->t_from = e->t_ns > (uint64_t)DLBN_TIME_LIMIT ? DLBN_TIME_LIMIT : (int64_t)e->t_ns;
	/* After t nothing of this process is recorded, nor of the processes
	 * that start after the file was marked: before the window's end that
	 * changes the window or the roles; the training process stopping
	 * means its loop may have gone on unrecorded. */
	if (it->role == DLBN_ROLE_TRAINING || it->role < 0 || overlaps(a, it->t_from, it->t_from))
		it->touches = DLBN_TOUCH_YES;
	else if (a && a->steps_window && it->t_from > a->window_end)
		it->touches = DLBN_TOUCH_NO;
	else
		it->touches = DLBN_TOUCH_MAY;
	it->blocks = it->touches != DLBN_TOUCH_NO;
	const char *why = e->err == ENOSPC || e->err == EDQUOT ? "the trace file system is full"
			  : e->err == EFBIG		       ? "the trace file is too large"
			  : e->err == ESTALE		       ? "the trace file was replaced"
					     : "the trace file could not be written";
	char err[64] = "";
	if (e->err > 0)
		snprintf(err, sizeof(err), " (%s)", strerror(e->err));
	snprintf(it->text, sizeof(it->text),
		 "pid %u (%s) stopped recording at t=%.3f s: %s%s; nothing after that is in the "
		 "trace, nor processes started later (%s)",
		 e->pid, role_text(it->role), (double)(it->t_from - m->t0) / 1e9, why, err,
		 dlbn_touch_text(it->touches));
}

void dlbn_damage_assess(const struct dlbn_model *m, const struct dlbn_reader_stats *rs,
			const struct dlbn_analysis *a, struct dlbn_damage *d)
{
	memset(d, 0, sizeof(*d));
	if (!rs || !dlbn_reader_damaged(rs))
		return;
	d->damaged = 1;
	d->cut_short = dlbn_reader_cut_short(rs);
	unsigned kept = rs->nlosses < DLBN_READER_MAX_LOSS ? rs->nlosses : DLBN_READER_MAX_LOSS;
	for (unsigned i = 0; i < kept; i++)
		loss_item(m, a, &rs->losses[i], d);
	for (unsigned i = 0; i < rs->npassive; i++)
		passive_item(m, a, &rs->passive[i], d);
	uint64_t unlisted_loss = rs->nlosses - kept;
	int unlisted_passive = d->cut_short && rs->npassive == 0;
	if (rs->passive_count > rs->npassive)
		unlisted_passive = 1;
	struct dlbn_damage_item *it;
	if (unlisted_passive && (it = new_item(d, DLBN_DAMAGE_PASSIVE))) {
		it->touches = DLBN_TOUCH_MAY;
		it->blocks = 1;
		snprintf(it->text, sizeof(it->text),
			 "%u process(es) stopped recording without saying which or when (the file "
			 "header's flag): the run may go on past the trace (%s)",
			 rs->passive_count > rs->npassive ? rs->passive_count - rs->npassive : 1,
			 dlbn_touch_text(it->touches));
	}
	if (unlisted_loss && (it = new_item(d, DLBN_LOSS_CORRUPT))) {
		it->touches = DLBN_TOUCH_MAY;
		it->blocks = 1;
		snprintf(it->text, sizeof(it->text), "%llu more loss(es) not listed (%s)",
			 (unsigned long long)unlisted_loss, dlbn_touch_text(it->touches));
	}
	if (rs->extents_repaired && (it = new_item(d, DLBN_DAMAGE_REPAIRED))) {
		it->extents = rs->extents_repaired;
		snprintf(it->text, sizeof(it->text),
			 "%llu flipped bit(s) located by their CRC and repaired: nothing lost "
			 "there (the disk or memory that holds the trace flips bits)",
			 (unsigned long long)rs->extents_repaired);
	}
	/* Damage the reader counted without a loss entry (format 1.0 clamps). */
	if (!d->nitems && (it = new_item(d, DLBN_LOSS_CORRUPT))) {
		it->touches = DLBN_TOUCH_MAY;
		it->blocks = 1;
		snprintf(it->text, sizeof(it->text),
			 "%llu corrupt extent(s), records lost at unknown times (%s)",
			 (unsigned long long)rs->extents_corrupt, dlbn_touch_text(it->touches));
	}

	uint64_t lost_ext = 0;
	unsigned lost = 0, stopped = 0;
	const struct dlbn_damage_item *first_block = NULL;
	for (size_t i = 0; i < d->nitems; i++) {
		const struct dlbn_damage_item *x = &d->items[i];
		if (x->kind == DLBN_DAMAGE_PASSIVE)
			stopped++;
		else if (x->kind != DLBN_DAMAGE_REPAIRED) {
			lost++;
			lost_ext += x->extents;
		}
		/* A stopped recording explains the other losses: it is the cause. */
		if (x->blocks && (!first_block || (x->kind == DLBN_DAMAGE_PASSIVE &&
						   first_block->kind != DLBN_DAMAGE_PASSIVE)))
			first_block = x;
	}
	char part[3][90] = {"", "", ""};
	if (lost)
		snprintf(part[0], sizeof(part[0]), "%u loss(es), %llu extent(s) of records%s", lost,
			 (unsigned long long)lost_ext,
			 rs->truncated ? ", the file is truncated" : "");
	if (stopped)
		snprintf(part[1], sizeof(part[1]), "%s%u process(es) stopped recording early",
			 lost ? "; " : "", stopped);
	if (rs->extents_repaired)
		snprintf(part[2], sizeof(part[2]), "%s%llu flipped bit(s) repaired",
			 lost || stopped ? "; " : "", (unsigned long long)rs->extents_repaired);
	snprintf(d->summary, sizeof(d->summary), "%s%s%s: %s", part[0], part[1], part[2],
		 first_block ? "the analysis is affected" : "outside the analysis window");
	if (first_block) {
		d->blocks_verdict = 1;
		int passive = first_block->kind == DLBN_DAMAGE_PASSIVE;
		d->cause = passive ? DLBN_CAUSE_RECORDING_STOPPED : DLBN_CAUSE_DAMAGED_TRACE;
		snprintf(d->reason, sizeof(d->reason),
			 "%s: %.200s; a verdict on what is left would be a guess",
			 passive ? "the run is not all in the trace"
				 : "the trace lost records the "
				   "analysis needs",
			 first_block->text);
	}
}
