/*
 * report_html.c - the page of `--html FILE` (see report_html.h): layout,
 * CSS, the verdict and evidence, tables; the charts are report_html_svg.c's.
 * No script and no external resource: the file opens offline, the same in
 * any browser, and a browser logs nothing for it.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "report/report_html.h"
#include "util/outfile.h"

const char html_css[] =
	":root{--ink:#1d2330;--muted:#5d6676;--line:#e3e6eb;--bg:#f4f5f7;--card:#fff;"
	"--stall:#d94b3d;--hidden:#f2b544;--loop:#5b8def;--fetch:#c9ced6;--gpu:#3b4a8f;"
	"--batch:#2a9d8f;--accent:#3056d3}\n"
	"*{box-sizing:border-box}\n"
	"body{margin:0;background:var(--bg);color:var(--ink);font:14px/1.45 system-ui,-apple-"
	"system,'Segoe UI',Roboto,'Helvetica Neue',Arial,sans-serif}\n"
	"header{background:#161b26;color:#e9ecf2;padding:18px 32px}\n"
	"header h1{margin:0;font-size:19px;font-weight:600;letter-spacing:.2px}\n"
	"header .sub{color:#9aa3b5;font-size:12.5px;margin-top:3px;word-break:break-all}\n"
	"main{max-width:1180px;margin:0 auto;padding:20px 24px 40px}\n"
	".card{background:var(--card);border:1px solid var(--line);border-radius:8px;"
	"padding:18px 22px;margin:0 0 18px;box-shadow:0 1px 2px rgba(20,30,50,.04)}\n"
	".card h2{font-size:15px;margin:0 0 12px;font-weight:600}\n"
	".card h2 .hint{font-weight:400;color:var(--muted);font-size:12.5px;margin-left:8px}\n"
	".row{display:flex;gap:18px;flex-wrap:wrap}.row>.card{flex:1 1 420px}\n"
	".verdict{display:flex;align-items:center;gap:18px;flex-wrap:wrap}\n"
	".pill{font-weight:700;font-size:15px;letter-spacing:.6px;padding:7px 14px;"
	"border-radius:6px;color:#fff}\n"
	".v-DETECTED{background:#c0392b}.v-POTENTIAL{background:#d68910}"
	".v-NOT_DETECTED{background:#1e8449}.v-INCONCLUSIVE{background:#6c7686}\n"
	".headline{font-size:17px;font-weight:500}\n"
	".tiles{display:grid;grid-template-columns:repeat(auto-fill,minmax(138px,1fr));gap:12px;"
	"margin-top:16px}\n"
	".tile{border:1px solid var(--line);border-radius:6px;padding:10px "
	"12px;background:#fafbfc}\n"
	".tile "
	".k{color:var(--muted);font-size:11.5px;text-transform:uppercase;letter-spacing:.5px}\n"
	".tile "
	".v{font-size:20px;font-weight:600;margin-top:2px;font-variant-numeric:tabular-nums}\n"
	".tile .d{color:var(--muted);font-size:12px}\n"
	"ul.ev{margin:0;padding-left:18px}ul.ev li{margin:3px 0}\n"
	"ul.rec li{margin:4px 0}\n"
	"table{border-collapse:collapse;width:100%;font-variant-numeric:tabular-nums}\n"
	"th,td{text-align:right;padding:5px 10px;border-bottom:1px solid var(--line)}\n"
	"th{color:var(--muted);font-weight:600;font-size:12px;text-transform:uppercase;"
	"letter-spacing:.4px}\n"
	"th:first-child,td:first-child{text-align:left}\n"
	"tr.current td{background:#eef3ff;font-weight:600}\n"
	".muted{color:var(--muted)}.small{font-size:12.5px}\n"
	"svg.chart{display:block;font-family:inherit}\n"
	".axis{stroke:#8a93a3;stroke-width:1}.grid{stroke:#eceef2;stroke-width:1}\n"
	".tick{fill:#6b7385;font-size:11px}.rowlabel{fill:#333a48;font-size:12px}\n"
	".axislabel{fill:#4a5262;font-size:12px}.marklabel{fill:#333a48;font-size:11.5px}\n"
	".legend{fill:#333a48;font-size:12px}.legendhead{fill:#6b7385;font-size:11px;"
	"text-transform:uppercase}.value{fill:#333a48;font-size:12px;font-weight:600}\n"
	".tl-window{fill:#f3f6fd}.tl-fetch{fill:var(--fetch)}.tl-hidden{fill:var(--hidden)}\n"
	".tl-stall{fill:var(--stall)}.tl-loop{fill:var(--loop);opacity:.85}\n"
	".tl-gpu{fill:var(--gpu)}.tl-gpuidle{fill:var(--stall);opacity:.75}"
	".tl-batch{fill:var(--batch)}\n"
	".hist-bar{fill:#5b8def}.marker{stroke:#d94b3d;stroke-dasharray:4 3}\n"
	".util-bg{fill:#eef0f4}.util-busy{fill:#2a9d8f}.util-hot{fill:#d94b3d}"
	".util-file{fill:#8e6bd1}\n"
	".curve{fill:none;stroke:#3056d3;stroke-width:2}\n"
	".whatif-point{stroke:#fff;stroke-width:1.5}\n"
	".lim-workers{fill:#2a9d8f}.lim-storage{fill:#8e6bd1}.lim-cores{fill:#d94b3d}"
	".lim-gpu{fill:#3b4a8f}.lim-loop{fill:#5b8def}.lim-handoff{fill:#f2b544}"
	".lim-main_thread{fill:#6c7686}.lim-epoch_startup{fill:#b5651d}.lim-other{fill:#999}\n"
	".measured-point{fill:none;stroke:#161b26;stroke-width:2.5}\n"
	".sweep-point{fill:#f2b544;stroke:#161b26;stroke-width:1.2}"
	".sweep-failed path{stroke:#c0392b;stroke-width:2.5}\n"
	".keys{display:flex;gap:16px;flex-wrap:wrap;margin:8px 0 0;font-size:12.5px;"
	"color:var(--muted)}.keys span:before{content:'';display:inline-block;width:12px;"
	"height:12px;border-radius:2px;margin-right:6px;vertical-align:-2px;background:var(--c)}\n"
	"code{word-break:break-all;font-size:12px}\n"
	"footer{color:var(--muted);font-size:12px;text-align:center;margin-top:8px}\n";

static const char *headline(int v)
{
	switch (v) {
	case DLBN_VERDICT_DETECTED:
		return "Data loading holds the training back";
	case DLBN_VERDICT_POTENTIAL:
		return "Data loading costs some training time";
	case DLBN_VERDICT_NOT_DETECTED:
		return "The input pipeline keeps up";
	default:
		return "The trace cannot support a verdict";
	}
}

static void tile(FILE *out, const char *k, const char *v, const char *d)
{
	fputs("<div class=\"tile\"><div class=\"k\">", out);
	html_esc(out, k);
	fputs("</div><div class=\"v\">", out);
	html_esc(out, v);
	fputs("</div><div class=\"d\">", out);
	html_esc(out, d);
	fputs("</div></div>\n", out);
}

static void verdict_card(FILE *out, const struct dlbn_report_input *in)
{
	const struct dlbn_analysis *a = in->a;
	char v[64], d[128];
	const char *name = dlbn_verdict_name(a->verdict);
	fprintf(out,
		"<section class=\"card\"><div class=\"verdict\"><span id=\"verdict\" "
		"class=\"pill v-%s\">%s</span><span class=\"headline\">%s",
		name, name, headline(a->verdict));
	if (a->predicted_speedup > 0)
		fprintf(out, "; predicted speedup <b id=\"speedup\">%.2fx</b>",
			a->predicted_speedup);
	fputs("</span></div>\n<div class=\"tiles\">\n", out);
	snprintf(v, sizeof(v), "%.2fx", a->predicted_speedup);
	snprintf(d, sizeof(d), "without the loader's stall (cause: %s)", dlbn_cause_name(a->cause));
	tile(out, "predicted speedup", a->predicted_speedup > 0 ? v : "-", d);
	if (a->steps_window) {
		snprintf(v, sizeof(v), "%.2f ms", a->wall_s * 1e3 / (double)a->steps_window);
		snprintf(d, sizeof(d), "%.2f ms without the stall", a->loop_ms);
		tile(out, "step time", v, d);
	}
	snprintf(v, sizeof(v), "%.1f%%", a->stall_fraction * 100);
	snprintf(d, sizeof(d), "%.3f s of a %.3f s window", a->stall_s, a->wall_s);
	tile(out, "stall", v, d);
	snprintf(v, sizeof(v), "%.2f ms", a->mean_ms);
	snprintf(d, sizeof(d), "p50 %.2f, p95 %.2f, max %.2f ms", a->p50_ms, a->p95_ms, a->max_ms);
	tile(out, "loader wait / step", v, d);
	if (a->mean_busy >= 0) {
		snprintf(v, sizeof(v), "%.0f%%", a->mean_busy * 100);
		snprintf(d, sizeof(d), "%zu worker process%s", a->nworkers,
			 a->nworkers == 1 ? "" : "es");
		tile(out, "workers busy", v, d);
	}
	snprintf(v, sizeof(v), "%zu", a->steps_window);
	snprintf(d, sizeof(d), "%zu total, %zu warm-up, %d epoch(s)", a->steps_total,
		 a->steps_warmup, a->epochs);
	tile(out, "window steps", v, d);
	snprintf(d, sizeof(d), "%s",
		 a->gpu ? "stall = GPU-idle part of the waits" : "no GPU activity: stall = wait");
	tile(out, "view", dlbn_view_name(a->view), d);
	fputs("</div></section>\n", out);
}

static void list(FILE *out, const char *cls, const char (*lines)[DLBN_LINE], size_t n)
{
	fprintf(out, "<ul class=\"ev %s\">\n", cls);
	for (size_t i = 0; i < n; i++) {
		fputs("<li>", out);
		html_esc(out, lines[i]);
		fputs("</li>\n", out);
	}
	fputs("</ul>\n", out);
}

static void evidence_card(FILE *out, const struct dlbn_report_input *in)
{
	const struct dlbn_analysis *a = in->a;
	fputs("<section class=\"card\" id=\"evidence\"><h2>Evidence</h2>\n", out);
	list(out, "", a->reasons, a->nreasons);
	if (a->nrecs) {
		fputs("<h2 style=\"margin-top:14px\">Recommendations</h2>\n", out);
		list(out, "rec", a->recs, a->nrecs);
	}
	if (in->m->config.present) {
		fputs("<p class=\"muted small\">DataLoader: <code>", out);
		html_esc(out, in->m->config.text);
		fputs("</code></p>\n", out);
	}
	fputs("</section>\n", out);
}

static void timeline_card(FILE *out, const struct html_data *d, const struct dlbn_report_input *in)
{
	fputs("<section class=\"card\" id=\"timeline-card\"><h2>Timeline<span class=\"hint\">",
	      out);
	if (d->nsteps)
		fprintf(out, "%zu step(s) shown%s; shaded: the steady-state window", d->nsteps,
			in->a->steps_total > d->nsteps ? " from the window's start" : "");
	fputs("</span></h2>\n", out);
	if (!d->nsteps) {
		fputs("<p class=\"muted\">No steps in the trace.</p></section>\n", out);
		return;
	}
	svg_timeline(out, d, in->m, in->a);
	fputs("<div class=\"keys\"><span style=\"--c:var(--loop)\">loop's own work</span>"
	      "<span style=\"--c:var(--hidden)\">wait, GPU still busy</span>"
	      "<span style=\"--c:var(--stall)\">stall (GPU idle / no GPU)</span>"
	      "<span style=\"--c:var(--fetch)\">fetch, receiving</span>",
	      out);
	if (d->gpu)
		fputs("<span style=\"--c:var(--gpu)\">GPU busy at a wait</span>", out);
	fputs("<span style=\"--c:var(--batch)\">worker producing a batch</span></div>\n", out);
	if (d->rows_dropped || d->batches_dropped)
		fprintf(out,
			"<p class=\"muted small\">Not drawn: %zu worker(s) past the first %d, "
			"%zu batch(es) past the first %d.</p>\n",
			d->rows_dropped, HTML_MAX_ROWS, d->batches_dropped, HTML_MAX_BATCHES);
	fputs("</section>\n", out);
}

static void workers_cards(FILE *out, const struct html_data *d, const struct dlbn_analysis *a)
{
	fputs("<div class=\"row\"><section class=\"card\" id=\"waits\"><h2>Wait distribution"
	      "<span class=\"hint\">the loop's wait for each window batch</span></h2>\n",
	      out);
	svg_wait_hist(out, d, a);
	fputs("</section>\n<section class=\"card\" id=\"utilisation\"><h2>Worker utilisation"
	      "<span class=\"hint\">busy share of the window; purple: file reads</span></h2>\n",
	      out);
	if (a->nworkers)
		svg_worker_util(out, a);
	else
		fputs("<p class=\"muted\">No worker processes in the window (num_workers=0, or "
		      "none traced).</p>\n",
		      out);
	fputs("</section></div>\n", out);
	if (!a->nworkers)
		return;
	fputs("<section class=\"card\" id=\"workers\"><h2>Workers' time</h2>\n<table><thead><tr>"
	      "<th>worker pid</th><th>batches</th><th>busy</th><th>ms / batch</th>"
	      "<th>busy (s)</th><th>file reads (s)</th><th>exit</th></tr></thead><tbody>\n",
	      out);
	for (size_t i = 0; i < a->nworkers; i++) {
		const struct dlbn_worker_stats *w = &a->workers[i];
		fprintf(out, "<tr><td>%d</td><td>%llu</td>", w->pid,
			(unsigned long long)w->batches);
		if (w->busy_fraction >= 0)
			fprintf(out, "<td>%.0f%%</td>", w->busy_fraction * 100);
		else
			fputs("<td>-</td>", out);
		fprintf(out, "<td>%.2f</td><td>%.3f</td><td>%.3f</td><td>%s</td></tr>\n",
			w->mean_batch_ms, w->busy_s, w->file_read_s,
			w->exited ? "clean" : "no exit record");
	}
	fputs("</tbody></table></section>\n", out);
}

static const char *value_text(const struct dlbn_whatif_row *r, char *buf, size_t n)
{
	if (!strcmp(r->setting, "persistent_workers") || !strcmp(r->setting, "pin_memory"))
		return r->value ? "True" : "False";
	snprintf(buf, n, "%d", r->value);
	return buf;
}

/* The measured sweep figure for a row, or < 0.  A grid's point of another
 * batch size is no point of the run's curve. */
