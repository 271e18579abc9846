/*
 * test_gpu.c - the GPU-aware split of loader waits (analyzer/gpu/gpu.c) on
 * synthetic traces: input-bound (probes done before the wait: all idle),
 * compute-bound with the host running ahead (probes done at the end of the
 * wait: all busy), partial overlap, lost probes (bounded, superseded, and
 * after a driver error), no CUDA records (CPU rule untouched), pageable H2D
 * copies and syncs as evidence, the JSON/text helpers, and bounded memory
 * with a million probes.
 *
 * Each trace is one training process whose main thread carries Python
 * FETCH marks (so the model's Python view gives the steps) and the GPU
 * records the recorder would write.  Records are buffered and sorted by
 * time before they are written, because a PROBE_DONE is emitted long after
 * its PROBE.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "check.h"
#include "gpu/gpu.h"
#include "report/report.h"
#include "model/model.h"
#include "trace/reader.h"
#include "recbuf.h"
#include "tracegen.h"

#define MS  1000000LL
#define US  1000LL
#define T0  (1000 * MS)
#define PID 4242

static char path[] = "/tmp/dlbn-test-gpu-XXXXXX";

/* ---- buffered records of the main thread -------------------------------- */

static void fetch(int64_t b, int64_t wait, int64_t idx)
{
	recbuf_add(b, DLBN_REC_MARK, 3, (int64_t)DLBN_MARK_FETCH_BEGIN, (int64_t)1, idx);
	recbuf_add(b + wait, DLBN_REC_MARK, 3, (int64_t)DLBN_MARK_FETCH_END, (int64_t)1, idx);
}

static void launch(int64_t t, int64_t stream)
{
	recbuf_add(t, DLBN_REC_LAUNCH, 2, stream, (int64_t)DLBN_CU_LAUNCH_KERNEL);
}

static void probe(int64_t t, int64_t id, int64_t stream)
{
	recbuf_add(t, DLBN_REC_PROBE, 2, id, stream);
}

static void probe_done(int64_t t, int64_t id, int64_t complete, int64_t status)
{
	recbuf_add(t, DLBN_REC_PROBE_DONE, 3, id, complete, status);
}

static void cuda_info(int64_t t, int64_t api, int64_t ret, const char *text)
{
	recbuf_add_str(t, DLBN_REC_CUDA_INFO, api, ret, text);
}

/* Write the buffered records as one training process and reset the buffer. */
static void write_trace(void)
{
	struct tg *g = tg_open(path, 0);
	struct tg_stream *s;

	if (!g)
		exit(2);
	s = tg_stream(g, 0, 0, PID, PID);
	tg_process(s, T0 - 10 * MS, PID, 1, -1, DLBN_START_ROOT, "python3");
	tg_thread(s, T0 - 10 * MS, PID, 1);
	int64_t last = recbuf_flush(s, T0 - MS);
	tg_exit(s, last + MS, 0, DLBN_EXIT_DTOR);
	tg_stream_final(s);
	if (tg_close(g) != 0)
		exit(2);
}

static void copy_htod_async(int64_t t, int64_t stream)
{
	recbuf_add(t, DLBN_REC_MEMCPY, 7, (int64_t)(5 * US), (int64_t)DLBN_CU_MEMCPY_HTOD, stream,
		   (int64_t)65536, (int64_t)DLBN_COPY_HTOD, (int64_t)1,
		   (int64_t)DLBN_HOSTMEM_PINNED);
}

/* ---- analysis ----------------------------------------------------------- */

struct run {
	struct dlbn_reader *r;
	struct dlbn_model m;
	struct dlbn_gpu g;
};

/* split: the GPU split attached to the model, as dlbn-analyze builds it. */
static void analyze_with(struct run *x, int split)
{
	char err[256];
	struct dlbn_model_opts mo;

	memset(x, 0, sizeof(*x));
	x->r = dlbn_reader_open(path, err, sizeof(err));
	if (!x->r) {
		printf("cannot open trace: %s\n", err);
		exit(2);
	}
	if (split)
		dlbn_gpu_model_opts(&mo);
	else
		dlbn_model_default_opts(&mo);
	mo.keep_steps = 1;
	if (dlbn_model_build(&x->m, x->r, &mo) != 0)
		exit(2);
	x->g = x->m.gpu;
}

static void analyze(struct run *x)
{
	analyze_with(x, 1);
}

static void done(struct run *x)
{
	dlbn_model_free(&x->m);
	dlbn_reader_close(x->r);
}

static int64_t sum_idle(const struct dlbn_steps *st)
{
	int64_t s = 0;
	for (size_t i = 0; i < st->n; i++)
		s += st->v[i].gpu_idle_ns;
	return s;
}

static int64_t sum_busy(const struct dlbn_steps *st)
{
	int64_t s = 0;
	for (size_t i = 0; i < st->n; i++)
		s += st->v[i].gpu_busy_ns;
	return s;
}

static int has_reason(const struct dlbn_gpu *g, const char *needle)
{
	for (size_t i = 0; i < g->nreasons; i++)
		if (strstr(g->reasons[i], needle))
			return 1;
	return 0;
}

static void print_reasons(const struct dlbn_gpu *g)
{
	for (size_t i = 0; i < g->nreasons; i++)
		printf("#   %s\n", g->reasons[i]);
}

