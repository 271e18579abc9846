/*
 * report_memory.c - the memory evidence (analysis/memory.h) in the
 * terminal report, Markdown and JSON ("memory", "failure"), and the
 * failed run's cause under the verdict.
 */
#include <math.h>
#include <string.h>

#include "report/report.h"
#include "util/json.h"

#define TEXT_ROWS 16

static void arrow(char *buf, size_t len, const double v[2])
{
	if (v[0] < 0 && v[1] < 0)
		snprintf(buf, len, "-");
	else if (v[0] < 0 || fabs(v[1] - v[0]) < 0.5)
		snprintf(buf, len, "%.0f", v[1] >= 0 ? v[1] : v[0]);
	else
		snprintf(buf, len, "%.0f -> %.0f", v[0], v[1]);
}

static void row_text(FILE *out, const struct dlbn_mem_row *r, const char *lead)
{
	char rss[32], pss[32], uss[32], growth[24] = "";
	arrow(rss, sizeof(rss), r->rss);
	arrow(pss, sizeof(pss), r->pss);
	arrow(uss, sizeof(uss), r->uss);
	if (r->growth_kib_per_batch >= 0)
		snprintf(growth, sizeof(growth), "%.1f", r->growth_kib_per_batch);
	fprintf(out, "  %-16s %8d %-9s %14s %14s %14s %10s%s\n", lead, r->pid,
		r->role == DLBN_ROLE_TRAINING ? "training" : "worker", rss, pss, uss, growth,
		r->ended == DLBN_MEM_END_SIGNAL ? "  (killed)" : "");
}

static void job_text(FILE *out, const struct dlbn_memory *mem)
{
	if (!mem->job)
		return;
	if (mem->cg_limit_mib > 0)
		fprintf(out,
			"  memory limit     %.0f MiB (memory cgroup v%d): %.0f MiB at the most "
			"(page cache included), %.0f MiB at the window's end (%.0f anonymous, %.0f "
			"shared memory, %.0f page cache)",
			mem->cg_limit_mib, mem->cg_version, mem->cg_peak_mib, mem->cg_usage_mib,
			mem->cg_anon_mib, mem->cg_shmem_mib, mem->cg_file_mib);
	else
		fprintf(out, "  memory limit     none found (%s)",
			mem->cg_version ? "the memory cgroup has no limit" : "no memory cgroup");
	if (mem->oom_kills > 0)
		fprintf(out, "; %ld OOM kill(s) during the run", mem->oom_kills);
	fputc('\n', out);
	fprintf(out, "  host memory      %.0f MiB, %.0f MiB available at the least",
		mem->host_total_mib, mem->host_avail_mib);
	if (mem->budget_mib > 0)
		fprintf(out, "; the job may hold %.0f MiB (%s), headroom %.0f MiB", mem->budget_mib,
			mem->budget_from, mem->headroom_mib);
	fputc('\n', out);
	if (mem->shm_size_mib > 0)
		fprintf(out, "  /dev/shm         %.0f MiB, %.0f MiB free at the least%s\n",
			mem->shm_size_mib, mem->shm_free_mib,
			mem->batch_shm_kib > 0 ? "" : " (no batch passed through it)");
	else
		fprintf(out, "  /dev/shm         none\n");
}

