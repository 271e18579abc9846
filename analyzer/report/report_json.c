/*
 * report_json.c - `--format json`: one JSON object with stable keys
 * (documented in man/dlbn-analyze.1).  Always valid JSON: strings are
 * escaped, non-finite numbers become null.
 */
#include <stdint.h>
#include <string.h>

#include "util/json.h"
#include "analysis/damage.h"
#include "report/report.h"

static void jstr(FILE *out, const char *s)
{
	dlbn_json_str(out, s);
}

static void jkey(FILE *out, const char *k, int *first)
{
	dlbn_json_key(out, k, first);
}

static void jlines(FILE *out, const char (*lines)[DLBN_LINE], size_t n)
{
	fputc('[', out);
	for (size_t i = 0; i < n; i++) {
		if (i)
			fputc(',', out);
		jstr(out, lines[i]);
	}
	fputc(']', out);
}

static void json_workers(FILE *out, const struct dlbn_analysis *a)
{
	fputc('[', out);
	for (size_t i = 0; i < a->nworkers; i++) {
		const struct dlbn_worker_stats *w = &a->workers[i];
		fprintf(out, "%s{\"pid\":%d,\"batches\":%llu,\"busy_fraction\":", i ? "," : "",
			w->pid, (unsigned long long)w->batches);
		if (w->busy_fraction >= 0)
			dlbn_json_number(out, w->busy_fraction);
		else
			fputs("null", out);
		fputs(",\"mean_batch_ms\":", out);
		dlbn_json_number(out, w->mean_batch_ms);
		fputs(",\"file_read_s\":", out);
		dlbn_json_number(out, w->file_read_s);
		/* Busy time outside file reads: decoding, transforms, collation. */
		fputs(",\"busy_s\":", out);
		dlbn_json_number(out, w->busy_s);
		fputs(",\"cpu_s\":", out);
		dlbn_json_number(out, w->busy_s > w->file_read_s ? w->busy_s - w->file_read_s : 0);
		fprintf(out, ",\"exited\":%s,\"ended_s\":", w->exited ? "true" : "false");
		dlbn_json_number(out, w->ended_s);
		fputc('}', out);
	}
	fputc(']', out);
}

static void json_config(FILE *out, const struct dlbn_model *m, const struct dlbn_analysis *a)
{
	const struct dlbn_config *c = &m->config;
	int first = 1;
	fputc('{', out);
	jkey(out, "source", &first);
	jstr(out, c->present ? "bootstrap" : "inferred");
	for (int i = 0; c->present && i < c->n; i++) {
		jkey(out, c->key[i], &first);
		jstr(out, c->val[i]);
	}
	jkey(out, "num_workers_used", &first);
	fprintf(out, "%d", a->num_workers);
	jkey(out, "num_workers_inferred", &first);
	fprintf(out, "%d", m->num_workers_inferred);
	jkey(out, "prefetch_depth", &first);
	fprintf(out, "%d", m->prefetch_depth);
	jkey(out, "prefetch_depth_source", &first);
	jstr(out, m->prefetch_from_config ? "config"
		  : m->prefetch_writes	  ? "index_writes"
					  : "default");
	fputc('}', out);
}

static void json_time(FILE *out, const struct dlbn_model *m, int64_t t)
{
	if (t == DLBN_LOSS_T_UNKNOWN)
		fputs("null", out);
	else
		fprintf(out, "%.6f", (double)(t - m->t0) / 1e9);
}

/* The trace object's damage keys: what a damaged or cut-short trace lost. */
static void json_damage(FILE *out, const struct dlbn_report_input *in)
{
	static struct dlbn_damage d;
	const struct dlbn_reader_stats *rs = in->rs;
	dlbn_damage_assess(in->m, rs, in->a, &d);
	fprintf(out,
		",\"damaged\":%s,\"cut_short\":%s,\"extents_repaired\":%llu,"
		"\"extents_missing\":%llu,\"extents_bad_header\":%llu,\"damage_blocks_verdict\":%s,"
		"\"damage_summary\":",
		d.damaged ? "true" : "false", d.cut_short ? "true" : "false",
		(unsigned long long)rs->extents_repaired, (unsigned long long)rs->extents_missing,
		(unsigned long long)rs->extents_bad_header, d.blocks_verdict ? "true" : "false");
	if (d.damaged)
		jstr(out, d.summary);
	else
		fputs("null", out);
	fputs(",\"losses\":[", out);
	for (size_t i = 0; i < d.nitems; i++) {
		const struct dlbn_damage_item *x = &d.items[i];
		fprintf(out, "%s{\"kind\":\"%s\",\"proc_id\":", i ? "," : "",
			dlbn_damage_kind_name(x->kind));
		if (x->proc_id >= 0)
			fprintf(out, "%lld,\"pid\":%d", (long long)x->proc_id, x->pid);
		else
			fputs("null,\"pid\":null", out);
		fprintf(out, ",\"extents\":%llu,\"bytes\":%llu,\"from_s\":",
			(unsigned long long)x->extents, (unsigned long long)x->bytes);
		json_time(out, in->m, x->t_from);
		fputs(",\"to_s\":", out);
		json_time(out, in->m,
			  x->kind == DLBN_DAMAGE_PASSIVE ? DLBN_LOSS_T_UNKNOWN : x->t_to);
		fprintf(out, ",\"window\":\"%s\",\"blocks_verdict\":%s,\"text\":",
			x->touches == DLBN_TOUCH_YES   ? "in"
			: x->touches == DLBN_TOUCH_MAY ? "may"
						       : "outside",
			x->blocks ? "true" : "false");
		jstr(out, x->text);
		fputc('}', out);
	}
	fputc(']', out);
}

