/*
 * test_rank_summary.c - a rank's summary (analyzer/analysis/rank_summary.c) and the
 * job view built from rows alone (analyzer/analysis/ranks.c): a row written and
 * read back is the same row; a summary of another format, a newer version,
 * a missing member or broken JSON is refused with a reason; the trace a
 * summary names is found beside it when its path does not lead there;
 * hosts are grouped, a slow host and a lone slow rank on a healthy host
 * are told apart, the spread is right, missing ranks are named, and the
 * worst rank does not depend on the order rows are compared in.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "analysis/rank_summary.h"
#include "analysis/ranks.h"

static char dir[] = "/tmp/dlbn-test-summary-XXXXXX";

static void row_init(struct dlbn_rank_row *r, int rank, const char *host, double stall_ms)
{
	memset(r, 0, sizeof(*r));
	r->rank = rank;
	r->rank_known = 1;
	r->input_index = (size_t)rank;
	r->local_rank = rank % 8;
	r->world_size = 64;
	snprintf(r->host, sizeof(r->host), "%s", host);
	snprintf(r->trace, sizeof(r->trace), "/nowhere/r%d.bin", rank);
	r->verdict = stall_ms > 3 ? DLBN_VERDICT_DETECTED : DLBN_VERDICT_NOT_DETECTED;
	r->step_ms = 20;
	r->stall_ms_per_step = stall_ms;
	r->stall_fraction = stall_ms / 20;
	r->speedup = 20 / (20 - stall_ms);
	r->loop_ms = 20 - stall_ms;
	r->steps_window = 100;
	r->sync_s = -1;
	r->mean_busy = -1;
	r->num_workers = -1;
	snprintf(r->cause, sizeof(r->cause), "%s", stall_ms > 3 ? "storage" : "none");
}

static void test_round_trip(void)
{
	struct dlbn_rank_row w, r;
	char path[400], err[300];
	row_init(&w, 17, "node-a", 6.5);
	w.input = "x";
	w.state = DLBN_RANK_CUT;
	snprintf(w.state_note, sizeof(w.state_note), "the trace file is cut short");
	snprintf(w.view, sizeof(w.view), "python");
	w.num_workers = 4;
	w.nworkers = 4;
	w.mean_busy = 0.93;
	w.records = 123456789012ULL;
	w.nloaders = 2;
	snprintf(w.loaders[0].kind, sizeof(w.loaders[0].kind), "dataloader");
	snprintf(w.loaders[0].desc, sizeof(w.loaders[0].desc), "DataLoader, 4 workers, batch 64");
	w.loaders[0].training = 1;
	w.loaders[0].num_workers = 4;
	w.loaders[0].batch_size = 64;
	w.loaders[0].wait_s = 1.25;
	w.loaders[1].num_workers = w.loaders[1].batch_size = -1;
	w.nhot = 1;
	snprintf(w.hot[0].name, sizeof(w.hot[0].name), "decode \"jpeg\"\n");
	snprintf(w.hot[0].where, sizeof(w.hot[0].where), "ds.py:12");
	w.hot[0].share = 0.5;
	w.nreasons = 2;
	snprintf(w.reasons[0], DLBN_LINE, "reason one");
	snprintf(w.reasons[1], DLBN_LINE, "reason \\two\\ with a tab\t");
	w.nrecs = 1;
	snprintf(w.recs[0], DLBN_LINE, "num_workers 4 -> 8");
	snprintf(path, sizeof(path), "%s/r17.summary.json", dir);
	CHECK(dlbn_summary_write(path, &w, "9.9.9", err, sizeof(err)) == 0, "write: %s", err);
	CHECK(dlbn_summary_sniff(path) == 1, "sniff: a summary is a JSON object");
	memset(&r, 0x55, sizeof(r));
	CHECK(dlbn_summary_read(path, 3, &r, err, sizeof(err)) == 0, "read: %s", err);
	CHECK(r.source == DLBN_RANK_FROM_SUMMARY && r.input_index == 3 && r.rank == 17 &&
		      r.rank_known && r.local_rank == 1 && r.world_size == 64,
	      "read: rank, local rank and world size back (%d %d %d)", r.rank, r.local_rank,
	      r.world_size);
	CHECK(!strcmp(r.host, "node-a") && !strcmp(r.trace, "/nowhere/r17.bin") &&
		      r.state == DLBN_RANK_CUT && !strcmp(r.state_note, w.state_note),
	      "read: host, trace, state");
	CHECK(r.verdict == DLBN_VERDICT_DETECTED && r.speedup > 1.4814 && r.speedup < 1.4816 &&
		      r.stall_ms_per_step == 6.5 && r.sync_s == -1 && r.mean_busy > 0.929 &&
		      r.records == 123456789012ULL && !strcmp(r.cause, "storage"),
	      "read: verdict and figures (unknowns back as unknown)");
	CHECK(r.nloaders == 2 && r.loaders[0].batch_size == 64 && r.loaders[1].batch_size == -1 &&
		      !strcmp(r.loaders[0].desc, w.loaders[0].desc),
	      "read: loaders");
	CHECK(r.nhot == 1 && !strcmp(r.hot[0].name, w.hot[0].name) && r.hot[0].share == 0.5,
	      "read: hot spot with quotes and a newline");
	CHECK(r.nreasons == 2 && !strcmp(r.reasons[1], w.reasons[1]) && r.nrecs == 1 &&
		      r.nwarnings == 0,
	      "read: the report's lines");
	FILE *f = fopen(path, "rb");
	fseek(f, 0, SEEK_END);
	long size = ftell(f);
	fclose(f);
	CHECK(size > 0 && size < DLBN_SUMMARY_MAX_BYTES, "size: %ld bytes", size);
}

/* A trace name that is not UTF-8, every digit of a double, counts past
 * 2^53: written and read back the same. */
