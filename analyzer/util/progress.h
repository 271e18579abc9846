/*
 * progress.h - one line of progress on stderr while a long analysis runs.
 *
 * Only on a terminal (main turns it on when stderr is one) and only once
 * the work has taken a second: short analyses and every pipe, log file and
 * test see nothing.  The line is redrawn at most a few times a second and
 * erased when the analysis is done (dlbn_progress_stop), before the reports
 * and notes are written, so that none of them shares a line with it.
 * Thread-safe: a call that finds another drawing skips its turn.
 */
#ifndef DLBN_PROGRESS_H
#define DLBN_PROGRESS_H

#include <stddef.h>
#include <stdint.h>

/* Nonzero while progress is shown; callers test it before computing figures. */
extern int dlbn_progress_on;

void dlbn_progress_enable(void);

/* PATH read DONE of TOTAL bytes in the analysis' PASS-th pass over it. */
void dlbn_progress_bytes(const char *path, unsigned pass, uint64_t done, uint64_t total);

/* DONE of TOTAL WHAT ("traces analysed"). */
void dlbn_progress_count(const char *what, size_t done, size_t total);

/* Erase the line if one is drawn; no more progress after it. */
void dlbn_progress_stop(void);

#endif
