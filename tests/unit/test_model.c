/*
 * test_model.c - the model on synthetic DataLoader traces (tgsim): roles
 * by pipe identity, direct and pin-memory paths, the Python view and the
 * IPC view giving the same steps, prefetch depth from the config and from
 * index writes, epochs, a worker killed with SIGKILL, the localisation
 * (saturated workers, storage), and valid JSON output.
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
#include "report/report.h"
#include "tgsim.h"
#include "analysis/verdict.h"

static char path[] = "/tmp/dlbn-test-model-XXXXXX";

struct run {
	struct dlbn_reader *r;
	struct dlbn_model m;
	struct dlbn_analysis a;
	char reasons[4096], recs[4096], warnings[4096];
};

static void open_run(struct run *x, int force_view)
{
	char err[256];
	struct dlbn_model_opts mo;
	struct dlbn_verdict_opts vo;
	memset(x, 0, sizeof(*x));
	x->r = dlbn_reader_open(path, err, sizeof(err));
	if (!x->r) {
		printf("cannot open: %s\n", err);
		exit(1);
	}
	dlbn_gpu_model_opts(&mo);
	mo.keep_steps = 1;
	mo.force_view = force_view;
	dlbn_verdict_default_opts(&vo);
	if (dlbn_model_build(&x->m, x->r, &mo) != 0 ||
	    dlbn_analyze(&x->m, dlbn_reader_stats(x->r), &vo, &x->a) != 0)
		exit(1);
	for (size_t i = 0; i < x->a.nreasons; i++)
		strncat(strcat(x->reasons, "\n"), x->a.reasons[i], 1000);
	for (size_t i = 0; i < x->a.nrecs; i++)
		strncat(strcat(x->recs, "\n"), x->a.recs[i], 1000);
	for (size_t i = 0; i < x->a.nwarnings; i++)
		strncat(strcat(x->warnings, "\n"), x->a.warnings[i], 1000);
}

static void close_run(struct run *x)
{
	dlbn_analysis_free(&x->a);
	dlbn_model_free(&x->m);
	dlbn_reader_close(x->r);
}

static void gen(const struct tgsim_params *p)
{
	if (tgsim_write(path, p, NULL) != 0)
		exit(1);
}

static int tid_of(const struct dlbn_model *m, ssize_t ti)
{
	return ti >= 0 ? m->threads[ti].tid : -1;
}

/* Python and IPC steps describe the same fetches. */
static int same_steps(const struct dlbn_model *m, int64_t tol_ns)
{
	if (m->py_steps.n != m->ipc_steps.n)
		return 0;
	for (size_t i = 0; i < m->py_steps.n; i++) {
		const struct dlbn_step *a = &m->py_steps.v[i], *b = &m->ipc_steps.v[i];
		if (llabs(a->begin - b->begin) > tol_ns || llabs(a->end - b->end) > tol_ns)
			return 0;
	}
	return 1;
}

