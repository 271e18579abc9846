/*
 * test_json.c - json.c: strings of unknown encoding always give valid JSON,
 * valid UTF-8 passes through whole (one escape per byte made "ü" read as
 * "Ã¼"), other bytes and controls are escaped, numbers never print inf/nan.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "util/json.h"

static char *render_string(const char *s, size_t n)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	dlbn_json_string(f, s, n);
	fclose(f);
	return buf;
}

static int renders_as(const char *s, size_t n, const char *want)
{
	char *got = render_string(s, n);
	int ok = strcmp(got, want) == 0;
	if (!ok)
		printf("# got %s, want %s\n", got, want);
	free(got);
	return ok;
}

int main(void)
{
	CHECK(renders_as("a\"b\\c", 5, "\"a\\\"b\\\\c\""), "quotes and backslashes escaped");
	CHECK(renders_as("\xc3\xbc", 2, "\"\xc3\xbc\""), "two-byte UTF-8 (u-umlaut) passes whole");
	CHECK(renders_as("\xe2\x82\xac\xf0\x9f\x98\x80", 7, "\"\xe2\x82\xac\xf0\x9f\x98\x80\""),
	      "three- and four-byte UTF-8 pass whole");
	CHECK(renders_as("\xc3", 1, "\"\\u00c3\""), "a cut sequence is escaped byte by byte");
	CHECK(renders_as("\xc0\xaf", 2, "\"\\u00c0\\u00af\""), "an overlong form is escaped");
	CHECK(renders_as("\xed\xa0\x80", 3, "\"\\u00ed\\u00a0\\u0080\""), "a surrogate is escaped");
	CHECK(renders_as("\x01\n\t\x7f", 4, "\"\\u0001\\n\\t\\u007f\""), "controls escaped");
	CHECK(renders_as("a\0b", 3, "\"a\\u0000b\""), "an embedded NUL is kept, escaped");
	CHECK(dlbn_utf8_len((const unsigned char *)"\xf4\x90\x80\x80", 4) == 0,
	      "above U+10FFFF is not UTF-8");

	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	int first = 1;
	fputc('{', f);
	dlbn_json_key(f, "a", &first);
	dlbn_json_number(f, 1.5);
	dlbn_json_key(f, "b", &first);
	dlbn_json_number(f, INFINITY);
	dlbn_json_key(f, "c", &first);
	dlbn_json_number(f, NAN);
	fputc('}', f);
	fclose(f);
	CHECK(strcmp(buf, "{\"a\":1.5,\"b\":null,\"c\":null}") == 0,
	      "keys get their commas, non-finite numbers become null (%s)", buf);
	free(buf);
	CHECK_EXIT();
}
