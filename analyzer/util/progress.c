/*
 * progress.c - the terminal's progress line (see progress.h).
 */
#include "util/progress.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <time.h>

enum {
	PROGRESS_AFTER_NS = 1000000000, /* nothing for the first second */
	PROGRESS_EVERY_NS = 250000000,	/* then at most four lines a second */
};

int dlbn_progress_on;

static pthread_mutex_t progress_lock = PTHREAD_MUTEX_INITIALIZER;
static int64_t progress_start_ns, progress_last_ns;
static int progress_drawn;
static int progress_counting; /* a count is shown: single files' bytes are not */

static int64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

void dlbn_progress_enable(void)
{
	progress_start_ns = now_ns();
	progress_last_ns = 0;
	dlbn_progress_on = 1;
}

/* Whether it is time to draw; with the lock held on success. */
static int progress_due(void)
{
	if (pthread_mutex_trylock(&progress_lock) != 0)
		return 0;
	int64_t t = now_ns();
	if (t - progress_start_ns < PROGRESS_AFTER_NS || t - progress_last_ns < PROGRESS_EVERY_NS) {
		pthread_mutex_unlock(&progress_lock);
		return 0;
	}
	progress_last_ns = t;
	return 1;
}

/* Redraw the line (progress_due() held the lock) and let go of it. */
static void draw(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static void draw(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fputs("\r\033[Kdlbn-analyze: ", stderr);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fflush(stderr);
	progress_drawn = 1;
	pthread_mutex_unlock(&progress_lock);
}

void dlbn_progress_bytes(const char *path, unsigned pass, uint64_t done, uint64_t total)
{
	if (!dlbn_progress_on || __atomic_load_n(&progress_counting, __ATOMIC_RELAXED) ||
	    !progress_due())
		return;
	double pct = total ? 100.0 * (double)done / (double)total : 0.0;
	draw("%s: pass %u, %.0f%% of %.1f MB", path, pass, pct > 100.0 ? 100.0 : pct,
	     (double)total / 1e6);
}

void dlbn_progress_count(const char *what, size_t done, size_t total)
{
	if (!dlbn_progress_on)
		return;
	__atomic_store_n(&progress_counting, 1, __ATOMIC_RELAXED);
	if (progress_due())
		draw("%zu of %zu %s", done, total, what);
}

void dlbn_progress_stop(void)
{
	if (!dlbn_progress_on)
		return;
	pthread_mutex_lock(&progress_lock);
	if (progress_drawn) {
		fputs("\r\033[K", stderr);
		fflush(stderr);
		progress_drawn = 0;
	}
	dlbn_progress_on = 0;
	pthread_mutex_unlock(&progress_lock);
}
