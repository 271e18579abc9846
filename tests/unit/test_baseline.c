/*
 * test_baseline.c - `--baseline`: the measured speedup of a Replay run over
 * the Real run's window (aligned by step index), the predicted-vs-measured
 * error, and the equivalence checks (steps, Replay marker, loader
 * configuration, batch bytes), on synthetic traces whose answers are known
 * exactly: Real steps wait W and compute L, Replay steps wait w and
 * compute L, so over the window measured = (W + L) / (w + L).
 *
 * With two arguments, `test_baseline REAL REPLAY` compares two recorded
 * traces the way `dlbn-analyze REAL --baseline REPLAY` does and prints the
 * "baseline" JSON object on the first line, the text lines after it
 * (tests/e2e/test_replay.py uses it while dlbn-analyze lacks --baseline).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "analysis/baseline.h"
#include "check.h"
#include "gpu/gpu.h"
#include "model/model.h"
#include "trace/reader.h"
#include "tracegen.h"
#include "analysis/verdict.h"

#define MS 1000000ll

static char real_path[] = "/tmp/dlbn-test-baseline-real-XXXXXX";
static char replay_path[] = "/tmp/dlbn-test-baseline-replay-XXXXXX";

#define CFG                                                                                        \
	"num_workers=2;batch_size=8;prefetch_factor=2;pin_memory=0;"                               \
	"persistent_workers=0;start_method=fork;dataset_kind=map"

/* n steps of the Python view: step 0 waits first_wait, the others wait,
 * every step then computes for loop_ns. */
static void loop_trace(const char *path, int n, int64_t first_wait, int64_t wait, int64_t loop_ns,
		       const char *config)
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
		t += i ? wait : first_wait;
		tg_mark(m, t, DLBN_MARK_FETCH_END, 1, i);
		t += loop_ns;
	}
	tg_exit(m, t, 0, DLBN_EXIT_DTOR);
	if (tg_close(g) != 0)
		abort();
}

/* A built and analysed trace. */
struct analysed {
	struct dlbn_reader *r;
	struct dlbn_model m;
	struct dlbn_analysis a;
};

static void analyse(struct analysed *x, const char *path)
{
	char err[256];
	struct dlbn_model_opts mo;
	struct dlbn_verdict_opts vo;
	dlbn_gpu_model_opts(&mo);
	dlbn_verdict_default_opts(&vo);
	x->r = dlbn_reader_open(path, err, sizeof(err));
	if (!x->r) {
		printf("cannot open %s: %s\n", path, err);
		exit(1);
	}
	if (dlbn_model_build(&x->m, x->r, &mo) != 0 ||
	    dlbn_analyze(&x->m, dlbn_reader_stats(x->r), &vo, &x->a) != 0)
		exit(1);
}

static void release(struct analysed *x)
{
	dlbn_analysis_free(&x->a);
	dlbn_model_free(&x->m);
	dlbn_reader_close(x->r);
}

/* The real trace at real_path against the replay trace at replay_path,
 * the Replay trace loaded the way dlbn-analyze --baseline does. */
static int compare(struct dlbn_baseline *b)
{
	struct analysed real;
	struct dlbn_model_opts mo;
	struct dlbn_verdict_opts vo;
	char err[256] = "";
	dlbn_gpu_model_opts(&mo);
	dlbn_verdict_default_opts(&vo);
	analyse(&real, real_path);
	int rc = dlbn_baseline_load(b, replay_path, &mo, &vo, real.r, &real.m, &real.a, err,
				    sizeof(err));
	if (rc != 0)
		printf("# baseline_load: %d %s\n", rc, err);
	release(&real);
	return rc;
}

static int has_note(const struct dlbn_baseline *b, const char *text)
{
	for (size_t i = 0; i < b->nnotes; i++)
		if (strstr(b->notes[i], text))
			return 1;
	return 0;
}

static void print_notes(const struct dlbn_baseline *b)
{
	for (size_t i = 0; i < b->nnotes; i++)
		printf("# note: %s\n", b->notes[i]);
}

