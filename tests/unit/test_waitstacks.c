/*
 * test_waitstacks.c - native stacks at the longest waits (analyzer/
 * waitstacks.c): MODULE and STACK records of the training process are
 * reduced to the 5 longest waits, longest first; each wait's duration comes
 * from its wait record (not the STACK's later timestamp); waits of the
 * steady-state window rank before longer warm-up ones; module ids are
 * per process (a MODULE announced by another thread of the same process
 * counts, one announced by another process does not); frames are
 * symbolised against a real module - this test binary - with the offset
 * used as recorded.  The JSON report carries them under "stacks".
 */
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "gpu/gpu.h"
#include "model/model.h"
#include "trace/reader.h"
#include "tracegen.h"

#define MS  1000000LL
#define US  1000LL
#define T0  (1000 * MS)
#define PID 6100

static char path[] = "/tmp/dlbn-test-waitstacks-XXXXXX";

int waitstacks_probe_a(int x);
int waitstacks_probe_b(int x);
__attribute__((noinline)) int waitstacks_probe_a(int x)
{
	__asm__ volatile("" ::: "memory");
	return x * 5 + 2;
}
__attribute__((noinline)) int waitstacks_probe_b(int x)
{
	__asm__ volatile("" ::: "memory");
	return waitstacks_probe_a(x) - 1;
}

static int main_bias_cb(struct dl_phdr_info *info, size_t size, void *arg)
{
	(void)size;
	*(uintptr_t *)arg = info->dlpi_addr;
	return 1; /* the first entry is the main program */
}

static char exe[512];
static const char *exe_base;
static uintptr_t bias;

/* 7 waits of 2..8 ms (READ records), each with a STACK 50 us after its end:
 * [exe probe_a+4, exe probe_b+8, module 1 (only announced by process 1)]. */
static void write_trace(void)
{
	struct tg *g = tg_open(path, 0);
	struct tg_stream *m = tg_stream(g, 0, 0, PID, PID);
	struct tg_stream *t1 = tg_stream(g, 0, 1, PID, PID + 1);
	struct tg_stream *o = tg_stream(g, 1, 0, PID + 50, PID + 50);
	int64_t a = (int64_t)((uintptr_t)&waitstacks_probe_a - bias + 4);
	int64_t b = (int64_t)((uintptr_t)&waitstacks_probe_b - bias + 8);
	int64_t t = T0;

	tg_process(m, t, PID, 1, -1, DLBN_START_ROOT, "python3");
	tg_thread(m, t, PID, 1);
	tg_thread(t1, t + 1 * MS, PID + 1, 0);
	/* Module 0 announced by the other thread of the training process. */
	tg_rec(t1, DLBN_REC_MODULE, t + 2 * MS, "iis", (int64_t)0, (int64_t)bias, exe);
	tg_process(o, t, PID + 50, 1, -1, DLBN_START_JOIN, "other");
	tg_thread(o, t, PID + 50, 1);
	tg_rec(o, DLBN_REC_MODULE, t + 2 * MS, "iis", (int64_t)1, (int64_t)0, "/usr/lib/other.so");
	tg_exit(o, t + 3 * MS, 0, DLBN_EXIT_DTOR);
	t += 5 * MS;
	for (int i = 0; i < 30; i++) {
		/* Step 0 is warm-up: its 50 ms wait must not displace window waits. */
		int64_t wait = (i >= 10 && i < 17) ? (int64_t)(i - 8) * MS
			       : i == 0		   ? 50 * MS
						   : 1 * MS;
		tg_mark(m, t, DLBN_MARK_FETCH_BEGIN, 1, i);
		tg_read(m, t, wait, 7, DLBN_FD_PIPE, 0, 64);
		if ((i >= 10 && i < 17) || i == 0) {
			int64_t now = t + wait + 50 * US;
			int64_t frames[6] = {0, a, 0, b, 1, 0x1234};
			tg_stack(m, now, DLBN_REC_READ, now - t, frames, 6);
		}
		tg_mark(m, t + wait + 100 * US, DLBN_MARK_FETCH_END, 1, i);
		t += wait + 2 * MS;
	}
	tg_exit(m, t, 0, DLBN_EXIT_DTOR);
	if (tg_close(g) != 0)
		exit(2);
}

