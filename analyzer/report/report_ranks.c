/*
 * report_ranks.c - the job section of the text and Markdown reports when
 * several ranks are analysed together (ranks.h): the job verdict and what
 * it rests on, the spread across ranks, slow hosts and ranks that stand
 * out from their host, the straggler, the worst ranks, and one line per
 * rank up to DLBN_RANK_TABLE_MAX ranks (past that the table is in the
 * JSON, report_ranks_json.c).  And the rank report from a summary alone.
 *
 * Lines shared by the two formats take a prefix: "  " in text, "- " in
 * Markdown.
 */
#include <string.h>

#include "report/report.h"

static const char *job_why(const struct dlbn_job *job)
{
	if (job->verdict == DLBN_VERDICT_INCONCLUSIVE && job->ninconclusive)
		return "no rank shows a loading stall, but a rank that cannot be judged may be the "
		       "slow one";
	return "synchronous data-parallel training runs at the slowest rank's pace (the others "
	       "wait for it at every collective), so the job verdict is the worst rank's";
}

const char *dlbn_ranks_why(const struct dlbn_job *job)
{
	return job_why(job);
}

static const char *host_name(const char *host)
{
	return host[0] ? host : "(unknown host)";
}

int dlbn_report_is_job(const struct dlbn_report_input *in)
{
	return in->job && in->nranks + in->nfailures + in->naside > 1;
}

/* What the job verdict rests on, when it is not every rank of the job. */
static void rests_on(FILE *out, const struct dlbn_report_input *in, const char *prefix)
{
	const struct dlbn_job *job = in->job;
	size_t have = job->ndistinct;
	if (job->world_size > 0 && (size_t)job->world_size > have)
		fprintf(out, "%sthe job verdict rests on %zu of the job's %d ranks", prefix, have,
			job->world_size);
	else if (job->nmissing || in->nfailures)
		fprintf(out, "%sthe job verdict rests on %zu ranks", prefix, have);
	else
		return;
	if (job->nmissing) {
		fprintf(out, "; %zu missing (rank", job->nmissing);
		size_t shown = job->nmissing < DLBN_JOB_MISSING ? job->nmissing : DLBN_JOB_MISSING;
		for (size_t i = 0; i < shown; i++)
			fprintf(out, "%s %d", i ? "," : (shown > 1 ? "s" : ""), job->missing[i]);
		fputs(job->nmissing > shown ? ", ...)" : ")", out);
	}
	fputc('\n', out);
	for (size_t i = 0; i < in->nfailures; i++)
		fprintf(out, "%s  not read: %s\n", prefix, in->failures[i].why);
}

/* Ranks given more than once: each row counts, which the reader should
 * know (two runs' traces mixed, a rank's trace and its copy). */
static void duplicates(FILE *out, const struct dlbn_report_input *in, const char *prefix)
{
	const struct dlbn_job *job = in->job;
	if (!job->nduplicate)
		return;
	size_t shown = job->nduplicate < DLBN_JOB_MISSING ? job->nduplicate : DLBN_JOB_MISSING;
	fprintf(out, "%s%zu rank(s) given more than once, each counted (rank", prefix,
		job->nduplicate);
	for (size_t i = 0; i < shown; i++)
		fprintf(out, "%s %d", i ? "," : (shown > 1 ? "s" : ""), job->duplicate[i]);
	fputs(job->nduplicate > shown ? ", ...)\n" : ")\n", out);
}

static void set_aside(FILE *out, const struct dlbn_report_input *in, const char *prefix)
{
	for (size_t i = 0; i < in->naside; i++)
		fprintf(out, "%snot counted: %s\n", prefix, in->aside[i].why);
}

