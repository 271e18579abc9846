/*
 * report_whatif.c - the --what-if section of the text and Markdown reports
 * and the "what_if" / "what_if_basis" JSON values (stable keys, see
 * man/dlbn-analyze.1).  Reads the model of whatif.h; computes nothing.
 */
#include <string.h>

#include "analysis/whatif.h"
#include "report/report.h"
#include "util/json.h"

static const char *value_text(const struct dlbn_whatif_row *r, char *buf, size_t n)
{
	if (!strcmp(r->setting, "persistent_workers") || !strcmp(r->setting, "pin_memory"))
		return r->value ? "True" : "False";
	snprintf(buf, n, "%d", r->value);
	return buf;
}

/* The batch size a row stands for: its value on a batch_size row. */
static int row_batch(const struct dlbn_whatif *w, const struct dlbn_whatif_row *r)
{
	return !strcmp(r->setting, "batch_size") ? r->value : w->batch_size;
}

/* The grid's distinct batch sizes or units, in the grid's order. */
static size_t grid_axis(const struct dlbn_whatif *w, int units, int *v, size_t cap)
{
	size_t n = 0;
	for (size_t i = 0; i < w->ngrid; i++) {
		int x = units ? w->grid[i].units : w->grid[i].batch_size;
		size_t j = 0;
		while (j < n && v[j] != x)
			j++;
		if (j == n && n < cap)
			v[n++] = x;
	}
	return n;
}

static const struct dlbn_whatif_cell *cell_at(const struct dlbn_whatif *w, int b, int u)
{
	for (size_t i = 0; i < w->ngrid; i++)
		if (w->grid[i].batch_size == b && w->grid[i].units == u)
			return &w->grid[i];
	return NULL;
}

/* The grid as a matrix of predicted samples/s: rows batch sizes, columns
 * units; markdown: a table. */
static void grid_matrix(FILE *out, const struct dlbn_whatif *w, int markdown)
{
	int sizes[DLBN_WHATIF_BATCHES], units[DLBN_WHATIF_GRID_UNITS];
	size_t ns = grid_axis(w, 0, sizes, DLBN_WHATIF_BATCHES);
	size_t nu = grid_axis(w, 1, units, DLBN_WHATIF_GRID_UNITS);
	const struct dlbn_whatif_cell *best = w->grid_best >= 0 ? &w->grid[w->grid_best] : NULL;
	if (!ns || !nu)
		return;
	if (markdown) {
		fprintf(out,
			"\nPredicted samples/s, batch_size x %s (**best**, _this run_; "
			"measured in brackets):\n\n| batch_size |",
			w->knob);
		for (size_t j = 0; j < nu; j++)
			fprintf(out, " %s=%d |", w->knob, units[j]);
		fputs("\n|---:|", out);
		for (size_t j = 0; j < nu; j++)
			fputs("---:|", out);
		fputc('\n', out);
	} else {
		fprintf(out,
			"  samples/s predicted, batch_size x %s (* the most, < this run, "
			"[measured])\n  %10s",
			w->knob, "batch_size");
		for (size_t j = 0; j < nu; j++)
			fprintf(out, " %15d", units[j]);
		fputc('\n', out);
	}
	for (size_t i = 0; i < ns; i++) {
		fprintf(out, markdown ? "| %d |" : "  %10d", sizes[i]);
		for (size_t j = 0; j < nu; j++) {
			const struct dlbn_whatif_cell *c = cell_at(w, sizes[i], units[j]);
			char cell[48] = "-", measured[24] = "";
			if (c && c->measured_ms > 0)
				snprintf(measured, sizeof(measured), " [%.0f]",
					 (double)c->batch_size * 1e3 / c->measured_ms);
			if (c && markdown)
				snprintf(cell, sizeof(cell), "%s%.0f%s%s", c == best ? "**" : "",
					 c->samples_per_s, c == best ? "**" : "", measured);
			else if (c)
				snprintf(cell, sizeof(cell), "%.0f%s%s%s", c->samples_per_s,
					 measured, c == best ? "*" : "", c->current ? "<" : "");
			if (markdown)
				fprintf(out, " %s%s%s |", c && c->current ? "_" : "", cell,
					c && c->current ? "_" : "");
			else
				fprintf(out, " %15s", cell);
		}
		fputc('\n', out);
	}
	if (best)
		fprintf(out,
			"%sbest: batch_size %d, %s %d: %.0f samples/s (%.2f ms per step, "
			"limited by %s%s",
			markdown ? "\n" : "  ", best->batch_size, w->knob, best->units,
			best->samples_per_s, best->step_ms, best->limited_by,
			best->shm_mib > 0 ? "" : ")");
	if (best && best->shm_mib > 0)
		fprintf(out, "; %.1f MiB of /dev/shm in flight)", best->shm_mib);
	if (best)
		fputc('\n', out);
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
	fprintf(out, "  %-20s %6s %10s %9s %10s  %-12s", "setting", "value", "step ms", "speedup",
		w->batch_size > 0 ? "samples/s" : "steps/s", "limited by");
	if (w->memory_known)
		fprintf(out, " %10s", "memory MiB");
	fputc('\n', out);
	for (size_t i = 0; i < w->nrows; i++) {
		const struct dlbn_whatif_row *r = &w->rows[i];
		double per_s = r->step_ms > 0 ? 1e3 / r->step_ms : 0;
		if (w->batch_size > 0)
			per_s *= row_batch(w, r);
		fprintf(out, "  %-20s %6s %10.2f %8.2fx %10.1f  %-12s", r->setting,
			value_text(r, buf, sizeof(buf)), r->step_ms, r->speedup, per_s,
			r->limited_by);
		if (w->memory_known && r->mem_mib >= 0)
			fprintf(out, " %10.0f", r->mem_mib);
		else if (w->memory_known)
			fprintf(out, " %10s", "-");
		if (r->fits == 0)
			fputs("  does not fit", out);
		if (r->current)
			fprintf(out, "   <- this run (measured %.2f ms)", r->measured_ms);
		fputc('\n', out);
	}
	fprintf(out, "  fewest %s for the best step: %d%s\n", w->knob, w->best_workers,
		w->best_unfit > w->best_workers ? " (the most the job's memory allows)" : "");
	grid_matrix(out, w, 0);
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
	grid_matrix(out, w, 1);
	fputc('\n', out);
	for (size_t i = 0; i < w->nnotes; i++)
		fprintf(out, "- %s\n", w->notes[i]);
}

