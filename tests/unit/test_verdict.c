/*
 * test_verdict.c - the verdict rules (docs/DESIGN.md, "Verdict rules"): thresholds at
 * exactly 1.10 and 1.50, too few steps after warm-up -> INCONCLUSIVE, no
 * training process / no hand-off -> INCONCLUSIVE with the reason, and the
 * predicted speedup computed from traces whose answer is known exactly
 * (steps with a fixed wait and a fixed loop time: speedup =
 * (wait + loop) / loop).  Also the CLI's --fail-on and usage exit codes.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "gpu/gpu.h"
#include "model/model.h"
#include "trace/reader.h"
#include "tracegen.h"
#include "analysis/verdict.h"

#define MS 1000000ll

static char path[] = "/tmp/dlbn-test-verdict-XXXXXX";

/* A training loop with the Python view: n steps, each waits wait_ns for
 * its batch, then computes for loop_ns. */
static void loop_trace(int n, int64_t wait_ns, int64_t loop_ns, const char *config)
{
	struct tg *g = tg_open(path, 0);
	struct tg_stream *m = tg_stream(g, 0, 0, 500, 500);
	int64_t t = 1000 * MS;
	tg_process(m, t, 500, 1, -1, DLBN_START_ROOT, "python3");
	tg_thread(m, t, 500, 1);
	tg_mark(m, t, DLBN_MARK_ITER_BEGIN, 1, 0);
	if (config)
		tg_config(m, t, 1, config);
	for (int i = 0; i < n; i++) {
		tg_mark(m, t, DLBN_MARK_FETCH_BEGIN, 1, i);
		t += wait_ns;
		tg_mark(m, t, DLBN_MARK_FETCH_END, 1, i);
		t += loop_ns;
	}
	tg_exit(m, t, 0, DLBN_EXIT_DTOR);
	if (tg_close(g) != 0)
		abort();
}

struct result {
	int verdict;
	double speedup;
	size_t window, warmup;
	char cause[32];
	char reasons[2048];
	char recs[2048];
};

static struct result analyze(void)
{
	struct result res = {0};
	char err[256];
	struct dlbn_reader *r = dlbn_reader_open(path, err, sizeof(err));
	if (!r) {
		printf("cannot open: %s\n", err);
		exit(1);
	}
	struct dlbn_model_opts mo;
	struct dlbn_verdict_opts vo;
	struct dlbn_model m;
	struct dlbn_analysis a;
	dlbn_gpu_model_opts(&mo);
	dlbn_verdict_default_opts(&vo);
	if (dlbn_model_build(&m, r, &mo) != 0 ||
	    dlbn_analyze(&m, dlbn_reader_stats(r), &vo, &a) != 0)
		exit(1);
	res.verdict = a.verdict;
	res.speedup = a.predicted_speedup;
	res.window = a.steps_window;
	res.warmup = a.steps_warmup;
	snprintf(res.cause, sizeof(res.cause), "%s", dlbn_cause_name(a.cause));
	for (size_t i = 0; i < a.nreasons; i++) {
		strncat(res.reasons, a.reasons[i], sizeof(res.reasons) - strlen(res.reasons) - 2);
		strcat(res.reasons, "\n");
	}
	for (size_t i = 0; i < a.nrecs; i++) {
		strncat(res.recs, a.recs[i], sizeof(res.recs) - strlen(res.recs) - 2);
		strcat(res.recs, "\n");
	}
	dlbn_analysis_free(&a);
	dlbn_model_free(&m);
	dlbn_reader_close(r);
	return res;
}