/* Window over every step but the first (as the verdict does after warm-up). */
static void window_all(struct run *x)
{
	const struct dlbn_steps *st = &x->m.py_steps;
	dlbn_gpu_window(&x->g, st, st->v[0].end, st->v[st->n - 1].end);
	print_reasons(&x->g);
}

/*
 * The common loop: each step launches work at its start, computes on the
 * host for `host` ns, then waits `wait` ns for its batch.  The probe at the
 * wait begin completes `gpu_after` ns after the wait began (negative: the
 * GPU finished before the wait); its PROBE_DONE comes at the next wait.
 */
#define STEPS	40
#define HOST_NS (3 * MS)
#define WAIT_NS (10 * MS)
#define PERIOD	(HOST_NS + WAIT_NS)

static int64_t step_begin(int i)
{
	return T0 + (int64_t)i * PERIOD + HOST_NS;
}

static void loop_with_probes(int64_t gpu_after)
{
	for (int i = 0; i < STEPS; i++) {
		int64_t b = step_begin(i);
		launch(b - HOST_NS + 10 * US, 0x7000);
		fetch(b, WAIT_NS, i);
		probe(b + 30 * US, i + 1, 0x7000);
		probe_done(b + PERIOD + 40 * US, i + 1, b + gpu_after, 0);
	}
}

/*
 * A gap between a lead's own GPU work: the loop copies its batch, then
 * waits 4 ms (for the interpreter's lock, say) before its kernel.  The
 * probe after the copy shows the GPU drained then, so the lead's GPU idle
 * time holds the gap: 0.5 ms to the copy, 4 ms between the copy and the
 * kernel, 1.4 ms from the kernel's end to the wait.  Not when the kernel
 * goes to another stream (one stream's drain is not the GPU's), and never
 * from the kernel's probe, whose next work comes after the wait.
 */
static void gap_loop(int64_t kernel_stream)
{
	const int64_t lead = 8 * MS, wait = 2 * MS, period = lead + wait;
	int64_t id = 1;
	for (int i = 0; i < STEPS; i++) {
		int64_t a = T0 + (int64_t)i * period; /* the previous batch's arrival */
		copy_htod_async(a + 500 * US, 0x7000);
		probe(a + 510 * US, id, 0x7000);
		probe_done(a + 7 * MS, id++, a + 600 * US, 0);
		launch(a + 4600 * US, kernel_stream);
		probe(a + 4610 * US, id, kernel_stream);
		probe_done(a + 7 * MS + 10 * US, id++, a + 6600 * US, 0);
		fetch(a + lead, wait, i); /* no probe: no work since the last */
	}
}

static void test_gap_in_lead(void)
{
	struct run x;
	const int64_t with_gap = 5900 * US, without = 1900 * US;

	gap_loop(0x7000);
	write_trace();
	analyze(&x);
	int right = 1;
	for (size_t i = 1; i < x.m.py_steps.n; i++)
		right &= llabs(x.m.py_steps.v[i].gpu_lead_idle_ns - with_gap) <= 10 * US;
	CHECK(x.m.py_steps.n == STEPS && right,
	      "gap in the lead: 0.5 + 4 + 1.4 ms idle per lead (step 1: %lld ns)",
	      (long long)x.m.py_steps.v[1].gpu_lead_idle_ns);
	done(&x);

	gap_loop(0x7100);
	write_trace();
	analyze(&x);
	right = 1;
	for (size_t i = 2; i < x.m.py_steps.n; i++)
		right &= llabs(x.m.py_steps.v[i].gpu_lead_idle_ns - without) <= 10 * US;
	CHECK(right, "two streams: the gap is not counted (step 2: %lld ns)",
	      (long long)x.m.py_steps.v[2].gpu_lead_idle_ns);
	done(&x);
}

/* (a) input-bound: the GPU was done before every wait began. */
static void test_input_bound(void)
{
	struct run x;

	loop_with_probes(-1 * MS);
	write_trace();
	analyze(&x);
	CHECK(x.g.present, "input-bound: GPU activity present");
	CHECK(x.m.py_steps.n == STEPS, "input-bound: %d steps (got %zu)", STEPS, x.m.py_steps.n);
	CHECK(sum_busy(&x.m.py_steps) == 0, "input-bound: no GPU-busy wait (got %lld ns)",
	      (long long)sum_busy(&x.m.py_steps));
	CHECK(sum_idle(&x.m.py_steps) == STEPS * WAIT_NS, "input-bound: all %d waits idle", STEPS);
	int64_t refill = 0;
	for (size_t i = 0; i < x.m.py_steps.n; i++)
		refill += x.m.py_steps.v[i].gpu_refill_ns;
	CHECK(refill == 0, "input-bound: no refill beyond a wholly idle wait (capped at the wait)");
	CHECK(x.g.probes == STEPS && x.g.probes_resolved == STEPS && x.g.probes_lost == 0,
	      "input-bound: %llu probes, all resolved", (unsigned long long)x.g.probes);
	CHECK(x.g.waits_with_probe == STEPS && x.g.waits_unknown == 0,
	      "input-bound: every wait has probe evidence");
	window_all(&x);
	CHECK(x.g.win.steps == STEPS - 1, "input-bound: window holds %d steps", STEPS - 1);
	CHECK(has_reason(&x.g, "no work left during 100%"),
	      "input-bound: reason names the idle GPU as the stall");
	done(&x);
}

