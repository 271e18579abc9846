/*
 * test_verdict_gpu.c - the verdict with the GPU figures (verdict.c's GPU
 * rules on top of analyzer/gpu/gpu.c): the stall wording follows gpu.present
 * (not CUDA records of another process), GPU evidence lines reach the
 * verdict's reasons, unprobed waits that decide the class make the verdict
 * INCONCLUSIVE (or lower it to POTENTIAL with the range), pageable H2D
 * copies give a quantified pin_memory recommendation even when nothing is
 * detected, host blocked in syncs gives the compute-bound cause, and a GPU
 * that has drained at every wait while the host is busy gives host-bound.
 *
 * Each trace is one training process with Python FETCH marks (the steps)
 * and the GPU records the recorder writes, buffered and sorted by time.
 * The expected figures follow from the loop's parameters.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "gpu/gpu.h"
#include "model/model.h"
#include "trace/reader.h"
#include "recbuf.h"
#include "tracegen.h"
#include "analysis/verdict.h"

#define MS     1000000LL
#define US     1000LL
#define T0     (1000 * MS)
#define PID    5151
#define STEPS  40
#define STREAM 0x7000

static char path[] = "/tmp/dlbn-test-verdict-gpu-XXXXXX";

static void fetch(int64_t b, int64_t wait, int64_t idx)
{
	recbuf_add(b, DLBN_REC_MARK, 3, (int64_t)DLBN_MARK_FETCH_BEGIN, (int64_t)1, idx);
	recbuf_add(b + wait, DLBN_REC_MARK, 3, (int64_t)DLBN_MARK_FETCH_END, (int64_t)1, idx);
}

static void launch(int64_t t)
{
	recbuf_add(t, DLBN_REC_LAUNCH, 2, (int64_t)STREAM, (int64_t)DLBN_CU_LAUNCH_KERNEL);
}

/* A probe at t on the stream, completing at `complete`, resolved at `done_t`. */
static void probe(int64_t t, int64_t id, int64_t complete, int64_t done_t)
{
	recbuf_add(t, DLBN_REC_PROBE, 2, id, (int64_t)STREAM);
	recbuf_add(done_t, DLBN_REC_PROBE_DONE, 3, id, complete, (int64_t)0);
}

static void sync_call(int64_t t, int64_t dur)
{
	recbuf_add(t, DLBN_REC_SYNC, 3, dur, (int64_t)DLBN_CU_STREAM_SYNC, (int64_t)STREAM);
}

static void pageable_h2d(int64_t t, int64_t dur, int64_t bytes)
{
	recbuf_add(t, DLBN_REC_MEMCPY, 7, dur, (int64_t)DLBN_CU_MEMCPY_HTOD, (int64_t)0, bytes,
		   (int64_t)DLBN_COPY_HTOD, (int64_t)0, (int64_t)DLBN_HOSTMEM_PAGEABLE);
}

/* Write the buffered records as the training process (plus, when
 * other_cuda, an unrelated process with CUDA launches). */
static void write_trace(int other_cuda)
{
	struct tg *g = tg_open(path, 0);
	if (!g)
		exit(2);
	struct tg_stream *s = tg_stream(g, 0, 0, PID, PID);
	tg_process(s, T0 - 10 * MS, PID, 1, -1, DLBN_START_ROOT, "python3");
	tg_thread(s, T0 - 10 * MS, PID, 1);
	int64_t last = recbuf_flush(s, T0 - MS);
	tg_exit(s, last + MS, 0, DLBN_EXIT_DTOR);
	tg_stream_final(s);
	if (other_cuda) {
		struct tg_stream *o = tg_stream(g, 1, 0, PID + 100, PID + 100);
		tg_process(o, T0, PID + 100, 1, -1, DLBN_START_JOIN, "nvidia-smi");
		tg_thread(o, T0, PID + 100, 1);
		for (int i = 0; i < 10; i++)
			tg_rec(o, DLBN_REC_LAUNCH, T0 + i * MS, "ii", (int64_t)1,
			       (int64_t)DLBN_CU_LAUNCH_KERNEL);
		tg_exit(o, T0 + 20 * MS, 0, DLBN_EXIT_DTOR);
		tg_stream_final(o);
	}
	if (tg_close(g) != 0)
		exit(2);
}

