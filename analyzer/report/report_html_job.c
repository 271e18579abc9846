/*
 * report_html_job.c - the page of `--html FILE` for several ranks (see
 * report_html.h): the job verdict and what it rests on, the spread across
 * ranks, the slow hosts, the straggler and the ranks that stand out, a
 * rank-by-host grid coloured by stall, the worst ranks, and the lines of
 * the rank reported on.  It reads the rows and the job alone, never a
 * model: a thousand ranks make a page of about 200 KiB.
 *
 * The grid is HTML and CSS (one empty element per rank, its figures in a
 * title attribute), not SVG: the browser flows the host rows into as many
 * columns as the window holds, so 128 hosts of 8 ranks fit on one screen.
 */
#include <stdio.h>

#include "report/report_html.h"
#include "util/outfile.h"

/* Names listed before "and N more": the grid and JSON have them all. */
#define LIST_MAX 16
/* Grid geometry (px, as in job_css): host label, cell pitch; ranks of a
 * host per line before they wrap; hosts below which one column reads best. */
#define GRID_LABEL    138
#define GRID_PITCH    12
#define GRID_WRAP     32
#define GRID_ONE_COLS 16

static const char job_css[] =
	".hgrid{column-gap:24px;margin-top:6px}\n"
	".hrow{display:flex;align-items:center;gap:8px;break-inside:avoid;padding:1px 0}\n"
	".hl{flex:0 0 130px;font-size:11.5px;white-space:nowrap;overflow:hidden;"
	"text-overflow:ellipsis}\n"
	".hl.slow{color:#c0392b;font-weight:600}\n"
	".badge{font-size:10px;background:#c0392b;color:#fff;border-radius:3px;padding:0 4px;"
	"margin-right:4px}\n"
	".cells{display:flex;flex-wrap:wrap;gap:1px;max-width:384px}\n"
	".cells i{display:block;width:11px;height:11px;border-radius:2px}.sn{background:#d5d9e0}\n"
	".cells i.x,.keys .x:before{outline:2px solid #161b26;outline-offset:1px}\n"
	".cells i.o,.keys .o:before{outline:2px solid #3056d3;outline-offset:1px}\n"
	".keys span:before{border:1px solid #e3e6eb}\n"
	"th.l,td.l{text-align:left}h3{font-size:13px;margin:14px 0 6px}\n";

/* The grid's colour scale, classes s0..s6: the upper edges of the stall
 * fraction (the last class is 50% and above).  Fixed, not scaled to the
 * job, so that two pages compare at a glance. */
#define NSTALL 7
static const double stall_edge[NSTALL - 1] = {0.02, 0.05, 0.10, 0.20, 0.35, 0.50};
static const char *const stall_key[NSTALL] = {"&lt;2%", "2-5%",	  "5-10%", "10-20%",
					      "20-35%", "35-50%", "50%+"};
static const char *const stall_colour[NSTALL] = {"#f7efed", "#f6d5cf", "#f0ada2", "#e67f6f",
						 "#d94b3d", "#b5281c", "#7d1209"};

static const char *host_name(const char *h)
{
	return h[0] ? h : "(unknown host)";
}

/* "1.85x", or "-" where no speedup was computed. */
static const char *fmt_x(char *buf, size_t n, double x)
{
	if (x <= 0)
		return "-";
	snprintf(buf, n, "%.2fx", x);
	return buf;
}

static void esc_cause(FILE *out, const char *cause)
{
	html_esc(out, cause[0] ? cause : "-");
}

/* "rank R on HOST" */
static void who(FILE *out, const struct dlbn_rank_row *r)
{
	fprintf(out, "rank %d on ", r->rank);
	html_esc(out, host_name(r->host));
}

/* Close a list of which shown of total items were written. */
static void list_end(FILE *out, size_t shown, size_t total)
{
	if (total > shown)
		fprintf(out, "<li>and %zu more</li>\n", total - shown);
	fputs("</ul></li>\n", out);
}

/* min, p50, p90, max of one figure: the p50 large, the rest below it. */
static void spread_tile(FILE *out, const char *k, const struct dlbn_spread *s, double scale,
			int prec, const char *unit)
{
	if (!s->n)
		return;
	fprintf(out,
		"<div class=\"tile\"><div class=\"k\">%s</div><div class=\"v\">%.*f%s</div>"
		"<div class=\"d\">p50 of %zu rank(s); min %.*f, p90 %.*f, max %.*f%s</div></div>\n",
		k, prec, s->p50 * scale, unit, s->n, prec, s->min * scale, prec, s->p90 * scale,
		prec, s->max * scale, unit);
}