/* (b) compute-bound, host running ahead: the GPU works past every wait. */
static void test_compute_bound(void)
{
	struct run x;

	loop_with_probes(WAIT_NS + 2 * MS);
	write_trace();
	analyze(&x);
	CHECK(sum_idle(&x.m.py_steps) == 0, "compute-bound: no GPU-idle wait (got %lld ns)",
	      (long long)sum_idle(&x.m.py_steps));
	CHECK(sum_busy(&x.m.py_steps) == STEPS * WAIT_NS, "compute-bound: all waits GPU-busy");
	window_all(&x);
	CHECK(has_reason(&x.g, "prefetch hides it"),
	      "compute-bound: reason says prefetch hides it");
	CHECK(x.g.win.wait_gpu_idle_s == 0 && x.g.win.wait_gpu_busy_s > 0.3,
	      "compute-bound: window busy %.3f s, idle %.3f s", x.g.win.wait_gpu_busy_s,
	      x.g.win.wait_gpu_idle_s);
	done(&x);
}

/*
 * The model alone (no split pass in its options) on the compute-bound loop:
 * the CUDA records are there, but every wait keeps the CPU-only rule and
 * the GPU figures stay empty.  The split is the GPU layer's, attached by
 * whoever builds the model.
 */
static void test_model_without_split(void)
{
	struct run x;

	loop_with_probes(WAIT_NS + 2 * MS);
	write_trace();
	analyze_with(&x, 0);
	CHECK(x.m.has_cuda, "without split: the model still sees the CUDA records");
	CHECK(!x.g.present && x.g.probes == 0 && x.g.nreasons == 0,
	      "without split: no GPU figures (present %d, probes %llu, reasons %zu)", x.g.present,
	      (unsigned long long)x.g.probes, x.g.nreasons);
	CHECK(sum_idle(&x.m.py_steps) == STEPS * WAIT_NS && sum_busy(&x.m.py_steps) == 0,
	      "without split: every wait is a stall");
	done(&x);
}

/* (c) partial overlap: busy for the first 4 ms of each 10 ms wait. */
static void test_partial(void)
{
	struct run x;
	int ok = 1;

	loop_with_probes(4 * MS);
	write_trace();
	analyze(&x);
	for (size_t i = 0; i < x.m.py_steps.n; i++) {
		const struct dlbn_step *s = &x.m.py_steps.v[i];
		if (s->gpu_busy_ns != 4 * MS || s->gpu_idle_ns != 6 * MS)
			ok = 0;
	}
	CHECK(ok, "partial: every wait split 4 ms busy / 6 ms idle");
	/* The next launch comes 10 us after each wait: the GPU, drained inside
	 * the wait, stays idle that long too (the last step has no next). */
	ok = 1;
	for (size_t i = 0; i < x.m.py_steps.n; i++) {
		int64_t want = i + 1 < x.m.py_steps.n ? 10 * US : 0;
		if (x.m.py_steps.v[i].gpu_refill_ns != want)
			ok = 0;
	}
	CHECK(ok, "partial: 10 us refill bubble after each wait joins the stall");
	window_all(&x);
	CHECK(x.g.win.wait_gpu_busy_s > 0.155 && x.g.win.wait_gpu_busy_s < 0.157,
	      "partial: window busy %.4f s (39 x 4 ms)", x.g.win.wait_gpu_busy_s);
	done(&x);
}

/*
 * A probe issued late in the wait counts only when it is the first one in
 * the wait; one issued after an earlier probe (beyond the slack) does not.
 */
static void test_probe_cutoff(void)
{
	struct run x;
	int64_t b0 = step_begin(0), b1 = step_begin(1);

	launch(b0 - 2 * MS, 0x7000);
	fetch(b0, WAIT_NS, 0);
	probe(b0 + 5 * MS, 1, 0x7000); /* first probe of wait 0, 5 ms in */
	probe_done(b0 + 6 * MS, 1, b0 + 8 * MS, 0);
	launch(b1 - 2 * MS, 0x7000);
	fetch(b1, WAIT_NS, 1);
	probe(b1 + 10 * US, 2, 0x7000);
	launch(b1 + 4 * MS, 0x7100);   /* another thread queues work mid-wait */
	probe(b1 + 5 * MS, 3, 0x7100); /* a second probe inside the same wait */
	probe_done(b1 + 6 * MS, 2, b1 - MS, 0);
	probe_done(b1 + 9 * MS, 3, b1 + 8 * MS, 0);
	write_trace();
	analyze(&x);
	CHECK(x.m.py_steps.n == 2 && x.m.py_steps.v[0].gpu_busy_ns == 8 * MS,
	      "cutoff: the first probe inside a wait counts even when late (busy %lld ms)",
	      x.m.py_steps.n ? (long long)(x.m.py_steps.v[0].gpu_busy_ns / MS) : -1LL);
	CHECK(x.m.py_steps.n == 2 && x.m.py_steps.v[1].gpu_busy_ns == 0,
	      "cutoff: work queued mid-wait by another thread does not make the wait busy");
	done(&x);
}

