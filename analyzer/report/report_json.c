/*
 * report_json.c - `--format json`: one JSON object with stable keys
 * (documented in man/dlbn-analyze.1).  Always valid JSON: strings are
 * escaped, non-finite numbers become null.
 */
#include <stdint.h>
#include <string.h>

#include "analysis/damage.h"
#include "report/report.h"
#include "util/json.h"

static void json_worker(FILE *out, const struct dlbn_worker_stats *w, int *items)
{
	int first = dlbn_json_open(out, NULL, '{', items);
	dlbn_json_key_int(out, "pid", w->pid, &first);
	dlbn_json_key_uint(out, "batches", w->batches, &first);
	dlbn_json_key_number_or_null(out, "busy_fraction", w->busy_fraction, w->busy_fraction >= 0,
				     &first);
	dlbn_json_key_number(out, "mean_batch_ms", w->mean_batch_ms, &first);
	dlbn_json_key_number(out, "file_read_s", w->file_read_s, &first);
	/* Busy time outside file reads: decoding, transforms, collation. */
	dlbn_json_key_number(out, "busy_s", w->busy_s, &first);
	dlbn_json_key_number(out, "cpu_s",
			     w->busy_s > w->file_read_s ? w->busy_s - w->file_read_s : 0, &first);
	dlbn_json_key_bool(out, "exited", w->exited, &first);
	dlbn_json_key_number(out, "ended_s", w->ended_s, &first);
	fputc('}', out);
}

static void json_workers(FILE *out, const struct dlbn_analysis *a, int *first)
{
	int items = dlbn_json_open(out, "workers", '[', first);
	for (size_t i = 0; i < a->nworkers; i++)
		json_worker(out, &a->workers[i], &items);
	fputc(']', out);
	dlbn_json_key_number_or_null(out, "workers_mean_busy", a->mean_busy, a->mean_busy >= 0,
				     first);
}

static void json_config(FILE *out, const struct dlbn_model *m, const struct dlbn_analysis *a,
			int *outer)
{
	const struct dlbn_config *c = &m->config;
	int first = dlbn_json_open(out, "config", '{', outer);
	dlbn_json_key_str(out, "source", c->present ? "bootstrap" : "inferred", &first);
	for (int i = 0; c->present && i < c->n; i++)
		dlbn_json_key_str(out, c->key[i], c->val[i], &first);
	dlbn_json_key_int(out, "num_workers_used", a->num_workers, &first);
	dlbn_json_key_int(out, "num_workers_inferred", m->num_workers_inferred, &first);
	dlbn_json_key_int(out, "prefetch_depth", m->prefetch_depth, &first);
	dlbn_json_key_str(out, "prefetch_depth_source",
			  m->prefetch_from_config ? "config"
			  : m->prefetch_writes	  ? "index_writes"
						  : "default",
			  &first);
	fputc('}', out);
}

/* "k": seconds since the trace's start, %.6f; null when unknown. */
static void json_time(FILE *out, const char *k, const struct dlbn_model *m, int64_t t, int *first)
{
	dlbn_json_key(out, k, first);
	if (t == DLBN_LOSS_T_UNKNOWN)
		fputs("null", out);
	else
		fprintf(out, "%.6f", (double)(t - m->t0) / 1e9);
}

static void json_loss(FILE *out, const struct dlbn_model *m, const struct dlbn_damage_item *x,
		      int *items)
{
	int first = dlbn_json_open(out, NULL, '{', items);
	dlbn_json_key_str(out, "kind", dlbn_damage_kind_name(x->kind), &first);
	dlbn_json_key_int_or_null(out, "proc_id", x->proc_id, x->proc_id >= 0, &first);
	dlbn_json_key_int_or_null(out, "pid", x->pid, x->proc_id >= 0, &first);
	dlbn_json_key_uint(out, "extents", x->extents, &first);
	dlbn_json_key_uint(out, "bytes", x->bytes, &first);
	json_time(out, "from_s", m, x->t_from, &first);
	json_time(out, "to_s", m, x->kind == DLBN_DAMAGE_PASSIVE ? DLBN_LOSS_T_UNKNOWN : x->t_to,
		  &first);
	dlbn_json_key_str(out, "window",
			  x->touches == DLBN_TOUCH_YES	 ? "in"
			  : x->touches == DLBN_TOUCH_MAY ? "may"
							 : "outside",
			  &first);
	dlbn_json_key_bool(out, "blocks_verdict", x->blocks, &first);
	dlbn_json_key_str(out, "text", x->text, &first);
	fputc('}', out);
}

