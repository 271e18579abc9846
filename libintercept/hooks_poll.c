/*
 * hooks_poll.c - readiness waits: poll, ppoll, select, pselect, epoll.
 *
 * A DataLoader's main thread waits for a batch in poll() on the result
 * pipe; workers wait for indices the same way.  A POLL record carries the
 * inodes of the pipe/unix-socket fds waited on (at most POLL_MAX_INO), which
 * is how the analyzer ties a wait to a worker's pipe.  Waits that involve no
 * pipe or unix socket cost a table lookup per fd and are not recorded.
 * epoll sets are opaque (fds registered earlier), so epoll waits are only
 * recorded on the main thread, without inodes, when they blocked.
 */
#include <errno.h>
#include <sys/syscall.h>

#include "fdtable.h"
#include "mem_sample.h"
#include "real.h"
#include "session.h"

#define POLL_MAX_INO 8

int __poll_chk(struct pollfd *fds, nfds_t n, int timeout, size_t fdslen);
int __ppoll_chk(struct pollfd *fds, nfds_t n, const struct timespec *ts, const sigset_t *mask,
		size_t fdslen);

struct poll_set {
	int64_t ino[POLL_MAX_INO];
	unsigned n;
	bool any;
};

static void poll_set_add(struct poll_set *s, int fd)
{
	uint64_t w = fdtable_get(fd);
	if (!fdw_is_ipc(w))
		return;
	s->any = true;
	if (s->n < POLL_MAX_INO)
		s->ino[s->n++] = fdw_ino(w);
}

static void pollfds_collect(struct poll_set *s, const struct pollfd *fds, nfds_t n)
{
	s->n = 0;
	s->any = false;
	for (nfds_t i = 0; i < n; i++)
		poll_set_add(s, fds[i].fd);
}

static void fdsets_collect(struct poll_set *s, int nfds, const fd_set *r, const fd_set *w,
			   const fd_set *e)
{
	s->n = 0;
	s->any = false;
	if (nfds > FD_SETSIZE)
		nfds = FD_SETSIZE;
	for (int fd = 0; fd < nfds; fd++)
		if ((r && FD_ISSET(fd, r)) || (w && FD_ISSET(fd, w)) || (e && FD_ISSET(fd, e)))
			poll_set_add(s, fd);
}

static int ts_to_ms(const struct timespec *ts)
{
	if (!ts)
		return -1;
	int64_t ms = (int64_t)ts->tv_sec * 1000 + (ts->tv_nsec + 999999) / 1000000;
	return ms > 0x7fffffff ? 0x7fffffff : (int)ms;
}

static int tv_to_ms(const struct timeval *tv)
{
	if (!tv)
		return -1;
	int64_t ms = (int64_t)tv->tv_sec * 1000 + (tv->tv_usec + 999) / 1000;
	return ms > 0x7fffffff ? 0x7fffffff : (int)ms;
}

/* Before a recorded wait; returns whether it is a main-thread wait. */
static bool poll_begins(int timeout_ms, uint64_t t0)
{
	if (timeout_ms == 0 || !on_main_thread())
		return false;
	loader_wait_begins(t0);
	return true;
}

static void poll_done(const struct poll_set *s, int call, int timeout_ms, uint64_t t0, int rc,
		      int err, bool main_wait)
{
	uint64_t t1 = clock_now_ns();
	int64_t f[4] = {(int64_t)(t1 - t0), call, rc < 0 ? -err : rc, timeout_ms};
	rec_emit_list(DLBN_REC_POLL, t0, f, 4, s->ino, s->n);
	recorder_sched_sample(t1);
	if (main_wait)
		loader_wait_finished(DLBN_REC_POLL, t0, t1 - t0);
}

#define POLL_HOOK(collect, call_kind, timeout_ms, call, real_call)                                 \
	do {                                                                                       \
		struct poll_set s_;                                                                \
		if (!recorder_on())                                                                \
			return real_call;                                                          \
		collect;                                                                           \
		if (!s_.any || !hook_enter())                                                      \
			return real_call;                                                          \
		int tmo_ = (timeout_ms);                                                           \
		uint64_t t0_ = clock_now_ns();                                                     \
		if (tmo_ != 0)                                                                     \
			t0_ = mem_sample_due(t0_);                                                 \
		bool main_ = poll_begins(tmo_, t0_);                                               \
		int rc_ = call;                                                                    \
		int err_ = errno;                                                                  \
		poll_done(&s_, call_kind, tmo_, t0_, rc_, err_, main_);                            \
		hook_leave();                                                                      \
		errno = err_;                                                                      \
		return rc_;                                                                        \
	} while (0)