void dlbn_memory_text(FILE *out, const struct dlbn_analysis *a)
{
	const struct dlbn_memory *mem = &a->memory;
	if (!mem->present) {
		if (mem->job)
			job_text(out, mem);
		return;
	}
	fprintf(out, "  memory           %8s %-9s %14s %14s %14s %10s\n", "pid", "role", "rss MiB",
		"pss MiB", "private MiB", "KiB/batch");
	if (mem->has_main)
		row_text(out, &mem->main, "");
	for (size_t i = 0; i < mem->nrows && i < TEXT_ROWS; i++)
		row_text(out, &mem->workers[i], "");
	if (mem->nworkers > TEXT_ROWS)
		fprintf(out, "  %-16s (%zu more workers; --format json has %zu)\n", "",
			mem->nworkers - TEXT_ROWS, mem->nrows);
	if (mem->rollup)
		fprintf(out,
			"  %-16s %.0f MiB in all (PSS of the training process and its workers at "
			"the window's end; %.0f MiB of it pages they share, counted once)\n",
			"", mem->total_pss_mib, mem->shared_mib);
	else
		fprintf(out,
			"  %-16s no smaps_rollup samples: RSS only (a shared page counts in "
			"every process that maps it)\n",
			"");
	fprintf(out,
		"  %-16s sampling it took the recorder %.1f ms, %.3f%% of the processes' time "
		"(%.3f%% of the training process's, %.3f%% of the window)\n",
		"", mem->sampling_ms, mem->sampling_share * 100, mem->sampling_main_share * 100,
		mem->sampling_window_share * 100);
	job_text(out, mem);
}

void dlbn_failure_text(FILE *out, const struct dlbn_analysis *a)
{
	const struct dlbn_memory *mem = &a->memory;
	if (mem->failure == DLBN_FAIL_NONE)
		return;
	fprintf(out, "\nRUN FAILED: %s\n", mem->failure_line);
	if (mem->failure_detail[0])
		fprintf(out, "  %s\n", mem->failure_detail);
}

void dlbn_memory_markdown(FILE *out, const struct dlbn_analysis *a)
{
	const struct dlbn_memory *mem = &a->memory;
	if (mem->failure != DLBN_FAIL_NONE)
		fprintf(out, "\n**Run failed:** %s. %s\n", mem->failure_line, mem->failure_detail);
	if (!mem->present)
		return;
	fputs("\n### Memory\n\n| pid | role | RSS MiB | PSS MiB | private MiB | KiB a batch |\n"
	      "|---:|---|---:|---:|---:|---:|\n",
	      out);
	const struct dlbn_mem_row *rows[1 + DLBN_MEM_ROWS];
	size_t n = 0;
	if (mem->has_main)
		rows[n++] = &mem->main;
	for (size_t i = 0; i < mem->nrows; i++)
		rows[n++] = &mem->workers[i];
	for (size_t i = 0; i < n; i++) {
		char rss[32], pss[32], uss[32];
		arrow(rss, sizeof(rss), rows[i]->rss);
		arrow(pss, sizeof(pss), rows[i]->pss);
		arrow(uss, sizeof(uss), rows[i]->uss);
		fprintf(out, "| %d | %s | %s | %s | %s | ", rows[i]->pid,
			rows[i]->role == DLBN_ROLE_TRAINING ? "training" : "worker", rss, pss, uss);
		if (rows[i]->growth_kib_per_batch >= 0)
			fprintf(out, "%.1f |\n", rows[i]->growth_kib_per_batch);
		else
			fputs("- |\n", out);
	}
	if (mem->rollup)
		fprintf(out,
			"\nIn all %.0f MiB (PSS at the window's end), %.0f MiB of it shared.\n",
			mem->total_pss_mib, mem->shared_mib);
	if (mem->budget_mib > 0)
		fprintf(out, "The job may hold %.0f MiB (%s); headroom %.0f MiB.\n",
			mem->budget_mib, mem->budget_from, mem->headroom_mib);
	if (mem->shm_size_mib > 0)
		fprintf(out, "/dev/shm: %.0f MiB, %.0f MiB free at the least.\n", mem->shm_size_mib,
			mem->shm_free_mib);
}

static void pair_json(FILE *out, const char *k, const double v[2], int *first)
{
	if (v[0] < 0 && v[1] < 0) {
		dlbn_json_key_null(out, k, first);
		return;
	}
	int items = dlbn_json_open(out, k, '[', first);
	for (int i = 0; i < 2; i++) {
		dlbn_json_item(out, &items);
		if (v[i] < 0)
			fputs("null", out);
		else
			dlbn_json_number(out, v[i]);
	}
	fputc(']', out);
}

