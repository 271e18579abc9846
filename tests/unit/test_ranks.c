/*
 * test_ranks.c - several traces, one per rank (analyzer/analysis/ranks.c, main.c):
 * ranks come from the PROCESS records whatever the argument order, the
 * job verdict is the worst rank's, a job whose other ranks are fine but one
 * cannot be judged is INCONCLUSIVE, the worst rank and the straggler are
 * reported in text, Markdown and JSON ("ranks", "job"), --fail-on applies
 * to the job verdict, and --sqlite/--perfetto/--dump refuse several traces.
 * Synchronous data-parallel ranks run in lockstep (a rank slow to load
 * holds the others at the next collective, so all step times are equal):
 * the straggler is named by its stall, with the ranks that wait for it,
 * never by step time.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "report/report.h"
#include "tgsim.h"

static char dir[] = "/tmp/dlbn-test-ranks-XXXXXX";
static char r0[300], r1[300], r2[300], rbad[300];
static char l0[300], l1[300], l2[300], g0[300], g1[300];

static void gen(const char *path, int rank, double batch_ms, long long steps)
{
	struct tgsim_params p;
	tgsim_default(&p);
	p.rank = rank;
	p.world_size = 3;
	p.batch_ms = batch_ms;
	p.handoff_ms = batch_ms > 20 ? 1 : 0.2;
	p.steps = steps;
	p.seed = (unsigned)rank + 1;
	if (tgsim_write(path, &p, NULL) != 0)
		exit(2);
}

/*
 * One rank of a lockstep job: the straggler (slow) loads a batch in 40 ms
 * over 2 workers (20 ms per batch for a 10 ms loop: it stalls ~10 ms per
 * step); the others load in 10 ms (no stall) but wait `wait_ms` per step
 * for it at the collective, so every rank's step takes ~20 ms.  gpu: the
 * loop launches a 1 ms kernel per step (probed), and the wait at the
 * collective is host time blocked in cuStreamSynchronize (NCCL's wait as
 * the recorder sees it); else the wait is invisible (gloo on CPU blocks
 * in a condition variable) and just adds to the loop's time.
 */
static void gen_lockstep(const char *path, int rank, int slow, double wait_ms, int gpu)
{
	struct tgsim_params p;
	tgsim_default(&p);
	p.rank = rank;
	p.world_size = 3;
	p.steps = 200;
	p.batch_ms = slow ? 40 : 10;
	p.loop_ms = 10;
	p.seed = (unsigned)rank + 7;
	if (!slow && gpu)
		p.sync_ms = wait_ms;
	else if (!slow)
		p.loop_ms += wait_ms;
	if (gpu)
		p.gpu_ms = 1;
	if (tgsim_write(path, &p, NULL) != 0)
		exit(2);
}

