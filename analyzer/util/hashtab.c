/*
 * hashtab.c - uint64 keys to values, linear probing with backward-shift
 * deletion (see hashtab.h).
 */
#include <stdlib.h>
#include <string.h>

#include "util/hashtab.h"

#define FIRST_CAP 64

/* Fibonacci hashing: the multiplication spreads keys that differ in a few
 * low bits (consecutive ids, inode numbers) over the whole word. */
static size_t home_slot(uint64_t key, size_t cap)
{
	return (size_t)((key * 0x9e3779b97f4a7c15ull) >> 20) & (cap - 1);
}

struct dlbn_hash_entry *dlbn_hashtab_get(const struct dlbn_hashtab *t, uint64_t key)
{
	if (!t->cap)
		return NULL;
	for (size_t i = home_slot(key, t->cap);; i = (i + 1) & (t->cap - 1)) {
		if (!t->slots[i].used)
			return NULL;
		if (t->slots[i].key == key)
			return &t->slots[i];
	}
}

/* The empty slot where key's probe ends. */
static struct dlbn_hash_entry *free_slot(struct dlbn_hash_entry *slots, size_t cap, uint64_t key)
{
	size_t i = home_slot(key, cap);
	while (slots[i].used)
		i = (i + 1) & (cap - 1);
	return &slots[i];
}

/* Double the capacity (FIRST_CAP when none), re-placing entries in slot
 * order; -1 out of memory, the table unchanged. */
static int grow(struct dlbn_hashtab *t)
{
	size_t ncap = t->cap ? t->cap * 2 : FIRST_CAP;
	struct dlbn_hash_entry *ns = calloc(ncap, sizeof(*ns));
	if (!ns)
		return -1;
	for (size_t i = 0; i < t->cap; i++)
		if (t->slots[i].used)
			*free_slot(ns, ncap, t->slots[i].key) = t->slots[i];
	free(t->slots);
	t->slots = ns;
	t->cap = ncap;
	return 0;
}

struct dlbn_hash_entry *dlbn_hashtab_put(struct dlbn_hashtab *t, uint64_t key, int *added)
{
	struct dlbn_hash_entry *e = dlbn_hashtab_get(t, key);
	if (added)
		*added = !e;
	if (e)
		return e;
	if ((t->n + 1) * 2 > t->cap && grow(t))
		return NULL;
	e = free_slot(t->slots, t->cap, key);
	memset(e, 0, sizeof(*e));
	e->key = key;
	e->used = 1;
	t->n++;
	return e;
}

void dlbn_hashtab_delete(struct dlbn_hashtab *t, struct dlbn_hash_entry *e)
{
	size_t i = (size_t)(e - t->slots), j = i;
	t->slots[i].used = 0;
	for (;;) {
		j = (j + 1) & (t->cap - 1);
		if (!t->slots[j].used)
			break;
		size_t h = home_slot(t->slots[j].key, t->cap);
		/* move j back to i unless its home lies cyclically in (i, j] */
		if ((j > i && (h <= i || h > j)) || (j < i && h <= i && h > j)) {
			t->slots[i] = t->slots[j];
			t->slots[j].used = 0;
			i = j;
		}
	}
	t->n--;
}

struct dlbn_hash_entry *dlbn_hashtab_next(const struct dlbn_hashtab *t,
					  const struct dlbn_hash_entry *e)
{
	for (size_t i = e ? (size_t)(e - t->slots) + 1 : 0; i < t->cap; i++)
		if (t->slots[i].used)
			return &t->slots[i];
	return NULL;
}

void dlbn_hashtab_free(struct dlbn_hashtab *t)
{
	free(t->slots);
	memset(t, 0, sizeof(*t));
}