static double sweep_at(const struct dlbn_sweep *s, const struct dlbn_whatif *w,
		       const struct dlbn_whatif_row *r)
{
	for (size_t i = 0; s && i < s->n; i++) {
		const struct dlbn_sweep_point *p = &s->v[i];
		if (!strcmp(r->setting, "batch_size")) {
			/* a point of that size at the run's units, whatever it swept */
			if (p->batch_size >= 1 && fabs(p->batch_size - r->value) < 0.5 &&
			    (p->units < 0 || fabs(p->units - w->num_workers) < 0.5))
				return p->measured_ms;
		} else if (!strcmp(p->setting, r->setting) && p->value == r->value &&
			   !svg_other_batch(p, w)) {
			return p->measured_ms;
		}
	}
	return -2;
}

/* The inputs of the prediction, the table of settings (a sweep's
 * measurement beside each row it ran), the notes. */
static void whatif_table(FILE *out, const struct dlbn_whatif *w, const struct dlbn_sweep *sweep)
{
	char buf[16];
	fprintf(out,
		"<p class=\"muted small\">Inputs: a worker needs %.1f ms per batch (%.1f ms "
		"CPU), the loop %.2f ms per step (%.2f ms CPU), hand-off %.2f ms, epoch "
		"start-up %.2f ms per step; cores: ",
		w->batch_ms, w->worker_cpu_ms, w->loop_ms, w->main_cpu_ms, w->handoff_ms,
		w->startup_ms);
	html_esc(out, w->cores_from);
	fprintf(out, ". Fewest %s for the best step: <b>%d</b>.</p>\n", w->knob, w->best_workers);
	fputs("<table id=\"whatif-table\"><thead><tr><th>setting</th><th>value</th>"
	      "<th>predicted step (ms)</th><th>speedup</th><th>limited by</th>"
	      "<th>measured (ms)</th></tr></thead><tbody>\n",
	      out);
	for (size_t i = 0; i < w->nrows; i++) {
		const struct dlbn_whatif_row *r = &w->rows[i];
		double meas = r->current ? r->measured_ms : sweep_at(sweep, w, r);
		fprintf(out, "<tr%s><td>%s</td><td>%s%s</td><td>%.2f</td><td>%.2fx</td><td>%s</td>",
			r->current ? " class=\"current\"" : "", r->setting,
			value_text(r, buf, sizeof(buf)), r->current ? " (this run)" : "",
			r->step_ms, r->speedup, r->limited_by);
		if (meas > 0)
			fprintf(out, "<td>%.2f%s</td></tr>\n", meas, r->current ? "" : " (sweep)");
		else
			fprintf(out, "<td>%s</td></tr>\n", meas == -1 ? "failed (sweep)" : "");
	}
	fputs("</tbody></table>\n", out);
	fputs("<ul class=\"ev small muted\" style=\"margin-top:10px\">\n", out);
	for (size_t i = 0; i < w->nnotes; i++) {
		fputs("<li>", out);
		html_esc(out, w->notes[i]);
		fputs("</li>\n", out);
	}
	fputs("</ul>\n", out);
}