/* The rows that are not whole, and the inputs that gave no row. */
static void rests_on_inputs(FILE *out, const struct dlbn_report_input *in)
{
	const struct dlbn_job *job = in->job;
	size_t k = 0;
	if (job->ndamaged || job->ncut) {
		fprintf(out,
			"<li>%zu rank(s) not whole (%zu with records lost, %zu cut short): their "
			"figures cover what was read<ul>\n",
			job->ndamaged + job->ncut, job->ndamaged, job->ncut);
		for (size_t i = 0; i < in->nranks && k < LIST_MAX; i++) {
			const struct dlbn_rank_row *r = &in->ranks[i];
			if (r->state == DLBN_RANK_WHOLE)
				continue;
			fprintf(out, "<li>rank %d (%s): ", r->rank,
				r->state == DLBN_RANK_CUT ? "cut short" : "records lost");
			html_esc(out, r->state_note);
			fputs("</li>\n", out);
			k++;
		}
		list_end(out, k, job->ndamaged + job->ncut);
	}
	for (k = 0; k < in->naside; k++) {
		fputs("<li>not counted: ", out);
		html_esc(out, in->aside[k].why);
		fputs("</li>\n", out);
	}
	if (!job->nfailed)
		return;
	fprintf(out,
		"<li>%zu input(s) gave no row (unreadable, or neither a trace nor a summary)<ul>\n",
		job->nfailed);
	for (k = 0; k < in->nfailures && k < LIST_MAX; k++) {
		fputs("<li>", out);
		html_esc(out, in->failures[k].why);
		fputs("</li>\n", out);
	}
	list_end(out, k, in->nfailures);
}

/* What the job verdict rests on: how many ranks, and which are not there. */
static void rests_on(FILE *out, const struct dlbn_report_input *in)
{
	const struct dlbn_job *job = in->job;
	fputs("<ul class=\"ev\">\n<li>", out);
	if (job->world_size > 0 && job->ndistinct < (size_t)job->world_size)
		fprintf(out, "%zu of %d ranks", job->ndistinct, job->world_size);
	else
		fprintf(out, "%zu ranks", job->ndistinct);
	fputs(": synchronous data-parallel training runs at the slowest rank's pace, so the job "
	      "verdict is the worst rank's</li>\n",
	      out);
	if (job->nmissing) {
		fprintf(out, "<li>%zu rank(s) missing, no input covers them:", job->nmissing);
		for (size_t i = 0; i < job->nmissing && i < DLBN_JOB_MISSING; i++)
			fprintf(out, "%s %d", i ? "," : "", job->missing[i]);
		fprintf(out, "%s</li>\n", job->nmissing > DLBN_JOB_MISSING ? ", ..." : "");
	}
	if (job->nduplicate) {
		fprintf(out,
			"<li>%zu rank(s) given more than once, each counted:", job->nduplicate);
		for (size_t i = 0; i < job->nduplicate && i < DLBN_JOB_MISSING; i++)
			fprintf(out, "%s %d", i ? "," : "", job->duplicate[i]);
		fprintf(out, "%s</li>\n", job->nduplicate > DLBN_JOB_MISSING ? ", ..." : "");
	}
	if (job->ninconclusive)
		fprintf(out, "<li>%zu rank(s) INCONCLUSIVE: one may be the slow one</li>\n",
			job->ninconclusive);
	rests_on_inputs(out, in);
	if (job->nfrom_summary)
		fprintf(out, "<li>%zu rank(s) from their summaries, not their traces</li>\n",
			job->nfrom_summary);
	fputs("</ul>\n", out);
}

static void verdict_card(FILE *out, const struct dlbn_report_input *in)
{
	const struct dlbn_job *job = in->job;
	const struct dlbn_rank_row *w = &in->ranks[job->worst];
	const char *name = dlbn_verdict_name(job->verdict);
	char x[32];
	fprintf(out,
		"<section class=\"card\"><div class=\"verdict\"><span id=\"verdict\" "
		"class=\"pill v-%s\">%s</span><span class=\"headline\">worst: ",
		name, name);
	who(out, w);
	if (w->speedup > 0)
		fprintf(out, ", predicted speedup <b id=\"speedup\">%s</b>",
			fmt_x(x, sizeof(x), w->speedup));
	fputs(", cause ", out);
	esc_cause(out, w->cause);
	fputs("</span></div>\n", out);
	rests_on(out, in);
	fputs("<div class=\"tiles\">\n", out);
	spread_tile(out, "stall", &job->stall_fraction, 100, 1, "%");
	spread_tile(out, "stall / step", &job->stall_ms, 1, 2, " ms");
	spread_tile(out, "predicted speedup", &job->speedup, 1, 2, "x");
	fputs("</div></section>\n", out);
}