static void equivalent_runs(void)
{
	struct dlbn_baseline b;
	/* Real: 2 ms wait + 1 ms loop -> predicted 3.00.  Replay: the cache
	 * fill in step 0 (50 ms), then 10 us per fetch. */
	loop_trace(real_path, 40, 2 * MS, 2 * MS, 1 * MS, CFG);
	loop_trace(replay_path, 40, 50 * MS, MS / 100, 1 * MS, CFG ";replay=8");
	CHECK(compare(&b) == 0, "equivalent runs: loaded");
	print_notes(&b);
	CHECK(b.equivalent && b.nnotes == 1 &&
		      has_note(
			      &b,
			      "batch bytes not compared: no batch hand-off seen in the replay run"),
	      "equivalent, the only note says bytes were not compared (%zu notes)", b.nnotes);
	CHECK(b.first_step == 4 && b.last_step == 39,
	      "window aligned on the real run's: steps 4..39 (got %zu..%zu)", b.first_step,
	      b.last_step);
	CHECK(fabs(b.real_wall_s - 35 * 3e-3) < 1e-9 && fabs(b.replay_wall_s - 35 * 1.01e-3) < 1e-9,
	      "walls 105 ms real, 35.35 ms replay (got %.6f, %.6f)", b.real_wall_s,
	      b.replay_wall_s);
	CHECK(fabs(b.measured_speedup - 3.0 / 1.01) < 1e-9, "measured 2.970 (got %.6f)",
	      b.measured_speedup);
	CHECK(fabs(b.predicted_speedup - 3.0) < 1e-6, "predicted 3.00 (got %.6f)",
	      b.predicted_speedup);
	CHECK(b.has_error && fabs(b.error_pct - 1.0) < 1e-6, "error +1.0%% (got %.6f)",
	      b.error_pct);
	CHECK(b.replay_batches == 8 && b.real_steps == 40 && b.replay_steps == 40,
	      "replay=8, 40 steps each");
	CHECK(b.replay_own_speedup > 0 && b.replay_own_speedup < 1.02,
	      "the replay run's own prediction ~1.0 (got %.4f)", b.replay_own_speedup);

	char *text = NULL;
	size_t len = 0;
	FILE *out = open_memstream(&text, &len);
	dlbn_baseline_json(out, &b);
	fclose(out);
	printf("# %s\n", text);
	CHECK(strstr(text, "\"measured_speedup\":2.9703") && strstr(text, "\"equivalent\":true") &&
		      strstr(text, "\"predicted_speedup\":3,") &&
		      strstr(text, "\"error_pct\":1,") && strstr(text, "\"replay_batches\":8") &&
		      text[0] == '{' && text[len - 1] == '}',
	      "JSON object carries measured, predicted, error, equivalent");
	free(text);
	out = open_memstream(&text, &len);
	dlbn_baseline_text(out, &b);
	fclose(out);
	printf("%s", text);
	CHECK(strstr(text, "MEASURED: speedup 2.97") && strstr(text, "+1.0%") &&
		      strstr(text, "runs equivalent"),
	      "text says measured 2.97, +1.0%%, equivalent");
	free(text);
}

static void different_work(void)
{
	struct dlbn_baseline b;
	loop_trace(real_path, 40, 2 * MS, 2 * MS, 1 * MS, CFG);
	loop_trace(replay_path, 38, 50 * MS, MS / 100, 1 * MS, CFG ";replay=8");
	compare(&b);
	print_notes(&b);
	CHECK(!b.equivalent && has_note(&b, "step counts differ: 40 in the real run, 38"),
	      "38 vs 40 steps: not equivalent, says so");
	CHECK(b.last_step == 37 && fabs(b.measured_speedup - 3.0 / 1.01) < 1e-9,
	      "still measured over the common steps 4..37 (got ..%zu, %.4f)", b.last_step,
	      b.measured_speedup);

	loop_trace(replay_path, 40, 2 * MS, MS / 100, 1 * MS, CFG);
	compare(&b);
	CHECK(!b.equivalent && b.replay_batches == -1 && has_note(&b, "is not a Replay run"),
	      "baseline without replay=N: not equivalent, says to use --replay");

	loop_trace(replay_path, 40, 2 * MS, MS / 100, 1 * MS,
		   "num_workers=4;batch_size=8;prefetch_factor=2;pin_memory=0;"
		   "persistent_workers=0;start_method=fork;dataset_kind=map;replay=8");
	compare(&b);
	print_notes(&b);
	CHECK(!b.equivalent && has_note(&b, "num_workers=2 in the real run, 4 in the replay run"),
	      "different num_workers: not equivalent, names both values");

	loop_trace(replay_path, 40, 2 * MS, MS / 100, 1 * MS, CFG ";replay=8;extra=1");
	compare(&b);
	CHECK(!b.equivalent && has_note(&b, "extra=absent in the real run, 1 in the replay run"),
	      "a key only the replay run has: not equivalent");

	loop_trace(replay_path, 40, 2 * MS, MS / 100, 1 * MS,
		   CFG ";replay=8;wrapper_replay=timm.data.loader:PrefetchLoader");
	compare(&b);
	print_notes(&b);
	CHECK(b.equivalent && has_note(&b, "cached what the loop iterates: the items "
					   "timm.data.loader:PrefetchLoader yields"),
	      "a replayed wrapper: still equivalent, and said");

	loop_trace(real_path, 40, 2 * MS, 2 * MS, 1 * MS, CFG ";replay=8");
	loop_trace(replay_path, 40, 50 * MS, MS / 100, 1 * MS, CFG ";replay=8");
	compare(&b);
	CHECK(!b.equivalent && has_note(&b, "itself a Replay run"),
	      "Replay against Replay: not equivalent");

	/* A "replay" that still waited for its batches. */
	loop_trace(real_path, 40, 2 * MS, 2 * MS, 1 * MS, CFG);
	loop_trace(replay_path, 40, 2 * MS, 1 * MS, 1 * MS, CFG ";replay=8");
	compare(&b);
	CHECK(has_note(&b, "still waited for batches") && fabs(b.measured_speedup - 1.5) < 1e-9,
	      "replay with 1 ms waits: measured 1.50, note that it still waited (%.4f)",
	      b.measured_speedup);
}

