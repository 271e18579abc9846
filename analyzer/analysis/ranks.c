/*
 * ranks.c - several ranks of a data-parallel job (ranks.h; docs/DESIGN.md,
 * "Several ranks"): a rank's row from its analysis, the job's worst rank
 * and verdict, the straggler (by its stall, not its step time), the spread
 * across ranks, the hosts and the ranks that stand out from their host,
 * and the ranks the job had that no input covers.  report_ranks.c prints
 * them; rank_summary.c writes and reads a row as a file.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/ranks.h"
#include "analysis/hotspots.h"
#include "trace/reader.h"

static void copy_lines(char (*dst)[DLBN_LINE], size_t *ndst, const char (*src)[DLBN_LINE],
		       size_t nsrc)
{
	*ndst = nsrc < DLBN_ROW_LINES ? nsrc : DLBN_ROW_LINES;
	for (size_t i = 0; i < *ndst; i++)
		memcpy(dst[i], src[i], DLBN_LINE);
}

static void fill_loaders(struct dlbn_rank_row *row, const struct dlbn_model *m)
{
	row->nloaders = m->loaders.ntrain_proc;
	for (size_t i = 0; i < row->nloaders && i < DLBN_ROW_LOADERS; i++) {
		struct dlbn_loader_summary ls;
		struct dlbn_rank_loader *l = &row->loaders[i];
		dlbn_loader_summary(m, i, &ls);
		snprintf(l->kind, sizeof(l->kind), "%s", ls.kind);
		dlbn_loader_describe(&ls, l->desc, sizeof(l->desc));
		l->training = ls.training;
		l->num_workers = ls.num_workers;
		l->batch_size = ls.batch_size;
		l->wait_s = ls.wait_s;
		l->stall_s = ls.stall_s;
	}
}

static void fill_hot(struct dlbn_rank_row *row, const struct dlbn_hotspots *hot)
{
	for (size_t i = 0; hot && i < hot->n && row->nhot < DLBN_ROW_HOT; i++) {
		const struct dlbn_hotspot *h = &hot->v[i];
		struct dlbn_rank_hot *o = &row->hot[row->nhot++];
		snprintf(o->name, sizeof(o->name), "%s", h->name);
		if (h->file[0] && h->line > 0)
			snprintf(o->where, sizeof(o->where), "%.100s:%d", h->file, h->line);
		else
			snprintf(o->where, sizeof(o->where), "%.110s", h->file);
		o->share = h->share;
	}
}

/* Cut: the trace ends early; damaged: records lost inside it.  A bit
 * flip the reader repaired lost nothing: the rank is whole. */
static void fill_state(struct dlbn_rank_row *row, const struct dlbn_model *m,
		       const struct dlbn_reader_stats *rs)
{
	int killed = m->training >= 0 && !m->procs[m->training].has_exit;
	uint64_t lost = rs ? rs->extents_corrupt + rs->extents_bad_header + rs->extents_missing +
					rs->seq_gaps
			   : 0;
	if (rs && (rs->truncated || rs->extents_cut || dlbn_reader_cut_short(rs))) {
		row->state = DLBN_RANK_CUT;
		snprintf(row->state_note, sizeof(row->state_note), "%s",
			 rs->truncated || rs->extents_cut ? "the trace file is cut short"
							  : "recording stopped early");
	} else if (lost) {
		row->state = DLBN_RANK_DAMAGED;
		snprintf(row->state_note, sizeof(row->state_note),
			 "records lost: %llu corrupt extent(s), %llu missing, %llu gap(s)",
			 (unsigned long long)(rs->extents_corrupt + rs->extents_bad_header),
			 (unsigned long long)rs->extents_missing, (unsigned long long)rs->seq_gaps);
	} else if (killed) {
		row->state = DLBN_RANK_CUT;
		snprintf(row->state_note, sizeof(row->state_note),
			 "the training process did not exit (killed, or still running)");
	}
}