/* "predicted_memory_mib", "predicted_shm_mib", "fits" (null: unknown). */
static void fit_json(FILE *out, double mem, double shm, int fits, int *first)
{
	dlbn_json_key_number_or_null(out, "predicted_memory_mib", mem, mem >= 0, first);
	dlbn_json_key_number_or_null(out, "predicted_shm_mib", shm, shm > 0, first);
	if (fits < 0)
		dlbn_json_key_null(out, "fits", first);
	else
		dlbn_json_key_bool(out, "fits", fits, first);
}

static void row_json(FILE *out, const struct dlbn_whatif *w, const struct dlbn_whatif_row *r,
		     int *items)
{
	double per_s = r->step_ms > 0 ? 1e3 / r->step_ms : 0;
	int first = dlbn_json_open(out, NULL, '{', items);
	dlbn_json_key_str(out, "setting", r->setting, &first);
	dlbn_json_key_int(out, "value", r->value, &first);
	dlbn_json_key_number(out, "predicted_step_ms", r->step_ms, &first);
	dlbn_json_key_number(out, "predicted_speedup", r->speedup, &first);
	dlbn_json_key_str(out, "limited_by", r->limited_by, &first);
	dlbn_json_key_number(out, "predicted_steps_per_s", per_s, &first);
	dlbn_json_key_number_or_null(out, "predicted_samples_per_s",
				     w->batch_size > 0 ? per_s * row_batch(w, r) : 0,
				     w->batch_size > 0, &first);
	dlbn_json_key_bool(out, "current", r->current, &first);
	dlbn_json_key_number_or_null(out, "measured_step_ms", r->measured_ms, r->current, &first);
	fit_json(out, r->mem_mib, r->shm_mib, r->fits, &first);
	fputc('}', out);
}

/* The model's inputs; a figure of zero or less is null where it means
 * "not known" (cores, the GPU's step, the batch's size). */
static void basis_figures_json(FILE *out, const struct dlbn_whatif *w, int *first)
{
	dlbn_json_key_number(out, "measured_step_ms", w->measured_ms, first);
	dlbn_json_key_number(out, "batch_ms", w->batch_ms, first);
	dlbn_json_key_number(out, "worker_cpu_ms", w->worker_cpu_ms, first);
	dlbn_json_key_number(out, "loop_ms", w->loop_ms, first);
	dlbn_json_key_number(out, "main_cpu_ms", w->main_cpu_ms, first);
	dlbn_json_key_number(out, "handoff_ms", w->handoff_ms, first);
	dlbn_json_key_number(out, "startup_ms", w->startup_ms, first);
	dlbn_json_key_number(out, "file_share", w->file_share, first);
	dlbn_json_key_number_or_null(out, "cores", w->cores, w->cores > 0, first);
	dlbn_json_key_number_or_null(out, "gpu_step_ms", w->gpu_step_ms, w->gpu_step_ms > 0, first);
	dlbn_json_key_number(out, "stage_ms", w->stage_ms, first);
	dlbn_json_key_number(out, "loop_fixed_ms", w->loop_fixed_ms, first);
	dlbn_json_key_number(out, "gpu_fixed_ms", w->gpu_fixed_ms, first);
	dlbn_json_key_number(out, "batch_fixed_ms", w->batch_fixed_ms, first);
	dlbn_json_key_number_or_null(out, "batch_kib", w->batch_kib, w->batch_kib > 0, first);
}

