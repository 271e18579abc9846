/*
 * ranks.h - several ranks of a data-parallel job: each rank's row (from
 * its trace, or from the small summary written where it ran) and the job
 * over all ranks: verdict, straggler, the spread across ranks, ranks
 * grouped by host, and what is missing.
 *
 * Synchronous data-parallel training meets at every collective (the
 * gradient all-reduce), so the ranks' step times equalise: a rank that
 * waits for its input holds the others at the next collective, and their
 * steps take as long as its own.  Step time cannot name the straggler;
 * its stall can: the straggler is the rank whose loop stalls longest per
 * step on its loader, and the others show that time as extra time outside
 * their own stall (waiting at the collective; blocked in GPU syncs where
 * NCCL's wait is visible to the host).
 *
 * Everything here works on rows alone, never on a model: a job of a
 * thousand ranks is summarised from a thousand rows of a few KiB each.
 */
#ifndef DLBN_RANKS_H
#define DLBN_RANKS_H

#include <stddef.h>

#include "analysis/verdict.h"
#include "model/model.h"

/* What a row keeps of the rank's report (a summary carries the same). */
#define DLBN_ROW_LOADERS 4
#define DLBN_ROW_HOT	 3
#define DLBN_ROW_LINES	 6

enum dlbn_rank_source { DLBN_RANK_FROM_TRACE = 0, DLBN_RANK_FROM_SUMMARY = 1 };

/* Whether the rank's record is whole (reader.h, dlbn_reader_damaged). */
enum dlbn_rank_state {
	DLBN_RANK_WHOLE = 0,
	DLBN_RANK_DAMAGED = 1, /* records lost inside the trace */
	DLBN_RANK_CUT = 2,     /* the trace ends early: truncated, or recording stopped */
};

struct dlbn_rank_loader {
	char kind[16]; /* "dataloader", "nodes", "dali", "named" */
	char desc[96]; /* dlbn_loader_describe */
	int training;
	int num_workers, batch_size; /* -1 unknown */
	double wait_s, stall_s;
};

struct dlbn_rank_hot {
	char name[96];	 /* stage or function */
	char where[120]; /* "file:line", "" unknown */
	double share;	 /* of the loader's busy time */
};

/* One rank's row of the job: everything the job view and a rank summary
 * say of it. */
struct dlbn_rank_row {
	const char *input;  /* the file given on the command line */
	size_t input_index; /* its position there */
	int source;	    /* enum dlbn_rank_source */
	char trace[4096];   /* the trace's path (a summary's: as written there) */
	int rank;	    /* PROCESS rank of the training process, else input_index */
	int rank_known;	    /* rank came from the trace (RANK/SLURM_PROCID ...) */
	int local_rank;	    /* -1 unknown */
	int world_size;	    /* -1 unknown */
	char host[64];	    /* "" unknown */
	int state;	    /* enum dlbn_rank_state */
	char state_note[160];
	int verdict;
	double speedup;	    /* 0: none */
	double speedup_low; /* the range's low end (verdict.h) */
	double stall_s, stall_fraction, wall_s;
	double step_ms;		  /* window wall / window steps; 0: no window */
	double stall_ms_per_step; /* stall / window steps */
	double loop_ms;		  /* per step, outside the stall (verdict.h loop_ms) */
	double sync_s;		  /* host blocked in GPU syncs in the window; -1: no CUDA */
	size_t steps_window;
	/* The cause's name (dlbn_cause_name), or as a summary file gives it:
	 * kept as text, so that a cause this analyzer does not know (a newer
	 * one's summary) is shown as written. */
	char cause[32];
	char view[16];
	int num_workers;  /* -1 unknown */
	size_t nworkers;  /* worker processes seen in the window */
	double mean_busy; /* workers' busy fraction; -1: no workers */
	uint64_t records; /* records read (0 from a summary that does not say) */
	size_t nloaders;  /* loaders of the training process (up to DLBN_ROW_LOADERS kept) */
	struct dlbn_rank_loader loaders[DLBN_ROW_LOADERS];
	size_t nhot;
	struct dlbn_rank_hot hot[DLBN_ROW_HOT];
	size_t nreasons, nrecs, nwarnings;
	char reasons[DLBN_ROW_LINES][DLBN_LINE];
	char recs[DLBN_ROW_LINES][DLBN_LINE];
	char warnings[DLBN_ROW_LINES][DLBN_LINE];
};

/* An input that gave no row: unreadable, not a trace nor a summary. */
struct dlbn_rank_failure {
	const char *input;
	char why[240];
};

/* min, p50, p90 and max of one figure over the ranks that have it. */
struct dlbn_spread {
	size_t n;
	double min, p50, p90, max;
};

/* The ranks of one host (rows with the same host name). */
struct dlbn_host {
	char name[64];	     /* "" for ranks whose host is unknown */
	size_t first;	     /* its rows: job->host_rows[first .. first + nranks) */
	size_t nranks;	     /* rows on it */
	size_t nwindow;	     /* of them, rows with a window (the medians' ranks) */
	size_t ninput_bound; /* of them, input-bound (ranks.c) */
	size_t worst;	     /* its row with the largest stall per step */
	double stall_ms_p50; /* median over its ranks with a window */
	double speedup_p50;
	char cause[32]; /* the most common cause of its input-bound ranks (of all
			 * its ranks when none is) */
	int slow;	/* most of its ranks are input-bound, not every host's are */
};