/* The trace object's damage keys: what a damaged or cut-short trace lost. */
static void json_damage(FILE *out, const struct dlbn_report_input *in, int *first)
{
	static struct dlbn_damage d;
	const struct dlbn_reader_stats *rs = in->rs;
	dlbn_damage_assess(in->m, rs, in->a, &d);
	dlbn_json_key_bool(out, "damaged", d.damaged, first);
	dlbn_json_key_bool(out, "cut_short", d.cut_short, first);
	dlbn_json_key_uint(out, "extents_repaired", rs->extents_repaired, first);
	dlbn_json_key_uint(out, "extents_missing", rs->extents_missing, first);
	dlbn_json_key_uint(out, "extents_bad_header", rs->extents_bad_header, first);
	dlbn_json_key_bool(out, "damage_blocks_verdict", d.blocks_verdict, first);
	dlbn_json_key_str_or_null(out, "damage_summary", d.summary, d.damaged, first);
	int items = dlbn_json_open(out, "losses", '[', first);
	for (size_t i = 0; i < d.nitems; i++)
		json_loss(out, in->m, &d.items[i], &items);
	fputc(']', out);
}

static void json_trace(FILE *out, const struct dlbn_report_input *in, int *outer)
{
	const struct dlbn_reader_stats *rs = in->rs;
	char version[32];
	snprintf(version, sizeof(version), "%u.%u", rs->version_major, rs->version_minor);
	int first = dlbn_json_open(out, "trace", '{', outer);
	dlbn_json_key_str(out, "path", in->path, &first);
	dlbn_json_key_str(out, "version", version, &first);
	dlbn_json_key_uint(out, "processes", in->m->nprocs, &first);
	dlbn_json_key_uint(out, "records", in->m->records, &first);
	dlbn_json_key_bool(out, "truncated", rs->truncated, &first);
	dlbn_json_key_uint(out, "extents", rs->extents, &first);
	dlbn_json_key_uint(out, "extents_uninitialised", rs->extents_uninit, &first);
	dlbn_json_key_uint(out, "extents_corrupt", rs->extents_corrupt, &first);
	/* The reader's warnings, then the analysis's, in one list. */
	unsigned kept = rs->nwarnings < DLBN_READER_MAX_WARN ? rs->nwarnings : DLBN_READER_MAX_WARN;
	int items = dlbn_json_open(out, "warnings", '[', &first);
	for (unsigned i = 0; i < kept; i++) {
		dlbn_json_item(out, &items);
		dlbn_json_str(out, rs->warnings[i]);
	}
	for (size_t i = 0; i < in->a->nwarnings; i++) {
		dlbn_json_item(out, &items);
		dlbn_json_str(out, in->a->warnings[i]);
	}
	fputc(']', out);
	json_damage(out, in, &first);
	fputc('}', out);
}

/* "cpu": contention over the window from schedstat samples (null: none). */
static void json_cpu(FILE *out, const struct dlbn_analysis *a, int *outer)
{
	if (!a->sched_threads) {
		dlbn_json_key_null(out, "cpu", outer);
		return;
	}
	int first = dlbn_json_open(out, "cpu", '{', outer);
	dlbn_json_key_uint(out, "threads_sampled", a->sched_threads, &first);
	dlbn_json_key_uint(out, "census_threads", a->census_threads, &first);
	dlbn_json_key_number_or_null(out, "main_runq_fraction", a->main_runq_fraction,
				     a->main_runq_fraction >= 0, &first);
	dlbn_json_key_number_or_null(out, "workers_runq_share", a->workers_runq_share,
				     a->workers_runq_share >= 0, &first);
	dlbn_json_key_number(out, "cpus_used", a->cpus_used, &first);
	dlbn_json_key_bool(out, "contended", a->cpu_contended, &first);
	fputc('}', out);
}

