/*
 * baseline.h - measured confirmation (docs/DESIGN.md, "Replay and ground truth"):
 * compare the analysed ("Real") trace with a Replay run of the same training
 * (`dlbn-run --replay N`, the DataLoader's output replaced by N cached
 * batches) and report the measured speedup next to the predicted one.
 *
 *     measured_speedup = Real wall / Replay wall over the same steps
 *
 * The steps are the Real analysis' steady-state window: from the end of
 * step k0-1 (the last warm-up step) to the end of the last window step,
 * aligned by step index in both runs - the rule the reference method and
 * tests/e2e/workload.py use.  The Replay trace goes through the same code
 * path as the Real one (reader, model, GPU split, analysis), with the Real
 * trace's view forced so that the steps mean the same thing.
 *
 * Equivalence (did both runs do the same work?): same step count and
 * epochs, same loader configuration apart from replay= and the loader's
 * object id, the baseline really is a Replay run (CONFIG replay=N >= 1)
 * and the analysed one is not, and - when the IPC view saw hand-offs in
 * both - the same mean message bytes per batch (within 10%).  Every
 * failed check adds a note; notes also explain what was not compared.
 */
#ifndef DLBN_BASELINE_H
#define DLBN_BASELINE_H

#include <stddef.h>
#include <stdio.h>

#include "analysis/verdict.h"
#include "model/model.h"

#define DLBN_BASELINE_BYTES_TOLERANCE 0.10

struct dlbn_baseline {
	const char *path;   /* the Replay trace (not owned) */
	int replay_batches; /* replay=N of its CONFIG; -1 absent */
	size_t real_steps, replay_steps;
	int real_epochs, replay_epochs;
	size_t first_step, last_step; /* wall = end of last_step - end of first_step */
	double real_wall_s, replay_wall_s;
	double measured_speedup; /* 0: not measurable (see notes) */
	/* The Real analysis' prediction (0: none); without a wrapper iterable's
	 * part when the Replay run kept it (baseline.c kept_wrapper). */
	double predicted_speedup;
	double error_pct; /* (predicted / measured - 1) x 100; valid iff has_error */
	int has_error;
	double replay_own_speedup; /* the Replay trace's own prediction, less a kept
				    * wrapper's work (~1 expected) */
	int equivalent;
	size_t nnotes;
	char notes[DLBN_MAX_LINES][DLBN_LINE];
};

/*
 * Compare two analysed traces (both models built, both analysed).  Never
 * fails: what cannot be measured or compared becomes a note.  The readers
 * the models were built from (or NULL) serve to find step ends the models
 * do not keep (they are read again only when the two runs' steps differ).
 */
void dlbn_baseline_compare(struct dlbn_baseline *b, const char *replay_path,
			   struct dlbn_reader *real_r, const struct dlbn_model *real_m,
			   const struct dlbn_analysis *real_a, struct dlbn_reader *replay_r,
			   const struct dlbn_model *replay_m, const struct dlbn_analysis *replay_a);

/*
 * Read, model and analyse the Replay trace at `path` the way dlbn-analyze
 * does the Real one (options mo/vo, view forced to real_m's), then compare.
 * 0 on success; -1 the trace cannot be read (message in err); -2 out of
 * memory.  A damaged but readable Replay trace is compared, with a note.
 */
int dlbn_baseline_load(struct dlbn_baseline *b, const char *path, const struct dlbn_model_opts *mo,
		       const struct dlbn_verdict_opts *vo, struct dlbn_reader *real_r,
		       const struct dlbn_model *real_m, const struct dlbn_analysis *real_a,
		       char *err, size_t errlen);

/* The value of the report's "baseline" key (an object). */
void dlbn_baseline_json(FILE *out, const struct dlbn_baseline *b);
/* The text report's lines (also used, indented, by the Markdown report). */
void dlbn_baseline_text(FILE *out, const struct dlbn_baseline *b);

#endif /* DLBN_BASELINE_H */
