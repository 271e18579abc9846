/*
 * config.h - the bootstrap's CONFIG record text, "key=value;key=value"
 * (docs/DESIGN.md, "Python bootstrap"): the one place that reads it.
 *
 * A loader's CONFIG describes the loader of one iterator (num_workers,
 * batch_size, kind, sampler, workers=pid,pid,...); the process note
 * (iter_id 0) says what the bootstrap could not do.  dlbn_config_parse
 * keeps a bounded copy of the text and its pairs, with the figures the
 * analysis uses as numbers; dlbn_config_text_value reads one value
 * straight from a record's text, unbounded by that copy (a long workers=
 * list).
 */
#ifndef DLBN_CONFIG_H
#define DLBN_CONFIG_H

#include <stddef.h>

#define DLBN_CONFIG_MAX 28 /* pairs kept; the bootstrap writes fewer */

struct dlbn_config {
	int present;
	char text[512]; /* the record's text, cut at 511 bytes */
	int n;
	char key[DLBN_CONFIG_MAX][32];
	char val[DLBN_CONFIG_MAX][64];
	/* Parsed values; -1 unknown. */
	int num_workers, prefetch_factor, batch_size, pin_memory, persistent_workers;
	int threads;	     /* DALI's num_threads */
	int intraop_threads; /* torch.get_num_threads() in the training process */
	int epoch_batches;   /* len(loader): batches in an epoch ("batches") */
	double cpu_quota;    /* CPUs its cgroup's quota allows, 0 none */
	int cpus;	     /* the CPUs the training process may run on (affinity) */
	int dali_proxy;	     /* 1: DALI's proxy DataLoader (threads, device: its pipeline's) */
	char start_method[24], dataset_kind[24];
	/* What kind of loader (the bootstrap's "kind"): "" torch's DataLoader,
	 * "nodes" torchdata.nodes, "dali" DALI's iterators, "named" one the
	 * user named (dlbn-run --loader). */
	char kind[16];
	char worker_method[16]; /* nodes' ParallelMapper: thread or process */
};

/* Parse the len bytes of "key=value;..." text into c (present, every
 * figure -1 or empty unless the text gives it; a key given twice: its
 * last value). */
void dlbn_config_parse(struct dlbn_config *c, const char *text, size_t len);

/* The value of key in a parsed CONFIG (its first), NULL when absent. */
const char *dlbn_config_value(const struct dlbn_config *c, const char *key);

/* The value of key in the len bytes of "key=value;..." text (not
 * NUL-terminated), into buf cut to bufsz - 1 bytes; 1 when present, else
 * 0 and buf untouched. */
int dlbn_config_text_value(const char *text, size_t len, const char *key, char *buf, size_t bufsz);

#endif /* DLBN_CONFIG_H */
