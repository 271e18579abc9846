/*
 * report_markdown.c - `--format markdown`: the report as a Markdown
 * document for tickets and CI summaries (docs/DESIGN.md, "Analyzer layers"): a
 * decision table, detection, localisation, confidence and scope, artifacts.
 * The figures are the text report's; only the layout differs.
 */
#include <string.h>

#include "analysis/damage.h"
#include "report/report.h"

/* Table cells and list items must not break the Markdown around them. */
static void md_text(FILE *out, const char *s)
{
	for (; *s; s++) {
		if (*s == '|' || *s == '\\' || *s == '`' || *s == '*' || *s == '_')
			fputc('\\', out);
		fputc(*s == '\n' ? ' ' : *s, out);
	}
}

static void md_decision(FILE *out, const struct dlbn_analysis *a)
{
	fputs("| verdict | predicted speedup | stall (window) | steps (window) | view | cause |\n",
	      out);
	fputs("|---|---|---|---|---|---|\n", out);
	fprintf(out, "| **%s** | ", dlbn_verdict_name(a->verdict));
	if (a->predicted_speedup > 0)
		fprintf(out, "%.2fx", a->predicted_speedup);
	else
		fputs("-", out);
	fprintf(out, " | %.3f s of %.3f s (%.1f%%) | %zu | %s%s | ", a->stall_s, a->wall_s,
		a->stall_fraction * 100, a->steps_window, dlbn_view_name(a->view),
		a->path == DLBN_PATH_PIN ? " (pin memory)" : "");
	md_text(out, dlbn_cause_name(a->cause));
	fputs(" |\n", out);
}

static void md_workers(FILE *out, const struct dlbn_analysis *a)
{
	if (!a->nworkers)
		return;
	fputs("\n| worker pid | batches | busy | ms per batch | file reads | exit |\n", out);
	fputs("|---|---|---|---|---|---|\n", out);
	for (size_t i = 0; i < a->nworkers; i++) {
		const struct dlbn_worker_stats *w = &a->workers[i];
		fprintf(out, "| %d | %llu | ", w->pid, (unsigned long long)w->batches);
		if (w->busy_fraction >= 0)
			fprintf(out, "%.0f%%", w->busy_fraction * 100);
		else
			fputs("-", out);
		fprintf(out, " | %.1f | %.2f s | %s |\n", w->mean_batch_ms, w->file_read_s,
			w->exited ? "yes" : "**none (killed?)**");
	}
}

static void md_list(FILE *out, const char (*lines)[DLBN_LINE], size_t n)
{
	for (size_t i = 0; i < n; i++) {
		fputs("- ", out);
		md_text(out, lines[i]);
		fputc('\n', out);
	}
}

/* Every DataLoader of the training process when there are several. */
static void md_loaders(FILE *out, const struct dlbn_model *m)
{
	const struct dlbn_loader_table *t = &m->loaders;
	if (m->view != DLBN_VIEW_PYTHON || t->n < 2 || t->train < 0)
		return;
	fprintf(out, "\n### DataLoaders\n\nThe verdict is loader #%d's, chosen as %s.\n\n",
		t->train + 1, t->chosen_by);
	fputs("| # | role | loader | steps | epochs | wait (s) | stall (s) | in the verdict's "
	      "window: steps, stall (s) |\n|---|---|---|---|---|---|---|---|\n",
	      out);
	for (size_t i = 0; i < t->n; i++) {
		struct dlbn_loader_summary ls;
		char what[160];
		dlbn_loader_summary(m, i, &ls);
		dlbn_loader_describe(&ls, what, sizeof(what));
		fprintf(out, "| %d | %s | %s | %zu | %d | %.3f | %.3f | ", ls.id,
			dlbn_loader_role_name(ls.role), what, ls.steps, ls.epochs, ls.wait_s,
			ls.stall_s);
		if (ls.training)
			fputs("(the window's own) |\n", out);
		else
			fprintf(out, "%zu, %.3f |\n", ls.in_train_window.steps,
				(double)ls.in_train_window.stall_ns / 1e9);
	}
}

/* "Damaged trace": what a damaged trace lost (damage.h). */
static void md_damage(FILE *out, const struct dlbn_report_input *in)
{
	static struct dlbn_damage d;
	dlbn_damage_assess(in->m, in->rs, in->a, &d);
	if (!d.damaged)
		return;
	fputs("\n## Damaged trace (exit status 1)\n\n", out);
	md_text(out, d.summary);
	fputs("\n\n", out);
	for (size_t i = 0; i < d.nitems; i++) {
		fputs("- ", out);
		md_text(out, d.items[i].text);
		fputc('\n', out);
	}
}

