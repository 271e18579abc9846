/*
 * report_baseline.c - the MEASURED lines of the text report and the
 * "baseline" JSON value, for `--baseline REPLAY` (baseline.c measures).
 */
#include <stdio.h>

#include "analysis/baseline.h"
#include "util/json.h"

void dlbn_baseline_json(FILE *out, const struct dlbn_baseline *b)
{
	int measured = b->measured_speedup > 0;
	int first = 1;
	fputc('{', out);
	dlbn_json_key_str(out, "path", b->path ? b->path : "", &first);
	/* a count, but written as the other figures are (%.6g) */
	dlbn_json_key_number_or_null(out, "replay_batches", b->replay_batches,
				     b->replay_batches >= 0, &first);
	dlbn_json_key_number_or_null(out, "measured_speedup", b->measured_speedup, measured,
				     &first);
	dlbn_json_key_number_or_null(out, "predicted_speedup", b->predicted_speedup,
				     b->predicted_speedup > 0, &first);
	dlbn_json_key_number_or_null(out, "error_pct", b->error_pct, b->has_error, &first);
	int f = dlbn_json_open(out, "steps", '{', &first);
	dlbn_json_key_uint(out, "real", b->real_steps, &f);
	dlbn_json_key_uint(out, "replay", b->replay_steps, &f);
	fputc('}', out);
	if (measured) {
		f = dlbn_json_open(out, "window", '{', &first);
		dlbn_json_key_uint(out, "first_step", b->first_step, &f);
		dlbn_json_key_uint(out, "last_step", b->last_step, &f);
		dlbn_json_key_number(out, "real_s", b->real_wall_s, &f);
		dlbn_json_key_number(out, "replay_s", b->replay_wall_s, &f);
		fputc('}', out);
	} else {
		dlbn_json_key_null(out, "window", &first);
	}
	dlbn_json_key_number_or_null(out, "replay_own_predicted_speedup", b->replay_own_speedup,
				     b->replay_own_speedup > 0, &first);
	dlbn_json_key_bool(out, "equivalent", b->equivalent, &first);
	dlbn_json_key_lines(out, "notes", DLBN_JSON_TABLE(b->notes), b->nnotes, &first);
	fputc('}', out);
}

void dlbn_baseline_text(FILE *out, const struct dlbn_baseline *b)
{
	if (b->measured_speedup > 0) {
		fprintf(out, "MEASURED: speedup %.2f by Replay (%s", b->measured_speedup, b->path);
		if (b->replay_batches > 0)
			fprintf(out, ", %d cached batches", b->replay_batches);
		fprintf(out, "): steps %zu..%zu took %.3f s real, %.3f s replayed\n", b->first_step,
			b->last_step, b->real_wall_s, b->replay_wall_s);
		if (b->has_error)
			fprintf(out, "          predicted %.2f, %+.1f%% off the measurement\n",
				b->predicted_speedup, b->error_pct);
	} else {
		fprintf(out, "MEASURED: no speedup measured from %s\n", b->path);
	}
	if (b->equivalent)
		fprintf(out,
			"          runs equivalent: %zu steps each, same loader configuration\n",
			b->real_steps);
	else
		fputs("          runs NOT equivalent: the comparison may not hold\n", out);
	for (size_t i = 0; i < b->nnotes; i++)
		fprintf(out, "          - %s\n", b->notes[i]);
}
