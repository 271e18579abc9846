/*
 * thread_census.c - every thread of the training process, sampled from the
 * loop's own thread.
 *
 * The hooks see the threads that call them: the loop, the pin-memory
 * thread, the workers.  The threads that do the model's work on the CPU
 * (the intra-op pool of OpenMP or MKL, torch's inter-op pool) call no hook
 * at all, yet they are what a loader's workers slow down when both share
 * too few cores: they queue for a CPU, and a fork-join region waits for
 * its slowest thread (spinning, with OpenMP's default wait policy).  The
 * analyzer needs their run and run-queue time in the window to predict
 * the loop without the loader (analyzer/analysis/shared_cores.c).
 *
 * So, at most every CENSUS_PERIOD_NS, at a batch's arrival (a FETCH_END
 * mark of the main thread), and then again at the next fetch begin, the
 * main thread lists /proc/self/task and emits one TASK record per other
 * thread: tid, schedstat run and run-queue time, time slices, and the
 * thread's name with its first sample.  The two censuses bound one loop
 * period exactly (arrival to next fetch), so the analyzer learns how the
 * model's threads ran and queued while the loop worked, apart from the
 * waits, where an OpenMP thread spins on or sleeps.  Cost: one getdents64
 * and three syscalls per thread, at most CENSUS_MAX_THREADS of them, twice
 * every 100 ms: tens of microseconds per census on the 10-20 threads of a
 * training process.
 *
 * Main thread only (no locking).  The directory fd names the process that
 * opened it, so a forked child drops it (thread_census_fork_child).
 */
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "recorder.h"
#include "thread_census.h"

#define CENSUS_PERIOD_NS   100000000u
#define CENSUS_MAX_THREADS 64

static int task_dir_fd = -1;
static pid_t task_dir_pid;
static uint64_t last_census_ns;
/* A census was taken at a batch's arrival: the next fetch begin takes the
 * one that closes the loop period. */
static int period_open;
/* Threads whose name was recorded (with their first sample). */
static pid_t named[CENSUS_MAX_THREADS];
static unsigned nnamed;

struct linux_dirent64 {
	uint64_t d_ino;
	int64_t d_off;
	unsigned short d_reclen;
	unsigned char d_type;
	char d_name[];
};

static int was_named(pid_t tid)
{
	for (unsigned i = 0; i < nnamed; i++)
		if (named[i] == tid)
			return 1;
	if (nnamed < CENSUS_MAX_THREADS)
		named[nnamed++] = tid;
	return 0;
}

static void sample_thread(const char *name, pid_t tid, uint64_t now_ns)
{
	char path[48], buf[96];
	size_t len = strnlen(name, 24);
	memcpy(path, name, len);
	memcpy(path + len, "/schedstat", sizeof("/schedstat"));
	if (read_small_file_at(task_dir_fd, path, buf, sizeof(buf)) <= 0)
		return; /* the thread ended meanwhile */
	char *end;
	int64_t f[4];
	f[0] = tid;
	f[1] = (int64_t)strtoull(buf, &end, 10);
	f[2] = (int64_t)strtoull(end, &end, 10);
	f[3] = (int64_t)strtoull(end, NULL, 10);
	if (was_named(tid)) {
		rec_emit(DLBN_REC_TASK, now_ns, f, 4);
		return;
	}
	memcpy(path + len, "/comm", sizeof("/comm"));
	ssize_t n = read_small_file_at(task_dir_fd, path, buf, sizeof(buf));
	while (n > 0 && buf[n - 1] == '\n')
		n--;
	rec_emit_str(DLBN_REC_TASK, now_ns, f, 4, buf, n > 0 ? (size_t)n : 0);
}

static void census_take(uint64_t now_ns)
{
	last_census_ns = now_ns;
	pid_t pid = (pid_t)syscall(SYS_getpid);
	if (task_dir_fd < 0 || task_dir_pid != pid) {
		task_dir_fd = (int)syscall(SYS_openat, AT_FDCWD, "/proc/self/task",
					   O_RDONLY | O_DIRECTORY | O_CLOEXEC, 0);
		task_dir_pid = pid;
	}
	if (task_dir_fd < 0 || syscall(SYS_lseek, task_dir_fd, 0, SEEK_SET) != 0)
		return;
	/* 8 KiB of entries: ~300 threads; the census stops at its cap first. */
	long buf[1024];
	unsigned sampled = 0;
	long n;
	while (sampled < CENSUS_MAX_THREADS &&
	       (n = syscall(SYS_getdents64, task_dir_fd, buf, sizeof(buf))) > 0) {
		for (long off = 0; off < n && sampled < CENSUS_MAX_THREADS;) {
			const struct linux_dirent64 *d =
				(const struct linux_dirent64 *)((const char *)buf + off);
			off += d->d_reclen;
			pid_t tid = (pid_t)strtol(d->d_name, NULL, 10);
			if (tid <= 0 || tid == pid)
				continue; /* ".", "..", and the loop's thread (its marks) */
			sample_thread(d->d_name, tid, now_ns);
			sampled++;
		}
	}
}

void thread_census_arrival(uint64_t now_ns)
{
	if (now_ns - last_census_ns < CENSUS_PERIOD_NS)
		return;
	census_take(now_ns);
	period_open = 1;
}

void thread_census_fetch_begin(uint64_t now_ns)
{
	if (!period_open)
		return;
	period_open = 0;
	census_take(now_ns);
}

void thread_census_fork_child(void)
{
	period_open = 0;
	if (task_dir_fd >= 0)
		syscall(SYS_close, task_dir_fd);
	task_dir_fd = -1;
	last_census_ns = 0;
	nnamed = 0;
}
