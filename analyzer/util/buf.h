/*
 * buf.h - a growable byte buffer for texts built piece by piece (the
 * exports' per-record JSON and TEXT columns), with json.h's string rule
 * and a UTF-8 cleaning for SQLite TEXT.  A utility: libc and json.h only.
 *
 * A zeroed struct dlbn_buf is empty.  p is NUL-terminated after any put
 * (NULL while nothing was put).  Out of memory sets oom and drops the put
 * that did not fit: the caller checks oom once the text is complete.
 */
#ifndef DLBN_BUF_H
#define DLBN_BUF_H

#include <stddef.h>
#include <stdint.h>

struct dlbn_buf {
	char *p;
	size_t n, cap;
	int oom;
};

void dlbn_buf_put(struct dlbn_buf *b, const char *s, size_t n);
void dlbn_buf_puts(struct dlbn_buf *b, const char *s);
void dlbn_buf_int(struct dlbn_buf *b, int64_t v);
/* v ns as microseconds with three decimals ("12.345"), exact. */
void dlbn_buf_us(struct dlbn_buf *b, int64_t ns);
/* A JSON string literal, quotes included (json.h's rule: valid UTF-8 is
 * kept, other bytes become \u00XX, their Latin-1 reading). */
void dlbn_buf_json_str(struct dlbn_buf *b, const char *s, size_t n);
/* s as valid UTF-8: valid UTF-8 is kept, other bytes become the character
 * of their Latin-1 reading (the same string a JSON reader gets from
 * dlbn_buf_json_str), NULs U+FFFD (SQLite TEXT must be UTF-8 for its
 * readers, e.g. Python's sqlite3). */
void dlbn_buf_utf8(struct dlbn_buf *b, const char *s, size_t n);
void dlbn_buf_free(struct dlbn_buf *b);

#endif /* DLBN_BUF_H */
