/*
 * report_text.c - the terminal report (default output) and the --dump
 * record listing.  The report reads top-down: verdict and speedup first,
 * then the evidence, the cause, what to change, and the trace's health.
 */
#include <inttypes.h>
#include <string.h>

#include "analysis/damage.h"
#include "report/report.h"
#include "util/json.h"

static const char *verdict_line(int v)
{
	switch (v) {
	case DLBN_VERDICT_DETECTED:
		return "data loading holds the training back";
	case DLBN_VERDICT_POTENTIAL:
		return "data loading costs some training time";
	case DLBN_VERDICT_NOT_DETECTED:
		return "the input pipeline keeps up";
	default:
		return "the trace cannot support a verdict";
	}
}

/* What a damaged or cut-short trace lost (damage.h), right under the verdict. */
static void text_damage(FILE *out, const struct dlbn_report_input *in)
{
	static struct dlbn_damage d;
	dlbn_damage_assess(in->m, in->rs, in->a, &d);
	if (!d.damaged)
		return;
	fprintf(out, "\nDAMAGED TRACE (exit status 1): %s\n", d.summary);
	for (size_t i = 0; i < d.nitems; i++)
		fprintf(out, "  - %s\n", d.items[i].text);
	if (d.more)
		fprintf(out, "  (%u more)\n", d.more);
}

static void text_workers(FILE *out, const struct dlbn_analysis *a)
{
	if (!a->nworkers)
		return;
	fprintf(out, "  workers          %8s %8s %6s %10s %10s\n", "pid", "batches", "busy",
		"ms/batch", "file-read");
	for (size_t i = 0; i < a->nworkers; i++) {
		const struct dlbn_worker_stats *w = &a->workers[i];
		char busy[16] = "-";
		if (w->busy_fraction >= 0)
			snprintf(busy, sizeof(busy), "%.0f%%", w->busy_fraction * 100);
		fprintf(out, "                   %8d %8llu %6s %10.1f %9.2fs%s\n", w->pid,
			(unsigned long long)w->batches, busy, w->mean_batch_ms, w->file_read_s,
			w->exited ? "" : "  (no exit)");
	}
}

static void text_cpu(FILE *out, const struct dlbn_analysis *a)
{
	if (!a->sched_threads)
		return;
	fprintf(out, "  cpu              %.1f CPUs in use by %zu sampled thread(s)", a->cpus_used,
		a->sched_threads);
	if (a->census_threads)
		fprintf(out, " and %zu more of the training process (thread census)",
			a->census_threads);
	if (a->main_runq_fraction >= 0)
		fprintf(out, "; loop thread waits for a CPU %.1f%% of the window",
			a->main_runq_fraction * 100);
	if (a->workers_runq_share >= 0)
		fprintf(out, "; workers %.1f%% of their busy time", a->workers_runq_share * 100);
	fputc('\n', out);
}

static void text_nvtx(FILE *out, const struct dlbn_model *m, const struct dlbn_analysis *a)
{
	if (!m->nvtx_ranges)
		return;
	fprintf(out, "  nvtx             %llu range(s) in the training process: %llu data-loading",
		(unsigned long long)m->nvtx_ranges, (unsigned long long)m->nvtx_data_ranges);
	if (m->nvtx_step_ranges)
		fprintf(out, ", %llu step range(s) of %.2f ms on average",
			(unsigned long long)m->nvtx_step_ranges,
			(double)m->nvtx_step_ns / 1e6 / (double)m->nvtx_step_ranges);
	if (m->nvtx_data_ranges && a->view != DLBN_VIEW_NVTX)
		fputs(" (not the view: python > nvtx > ipc)", out);
	fputc('\n', out);
}

static void text_config(FILE *out, const struct dlbn_model *m, const struct dlbn_analysis *a)
{
	if (m->config.present) {
		fprintf(out, "  config           %s\n", m->config.text);
		return;
	}
	fprintf(out, "  config           (%s) %d worker(s) inferred, prefetch depth %d%s\n",
		m->loaders.boot_note ? "no loader marked" : "no bootstrap",
		a->num_workers < 0 ? 0 : a->num_workers, m->prefetch_depth,
		m->prefetch_writes ? " (index messages before the first batch)" : " (assumed)");
}