static void test_model(void)
{
	char err[256], want[300];
	struct dlbn_model_opts mo;
	struct dlbn_model mdl;
	struct dlbn_reader *r = dlbn_reader_open(path, err, sizeof(err));
	if (!r) {
		printf("cannot open: %s\n", err);
		exit(2);
	}
	dlbn_gpu_model_opts(&mo);
	if (dlbn_model_build(&mdl, r, &mo) != 0)
		exit(2);
	const struct dlbn_wait_stacks *ws = &mdl.stacks;
	CHECK(ws->stacks_seen == 8, "8 STACK records of the training process (got %llu)",
	      (unsigned long long)ws->stacks_seen);
	CHECK(ws->nkept == DLBN_WAIT_STACKS_KEPT, "the %d longest kept (got %zu)",
	      DLBN_WAIT_STACKS_KEPT, ws->nkept);
	int order_ok = ws->nkept == 5;
	for (size_t k = 0; order_ok && k < ws->nkept; k++)
		order_ok = ws->kept[k].wait_ns == (int64_t)(8 - k) * MS;
	CHECK(order_ok,
	      "kept waits are 8, 7, 6, 5, 4 ms (window waits before the 50 ms warm-up one), from "
	      "the wait records (first: %lld ns)",
	      ws->nkept ? (long long)ws->kept[0].wait_ns : -1LL);
	const struct dlbn_wait_stack *s = &ws->kept[0];
	CHECK(s->wait_type == DLBN_REC_READ && s->tid == PID && s->nframes == 3,
	      "stack of a READ wait on the main thread with 3 frames");
	snprintf(want, sizeof(want), "waitstacks_probe_a+0x4 (%s)", exe_base);
	CHECK(!strcmp(s->frame[0], want), "frame 0: '%s' (want '%s')", s->frame[0], want);
	snprintf(want, sizeof(want), "waitstacks_probe_b+0x8 (%s)", exe_base);
	CHECK(!strcmp(s->frame[1], want), "frame 1: '%s' (want '%s')", s->frame[1], want);
	CHECK(strstr(s->frame[2], "not announced") != NULL,
	      "frame 2: module 1 of another process does not count ('%s')", s->frame[2]);
	dlbn_model_free(&mdl);
	dlbn_reader_close(r);
}

static void test_json(void)
{
	char cmd[1024], buf[65536], want[300];
	snprintf(cmd, sizeof(cmd), "build/dlbn-analyze --format json '%s'", path);
	FILE *p = popen(cmd, "r");
	size_t n = p ? fread(buf, 1, sizeof(buf) - 1, p) : 0;
	buf[n] = 0;
	if (p)
		pclose(p);
	snprintf(want, sizeof(want), "\"stacks\":[{\"wait_ms\":8,\"at_s\":");
	CHECK(strstr(buf, want) != NULL, "JSON: stacks start with the 8 ms wait");
	CHECK(strstr(buf, "\"in_window\":true,\"call\":\"read\",\"tid\":6100,\"frames\":[") != NULL,
	      "JSON: in_window, call and tid");
	snprintf(want, sizeof(want), "\"frames\":[\"waitstacks_probe_a+0x4 (%s)\"", exe_base);
	CHECK(strstr(buf, want) != NULL, "JSON: symbolised frames");
	snprintf(cmd, sizeof(cmd), "build/dlbn-analyze '%s'", path);
	p = popen(cmd, "r");
	n = p ? fread(buf, 1, sizeof(buf) - 1, p) : 0;
	buf[n] = 0;
	if (p)
		pclose(p);
	CHECK(strstr(buf, "Longest waits (native stacks") != NULL &&
		      strstr(buf, "8.00 ms at t=") != NULL,
	      "text: the longest waits section");
}

int main(void)
{
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (n <= 0)
		return 2;
	exe[n] = 0;
	exe_base = strrchr(exe, '/') + 1;
	dl_iterate_phdr(main_bias_cb, &bias);
	int fd = mkstemp(path);
	if (fd < 0)
		return 2;
	close(fd);
	CHECK(waitstacks_probe_b(1) == 6, "probe functions are real code");
	write_trace();
	test_model();
	test_json();
	unlink(path);
	CHECK_EXIT();
}