static void row_json(FILE *out, const struct dlbn_mem_row *r, int *items)
{
	int first = dlbn_json_open(out, NULL, '{', items);
	dlbn_json_key_int(out, "pid", r->pid, &first);
	dlbn_json_key_str(out, "role", r->role == DLBN_ROLE_TRAINING ? "training" : "worker",
			  &first);
	pair_json(out, "rss_mib", r->rss, &first);
	pair_json(out, "pss_mib", r->pss, &first);
	pair_json(out, "uss_mib", r->uss, &first);
	pair_json(out, "private_dirty_mib", r->private_dirty, &first);
	pair_json(out, "rollup_s", r->rollup_s, &first);
	dlbn_json_key_number_or_null(out, "shared_dirty_mib", r->shared_dirty, r->shared_dirty >= 0,
				     &first);
	dlbn_json_key_number_or_null(out, "peak_rss_mib", r->peak_rss, r->peak_rss >= 0, &first);
	dlbn_json_key_uint(out, "batches", r->batches, &first);
	dlbn_json_key_number_or_null(out, "growth_kib_per_batch", r->growth_kib_per_batch,
				     r->growth_kib_per_batch >= 0, &first);
	dlbn_json_key_str(out, "ended",
			  r->ended == DLBN_MEM_END_EXITED   ? "exited"
			  : r->ended == DLBN_MEM_END_SIGNAL ? "killed"
							    : "no",
			  &first);
	dlbn_json_key_int_or_null(out, "end_code", r->end_code, r->ended != DLBN_MEM_END_RUNNING,
				  &first);
	fputc('}', out);
}

static void num(FILE *out, const char *k, double v, int *first)
{
	dlbn_json_key_number_or_null(out, k, v, v >= 0 && isfinite(v), first);
}

static void cow_json(FILE *out, const struct dlbn_memory *mem, int *outer)
{
	int first = dlbn_json_open(out, "copy_on_write", '{', outer);
	dlbn_json_key_bool(out, "named", mem->cow, &first);
	num(out, "kib_per_batch", mem->cow_kib_per_batch, &first);
	num(out, "mib_per_worker", mem->cow_mib, &first);
	num(out, "copyable_mib", mem->copyable_mib, &first);
	num(out, "touched_mib", mem->touch_mib, &first);
	num(out, "first_kib_per_batch", mem->touch_kib, &first);
	dlbn_json_key_bool(out, "saturation_seen", mem->touch_saturates, &first);
	num(out, "copy_us_per_page", mem->cow ? mem->copy_us : -1, &first);
	dlbn_json_key_bool(out, "copy_us_fitted", mem->copy_us_fitted, &first);
	num(out, "worker_base_mib", mem->worker_base_mib, &first);
	double at = dlbn_memory_need_mib(mem, mem->run_workers, 1, NULL), horizon;
	num(out, "need_at_run_mib", at, &first);
	num(out, "worker_at_horizon_mib",
	    dlbn_memory_worker_at_mib(mem, mem->run_workers, &horizon), &first);
	num(out, "horizon_batches", horizon, &first); /* null: a long run */
	dlbn_json_key_int_or_null(out, "epoch_batches", mem->epoch_batches, mem->epoch_batches > 0,
				  &first);
	fputc('}', out);
}