/* The slow hosts, at most LIST_MAX of them (the grid marks them all). */
static void slow_hosts(FILE *out, const struct dlbn_job *job)
{
	size_t k = 0;
	if (!job->nslow_hosts) {
		fputs("<li>no slow host: no host has most of its ranks input-bound (stalling "
		      "more than the job's median rank, or with workers that have no slack) "
		      "while others do not</li>\n",
		      out);
		return;
	}
	fprintf(out, "<li>%zu slow host(s) of %zu (the job's median stall: %.2f ms/step)<ul>\n",
		job->nslow_hosts, job->nhosts, job->stall_ms.p50);
	for (size_t h = 0; h < job->nhosts && k < LIST_MAX; h++) {
		const struct dlbn_host *host = &job->hosts[h];
		if (!host->slow)
			continue;
		fputs("<li>", out);
		html_esc(out, host_name(host->name));
		fprintf(out, ": %zu rank(s), median stall %.2f ms/step, cause ", host->nranks,
			host->stall_ms_p50);
		esc_cause(out, host->cause);
		fputs("</li>\n", out);
		k++;
	}
	list_end(out, k, job->nslow_hosts);
}

static void findings_card(FILE *out, const struct dlbn_report_input *in)
{
	const struct dlbn_job *job = in->job;
	const struct dlbn_rank_row *rows = in->ranks, *least = &rows[job->least_stalled];
	fputs("<section class=\"card\" id=\"findings\"><h2>Findings</h2>\n<ul class=\"ev\">\n",
	      out);
	slow_hosts(out, job);
	if (job->has_straggler) {
		fputs("<li>straggler: ", out);
		who(out, &rows[job->straggler]);
		fprintf(out, ", stall %.2f ms/step (least: rank %d, %.2f ms), cause ",
			rows[job->straggler].stall_ms_per_step, least->rank,
			least->stall_ms_per_step);
		esc_cause(out, rows[job->straggler].cause);
		fputs("; the other ranks wait for it at every collective</li>\n", out);
	} else if (job->stall_ms.n) {
		fprintf(out,
			"<li>no straggler: the ranks stall alike (%.2f .. %.2f ms/step)</li>\n",
			job->stall_ms.min, job->stall_ms.max);
	} else {
		fputs("<li>no straggler: no rank has a steady-state window</li>\n", out);
	}
	fputs(job->nlone_rows ? "<li>ranks that stand out from their host (a problem of that "
				"rank alone)<ul>\n"
			      : "<li>no rank stands out from its host</li>\n",
	      out);
	for (size_t k = 0; k < job->nlone_rows; k++) {
		size_t i = job->lone_rows[k];
		fputs("<li>", out);
		who(out, &rows[i]);
		fprintf(out, ": stall %.2f ms/step, its host's median %.2f ms</li>\n",
			rows[i].stall_ms_per_step, job->hosts[job->host_of[i]].stall_ms_p50);
	}
	if (job->nlone_rows)
		list_end(out, 0, 0);
	fputs("</ul></section>\n", out);
}

/* One rank's cell: its colour, its outline, its figures as a tooltip. */
static void grid_cell(FILE *out, const struct dlbn_report_input *in, size_t i)
{
	const struct dlbn_rank_row *r = &in->ranks[i];
	const struct dlbn_job *job = in->job;
	int c = 0, straggler = job->has_straggler && i == job->straggler, lone = 0;
	char x[32];
	while (c < NSTALL - 1 && r->stall_fraction >= stall_edge[c])
		c++;
	for (size_t k = 0; k < job->nlone_rows; k++)
		lone |= job->lone_rows[k] == i;
	if (r->step_ms > 0)
		fprintf(out, "<i class=\"s%d", c);
	else
		fputs("<i class=\"sn", out);
	fprintf(out, "%s\" title=\"rank %d", straggler ? " x" : lone ? " o" : "", r->rank);
	if (r->local_rank >= 0)
		fprintf(out, " (local %d)", r->local_rank);
	fputs(" on ", out);
	html_esc(out, host_name(r->host));
	fprintf(out, ": %s, stall ", dlbn_verdict_name(r->verdict));
	if (r->step_ms > 0)
		fprintf(out, "%.2f ms/step (%.1f%%)", r->stall_ms_per_step,
			r->stall_fraction * 100);
	else
		fputs("- (no window)", out);
	fprintf(out, ", speedup %s, cause ", fmt_x(x, sizeof(x), r->speedup));
	esc_cause(out, r->cause);
	fputs(straggler ? "; the straggler\"></i>" : "\"></i>", out);
}

