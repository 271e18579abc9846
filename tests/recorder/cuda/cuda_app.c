/*
 * cuda_app.c - a small GPU application for tests/recorder/cuda/test_cuda.py.
 *
 *   cuda_app LIBSIMRT basic   launches, copies, events and syncs; prints
 *                             what it saw (return codes, stream handles,
 *                             event timings) as key=value lines so a run
 *                             with and without the preload can be compared
 *   cuda_app LIBSIMRT thread [WAIT_MS]
 *                             CUDA from a second thread only (launch of a
 *                             20 ms kernel), then a main-thread pipe wait:
 *                             the main thread has no current context
 *   cuda_app LIBSIMRT threads [WAIT_MS]
 *                             4 threads launch 5000 kernels each on their
 *                             own streams, then a main-thread pipe wait
 *   cuda_app LIBSIMRT destroyed [WAIT_MS]
 *                             work on a stream that is destroyed before the
 *                             wait, then a wait after work on a live stream
 *   cuda_app LIBSIMRT copies  the simulated driver's copies: an async copy
 *                             from pinned memory leaves the calling thread
 *                             before its bytes move, a pageable one after;
 *                             a copy back sees the bytes either way
 *   cuda_app LIBSIMRT probe KERNEL_US WAIT_MS [WAIT2_MS]
 *                             launch one KERNEL_US kernel, then block on the
 *                             main thread in a pipe read until a child writes
 *                             after WAIT_MS (and again after WAIT2_MS more)
 *
 * LIBSIMRT is build/tests/simcuda/libsimrt.so (dlopen + cuGetProcAddress_v2,
 * the runtime's way) or libsimrt_direct.so (linked to libcuda.so.1).  It is
 * dlopen()ed RTLD_LOCAL, so libcuda.so.1 is never in the global scope: the
 * preload must find it through the handles the application uses.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static struct {
	int (*init)(void);
	int (*thread_attach)(void);
	const char *(*reach)(void);
	int (*stream_create)(int, uint64_t *);
	int (*stream_destroy)(uint64_t);
	int (*launch)(uint64_t, unsigned int);
	int (*launch_ex)(uint64_t, unsigned int);
	int (*graph_launch)(uint64_t, unsigned int, unsigned int);
	int (*htod)(uint64_t, size_t, int, int);
	int (*dtoh)(uint64_t, size_t, int, int);
	int (*stream_sync)(uint64_t);
	int (*ctx_sync)(void);
	int (*event_record)(uint64_t, uint64_t *);
	int (*event_sync)(uint64_t);
	int (*event_elapsed)(uint64_t, uint64_t, float *);
	int (*stream_wait_event)(uint64_t, uint64_t);
} rt;

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void load(const char *path)
{
	void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);

	if (!h) {
		fprintf(stderr, "cuda_app: %s\n", dlerror());
		exit(2);
	}
#define SYM(field, name)                                                                           \
	do {                                                                                       \
		*(void **)&rt.field = dlsym(h, name);                                              \
		if (!rt.field) {                                                                   \
			fprintf(stderr, "cuda_app: %s missing\n", name);                           \
			exit(2);                                                                   \
		}                                                                                  \
	} while (0)
	SYM(init, "simrt_init");
	SYM(thread_attach, "simrt_thread_attach");
	SYM(reach, "simrt_reach");
	SYM(stream_create, "simrt_stream_create");
	SYM(stream_destroy, "simrt_stream_destroy");
	SYM(launch, "simrt_launch_sleep_us");
	SYM(launch_ex, "simrt_launch_ex_sleep_us");
	SYM(graph_launch, "simrt_graph_launch_sleep_us");
	SYM(htod, "simrt_memcpy_htod");
	SYM(dtoh, "simrt_memcpy_dtoh");
	SYM(stream_sync, "simrt_stream_sync");
	SYM(ctx_sync, "simrt_ctx_sync");
	SYM(event_record, "simrt_event_record");
	SYM(event_sync, "simrt_event_sync");
	SYM(event_elapsed, "simrt_event_elapsed_ms");
	SYM(stream_wait_event, "simrt_stream_wait_event");
#undef SYM
}

#define CHECK(name, call)                                                                          \
	do {                                                                                       \
		int rc_ = (call);                                                                  \
		printf("rc_%s=%d\n", name, rc_);                                                   \
		if (rc_ != 0)                                                                      \
			failures++;                                                                \
	} while (0)

static int basic(void)
{
	uint64_t s = 0, s2 = 0, e1 = 0, e2 = 0, e3 = 0;
	float ms = -1, ms_wait = -1;
	int failures = 0;

	CHECK("init", rt.init());
	CHECK("stream", rt.stream_create(0, &s));
	CHECK("stream2", rt.stream_create(1, &s2));
	printf("stream=%llu\nstream2=%llu\n", (unsigned long long)s, (unsigned long long)s2);
	/* 5 ms between two events on s: the app's own measurement.  A 100 ms
	 * kernel first, so what follows is queued behind it and its GPU
	 * timing does not depend on how fast this (possibly loaded) host
	 * issues the calls. */
	CHECK("launch_head", rt.launch(s, 100000));
	CHECK("event1", rt.event_record(s, &e1));
	CHECK("launch", rt.launch(s, 2000));
	CHECK("launch_ex", rt.launch_ex(s, 3000));
	CHECK("event2", rt.event_record(s, &e2));
	CHECK("launch_default", rt.launch(0, 1000));
	/* s2 waits for e2, then runs 1 ms: done >= 6 ms after e1. */
	CHECK("wait_event", rt.stream_wait_event(s2, e2));
	CHECK("launch_s2", rt.launch(s2, 1000));
	CHECK("event3", rt.event_record(s2, &e3));
	CHECK("graph_launch", rt.graph_launch(s, 500, 2));
	CHECK("htod_pinned_async", rt.htod(s, 1 << 20, 1, 1));
	CHECK("htod_pageable_async", rt.htod(s, 1 << 20, 0, 1));
	CHECK("htod_pageable_sync", rt.htod(0, 1 << 20, 0, 0));
	CHECK("dtoh_pinned_sync", rt.dtoh(0, 1 << 20, 1, 0));
	CHECK("stream_sync", rt.stream_sync(s));
	CHECK("event_sync", rt.event_sync(e3));
	CHECK("ctx_sync", rt.ctx_sync());
	CHECK("elapsed", rt.event_elapsed(e1, e2, &ms));
	CHECK("elapsed_wait", rt.event_elapsed(e1, e3, &ms_wait));
	printf("elapsed_ms=%.3f\nelapsed_wait_ms=%.3f\n", ms, ms_wait);
	printf("reach=%s\nfailures=%d\n", rt.reach(), failures);
	return failures ? 1 : 0;
}