/* Ranks whose trace is not whole: their figures cover what was recorded. */
static void partial_ranks(FILE *out, const struct dlbn_report_input *in, const char *prefix)
{
	const struct dlbn_job *job = in->job;
	if (!job->ndamaged && !job->ncut)
		return;
	fprintf(out,
		"%s%zu rank(s) damaged, %zu cut short (their figures cover what was "
		"recorded):",
		prefix, job->ndamaged, job->ncut);
	for (size_t i = 0, k = 0; i < in->nranks && k < DLBN_JOB_MISSING; i++) {
		const struct dlbn_rank_row *r = &in->ranks[i];
		if (r->state == DLBN_RANK_WHOLE)
			continue;
		fprintf(out, "%s rank %d (%s)", k++ ? "," : "", r->rank, r->state_note);
	}
	fputc('\n', out);
}

static void spread_row(FILE *out, const char *what, const struct dlbn_spread *s, double scale,
		       const char *unit, int md)
{
	if (!s->n)
		return;
	if (md)
		fprintf(out, "| %s | %.2f%s | %.2f%s | %.2f%s | %.2f%s |\n", what, s->min * scale,
			unit, s->p50 * scale, unit, s->p90 * scale, unit, s->max * scale, unit);
	else
		fprintf(out, "    %-20s %9.2f%-2s %9.2f%-2s %9.2f%-2s %9.2f%-2s\n", what,
			s->min * scale, unit, s->p50 * scale, unit, s->p90 * scale, unit,
			s->max * scale, unit);
}

static void spreads(FILE *out, const struct dlbn_job *job, int md)
{
	if (!job->stall_ms.n)
		return;
	if (md)
		fputs("| across ranks | min | p50 | p90 | max |\n|---|---|---|---|---|\n", out);
	else
		fprintf(out, "  %-22s %11s %11s %11s %11s\n", "across ranks", "min", "p50", "p90",
			"max");
	spread_row(out, "stall, % of wall", &job->stall_fraction, 100, "%", md);
	spread_row(out, "stall, ms per step", &job->stall_ms, 1, "", md);
	spread_row(out, "predicted speedup", &job->speedup, 1, "x", md);
	fputc('\n', out);
}