static void test_exact_round_trip(void)
{
	struct dlbn_rank_row w, r;
	char path[400], err[300];
	row_init(&w, 2, "h\xe9te", 1);
	snprintf(w.trace, sizeof(w.trace), "/data/caf\xe9-r2.bin");
	w.speedup = 1.0 / 3.0;
	w.records = (1ULL << 60) + 7;
	snprintf(path, sizeof(path), "%s/exact.summary.json", dir);
	CHECK(dlbn_summary_write(path, &w, "1", err, sizeof(err)) == 0, "write: %s", err);
	CHECK(dlbn_summary_read(path, 0, &r, err, sizeof(err)) == 0, "read: %s", err);
	CHECK(!strcmp(r.trace, w.trace) && !strcmp(r.host, w.host),
	      "bytes that are not UTF-8 come back as they were");
	CHECK(r.speedup == w.speedup && r.records == w.records,
	      "a double and a 64-bit count come back exactly");
	r.input_index = w.input_index;
	CHECK(!dlbn_rank_row_worse(&r, &w) && !dlbn_rank_row_worse(&w, &r),
	      "a row read back ties with itself");
}

static void refused(const char *text, const char *why)
{
	struct dlbn_rank_row r;
	char err[300] = "";
	memset(&r, 0, sizeof(r));
	int rc = dlbn_summary_parse(text, strlen(text), &r, err, sizeof(err));
	CHECK(rc == -1 && strstr(err, why) != NULL, "refused (%s): %s", why, err);
}

