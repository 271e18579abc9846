/*
 * test_json_keys.c - json.c's key helpers: the comma goes between members
 * and never before the first, each `_or_null` helper writes null exactly
 * when the caller says the value is not known, numbers keep the reports'
 * %.6g (and null when not finite), integers print whole at any width.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "util/json.h"

static char *buf;
static size_t len;
static FILE *out;

static void begin(void)
{
	buf = NULL;
	len = 0;
	out = open_memstream(&buf, &len);
}

/* Close the stream; whether it holds exactly want (the buffer is freed). */
static int ends_as(const char *want)
{
	fclose(out);
	int ok = strcmp(buf, want) == 0;
	if (!ok)
		printf("# got %s, want %s\n", buf, want);
	free(buf);
	return ok;
}

static void test_numbers(void)
{
	int first = 1;
	begin();
	dlbn_json_key_number(out, "a", 1.0 / 3, &first);
	dlbn_json_key_number(out, "b", 1234567.0, &first);
	dlbn_json_key_number(out, "c", NAN, &first);
	dlbn_json_key_number(out, "d", -INFINITY, &first);
	CHECK(ends_as("\"a\":0.333333,\"b\":1.23457e+06,\"c\":null,\"d\":null"),
	      "numbers are %%.6g, non-finite ones null, commas between keys only");

	first = 1;
	begin();
	dlbn_json_key_number_or_null(out, "known", 2.5, 1, &first);
	dlbn_json_key_number_or_null(out, "unknown", 2.5, 0, &first);
	dlbn_json_key_number_or_null(out, "nan", NAN, 1, &first);
	CHECK(ends_as("\"known\":2.5,\"unknown\":null,\"nan\":null"),
	      "number_or_null: the value when known, null when not (or not finite)");
}

static void test_integers(void)
{
	int first = 1;
	begin();
	dlbn_json_key_int(out, "neg", -7, &first);
	dlbn_json_key_int(out, "big", 9007199254740993LL, &first);
	dlbn_json_key_uint(out, "u", 18446744073709551615ULL, &first);
	dlbn_json_key_int_or_null(out, "known", -1, 1, &first);
	dlbn_json_key_int_or_null(out, "unknown", 3, 0, &first);
	CHECK(ends_as("\"neg\":-7,\"big\":9007199254740993,\"u\":18446744073709551615,"
		      "\"known\":-1,\"unknown\":null"),
	      "integers print whole (no %%g rounding); int_or_null's null is the caller's");
}

static void test_strings_and_literals(void)
{
	int first = 1;
	begin();
	dlbn_json_key_str(out, "s", "a\"b", &first);
	dlbn_json_key_str_or_null(out, "known", "x", 1, &first);
	dlbn_json_key_str_or_null(out, "unknown", "x", 0, &first);
	dlbn_json_key_bool(out, "t", 2, &first);
	dlbn_json_key_bool(out, "f", 0, &first);
	dlbn_json_key_null(out, "n", &first);
	CHECK(ends_as("\"s\":\"a\\\"b\",\"known\":\"x\",\"unknown\":null,\"t\":true,"
		      "\"f\":false,\"n\":null"),
	      "strings escaped, str_or_null, any non-zero is true, null");
}

static void test_containers(void)
{
	static const char lines[3][8] = {"one", "two\n", ""};
	int first = 1;
	begin();
	fputc('{', out);
	int inner = dlbn_json_open(out, "o", '{', &first);
	dlbn_json_key_int(out, "x", 1, &inner);
	dlbn_json_key_int(out, "y", 2, &inner);
	fputc('}', out);
	int items = dlbn_json_open(out, "a", '[', &first);
	for (int i = 0; i < 2; i++) {
		int f = dlbn_json_open(out, NULL, '{', &items);
		dlbn_json_key_int(out, "i", i, &f);
		fputc('}', out);
	}
	dlbn_json_item(out, &items);
	fputs("3", out);
	fputc(']', out);
	dlbn_json_key_lines(out, "l", (const char *)lines, sizeof(lines[0]), 3, &first);
	dlbn_json_key_lines(out, "none", (const char *)lines, sizeof(lines[0]), 0, &first);
	fputc('}', out);
	CHECK(ends_as("{\"o\":{\"x\":1,\"y\":2},\"a\":[{\"i\":0},{\"i\":1},3],"
		      "\"l\":[\"one\",\"two\\n\",\"\"],\"none\":[]}"),
	      "nested objects and arrays: each opener starts its members' own comma flag");
}

int main(void)
{
	test_numbers();
	test_integers();
	test_strings_and_literals();
	test_containers();
	CHECK_EXIT();
}
