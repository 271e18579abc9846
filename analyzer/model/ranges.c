/*
 * ranges.c - NVTX range names and what they mean (see ranges.h).
 *
 * One open-addressing hash holds both registered strings and domains,
 * keyed by (kind, proc_id, id); the value is a range class for strings and
 * "is dlbn's own domain" for domains.
 */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "model/ranges.h"

enum { KEY_STRING = 1, KEY_DOMAIN = 2 };

struct name_ent {
	uint64_t key; /* 0: empty */
	int value;
};

struct dlbn_range_names {
	struct name_ent *slots;
	size_t cap, n;
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

static size_t key_hash(uint64_t key, size_t cap)
{
	return (size_t)((key * 0x9e3779b97f4a7c15ull) >> 20) & (cap - 1);
}

static struct name_ent *find(const struct dlbn_range_names *t, uint64_t key)
{
	if (!t || !t->cap)
		return NULL;
	for (size_t i = key_hash(key, t->cap);; i = (i + 1) & (t->cap - 1)) {
		if (t->slots[i].key == key)
			return &t->slots[i];
		if (!t->slots[i].key)
			return NULL;
	}
}

static int put(struct dlbn_range_names *t, uint64_t key, int value)
{
	struct name_ent *e = find(t, key);
	if (e) {
		e->value = value;
		return 0;
	}
	if ((t->n + 1) * 2 > t->cap) {
		size_t ncap = t->cap ? t->cap * 2 : 64;
		struct name_ent *ns = calloc(ncap, sizeof(*ns));
		if (!ns)
			return -1;
		for (size_t i = 0; i < t->cap; i++) {
			if (!t->slots[i].key)
				continue;
			size_t j = key_hash(t->slots[i].key, ncap);
			while (ns[j].key)
				j = (j + 1) & (ncap - 1);
			ns[j] = t->slots[i];
		}
		free(t->slots);
		t->slots = ns;
		t->cap = ncap;
	}
	size_t i = key_hash(key, t->cap);
	while (t->slots[i].key)
		i = (i + 1) & (t->cap - 1);
	t->slots[i] = (struct name_ent){key, value};
	t->n++;
	return 0;
}

struct dlbn_range_names *dlbn_range_names_new(void)
{
	return calloc(1, sizeof(struct dlbn_range_names));
}

void dlbn_range_names_free(struct dlbn_range_names *t)
{
	if (!t)
		return;
	free(t->slots);
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
	const struct name_ent *dom =
		r->kind[f0] == DLBN_V_INT ? find(t, make_key(KEY_DOMAIN, proc, r->f[f0])) : NULL;
	if (dom && dom->value)
		return DLBN_RANGE_OTHER; /* dlbn's own ranges */
	if (r->kind[f0 + 2] == DLBN_V_STR)
		return dlbn_range_classify(r->str[f0 + 2], (size_t)r->f[f0 + 2]);
	if (r->kind[f0 + 1] == DLBN_V_INT && r->f[f0 + 1] > 0) {
		const struct name_ent *e = find(t, make_key(KEY_STRING, proc, r->f[f0 + 1]));
		return e ? e->value : DLBN_RANGE_OTHER;
	}
	return DLBN_RANGE_OTHER;
}
