/*
 * buf.c - the growable byte buffer (see buf.h).
 */
#include <stdlib.h>
#include <string.h>

#include "util/buf.h"
#include "util/json.h"

static int buf_reserve(struct dlbn_buf *b, size_t more)
{
	if (b->n + more + 1 <= b->cap)
		return 0;
	size_t cap = b->cap ? b->cap : 256;
	while (cap < b->n + more + 1)
		cap *= 2;
	char *p = realloc(b->p, cap);
	if (!p) {
		b->oom = 1;
		return -1;
	}
	b->p = p;
	b->cap = cap;
	return 0;
}

void dlbn_buf_put(struct dlbn_buf *b, const char *s, size_t n)
{
	if (buf_reserve(b, n))
		return;
	memcpy(b->p + b->n, s, n);
	b->n += n;
	b->p[b->n] = 0;
}

void dlbn_buf_puts(struct dlbn_buf *b, const char *s)
{
	dlbn_buf_put(b, s, strlen(s));
}

void dlbn_buf_int(struct dlbn_buf *b, int64_t v)
{
	char tmp[24];
	char *e = tmp + sizeof(tmp), *s = e;
	uint64_t u = v < 0 ? 0 - (uint64_t)v : (uint64_t)v;
	do
		*--s = (char)('0' + u % 10);
	while (u /= 10);
	if (v < 0)
		*--s = '-';
	dlbn_buf_put(b, s, (size_t)(e - s));
}

void dlbn_buf_us(struct dlbn_buf *b, int64_t ns)
{
	char frac[4];
	uint64_t u = ns < 0 ? 0 - (uint64_t)ns : (uint64_t)ns;
	if (ns < 0)
		dlbn_buf_put(b, "-", 1);
	dlbn_buf_int(b, (int64_t)(u / 1000));
	unsigned r = (unsigned)(u % 1000);
	frac[0] = '.';
	frac[1] = (char)('0' + r / 100);
	frac[2] = (char)('0' + r / 10 % 10);
	frac[3] = (char)('0' + r % 10);
	dlbn_buf_put(b, frac, 4);
}

static void put_buf(void *ctx, const char *s, size_t n)
{
	dlbn_buf_put(ctx, s, n);
}

void dlbn_buf_json_str(struct dlbn_buf *b, const char *s, size_t n)
{
	if (buf_reserve(b, n + 2)) /* the common case in one allocation */
		return;
	dlbn_buf_put(b, "\"", 1);
	dlbn_json_escape(s, n, put_buf, b);
	dlbn_buf_put(b, "\"", 1);
}

void dlbn_buf_utf8(struct dlbn_buf *b, const char *s, size_t n)
{
	static const char replacement[] = "\xef\xbf\xbd"; /* U+FFFD */
	const unsigned char *u = (const unsigned char *)s;
	size_t run = 0;
	for (size_t i = 0; i < n;) {
		if (u[i] && u[i] < 0x80) {
			i++;
			continue;
		}
		size_t ul = u[i] ? dlbn_utf8_len(u + i, n - i) : 0;
		if (ul) {
			i += ul;
			continue;
		}
		dlbn_buf_put(b, s + run, i - run);
		if (u[i]) { /* U+0080..U+00FF, as the JSON writers' \u00XX reads */
			char latin1[2] = {(char)(0xc0 | u[i] >> 6), (char)(0x80 | (u[i] & 0x3f))};
			dlbn_buf_put(b, latin1, 2);
		} else {
			dlbn_buf_put(b, replacement, 3);
		}
		run = ++i;
	}
	dlbn_buf_put(b, s + run, n - run);
}

void dlbn_buf_free(struct dlbn_buf *b)
{
	free(b->p);
	memset(b, 0, sizeof(*b));
}
