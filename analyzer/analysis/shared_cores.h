/*
 * shared_cores.h - the model's own CPU threads, and how much of their time
 * the loader's CPU use took (shared_cores.c).
 *
 * A model that runs on the CPU runs on more threads than the loop's: the
 * intra-op pool (OpenMP or MKL; torch.get_num_threads() threads, the
 * loop's own among them) splits each operator, and a parallel region ends
 * when its slowest thread does.  When the loader's workers hold cores,
 * these threads queue for a CPU in turn: the region goes forward only
 * while all of them run, and the others spend the rest waiting for the
 * slowest, spinning under OpenMP's default wait policy, which reads as the
 * loop's own CPU time.  A Replay run has none of it.
 *
 * The rule: the loop's own work at full speed is its runnable time in the
 * loop periods less the time at least one of the model's threads (the
 * loop's among them) was off a CPU.  A thread's run and queueing in the
 * periods are those of the periods the census bounded at both ends (a
 * census at a batch's arrival and at the next fetch begin), scaled to
 * all of them; from DLBN_PERIODS_MIN such periods on.  Otherwise (fewer,
 * or a recorder whose census came only at fetch begins) they are the
 * periods' share of its figures over the census's span: the model's
 * threads run and queue in the waits too (an OpenMP thread spins on after
 * its region ends), less than in the periods where the workers hold the
 * cores.  Its time off is its queueing there, at most the periods' wall
 * time less its run time there; the loop's own is its queueing.  How
 * their times off overlap decides the union: all of them can be off at
 * once only while the workers hold every core, so they are taken as
 * independent (the union W * (1 - prod(1 - off_i / W))) for the share q
 * of the time that at least as many workers as cores are busy (each busy
 * its mean share of the window, independently), and as never
 * overlapping (the union sum(off_i)) for the rest.  Checked against Replay
 * on the eval's CPU-training programs (docs/EVAL.md, "Model and loader on
 * the same cores"): independence alone predicted 20-25% too little where
 * the workers were busy half the time, no overlap at all twice too much
 * where they were busy 80-90% of it.  A thread's time off bounded by the
 * loop's runnable time less its whole run time (its spinning in the waits
 * included), and not taken in proportion, gave 0.03 s where the loop had
 * waited 0.16 s with the workers seldom busy, and 1.4-2.1 times what it had
 * waited where they held the cores.
 */
#ifndef DLBN_SHARED_CORES_H
#define DLBN_SHARED_CORES_H

#include <stddef.h>

struct dlbn_model;

/* The model's threads besides the loop's that the report names. */
#define DLBN_GANG_MAX 16
/* A census thread is the model's when it ran at least this share of the
 * loop's own CPU time in the window: an intra-op thread works whenever
 * the loop does; a logger, a watchdog or an idle pool thread does not. */
#define DLBN_GANG_MIN_SHARE 0.25
/* Bounded loop periods a thread's figures in the periods are taken from. */
#define DLBN_PERIODS_MIN 3

struct dlbn_gang_thread {
	int tid;
	char name[16];
	double run_s, runq_s; /* in the window */
	double span_s;	      /* the census's span of it */
	/* The loop periods a census bounded at both ends: how many, their
	 * wall time, and the thread's run and queueing in them. */
	size_t periods;
	double period_wall_s, period_run_s, period_runq_s;
	double off_s; /* off a CPU while the loop ran (the rule above) */
};

struct dlbn_shared_cores {
	int known;	      /* thread census samples in the window */
	int applies;	      /* the loader works in other processes (see why) */
	size_t threads;	      /* census threads with time in the window, hooked ones aside */
	double threads_run_s; /* their run time */
	int intraop_threads;  /* torch.get_num_threads() from the CONFIG, -1 unknown */
	int cpus;	      /* affinity, -1 unknown */
	double cpu_quota;     /* the cgroup's quota in CPUs, 0 none */
	size_t gang;	      /* the model's threads besides the loop's */
	struct dlbn_gang_thread gang_threads[DLBN_GANG_MAX];
	/* q above: the share of the time the workers could hold every core
	 * (1 when the cores are unknown). */
	double all_cores_busy;
	/* What the loop waited for them beyond its own queueing: the union of
	 * the times off less the loop's own, at most its CPU time. */
	double waited_s;
	char why_not[160]; /* when !applies: why the figure is not used */
};

/* The run time in the window of the census threads that wrote no records
 * of their own (those count with their SCHED samples), and how many. */
double dlbn_census_run_s(const struct dlbn_model *m, size_t *nthreads);

/* The loop periods' figures the rule needs (outside.h, verdict.h). */
struct dlbn_loop_load {
	double wall_s;	      /* the loop periods' wall time */
	double cpu_s, runq_s; /* the loop's own CPU time and queueing */
	double workers_busy;  /* the workers' mean busy share of the window, -1 unknown */
	size_t nworkers;
};

/* The census figures over the window. */
void dlbn_shared_cores(const struct dlbn_model *m, const struct dlbn_loop_load *load,
		       struct dlbn_shared_cores *sc);

#endif /* DLBN_SHARED_CORES_H */