/* Run dlbn-analyze with args; stdout into buf; returns the exit status. */
static int cli(const char *args, char *buf, size_t len)
{
	char cmd[2048];
	snprintf(cmd, sizeof(cmd), "build/dlbn-analyze %s 2>/dev/null", args);
	FILE *p = popen(cmd, "r");
	size_t n = p ? fread(buf, 1, len - 1, p) : 0;
	buf[n] = 0;
	int st = p ? pclose(p) : -1;
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* The job over 3 rows, the previous one freed. */
static void summarize3(struct dlbn_job *job, const struct dlbn_rank_row *rows)
{
	dlbn_job_free(job);
	dlbn_job_summarize(job, rows, 3, 0);
}

static void test_summary_rules(void)
{
	struct dlbn_rank_row rows[3];
	struct dlbn_job job = {0};
	memset(rows, 0, sizeof(rows));
	for (int i = 0; i < 3; i++) {
		rows[i].rank = i;
		rows[i].verdict = DLBN_VERDICT_NOT_DETECTED;
		rows[i].speedup = 1.02 + 0.01 * i;
		rows[i].step_ms = 10 + i;
		rows[i].stall_s = 0.1 * i;
	}
	rows[1].verdict = DLBN_VERDICT_POTENTIAL;
	rows[1].speedup = 1.3;
	summarize3(&job, rows);
	CHECK(job.verdict == DLBN_VERDICT_POTENTIAL && job.worst == 1,
	      "summary: POTENTIAL rank 1 is the worst and sets the job verdict");
	CHECK(job.step_ms_min == 10 && job.step_ms_max == 12 && job.step_skew > 1.199 &&
		      job.step_skew < 1.201,
	      "summary: step time 10 .. 12 ms, skew 1.20 (got %.3f)", job.step_skew);
	CHECK(!job.has_straggler, "summary: no stall per step given: no straggler");
	/* Lockstep: equal step times; rank 1 stalls 8 ms of its 20, the others
	 * wait 7.5 ms for it outside their (0.5 ms) stall. */
	for (int i = 0; i < 3; i++) {
		rows[i].verdict = DLBN_VERDICT_NOT_DETECTED;
		rows[i].step_ms = 20;
		rows[i].stall_ms_per_step = i == 1 ? 8 : 0.5;
		rows[i].loop_ms = rows[i].step_ms - rows[i].stall_ms_per_step;
	}
	rows[0].step_ms = 20.2; /* a fast rank has the longest step */
	rows[0].loop_ms = 19.7;
	summarize3(&job, rows);
	CHECK(job.has_straggler && job.straggler == 1 && job.least_stalled == 0,
	      "summary: lockstep: the straggler is the most stalled rank, not the longest step");
	CHECK(dlbn_job_wait_ms(&job, rows, 2) > 7.49 && dlbn_job_wait_ms(&job, rows, 2) < 7.51 &&
		      dlbn_job_wait_ms(&job, rows, 1) == 0,
	      "summary: rank 2 waits 7.5 ms per step for it (got %.3f)",
	      dlbn_job_wait_ms(&job, rows, 2));
	rows[1].stall_ms_per_step = 1.2; /* 0.7 ms more than the others: < 5% of 20 ms */
	summarize3(&job, rows);
	CHECK(!job.has_straggler, "summary: ranks that stall alike have no straggler");
	rows[1].verdict = DLBN_VERDICT_INCONCLUSIVE;
	summarize3(&job, rows);
	CHECK(job.verdict == DLBN_VERDICT_INCONCLUSIVE && job.ninconclusive == 1 && job.worst == 1,
	      "summary: other ranks fine, one unjudged: INCONCLUSIVE, its report shown");
	rows[2].verdict = DLBN_VERDICT_DETECTED;
	summarize3(&job, rows);
	CHECK(job.verdict == DLBN_VERDICT_DETECTED && job.worst == 2,
	      "summary: a DETECTED rank holds the job back even with an unjudged one");
	dlbn_job_free(&job);
}

static void test_cli(void)
{
	static char buf[1 << 20];
	char args[1200];
	snprintf(args, sizeof(args), "--format json '%s' '%s' '%s'", r2, r0, r1);
	int rc = cli(args, buf, sizeof(buf));
	CHECK(rc == 0, "cli: 3 traces analysed (rc %d)", rc);
	CHECK(!strncmp(buf, "{\"verdict\":\"DETECTED\"", 21), "cli: JSON job verdict DETECTED");
	CHECK(strstr(buf, "\"ranks\":[{\"rank\":0,\"rank_source\":\"trace\",\"local_rank\":0,"
			  "\"world_size\":3") != NULL,
	      "cli: first row is rank 0 (rank order, not the arguments'), rank from the trace");
	CHECK(strstr(buf, "\"job\":{\"verdict\":\"DETECTED\",\"ranks\":3,\"hosts_count\":1,"
			  "\"worst_rank\":1,\"worst_index\":1") != NULL,
	      "cli: job object names rank 1 as the worst, row 1");
	CHECK(strstr(buf, "\"step_skew\":1.9") != NULL, "cli: step skew ~1.97 (20 ms vs 10 ms)");
	CHECK(strstr(buf, "\"straggler_rank\":1,\"straggler_index\":1") != NULL,
	      "cli: rank 1 (loading 40 ms batches) is the straggler");

	snprintf(args, sizeof(args), "'%s' '%s' '%s'", r2, r0, r1);
	cli(args, buf, sizeof(buf));
	CHECK(strstr(buf, "JOB VERDICT: DETECTED over 3 ranks (worst: rank 1") != NULL &&
		      strstr(buf, "slowest rank's pace") != NULL,
	      "cli: text job verdict and why");
	CHECK(strstr(buf, "straggler: rank 1, stalled") != NULL, "cli: text straggler line");

	snprintf(args, sizeof(args), "--fail-on detected '%s' '%s' '%s'", r0, r1, r2);
	CHECK(cli(args, buf, sizeof(buf)) == 3, "cli: --fail-on detected hits the job verdict");
	snprintf(args, sizeof(args), "--fail-on detected '%s' '%s'", r0, r2);
	CHECK(cli(args, buf, sizeof(buf)) == 0, "cli: healthy ranks pass --fail-on");
	snprintf(args, sizeof(args), "--format json '%s' '%s'", r0, rbad);
	cli(args, buf, sizeof(buf));
	CHECK(!strncmp(buf, "{\"verdict\":\"INCONCLUSIVE\"", 25),
	      "cli: a rank with too few steps makes a healthy job INCONCLUSIVE");
	snprintf(args, sizeof(args), "--sqlite /tmp/x.db '%s' '%s'", r0, r1);
	CHECK(cli(args, buf, sizeof(buf)) == 2,
	      "cli: --sqlite with several traces is a usage error");
	snprintf(args, sizeof(args), "'%s' /nonexistent/trace.bin", r0);
	CHECK(cli(args, buf, sizeof(buf)) == 1, "cli: an unreadable rank trace: exit 1");
	snprintf(args, sizeof(args), "--format json '%s'", r0);
	cli(args, buf, sizeof(buf));
	CHECK(strstr(buf, "\"ranks\":[{\"rank\":0,") != NULL && strstr(buf, "\"job\":{") != NULL,
	      "cli: one trace still has a one-row ranks table");
}

/* A value of the JSON after key (first occurrence from s), or -1e9. */
static double json_num(const char *s, const char *key)
{
	const char *p = s ? strstr(s, key) : NULL;
	return p ? atof(p + strlen(key)) : -1e9;
}

/* The row object of rank r in the JSON "ranks" list. */
static const char *rank_row(const char *buf, int r)
{
	char key[48];
	snprintf(key, sizeof(key), "{\"rank\":%d,", r);
	return strstr(buf, key);
}

static void test_lockstep(int gpu)
{
	static char buf[1 << 20];
	char args[1200];
	const char *a = gpu ? g0 : l0, *b = gpu ? g1 : l1;
	if (gpu) {
		gen_lockstep(g0, 0, 0, 9.2, 1);
		gen_lockstep(g1, 1, 1, 0, 1);
	}
	snprintf(args, sizeof(args), "--format json '%s' '%s'%s%s%s", a, b, gpu ? "" : " '",
		 gpu ? "" : l2, gpu ? "" : "'");
	int rc = cli(args, buf, sizeof(buf));
	const char *row0 = rank_row(buf, 0), *row1 = rank_row(buf, 1);
	double s0 = json_num(row0, "\"step_ms\":"), s1 = json_num(row1, "\"step_ms\":");
	CHECK(rc == 0 && s0 > 0 && s1 > 0 && s0 > s1 && s0 / s1 < 1.06,
	      "lockstep%s: equal step times, the fast rank 0's a little longer (%.2f vs %.2f ms)",
	      gpu ? " gpu" : "", s0, s1);
	double st1 = json_num(row1, "\"stall_ms_per_step\":");
	double st0 = json_num(row0, "\"stall_ms_per_step\":");
	CHECK(st1 > 7 && st0 < 1.5, "lockstep%s: rank 1 stalls %.2f ms per step, rank 0 %.2f",
	      gpu ? " gpu" : "", st1, st0);
	CHECK(strstr(buf, "\"straggler_rank\":1,") != NULL &&
		      strstr(buf, gpu ? "\"waiting_ranks\":[0]" : "\"waiting_ranks\":[0,2]"),
	      "lockstep%s: the straggler is rank 1 (its stall), the others wait for it",
	      gpu ? " gpu" : "");
	double w0 = json_num(row0, "\"waits_for_straggler_ms_per_step\":");
	CHECK(w0 > 7 && w0 < 14, "lockstep%s: rank 0 waits %.2f ms per step for it",
	      gpu ? " gpu" : "", w0);
	double sync0 = json_num(row0, "\"gpu_sync_s\":");
	double wall0 = json_num(row0, "\"step_ms\":") * json_num(row0, "\"steps_window\":") / 1e3;
	if (gpu)
		CHECK(sync0 > 0.45 * wall0 && sync0 < 0.6 * wall0,
		      "lockstep gpu: rank 0's wait is visible as GPU syncs (%.3f s of %.3f s)",
		      sync0, wall0);
	else
		CHECK(strstr(row0, "\"gpu_sync_s\":null") != NULL,
		      "lockstep: without CUDA no sync figure is claimed");
	CHECK(strstr(buf, "\"job\":{\"verdict\":\"DETECTED\",\"ranks\":") != NULL &&
		      strstr(buf, "\"worst_rank\":1,") != NULL,
	      "lockstep%s: the job verdict is the straggler's", gpu ? " gpu" : "");

	snprintf(args, sizeof(args), "'%s' '%s'%s%s%s", a, b, gpu ? "" : " '", gpu ? "" : l2,
		 gpu ? "" : "'");
	cli(args, buf, sizeof(buf));
	CHECK(strstr(buf, "straggler: rank 1, stalled") != NULL &&
		      strstr(buf, gpu ? "rank 0 waits for it at collectives"
				      : "ranks 0, 2 wait for it at collectives") != NULL &&
		      strstr(buf, "<- worst, straggler") != NULL,
	      "lockstep%s: text names the straggler and who waits for it", gpu ? " gpu" : "");
	CHECK(strstr(buf, gpu ? "host blocked in GPU syncs: rank 0" : "no CUDA recorded") != NULL,
	      "lockstep%s: text says where the wait shows", gpu ? " gpu" : "");
	CHECK(strstr(buf, "slowest/fastest") == NULL && strstr(buf, "does not tell the straggler"),
	      "lockstep%s: step time is not offered as the straggler", gpu ? " gpu" : "");
	snprintf(args, sizeof(args), "--format markdown '%s' '%s'", a, b);
	cli(args, buf, sizeof(buf));
	CHECK(strstr(buf, "| 1 (worst, straggler) |") != NULL &&
		      strstr(buf, "- straggler: rank 1") != NULL,
	      "lockstep%s: markdown names the straggler", gpu ? " gpu" : "");
}

int main(void)
{
	if (!mkdtemp(dir))
		return 2;
	snprintf(r0, sizeof(r0), "%s/r0.bin", dir);
	snprintf(r1, sizeof(r1), "%s/r1.bin", dir);
	snprintf(r2, sizeof(r2), "%s/r2.bin", dir);
	snprintf(rbad, sizeof(rbad), "%s/rbad.bin", dir);
	gen(r0, 0, 10, 200);
	gen(r1, 1, 40, 200);
	gen(r2, 2, 10, 200);
	gen(rbad, 2, 10, 8);
	snprintf(l0, sizeof(l0), "%s/l0.bin", dir);
	snprintf(l1, sizeof(l1), "%s/l1.bin", dir);
	snprintf(l2, sizeof(l2), "%s/l2.bin", dir);
	snprintf(g0, sizeof(g0), "%s/g0.bin", dir);
	snprintf(g1, sizeof(g1), "%s/g1.bin", dir);
	gen_lockstep(l0, 0, 0, 9.2, 0);
	gen_lockstep(l1, 1, 1, 0, 0);
	gen_lockstep(l2, 2, 0, 9.0, 0);
	test_summary_rules();
	test_cli();
	test_lockstep(0);
	test_lockstep(1);
	unlink(r0);
	unlink(r1);
	unlink(r2);
	unlink(rbad);
	unlink(l0);
	unlink(l1);
	unlink(l2);
	unlink(g0);
	unlink(g1);
	rmdir(dir);
	CHECK_EXIT();
}