/* "nvtx": the ranges the training process declared (null: none). */
static void json_nvtx(FILE *out, const struct dlbn_model *m, int *outer)
{
	if (!m->nvtx_ranges) {
		dlbn_json_key_null(out, "nvtx", outer);
		return;
	}
	int first = dlbn_json_open(out, "nvtx", '{', outer);
	dlbn_json_key_uint(out, "ranges", m->nvtx_ranges, &first);
	dlbn_json_key_uint(out, "data_ranges", m->nvtx_data_ranges, &first);
	dlbn_json_key_uint(out, "step_ranges", m->nvtx_step_ranges, &first);
	dlbn_json_key_number_or_null(out, "mean_step_ms",
				     m->nvtx_step_ranges ? (double)m->nvtx_step_ns / 1e6 /
								   (double)m->nvtx_step_ranges
							 : 0,
				     m->nvtx_step_ranges != 0, &first);
	fputc('}', out);
}

/* A loader's "in_window": its sums inside the training loader's window
 * (null for the training loader itself). */
static void json_sums(FILE *out, const struct dlbn_loader_summary *ls, int *outer)
{
	const struct dlbn_loader_sums *s = &ls->in_train_window;
	if (ls->training) {
		dlbn_json_key_null(out, "in_window", outer);
		return;
	}
	int first = dlbn_json_open(out, "in_window", '{', outer);
	dlbn_json_key_uint(out, "steps", s->steps, &first);
	dlbn_json_key_number(out, "wait_s", (double)s->wait_ns / 1e9, &first);
	dlbn_json_key_number(out, "stall_s", (double)s->stall_ns / 1e9, &first);
	fputc('}', out);
}

static void json_loader(FILE *out, const struct dlbn_model *m, size_t i, int *items)
{
	struct dlbn_loader_summary ls;
	dlbn_loader_summary(m, i, &ls);
	int first = dlbn_json_open(out, NULL, '{', items);
	dlbn_json_key_int(out, "id", ls.id, &first);
	dlbn_json_key_str(out, "role", dlbn_loader_role_name(ls.role), &first);
	dlbn_json_key_bool(out, "training", ls.training, &first);
	dlbn_json_key_uint(out, "steps", ls.steps, &first);
	dlbn_json_key_uint(out, "window_steps", ls.window_steps, &first);
	dlbn_json_key_int(out, "epochs", ls.epochs, &first);
	dlbn_json_key_int_or_null(out, "workers", ls.num_workers, ls.num_workers >= 0, &first);
	dlbn_json_key_uint(out, "worker_processes", ls.worker_procs, &first);
	dlbn_json_key_number(out, "wait_s", ls.wait_s, &first);
	dlbn_json_key_number(out, "stall_s", ls.stall_s, &first);
	json_sums(out, &ls, &first);
	dlbn_json_key_str(out, "sampler", ls.sampler, &first);
	dlbn_json_key_str(out, "loader_class", ls.loader_class, &first);
	dlbn_json_key_str(out, "kind", ls.kind, &first);
	dlbn_json_key_int_or_null(out, "threads", ls.threads, ls.threads >= 0, &first);
	dlbn_json_key_bool(out, "feeds_another", ls.feeds_another, &first);
	dlbn_json_key_int_or_null(out, "batch_size", ls.batch_size, ls.batch_size >= 0, &first);
	dlbn_json_key_str_or_null(out, "chosen_by", m->loaders.chosen_by, ls.training, &first);
	fputc('}', out);
}

/* "loaders": every DataLoader of the training process (Python view); the
 * top-level keys are the training loader's. */
static void json_loaders(FILE *out, const struct dlbn_model *m, const struct dlbn_analysis *a,
			 int *first)
{
	int items = dlbn_json_open(out, "loaders", '[', first);
	for (size_t i = 0; a->view == DLBN_VIEW_PYTHON && i < m->loaders.n; i++)
		json_loader(out, m, i, &items);
	fputc(']', out);
}

/* "library_operators": a loader library's operators by busy time in the
 * window (lib_ops.h), e.g. DALI's. */
