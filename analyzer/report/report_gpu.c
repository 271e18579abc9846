/*
 * report_gpu.c - the GPU section of the reports: the text block and the
 * "gpu" JSON value, from the figures gpu.c computed.
 */
#include <stdio.h>

#include "gpu/gpu.h"
#include "util/json.h"
#include "report/report.h"

static void json_host(FILE *out, const struct dlbn_gpu_host *h, size_t steps)
{
	fprintf(out, "{\"launches\":%lld,\"syncs\":%lld,\"host_sync_s\":{", (long long)h->launches,
		(long long)h->syncs);
	fputs("\"stream\":", out);
	dlbn_json_number(out, (double)h->sync_ns[DLBN_GPU_SYNC_STREAM] / 1e9);
	fputs(",\"context\":", out);
	dlbn_json_number(out, (double)h->sync_ns[DLBN_GPU_SYNC_CTX] / 1e9);
	fputs(",\"event\":", out);
	dlbn_json_number(out, (double)h->sync_ns[DLBN_GPU_SYNC_EVENT] / 1e9);
	fputs(",\"other\":", out);
	dlbn_json_number(out, (double)h->sync_ns[DLBN_GPU_SYNC_OTHER] / 1e9);
	fputs(",\"total\":", out);
	dlbn_json_number(out, (double)dlbn_gpu_sync_total(h) / 1e9);
	fputs("},\"copy_blocked_s\":{\"htod\":", out);
	dlbn_json_number(out, (double)h->copy_blocked_ns[DLBN_GPU_COPY_HTOD] / 1e9);
	fputs(",\"dtoh\":", out);
	dlbn_json_number(out, (double)h->copy_blocked_ns[DLBN_GPU_COPY_DTOH] / 1e9);
	fputs(",\"dtod\":", out);
	dlbn_json_number(out, (double)h->copy_blocked_ns[DLBN_GPU_COPY_DTOD] / 1e9);
	fputs(",\"other\":", out);
	dlbn_json_number(out, (double)h->copy_blocked_ns[DLBN_GPU_COPY_OTHER] / 1e9);
	fprintf(out, "},\"pageable_h2d\":{\"count\":%lld,\"bytes\":%lld,\"blocked_s\":",
		(long long)h->pageable_h2d, (long long)h->pageable_h2d_bytes);
	dlbn_json_number(out, (double)h->pageable_h2d_ns / 1e9);
	fputs(",\"per_step_ms\":", out);
	dlbn_json_number(out, steps ? (double)h->pageable_h2d_ns / 1e6 / (double)steps : 0);
	fprintf(out,
		"},\"pinned_h2d\":{\"count\":%lld,\"bytes\":%lld},\"async_copies\":%lld,"
		"\"sync_copies\":%lld}",
		(long long)h->pinned_h2d, (long long)h->pinned_h2d_bytes,
		(long long)h->async_copies, (long long)h->sync_copies);
}

static void json_waits(FILE *out, size_t waits, size_t probed, size_t no_work, size_t unknown,
		       double wait_s, double busy_s, double idle_s, double unknown_s)
{
	fprintf(out,
		"\"waits\":%zu,\"waits_with_probe\":%zu,\"waits_no_gpu_work\":%zu,"
		"\"waits_unknown\":%zu,\"wait_s\":",
		waits, probed, no_work, unknown);
	dlbn_json_number(out, wait_s);
	fputs(",\"wait_gpu_busy_s\":", out);
	dlbn_json_number(out, busy_s);
	fputs(",\"wait_gpu_idle_s\":", out);
	dlbn_json_number(out, idle_s);
	fputs(",\"wait_unknown_s\":", out);
	dlbn_json_number(out, unknown_s);
	fputs(",\"wait_gpu_busy_fraction\":", out);
	if (wait_s > 0)
		dlbn_json_number(out, busy_s / wait_s);
	else
		fputs("null", out);
}

void dlbn_gpu_json(FILE *out, const struct dlbn_gpu *g)
{
	const struct dlbn_gpu_win *w = &g->win;

	fprintf(out, "{\"present\":%s,\"streams\":%zu,\"streams_saturated\":%s,",
		g->present ? "true" : "false", g->streams, g->streams_saturated ? "true" : "false");
	fprintf(out,
		"\"probes\":%llu,\"probes_resolved\":%llu,\"probes_lost\":%llu,"
		"\"probes_lost_bounded\":%llu,\"probes_unresolved\":%llu,"
		"\"probing_stopped\":%s,\"driver_version\":%d,",
		(unsigned long long)g->probes, (unsigned long long)g->probes_resolved,
		(unsigned long long)g->probes_lost, (unsigned long long)g->probes_lost_bounded,
		(unsigned long long)g->probes_unresolved, g->probing_stopped ? "true" : "false",
		g->driver_version);
	json_waits(out, g->waits, g->waits_with_probe, g->waits_no_work, g->waits_unknown,
		   g->wait_s, g->wait_gpu_busy_s, g->wait_gpu_idle_s, g->wait_unknown_s);
	fputs(",\"run\":", out);
	json_host(out, &g->host, g->waits);
	fputs(",\"window\":", out);
	if (w->valid) {
		fprintf(out, "{\"steps\":%zu,\"wall_s\":", w->steps);
		dlbn_json_number(out, w->wall_s);
		fputc(',', out);
		json_waits(out, w->waits, w->waits_with_probe, w->waits_no_work, w->waits_unknown,
			   w->wait_s, w->wait_gpu_busy_s, w->wait_gpu_idle_s, w->wait_unknown_s);
		fputs(",\"wait_unknown_idle_s\":", out);
		dlbn_json_number(out, w->wait_unknown_idle_s);
		fputs(",\"host_sync_fraction\":", out);
		dlbn_json_number(out, w->wall_s > 0 ? (double)dlbn_gpu_sync_total(&w->host) / 1e9 /
							      w->wall_s
						    : 0);
		fputs(",\"host\":", out);
		json_host(out, &w->host, w->steps);
		fputc('}', out);
	} else {
		fputs("null", out);
	}
	fputs(",\"driver_notes\":[", out);
	for (size_t i = 0; i < g->nnotes; i++) {
		if (i)
			fputc(',', out);
		dlbn_json_str(out, g->notes[i]);
	}
	fputs("],\"reasons\":[", out);
	for (size_t i = 0; i < g->nreasons; i++) {
		if (i)
			fputc(',', out);
		dlbn_json_str(out, g->reasons[i]);
	}
	fputs("]}", out);
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
