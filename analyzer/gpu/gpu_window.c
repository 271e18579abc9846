/*
 * gpu_window.c - the GPU figures of a window of steps and their evidence
 * lines: how much of the loader wait the GPU sat idle, host time blocked
 * in synchronisations, pageable host-to-device copies, missing probes.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "gpu/gpu_pass.h"
#include "util/lines.h"

static void add_reason(struct dlbn_gpu *g, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void add_reason(struct dlbn_gpu *g, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	g->nreasons += dlbn_lines_vadd(DLBN_LINES(g->reasons), g->nreasons, fmt, ap);
	va_end(ap);
}

static const char *sync_api_name(int k)
{
	static const char *const names[DLBN_GPU_SYNC_KINDS] = {
		"cuStreamSynchronize", "cuCtxSynchronize", "cuEventSynchronize", "other syncs"};
	return names[k];
}

/* Thresholds of the evidence lines (shares of the window / of the wait). */
#define HIDDEN_SHARE	 0.5  /* wait mostly GPU-busy: prefetch hides it */
#define SYNC_NOTE_SHARE	 0.05 /* host blocked in syncs worth a line */
#define SYNC_BOUND_SHARE 0.2  /* ... and called compute-bound evidence */

static void reason_split(struct dlbn_gpu *g, const struct dlbn_gpu_win *w)
{
	if (w->waits == 0 || w->wait_s <= 0) {
		add_reason(g, "no loader wait to split in the window");
		return;
	}
	double busy = w->wait_gpu_busy_s / w->wait_s;

	if (busy >= HIDDEN_SHARE)
		add_reason(g,
			   "the GPU still had queued work during %.0f%% of the loader wait "
			   "(%.3f of %.3f s): prefetch hides it, only the GPU-idle %.3f s is stall",
			   busy * 100, w->wait_gpu_busy_s, w->wait_s, w->wait_gpu_idle_s);
	else
		add_reason(g,
			   "the GPU had no work left during %.0f%% of the loader wait (%.3f of "
			   "%.3f s, %.2f ms per step, %.1f%% of the window): that part is the "
			   "data-loading stall",
			   (1 - busy) * 100, w->wait_gpu_idle_s, w->wait_s,
			   w->wait_gpu_idle_s * 1e3 / (double)w->waits,
			   w->wall_s > 0 ? w->wait_gpu_idle_s / w->wall_s * 100 : 0);
}

static void reason_sync(struct dlbn_gpu *g, const struct dlbn_gpu_win *w)
{
	int64_t total = dlbn_gpu_sync_total(&w->host);
	int top = 0;
	double share;

	if (w->wall_s <= 0 || total <= 0)
		return;
	for (int k = 1; k < DLBN_GPU_SYNC_KINDS; k++)
		if (w->host.sync_ns[k] > w->host.sync_ns[top])
			top = k;
	share = (double)total / 1e9 / w->wall_s;
	if (share >= SYNC_BOUND_SHARE)
		add_reason(g,
			   "host blocked on the GPU %.0f%% of the window (%.3f s, mostly in %s, "
			   "%lld syncs): compute-bound, the GPU sets the pace",
			   share * 100, (double)total / 1e9, sync_api_name(top),
			   (long long)w->host.syncs);
	else if (share >= SYNC_NOTE_SHARE)
		add_reason(g, "host blocked on the GPU %.0f%% of the window (%.3f s, mostly in %s)",
			   share * 100, (double)total / 1e9, sync_api_name(top));
}

static void reason_pageable(struct dlbn_gpu *g, const struct dlbn_gpu_win *w)
{
	const struct dlbn_gpu_host *h = &w->host;
	double per_step_ms, mib;

	if (h->pageable_h2d == 0)
		return;
	per_step_ms = w->steps ? (double)h->pageable_h2d_ns / 1e6 / (double)w->steps : 0;
	mib = (double)h->pageable_h2d_bytes / (1024.0 * 1024.0);
	add_reason(g,
		   "H2D copies from pageable memory block the host %.2f ms per step (%lld copies, "
		   "%.1f MiB in the window): use pin_memory=True with .to(device, "
		   "non_blocking=True); Replay keeps these copies, so they are not a loading stall",
		   per_step_ms, (long long)h->pageable_h2d, mib);
}

