/*
 * sweep.c - read the sweep's measured points (see sweep.h) with the
 * strict JSON reader (json_read.h): errors carry the byte offset.
 */
#include <stdlib.h>
#include <string.h>

#include "analysis/sweep.h"
#include "util/json_read.h"

#define MAX_POINTS 4096
#define MAX_BYTES  (16 << 20)

/* The run's own figures, where dlbn-run put them (absent or null: -1). */
static const char *const figures[] = {"batch_size", "num_workers", "units",
				      "loop_ms",    "gpu_step_ms", "batch_ms"};

static int optional_figure(const char *key)
{
	for (size_t i = 0; i < sizeof(figures) / sizeof(figures[0]); i++)
		if (!strcmp(key, figures[i]))
			return 1;
	return 0;
}

static void set_figure(struct dlbn_sweep_point *pt, const char *key, double v)
{
	if (!strcmp(key, "batch_size"))
		pt->batch_size = v;
	else if (!strcmp(key, "num_workers"))
		pt->num_workers = v;
	else if (!strcmp(key, "units"))
		pt->units = v;
	else if (!strcmp(key, "loop_ms"))
		pt->loop_ms = v;
	else if (!strcmp(key, "batch_ms"))
		pt->batch_ms = v;
	else
		pt->gpu_step_ms = v;
}

static int point(struct dlbn_jr *p, struct dlbn_sweep_point *pt)
{
	char key[64];
	int have_setting = 0, have_value = 0, first = 1, rc;
	memset(pt, 0, sizeof(*pt));
	pt->measured_ms = -1;
	pt->batch_size = pt->num_workers = pt->units = -1;
	pt->loop_ms = pt->gpu_step_ms = pt->batch_ms = -1;
	if (dlbn_jr_peek(p) != '{')
		return dlbn_jr_fail(p, "expected an object {setting, value, measured_step_ms}");
	while ((rc = dlbn_jr_member(p, key, sizeof(key), &first)) == 1) {
		int c = dlbn_jr_peek(p);
		if (!strcmp(key, "setting")) {
			if (dlbn_jr_string(p, pt->setting, sizeof(pt->setting)))
				return -1;
			have_setting = 1;
		} else if (!strcmp(key, "value") && (c == 't' || c == 'f')) {
			pt->value = c == 't';
			if (dlbn_jr_literal(p, c == 't' ? "true" : "false"))
				return -1;
			have_value = 1;
		} else if (!strcmp(key, "value")) {
			if (dlbn_jr_number(p, &pt->value))
				return -1;
			have_value = 1;
		} else if ((!strcmp(key, "measured_step_ms") || optional_figure(key)) && c == 'n') {
			if (dlbn_jr_literal(p, "null"))
				return -1;
		} else if (!strcmp(key, "measured_step_ms")) {
			if (dlbn_jr_number(p, &pt->measured_ms))
				return -1;
			if (!(pt->measured_ms > 0))
				return dlbn_jr_fail(p, "measured_step_ms must be positive or null");
		} else if (optional_figure(key)) {
			double v;
			if (dlbn_jr_number(p, &v))
				return -1;
			if (!(v >= 0))
				return dlbn_jr_fail(p, "a run's figure must be >= 0 or null");
			set_figure(pt, key, v);
		} else if (!strcmp(key, "error") && c == '"') {
			if (dlbn_jr_string(p, pt->error, sizeof(pt->error)))
				return -1;
		} else if (dlbn_jr_skip(p)) {
			return -1;
		}
	}
	if (rc < 0)
		return -1;
	if (!have_setting || !have_value)
		return dlbn_jr_fail(p, "a sweep point needs \"setting\" and \"value\"");
	if (pt->units < 0)
		pt->units = pt->num_workers;
	return 0;
}

int dlbn_sweep_parse(struct dlbn_sweep *s, const char *text, size_t len, char *err, size_t errlen)
{
	struct dlbn_jr p;
	size_t cap = 0;
	int first = 1, rc;
	memset(s, 0, sizeof(*s));
	dlbn_jr_init(&p, text, len, err, errlen);
	if (dlbn_jr_peek(&p) != '[') {
		dlbn_jr_fail(&p, "expected a JSON array of sweep points");
		return -1;
	}
	while ((rc = dlbn_jr_element(&p, &first)) == 1) {
		if (s->n == cap) {
			cap = cap ? cap * 2 : 16;
			void *nv = cap <= MAX_POINTS ? realloc(s->v, cap * sizeof(*s->v)) : NULL;
			if (!nv) {
				dlbn_jr_fail(&p,
					     cap > MAX_POINTS ? "more than %d points"
							      : "out of memory",
					     MAX_POINTS);
				goto bad;
			}
			s->v = nv;
		}
		if (point(&p, &s->v[s->n]))
			goto bad;
		s->n++;
	}
	if (rc == 0 && dlbn_jr_end(&p) == 0)
		return 0;
bad:
	dlbn_sweep_free(s);
	return -1;
}

int dlbn_sweep_load(struct dlbn_sweep *s, const char *path, char *err, size_t errlen)
{
	char *text;
	size_t n;
	memset(s, 0, sizeof(*s));
	if (dlbn_jr_load(path, MAX_BYTES, &text, &n, err, errlen) != 0)
		return -1;
	int rc = dlbn_sweep_parse(s, text, n, err, errlen);
	free(text);
	return rc;
}

void dlbn_sweep_free(struct dlbn_sweep *s)
{
	free(s->v);
	s->v = NULL;
	s->n = 0;
}
