/*
 * sweep.c - read the sweep's measured points (see sweep.h).  A strict
 * little JSON reader: one value per call, nesting bounded, errors carry
 * the byte offset so a broken file is easy to fix.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sweep.h"

#define MAX_DEPTH  32
#define MAX_POINTS 4096
#define MAX_BYTES  (16 << 20)

struct jp {
	const char *s;
	size_t n, i;
	char *err;
	size_t errlen;
	int failed;
};

static int fail(struct jp *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static int fail(struct jp *p, const char *fmt, ...)
{
	if (!p->failed) {
		char msg[200];
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(msg, sizeof(msg), fmt, ap);
		va_end(ap);
		snprintf(p->err, p->errlen, "%s at byte %zu", msg, p->i);
	}
	p->failed = 1;
	return -1;
}

static void ws(struct jp *p)
{
	while (p->i < p->n && strchr(" \t\r\n", p->s[p->i]) && p->s[p->i])
		p->i++;
}

static int peek(struct jp *p)
{
	ws(p);
	return p->i < p->n ? (unsigned char)p->s[p->i] : -1;
}

/* A string into out (cut to outlen - 1 bytes; \u escapes become '?'). */
static int string(struct jp *p, char *out, size_t outlen)
{
	size_t k = 0;
	if (peek(p) != '"')
		return fail(p, "expected a string");
	p->i++;
	while (p->i < p->n && p->s[p->i] != '"') {
		char c = p->s[p->i++];
		if ((unsigned char)c < 0x20)
			return fail(p, "control character in a string");
		if (c == '\\') {
			if (p->i >= p->n)
				break;
			char e = p->s[p->i++];
			const char *from = "\"\\/bfnrt", *to = "\"\\/\b\f\n\r\t";
			const char *f = strchr(from, e);
			if (e == 'u') {
				if (p->i + 4 > p->n)
					return fail(p, "short \\u escape");
				p->i += 4;
				c = '?';
			} else if (f && e) {
				c = to[f - from];
			} else {
				return fail(p, "bad escape");
			}
		}
		if (out && k + 1 < outlen)
			out[k++] = c;
	}
	if (p->i >= p->n)
		return fail(p, "unterminated string");
	p->i++;
	if (out)
		out[k] = 0;
	return 0;
}

static int number(struct jp *p, double *v)
{
	char buf[64];
	size_t k = 0;
	ws(p);
	while (p->i < p->n && k + 1 < sizeof(buf) && strchr("+-0123456789.eE", p->s[p->i]) &&
	       p->s[p->i])
		buf[k++] = p->s[p->i++];
	buf[k] = 0;
	char *end;
	errno = 0;
	*v = strtod(buf, &end);
	if (!k || *end || errno)
		return fail(p, "bad number");
	return 0;
}

static int literal(struct jp *p, const char *word)
{
	size_t l = strlen(word);
	if (p->i + l > p->n || memcmp(p->s + p->i, word, l) != 0)
		return fail(p, "unexpected character");
	p->i += l;
	return 0;
}

/* Skip any value. */
static int skip(struct jp *p, int depth)
{
	int c = peek(p);
	double d;
	if (depth > MAX_DEPTH)
		return fail(p, "nested too deep");
	if (c == '"')
		return string(p, NULL, 0);
	if (c == '{' || c == '[') {
		int close = c == '{' ? '}' : ']';
		p->i++;
		if (peek(p) == close) {
			p->i++;
			return 0;
		}
		for (;;) {
			if (c == '{') {
				if (string(p, NULL, 0) || peek(p) != ':')
					return fail(p, "expected a member");
				p->i++;
			}
			if (skip(p, depth + 1))
				return -1;
			int n = peek(p);
			p->i++;
			if (n == close)
				return 0;
			if (n != ',')
				return fail(p, "expected ',' or '%c'", close);
		}
	}
	if (c == 't')
		return literal(p, "true");
	if (c == 'f')
		return literal(p, "false");
	if (c == 'n')
		return literal(p, "null");
	return number(p, &d);
}

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

