/*
 * verdict_int.h - what the verdict's files share and nothing else does:
 * verdict.c (window, stall, speedup, verdict, GPU evidence),
 * verdict_cause.c (the DataLoader's causes), verdict_loaders.c (the causes
 * of the loaders other than torch's DataLoader) and verdict_advice.c (the
 * recommendation that names a count).  The lines of an analysis are written only through these.
 */
#ifndef DLBN_VERDICT_INT_H
#define DLBN_VERDICT_INT_H

#include <math.h>
#include <stdio.h>

#include "analysis/verdict.h"
#include "model/model.h"
#include "util/lines.h"

/* The traced threads use this share of the training process's CPUs: more
 * loader threads or workers would only queue for them. */
#define CORES_FULL_SHARE 0.85

/* A recommendation that names a count of the loader's workers or threads:
 * the line, and its parts for the what-if to settle (struct dlbn_advice). */
void verdict_advise(struct dlbn_analysis *a, const char *knob, const char *name, int from, int to,
		    const char *prefix, const char *fmt, ...) __attribute__((format(printf, 7, 8)));

/* The advice's alternative to more units (struct dlbn_advice alt). */
#define ADVICE_ALT(text) snprintf(a->advice.alt, sizeof(a->advice.alt), "%s", text)

/* Append a line, cut at DLBN_LINE; none past DLBN_MAX_LINES. */
#define REASON(...) DLBN_LINES_ADD(a->reasons, a->nreasons, __VA_ARGS__)
#define REC(...)    DLBN_LINES_ADD(a->recs, a->nrecs, __VA_ARGS__)
#define WARN(...)   DLBN_LINES_ADD(a->warnings, a->nwarnings, __VA_ARGS__)

/* ceil(num / den), immune to a ratio that is whole but for rounding. */
static inline int ceil_ratio(double num, double den)
{
	return (int)ceil(num / den - 1e-6);
}

/* verdict_cause.c: the DataLoader's cause, its reasons and advice (a
 * verdict of DETECTED or POTENTIAL, the window's figures in). */
void verdict_localise(const struct dlbn_model *m, struct dlbn_analysis *a);

/* verdict_loaders.c.  The loop waited: the loader delivered one batch per
 * window step. */
double verdict_loader_period_ms(const struct dlbn_analysis *a);
/* The traced threads fill the job's CPUs, or queue for them. */
int verdict_cores_full(const struct dlbn_config *c, const struct dlbn_analysis *a);
/* DALI: the pipeline's throughput, its operators, what to change. */
void verdict_dali_pipeline(const struct dlbn_model *m, const struct dlbn_config *c,
			   struct dlbn_analysis *a, double period, int cpus_full);
/* A loader other than torch's DataLoader: its cause, reasons and advice in
 * its own terms; 0 (nothing written) for torch's DataLoader. */
int verdict_other_loader(const struct dlbn_model *m, const struct dlbn_config *c,
			 struct dlbn_analysis *a);

#endif /* DLBN_VERDICT_INT_H */
