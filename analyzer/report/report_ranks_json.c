/*
 * report_ranks_json.c - the job in the JSON report (keys in
 * dlbn-analyze(1)): "ranks" (every row, in rank order, whatever their
 * number), "job" (verdict, straggler, spread, hosts, what the verdict rests
 * on) and "subject" (the row the rank report is about, as its summary).
 */
#include <string.h>

#include "analysis/rank_summary.h"
#include "report/report.h"
#include "util/json.h"

/* "k":[{"path":...,"why":...},...] of inputs that gave no rank. */
static void failures_json(FILE *out, const char *k, const struct dlbn_rank_failure *f, size_t n,
			  int *first)
{
	int items = dlbn_json_open(out, k, '[', first);
	for (size_t i = 0; i < n; i++) {
		int m = dlbn_json_open(out, NULL, '{', &items);
		dlbn_json_key_str(out, "path", f[i].input, &m);
		dlbn_json_key_str(out, "why", f[i].why, &m);
		fputc('}', out);
	}
	fputc(']', out);
}

static void row_json(FILE *out, const struct dlbn_report_input *in, size_t i, int *items)
{
	static const char *const states[] = {"whole", "damaged", "cut"};
	const struct dlbn_rank_row *r = &in->ranks[i];
	int first = dlbn_json_open(out, NULL, '{', items);
	dlbn_json_key_int(out, "rank", r->rank, &first);
	dlbn_json_key_str(out, "rank_source", r->rank_known ? "trace" : "argument_order", &first);
	dlbn_json_key_int_or_null(out, "local_rank", r->local_rank, r->local_rank >= 0, &first);
	dlbn_json_key_int_or_null(out, "world_size", r->world_size, r->world_size > 0, &first);
	dlbn_json_key_str(out, "host", r->host, &first);
	dlbn_json_key_str(out, "path", r->input, &first);
	dlbn_json_key_str(out, "from", r->source == DLBN_RANK_FROM_SUMMARY ? "summary" : "trace",
			  &first);
	dlbn_json_key_str(out, "trace", r->trace, &first);
	dlbn_json_key_str(out, "state", states[r->state], &first);
	dlbn_json_key_str(out, "verdict", dlbn_verdict_name(r->verdict), &first);
	dlbn_json_key_number_or_null(out, "predicted_speedup", r->speedup, r->speedup > 0, &first);
	dlbn_json_key_number(out, "stall_s", r->stall_s, &first);
	dlbn_json_key_number(out, "stall_fraction", r->stall_fraction, &first);
	dlbn_json_key_number(out, "step_ms", r->step_ms, &first);
	dlbn_json_key_number(out, "stall_ms_per_step", r->stall_ms_per_step, &first);
	dlbn_json_key_number(out, "rest_ms_per_step", r->loop_ms, &first);
	dlbn_json_key_number_or_null(out, "gpu_sync_s", r->sync_s, r->sync_s >= 0, &first);
	const struct dlbn_job *job = in->job;
	int waits = job && job->has_straggler && i != job->straggler && r->step_ms > 0;
	dlbn_json_key_number_or_null(out, "waits_for_straggler_ms_per_step",
				     waits ? dlbn_job_wait_ms(job, in->ranks, i) : 0, waits,
				     &first);
	dlbn_json_key_uint(out, "steps_window", r->steps_window, &first);
	dlbn_json_key_str(out, "cause", r->cause, &first);
	fputc('}', out);
}

static void spread_json(FILE *out, const char *key, const struct dlbn_spread *s, int *first)
{
	if (!s->n) {
		dlbn_json_key_null(out, key, first);
		return;
	}
	int f = dlbn_json_open(out, key, '{', first);
	dlbn_json_key_uint(out, "ranks", s->n, &f);
	dlbn_json_key_number(out, "min", s->min, &f);
	dlbn_json_key_number(out, "p50", s->p50, &f);
	dlbn_json_key_number(out, "p90", s->p90, &f);
	dlbn_json_key_number(out, "max", s->max, &f);
	fputc('}', out);
}

/* A list of ranks: the rows at idx[0..n). */
static void ranks_of(FILE *out, const char *key, const struct dlbn_report_input *in,
		     const size_t *idx, size_t n, int *first)
{
	int items = dlbn_json_open(out, key, '[', first);
	for (size_t k = 0; k < n; k++) {
		dlbn_json_item(out, &items);
		fprintf(out, "%d", in->ranks[idx[k]].rank);
	}
	fputc(']', out);
}

static void host_json(FILE *out, const struct dlbn_report_input *in, size_t h, int *items)
{
	const struct dlbn_job *job = in->job;
	const struct dlbn_host *host = &job->hosts[h];
	int f = dlbn_json_open(out, NULL, '{', items);
	dlbn_json_key_str(out, "host", host->name, &f);
	int ranks = dlbn_json_open(out, "ranks", '[', &f);
	for (size_t i = 0; i < in->nranks; i++)
		if (job->host_of[i] == h) {
			dlbn_json_item(out, &ranks);
			fprintf(out, "%d", in->ranks[i].rank);
		}
	fputc(']', out);
	dlbn_json_key_number(out, "stall_ms_per_step_p50", host->stall_ms_p50, &f);
	dlbn_json_key_number_or_null(out, "predicted_speedup_p50", host->speedup_p50,
				     host->speedup_p50 > 0, &f);
	dlbn_json_key_int(out, "worst_rank", in->ranks[host->worst].rank, &f);
	dlbn_json_key_str(out, "cause", host->cause, &f);
	dlbn_json_key_bool(out, "slow", host->slow, &f);
	fputc('}', out);
}

