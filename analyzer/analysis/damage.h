/*
 * damage.h - what a damaged or cut-short trace lost, held against the
 * analysis: which processes (and the roles the model gave them), how many
 * extents and bytes, which time ranges, and whether that touches the
 * analysis window.  The reader finds the damage (reader.h: losses,
 * passive); this module judges it.
 *
 * Layer: on the model and the window, beside the verdict.  verdict.c makes
 * the verdict INCONCLUSIVE when blocks_verdict is set; the reports and the
 * exports print the items.  The rule is conservative, because the roles,
 * the steps and the window all come from the records: a loss blocks the
 * verdict when it meets the window or its process or times are unknown,
 * when it is the training process's (steps, window, loader configuration),
 * or when it took a process's PROCESS record; so does a process that
 * stopped recording before the window ended, or the training process
 * stopping at all (its loop may have gone on unrecorded).  A flipped bit
 * the reader repaired loses nothing and blocks nothing.
 */
#ifndef DLBN_DAMAGE_H
#define DLBN_DAMAGE_H

#include "analysis/verdict.h"
#include "model/model.h"
#include "trace/reader.h"

#define DLBN_DAMAGE_PASSIVE   100 /* item kind beside DLBN_LOSS_*: stopped recording */
#define DLBN_DAMAGE_REPAIRED  101 /* item kind: flipped bits repaired, nothing lost */
#define DLBN_DAMAGE_MAX_ITEMS 48

enum dlbn_touch { DLBN_TOUCH_NO = 0, DLBN_TOUCH_YES = 1, DLBN_TOUCH_MAY = 2 };

struct dlbn_damage_item {
	int kind;	      /* DLBN_LOSS_*, DLBN_DAMAGE_PASSIVE, DLBN_DAMAGE_REPAIRED */
	int64_t proc_id;      /* -1 unknown */
	int pid;	      /* 0 unknown */
	int role;	      /* DLBN_ROLE_*, -1 unknown */
	uint64_t extents;     /* extents lost (REPAIRED: extents repaired) */
	uint64_t bytes;	      /* record bytes lost, 0 unknown */
	int64_t t_from, t_to; /* absolute ns or DLBN_LOSS_T_UNKNOWN */
	int err;	      /* PASSIVE: errno */
	int touches;	      /* DLBN_TOUCH_*: the analysis window */
	int blocks;	      /* the verdict cannot stand with this loss */
	char text[DLBN_LINE]; /* one line for the reports */
};

struct dlbn_damage {
	int damaged;	       /* dlbn_reader_damaged: exit status 1 */
	int cut_short;	       /* some process stopped recording */
	int blocks_verdict;    /* the verdict cannot stand: INCONCLUSIVE */
	enum dlbn_cause cause; /* DAMAGED_TRACE or RECORDING_STOPPED (when blocking) */
	char reason[DLBN_LINE];
	char summary[DLBN_LINE]; /* one line, empty when not damaged */
	size_t nitems;
	unsigned more; /* items not kept */
	struct dlbn_damage_item items[DLBN_DAMAGE_MAX_ITEMS];
};

/* Fill d from the reader's findings; a: the analysis (window), or NULL. */
void dlbn_damage_assess(const struct dlbn_model *m, const struct dlbn_reader_stats *rs,
			const struct dlbn_analysis *a, struct dlbn_damage *d);

/* "in the window", "outside the window", "may touch the window". */
const char *dlbn_touch_text(int touches);
/* Short kind names for JSON / SQLite: corrupt, cut, gap, header, missing,
 * stopped, repaired. */
const char *dlbn_damage_kind_name(int kind);

#endif /* DLBN_DAMAGE_H */