/* Slow hosts and the ranks that stand out from their own host. */
static void host_lines(FILE *out, const struct dlbn_report_input *in, const char *prefix)
{
	const struct dlbn_job *job = in->job;
	if (job->nhosts > 1 && !job->nslow_hosts)
		fprintf(out,
			"%sno slow host: the %zu hosts' ranks stall alike (median %.2f ms per "
			"step)\n",
			prefix, job->nhosts, job->stall_ms.p50);
	for (size_t h = 0; h < job->nhosts; h++) {
		const struct dlbn_host *host = &job->hosts[h];
		if (!host->slow)
			continue;
		const struct dlbn_rank_row *w = &in->ranks[host->worst];
		fprintf(out,
			"%sslow host: %s, %zu of its %zu ranks cannot be fed fast enough (stall "
			"per step: median %.2f ms, worst %.2f ms on rank %d; the job's median "
			"%.2f ms); cause: %s\n",
			prefix, host_name(host->name), host->ninput_bound, host->nranks,
			host->stall_ms_p50, w->stall_ms_per_step, w->rank, job->stall_ms.p50,
			host->cause);
	}
	for (size_t k = 0; k < job->nlone_rows; k++) {
		const struct dlbn_rank_row *r = &in->ranks[job->lone_rows[k]];
		const struct dlbn_host *host = &job->hosts[job->host_of[job->lone_rows[k]]];
		fprintf(out,
			"%srank %d stands out on %s: stalled %.2f ms per step, its host's other "
			"ranks %.2f ms at their median; cause: %s\n",
			prefix, r->rank, host_name(r->host), r->stall_ms_per_step,
			host->stall_ms_p50, r->cause);
	}
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

/* The ranks' host-side time in GPU syncs, one by one (a short table only). */
static void sync_list(FILE *out, const struct dlbn_report_input *in)
{
	const struct dlbn_job *job = in->job;
	const struct dlbn_rank_row *rows = in->ranks;
	int syncs = 0;
	for (size_t i = 0; i < in->nranks; i++)
		syncs += i != job->straggler && rows[i].step_ms > 0 && rows[i].sync_s >= 0;
	if (!syncs) {
		fputs("no CUDA recorded: the wait inside the collective itself is not seen", out);
		return;
	}
	if (in->nranks > DLBN_RANK_TABLE_MAX) {
		fputs("host blocked in GPU syncs: see each rank's gpu_sync_s in -f json", out);
		return;
	}
	fputs("host blocked in GPU syncs:", out);
	for (size_t i = 0, k = 0; i < in->nranks; i++)
		if (i != job->straggler && rows[i].step_ms > 0 && rows[i].sync_s >= 0)
			fprintf(out, "%s rank %d %.3f s", k++ ? "," : "", rows[i].rank,
				rows[i].sync_s);
}

static void waiting_line(FILE *out, const struct dlbn_report_input *in, const char *prefix)
{
	const struct dlbn_job *job = in->job;
	const struct dlbn_rank_row *rows = in->ranks, *s = &rows[job->straggler];
	double lo = -1, hi = 0;
	for (size_t i = 0; i < in->nranks; i++) {
		if (i == job->straggler || rows[i].step_ms <= 0)
			continue;
		double w = dlbn_job_wait_ms(job, rows, i);
		lo = lo < 0 || w < lo ? w : lo;
		hi = w > hi ? w : hi;
	}
	char who[256], range[64];
	size_t nw;
	waiting_ranks(who, sizeof(who), in, &nw);
	if (!nw)
		return;
	if (hi - lo < 0.005)
		snprintf(range, sizeof(range), "%.2f", hi);
	else
		snprintf(range, sizeof(range), "%.2f .. %.2f", lo, hi);
	if (nw > 16)
		fprintf(out, "%sthe other %zu ranks wait", prefix, nw);
	else
		fprintf(out, "%s%s %s wait%s", prefix, nw > 1 ? "ranks" : "rank", who,
			nw > 1 ? "" : "s");
	fprintf(out, " for it at collectives: %s ms more per step outside %s stall than rank %d (",
		range, nw > 1 ? "their" : "its", s->rank);
	sync_list(out, in);
	fputs(")\n", out);
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
		fprintf(out,
			"%sstraggler: rank %d, stalled %.2f ms per step on its input (least: rank "
			"%d, %.2f ms)",
			prefix, s->rank, s->stall_ms_per_step, rows[job->least_stalled].rank,
			rows[job->least_stalled].stall_ms_per_step);
		if (job->nhosts > 1)
			fprintf(out, "; on host %s", host_name(s->host));
		fputc('\n', out);
		waiting_line(out, in, prefix);
	}
	fprintf(out,
		"%sstep time %.2f .. %.2f ms over the ranks: synchronous ranks run in lockstep, so "
		"step time does not tell the straggler; stall %.3f .. %.3f s\n",
		prefix, job->step_ms_min, job->step_ms_max, job->stall_min_s, job->stall_max_s);
}

static const char *marker(const struct dlbn_job *job, size_t i, int md)
{
	int w = i == job->worst, s = job->has_straggler && i == job->straggler;
	if (md)
		return w && s ? " (worst, straggler)" : w ? " (worst)" : s ? " (straggler)" : "";
	return w && s ? "  <- worst, straggler" : w ? "  <- worst" : s ? "  <- straggler" : "";
}

static void row_text(FILE *out, const struct dlbn_report_input *in, size_t i)
{
	const struct dlbn_rank_row *r = &in->ranks[i];
	char sync[32] = "-";
	if (r->sync_s >= 0)
		snprintf(sync, sizeof(sync), "%.3f", r->sync_s);
	fprintf(out, "  %6d ", r->rank);
	if (in->job->nhosts > 1)
		fprintf(out, "%-16.16s ", host_name(r->host));
	fprintf(out, "%-13s %8.2fx %9.3f %7.1f%% %10.2f %9.2f %9.2f %8s %7zu  %s (%s)%s\n",
		dlbn_verdict_name(r->verdict), r->speedup, r->stall_s, r->stall_fraction * 100,
		r->stall_ms_per_step, r->step_ms, r->loop_ms, sync, r->steps_window, r->cause,
		r->input, marker(in->job, i, 0));
}

