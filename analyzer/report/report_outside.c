/*
 * report_outside.c - the evidence lines for the loading costs outside the
 * loader waits (outside.h), and where the GPU's idle time in the window
 * went: terminal, markdown and JSON forms of the same figures.
 */
#include <stdio.h>
#include <string.h>

#include "util/json.h"
#include "report/report.h"

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
	double run = 0, runq = 0;
	for (size_t i = 0; i < c->gang; i++) {
		run += c->gang_threads[i].run_s;
		runq += c->gang_threads[i].runq_s;
	}
	char threads[48] = "";
	if (c->intraop_threads > 0)
		snprintf(threads, sizeof(threads), " (torch.get_num_threads() = %d)",
			 c->intraop_threads);
	v[n].label = "model threads";
	if (c->applies)
		snprintf(v[n++].text, DLBN_LINE,
			 "%zu thread%s of the model besides the loop's%s: on a CPU %.3f s, queued "
			 "for one %.3f s; the loop waited %.3f s for them beyond its own queueing "
			 "(their times off a CPU overlap while the workers hold every core, about "
			 "%.0f%% of the time)",
			 c->gang, c->gang == 1 ? "" : "s", threads, run, runq, c->waited_s,
			 c->all_cores_busy * 100);
	else
		snprintf(v[n++].text, DLBN_LINE,
			 "%zu busy thread%s besides the loop's%s: on a CPU %.3f s, queued for one "
			 "%.3f s; not counted as the model's: %s",
			 c->gang, c->gang == 1 ? "" : "s", threads, run, runq, c->why_not);
	return n;
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
	if (o->gil_s > 0 || o->gil_others_s > 0) {
		char others[96] = "";
		if (o->gil_others_s > 0)
			snprintf(others, sizeof(others),
				 "; the process's other threads waited %.3f s for it, summed",
				 o->gil_others_s);
		v[n].label = "gil wait";
		int len;
		if (o->gil_why_kept[0])
			len = snprintf(
				v[n].text, DLBN_LINE,
				"%.3f s (%.1f%%) the loop's thread off the CPU waiting for the "
				"Python interpreter's lock: kept, as Replay keeps it (%s)%s",
				o->gil_s, share(o->gil_s, w), o->gil_why_kept, others);
		else
			len = snprintf(
				v[n].text, DLBN_LINE,
				"%.3f s (%.1f%%) the loop's thread off the CPU waiting for the "
				"Python interpreter's lock, %.3f s of it while the loader's "
				"threads held it (at most the process's other threads' CPU "
				"time); %.3f s in the stall%s",
				o->gil_s, share(o->gil_s, w), o->gil_loader_s, o->charged_gil_s,
				others);
		if (len >= DLBN_LINE) /* the reason and the others' waits may not both fit */
			memcpy(v[n].text + DLBN_LINE - 4, "...", 4);
		n++;
	}
	n += model_thread_lines(a, v + n);
	if (o->gpu_rule) {
		double in_waits = a->stall_s - o->charged_s - o->refill_s;
		v[n].label = "gpu idle";
		snprintf(v[n++].text, DLBN_LINE,
			 "loading in the waits %.3f s; after the batches arrived %.3f s: loading "
			 "%.3f s (refill bubbles %.3f s), other host work %.3f s (kept by Replay); "
			 "%zu of %zu periods with GPU evidence",
			 in_waits > 0 ? in_waits : 0, o->gpu_idle_s, o->refill_s + o->charged_s,
			 o->refill_s, o->other_host_s, o->gpu_steps, o->steps);
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

/* The thread census's figures: the model's threads and the rest. */
static void model_threads_json(FILE *out, const struct dlbn_shared_cores *c)
{
	if (!c->known) {
		fputs("null", out);
		return;
	}
	fputs("{\"intraop_threads\":", out);
	if (c->intraop_threads > 0)
		fprintf(out, "%d", c->intraop_threads);
	else
		fputs("null", out);
	fputs(",\"cpus\":", out);
	if (c->cpus > 0)
		fprintf(out, "%d", c->cpus);
	else
		fputs("null", out);
	fputs(",\"cpu_quota\":", out);
	if (c->cpu_quota > 0)
		dlbn_json_number(out, c->cpu_quota);
	else
		fputs("null", out);
	fprintf(out, ",\"applies\":%s,\"why_not\":", c->applies ? "true" : "false");
	if (c->why_not[0])
		dlbn_json_string(out, c->why_not, strlen(c->why_not));
	else
		fputs("null", out);
	fputs(",\"all_cores_busy\":", out);
	dlbn_json_number(out, c->all_cores_busy);
	fputs(",\"waited_s\":", out);
	dlbn_json_number(out, c->waited_s);
	fprintf(out, ",\"other_threads\":%zu,\"other_run_s\":", c->threads - c->gang);
	double gang_run = 0;
	for (size_t i = 0; i < c->gang; i++)
		gang_run += c->gang_threads[i].run_s;
	dlbn_json_number(out, c->threads_run_s - gang_run);
	fputs(",\"threads\":[", out);
	for (size_t i = 0; i < c->gang; i++) {
		const struct dlbn_gang_thread *g = &c->gang_threads[i];
		fprintf(out, "%s{\"tid\":%d,\"name\":", i ? "," : "", g->tid);
		dlbn_json_string(out, g->name, strlen(g->name));
		fputs(",\"run_s\":", out);
		dlbn_json_number(out, g->run_s);
		fputs(",\"runq_s\":", out);
		dlbn_json_number(out, g->runq_s);
		fputs(",\"off_s\":", out);
		dlbn_json_number(out, g->off_s);
		fputc('}', out);
	}
	fputs("]}", out);
}

void dlbn_outside_json(FILE *out, const struct dlbn_analysis *a)
{
	const struct dlbn_outside *o = &a->outside;
	if (!o->known) {
		fputs("null", out);
		return;
	}
	const char *names[] = {"wall_s",
			       "wrapper_s",
			       "wrapper_in_stall_s",
			       "batch_drop_s",
			       "batch_drop_in_stall_s",
			       "cpu_queueing_s",
			       "cpu_queueing_in_stall_s",
			       "first_touch_s",
			       "first_touch_in_stall_s",
			       "own_cpu_s",
			       "slowed_s",
			       "slowed_in_stall_s",
			       "gil_wait_s",
			       "gil_wait_loader_s",
			       "gil_wait_in_stall_s",
			       "gil_others_wait_s",
			       "in_stall_s",
			       "page_faults_per_step",
			       "shm_mib_per_step"};
	double vals[] = {
		o->wall_s,	    o->wrap_s,		o->charged_wrap_s,  o->free_s,
		o->charged_free_s,  o->runq_s,		o->charged_runq_s,  o->touch_s,
		o->charged_touch_s, o->cpu_s,		o->slowed_s,	    o->charged_slowed_s,
		o->gil_s,	    o->gil_loader_s,	o->charged_gil_s,   o->gil_others_s,
		o->charged_s,	    o->minflt_per_step, o->shm_mib_per_step};
	fprintf(out, "{\"periods\":%zu,\"wrapped_periods\":%zu,\"rule\":\"%s\"", o->steps,
		o->wrapped, o->gpu_rule ? "gpu" : "cpu");
	for (size_t i = 0; i < sizeof(vals) / sizeof(vals[0]); i++) {
		fprintf(out, ",\"%s\":", names[i]);
		dlbn_json_number(out, vals[i]);
	}
	fputs(",\"gil_wait_kept_why\":", out);
	if (o->gil_why_kept[0])
		dlbn_json_string(out, o->gil_why_kept, strlen(o->gil_why_kept));
	else
		fputs("null", out);
	fputs(",\"model_threads\":", out);
	model_threads_json(out, &o->cores);
	fputs(",\"gpu_idle\":", out);
	if (!o->gpu_rule) {
		fputs("null}", out);
		return;
	}
	double in_waits = a->stall_s - o->charged_s - o->refill_s;
	fputs("{\"loading_in_waits_s\":", out);
	dlbn_json_number(out, in_waits > 0 ? in_waits : 0);
	fputs(",\"after_arrival_s\":", out);
	dlbn_json_number(out, o->gpu_idle_s);
	fputs(",\"loading_after_arrival_s\":", out);
	dlbn_json_number(out, o->refill_s + o->charged_s);
	fputs(",\"refill_s\":", out);
	dlbn_json_number(out, o->refill_s);
	fputs(",\"other_host_s\":", out);
	dlbn_json_number(out, o->other_host_s);
	fprintf(out, ",\"periods_with_gpu_evidence\":%zu}}", o->gpu_steps);
}