/* "Detection": the steps, the loader wait, the loader and its workers. */
static void md_detection(FILE *out, const struct dlbn_analysis *a, const struct dlbn_model *m)
{
	fputs("\n## Detection\n\n", out);
	if (a->steps_total) {
		fprintf(out,
			"- %zu steps, %zu warm-up skipped (prefetch depth %d), %zu in the window "
			"(t = %.3f .. %.3f s), %d epoch(s)\n",
			a->steps_total, a->steps_warmup, a->prefetch_depth, a->steps_window,
			a->start_s, a->end_s, a->epochs);
		fprintf(out,
			"- loader wait %.3f s exposed (%.1f%% of the window); per step mean %.2f "
			"ms, "
			"p50 %.2f ms, p95 %.2f ms, max %.2f ms\n",
			a->exposed_s, a->exposed_fraction * 100, a->mean_ms, a->p50_ms, a->p95_ms,
			a->max_ms);
		dlbn_outside_markdown(out, a);
	}
	if (m->config.present) {
		fputs("- DataLoader: `", out);
		for (const char *c = m->config.text; *c; c++)
			fputc(*c == '`' ? '\'' : *c, out);
		fputs("`\n", out);
	}
	md_workers(out, a);
	dlbn_memory_markdown(out, a);
	md_loaders(out, m);
}

/* "Confidence and scope": the view, the GPU rule, the warnings. */
static void md_scope(FILE *out, const struct dlbn_report_input *in)
{
	const struct dlbn_analysis *a = in->a;
	const struct dlbn_reader_stats *rs = in->rs;
	fputs("\n## Confidence and scope\n\n", out);
	fprintf(out, "- view: %s (%s)\n", dlbn_view_name(a->view),
		a->view == DLBN_VIEW_PYTHON ? "exact fetch marks of the loop's loader"
		: a->view == DLBN_VIEW_NVTX ? "data-loading ranges declared with NVTX"
		: a->view == DLBN_VIEW_IPC  ? "batch hand-offs inferred from system calls"
					    : "no steps");
	fprintf(out, "- GPU: %s\n",
		in->gpu && in->gpu->present
			? "CUDA work recorded; the stall is the GPU-idle part of the waits"
			: "no GPU activity recorded; the exposed wait is the stall");
	md_list(out, a->warnings, a->nwarnings);
	unsigned kept = rs->nwarnings < DLBN_READER_MAX_WARN ? rs->nwarnings : DLBN_READER_MAX_WARN;
	for (unsigned i = 0; i < kept; i++) {
		fputs("- trace: ", out);
		md_text(out, rs->warnings[i]);
		fputc('\n', out);
	}
}

/* "Artifacts": the trace read. */
static void md_artifacts(FILE *out, const struct dlbn_report_input *in)
{
	const struct dlbn_reader_stats *rs = in->rs;
	fputs("\n## Artifacts\n\n- trace: `", out);
	for (const char *c = in->path; *c; c++)
		fputc(*c == '`' ? '\'' : *c, out);
	fprintf(out, "` (format %u.%u, %zu process(es), %llu records%s)\n", rs->version_major,
		rs->version_minor, in->m->nprocs, (unsigned long long)in->m->records,
		rs->truncated ? ", truncated" : "");
}

void dlbn_report_markdown(FILE *out, const struct dlbn_report_input *in)
{
	const struct dlbn_analysis *a = in->a;

	fputs("# dlbn: data-loading bottleneck report\n\n", out);
	dlbn_ranks_markdown(out, in);
	if (!a) { /* the rank is known from its summary alone */
		dlbn_subject_text(out, in, 1);
		return;
	}
	fputs("## Decision\n\n", out);
	md_decision(out, a);
	if (in->baseline) {
		fputs("\n## Measured confirmation (Replay)\n\n```\n", out);
		dlbn_baseline_text(out, in->baseline);
		fputs("```\n", out);
	}
	md_damage(out, in);
	md_detection(out, a, in->m);

	fputs("\n## Localisation\n\n", out);
	md_list(out, a->reasons, a->nreasons);
	if (a->nrecs) {
		fputs("\n### Recommendations\n\n", out);
		md_list(out, a->recs, a->nrecs);
	}
	/* --what-if (report_whatif.c) */
	if (in->whatif)
		dlbn_whatif_markdown(out, in->whatif);
	dlbn_hotspots_markdown(out, in);
	dlbn_waits_markdown(out, in);
	md_scope(out, in);
	md_artifacts(out, in);
}