static void test_refusals(void)
{
	refused("{\"format\":\"other\",\"version\":1}", "not a dlbn rank summary");
	refused("{\"format\":\"dlbn-rank-summary\",\"version\":2,\"verdict\":\"DETECTED\"}",
		"summary version 2");
	refused("{\"format\":\"dlbn-rank-summary\",\"version\":1,\"trace\":\"t.bin\"}",
		"verdict or trace missing");
	refused("{\"format\":\"dlbn-rank-summary\",\"version\":1,\"verdict\":\"SO_SO\"}",
		"unknown verdict");
	refused("{\"format\":\"dlbn-rank-summary\",\"version\":1,\"stall_s\":null}",
		"may not be null");
	refused("{\"format\":\"dlbn-rank-summary\",\"version\":1,", "expected a string");
	refused("[1,2]", "no JSON object");
	refused("{\"format\":\"dlbn-rank-summary\",\"version\":1e300}", "summary version");
	refused("{\"format\":\"dlbn-rank-summary\",\"version\":1,\"workers\":1e30}",
		"\"workers\" out of range");
	refused("{\"format\":\"dlbn-rank-summary\",\"version\":1,\"records\":1e30}",
		"expected a whole number");
	refused("{\"format\":\"dlbn-rank-summary\",\"version\":1,\"records\":"
		"99999999999999999999999}",
		"expected a whole number");
	refused("{\"format\":\"dlbn-rank-summary\",\"version\":1,\"host\":\"a\\u12x4\"}",
		"bad \\u escape");
	refused("{\"format\":\"dlbn-rank-summary\",\"version\":1,\"verdict\":\"DETECTED\","
		"\"trace\":\"t\"} {}",
		"trailing data");
	struct dlbn_rank_row r;
	char err[300];
	const char *ok = "{\"format\":\"dlbn-rank-summary\",\"version\":1,\"verdict\":"
			 "\"POTENTIAL\",\"trace\":\"t.bin\",\"future_key\":{\"a\":[1,{\"b\":"
			 "null}]},\"rank\":null}";
	memset(&r, 0, sizeof(r));
	r.input_index = 5;
	CHECK(dlbn_summary_parse(ok, strlen(ok), &r, err, sizeof(err)) == 0 && r.rank == 5 &&
		      !r.rank_known && r.world_size == -1,
	      "unknown members skipped; no rank: the input's position");
	const char *few = "{\"format\":\"dlbn-rank-summary\",\"version\":1,\"verdict\":"
			  "\"POTENTIAL\",\"trace\":\"t.bin\",\"loaders_total\":3,\"loaders\":[{}]}";
	memset(&r, 0, sizeof(r));
	CHECK(dlbn_summary_parse(few, strlen(few), &r, err, sizeof(err)) == 0 && r.nloaders == 1,
	      "three loaders said, one listed: one shown (%zu)", r.nloaders);
}

static void test_trace_beside(void)
{
	struct dlbn_rank_row w, r;
	char path[400], trace[400], err[300];
	row_init(&w, 3, "h", 1);
	snprintf(w.trace, sizeof(w.trace), "elsewhere/r3.bin");
	snprintf(path, sizeof(path), "%s/r3.summary.json", dir);
	snprintf(trace, sizeof(trace), "%s/r3.bin", dir);
	FILE *f = fopen(trace, "w");
	fclose(f);
	CHECK(dlbn_summary_write(path, &w, "1", err, sizeof(err)) == 0, "write r3");
	CHECK(dlbn_summary_read(path, 0, &r, err, sizeof(err)) == 0 && !strcmp(r.trace, trace),
	      "the trace beside the summary (%s)", r.trace);
	char p[400];
	dlbn_summary_path("/a/b/run-r3.bin", p, sizeof(p));
	CHECK(!strcmp(p, "/a/b/run-r3.summary.json"), "summary path: %s", p);
	dlbn_summary_path("trace", p, sizeof(p));
	CHECK(!strcmp(p, "trace.summary.json"), "summary path without .bin: %s", p);
}

/* 8 hosts of 8 ranks: host h3 slow (all its ranks stall 6 ms), rank 45 on
 * h5 alone slow (9 ms), rank 60 missing from a job of 64. */
