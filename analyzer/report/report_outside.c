/*
 * report_outside.c - the evidence lines for the loading costs outside the
 * loader waits (outside.h), and where the GPU's idle time in the window
 * went: terminal, markdown and JSON forms of the same figures.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "report/report.h"
#include "util/json.h"

#define OUTSIDE_LINES 10

struct outside_line {
	const char *label;
	char text[DLBN_LINE];
};

static double share(double s, double wall)
{
	return wall > 0 ? s / wall * 100 : 0;
}

/* The loop's own CPU time, and the model's threads that share the cores
 * with the workers (shared_cores.h); returns the lines written (1-2). */
static int model_thread_lines(const struct dlbn_analysis *a, struct outside_line *v)
{
	const struct dlbn_outside *o = &a->outside;
	const struct dlbn_shared_cores *c = &o->cores;
	double w = a->wall_s;
	int n = 0;
	if (!(o->slowed_s > 0)) {
		v[n].label = "own work";
		snprintf(v[n++].text, DLBN_LINE,
			 "%.3f s (%.1f%%) the loop's own CPU time: kept, as Replay keeps it",
			 o->cpu_s, share(o->cpu_s, w));
	} else {
		v[n].label = "own work";
		snprintf(
			v[n++].text, DLBN_LINE,
			"%.3f s (%.1f%%) the loop's own CPU time: %.3f s of it kept, as Replay "
			"keeps it; %.3f s the model's work slowed by the workers' CPU use (below); "
			"%.3f s in the stall",
			o->cpu_s, share(o->cpu_s, w), o->cpu_s - o->slowed_s, o->slowed_s,
			o->charged_slowed_s);
	}
	if (!c->gang)
		return n;
	double run = 0, runq = 0, off = 0;
	size_t periods = SIZE_MAX;
	for (size_t i = 0; i < c->gang; i++) {
		run += c->gang_threads[i].run_s;
		runq += c->gang_threads[i].runq_s;
		off += c->gang_threads[i].off_s;
		if (c->gang_threads[i].periods < periods)
			periods = c->gang_threads[i].periods;
	}
	char how[40] = "the census's span's share";
	if (periods >= DLBN_PERIODS_MIN)
		snprintf(how, sizeof(how), "measured in %zu of them", periods);
	char threads[48] = "";
	if (c->intraop_threads > 0)
		snprintf(threads, sizeof(threads), " (torch.get_num_threads() = %d)",
			 c->intraop_threads);
	v[n].label = "model threads";
	if (c->applies)
		snprintf(v[n++].text, DLBN_LINE,
			 "%zu thread%s of the model besides the loop's%s: on a CPU %.3f s, queued "
			 "%.3f s, %.3f s of it in the loop periods (%s); the loop waited "
			 "%.3f s for them beyond its own queueing (times off overlapping while the "
			 "workers hold every core: %.0f%% of the time)",
			 c->gang, c->gang == 1 ? "" : "s", threads, run, runq, off, how,
			 c->waited_s, c->all_cores_busy * 100);
	else
		snprintf(v[n++].text, DLBN_LINE,
			 "%zu busy thread%s besides the loop's%s: on a CPU %.3f s, queued for one "
			 "%.3f s; not counted as the model's: %s",
			 c->gang, c->gang == 1 ? "" : "s", threads, run, runq, c->why_not);
	return n;
}

/* The loop's wait for the interpreter's lock, and the other threads'. */
static void gil_line(const struct dlbn_analysis *a, struct outside_line *v)
{
	const struct dlbn_outside *o = &a->outside;
	double w = a->wall_s;
	char others[96] = "";
	if (o->gil_others_s > 0)
		snprintf(others, sizeof(others),
			 "; the process's other threads waited %.3f s for it, summed",
			 o->gil_others_s);
	v->label = "gil wait";
	int len;
	if (o->gil_why_kept[0])
		len = snprintf(v->text, DLBN_LINE,
			       "%.3f s (%.1f%%) the loop's thread off the CPU waiting for the "
			       "Python interpreter's lock: kept, as Replay keeps it (%s)%s",
			       o->gil_s, share(o->gil_s, w), o->gil_why_kept, others);
	else
		len = snprintf(v->text, DLBN_LINE,
			       "%.3f s (%.1f%%) the loop's thread off the CPU waiting for the "
			       "Python interpreter's lock, %.3f s of it while the loader's "
			       "threads held it (at most the process's other threads' CPU "
			       "time); %.3f s in the stall%s",
			       o->gil_s, share(o->gil_s, w), o->gil_loader_s, o->charged_gil_s,
			       others);
	if (len >= DLBN_LINE) /* the reason and the others' waits may not both fit */
		memcpy(v->text + DLBN_LINE - 4, "...", 4);
}