static void json_trace(FILE *out, const struct dlbn_report_input *in)
{
	const struct dlbn_reader_stats *rs = in->rs;
	fputs("{\"path\":", out);
	jstr(out, in->path);
	fprintf(out,
		",\"version\":\"%u.%u\",\"processes\":%zu,\"records\":%llu,"
		"\"truncated\":%s,\"extents\":%llu,\"extents_uninitialised\":%llu,"
		"\"extents_corrupt\":%llu,\"warnings\":[",
		rs->version_major, rs->version_minor, in->m->nprocs,
		(unsigned long long)in->m->records, rs->truncated ? "true" : "false",
		(unsigned long long)rs->extents, (unsigned long long)rs->extents_uninit,
		(unsigned long long)rs->extents_corrupt);
	unsigned kept = rs->nwarnings < DLBN_READER_MAX_WARN ? rs->nwarnings : DLBN_READER_MAX_WARN;
	for (unsigned i = 0; i < kept; i++) {
		if (i)
			fputc(',', out);
		jstr(out, rs->warnings[i]);
	}
	for (size_t i = 0; i < in->a->nwarnings; i++) {
		if (i || kept)
			fputc(',', out);
		jstr(out, in->a->warnings[i]);
	}
	fputc(']', out);
	json_damage(out, in);
	fputc('}', out);
}

/* "cpu": contention over the window from schedstat samples (null: none). */
static void json_cpu(FILE *out, const struct dlbn_analysis *a)
{
	if (!a->sched_threads) {
		fputs("null", out);
		return;
	}
	fprintf(out, "{\"threads_sampled\":%zu,\"census_threads\":%zu,\"main_runq_fraction\":",
		a->sched_threads, a->census_threads);
	if (a->main_runq_fraction >= 0)
		dlbn_json_number(out, a->main_runq_fraction);
	else
		fputs("null", out);
	fputs(",\"workers_runq_share\":", out);
	if (a->workers_runq_share >= 0)
		dlbn_json_number(out, a->workers_runq_share);
	else
		fputs("null", out);
	fputs(",\"cpus_used\":", out);
	dlbn_json_number(out, a->cpus_used);
	fprintf(out, ",\"contended\":%s}", a->cpu_contended ? "true" : "false");
}

/* "nvtx": the ranges the training process declared (null: none). */
static void json_nvtx(FILE *out, const struct dlbn_model *m)
{
	if (!m->nvtx_ranges) {
		fputs("null", out);
		return;
	}
	fprintf(out, "{\"ranges\":%llu,\"data_ranges\":%llu,\"step_ranges\":%llu,\"mean_step_ms\":",
		(unsigned long long)m->nvtx_ranges, (unsigned long long)m->nvtx_data_ranges,
		(unsigned long long)m->nvtx_step_ranges);
	if (m->nvtx_step_ranges)
		dlbn_json_number(out, (double)m->nvtx_step_ns / 1e6 / (double)m->nvtx_step_ranges);
	else
		fputs("null", out);
	fputc('}', out);
}

static void json_sums(FILE *out, const struct dlbn_loader_sums *s)
{
	fprintf(out, "{\"steps\":%zu,\"wait_s\":", s->steps);
	dlbn_json_number(out, (double)s->wait_ns / 1e9);
	fputs(",\"stall_s\":", out);
	dlbn_json_number(out, (double)s->stall_ns / 1e9);
	fputc('}', out);
}

/* "loaders": every DataLoader of the training process (Python view); the
 * top-level keys are the training loader's. */
