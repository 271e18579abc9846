/*
 * test_progress.c - progress.c: nothing during the first second, then one
 * redrawn line at most four times a second; a count of traces silences the
 * single files' bytes; stopping erases the line and ends the progress.
 * Sleeps 1.1 s (the threshold is the behaviour under test); the checks
 * that nothing is drawn too early hold whatever the scheduler does.
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "util/progress.h"

/* stderr goes to a temporary file; its bytes since the last read. */
static off_t capture_at;

static char *stderr_since_last(void)
{
	static char buf[512];
	fflush(stderr);
	off_t end = lseek(STDERR_FILENO, 0, SEEK_CUR);
	size_t n = (size_t)(end - capture_at);
	if (n >= sizeof(buf))
		n = sizeof(buf) - 1;
	ssize_t got = pread(STDERR_FILENO, buf, n, capture_at);
	buf[got > 0 ? got : 0] = '\0';
	capture_at = end;
	return buf;
}

static int64_t mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Nothing was drawn, where the calls since SINCE all came within LIMIT_NS
 * of it (the progress clock ran inside [SINCE, now]); a test descheduled
 * past LIMIT_NS cannot tell, and says so instead of failing. */
static int quiet_if_within(int64_t since, int64_t limit_ns)
{
	const char *out = stderr_since_last();
	if (mono_ns() - since < limit_ns)
		return *out == '\0';
	printf("# descheduled past %lld ms: not checked\n", (long long)(limit_ns / 1000000));
	return 1;
}

static void sleep_ms(long ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
	nanosleep(&ts, NULL);
}

int main(void)
{
	FILE *capture = tmpfile();
	if (!capture || dup2(fileno(capture), STDERR_FILENO) < 0)
		return 2;

	dlbn_progress_bytes("t.bin", 1, 10, 100);
	CHECK(*stderr_since_last() == '\0', "off until enabled");

	int64_t since = mono_ns();
	dlbn_progress_enable();
	dlbn_progress_bytes("t.bin", 1, 10, 100);
	CHECK(quiet_if_within(since, 1000000000), "nothing in the first second");

	sleep_ms(1100);
	since = mono_ns();
	dlbn_progress_bytes("t.bin", 2, 450000, 1000000);
	const char *line = stderr_since_last();
	CHECK(strcmp(line, "\r\033[Kdlbn-analyze: t.bin: pass 2, 45% of 1.0 MB") == 0,
	      "after a second: the file, its pass and the share read");
	dlbn_progress_bytes("t.bin", 2, 460000, 1000000);
	CHECK(quiet_if_within(since, 250000000), "not redrawn within a quarter second");

	sleep_ms(300);
	dlbn_progress_count("traces analysed", 3, 8);
	line = stderr_since_last();
	CHECK(strcmp(line, "\r\033[Kdlbn-analyze: 3 of 8 traces analysed") == 0,
	      "a count of traces");
	sleep_ms(300);
	dlbn_progress_bytes("t.bin", 1, 5, 10);
	CHECK(*stderr_since_last() == '\0', "with a count shown, one file's bytes are not");

	dlbn_progress_stop();
	CHECK(strcmp(stderr_since_last(), "\r\033[K") == 0, "stopping erases the line");
	sleep_ms(300);
	dlbn_progress_count("traces analysed", 4, 8);
	CHECK(*stderr_since_last() == '\0' && !dlbn_progress_on, "nothing after the stop");
	dlbn_progress_stop();
	CHECK(*stderr_since_last() == '\0', "a second stop writes nothing");

	CHECK_EXIT();
}