static void worst_rows_text(FILE *out, const struct dlbn_report_input *in)
{
	const struct dlbn_job *job = in->job;
	fprintf(out, "  the %zu ranks that stall most per step:\n", job->nworst_rows);
	fprintf(out, "  %6s %-20s %-13s %9s %10s %8s  %s\n", "rank", "host", "verdict", "speedup",
		"stall/step", "stall %", "cause / trace");
	for (size_t k = 0; k < job->nworst_rows; k++) {
		const struct dlbn_rank_row *r = &in->ranks[job->worst_rows[k]];
		fprintf(out, "  %6d %-20.20s %-13s %8.2fx %10.2f %7.1f%%  %s (%s)\n", r->rank,
			host_name(r->host), dlbn_verdict_name(r->verdict), r->speedup,
			r->stall_ms_per_step, r->stall_fraction * 100, r->cause, r->trace);
	}
}

/* The hosts whose ranks stall most at their median, most first (up to
 * DLBN_JOB_WORST): for a job too large for a line per rank. */
static size_t top_hosts(const struct dlbn_job *job, size_t *top)
{
	size_t n = 0;
	for (size_t h = 0; h < job->nhosts; h++) {
		size_t k = n < DLBN_JOB_WORST ? n++ : DLBN_JOB_WORST;
		while (k > 0 && job->hosts[top[k - 1]].stall_ms_p50 < job->hosts[h].stall_ms_p50) {
			if (k < DLBN_JOB_WORST)
				top[k] = top[k - 1];
			k--;
		}
		if (k < DLBN_JOB_WORST)
			top[k] = h;
	}
	return n;
}

static void hosts_text(FILE *out, const struct dlbn_report_input *in, int md)
{
	const struct dlbn_job *job = in->job;
	size_t top[DLBN_JOB_WORST], n = top_hosts(job, top);
	if (job->nhosts < 2)
		return;
	if (md)
		fputs("| host | ranks | input-bound | median stall per step | worst rank | cause "
		      "|\n"
		      "|---|---:|---:|---:|---|---|\n",
		      out);
	else
		fprintf(out,
			"  the %zu hosts whose ranks stall most (median per step):\n  %-21s%6s "
			"%12s %10s %11s  %s\n",
			n, "host", "ranks", "input-bound", "stall/step", "worst rank", "cause");
	for (size_t k = 0; k < n; k++) {
		const struct dlbn_host *h = &job->hosts[top[k]];
		const struct dlbn_rank_row *w = &in->ranks[h->worst];
		fprintf(out,
			md ? "| %s%s | %zu | %zu | %.2f ms | %d (%.2f ms) | %s |\n"
			   : "  %-20.20s%s %6zu %12zu %10.2f %5d %5.2f  %s\n",
			host_name(h->name), h->slow ? (md ? " (slow)" : "*") : (md ? "" : " "),
			h->nranks, h->ninput_bound, h->stall_ms_p50, w->rank, w->stall_ms_per_step,
			h->cause);
	}
	fputs(md ? "\n" : "  (* slow host)\n", out);
}

static void rank_table_text(FILE *out, const struct dlbn_report_input *in)
{
	if (in->nranks > DLBN_RANK_TABLE_MAX) {
		worst_rows_text(out, in);
		hosts_text(out, in, 0);
		fprintf(out,
			"  (%zu ranks: every rank is in -f json; one rank's report: --rank N)\n",
			in->nranks);
		return;
	}
	fprintf(out, "  %6s ", "rank");
	if (in->job->nhosts > 1) /* one host: its name says nothing */
		fprintf(out, "%-16s ", "host");
	fprintf(out, "%-13s %9s %9s %8s %10s %9s %9s %8s %7s  %s\n", "verdict", "speedup",
		"stall s", "stall %", "stall/step", "step ms", "rest/step", "sync s", "steps",
		"cause / trace");
	for (size_t i = 0; i < in->nranks; i++)
		row_text(out, in, i);
	fputs("  (ms per window step; rest/step: the step outside the input stall - compute and "
	      "collectives; sync s: host blocked in GPU syncs, - without CUDA)\n",
	      out);
}