static void hosts_json(FILE *out, const struct dlbn_report_input *in, int *first)
{
	const struct dlbn_job *job = in->job;
	int items = dlbn_json_open(out, "hosts", '[', first);
	for (size_t h = 0; h < job->nhosts; h++)
		host_json(out, in, h, &items);
	fputc(']', out);
	items = dlbn_json_open(out, "slow_hosts", '[', first);
	for (size_t h = 0; h < job->nhosts; h++)
		if (job->hosts[h].slow) {
			dlbn_json_item(out, &items);
			dlbn_json_str(out, job->hosts[h].name);
		}
	fputc(']', out);
}

/* "k":[...] of the first DLBN_JOB_MISSING of n rank numbers. */
static void rank_numbers(FILE *out, const char *k, const int *v, size_t n, int *first)
{
	size_t shown = n < DLBN_JOB_MISSING ? n : DLBN_JOB_MISSING;
	int items = dlbn_json_open(out, k, '[', first);
	for (size_t i = 0; i < shown; i++) {
		dlbn_json_item(out, &items);
		fprintf(out, "%d", v[i]);
	}
	fputc(']', out);
}

/* What the job verdict rests on. */
static void coverage_json(FILE *out, const struct dlbn_report_input *in, int *first)
{
	const struct dlbn_job *job = in->job;
	dlbn_json_key_int_or_null(out, "world_size", job->world_size, job->world_size >= 0, first);
	rank_numbers(out, "missing_ranks", job->missing, job->nmissing, first);
	dlbn_json_key_uint(out, "missing_count", job->nmissing, first);
	rank_numbers(out, "duplicate_ranks", job->duplicate, job->nduplicate, first);
	failures_json(out, "unreadable", in->failures, in->nfailures, first);
	failures_json(out, "not_ranks", in->aside, in->naside, first);
	dlbn_json_key_uint(out, "damaged_ranks", job->ndamaged, first);
	dlbn_json_key_uint(out, "cut_ranks", job->ncut, first);
	dlbn_json_key_uint(out, "from_summaries", job->nfrom_summary, first);
}

static void straggler_json(FILE *out, const struct dlbn_report_input *in, int *first)
{
	const struct dlbn_job *job = in->job;
	const struct dlbn_rank_row *s = &in->ranks[job->straggler];
	int has = job->has_straggler;
	dlbn_json_key_int_or_null(out, "straggler_rank", s->rank, has, first);
	dlbn_json_key_int_or_null(out, "straggler_index", (long long)job->straggler, has, first);
	dlbn_json_key_str_or_null(out, "straggler_host", s->host, has, first);
	dlbn_json_key_number_or_null(out, "straggler_stall_ms_per_step", s->stall_ms_per_step, has,
				     first);
	int items = dlbn_json_open(out, "waiting_ranks", '[', first);
	for (size_t i = 0; has && i < in->nranks; i++)
		if (i != job->straggler && in->ranks[i].step_ms > 0) {
			dlbn_json_item(out, &items);
			fprintf(out, "%d", in->ranks[i].rank);
		}
	fputc(']', out);
}

static void job_json(FILE *out, const struct dlbn_report_input *in, int *outer)
{
	const struct dlbn_job *job = in->job;
	int first = dlbn_json_open(out, "job", '{', outer);
	dlbn_json_key_str(out, "verdict", dlbn_verdict_name(job->verdict), &first);
	dlbn_json_key_uint(out, "ranks", in->nranks, &first);
	dlbn_json_key_uint(out, "hosts_count", job->nhosts, &first);
	dlbn_json_key_int(out, "worst_rank", in->ranks[job->worst].rank, &first);
	dlbn_json_key_uint(out, "worst_index", job->worst, &first);
	dlbn_json_key_uint(out, "inconclusive_ranks", job->ninconclusive, &first);
	dlbn_json_key_number_or_null(out, "step_skew", job->step_skew, job->step_skew > 0, &first);
	dlbn_json_key_number(out, "step_ms_min", job->step_ms_min, &first);
	dlbn_json_key_number(out, "step_ms_max", job->step_ms_max, &first);
	straggler_json(out, in, &first);
	dlbn_json_key_number(out, "stall_min_s", job->stall_min_s, &first);
	dlbn_json_key_number(out, "stall_max_s", job->stall_max_s, &first);
	spread_json(out, "stall_fraction", &job->stall_fraction, &first);
	spread_json(out, "stall_ms_per_step", &job->stall_ms, &first);
	spread_json(out, "predicted_speedup", &job->speedup, &first);
	ranks_of(out, "worst_ranks", in, job->worst_rows, job->nworst_rows, &first);
	ranks_of(out, "ranks_standing_out", in, job->lone_rows, job->nlone_rows, &first);
	hosts_json(out, in, &first);
	coverage_json(out, in, &first);
	dlbn_json_key_str(out, "reason", dlbn_ranks_why(job), &first);
	fputc('}', out);
}

/* "ranks":[...],"job":{...},"subject":... (always: one row for a single
 * trace).  "subject": the rank's summary when the rank report comes from
 * it alone, else null (the report's own keys are the rank's). */
void dlbn_ranks_json(FILE *out, const struct dlbn_report_input *in, int *first)
{
	int items = dlbn_json_open(out, "ranks", '[', first);
	for (size_t i = 0; in->ranks && i < in->nranks; i++)
		row_json(out, in, i, &items);
	fputc(']', out);
	if (!in->job || !in->ranks || !in->nranks) {
		dlbn_json_key_null(out, "job", first);
		dlbn_json_key_null(out, "subject", first);
		return;
	}
	job_json(out, in, first);
	dlbn_json_key(out, "subject", first);
	if (in->subject && !in->a)
		dlbn_summary_json(out, in->subject, in->version);
	else
		fputs("null", out);
}
