/*
 * ranks.c - several traces, one per rank of a data-parallel job
 * (docs/DESIGN.md, "Verdict rules"): the per-rank table, the straggler (by its stall, not
 * its step time: ranks.h), the worst rank and the job verdict (rules in
 * ranks.h, struct dlbn_job); report_ranks.c prints them.  Synchronous
 * data-parallel training waits at every collective for its slowest rank,
 * so one rank's input stall slows them all: that is why the job verdict is
 * the worst rank's.
 */
#include <stdlib.h>
#include <string.h>

#include "ranks.h"

void dlbn_rank_row_fill(struct dlbn_rank_row *row, const char *path, int index,
			const struct dlbn_model *m, const struct dlbn_analysis *a)
{
	memset(row, 0, sizeof(*row));
	row->path = path;
	row->rank = index;
	row->world_size = -1;
	if (m->training >= 0) {
		const struct dlbn_proc *p = &m->procs[m->training];
		if (p->rank >= 0) {
			row->rank = p->rank;
			row->rank_known = 1;
		}
		row->world_size = p->world_size;
		snprintf(row->host, sizeof(row->host), "%s", p->host[0] ? p->host : p->argv0);
	}
	row->verdict = a->verdict;
	row->speedup = a->predicted_speedup;
	row->stall_s = a->stall_s;
	row->stall_fraction = a->stall_fraction;
	row->wall_s = a->wall_s;
	row->steps_window = a->steps_window;
	row->step_ms = a->steps_window ? a->wall_s * 1e3 / (double)a->steps_window : 0;
	row->stall_ms_per_step = a->steps_window ? a->stall_s * 1e3 / (double)a->steps_window : 0;
	row->loop_ms = a->loop_ms;
	row->sync_s = a->gpu ? a->sync_fraction * a->wall_s : -1;
	snprintf(row->cause, sizeof(row->cause), "%s", a->cause);
}

/* Is row x worse for the job than row y? */
static int worse(const struct dlbn_rank_row *x, const struct dlbn_rank_row *y)
{
	if (x->verdict != y->verdict)
		return x->verdict > y->verdict;
	return x->speedup > y->speedup;
}

void dlbn_job_summarize(struct dlbn_job *job, const struct dlbn_rank_row *rows, size_t n)
{
	memset(job, 0, sizeof(*job));
	int have_step = 0;
	for (size_t i = 0; i < n; i++) {
		const struct dlbn_rank_row *r = &rows[i];
		if (r->verdict == DLBN_VERDICT_INCONCLUSIVE)
			job->ninconclusive++;
		if (worse(r, &rows[job->worst]))
			job->worst = i;
		if (r->step_ms <= 0)
			continue;
		if (!have_step || r->stall_ms_per_step > rows[job->straggler].stall_ms_per_step)
			job->straggler = i;
		if (!have_step || r->stall_ms_per_step < rows[job->least_stalled].stall_ms_per_step)
			job->least_stalled = i;
		if (!have_step || r->step_ms < job->step_ms_min)
			job->step_ms_min = r->step_ms;
		if (!have_step || r->step_ms > job->step_ms_max)
			job->step_ms_max = r->step_ms;
		if (!have_step || r->stall_s < job->stall_min_s)
			job->stall_min_s = r->stall_s;
		if (!have_step || r->stall_s > job->stall_max_s)
			job->stall_max_s = r->stall_s;
		have_step = 1;
	}
	if (have_step && job->step_ms_min > 0)
		job->step_skew = job->step_ms_max / job->step_ms_min;
	if (have_step && n > 1) {
		const struct dlbn_rank_row *s = &rows[job->straggler];
		double excess = s->stall_ms_per_step - rows[job->least_stalled].stall_ms_per_step;
		job->has_straggler = excess > 0 && excess >= DLBN_STRAGGLER_SHARE * s->step_ms;
	}
	job->verdict = rows[job->worst].verdict;
	if (job->verdict == DLBN_VERDICT_NOT_DETECTED && job->ninconclusive) {
		/* The report then shows the rank that could not be judged, and why. */
		job->verdict = DLBN_VERDICT_INCONCLUSIVE;
		for (size_t i = 0; i < n; i++) {
			if (rows[i].verdict == DLBN_VERDICT_INCONCLUSIVE) {
				job->worst = i;
				break;
			}
		}
	}
}

double dlbn_job_wait_ms(const struct dlbn_job *job, const struct dlbn_rank_row *rows, size_t i)
{
	if (!job->has_straggler || i == job->straggler || rows[i].step_ms <= 0)
		return 0;
	double d = rows[i].loop_ms - rows[job->straggler].loop_ms;
	return d > 0 ? d : 0;
}

struct rank_key {
	int rank;
	size_t index;
};

static int rank_key_cmp(const void *a, const void *b)
{
	const struct rank_key *x = a, *y = b;
	if (x->rank != y->rank)
		return x->rank < y->rank ? -1 : 1;
	return x->index < y->index ? -1 : (x->index > y->index);
}

int dlbn_rank_rows_sort(struct dlbn_rank_row *rows, size_t n, size_t *order)
{
	for (size_t i = 0; i < n; i++)
		order[i] = i;
	struct rank_key *k = malloc((n ? n : 1) * sizeof(*k));
	struct dlbn_rank_row *copy = malloc((n ? n : 1) * sizeof(*copy));
	if (!k || !copy) {
		free(k);
		free(copy);
		return -1;
	}
	for (size_t i = 0; i < n; i++)
		k[i] = (struct rank_key){rows[i].rank, i};
	qsort(k, n, sizeof(*k), rank_key_cmp);
	memcpy(copy, rows, n * sizeof(*rows));
	for (size_t i = 0; i < n; i++) {
		rows[i] = copy[k[i].index];
		order[i] = k[i].index;
	}
	free(k);
	free(copy);
	return 0;
}