/* The lines both the terminal and markdown reports show; returns count. */
static int outside_lines(const struct dlbn_analysis *a, struct outside_line *v)
{
	const struct dlbn_outside *o = &a->outside;
	double w = a->wall_s;
	int n = 0;
	if (!o->known || !a->steps_window)
		return 0;
	v[n].label = "after arrival";
	snprintf(v[n++].text, DLBN_LINE,
		 "%zu loop periods from a batch's arrival to the next fetch, %.3f s (%.1f%% of "
		 "the window)%s",
		 o->steps, o->wall_s, share(o->wall_s, w),
		 o->gpu_rule ? "; costs below count in the stall as far as the GPU sat idle"
			     : "; costs below count in the stall whole (no GPU recorded)");
	if (o->wrapped) {
		v[n].label = "wrapper";
		snprintf(v[n++].text, DLBN_LINE,
			 "%.3f s (%.1f%%) a wrapper iterator's work on the batch before handing it "
			 "to the loop, in %zu periods (Replay of what the loop iterates removes "
			 "it); %.3f s in the stall",
			 o->wrap_s, share(o->wrap_s, w), o->wrapped, o->charged_wrap_s);
	}
	v[n].label = "batch drop";
	snprintf(v[n++].text, DLBN_LINE,
		 "%.3f s (%.1f%%) in munmap/close freeing the previous batch's shared memory; "
		 "%.3f s in the stall",
		 o->free_s, share(o->free_s, w), o->charged_free_s);
	v[n].label = "cpu queueing";
	snprintf(v[n++].text, DLBN_LINE,
		 "%.3f s (%.1f%%) the loop's thread runnable but not running; %.3f s in the stall",
		 o->runq_s, share(o->runq_s, w), o->charged_runq_s);
	v[n].label = "first touch";
	snprintf(v[n++].text, DLBN_LINE,
		 "%.3f s (%.1f%%) kernel time faulting in the batch's pages (%.1f MiB of shared "
		 "memory, %.0f page faults per step); %.3f s in the stall",
		 o->touch_s, share(o->touch_s, w), o->shm_mib_per_step, o->minflt_per_step,
		 o->charged_touch_s);
	if (o->gil_s > 0 || o->gil_others_s > 0)
		gil_line(a, &v[n++]);
	n += model_thread_lines(a, v + n);
	if (o->gpu_rule) {
		double in_waits = dlbn_outside_stall_in_waits(o, a->stall_s);
		v[n].label = "gpu idle";
		snprintf(v[n++].text, DLBN_LINE,
			 "loading in the waits %.3f s; after the batches arrived %.3f s: loading "
			 "%.3f s (refill bubbles %.3f s), other host work %.3f s (kept by Replay); "
			 "%zu of %zu periods with GPU evidence",
			 in_waits, o->gpu_idle_s, o->refill_s + o->charged_s, o->refill_s,
			 o->other_host_s, o->gpu_steps, o->steps);
	}
	return n;
}

void dlbn_outside_text(FILE *out, const struct dlbn_analysis *a)
{
	struct outside_line v[OUTSIDE_LINES];
	int n = outside_lines(a, v);
	for (int i = 0; i < n; i++)
		fprintf(out, "  %-16s %s\n", v[i].label, v[i].text);
}

void dlbn_outside_markdown(FILE *out, const struct dlbn_analysis *a)
{
	struct outside_line v[OUTSIDE_LINES];
	int n = outside_lines(a, v);
	for (int i = 0; i < n; i++)
		fprintf(out, "- %s: %s\n", v[i].label, v[i].text);
}

/* "model_threads": the thread census's figures, the model's threads and
 * the rest (null: no census). */
static void model_threads_json(FILE *out, const struct dlbn_shared_cores *c, int *outer)
{
	if (!c->known) {
		dlbn_json_key_null(out, "model_threads", outer);
		return;
	}
	int first = dlbn_json_open(out, "model_threads", '{', outer);
	dlbn_json_key_int_or_null(out, "intraop_threads", c->intraop_threads,
				  c->intraop_threads > 0, &first);
	dlbn_json_key_int_or_null(out, "cpus", c->cpus, c->cpus > 0, &first);
	dlbn_json_key_number_or_null(out, "cpu_quota", c->cpu_quota, c->cpu_quota > 0, &first);
	dlbn_json_key_bool(out, "applies", c->applies, &first);
	dlbn_json_key_str_or_null(out, "why_not", c->why_not, c->why_not[0] != 0, &first);
	dlbn_json_key_number(out, "all_cores_busy", c->all_cores_busy, &first);
	dlbn_json_key_number(out, "waited_s", c->waited_s, &first);
	dlbn_json_key_uint(out, "other_threads", c->threads - c->gang, &first);
	double gang_run = 0;
	for (size_t i = 0; i < c->gang; i++)
		gang_run += c->gang_threads[i].run_s;
	dlbn_json_key_number(out, "other_run_s", c->threads_run_s - gang_run, &first);
	int items = dlbn_json_open(out, "threads", '[', &first);
	for (size_t i = 0; i < c->gang; i++) {
		const struct dlbn_gang_thread *g = &c->gang_threads[i];
		int f = dlbn_json_open(out, NULL, '{', &items);
		dlbn_json_key_int(out, "tid", g->tid, &f);
		dlbn_json_key_str(out, "name", g->name, &f);
		dlbn_json_key_number(out, "run_s", g->run_s, &f);
		dlbn_json_key_number(out, "runq_s", g->runq_s, &f);
		dlbn_json_key_number(out, "off_s", g->off_s, &f);
		dlbn_json_key_uint(out, "periods", g->periods, &f);
		dlbn_json_key_number(out, "period_wall_s", g->period_wall_s, &f);
		fputc('}', out);
	}
	fputs("]}", out);
}

