/*
 * json_read.h - a strict little JSON reader for the analyzer's inputs
 * (sweep results, rank summaries): a cursor over the text that reads one
 * value per call, so that each caller keeps what it knows and skips the
 * rest.  Nesting is bounded, numbers are doubles; \u0001..\u00ff become
 * that byte (json.h escapes so each byte of a name that is not UTF-8),
 * other \u escapes '?' (the inputs are dlbn's own files: names, paths).  Errors
 * carry the byte offset, so a broken file is easy to fix; after the first
 * error every call fails and err keeps that first message.
 *
 * The bottom of the analyzer, beside json.h (writing): libc only.
 */
#ifndef DLBN_JSON_READ_H
#define DLBN_JSON_READ_H

#include <stddef.h>
#include <stdint.h>

struct dlbn_jr {
	const char *s;
	size_t n, i;
	char *err;
	size_t errlen;
	int failed;
};

/* A cursor at the start of text (len bytes); err receives the first error. */
void dlbn_jr_init(struct dlbn_jr *p, const char *text, size_t len, char *err, size_t errlen);
/* Record an error "MSG at byte N" (the first one only); returns -1. */
int dlbn_jr_fail(struct dlbn_jr *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The next non-blank byte, not consumed; -1 at the end. */
int dlbn_jr_peek(struct dlbn_jr *p);
/* A string into out (cut to outlen - 1 bytes; out may be NULL to skip). */
int dlbn_jr_string(struct dlbn_jr *p, char *out, size_t outlen);
int dlbn_jr_number(struct dlbn_jr *p, double *v);
/* A whole number >= 0, exactly (a double holds 53 bits). */
int dlbn_jr_uint(struct dlbn_jr *p, uint64_t *v);
/* true / false / null, as the next value. */
int dlbn_jr_literal(struct dlbn_jr *p, const char *word);
/* Skip any value. */
int dlbn_jr_skip(struct dlbn_jr *p);
/*
 * Iterate an object's members or an array's elements:
 *
 *   int first = 1, rc;
 *   while ((rc = dlbn_jr_member(p, key, sizeof(key), &first)) == 1)
 *           read or skip the value;
 *   rc is 0 at the closing brace, -1 on an error.
 *
 * The first call consumes the opening bracket and fails if it is not there.
 */
int dlbn_jr_member(struct dlbn_jr *p, char *key, size_t keylen, int *first);
int dlbn_jr_element(struct dlbn_jr *p, int *first);
/* Nothing but blanks left, else an error. */
int dlbn_jr_end(struct dlbn_jr *p);

/* Read a whole file of at most max_bytes into *text (malloc'd, NUL-ended).
 * 0, or -1 with a one-line reason in err. */
int dlbn_jr_load(const char *path, size_t max_bytes, char **text, size_t *len, char *err,
		 size_t errlen);

#endif /* DLBN_JSON_READ_H */
