/*
 * hashtab.h - the analyzer's one hash table: uint64 keys to a pointer or
 * an integer, open addressing with linear probing.
 *
 * The owner builds its own key (e.g. process index << 32 | id) and keeps
 * what the values point to; the table only holds the entries.  A zeroed
 * struct dlbn_hashtab is an empty table; it allocates on the first put.
 *
 * Invariants: the capacity is a power of two (64 and up) and at least
 * twice the entries, so a probe always ends at an empty slot; deletion
 * shifts the entries after it back instead of leaving tombstones, so every
 * entry stays reachable from its home slot.  Iteration goes in slot order,
 * a function of the keys and the order they went in: the same puts and
 * deletes always give the same order.
 */
#ifndef DLBN_HASHTAB_H
#define DLBN_HASHTAB_H

#include <stddef.h>
#include <stdint.h>

struct dlbn_hash_entry {
	uint64_t key;
	union {
		void *ptr;
		int64_t num;
	} val;
	int used; /* 0: an empty slot */
};

struct dlbn_hashtab {
	struct dlbn_hash_entry *slots;
	size_t cap, n; /* slots, entries */
};

/*
 * Entry pointers returned below stay valid until the next put of a new
 * key or the next delete (both may move entries).
 */

/* The entry of key, NULL when absent. */
struct dlbn_hash_entry *dlbn_hashtab_get(const struct dlbn_hashtab *t, uint64_t key);
/*
 * The entry of key, added with a zero value when absent (*added says which,
 * when not NULL).  NULL when out of memory; the table is unchanged then.
 */
struct dlbn_hash_entry *dlbn_hashtab_put(struct dlbn_hashtab *t, uint64_t key, int *added);
/* Remove e (from get, put or next), keeping the other entries reachable. */
void dlbn_hashtab_delete(struct dlbn_hashtab *t, struct dlbn_hash_entry *e);
/*
 * The entry after e in slot order (the first when e is NULL), NULL past
 * the last.  No put or delete between the calls of one iteration.
 */
struct dlbn_hash_entry *dlbn_hashtab_next(const struct dlbn_hashtab *t,
					  const struct dlbn_hash_entry *e);
/* Free the slots (not what the values point to) and empty the table. */
void dlbn_hashtab_free(struct dlbn_hashtab *t);

#endif /* DLBN_HASHTAB_H */
