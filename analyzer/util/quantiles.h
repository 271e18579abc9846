/*
 * quantiles.h - quantiles of a stream of durations in bounded memory: the
 * loader waits of the steady-state window, for the reports' p50 / p95 /
 * max, however many steps the run had.
 *
 * The first DLBN_QUANTILES_EXACT values are kept and the quantiles of up to
 * that many are exact.  Beyond, the values go into a log-linear histogram
 * (128 sub-buckets per power of two): a quantile is then the middle of its
 * bucket, within 0.4% of the exact value; the maximum stays exact.
 */
#ifndef DLBN_QUANTILES_H
#define DLBN_QUANTILES_H

#include <stddef.h>
#include <stdint.h>

#define DLBN_QUANTILES_EXACT 65536

struct dlbn_quantiles;

struct dlbn_quantiles *dlbn_quantiles_new(void);
/* 0, or -1 when out of memory (the value is then lost). */
int dlbn_quantiles_add(struct dlbn_quantiles *q, int64_t v);
size_t dlbn_quantiles_count(const struct dlbn_quantiles *q);
/* The value of rank floor((count - 1) * f), 0 <= f <= 1; 0 when empty. */
int64_t dlbn_quantiles_at(struct dlbn_quantiles *q, double f);
void dlbn_quantiles_free(struct dlbn_quantiles *q);

#endif /* DLBN_QUANTILES_H */
