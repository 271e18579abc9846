/*
 * lines.c - the bounded list of formatted lines (see lines.h).
 */
#include <stdio.h>

#include "util/lines.h"

size_t dlbn_lines_vadd(struct dlbn_lines l, size_t n, const char *fmt, va_list ap)
{
	if (n >= l.cap)
		return 0;
	vsnprintf(l.base + n * l.width, l.width, fmt, ap);
	return 1;
}

size_t dlbn_lines_add(struct dlbn_lines l, size_t n, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	size_t added = dlbn_lines_vadd(l, n, fmt, ap);
	va_end(ap);
	return added;
}
