/*
 * marker.h - what the fetch marks (marker.c) ask of the profiler's entry
 * points (marker_profile.c): the sampler's timer, armed for the length of
 * each main-thread fetch once the Python profiler asked for it.
 */
#ifndef DLBN_MARKER_H
#define DLBN_MARKER_H

#include "recorder.h"

/* At a main-thread FETCH_BEGIN (1) or FETCH_END/FETCH_STOP (0), inside
 * the mark's hook: arm or disarm the sampler's timer when
 * dlbn_profile_fetch_timer turned that on; else one load. */
void profile_fetch_timer(int fetch_begins) DLBN_HIDDEN;
/* In a forked child, before it records (atfork): the setting is the
 * parent's profiler's, and the child has no timer. */
void profile_fork_child(void) DLBN_HIDDEN;

#endif /* DLBN_MARKER_H */
