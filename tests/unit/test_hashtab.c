/*
 * test_hashtab.c - the one hash table (analyzer/util/hashtab.c): puts,
 * gets and deletes agree with a plain array through growth; keys that
 * share a home slot stay reachable whichever of them is deleted, also
 * where their probe wraps past the last slot; iteration visits every entry
 * once, in an order that the same puts and deletes repeat.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "util/hashtab.h"

#define NKEYS 5000

/* The home slot as hashtab.c computes it, to pick keys that collide (the
 * checks below say so when that stops being true). */
static size_t home_of(uint64_t key, size_t cap)
{
	return (size_t)((key * 0x9e3779b97f4a7c15ull) >> 20) & (cap - 1);
}

/* n keys whose home slot in a 64-slot table is `home`. */
static void colliding_keys(size_t home, uint64_t *keys, int n)
{
	int found = 0;
	for (uint64_t k = 1; found < n; k++)
		if (home_of(k, 64) == home)
			keys[found++] = k;
}

static size_t slot_of(const struct dlbn_hashtab *t, uint64_t key)
{
	const struct dlbn_hash_entry *e = dlbn_hashtab_get(t, key);
	return e ? (size_t)(e - t->slots) : SIZE_MAX;
}

/* The value stored under key. */
static int64_t value_of(uint64_t key)
{
	return (int64_t)(key % 1000003) - 500000;
}

static int all_found(const struct dlbn_hashtab *t, const uint64_t *keys, int n)
{
	for (int i = 0; i < n; i++) {
		const struct dlbn_hash_entry *e = dlbn_hashtab_get(t, keys[i]);
		if (!e || e->val.num != value_of(keys[i]))
			return 0;
	}
	return 1;
}

/* Delete each of three keys sharing home slot `home` in turn: the others
 * move back into the hole and stay found. */
static void test_collisions(size_t home)
{
	for (int victim = 0; victim < 3; victim++) {
		struct dlbn_hashtab t = {0};
		uint64_t keys[3], rest[2];
		colliding_keys(home, keys, 3);
		for (int i = 0; i < 3; i++)
			dlbn_hashtab_put(&t, keys[i], NULL)->val.num = value_of(keys[i]);
		CHECK(slot_of(&t, keys[0]) == home && slot_of(&t, keys[1]) == ((home + 1) & 63) &&
			      slot_of(&t, keys[2]) == ((home + 2) & 63),
		      "home %zu: three colliding keys probe into consecutive slots", home);
		dlbn_hashtab_delete(&t, dlbn_hashtab_get(&t, keys[victim]));
		for (int i = 0, k = 0; i < 3; i++)
			if (i != victim)
				rest[k++] = keys[i];
		CHECK(t.n == 2 && !dlbn_hashtab_get(&t, keys[victim]) && all_found(&t, rest, 2),
		      "home %zu: deleting collider %d keeps the other two reachable", home, victim);
		CHECK(slot_of(&t, rest[0]) == home && slot_of(&t, rest[1]) == ((home + 1) & 63),
		      "home %zu: the ones after it shifted back (no tombstone left)", home);
		dlbn_hashtab_free(&t);
	}
}

/* A key that hashes elsewhere, sitting in a collision run, is moved back
 * only when its own home allows it. */
static void test_foreign_in_run(void)
{
	struct dlbn_hashtab t = {0};
	uint64_t a[2], b[1];
	colliding_keys(10, a, 2); /* slots 10, 11 */
	colliding_keys(11, b, 1); /* home 11, lands in 12 */
	uint64_t keys[3] = {a[0], a[1], b[0]};
	for (int i = 0; i < 3; i++)
		dlbn_hashtab_put(&t, keys[i], NULL)->val.num = value_of(keys[i]);
	CHECK(slot_of(&t, b[0]) == 12, "a key of home 11 probes past the run into slot 12");
	dlbn_hashtab_delete(&t, dlbn_hashtab_get(&t, a[1]));
	CHECK(slot_of(&t, b[0]) == 11 && all_found(&t, keys, 1) && all_found(&t, b, 1),
	      "deleting slot 11 moves it back home");
	dlbn_hashtab_delete(&t, dlbn_hashtab_get(&t, a[0]));
	CHECK(slot_of(&t, b[0]) == 11 && t.n == 1, "deleting slot 10 leaves it at home");
	dlbn_hashtab_free(&t);
}

