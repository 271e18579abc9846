/*
 * waitstacks.h - the native stacks the recorder captured at the training
 * process's longest waits (MODULE and STACK records, libintercept/stacks.h),
 * reduced to the few longest waits and symbolised ("func+0xoff (module)")
 * for the reports (docs/DESIGN.md, "Recorder").
 *
 * Module ids are per process instance and shared by its threads: a MODULE
 * announced in one thread's stream may be used by a STACK in another's, so
 * the module table is keyed by (proc_id, module_id).  Stacks are kept raw
 * while the trace streams by and symbolised once at the end, so a MODULE
 * that the merge order puts after its first STACK still resolves.
 *
 * Memory: the module table (one path per loaded object per process) and a
 * fixed number of kept stacks; nothing grows with the number of records.
 */
#ifndef DLBN_WAITSTACKS_H
#define DLBN_WAITSTACKS_H

#include <stddef.h>
#include <stdint.h>

#include "trace/reader.h"

#define DLBN_WAIT_STACKS_KEPT	  5  /* longest waits kept with their stacks */
#define DLBN_WAIT_STACK_FRAMES	  32 /* frames kept per stack (the recorder's maximum) */
#define DLBN_WAIT_STACK_FRAME_LEN 160

struct dlbn_wait_stack {
	int64_t wait_begin; /* absolute ns */
	int64_t wait_ns;    /* the wait record's duration (else the STACK's delta) */
	int wait_type;	    /* record type of the wait (DLBN_REC_POLL ...) */
	int preferred;	    /* captured once the steady-state window had begun */
	uint32_t proc_id;
	int tid;
	int nframes;
	int32_t module[DLBN_WAIT_STACK_FRAMES];
	uint64_t offset[DLBN_WAIT_STACK_FRAMES];
	/* Filled by dlbn_wait_stacks_finish. */
	char frame[DLBN_WAIT_STACK_FRAMES][DLBN_WAIT_STACK_FRAME_LEN];
};

struct dlbn_stack_module;

/* Last record with a duration per stream: the wait a STACK refers to. */
struct dlbn_stack_last_wait {
	int type;
	int64_t t, dur;
};

struct dlbn_wait_stacks {
	struct dlbn_wait_stack kept[DLBN_WAIT_STACKS_KEPT]; /* longest first after finish */
	size_t nkept;
	uint64_t stacks_seen; /* STACK records of the followed process */
	uint64_t modules_missing;
	struct dlbn_stack_module *mods;
	size_t nmods, capmods;
	struct dlbn_stack_last_wait *last; /* per stream index */
	size_t nlast;
};

/* nstreams: the reader's stream count (for the per-stream wait memory). */
int dlbn_wait_stacks_init(struct dlbn_wait_stacks *ws, size_t nstreams);
/*
 * Feed every record of the followed (training) process; others are ignored.
 * dur: the record's duration (0 for instantaneous ones).  preferred: the
 * steady-state window has begun; such stacks displace warm-up ones (whose
 * long waits are worker start-up, seldom the question), so the kept set is
 * the longest window waits, topped up with warm-up ones.  0, or -1 when out
 * of memory.
 */
int dlbn_wait_stacks_record(struct dlbn_wait_stacks *ws, const struct dlbn_record *r, int64_t dur,
			    int preferred);
/* Sort the kept stacks (preferred first, then longest first) and symbolise
 * their frames. */
void dlbn_wait_stacks_finish(struct dlbn_wait_stacks *ws);
void dlbn_wait_stacks_free(struct dlbn_wait_stacks *ws);

/* What the waiting call was, for reports: "poll", "read", "sem_wait",
 * "fetch (DataLoader __next__)" for a Python fetch mark ... */
const char *dlbn_wait_call_name(int wait_type);

#endif /* DLBN_WAITSTACKS_H */
