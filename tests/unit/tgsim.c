/*
 * tgsim.c - a synthetic PyTorch DataLoader run written as a dlbn trace
 * (see tgsim.h).  Shape as recorded from torch 1.13 (docs/DESIGN.md, "How
 * a DataLoader batch travels").
 *
 * A small queueing model: batch i is produced by worker i % W, which needs
 * batch_ms for it once its index arrived; indices go out prefetch x W ahead
 * of the loop; the loop takes loop_ms per step plus the hand-off.  From it
 * come the records a recorder would write: the main thread's
 * poll/read/connect/recvmsg/mmap hand-off (or the pin-memory thread's, with
 * the main thread's SEM_WAIT and the pin thread's SEM_POST), the feeder
 * threads' pipe writes, the workers' index polls, file preads and result
 * writes, fork/exit, and (with marks) the Python bootstrap's FETCH marks and
 * CONFIG.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tgsim.h"
#include "tracegen.h"

#define MS		1000000ll
#define INO_RESULT_BASE 500000
#define INO_INDEX_BASE	600000
#define SEM_ADDR	0x7f0000001000ll

struct worker {
	struct tg_stream *main, *feeder;
	int pid;
	int64_t free_at;		   /* when it finished its last batch */
	int64_t idle_from;		   /* when it started waiting for an index */
	int64_t run_ns, runq_ns;	   /* cumulative schedstat figures */
	int64_t batches, work_ns, file_ns; /* what it produced (profile) */
	int64_t mem_samples;
	int rollups;
	int alive;
};

struct sim {
	struct tgsim_params p;
	struct tg *g;
	struct tg_stream *main, *feeder, *pin;
	struct worker w[TGSIM_MAX_WORKERS];
	uint32_t next_proc;
	int next_pid;
	unsigned rng;
	int64_t *idx_sent; /* per step of the epoch: when its index was sent */
	int64_t *ready;	   /* per step: result written by the worker */
	int64_t pin_free;
	int64_t main_run_ns, main_runq_ns;
	/* GPU (gpu_ms > 0): the last probe and when the kernels queued so far end. */
	int64_t probe_id, probe_done, gpu_free;
	/* The loop's cumulative counters (loop_cost.c order): run, runq,
	 * sys, minflt, free wall, free CPU, interpreter lock wait. */
	int64_t counters[7];
	/* The thread census (model_threads): cumulative run and runq of the
	 * model's threads, then the logger's. */
	int64_t census_run[TGSIM_MAX_WORKERS + 1], census_runq[TGSIM_MAX_WORKERS + 1];
	long long censuses;
	int64_t mem_main_samples;
};

#define KIB_PER_MIB 1024.0

/* A worker's pages copied after k batches (KiB), the touch model. */
static double copied_kib(const struct tgsim_params *p, int64_t k)
{
	double S = p->mem_touch_mib * KIB_PER_MIB;
	if (!(S > 0) || !(p->mem_touch_kib > 0))
		return 0;
	return S * (1 - exp(-p->mem_touch_kib * (double)k / S));
}

/* A MEM record: the cheap fields, the sample's own cost (20 us, and
 * smaps_rollup's when roll) and the smaps_rollup fields when roll, where
 * PSS holds file pages of `file` KiB (the rest anonymous). */
static void mem_rec(struct tg_stream *st, int64_t t, const int64_t f[14], int roll, int64_t file)
{
	int64_t cost = 20000 + (roll ? f[13] : 0);
	if (roll)
		tg_rec(st, DLBN_REC_MEM, t, "iiiiiiiiiiiiiiii", f[0], f[1], f[2], f[3], f[4], f[5],
		       f[6], f[7], cost, f[8], f[8] - file, f[9], f[10], f[11], f[12], f[13]);
	else
		tg_rec(st, DLBN_REC_MEM, t, "iiiiiiiii", f[0], f[1], f[2], f[3], f[4], f[5], f[6],
		       f[7], cost);
}