/* The batch size x units grid: its chart and its best point. */
static void whatif_grid(FILE *out, const struct dlbn_whatif *w)
{
	if (!w->ngrid)
		return;
	fprintf(out, "<h3>Batch size &times; %s</h3>\n", w->knob);
	svg_grid(out, w, 0);
	if (w->grid_best < 0)
		return;
	const struct dlbn_whatif_cell *b = &w->grid[w->grid_best];
	fprintf(out,
		"<p class=\"muted small\" id=\"grid-best\">Best predicted: "
		"batch_size "
		"<b>%d</b>, %s <b>%d</b>: %.0f samples/s (%.2f ms per step, "
		"limited "
		"by %s). %s</p>\n",
		b->batch_size, w->knob, b->units, b->samples_per_s, b->step_ms, b->limited_by,
		w->split_measured ? "The loop's and the GPU's fixed parts per step "
				    "come from runs of another batch size."
				  : "The loop's and the GPU's time per step are "
				    "taken as proportional to the batch (no run of "
				    "another batch size).");
}

static void whatif_card(FILE *out, const struct dlbn_whatif *w, const struct dlbn_sweep *sweep)
{
	fputs("<section class=\"card\" id=\"whatif\"><h2>What-if<span class=\"hint\">predicted "
	      "steady-state step time per loader setting (dlbn-analyze --what-if)</span></h2>\n",
	      out);
	if (!w || !w->valid) {
		fputs("<p class=\"muted\">No prediction: ", out);
		html_esc(out, w ? w->why_not : "not computed");
		fputs(".</p></section>\n", out);
		return;
	}
	svg_whatif(out, w, sweep);
	whatif_table(out, w, sweep);
	whatif_grid(out, w);
	for (size_t i = 0; sweep && i < sweep->n; i++)
		if (sweep->v[i].measured_ms <= 0) {
			fprintf(out,
				"<p class=\"small\">Sweep run %s=%g failed: ", sweep->v[i].setting,
				sweep->v[i].value);
			html_esc(out, sweep->v[i].error[0] ? sweep->v[i].error : "no measurement");
			fputs("</p>\n", out);
		}
	fputs("</section>\n", out);
}