/* (d1) a probe given up when the pool filled: its PROBE_DONE time bounds it. */
static void test_lost_bounded(void)
{
	struct run x;

	for (int i = 0; i < STEPS; i++) {
		int64_t b = step_begin(i);
		launch(b - HOST_NS + 10 * US, 0x7000);
		fetch(b, WAIT_NS, i);
		probe(b + 30 * US, i + 1, 0x7000);
		/* Given up two steps later, still unfinished. */
		probe_done(b + 2 * PERIOD + 20 * US, i + 1, 0, 1);
	}
	write_trace();
	analyze(&x);
	CHECK(x.g.probes_lost == STEPS && x.g.probes_lost_bounded == STEPS,
	      "lost/bounded: %llu lost, %llu with a bound", (unsigned long long)x.g.probes_lost,
	      (unsigned long long)x.g.probes_lost_bounded);
	CHECK(sum_idle(&x.m.py_steps) == 0,
	      "lost/bounded: unfinished-when-given-up probes make the waits busy (idle %lld ns)",
	      (long long)sum_idle(&x.m.py_steps));
	CHECK(x.g.waits_unknown == 0, "lost/bounded: the bound covers the waits: none unknown");
	window_all(&x);
	CHECK(has_reason(&x.g, "probes lost"), "lost/bounded: reason reports the lost probes");
	done(&x);
}

/*
 * (d3) a lost probe never superseded: its side stream gets no later probe,
 * so every later wait lacks its evidence until the trace ends.  Far more
 * steps than the GPU pass holds pending: the oldest are split early (as
 * unknown waits, which they are), and memory stays bounded.
 */
static void test_lost_never_superseded(void)
{
	enum { N = 20000 };
	struct run x;

	launch(step_begin(0) - HOST_NS, 0x7001);
	for (int i = 0; i < N; i++) {
		int64_t b = step_begin(i);
		launch(b - HOST_NS + 10 * US, 0x7000);
		fetch(b, WAIT_NS, i);
		if (i == 0) {
			probe(b + 20 * US, 1, 0x7001);
			probe_done(b + 25 * US, 1, 0, 1);
			continue;
		}
		probe(b + 30 * US, i + 1, 0x7000);
		probe_done(b + PERIOD + 40 * US, i + 1, b + 3 * MS, 0);
	}
	write_trace();
	analyze(&x);
	CHECK(x.m.py_steps.n == N && x.m.py_steps.nkept == N, "never superseded: %d steps", N);
	CHECK(x.g.waits_unknown == N && x.g.waits_with_probe == 0,
	      "never superseded: all %d waits unknown (got %zu unknown, %zu probed)", N,
	      x.g.waits_unknown, x.g.waits_with_probe);
	CHECK(sum_busy(&x.m.py_steps) == (int64_t)(N - 1) * 3 * MS + 25 * US,
	      "never superseded: each wait keeps its known 3 ms busy (total %lld ns)",
	      (long long)sum_busy(&x.m.py_steps));
	CHECK(x.g.steps_forced > 0 && x.g.steps_forced < (uint64_t)N &&
		      x.g.steps_forced_unknown == x.g.steps_forced,
	      "never superseded: %llu steps split before the end of the trace, all unknown",
	      (unsigned long long)x.g.steps_forced);
	window_all(&x);
	CHECK(has_reason(&x.g, "ran out of lookahead"),
	      "never superseded: a reason says steps were split early");
	done(&x);
}

/*
 * (d4) GPU work stops while the loop goes on (a CPU-only tail: evaluation,
 * a data pass).  No later launch will size a refill bubble: waits the GPU
 * was idle through have none to size, and the last GPU step's bubble is
 * given up after REFILL_WAIT_NS without GPU work, as at the end of a trace;
 * nothing is held back until the ceiling.
 */
static void test_gpu_then_cpu_tail(void)
{
	enum { GPU_STEPS = 10, N = 20000 };
	struct run x;

	for (int i = 0; i < N; i++) {
		int64_t b = step_begin(i);
		fetch(b, WAIT_NS, i);
		if (i >= GPU_STEPS)
			continue;
		launch(b - HOST_NS + 10 * US, 0x7000);
		probe(b + 30 * US, i + 1, 0x7000);
		probe_done(b + PERIOD + 40 * US, i + 1, b + 3 * MS, 0);
	}
	write_trace();
	analyze(&x);
	CHECK(x.m.py_steps.n == N && x.g.steps_forced == 0 && x.g.waits_unknown == 0,
	      "cpu tail: %d steps, none forced (got %llu), none unknown (got %zu)", N,
	      (unsigned long long)x.g.steps_forced, x.g.waits_unknown);
	CHECK(sum_busy(&x.m.py_steps) == (int64_t)GPU_STEPS * 3 * MS,
	      "cpu tail: only the GPU steps' waits are busy (total %lld ns)",
	      (long long)sum_busy(&x.m.py_steps));
	window_all(&x);
	CHECK(!has_reason(&x.g, "ran out of lookahead"), "cpu tail: no early-split line");
	done(&x);
}