void dlbn_ranks_text(FILE *out, const struct dlbn_report_input *in)
{
	const struct dlbn_job *job = in->job;
	if (!dlbn_report_is_job(in) || !in->nranks)
		return;
	const struct dlbn_rank_row *w = &in->ranks[job->worst];
	fprintf(out, "JOB VERDICT: %s over %zu ranks (worst: rank %d",
		dlbn_verdict_name(job->verdict), in->nranks, w->rank);
	if (w->speedup > 0)
		fprintf(out, ", predicted speedup %.2fx", w->speedup);
	if (job->has_straggler && job->straggler != job->worst)
		fprintf(out, "; straggler: rank %d", in->ranks[job->straggler].rank);
	fprintf(out, ")\n  %s\n", job_why(job));
	rests_on(out, in, "  ");
	duplicates(out, in, "  ");
	partial_ranks(out, in, "  ");
	set_aside(out, in, "  ");
	if (job->nhosts > 1)
		fprintf(out, "  %zu hosts\n", job->nhosts);
	fputc('\n', out);
	if (in->nranks > DLBN_RANK_TABLE_MAX)
		spreads(out, job, 0);
	rank_table_text(out, in);
	host_lines(out, in, "  ");
	straggler_lines(out, in, "  ");
	const struct dlbn_rank_row *s = in->subject ? in->subject : w;
	fprintf(out, "\nThe report below is %s (rank %d, %s).\n\n",
		in->subject_requested ? "the one asked for" : "the worst rank's", s->rank,
		s->input);
}

static void rank_table_markdown(FILE *out, const struct dlbn_report_input *in)
{
	const struct dlbn_job *job = in->job;
	int all = in->nranks <= DLBN_RANK_TABLE_MAX;
	size_t n = all ? in->nranks : job->nworst_rows;
	if (!all)
		fprintf(out,
			"The %zu ranks that stall most per step (all %zu ranks: `-f json`):\n\n", n,
			in->nranks);
	fputs("| rank | host | verdict | predicted speedup | stall | stall per step | step time | "
	      "rest per step | GPU syncs | window steps | cause |\n",
	      out);
	fputs("|---|---|---|---|---|---|---|---|---|---|---|\n", out);
	for (size_t k = 0; k < n; k++) {
		size_t i = all ? k : job->worst_rows[k];
		const struct dlbn_rank_row *r = &in->ranks[i];
		char sync[32] = "-";
		if (r->sync_s >= 0)
			snprintf(sync, sizeof(sync), "%.3f s", r->sync_s);
		fprintf(out,
			"| %d%s | %s | %s | %.2fx | %.3f s (%.1f%%) | %.2f ms | %.2f ms | %.2f ms "
			"| "
			"%s | %zu | %s |\n",
			r->rank, marker(job, i, 1), host_name(r->host),
			dlbn_verdict_name(r->verdict), r->speedup, r->stall_s,
			r->stall_fraction * 100, r->stall_ms_per_step, r->step_ms, r->loop_ms, sync,
			r->steps_window, r->cause);
	}
	fputc('\n', out);
}