/* handed: KiB of shared pages that turned private without a copy. */
static void worker_mem(struct sim *s, struct worker *w, int64_t t, int roll, double handed)
{
	const struct tgsim_params *p = &s->p;
	double copied = copied_kib(p, w->batches), pages = copied / 4;
	double shared = p->mem_shared_mib * KIB_PER_MIB, base = p->mem_base_mib * KIB_PER_MIB;
	double cpu_us = (double)w->batches * (p->batch_ms - p->file_ms - p->sleep_ms) * 1000;
	double sys_us = pages * p->mem_copy_us + (double)w->batches * 500;
	double own_faults = p->mem_batch_faults > 0 ? p->mem_batch_faults : 10;
	if (roll && p->mem_rollups_max > 0 && w->rollups >= p->mem_rollups_max)
		roll = 0;
	w->rollups += roll;
	int64_t f[14] = {
		(int64_t)(shared + base + 2048),
		(int64_t)(shared + base),
		0,
		0,
		(int64_t)(pages + (double)w->batches * own_faults + 300),
		0,
		(int64_t)cpu_us,
		(int64_t)sys_us,
		(int64_t)(base + copied + handed + (shared - copied - handed) / (p->workers + 1)),
		0,
		512,
		(int64_t)(base + copied + handed - 512),
		(int64_t)(shared - copied - handed),
		9000000};
	mem_rec(w->main, t, f, roll, 2048);
}

static void memsys_rec(struct sim *s, int64_t t, int oom_kills)
{
	const struct tgsim_params *p = &s->p;
	double shm = p->mem_shm_mib > 0 ? p->mem_shm_mib : 8192;
	double use = (p->mem_main_mib + p->mem_shared_mib +
		      p->workers * (p->mem_base_mib + p->mem_touch_mib / 2)) *
		     KIB_PER_MIB;
	int64_t limit = p->mem_limit_mib > 0 ? (int64_t)(p->mem_limit_mib * KIB_PER_MIB) : -1;
	tg_rec(s->main, DLBN_REC_MEMSYS, t, "iiiiiiiiiiiiii", (int64_t)1, limit,
	       (int64_t)(use + 100 * KIB_PER_MIB), (int64_t)(use + 200 * KIB_PER_MIB),
	       (int64_t)oom_kills, (int64_t)use, (int64_t)0, (int64_t)(100 * KIB_PER_MIB),
	       (int64_t)(16384 * KIB_PER_MIB), (int64_t)(12288 * KIB_PER_MIB),
	       (int64_t)(shm * KIB_PER_MIB), (int64_t)((shm - 1) * KIB_PER_MIB), (int64_t)-1,
	       (int64_t)0);
}

/* The training process's sample at a fetch begin (mem_every). */
static void main_mem(struct sim *s, int64_t t)
{
	const struct tgsim_params *p = &s->p;
	if (p->mem_every <= 0 || s->mem_main_samples++ % p->mem_every)
		return;
	int roll = (s->mem_main_samples - 1) / p->mem_every % 4 == 0;
	double own = p->mem_main_mib * KIB_PER_MIB, shared = p->mem_shared_mib * KIB_PER_MIB;
	int64_t f[14] = {(int64_t)(own + shared + 100 * KIB_PER_MIB),
			 (int64_t)(own + shared),
			 0,
			 0,
			 1000,
			 0,
			 100000,
			 20000,
			 (int64_t)(own + shared / (p->workers + 1) + 100 * KIB_PER_MIB),
			 0,
			 0,
			 (int64_t)own,
			 (int64_t)shared,
			 12000000};
	mem_rec(s->main, t - 2000, f, roll, (int64_t)(100 * KIB_PER_MIB));
	memsys_rec(s, t - 1000, 0);
}

static int lead_costs(const struct tgsim_params *p)
{
	return p->lead_free_ms > 0 || p->lead_runq_ms > 0 || p->lead_touch_ms > 0 ||
	       p->lead_wrap_ms > 0 || p->lead_gil_ms > 0;
}

/* A fetch or iter() mark, with the loop's counters when the run has lead
 * costs. */
static void fetch_mark(struct sim *s, int64_t t, int kind, int64_t iter, int64_t arg)
{
	const int64_t *c = s->counters;
	if (!lead_costs(&s->p)) {
		tg_mark(s->main, t, kind, iter, arg);
		return;
	}
	tg_mark_counters(s->main, t, kind, iter, arg, c, s->p.lead_gil_ms > 0 ? 7 : 6);
}

/* The lead of the next step: the costs after the batch arrived; returns
 * how long they keep the loop from its step. */
static int64_t lead(struct sim *s)
{
	const struct tgsim_params *p = &s->p;
	int64_t f = (int64_t)(p->lead_free_ms * MS), q = (int64_t)(p->lead_runq_ms * MS);
	int64_t touch = (int64_t)(p->lead_touch_ms * MS), loop = (int64_t)(p->loop_ms * MS);
	int64_t gil = (int64_t)(p->lead_gil_ms * MS);
	s->counters[0] += f + touch + loop;
	s->counters[1] += q;
	s->counters[2] += f + touch;
	s->counters[3] += (int64_t)p->tensors * p->shm_kib / 64; /* 16 pages a fault */
	s->counters[4] += f;
	s->counters[5] += f;
	s->counters[6] += gil;
	return f + q + touch + gil;
}