static void direct_path(void)
{
	struct tgsim_params p;
	struct run x, y;
	tgsim_default(&p); /* 2 workers x 40 ms per batch, loop 10 ms: input-bound */
	gen(&p);
	open_run(&x, DLBN_VIEW_NONE);
	const struct dlbn_model *m = &x.m;
	CHECK(m->training >= 0 && m->procs[m->training].pid == 1000, "training process = pid 1000");
	CHECK(tid_of(m, m->main_thread) == 1000 && m->path == DLBN_PATH_DIRECT && m->pin_thread < 0,
	      "main thread 1000, direct path");
	CHECK(m->nworkers_total == 2 && m->num_workers_inferred == 2,
	      "2 workers found by pipe identity");
	CHECK(m->prefetch_writes == 4 && m->prefetch_depth == 4 && m->prefetch_from_config,
	      "prefetch depth 4 (config; 4 index writes before the first batch)");
	CHECK(m->view == DLBN_VIEW_PYTHON && m->py_steps.n == 200, "python view, 200 steps");
	CHECK(same_steps(m, 200000), "IPC view finds the same 200 steps (within 0.2 ms)");
	CHECK(x.a.verdict == DLBN_VERDICT_DETECTED && fabs(x.a.predicted_speedup - 2.0) < 0.1,
	      "DETECTED, speedup ~2.0 (got %.3f)", x.a.predicted_speedup);
	CHECK(!strcmp(dlbn_cause_name(x.a.cause), "workers_saturated") &&
		      strstr(x.recs, "num_workers 2 -> 5"),
	      "cause workers_saturated, recommends num_workers 2 -> 5");
	CHECK(x.a.nworkers == 2 && x.a.workers[0].busy_fraction > 0.95 &&
		      fabs(x.a.workers[0].mean_batch_ms - 40) < 2,
	      "worker busy %.2f, %.1f ms per batch", x.a.workers[0].busy_fraction,
	      x.a.workers[0].mean_batch_ms);
	CHECK(x.a.recv_fds > 1.99 && x.a.recv_fds < 2.01 && x.a.recv_ms > 0.5 && x.a.recv_ms < 1.1,
	      "hand-off: 2 fds, %.2f ms per batch", x.a.recv_ms);
	double py = x.a.predicted_speedup;

	/* JSON output parses. */
	char json[300];
	snprintf(json, sizeof(json), "%s.json", path);
	FILE *f = fopen(json, "w");
	struct dlbn_report_input in = {.path = "/tmp/with \"quote\"\\.bin",
				       .rs = dlbn_reader_stats(x.r),
				       .m = m,
				       .a = &x.a};
	dlbn_report_json(f, &in);
	fclose(f);
	char *md = NULL;
	size_t mdlen = 0;
	FILE *mf = open_memstream(&md, &mdlen);
	dlbn_report_markdown(mf, &in);
	fclose(mf);
	CHECK(strstr(md, "| **DETECTED** | 2.0") && strstr(md, "num\\_workers 2 -> 5"),
	      "markdown report: decision table and the recommendation");
	free(md);
	close_run(&x);
	if (system("python3 -c 'pass' 2>/dev/null") == 0) {
		char cmd[600];
		snprintf(cmd, sizeof(cmd),
			 "python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); "
			 "assert d[\"verdict\"]==\"DETECTED\" and d[\"view\"]==\"python\" and "
			 "d[\"steps\"][\"window\"]==195 and len(d[\"workers\"])==2 and "
			 "d[\"gpu\"] is None' '%s'",
			 json);
		CHECK(system(cmd) == 0, "JSON report is valid and has the stable keys");
	}
	unlink(json);

	open_run(&y, DLBN_VIEW_IPC);
	CHECK(y.a.view == DLBN_VIEW_IPC && fabs(y.a.predicted_speedup - py) / py < 0.02,
	      "forced IPC view: speedup %.3f within 2%% of the python view's %.3f",
	      y.a.predicted_speedup, py);
	close_run(&y);

	p.helper = 1;
	gen(&p);
	open_run(&x, DLBN_VIEW_NONE);
	CHECK(x.m.nworkers_total == 2 && x.a.nworkers == 2,
	      "a forkserver-like helper writing to the trainer is not a worker (%zu workers)",
	      x.m.nworkers_total);
	close_run(&x);
	p.helper = 0;

	p.marks = 0;
	gen(&p);
	open_run(&x, DLBN_VIEW_NONE);
	CHECK(x.m.view == DLBN_VIEW_IPC && x.m.ipc_steps.n == 200 && !x.m.prefetch_from_config &&
		      x.m.prefetch_depth == 4,
	      "no bootstrap: IPC view, 200 steps, prefetch depth 4 inferred from index writes");
	CHECK(x.a.verdict == DLBN_VERDICT_DETECTED, "no bootstrap: DETECTED from IPC alone");
	close_run(&x);

	/* Fast workers: the loop is the bottleneck. */
	tgsim_default(&p);
	p.batch_ms = 5;
	p.loop_ms = 20;
	for (int marks = 1; marks >= 0; marks--) {
		p.marks = marks;
		gen(&p);
		open_run(&x, DLBN_VIEW_NONE);
		CHECK(x.a.verdict == DLBN_VERDICT_NOT_DETECTED && x.a.mean_busy < 0.5,
		      "fast workers (%s view): NOT_DETECTED (%.3f), workers busy %.0f%%",
		      dlbn_view_name(x.a.view), x.a.predicted_speedup, x.a.mean_busy * 100);
		close_run(&x);
	}
}

