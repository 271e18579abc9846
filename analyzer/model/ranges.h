/*
 * ranges.h - what NVTX ranges mean to the analyzer (docs/DESIGN.md,
 * "Analyzer layers"): a range whose name looks like data loading
 * ("data", "load", "batch", "fetch", case-insensitive) is the loop waiting
 * for its input; one named like a step ("step", "iter") is a training step.
 * Data wins when a name has both ("data_iter" is the loader's iterator).
 * A library's own ranges ("[DALI]...") are neither: lib_ops.h reads them.
 *
 * Names come inline in the range record or as registered strings (STRING
 * id, text) that are per process instance and shared by its threads; ranges
 * in the "dlbn" domain are dlbn's own and never count.  The table below
 * maps (proc_id, string id) and (proc_id, domain id) to what they mean.
 * Memory grows with the registered strings and domains, not with ranges.
 */
#ifndef DLBN_RANGES_H
#define DLBN_RANGES_H

#include <stddef.h>
#include <stdint.h>

#include "trace/reader.h"

enum dlbn_range_class {
	DLBN_RANGE_OTHER = 0,
	DLBN_RANGE_DATA = 1, /* the loop obtaining a batch */
	DLBN_RANGE_STEP = 2, /* one training step */
};

/* Class of a range name (n bytes, not NUL terminated). */
int dlbn_range_classify(const char *s, size_t n);

struct dlbn_range_names;

struct dlbn_range_names *dlbn_range_names_new(void);
void dlbn_range_names_free(struct dlbn_range_names *t);

/* Learn from a STRING or DOMAIN record (others are ignored); -1 out of memory. */
int dlbn_range_names_record(struct dlbn_range_names *t, const struct dlbn_record *r);

/*
 * Class of a RANGE_PUSH, RANGE_START or NVTX_MARK record (fields: [range_id,]
 * domain_id, msg_id, msg); DLBN_RANGE_OTHER for other record types.
 */
int dlbn_range_class_of(const struct dlbn_range_names *t, const struct dlbn_record *r);

#endif /* DLBN_RANGES_H */