/* A child writes one byte into the pipe after each delay. */
static pid_t start_writer(int fd, int ms1, int ms2)
{
	pid_t pid = fork();

	if (pid == 0) {
		struct timespec d1 = {ms1 / 1000, (ms1 % 1000) * 1000000L};
		struct timespec d2 = {ms2 / 1000, (ms2 % 1000) * 1000000L};

		nanosleep(&d1, NULL);
		if (write(fd, "x", 1) != 1)
			_exit(1);
		if (ms2 > 0) {
			nanosleep(&d2, NULL);
			if (write(fd, "y", 1) != 1)
				_exit(1);
		}
		_exit(0);
	}
	return pid;
}

static int probe(unsigned int kernel_us, int wait_ms, int wait2_ms)
{
	uint64_t s = 0, t_launch, t_read;
	int fds[2], status = 0;
	char c;
	pid_t child;

	if (rt.init() || rt.stream_create(0, &s) || pipe(fds))
		return 1;
	child = start_writer(fds[1], wait_ms, wait2_ms);
	t_launch = now_ns();
	if (rt.launch(s, kernel_us))
		return 1;
	t_read = now_ns();
	if (read(fds[0], &c, 1) != 1)
		return 1;
	if (wait2_ms > 0 && read(fds[0], &c, 1) != 1)
		return 1;
	waitpid(child, &status, 0);
	printf("stream=%llu\nlaunch_ns=%llu\nread_ns=%llu\nend_ns=%llu\n", (unsigned long long)s,
	       (unsigned long long)t_launch, (unsigned long long)t_read,
	       (unsigned long long)now_ns());
	return rt.stream_sync(s) ? 1 : 0;
}

