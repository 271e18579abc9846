/*
 * test_contention.c - CPU contention from SCHED (schedstat) samples
 * (docs/DESIGN.md, "Verdict rules"): saturated workers that wait for a CPU a
 * third of their busy time get the contention cause and a "cores are the limit"
 * recommendation instead of "num_workers a -> b"; the same run without
 * contention keeps the num_workers recommendation; a loop thread that waits
 * for a CPU is named with its share of the window.  Figures follow from
 * tgsim's parameters (tests/unit/tgsim.h).
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
#include "tgsim.h"
#include "analysis/verdict.h"

static char path[] = "/tmp/dlbn-test-contention-XXXXXX";

struct res {
	struct dlbn_analysis a;
	char text[8192];
};

static void run(const struct tgsim_params *p, struct res *x)
{
	char err[256];
	struct dlbn_model_opts mo;
	struct dlbn_verdict_opts vo;
	struct dlbn_model m;
	memset(x, 0, sizeof(*x));
	if (tgsim_write(path, p, NULL) != 0)
		exit(2);
	struct dlbn_reader *r = dlbn_reader_open(path, err, sizeof(err));
	if (!r)
		exit(2);
	dlbn_gpu_model_opts(&mo);
	dlbn_verdict_default_opts(&vo);
	if (dlbn_model_build(&m, r, &mo) != 0 || dlbn_analyze(&m, dlbn_reader_stats(r), &vo, &x->a))
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
	printf("# %s %.2f cause=%s main_runq=%.3f workers_runq=%.3f cpus=%.2f\n%s",
	       dlbn_verdict_name(x->a.verdict), x->a.predicted_speedup, dlbn_cause_name(x->a.cause),
	       x->a.main_runq_fraction, x->a.workers_runq_share, x->a.cpus_used, x->text);
	dlbn_analysis_free(&x->a); /* the scalar figures stay readable */
	dlbn_model_free(&m);
	dlbn_reader_close(r);
}

static void saturated(struct tgsim_params *p)
{
	tgsim_default(p);
	p->workers = 2;
	p->batch_ms = 40;
	p->loop_ms = 10;
	p->sched = 1;
}

static void test_contended_workers(void)
{
	struct tgsim_params p;
	struct res x;
	saturated(&p);
	p.worker_runq = 0.35;
	run(&p, &x);
	CHECK(x.a.verdict == DLBN_VERDICT_DETECTED, "contended: DETECTED (%s)",
	      dlbn_verdict_name(x.a.verdict));
	CHECK(fabs(x.a.workers_runq_share - 0.35) < 0.01,
	      "contended: workers wait for a CPU 35%% of their busy time (got %.3f)",
	      x.a.workers_runq_share);
	CHECK(x.a.cpu_contended, "contended: flagged");
	CHECK(!strcmp(dlbn_cause_name(x.a.cause), "cpu_contention"),
	      "contended: cause cpu_contention (got %s)", dlbn_cause_name(x.a.cause));
	CHECK(strstr(x.text, "the workers wait for a CPU 35% of their busy time (2 worker "
			     "processes") != NULL,
	      "contended: the reason gives the share and the worker count");
	CHECK(strstr(x.text, "REC cores are the limit, not num_workers") != NULL &&
		      strstr(x.text, "REC num_workers 2 ->") == NULL,
	      "contended: no num_workers increase; cores named as the limit");
}

static void test_uncontended_workers(void)
{
	struct tgsim_params p;
	struct res x;
	saturated(&p);
	p.worker_runq = 0.02;
	run(&p, &x);
	CHECK(fabs(x.a.workers_runq_share - 0.02) < 0.005 && !x.a.cpu_contended,
	      "uncontended: 2%% runnable-waiting, not flagged (got %.3f)", x.a.workers_runq_share);
	CHECK(!strcmp(dlbn_cause_name(x.a.cause), "workers_saturated"),
	      "uncontended: cause workers_saturated (%s)", dlbn_cause_name(x.a.cause));
	CHECK(strstr(x.text, "REC num_workers 2 -> 5") != NULL,
	      "uncontended: num_workers 2 -> 5 (39.9 ms per batch, one consumed every 9.9 ms)");
	CHECK(x.a.cpus_used > 1.5 && x.a.cpus_used < 3.0,
	      "uncontended: two busy workers plus the loop use about 2.5 CPUs (got %.2f)",
	      x.a.cpus_used);
}

static void test_main_thread(void)
{
	struct tgsim_params p;
	struct res x;
	saturated(&p);
	p.main_runq = 0.5;
	run(&p, &x);
	/* 5 of every ~20 ms period (batch_ms / workers) runnable-waiting. */
	CHECK(x.a.main_runq_fraction > 0.2 && x.a.main_runq_fraction < 0.3,
	      "loop thread: waits for a CPU about 25%% of the window (got %.3f)",
	      x.a.main_runq_fraction);
	CHECK(strstr(x.text, "the training loop's thread waits for a CPU") != NULL,
	      "loop thread: named in the reasons");
	CHECK(strstr(x.text, "REC num_workers 2 ->") == NULL &&
		      strstr(x.text, "REC cores are the limit") != NULL,
	      "loop thread contended: more workers are not recommended");
}

/* Queueing of the loop behind the workers is a loading cost Replay removes:
 * it joins the stall above the contention threshold, and only there. */
static void test_contention_stall(void)
{
	struct tgsim_params p;
	struct res base, queued, noise;
	saturated(&p);
	run(&p, &base);
	p.main_runq = 0.5;
	run(&p, &queued);
	saturated(&p);
	p.main_runq = 0.1;
	run(&p, &noise);
	double expect = queued.a.main_runq_fraction * queued.a.wall_s *
			(1 - (queued.a.stall_s - queued.a.contention_stall_s) / queued.a.wall_s);
	CHECK(queued.a.contention_stall_s > 0 && fabs(queued.a.contention_stall_s - expect) < 1e-6,
	      "contention stall = loop runq share x wall x (1 - other stall share) (%.4f vs %.4f)",
	      queued.a.contention_stall_s, expect);
	CHECK(queued.a.predicted_speedup > base.a.predicted_speedup + 0.1,
	      "contention stall raises the prediction (%.2f -> %.2f)", base.a.predicted_speedup,
	      queued.a.predicted_speedup);
	CHECK(base.a.contention_stall_s == 0 && noise.a.main_runq_fraction < 0.1 &&
		      noise.a.contention_stall_s == 0,
	      "below the 10%% threshold no contention stall (runq %.3f)",
	      noise.a.main_runq_fraction);
}

static void test_no_samples(void)
{
	struct tgsim_params p;
	struct res x;
	tgsim_default(&p);
	run(&p, &x);
	CHECK(x.a.sched_threads == 0 && x.a.cpus_used < 0 && !x.a.cpu_contended,
	      "no SCHED records: no CPU figures, nothing claimed");
}

int main(void)
{
	int fd = mkstemp(path);
	if (fd < 0)
		return 2;
	close(fd);
	test_contended_workers();
	test_uncontended_workers();
	test_main_thread();
	test_contention_stall();
	test_no_samples();
	unlink(path);
	CHECK_EXIT();
}
