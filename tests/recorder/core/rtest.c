/*
 * rtest.c - small scenarios for the recorder tests (test_recorder.py).
 *
 * Usage: rtest <scenario> [args].  Each scenario does a few hooked calls and
 * prints facts the test checks against the trace ("key=value" lines).  Exit
 * status 0 means the scenario's own checks (e.g. errno values) passed.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <spawn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static unsigned long ino_of(int fd)
{
	struct stat st;
	if (fstat(fd, &st) != 0) {
		perror("fstat");
		exit(2);
	}
	return (unsigned long)st.st_ino;
}

static int do_pipe(void)
{
	int p[2];
	char buf[16];
	if (pipe(p) != 0)
		return 2;
	printf("ino=%lu\n", ino_of(p[0]));
	if (write(p[1], "0123456789", 10) != 10)
		return 3;
	struct pollfd pfd = {.fd = p[0], .events = POLLIN};
	if (poll(&pfd, 1, 1000) != 1)
		return 4;
	if (read(p[0], buf, sizeof(buf)) != 10)
		return 5;
	return 0;
}

static int check_errno(const char *what, int got, int want)
{
	printf("%s errno=%d want=%d\n", what, got, want);
	return got == want ? 0 : 1;
}

static int do_errno(void)
{
	int bad = 0, p[2];
	char c;
	int fd = open("/dev/null", O_RDONLY);
	close(fd);
	errno = 0;
	if (read(fd, &c, 1) != -1)
		bad++;
	bad += check_errno("read_closed", errno, EBADF);
	if (pipe2(p, O_NONBLOCK) != 0)
		return 2;
	errno = 0;
	if (read(p[0], &c, 1) != -1)
		bad++;
	bad += check_errno("read_empty_nonblock", errno, EAGAIN);
	struct pollfd pfd = {.fd = p[0], .events = POLLIN};
	errno = 1234;
	if (poll(&pfd, 1, 0) != 0)
		bad++;
	bad += check_errno("poll_timeout_keeps_errno", errno, 1234);
	errno = 0;
	if (open("/nonexistent/dlbn", O_RDONLY) != -1)
		bad++;
	bad += check_errno("open_missing", errno, ENOENT);
	sem_t sem;
	sem_init(&sem, 0, 0);
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_nsec += 30 * 1000 * 1000;
	if (ts.tv_nsec >= 1000000000) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000;
	}
	errno = 0;
	if (sem_timedwait(&sem, &ts) != -1)
		bad++;
	bad += check_errno("sem_timedwait_timeout", errno, ETIMEDOUT);
	return bad ? 1 : 0;
}

/* The child writes to a pipe the parent reads; the child leaves via _exit. */
static int do_fork(void)
{
	int p[2];
	char buf[8];
	if (pipe(p) != 0)
		return 2;
	printf("ino=%lu\n", ino_of(p[0]));
	/* Parent-only records before the fork; they must not appear twice. */
	for (int i = 0; i < 5; i++) {
		if (write(p[1], "x", 1) != 1 || read(p[0], buf, 1) != 1)
			return 3;
	}
	fflush(stdout);
	pid_t pid = fork();
	if (pid == 0) {
		if (write(p[1], "child", 5) != 5)
			_exit(9);
		_exit(7);
	}
	printf("child=%d\n", (int)pid);
	if (read(p[0], buf, 5) != 5)
		return 4;
	int st;
	waitpid(pid, &st, 0);
	return WIFEXITED(st) && WEXITSTATUS(st) == 7 ? 0 : 5;
}

/* fork + exec of ourselves: the exec'd child must join the trace. */
static int do_spawn(const char *self)
{
	fflush(stdout);
	pid_t pid = fork();
	if (pid == 0) {
		execl(self, self, "pipe", (char *)NULL);
		_exit(127);
	}
	printf("child=%d\n", (int)pid);
	int st;
	waitpid(pid, &st, 0);
	return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : 5;
}

/* A child records N writes, reports, then is killed with SIGKILL. */
static int do_sigkill(int n)
{
	int p[2], ready[2];
	char c;
	if (pipe(p) != 0 || pipe(ready) != 0)
		return 2;
	fflush(stdout);
	pid_t pid = fork();
	if (pid == 0) {
		for (int i = 0; i < n; i++) {
			if (write(p[1], "y", 1) != 1 || read(p[0], &c, 1) != 1)
				_exit(9);
		}
		if (write(ready[1], "r", 1) != 1)
			_exit(9);
		for (;;)
			pause();
	}
	printf("child=%d\n", (int)pid);
	if (read(ready[0], &c, 1) != 1)
		return 3;
	kill(pid, SIGKILL);
	int st;
	waitpid(pid, &st, 0);
	return WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL ? 0 : 4;
}