static void reason_evidence(struct dlbn_gpu *g, const struct dlbn_gpu_win *w)
{
	if (w->waits_unknown) {
		const char *why = g->probing_stopped ? "probing stopped"
				  : g->probes_lost   ? "probes lost"
				  : g->probes == 0   ? "no probes recorded"
						     : "work on unprobed streams";
		add_reason(
			g,
			"%zu of %zu waits (%.0f%% of the wait time) had no usable GPU probe (%s): "
			"their unexplained part counts as GPU-idle, so the stall is an upper bound",
			w->waits_unknown, w->waits,
			w->wait_s > 0 ? w->wait_unknown_s / w->wait_s * 100 : 0, why);
	}
	if (g->probes_lost)
		add_reason(g,
			   "%llu of %llu GPU probes lost (%llu given up unfinished: the GPU was "
			   "still busy then)",
			   (unsigned long long)g->probes_lost, (unsigned long long)g->probes,
			   (unsigned long long)g->probes_lost_bounded);
	for (size_t i = 0; i < g->nnotes && g->probing_stopped; i++)
		if (strstr(g->notes[i], "probe"))
			add_reason(g, "GPU probing stopped during the run: %s", g->notes[i]);
}

static void window_reasons(struct dlbn_gpu *g)
{
	reason_split(g, &g->win);
	reason_sync(g, &g->win);
	reason_pageable(g, &g->win);
	reason_evidence(g, &g->win);
	if (g->steps_forced || g->records_forced || g->waits_cut)
		add_reason(g,
			   "the GPU split ran out of lookahead (a lost probe never superseded, or "
			   "a step that never closed, held too much back): %llu step(s) split "
			   "early, %llu of them missing a probe's answer (unknown waits); %llu "
			   "CUDA record(s) weighed early; %llu wait(s) cut short (unknown)",
			   (unsigned long long)g->steps_forced,
			   (unsigned long long)g->steps_forced_unknown,
			   (unsigned long long)g->records_forced, (unsigned long long)g->waits_cut);
}

/* Clear the window and its lines; 0 (with the CPU-only line) without GPU work. */
static int window_begin(struct dlbn_gpu *g, int64_t ws, int64_t we)
{
	g->nreasons = 0;
	memset(&g->win, 0, sizeof(g->win));
	if (!g->present) {
		add_reason(g, "no GPU activity recorded in the training process: the exposed "
			      "wait is the stall (CPU-only rule)");
		return 0;
	}
	g->win.wall_s = we > ws ? ((double)we - (double)ws) / 1e9 : 0; /* ws may be INT64_MIN */
	return 1;
}

void dlbn_gpu_finish(struct dlbn_gpu *g, int whole, int k, int64_t ws, int64_t we)
{
	if (!window_begin(g, ws, we))
		return;
	/* Whole run: the Python view if it has steps (exact fetches). */
	const struct dlbn_gpu_win *all =
		&g->view_all[whole >= 0 && whole < DLBN_GPU_VIEWS ? whole : 1];
	g->waits = all->waits;
	g->waits_with_probe = all->waits_with_probe;
	g->waits_no_work = all->waits_no_work;
	g->waits_unknown = all->waits_unknown;
	g->wait_s = all->wait_s;
	g->wait_gpu_busy_s = all->wait_gpu_busy_s;
	g->wait_gpu_idle_s = all->wait_gpu_idle_s;
	g->wait_unknown_s = all->wait_unknown_s;
	if (k < 0 || k >= DLBN_GPU_VIEWS)
		return;
	double wall_s = g->win.wall_s;
	g->win = g->view_win[k];
	g->win.valid = 1;
	g->win.wall_s = wall_s;
	window_reasons(g);
}

void dlbn_gpu_window(struct dlbn_gpu *g, const struct dlbn_steps *st, int64_t ws, int64_t we)
{
	if (!window_begin(g, ws, we) || !st)
		return;
	g->win.valid = 1;
	for (size_t i = 0; st->gs && i < st->nkept; i++)
		if (st->v[i].end > ws && st->v[i].end <= we)
			gpu_win_add(&g->win, &st->v[i], &st->gs[i]);
	window_reasons(g);
}

const struct dlbn_gpu_step *dlbn_gpu_steps_of(const struct dlbn_gpu *g, const struct dlbn_steps *st)
{
	if (!g || !g->present || !st)
		return NULL;
	return st->gs;
}