/* A deterministic stream of keys (xorshift), spread over 64 bits. */
static uint64_t next_key(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

static void test_against_array(void)
{
	static uint64_t keys[NKEYS];
	static char present[NKEYS];
	struct dlbn_hashtab t = {0};
	uint64_t seed = 88172645463325252ull;
	int added = -1, ok = 1;

	CHECK(!dlbn_hashtab_get(&t, 1) && !dlbn_hashtab_next(&t, NULL) && t.n == 0,
	      "a zeroed table is empty");
	for (int i = 0; i < NKEYS; i++) {
		keys[i] = i % 10 ? next_key(&seed) : (uint64_t)i; /* small keys too, 0 among them */
		struct dlbn_hash_entry *e = dlbn_hashtab_put(&t, keys[i], &added);
		ok &= e && added && e->key == keys[i] && e->val.num == 0;
		e->val.num = value_of(keys[i]);
		present[i] = 1;
	}
	CHECK(ok && t.n == NKEYS, "%d new keys added, each with a zero value", NKEYS);
	CHECK(t.cap >= 2 * t.n && (t.cap & (t.cap - 1)) == 0,
	      "grown to a power of two at least twice the entries (%zu)", t.cap);
	CHECK(all_found(&t, keys, NKEYS), "every key found with its value after growing");
	struct dlbn_hash_entry *again = dlbn_hashtab_put(&t, keys[17], &added);
	CHECK(again && !added && again->val.num == value_of(keys[17]) && t.n == NKEYS,
	      "putting a present key returns its entry, value kept");

	/* Delete two keys in three, then check every key either way. */
	for (int i = 0; i < NKEYS; i++) {
		if (i % 3 == 0)
			continue;
		dlbn_hashtab_delete(&t, dlbn_hashtab_get(&t, keys[i]));
		present[i] = 0;
	}
	ok = 1;
	size_t left = 0;
	for (int i = 0; i < NKEYS; i++) {
		const struct dlbn_hash_entry *e = dlbn_hashtab_get(&t, keys[i]);
		ok &= present[i] ? e && e->val.num == value_of(keys[i]) : !e;
		left += (size_t)present[i];
	}
	CHECK(ok && t.n == left, "after deleting two in three: the rest found, the deleted not");

	size_t visits = 0;
	uint64_t sum = 0, want = 0; /* wrapping sums of the values */
	for (const struct dlbn_hash_entry *e = NULL; (e = dlbn_hashtab_next(&t, e));) {
		visits++;
		sum += (uint64_t)e->val.num;
	}
	for (int i = 0; i < NKEYS; i++)
		want += present[i] ? (uint64_t)value_of(keys[i]) : 0;
	CHECK(visits == t.n && sum == want, "iteration visits every entry once (%zu)", visits);

	dlbn_hashtab_free(&t);
	CHECK(t.n == 0 && t.cap == 0 && !t.slots && !dlbn_hashtab_get(&t, keys[0]),
	      "freed: empty again");
	CHECK(dlbn_hashtab_put(&t, 42, NULL) && t.n == 1, "and usable again");
	dlbn_hashtab_free(&t);
}

/* The same puts and deletes give the same iteration order. */
static void test_order_repeats(void)
{
	struct dlbn_hashtab a = {0}, b = {0};
	int same = 1;
	for (int round = 0; round < 2; round++) {
		struct dlbn_hashtab *t = round ? &b : &a;
		uint64_t seed = 2463534242ull;
		for (int i = 0; i < 300; i++) {
			int64_t v = i;
			uint64_t k = next_key(&seed) % 1000;
			dlbn_hashtab_put(t, k, NULL)->val.ptr = (void *)(intptr_t)(v + 1);
			if (i % 4 == 3)
				dlbn_hashtab_delete(t, dlbn_hashtab_get(t, k));
		}
	}
	const struct dlbn_hash_entry *x = NULL, *y = NULL;
	do {
		x = dlbn_hashtab_next(&a, x);
		y = dlbn_hashtab_next(&b, y);
		same &= (!x && !y) || (x && y && x->key == y->key && x->val.ptr == y->val.ptr);
	} while (x && y);
	CHECK(same && a.n == b.n && a.n > 0, "the same puts and deletes iterate in the same order");
	dlbn_hashtab_free(&a);
	dlbn_hashtab_free(&b);
}

int main(void)
{
	test_collisions(5);
	test_collisions(62); /* the probe wraps past slot 63 */
	test_collisions(63);
	test_foreign_in_run();
	test_against_array();
	test_order_repeats();
	CHECK_EXIT();
}
