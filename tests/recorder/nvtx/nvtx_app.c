/*
 * nvtx_app.c - an ordinary NVTX v3 client (header-only implementation, not
 * NVTX_NO_IMPL) for tests/recorder/nvtx/test_nvtx.py.
 *
 *   nvtx_app ranges   the fixed script below, then one loader-like wait
 *   nvtx_app bench N  N push/pop pairs; prints "ns_per_pair <x>"
 *   nvtx_app fork     a registered string and domain used before and after
 *                     fork() (the child must re-announce them)
 * Every mode ends by printing "injection=<NVTX_INJECTION64_PATH or (unset)>".
 *
 * The wait is dlbn_test_wait() when the stand-in recorder provides it,
 * otherwise a real main-thread poll() on a pipe that a thread fills after
 * 20 ms (what libdlbn.so's hooks see as a possible batch wait).
 */
#include <dlfcn.h>
#include <nvtx3/nvToolsExt.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <wchar.h>

void nvtx_lib_a(void);
void nvtx_lib_b(void);

typedef uint64_t (*test_wait_fn)(uint8_t rec_type, uint64_t dur_ns);

static int wait_pipe[2];

static void *late_writer(void *arg)
{
	struct timespec ts = {0, 20 * 1000 * 1000};
	(void)arg;
	nanosleep(&ts, NULL);
	if (write(wait_pipe[1], "x", 1) != 1)
		perror("write");
	return NULL;
}

static void loader_like_wait(void)
{
	test_wait_fn test_wait = (test_wait_fn)dlsym(RTLD_DEFAULT, "dlbn_test_wait");
	pthread_t th;
	struct pollfd p;
	char c;

	if (test_wait) {
		test_wait(15 /* DLBN_REC_POLL */, 20 * 1000 * 1000);
		return;
	}
	if (pipe(wait_pipe) != 0 || pthread_create(&th, NULL, late_writer, NULL) != 0) {
		perror("wait setup");
		exit(2);
	}
	p.fd = wait_pipe[0];
	p.events = POLLIN;
	poll(&p, 1, 5000);
	if (read(wait_pipe[0], &c, 1) != 1)
		perror("read");
	pthread_join(th, NULL);
}

static void *thread_ranges(void *arg)
{
	(void)arg;
	nvtxRangePushA("thread_outer");
	nvtxRangePushA("thread_inner");
	nvtxRangePop();
	nvtxRangePop();
	return NULL;
}

static void script(void)
{
	char longmsg[301];
	pthread_t th;

	nvtxRangePushA("outer");
	nvtxRangePushA("inner");
	nvtxMarkA("mark1");
	nvtxRangePop();
	nvtxRangePop();

	nvtxDomainHandle_t d = nvtxDomainCreateA("mydomain");
	nvtxStringHandle_t step = nvtxDomainRegisterStringA(d, "step");
	nvtxEventAttributes_t a = {0};
	a.version = NVTX_VERSION;
	a.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
	a.messageType = NVTX_MESSAGE_TYPE_REGISTERED;
	a.message.registered = step;
	for (int i = 0; i < 3; i++) {
		nvtxDomainRangePushEx(d, &a);
		nvtxDomainRangePop(d);
	}
	a.messageType = NVTX_MESSAGE_TYPE_ASCII;
	a.message.ascii = "data";
	nvtxRangeId_t r = nvtxDomainRangeStartEx(d, &a);
	nvtxDomainMarkEx(d, &a);
	nvtxDomainRangeEnd(d, r);
	nvtxRangeId_t r2 = nvtxRangeStartA("plain_start");
	nvtxRangeEnd(r2);

	nvtxDomainHandle_t wd = nvtxDomainCreateW(L"wdomain");
	a.messageType = NVTX_MESSAGE_TYPE_REGISTERED;
	a.message.registered = nvtxDomainRegisterStringW(wd, L"wstr \u00fc");
	nvtxDomainMarkEx(wd, &a);
	a.messageType = NVTX_MESSAGE_TYPE_UNICODE;
	a.message.unicode = L"wmark";
	nvtxMarkEx(&a);
	nvtxMarkW(L"wmark2");
	nvtxRangePushW(L"wide \u00e9\u2713");
	nvtxRangePop();
	memset(longmsg, 'L', 300);
	longmsg[300] = '\0';
	nvtxRangePushA(longmsg);
	nvtxRangePop();

	nvtx_lib_a();
	nvtx_lib_b();

	if (pthread_create(&th, NULL, thread_ranges, NULL) == 0)
		pthread_join(th, NULL);
	loader_like_wait();
}

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void fork_script(void)
{
	nvtxDomainHandle_t d = nvtxDomainCreateA("forkdomain");
	nvtxEventAttributes_t a = {0};
	int status;

	a.version = NVTX_VERSION;
	a.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
	a.messageType = NVTX_MESSAGE_TYPE_REGISTERED;
	a.message.registered = nvtxDomainRegisterStringA(d, "forkstr");
	nvtxDomainRangePushEx(d, &a);
	nvtxDomainRangePop(d);
	pid_t pid = fork();
	if (pid == 0) {
		nvtxDomainRangePushEx(d, &a);
		nvtxDomainRangePop(d);
		_exit(0);
	}
	waitpid(pid, &status, 0);
}

static void print_injection(void)
{
	const char *p = getenv("NVTX_INJECTION64_PATH");
	printf("injection=%s\n", p ? p : "(unset)");
}

int main(int argc, char **argv)
{
	if (argc >= 3 && strcmp(argv[1], "bench") == 0) {
		long n = atol(argv[2]);
		nvtxRangePushA("warm");
		nvtxRangePop();
		uint64_t t0 = now_ns();
		for (long i = 0; i < n; i++) {
			nvtxRangePushA("bench");
			nvtxRangePop();
		}
		printf("ns_per_pair %.1f\n", (double)(now_ns() - t0) / (double)n);
		print_injection();
		return 0;
	}
	if (argc >= 2 && strcmp(argv[1], "fork") == 0) {
		fork_script();
		print_injection();
		return 0;
	}
	script();
	print_injection();
	printf("nvtx_app done\n");
	return 0;
}
