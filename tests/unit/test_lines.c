/*
 * test_lines.c - the bounded list of formatted lines
 * (analyzer/util/lines.c): lines cut at their width, none past the
 * capacity, a count that stops there (DLBN_LINES_ADD) or goes on counting
 * while the first lines are kept (the reader's warnings).
 */
#include <stdarg.h>
#include <string.h>

#include "check.h"
#include "util/lines.h"

/* An owner's variadic adder, as baseline.c's note() is. */
static void note(char (*lines)[8], size_t cap, size_t *n, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static void note(char (*lines)[8], size_t cap, size_t *n, const char *fmt, ...)
{
	struct dlbn_lines l = {lines[0], sizeof(lines[0]), cap};
	va_list ap;
	va_start(ap, fmt);
	*n += dlbn_lines_vadd(l, *n, fmt, ap);
	va_end(ap);
}

int main(void)
{
	char lines[3][8];
	size_t n = 0;
	struct dlbn_lines l = DLBN_LINES(lines);
	CHECK(l.base == lines[0] && l.width == 8 && l.cap == 3,
	      "DLBN_LINES takes the array's sizes");

	memset(lines, 'x', sizeof(lines));
	DLBN_LINES_ADD(lines, n, "a%d", 1);
	DLBN_LINES_ADD(lines, n, "%s", "abcdefghij");
	CHECK(n == 2 && !strcmp(lines[0], "a1") && !strcmp(lines[1], "abcdefg"),
	      "formatted, and cut to width - 1 bytes (%s)", lines[1]);
	DLBN_LINES_ADD(lines, n, "third");
	DLBN_LINES_ADD(lines, n, "fourth");
	CHECK(n == 3 && !strcmp(lines[2], "third"),
	      "past the capacity the line is dropped, n stays 3");
	CHECK(dlbn_lines_add(DLBN_LINES(lines), 3, "more") == 0 && !strcmp(lines[2], "third"),
	      "a dropped line writes nothing");

	/* The reader's way: count every line, keep the first cap. */
	char warn[2][8];
	unsigned issued = 0;
	for (int i = 0; i < 5; i++) {
		dlbn_lines_add(DLBN_LINES(warn), issued, "w%d", i);
		issued++;
	}
	CHECK(issued == 5 && !strcmp(warn[0], "w0") && !strcmp(warn[1], "w1"),
	      "counting past the capacity keeps the first lines");

	char v[2][8];
	size_t nv = 0;
	note(v, 2, &nv, "%d-%d", 4, 2);
	note(v, 2, &nv, "%s", "12345678");
	note(v, 2, &nv, "dropped");
	CHECK(nv == 2 && !strcmp(v[0], "4-2") && !strcmp(v[1], "1234567"),
	      "through an owner's va_list adder");
	CHECK_EXIT();
}