static void json_lib_ops(FILE *out, const struct dlbn_lib_ops *o, int *first)
{
	int items = dlbn_json_open(out, "library_operators", '[', first);
	for (size_t i = 0; i < o->n; i++) {
		int f = dlbn_json_open(out, NULL, '{', &items);
		dlbn_json_key_str(out, "name", o->v[i].name, &f);
		dlbn_json_key_number(out, "busy_s", (double)o->v[i].busy_ns / 1e9, &f);
		dlbn_json_key_number(
			out, "share",
			o->busy_ns > 0 ? (double)o->v[i].busy_ns / (double)o->busy_ns : 0, &f);
		dlbn_json_key_uint(out, "runs", o->v[i].runs, &f);
		fputc('}', out);
	}
	fputc(']', out);
}

static void json_stack(FILE *out, const struct dlbn_model *m, const struct dlbn_wait_stack *s,
		       int *items)
{
	const struct dlbn_window *w = m->steps ? &m->steps->w : NULL;
	int in_window = w && w->window && s->wait_begin >= w->ws && s->wait_begin < w->we;
	int first = dlbn_json_open(out, NULL, '{', items);
	dlbn_json_key_number(out, "wait_ms", (double)s->wait_ns / 1e6, &first);
	dlbn_json_key_number(out, "at_s", (double)(s->wait_begin - m->t0) / 1e9, &first);
	dlbn_json_key_bool(out, "in_window", in_window, &first);
	dlbn_json_key_str(out, "call", dlbn_wait_call_name(s->wait_type), &first);
	dlbn_json_key_int(out, "tid", s->tid, &first);
	dlbn_json_key_lines(out, "frames", DLBN_JSON_TABLE(s->frame), (size_t)s->nframes, &first);
	fputc('}', out);
}

/* "stacks": the longest waits of the training process with their frames. */
static void json_stacks(FILE *out, const struct dlbn_model *m, int *first)
{
	const struct dlbn_wait_stacks *ws = &m->stacks;
	int items = dlbn_json_open(out, "stacks", '[', first);
	for (size_t k = 0; k < ws->nkept; k++)
		json_stack(out, m, &ws->kept[k], &items);
	fputc(']', out);
}

/* "steps" and "window": the steps counted and the window they span. */
static void json_steps(FILE *out, const struct dlbn_analysis *a, int *outer)
{
	int first = dlbn_json_open(out, "steps", '{', outer);
	dlbn_json_key_uint(out, "total", a->steps_total, &first);
	dlbn_json_key_uint(out, "window", a->steps_window, &first);
	dlbn_json_key_uint(out, "warmup", a->steps_warmup, &first);
	dlbn_json_key_int(out, "epochs", a->epochs, &first);
	fputc('}', out);
	first = dlbn_json_open(out, "window", '{', outer);
	dlbn_json_key_number(out, "start_s", a->start_s, &first);
	dlbn_json_key_number(out, "end_s", a->end_s, &first);
	dlbn_json_key_number(out, "wall_s", a->wall_s, &first);
	fputc('}', out);
}

static void json_loader_wait(FILE *out, const struct dlbn_analysis *a, int *outer)
{
	int first = dlbn_json_open(out, "loader_wait", '{', outer);
	dlbn_json_key_number(out, "exposed_s", a->exposed_s, &first);
	dlbn_json_key_number(out, "exposed_fraction", a->exposed_fraction, &first);
	dlbn_json_key_number(out, "stall_s", a->stall_s, &first);
	dlbn_json_key_number(out, "stall_fraction", a->stall_fraction, &first);
	dlbn_json_key_number(out, "mean_ms", a->mean_ms, &first);
	dlbn_json_key_number(out, "p50_ms", a->p50_ms, &first);
	dlbn_json_key_number(out, "p95_ms", a->p95_ms, &first);
	dlbn_json_key_number(out, "max_ms", a->max_ms, &first);
	dlbn_json_key_number(out, "receive_ms_per_batch", a->recv_ms, &first);
	dlbn_json_key_number(out, "receive_kib_per_batch", a->recv_kib, &first);
	dlbn_json_key_number(out, "fds_per_batch", a->recv_fds, &first);
	dlbn_json_key_number(out, "epoch_startup_stall_s", a->startup_stall_s, &first);
	dlbn_json_key_number(out, "contention_stall_s", a->contention_stall_s, &first);
	dlbn_json_key_number(out, "other_loaders_stall_s", a->other_loaders_stall_s, &first);
	fputc('}', out);
}

