/*
 * ranges.c - NVTX range names and what they mean (see ranges.h).
 *
 * One hash table holds both registered strings and domains, keyed by
 * (kind, proc_id, id); the value is a range class for strings and "is
 * dlbn's own domain" for domains.
 */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "model/ranges.h"
#include "util/hashtab.h"

enum { KEY_STRING = 1, KEY_DOMAIN = 2 };

struct dlbn_range_names {
	struct dlbn_hashtab by_key; /* make_key() -> class, or own domain */
};

/* Case-insensitive search for a lower-case word in s[0..n). */
static int has_word(const char *s, size_t n, const char *w)
{
	size_t wl = strlen(w);
	for (size_t i = 0; i + wl <= n; i++) {
		size_t k = 0;
		while (k < wl && tolower((unsigned char)s[i + k]) == w[k])
			k++;
		if (k == wl)
			return 1;
	}
	return 0;
}

int dlbn_range_classify(const char *s, size_t n)
{
	static const char *const data_words[] = {"data", "load", "batch", "fetch"};
	static const char *const step_words[] = {"step", "iter"};
	/* A library's own ranges ("[DALI][DataReader] Prefetch #0" on its
	 * reader thread) are where it works, not the loop waiting: lib_ops.c
	 * reads them. */
	static const char library_tag[] = "[DALI]";
	if (!s ||
	    (n >= sizeof(library_tag) - 1 && !memcmp(s, library_tag, sizeof(library_tag) - 1)))
		return DLBN_RANGE_OTHER;
	for (size_t i = 0; i < sizeof(data_words) / sizeof(data_words[0]); i++)
		if (has_word(s, n, data_words[i]))
			return DLBN_RANGE_DATA;
	for (size_t i = 0; i < sizeof(step_words) / sizeof(step_words[0]); i++)
		if (has_word(s, n, step_words[i]))
			return DLBN_RANGE_STEP;
	return DLBN_RANGE_OTHER;
}

static uint64_t make_key(int kind, uint32_t proc, int64_t id)
{
	/* ids are small (the recorder's counters); 30 bits keep keys distinct. */
	return ((uint64_t)kind << 62) | ((uint64_t)proc << 30) | ((uint64_t)id & 0x3fffffffu);
}

static int put(struct dlbn_range_names *t, uint64_t key, int value)
{
	struct dlbn_hash_entry *e = dlbn_hashtab_put(&t->by_key, key, NULL);
	if (!e)
		return -1;
	e->val.num = value;
	return 0;
}

/* The value of key, or -1 when absent. */
static int get(const struct dlbn_range_names *t, uint64_t key)
{
	const struct dlbn_hash_entry *e = t ? dlbn_hashtab_get(&t->by_key, key) : NULL;
	return e ? (int)e->val.num : -1;
}

struct dlbn_range_names *dlbn_range_names_new(void)
{
	return calloc(1, sizeof(struct dlbn_range_names));
}

void dlbn_range_names_free(struct dlbn_range_names *t)
{
	if (!t)
		return;
	dlbn_hashtab_free(&t->by_key);
	free(t);
}

int dlbn_range_names_record(struct dlbn_range_names *t, const struct dlbn_record *r)
{
	if ((r->type != DLBN_REC_STRING && r->type != DLBN_REC_DOMAIN) ||
	    r->kind[0] != DLBN_V_INT || r->kind[1] != DLBN_V_STR)
		return 0;
	const char *s = r->str[1];
	size_t n = (size_t)r->f[1];
	if (r->type == DLBN_REC_STRING)
		return put(t, make_key(KEY_STRING, r->stream->proc_id, r->f[0]),
			   dlbn_range_classify(s, n));
	return put(t, make_key(KEY_DOMAIN, r->stream->proc_id, r->f[0]),
		   n == 4 && !memcmp(s, "dlbn", 4));
}

int dlbn_range_class_of(const struct dlbn_range_names *t, const struct dlbn_record *r)
{
	int f0;
	switch (r->type) {
	case DLBN_REC_RANGE_PUSH:
	case DLBN_REC_NVTX_MARK:
		f0 = 0;
		break;
	case DLBN_REC_RANGE_START:
		f0 = 1;
		break;
	default:
		return DLBN_RANGE_OTHER;
	}
	uint32_t proc = r->stream->proc_id;
	if (r->kind[f0] == DLBN_V_INT && get(t, make_key(KEY_DOMAIN, proc, r->f[f0])) > 0)
		return DLBN_RANGE_OTHER; /* dlbn's own ranges */
	if (r->kind[f0 + 2] == DLBN_V_STR)
		return dlbn_range_classify(r->str[f0 + 2], (size_t)r->f[f0 + 2]);
	if (r->kind[f0 + 1] == DLBN_V_INT && r->f[f0 + 1] > 0) {
		int c = get(t, make_key(KEY_STRING, proc, r->f[f0 + 1]));
		return c >= 0 ? c : DLBN_RANGE_OTHER;
	}
	return DLBN_RANGE_OTHER;
}