void dlbn_rank_row_fill(struct dlbn_rank_row *row, const char *input, size_t input_index,
			const struct dlbn_model *m, const struct dlbn_analysis *a,
			const struct dlbn_hotspots *hot, const struct dlbn_reader_stats *rs)
{
	memset(row, 0, sizeof(*row));
	row->input = input;
	row->input_index = input_index;
	row->source = DLBN_RANK_FROM_TRACE;
	snprintf(row->trace, sizeof(row->trace), "%s", input);
	row->rank = (int)input_index;
	row->local_rank = row->world_size = -1;
	if (m->training >= 0) {
		const struct dlbn_proc *p = &m->procs[m->training];
		if (p->rank >= 0) {
			row->rank = p->rank;
			row->rank_known = 1;
		}
		row->local_rank = p->local_rank;
		row->world_size = p->world_size;
		snprintf(row->host, sizeof(row->host), "%s", p->host);
	}
	if (!row->host[0] && rs)
		snprintf(row->host, sizeof(row->host), "%.63s", rs->host);
	row->verdict = a->verdict;
	row->speedup = a->predicted_speedup;
	row->speedup_low = a->predicted_speedup_low;
	row->stall_s = a->stall_s;
	row->stall_fraction = a->stall_fraction;
	row->wall_s = a->wall_s;
	row->steps_window = a->steps_window;
	row->step_ms = a->steps_window ? a->wall_s * 1e3 / (double)a->steps_window : 0;
	row->stall_ms_per_step = a->steps_window ? a->stall_s * 1e3 / (double)a->steps_window : 0;
	row->loop_ms = a->loop_ms;
	row->sync_s = a->gpu ? a->sync_fraction * a->wall_s : -1;
	snprintf(row->cause, sizeof(row->cause), "%s", dlbn_cause_name(a->cause));
	snprintf(row->view, sizeof(row->view), "%s", dlbn_view_name(a->view));
	row->num_workers = a->num_workers;
	row->nworkers = a->nworkers;
	row->mean_busy = a->mean_busy;
	row->records = rs ? rs->records : 0;
	fill_loaders(row, m);
	fill_hot(row, hot);
	copy_lines(row->reasons, &row->nreasons, a->reasons, a->nreasons);
	copy_lines(row->recs, &row->nrecs, a->recs, a->nrecs);
	copy_lines(row->warnings, &row->nwarnings, a->warnings, a->nwarnings);
	fill_state(row, m, rs);
}

/* DETECTED > POTENTIAL > INCONCLUSIVE > NOT_DETECTED (ranks.h). */
static int badness(int verdict)
{
	switch (verdict) {
	case DLBN_VERDICT_DETECTED:
		return 3;
	case DLBN_VERDICT_POTENTIAL:
		return 2;
	case DLBN_VERDICT_INCONCLUSIVE:
		return 1;
	default:
		return 0;
	}
}

