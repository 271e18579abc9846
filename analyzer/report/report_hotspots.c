/*
 * report_hotspots.c - "where the workers' time goes" (hotspots.h) in the
 * text, Markdown and JSON reports, the training loop's next() call sites,
 * and the longest waits shown at their Python call site.
 *
 * Waits: the loop waits inside next(); its Python frames are the call site
 * the bootstrap captured for the iterator (CALLSITE).  They are shown, for
 * at most two waits; native frames only when no Python frame exists, or
 * with --native-stacks, and then runs of interpreter frames
 * (_PyEval_EvalFrameDefault ...) are folded into one line.
 */
#include <stdio.h>
#include <string.h>

#include "report/report.h"
#include "util/json.h"

#define HOT_TEXT_ROWS 8
#define WAITS_SHOWN   2
#define NATIVE_FRAMES 12

static const char *loader_label(int loader, char *buf, size_t len)
{
	if (loader < 0)
		snprintf(buf, len, "unknown loader");
	else
		snprintf(buf, len, "loader #%d", loader + 1);
	return buf;
}

static void where(const struct dlbn_hotspot *e, char *buf, size_t len)
{
	if (e->file[0] && e->line > 0)
		snprintf(buf, len, "%s:%d", dlbn_hot_short_file(e->file), e->line);
	else if (e->file[0])
		snprintf(buf, len, "%s", dlbn_hot_short_file(e->file));
	else
		snprintf(buf, len, "-");
}

static void loader_head(const struct dlbn_hot_loader *l, char *buf, size_t len)
{
	char lab[40], procs[64] = "", threads[160] = "";
	if (l->procs)
		snprintf(procs, sizeof(procs), "%d %s, ", l->procs,
			 l->main_process ? "process (num_workers=0)" : "worker(s)");
	if (l->threads)
		snprintf(threads, sizeof(threads),
			 "%d thread(s) of the training process busy %.0f%% of their time "
			 "(busiest: %s, %.0f%%), ",
			 l->threads,
			 l->thread_watched_ns > 0
				 ? 100.0 * (double)l->thread_busy_ns / (double)l->thread_watched_ns
				 : 0,
			 l->busiest_thread, l->busiest_thread_share * 100);
	char batches[40] = "";
	if (l->batches)
		snprintf(batches, sizeof(batches), "%llu batches, ",
			 (unsigned long long)l->batches);
	snprintf(buf, len, "%s: %s%s%s%.3f s busy", loader_label(l->loader, lab, sizeof(lab)),
		 procs, threads, batches, (double)l->busy_ns / 1e9);
}

/* "workers'" when processes fetched for the loader, else its threads'. */
static const char *whose(const struct dlbn_hot_loader *l)
{
	return l->procs || !l->threads ? "workers'" : "loader threads'";
}

/* Where the entry's time was spent: "cpu", "io" (off the CPU) or "gil"
 * (off the CPU waiting for the interpreter's lock). */
static const char *on_text(const struct dlbn_hotspot *e)
{
	return e->lock ? "gil" : e->io ? "io" : "cpu";
}

static const char *measure(const struct dlbn_hotspot *e)
{
	return e->exact ? "exact" : e->kind == DLBN_HOT_THREAD_SAMPLED ? "thread" : "sampled";
}

static double share_of(const struct dlbn_hot_loader *l, int64_t ns)
{
	return l->busy_ns > 0 ? 100.0 * (double)ns / (double)l->busy_ns : 0;
}

static void sampler_line(FILE *out, const struct dlbn_hot_loader *l, const char *indent)
{
	if (l->threads > l->native_threads)
		fprintf(out,
			"%sthread = the loader threads' Python stacks sampled by wall time (%lld "
			"samples); waits for another thread (queues, conditions, semaphores) are "
			"idle, left out\n",
			indent, (long long)l->thread_samples);
	if (l->native_threads)
		fprintf(out,
			"%s%d native thread(s) of the loader's library (DALI's pool): busy = their "
			"CPU time (their kernel CPU clocks)\n",
			indent, l->native_threads);
	if (!l->procs && l->threads)
		return;
	if (l->sampler_on)
		fprintf(out,
			"%ssampled = Python stack samples (%llu, SIGPROF while fetching), sharing "
			"out the CPU time outside the timed stages; exact = timed in the workers\n",
			indent, (unsigned long long)l->samples);
	else
		fprintf(out, "%sno stack samples (%s): exact = timed in the workers\n", indent,
			l->sampler_note[0] ? l->sampler_note : "sampler off");
}

