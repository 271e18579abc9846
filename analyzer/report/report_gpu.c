/*
 * report_gpu.c - the GPU section of the reports: the text block and the
 * "gpu" JSON value, from the figures gpu.c computed.
 */
#include <stdio.h>

#include "gpu/gpu.h"
#include "report/report.h"
#include "util/json.h"

static double seconds(int64_t ns)
{
	return (double)ns / 1e9;
}

/* "host_sync_s" and "copy_blocked_s": where the host blocked, by kind. */
static void json_blocked(FILE *out, const struct dlbn_gpu_host *h, int *outer)
{
	int first = dlbn_json_open(out, "host_sync_s", '{', outer);
	dlbn_json_key_number(out, "stream", seconds(h->sync_ns[DLBN_GPU_SYNC_STREAM]), &first);
	dlbn_json_key_number(out, "context", seconds(h->sync_ns[DLBN_GPU_SYNC_CTX]), &first);
	dlbn_json_key_number(out, "event", seconds(h->sync_ns[DLBN_GPU_SYNC_EVENT]), &first);
	dlbn_json_key_number(out, "other", seconds(h->sync_ns[DLBN_GPU_SYNC_OTHER]), &first);
	dlbn_json_key_number(out, "total", seconds(dlbn_gpu_sync_total(h)), &first);
	fputc('}', out);
	first = dlbn_json_open(out, "copy_blocked_s", '{', outer);
	dlbn_json_key_number(out, "htod", seconds(h->copy_blocked_ns[DLBN_GPU_COPY_HTOD]), &first);
	dlbn_json_key_number(out, "dtoh", seconds(h->copy_blocked_ns[DLBN_GPU_COPY_DTOH]), &first);
	dlbn_json_key_number(out, "dtod", seconds(h->copy_blocked_ns[DLBN_GPU_COPY_DTOD]), &first);
	dlbn_json_key_number(out, "other", seconds(h->copy_blocked_ns[DLBN_GPU_COPY_OTHER]),
			     &first);
	fputc('}', out);
}

static void json_host(FILE *out, const char *k, const struct dlbn_gpu_host *h, size_t steps,
		      int *outer)
{
	int first = dlbn_json_open(out, k, '{', outer);
	dlbn_json_key_int(out, "launches", h->launches, &first);
	dlbn_json_key_int(out, "syncs", h->syncs, &first);
	json_blocked(out, h, &first);
	int f = dlbn_json_open(out, "pageable_h2d", '{', &first);
	dlbn_json_key_int(out, "count", h->pageable_h2d, &f);
	dlbn_json_key_int(out, "bytes", h->pageable_h2d_bytes, &f);
	dlbn_json_key_number(out, "blocked_s", seconds(h->pageable_h2d_ns), &f);
	dlbn_json_key_number(out, "per_step_ms",
			     steps ? (double)h->pageable_h2d_ns / 1e6 / (double)steps : 0, &f);
	fputc('}', out);
	f = dlbn_json_open(out, "pinned_h2d", '{', &first);
	dlbn_json_key_int(out, "count", h->pinned_h2d, &f);
	dlbn_json_key_int(out, "bytes", h->pinned_h2d_bytes, &f);
	fputc('}', out);
	dlbn_json_key_int(out, "async_copies", h->async_copies, &first);
	dlbn_json_key_int(out, "sync_copies", h->sync_copies, &first);
	fputc('}', out);
}

/* The waits' keys, the same for the run and the window. */
struct gpu_waits {
	size_t waits, probed, no_work, unknown;
	double wait_s, busy_s, idle_s, unknown_s;
};

static void json_waits(FILE *out, const struct gpu_waits *w, int *first)
{
	dlbn_json_key_uint(out, "waits", w->waits, first);
	dlbn_json_key_uint(out, "waits_with_probe", w->probed, first);
	dlbn_json_key_uint(out, "waits_no_gpu_work", w->no_work, first);
	dlbn_json_key_uint(out, "waits_unknown", w->unknown, first);
	dlbn_json_key_number(out, "wait_s", w->wait_s, first);
	dlbn_json_key_number(out, "wait_gpu_busy_s", w->busy_s, first);
	dlbn_json_key_number(out, "wait_gpu_idle_s", w->idle_s, first);
	dlbn_json_key_number(out, "wait_unknown_s", w->unknown_s, first);
	dlbn_json_key_number_or_null(out, "wait_gpu_busy_fraction",
				     w->wait_s > 0 ? w->busy_s / w->wait_s : 0, w->wait_s > 0,
				     first);
}

