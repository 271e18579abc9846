/*
 * hookcost.c - ns per call of the calls libdlbn.so hooks, for `make bench`.
 *
 * tests/perf/bench/run-bench runs this program alternately without and with
 * LD_PRELOAD=libdlbn.so, pinned to one CPU.  Each figure is the median over
 * ROUNDS rounds of N calls, so one disturbed round does not move it.
 *
 * A syscall costs a few hundred ns on a virtual machine and varies by more
 * than the hook's cost from one process to the next, so the libc cases also
 * time libc's own function (found with dlsym on libc's handle, which the
 * preload does not intercept) in alternate rounds of the same process: the
 * paired difference (ordinary symbol - libc's own) is the hook's cost with
 * the preload, and the method's bias (PLT, noise) without it.
 *
 *   hookcost [N [ROUNDS]]   prints NAME_ns=X (ordinary call) and, for the
 *                           libc cases, NAME_direct_ns and NAME_paired_ns:
 *     read_ignored     read() of 1 byte from /dev/zero: an fd the recorder
 *                      classifies as uninteresting (one table lookup)
 *     read_pipe        read() of 1 byte from a pipe: a recorded READ
 *     poll_pipe        poll(timeout 0) on a pipe with data: a recorded POLL
 *     poll_pipe_wait   poll(timeout 1 s) on a pipe with data, main thread:
 *                      the DataLoader's batch-wait path (a recorded POLL
 *                      that also marks a main-thread wait and its GPU probe)
 *     munmap_ignored   munmap() of length 0 (EINVAL at once) at the
 *                      addresses of 4 KiB anonymous mappings, main thread,
 *                      while 16 batch segments of /dev/shm are mapped:
 *                      not a batch's range (loop_cost.c's bucket count
 *                      says so, nothing timed)
 *     close_ignored    close() of an fd number nothing has open (EBADF at
 *                      once): its fdtable word is 0, as a dup's is
 *     munmap_4k        munmap() of a 4 KiB anonymous mapping, the same
 *                      path with the kernel's work (reference: the
 *                      syscall's variance exceeds the hook's cost)
 *     close_dup        close() of a dup of /dev/zero (reference, likewise)
 *     clock            clock_gettime(CLOCK_MONOTONIC), not hooked: the
 *                      recorder reads this clock twice per recorded call,
 *                      so it is the floor of a recorded event's cost
 *     cu_launch        cuLaunchKernel obtained through dlopen(libcuda.so.1)
 *                      + cuGetProcAddress_v2, the CUDA runtime's way; the
 *                      simulated driver (tests/support/simcuda) must be on the
 *                      library path, otherwise the line says cu_launch_ns=nan
 *     cu_sync          cuStreamSynchronize right after an empty kernel on
 *                      the main thread, the probes set up first (a launch,
 *                      then two main-thread waits): a recorded SYNC, and the
 *                      sync drain event (gpu_probe.c) at most every 0.5 ms;
 *                      the figure is the pair minus cu_launch's
 *
 * Invariant: a case does the same work with and without the preload; only
 * the timed calls are inside the clock reads (pipe refills are outside).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#define __CUDA_API_VERSION_INTERNAL 1
#include <cuda.h>

#include <dlfcn.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/mman.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MAX_ROUNDS 256
#define PIPE_CHUNK 65536

typedef CUresult (*gpa_fn)(const char *, void **, int, cuuint64_t,
			   CUdriverProcAddressQueryResult *);
typedef CUresult (*launch_fn)(CUfunction, unsigned int, unsigned int, unsigned int, unsigned int,
			      unsigned int, unsigned int, unsigned int, CUstream, void **, void **);

/*
 * One case's round: time `n` calls, through the program's ordinary symbol
 * (the hook, when preloaded) or, with `direct`, through libc's own function
 * (dlsym on libc's handle, which the preload does not intercept).
 */
typedef double (*round_fn)(long n, int direct);

static ssize_t (*libc_read)(int, void *, size_t);
static int (*libc_munmap)(void *, size_t);
static int (*libc_close)(int);
static int (*libc_poll)(struct pollfd *, nfds_t, int);