/* (d2) a lost probe superseded by the next probe on its stream. */
static void test_lost_superseded(void)
{
	struct run x;

	for (int i = 0; i < 6; i++) {
		int64_t b = step_begin(i);
		launch(b - HOST_NS + 10 * US, 0x7000);
		fetch(b, WAIT_NS, i);
		probe(b + 30 * US, i + 1, 0x7000);
		if (i == 2)
			probe_done(b + 40 * US, i + 1, 0, 1); /* lost at once: bound 40 us */
		else
			probe_done(b + PERIOD + 40 * US, i + 1, b + 3 * MS, 0);
	}
	write_trace();
	analyze(&x);
	const struct dlbn_step *v = x.m.py_steps.v;
	CHECK(x.m.py_steps.gs[2].evidence == DLBN_GPU_EV_UNKNOWN,
	      "lost/superseded: the wait of the lost probe is unknown");
	CHECK(v[2].gpu_busy_ns == 40 * US && v[2].gpu_idle_ns == WAIT_NS - 40 * US,
	      "lost/superseded: it keeps the known 40 us busy, the rest counts idle");
	CHECK(x.m.py_steps.gs[3].evidence == DLBN_GPU_EV_PROBE && v[3].gpu_busy_ns == 3 * MS,
	      "lost/superseded: the next probe on the stream restores the evidence");
	CHECK(x.g.waits_unknown == 1, "lost/superseded: one unknown wait (got %zu)",
	      x.g.waits_unknown);
	done(&x);
}

/* (d3) a driver error: no bound, probing stops, later waits are unknown. */
static void test_probing_stopped(void)
{
	struct run x;

	for (int i = 0; i < 10; i++) {
		int64_t b = step_begin(i);
		launch(b - HOST_NS + 10 * US, 0x7000);
		fetch(b, WAIT_NS, i);
		if (i < 4) {
			probe(b + 30 * US, i + 1, 0x7000);
			if (i < 3)
				probe_done(b + PERIOD + 40 * US, i + 1, b + WAIT_NS + MS, 0);
			else {
				probe_done(b + PERIOD + 40 * US, i + 1, 0, 1);
				cuda_info(b + PERIOD + 41 * US, DLBN_CUDA_INFO_PROBE_OFF, 700,
					  "probe: cuEventQuery/cuEventElapsedTime failed");
			}
		}
	}
	write_trace();
	analyze(&x);
	CHECK(x.g.probing_stopped && x.g.probes_lost == 1 && x.g.probes_lost_bounded == 0,
	      "stopped: driver-error loss gets no bound");
	CHECK(x.g.waits_unknown == 7 && x.g.waits_with_probe == 3,
	      "stopped: 3 waits probed, 7 unknown (got %zu, %zu)", x.g.waits_with_probe,
	      x.g.waits_unknown);
	CHECK(x.m.py_steps.v[0].gpu_idle_ns == 0 && x.m.py_steps.v[5].gpu_idle_ns == WAIT_NS,
	      "stopped: probed waits busy, unknown waits counted idle (upper bound)");
	window_all(&x);
	CHECK(has_reason(&x.g, "no usable GPU probe") && has_reason(&x.g, "probing stopped"),
	      "stopped: reasons say the evidence is missing and why");
	CHECK(x.g.win.waits_unknown == 7 && x.g.win.wait_unknown_idle_s > 0.0699 &&
		      x.g.win.wait_unknown_idle_s < 0.0701,
	      "stopped: the window states the stall's uncertainty (%.4f s of unknown idle)",
	      x.g.win.wait_unknown_idle_s);
	done(&x);
}

/* Probes whose PROBE_DONE never comes: the ring stays bounded. */
static void test_unresolved(void)
{
	struct run x;

	for (int i = 0; i < 3000; i++) {
		int64_t b = T0 + (int64_t)i * 2 * MS;
		launch(b - 500 * US, 0x7000);
		fetch(b, MS, i);
		probe(b + 10 * US, i + 1, 0x7000);
	}
	write_trace();
	analyze(&x);
	CHECK(x.g.probes == 3000 && x.g.probes_unresolved == 3000 && x.g.probes_resolved == 0,
	      "unresolved: 3000 probes never resolved are counted (%llu)",
	      (unsigned long long)x.g.probes_unresolved);
	CHECK(x.g.waits_unknown == 3000 && sum_idle(&x.m.py_steps) == 3000 * MS,
	      "unresolved: their waits are unknown and counted idle");
	done(&x);
}

/* Waits before the process queued any GPU work are known GPU-idle. */
static void test_no_work_yet(void)
{
	struct run x;

	for (int i = 0; i < 8; i++) {
		int64_t b = step_begin(i);
		if (i >= 3) {
			launch(b - HOST_NS + 10 * US, 0x7000);
			probe(b + 30 * US, i + 1, 0x7000);
			probe_done(b + PERIOD + 40 * US, i + 1, b + WAIT_NS, 0);
		}
		fetch(b, WAIT_NS, i);
	}
	write_trace();
	analyze(&x);
	CHECK(x.g.waits_no_work == 3 && x.g.waits_with_probe == 5 && x.g.waits_unknown == 0,
	      "no work yet: 3 waits before any GPU work, 5 probed (got %zu, %zu)",
	      x.g.waits_no_work, x.g.waits_with_probe);
	CHECK(x.m.py_steps.gs[0].evidence == DLBN_GPU_EV_NO_WORK &&
		      x.m.py_steps.v[0].gpu_idle_ns == WAIT_NS &&
		      x.m.py_steps.v[3].gpu_busy_ns == WAIT_NS,
	      "no work yet: early waits idle, later waits busy from their probes");
	/* Before any GPU work the GPU is known idle at an arrival: the leads
	 * after a no-work wait are known (all idle; up to the first launch). */
	CHECK(x.m.py_steps.v[1].gpu_lead_idle_ns == HOST_NS &&
		      x.m.py_steps.v[3].gpu_lead_idle_ns == 10 * US,
	      "no work yet: leads known, %lld and %lld ns idle",
	      (long long)x.m.py_steps.v[1].gpu_lead_idle_ns,
	      (long long)x.m.py_steps.v[3].gpu_lead_idle_ns);
	done(&x);
}

