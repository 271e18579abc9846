/*
 * lines.h - a bounded list of formatted lines (notes, reasons, warnings)
 * kept in its owner's fixed array, char lines[CAP][WIDTH], beside a count.
 * A utility: libc only.
 *
 * Each line is printf-formatted and cut to WIDTH - 1 bytes.  A line past
 * CAP is dropped; the owner's count decides what that means: it stays at
 * CAP (DLBN_LINES_ADD), or it goes on counting the lines issued while the
 * array keeps the first CAP (the reader's warnings, whose reports say how
 * many more there were).
 */
#ifndef DLBN_LINES_H
#define DLBN_LINES_H

#include <stdarg.h>
#include <stddef.h>

/* An owner's array: where its lines go. */
struct dlbn_lines {
	char *base; /* line i at base + i * width */
	size_t width, cap;
};

/* The struct dlbn_lines of an array char arr[CAP][WIDTH] (an array, not a
 * pointer: its sizes come from its type). */
#define DLBN_LINES(arr)                                                                            \
	((struct dlbn_lines){(arr)[0], sizeof((arr)[0]), sizeof(arr) / sizeof((arr)[0])})

/*
 * Write line n (the count so far) of l when n < l.cap; returns the lines
 * written: 1, or 0 when the line was dropped.
 */
size_t dlbn_lines_vadd(struct dlbn_lines l, size_t n, const char *fmt, va_list ap)
	__attribute__((format(printf, 3, 0)));
size_t dlbn_lines_add(struct dlbn_lines l, size_t n, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* Append to char arr[CAP][WIDTH] counted by n; past CAP, n stays CAP. */
#define DLBN_LINES_ADD(arr, n, ...) ((n) += dlbn_lines_add(DLBN_LINES(arr), (n), __VA_ARGS__))

#endif /* DLBN_LINES_H */
