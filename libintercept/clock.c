/*
 * clock.c - the recorder's time base: CLOCK_MONOTONIC nanoseconds.
 *
 * One CLOCK_MONOTONIC serves every process of a host, so records of the main
 * process and its workers compare directly.  clock_gettime goes through the
 * vDSO (no syscall) with the tsc clock source; the source is recorded in
 * every PROCESS record because with hpet each call costs ~1 us.
 */
#include <time.h>

#include "recorder.h"

uint64_t clock_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}
