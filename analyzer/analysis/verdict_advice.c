/*
 * verdict_advice.c - the recommendation that names a count of the loader's
 * own workers or threads: kept in parts (struct dlbn_advice in verdict.h)
 * beside its line in recs, so that the what-if, which models every count,
 * can settle the count and rewrite the line (dlbn_advice_format).  The
 * verdict's files and the what-if call in here; it calls none of them.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "analysis/verdict_int.h"

void dlbn_advice_format(struct dlbn_analysis *a)
{
	const struct dlbn_advice *v = &a->advice;
	if (!v->present)
		return;
	/* Cut at DLBN_LINE, as the other lines are. */
	char *line = a->recs[v->rec];
	int len = snprintf(line, DLBN_LINE, "%s%s %d -> %d", v->prefix, v->name, v->from, v->to);
	if (len >= 0 && len < DLBN_LINE)
		snprintf(line + len, DLBN_LINE - (size_t)len, "%s", v->suffix);
}

void verdict_advise(struct dlbn_analysis *a, const char *knob, const char *name, int from, int to,
		    const char *prefix, const char *fmt, ...)
{
	struct dlbn_advice *v = &a->advice;
	if (a->nrecs >= DLBN_MAX_LINES)
		return;
	memset(v, 0, sizeof(*v));
	v->present = 1;
	v->rec = a->nrecs++;
	snprintf(v->knob, sizeof(v->knob), "%s", knob);
	snprintf(v->name, sizeof(v->name), "%s", name);
	snprintf(v->prefix, sizeof(v->prefix), "%s", prefix);
	v->from = from;
	v->to = to;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(v->suffix, sizeof(v->suffix), fmt, ap);
	va_end(ap);
	dlbn_advice_format(a);
}