/*
 * The IPC view (no Python marks): a worker process writes batches to a
 * result pipe, the main thread polls and reads it; the probes sit at the
 * poll.  Both the split and the window work on the model's chosen view.
 */
static void test_ipc_view(void)
{
	enum { N = 30 };
	const int64_t ino = 77001, poll_ns = 8 * MS;
	struct tg *g = tg_open(path, 0);
	struct tg_stream *mt, *wk;
	struct run x;
	int ok = 1;

	if (!g)
		exit(2);
	mt = tg_stream(g, 0, 0, PID, PID);
	wk = tg_stream(g, 1, 0, PID + 1, PID + 1);
	tg_process(mt, T0 - 10 * MS, PID, 1, -1, DLBN_START_ROOT, "python3");
	tg_thread(mt, T0 - 10 * MS, PID, 1);
	tg_process(wk, T0 - 9 * MS, PID + 1, PID, 0, DLBN_START_FORK, "python3");
	tg_thread(wk, T0 - 9 * MS, PID + 1, 1);
	for (int i = 0; i < N; i++) {
		int64_t b = step_begin(i);
		tg_rec(mt, DLBN_REC_LAUNCH, b - 2 * MS, "ii", (int64_t)0x7000,
		       (int64_t)DLBN_CU_LAUNCH_KERNEL);
		/* As the recorder does: at the wait begin t0 it first resolves
		 * the previous probe (PROBE_DONE stamped a little after t0), then
		 * writes the new PROBE stamped t0; the POLL record follows when
		 * the wait returns. */
		if (i > 0)
			tg_rec(mt, DLBN_REC_PROBE_DONE, b + 5 * US, "iii", (int64_t)i,
			       step_begin(i - 1) + 5 * MS, (int64_t)0);
		tg_rec(mt, DLBN_REC_PROBE, b, "ii", (int64_t)(i + 1), (int64_t)0x7000);
		tg_poll(mt, b, poll_ns, 1, -1, &ino, 1);
		tg_write(wk, b + poll_ns - 100 * US, 20 * US, 5, DLBN_FD_PIPE, ino, 4 + 1000);
		tg_read(mt, b + poll_ns, 10 * US, 7, DLBN_FD_PIPE, ino, 4);
		tg_read(mt, b + poll_ns + 20 * US, 50 * US, 7, DLBN_FD_PIPE, ino, 1000);
	}
	tg_rec(mt, DLBN_REC_PROBE_DONE, step_begin(N), "iii", (int64_t)N,
	       step_begin(N - 1) + 5 * MS, (int64_t)0);
	tg_exit(wk, step_begin(N), 0, DLBN_EXIT__EXIT);
	tg_exit(mt, step_begin(N) + MS, 0, DLBN_EXIT_DTOR);
	tg_stream_final(wk);
	tg_stream_final(mt);
	if (tg_close(g) != 0)
		exit(2);
	analyze(&x);
	CHECK(x.m.view == DLBN_VIEW_IPC && x.m.path == DLBN_PATH_DIRECT && x.m.ipc_steps.n == N,
	      "ipc: direct path, %d steps from the pipe (got view %d, %zu steps)", N, x.m.view,
	      x.m.ipc_steps.n);
	for (size_t i = 0; i < x.m.ipc_steps.n; i++) {
		const struct dlbn_step *st = &x.m.ipc_steps.v[i];
		if (st->gpu_busy_ns != 5 * MS || st->gpu_idle_ns != st->wait_ns - 5 * MS) {
			if (ok)
				printf("# step %zu: wait %lld busy %lld idle %lld ns\n", i,
				       (long long)st->wait_ns, (long long)st->gpu_busy_ns,
				       (long long)st->gpu_idle_ns);
			ok = 0;
		}
	}
	CHECK(ok && x.m.ipc_steps.n, "ipc: every wait 5 ms GPU-busy, the rest idle");
	if (x.m.steps && x.m.steps->n) {
		const struct dlbn_steps *st = x.m.steps;
		dlbn_gpu_window(&x.g, st, st->v[4].end, st->v[st->n - 1].end);
		print_reasons(&x.g);
		CHECK(x.g.win.steps == (size_t)N - 5 && x.g.win.waits_with_probe == (size_t)N - 5,
		      "ipc: window of the chosen view holds %d probed waits (got %zu)", N - 5,
		      x.g.win.waits_with_probe);
	}
	done(&x);
}

/* (e) no CUDA records: the CPU-only rule is left as the model set it. */
static void test_no_cuda(void)
{
	struct run x;

	for (int i = 0; i < STEPS; i++)
		fetch(step_begin(i), WAIT_NS, i);
	write_trace();
	analyze(&x);
	CHECK(!x.g.present, "no CUDA: gpu.present is false");
	CHECK(sum_idle(&x.m.py_steps) == STEPS * WAIT_NS && sum_busy(&x.m.py_steps) == 0,
	      "no CUDA: every wait stays a stall (gpu_idle_ns = wait_ns)");
	window_all(&x);
	CHECK(has_reason(&x.g, "CPU-only rule"), "no CUDA: the reason names the CPU-only rule");
	done(&x);
}

