/*
 * test_ranks.c - several traces, one per rank (analyzer/ranks.c, main.c):
 * ranks come from the PROCESS records whatever the argument order, the
 * job verdict is the worst rank's, a job whose other ranks are fine but one
 * cannot be judged is INCONCLUSIVE, the step-time skew and the worst rank
 * are reported in text and JSON ("ranks", "job"), --fail-on applies to the
 * job verdict, and --sqlite/--perfetto/--dump refuse several traces.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "report.h"
#include "tgsim.h"

static char dir[] = "/tmp/dlbn-test-ranks-XXXXXX";
static char r0[300], r1[300], r2[300], rbad[300];

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

static void test_summary_rules(void)
{
	struct dlbn_rank_row rows[3];
	struct dlbn_job job;
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
	dlbn_job_summarize(&job, rows, 3);
	CHECK(job.verdict == DLBN_VERDICT_POTENTIAL && job.worst == 1,
	      "summary: POTENTIAL rank 1 is the worst and sets the job verdict");
	CHECK(job.slowest == 2 && job.fastest == 0 && job.step_skew > 1.199 &&
		      job.step_skew < 1.201,
	      "summary: step skew 12/10 = 1.20 (got %.3f)", job.step_skew);
	rows[1].verdict = DLBN_VERDICT_INCONCLUSIVE;
	dlbn_job_summarize(&job, rows, 3);
	CHECK(job.verdict == DLBN_VERDICT_INCONCLUSIVE && job.ninconclusive == 1 && job.worst == 1,
	      "summary: other ranks fine, one unjudged: INCONCLUSIVE, its report shown");
	rows[2].verdict = DLBN_VERDICT_DETECTED;
	dlbn_job_summarize(&job, rows, 3);
	CHECK(job.verdict == DLBN_VERDICT_DETECTED && job.worst == 2,
	      "summary: a DETECTED rank holds the job back even with an unjudged one");
}

static void test_cli(void)
{
	static char buf[1 << 20];
	char args[1200];
	snprintf(args, sizeof(args), "--format json '%s' '%s' '%s'", r2, r0, r1);
	int rc = cli(args, buf, sizeof(buf));
	CHECK(rc == 0, "cli: 3 traces analysed (rc %d)", rc);
	CHECK(!strncmp(buf, "{\"verdict\":\"DETECTED\"", 21), "cli: JSON job verdict DETECTED");
	CHECK(strstr(buf, "\"ranks\":[{\"rank\":2,\"rank_source\":\"trace\",\"world_size\":3") !=
		      NULL,
	      "cli: first row is rank 2 (argument order), rank from the trace");
	CHECK(strstr(buf, "\"job\":{\"verdict\":\"DETECTED\",\"ranks\":3,\"worst_rank\":1,"
			  "\"worst_index\":2") != NULL,
	      "cli: job object names rank 1 as the worst");
	CHECK(strstr(buf, "\"step_skew\":1.9") != NULL, "cli: step skew ~1.97 (20 ms vs 10 ms)");

	snprintf(args, sizeof(args), "'%s' '%s' '%s'", r2, r0, r1);
	cli(args, buf, sizeof(buf));
	CHECK(strstr(buf, "JOB VERDICT: DETECTED over 3 ranks (worst: rank 1") != NULL &&
		      strstr(buf, "slowest rank's pace") != NULL,
	      "cli: text job verdict and why");
	CHECK(strstr(buf, "skew: step time") != NULL, "cli: text skew line");

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
	test_summary_rules();
	test_cli();
	unlink(r0);
	unlink(r1);
	unlink(r2);
	unlink(rbad);
	rmdir(dir);
	CHECK_EXIT();
}