/* What dlbn-analyze does: model, GPU split, GPU window, verdict. */
struct run {
	struct dlbn_reader *r;
	struct dlbn_model m;
	struct dlbn_gpu g;
	struct dlbn_analysis a;
	char text[8192]; /* reasons and recommendations, one per line */
};

static void analyze(struct run *x)
{
	char err[256];
	struct dlbn_model_opts mo;
	struct dlbn_verdict_opts vo;
	memset(x, 0, sizeof(*x));
	x->r = dlbn_reader_open(path, err, sizeof(err));
	if (!x->r) {
		printf("cannot open trace: %s\n", err);
		exit(2);
	}
	dlbn_gpu_model_opts(&mo);
	dlbn_verdict_default_opts(&vo);
	if (dlbn_model_build(&x->m, x->r, &mo) != 0)
		exit(2);
	x->g = x->m.gpu;
	if (dlbn_analyze_gpu(&x->m, dlbn_reader_stats(x->r), &vo, &x->g, &x->a) != 0)
		exit(2);
	for (size_t i = 0; i < x->a.nreasons; i++) {
		strncat(x->text, x->a.reasons[i], sizeof(x->text) - strlen(x->text) - 2);
		strcat(x->text, "\n");
	}
	for (size_t i = 0; i < x->a.nrecs; i++) {
		strncat(x->text, "REC ", sizeof(x->text) - strlen(x->text) - 2);
		strncat(x->text, x->a.recs[i], sizeof(x->text) - strlen(x->text) - 2);
		strcat(x->text, "\n");
	}
	printf("# %s %.3f (low %.3f) cause=%s\n%s", dlbn_verdict_name(x->a.verdict),
	       x->a.predicted_speedup, x->a.predicted_speedup_low, dlbn_cause_name(x->a.cause),
	       x->text);
}

static void done(struct run *x)
{
	dlbn_analysis_free(&x->a);
	dlbn_model_free(&x->m);
	dlbn_reader_close(x->r);
}

static int64_t step_begin(int i, int64_t period, int64_t host)
{
	return T0 + (int64_t)i * period + host;
}

/* Input-bound: host 3 ms, wait 10 ms, the GPU drained 1 ms before each wait. */
static void test_input_bound(void)
{
	const int64_t host = 3 * MS, wait = 10 * MS, period = host + wait;
	struct run x;
	for (int i = 0; i < STEPS; i++) {
		int64_t b = step_begin(i, period, host);
		launch(b - host + 10 * US);
		fetch(b, wait, i);
		probe(b + 30 * US, i + 1, b - 1 * MS, b + period + 40 * US);
	}
	write_trace(0);
	analyze(&x);
	CHECK(x.a.gpu == 1, "input-bound: the GPU rule applies");
	CHECK(x.a.verdict == DLBN_VERDICT_DETECTED, "input-bound: DETECTED (got %s)",
	      dlbn_verdict_name(x.a.verdict));
	CHECK(fabs(x.a.predicted_speedup - 13.0 / 3.0) < 0.05,
	      "input-bound: speedup (wait+host)/host = 4.33 (got %.3f)", x.a.predicted_speedup);
	CHECK(x.a.predicted_speedup_low == x.a.predicted_speedup,
	      "input-bound: every wait probed, no range");
	CHECK(strstr(x.text, "GPU-idle part of the loop's waits") != NULL,
	      "input-bound: stall wording is the GPU rule's");
	CHECK(strstr(x.text, "GPU: the GPU had no work left") != NULL,
	      "input-bound: gpu.c's evidence line is among the reasons");
	done(&x);
}

