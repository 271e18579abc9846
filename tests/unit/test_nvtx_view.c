/*
 * test_nvtx_view.c - the NVTX view (analyzer/model/ranges.c, model.c): the
 * training loop's NVTX data-loading ranges become its steps when there are
 * no Python fetch marks (preference python > nvtx > ipc), step ranges are
 * counted, registered strings are per process and shared by its threads,
 * dlbn's own "dlbn" domain never counts, nested data ranges make one step,
 * start/end ranges may end on another thread, and a process found only
 * through its NVTX ranges is the training process.  The speedup follows
 * from the loop: (wait + compute) / compute.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "gpu/gpu.h"
#include "model/model.h"
#include "trace/reader.h"
#include "tracegen.h"
#include "analysis/verdict.h"

#define MS    1000000LL
#define T0    (1000 * MS)
#define PID   7100
#define STEPS 40
#define WAIT  (6 * MS)
#define LOOP  (4 * MS)

static char path[] = "/tmp/dlbn-test-nvtx-XXXXXX";

enum { PLAIN, REGISTERED, WITH_MARKS, START_END };

static void push(struct tg_stream *s, int64_t t, int64_t domain, const char *msg, int64_t msg_id)
{
	tg_rec(s, DLBN_REC_RANGE_PUSH, t, "iis", domain, msg_id, msg);
}

static void pop(struct tg_stream *s, int64_t t, int64_t domain)
{
	tg_rec(s, DLBN_REC_RANGE_POP, t, "i", domain);
}

/*
 * STEPS steps: push "train_step", [data range: WAIT], compute LOOP, pop.
 * Every step also has a "dlbn: loader wait" range in the dlbn domain
 * around the data range (must not count) and, inside the data range, a
 * nested "fetch" range (must not make a second step).
 */
static void write_trace(int variant)
{
	struct tg *g = tg_open(path, 0);
	struct tg_stream *m = tg_stream(g, 0, 0, PID, PID);
	struct tg_stream *t1 = tg_stream(g, 0, 1, PID, PID + 1);
	int64_t t = T0;
	tg_process(m, t, PID, 1, -1, DLBN_START_ROOT, "python3");
	tg_thread(m, t, PID, 1);
	tg_thread(t1, t, PID + 1, 0);
	/* Another thread of the same process registers the string and the domain. */
	tg_rec(t1, DLBN_REC_STRING, t + 1, "is", (int64_t)3, "Load Batch");
	tg_rec(t1, DLBN_REC_DOMAIN, t + 1, "is", (int64_t)1, "dlbn");
	t += MS;
	for (int i = 0; i < STEPS; i++) {
		push(m, t, 0, "train_step", 0);
		push(m, t, 1, "dlbn: data loader wait", 0);
		if (variant == WITH_MARKS)
			tg_mark(m, t, DLBN_MARK_FETCH_BEGIN, 1, i);
		if (variant == REGISTERED)
			push(m, t, 0, NULL, 3);
		else if (variant == START_END)
			tg_rec(m, DLBN_REC_RANGE_START, t, "iiis", (int64_t)(100 + i), (int64_t)0,
			       (int64_t)0, "data");
		else
			push(m, t, 0, "DataLoader fetch", 0);
		push(m, t + MS, 0, "fetch", 0); /* nested data range */
		pop(m, t + 2 * MS, 0);
		t += WAIT;
		if (variant == START_END)
			tg_rec(t1, DLBN_REC_RANGE_END, t, "i", (int64_t)(100 + i));
		else
			pop(m, t, 0);
		if (variant == WITH_MARKS)
			tg_mark(m, t, DLBN_MARK_FETCH_END, 1, i);
		t += LOOP;
		pop(m, t, 1); /* dlbn's range spans the whole step: counted, it would be the wait */
		pop(m, t, 0);
	}
	tg_exit(m, t, 0, DLBN_EXIT_DTOR);
	if (tg_close(g) != 0)
		exit(2);
}

struct res {
	int view, verdict;
	double speedup;
	size_t steps;
	uint64_t data_ranges, step_ranges, ranges;
	double mean_step_ms;
	char cause[32];
	int training_found;
};

