/*
 * peakrss.c - run a command and report its peak RSS and CPU time, for
 * `make bench`'s analyzer figures.
 *
 *   peakrss OUT CMD [ARG...]   runs CMD, waits for it and writes
 *                              "status maxrss_kib user_s sys_s" to OUT;
 *                              exits with CMD's exit status (127: not run).
 *
 * Why not wait4 from the benchmark's Python process: Linux keeps a
 * process's peak RSS across exec, and a child forked from Python starts as
 * a copy of Python's ~12 MiB, which then floors every figure.  Forked from
 * this small program the floor is this program's own size (~1 MiB).
 */
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: peakrss OUT CMD [ARG...]\n");
		return 2;
	}
	pid_t pid = fork();
	if (pid < 0) {
		perror("peakrss: fork");
		return 127;
	}
	if (pid == 0) {
		execvp(argv[2], argv + 2);
		perror("peakrss: exec");
		_exit(127);
	}
	int status;
	struct rusage ru;
	if (wait4(pid, &status, 0, &ru) != pid) {
		perror("peakrss: wait4");
		return 127;
	}
	int rc = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
	FILE *out = fopen(argv[1], "w");
	if (!out || fprintf(out, "%d %ld %.6f %.6f\n", rc, ru.ru_maxrss,
			    (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6,
			    (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6) < 0 ||
	    fclose(out) != 0) {
		perror("peakrss: writing the result");
		return 127;
	}
	return rc;
}