/* A thread census (libintercept/thread_census.c) at a fetch begin
 * (at_arrival 0): the model's threads worked through the loop period that
 * just ended, and queued in the wait before it unless a census at the
 * batch's arrival (at_arrival 1) took that. */
#define CENSUS_TID 900000
static void census(struct sim *s, int64_t t, int at_arrival)
{
	const struct tgsim_params *p = &s->p;
	int first = !s->censuses++;
	int64_t loop = first || at_arrival ? 0 : (int64_t)(p->loop_ms * MS);
	int64_t in_wait = first || (p->census_arrival && !at_arrival)
				  ? 0
				  : (int64_t)(p->model_wait_runq_ms * MS);
	for (int i = 0; i <= p->model_threads; i++) {
		int logger = i == p->model_threads;
		int64_t run = logger ? loop / 100 : loop;
		s->census_run[i] += run;
		if (!logger)
			s->census_runq[i] += in_wait;
		if (!logger && p->model_runq > 0 && p->model_runq < 1)
			s->census_runq[i] +=
				(int64_t)((double)run * p->model_runq / (1 - p->model_runq));
		int64_t tid = CENSUS_TID + i;
		if (s->censuses == 1)
			tg_rec(s->main, DLBN_REC_TASK, t, "iiiis", tid, s->census_run[i],
			       s->census_runq[i], (int64_t)s->censuses,
			       logger ? "logger" : "python");
		else
			tg_rec(s->main, DLBN_REC_TASK, t, "iiii", tid, s->census_run[i],
			       s->census_runq[i], (int64_t)s->censuses);
	}
}

#define GPU_STREAM 0x7000

/* At a fetch begin, as the recorder does: resolve the previous probe (its
 * PROBE_DONE stamped a little later), then probe the stream. */
static void gpu_fetch_begins(struct sim *s, int64_t fb)
{
	if (s->probe_id)
		tg_rec(s->main, DLBN_REC_PROBE_DONE, fb + 2000, "iii", s->probe_id, s->probe_done,
		       (int64_t)0);
	tg_rec(s->main, DLBN_REC_PROBE, fb, "ii", ++s->probe_id, (int64_t)GPU_STREAM);
	s->probe_done = s->gpu_free > fb ? s->gpu_free : fb;
}

/* After the batch is in hand the loop queues its step's kernel. */
static void gpu_launch(struct sim *s, int64_t t)
{
	tg_rec(s->main, DLBN_REC_LAUNCH, t, "ii", (int64_t)GPU_STREAM,
	       (int64_t)DLBN_CU_LAUNCH_KERNEL);
	s->gpu_free = (s->gpu_free > t ? s->gpu_free : t) + (int64_t)(s->p.gpu_ms * MS);
}

/* A cumulative schedstat sample, as the recorder takes at IPC calls. */
static void sched_sample(struct tg_stream *st, int64_t t, int tid, int64_t *run, int64_t *runq,
			 int64_t busy, double share)
{
	*run += (int64_t)((double)busy * (1 - share));
	*runq += (int64_t)((double)busy * share);
	tg_rec(st, DLBN_REC_SCHED, t, "iii", (int64_t)tid, *run, *runq);
}

static double jitter(struct sim *s)
{
	s->rng = s->rng * 1103515245u + 12345u;
	return 0.9 + 0.2 * (double)((s->rng >> 8) & 0xffff) / 65535.0;
}

static int64_t result_ino(int epoch)
{
	return INO_RESULT_BASE + epoch;
}

static int64_t index_ino(int epoch, int w)
{
	return INO_INDEX_BASE + epoch * TGSIM_MAX_WORKERS + w;
}

static void start_workers(struct sim *s, int64_t t, int epoch)
{
	for (int k = 0; k < s->p.workers; k++) {
		struct worker *w = &s->w[k];
		uint32_t pid = (uint32_t)s->next_pid++;
		uint32_t proc = s->next_proc++;
		tg_fork(s->main, t, 300000, (int)pid);
		w->main = tg_stream(s->g, proc, 0, pid, pid);
		w->feeder = tg_stream(s->g, proc, 1, pid, pid + 1000);
		s->next_pid++;
		w->pid = (int)pid;
		tg_process(w->main, t + 300000, (int)pid, 1000, 0, DLBN_START_FORK, "python3");
		tg_thread(w->main, t + 300000, (int)pid, 1);
		tg_thread(w->feeder, t + 400000, (int)pid + 1000, 0);
		w->batches = w->work_ns = w->file_ns = w->mem_samples = 0;
		w->rollups = 0;
		w->free_at = t + 30 * MS; /* worker start-up */
		w->idle_from = w->free_at;
		w->alive = 1;
	}
	(void)epoch;
}

