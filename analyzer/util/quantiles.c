/*
 * quantiles.c - exact quantiles of the first values, a log-linear histogram
 * after them (see quantiles.h).
 *
 * Bucket of v > 0 with e = floor(log2 v): v itself below 128; otherwise
 * 128 + (e - 7) * 128 + the 7 bits of v after its leading one.  A bucket
 * spans [lo, lo + 2^(e-7)), a relative width under 1/128.
 */
#include <stdlib.h>

#include "util/quantiles.h"

#define SUB_BITS 7
#define SUB	 (1 << SUB_BITS)
#define BUCKETS	 (SUB + (63 - SUB_BITS) * SUB)

struct dlbn_quantiles {
	int64_t *exact; /* the first values, sorted lazily */
	size_t nexact, capexact;
	int sorted;
	uint64_t *hist; /* NULL until the exact buffer is full */
	size_t n;
	int64_t max;
};

static size_t bucket_of(int64_t v)
{
	if (v < SUB)
		return v < 0 ? 0 : (size_t)v;
	int e = 63 - __builtin_clzll((unsigned long long)v);
	return (size_t)(SUB + (e - SUB_BITS) * SUB) +
	       (size_t)(((uint64_t)v >> (e - SUB_BITS)) & (SUB - 1));
}

/* The middle of bucket b. */
static int64_t bucket_mid(size_t b)
{
	if (b < SUB)
		return (int64_t)b;
	int e = (int)((b - SUB) / SUB) + SUB_BITS;
	uint64_t lo = ((uint64_t)SUB + (b - SUB) % SUB) << (e - SUB_BITS);
	return (int64_t)(lo + ((uint64_t)1 << (e - SUB_BITS)) / 2);
}

struct dlbn_quantiles *dlbn_quantiles_new(void)
{
	return calloc(1, sizeof(struct dlbn_quantiles));
}

void dlbn_quantiles_free(struct dlbn_quantiles *q)
{
	if (!q)
		return;
	free(q->exact);
	free(q->hist);
	free(q);
}

size_t dlbn_quantiles_count(const struct dlbn_quantiles *q)
{
	return q ? q->n : 0;
}

int dlbn_quantiles_add(struct dlbn_quantiles *q, int64_t v)
{
	if (q->nexact < DLBN_QUANTILES_EXACT) {
		if (q->nexact == q->capexact) {
			size_t ncap = q->capexact ? q->capexact * 2 : 256;
			int64_t *nv = realloc(q->exact, ncap * sizeof(*nv));
			if (!nv)
				return -1;
			q->exact = nv;
			q->capexact = ncap;
		}
		q->exact[q->nexact++] = v;
		q->sorted = 0;
	} else {
		if (!q->hist) {
			q->hist = calloc(BUCKETS, sizeof(*q->hist));
			if (!q->hist)
				return -1;
			for (size_t i = 0; i < q->nexact; i++)
				q->hist[bucket_of(q->exact[i])]++;
			free(q->exact);
			q->exact = NULL;
		}
		q->hist[bucket_of(v)]++;
	}
	if (!q->n || v > q->max)
		q->max = v;
	q->n++;
	return 0;
}

static int cmp_i64(const void *x, const void *y)
{
	int64_t a = *(const int64_t *)x, b = *(const int64_t *)y;
	return a < b ? -1 : a > b;
}

int64_t dlbn_quantiles_at(struct dlbn_quantiles *q, double f)
{
	if (!q || !q->n)
		return 0;
	f = f < 0 ? 0 : f > 1 ? 1 : f;
	size_t rank = (size_t)((double)(q->n - 1) * f);
	if (rank == q->n - 1)
		return q->max;
	if (!q->hist) {
		if (!q->sorted) {
			qsort(q->exact, q->nexact, sizeof(*q->exact), cmp_i64);
			q->sorted = 1;
		}
		return q->exact[rank];
	}
	uint64_t seen = 0;
	for (size_t b = 0; b < BUCKETS; b++) {
		seen += q->hist[b];
		if (seen > rank) {
			int64_t mid = bucket_mid(b);
			return mid > q->max ? q->max : mid;
		}
	}
	return q->max;
}