/* "cause" to "warnings": why, and what to change. */
static void json_findings(FILE *out, const struct dlbn_analysis *a, int *first)
{
	dlbn_json_key_str(out, "cause", dlbn_cause_name(a->cause), first);
	dlbn_json_key_lines(out, "recommendations", DLBN_JSON_TABLE(a->recs), a->nrecs, first);
	if (a->advice.present) {
		int f = dlbn_json_open(out, "advice", '{', first);
		dlbn_json_key_str(out, "setting", a->advice.knob, &f);
		dlbn_json_key_int(out, "from", a->advice.from, &f);
		dlbn_json_key_int(out, "to", a->advice.to, &f);
		dlbn_json_key_uint(out, "recommendation", a->advice.rec, &f);
		fputc('}', out);
	} else {
		dlbn_json_key_null(out, "advice", first);
	}
	dlbn_json_key_lines(out, "reasons", DLBN_JSON_TABLE(a->reasons), a->nreasons, first);
	dlbn_json_key_lines(out, "warnings", DLBN_JSON_TABLE(a->warnings), a->nwarnings, first);
}

/* The keys up to "outside_waits": the verdict, the prediction, the view,
 * the steps and their window, the loader wait. */
static void json_head(FILE *out, const struct dlbn_report_input *in, int *first)
{
	const struct dlbn_analysis *a = in->a;
	/* Several ranks: the top-level verdict is the job's; the rest is the
	 * worst rank's analysis ("ranks" and "job" say which). */
	int verdict = in->job && in->nranks > 1 ? in->job->verdict : a->verdict;
	dlbn_json_key_str(out, "verdict", dlbn_verdict_name(verdict), first);
	dlbn_json_key_number_or_null(out, "predicted_speedup", a->predicted_speedup,
				     a->predicted_speedup > 0, first);
	dlbn_json_key_number_or_null(out, "predicted_speedup_low", a->predicted_speedup_low,
				     a->predicted_speedup_low > 0, first);
	dlbn_json_key_str(out, "view", dlbn_view_name(a->view), first);
	dlbn_json_key_str(out, "path", dlbn_path_name(a->path), first);
	json_steps(out, a, first);
	json_loader_wait(out, a, first);
}

void dlbn_report_json(FILE *out, const struct dlbn_report_input *in)
{
	const struct dlbn_analysis *a = in->a;
	int first = 1;
	fputc('{', out);
	if (!a) { /* the rank is known from its summary alone: "subject" */
		dlbn_json_key_str(
			out, "verdict",
			dlbn_verdict_name(in->job ? in->job->verdict : in->subject->verdict),
			&first);
		dlbn_ranks_json(out, in, &first);
		fputs("}\n", out);
		return;
	}
	json_head(out, in, &first);
	dlbn_json_key(out, "outside_waits", &first);
	dlbn_outside_json(out, a);
	dlbn_json_key(out, "gpu", &first);
	if (in->gpu && in->gpu->present)
		dlbn_gpu_json(out, in->gpu);
	else
		fputs("null", out);
	json_workers(out, a, &first);
	dlbn_memory_json(out, a, &first); /* "memory", "failure" (report_memory.c) */
	json_config(out, in->m, a, &first);
	json_loaders(out, in->m, a, &first);
	json_lib_ops(out, &in->m->lib_ops, &first);
	json_findings(out, a, &first);
	json_cpu(out, a, &first);
	json_nvtx(out, in->m, &first);
	json_stacks(out, in->m, &first);
	dlbn_hotspots_json(out, in, &first);
	json_trace(out, in, &first);
	dlbn_json_key(out, "baseline", &first);
	if (in->baseline)
		dlbn_baseline_json(out, in->baseline);
	else
		fputs("null", out);
	/* --what-if (report_whatif.c): "what_if", "what_if_basis", "what_if_grid" */
	dlbn_json_item(out, &first);
	dlbn_whatif_json(out, in->whatif);
	dlbn_ranks_json(out, in, &first);
	fputs("}\n", out);
}