static void prof_stage(struct tg_stream *st, int64_t t, int64_t kind, int64_t count, int64_t wall,
		       int64_t cpu, int64_t line, const char *text)
{
	tg_rec(st, DLBN_REC_PROF_STAGE, t, "iiiiiis", kind, (int64_t)0, count, wall, cpu, line,
	       text);
}

static void prof_sample(struct tg_stream *st, int64_t t, int64_t weight, int64_t samples,
			int64_t in_stage, int64_t line, const char *text)
{
	tg_rec(st, DLBN_REC_PROF_SAMPLE, t, "iiiiis", (int64_t)0, weight, samples, in_stage, line,
	       text);
}

/* The worker's final profile summaries (tgsim.h, profile). */
static void profile_summaries(struct worker *w, int64_t t)
{
	int64_t cpu = w->work_ns - w->file_ns;
	prof_stage(w->main, t, DLBN_PROF_GETITEM, 0, 0, 0, 40,
		   "Images.__getitem__\t/home/u/train.py");
	prof_stage(w->main, t, DLBN_PROF_FETCH, w->batches, w->work_ns, cpu, 0, "fetch\t");
	prof_stage(w->main, t, DLBN_PROF_TRANSFORM, w->batches * 4, cpu / 2, -1, 338,
		   "Resize\t/usr/lib/python3/dist-packages/torchvision/transforms/transforms.py");
	prof_stage(w->main, t, DLBN_PROF_COLLATE, w->batches, cpu / 10, -1, 120,
		   "collate_fn default_collate\t/torch/collate.py");
	prof_stage(w->main, t, DLBN_PROF_SEND, w->batches, w->work_ns / 20, w->work_ns / 20, 0,
		   "send (pickle the batch for the hand-off)\t");
	prof_stage(w->main, t, DLBN_PROF_SAMPLER, 1, cpu / 1000, cpu / 10000000, 0, "sampler on\t");
	/* Sample weights in proportion but short of the truth (the tail of a
	 * fetch is never sampled): the analyzer scales them to the CPU time. */
	prof_sample(
		w->main, t, cpu * 27 / 100 * 9 / 10, 27, 0, 937,
		"convert\t/usr/lib/python3/dist-packages/PIL/Image.py\t__getitem__:45<fetch:58\t"
		"load /usr/lib/python3/dist-packages/PIL/ImageFile.py:269");
	prof_sample(w->main, t, cpu * 3 / 100 * 9 / 10, 3, 0, 3490,
		    "open\t/usr/lib/python3/dist-packages/PIL/Image.py\t__getitem__:44<fetch:58\t"
		    "<module> <frozen importlib._bootstrap>:241");
	prof_sample(w->main, t, cpu / 10 * 9 / 10, 10, 0, 47,
		    "__getitem__\t/home/u/train.py\t<listcomp>:58<fetch:58\t");
	prof_sample(w->main, t, cpu * 6 / 10, 60, 1, 300,
		    "resize\t/usr/lib/python3/dist-packages/PIL/Image.py\tforward:340\t");
}

static void thread_summary(struct tg_stream *st, int64_t t, const char *text, int64_t samples,
			   int64_t busy_ms, int64_t watched_samples, int64_t watched_ms,
			   int64_t cpu_ms)
{
	tg_rec(st, DLBN_REC_PROF_STAGE, t, "iiiiiis", (int64_t)DLBN_PROF_THREAD, (int64_t)1,
	       samples, busy_ms * MS, cpu_ms * MS, (int64_t)0, text);
	tg_rec(st, DLBN_REC_PROF_STAGE, t, "iiiiiis", (int64_t)DLBN_PROF_THREAD_WATCHED, (int64_t)1,
	       watched_samples, watched_ms * MS, cpu_ms * MS, (int64_t)0, text);
}

static void thread_gil_wait(struct tg_stream *st, int64_t t, const char *text, int64_t samples,
			    int64_t lock_ms)
{
	tg_rec(st, DLBN_REC_PROF_STAGE, t, "iiiiiis", (int64_t)DLBN_PROF_THREAD_GIL_WAIT,
	       (int64_t)1, samples, lock_ms * MS, (int64_t)0, (int64_t)0, text);
}

