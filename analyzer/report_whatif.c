/*
 * report_whatif.c - the --what-if section of the text and Markdown reports
 * and the "what_if" / "what_if_basis" JSON values (stable keys, see
 * man/dlbn-analyze.1).  Reads the model of whatif.h; computes nothing.
 */
#include <string.h>

#include "json.h"
#include "report.h"
#include "whatif.h"

static const char *value_text(const struct dlbn_whatif_row *r, char *buf, size_t n)
{
	if (!strcmp(r->setting, "persistent_workers") || !strcmp(r->setting, "pin_memory"))
		return r->value ? "True" : "False";
	snprintf(buf, n, "%d", r->value);
	return buf;
}

static void basis_line(FILE *out, const struct dlbn_whatif *w, const char *indent)
{
	if (w->in_process)
		fprintf(out,
			"%sinputs: one loader thread needs %.1f ms per batch, the loop %.2f ms "
			"per step (the process %.2f ms CPU, the loader's threads included), "
			"epoch start-up %.2f ms per step",
			indent, w->batch_ms, w->loop_ms, w->main_cpu_ms, w->startup_ms);
	else
		fprintf(out,
			"%sinputs: a worker needs %.1f ms per batch (%.1f ms CPU), the loop %.2f "
			"ms per "
			"step (%.2f ms CPU), hand-off %.2f ms, epoch start-up %.2f ms per step",
			indent, w->batch_ms, w->worker_cpu_ms, w->loop_ms, w->main_cpu_ms,
			w->handoff_ms, w->startup_ms);
	if (w->stage_ms > 0)
		fprintf(out, "; a loader stage that more %s do not shorten %.1f ms per batch",
			w->knob, w->stage_ms);
	fputs("; GPU ", out);
	if (w->gpu_step_ms > 0)
		fprintf(out, "%.2f ms per step", w->gpu_step_ms);
	else
		fputs("-", out);
	fprintf(out, "; cores: %s\n", w->cores_from);
}

void dlbn_whatif_text(FILE *out, const struct dlbn_whatif *w)
{
	char buf[16];
	fputs("\nWhat-if (predicted step time per setting, steady state)\n", out);
	if (!w->valid) {
		fprintf(out, "  no prediction: %s\n", w->why_not);
		return;
	}
	basis_line(out, w, "  ");
	fprintf(out, "  %-20s %6s %10s %9s %10s  %s\n", "setting", "value", "step ms", "speedup",
		w->batch_size > 0 ? "samples/s" : "steps/s", "limited by");
	for (size_t i = 0; i < w->nrows; i++) {
		const struct dlbn_whatif_row *r = &w->rows[i];
		double per_s = r->step_ms > 0 ? 1e3 / r->step_ms : 0;
		if (w->batch_size > 0)
			per_s *= w->batch_size;
		fprintf(out, "  %-20s %6s %10.2f %8.2fx %10.1f  %s", r->setting,
			value_text(r, buf, sizeof(buf)), r->step_ms, r->speedup, per_s,
			r->limited_by);
		if (r->current)
			fprintf(out, "   <- this run (measured %.2f ms)", r->measured_ms);
		fputc('\n', out);
	}
	fprintf(out, "  fewest %s for the best step: %d\n", w->knob, w->best_workers);
	for (size_t i = 0; i < w->nnotes; i++)
		fprintf(out, "  - %s\n", w->notes[i]);
}

void dlbn_whatif_markdown(FILE *out, const struct dlbn_whatif *w)
{
	char buf[16];
	fputs("\n## What-if\n\n", out);
	if (!w->valid) {
		fprintf(out, "No prediction: %s.\n", w->why_not);
		return;
	}
	fputs("Predicted steady-state step time for other loader settings (dlbn-analyze "
	      "--what-if).\n\n",
	      out);
	basis_line(out, w, "");
	fputs("\n| setting | value | predicted step (ms) | speedup | limited by | measured (ms) |\n"
	      "|---|---:|---:|---:|---|---:|\n",
	      out);
	for (size_t i = 0; i < w->nrows; i++) {
		const struct dlbn_whatif_row *r = &w->rows[i];
		fprintf(out, "| %s | %s%s | %.2f | %.2fx | %s |", r->setting,
			value_text(r, buf, sizeof(buf)), r->current ? " (this run)" : "",
			r->step_ms, r->speedup, r->limited_by);
		if (r->current)
			fprintf(out, " %.2f |\n", r->measured_ms);
		else
			fputs(" |\n", out);
	}
	fputc('\n', out);
	for (size_t i = 0; i < w->nnotes; i++)
		fprintf(out, "- %s\n", w->notes[i]);
}

