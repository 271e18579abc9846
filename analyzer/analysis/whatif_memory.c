/*
 * whatif_memory.c - the what-if's memory: what each row and grid point
 * needs in memory and /dev/shm, whether it fits, and the most units that
 * fit (whatif.h; the model is analysis/memory.h's).  A point that does not
 * fit keeps its predicted step, with limited_by memory or shm: the step it
 * would take, were it to run.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "analysis/memory.h"
#include "analysis/whatif.h"

#define MAX_FIT_UNITS 64

int dlbn_whatif_fits(const struct dlbn_whatif *w, int n, double k, int pf, int persistent,
		     double *mem_mib, double *shm_mib, const char **lim)
{
	*mem_mib = -1;
	*shm_mib = 0;
	*lim = NULL;
	if (!w->memory)
		return -1;
	struct dlbn_memory m = *w->memory;
	if (pf > 0)
		m.prefetch = pf;
	if (persistent >= 0)
		m.persistent = persistent;
	*mem_mib = dlbn_memory_need_mib(&m, n, k, shm_mib);
	*lim = dlbn_memory_exceeds(&m, *mem_mib, *shm_mib);
	if (*lim)
		return 0;
	if (*mem_mib < 0 || !(m.budget_mib > 0))
		return -1; /* /dev/shm may fit; memory is not known to */
	return 1;
}

/* Whether n units at the run's batch size fit (unknown counts as fitting:
 * nothing says it does not). */
static int units_fit(const struct dlbn_whatif *w, int n, const char **lim)
{
	double mem, shm;
	return dlbn_whatif_fits(w, n, 1, 0, -1, &mem, &shm, lim) != 0;
}

void dlbn_whatif_memory_inputs(const struct dlbn_analysis *a, struct dlbn_whatif *w)
{
	const struct dlbn_memory *mem = &a->memory;
	w->fit_max = -1;
	/* Worker processes only: a loader's threads share the training
	 * process's memory, which the run measured whole. */
	if (w->in_process || (!mem->present && !mem->job) || strcmp(w->knob, "num_workers") != 0)
		return;
	w->memory = mem;
	w->memory_known = mem->rollup && mem->has_main;
	w->copy_ms_run = dlbn_memory_copy_ms(mem, w->num_workers);
	if (w->copy_ms_run > w->worker_cpu_ms)
		w->copy_ms_run = w->worker_cpu_ms;
	if (w->copy_ms_run > 0)
		dlbn_whatif_note(
			w,
			"copy-on-write: a worker copies up to %.0f MiB, %.0f KiB a batch at "
			"first, at %.1f us of kernel CPU a page%s: %.2f ms per step at the "
			"run's %d, more with more workers (each copies its own)",
			mem->touch_mib, mem->touch_kib, mem->copy_us,
			mem->copy_us_fitted ? "" : " (typical: not separable in this run)",
			w->copy_ms_run, w->num_workers);
	const char *lim = NULL;
	int n = w->min_units;
	while (n <= MAX_FIT_UNITS && units_fit(w, n, &lim))
		n++;
	if (n > MAX_FIT_UNITS)
		return;
	w->fit_max = n - 1;
	double need, shm;
	(void)dlbn_whatif_fits(w, n, 1, 0, -1, &need, &shm, &lim);
	if (lim && !strcmp(lim, DLBN_LIMIT_SHM))
		snprintf(
			w->fit_why, sizeof(w->fit_why),
			"%d would need %.0f MiB of /dev/shm for the batches in flight, over %.0f%% "
			"of its %.0f MiB",
			n, shm, DLBN_MEM_FIT_SHARE * 100, mem->shm_size_mib);
	else
		snprintf(w->fit_why, sizeof(w->fit_why),
			 "%d would need %.0f MiB, over %.0f%% of the %.0f MiB %s", n, need,
			 DLBN_MEM_FIT_SHARE * 100, mem->budget_mib, mem->budget_short);
}

/* A row's or cell's memory and fit; a point that does not fit is limited
 * by it. */
static void mark(char *limited_by, size_t len, double *mem_out, double *shm_out, int *fits,
		 double mem, double shm, int fit, const char *lim)
{
	*mem_out = mem;
	*shm_out = shm;
	*fits = fit;
	if (fit == 0 && lim)
		snprintf(limited_by, len, "%s", lim);
}

void dlbn_whatif_memory_rows(struct dlbn_whatif *w)
{
	if (!w->memory)
		return;
	for (size_t i = 0; i < w->nrows; i++) {
		struct dlbn_whatif_row *r = &w->rows[i];
		int n = w->num_workers, pf = 0, persistent = -1;
		double k = 1;
		if (!strcmp(r->setting, w->knob))
			n = r->value;
		else if (!strcmp(r->setting, "prefetch_factor"))
			pf = r->value;
		else if (!strcmp(r->setting, "persistent_workers"))
			persistent = r->value;
		else if (!strcmp(r->setting, "batch_size") && w->batch_size > 0)
			k = (double)r->value / (double)w->batch_size;
		double mem, shm;
		const char *lim;
		int fit = dlbn_whatif_fits(w, n, k, pf, persistent, &mem, &shm, &lim);
		mark(r->limited_by, sizeof(r->limited_by), &r->mem_mib, &r->shm_mib, &r->fits, mem,
		     shm, fit, lim);
	}
	for (size_t i = 0; i < w->ngrid; i++) {
		struct dlbn_whatif_cell *c = &w->grid[i];
		double k = w->batch_size > 0 ? (double)c->batch_size / (double)w->batch_size : 1;
		double mem, shm;
		const char *lim;
		int fit = dlbn_whatif_fits(w, c->units, k, 0, -1, &mem, &shm, &lim);
		mark(c->limited_by, sizeof(c->limited_by), &c->mem_mib, &c->shm_mib, &c->fits, mem,
		     shm, fit, lim);
	}
	if (w->fit_max >= 0)
		dlbn_whatif_note(w, "the most %s that fit: %d (%s; the job may hold %s)", w->knob,
				 w->fit_max, w->fit_why, w->memory->budget_from);
	if (w->best_unfit > w->best_workers)
		dlbn_whatif_note(w,
				 "memory stops the curve: its best would be %d %s, %d fit (the "
				 "fewest for the best of those)",
				 w->best_unfit, w->knob, w->best_workers);
}