/* The loaders other than the verdict's (Python view, several loaders). */
static void text_loaders(FILE *out, const struct dlbn_model *m)
{
	const struct dlbn_loader_table *t = &m->loaders;
	if (m->view != DLBN_VIEW_PYTHON || t->n < 2 || t->train < 0)
		return;
	struct dlbn_loader_summary ls;
	char what[160];
	dlbn_loader_summary(m, (size_t)t->train, &ls);
	dlbn_loader_describe(&ls, what, sizeof(what));
	fprintf(out, "\nDataLoaders (%zu in the training process)\n", t->n);
	fprintf(out, "  #%-2d train       %s: the verdict's loader, chosen as %s\n", ls.id, what,
		t->chosen_by);
	for (size_t i = 0; i < t->n; i++) {
		if ((int)i == t->train)
			continue;
		dlbn_loader_summary(m, i, &ls);
		dlbn_loader_describe(&ls, what, sizeof(what));
		fprintf(out, "  #%-2d %-11s %s", ls.id, dlbn_loader_role_name(ls.role), what);
		if (ls.worker_procs)
			fprintf(out, " (%zu worker processes over the run)", ls.worker_procs);
		fprintf(out,
			"\n                   %zu steps in %d epoch(s), %zu after its warm-up: "
			"wait "
			"%.3f s, stall %.3f s\n",
			ls.steps, ls.epochs, ls.window_steps, ls.wait_s, ls.stall_s);
		fprintf(out,
			"                   inside the verdict's window: %zu steps, wait %.3f s, "
			"stall %.3f s (in the prediction)\n",
			ls.in_train_window.steps, (double)ls.in_train_window.wait_ns / 1e9,
			(double)ls.in_train_window.stall_ns / 1e9);
	}
}

/* The verdict and the predicted speedup, the measured one, the damage. */
static void text_verdict(FILE *out, const struct dlbn_report_input *in)
{
	const struct dlbn_analysis *a = in->a;
	fprintf(out, "VERDICT: %s - %s", dlbn_verdict_name(a->verdict), verdict_line(a->verdict));
	if (a->predicted_speedup > 0)
		fprintf(out, "; predicted speedup %.2fx", a->predicted_speedup);
	fputs("\n", out);
	if (a->predicted_speedup > 0)
		fprintf(out,
			"  (a run without the loader wait is predicted to take %.0f%% of the "
			"time)\n",
			100.0 / a->predicted_speedup);
	if (in->baseline)
		dlbn_baseline_text(out, in->baseline);
	dlbn_failure_text(out, a);
	text_damage(out, in);
}

/* The steps, the loader wait and the stall, the costs after arrival. */
static void text_steps(FILE *out, const struct dlbn_report_input *in)
{
	const struct dlbn_analysis *a = in->a;
	fprintf(out,
		"  steps            %zu total, %zu warm-up skipped, %zu in the window "
		"(t=%.3f..%.3f s, %.3f s), %d epoch(s)\n",
		a->steps_total, a->steps_warmup, a->steps_window, a->start_s, a->end_s, a->wall_s,
		a->epochs);
	int gpu = in->gpu && in->gpu->present;
	fprintf(out,
		"  loader wait      %.3f s exposed (%.1f%% of the window); stall %.3f s "
		"%s\n",
		a->exposed_s, a->exposed_fraction * 100, a->stall_s,
		gpu			   ? (a->outside.charged_s > 0
						      ? "(the GPU-idle part of the waits, and of loading after "
							"them)"
						      : "(the part of the waits the GPU sat idle)")
		: a->outside.charged_s > 0 ? "(no GPU recorded: exposed wait and loading after it)"
					   : "(no GPU recorded: stall = exposed wait)");
	fprintf(out,
		"  per step         mean %.2f ms, p50 %.2f ms, p95 %.2f ms, max %.2f ms; "
		"per step without the stall %.2f ms\n",
		a->mean_ms, a->p50_ms, a->p95_ms, a->max_ms, a->loop_ms);
	dlbn_outside_text(out, a);
}

/* "Evidence": the figures the verdict rests on, and the GPU section. */
static void text_evidence(FILE *out, const struct dlbn_report_input *in)
{
	const struct dlbn_analysis *a = in->a;
	const struct dlbn_model *m = in->m;
	fprintf(out, "\nEvidence (%s view%s%s)\n", dlbn_view_name(a->view),
		a->view == DLBN_VIEW_PYTHON ? ": exact fetch marks of the loop's loader"
		: a->view == DLBN_VIEW_NVTX ? ": data-loading ranges the program declared with NVTX"
		: a->view == DLBN_VIEW_IPC  ? ": batch hand-offs seen in system calls"
					    : "",
		a->path == DLBN_PATH_PIN ? ", pin-memory thread" : "");
	if (a->steps_total)
		text_steps(out, in);
	text_nvtx(out, m, a);
	text_cpu(out, a);
	text_config(out, m, a);
	text_workers(out, a);
	dlbn_memory_text(out, a);
	text_loaders(out, m);
	dlbn_callsites_text(out, in);
	if (in->gpu && in->gpu->present) {
		fputs("\n", out);
		dlbn_gpu_text(out, in->gpu);
	}
}

