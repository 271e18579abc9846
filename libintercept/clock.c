/*
 * clock.c - the recorder's time base: CLOCK_MONOTONIC nanoseconds.
 *
 * One CLOCK_MONOTONIC serves every process of a host, so records of the main
 * process and its workers compare directly.  clock_gettime goes through the
 * vDSO (no syscall) with the tsc clock source, ~20-25 ns on a virtual
 * machine; the source is recorded in every PROCESS record because with hpet
 * each call costs ~1 us.  A recorded call reads the clock twice, so the
 * clock is half of what a hook costs.
 *
 * Where the kernel itself keeps time with the TSC (clock source "tsc", a
 * constant and nonstop TSC), the TSC is read instead (~10 ns) and turned
 * into CLOCK_MONOTONIC through the calling thread's anchor, a (tsc, ns) pair
 * read together:
 *
 *     now = anchor.ns + (tsc - anchor.tsc) * tsc_mult >> 32
 *
 * An anchor older than ANCHOR_NS is read again, so the error is the rate's
 * error over at most ANCHOR_NS and never accumulates: CLOCK_MONOTONIC is
 * slewed by NTP by at most 500 ppm (0.5 us per ms; typically tens of ppm),
 * and tsc_mult is measured against CLOCK_MONOTONIC itself over at least
 * CALIBRATE_NS, then over ever longer spans.  Until then (and in a process
 * the TSC is not trusted in, or with DLBN_CLOCK=monotonic) every reading is
 * clock_gettime's.  A forked child inherits the rate.  Each re-anchoring
 * compares the old anchor's prediction with the clock; the largest
 * difference is reported in the EXIT record, and one above DRIFT_LIMIT_NS
 * turns the TSC off for the process (a migrated virtual machine, a TSC
 * that jumped).
 *
 * Invariants: per thread, readings never go backwards.  A signal handler
 * that reads the clock while its thread is re-anchoring reads clock_gettime
 * and leaves the anchor alone, so an anchor is never seen half written.
 */
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "recorder.h"

#if defined(__x86_64__)
#include <x86intrin.h>
#define HAVE_TSC 1
#else
#define HAVE_TSC 0
#endif

#define ANCHOR_NS      1000000u	 /* re-read the anchor after 1 ms */
#define CALIBRATE_NS   50000000u /* the rate from pairs at least 50 ms apart */
#define PAIR_NS	       150u	 /* a pair read further apart than this is retried */
#define DRIFT_LIMIT_NS 20000u	 /* a prediction this far off: the TSC is not a clock here */
#define CAL_PAIR_TICKS 1000u	 /* a rate pair's width: <= 1 us for any TSC of >= 1 GHz */

struct clock_anchor {
	uint64_t tsc, ns; /* read together; tsc 0: none yet */
	uint64_t last;	  /* the last reading handed out on this thread */
	int busy;	  /* being re-read (a signal handler must not touch it) */
};

static __thread struct clock_anchor anchor;

/* 0 until calibrated (and for good where the TSC is not used). */
static uint64_t tsc_mult;	 /* ns per tick, << 32 */
static uint64_t anchor_ticks;	 /* ANCHOR_NS in ticks */
static uint64_t pair_ticks;	 /* PAIR_NS in ticks */
static int tsc_usable;		 /* clock_init found the TSC to be the kernel's clock */
static uint64_t cal_tsc, cal_ns; /* the start-up pair the rate is measured from */
static uint64_t cal_next_ns = CALIBRATE_NS;
static uint64_t max_drift_ns; /* largest re-anchoring correction seen */

static inline uint64_t mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

#if HAVE_TSC

/* A (tsc, ns) pair read within `width` ticks of each other; false if none. */
static bool read_pair(uint64_t width, uint64_t *tsc, uint64_t *ns)
{
	for (int i = 0; i < 3; i++) {
		uint64_t t1 = __rdtsc();
		uint64_t n = mono_ns();
		uint64_t t2 = __rdtsc();
		if (t2 - t1 <= width) {
			*tsc = t1 + (t2 - t1) / 2;
			*ns = n;
			return true;
		}
	}
	return false;
}

/*
 * The rate, from the pair read at start-up and (tsc, ns), once they are
 * cal_next_ns apart; then again each time the baseline has grown eightfold
 * (0.05 s, 0.4 s, 3.2 s ...), so its error shrinks as the run goes on.
 */
static void calibrate(uint64_t tsc, uint64_t ns)
{
	uint64_t span = ns - cal_ns;
	if (span < __atomic_load_n(&cal_next_ns, __ATOMIC_RELAXED) || tsc <= cal_tsc)
		return;
	__atomic_store_n(&cal_next_ns, span * 8, __ATOMIC_RELAXED);
	unsigned __int128 m = ((unsigned __int128)span << 32) / (tsc - cal_tsc);
	if (m == 0 || m >= (1ull << 36)) /* a tick under 1/16 ns or over 16 ns: not a TSC */
		return;
	uint64_t mult = (uint64_t)m;
	__atomic_store_n(&anchor_ticks, ((uint64_t)ANCHOR_NS << 32) / mult, __ATOMIC_RELAXED);
	__atomic_store_n(&pair_ticks, ((uint64_t)PAIR_NS << 32) / mult, __ATOMIC_RELAXED);
	__atomic_store_n(&tsc_mult, mult, __ATOMIC_RELEASE);
}