int dlbn_rank_row_worse(const struct dlbn_rank_row *x, const struct dlbn_rank_row *y)
{
	int bx = badness(x->verdict), by = badness(y->verdict);
	if (bx != by)
		return bx > by;
	/* An INCONCLUSIVE rank's speedup is not a judgement: rank order only. */
	if (x->verdict != DLBN_VERDICT_INCONCLUSIVE && x->speedup != y->speedup)
		return x->speedup > y->speedup;
	if (x->rank != y->rank)
		return x->rank < y->rank;
	return x->input_index < y->input_index;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

/* The spread of v[0..n) (sorted here). */
static struct dlbn_spread spread_of(double *v, size_t n)
{
	struct dlbn_spread s = {.n = n};
	if (!n)
		return s;
	qsort(v, n, sizeof(*v), cmp_double);
	s.min = v[0];
	s.p50 = v[(n - 1) / 2];
	s.p90 = v[(size_t)((double)(n - 1) * 0.9)];
	s.max = v[n - 1];
	return s;
}

/* Spreads over the rows with a window; scratch holds n doubles. */
static void job_spreads(struct dlbn_job *job, const struct dlbn_rank_row *rows, size_t n,
			double *scratch)
{
	size_t k = 0;
	for (size_t i = 0; i < n; i++)
		if (rows[i].step_ms > 0)
			scratch[k++] = rows[i].stall_fraction;
	job->stall_fraction = spread_of(scratch, k);
	k = 0;
	for (size_t i = 0; i < n; i++)
		if (rows[i].step_ms > 0)
			scratch[k++] = rows[i].stall_ms_per_step;
	job->stall_ms = spread_of(scratch, k);
	k = 0;
	for (size_t i = 0; i < n; i++)
		if (rows[i].step_ms > 0 && rows[i].speedup > 0)
			scratch[k++] = rows[i].speedup;
	job->speedup = spread_of(scratch, k);
	k = 0;
	for (size_t i = 0; i < n; i++)
		if (rows[i].step_ms > 0 && rows[i].mean_busy >= 0)
			scratch[k++] = rows[i].mean_busy;
	job->busy = spread_of(scratch, k);
}

/* Keep the rows with the largest stall per step, largest first. */
static void top_insert(size_t *top, size_t *ntop, size_t cap, const struct dlbn_rank_row *rows,
		       size_t i)
{
	size_t k = *ntop < cap ? (*ntop)++ : cap;
	while (k > 0 && rows[top[k - 1]].stall_ms_per_step < rows[i].stall_ms_per_step) {
		if (k < cap)
			top[k] = top[k - 1];
		k--;
	}
	if (k < cap)
		top[k] = i;
}

/* The row's host index, adding the host at the end when new.  Hosts are
 * few next to ranks (8 or so ranks each), so a hash table would not pay
 * for itself below tens of thousands of ranks: the last host found is
 * tried first, since ranks of a host are usually adjacent in rank order. */
static size_t host_index(struct dlbn_job *job, const char *name, size_t *last)
{
	if (*last < job->nhosts && !strcmp(job->hosts[*last].name, name))
		return *last;
	for (size_t h = 0; h < job->nhosts; h++)
		if (!strcmp(job->hosts[h].name, name))
			return *last = h;
	struct dlbn_host *nh = &job->hosts[job->nhosts];
	memset(nh, 0, sizeof(*nh));
	snprintf(nh->name, sizeof(nh->name), "%s", name);
	return *last = job->nhosts++;
}

/*
 * A rank is input-bound when its loader cannot keep ahead of its loop:
 * its stall per step is DLBN_STRAGGLER_SHARE of its step time above the
 * job's median, or its workers are busy DLBN_BUSY_BOUND of the time while
 * the median rank's have slack.  The second matters in lockstep: of
 * several slow ranks only the slowest shows the stall; the others load
 * while they wait for it at the collective, and their stall hides.
 */
#define DLBN_BUSY_BOUND 0.90
#define DLBN_BUSY_SLACK 0.70

static int input_bound(const struct dlbn_job *job, const struct dlbn_rank_row *r)
{
	double margin = DLBN_STRAGGLER_SHARE * r->step_ms;
	if (r->step_ms <= 0 || margin <= 0)
		return 0;
	if (r->stall_ms_per_step - job->stall_ms.p50 >= margin)
		return 1;
	return r->mean_busy >= DLBN_BUSY_BOUND && job->busy.n && job->busy.p50 < DLBN_BUSY_SLACK;
}

/* The most common cause among the rows rows[idx[0..k)] that name one
 * ("none" only when none does; the first seen wins ties). */
static void common_cause(char *out, size_t len, const struct dlbn_rank_row *rows, const size_t *idx,
			 size_t k)
{
	size_t best = 0;
	snprintf(out, len, "%s", k ? rows[idx[0]].cause : "");
	for (size_t a = 0; a < k && best * 2 <= k; a++) {
		size_t count = 0;
		if (!strcmp(rows[idx[a]].cause, "none"))
			continue;
		for (size_t b = a; b < k; b++)
			count += !strcmp(rows[idx[b]].cause, rows[idx[a]].cause);
		if (count > best) {
			best = count;
			snprintf(out, len, "%s", rows[idx[a]].cause);
		}
	}
}

/* Host h's medians and cause (its input-bound ranks' most common, where
 * it has some).  Its rows are job->host_rows[first ..]; scratch and pick
 * hold as many. */
static void host_figures(struct dlbn_job *job, size_t h, const struct dlbn_rank_row *rows,
			 double *scratch, size_t *pick)
{
	struct dlbn_host *host = &job->hosts[h];
	const size_t *mine = job->host_rows + host->first;
	size_t k = 0, ks = 0, kb = 0;
	for (size_t j = 0; j < host->nranks; j++)
		if (rows[mine[j]].step_ms > 0)
			scratch[k++] = rows[mine[j]].stall_ms_per_step;
	host->nwindow = k;
	host->stall_ms_p50 = spread_of(scratch, k).p50;
	for (size_t j = 0; j < host->nranks; j++)
		if (rows[mine[j]].step_ms > 0 && rows[mine[j]].speedup > 0)
			scratch[ks++] = rows[mine[j]].speedup;
	host->speedup_p50 = spread_of(scratch, ks).p50;
	for (size_t j = 0; j < host->nranks; j++)
		if (!host->ninput_bound || input_bound(job, &rows[mine[j]]))
			pick[kb++] = mine[j];
	common_cause(host->cause, sizeof(host->cause), rows, pick, kb);
}

/* Group the rows by host: host_of[i], and host_rows with each host's rows
 * together (in rank order) from hosts[h].first. */
static int group_hosts(struct dlbn_job *job, const struct dlbn_rank_row *rows, size_t n)
{
	job->hosts = calloc(n ? n : 1, sizeof(*job->hosts));
	job->host_of = malloc((n ? n : 1) * sizeof(*job->host_of));
	job->host_rows = malloc((n ? n : 1) * sizeof(*job->host_rows));
	if (!job->hosts || !job->host_of || !job->host_rows)
		return -1;
	size_t last = 0;
	for (size_t i = 0; i < n; i++) {
		size_t h = host_index(job, rows[i].host, &last);
		struct dlbn_host *host = &job->hosts[h];
		job->host_of[i] = h;
		if (!host->nranks++ ||
		    rows[i].stall_ms_per_step > rows[host->worst].stall_ms_per_step)
			host->worst = i;
		host->ninput_bound += (size_t)input_bound(job, &rows[i]);
	}
	size_t at = 0;
	for (size_t h = 0; h < job->nhosts; h++) {
		job->hosts[h].first = at;
		at += job->hosts[h].nranks;
		job->hosts[h].nranks = 0; /* counted again as the rows are placed */
	}
	for (size_t i = 0; i < n; i++) {
		struct dlbn_host *host = &job->hosts[job->host_of[i]];
		job->host_rows[host->first + host->nranks++] = i;
	}
	return 0;
}

/* Hosts and their figures; a host is slow when most of its ranks are
 * input-bound and some other host's are not (else the job is, not a
 * host).  A rank stands out when it is input-bound on a host that is not
 * slow: a problem of that rank alone. */
static int job_hosts(struct dlbn_job *job, const struct dlbn_rank_row *rows, size_t n,
		     double *scratch)
{
	size_t *pick = malloc((n ? n : 1) * sizeof(*pick));
	if (!pick || group_hosts(job, rows, n) != 0) {
		free(pick);
		return -1;
	}
	size_t bound_hosts = 0;
	for (size_t h = 0; h < job->nhosts; h++) {
		host_figures(job, h, rows, scratch, pick);
		bound_hosts += 2 * job->hosts[h].ninput_bound > job->hosts[h].nwindow;
	}
	free(pick);
	for (size_t h = 0; h < job->nhosts && bound_hosts < job->nhosts; h++) {
		struct dlbn_host *host = &job->hosts[h];
		host->slow = 2 * host->ninput_bound > host->nwindow;
		job->nslow_hosts += (size_t)host->slow;
	}
	for (size_t i = 0; i < n; i++)
		if (!job->hosts[job->host_of[i]].slow && input_bound(job, &rows[i]) &&
		    (job->nhosts > 1 || job->hosts[0].nranks > 1))
			top_insert(job->lone_rows, &job->nlone_rows, DLBN_JOB_LONE, rows, i);
	return 0;
}

static int cmp_int(const void *a, const void *b)
{
	int x = *(const int *)a, y = *(const int *)b;
	return x < y ? -1 : x > y;
}

/* The ranks below the job's world size that no row has, and the ranks
 * that more than one row has (a rank's trace given twice, or two runs'
 * traces mixed). */
static int job_missing(struct dlbn_job *job, const struct dlbn_rank_row *rows, size_t n)
{
	job->world_size = -1;
	for (size_t i = 0; i < n; i++)
		if (rows[i].world_size > job->world_size)
			job->world_size = rows[i].world_size;
	int *have = malloc((n ? n : 1) * sizeof(*have));
	if (!have)
		return -1;
	size_t k = 0;
	for (size_t i = 0; i < n; i++)
		if (rows[i].rank_known)
			have[k++] = rows[i].rank;
	qsort(have, k, sizeof(*have), cmp_int);
	job->ndistinct = n;
	for (size_t i = 1; i < k; i++) {
		job->ndistinct -= have[i] == have[i - 1];
		if (have[i] != have[i - 1] || (i > 1 && have[i - 1] == have[i - 2]))
			continue;
		if (job->nduplicate < DLBN_JOB_MISSING)
			job->duplicate[job->nduplicate] = have[i];
		job->nduplicate++;
	}
	/* Name the first few gaps below the world size; count the rest from
	 * the distinct ranks inside it (a bad world size costs no time). */
	size_t j = 0, inside = 0;
	for (size_t i = 0; i < k; i++)
		inside += have[i] < job->world_size && (i == 0 || have[i] != have[i - 1]);
	for (int r = 0; job->world_size > 0 && r < job->world_size; r++) {
		if (job->nmissing == DLBN_JOB_MISSING)
			break;
		while (j < k && have[j] < r)
			j++;
		if (j >= k || have[j] != r)
			job->missing[job->nmissing++] = r;
	}
	if (job->world_size > 0)
		job->nmissing = (size_t)job->world_size - inside;
	free(have);
	return 0;
}

/* Worst, straggler, step and stall ranges: one pass over the rows. */
static void job_extremes(struct dlbn_job *job, const struct dlbn_rank_row *rows, size_t n)
{
	int have_step = 0;
	for (size_t i = 0; i < n; i++) {
		const struct dlbn_rank_row *r = &rows[i];
		job->ninconclusive += r->verdict == DLBN_VERDICT_INCONCLUSIVE;
		job->ndamaged += r->state == DLBN_RANK_DAMAGED;
		job->ncut += r->state == DLBN_RANK_CUT;
		job->nfrom_summary += r->source == DLBN_RANK_FROM_SUMMARY;
		if (dlbn_rank_row_worse(r, &rows[job->worst]))
			job->worst = i;
		if (r->step_ms <= 0)
			continue;
		top_insert(job->worst_rows, &job->nworst_rows, DLBN_JOB_WORST, rows, i);
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
	job->verdict = n ? rows[job->worst].verdict : DLBN_VERDICT_INCONCLUSIVE;
}

int dlbn_job_summarize(struct dlbn_job *job, const struct dlbn_rank_row *rows, size_t n,
		       size_t nfailed)
{
	memset(job, 0, sizeof(*job));
	job->nfailed = nfailed;
	double *scratch = malloc((n ? n : 1) * sizeof(*scratch));
	if (!scratch)
		return -1;
	job_extremes(job, rows, n);
	job_spreads(job, rows, n, scratch);
	int rc = job_hosts(job, rows, n, scratch) || job_missing(job, rows, n) ? -1 : 0;
	free(scratch);
	if (rc)
		dlbn_job_free(job);
	return rc;
}

void dlbn_job_free(struct dlbn_job *job)
{
	free(job->hosts);
	free(job->host_of);
	free(job->host_rows);
	memset(job, 0, sizeof(*job));
}

double dlbn_job_wait_ms(const struct dlbn_job *job, const struct dlbn_rank_row *rows, size_t i)
{
	if (!job->has_straggler || i == job->straggler || rows[i].step_ms <= 0)
		return 0;
	double d = rows[i].loop_ms - rows[job->straggler].loop_ms;
	return d > 0 ? d : 0;
}

int dlbn_rank_row_maybe_launcher(const struct dlbn_rank_row *r)
{
	/* A damaged or cut trace may have lost the record that names its rank. */
	return !r->rank_known && r->state == DLBN_RANK_WHOLE &&
	       r->verdict == DLBN_VERDICT_INCONCLUSIVE && !r->steps_window;
}

size_t dlbn_rank_rows_set_aside(struct dlbn_rank_row *rows, size_t *n,
				struct dlbn_rank_failure *aside)
{
	int any_rank = 0;
	for (size_t i = 0; i < *n; i++)
		any_rank |= rows[i].rank_known;
	if (!any_rank)
		return 0; /* one program of its own, or ranks nobody named */
	size_t kept = 0, naside = 0;
	for (size_t i = 0; i < *n; i++) {
		if (!dlbn_rank_row_maybe_launcher(&rows[i])) {
			if (kept != i)
				rows[kept] = rows[i];
			kept++;
			continue;
		}
		aside[naside].input = rows[i].input;
		snprintf(
			aside[naside].why, sizeof(aside[naside].why),
			"%s: no rank and no loop fed by a loader (%s): a launcher's process, not a "
			"rank",
			rows[i].input, rows[i].cause);
		naside++;
	}
	*n = kept;
	return naside;
}

struct rank_key {
	int rank;
	size_t index, at;
};

static int rank_key_cmp(const void *a, const void *b)
{
	const struct rank_key *x = a, *y = b;
	if (x->rank != y->rank)
		return x->rank < y->rank ? -1 : 1;
	return x->index < y->index ? -1 : (x->index > y->index);
}

int dlbn_rank_rows_sort(struct dlbn_rank_row *rows, size_t n)
{
	struct rank_key *k = malloc((n ? n : 1) * sizeof(*k));
	struct dlbn_rank_row *spare = malloc(sizeof(*spare));
	if (!k || !spare) {
		free(k);
		free(spare);
		return -1;
	}
	for (size_t i = 0; i < n; i++)
		k[i] = (struct rank_key){rows[i].rank, rows[i].input_index, i};
	qsort(k, n, sizeof(*k), rank_key_cmp);
	/* Row k[i].at goes to i: follow each cycle of the permutation with one
	 * spare row (rows are a few KiB; a thousand are not copied whole). */
	for (size_t i = 0; i < n; i++) {
		if (k[i].at == i || k[i].at == (size_t)-1)
			continue;
		*spare = rows[i];
		size_t to = i;
		while (k[to].at != i) {
			size_t from = k[to].at;
			rows[to] = rows[from];
			k[to].at = (size_t)-1;
			to = from;
		}
		rows[to] = *spare;
		k[to].at = (size_t)-1;
	}
	free(k);
	free(spare);
	return 0;
}