static double now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static void die(const char *what)
{
	fprintf(stderr, "hookcost: %s failed\n", what);
	exit(2);
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

static double median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof(v[0]), cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/*
 * Prints NAME_ns (median ns per call through the ordinary symbol) and, when
 * `paired`, NAME_direct_ns and NAME_paired_ns: the median over rounds of
 * (ordinary - direct), each pair run back to back so that machine noise
 * mostly cancels.
 */
static void report(const char *name, round_fn fn, long n, int rounds, int paired)
{
	double call[MAX_ROUNDS], direct[MAX_ROUNDS], diff[MAX_ROUNDS];

	fn(n / 10 + 1, 0); /* untimed: faults in code paths and trace buffers */
	for (int r = 0; r < rounds; r++) {
		call[r] = fn(n, 0) / (double)n;
		direct[r] = paired ? fn(n, 1) / (double)n : 0;
		diff[r] = call[r] - direct[r];
	}
	printf("%s_ns=%.2f\n", name, median(call, rounds));
	if (paired) {
		printf("%s_direct_ns=%.2f\n", name, median(direct, rounds));
		printf("%s_paired_ns=%.2f\n", name, median(diff, rounds));
	}
}

static int zero_fd = -1;

static void read_one(int fd, int direct, const char *what)
{
	char c;

	if ((direct ? libc_read(fd, &c, 1) : read(fd, &c, 1)) != 1)
		die(what);
}

static double round_read_ignored(long n, int direct)
{
	double t0 = now_ns();

	for (long i = 0; i < n; i++)
		read_one(zero_fd, direct, "read /dev/zero");
	return now_ns() - t0;
}

static int data_pipe[2] = {-1, -1};

/* Reads in chunks of PIPE_CHUNK one-byte reads; refills are not timed. */
static double round_read_pipe(long n, int direct)
{
	static char buf[PIPE_CHUNK];
	double total = 0;

	for (long done = 0; done < n; done += PIPE_CHUNK) {
		long chunk = n - done < PIPE_CHUNK ? n - done : PIPE_CHUNK;

		if (write(data_pipe[1], buf, (size_t)chunk) != chunk)
			die("pipe refill");
		double t0 = now_ns();
		for (long i = 0; i < chunk; i++)
			read_one(data_pipe[0], direct, "read pipe");
		total += now_ns() - t0;
	}
	return total;
}

static int ready_pipe[2] = {-1, -1};

static double poll_ready(long n, int timeout_ms, int direct)
{
	struct pollfd pfd = {.fd = ready_pipe[0], .events = POLLIN};
	double t0 = now_ns();

	for (long i = 0; i < n; i++)
		if ((direct ? libc_poll(&pfd, 1, timeout_ms) : poll(&pfd, 1, timeout_ms)) != 1)
			die("poll pipe");
	return now_ns() - t0;
}

static double round_poll_pipe(long n, int direct)
{
	return poll_ready(n, 0, direct);
}

static double round_poll_pipe_wait(long n, int direct)
{
	return poll_ready(n, 1000, direct);
}

#define MAP_CHUNK 4096
static void *maps[MAP_CHUNK];

/* Mappings made in chunks, untimed; only the munmaps are timed. */
static double round_munmap_4k(long n, int direct)
{
	double t = 0;
	for (long done = 0; done < n;) {
		long k = n - done < MAP_CHUNK ? n - done : MAP_CHUNK;
		for (long i = 0; i < k; i++) {
			maps[i] = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
				       -1, 0);
			if (maps[i] == MAP_FAILED)
				die("mmap");
		}
		double t0 = now_ns();
		for (long i = 0; i < k; i++)
			if ((direct ? libc_munmap(maps[i], 4096) : munmap(maps[i], 4096)) != 0)
				die("munmap");
		t += now_ns() - t0;
		done += k;
	}
	return t;
}

static int fds[MAP_CHUNK];

/* dups made in chunks, untimed; only the closes are timed. */
static double round_close_dup(long n, int direct)
{
	double t = 0;
	for (long done = 0; done < n;) {
		long k = n - done < MAP_CHUNK ? n - done : MAP_CHUNK;
		for (long i = 0; i < k; i++)
			if ((fds[i] = dup(zero_fd)) < 0)
				die("dup");
		double t0 = now_ns();
		for (long i = 0; i < k; i++)
			if ((direct ? libc_close(fds[i]) : close(fds[i])) != 0)
				die("close");
		t += now_ns() - t0;
		done += k;
	}
	return t;
}