static sem_t the_sem;

static void *poster(void *arg)
{
	(void)arg;
	struct timespec d = {0, 50 * 1000 * 1000};
	nanosleep(&d, NULL);
	sem_post(&the_sem);
	return NULL;
}

static int do_sem(void)
{
	pthread_t t;
	sem_init(&the_sem, 0, 0);
	printf("sem=%lu\n", (unsigned long)(uintptr_t)&the_sem);
	pthread_create(&t, NULL, poster, NULL);
	if (sem_wait(&the_sem) != 0)
		return 2;
	pthread_join(t, NULL);
	/* An uncontended post/wait pair: not a blocked wait. */
	sem_post(&the_sem);
	sem_wait(&the_sem);
	return 0;
}

/* Many reads so that the stream spans several extents. */
static int do_many(int n)
{
	int p[2];
	char c;
	if (pipe(p) != 0)
		return 2;
	for (int i = 0; i < n; i++)
		if (write(p[1], "z", 1) != 1 || read(p[0], &c, 1) != 1)
			return 3;
	printf("n=%d\n", n);
	return 0;
}

/*
 * fd numbers are reused: a pipe read at fd N, then a regular file at the
 * same N (via close+open, then via dup2) must be seen as the file.  Then
 * N + 64, the same announcement slot of format 2.0, is read between two
 * reads of N.
 */
static int do_reuse(const char *file)
{
	int p[2];
	char buf[8];
	if (pipe(p) != 0 || write(p[1], "ab", 2) != 2 || read(p[0], buf, 1) != 1)
		return 2;
	int n = p[0];
	close(n);
	int fd = open(file, O_RDONLY);
	if (fd != n || read(fd, buf, 4) != 4)
		return 3;
	printf("fd=%d\nfile_ino=%lu\n", fd, ino_of(fd));
	int q[2];
	if (pipe(q) != 0 || write(q[1], "cdefgh", 6) != 6)
		return 4;
	printf("pipe2_ino=%lu\n", ino_of(q[0]));
	if (dup2(q[0], fd) != fd || read(fd, buf, 2) != 2)
		return 5;
	int same_slot = fd + 64; /* DLBN_FD_SLOTS of dlbn_trace.h */
	if (dup2(q[0], same_slot) != same_slot || read(same_slot, buf, 2) != 2 ||
	    read(fd, buf, 2) != 2)
		return 6;
	printf("same_slot=%d\n", same_slot);
	return 0;
}

static void *reader_thread(void *arg)
{
	int fd = *(int *)arg;
	char c;
	if (read(fd, &c, 1) != 1)
		exit(3);
	return NULL;
}

/* Each thread records into its own stream. */
static int do_threads(int n)
{
	pthread_t t[16];
	int p[2];
	if (n > 16 || pipe(p) != 0)
		return 2;
	for (int i = 0; i < n; i++)
		pthread_create(&t[i], NULL, reader_thread, &p[0]);
	for (int i = 0; i < n; i++)
		if (write(p[1], "t", 1) != 1)
			return 3;
	for (int i = 0; i < n; i++)
		pthread_join(t[i], NULL);
	return 0;
}

static int stress_iters;

static void *stress_thread(void *arg)
{
	(void)arg;
	int p[2];
	char c;
	if (pipe(p) != 0)
		exit(3);
	for (int i = 0; i < stress_iters; i++)
		if (write(p[1], "s", 1) != 1 || read(p[0], &c, 1) != 1)
			exit(4);
	close(p[0]);
	close(p[1]);
	return NULL;
}