/* "gpu_idle": where the GPU's idle time in the window went (null: the CPU
 * rule, no GPU recorded). */
static void gpu_idle_json(FILE *out, const struct dlbn_analysis *a, int *outer)
{
	const struct dlbn_outside *o = &a->outside;
	if (!o->gpu_rule) {
		dlbn_json_key_null(out, "gpu_idle", outer);
		return;
	}
	int first = dlbn_json_open(out, "gpu_idle", '{', outer);
	dlbn_json_key_number(out, "loading_in_waits_s", dlbn_outside_stall_in_waits(o, a->stall_s),
			     &first);
	dlbn_json_key_number(out, "after_arrival_s", o->gpu_idle_s, &first);
	dlbn_json_key_number(out, "loading_after_arrival_s", o->refill_s + o->charged_s, &first);
	dlbn_json_key_number(out, "refill_s", o->refill_s, &first);
	dlbn_json_key_number(out, "other_host_s", o->other_host_s, &first);
	dlbn_json_key_uint(out, "periods_with_gpu_evidence", o->gpu_steps, &first);
	fputc('}', out);
}

/* The costs after arrival, each in seconds and its part in the stall. */
static void outside_costs_json(FILE *out, const struct dlbn_outside *o, int *first)
{
	dlbn_json_key_number(out, "wall_s", o->wall_s, first);
	dlbn_json_key_number(out, "wrapper_s", o->wrap_s, first);
	dlbn_json_key_number(out, "wrapper_in_stall_s", o->charged_wrap_s, first);
	dlbn_json_key_number(out, "batch_drop_s", o->free_s, first);
	dlbn_json_key_number(out, "batch_drop_in_stall_s", o->charged_free_s, first);
	dlbn_json_key_number(out, "cpu_queueing_s", o->runq_s, first);
	dlbn_json_key_number(out, "cpu_queueing_in_stall_s", o->charged_runq_s, first);
	dlbn_json_key_number(out, "first_touch_s", o->touch_s, first);
	dlbn_json_key_number(out, "first_touch_in_stall_s", o->charged_touch_s, first);
	dlbn_json_key_number(out, "own_cpu_s", o->cpu_s, first);
	dlbn_json_key_number(out, "slowed_s", o->slowed_s, first);
	dlbn_json_key_number(out, "slowed_in_stall_s", o->charged_slowed_s, first);
	dlbn_json_key_number(out, "gil_wait_s", o->gil_s, first);
	dlbn_json_key_number(out, "gil_wait_loader_s", o->gil_loader_s, first);
	dlbn_json_key_number(out, "gil_wait_in_stall_s", o->charged_gil_s, first);
	dlbn_json_key_number(out, "gil_others_wait_s", o->gil_others_s, first);
	dlbn_json_key_number(out, "in_stall_s", o->charged_s, first);
	dlbn_json_key_number(out, "page_faults_per_step", o->minflt_per_step, first);
	dlbn_json_key_number(out, "shm_mib_per_step", o->shm_mib_per_step, first);
}

void dlbn_outside_json(FILE *out, const struct dlbn_analysis *a)
{
	const struct dlbn_outside *o = &a->outside;
	if (!o->known) {
		fputs("null", out);
		return;
	}
	int first = 1;
	fputc('{', out);
	dlbn_json_key_uint(out, "periods", o->steps, &first);
	dlbn_json_key_uint(out, "wrapped_periods", o->wrapped, &first);
	dlbn_json_key_str(out, "rule", o->gpu_rule ? "gpu" : "cpu", &first);
	outside_costs_json(out, o, &first);
	dlbn_json_key_str_or_null(out, "gil_wait_kept_why", o->gil_why_kept,
				  o->gil_why_kept[0] != 0, &first);
	model_threads_json(out, &o->cores, &first);
	gpu_idle_json(out, a, &first);
	fputc('}', out);
}
