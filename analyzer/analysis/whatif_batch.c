/*
 * whatif_batch.c - the what-if over batch size: rows at the run's worker
 * count, and the grid batch size x workers (or DALI threads) with the
 * point of most samples per second.  The step model is whatif.c's
 * (dlbn_whatif_step_ms); this file chooses the points, sizes the fixed
 * parts and the shared memory, and says what it assumed.
 *
 * At batch size b the scale is k = b / B0 (B0: the run's batch size).  The
 * loader's time per batch, the hand-off and the workers' CPU grow with the
 * samples, measured per sample at B0.  The loop's host work and the GPU's
 * time per step hold a part that does not grow with the batch (Python and
 * launch overhead, kernels too small to fill the GPU): it is fitted from
 * measured points of other batch sizes (dlbn-run --sweep batch_size=...,
 * read back with --sweep-results: each point carries its run's loop_ms and
 * gpu_step_ms), else taken as 0 and said so.  Proportional is the
 * pessimistic end for larger batches: the model side keeps its samples per
 * second, and only the loader side gains.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/whatif.h"

#define SAME_SIZE(a, b) (fabs((a) - (b)) < 0.5)

/* Least squares of y = fixed + per * b over n points; the fixed part kept
 * within [0, y0] (y0: the run's own figure).  -1 when the points do not
 * span two batch sizes. */
static double fixed_part(const double *b, const double *y, size_t n, double y0)
{
	double mb = 0, my = 0, sbb = 0, sby = 0;
	for (size_t i = 0; i < n; i++) {
		mb += b[i];
		my += y[i];
	}
	mb /= (double)n;
	my /= (double)n;
	for (size_t i = 0; i < n; i++) {
		sbb += (b[i] - mb) * (b[i] - mb);
		sby += (b[i] - mb) * (y[i] - my);
	}
	if (!(sbb > 0))
		return -1;
	double per = sby / sbb;
	double fixed = my - per * mb;
	return fixed < 0 ? 0 : fixed > y0 ? y0 : fixed;
}

/* The points of other batch sizes a fit uses: those at the run's worker
 * count when there are any (the loop's host work changes with the CPU the
 * workers leave it), else all.  -1: none. */
static int fit_pass(const struct dlbn_sweep *points, const struct dlbn_whatif *w)
{
	int any = 0;
	for (size_t i = 0; points && i < points->n; i++) {
		const struct dlbn_sweep_point *p = &points->v[i];
		if (p->batch_size < 1 || SAME_SIZE(p->batch_size, w->batch_size) ||
		    !(p->loop_ms > 0))
			continue;
		if (SAME_SIZE(p->units, w->num_workers))
			return 0;
		any = 1;
	}
	return any ? 1 : -1;
}

#define FIT_MAX 16

/* One series (the loop's, the GPU's or the loader's time): the run's
 * figure y0 and the points' (NULL where a point has none).  The fixed part,
 * or -1 when some point lacks the figure or the sizes do not span two. */
static double fit_series(const double *b, const double *y, size_t n, double y0)
{
	for (size_t i = 0; i < n; i++)
		if (!(y[i] > 0))
			return -1;
	return y0 > 0 ? fixed_part(b, y, n, y0) : -1;
}

static void fit_split(const struct dlbn_sweep *points, struct dlbn_whatif *w)
{
	double b[FIT_MAX], loop[FIT_MAX], gpu[FIT_MAX], batch[FIT_MAX];
	char sizes[80] = "";
	size_t n = 1, len = 0;
	int pass = fit_pass(points, w);
	b[0] = w->batch_size;
	loop[0] = w->loop_ms;
	gpu[0] = w->gpu_step_ms;
	batch[0] = w->batch_ms;
	for (size_t i = 0; pass >= 0 && i < points->n && n < FIT_MAX; i++) {
		const struct dlbn_sweep_point *p = &points->v[i];
		if (p->batch_size < 1 || SAME_SIZE(p->batch_size, w->batch_size) ||
		    !(p->loop_ms > 0) || (pass == 0 && !SAME_SIZE(p->units, w->num_workers)))
			continue;
		b[n] = p->batch_size;
		loop[n] = p->loop_ms;
		gpu[n] = p->gpu_step_ms;
		batch[n] = p->batch_ms;
		n++;
		if (len < sizeof(sizes))
			len += (size_t)snprintf(sizes + len, sizeof(sizes) - len, "%s%.0f",
						len ? ", " : "", p->batch_size);
	}
	double loop_fixed = n > 1 ? fit_series(b, loop, n, w->loop_ms) : -1;
	if (loop_fixed < 0) {
		dlbn_whatif_note(
			w,
			"batch size: the loop's and the GPU's time per step and the loader's time "
			"per "
			"batch are taken as proportional to the batch (no run of another batch "
			"size "
			"to measure a fixed part: dlbn-run --sweep batch_size=... gives one); then "
			"larger batches gain only on the loader's side, the pessimistic end");
		return;
	}
	double gpu_fixed = w->gpu_step_ms > 0 ? fit_series(b, gpu, n, w->gpu_step_ms) : -1;
	double batch_fixed = w->batch_ms > 0 ? fit_series(b, batch, n, w->batch_ms) : -1;
	w->split_measured = 1;
	w->loop_fixed_ms = loop_fixed;
	w->gpu_fixed_ms = gpu_fixed > 0 ? gpu_fixed : 0;
	w->batch_fixed_ms = batch_fixed > 0 ? batch_fixed : 0;
	dlbn_whatif_note(w,
			 "batch size: fitted with the run(s) at batch size %s, per step the loop's "
			 "host work "
			 "is %.2f ms fixed + %.2f ms per %d samples%s",
			 sizes, w->loop_fixed_ms, w->loop_ms - w->loop_fixed_ms, w->batch_size,
			 w->gpu_step_ms > 0 && gpu_fixed < 0
				 ? " (the GPU's taken as proportional: the "
				   "other runs have no GPU figure)"
				 : "");
	if (gpu_fixed >= 0)
		dlbn_whatif_note(
			w,
			"batch size: the GPU's time per step is %.2f ms fixed + %.2f ms per %d "
			"samples",
			w->gpu_fixed_ms, w->gpu_step_ms - w->gpu_fixed_ms, w->batch_size);
	if (batch_fixed >= 0)
		dlbn_whatif_note(
			w,
			"batch size: the loader's time per batch is %.2f ms fixed + %.2f ms per %d "
			"samples",
			w->batch_fixed_ms, w->batch_ms - w->batch_fixed_ms, w->batch_size);
}