static void job_json(FILE *out, const struct dlbn_memory *mem, int *outer)
{
	if (!mem->job) {
		dlbn_json_key_null(out, "job", outer);
		return;
	}
	int first = dlbn_json_open(out, "job", '{', outer);
	dlbn_json_key_int(out, "cgroup_version", mem->cg_version, &first);
	num(out, "limit_mib", mem->cg_limit_mib, &first);
	num(out, "usage_mib", mem->cg_usage_mib, &first);
	num(out, "peak_mib", mem->cg_peak_mib, &first);
	num(out, "anon_mib", mem->cg_anon_mib, &first);
	num(out, "shmem_mib", mem->cg_shmem_mib, &first);
	num(out, "page_cache_mib", mem->cg_file_mib, &first);
	dlbn_json_key_int_or_null(out, "oom_kills", mem->oom_kills, mem->oom_kills >= 0, &first);
	dlbn_json_key_int_or_null(out, "limit_hits", mem->limit_hits, mem->limit_hits >= 0, &first);
	num(out, "host_total_mib", mem->host_total_mib, &first);
	num(out, "host_available_mib", mem->host_avail_mib, &first);
	num(out, "shm_size_mib", mem->shm_size_mib, &first);
	num(out, "shm_free_mib", mem->shm_free_mib, &first);
	num(out, "rlimit_as_mib", mem->rlimit_as_mib, &first);
	num(out, "budget_mib", mem->budget_mib, &first);
	dlbn_json_key_str_or_null(out, "budget_from", mem->budget_from, mem->budget_mib > 0,
				  &first);
	dlbn_json_key_number_or_null(out, "headroom_mib", mem->headroom_mib, mem->budget_mib > 0,
				     &first);
	fputc('}', out);
}

void dlbn_memory_json(FILE *out, const struct dlbn_analysis *a, int *outer)
{
	const struct dlbn_memory *mem = &a->memory;
	if (!mem->present && !mem->job) {
		dlbn_json_key_null(out, "memory", outer);
	} else {
		int first = dlbn_json_open(out, "memory", '{', outer);
		dlbn_json_key_bool(out, "smaps_rollup", mem->rollup, &first);
		int items = dlbn_json_open(out, "processes", '[', &first);
		if (mem->has_main)
			row_json(out, &mem->main, &items);
		for (size_t i = 0; i < mem->nrows; i++)
			row_json(out, &mem->workers[i], &items);
		fputc(']', out);
		dlbn_json_key_uint(out, "workers", mem->nworkers, &first);
		dlbn_json_key_number_or_null(out, "total_pss_mib", mem->total_pss_mib, mem->rollup,
					     &first);
		dlbn_json_key_number_or_null(out, "held_mib", mem->held_mib, mem->rollup, &first);
		dlbn_json_key_number_or_null(out, "shared_mib", mem->shared_mib, mem->rollup,
					     &first);
		dlbn_json_key_number(out, "per_process_mib", mem->per_process_mib, &first);
		dlbn_json_key_number(out, "others_mib", mem->others_mib, &first);
		num(out, "worker_pss_mib", mem->worker_pss_mib, &first);
		num(out, "worker_uss_mib", mem->worker_uss_mib, &first);
		num(out, "batch_shm_kib", mem->batch_shm_kib > 0 ? mem->batch_shm_kib : -1, &first);
		dlbn_json_key_number(out, "sampling_ms", mem->sampling_ms, &first);
		dlbn_json_key_number(out, "sampling_share", mem->sampling_share, &first);
		dlbn_json_key_number(out, "sampling_training_share", mem->sampling_main_share,
				     &first);
		dlbn_json_key_number(out, "sampling_window_share", mem->sampling_window_share,
				     &first);
		cow_json(out, mem, &first);
		job_json(out, mem, &first);
		fputc('}', out);
	}
	if (mem->failure == DLBN_FAIL_NONE) {
		dlbn_json_key_null(out, "failure", outer);
		return;
	}
	int first = dlbn_json_open(out, "failure", '{', outer);
	dlbn_json_key_str(out, "kind", dlbn_mem_failure_name(mem->failure), &first);
	dlbn_json_key_number(out, "t_s", mem->failure_s, &first);
	dlbn_json_key_str(out, "text", mem->failure_line, &first);
	dlbn_json_key_str_or_null(out, "memory_before", mem->failure_detail,
				  mem->failure_detail[0] != 0, &first);
	fputc('}', out);
}