void dlbn_hotspots_text(FILE *out, const struct dlbn_report_input *in)
{
	const struct dlbn_hotspots *h = in->hot;
	if (!h || !h->present)
		return;
	for (size_t li = 0; li < h->nloaders; li++) {
		const struct dlbn_hot_loader *l = &h->loaders[li];
		if (l->busy_ns <= 0 || (!h->n && !l->threads))
			continue;
		char head[300];
		loader_head(l, head, sizeof(head));
		fprintf(out, "\nWhere the %s time goes (%s)\n", whose(l), head);
		fprintf(out, "  %6s  %-7s  %-3s  %-44s %s\n", "share", "how", "on",
			"stage or function", "where");
		int rows = 0;
		for (size_t i = 0; i < h->n && rows < HOT_TEXT_ROWS; i++) {
			const struct dlbn_hotspot *e = &h->v[i];
			if (e->loader != l->loader)
				continue;
			char loc[240], what[140];
			where(e, loc, sizeof(loc));
			snprintf(what, sizeof(what), "%s [%s]", e->name,
				 dlbn_hot_category_name(e->category));
			fprintf(out, "  %5.1f%%  %-7s  %-3s  %-44s %s", e->share * 100, measure(e),
				on_text(e), what, loc);
			if (!e->exact && e->callers[0])
				fprintf(out, " (from %s)", e->callers);
			fputc('\n', out);
			rows++;
		}
		if (l->procs) {
			fprintf(out, "  collate + send back: %.1f%% of the busy time",
				share_of(l, l->collate_ns + l->send_ns));
			if (!l->main_process)
				fprintf(out, "; file reads (read hooks): %.1f%%",
					share_of(l, l->file_ns));
			fputc('\n', out);
		}
		sampler_line(out, l, "  ");
	}
	if (h->recommendation[0])
		fprintf(out, "  -> %s\n", h->recommendation);
}

void dlbn_hotspots_markdown(FILE *out, const struct dlbn_report_input *in)
{
	const struct dlbn_hotspots *h = in->hot;
	int shown = 0;
	for (size_t li = 0; h && h->present && li < h->nloaders; li++)
		shown |= h->loaders[li].busy_ns > 0 && (h->n || h->loaders[li].threads);
	if (!shown)
		return;
	fputs("\n### Where the workers' time goes\n", out);
	for (size_t li = 0; li < h->nloaders; li++) {
		const struct dlbn_hot_loader *l = &h->loaders[li];
		if (l->busy_ns <= 0 || (!h->n && !l->threads))
			continue;
		char head[300];
		loader_head(l, head, sizeof(head));
		fprintf(out,
			"\n%s.\n\n| share | how | CPU or I/O | stage or function | where |\n"
			"|---|---|---|---|---|\n",
			head);
		for (size_t i = 0; i < h->n; i++) {
			const struct dlbn_hotspot *e = &h->v[i];
			if (e->loader != l->loader)
				continue;
			char loc[240];
			where(e, loc, sizeof(loc));
			fprintf(out, "| %.1f%% | %s | %s | `", e->share * 100, measure(e),
				e->lock ? "GIL"
				: e->io ? "I/O"
					: "CPU");
			for (const char *c = e->name; *c; c++)
				fputc(*c == '`' || *c == '|' ? '\'' : *c, out);
			fprintf(out, "` (%s) | `%s` |\n", dlbn_hot_category_name(e->category), loc);
		}
		if (l->procs) {
			fprintf(out, "\nCollate + send back: %.1f%% of the busy time",
				share_of(l, l->collate_ns + l->send_ns));
			if (!l->main_process)
				fprintf(out, "; file reads (read hooks): %.1f%%",
					share_of(l, l->file_ns));
			fputs(".  ", out);
		} else {
			fputc('\n', out);
		}
		sampler_line(out, l, "");
	}
	if (h->recommendation[0])
		fprintf(out, "\n**Recommendation:** %s.\n", h->recommendation);
}