static int has(const int *v, size_t n, int x)
{
	for (size_t i = 0; i < n; i++)
		if (v[i] == x)
			return 1;
	return 0;
}

static void add_unique(int *v, size_t *n, size_t cap, int x, int least)
{
	if (x >= least && *n < cap && !has(v, *n, x))
		v[(*n)++] = x;
}

static int by_value(const void *a, const void *b)
{
	int x = *(const int *)a, y = *(const int *)b;
	return (x > y) - (x < y);
}

/* The batch sizes: the measured points' first, then around the run's. */
static size_t grid_sizes(const struct dlbn_sweep *points, const struct dlbn_whatif *w, int *v)
{
	size_t n = 0;
	int b0 = w->batch_size;
	add_unique(v, &n, DLBN_WHATIF_BATCHES, b0, 1);
	for (size_t i = 0; points && i < points->n; i++)
		if (points->v[i].batch_size >= 1)
			add_unique(v, &n, DLBN_WHATIF_BATCHES, (int)lround(points->v[i].batch_size),
				   1);
	const int around[] = {b0 / 2, b0 * 2, b0 / 4, b0 * 4};
	for (size_t i = 0; i < sizeof(around) / sizeof(around[0]); i++)
		add_unique(v, &n, DLBN_WHATIF_BATCHES, around[i], 1);
	qsort(v, n, sizeof(*v), by_value);
	return n;
}

/* The worker (thread) counts: the measured points', the run's, the
 * curve's best, then powers of two up to the curve's last value. */
static size_t grid_units(const struct dlbn_sweep *points, const struct dlbn_whatif *w, int *v)
{
	size_t n = 0;
	add_unique(v, &n, DLBN_WHATIF_GRID_UNITS, w->num_workers, w->min_units);
	for (size_t i = 0; points && i < points->n; i++)
		if (points->v[i].units >= 0)
			add_unique(v, &n, DLBN_WHATIF_GRID_UNITS, (int)lround(points->v[i].units),
				   w->min_units);
	add_unique(v, &n, DLBN_WHATIF_GRID_UNITS, w->best_workers, w->min_units);
	for (int u = w->min_units > 1 ? w->min_units : 1; u <= w->max_workers; u *= 2)
		add_unique(v, &n, DLBN_WHATIF_GRID_UNITS, u, w->min_units);
	qsort(v, n, sizeof(*v), by_value);
	return n;
}

/* A measured step time of the points at (b, u), 0 none. */
static double measured_at(const struct dlbn_sweep *points, const struct dlbn_whatif *w, int b,
			  int u)
{
	if (b == w->batch_size && u == w->num_workers)
		return w->measured_ms;
	for (size_t i = 0; points && i < points->n; i++) {
		const struct dlbn_sweep_point *p = &points->v[i];
		if (p->measured_ms > 0 && SAME_SIZE(p->batch_size, b) && SAME_SIZE(p->units, u))
			return p->measured_ms;
	}
	return 0;
}