/*
 * The job over all ranks.  Synchronous data-parallel training runs at the
 * slowest rank's pace, so the job verdict is the worst rank's, in the
 * order DETECTED > POTENTIAL > INCONCLUSIVE > NOT_DETECTED: the highest
 * predicted speedup among the highest verdict (a rank that cannot be
 * judged outranks the ranks judged clean, since it may be the slow one;
 * among those the lowest rank); ties go to the lower rank.
 */
struct dlbn_job {
	int verdict;
	size_t worst; /* index into the rows */
	/* The straggler (see the top): the row with the largest stall per
	 * step, when it stalls at least DLBN_STRAGGLER_SHARE of its step time
	 * more than the least stalled rank; else none (ranks stall alike). */
	int has_straggler;
	size_t straggler, least_stalled;
	/* Step times (rows with a window): a spread, not a ranking. */
	double step_ms_min, step_ms_max;
	double step_skew; /* step_ms_max / step_ms_min; 0: n/a */
	double stall_min_s, stall_max_s;
	size_t ninconclusive;
	/* The spread across ranks with a window (busy: their workers' busy
	 * fraction, ranks with workers). */
	struct dlbn_spread stall_fraction, stall_ms, speedup, busy;
	/* The rows with the largest stall per step, largest first. */
#define DLBN_JOB_WORST 5
	size_t worst_rows[DLBN_JOB_WORST];
	size_t nworst_rows;
	/* Ranks grouped by host, in order of their first rank; host_of[i] is
	 * row i's host; host_rows lists the rows host by host (rank order
	 * within a host). */
	struct dlbn_host *hosts;
	size_t nhosts, nslow_hosts;
	size_t *host_of, *host_rows;
	/* Input-bound rows on hosts that are not slow: a problem of that
	 * rank alone.  Largest stall first. */
#define DLBN_JOB_LONE 8
	size_t lone_rows[DLBN_JOB_LONE];
	size_t nlone_rows;
	/* What the job verdict rests on.  world_size: the largest a row
	 * names (-1 none); missing: ranks below it that no row has (the
	 * first DLBN_JOB_MISSING named).  nfailed: inputs that gave no row. */
	int world_size;
	size_t nmissing;
#define DLBN_JOB_MISSING 16
	int missing[DLBN_JOB_MISSING];
	/* Ranks that several rows have (the first DLBN_JOB_MISSING named);
	 * ndistinct: the rows less the repeats. */
	size_t nduplicate, ndistinct;
	int duplicate[DLBN_JOB_MISSING];
	size_t nfailed, ndamaged, ncut, nfrom_summary;
};

#define DLBN_STRAGGLER_SHARE 0.05
/* Past this many ranks the reports show the spread, the worst ranks and
 * the hosts instead of one line per rank (JSON always has every row). */
#define DLBN_RANK_TABLE_MAX 32

/* Row i waits for the straggler: its extra time per step outside its
 * stall (its loop_ms over the straggler's), >= 0; 0 when there is no
 * straggler or i is it. */
double dlbn_job_wait_ms(const struct dlbn_job *job, const struct dlbn_rank_row *rows, size_t i);

/* Fill a row from a rank's analysis (the rank's figures, loaders, hot
 * spots and lines).  hot may be NULL. */
struct dlbn_hotspots;
struct dlbn_reader_stats;
void dlbn_rank_row_fill(struct dlbn_rank_row *row, const char *input, size_t input_index,
			const struct dlbn_model *m, const struct dlbn_analysis *a,
			const struct dlbn_hotspots *hot, const struct dlbn_reader_stats *rs);
/* Is row x worse for the job than row y (the order above)?  Total: two
 * distinct rows are never equal, so the worst does not depend on the
 * order rows are compared in. */
int dlbn_rank_row_worse(const struct dlbn_rank_row *x, const struct dlbn_rank_row *y);
/* The job over rows[0..n) (in rank order) and the inputs that failed.
 * 0, or -1 out of memory (job cleared).  Free with dlbn_job_free. */
int dlbn_job_summarize(struct dlbn_job *job, const struct dlbn_rank_row *rows, size_t n,
		       size_t nfailed);
void dlbn_job_free(struct dlbn_job *job);
/* Set aside the rows that are not ranks when others are: a whole trace
 * with no rank known and no training steps (INCONCLUSIVE: no loader, no
 * training process, no hand-off): a launcher's own process (torchrun's
 * agent, a shell) that the preload traced too.  They move to aside[]
 * (input and why); the rest stay in order.  Returns how many were set
 * aside. */
int dlbn_rank_row_maybe_launcher(const struct dlbn_rank_row *r);
size_t dlbn_rank_rows_set_aside(struct dlbn_rank_row *rows, size_t *n,
				struct dlbn_rank_failure *aside);
/* Put rows in rank order (numeric; equal ranks keep their input order: a
 * trace's position stands for a rank it does not know).  0, or -1 out of
 * memory (rows left as they were). */
int dlbn_rank_rows_sort(struct dlbn_rank_row *rows, size_t n);

#endif /* DLBN_RANKS_H */
