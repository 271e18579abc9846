/*
 * recorder.h - what a hook module of libdlbn.so needs from the recorder core.
 *
 * The core (recorder.c, trace_writer.c, clock.c, real.c) owns the process's
 * trace session, the per-thread streams and the clock.  Hook modules
 * (hooks_*.c, cuda_*.c, nvtx_*.c, stacks.c) turn intercepted calls into
 * records through the functions below and nothing else.
 *
 * Rules every caller keeps (docs/DESIGN.md, "Recorder"):
 *   - On the fast path: no malloc, no stdio, no locks, no dlsym.
 *   - errno seen by the application is the one the real call left.
 *   - Everything here is a no-op while the recorder is off or passive, and
 *     while the calling thread is already inside the recorder (a signal
 *     handler that calls a hooked function, or the recorder's own calls).
 */
#ifndef DLBN_RECORDER_H
#define DLBN_RECORDER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "dlbn/dlbn_trace.h"

#define DLBN_HIDDEN	 __attribute__((visibility("hidden")))
#define DLBN_EXPORT	 __attribute__((visibility("default")))
#define DLBN_LIKELY(x)	 __builtin_expect(!!(x), 1)
#define DLBN_UNLIKELY(x) __builtin_expect(!!(x), 0)

/* Recorder state: DLBN_OFF until the constructor decides, then ON or
 * PASSIVE (failed once; never records again in this process). */
enum dlbn_state { DLBN_OFF = 0, DLBN_ON = 1, DLBN_PASSIVE = 2 };
extern int dlbn_state DLBN_HIDDEN;

static inline bool recorder_on(void)
{
	return DLBN_LIKELY(__atomic_load_n(&dlbn_state, __ATOMIC_RELAXED) == DLBN_ON);
}

/* CLOCK_MONOTONIC in nanoseconds: from the TSC where the kernel keeps time
 * with it (within a microsecond, see clock.c), else clock_gettime (vDSO). */
uint64_t clock_now_ns(void) DLBN_HIDDEN;
/* Reads the environment and the clock source; constructor only. */
void clock_init(void) DLBN_HIDDEN;
/* 1 while readings come from the TSC; the largest correction an anchor
 * needed so far, ns (the EXIT record's clock fields). */
int clock_uses_tsc(void) DLBN_HIDDEN;
uint64_t clock_max_drift_ns(void) DLBN_HIDDEN;

/*
 * The next symbol after libdlbn.so, like dlsym(RTLD_NEXT, name), but through
 * the real dlsym even though libdlbn.so interposes dlsym.  Constructors only.
 */
void *real_next(const char *name) DLBN_HIDDEN;
/* The real dlsym / dlvsym (never the interposed ones). */
void *real_dlsym(void *handle, const char *name) DLBN_HIDDEN;

/*
 * Emit one record [type, t_ns - previous, fields...] into the calling
 * thread's stream.  Integers are packed as the smallest msgpack int.
 * `str` (may be NULL with len 0 for msgpack nil) is appended as the last
 * field by rec_emit_str; `list` as a trailing msgpack array by
 * rec_emit_list.  Never blocks for long, never allocates with malloc.
 */
void rec_emit(uint8_t type, uint64_t t_ns, const int64_t *fields, unsigned n) DLBN_HIDDEN;
void rec_emit_str(uint8_t type, uint64_t t_ns, const int64_t *fields, unsigned n, const char *str,
		  size_t len) DLBN_HIDDEN;
/*
 * A record that names fd (READ, WRITE, PREAD, RECVMSG, SENDMSG:
 * fields without fd_kind and ino), after an FD record that says what fd is
 * unless this extent already has it (dlbn_trace.h, "Fd announcements").
 */
void rec_emit_fd(uint8_t type, uint64_t t_ns, int fd, unsigned kind, int64_t ino,
		 const int64_t *fields, unsigned n) DLBN_HIDDEN;
/* A SEM_WAIT or SEM_POST whose fields[sem_at] is the semaphore's address:
 * written as its slot, after a SEM record unless the extent has one for
 * that address (dlbn_trace.h, "Fd announcements"); fields[sem_at] is
 * overwritten. */
void rec_emit_sem(uint8_t type, uint64_t t_ns, int64_t *fields, unsigned n,
		  unsigned sem_at) DLBN_HIDDEN;