static void basis_json(FILE *out, const struct dlbn_whatif *w, int *outer)
{
	int first = dlbn_json_open(out, "what_if_basis", '{', outer);
	dlbn_json_key_bool(out, "valid", w->valid, &first);
	dlbn_json_key_str_or_null(out, "why_not", w->why_not, !w->valid, &first);
	basis_figures_json(out, w, &first);
	dlbn_json_key_str(out, "cores_from", w->cores_from, &first);
	dlbn_json_key_int(out, "num_workers", w->num_workers, &first);
	dlbn_json_key_int(out, "best_workers", w->best_workers, &first);
	dlbn_json_key_str(out, "curve_setting", w->knob, &first);
	dlbn_json_key_str(out, "loader_kind", w->kind, &first);
	dlbn_json_key_bool(out, "gpu_paced", w->gpu_paced, &first);
	dlbn_json_key_int_or_null(out, "batch_size", w->batch_size, w->batch_size > 0, &first);
	dlbn_json_key_bool(out, "split_measured", w->split_measured, &first);
	dlbn_json_key_bool(out, "queueing", w->queueing, &first);
	dlbn_json_key_number_or_null(out, "think_ms", w->think_ms, w->queueing, &first);
	dlbn_json_key_number_or_null(out, "copy_on_write_ms", w->copy_ms_run, w->memory != NULL,
				     &first);
	dlbn_json_key_number_or_null(out, "memory_budget_mib",
				     w->memory ? w->memory->budget_mib : -1,
				     w->memory && w->memory->budget_mib > 0, &first);
	dlbn_json_key_number_or_null(out, "shm_size_mib", w->memory ? w->memory->shm_size_mib : -1,
				     w->memory && w->memory->shm_size_mib > 0, &first);
	dlbn_json_key_int_or_null(out, "most_that_fit", w->fit_max, w->fit_max >= 0, &first);
	dlbn_json_key_int_or_null(out, "best_ignoring_memory", w->best_unfit,
				  w->best_unfit > w->best_workers, &first);
	dlbn_json_key_lines(out, "notes", DLBN_JSON_TABLE(w->notes), w->nnotes, &first);
	fputc('}', out);
}

static void cell_json(FILE *out, const struct dlbn_whatif *w, size_t i, int *items)
{
	const struct dlbn_whatif_cell *c = &w->grid[i];
	int first = dlbn_json_open(out, NULL, '{', items);
	dlbn_json_key_int(out, "batch_size", c->batch_size, &first);
	dlbn_json_key_int(out, w->knob, c->units, &first);
	dlbn_json_key_number(out, "predicted_step_ms", c->step_ms, &first);
	dlbn_json_key_number(out, "predicted_samples_per_s", c->samples_per_s, &first);
	dlbn_json_key_str(out, "limited_by", c->limited_by, &first);
	dlbn_json_key_number_or_null(out, "shm_mib", c->shm_mib, c->shm_mib > 0, &first);
	dlbn_json_key_bool(out, "current", c->current, &first);
	dlbn_json_key_bool(out, "best", (int)i == w->grid_best, &first);
	dlbn_json_key_number_or_null(out, "measured_step_ms", c->measured_ms, c->measured_ms > 0,
				     &first);
	fit_json(out, c->mem_mib, -1, c->fits, &first);
	fputc('}', out);
}

/* "what_if":[...],"what_if_basis":{...},"what_if_grid":[...] (each null
 * when not asked for; the lists empty when no prediction was made). */
void dlbn_whatif_json(FILE *out, const struct dlbn_whatif *w)
{
	int first = 1;
	if (!w) {
		dlbn_json_key_null(out, "what_if", &first);
		dlbn_json_key_null(out, "what_if_basis", &first);
		dlbn_json_key_null(out, "what_if_grid", &first);
		return;
	}
	int items = dlbn_json_open(out, "what_if", '[', &first);
	for (size_t i = 0; w->valid && i < w->nrows; i++)
		row_json(out, w, &w->rows[i], &items);
	fputc(']', out);
	basis_json(out, w, &first);
	items = dlbn_json_open(out, "what_if_grid", '[', &first);
	for (size_t i = 0; w->valid && i < w->ngrid; i++)
		cell_json(out, w, i, &items);
	fputc(']', out);
}
