/*
 * sweep.h - measured sweep points for the HTML report's what-if curve
 * (--sweep-results FILE), as `dlbn-run --sweep` writes them: a JSON array
 * of objects
 *
 *   [{"setting": "num_workers", "value": 4, "measured_step_ms": 12.3},
 *    {"setting": "num_workers", "value": 8, "measured_step_ms": null,
 *     "error": "worker killed (out of memory?)"}, ...]
 *
 * Other members are ignored; "value" may be a number or a boolean;
 * measured_step_ms null (or absent) with an "error" string is a run that
 * failed.  The run's own figures, where present (numbers >= 0 or null):
 * batch_size and num_workers (what the run had: a grid sweep changes two
 * settings), units (its count of the what-if curve's setting: DALI's
 * threads; num_workers when absent), loop_ms, gpu_step_ms and batch_ms (its
 * what-if basis: the
 * what-if splits the loop's and the GPU's time per step and the loader's
 * time per batch into a fixed part and one that grows with the batch from
 * points of another batch size).  Depends
 * on libc only (a small JSON reader of its own).
 */
#ifndef DLBN_SWEEP_H
#define DLBN_SWEEP_H

#include <stddef.h>

struct dlbn_sweep_point {
	char setting[32];
	double value;
	double measured_ms; /* < 0: the run failed (or no figure) */
	char error[160];    /* "" none */
	/* The run's own figures; < 0: not given.  units: its count of the
	 * what-if curve's setting (DALI's threads), num_workers where absent. */
	double batch_size, num_workers, units;
	double loop_ms, gpu_step_ms, batch_ms;
};

struct dlbn_sweep {
	struct dlbn_sweep_point *v;
	size_t n;
};

/* Read path; 0, or -1 with a one-line reason in err (nothing kept). */
int dlbn_sweep_load(struct dlbn_sweep *s, const char *path, char *err, size_t errlen);
/* Parse text (len bytes); same contract (tests). */
int dlbn_sweep_parse(struct dlbn_sweep *s, const char *text, size_t len, char *err, size_t errlen);
void dlbn_sweep_free(struct dlbn_sweep *s);

#endif /* DLBN_SWEEP_H */