static void footer(FILE *out, const struct dlbn_report_input *in)
{
	const struct dlbn_reader_stats *rs = in->rs;
	const struct dlbn_analysis *a = in->a;
	if (a->nwarnings || rs->truncated) {
		fputs("<section class=\"card\"><h2>Trace health</h2>\n", out);
		if (rs->truncated)
			fputs("<p>The trace is truncated: the report covers its intact part.</p>\n",
			      out);
		list(out, "", a->warnings, a->nwarnings);
		fputs("</section>\n", out);
	}
	fprintf(out,
		"<footer>dlbn-analyze &middot; trace format %u.%u &middot; %zu process(es), "
		"%llu records &middot; self-contained page: no script, no network</footer>\n",
		rs->version_major, rs->version_minor, in->m->nprocs,
		(unsigned long long)in->m->records);
}

static void page(FILE *out, const struct html_data *d, const struct dlbn_report_input *in,
		 const struct dlbn_sweep *sweep)
{
	fputs("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
	      "<meta name=\"viewport\" content=\"width=device-width,initial-scale=1\">\n"
	      "<link rel=\"icon\" href=\"data:,\">\n<title>dlbn report: ",
	      out);
	html_esc(out, dlbn_verdict_name(in->a->verdict));
	fputs(" - ", out);
	html_esc(out, in->path);
	fprintf(out, "</title>\n<style>\n%s%s</style></head>\n<body>\n", html_css, svg_grid_css);
	fputs("<header><h1>dlbn &mdash; data-loading bottleneck report</h1><div class=\"sub\">",
	      out);
	html_esc(out, in->path);
	fputs("</div></header>\n<main>\n", out);
	verdict_card(out, in);
	evidence_card(out, in);
	timeline_card(out, d, in);
	workers_cards(out, d, in->a);
	whatif_card(out, in->whatif, sweep);
	footer(out, in);
	fputs("</main>\n</body></html>\n", out);
}

