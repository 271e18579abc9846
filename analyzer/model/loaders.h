/*
 * loaders.h - the DataLoaders of the training process (docs/DESIGN.md,
 * "Analyzer layers"): which iterator belongs to which loader, which loader is the
 * training loop's, what the others are, and which worker processes each
 * one started.
 *
 * A script has a train and a val loader, sometimes two train loaders
 * zipped.  The bootstrap's marks name an iterator (iter_id, new for every
 * iter()), and each iterator's CONFIG names its DataLoader (loader=id of
 * the Python object) and its workers (workers=pid,pid,...).  Pass 1 of the
 * model hands every MARK and CONFIG record here; once roles are known,
 * dlbn_loaders_decide() keeps the training process's loaders, picks the
 * training loader (the one whose epochs the loop spent the most time in)
 * and tags the worker processes with their loader.  Pass 2 then gives each
 * loader its own steps (model.c); the training loader's are the Python
 * view's, the others' are reported beside them, and their stall inside the
 * training loader's window counts in the prediction (Replay caches every
 * loader).
 *
 * Iterators without a loader id (no bootstrap CONFIG: an old trace, or a
 * bootstrap that could not read it) all belong to one loader of key 0, which
 * is what the analyzer did before it knew about several loaders.
 *
 * Memory: loaders (a fixed ceiling), and one small entry per iterator (an
 * epoch of one loader) and per worker claim: grows with epochs, never with
 * steps or records.
 */
#ifndef DLBN_LOADERS_H
#define DLBN_LOADERS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "model/lead.h"

struct dlbn_model;
struct dlbn_record;

enum dlbn_loader_role {
	DLBN_LOADER_TRAIN = 0,	/* the training loop's: the verdict's steps */
	DLBN_LOADER_ZIPPED = 1, /* fetched in the same epochs as the training loader */
	DLBN_LOADER_EVAL = 2,	/* its own epochs, sequential sampler (validation) */
	DLBN_LOADER_OTHER = 3,
};

#define DLBN_LOADERS_MAX 32

/* Figures of a loader's steps inside a span (whole run, or the part that
 * falls inside the training loader's window). */
struct dlbn_loader_sums {
	size_t steps;
	int64_t wait_ns, stall_ns;
	/* The loop periods before its fetches (outside.c charges them). */
	struct dlbn_lead_sums leads;
};

const char *dlbn_loader_role_name(int role);

/* What the reports say of one loader (dlbn_loader_summary). */
struct dlbn_loader_summary {
	int id; /* 1-based, in order of first appearance */
	int role;
	int training;
	size_t steps, window_steps;
	int epochs;
	int num_workers; /* config; -1 unknown */
	size_t worker_procs;
	double wait_s, stall_s;			 /* its window steps (warm-up skipped) */
	struct dlbn_loader_sums in_train_window; /* others: inside the verdict's window */
	char sampler[48], loader_class[48];
	char kind[16];	   /* "dataloader", "nodes", "dali" or "named" */
	int batch_size;	   /* -1 unknown */
	int threads;	   /* DALI's num_threads; -1 unknown */
	int feeds_another; /* fetched on another thread than the loop's */
};

/* Pass 1: a MARK or CONFIG record of process proc_index.  -1: out of memory. */
int dlbn_loaders_record(struct dlbn_model *m, uint32_t proc_index, const struct dlbn_record *r);
/* After the roles: keep the training process's loaders, choose the
 * training loader, name the others' roles, tag workers with their loader.
 * -1: out of memory. */
int dlbn_loaders_decide(struct dlbn_model *m);
/* Pass 2: the loader index of iterator iter_id of the training process
 * (the training loader's when unknown, -1 when there is none). */
int dlbn_loaders_of_iter(struct dlbn_model *m, int64_t iter_id);
void dlbn_loaders_free(struct dlbn_model *m);
struct dlbn_config;
/* The kind of loader a CONFIG describes: "dataloader" (torch's, and
 * loaders without a CONFIG), "nodes", "dali" or "named". */
const char *dlbn_loader_kind(const struct dlbn_config *c);
/* Loader i of the training process (i < m->loaders.n). */
void dlbn_loader_summary(const struct dlbn_model *m, size_t i, struct dlbn_loader_summary *out);
/* "DataLoader, RandomSampler, 2 workers, batch 32" (what is known). */
void dlbn_loader_describe(const struct dlbn_loader_summary *s, char *buf, size_t len);

#endif /* DLBN_LOADERS_H */
