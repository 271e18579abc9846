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
/* Write `"k":`, preceded by a comma unless *first (which it clears). */
void dlbn_json_key(FILE *out, const char *k, int *first);
/* `"k":v`, or `"k":null` when !known. */
void dlbn_json_key_number(FILE *out, const char *k, double v, int known, int *first);
/* `"k":v`, or `"k":null` when v < 0 (a count or index that is not known). */
void dlbn_json_key_int(FILE *out, const char *k, int v, int *first);

#endif /* DLBN_JSON_H */