/* The cause, its reasons and what to change.  The GPU section (when shown)
 * lists its evidence lines; the reasons then leave out their "GPU: " copies. */
static void text_cause(FILE *out, const struct dlbn_report_input *in)
{
	const struct dlbn_analysis *a = in->a;
	int gpu_shown = in->gpu && in->gpu->present;
	fprintf(out, "\nCause: %s\n", dlbn_cause_name(a->cause));
	for (size_t i = 0; i < a->nreasons; i++)
		if (!gpu_shown || strncmp(a->reasons[i], "GPU: ", 5) != 0)
			fprintf(out, "  - %s\n", a->reasons[i]);
	if (a->nrecs) {
		fputs("\nRecommendations\n", out);
		for (size_t i = 0; i < a->nrecs; i++)
			fprintf(out, "  - %s\n", a->recs[i]);
	}
}

/* The trace's health: format, size, the reader's and analysis's warnings. */
static void text_trace(FILE *out, const struct dlbn_report_input *in)
{
	const struct dlbn_reader_stats *rs = in->rs;
	const struct dlbn_model *m = in->m;
	fprintf(out, "\nTrace: format %u.%u, %zu process(es), %llu records%s\n", rs->version_major,
		rs->version_minor, m->nprocs, (unsigned long long)m->records,
		rs->truncated ? ", TRUNCATED" : "");
	unsigned kept = rs->nwarnings < DLBN_READER_MAX_WARN ? rs->nwarnings : DLBN_READER_MAX_WARN;
	for (unsigned i = 0; i < kept; i++)
		fprintf(out, "  warning: %s\n", rs->warnings[i]);
	if (rs->nwarnings > kept)
		fprintf(out, "  (%u more reader warnings)\n", rs->nwarnings - kept);
	for (size_t i = 0; i < in->a->nwarnings; i++)
		fprintf(out, "  warning: %s\n", in->a->warnings[i]);
}

void dlbn_report_text(FILE *out, const struct dlbn_report_input *in)
{
	if (in->nranks > 1)
		fprintf(out, "dlbn-analyze: %zu ranks\n\n", in->nranks);
	else
		fprintf(out, "dlbn-analyze: %s\n\n", in->path);
	dlbn_ranks_text(out, in);
	if (!in->a) { /* the rank is known from its summary alone */
		dlbn_subject_text(out, in, 0);
		return;
	}
	text_verdict(out, in);
	text_evidence(out, in);
	text_cause(out, in);
	/* --what-if (report_whatif.c) */
	if (in->whatif)
		dlbn_whatif_text(out, in->whatif);
	dlbn_hotspots_text(out, in);
	dlbn_waits_text(out, in);
	text_trace(out, in);
}

void dlbn_dump_record(FILE *out, const struct dlbn_record *r, int64_t t0)
{
	const char *name = dlbn_record_name(r->type);
	int64_t rel = r->t_ns - t0;
	const char *sign = rel < 0 ? "-" : "";
	uint64_t mag = rel < 0 ? (uint64_t)(-rel) : (uint64_t)rel;
	fprintf(out, "%s%" PRIu64 ".%09" PRIu64 " proc=%u pid=%u tid=%u ", sign, mag / 1000000000u,
		mag % 1000000000u, r->stream->proc_id, r->stream->pid, r->stream->tid);
	if (name)
		fputs(name, out);
	else
		fprintf(out, "TYPE%d", r->type);
	int arr_done = 0;
	for (int i = 0; i < r->nfields; i++) {
		const char *fn = dlbn_field_name(r->type, i);
		if (fn)
			fprintf(out, " %s=", fn);
		else
			fprintf(out, " f%d=", i);
		switch (r->kind[i]) {
		case DLBN_V_INT:
			fprintf(out, "%" PRId64, r->f[i]);
			break;
		case DLBN_V_STR:
			dlbn_json_string(out, r->str[i], (size_t)r->f[i]);
			break;
		case DLBN_V_NIL:
			fputs("nil", out);
			break;
		case DLBN_V_ARR:
			fputc('[', out);
			for (int k = 0; !arr_done && k < r->narr; k++)
				fprintf(out, "%s%" PRId64, k ? "," : "", r->arr[k]);
			fputc(']', out);
			arr_done = 1;
			break;
		default:
			fputs("?", out);
			break;
		}
	}
	fputc('\n', out);
}