/* procs processes x threads threads x iters write+read pairs, all at once. */
static int do_stress(int procs, int threads, int iters)
{
	pid_t kids[16];
	stress_iters = iters;
	if (procs > 16 || threads > 16)
		return 2;
	fflush(stdout);
	for (int k = 0; k < procs; k++) {
		kids[k] = fork();
		if (kids[k] == 0) {
			pthread_t t[16];
			for (int i = 0; i < threads; i++)
				pthread_create(&t[i], NULL, stress_thread, NULL);
			for (int i = 0; i < threads; i++)
				pthread_join(t[i], NULL);
			_exit(0);
		}
	}
	int bad = 0;
	for (int k = 0; k < procs; k++) {
		int st;
		waitpid(kids[k], &st, 0);
		bad += !(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	}
	return bad ? 5 : 0;
}

/* posix_spawn (a vfork-like clone inside glibc): the child joins. */
static int do_posix_spawn(const char *self)
{
	extern char **environ;
	pid_t pid;
	char *argv[] = {(char *)self, "pipe", NULL};
	if (posix_spawn(&pid, self, NULL, NULL, argv, environ) != 0)
		return 2;
	printf("child=%d\n", (int)pid);
	int st;
	waitpid(pid, &st, 0);
	return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : 5;
}

/*
 * Recorded pipe reads, each between two clock_gettime(CLOCK_MONOTONIC) reads
 * of the program's own ("read pid tid i before after" lines), on `threads`
 * threads and then in a forked child, with pauses that let the recorder's
 * clock anchors expire; `ms` of them in all, long enough to calibrate.
 */
struct clock_job {
	int iters;
	long pause_us;
};

static uint64_t mono_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void *clock_reads(void *arg)
{
	const struct clock_job *job = arg;
	int p[2];
	char c;
	if (pipe(p) != 0)
		return (void *)1;
	for (int i = 0; i < job->iters; i++) {
		if (write(p[1], "x", 1) != 1)
			return (void *)1;
		uint64_t before = mono_now();
		if (read(p[0], &c, 1) != 1)
			return (void *)1;
		uint64_t after = mono_now();
		printf("read %d %d %d %llu %llu\n", (int)getpid(), (int)gettid(), i,
		       (unsigned long long)before, (unsigned long long)after);
		if (job->pause_us && i % 7 == 0)
			usleep((useconds_t)job->pause_us * (i % 3 + 1));
	}
	close(p[0]);
	close(p[1]);
	return NULL;
}

static int do_clock(int threads, int iters)
{
	struct clock_job job = {iters, 400};
	pthread_t t[8];
	threads = threads < 1 ? 1 : threads > 8 ? 8 : threads;
	for (int i = 1; i < threads; i++)
		if (pthread_create(&t[i], NULL, clock_reads, &job) != 0)
			return 2;
	int bad = clock_reads(&job) != NULL;
	for (int i = 1; i < threads; i++) {
		void *r;
		pthread_join(t[i], &r);
		bad |= r != NULL;
	}
	fflush(stdout);
	pid_t pid = fork();
	if (pid == 0) {
		struct clock_job child = {iters / 4, 400};
		int rc = clock_reads(&child) != NULL;
		fflush(stdout);
		exit(rc);
	}
	int status;
	if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status) ||
	    WEXITSTATUS(status) != 0)
		return 3;
	return bad;
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	const char *s = argc > 1 ? argv[1] : "";
	if (!strcmp(s, "pipe"))
		return do_pipe();
	if (!strcmp(s, "errno"))
		return do_errno();
	if (!strcmp(s, "fork"))
		return do_fork();
	if (!strcmp(s, "spawn"))
		return do_spawn(argv[0]);
	if (!strcmp(s, "sigkill"))
		return do_sigkill(argc > 2 ? atoi(argv[2]) : 100);
	if (!strcmp(s, "exit"))
		_exit(3);
	if (!strcmp(s, "hello")) {
		printf("hello\n");
		return 5;
	}
	if (!strcmp(s, "sem"))
		return do_sem();
	if (!strcmp(s, "many"))
		return do_many(argc > 2 ? atoi(argv[2]) : 1000);
	if (!strcmp(s, "reuse") && argc > 2)
		return do_reuse(argv[2]);
	if (!strcmp(s, "threads"))
		return do_threads(argc > 2 ? atoi(argv[2]) : 4);
	if (!strcmp(s, "stress") && argc > 4)
		return do_stress(atoi(argv[2]), atoi(argv[3]), atoi(argv[4]));
	if (!strcmp(s, "posix_spawn"))
		return do_posix_spawn(argv[0]);
	if (!strcmp(s, "clock") && argc > 3)
		return do_clock(atoi(argv[2]), atoi(argv[3]));
	fprintf(stderr, "usage: rtest pipe|errno|fork|spawn|sigkill N|exit|hello|sem|many N|reuse "
			"FILE|threads N|posix_spawn|stress P T N|clock THREADS N\n");
	return 2;
}