static void json_loaders(FILE *out, const struct dlbn_model *m, const struct dlbn_analysis *a)
{
	const struct dlbn_loader_table *t = &m->loaders;
	fputc('[', out);
	for (size_t i = 0; a->view == DLBN_VIEW_PYTHON && i < t->n; i++) {
		struct dlbn_loader_summary ls;
		dlbn_loader_summary(m, i, &ls);
		fprintf(out, "%s{\"id\":%d,\"role\":", i ? "," : "", ls.id);
		jstr(out, dlbn_loader_role_name(ls.role));
		fprintf(out, ",\"training\":%s,\"steps\":%zu,\"window_steps\":%zu,\"epochs\":%d",
			ls.training ? "true" : "false", ls.steps, ls.window_steps, ls.epochs);
		fputs(",\"workers\":", out);
		if (ls.num_workers >= 0)
			fprintf(out, "%d", ls.num_workers);
		else
			fputs("null", out);
		fprintf(out, ",\"worker_processes\":%zu,\"wait_s\":", ls.worker_procs);
		dlbn_json_number(out, ls.wait_s);
		fputs(",\"stall_s\":", out);
		dlbn_json_number(out, ls.stall_s);
		fputs(",\"in_window\":", out);
		if (ls.training)
			fputs("null", out);
		else
			json_sums(out, &ls.in_train_window);
		fputs(",\"sampler\":", out);
		jstr(out, ls.sampler);
		fputs(",\"loader_class\":", out);
		jstr(out, ls.loader_class);
		fputs(",\"kind\":", out);
		jstr(out, ls.kind);
		fputs(",\"threads\":", out);
		if (ls.threads >= 0)
			fprintf(out, "%d", ls.threads);
		else
			fputs("null", out);
		fprintf(out, ",\"feeds_another\":%s", ls.feeds_another ? "true" : "false");
		fputs(",\"batch_size\":", out);
		if (ls.batch_size >= 0)
			fprintf(out, "%d", ls.batch_size);
		else
			fputs("null", out);
		fputs(",\"chosen_by\":", out);
		if (ls.training)
			jstr(out, t->chosen_by);
		else
			fputs("null", out);
		fputc('}', out);
	}
	fputc(']', out);
}

/* "library_operators": a loader library's operators by busy time in the
 * window (lib_ops.h), e.g. DALI's. */
static void json_lib_ops(FILE *out, const struct dlbn_lib_ops *o)
{
	fputc('[', out);
	for (size_t i = 0; i < o->n; i++) {
		fprintf(out, "%s{\"name\":", i ? "," : "");
		jstr(out, o->v[i].name);
		fputs(",\"busy_s\":", out);
		dlbn_json_number(out, (double)o->v[i].busy_ns / 1e9);
		fputs(",\"share\":", out);
		dlbn_json_number(out,
				 o->busy_ns > 0 ? (double)o->v[i].busy_ns / (double)o->busy_ns : 0);
		fprintf(out, ",\"runs\":%llu}", (unsigned long long)o->v[i].runs);
	}
	fputc(']', out);
}

/* "stacks": the longest waits of the training process with their frames. */
static void json_stacks(FILE *out, const struct dlbn_model *m)
{
	const struct dlbn_wait_stacks *ws = &m->stacks;
	fputc('[', out);
	for (size_t k = 0; k < ws->nkept; k++) {
		const struct dlbn_wait_stack *s = &ws->kept[k];
		const struct dlbn_window *w = m->steps ? &m->steps->w : NULL;
		int in_window = w && w->window && s->wait_begin >= w->ws && s->wait_begin < w->we;
		fprintf(out, "%s{\"wait_ms\":", k ? "," : "");
		dlbn_json_number(out, (double)s->wait_ns / 1e6);
		fputs(",\"at_s\":", out);
		dlbn_json_number(out, (double)(s->wait_begin - m->t0) / 1e9);
		fprintf(out, ",\"in_window\":%s,\"call\":", in_window ? "true" : "false");
		jstr(out, dlbn_wait_call_name(s->wait_type));
		fprintf(out, ",\"tid\":%d,\"frames\":[", s->tid);
		for (int i = 0; i < s->nframes; i++) {
			if (i)
				fputc(',', out);
			jstr(out, s->frame[i]);
		}
		fputs("]}", out);
	}
	fputc(']', out);
}