/* Bytes per batch: the bytes the models keep of their first hand-offs,
 * put in place directly (the comparison reads nothing else of them). */
static void batch_bytes(void)
{
	struct analysed real, replay;
	struct dlbn_baseline b;
	loop_trace(real_path, 40, 2 * MS, 2 * MS, 1 * MS, CFG);
	loop_trace(replay_path, 40, 50 * MS, MS / 100, 1 * MS, CFG ";replay=8");
	analyse(&real, real_path);
	analyse(&replay, replay_path);
	for (int i = 0; i < 12; i++)
		real.m.ipc_head_bytes[i] = i < 8 ? 1000 : 99999; /* only the first 8 compared */
	real.m.nipc_head = 12;
	for (int i = 0; i < 8; i++)
		replay.m.ipc_head_bytes[i] = 1050;
	replay.m.nipc_head = 8;
	dlbn_baseline_compare(&b, replay_path, real.r, &real.m, &real.a, replay.r, &replay.m,
			      &replay.a);
	print_notes(&b);
	CHECK(b.equivalent && !has_note(&b, "bytes"),
	      "1050 vs 1000 bytes per batch over the 8 cached: within 10%%, equivalent");
	for (int i = 0; i < 8; i++)
		replay.m.ipc_head_bytes[i] = 1200;
	dlbn_baseline_compare(&b, replay_path, real.r, &real.m, &real.a, replay.r, &replay.m,
			      &replay.a);
	print_notes(&b);
	CHECK(!b.equivalent && has_note(&b, "batch bytes differ: 1000 per batch in the real run, "
					    "1200 in the replay run"),
	      "1200 vs 1000 bytes per batch: not equivalent, says so");
	release(&real);
	release(&replay);
}

static void unreadable(void)
{
	struct analysed real;
	struct dlbn_baseline b;
	struct dlbn_model_opts mo;
	struct dlbn_verdict_opts vo;
	char err[256] = "";
	dlbn_gpu_model_opts(&mo);
	dlbn_verdict_default_opts(&vo);
	loop_trace(real_path, 40, 2 * MS, 2 * MS, 1 * MS, CFG);
	analyse(&real, real_path);
	int rc = dlbn_baseline_load(&b, "/nonexistent/replay.bin", &mo, &vo, real.r, &real.m,
				    &real.a, err, sizeof(err));
	CHECK(rc == -1 && err[0], "missing baseline trace: -1 with a message (%s)", err);
	release(&real);
}

static int compare_files(const char *real_trace, const char *replay_trace)
{
	struct analysed real;
	struct dlbn_baseline b;
	struct dlbn_model_opts mo;
	struct dlbn_verdict_opts vo;
	char err[256] = "";
	dlbn_gpu_model_opts(&mo);
	dlbn_verdict_default_opts(&vo);
	analyse(&real, real_trace);
	int rc = dlbn_baseline_load(&b, replay_trace, &mo, &vo, real.r, &real.m, &real.a, err,
				    sizeof(err));
	if (rc == 0) {
		dlbn_baseline_json(stdout, &b);
		putchar('\n');
		dlbn_baseline_text(stdout, &b);
	} else {
		fprintf(stderr, "test_baseline: %s\n", rc == -1 ? err : "out of memory");
	}
	release(&real);
	return rc ? 1 : 0;
}

int main(int argc, char **argv)
{
	if (argc == 3)
		return compare_files(argv[1], argv[2]);
	close(mkstemp(real_path));
	close(mkstemp(replay_path));
	equivalent_runs();
	different_work();
	batch_bytes();
	unreadable();
	unlink(real_path);
	unlink(replay_path);
	CHECK_EXIT();
}
