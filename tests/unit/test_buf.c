/*
 * test_buf.c - the growable byte buffer (analyzer/util/buf.c): its JSON
 * strings are json.c's (one escaping rule for files and buffers), exact
 * integers and microseconds, UTF-8 cleaning for SQLite TEXT, growth.
 */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "util/buf.h"
#include "util/json.h"

static int same_as_file(const char *s, size_t n)
{
	char *file = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&file, &len);
	dlbn_json_string(f, s, n);
	fclose(f);
	struct dlbn_buf b = {0};
	dlbn_buf_json_str(&b, s, n);
	int ok = !b.oom && b.n == len && !memcmp(b.p, file, len);
	if (!ok)
		printf("# file %s, buffer %s\n", file, b.p ? b.p : "(null)");
	free(file);
	dlbn_buf_free(&b);
	return ok;
}

int main(void)
{
	static const struct {
		const char *s;
		size_t n;
	} hostile[] = {
		{"plain", 5},
		{"a\"b\\c", 5},
		{"\r\n\t\x01\x7f", 5},
		{"a\0b", 3},
		{"\xc3\xbc \xc3 \xed\xa0\x80", 9},
		{"\xf0\x9f\x98\x80\xf4\x90\x80\x80", 8},
	};
	int ok = 1;
	for (size_t i = 0; i < sizeof(hostile) / sizeof(hostile[0]); i++)
		ok &= same_as_file(hostile[i].s, hostile[i].n);
	CHECK(ok, "a buffer's JSON string is byte for byte the file writer's");

	struct dlbn_buf b = {0};
	dlbn_buf_int(&b, INT64_MIN);
	dlbn_buf_puts(&b, " ");
	dlbn_buf_us(&b, -1234567);
	dlbn_buf_puts(&b, " ");
	dlbn_buf_us(&b, 5);
	CHECK(!strcmp(b.p, "-9223372036854775808 -1234.567 0.005"),
	      "integers and microseconds (%s)", b.p);
	b.n = 0;
	dlbn_buf_utf8(&b, "\xc3\xbc\xff\0z", 5);
	CHECK(b.n == 8 && !memcmp(b.p, "\xc3\xbc\xc3\xbf\xef\xbf\xbdz", 8),
	      "UTF-8 kept, a stray byte as its Latin-1 character, NUL as U+FFFD");
	b.n = 0;
	for (int i = 0; i < 10000; i++)
		dlbn_buf_put(&b, "0123456789", 10);
	CHECK(!b.oom && b.n == 100000 && b.p[b.n] == 0 && !memcmp(b.p + 99990, "0123456789", 10),
	      "grows, NUL-terminated");
	dlbn_buf_free(&b);
	CHECK(!b.p && !b.n && !b.cap, "freed: empty");
	CHECK_EXIT();
}
