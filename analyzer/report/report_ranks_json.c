/*
 * report_ranks_json.c - the job in the JSON report (keys in
 * dlbn-analyze(1)): "ranks" (every row, in rank order, whatever their
 * number), "job" (verdict, straggler, spread, hosts, what the verdict rests
 * on) and "subject" (the row the rank report is about, as its summary).
 */
#include <string.h>

#include "util/json.h"
#include "analysis/rank_summary.h"
#include "report/report.h"

/* [{"path":...,"why":...},...] of inputs that gave no rank. */
static void failures_json(FILE *out, const struct dlbn_rank_failure *f, size_t n)
{
	fputc('[', out);
	for (size_t i = 0; i < n; i++) {
		fputs(i ? ",{\"path\":" : "{\"path\":", out);
		dlbn_json_str(out, f[i].input);
		fputs(",\"why\":", out);
		dlbn_json_str(out, f[i].why);
		fputc('}', out);
	}
	fputc(']', out);
}

static void row_json(FILE *out, const struct dlbn_report_input *in, size_t i)
{
	static const char *const states[] = {"whole", "damaged", "cut"};
	const struct dlbn_rank_row *r = &in->ranks[i];
	int first = 1;
	fputc('{', out);
	dlbn_json_key(out, "rank", &first);
	fprintf(out, "%d", r->rank);
	dlbn_json_key(out, "rank_source", &first);
	dlbn_json_str(out, r->rank_known ? "trace" : "argument_order");
	dlbn_json_key_int(out, "local_rank", r->local_rank, &first);
	dlbn_json_key_int(out, "world_size", r->world_size > 0 ? r->world_size : -1, &first);
	dlbn_json_key(out, "host", &first);
	dlbn_json_str(out, r->host);
	dlbn_json_key(out, "path", &first);
	dlbn_json_str(out, r->input);
	dlbn_json_key(out, "from", &first);
	dlbn_json_str(out, r->source == DLBN_RANK_FROM_SUMMARY ? "summary" : "trace");
	dlbn_json_key(out, "trace", &first);
	dlbn_json_str(out, r->trace);
	dlbn_json_key(out, "state", &first);
	dlbn_json_str(out, states[r->state]);
	dlbn_json_key(out, "verdict", &first);
	dlbn_json_str(out, dlbn_verdict_name(r->verdict));
	dlbn_json_key_number(out, "predicted_speedup", r->speedup, r->speedup > 0, &first);
	dlbn_json_key_number(out, "stall_s", r->stall_s, 1, &first);
	dlbn_json_key_number(out, "stall_fraction", r->stall_fraction, 1, &first);
	dlbn_json_key_number(out, "step_ms", r->step_ms, 1, &first);
	dlbn_json_key_number(out, "stall_ms_per_step", r->stall_ms_per_step, 1, &first);
	dlbn_json_key_number(out, "rest_ms_per_step", r->loop_ms, 1, &first);
	dlbn_json_key_number(out, "gpu_sync_s", r->sync_s, r->sync_s >= 0, &first);
	const struct dlbn_job *job = in->job;
	int waits = job && job->has_straggler && i != job->straggler && r->step_ms > 0;
	dlbn_json_key_number(out, "waits_for_straggler_ms_per_step",
			     waits ? dlbn_job_wait_ms(job, in->ranks, i) : 0, waits, &first);
	dlbn_json_key(out, "steps_window", &first);
	fprintf(out, "%zu", r->steps_window);
	dlbn_json_key(out, "cause", &first);
	dlbn_json_str(out, r->cause);
	fputc('}', out);
}

static void spread_json(FILE *out, const char *key, const struct dlbn_spread *s, int *first)
{
	dlbn_json_key(out, key, first);
	if (!s->n) {
		fputs("null", out);
		return;
	}
	fprintf(out, "{\"ranks\":%zu,\"min\":", s->n);
	dlbn_json_number(out, s->min);
	fputs(",\"p50\":", out);
	dlbn_json_number(out, s->p50);
	fputs(",\"p90\":", out);
	dlbn_json_number(out, s->p90);
	fputs(",\"max\":", out);
	dlbn_json_number(out, s->max);
	fputc('}', out);
}

/* A list of ranks: the rows at idx[0..n). */
static void ranks_of(FILE *out, const char *key, const struct dlbn_report_input *in,
		     const size_t *idx, size_t n, int *first)
{
	dlbn_json_key(out, key, first);
	fputc('[', out);
	for (size_t k = 0; k < n; k++)
		fprintf(out, "%s%d", k ? "," : "", in->ranks[idx[k]].rank);
	fputc(']', out);
}

static void hosts_json(FILE *out, const struct dlbn_report_input *in, int *first)
{
	const struct dlbn_job *job = in->job;
	dlbn_json_key(out, "hosts", first);
	fputc('[', out);
	for (size_t h = 0; h < job->nhosts; h++) {
		const struct dlbn_host *host = &job->hosts[h];
		int f = 1;
		fputs(h ? ",{" : "{", out);
		dlbn_json_key(out, "host", &f);
		dlbn_json_str(out, host->name);
		dlbn_json_key(out, "ranks", &f);
		fputc('[', out);
		for (size_t i = 0, k = 0; i < in->nranks; i++)
			if (job->host_of[i] == h)
				fprintf(out, "%s%d", k++ ? "," : "", in->ranks[i].rank);
		fputc(']', out);
		dlbn_json_key_number(out, "stall_ms_per_step_p50", host->stall_ms_p50, 1, &f);
		dlbn_json_key_number(out, "predicted_speedup_p50", host->speedup_p50,
				     host->speedup_p50 > 0, &f);
		dlbn_json_key(out, "worst_rank", &f);
		fprintf(out, "%d", in->ranks[host->worst].rank);
		dlbn_json_key(out, "cause", &f);
		dlbn_json_str(out, host->cause);
		dlbn_json_key(out, "slow", &f);
		fputs(host->slow ? "true" : "false", out);
		fputc('}', out);
	}
	fputc(']', out);
	dlbn_json_key(out, "slow_hosts", first);
	fputc('[', out);
	for (size_t h = 0, k = 0; h < job->nhosts; h++)
		if (job->hosts[h].slow) {
			fputs(k++ ? "," : "", out);
			dlbn_json_str(out, job->hosts[h].name);
		}
	fputc(']', out);
}