/* (f) pageable H2D copies and per-step syncs: evidence lines and figures. */
static void test_pageable_and_sync(void)
{
	struct run x;
	char json[64], cmd[1024];
	FILE *f;

	for (int i = 0; i < STEPS; i++) {
		int64_t b = step_begin(i), t = b - HOST_NS;
		/* 2 MiB from pageable memory, host blocked 1.5 ms. */
		recbuf_add(t + 10 * US, DLBN_REC_MEMCPY, 7, (int64_t)(1500 * US),
			   (int64_t)DLBN_CU_MEMCPY_HTOD, (int64_t)0, (int64_t)(2 << 20),
			   (int64_t)DLBN_COPY_HTOD, (int64_t)0, (int64_t)DLBN_HOSTMEM_PAGEABLE);
		recbuf_add(t + 1600 * US, DLBN_REC_MEMCPY, 7, (int64_t)(20 * US),
			   (int64_t)DLBN_CU_MEMCPY_HTOD, (int64_t)0x7000, (int64_t)4096,
			   (int64_t)DLBN_COPY_HTOD, (int64_t)1, (int64_t)DLBN_HOSTMEM_PINNED);
		launch(t + 1700 * US, 0x7000);
		/* loss.item(): the host waits 1 ms for the GPU. */
		recbuf_add(t + 1800 * US, DLBN_REC_SYNC, 3, (int64_t)MS,
			   (int64_t)DLBN_CU_STREAM_SYNC, (int64_t)0x7000);
		fetch(b, WAIT_NS, i);
	}
	write_trace();
	analyze(&x);
	CHECK(x.g.host.pageable_h2d == STEPS && x.g.host.pageable_h2d_bytes == STEPS * (2 << 20),
	      "pageable: %lld copies, %lld bytes", (long long)x.g.host.pageable_h2d,
	      (long long)x.g.host.pageable_h2d_bytes);
	CHECK(x.g.host.pinned_h2d == STEPS && x.g.host.async_copies == STEPS &&
		      x.g.host.sync_copies == STEPS,
	      "pageable: pinned/async copies counted apart");
	CHECK(x.g.host.sync_ns[DLBN_GPU_SYNC_STREAM] == STEPS * MS,
	      "sync: host blocked in cuStreamSynchronize summed");
	/* The sync drained the stream before each wait: known idle, no probe needed. */
	CHECK(x.g.waits_unknown == 0 && sum_idle(&x.m.py_steps) == STEPS * WAIT_NS,
	      "sync: a drained stream needs no probe, the waits are GPU-idle");
	window_all(&x);
	CHECK(x.g.win.host.pageable_h2d == STEPS - 1 &&
		      x.g.win.host.pageable_h2d_ns == (STEPS - 1) * 1500 * US,
	      "pageable: window holds %d copies, 1.5 ms each", STEPS - 1);
	CHECK(has_reason(&x.g, "pageable memory block the host 1.50 ms per step") &&
		      has_reason(&x.g, "pin_memory=True"),
	      "pageable: the reason quantifies it and recommends pin_memory=True");
	CHECK(has_reason(&x.g, "cuStreamSynchronize"), "sync: the reason names the sync API");

	snprintf(json, sizeof(json), "%s.json", path);
	f = fopen(json, "w");
	if (f) {
		dlbn_gpu_json(f, &x.g);
		fclose(f);
	}
	snprintf(cmd, sizeof(cmd),
		 "/usr/bin/python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); "
		 "w=d[\"window\"]; assert d[\"present\"] is True; "
		 "assert w[\"host\"][\"pageable_h2d\"][\"count\"]==%d; "
		 "assert abs(w[\"host\"][\"pageable_h2d\"][\"per_step_ms\"]-1.5)<1e-9; "
		 "assert w[\"host\"][\"host_sync_s\"][\"stream\"]>0; "
		 "assert len(d[\"reasons\"])>=2' %s",
		 STEPS - 1, json);
	CHECK(f && system(cmd) == 0, "JSON: valid, with the pageable and sync figures");
	unlink(json);
	f = tmpfile();
	if (f) {
		char buf[4096] = "";
		dlbn_gpu_text(f, &x.g);
		rewind(f);
		size_t n = fread(buf, 1, sizeof(buf) - 1, f);
		buf[n] = 0;
		fclose(f);
		CHECK(strstr(buf, "pageable") && strstr(buf, "launches"),
		      "text: the GPU section has launches and pageable copies");
	}
	done(&x);
}

/* JSON strings from the trace are escaped. */
static void test_json_escaping(void)
{
	struct run x;
	char json[64], cmd[1024];
	FILE *f;

	launch(T0, 0x7000);
	cuda_info(T0 + 1, DLBN_CUDA_INFO_DRIVER, 12040, "drv \"12.4\"\\\n\x01\xff");
	for (int i = 0; i < 3; i++)
		fetch(step_begin(i), WAIT_NS, i);
	write_trace();
	analyze(&x);
	window_all(&x);
	CHECK(x.g.driver_version == 12040 && x.g.nnotes == 1, "info: driver version and note kept");
	snprintf(json, sizeof(json), "%s.json", path);
	f = fopen(json, "w");
	if (f) {
		dlbn_gpu_json(f, &x.g);
		fclose(f);
	}
	snprintf(cmd, sizeof(cmd),
		 "/usr/bin/python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); "
		 "assert d[\"driver_notes\"][0].startswith(\"drv \\\"12.4\\\"\\\\\\n\")' %s",
		 json);
	CHECK(f && system(cmd) == 0, "JSON: quotes, backslashes and control bytes escaped");
	unlink(json);
	done(&x);
}