/* Host blocked in cuStreamSynchronize 6 of every 12 ms; short GPU-busy waits. */
static void test_compute_bound_sync(void)
{
	const int64_t host = 10 * MS, wait = 2 * MS, period = host + wait;
	struct run x;
	for (int i = 0; i < STEPS; i++) {
		int64_t b = step_begin(i, period, host);
		launch(b - host + 10 * US);
		sync_call(b - host + 1 * MS, 6 * MS);
		launch(b - host + 8 * MS);
		fetch(b, wait, i);
		probe(b + 30 * US, i + 1, b + wait + 1 * MS, b + period + 40 * US);
	}
	write_trace(0);
	analyze(&x);
	CHECK(x.a.verdict == DLBN_VERDICT_NOT_DETECTED, "sync: NOT_DETECTED (got %s)",
	      dlbn_verdict_name(x.a.verdict));
	CHECK(!strcmp(dlbn_cause_name(x.a.cause), "compute_bound"),
	      "sync: cause compute_bound (got %s)", dlbn_cause_name(x.a.cause));
	CHECK(fabs(x.a.sync_fraction - 0.5) < 0.02, "sync: blocked 50%% of the window (got %.3f)",
	      x.a.sync_fraction);
	CHECK(strstr(x.text, "host blocked on the GPU 50% of the window: compute-bound; faster "
			     "input would not help") != NULL,
	      "sync: the reason names the share and says input would not help");
	done(&x);
}

/* Pageable H2D copies of 2 ms each step; waits hidden by GPU work. */
static void test_pageable(void)
{
	const int64_t host = 8 * MS, wait = 2 * MS, period = host + wait;
	struct run x;
	for (int i = 0; i < STEPS; i++) {
		int64_t b = step_begin(i, period, host);
		pageable_h2d(b - host + 100 * US, 2 * MS, 4 << 20);
		launch(b - host + 3 * MS);
		fetch(b, wait, i);
		probe(b + 30 * US, i + 1, b + wait + 1 * MS, b + period + 40 * US);
	}
	write_trace(0);
	analyze(&x);
	CHECK(x.a.verdict == DLBN_VERDICT_NOT_DETECTED, "pageable: NOT_DETECTED (got %s)",
	      dlbn_verdict_name(x.a.verdict));
	CHECK(fabs(x.a.pageable_ms - 2.0) < 0.01, "pageable: 2.00 ms per step (got %.3f)",
	      x.a.pageable_ms);
	CHECK(strstr(x.text, "REC pin_memory=True") != NULL &&
		      strstr(x.text, "blocked 2.00 ms per step (20.0% of the window)") != NULL,
	      "pageable: quantified pin_memory=True recommendation although NOT_DETECTED");
	CHECK(strcmp(dlbn_cause_name(x.a.cause), "compute_bound") != 0 &&
		      strcmp(dlbn_cause_name(x.a.cause), "host_bound") != 0,
	      "pageable: GPU busy at the waits, no sync: neither compute- nor host-bound (%s)",
	      dlbn_cause_name(x.a.cause));
	done(&x);
}

/*
 * Unprobed waits: work launched before every wait, probes only on the
 * steps in `probed_every` (0: none).  host = wait = 10 ms: 2.0x when
 * every wait counts as idle.
 */
static void unprobed_loop(int probed_every)
{
	const int64_t host = 10 * MS, wait = 10 * MS, period = host + wait;
	for (int i = 0; i < STEPS; i++) {
		int64_t b = step_begin(i, period, host);
		launch(b - host + 10 * US);
		fetch(b, wait, i);
		if (probed_every && i % probed_every == 0)
			probe(b + 30 * US, i + 1, b - 1 * MS, b + period + 40 * US);
	}
}