static void test_job_hosts(void)
{
	struct dlbn_rank_row rows[63];
	struct dlbn_job job;
	size_t n = 0;
	for (int rank = 0; rank < 64; rank++) {
		if (rank == 60)
			continue;
		char host[16];
		snprintf(host, sizeof(host), "h%d", rank / 8);
		double stall = rank / 8 == 3 ? 6 + 0.01 * rank : rank == 45 ? 9 : 1 + 0.001 * rank;
		row_init(&rows[n++], rank, host, stall);
	}
	CHECK(dlbn_job_summarize(&job, rows, n, 1) == 0, "summarize");
	CHECK(job.nhosts == 8 && job.nslow_hosts == 1 && job.hosts[3].slow &&
		      !strcmp(job.hosts[3].name, "h3") && !strcmp(job.hosts[3].cause, "storage"),
	      "the slow host is h3 alone (%zu slow)", job.nslow_hosts);
	CHECK(job.nlone_rows == 1 && rows[job.lone_rows[0]].rank == 45,
	      "rank 45 stands out from its host (%zu lone)", job.nlone_rows);
	CHECK(job.has_straggler && rows[job.straggler].rank == 45 && rows[job.worst].rank == 45,
	      "rank 45 is the straggler and the worst");
	CHECK(job.world_size == 64 && job.nmissing == 1 && job.missing[0] == 60 && job.nfailed == 1,
	      "rank 60 is missing, one input failed");
	CHECK(job.nduplicate == 0 && job.ndistinct == 63, "no rank twice");
	dlbn_job_free(&job);
	rows[0].world_size = 2147483647; /* a broken summary's: no time spent on it */
	CHECK(dlbn_job_summarize(&job, rows, n, 0) == 0 && job.nmissing == 2147483647u - 63 &&
		      job.missing[0] == 60 && job.missing[1] == 64,
	      "a huge world size: gaps counted, the first named (%zu)", job.nmissing);
	rows[0].world_size = 64;
	dlbn_job_free(&job);
	rows[62] = rows[3]; /* rank 3 given twice, rank 63 gone */
	CHECK(dlbn_job_summarize(&job, rows, n, 0) == 0, "summarize again");
	CHECK(job.nduplicate == 1 && job.duplicate[0] == 3 && job.ndistinct == 62 &&
		      job.nmissing == 2 && job.missing[1] == 63,
	      "rank 3 twice, 62 distinct ranks, 60 and 63 missing");
	dlbn_job_free(&job);
	rows[62].rank = 63;
	CHECK(dlbn_job_summarize(&job, rows, n, 1) == 0, "summarize");
	CHECK(job.stall_ms.n == 63 && job.stall_ms.max == 9 && job.stall_ms.p50 < 1.1 &&
		      job.stall_ms.p90 > 6,
	      "spread: p50 %.3f, p90 %.3f, max %.3f", job.stall_ms.p50, job.stall_ms.p90,
	      job.stall_ms.max);
	CHECK(job.nworst_rows == DLBN_JOB_WORST && rows[job.worst_rows[0]].rank == 45 &&
		      rows[job.worst_rows[1]].rank == 31,
	      "worst rows by stall: 45, then h3's 31");
	dlbn_job_free(&job);
}

static void test_worst_is_total(void)
{
	struct dlbn_rank_row a, b, c;
	row_init(&a, 4, "h", 2);
	row_init(&b, 2, "h", 2);
	row_init(&c, 9, "h", 1);
	a.verdict = b.verdict = DLBN_VERDICT_INCONCLUSIVE;
	a.speedup = 3; /* an unjudged rank's speedup does not rank it */
	CHECK(dlbn_rank_row_worse(&b, &a) && !dlbn_rank_row_worse(&a, &b),
	      "INCONCLUSIVE ties go to the lower rank, whatever their speedup");
	CHECK(dlbn_rank_row_worse(&a, &c) && !dlbn_rank_row_worse(&c, &a),
	      "an unjudged rank outranks a clean one");
	c.verdict = DLBN_VERDICT_POTENTIAL;
	CHECK(dlbn_rank_row_worse(&c, &a), "POTENTIAL outranks INCONCLUSIVE");
	b = c;
	b.input_index = 1;
	c.input_index = 0;
	CHECK(dlbn_rank_row_worse(&c, &b) && !dlbn_rank_row_worse(&b, &c),
	      "same rank and figures: the earlier input");
	struct dlbn_rank_row l;
	row_init(&l, 0, "h", 0);
	l.rank_known = 0;
	l.verdict = DLBN_VERDICT_INCONCLUSIVE;
	l.steps_window = 0;
	snprintf(l.cause, sizeof(l.cause), "no_handoff");
	struct dlbn_rank_row set[2] = {l, c};
	struct dlbn_rank_failure aside[2];
	size_t n = 2;
	CHECK(dlbn_rank_row_maybe_launcher(&l) && dlbn_rank_rows_set_aside(set, &n, aside) == 1 &&
		      n == 1 && set[0].rank == 9,
	      "a trace with no rank and no steps beside ranks is set aside");
}

int main(void)
{
	if (!mkdtemp(dir))
		return 2;
	test_round_trip();
	test_exact_round_trip();
	test_refusals();
	test_trace_beside();
	test_job_hosts();
	test_worst_is_total();
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	if (system(cmd) != 0)
		fprintf(stderr, "could not remove %s\n", dir);
	CHECK_EXIT();
}
