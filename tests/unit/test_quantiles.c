/*
 * test_quantiles.c - the window's wait quantiles (analyzer/util/quantiles.c):
 * exact for the first DLBN_QUANTILES_EXACT values, within 0.4% after them
 * (log-linear histogram), the maximum always exact, memory bounded.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "check.h"
#include "util/quantiles.h"

/* A reproducible spread of durations: 0.1 .. 100 ms, skewed low. */
static int64_t wait_of(uint64_t i)
{
	uint64_t x = i * 0x9e3779b97f4a7c15ull;
	double u = (double)(x >> 11) / (double)(1ull << 53);
	return (int64_t)(100000.0 * pow(1000.0, u * u));
}

static int cmp_i64(const void *x, const void *y)
{
	int64_t a = *(const int64_t *)x, b = *(const int64_t *)y;
	return a < b ? -1 : a > b;
}

static double rel_err(int64_t got, int64_t want)
{
	return want ? fabs((double)got / (double)want - 1.0) : (double)(got != 0);
}

static void check_against_sorted(size_t n, double tolerance, const char *what)
{
	struct dlbn_quantiles *q = dlbn_quantiles_new();
	int64_t *v = malloc(n * sizeof(*v));
	int ok = q && v;
	for (size_t i = 0; ok && i < n; i++) {
		v[i] = wait_of(i);
		ok = dlbn_quantiles_add(q, v[i]) == 0;
	}
	if (!ok) {
		CHECK(0, "%s: set up", what);
		return;
	}
	qsort(v, n, sizeof(*v), cmp_i64);
	double worst = 0;
	const double fs[] = {0.0, 0.25, 0.5, 0.9, 0.95, 0.99};
	for (size_t k = 0; k < sizeof(fs) / sizeof(fs[0]); k++) {
		int64_t want = v[(size_t)((double)(n - 1) * fs[k])];
		double e = rel_err(dlbn_quantiles_at(q, fs[k]), want);
		worst = e > worst ? e : worst;
	}
	CHECK(dlbn_quantiles_count(q) == n, "%s: %zu values counted", what, n);
	CHECK(worst <= tolerance, "%s: quantiles within %.2f%% of the sorted values (worst %.4f%%)",
	      what, tolerance * 100, worst * 100);
	CHECK(dlbn_quantiles_at(q, 1.0) == v[n - 1], "%s: the maximum is exact", what);
	dlbn_quantiles_free(q);
	free(v);
}

int main(void)
{
	struct dlbn_quantiles *q = dlbn_quantiles_new();
	CHECK(q && dlbn_quantiles_at(q, 0.5) == 0 && dlbn_quantiles_count(q) == 0,
	      "empty: every quantile is 0");
	for (int64_t i = 5; i >= 1; i--)
		dlbn_quantiles_add(q, i * 1000);
	CHECK(dlbn_quantiles_at(q, 0.5) == 3000 && dlbn_quantiles_at(q, 0.95) == 4000 &&
		      dlbn_quantiles_at(q, 1.0) == 5000,
	      "five values: p50 3000, p95 4000 (rank floor(4 x 0.95)), max 5000");
	dlbn_quantiles_free(q);
	check_against_sorted(DLBN_QUANTILES_EXACT, 0.0, "exact range");
	check_against_sorted(1000000, 0.004, "a million values (histogram)");
	CHECK_EXIT();
}