/* The loader threads of iterator 1 (tgsim.h, loader_threads); each
 * summary twice, the first a partial one (they are cumulative). */
static void loader_thread_summaries(struct tg_stream *st, int64_t t, int gil)
{
	const char *producer = "thread Thread-1 (run)\t/home/u/feeder.py\t4242";
	const char *pool = "thread [DALI][TP0]\t\t4243";
	const char *idle = "thread Thread-2 (_populate_queue)\t/nodes/_populate_queue.py\t4244";
	const char *again = "thread Thread-1 (run)\t/home/u/feeder.py\t4245";
	thread_summary(st, t - MS, producer, 40, 400, 50, 500, 50);
	thread_summary(st, t, producer, 90, 900, 100, 1000, 100);
	thread_summary(st, t, pool, 0, 300, 0, 1000, 300);
	thread_summary(st, t, idle, 0, 0, 100, 1000, 0);
	thread_summary(st, t, again, 45, 450, 50, 500, 50);
	if (gil) {
		thread_gil_wait(st, t - MS, producer, 40, 200);
		thread_gil_wait(st, t, producer, 90, 500);
		thread_gil_wait(st, t, again, 45, 250);
	}
	tg_rec(st, DLBN_REC_PROF_SAMPLE, t, "iiiiis", (int64_t)1, 800 * MS, (int64_t)80,
	       (int64_t)(gil ? DLBN_PROF_THREAD_GIL : DLBN_PROF_THREAD_OFF_CPU), (int64_t)14,
	       "produce\t/home/u/feeder.py\trun:22<_bootstrap_inner:1038\t");
	tg_rec(st, DLBN_REC_PROF_SAMPLE, t, "iiiiis", (int64_t)1, 100 * MS, (int64_t)10,
	       (int64_t)DLBN_PROF_THREAD_CPU, (int64_t)937,
	       "convert\t/usr/lib/python3/dist-packages/PIL/Image.py\tproduce:13<run:22\t"
	       "load /usr/lib/python3/dist-packages/PIL/ImageFile.py:269");
}

static void stop_workers(struct sim *s, int64_t t)
{
	for (int k = 0; k < s->p.workers; k++) {
		struct worker *w = &s->w[k];
		if (!w->alive)
			continue;
		int64_t te = t > w->free_at ? t : w->free_at;
		double handed = 0;
		if (s->p.mem_handed_mib > 0 && k > 0) { /* they go one by one */
			te += k * 2 * MS;
			handed = s->p.mem_handed_mib * KIB_PER_MIB;
		}
		if (s->p.profile)
			profile_summaries(w, te + MS / 2);
		if (s->p.mem_every > 0)
			worker_mem(s, w, te + MS / 2 + 1000, 1, handed);
		tg_exit(w->main, te + MS, 0, DLBN_EXIT__EXIT);
		tg_stream_final(w->feeder);
		tg_stream_final(w->main);
		w->alive = 0;
	}
}

/* Worker k receives the index of batch i at time t_idx and produces it. */
static int64_t produce(struct sim *s, int k, int64_t step, int64_t t_idx, int epoch)
{
	struct worker *w = &s->w[k];
	int64_t ino = index_ino(epoch, k);
	int64_t poll_start = w->idle_from;
	int64_t got = t_idx > poll_start ? t_idx : poll_start;
	if (s->p.mem_every > 0 && w->mem_samples++ % s->p.mem_every == 0)
		worker_mem(s, w, poll_start - 1000,
			   (w->mem_samples - 1) / s->p.mem_every % 4 == 0 &&
				   (w->mem_samples - 1) / s->p.mem_every >= s->p.mem_late_rollup,
			   0);
	tg_poll(w->main, poll_start, got - poll_start, 1, 5000, &ino, 1);
	tg_read(w->main, got + 2000, 3000, 5, DLBN_FD_PIPE, ino, 4);
	tg_read(w->main, got + 6000, 4000, 5, DLBN_FD_PIPE, ino, 60);
	int64_t t = got + 12000;
	int64_t work = (int64_t)(s->p.batch_ms * MS * jitter(s));
	int64_t file = (int64_t)(s->p.file_ms * MS);
	if (file > work)
		file = work;
	/* File reads in 4 chunks spread over the batch's work. */
	int64_t cpu = work - file;
	w->batches++, w->work_ns += work, w->file_ns += file;
	for (int c = 0; c < 4; c++) {
		tg_pread(w->main, t, file / 4, 9, 777, 65536, (step * 4 + c) * 65536);
		t += file / 4 + cpu / 4;
	}
	if (s->p.sched)
		sched_sample(w->main, t, w->pid, &w->run_ns, &w->runq_ns,
			     work - (int64_t)(s->p.sleep_ms * MS), s->p.worker_runq);
	int64_t lag = (int64_t)(s->p.feeder_lag_ms * MS);
	tg_write(w->feeder, t + 20000 + lag, 50000, 7, DLBN_FD_PIPE, result_ino(epoch), 300);
	w->free_at = t + 70000 + lag;
	w->idle_from = t + 30000;
	return w->free_at;
}