void dlbn_report_json(FILE *out, const struct dlbn_report_input *in)
{
	const struct dlbn_analysis *a = in->a;
	/* Several ranks: the top-level verdict is the job's; the rest is the
	 * worst rank's analysis ("ranks" and "job" say which). */
	if (!a) { /* the rank is known from its summary alone: "subject" */
		fputs("{\"verdict\":", out);
		jstr(out, dlbn_verdict_name(in->job ? in->job->verdict : in->subject->verdict));
		dlbn_ranks_json(out, in);
		fputs("}\n", out);
		return;
	}
	int verdict = in->job && in->nranks > 1 ? in->job->verdict : a->verdict;
	fputs("{\"verdict\":", out);
	jstr(out, dlbn_verdict_name(verdict));
	fputs(",\"predicted_speedup\":", out);
	if (a->predicted_speedup > 0)
		dlbn_json_number(out, a->predicted_speedup);
	else
		fputs("null", out);
	fputs(",\"predicted_speedup_low\":", out);
	if (a->predicted_speedup_low > 0)
		dlbn_json_number(out, a->predicted_speedup_low);
	else
		fputs("null", out);
	fputs(",\"view\":", out);
	jstr(out, dlbn_view_name(a->view));
	fputs(",\"path\":", out);
	jstr(out, dlbn_path_name(a->path));
	fprintf(out, ",\"steps\":{\"total\":%zu,\"window\":%zu,\"warmup\":%zu,\"epochs\":%d}",
		a->steps_total, a->steps_window, a->steps_warmup, a->epochs);
	fputs(",\"window\":{\"start_s\":", out);
	dlbn_json_number(out, a->start_s);
	fputs(",\"end_s\":", out);
	dlbn_json_number(out, a->end_s);
	fputs(",\"wall_s\":", out);
	dlbn_json_number(out, a->wall_s);
	fputs("},\"loader_wait\":{", out);
	const char *names[] = {"exposed_s",
			       "exposed_fraction",
			       "stall_s",
			       "stall_fraction",
			       "mean_ms",
			       "p50_ms",
			       "p95_ms",
			       "max_ms",
			       "receive_ms_per_batch",
			       "receive_kib_per_batch",
			       "fds_per_batch",
			       "epoch_startup_stall_s",
			       "contention_stall_s",
			       "other_loaders_stall_s"};
	double vals[] = {a->exposed_s,
			 a->exposed_fraction,
			 a->stall_s,
			 a->stall_fraction,
			 a->mean_ms,
			 a->p50_ms,
			 a->p95_ms,
			 a->max_ms,
			 a->recv_ms,
			 a->recv_kib,
			 a->recv_fds,
			 a->startup_stall_s,
			 a->contention_stall_s,
			 a->other_loaders_stall_s};
	for (size_t i = 0; i < sizeof(vals) / sizeof(vals[0]); i++) {
		fprintf(out, "%s\"%s\":", i ? "," : "", names[i]);
		dlbn_json_number(out, vals[i]);
	}
	fputs("},\"outside_waits\":", out);
	dlbn_outside_json(out, a);
	fputs(",\"gpu\":", out);
	if (in->gpu && in->gpu->present)
		dlbn_gpu_json(out, in->gpu);
	else
		fputs("null", out);
	fputs(",\"workers\":", out);
	json_workers(out, a);
	fputs(",\"workers_mean_busy\":", out);
	if (a->mean_busy >= 0)
		dlbn_json_number(out, a->mean_busy);
	else
		fputs("null", out);
	fputs(",\"config\":", out);
	json_config(out, in->m, a);
	fputs(",\"loaders\":", out);
	json_loaders(out, in->m, a);
	fputs(",\"library_operators\":", out);
	json_lib_ops(out, &in->m->lib_ops);
	fputs(",\"cause\":", out);
	jstr(out, dlbn_cause_name(a->cause));
	fputs(",\"recommendations\":", out);
	jlines(out, a->recs, a->nrecs);
	fputs(",\"advice\":", out);
	if (a->advice.present) {
		fputs("{\"setting\":", out);
		jstr(out, a->advice.knob);
		fprintf(out, ",\"from\":%d,\"to\":%d,\"recommendation\":%zu}", a->advice.from,
			a->advice.to, a->advice.rec);
	} else {
		fputs("null", out);
	}
	fputs(",\"reasons\":", out);
	jlines(out, a->reasons, a->nreasons);
	fputs(",\"warnings\":", out);
	jlines(out, a->warnings, a->nwarnings);
	fputs(",\"cpu\":", out);
	json_cpu(out, a);
	fputs(",\"nvtx\":", out);
	json_nvtx(out, in->m);
	fputs(",\"stacks\":", out);
	json_stacks(out, in->m);
	dlbn_hotspots_json(out, in);
	fputs(",\"trace\":", out);
	json_trace(out, in);
	fputs(",\"baseline\":", out);
	if (in->baseline)
		dlbn_baseline_json(out, in->baseline);
	else
		fputs("null", out);
	/* --what-if (report_whatif.c): "what_if", "what_if_basis" */
	fputc(',', out);
	dlbn_whatif_json(out, in->whatif);
	dlbn_ranks_json(out, in);
	fputs("}\n", out);
}
