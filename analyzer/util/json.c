/*
 * json.c - JSON string escaping, number formatting and the key helpers
 * (see json.h).
 */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "util/json.h"

size_t dlbn_utf8_len(const unsigned char *s, size_t n)
{
	size_t need;
	uint32_t c;
	if (s[0] < 0xc2)
		return 0;
	if (s[0] < 0xe0) {
		need = 2;
		c = s[0] & 0x1f;
	} else if (s[0] < 0xf0) {
		need = 3;
		c = s[0] & 0x0f;
	} else if (s[0] < 0xf5) {
		need = 4;
		c = s[0] & 0x07;
	} else {
		return 0;
	}
	if (need > n)
		return 0;
	for (size_t i = 1; i < need; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		c = c << 6 | (s[i] & 0x3f);
	}
	/* overlong forms, surrogates and > U+10FFFF are not valid UTF-8 */
	if ((need == 3 && c < 0x800) || (need == 4 && (c < 0x10000 || c > 0x10ffff)) ||
	    (c >= 0xd800 && c <= 0xdfff))
		return 0;
	return need;
}

void dlbn_json_escape(const char *s, size_t len, dlbn_json_put_fn put, void *ctx)
{
	static const char hex[] = "0123456789abcdef";
	const unsigned char *u = (const unsigned char *)s;
	size_t run = 0; /* start of the pending run of bytes that pass as they are */
	for (size_t i = 0; i < len;) {
		unsigned char c = u[i];
		if (c >= 0x20 && c != '"' && c != '\\' && c < 0x7f) {
			i++;
			continue;
		}
		size_t ul = c >= 0x80 ? dlbn_utf8_len(u + i, len - i) : 0;
		if (ul) {
			i += ul;
			continue;
		}
		if (i > run)
			put(ctx, s + run, i - run);
		/* a control, or a byte of no valid sequence: \u00XX */
		char esc[6] = {'\\', 'u', '0', '0', hex[c >> 4], hex[c & 15]};
		if (c == '"' || c == '\\') {
			esc[1] = (char)c;
			put(ctx, esc, 2);
		} else if (c == '\n') {
			put(ctx, "\\n", 2);
		} else if (c == '\r') {
			put(ctx, "\\r", 2);
		} else if (c == '\t') {
			put(ctx, "\\t", 2);
		} else {
			put(ctx, esc, 6);
		}
		run = ++i;
	}
	if (len > run)
		put(ctx, s + run, len - run);
}

static void put_file(void *ctx, const char *s, size_t n)
{
	fwrite(s, 1, n, ctx);
}

void dlbn_json_string(FILE *out, const char *s, size_t len)
{
	fputc('"', out);
	dlbn_json_escape(s, len, put_file, out);
	fputc('"', out);
}

void dlbn_json_str(FILE *out, const char *s)
{
	dlbn_json_string(out, s, strlen(s));
}

void dlbn_json_number(FILE *out, double v)
{
	if (isfinite(v))
		fprintf(out, "%.6g", v);
	else
		fputs("null", out);
}

void dlbn_json_key(FILE *out, const char *k, int *first)
{
	dlbn_json_item(out, first);
	dlbn_json_str(out, k);
	fputc(':', out);
}

void dlbn_json_item(FILE *out, int *first)
{
	if (!*first)
		fputc(',', out);
	*first = 0;
}

int dlbn_json_open(FILE *out, const char *k, char bracket, int *first)
{
	if (k)
		dlbn_json_key(out, k, first);
	else
		dlbn_json_item(out, first);
	fputc(bracket, out);
	return 1;
}

void dlbn_json_key_number(FILE *out, const char *k, double v, int *first)
{
	dlbn_json_key(out, k, first);
	dlbn_json_number(out, v);
}

void dlbn_json_key_number_or_null(FILE *out, const char *k, double v, int known, int *first)
{
	dlbn_json_key(out, k, first);
	if (known)
		dlbn_json_number(out, v);
	else
		fputs("null", out);
}

void dlbn_json_key_int(FILE *out, const char *k, long long v, int *first)
{
	dlbn_json_key(out, k, first);
	fprintf(out, "%lld", v);
}

void dlbn_json_key_int_or_null(FILE *out, const char *k, long long v, int known, int *first)
{
	dlbn_json_key(out, k, first);
	if (known)
		fprintf(out, "%lld", v);
	else
		fputs("null", out);
}

void dlbn_json_key_uint(FILE *out, const char *k, unsigned long long v, int *first)
{
	dlbn_json_key(out, k, first);
	fprintf(out, "%llu", v);
}

void dlbn_json_key_str(FILE *out, const char *k, const char *s, int *first)
{
	dlbn_json_key(out, k, first);
	dlbn_json_str(out, s);
}

void dlbn_json_key_str_or_null(FILE *out, const char *k, const char *s, int known, int *first)
{
	dlbn_json_key(out, k, first);
	if (known)
		dlbn_json_str(out, s);
	else
		fputs("null", out);
}

void dlbn_json_key_bool(FILE *out, const char *k, int v, int *first)
{
	dlbn_json_key(out, k, first);
	fputs(v ? "true" : "false", out);
}

void dlbn_json_key_null(FILE *out, const char *k, int *first)
{
	dlbn_json_key(out, k, first);
	fputs("null", out);
}

void dlbn_json_key_lines(FILE *out, const char *k, const char *lines, size_t stride, size_t n,
			 int *first)
{
	int items = dlbn_json_open(out, k, '[', first);
	for (size_t i = 0; i < n; i++) {
		dlbn_json_item(out, &items);
		dlbn_json_str(out, lines + i * stride);
	}
	fputc(']', out);
}