/* The thread that receives a batch (main or pin thread) from t_begin. */
static int64_t receive(struct sim *s, struct tg_stream *th, int64_t t_begin, int64_t ready,
		       int epoch)
{
	int64_t ino = result_ino(epoch);
	int64_t got = ready > t_begin ? ready : t_begin;
	tg_poll(th, t_begin, got - t_begin, 1, 5000, &ino, 1);
	tg_read(th, got + 5000, 3000, 11, DLBN_FD_PIPE, ino, 4);
	tg_read(th, got + 10000, 8000, 11, DLBN_FD_PIPE, ino, 300);
	int64_t t = got + 20000;
	int64_t per = (int64_t)(s->p.handoff_ms * MS) / s->p.tensors;
	for (int k = 0; k < s->p.tensors; k++) {
		tg_connect(th, t, per / 8, 20 + k, 0);
		tg_write(th, t + per / 8, per / 16, 20 + k, DLBN_FD_UNIX, 0, 20);
		tg_read(th, t + per / 4, per / 16, 20 + k, DLBN_FD_UNIX, 0, 20);
		tg_recvmsg(th, t + per / 2, per / 8, 20 + k, 0, 1, 1);
		tg_mmap(th, t + 3 * per / 4, 30 + k, 800000 + k, (int64_t)s->p.shm_kib * 1024);
		t += per;
	}
	return t;
}