/* A loader's number in the JSON (1-based), or -1 when unknown. */
static long long loader_number(int loader)
{
	return loader >= 0 ? loader + 1 : -1;
}

static void hotspot_json(FILE *out, const struct dlbn_hotspot *e, int *items)
{
	int first = dlbn_json_open(out, NULL, '{', items);
	dlbn_json_key_int(out, "loader", loader_number(e->loader), &first);
	dlbn_json_key_str(out, e->exact ? "stage" : "function", e->name, &first);
	dlbn_json_key_str(out, "file", e->file, &first);
	dlbn_json_key_int(out, "line", e->line, &first);
	dlbn_json_key_number(out, "share", e->share, &first);
	dlbn_json_key_str(out, "measure", measure(e), &first);
	dlbn_json_key_str(out, "cpu_or_io", on_text(e), &first);
	dlbn_json_key_str(out, "category", dlbn_hot_category_name(e->category), &first);
	dlbn_json_key_number(out, "seconds", (double)e->ns / 1e9, &first);
	dlbn_json_key_str(out, "callers", e->callers, &first);
	fputc('}', out);
}

/* a / b, or 0 when b is not positive. */
static double ratio(int64_t a, int64_t b)
{
	return b > 0 ? (double)a / (double)b : 0;
}

static void hot_loader_json(FILE *out, const struct dlbn_hot_loader *l, int *items)
{
	int first = dlbn_json_open(out, NULL, '{', items);
	dlbn_json_key_int(out, "loader", loader_number(l->loader), &first);
	dlbn_json_key_int(out, "processes", l->procs, &first);
	dlbn_json_key_int(out, "main_process", l->main_process, &first);
	dlbn_json_key_int(out, "batches", (long long)l->batches, &first);
	dlbn_json_key_number(out, "busy_s", (double)l->busy_ns / 1e9, &first);
	dlbn_json_key_number(out, "collate_send_share",
			     share_of(l, l->collate_ns + l->send_ns) / 100, &first);
	dlbn_json_key_number(out, "file_read_share", share_of(l, l->file_ns) / 100, &first);
	dlbn_json_key_number(out, "runq_share", share_of(l, l->runq_ns) / 100, &first);
	dlbn_json_key_int(out, "samples", (long long)l->samples, &first);
	dlbn_json_key_number(out, "sampler_cost_share", ratio(l->sampler_cost_ns, l->fetch_cpu_ns),
			     &first);
	dlbn_json_key_str(out, "sampler", l->sampler_on ? "on" : l->sampler_note, &first);
	dlbn_json_key_int(out, "threads", l->threads, &first);
	dlbn_json_key_number(out, "thread_busy_s", (double)l->thread_busy_ns / 1e9, &first);
	dlbn_json_key_number(out, "thread_busy_share",
			     ratio(l->thread_busy_ns, l->thread_watched_ns), &first);
	dlbn_json_key_int(out, "thread_samples", (long long)l->thread_samples, &first);
	dlbn_json_key_number(out, "thread_gil_wait_share",
			     ratio(l->thread_lock_ns, l->thread_busy_ns), &first);
	dlbn_json_key_str(out, "busiest_thread", l->busiest_thread, &first);
	dlbn_json_key_number(out, "busiest_thread_busy_share", l->busiest_thread_share, &first);
	fputc('}', out);
}

