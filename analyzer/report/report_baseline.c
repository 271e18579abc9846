/*
 * report_baseline.c - the MEASURED lines of the text report and the
 * "baseline" JSON value, for `--baseline REPLAY` (baseline.c measures).
 */
#include <stdio.h>
#include <string.h>

#include "analysis/baseline.h"
#include "util/json.h"

static void json_number(FILE *out, double v, int valid)
{
	if (valid)
		dlbn_json_number(out, v);
	else
		fputs("null", out);
}

void dlbn_baseline_json(FILE *out, const struct dlbn_baseline *b)
{
	int measured = b->measured_speedup > 0;
	fputs("{\"path\":", out);
	dlbn_json_string(out, b->path ? b->path : "", b->path ? strlen(b->path) : 0);
	fputs(",\"replay_batches\":", out);
	json_number(out, b->replay_batches, b->replay_batches >= 0);
	fputs(",\"measured_speedup\":", out);
	json_number(out, b->measured_speedup, measured);
	fputs(",\"predicted_speedup\":", out);
	json_number(out, b->predicted_speedup, b->predicted_speedup > 0);
	fputs(",\"error_pct\":", out);
	json_number(out, b->error_pct, b->has_error);
	fprintf(out, ",\"steps\":{\"real\":%zu,\"replay\":%zu}", b->real_steps, b->replay_steps);
	fputs(",\"window\":", out);
	if (measured) {
		fprintf(out, "{\"first_step\":%zu,\"last_step\":%zu,\"real_s\":", b->first_step,
			b->last_step);
		json_number(out, b->real_wall_s, 1);
		fputs(",\"replay_s\":", out);
		json_number(out, b->replay_wall_s, 1);
		fputc('}', out);
	} else {
		fputs("null", out);
	}
	fputs(",\"replay_own_predicted_speedup\":", out);
	json_number(out, b->replay_own_speedup, b->replay_own_speedup > 0);
	fprintf(out, ",\"equivalent\":%s,\"notes\":[", b->equivalent ? "true" : "false");
	for (size_t i = 0; i < b->nnotes; i++) {
		if (i)
			fputc(',', out);
		dlbn_json_string(out, b->notes[i], strlen(b->notes[i]));
	}
	fputs("]}", out);
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