/* What the job verdict rests on. */
static void coverage_json(FILE *out, const struct dlbn_report_input *in, int *first)
{
	const struct dlbn_job *job = in->job;
	dlbn_json_key_int(out, "world_size", job->world_size, first);
	dlbn_json_key(out, "missing_ranks", first);
	fputc('[', out);
	size_t shown = job->nmissing < DLBN_JOB_MISSING ? job->nmissing : DLBN_JOB_MISSING;
	for (size_t i = 0; i < shown; i++)
		fprintf(out, "%s%d", i ? "," : "", job->missing[i]);
	fprintf(out, "],\"missing_count\":%zu,\"duplicate_ranks\":[", job->nmissing);
	shown = job->nduplicate < DLBN_JOB_MISSING ? job->nduplicate : DLBN_JOB_MISSING;
	for (size_t i = 0; i < shown; i++)
		fprintf(out, "%s%d", i ? "," : "", job->duplicate[i]);
	fputs("],\"unreadable\":", out);
	failures_json(out, in->failures, in->nfailures);
	fputs(",\"not_ranks\":", out);
	failures_json(out, in->aside, in->naside);
	fprintf(out, ",\"damaged_ranks\":%zu,\"cut_ranks\":%zu,\"from_summaries\":%zu",
		job->ndamaged, job->ncut, job->nfrom_summary);
}

static void straggler_json(FILE *out, const struct dlbn_report_input *in, int *first)
{
	const struct dlbn_job *job = in->job;
	const struct dlbn_rank_row *s = &in->ranks[job->straggler];
	dlbn_json_key(out, "straggler_rank", first);
	if (job->has_straggler)
		fprintf(out, "%d,\"straggler_index\":%zu,\"straggler_host\":", s->rank,
			job->straggler);
	else
		fputs("null,\"straggler_index\":null,\"straggler_host\":null", out);
	if (job->has_straggler)
		dlbn_json_str(out, s->host);
	dlbn_json_key_number(out, "straggler_stall_ms_per_step", s->stall_ms_per_step,
			     job->has_straggler, first);
	dlbn_json_key(out, "waiting_ranks", first);
	fputc('[', out);
	for (size_t i = 0, k = 0; job->has_straggler && i < in->nranks; i++)
		if (i != job->straggler && in->ranks[i].step_ms > 0)
			fprintf(out, "%s%d", k++ ? "," : "", in->ranks[i].rank);
	fputc(']', out);
}

static void job_json(FILE *out, const struct dlbn_report_input *in)
{
	const struct dlbn_job *job = in->job;
	int first = 1;
	fputs(",\"job\":{", out);
	dlbn_json_key(out, "verdict", &first);
	dlbn_json_str(out, dlbn_verdict_name(job->verdict));
	fprintf(out,
		",\"ranks\":%zu,\"hosts_count\":%zu,\"worst_rank\":%d,\"worst_index\":%zu,"
		"\"inconclusive_ranks\":%zu",
		in->nranks, job->nhosts, in->ranks[job->worst].rank, job->worst,
		job->ninconclusive);
	dlbn_json_key_number(out, "step_skew", job->step_skew, job->step_skew > 0, &first);
	dlbn_json_key_number(out, "step_ms_min", job->step_ms_min, 1, &first);
	dlbn_json_key_number(out, "step_ms_max", job->step_ms_max, 1, &first);
	straggler_json(out, in, &first);
	dlbn_json_key_number(out, "stall_min_s", job->stall_min_s, 1, &first);
	dlbn_json_key_number(out, "stall_max_s", job->stall_max_s, 1, &first);
	spread_json(out, "stall_fraction", &job->stall_fraction, &first);
	spread_json(out, "stall_ms_per_step", &job->stall_ms, &first);
	spread_json(out, "predicted_speedup", &job->speedup, &first);
	ranks_of(out, "worst_ranks", in, job->worst_rows, job->nworst_rows, &first);
	ranks_of(out, "ranks_standing_out", in, job->lone_rows, job->nlone_rows, &first);
	hosts_json(out, in, &first);
	coverage_json(out, in, &first);
	dlbn_json_key(out, "reason", &first);
	dlbn_json_str(out, dlbn_ranks_why(job));
	fputc('}', out);
}

/* ,"ranks":[...],"job":{...},"subject":... (always: one row for a single
 * trace).  "subject": the rank's summary when the rank report comes from
 * it alone, else null (the report's own keys are the rank's). */
void dlbn_ranks_json(FILE *out, const struct dlbn_report_input *in)
{
	fputs(",\"ranks\":[", out);
	for (size_t i = 0; in->ranks && i < in->nranks; i++) {
		if (i)
			fputc(',', out);
		row_json(out, in, i);
	}
	fputc(']', out);
	if (!in->job || !in->ranks || !in->nranks) {
		fputs(",\"job\":null,\"subject\":null", out);
		return;
	}
	job_json(out, in);
	fputs(",\"subject\":", out);
	if (in->subject && !in->a)
		dlbn_summary_json(out, in->subject, in->version);
	else
		fputs("null", out);
}