static void run(struct sim *s)
{
	struct tgsim_params *p = &s->p;
	int P = p->workers * p->prefetch;
	long long per_epoch = p->steps / p->epochs;
	int64_t t = 100 * MS;
	char cfg[384];

	s->main = tg_stream(s->g, 0, 0, 1000, 1000);
	s->feeder = tg_stream(s->g, 0, 1, 1000, 1001);
	tg_process_host(s->main, t, 1000, 999, -1, DLBN_START_ROOT, "python3", p->rank,
			p->local_rank >= 0 ? p->local_rank : p->rank, p->world_size,
			p->host ? p->host : "tracegen");
	tg_thread(s->main, t, 1000, 1);
	tg_thread(s->feeder, t, 1001, 0);
	if (p->pin) {
		s->pin = tg_stream(s->g, 0, 2, 1000, 1002);
		tg_thread(s->pin, t, 1002, 0);
	}
	s->next_proc = 1;
	s->pin_free = t;
	s->next_pid = 2000;
	if (p->helper) {
		/* A forkserver-like helper: reports to the training process over
		 * a pipe, but is no worker (it reads no index queue). */
		struct tg_stream *h = tg_stream(s->g, s->next_proc++, 0, 1500, 1500);
		tg_process(h, t, 1500, 1000, 0, DLBN_START_FORK, "python3");
		tg_thread(h, t, 1500, 1);
		for (int k = 0; k < p->workers; k++) {
			tg_write(h, t + 200000 + k * 10000, 5000, 4, DLBN_FD_PIPE, 700000, 8);
			tg_read(s->main, t + 210000 + k * 10000, 5000, 5, DLBN_FD_PIPE, 700000, 8);
		}
		tg_exit(h, t + 500000, 0, DLBN_EXIT_EXIT);
	}
	snprintf(cfg, sizeof(cfg),
		 "num_workers=%d;batch_size=32;prefetch_factor=%d;pin_memory=%s;"
		 "persistent_workers=%s;start_method=fork;dataset_kind=map;drop_last=False;"
		 "timeout=0;loader=140000000",
		 p->workers, p->prefetch, p->pin ? "True" : "False",
		 p->persistent ? "True" : "False");
	if (p->cpus > 0)
		snprintf(cfg + strlen(cfg), sizeof(cfg) - strlen(cfg), ";cpus=%d", p->cpus);
	if (p->model_threads > 0)
		snprintf(cfg + strlen(cfg), sizeof(cfg) - strlen(cfg), ";intraop_threads=%d",
			 p->model_threads + 1);
	if (p->config_extra)
		snprintf(cfg + strlen(cfg), sizeof(cfg) - strlen(cfg), "%s", p->config_extra);
	s->idx_sent = calloc((size_t)per_epoch + (size_t)P + 1, sizeof(int64_t));
	s->ready = calloc((size_t)per_epoch + 1, sizeof(int64_t));
	long long global = 0;
	int killed = 0;
	for (int e = 0; e < p->epochs && !killed; e++) {
		int pipe_epoch = p->persistent ? 0 : e;
		if (p->marks) {
			if (p->iter_marks_bare)
				tg_mark(s->main, t, DLBN_MARK_ITER_BEGIN, e + 1, 0);
			else
				fetch_mark(s, t, DLBN_MARK_ITER_BEGIN, e + 1, 0);
			if (e == 0 || !p->persistent)
				tg_config(s->main, t, e + 1, cfg);
			if (p->profile)
				tg_rec(s->main, DLBN_REC_CALLSITE, t, "is", (int64_t)(e + 1),
				       "/home/u/train.py:train:312\n/home/u/train.py:main:400");
		}
		if (e == 0 || !p->persistent)
			start_workers(s, t + 100000, e);
		/* Prefetch: P indices out before the first result is read. */
		for (int i = 0; i < P && i < per_epoch; i++) {
			s->idx_sent[i] = t + 2 * MS + i * 20000;
			tg_write(s->feeder, s->idx_sent[i], 10000, 8, DLBN_FD_PIPE,
				 index_ino(pipe_epoch, i % p->workers), 60);
		}
		int64_t startup = (int64_t)(p->startup_ms * MS);
		s->counters[0] += startup;
		s->counters[2] += startup;
		int64_t loop_t = t + 3 * MS + startup;
		for (long long i = 0; i < per_epoch; i++, global++) {
			int k = (int)(i % p->workers);
			if (p->kill_at >= 0 && global == p->kill_at) {
				/* SIGKILL: the worker's streams just stop, no EXIT. */
				tg_stream_final(s->w[k].feeder);
				tg_stream_final(s->w[k].main);
				s->w[k].alive = 0;
				killed = 1;
				break;
			}
			s->ready[i] = produce(s, k, global, s->idx_sent[i], pipe_epoch);
			int64_t fb = loop_t, fe;
			main_mem(s, fb);
			if (p->marks)
				fetch_mark(s, fb, DLBN_MARK_FETCH_BEGIN, e + 1, i);
			if (p->marks && p->model_threads > 0 &&
			    (!p->census_arrival || s->censuses > 0))
				census(s, fb, 0);
			if (p->gpu_ms > 0)
				gpu_fetch_begins(s, fb);
			if (!p->pin) {
				fe = receive(s, s->main, fb, s->ready[i], pipe_epoch) +
				     (int64_t)(p->rebuild_ms * MS);
			} else {
				int64_t pb = s->pin_free;
				int64_t pe = receive(s, s->pin, pb, s->ready[i], pipe_epoch);
				s->pin_free = pe + 50000;
				if (pe > fb + 100000) {
					tg_sem_wait(s->main, fb + 10000, pe + 20000 - (fb + 10000),
						    SEM_ADDR);
					tg_sem_post(s->pin, pe + 10000, SEM_ADDR);
					fe = pe + 40000;
				} else {
					fe = fb + 30000;
				}
			}
			if (p->sched)
				sched_sample(s->main, fe + 1000, 1000, &s->main_run_ns,
					     &s->main_runq_ns, (int64_t)(p->loop_ms * MS),
					     p->main_runq);
			if (p->marks)
				fetch_mark(s, fe + 5000, DLBN_MARK_FETCH_END, e + 1, i);
			if (p->marks && p->model_threads > 0 && p->census_arrival)
				census(s, fe + 5000, 1);
			int64_t wrap = (int64_t)(p->lead_wrap_ms * MS);
			if (wrap > 0) {
				s->counters[0] += wrap;
				fetch_mark(s, fe + 5000 + wrap, DLBN_MARK_HANDOFF, e + 1, i);
			}
			int64_t costs = wrap + lead(s);
			if (p->gpu_ms > 0)
				gpu_launch(s, fe + 7000 + costs);
			int64_t synced = 0; /* drain_sync: when the loop's sync returned */
			if (p->gpu_ms > 0 && p->drain_sync == 1) {
				int64_t ts = fe + 8000 + costs;
				int64_t dur = s->gpu_free > ts ? s->gpu_free - ts : 0;
				tg_rec(s->main, DLBN_REC_SYNC, ts, "iii", dur,
				       (int64_t)DLBN_CU_CTX_SYNC, (int64_t)0);
				synced = ts + dur;
			} else if (p->gpu_ms > 0 && p->drain_sync == 2) {
				int64_t ts = fe + 8000 + costs;
				int64_t dur = (s->gpu_free > ts ? s->gpu_free - ts : 0) +
					      (int64_t)(p->sync_late_ms * MS);
				/* The drain field last, written only with the event. */
				tg_rec(s->main, DLBN_REC_SYNC, ts,
				       p->sync_drain_event ? "iiii" : "iii", dur,
				       (int64_t)DLBN_CU_STREAM_SYNC, (int64_t)GPU_STREAM,
				       s->gpu_free);
				synced = ts + dur;
			}
			/* The loop consumed batch i: send the index of batch i + P. */
			if (i + P < per_epoch) {
				s->idx_sent[i + P] = fe + 20000;
				tg_write(s->feeder, fe + 20000, 10000, 8, DLBN_FD_PIPE,
					 index_ino(pipe_epoch, (int)((i + P) % p->workers)), 60);
			}
			loop_t = fe + 10000 + costs + (int64_t)(p->loop_ms * MS * jitter(s));
			if (loop_t < synced + 10000) /* the loop's work holds the sync */
				loop_t = synced + 10000;
			if (p->sync_ms > 0) {
				int64_t d = (int64_t)(p->sync_ms * MS);
				tg_rec(s->main, DLBN_REC_SYNC, loop_t, "iii", d,
				       (int64_t)DLBN_CU_STREAM_SYNC, (int64_t)GPU_STREAM);
				loop_t += d;
			}
		}
		if (p->marks && !killed && !p->abandon_epochs) {
			if (p->stop_fetch_ms > 0) {
				fetch_mark(s, loop_t, DLBN_MARK_FETCH_BEGIN, e + 1, per_epoch);
				loop_t += (int64_t)(p->stop_fetch_ms * MS);
			}
			tg_mark(s->main, loop_t, DLBN_MARK_FETCH_STOP, e + 1, 0);
		}
		t = loop_t + MS;
		if (!p->persistent && !killed)
			stop_workers(s, t);
	}
	if (p->mem_child_signal > 0)
		tg_rec(s->main, DLBN_REC_CHILD, t + 2 * MS, "iii", (int64_t)s->w[0].pid,
		       (int64_t)DLBN_CHILD_KILLED, (int64_t)p->mem_child_signal);
	if (p->mem_note)
		tg_rec(s->main, DLBN_REC_NOTE, t + 3 * MS, "iis", (int64_t)p->epochs,
		       (int64_t)DLBN_NOTE_FETCH_ERROR, p->mem_note);
	if (p->mem_every > 0)
		memsys_rec(s, t + 4 * MS, p->mem_oom_kills);
	stop_workers(s, t + 5 * MS);
	if (p->loader_threads)
		loader_thread_summaries(s->main, t + 5 * MS, p->loader_threads == 2);
	if (s->probe_id)
		tg_rec(s->main, DLBN_REC_PROBE_DONE, t + 6 * MS, "iii", s->probe_id, s->probe_done,
		       (int64_t)0);
	if (!p->mem_no_main_exit)
		tg_exit(s->main, t + 10 * MS, killed ? 1 : 0, DLBN_EXIT_DTOR);
	free(s->idx_sent);
	free(s->ready);
}