static void test_unprobed_inconclusive(void)
{
	struct run x;
	unprobed_loop(0);
	write_trace(0);
	analyze(&x);
	CHECK(x.a.verdict == DLBN_VERDICT_INCONCLUSIVE,
	      "no probes: INCONCLUSIVE although the upper bound says 2.0x (got %s)",
	      dlbn_verdict_name(x.a.verdict));
	CHECK(!strcmp(dlbn_cause_name(x.a.cause), "gpu_evidence_missing"),
	      "no probes: cause gpu_evidence_missing (%s)", dlbn_cause_name(x.a.cause));
	CHECK(fabs(x.a.predicted_speedup - 2.0) < 0.02 && x.a.predicted_speedup_low < 1.01,
	      "no probes: range 1.00 .. 2.00 (got %.3f .. %.3f)", x.a.predicted_speedup_low,
	      x.a.predicted_speedup);
	CHECK(strstr(x.text, "lies between 1.00 and 2.00 (NOT_DETECTED .. DETECTED)") != NULL,
	      "no probes: the reason gives the range and both classes");
	done(&x);
}

static void test_half_probed_potential(void)
{
	struct run x;
	unprobed_loop(2);
	write_trace(0);
	analyze(&x);
	CHECK(x.a.verdict == DLBN_VERDICT_POTENTIAL,
	      "half the waits unprobed: POTENTIAL, the low end's class (got %s)",
	      dlbn_verdict_name(x.a.verdict));
	CHECK(x.a.predicted_speedup > 1.5 && x.a.predicted_speedup_low > 1.1 &&
		      x.a.predicted_speedup_low <= 1.5,
	      "half unprobed: range %.3f .. %.3f straddles 1.50", x.a.predicted_speedup_low,
	      x.a.predicted_speedup);
	CHECK(strstr(x.text, "(POTENTIAL .. DETECTED)") != NULL, "half unprobed: range reason");
	done(&x);
}

/* Host-bound: 12 ms of host work per step, 0.5 ms waits, the GPU long drained. */
static void test_host_bound(void)
{
	const int64_t host = 12 * MS, wait = MS / 2, period = host + wait;
	struct run x;
	for (int i = 0; i < STEPS; i++) {
		int64_t b = step_begin(i, period, host);
		launch(b - host + 10 * US);
		fetch(b, wait, i);
		probe(b + 30 * US, i + 1, b - 9 * MS, b + period + 40 * US);
	}
	write_trace(0);
	analyze(&x);
	CHECK(x.a.verdict == DLBN_VERDICT_NOT_DETECTED, "host-bound: NOT_DETECTED (got %s)",
	      dlbn_verdict_name(x.a.verdict));
	CHECK(!strcmp(dlbn_cause_name(x.a.cause), "host_bound"),
	      "host-bound: cause host_bound (got %s)", dlbn_cause_name(x.a.cause));
	CHECK(strstr(x.text, "not data loading, leaves the GPU idle") != NULL,
	      "host-bound: the reason says it is not loading");
	done(&x);
}

/* CUDA records only in another process: the CPU-only rule and its wording. */
static void test_other_process_cuda(void)
{
	const int64_t host = 3 * MS, wait = 10 * MS, period = host + wait;
	struct run x;
	for (int i = 0; i < STEPS; i++)
		fetch(step_begin(i, period, host), wait, i);
	write_trace(1);
	analyze(&x);
	CHECK(x.m.has_cuda && !x.g.present,
	      "other process: CUDA records seen, none in the training process");
	CHECK(x.a.gpu == 0, "other process: the CPU-only rule applies");
	CHECK(strstr(x.text, "no GPU activity recorded: the exposed wait is the stall") != NULL &&
		      strstr(x.text, "GPU-idle part") == NULL,
	      "other process: stall wording is the CPU-only rule's");
	done(&x);
}

int main(void)
{
	int fd = mkstemp(path);
	if (fd < 0)
		return 2;
	test_input_bound();
	test_compute_bound_sync();
	test_pageable();
	test_unprobed_inconclusive();
	test_half_probed_potential();
	test_host_bound();
	test_other_process_cuda();
	unlink(path);
	recbuf_free();
	CHECK_EXIT();
}
