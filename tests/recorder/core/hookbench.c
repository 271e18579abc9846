/*
 * hookbench.c - cost of hooked libc calls, in ns per call.
 *
 * Run it once plainly and once with LD_PRELOAD=libdlbn.so (hookbench.sh
 * does both and prints the difference):
 *   read_ignored_ns   read() of 1 byte from /dev/zero: an fd the recorder
 *                     classifies as uninteresting (one table lookup)
 *   read_pipe_ns      read() of 1 byte from a pipe: a recorded READ
 *   sem_post_ns       sem_post on a semaphore nobody waited on
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <fcntl.h>
#include <semaphore.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static double now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static double bench_ignored(long n)
{
	char c;
	int fd = open("/dev/zero", O_RDONLY);
	if (fd < 0 || read(fd, &c, 1) != 1)
		exit(2);
	double t0 = now_ns();
	for (long i = 0; i < n; i++)
		if (read(fd, &c, 1) != 1)
			exit(2);
	double dt = now_ns() - t0;
	close(fd);
	return dt / (double)n;
}

static double bench_pipe(long n)
{
	enum { CHUNK = 65536 };
	static char buf[CHUNK];
	int p[2];
	char c;
	if (pipe(p) != 0 || fcntl(p[1], F_SETPIPE_SZ, CHUNK) < CHUNK)
		exit(2);
	double total = 0;
	for (long done = 0; done < n; done += CHUNK) {
		if (write(p[1], buf, CHUNK) != CHUNK)
			exit(2);
		double t0 = now_ns();
		for (int i = 0; i < CHUNK; i++)
			if (read(p[0], &c, 1) != 1)
				exit(2);
		total += now_ns() - t0;
	}
	close(p[0]);
	close(p[1]);
	return total / (double)((n + CHUNK - 1) / CHUNK * CHUNK);
}

static double bench_sem_post(long n)
{
	sem_t s;
	sem_init(&s, 0, 0);
	double t0 = now_ns();
	for (long i = 0; i < n; i++)
		sem_post(&s);
	return (now_ns() - t0) / (double)n;
}

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 1000000;
	printf("read_ignored_ns=%.1f\n", bench_ignored(n));
	printf("read_pipe_ns=%.1f\n", bench_pipe(n / 4));
	printf("sem_post_ns=%.1f\n", bench_sem_post(n));
	return 0;
}
