/*
 * json.h - writing JSON values: the escaping and number rules that every
 * JSON the analyzer writes shares (reports, exports, evidence).
 *
 * The bottom of the analyzer: it depends on nothing but libc, and every
 * module that writes JSON includes it rather than a report's header.
 * Strings are byte strings of unknown encoding: valid UTF-8 passes through
 * as is, every other byte >= 0x80 becomes its \u00XX escape, so the output
 * is always valid JSON and no byte is lost from view.
 */
#ifndef DLBN_JSON_H
#define DLBN_JSON_H

#include <stddef.h>
#include <stdio.h>

/* Length of the valid UTF-8 sequence at s (n bytes left), 0 if invalid. */
size_t dlbn_utf8_len(const unsigned char *s, size_t n);

/*
 * The one escaping rule: s (len bytes) as the inside of a JSON string
 * literal, quotes not included, handed to put in pieces (runs of bytes
 * that pass as they are, and one escape at a time).
 */
typedef void (*dlbn_json_put_fn)(void *ctx, const char *s, size_t n);
void dlbn_json_escape(const char *s, size_t len, dlbn_json_put_fn put, void *ctx);
/* Write s (len bytes) as a JSON string literal, quotes included. */
void dlbn_json_string(FILE *out, const char *s, size_t len);
/* The same for a NUL-terminated s. */
void dlbn_json_str(FILE *out, const char *s);
/* Write v as a JSON number (%.6g), or null when it is not finite. */
void dlbn_json_number(FILE *out, double v);

/*
 * Key helpers: the object members and array items the reports and rank
 * summaries write go through them (a value in a format of its own, e.g. a
 * summary's %.17g, follows a bare dlbn_json_key).  `first` is the caller's
 * flag for the container being written: 1 before its first member, cleared
 * by the first helper, so the helpers put the comma between members and
 * never before the first.  The `_or_null` forms write null where the caller
 * says the value is not known (a sentinel, a count of zero...): the test is
 * the call site's, the format the helper's.  Numbers are %.6g
 * (dlbn_json_number).
 */
/* Write `"k":`, preceded by a comma unless *first (which it clears). */
void dlbn_json_key(FILE *out, const char *k, int *first);
/* The comma before an array item unless *first (which it clears). */
void dlbn_json_item(FILE *out, int *first);
/* `"k":{` or `"k":[` (k NULL: an array item's `{` or `[`); returns the
 * first flag of the members it opens.  The caller writes the closing
 * bracket. */
int dlbn_json_open(FILE *out, const char *k, char bracket, int *first);
/* `"k":v` (%.6g; null when not finite). */
void dlbn_json_key_number(FILE *out, const char *k, double v, int *first);
/* `"k":v`, or `"k":null` when !known. */
void dlbn_json_key_number_or_null(FILE *out, const char *k, double v, int known, int *first);
/* `"k":v` for a signed integer. */
void dlbn_json_key_int(FILE *out, const char *k, long long v, int *first);
/* `"k":v`, or `"k":null` when !known. */
void dlbn_json_key_int_or_null(FILE *out, const char *k, long long v, int known, int *first);
/* `"k":v` for an unsigned integer (a count, a size). */
void dlbn_json_key_uint(FILE *out, const char *k, unsigned long long v, int *first);
/* `"k":"s"`, escaped. */
void dlbn_json_key_str(FILE *out, const char *k, const char *s, int *first);
/* `"k":"s"`, or `"k":null` when !known. */
void dlbn_json_key_str_or_null(FILE *out, const char *k, const char *s, int known, int *first);
/* `"k":true` or `"k":false`. */
void dlbn_json_key_bool(FILE *out, const char *k, int v, int *first);
/* `"k":null`. */
void dlbn_json_key_null(FILE *out, const char *k, int *first);
/* `"k":["line",...]` of n NUL-terminated lines laid out stride bytes
 * apart; DLBN_JSON_TABLE(t) gives the two for a char[][LEN] table t. */
void dlbn_json_key_lines(FILE *out, const char *k, const char *lines, size_t stride, size_t n,
			 int *first);
#define DLBN_JSON_TABLE(t) (const char *)(t), sizeof((t)[0])

#endif /* DLBN_JSON_H */
