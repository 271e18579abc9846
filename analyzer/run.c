/*
 * run.c - one trace read and analysed (run.h): model, verdict, what-if,
 * hot spots, --baseline; its damage note and its --timings table.
 */
#include <stdio.h>
#include <string.h>

#include "run.h"

/* Decode and merge alone, for --timings: what reading costs without the model. */
static void time_reading(struct dlbn_run *x)
{
	struct dlbn_stopwatch w;
	dlbn_stopwatch_start(&w);
	dlbn_reader_rewind(x->r);
	uint64_t n = 0;
	while (dlbn_reader_next(x->r))
		n++;
	dlbn_timings_add(&x->times, DLBN_PHASE_READ, &w);
	x->times.records = n;
}

int dlbn_run_analyze(struct dlbn_run *x, const struct dlbn_run_opts *o, char *err, size_t errlen)
{
	struct dlbn_timings *times = o->timings ? &x->times : NULL;
	struct dlbn_stopwatch w;
	dlbn_stopwatch_start(&w);
	x->r = dlbn_reader_open_flags(x->path, o->reader_flags, err, errlen);
	if (!x->r)
		return -1;
	dlbn_timings_add(times, DLBN_PHASE_OPEN, &w);
	if (times) {
		dlbn_timings_calibrate(times);
		time_reading(x);
	}
	/* Model (two passes; the GPU split of the waits and its figures over
	 * the chosen window come with the second), then the verdict. */
	struct dlbn_model_opts mo = o->mo;
	mo.timings = times;
	snprintf(err, errlen, "%s: out of memory", x->path);
	if (dlbn_model_build(&x->m, x->r, &mo) != 0) {
		dlbn_model_free(&x->m);
		return -1;
	}
	if (dlbn_analyze_gpu(&x->m, dlbn_reader_stats(x->r), &o->vo, &x->m.gpu, &x->a) != 0) {
		dlbn_analysis_free(&x->a);
		dlbn_model_free(&x->m);
		return -1;
	}
	x->built = 1;
	dlbn_stopwatch_start(&w);
	/* Always: the recommendation's worker count is the what-if's (printed
	 * only with --what-if / --html). */
	dlbn_whatif_compute(&x->m, &x->a, o->sweep, &x->whatif);
	dlbn_whatif_settle_advice(&x->whatif, &x->a);
	dlbn_timings_add(times, DLBN_PHASE_VERDICT, &w);
	dlbn_stopwatch_start(&w);
	if (dlbn_hotspots_build(&x->hot, x->r, &x->m) != 0)
		return -1;
	if (x->m.profile_records) /* else no pass was made */
		dlbn_timings_add(times, DLBN_PHASE_HOTSPOTS, &w);
	/* --baseline (analyzer/baseline.h): the Replay trace through the same
	 * path, compared once x->a is final. */
	if (o->baseline) {
		char why[400];
		int brc = dlbn_baseline_load(&x->baseline, o->baseline, &o->mo, &o->vo, x->r, &x->m,
					     &x->a, why, sizeof(why));
		if (brc != 0) {
			snprintf(err, errlen, "--baseline %s", brc == -1 ? why : "out of memory");
			return -1;
		}
		x->has_baseline = 1;
	}
	err[0] = 0;
	return 0;
}

void dlbn_run_free(struct dlbn_run *x)
{
	if (x->built) {
		dlbn_hotspots_free(&x->hot);
		dlbn_analysis_free(&x->a);
		dlbn_model_free(&x->m);
	}
	if (x->r)
		dlbn_reader_close(x->r);
	const char *path = x->path;
	memset(x, 0, sizeof(*x));
	x->path = path;
}

int dlbn_run_damage_note(const char *path, const struct dlbn_reader_stats *rs, char *buf,
			 size_t len)
{
	if (!dlbn_reader_damaged(rs))
		return 0;
	char what[256];
	int n = snprintf(what, sizeof(what), "%s%llu corrupt extent(s)",
			 rs->truncated ? "truncated, " : "",
			 (unsigned long long)(rs->extents_corrupt + rs->extents_bad_header));
	if (rs->extents_missing && n < (int)sizeof(what))
		n += snprintf(what + n, sizeof(what) - (size_t)n, ", %llu missing",
			      (unsigned long long)rs->extents_missing);
	if (rs->seq_gaps && n < (int)sizeof(what))
		n += snprintf(what + n, sizeof(what) - (size_t)n, ", %llu gap(s)",
			      (unsigned long long)rs->seq_gaps);
	if (rs->extents_repaired && n < (int)sizeof(what))
		n += snprintf(what + n, sizeof(what) - (size_t)n, ", %llu flipped bit(s) repaired",
			      (unsigned long long)rs->extents_repaired);
	if (dlbn_reader_cut_short(rs) && n < (int)sizeof(what))
		snprintf(what + n, sizeof(what) - (size_t)n,
			 ", recording stopped early in %u process(es)",
			 rs->passive_count ? rs->passive_count : 1);
	snprintf(buf, len,
		 "%s: damaged trace (%s); the report covers the intact part and says what was lost",
		 path, what);
	return 1;
}

static void print_phase(const struct dlbn_timings *t, enum dlbn_phase p, const char *what,
			int per_record)
{
	double cpu = (double)t->cpu_ns[p] / 1e9, wall = (double)t->wall_ns[p] / 1e9;
	if (!t->ran[p]) {
		fprintf(stderr, "  %-34s %s\n", what, "not run");
		return;
	}
	if (p == DLBN_PHASE_GPU) {
		fprintf(stderr, "  %-34s %8s %8.3f\n", what, "-", wall);
		return;
	}
	fprintf(stderr, "  %-34s %8.3f %8.3f", what, cpu, wall);
	if (per_record && t->cpu_ns[p] > 0)
		fprintf(stderr, " %9.1f", (double)t->records / 1e6 / cpu);
	fputc('\n', stderr);
}

void dlbn_run_print_timings(const char *path, const struct dlbn_timings *t)
{
	int64_t cpu = 0;
	for (int p = 0; p < DLBN_PHASE_COUNT; p++)
		if (p != DLBN_PHASE_READ && p != DLBN_PHASE_GPU)
			cpu += t->cpu_ns[p];
	fprintf(stderr, "dlbn-analyze: timings of %s (%llu records)\n", path,
		(unsigned long long)t->records);
	fprintf(stderr, "  %-34s %8s %8s %9s\n", "phase", "cpu s", "wall s", "Mrec/cpu-s");
	print_phase(t, DLBN_PHASE_OPEN, "open: header, extent checks", 0);
	print_phase(t, DLBN_PHASE_READ, "decode + merge alone (extra pass)", 1);
	print_phase(t, DLBN_PHASE_PASS1, "model pass 1: roles, loaders", 1);
	print_phase(t, DLBN_PHASE_PASS2, "model pass 2: steps, workers, GPU", 1);
	print_phase(t, DLBN_PHASE_GPU, "  of which the GPU pass (sampled)", 0);
	print_phase(t, DLBN_PHASE_VERDICT, "verdict, what-if", 0);
	print_phase(t, DLBN_PHASE_HOTSPOTS, "hot spots", 1);
	print_phase(t, DLBN_PHASE_REPORT, "reports, exports", 0);
	fprintf(stderr, "  %-34s %8.3f %8s %9.1f\n", "total, without the extra pass",
		(double)cpu / 1e9, "",
		cpu > 0 ? (double)t->records / 1e6 / ((double)cpu / 1e9) : 0.0);
}