/* "window": the same figures over the verdict's window (null: none). */
static void json_window(FILE *out, const struct dlbn_gpu_win *w, int *outer)
{
	if (!w->valid) {
		dlbn_json_key_null(out, "window", outer);
		return;
	}
	const struct gpu_waits waits = {w->waits,	    w->waits_with_probe, w->waits_no_work,
					w->waits_unknown,   w->wait_s,		 w->wait_gpu_busy_s,
					w->wait_gpu_idle_s, w->wait_unknown_s};
	int first = dlbn_json_open(out, "window", '{', outer);
	dlbn_json_key_uint(out, "steps", w->steps, &first);
	dlbn_json_key_number(out, "wall_s", w->wall_s, &first);
	json_waits(out, &waits, &first);
	dlbn_json_key_number(out, "wait_unknown_idle_s", w->wait_unknown_idle_s, &first);
	dlbn_json_key_number(out, "host_sync_fraction",
			     w->wall_s > 0 ? seconds(dlbn_gpu_sync_total(&w->host)) / w->wall_s : 0,
			     &first);
	json_host(out, "host", &w->host, w->steps, &first);
	fputc('}', out);
}

void dlbn_gpu_json(FILE *out, const struct dlbn_gpu *g)
{
	const struct gpu_waits waits = {g->waits,	    g->waits_with_probe, g->waits_no_work,
					g->waits_unknown,   g->wait_s,		 g->wait_gpu_busy_s,
					g->wait_gpu_idle_s, g->wait_unknown_s};
	int first = 1;
	fputc('{', out);
	dlbn_json_key_bool(out, "present", g->present, &first);
	dlbn_json_key_uint(out, "streams", g->streams, &first);
	dlbn_json_key_bool(out, "streams_saturated", g->streams_saturated, &first);
	dlbn_json_key_uint(out, "probes", g->probes, &first);
	dlbn_json_key_uint(out, "probes_resolved", g->probes_resolved, &first);
	dlbn_json_key_uint(out, "probes_lost", g->probes_lost, &first);
	dlbn_json_key_uint(out, "probes_lost_bounded", g->probes_lost_bounded, &first);
	dlbn_json_key_uint(out, "probes_unresolved", g->probes_unresolved, &first);
	dlbn_json_key_bool(out, "probing_stopped", g->probing_stopped, &first);
	dlbn_json_key_int(out, "driver_version", g->driver_version, &first);
	json_waits(out, &waits, &first);
	json_host(out, "run", &g->host, g->waits, &first);
	json_window(out, &g->win, &first);
	dlbn_json_key_lines(out, "driver_notes", DLBN_JSON_TABLE(g->notes), g->nnotes, &first);
	dlbn_json_key_lines(out, "reasons", DLBN_JSON_TABLE(g->reasons), g->nreasons, &first);
	fputc('}', out);
}

void dlbn_gpu_text(FILE *out, const struct dlbn_gpu *g)
{
	const struct dlbn_gpu_win *w = &g->win;

	fputs("GPU\n", out);
	if (!g->present) {
		fputs("  no GPU activity recorded: the exposed wait is the stall (CPU-only rule)\n",
		      out);
		return;
	}
	fprintf(out,
		"  %lld launches on %zu%s stream(s); %llu probes: %llu resolved, %llu lost, "
		"%llu unresolved\n",
		(long long)g->host.launches, g->streams, g->streams_saturated ? "+" : "",
		(unsigned long long)g->probes, (unsigned long long)g->probes_resolved,
		(unsigned long long)g->probes_lost, (unsigned long long)g->probes_unresolved);
	if (w->valid && w->wait_s > 0)
		fprintf(out,
			"  window loader wait %.3f s: GPU busy %.3f s (%.0f%%), GPU idle "
			"%.3f s (stall); %zu of %zu waits probed, %zu unknown\n",
			w->wait_s, w->wait_gpu_busy_s, w->wait_gpu_busy_s / w->wait_s * 100,
			w->wait_gpu_idle_s, w->waits_with_probe + w->waits_no_work, w->waits,
			w->waits_unknown);
	if (w->valid && w->wall_s > 0 && dlbn_gpu_sync_total(&w->host) > 0)
		fprintf(out,
			"  host blocked on the GPU %.3f s (%.0f%% of the window) in %lld syncs\n",
			(double)dlbn_gpu_sync_total(&w->host) / 1e9,
			(double)dlbn_gpu_sync_total(&w->host) / 1e9 / w->wall_s * 100,
			(long long)w->host.syncs);
	if (w->valid && w->host.pageable_h2d > 0)
		fprintf(out,
			"  pageable H2D: %lld copies, %.1f MiB, host in the copy calls %.3f s\n",
			(long long)w->host.pageable_h2d,
			(double)w->host.pageable_h2d_bytes / (1024.0 * 1024.0),
			(double)w->host.pageable_h2d_ns / 1e9);
	for (size_t i = 0; i < g->nreasons; i++)
		fprintf(out, "  - %s\n", g->reasons[i]);
}