/* A call site: its Python frames, one a line in c->text. */
static void callsite_json(FILE *out, const struct dlbn_callsite *c, int *items)
{
	int first = dlbn_json_open(out, NULL, '{', items);
	dlbn_json_key_int(out, "loader", loader_number(c->loader), &first);
	dlbn_json_key_int(out, "iter_id", (long long)c->iter_id, &first);
	int frames = dlbn_json_open(out, "frames", '[', &first);
	for (const char *p = c->text; *p;) {
		const char *nl = strchr(p, '\n');
		size_t len = nl ? (size_t)(nl - p) : strlen(p);
		dlbn_json_item(out, &frames);
		dlbn_json_string(out, p, len);
		p += len + (nl ? 1 : 0);
	}
	fputs("]}", out);
}

/* "hotspots", "hotspot_loaders", "hotspots_recommendation", "callsites". */
void dlbn_hotspots_json(FILE *out, const struct dlbn_report_input *in, int *first)
{
	const struct dlbn_hotspots *h = in->hot;
	int items = dlbn_json_open(out, "hotspots", '[', first);
	for (size_t i = 0; h && i < h->n; i++)
		hotspot_json(out, &h->v[i], &items);
	fputc(']', out);
	items = dlbn_json_open(out, "hotspot_loaders", '[', first);
	for (size_t li = 0; h && li < h->nloaders; li++)
		hot_loader_json(out, &h->loaders[li], &items);
	fputc(']', out);
	dlbn_json_key_str_or_null(out, "hotspots_recommendation", h ? h->recommendation : "",
				  h && h->recommendation[0], first);
	items = dlbn_json_open(out, "callsites", '[', first);
	for (size_t i = 0; h && i < h->ncallsites; i++)
		callsite_json(out, &h->callsites[i], &items);
	fputc(']', out);
}

/* "train.py:312 in train" from "path/train.py:train:312". */
static void frame_short(const char *frame, size_t len, char *buf, size_t cap)
{
	char tmp[400];
	if (len >= sizeof(tmp))
		len = sizeof(tmp) - 1;
	memcpy(tmp, frame, len);
	tmp[len] = 0;
	char *line = strrchr(tmp, ':');
	if (!line) {
		snprintf(buf, cap, "%s", tmp);
		return;
	}
	*line++ = 0;
	char *func = strrchr(tmp, ':');
	if (!func) {
		snprintf(buf, cap, "%s:%s", dlbn_hot_short_file(tmp), line);
		return;
	}
	*func++ = 0;
	snprintf(buf, cap, "%s:%s in %s", dlbn_hot_short_file(tmp), line, func);
}

static const struct dlbn_callsite *train_callsite(const struct dlbn_report_input *in)
{
	const struct dlbn_hotspots *h = in->hot;
	if (!h || !h->ncallsites)
		return NULL;
	for (size_t i = 0; i < h->ncallsites; i++)
		if (h->callsites[i].loader == in->m->loaders.train)
			return &h->callsites[i];
	return &h->callsites[0];
}

void dlbn_callsites_text(FILE *out, const struct dlbn_report_input *in)
{
	const struct dlbn_hotspots *h = in->hot;
	for (size_t i = 0; h && i < h->ncallsites; i++) {
		const struct dlbn_callsite *c = &h->callsites[i];
		const char *nl = strchr(c->text, '\n');
		char shown[420], lab[40];
		frame_short(c->text, nl ? (size_t)(nl - c->text) : strlen(c->text), shown,
			    sizeof(shown));
		fprintf(out, "  loop's next()    %s (%s)\n", shown,
			loader_label(c->loader, lab, sizeof(lab)));
	}
}

static int interpreter_frame(const char *f)
{
	return strstr(f, "_PyEval_") || strstr(f, "(python3") || strstr(f, "libpython") ||
	       strstr(f, "_PyObject_") || strstr(f, "_PyFunction_") || strstr(f, "PyObject_Call");
}

