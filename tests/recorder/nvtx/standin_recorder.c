/*
 * standin_recorder.c - a minimal stand-in for the recorder core (recorder.h)
 * so that nvtx_inject.c and stacks.c can be tested on their own, linked
 * into build/tests/nvtx/libdlbn_standin.so.
 *
 * DLBN_STANDIN_OUT=- turns recording on but drops every record (for the
 * callback-cost benchmark).  Records go to $DLBN_STANDIN_OUT as a bare sequence of msgpack arrays
 * [type, dt, fields...] (one process, all threads interleaved under a
 * mutex; dt relative to the previous record, the first to 0).  The test
 * decoder (tests/support/pylib/dlbntrace.py) reads this as well as the real
 * trace format.
 *
 * dlbn_test_wait() plays the part of a hooked main-thread wait: it calls
 * the wait fan-out around a sleep and returns the nanoseconds spent in
 * nvtx_wait_finished + stacks_wait_finished.  dlbn_test_wait_as() reports a
 * wait of the given duration without sleeping (policy tests).
 */
#include <dlfcn.h>
#include <fcntl.h>
#include <msgpack.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "nvtx_inject.h"
#include "recorder.h"
#include "stacks.h"

int dlbn_state = DLBN_OFF;

static int out_fd = -1;
static pthread_mutex_t out_lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t prev_t;

uint64_t clock_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

void *real_dlsym(void *handle, const char *name)
{
	return dlsym(handle, name);
}

void *real_next(const char *name)
{
	return dlsym(RTLD_NEXT, name);
}

__thread struct hook_tls dlbn_hook_tls;

bool main_thread_find(void)
{
	return getpid() == gettid();
}

void recorder_fail(const char *what, int err)
{
	(void)what;
	(void)err;
	dlbn_state = DLBN_PASSIVE;
}

static void emit(uint8_t type, uint64_t t, const int64_t *fields, unsigned n, int tail,
		 const char *str, size_t len, const int64_t *list, unsigned nlist)
{
	msgpack_sbuffer sb;
	msgpack_packer pk;

	if (out_fd < 0 || !recorder_on())
		return;
	msgpack_sbuffer_init(&sb);
	msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
	pthread_mutex_lock(&out_lock);
	msgpack_pack_array(&pk, 2 + n + (tail ? 1 : 0));
	msgpack_pack_uint8(&pk, type);
	msgpack_pack_int64(&pk, prev_t ? (int64_t)(t - prev_t) : 0);
	prev_t = t;
	for (unsigned i = 0; i < n; i++)
		msgpack_pack_int64(&pk, fields[i]);
	if (tail == 1) {
		if (str) {
			msgpack_pack_str(&pk, len);
			msgpack_pack_str_body(&pk, str, len);
		} else {
			msgpack_pack_nil(&pk);
		}
	} else if (tail == 2) {
		msgpack_pack_array(&pk, nlist);
		for (unsigned i = 0; i < nlist; i++)
			msgpack_pack_int64(&pk, list[i]);
	}
	if (write(out_fd, sb.data, sb.size) != (ssize_t)sb.size)
		dlbn_state = DLBN_PASSIVE;
	pthread_mutex_unlock(&out_lock);
	msgpack_sbuffer_destroy(&sb);
}

void rec_emit(uint8_t type, uint64_t t_ns, const int64_t *fields, unsigned n)
{
	emit(type, t_ns, fields, n, 0, NULL, 0, NULL, 0);
}

void rec_emit_str(uint8_t type, uint64_t t_ns, const int64_t *fields, unsigned n, const char *str,
		  size_t len)
{
	emit(type, t_ns, fields, n, 1, str, len, NULL, 0);
}

void rec_emit_list(uint8_t type, uint64_t t_ns, const int64_t *fields, unsigned n,
		   const int64_t *list, unsigned nlist)
{
	emit(type, t_ns, fields, n, 2, NULL, 0, list, nlist);
}

/* The bare stream is read as 1.x: a STACK's whole frame list. */
void rec_emit_stack(uint64_t t_ns, const int64_t *fields, unsigned n, const int64_t *frames,
		    unsigned nframes)
{
	emit(DLBN_REC_STACK, t_ns, fields, n, 2, NULL, 0, frames, nframes);
}

__attribute__((constructor)) static void standin_init(void)
{
	const char *path = getenv("DLBN_STANDIN_OUT");

	if (!path)
		return;
	if (strcmp(path, "-") == 0) { /* record nothing: measures callback cost */
		dlbn_state = DLBN_ON;
		nvtx_setup();
		return;
	}
	out_fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
	if (out_fd < 0)
		return;
	dlbn_state = DLBN_ON;
	nvtx_setup();
}

uint64_t dlbn_test_wait(uint8_t rec_type, uint64_t dur_ns) DLBN_EXPORT;
uint64_t dlbn_test_wait(uint8_t rec_type, uint64_t dur_ns)
{
	struct timespec ts = {(time_t)(dur_ns / 1000000000u), (long)(dur_ns % 1000000000u)};
	uint64_t t0 = clock_now_ns(), t1, t2;

	hook_enter();
	nvtx_wait_begins(t0);
	hook_leave();
	nanosleep(&ts, NULL);
	t1 = clock_now_ns();
	hook_enter();
	nvtx_wait_finished(rec_type, t0, t1 - t0);
	stacks_wait_finished(rec_type, t0, t1 - t0);
	hook_leave();
	t2 = clock_now_ns();
	return t2 - t1;
}

void dlbn_test_wait_as(uint8_t rec_type, uint64_t dur_ns) DLBN_EXPORT;
void dlbn_test_wait_as(uint8_t rec_type, uint64_t dur_ns)
{
	uint64_t t1 = clock_now_ns();

	hook_enter();
	stacks_wait_finished(rec_type, t1 - dur_ns, dur_ns);
	hook_leave();
}