void dlbn_ranks_markdown(FILE *out, const struct dlbn_report_input *in)
{
	const struct dlbn_job *job = in->job;
	if (!dlbn_report_is_job(in) || !in->nranks)
		return;
	fprintf(out, "## Job (%zu ranks", in->nranks);
	if (job->nhosts > 1)
		fprintf(out, ", %zu hosts", job->nhosts);
	fprintf(out, ")\n\n**%s** - worst rank %d. %s.\n\n", dlbn_verdict_name(job->verdict),
		in->ranks[job->worst].rank, job_why(job));
	rests_on(out, in, "- ");
	duplicates(out, in, "- ");
	partial_ranks(out, in, "- ");
	set_aside(out, in, "- ");
	if (job->nmissing || job->nduplicate || in->nfailures || in->naside || job->ndamaged ||
	    job->ncut)
		fputc('\n', out);
	if (in->nranks > DLBN_RANK_TABLE_MAX)
		spreads(out, job, 1);
	rank_table_markdown(out, in);
	if (in->nranks > DLBN_RANK_TABLE_MAX)
		hosts_text(out, in, 1);
	host_lines(out, in, "- ");
	straggler_lines(out, in, "- ");
	const struct dlbn_rank_row *s = in->subject ? in->subject : &in->ranks[job->worst];
	fprintf(out, "\nThe sections below are %s (rank %d).\n\n",
		in->subject_requested ? "the rank asked for" : "the worst rank's", s->rank);
}

/* ---- a rank known from its summary alone -------------------------------- */

static void lines(FILE *out, const char *title, const char (*v)[DLBN_LINE], size_t n,
		  const char *prefix)
{
	if (!n)
		return;
	fprintf(out, "\n%s\n", title);
	for (size_t i = 0; i < n; i++)
		fprintf(out, "%s%s\n", prefix, v[i]);
}

static void subject_loaders(FILE *out, const struct dlbn_rank_row *r, const char *prefix)
{
	for (size_t i = 0; i < r->nloaders && i < DLBN_ROW_LOADERS; i++) {
		const struct dlbn_rank_loader *l = &r->loaders[i];
		fprintf(out, "%sloader %zu%s: %s; wait %.3f s, stall %.3f s\n", prefix, i + 1,
			l->training ? " (training)" : "", l->desc, l->wait_s, l->stall_s);
	}
	for (size_t i = 0; i < r->nhot; i++)
		fprintf(out, "%shot spot: %s%s%s, %.0f%% of the loader's busy time\n", prefix,
			r->hot[i].name, r->hot[i].where[0] ? " at " : "", r->hot[i].where,
			r->hot[i].share * 100);
}

/* The rank report when the rank is known from its summary alone: its
 * verdict and the lines its own analysis wrote. */
void dlbn_subject_text(FILE *out, const struct dlbn_report_input *in, int md)
{
	const struct dlbn_rank_row *r = in->subject;
	const char *item = md ? "- " : "  ";
	if (md)
		fprintf(out, "## Rank %d (from its summary)\n\n", r->rank);
	fprintf(out, "%sRANK %d VERDICT: %s", md ? "**" : "", r->rank,
		dlbn_verdict_name(r->verdict));
	if (r->speedup > 0)
		fprintf(out, "; predicted speedup %.2fx", r->speedup);
	fprintf(out,
		"%s\n%sfrom its summary %s; its full report: the same command with --rank "
		"%d (reads its trace, %s)\n",
		md ? "**\n" : "", md ? "\n" : "  ", r->input, r->rank, r->trace);
	fprintf(out,
		"%scause %s; stall %.3f s (%.1f%% of the window), %.2f ms per step; step "
		"%.2f ms; %zu window steps\n",
		md ? "\n" : "  ", r->cause, r->stall_s, r->stall_fraction * 100,
		r->stall_ms_per_step, r->step_ms, r->steps_window);
	subject_loaders(out, r, item);
	lines(out, md ? "### Why" : "Why", (const char(*)[DLBN_LINE])r->reasons, r->nreasons, item);
	lines(out, md ? "### Recommendations" : "Recommendations",
	      (const char(*)[DLBN_LINE])r->recs, r->nrecs, item);
	lines(out, md ? "### Warnings" : "Warnings", (const char(*)[DLBN_LINE])r->warnings,
	      r->nwarnings, item);
}