/* CUDA used from a second thread only: the main thread has no context. */
static void *gpu_thread(void *arg)
{
	uint64_t s;

	(void)arg;
	if (rt.init() || rt.stream_create(0, &s) || rt.launch(s, 20000))
		return (void *)1;
	return NULL;
}

static int thread_only(int wait_ms)
{
	pthread_t th;
	void *ret = (void *)1;
	int fds[2], status = 0;
	char c;
	pid_t child;

	if (pthread_create(&th, NULL, gpu_thread, NULL) || pthread_join(th, &ret) || ret)
		return 1;
	if (pipe(fds))
		return 1;
	child = start_writer(fds[1], wait_ms, 0);
	if (read(fds[0], &c, 1) != 1)
		return 1;
	waitpid(child, &status, 0);
	printf("done=1\n");
	return 0;
}

/* Many threads launching at once on their own streams (lock-free table). */
#define LAUNCH_THREADS	    4
#define LAUNCHES_PER_THREAD 5000

static void *launcher(void *arg)
{
	uint64_t *stream = arg;

	if (rt.thread_attach())
		return (void *)1;
	for (int i = 0; i < LAUNCHES_PER_THREAD; i++)
		if (rt.launch(*stream, 1))
			return (void *)1;
	return NULL;
}

static int many_threads(int wait_ms)
{
	pthread_t th[LAUNCH_THREADS];
	uint64_t streams[LAUNCH_THREADS];
	int fds[2], status = 0, bad = 0;
	char c;
	pid_t child;

	if (rt.init())
		return 1;
	for (int i = 0; i < LAUNCH_THREADS; i++)
		if (rt.stream_create(1, &streams[i]))
			return 1;
	for (int i = 0; i < LAUNCH_THREADS; i++)
		if (pthread_create(&th[i], NULL, launcher, &streams[i]))
			return 1;
	for (int i = 0; i < LAUNCH_THREADS; i++) {
		void *ret = NULL;

		pthread_join(th[i], &ret);
		bad |= ret != NULL;
		printf("stream%d=%llu\n", i, (unsigned long long)streams[i]);
	}
	if (bad || pipe(fds))
		return 1;
	child = start_writer(fds[1], wait_ms, 0);
	if (read(fds[0], &c, 1) != 1)
		return 1;
	waitpid(child, &status, 0);
	printf("launches=%d\n", LAUNCH_THREADS * LAUNCHES_PER_THREAD);
	return 0;
}

/*
 * A stream that received work is destroyed before the wait (its probe
 * cannot be recorded), then a second round on a live stream: the recorder
 * must skip the dead one and keep probing.
 */
static int destroyed_stream(int wait_ms)
{
	uint64_t dead, live;
	int fds[2], status = 0;
	char c;
	pid_t child;

	if (rt.init() || rt.stream_create(0, &dead) || rt.stream_create(0, &live) || pipe(fds))
		return 1;
	child = start_writer(fds[1], wait_ms, wait_ms);
	if (rt.launch(dead, 1000) || rt.stream_sync(dead) || rt.stream_destroy(dead))
		return 1;
	if (read(fds[0], &c, 1) != 1 || rt.launch(live, 10000) || read(fds[0], &c, 1) != 1)
		return 1;
	waitpid(child, &status, 0);
	printf("dead=%llu\nlive=%llu\n", (unsigned long long)dead, (unsigned long long)live);
	return rt.stream_sync(live) ? 1 : 0;
}