static int cli(const char *args)
{
	char cmd[512];
	snprintf(cmd, sizeof(cmd), "build/dlbn-analyze %s '%s' >/dev/null 2>&1", args, path);
	int st = system(cmd);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void thresholds(void)
{
	struct dlbn_verdict_opts o;
	dlbn_verdict_default_opts(&o);
	CHECK(dlbn_classify(1.10, 100, 4, &o) == DLBN_VERDICT_NOT_DETECTED,
	      "1.10 exactly: NOT_DETECTED");
	CHECK(dlbn_classify(nextafter(1.10, 2), 100, 4, &o) == DLBN_VERDICT_POTENTIAL,
	      "just above 1.10: POTENTIAL");
	CHECK(dlbn_classify(1.50, 100, 4, &o) == DLBN_VERDICT_POTENTIAL, "1.50 exactly: POTENTIAL");
	CHECK(dlbn_classify(nextafter(1.50, 2), 100, 4, &o) == DLBN_VERDICT_DETECTED,
	      "just above 1.50: DETECTED");
	CHECK(dlbn_classify(1.0, 100, 4, &o) == DLBN_VERDICT_NOT_DETECTED, "1.00: NOT_DETECTED");
	CHECK(dlbn_classify(3.0, 4 + 7, 4, &o) == DLBN_VERDICT_INCONCLUSIVE,
	      "window P+7 steps: INCONCLUSIVE even at 3.0x");
	CHECK(dlbn_classify(3.0, 4 + 8, 4, &o) == DLBN_VERDICT_DETECTED,
	      "window P+8 steps: verdict");
	CHECK(dlbn_classify(NAN, 100, 4, &o) == DLBN_VERDICT_INCONCLUSIVE,
	      "no speedup: INCONCLUSIVE");
}

int main(void)
{
	int fd = mkstemp(path);
	close(fd);
	int have_cli = access("build/dlbn-analyze", X_OK) == 0;
	thresholds();

	const char *cfg = "num_workers=2;batch_size=8;prefetch_factor=2;pin_memory=False;"
			  "persistent_workers=False;start_method=fork;dataset_kind=map";
	loop_trace(40, 1 * MS, 1 * MS, cfg);
	struct result r = analyze();
	CHECK(r.warmup == 5 && r.window == 35, "warm-up = P+1 = 5 steps, window 35 (got %zu, %zu)",
	      r.warmup, r.window);
	CHECK(fabs(r.speedup - 2.0) < 1e-6, "wait 1 ms + loop 1 ms: speedup 2.00 (got %.6f)",
	      r.speedup);
	CHECK(r.verdict == DLBN_VERDICT_DETECTED, "2.00: DETECTED");
	if (have_cli) {
		CHECK(cli("--fail-on detected") == 3, "--fail-on detected on DETECTED: exit 3");
		CHECK(cli("--fail-on potential") == 3, "--fail-on potential on DETECTED: exit 3");
		CHECK(cli("") == 0, "no --fail-on: exit 0");
		CHECK(cli("--fail-on never") == 2, "bad --fail-on value: exit 2");
		CHECK(cli("--no-such-option") == 2, "unknown option: exit 2");
	}

	loop_trace(40, 1 * MS, 4 * MS, cfg);
	r = analyze();
	CHECK(fabs(r.speedup - 1.25) < 1e-6 && r.verdict == DLBN_VERDICT_POTENTIAL,
	      "wait 1 + loop 4: 1.25 POTENTIAL (got %.6f)", r.speedup);
	if (have_cli) {
		CHECK(cli("--fail-on detected") == 0, "--fail-on detected on POTENTIAL: exit 0");
		CHECK(cli("--fail-on potential") == 3, "--fail-on potential on POTENTIAL: exit 3");
	}

	loop_trace(40, MS / 10, 99 * MS / 10, cfg);
	r = analyze();
	CHECK(fabs(r.speedup - 1.0101010) < 1e-6 && r.verdict == DLBN_VERDICT_NOT_DETECTED &&
		      !strcmp(r.cause, "none"),
	      "wait 0.1 + loop 9.9: 1.0101 NOT_DETECTED, cause none (got %.6f %s)", r.speedup,
	      r.cause);

	/* Boundaries through the whole pipeline: 1.10 = 1 ms wait per 10 ms loop. */
	loop_trace(40, 1 * MS, 10 * MS, cfg);
	r = analyze();
	CHECK(fabs(r.speedup - 1.1) < 1e-9, "wait 1 + loop 10: speedup 1.100 (got %.9f)",
	      r.speedup);

	/* Too few steps: P = 4, warm-up 5, window must hold 12. */
	loop_trace(5 + 11, 5 * MS, 1 * MS, cfg);
	r = analyze();
	CHECK(r.verdict == DLBN_VERDICT_INCONCLUSIVE && !strcmp(r.cause, "too_few_steps") &&
		      strstr(r.reasons, "only 11 step"),
	      "window of 11 < P+8 steps: INCONCLUSIVE, says so");
	loop_trace(5 + 12, 5 * MS, 1 * MS, cfg);
	r = analyze();
	CHECK(r.verdict == DLBN_VERDICT_DETECTED, "window of 12 = P+8 steps: DETECTED");

	/* num_workers=0 with the bootstrap: loading in the main thread. */
	loop_trace(40, 6 * MS, 2 * MS,
		   "num_workers=0;batch_size=8;prefetch_factor=None;pin_memory=False");
	r = analyze();
	CHECK(r.verdict == DLBN_VERDICT_DETECTED && r.warmup == 1 &&
		      !strcmp(r.cause, "main_thread_loading") &&
		      strstr(r.recs, "num_workers 0 -> 3"),
	      "num_workers=0: DETECTED, main-thread loading, 'num_workers 0 -> 3' (%s)", r.cause);

	/* No DataLoader evidence: a process with no pipes and no marks. */
	struct tg *g = tg_open(path, 0);
	struct tg_stream *s = tg_stream(g, 0, 0, 9, 9);
	tg_process(s, 100, 9, 1, -1, DLBN_START_ROOT, "bash");
	tg_read(s, 200, 10, 0, DLBN_FD_FILE, 5, 100);
	tg_close(g);
	r = analyze();
	CHECK(r.verdict == DLBN_VERDICT_INCONCLUSIVE && !strcmp(r.cause, "no_handoff") &&
		      strstr(r.reasons, "cannot be told apart from other host work"),
	      "no hand-off (no workers, no marks): INCONCLUSIVE, says why (%s)", r.cause);

	/* No processes at all: a valid but empty trace. */
	g = tg_open(path, 0);
	tg_close(g);
	r = analyze();
	CHECK(r.verdict == DLBN_VERDICT_INCONCLUSIVE && !strcmp(r.cause, "no_training_process"),
	      "empty trace: INCONCLUSIVE, no training process (%s)", r.cause);

	unlink(path);
	CHECK_EXIT();
}