void tgsim_default(struct tgsim_params *p)
{
	memset(p, 0, sizeof(*p));
	p->steps = 200;
	p->workers = 2;
	p->prefetch = 2;
	p->epochs = 1;
	p->marks = 1;
	p->tensors = 2;
	p->kill_at = -1;
	p->batch_ms = 40;
	p->loop_ms = 10;
	p->handoff_ms = 1;
	p->shm_kib = 128;
	p->seed = 1;
	p->rank = p->local_rank = p->world_size = -1;
}

int tgsim_write(const char *path, const struct tgsim_params *p, uint64_t *records)
{
	struct sim *s = calloc(1, sizeof(*s));
	if (!s || p->workers < 1 || p->workers > TGSIM_MAX_WORKERS || p->prefetch < 1 ||
	    p->model_threads < 0 || p->model_threads > TGSIM_MAX_WORKERS || p->epochs < 1 ||
	    p->tensors < 1 || p->steps < 1) {
		free(s);
		return -1;
	}
	s->p = *p;
	s->rng = p->seed;
	s->g = tg_open(path, p->extent_size);
	if (!s->g) {
		free(s);
		return -1;
	}
	run(s);
	if (records)
		*records = tg_records(s->g);
	int rc = tg_close(s->g);
	free(s);
	return rc;
}