/* The driver's own entry points (libsimrt made the context current). */
static int copies(void)
{
	typedef int (*alloc_fn)(uint64_t *, size_t);
	typedef int (*alloc_host_fn)(void **, size_t);
	typedef int (*htod_async_fn)(uint64_t, const void *, size_t, void *);
	typedef int (*dtoh_fn)(void *, uint64_t, size_t);
	enum { N = 1 << 20 };
	void *cuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
	if (!cuda || rt.init())
		return 1;
	alloc_fn mem_alloc = (alloc_fn)dlsym(cuda, "cuMemAlloc_v2");
	alloc_host_fn alloc_host = (alloc_host_fn)dlsym(cuda, "cuMemAllocHost_v2");
	htod_async_fn htod_async = (htod_async_fn)dlsym(cuda, "cuMemcpyHtoDAsync_v2");
	dtoh_fn dtoh = (dtoh_fn)dlsym(cuda, "cuMemcpyDtoH_v2");
	uint64_t dev_pinned = 0, dev_pageable = 0;
	void *pinned = NULL;
	unsigned char *pageable = malloc(N), *back = malloc(N);
	if (!mem_alloc || !alloc_host || !htod_async || !dtoh || !pageable || !back ||
	    mem_alloc(&dev_pinned, N) || mem_alloc(&dev_pageable, N) || alloc_host(&pinned, N))
		return 1;
	/* The simulator's device memory is host memory: peek at it. */
	unsigned char *seen_pinned = (void *)(uintptr_t)dev_pinned;
	unsigned char *seen_pageable = (void *)(uintptr_t)dev_pageable;
	memset(pinned, 0xa5, N);
	memset(pageable, 0x5a, N);
	memset(seen_pinned, 0, N);
	memset(seen_pageable, 0, N);
	if (htod_async(dev_pinned, pinned, N, NULL))
		return 1;
	printf("pinned_moved_in_call=%d\n", seen_pinned[N - 1] == 0xa5);
	if (htod_async(dev_pageable, pageable, N, NULL))
		return 1;
	printf("pageable_moved_in_call=%d\n", seen_pageable[N - 1] == 0x5a);
	if (dtoh(back, dev_pinned, N))
		return 1;
	printf("pinned_read_back=%d\n", back[0] == 0xa5 && back[N - 1] == 0xa5);
	if (dtoh(back, dev_pageable, N))
		return 1;
	printf("pageable_read_back=%d\n", back[0] == 0x5a && back[N - 1] == 0x5a);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: cuda_app LIBSIMRT basic|copies|thread[s]|destroyed [MS]|probe "
				"KERNEL_US WAIT_MS [WAIT2_MS]\n");
		return 2;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	load(argv[1]);
	if (strcmp(argv[2], "basic") == 0)
		return basic();
	if (strcmp(argv[2], "destroyed") == 0)
		return destroyed_stream(argc > 3 ? atoi(argv[3]) : 50);
	if (strcmp(argv[2], "threads") == 0)
		return many_threads(argc > 3 ? atoi(argv[3]) : 50);
	if (strcmp(argv[2], "thread") == 0)
		return thread_only(argc > 3 ? atoi(argv[3]) : 50);
	if (strcmp(argv[2], "copies") == 0)
		return copies();
	if (strcmp(argv[2], "probe") == 0 && argc >= 5)
		return probe((unsigned int)atoi(argv[3]), atoi(argv[4]),
			     argc > 5 ? atoi(argv[5]) : 0);
	fprintf(stderr, "cuda_app: bad arguments\n");
	return 2;
}
