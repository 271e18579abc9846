/*
 * thread_census.h - TASK records: every other thread of the training
 * process, sampled from its main thread (see thread_census.c).
 */
#ifndef DLBN_THREAD_CENSUS_H
#define DLBN_THREAD_CENSUS_H

#include <stdint.h>

#include "recorder.h"

/* At a batch's arrival on the main thread (a FETCH_END mark), inside a
 * hook: a census when the last one is CENSUS_PERIOD_NS old. */
void thread_census_arrival(uint64_t now_ns) DLBN_HIDDEN;
/* At the main thread's next fetch begin: the census that closes the loop
 * period an arrival's census opened (none otherwise). */
void thread_census_fetch_begin(uint64_t now_ns) DLBN_HIDDEN;
/* In a forked child, before it records (atfork). */
void thread_census_fork_child(void) DLBN_HIDDEN;

#endif /* DLBN_THREAD_CENSUS_H */