static void native_frames(FILE *out, const struct dlbn_wait_stack *s, const char *indent,
			  int markdown)
{
	int shown = 0, folded = 0;
	for (int i = 0; i < s->nframes && shown < NATIVE_FRAMES; i++) {
		if (interpreter_frame(s->frame[i])) {
			folded++;
			continue;
		}
		if (folded) {
			fprintf(out, "%s   (%d interpreter frame(s))\n", indent, folded);
			folded = 0;
		}
		fprintf(out, "%s#%-2d ", indent, i);
		for (const char *c = s->frame[i]; *c; c++)
			fputc(markdown && *c == '`' ? '\'' : *c, out);
		fputc('\n', out);
		shown++;
	}
	if (folded)
		fprintf(out, "%s   (%d interpreter frame(s))\n", indent, folded);
}

static void python_frames(FILE *out, const struct dlbn_callsite *c, const char *indent)
{
	const char *p = c->text;
	while (*p) {
		const char *nl = strchr(p, '\n');
		size_t len = nl ? (size_t)(nl - p) : strlen(p);
		char shown[420];
		frame_short(p, len, shown, sizeof(shown));
		fprintf(out, "%s%s\n", indent, shown);
		p += len + (nl ? 1 : 0);
	}
}

void dlbn_waits_text(FILE *out, const struct dlbn_report_input *in)
{
	const struct dlbn_model *m = in->m;
	const struct dlbn_wait_stacks *ws = &m->stacks;
	const struct dlbn_callsite *cs = train_callsite(in);
	if (!ws->nkept && !cs)
		return;
	if (!ws->nkept) {
		fputs("\nWhere the loop waits (Python, innermost first)\n", out);
		python_frames(out, cs, "      ");
		return;
	}
	fprintf(out, "\nLongest waits (%s, innermost first; %llu native stack(s) captured)\n",
		cs ? "Python frames of the loop's next()" : "native stacks",
		(unsigned long long)ws->stacks_seen);
	const struct dlbn_window *w = m->steps ? &m->steps->w : NULL;
	for (size_t k = 0; k < ws->nkept && k < WAITS_SHOWN; k++) {
		const struct dlbn_wait_stack *s = &ws->kept[k];
		int inwin = w && w->window && s->wait_begin >= w->ws && s->wait_begin < w->we;
		fprintf(out, "  %.2f ms at t=%.3f s in %s (tid %d)%s\n", (double)s->wait_ns / 1e6,
			(double)(s->wait_begin - m->t0) / 1e9, dlbn_wait_call_name(s->wait_type),
			s->tid, inwin ? "" : " (outside the window: warm-up or drain)");
		if (cs)
			python_frames(out, cs, "      ");
		if (!cs || in->native_stacks)
			native_frames(out, s, "      ", 0);
	}
	if (ws->nkept > WAITS_SHOWN || (cs && !in->native_stacks))
		fprintf(out, "  (--format json has all %zu with their native frames%s)\n",
			ws->nkept, cs && !in->native_stacks ? "; --native-stacks shows them" : "");
}

void dlbn_waits_markdown(FILE *out, const struct dlbn_report_input *in)
{
	const struct dlbn_model *m = in->m;
	const struct dlbn_wait_stacks *ws = &m->stacks;
	const struct dlbn_callsite *cs = train_callsite(in);
	if (!ws->nkept && !cs)
		return;
	fputs("\n### Where the loop waits\n\n", out);
	if (cs) {
		fputs("The loop's `next()` (Python, innermost first):\n\n```\n", out);
		python_frames(out, cs, "");
		fputs("```\n\n", out);
	}
	for (size_t k = 0; k < ws->nkept && k < WAITS_SHOWN; k++) {
		const struct dlbn_wait_stack *s = &ws->kept[k];
		fprintf(out, "%.2f ms wait at t = %.3f s in %s%s\n\n", (double)s->wait_ns / 1e6,
			(double)(s->wait_begin - m->t0) / 1e9, dlbn_wait_call_name(s->wait_type),
			!cs || in->native_stacks ? " (native stack):" : ".");
		if (!cs || in->native_stacks) {
			fputs("```\n", out);
			native_frames(out, s, "", 1);
			fputs("```\n\n", out);
		}
	}
}