static void fill_cell(const struct dlbn_sweep *points, struct dlbn_whatif *w, int b, int u)
{
	struct dlbn_whatif_cell *c = &w->grid[w->ngrid++];
	const char *lim;
	double k = (double)b / (double)w->batch_size;
	memset(c, 0, sizeof(*c));
	c->batch_size = b;
	c->units = u;
	c->step_ms = dlbn_whatif_step_ms(w, k, u, &lim);
	if (u > 0 && w->startup_ms > 0 && w->startup_ms * k >= 0.5 * c->step_ms)
		lim = DLBN_LIMIT_STARTUP;
	snprintf(c->limited_by, sizeof(c->limited_by), "%s", lim);
	c->samples_per_s = c->step_ms > 0 ? (double)b * 1e3 / c->step_ms : 0;
	if (w->batch_kib > 0 && u > 0)
		c->shm_mib = w->batch_kib * k * (double)u * (double)w->prefetch / 1024;
	c->current = b == w->batch_size && u == w->num_workers;
	c->measured_ms = measured_at(points, w, b, u);
	c->mem_mib = -1;
	c->fits = -1;
}

/* The cell is predicted not to fit the job's memory or /dev/shm. */
static int unfit(const struct dlbn_whatif *w, const struct dlbn_whatif_cell *c)
{
	double mem, shm;
	const char *lim;
	return dlbn_whatif_fits(w, c->units, (double)c->batch_size / (double)w->batch_size, 0, -1,
				&mem, &shm, &lim) == 0;
}

/* Is cell c a better pick than cell d, both within DLBN_WHATIF_BEST_WITHIN of the most
 * samples/s: the run's batch size first, then fewer units, then the batch
 * size nearer the run's. */
static int preferred(const struct dlbn_whatif *w, const struct dlbn_whatif_cell *c,
		     const struct dlbn_whatif_cell *d)
{
	int c_own = c->batch_size == w->batch_size, d_own = d->batch_size == w->batch_size;
	if (c_own != d_own)
		return c_own;
	if (c->units != d->units)
		return c->units < d->units;
	return fabs(log((double)c->batch_size / w->batch_size)) <
	       fabs(log((double)d->batch_size / w->batch_size));
}

/* The setting to recommend: the most samples/s, within 2% of it the
 * least change (as the worker curve's best), of the cells that fit. */
static int grid_best(const struct dlbn_whatif *w)
{
	double most = 0;
	int best = -1;
	for (size_t i = 0; i < w->ngrid; i++)
		if (w->grid[i].samples_per_s > most && !unfit(w, &w->grid[i]))
			most = w->grid[i].samples_per_s;
	for (size_t i = 0; i < w->ngrid; i++) {
		const struct dlbn_whatif_cell *c = &w->grid[i];
		if (c->samples_per_s * DLBN_WHATIF_BEST_WITHIN < most || unfit(w, c))
			continue;
		if (best < 0 || preferred(w, c, &w->grid[best]))
			best = (int)i;
	}
	return best;
}

void dlbn_whatif_batch(const struct dlbn_analysis *a, const struct dlbn_sweep *points,
		       struct dlbn_whatif *w)
{
	w->grid_best = -1;
	if (w->batch_size < 1) {
		dlbn_whatif_note(w,
				 "batch size: not in the loader's config, so no batch-size rows");
		return;
	}
	/* The batch's shared memory as the loop mapped it (outside.h), per
	 * step: what each batch in flight holds in /dev/shm. */
	if (!w->in_process && w->num_workers > 0 && a->outside.known &&
	    a->outside.shm_mib_per_step > 0)
		w->batch_kib = a->outside.shm_mib_per_step * 1024;
	fit_split(points, w);
	int sizes[DLBN_WHATIF_BATCHES], units[DLBN_WHATIF_GRID_UNITS];
	size_t nsizes = grid_sizes(points, w, sizes);
	size_t nunits = grid_units(points, w, units);
	for (size_t i = 0; i < nsizes; i++) {
		const char *lim;
		double k = (double)sizes[i] / (double)w->batch_size;
		double step = dlbn_whatif_step_ms(w, k, w->num_workers, &lim);
		struct dlbn_whatif_row *r =
			dlbn_whatif_add_row(w, "batch_size", sizes[i], step, lim);
		if (r) /* in samples/s: a smaller batch's shorter step is no gain */
			r->speedup = step > 0 ? k * w->measured_ms / step : 0;
		if (r && sizes[i] == w->batch_size) {
			r->current = 1;
			r->measured_ms = w->measured_ms;
		}
	}
	for (size_t i = 0; i < nsizes; i++)
		for (size_t j = 0; j < nunits; j++)
			fill_cell(points, w, sizes[i], units[j]);
	w->grid_best = grid_best(w);
	if (w->batch_kib > 0)
		dlbn_whatif_note(
			w,
			"batch size: a batch of %d maps %.0f KiB of shared memory in the loop; "
			"num_workers x prefetch_factor (%d) batches are in flight, so a grid point "
			"needs num_workers x %d x that x its batch size / %d of /dev/shm (shm_mib "
			"in "
			"JSON; dlbn-preflight shows the room), and host memory grows alike",
			w->batch_size, w->batch_kib, w->prefetch, w->prefetch, w->batch_size);
	else if (w->num_workers > 0 && !w->in_process)
		dlbn_whatif_note(
			w, "batch size: the batches' shared memory is not in the trace (no loop "
			   "counters on the fetch marks): the /dev/shm room per grid point is "
			   "unknown");
}