static void pin_path(void)
{
	struct tgsim_params p;
	struct run x, y;
	tgsim_default(&p);
	p.pin = 1;
	gen(&p);
	open_run(&x, DLBN_VIEW_NONE);
	CHECK(x.m.path == DLBN_PATH_PIN && tid_of(&x.m, x.m.pin_thread) == 1002 &&
		      tid_of(&x.m, x.m.main_thread) == 1000,
	      "pin path: pin-memory thread 1002 reads the results, main thread 1000");
	CHECK(x.m.ipc_steps.n == 200 && x.m.py_steps.n == 200, "pin path: 200 steps in both views");
	open_run(&y, DLBN_VIEW_IPC);
	CHECK(x.a.verdict == DLBN_VERDICT_DETECTED && y.a.verdict == DLBN_VERDICT_DETECTED &&
		      fabs(y.a.predicted_speedup - x.a.predicted_speedup) / x.a.predicted_speedup <
			      0.05,
	      "pin path: IPC view (semaphore waits) %.3f within 5%% of python view %.3f",
	      y.a.predicted_speedup, x.a.predicted_speedup);
	CHECK(fabs(y.a.stall_s - x.a.stall_s) / x.a.stall_s < 0.05,
	      "pin path: stall %.3f s (sem waits) vs %.3f s (fetch marks)", y.a.stall_s,
	      x.a.stall_s);
	close_run(&x);
	close_run(&y);
}

static void killed_worker(void)
{
	struct tgsim_params p;
	struct run x;
	tgsim_default(&p);
	p.steps = 300;
	p.kill_at = 150;
	p.marks = 0;
	gen(&p);
	open_run(&x, DLBN_VIEW_NONE);
	CHECK(strstr(x.warnings, "worker pid 2000 ended without exit (killed?) at t=") != NULL,
	      "killed worker reported (worker pid 2000 ended without exit)");
	CHECK(x.a.verdict == DLBN_VERDICT_DETECTED && x.a.steps_window > 100,
	      "verdict still computed over the intact part (%zu steps)", x.a.steps_window);
	close_run(&x);
}

static void epochs(void)
{
	struct tgsim_params p;
	struct run x;
	tgsim_default(&p);
	p.steps = 300;
	p.epochs = 3;
	p.batch_ms = 8;
	gen(&p);
	open_run(&x, DLBN_VIEW_NONE);
	CHECK(x.m.py_steps.epochs == 3 && x.m.ipc_steps.epochs == 3 && x.m.nworkers_total == 6,
	      "3 epochs, non-persistent: 3 epochs in both views, 6 worker processes");
	CHECK(same_steps(&x.m, 200000), "epochs: both views give the same steps");
	CHECK(x.a.startup_stall_s > 0.03, "epoch start-up stall measured (%.3f s)",
	      x.a.startup_stall_s);
	close_run(&x);
	p.persistent = 1;
	gen(&p);
	open_run(&x, DLBN_VIEW_NONE);
	CHECK(x.m.py_steps.epochs == 3 && x.m.nworkers_total == 2,
	      "persistent workers: 3 epochs, the same 2 worker processes");
	close_run(&x);
}

static void storage(void)
{
	struct tgsim_params p;
	struct run x;
	tgsim_default(&p);
	p.file_ms = 30;
	gen(&p);
	open_run(&x, DLBN_VIEW_NONE);
	CHECK(!strcmp(dlbn_cause_name(x.a.cause), "storage") && strstr(x.reasons, "file reads"),
	      "75%% of worker time in file reads: cause storage (%s)", dlbn_cause_name(x.a.cause));
	close_run(&x);
}

int main(void)
{
	int fd = mkstemp(path);
	close(fd);
	direct_path();
	pin_path();
	killed_worker();
	epochs();
	storage();
	unlink(path);
	CHECK_EXIT();
}
