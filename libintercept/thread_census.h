/*
 * thread_census.h - TASK records: every other thread of the training
 * process, sampled from its main thread (see thread_census.c).
 */
#ifndef DLBN_THREAD_CENSUS_H
#define DLBN_THREAD_CENSUS_H

#include <stdint.h>

#include "recorder.h"

/* At a fetch mark of the main thread, inside a hook: a census when the
 * last one is CENSUS_PERIOD_NS old. */
void thread_census_sample(uint64_t now_ns) DLBN_HIDDEN;
/* In a forked child, before it records (atfork). */
void thread_census_fork_child(void) DLBN_HIDDEN;

#endif /* DLBN_THREAD_CENSUS_H */