/* Host h's row: its label, then its ranks in rank order from row first
 * (hosts come in order of their first rank, so the scan starts there). */
static void grid_host(FILE *out, const struct dlbn_report_input *in, size_t h, size_t first)
{
	const struct dlbn_host *host = &in->job->hosts[h];
	fprintf(out, "<div class=\"hrow\"><span class=\"hl%s\" title=\"",
		host->slow ? " slow" : "");
	html_esc(out, host_name(host->name));
	fprintf(out, ": %zu rank(s), median stall %.2f ms/step\">%s", host->nranks,
		host->stall_ms_p50, host->slow ? "<b class=\"badge\">slow</b>" : "");
	html_esc(out, host_name(host->name));
	fputs("</span><span class=\"cells\">", out);
	for (size_t i = first, k = 0; i < in->nranks && k < host->nranks; i++)
		if (in->job->host_of[i] == h) {
			grid_cell(out, in, i);
			k++;
		}
	fputs("</span></div>\n", out);
}

static void grid_card(FILE *out, const struct dlbn_report_input *in)
{
	const struct dlbn_job *job = in->job;
	size_t widest = 1, first = 0;
	for (size_t h = 0; h < job->nhosts; h++)
		if (job->hosts[h].nranks > widest)
			widest = job->hosts[h].nranks;
	fputs("<section class=\"card\" id=\"grid\"><h2>Ranks by host<span class=\"hint\">one "
	      "square per rank, in rank order; hover for its figures</span></h2>\n"
	      "<div class=\"keys\">stall share of the step:",
	      out);
	for (int c = 0; c < NSTALL; c++)
		fprintf(out, "<span style=\"--c:%s\">%s</span>", stall_colour[c], stall_key[c]);
	fputs("<span style=\"--c:#d5d9e0\">no window</span><span class=\"x\" style=\"--c:#fff\">"
	      "straggler</span><span class=\"o\" style=\"--c:#fff\">stands out from its host"
	      "</span></div>\n<div class=\"hgrid\"",
	      out);
	if (job->nhosts > GRID_ONE_COLS)
		fprintf(out, " style=\"columns:%zupx\"",
			GRID_LABEL + (widest < GRID_WRAP ? widest : GRID_WRAP) * GRID_PITCH);
	fputs(">\n", out);
	for (size_t h = 0; h < job->nhosts; h++) {
		while (first < in->nranks && job->host_of[first] != h)
			first++;
		grid_host(out, in, h, first);
	}
	fputs("</div></section>\n", out);
}

/* A row of the rank tables: the worst ranks' (with the trace) or the
 * full table's (full: with the totals; the worst rank highlighted). */
static void table_row(FILE *out, const struct dlbn_report_input *in, size_t i, int full)
{
	const struct dlbn_rank_row *r = &in->ranks[i];
	const struct dlbn_job *job = in->job;
	char x[32], stall[32] = "-", step[32] = "-";
	if (r->step_ms > 0) {
		snprintf(stall, sizeof(stall), "%.2f", r->stall_ms_per_step);
		snprintf(step, sizeof(step), "%.2f", r->step_ms);
	}
	fprintf(out, "<tr%s><td>%d%s</td><td class=\"l\">",
		full && i == job->worst ? " class=\"current\"" : "", r->rank,
		job->has_straggler && i == job->straggler ? " (straggler)" : "");
	html_esc(out, host_name(r->host));
	fprintf(out, "</td><td class=\"l\">%s</td><td>%s</td>", dlbn_verdict_name(r->verdict),
		fmt_x(x, sizeof(x), r->speedup));
	if (full)
		fprintf(out, "<td>%.3f</td>", r->stall_s);
	fprintf(out, "<td>%.1f%%</td><td>%s</td>", r->stall_fraction * 100, stall);
	if (full)
		fprintf(out, "<td>%s</td><td>%zu</td>", step, r->steps_window);
	fputs("<td class=\"l\">", out);
	esc_cause(out, r->cause);
	if (!full) {
		fputs("</td><td class=\"l\"><code>", out);
		html_esc(out, r->trace);
		fputs("</code>", out);
	}
	fputs("</td></tr>\n", out);
}