DLBN_EXPORT int poll(struct pollfd *fds, nfds_t n, int timeout)
{
	POLL_HOOK(pollfds_collect(&s_, fds, n), DLBN_POLL_POLL, timeout, real_poll(fds, n, timeout),
		  REAL(poll)(fds, n, timeout));
}

DLBN_EXPORT int __poll_chk(struct pollfd *fds, nfds_t n, int timeout, size_t fdslen)
{
	POLL_HOOK(pollfds_collect(&s_, fds, n), DLBN_POLL_POLL, timeout,
		  real___poll_chk(fds, n, timeout, fdslen),
		  REAL(__poll_chk)(fds, n, timeout, fdslen));
}

DLBN_EXPORT int ppoll(struct pollfd *fds, nfds_t n, const struct timespec *ts, const sigset_t *mask)
{
	POLL_HOOK(pollfds_collect(&s_, fds, n), DLBN_POLL_PPOLL, ts_to_ms(ts),
		  real_ppoll(fds, n, ts, mask), REAL(ppoll)(fds, n, ts, mask));
}

DLBN_EXPORT int __ppoll_chk(struct pollfd *fds, nfds_t n, const struct timespec *ts,
			    const sigset_t *mask, size_t fdslen)
{
	POLL_HOOK(pollfds_collect(&s_, fds, n), DLBN_POLL_PPOLL, ts_to_ms(ts),
		  real___ppoll_chk(fds, n, ts, mask, fdslen),
		  REAL(__ppoll_chk)(fds, n, ts, mask, fdslen));
}

DLBN_EXPORT int select(int nfds, fd_set *r, fd_set *w, fd_set *e, struct timeval *tv)
{
	POLL_HOOK(fdsets_collect(&s_, nfds, r, w, e), DLBN_POLL_SELECT, tv_to_ms(tv),
		  real_select(nfds, r, w, e, tv), REAL(select)(nfds, r, w, e, tv));
}

DLBN_EXPORT int pselect(int nfds, fd_set *r, fd_set *w, fd_set *e, const struct timespec *ts,
			const sigset_t *mask)
{
	POLL_HOOK(fdsets_collect(&s_, nfds, r, w, e), DLBN_POLL_PSELECT, ts_to_ms(ts),
		  real_pselect(nfds, r, w, e, ts, mask), REAL(pselect)(nfds, r, w, e, ts, mask));
}

/* ---- epoll: main thread only, blocked waits only ------------------------- */

#define EPOLL_HOOK(timeout_ms, call, real_call)                                                    \
	do {                                                                                       \
		if (!recorder_on() || !on_main_thread() || !hook_enter())                          \
			return real_call;                                                          \
		struct poll_set s_ = {.n = 0};                                                     \
		int tmo_ = (timeout_ms);                                                           \
		uint64_t t0_ = clock_now_ns();                                                     \
		int rc_ = call;                                                                    \
		int err_ = errno;                                                                  \
		if (clock_now_ns() - t0_ >= DLBN_SEM_MIN_NS)                                       \
			poll_done(&s_, DLBN_POLL_EPOLL, tmo_, t0_, rc_, err_, false);              \
		hook_leave();                                                                      \
		errno = err_;                                                                      \
		return rc_;                                                                        \
	} while (0)

DLBN_EXPORT int epoll_wait(int epfd, struct epoll_event *ev, int max, int timeout)
{
	EPOLL_HOOK(timeout, real_epoll_wait(epfd, ev, max, timeout),
		   REAL(epoll_wait)(epfd, ev, max, timeout));
}

DLBN_EXPORT int epoll_pwait(int epfd, struct epoll_event *ev, int max, int timeout,
			    const sigset_t *mask)
{
	EPOLL_HOOK(timeout, real_epoll_pwait(epfd, ev, max, timeout, mask),
		   REAL(epoll_pwait)(epfd, ev, max, timeout, mask));
}

DLBN_EXPORT int epoll_pwait2(int epfd, struct epoll_event *ev, int max, const struct timespec *ts,
			     const sigset_t *mask)
{
	EPOLL_HOOK(ts_to_ms(ts), real_epoll_pwait2(epfd, ev, max, ts, mask),
		   REAL(epoll_pwait2)(epfd, ev, max, ts, mask));
}
