/*
 * json_read.c - the strict JSON reader of json_read.h.
 */
#include <errno.h>
#include <stdint.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/json_read.h"

#define MAX_DEPTH 32

void dlbn_jr_init(struct dlbn_jr *p, const char *text, size_t len, char *err, size_t errlen)
{
	*p = (struct dlbn_jr){.s = text, .n = len, .err = err, .errlen = errlen};
	if (errlen)
		err[0] = 0;
}

int dlbn_jr_fail(struct dlbn_jr *p, const char *fmt, ...)
{
	if (!p->failed && p->errlen) {
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

int dlbn_jr_peek(struct dlbn_jr *p)
{
	while (p->i < p->n && p->s[p->i] && strchr(" \t\r\n", p->s[p->i]))
		p->i++;
	return p->i < p->n ? (unsigned char)p->s[p->i] : -1;
}

/* The four hex digits after "\\u": their value, or -1 (error set). */
static int unicode_escape(struct dlbn_jr *p)
{
	int u = 0;
	if (p->i + 4 > p->n)
		return dlbn_jr_fail(p, "short \\u escape");
	for (int k = 0; k < 4; k++) {
		char h = p->s[p->i++];
		int d = h >= '0' && h <= '9'   ? h - '0'
			: h >= 'a' && h <= 'f' ? h - 'a' + 10
			: h >= 'A' && h <= 'F' ? h - 'A' + 10
					       : -1;
		if (d < 0)
			return dlbn_jr_fail(p, "bad \\u escape");
		u = u * 16 + d;
	}
	return u;
}

int dlbn_jr_string(struct dlbn_jr *p, char *out, size_t outlen)
{
	size_t k = 0;
	if (p->failed)
		return -1;
	if (dlbn_jr_peek(p) != '"')
		return dlbn_jr_fail(p, "expected a string");
	p->i++;
	while (p->i < p->n && p->s[p->i] != '"') {
		char c = p->s[p->i++];
		if ((unsigned char)c < 0x20)
			return dlbn_jr_fail(p, "control character in a string");
		if (c == '\\') {
			if (p->i >= p->n)
				break;
			char e = p->s[p->i++];
			const char *from = "\"\\/bfnrt", *to = "\"\\/\b\f\n\r\t";
			const char *f = e ? strchr(from, e) : NULL;
			if (e == 'u') {
				int u = unicode_escape(p);
				if (u < 0)
					return -1;
				/* \u0000..\u00ff: the byte json.h wrote it for. */
				c = u < 0x100 && u > 0 ? (char)u : '?';
			} else if (f) {
				c = to[f - from];
			} else {
				return dlbn_jr_fail(p, "bad escape");
			}
		}
		if (out && k + 1 < outlen)
			out[k++] = c;
	}
	if (p->i >= p->n)
		return dlbn_jr_fail(p, "unterminated string");
	p->i++;
	if (out && outlen)
		out[k] = 0;
	return 0;
}

/* The run of bytes from chars at the cursor, into buf (cut to len - 1):
 * its length. */
static size_t token(struct dlbn_jr *p, char *buf, size_t len, const char *chars)
{
	size_t k = 0;
	dlbn_jr_peek(p);
	while (p->i < p->n && k + 1 < len && p->s[p->i] && strchr(chars, p->s[p->i]))
		buf[k++] = p->s[p->i++];
	buf[k] = 0;
	return k;
}

int dlbn_jr_number(struct dlbn_jr *p, double *v)
{
	char buf[64], *end;
	if (p->failed)
		return -1;
	size_t k = token(p, buf, sizeof(buf), "+-0123456789.eE");
	errno = 0;
	*v = strtod(buf, &end);
	if (!k || *end || errno)
		return dlbn_jr_fail(p, "bad number");
	return 0;
}

int dlbn_jr_uint(struct dlbn_jr *p, uint64_t *v)
{
	char buf[32], *end;
	if (p->failed)
		return -1;
	size_t k = token(p, buf, sizeof(buf), "0123456789");
	errno = 0;
	unsigned long long u = strtoull(buf, &end, 10);
	if (!k || *end || errno || (p->i < p->n && p->s[p->i] && strchr(".eE", p->s[p->i])))
		return dlbn_jr_fail(p, "expected a whole number");
	*v = u;
	return 0;
}

int dlbn_jr_literal(struct dlbn_jr *p, const char *word)
{
	size_t l = strlen(word);
	if (p->failed)
		return -1;
	dlbn_jr_peek(p);
	if (p->i + l > p->n || memcmp(p->s + p->i, word, l) != 0)
		return dlbn_jr_fail(p, "unexpected character");
	p->i += l;
	return 0;
}

/* The members or elements of the container at the cursor. */
static int skip_value(struct dlbn_jr *p, int depth);

static int skip_items(struct dlbn_jr *p, int open, int depth)
{
	int first = 1, rc;
	char key[8];
	if (open == '{') {
		while ((rc = dlbn_jr_member(p, key, sizeof(key), &first)) == 1)
			if (skip_value(p, depth + 1))
				return -1;
	} else {
		while ((rc = dlbn_jr_element(p, &first)) == 1)
			if (skip_value(p, depth + 1))
				return -1;
	}
	return rc;
}

static int skip_value(struct dlbn_jr *p, int depth)
{
	int c = dlbn_jr_peek(p);
	double d;
	if (depth > MAX_DEPTH)
		return dlbn_jr_fail(p, "nested too deep");
	switch (c) {
	case '"':
		return dlbn_jr_string(p, NULL, 0);
	case '{':
	case '[':
		return skip_items(p, c, depth);
	case 't':
		return dlbn_jr_literal(p, "true");
	case 'f':
		return dlbn_jr_literal(p, "false");
	case 'n':
		return dlbn_jr_literal(p, "null");
	default:
		return dlbn_jr_number(p, &d);
	}
}

int dlbn_jr_skip(struct dlbn_jr *p)
{
	return p->failed ? -1 : skip_value(p, 0);
}

/* Before an item: the opening bracket (first), else ',' or the closing
 * one.  1 an item follows, 0 closed, -1 error. */
static int next_item(struct dlbn_jr *p, int open, int close, int *first)
{
	if (p->failed)
		return -1;
	int c = dlbn_jr_peek(p);
	if (*first) {
		if (c != open)
			return dlbn_jr_fail(p, "expected '%c'", open);
		p->i++;
		*first = 0;
		if (dlbn_jr_peek(p) == close) {
			p->i++;
			return 0;
		}
		return 1;
	}
	p->i++;
	if (c == close)
		return 0;
	if (c != ',')
		return dlbn_jr_fail(p, "expected ',' or '%c'", close);
	return 1;
}

int dlbn_jr_member(struct dlbn_jr *p, char *key, size_t keylen, int *first)
{
	int rc = next_item(p, '{', '}', first);
	if (rc != 1)
		return rc;
	if (dlbn_jr_string(p, key, keylen) || dlbn_jr_peek(p) != ':')
		return dlbn_jr_fail(p, "expected a member");
	p->i++;
	return 1;
}

int dlbn_jr_element(struct dlbn_jr *p, int *first)
{
	return next_item(p, '[', ']', first);
}

int dlbn_jr_end(struct dlbn_jr *p)
{
	if (p->failed)
		return -1;
	return dlbn_jr_peek(p) == -1 ? 0 : dlbn_jr_fail(p, "trailing data");
}

int dlbn_jr_load(const char *path, size_t max_bytes, char **text, size_t *len, char *err,
		 size_t errlen)
{
	*text = NULL;
	*len = 0;
	FILE *f = fopen(path, "rb");
	if (!f) {
		snprintf(err, errlen, "%s", strerror(errno));
		return -1;
	}
	char *buf = malloc(max_bytes + 1);
	size_t n = buf ? fread(buf, 1, max_bytes + 1, f) : 0;
	int bad = ferror(f) || !buf, big = buf && n > max_bytes;
	fclose(f);
	if (bad || big) {
		snprintf(err, errlen, "%s",
			 !buf  ? "out of memory"
			 : big ? "file too large"
			       : "read error");
		free(buf);
		return -1;
	}
	buf[n] = 0;
	*text = buf;
	*len = n;
	return 0;
}