static struct res analyze(int force_view)
{
	struct res x = {0};
	char err[256];
	struct dlbn_model_opts mo;
	struct dlbn_verdict_opts vo;
	struct dlbn_model m;
	struct dlbn_analysis a;
	struct dlbn_reader *r = dlbn_reader_open(path, err, sizeof(err));
	if (!r)
		exit(2);
	dlbn_gpu_model_opts(&mo);
	mo.force_view = force_view;
	dlbn_verdict_default_opts(&vo);
	if (dlbn_model_build(&m, r, &mo) != 0 || dlbn_analyze(&m, dlbn_reader_stats(r), &vo, &a))
		exit(2);
	x.view = a.view;
	x.verdict = a.verdict;
	x.speedup = a.predicted_speedup;
	x.steps = a.steps_total;
	x.data_ranges = m.nvtx_data_ranges;
	x.step_ranges = m.nvtx_step_ranges;
	x.ranges = m.nvtx_ranges;
	x.mean_step_ms = m.nvtx_step_ranges ? (double)m.nvtx_step_ns / 1e6 / m.nvtx_step_ranges : 0;
	x.training_found = m.training >= 0;
	snprintf(x.cause, sizeof(x.cause), "%s", dlbn_cause_name(a.cause));
	printf("# view %s verdict %s speedup %.3f steps %zu data %llu step %llu cause %s\n",
	       dlbn_view_name(a.view), dlbn_verdict_name(a.verdict), a.predicted_speedup,
	       a.steps_total, (unsigned long long)x.data_ranges, (unsigned long long)x.step_ranges,
	       dlbn_cause_name(a.cause));
	dlbn_analysis_free(&a);
	dlbn_model_free(&m);
	dlbn_reader_close(r);
	return x;
}

static const double want_speedup = (double)(WAIT + LOOP) / (double)LOOP;

static void test_plain(void)
{
	write_trace(PLAIN);
	struct res x = analyze(DLBN_VIEW_NONE);
	CHECK(x.training_found, "plain: the training process is found through its NVTX ranges");
	CHECK(x.view == DLBN_VIEW_NVTX, "plain: nvtx view (got %s)", dlbn_view_name(x.view));
	CHECK(x.steps == STEPS && x.data_ranges == STEPS,
	      "plain: one step per outermost data range, nested and dlbn ones ignored (%zu)",
	      x.steps);
	CHECK(x.step_ranges == STEPS && fabs(x.mean_step_ms - 10.0) < 1e-6,
	      "plain: %d step ranges of 10 ms (got %llu, %.3f ms)", STEPS,
	      (unsigned long long)x.step_ranges, x.mean_step_ms);
	CHECK(fabs(x.speedup - want_speedup) < 0.01, "plain: speedup %.3f (got %.3f)", want_speedup,
	      x.speedup);
	CHECK(x.verdict == DLBN_VERDICT_DETECTED, "plain: DETECTED");
	CHECK(!strcmp(x.cause, "main_thread_loading"),
	      "plain: no workers: loading in the loop's thread (got %s)", x.cause);
}

static void test_registered(void)
{
	write_trace(REGISTERED);
	struct res x = analyze(DLBN_VIEW_NONE);
	CHECK(x.view == DLBN_VIEW_NVTX && x.steps == STEPS,
	      "registered string from another thread of the process names the data range "
	      "(%zu steps)",
	      x.steps);
}

static void test_start_end(void)
{
	write_trace(START_END);
	struct res x = analyze(DLBN_VIEW_NONE);
	CHECK(x.view == DLBN_VIEW_NVTX && x.steps == STEPS && fabs(x.speedup - want_speedup) < 0.01,
	      "start/end ranges ended on another thread: %zu steps, speedup %.3f", x.steps,
	      x.speedup);
}

static void test_marks_preferred(void)
{
	write_trace(WITH_MARKS);
	struct res x = analyze(DLBN_VIEW_NONE);
	CHECK(x.view == DLBN_VIEW_PYTHON, "marks and NVTX: python view preferred (got %s)",
	      dlbn_view_name(x.view));
	CHECK(x.data_ranges == STEPS, "marks and NVTX: the NVTX ranges are still counted");
	x = analyze(DLBN_VIEW_NVTX);
	CHECK(x.view == DLBN_VIEW_NVTX && x.steps == STEPS, "--view nvtx forces the NVTX view");
}

static void test_cli(void)
{
	char cmd[512], buf[65536];
	write_trace(PLAIN);
	snprintf(cmd, sizeof(cmd), "build/dlbn-analyze --view nvtx --format json '%s'", path);
	FILE *p = popen(cmd, "r");
	size_t n = p ? fread(buf, 1, sizeof(buf) - 1, p) : 0;
	buf[n] = 0;
	int rc = p ? pclose(p) : -1;
	CHECK(rc == 0 && strstr(buf, "\"view\":\"nvtx\"") != NULL,
	      "CLI: --view nvtx, JSON view nvtx");
	CHECK(strstr(buf, "\"nvtx\":{\"ranges\":") != NULL &&
		      strstr(buf, "\"data_ranges\":40,\"step_ranges\":40,\"mean_step_ms\":10") !=
			      NULL,
	      "CLI: JSON nvtx object");
}

int main(void)
{
	int fd = mkstemp(path);
	if (fd < 0)
		return 2;
	close(fd);
	test_plain();
	test_registered();
	test_start_end();
	test_marks_preferred();
	test_cli();
	unlink(path);
	CHECK_EXIT();
}