/* "what_if": [...], "what_if_basis": {...} (null / [] when not computed). */
void dlbn_whatif_json(FILE *out, const struct dlbn_whatif *w)
{
	fputs("\"what_if\":", out);
	if (!w) {
		fputs("null,\"what_if_basis\":null", out);
		return;
	}
	fputc('[', out);
	for (size_t i = 0; w->valid && i < w->nrows; i++) {
		const struct dlbn_whatif_row *r = &w->rows[i];
		int first = 1;
		fputs(i ? ",{" : "{", out);
		dlbn_json_key(out, "setting", &first);
		dlbn_json_str(out, r->setting);
		dlbn_json_key(out, "value", &first);
		fprintf(out, "%d", r->value);
		dlbn_json_key(out, "predicted_step_ms", &first);
		dlbn_json_number(out, r->step_ms);
		dlbn_json_key(out, "predicted_speedup", &first);
		dlbn_json_number(out, r->speedup);
		dlbn_json_key(out, "limited_by", &first);
		dlbn_json_str(out, r->limited_by);
		double per_s = r->step_ms > 0 ? 1e3 / r->step_ms : 0;
		dlbn_json_key(out, "predicted_steps_per_s", &first);
		dlbn_json_number(out, per_s);
		dlbn_json_key(out, "predicted_samples_per_s", &first);
		if (w->batch_size > 0)
			dlbn_json_number(out, per_s * w->batch_size);
		else
			fputs("null", out);
		dlbn_json_key(out, "current", &first);
		fputs(r->current ? "true" : "false", out);
		dlbn_json_key(out, "measured_step_ms", &first);
		if (r->current)
			dlbn_json_number(out, r->measured_ms);
		else
			fputs("null", out);
		fputc('}', out);
	}
	fputs("],\"what_if_basis\":{", out);
	int first = 1;
	dlbn_json_key(out, "valid", &first);
	fputs(w->valid ? "true" : "false", out);
	dlbn_json_key(out, "why_not", &first);
	if (w->valid)
		fputs("null", out);
	else
		dlbn_json_str(out, w->why_not);
	static const char *const keys[] = {"measured_step_ms", "batch_ms",    "worker_cpu_ms",
					   "loop_ms",	       "main_cpu_ms", "handoff_ms",
					   "startup_ms",       "file_share",  "cores",
					   "gpu_step_ms",      "stage_ms"};
	const double vals[] = {w->measured_ms, w->batch_ms,    w->worker_cpu_ms, w->loop_ms,
			       w->main_cpu_ms, w->handoff_ms,  w->startup_ms,	 w->file_share,
			       w->cores,       w->gpu_step_ms, w->stage_ms};
	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
		dlbn_json_key(out, keys[i], &first);
		if ((!strcmp(keys[i], "cores") || !strcmp(keys[i], "gpu_step_ms")) && vals[i] <= 0)
			fputs("null", out);
		else
			dlbn_json_number(out, vals[i]);
	}
	dlbn_json_key(out, "cores_from", &first);
	dlbn_json_str(out, w->cores_from);
	dlbn_json_key(out, "num_workers", &first);
	fprintf(out, "%d", w->num_workers);
	dlbn_json_key(out, "best_workers", &first);
	fprintf(out, "%d", w->best_workers);
	dlbn_json_key(out, "curve_setting", &first);
	dlbn_json_str(out, w->knob);
	dlbn_json_key(out, "loader_kind", &first);
	dlbn_json_str(out, w->kind);
	dlbn_json_key(out, "gpu_paced", &first);
	fputs(w->gpu_paced ? "true" : "false", out);
	dlbn_json_key(out, "notes", &first);
	fputc('[', out);
	for (size_t i = 0; i < w->nnotes; i++) {
		if (i)
			fputc(',', out);
		dlbn_json_str(out, w->notes[i]);
	}
	fputs("]}", out);
}
