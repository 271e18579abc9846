/*
 * report_ranks.c - the job section of the reports when several traces
 * (one per rank) are analysed together: the per-rank table, the skew and
 * the job verdict, in text, Markdown and JSON ("ranks", "job").
 */
#include <string.h>

#include "json.h"
#include "report.h"

static const char *job_why(const struct dlbn_job *job)
{
	if (job->verdict == DLBN_VERDICT_INCONCLUSIVE && job->ninconclusive)
		return "no rank shows a loading stall, but a rank that cannot be judged may be the "
		       "slow one";
	return "synchronous data-parallel training runs at the slowest rank's pace, so the job "
	       "verdict is the worst rank's";
}

void dlbn_ranks_text(FILE *out, const struct dlbn_report_input *in)
{
	const struct dlbn_job *job = in->job;
	if (!job || in->nranks < 2)
		return;
	const struct dlbn_rank_row *w = &in->ranks[job->worst];
	fprintf(out, "JOB VERDICT: %s over %zu ranks (worst: rank %d",
		dlbn_verdict_name(job->verdict), in->nranks, w->rank);
	if (w->speedup > 0)
		fprintf(out, ", predicted speedup %.2fx", w->speedup);
	fprintf(out, ")\n  %s\n\n", job_why(job));
	fprintf(out, "  %6s %-13s %9s %9s %8s %10s %7s  %s\n", "rank", "verdict", "speedup",
		"stall s", "stall %", "step ms", "steps", "cause / trace");
	for (size_t i = 0; i < in->nranks; i++) {
		const struct dlbn_rank_row *r = &in->ranks[i];
		fprintf(out, "  %6d %-13s %8.2fx %9.3f %7.1f%% %10.2f %7zu  %s (%s)%s\n", r->rank,
			dlbn_verdict_name(r->verdict), r->speedup, r->stall_s,
			r->stall_fraction * 100, r->step_ms, r->steps_window, r->cause, r->path,
			i == job->worst ? "  <- worst" : "");
	}
	if (job->step_skew > 0)
		fprintf(out,
			"  skew: step time %.2f ms (rank %d) .. %.2f ms (rank %d), slowest/fastest "
			"%.2f; stall %.3f .. %.3f s\n",
			in->ranks[job->fastest].step_ms, in->ranks[job->fastest].rank,
			in->ranks[job->slowest].step_ms, in->ranks[job->slowest].rank,
			job->step_skew, job->stall_min_s, job->stall_max_s);
	fprintf(out, "\nThe report below is the worst rank's (rank %d, %s).\n\n", w->rank, w->path);
}

void dlbn_ranks_markdown(FILE *out, const struct dlbn_report_input *in)
{
	const struct dlbn_job *job = in->job;
	if (!job || in->nranks < 2)
		return;
	fprintf(out, "## Job (%zu ranks)\n\n**%s** - worst rank %d. %s.\n\n", in->nranks,
		dlbn_verdict_name(job->verdict), in->ranks[job->worst].rank, job_why(job));
	fputs("| rank | verdict | predicted speedup | stall | step time | window steps | cause |\n",
	      out);
	fputs("|---|---|---|---|---|---|---|\n", out);
	for (size_t i = 0; i < in->nranks; i++) {
		const struct dlbn_rank_row *r = &in->ranks[i];
		fprintf(out, "| %d%s | %s | %.2fx | %.3f s (%.1f%%) | %.2f ms | %zu | %s |\n",
			r->rank, i == job->worst ? " (worst)" : "", dlbn_verdict_name(r->verdict),
			r->speedup, r->stall_s, r->stall_fraction * 100, r->step_ms,
			r->steps_window, r->cause);
	}
	if (job->step_skew > 0)
		fprintf(out,
			"\nStep-time skew: slowest/fastest %.2f (rank %d %.2f ms, rank %d %.2f "
			"ms).\n",
			job->step_skew, in->ranks[job->slowest].rank,
			in->ranks[job->slowest].step_ms, in->ranks[job->fastest].rank,
			in->ranks[job->fastest].step_ms);
	fprintf(out, "\nThe sections below are the worst rank's (rank %d).\n\n",
		in->ranks[job->worst].rank);
}

/* ,"ranks":[...],"job":{...} (always: one row for a single trace). */
void dlbn_ranks_json(FILE *out, const struct dlbn_report_input *in)
{
	fputs(",\"ranks\":[", out);
	for (size_t i = 0; in->ranks && i < in->nranks; i++) {
		const struct dlbn_rank_row *r = &in->ranks[i];
		fprintf(out, "%s{\"rank\":%d,\"rank_source\":\"%s\",\"world_size\":", i ? "," : "",
			r->rank, r->rank_known ? "trace" : "argument_order");
		if (r->world_size > 0)
			fprintf(out, "%d", r->world_size);
		else
			fputs("null", out);
		fputs(",\"path\":", out);
		dlbn_json_string(out, r->path, strlen(r->path));
		fputs(",\"verdict\":", out);
		fprintf(out, "\"%s\",\"predicted_speedup\":", dlbn_verdict_name(r->verdict));
		if (r->speedup > 0)
			dlbn_json_number(out, r->speedup);
		else
			fputs("null", out);
		fputs(",\"stall_s\":", out);
		dlbn_json_number(out, r->stall_s);
		fputs(",\"stall_fraction\":", out);
		dlbn_json_number(out, r->stall_fraction);
		fputs(",\"step_ms\":", out);
		dlbn_json_number(out, r->step_ms);
		fprintf(out, ",\"steps_window\":%zu,\"cause\":", r->steps_window);
		dlbn_json_string(out, r->cause, strlen(r->cause));
		fputc('}', out);
	}
	fputc(']', out);
	const struct dlbn_job *job = in->job;
	if (!job || !in->ranks) {
		fputs(",\"job\":null", out);
		return;
	}
	fprintf(out,
		",\"job\":{\"verdict\":\"%s\",\"ranks\":%zu,\"worst_rank\":%d,\"worst_index\":%zu,"
		"\"inconclusive_ranks\":%zu,\"step_skew\":",
		dlbn_verdict_name(job->verdict), in->nranks, in->ranks[job->worst].rank, job->worst,
		job->ninconclusive);
	if (job->step_skew > 0)
		dlbn_json_number(out, job->step_skew);
	else
		fputs("null", out);
	fputs(",\"stall_min_s\":", out);
	dlbn_json_number(out, job->stall_min_s);
	fputs(",\"stall_max_s\":", out);
	dlbn_json_number(out, job->stall_max_s);
	fputs(",\"reason\":", out);
	dlbn_json_string(out, job_why(job), strlen(job_why(job)));
	fputc('}', out);
}