static long max_rss_kib(void)
{
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	return ru.ru_maxrss;
}

/*
 * (g) a million probes on 50 streams over 20000 steps, each PROBE_DONE
 * arriving during the next step (up to 100 pending): memory stays flat.
 * Written directly, in time order (too many to buffer).
 */
static void test_million_probes(void)
{
	enum { NSTEP = 20000, NSTREAM = 50 };
	const int64_t period = 2 * MS, wait = MS;
	struct tg *g = tg_open(path, 0);
	struct tg_stream *s;
	struct run x;
	int64_t id = 1;
	long rss0, rss1;

	if (!g)
		exit(2);
	s = tg_stream(g, 0, 0, PID, PID);
	tg_process(s, T0 - MS, PID, 1, -1, DLBN_START_ROOT, "python3");
	tg_thread(s, T0 - MS, PID, 1);
	for (int i = 0; i < NSTEP; i++) {
		int64_t b = T0 + (int64_t)i * period + MS;
		for (int k = 0; k < NSTREAM; k++)
			tg_rec(s, DLBN_REC_LAUNCH, b - MS + k, "ii", (int64_t)(0x7000 + 16 * k),
			       (int64_t)DLBN_CU_LAUNCH_KERNEL);
		tg_mark(s, b, DLBN_MARK_FETCH_BEGIN, 1, i);
		for (int k = 0; k < NSTREAM; k++)
			tg_rec(s, DLBN_REC_PROBE, b + 10 * US, "ii", id + k,
			       (int64_t)(0x7000 + 16 * k));
		/* The previous step's probes resolve now, newest first: they
		 * completed 300 us into their wait. */
		for (int k = NSTREAM - 1; i > 0 && k >= 0; k--)
			tg_rec(s, DLBN_REC_PROBE_DONE, b + 20 * US, "iii", id - NSTREAM + k,
			       b - period + 300 * US, (int64_t)0);
		tg_mark(s, b + wait, DLBN_MARK_FETCH_END, 1, i);
		id += NSTREAM;
	}
	for (int k = 0; k < NSTREAM; k++)
		tg_rec(s, DLBN_REC_PROBE_DONE, T0 + NSTEP * period + 10 * US, "iii",
		       id - NSTREAM + k, T0 + NSTEP * period - period + MS + 300 * US, (int64_t)0);
	tg_exit(s, T0 + NSTEP * period + MS, 0, DLBN_EXIT_DTOR);
	tg_stream_final(s);
	if (tg_close(g) != 0)
		exit(2);

	memset(&x, 0, sizeof(x));
	char err[256];
	struct dlbn_model_opts mo;
	x.r = dlbn_reader_open(path, err, sizeof(err));
	if (!x.r)
		exit(2);
	dlbn_gpu_model_opts(&mo); /* steps not kept: memory as dlbn-analyze uses it */
	rss0 = max_rss_kib();
	if (dlbn_model_build(&x.m, x.r, &mo) != 0)
		exit(2);
	rss1 = max_rss_kib();
	x.g = x.m.gpu;
	CHECK(x.g.probes == (uint64_t)NSTEP * NSTREAM && x.g.probes_resolved == x.g.probes,
	      "million: %llu probes, %llu resolved", (unsigned long long)x.g.probes,
	      (unsigned long long)x.g.probes_resolved);
	CHECK(x.g.streams == NSTREAM, "million: %zu streams", x.g.streams);
	CHECK(x.g.waits_with_probe == NSTEP && x.g.waits_unknown == 0,
	      "million: every wait has probe evidence");
	CHECK(fabs(x.g.wait_gpu_busy_s - (double)NSTEP * 300e-6) < 1e-6,
	      "million: each wait 300 us busy (total %.6f s)", x.g.wait_gpu_busy_s);
	CHECK(x.m.py_steps.n == NSTEP && x.m.py_steps.nkept == 0, "million: %zu steps, none kept",
	      x.m.py_steps.n);
	CHECK(rss1 - rss0 < 8 * 1024,
	      "million: peak memory grew %ld KiB during the build and GPU split (bound 8 MiB)",
	      rss1 - rss0);
	done(&x);
}

int main(void)
{
	int fd = mkstemp(path);

	if (fd < 0)
		return 2;
	close(fd);
	test_input_bound();
	test_compute_bound();
	test_model_without_split();
	test_partial();
	test_probe_cutoff();
	test_lost_bounded();
	test_lost_superseded();
	test_lost_never_superseded();
	test_gpu_then_cpu_tail();
	test_probing_stopped();
	test_unresolved();
	test_no_work_yet();
	test_ipc_view();
	test_gap_in_lead();
	test_no_cuda();
	test_pageable_and_sync();
	test_json_escaping();
	test_million_probes();
	unlink(path);
	recbuf_free();
	CHECK_EXIT();
}