/* The old anchor's prediction for (tsc, ns), against what the clock said. */
static void check_drift(const struct clock_anchor *a, uint64_t mult, uint64_t tsc, uint64_t ns)
{
	uint64_t dt = tsc - a->tsc;
	if (!mult || !a->tsc || dt > 4 * __atomic_load_n(&anchor_ticks, __ATOMIC_RELAXED))
		return; /* only over a few anchor periods: NTP's slewing adds up */
	uint64_t predicted = a->ns + ((dt * mult) >> 32);
	uint64_t off = predicted > ns ? predicted - ns : ns - predicted;
	if (off > __atomic_load_n(&max_drift_ns, __ATOMIC_RELAXED))
		__atomic_store_n(&max_drift_ns, off, __ATOMIC_RELAXED);
	if (off > DRIFT_LIMIT_NS)
		__atomic_store_n(&tsc_usable, 0, __ATOMIC_RELAXED);
}

/* The slow path: clock_gettime, and a new anchor for this thread. */
__attribute__((noinline)) static uint64_t reanchor(struct clock_anchor *a, uint64_t mult)
{
	if (!__atomic_load_n(&tsc_usable, __ATOMIC_RELAXED) || a->busy)
		return mono_ns();
	if (!mult) {
		/* Not calibrated yet: the clock itself, a pair only when due. */
		uint64_t ns = mono_ns();
		if (ns - cal_ns < __atomic_load_n(&cal_next_ns, __ATOMIC_RELAXED))
			return ns;
	}
	a->busy = 1;
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	uint64_t tsc, ns;
	if (read_pair(mult ? __atomic_load_n(&pair_ticks, __ATOMIC_RELAXED) : CAL_PAIR_TICKS, &tsc,
		      &ns)) {
		calibrate(tsc, ns);
		check_drift(a, mult, tsc, ns);
		a->tsc = tsc;
		a->ns = ns;
	} else {
		ns = mono_ns();
	}
	if (ns < a->last)
		ns = a->last;
	a->last = ns;
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	a->busy = 0;
	return ns;
}

uint64_t clock_now_ns(void)
{
	uint64_t mult = __atomic_load_n(&tsc_mult, __ATOMIC_ACQUIRE);
	struct clock_anchor *a = &anchor;
	if (DLBN_LIKELY(mult != 0)) {
		uint64_t dt = __rdtsc() - a->tsc;
		if (DLBN_LIKELY(dt < __atomic_load_n(&anchor_ticks, __ATOMIC_RELAXED) && !a->busy &&
				__atomic_load_n(&tsc_usable, __ATOMIC_RELAXED))) {
			uint64_t t = a->ns + ((dt * mult) >> 32);
			if (DLBN_UNLIKELY(t < a->last))
				t = a->last;
			a->last = t;
			return t;
		}
	}
	return reanchor(a, mult);
}

/* The kernel keeps time with a constant, nonstop TSC. */
static bool tsc_is_the_clock(void)
{
	char buf[8192];
	if (read_small_file_at(AT_FDCWD,
			       "/sys/devices/system/clocksource/clocksource0/current_clocksource",
			       buf, sizeof(buf)) <= 0 ||
	    strncmp(buf, "tsc\n", 4) != 0)
		return false;
	if (read_small_file_at(AT_FDCWD, "/proc/cpuinfo", buf, sizeof(buf)) <= 0)
		return false;
	char *flags = strstr(buf, "\nflags");
	char *eol = flags ? strchr(flags + 1, '\n') : NULL;
	if (!flags || !eol)
		return false;
	*eol = '\0';
	return strstr(flags, " constant_tsc") && strstr(flags, " nonstop_tsc");
}

void clock_init(void)
{
	const char *want = getenv("DLBN_CLOCK");
	if (want && strcmp(want, "monotonic") == 0)
		return;
	if (!tsc_is_the_clock())
		return;
	if (!read_pair(CAL_PAIR_TICKS, &cal_tsc, &cal_ns))
		return;
	__atomic_store_n(&tsc_usable, 1, __ATOMIC_RELAXED);
}

#else /* no TSC: clock_gettime every time */

uint64_t clock_now_ns(void)
{
	return mono_ns();
}

void clock_init(void)
{
}

#endif

int clock_uses_tsc(void)
{
	return __atomic_load_n(&tsc_mult, __ATOMIC_RELAXED) != 0 &&
	       __atomic_load_n(&tsc_usable, __ATOMIC_RELAXED);
}

uint64_t clock_max_drift_ns(void)
{
	return __atomic_load_n(&max_drift_ns, __ATOMIC_RELAXED);
}