/* The worst ranks, largest stall per step first. */
static void worst_card(FILE *out, const struct dlbn_report_input *in)
{
	if (!in->job->nworst_rows)
		return;
	fputs("<section class=\"card\" id=\"worst\"><h2>Worst ranks<span class=\"hint\">largest "
	      "stall per step</span></h2>\n<table><thead><tr><th>rank</th><th class=\"l\">host"
	      "</th><th class=\"l\">verdict</th><th>speedup</th><th>stall</th><th>stall / step (ms)"
	      "</th><th class=\"l\">cause</th><th class=\"l\">trace</th></tr></thead><tbody>\n",
	      out);
	for (size_t k = 0; k < in->job->nworst_rows; k++)
		table_row(out, in, in->job->worst_rows[k], 0);
	fputs("</tbody></table></section>\n", out);
}

static void ranks_card(FILE *out, const struct dlbn_report_input *in)
{
	fputs("<section class=\"card\" id=\"ranks\"><h2>All ranks</h2>\n", out);
	if (in->nranks > DLBN_RANK_TABLE_MAX) {
		fprintf(out,
			"<p class=\"muted\">%zu ranks: one row each is in <code>dlbn-analyze -f "
			"json</code>.</p></section>\n",
			in->nranks);
		return;
	}
	fputs("<table><thead><tr><th>rank</th><th class=\"l\">host</th><th class=\"l\">verdict"
	      "</th><th>speedup</th><th>stall (s)</th><th>stall</th><th>stall / step (ms)</th>"
	      "<th>step (ms)</th><th>steps</th><th class=\"l\">cause</th></tr></thead><tbody>\n",
	      out);
	for (size_t i = 0; i < in->nranks; i++)
		table_row(out, in, i, 1);
	fputs("</tbody></table><p class=\"muted small\">Highlighted: the worst rank.</p>"
	      "</section>\n",
	      out);
}

static void lines(FILE *out, const char *title, const char (*l)[DLBN_LINE], size_t n)
{
	if (!n)
		return;
	fprintf(out, "<h3>%s</h3><ul class=\"ev\">\n", title);
	for (size_t i = 0; i < n && i < DLBN_ROW_LINES; i++) {
		fputs("<li>", out);
		html_esc(out, l[i]);
		fputs("</li>\n", out);
	}
	fputs("</ul>\n", out);
}

/* The rank the reports are about: the worst, or --rank N's. */
static void subject_card(FILE *out, const struct dlbn_report_input *in)
{
	const struct dlbn_rank_row *r = in->subject ? in->subject : &in->ranks[in->job->worst];
	const char *name = dlbn_verdict_name(r->verdict);
	fprintf(out,
		"<section class=\"card\" id=\"subject\"><h2>Rank %d%s<span class=\"hint\">full "
		"report: dlbn-analyze --rank %d TRACES...</span></h2>\n<div class=\"verdict\">"
		"<span class=\"pill v-%s\">%s</span><span>",
		r->rank, in->subject_requested ? "" : ", the worst", r->rank, name, name);
	html_esc(out, host_name(r->host));
	fputs(" &middot; <code>", out);
	html_esc(out, r->trace);
	fputs("</code></span></div>\n", out);
	lines(out, "Evidence", r->reasons, r->nreasons);
	lines(out, "Recommendations", r->recs, r->nrecs);
	lines(out, "Warnings", r->warnings, r->nwarnings);
	fputs("</section>\n", out);
}

static void page(FILE *out, const void *ctx)
{
	const struct dlbn_report_input *in = ctx;
	fprintf(out,
		"<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
		"<meta name=\"viewport\" content=\"width=device-width,initial-scale=1\">\n"
		"<link rel=\"icon\" href=\"data:,\">\n<title>dlbn job report: %s - %zu ranks"
		"</title>\n<style>\n%s%s",
		dlbn_verdict_name(in->job->verdict), in->nranks, html_css, job_css);
	for (int c = 0; c < NSTALL; c++)
		fprintf(out, ".s%d{background:%s}", c, stall_colour[c]);
	fprintf(out,
		"\n</style></head>\n<body>\n<header><h1>dlbn job report</h1><div class=\"sub\">"
		"%zu ranks on %zu host(s)</div></header>\n<main>\n",
		in->nranks, in->job->nhosts);
	verdict_card(out, in);
	findings_card(out, in);
	grid_card(out, in);
	worst_card(out, in);
	ranks_card(out, in);
	subject_card(out, in);
	fprintf(out,
		"<footer>dlbn-analyze &middot; job of %zu ranks &middot; self-contained page: no "
		"script, no network</footer>\n</main>\n</body></html>\n",
		in->nranks);
}

int dlbn_report_html_job(const char *path, const struct dlbn_report_input *in, char *err,
			 size_t errlen)
{
	if (!in->ranks || !in->nranks || !in->job) {
		snprintf(err, errlen, "no ranks to report on");
		return -1;
	}
	return dlbn_out_write(path, NULL, page, in, err, errlen);
}
