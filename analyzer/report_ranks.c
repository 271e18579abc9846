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
	return "synchronous data-parallel training runs at the slowest rank's pace (the others "
	       "wait for it at every collective), so the job verdict is the worst rank's";
}

/* "ranks 0, 2" (or "rank 0"): the rows that wait for the straggler. */
static void waiting_ranks(char *buf, size_t len, const struct dlbn_report_input *in, size_t *nw)
{
	const struct dlbn_job *job = in->job;
	size_t off = 0;
	*nw = 0;
	buf[0] = 0;
	for (size_t i = 0; i < in->nranks; i++) {
		if (i == job->straggler || in->ranks[i].step_ms <= 0)
			continue;
		if (off < len)
			off += (size_t)snprintf(buf + off, len - off, "%s%d", *nw ? ", " : "",
						in->ranks[i].rank);
		(*nw)++;
	}
}

static const char *marker(const struct dlbn_job *job, size_t i)
{
	int w = i == job->worst, s = job->has_straggler && i == job->straggler;
	return w && s ? "  <- worst, straggler" : w ? "  <- worst" : s ? "  <- straggler" : "";
}

static const char *marker_md(const struct dlbn_job *job, size_t i)
{
	int w = i == job->worst, s = job->has_straggler && i == job->straggler;
	return w && s ? " (worst, straggler)" : w ? " (worst)" : s ? " (straggler)" : "";
}

/* The straggler lines, shared by text (prefix "  ") and Markdown ("- "). */
static void straggler_lines(FILE *out, const struct dlbn_report_input *in, const char *prefix)
{
	const struct dlbn_job *job = in->job;
	const struct dlbn_rank_row *rows = in->ranks;
	if (job->step_skew <= 0)
		return;
	if (!job->has_straggler) {
		fprintf(out,
			"%sno straggler: the ranks stall alike on their input (%.2f .. %.2f ms per "
			"step)\n",
			prefix, rows[job->least_stalled].stall_ms_per_step,
			rows[job->straggler].stall_ms_per_step);
	} else {
		const struct dlbn_rank_row *s = &rows[job->straggler];
		char who[256];
		size_t nw;
		waiting_ranks(who, sizeof(who), in, &nw);
		fprintf(out,
			"%sstraggler: rank %d, stalled %.2f ms per step on its input (least: rank "
			"%d, "
			"%.2f ms)\n",
			prefix, s->rank, s->stall_ms_per_step, rows[job->least_stalled].rank,
			rows[job->least_stalled].stall_ms_per_step);
		double lo = -1, hi = 0;
		int syncs = 0;
		for (size_t i = 0; i < in->nranks; i++) {
			if (i == job->straggler || rows[i].step_ms <= 0)
				continue;
			double w = dlbn_job_wait_ms(job, rows, i);
			lo = lo < 0 || w < lo ? w : lo;
			hi = w > hi ? w : hi;
			syncs += rows[i].sync_s >= 0;
		}
		if (nw) {
			char range[64];
			if (hi - lo < 0.005)
				snprintf(range, sizeof(range), "%.2f", hi);
			else
				snprintf(range, sizeof(range), "%.2f .. %.2f", lo, hi);
			fprintf(out,
				"%s%s %s wait%s for it at collectives: %s ms more per step outside "
				"%s stall than rank %d (",
				prefix, nw > 1 ? "ranks" : "rank", who, nw > 1 ? "" : "s", range,
				nw > 1 ? "their" : "its", s->rank);
			if (syncs) {
				fputs("host blocked in GPU syncs:", out);
				for (size_t i = 0, k = 0; i < in->nranks; i++)
					if (i != job->straggler && rows[i].step_ms > 0 &&
					    rows[i].sync_s >= 0)
						fprintf(out, "%s rank %d %.3f s", k++ ? "," : "",
							rows[i].rank, rows[i].sync_s);
			} else {
				fputs("no CUDA recorded: the wait inside the collective itself is "
				      "not "
				      "seen",
				      out);
			}
			fputs(")\n", out);
		}
	}
	fprintf(out,
		"%sstep time %.2f .. %.2f ms over the ranks: synchronous ranks run in lockstep, so "
		"step time does not tell the straggler; stall %.3f .. %.3f s\n",
		prefix, job->step_ms_min, job->step_ms_max, job->stall_min_s, job->stall_max_s);
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
	if (job->has_straggler && job->straggler != job->worst)
		fprintf(out, "; straggler: rank %d", in->ranks[job->straggler].rank);
	fprintf(out, ")\n  %s\n\n", job_why(job));
	fprintf(out, "  %6s %-13s %9s %9s %8s %10s %9s %9s %8s %7s  %s\n", "rank", "verdict",
		"speedup", "stall s", "stall %", "stall/step", "step ms", "rest/step", "sync s",
		"steps", "cause / trace");
	for (size_t i = 0; i < in->nranks; i++) {
		const struct dlbn_rank_row *r = &in->ranks[i];
		char sync[32] = "-";
		if (r->sync_s >= 0)
			snprintf(sync, sizeof(sync), "%.3f", r->sync_s);
		fprintf(out,
			"  %6d %-13s %8.2fx %9.3f %7.1f%% %10.2f %9.2f %9.2f %8s %7zu  %s (%s)%s\n",
			r->rank, dlbn_verdict_name(r->verdict), r->speedup, r->stall_s,
			r->stall_fraction * 100, r->stall_ms_per_step, r->step_ms, r->loop_ms, sync,
			r->steps_window, r->cause, r->path, marker(job, i));
	}
	fputs("  (ms per window step; rest/step: the step outside the input stall - compute and "
	      "collectives; sync s: host blocked in GPU syncs, - without CUDA)\n",
	      out);
	straggler_lines(out, in, "  ");
	fprintf(out, "\nThe report below is the worst rank's (rank %d, %s).\n\n", w->rank, w->path);
}