/*
 * The same ignored paths on calls the kernel refuses at once, so that the
 * syscall's own variance (a 2 us munmap varies by more than the hook costs
 * from one round to the next) does not hide the hook: munmap of length 0
 * (EINVAL) at the addresses of a chunk of 4 KiB mappings, close of fd
 * numbers nothing has open (EBADF).  The hook takes the path it takes for
 * any other ignored call: one bucket count, one fdtable word.
 */
#define CLOSED_FD_BASE 4096
static double round_munmap_ignored(long n, int direct)
{
	static void *kept[MAP_CHUNK]; /* mapped once, never unmapped */
	if (!kept[0]) {
		for (int i = 0; i < MAP_CHUNK; i++)
			if ((kept[i] = mmap(NULL, 4096, PROT_READ | PROT_WRITE,
					    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0)) == MAP_FAILED)
				die("mmap");
	}
	double t0 = now_ns();
	for (long i = 0; i < n; i++)
		if ((direct ? libc_munmap(kept[i % MAP_CHUNK], 0) : munmap(kept[i % MAP_CHUNK], 0)) !=
		    -1)
			die("munmap of length 0");
	return now_ns() - t0;
}

static double round_close_ignored(long n, int direct)
{
	double t0 = now_ns();
	for (long i = 0; i < n; i++) {
		int fd = CLOSED_FD_BASE + (int)(i % MAP_CHUNK);
		if ((direct ? libc_close(fd) : close(fd)) != -1)
			die("close of a closed fd");
	}
	return now_ns() - t0;
}

static double round_clock(long n, int direct)
{
	struct timespec ts;
	double t0 = now_ns();

	(void)direct;
	for (long i = 0; i < n; i++)
		clock_gettime(CLOCK_MONOTONIC, &ts);
	return now_ns() - t0;
}

static launch_fn launch;
static CUfunction kernel;
static CUstream stream;

/* No direct variant: the driver's own pointer is what the preload swaps. */
static double round_cu_launch(long n, int direct)
{
	(void)direct;
	double t0 = now_ns();

	for (long i = 0; i < n; i++)
		if (launch(kernel, 1, 1, 1, 32, 1, 1, 0, stream, NULL, NULL) != CUDA_SUCCESS)
			die("cuLaunchKernel");
	return now_ns() - t0;
}

static CUresult (*stream_sync)(CUstream);

/* Launch + sync pairs, minus n launches timed alone just before: the sync's
 * own cost (the pair's launch makes every sync one that waits for work). */
static double round_cu_sync(long n, int direct)
{
	(void)direct;
	double t0 = now_ns();

	for (long i = 0; i < n; i++)
		if (launch(kernel, 1, 1, 1, 32, 1, 1, 0, stream, NULL, NULL) != CUDA_SUCCESS ||
		    stream_sync(stream) != CUDA_SUCCESS)
			die("cuLaunchKernel + cuStreamSynchronize");
	double pairs = now_ns() - t0;
	return pairs - round_cu_launch(n, 0);
}

/* The probes need a main-thread wait after GPU work (their setup) and
 * another (the anchor completes): as a DataLoader loop gives them. */
static void probes_set_up(void)
{
	struct pollfd p = {.fd = ready_pipe[0], .events = POLLIN};

	if (launch(kernel, 1, 1, 1, 32, 1, 1, 0, stream, NULL, NULL) != CUDA_SUCCESS)
		die("cuLaunchKernel");
	for (int i = 0; i < 2; i++)
		if (poll(&p, 1, 1000) != 1)
			die("poll");
}

static void *driver_entry(gpa_fn gpa, const char *name)
{
	CUdriverProcAddressQueryResult st;
	void *p = NULL;

	if (gpa(name, &p, 12040, CU_GET_PROC_ADDRESS_LEGACY_STREAM, &st) != CUDA_SUCCESS || !p)
		die(name);
	return p;
}