/* An OPEN record [fd, kind, ino, flags, path], which announces fd as well;
 * written with what it shares with the extent's previous OPEN left out. */
void rec_emit_open(uint64_t t_ns, int fd, unsigned kind, int64_t ino, int64_t flags,
		   const char *path, size_t len) DLBN_HIDDEN;
void rec_emit_list(uint8_t type, uint64_t t_ns, const int64_t *fields, unsigned n,
		   const int64_t *list, unsigned nlist) DLBN_HIDDEN;
/* A MARK [kind, iter_id, arg] or, n = 3 + DLBN_MARK_COUNTERS, with the
 * loop's cumulative counters, which are written as differences from the
 * extent's previous MARK with counters (dlbn_trace.h, MARK). */
void rec_emit_mark(uint64_t t_ns, const int64_t *fields, unsigned n) DLBN_HIDDEN;
/* A STACK [fields..., [frames...]], its frame list written without the
 * end it shares with the extent's previous STACK's (dlbn_trace.h, STACK). */
void rec_emit_stack(uint64_t t_ns, const int64_t *fields, unsigned n, const int64_t *frames,
		    unsigned nframes) DLBN_HIDDEN;

/*
 * The calling thread's hook state (recorder.c), inline because every
 * recorded call reads it: the reentrancy flag, whether this is the
 * process's initial thread (0 not yet known, 1 yes, 2 no), and when it last
 * sampled its schedstat.  A fork child's only thread resets it
 * (recorder.c, atfork_child), so no answer outlives its process.
 */
struct hook_tls {
	int in_hook;
	int main_thread;
	uint64_t last_sched_ns;
};
extern __thread struct hook_tls dlbn_hook_tls DLBN_HIDDEN;

/*
 * Reentrancy guard.  A hook that records calls hook_enter() first and skips
 * recording when it returns false; it calls hook_leave() when done.
 */
static inline bool hook_enter(void)
{
	if (dlbn_hook_tls.in_hook)
		return false;
	dlbn_hook_tls.in_hook = 1;
	return true;
}

static inline void hook_leave(void)
{
	dlbn_hook_tls.in_hook = 0;
}

/* True on the process's initial thread (tid == pid); cached per thread. */
bool main_thread_find(void) DLBN_HIDDEN;
static inline bool on_main_thread(void)
{
	int m = dlbn_hook_tls.main_thread;
	return DLBN_LIKELY(m != 0) ? m == 1 : main_thread_find();
}

/* At most every SCHED_SAMPLE_NS per thread: a SCHED record from
 * schedstat.  Call from inside a hook (hook_enter held). */
#define SCHED_SAMPLE_NS 50000000u
void recorder_sched_read(uint64_t now_ns) DLBN_HIDDEN;
static inline void recorder_sched_sample(uint64_t now_ns)
{
	if (DLBN_UNLIKELY(now_ns - dlbn_hook_tls.last_sched_ns >= SCHED_SAMPLE_NS))
		recorder_sched_read(now_ns);
}

/* A small /proc or /sys file, read with raw syscalls (no hooked call, no
 * allocation), NUL-terminated; its length, or -1. */
ssize_t read_small_file_at(int dirfd, const char *path, char *buf, size_t size) DLBN_HIDDEN;

/*
 * Internal failure: print one line "dlbn: <what>: <strerror(err)>; recording
 * disabled, the program continues" to stderr (once per process) and go
 * passive.  Async-signal-safe.
 */
void recorder_fail(const char *what, int err) DLBN_HIDDEN;

/*
 * Cross-module notifications (wait_fanout.c passes them on to gpu_probe.c,
 * nvtx_inject.c and stacks.c).  Called with the hook guard held, on the main
 * thread, in begin/finished pairs (pairs may nest: a poll inside a Python
 * fetch mark).
 */
/* A wait that may be a batch wait is about to block: a poll/read on a pipe
 * or unix socket, a semaphore wait, or the Python bootstrap's fetch begin. */
void loader_wait_begins(uint64_t t_ns) DLBN_HIDDEN;
/* That wait ended after dur_ns; rec_type is the record that describes it. */
void loader_wait_finished(uint8_t rec_type, uint64_t t0_ns, uint64_t dur_ns) DLBN_HIDDEN;

#endif /* DLBN_RECORDER_H */