void dlbn_ranks_markdown(FILE *out, const struct dlbn_report_input *in)
{
	const struct dlbn_job *job = in->job;
	if (!job || in->nranks < 2)
		return;
	fprintf(out, "## Job (%zu ranks)\n\n**%s** - worst rank %d. %s.\n\n", in->nranks,
		dlbn_verdict_name(job->verdict), in->ranks[job->worst].rank, job_why(job));
	fputs("| rank | verdict | predicted speedup | stall | stall per step | step time | rest "
	      "per step | GPU syncs | window steps | cause |\n",
	      out);
	fputs("|---|---|---|---|---|---|---|---|---|---|\n", out);
	for (size_t i = 0; i < in->nranks; i++) {
		const struct dlbn_rank_row *r = &in->ranks[i];
		char sync[32] = "-";
		if (r->sync_s >= 0)
			snprintf(sync, sizeof(sync), "%.3f s", r->sync_s);
		fprintf(out,
			"| %d%s | %s | %.2fx | %.3f s (%.1f%%) | %.2f ms | %.2f ms | %.2f ms | %s "
			"| "
			"%zu | %s |\n",
			r->rank, marker_md(job, i), dlbn_verdict_name(r->verdict), r->speedup,
			r->stall_s, r->stall_fraction * 100, r->stall_ms_per_step, r->step_ms,
			r->loop_ms, sync, r->steps_window, r->cause);
	}
	fputc('\n', out);
	straggler_lines(out, in, "- ");
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
		fputs(",\"stall_ms_per_step\":", out);
		dlbn_json_number(out, r->stall_ms_per_step);
		fputs(",\"rest_ms_per_step\":", out);
		dlbn_json_number(out, r->loop_ms);
		fputs(",\"gpu_sync_s\":", out);
		if (r->sync_s >= 0)
			dlbn_json_number(out, r->sync_s);
		else
			fputs("null", out);
		fputs(",\"waits_for_straggler_ms_per_step\":", out);
		if (in->job && in->job->has_straggler && i != in->job->straggler && r->step_ms > 0)
			dlbn_json_number(out, dlbn_job_wait_ms(in->job, in->ranks, i));
		else
			fputs("null", out);
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
	fputs(",\"step_ms_min\":", out);
	dlbn_json_number(out, job->step_ms_min);
	fputs(",\"step_ms_max\":", out);
	dlbn_json_number(out, job->step_ms_max);
	fputs(",\"straggler_rank\":", out);
	if (job->has_straggler)
		fprintf(out, "%d,\"straggler_index\":%zu,\"straggler_stall_ms_per_step\":",
			in->ranks[job->straggler].rank, job->straggler);
	else
		fputs("null,\"straggler_index\":null,\"straggler_stall_ms_per_step\":", out);
	if (job->has_straggler)
		dlbn_json_number(out, in->ranks[job->straggler].stall_ms_per_step);
	else
		fputs("null", out);
	fputs(",\"waiting_ranks\":[", out);
	for (size_t i = 0, k = 0; job->has_straggler && i < in->nranks; i++)
		if (i != job->straggler && in->ranks[i].step_ms > 0)
			fprintf(out, "%s%d", k++ ? "," : "", in->ranks[i].rank);
	fputc(']', out);
	fputs(",\"stall_min_s\":", out);
	dlbn_json_number(out, job->stall_min_s);
	fputs(",\"stall_max_s\":", out);
	dlbn_json_number(out, job->stall_max_s);
	fputs(",\"reason\":", out);
	dlbn_json_string(out, job_why(job), strlen(job_why(job)));
	fputc('}', out);
}