/* The CUDA runtime's path to the driver; false when no libcuda.so.1. */
static int driver_setup(void)
{
	void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
	gpa_fn gpa;
	CUdevice dev;
	CUcontext ctx;
	CUmodule mod;

	if (!h || !(gpa = (gpa_fn)dlsym(h, "cuGetProcAddress_v2")))
		return 0;
	launch = (launch_fn)driver_entry(gpa, "cuLaunchKernel");
	stream_sync = (CUresult(*)(CUstream))driver_entry(gpa, "cuStreamSynchronize");
	if (((CUresult(*)(unsigned int))driver_entry(gpa, "cuInit"))(0) ||
	    ((CUresult(*)(CUdevice *, int))driver_entry(gpa, "cuDeviceGet"))(&dev, 0) ||
	    ((CUresult(*)(CUcontext *, CUdevice))driver_entry(gpa, "cuDevicePrimaryCtxRetain"))(
		    &ctx, dev) ||
	    ((CUresult(*)(CUcontext))driver_entry(gpa, "cuCtxSetCurrent"))(ctx) ||
	    ((CUresult(*)(CUmodule *, const void *))driver_entry(gpa, "cuModuleLoadData"))(&mod,
											   "m") ||
	    ((CUresult(*)(CUfunction *, CUmodule, const char *))driver_entry(
		    gpa, "cuModuleGetFunction"))(&kernel, mod, "sleep_0") ||
	    ((CUresult(*)(CUstream *, unsigned int))driver_entry(gpa, "cuStreamCreate"))(
		    &stream, CU_STREAM_NON_BLOCKING))
		die("simulated driver setup");
	return 1;
}

static void setup_fds(void)
{
	char c = 'x';

	zero_fd = open("/dev/zero", O_RDONLY);
	if (zero_fd < 0)
		die("open /dev/zero");
	if (pipe(data_pipe) != 0 || fcntl(data_pipe[1], F_SETPIPE_SZ, PIPE_CHUNK) < PIPE_CHUNK)
		die("data pipe");
	if (pipe(ready_pipe) != 0 || write(ready_pipe[1], &c, 1) != 1)
		die("ready pipe");
}

/*
 * A training loop always has batches in flight: a few tensors each, mapped
 * from /dev/shm segments (MAP_SHARED, through the ordinary mmap, which the
 * preload registers as batch ranges).  The munmap case runs with these
 * mapped, so that an ignored munmap pays what it pays in training.
 */
#define BATCH_SEGMENTS 16
static void map_batches(void)
{
	char name[64];

	for (int i = 0; i < BATCH_SEGMENTS; i++) {
		snprintf(name, sizeof(name), "/dlbn-hookcost-%d-%d", (int)getpid(), i);
		int fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL, 0600);
		if (fd < 0 || ftruncate(fd, 65536) != 0)
			die("shm_open");
		shm_unlink(name);
		if (mmap(NULL, 65536, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0) == MAP_FAILED)
			die("mmap of /dev/shm");
		close(fd);
	}
}

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 100000;
	int rounds = argc > 2 ? atoi(argv[2]) : 15;
	void *libc = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);

	if (n < 1 || rounds < 1 || rounds > MAX_ROUNDS) {
		fprintf(stderr, "usage: hookcost [N >= 1 [ROUNDS 1..%d]]\n", MAX_ROUNDS);
		return 2;
	}
	if (!libc || !(libc_read = (ssize_t(*)(int, void *, size_t))dlsym(libc, "read")) ||
	    !(libc_poll = (int (*)(struct pollfd *, nfds_t, int))dlsym(libc, "poll")) ||
	    !(libc_munmap = (int (*)(void *, size_t))dlsym(libc, "munmap")) ||
	    !(libc_close = (int (*)(int))dlsym(libc, "close")))
		die("finding libc's read, poll, munmap and close");
	setup_fds();
	report("read_ignored", round_read_ignored, n, rounds, 1);
	report("read_pipe", round_read_pipe, n, rounds, 1);
	report("poll_pipe", round_poll_pipe, n, rounds, 1);
	report("poll_pipe_wait", round_poll_pipe_wait, n, rounds, 1);
	map_batches();
	report("munmap_ignored", round_munmap_ignored, n, rounds, 1);
	report("close_ignored", round_close_ignored, n, rounds, 1);
	report("munmap_4k", round_munmap_4k, n, rounds, 1);
	report("close_dup", round_close_dup, n, rounds, 1);
	report("clock", round_clock, n, rounds, 0);
	if (driver_setup()) {
		report("cu_launch", round_cu_launch, n, rounds, 0);
		probes_set_up();
		report("cu_sync", round_cu_sync, n, rounds, 0);
	} else {
		printf("cu_launch_ns=nan\ncu_sync_ns=nan\n");
	}
	return 0;
}