static void write_plot(FILE *out, const void *ctx)
{
	svg_grid(out, ctx, 1);
}

int dlbn_plot_svg(const char *path, const char *trace_path, const struct dlbn_whatif *w, char *err,
		  size_t errlen)
{
	if (!w->valid || !w->ngrid) {
		snprintf(err, errlen, "no batch size x %s grid to plot: %s",
			 w->knob[0] ? w->knob : "workers",
			 !w->valid ? w->why_not : "the batch size is not in the trace");
		return -1;
	}
	return dlbn_out_write(path, trace_path, write_plot, w, err, errlen);
}

struct page_ctx {
	const struct html_data *d;
	const struct dlbn_report_input *in;
	const struct dlbn_sweep *sweep;
};

static void write_page(FILE *out, const void *ctx)
{
	const struct page_ctx *p = ctx;
	page(out, p->d, p->in, p->sweep);
}

int dlbn_report_html(const char *path, struct dlbn_reader *r, const struct dlbn_report_input *in,
		     const struct dlbn_sweep *sweep, char *err, size_t errlen)
{
	struct html_data d;
	if (html_data_collect(&d, r, in->m, err, errlen) != 0) {
		html_data_free(&d);
		return -1;
	}
	struct page_ctx ctx = {&d, in, sweep};
	int rc = dlbn_out_write(path, in->path, write_page, &ctx, err, errlen);
	html_data_free(&d);
	return rc;
}