static int point(struct jp *p, struct dlbn_sweep_point *pt)
{
	char key[64];
	int have_setting = 0, have_value = 0;
	memset(pt, 0, sizeof(*pt));
	pt->measured_ms = -1;
	pt->batch_size = pt->num_workers = pt->units = -1;
	pt->loop_ms = pt->gpu_step_ms = pt->batch_ms = -1;
	if (peek(p) != '{')
		return fail(p, "expected an object {setting, value, measured_step_ms}");
	p->i++;
	if (peek(p) == '}')
		return fail(p, "empty sweep point");
	for (;;) {
		if (string(p, key, sizeof(key)) || peek(p) != ':')
			return fail(p, "expected a member");
		p->i++;
		int c = peek(p);
		if (!strcmp(key, "setting")) {
			if (string(p, pt->setting, sizeof(pt->setting)))
				return -1;
			have_setting = 1;
		} else if (!strcmp(key, "value") && (c == 't' || c == 'f')) {
			pt->value = c == 't';
			if (literal(p, c == 't' ? "true" : "false"))
				return -1;
			have_value = 1;
		} else if (!strcmp(key, "value")) {
			if (number(p, &pt->value))
				return -1;
			have_value = 1;
		} else if (!strcmp(key, "measured_step_ms") && c == 'n') {
			if (literal(p, "null"))
				return -1;
		} else if (!strcmp(key, "measured_step_ms")) {
			if (number(p, &pt->measured_ms))
				return -1;
			if (!(pt->measured_ms > 0))
				return fail(p, "measured_step_ms must be positive or null");
		} else if (optional_figure(key) && c == 'n') {
			if (literal(p, "null"))
				return -1;
		} else if (optional_figure(key)) {
			double v;
			if (number(p, &v))
				return -1;
			if (!(v >= 0))
				return fail(p, "a run's figure must be >= 0 or null");
			set_figure(pt, key, v);
		} else if (!strcmp(key, "error") && c == '"') {
			if (string(p, pt->error, sizeof(pt->error)))
				return -1;
		} else if (skip(p, 1)) {
			return -1;
		}
		int n = peek(p);
		p->i++;
		if (n == '}')
			break;
		if (n != ',')
			return fail(p, "expected ',' or '}'");
	}
	if (!have_setting || !have_value)
		return fail(p, "a sweep point needs \"setting\" and \"value\"");
	if (pt->units < 0)
		pt->units = pt->num_workers;
	return 0;
}

int dlbn_sweep_parse(struct dlbn_sweep *s, const char *text, size_t len, char *err, size_t errlen)
{
	struct jp p = {text, len, 0, err, errlen, 0};
	size_t cap = 0;
	memset(s, 0, sizeof(*s));
	if (peek(&p) != '[') {
		fail(&p, "expected a JSON array of sweep points");
		return -1;
	}
	p.i++;
	if (peek(&p) == ']') {
		p.i++;
	} else {
		for (;;) {
			if (s->n == cap) {
				cap = cap ? cap * 2 : 16;
				void *nv = cap <= MAX_POINTS ? realloc(s->v, cap * sizeof(*s->v))
							     : NULL;
				if (!nv) {
					fail(&p,
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
			int c = peek(&p);
			p.i++;
			if (c == ']')
				break;
			if (c != ',') {
				fail(&p, "expected ',' or ']'");
				goto bad;
			}
		}
	}
	if (peek(&p) != -1) {
		fail(&p, "trailing data after the array");
		goto bad;
	}
	return 0;
bad:
	dlbn_sweep_free(s);
	return -1;
}

int dlbn_sweep_load(struct dlbn_sweep *s, const char *path, char *err, size_t errlen)
{
	memset(s, 0, sizeof(*s));
	FILE *f = fopen(path, "rb");
	if (!f) {
		snprintf(err, errlen, "%s", strerror(errno));
		return -1;
	}
	char *buf = malloc(MAX_BYTES);
	size_t n = buf ? fread(buf, 1, MAX_BYTES, f) : 0;
	int bad = ferror(f) || !buf, big = buf && n == MAX_BYTES;
	fclose(f);
	if (bad || big) {
		snprintf(err, errlen, "%s",
			 !buf  ? "out of memory"
			 : big ? "file too large"
			       : "read error");
		free(buf);
		return -1;
	}
	int rc = dlbn_sweep_parse(s, buf, n, err, errlen);
	free(buf);
	return rc;
}

void dlbn_sweep_free(struct dlbn_sweep *s)
{
	free(s->v);
	s->v = NULL;
	s->n = 0;
}
