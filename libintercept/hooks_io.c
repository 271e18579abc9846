/*
 * hooks_io.c - data transfer and fd lifetime hooks.
 *
 * Records reads and writes on pipes and unix sockets (the DataLoader's
 * queues and fd-passing sockets), reads of regular files and /dev/shm
 * objects (dataset storage), opens of such files, SCM_RIGHTS fd passing,
 * MAP_SHARED mappings of files, and unix-socket connect/accept.  Calls that
 * create or destroy fds only reset the fd table (fdtable.h).
 *
 * Fast path of every hook: recorder_on() and one fd-table load; anything
 * not interesting goes straight to the real function.  errno is the real
 * call's.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "fdtable.h"
#include "loop_cost.h"
#include "real.h"
#include "session.h"

/* Fortified entry points glibc's headers only declare under _FORTIFY_SOURCE. */
int __open_2(const char *path, int flags);
int __open64_2(const char *path, int flags);
int __openat_2(int dirfd, const char *path, int flags);
int __openat64_2(int dirfd, const char *path, int flags);

#ifndef CLOSE_RANGE_CLOEXEC
#define CLOSE_RANGE_CLOEXEC 4
#endif

/* ---- transfers ---------------------------------------------------------- */

static bool wanted_for_read(uint64_t w)
{
	return fdw_is_ipc(w) || fdw_is_file(w);
}

/* True when the calling main thread may now block for a batch. */
static bool wait_begins(uint64_t w, uint64_t t0)
{
	if (!fdw_is_ipc(w) || !on_main_thread())
		return false;
	loader_wait_begins(t0);
	return true;
}

static void transfer_done(uint8_t type, int fd, uint64_t w, uint64_t t0, ssize_t ret, int err,
			  bool main_wait)
{
	uint64_t t1 = clock_now_ns();
	int64_t f[3] = {(int64_t)(t1 - t0), fd, ret < 0 ? -err : ret};
	rec_emit_fd(type, t0, fd, fdw_kind(w), fdw_ino(w), f, 3);
	/* SCHED (time t1) before what loader_wait_finished may add (stacks, probes). */
	if (fdw_is_ipc(w))
		recorder_sched_sample(t1);
	if (main_wait)
		loader_wait_finished(type, t0, t1 - t0);
}

/*
 * Body of a read/write-like hook.  `wanted` filters the fd kind; `is_read`
 * says whether the main thread may be waiting for a batch here.
 */
#define TRANSFER_HOOK(type, wanted, is_read, call, real_call)                                      \
	do {                                                                                       \
		uint64_t w_;                                                                       \
		if (!recorder_on() || !wanted(w_ = fdtable_get(fd)) || !hook_enter())              \
			return real_call;                                                          \
		uint64_t t0_ = clock_now_ns();                                                     \
		bool main_ = (is_read) && wait_begins(w_, t0_);                                    \
		ssize_t ret_ = call;                                                               \
		int err_ = errno;                                                                  \
		transfer_done(type, fd, w_, t0_, ret_, err_, main_);                               \
		hook_leave();                                                                      \
		errno = err_;                                                                      \
		return ret_;                                                                       \
	} while (0)

DLBN_EXPORT ssize_t read(int fd, void *buf, size_t n)
{
	TRANSFER_HOOK(DLBN_REC_READ, wanted_for_read, true, real_read(fd, buf, n),
		      REAL(read)(fd, buf, n));
}

DLBN_EXPORT ssize_t readv(int fd, const struct iovec *iov, int n)
{
	TRANSFER_HOOK(DLBN_REC_READ, wanted_for_read, true, real_readv(fd, iov, n),
		      REAL(readv)(fd, iov, n));
}

DLBN_EXPORT ssize_t recv(int fd, void *buf, size_t n, int flags)
{
	TRANSFER_HOOK(DLBN_REC_READ, fdw_is_ipc, true, real_recv(fd, buf, n, flags),
		      REAL(recv)(fd, buf, n, flags));
}

DLBN_EXPORT ssize_t recvfrom(int fd, void *buf, size_t n, int flags, struct sockaddr *addr,
			     socklen_t *alen)
{
	TRANSFER_HOOK(DLBN_REC_READ, fdw_is_ipc, true, real_recvfrom(fd, buf, n, flags, addr, alen),
		      REAL(recvfrom)(fd, buf, n, flags, addr, alen));
}

DLBN_EXPORT ssize_t write(int fd, const void *buf, size_t n)
{
	TRANSFER_HOOK(DLBN_REC_WRITE, fdw_is_ipc, false, real_write(fd, buf, n),
		      REAL(write)(fd, buf, n));
}

DLBN_EXPORT ssize_t writev(int fd, const struct iovec *iov, int n)
{
	TRANSFER_HOOK(DLBN_REC_WRITE, fdw_is_ipc, false, real_writev(fd, iov, n),
		      REAL(writev)(fd, iov, n));
}

DLBN_EXPORT ssize_t send(int fd, const void *buf, size_t n, int flags)
{
	TRANSFER_HOOK(DLBN_REC_WRITE, fdw_is_ipc, false, real_send(fd, buf, n, flags),
		      REAL(send)(fd, buf, n, flags));
}

DLBN_EXPORT ssize_t sendto(int fd, const void *buf, size_t n, int flags,
			   const struct sockaddr *addr, socklen_t alen)
{
	TRANSFER_HOOK(DLBN_REC_WRITE, fdw_is_ipc, false, real_sendto(fd, buf, n, flags, addr, alen),
		      REAL(sendto)(fd, buf, n, flags, addr, alen));
}

/* ---- fd passing --------------------------------------------------------- */

/* Count the SCM_RIGHTS fds of a message; forget received ones in the table. */
static unsigned scm_rights(const struct msghdr *m, bool forget)
{
	unsigned n = 0;
	if (!m || !m->msg_control || m->msg_controllen < sizeof(struct cmsghdr))
		return 0;
	for (struct cmsghdr *c = CMSG_FIRSTHDR(m); c; c = CMSG_NXTHDR((struct msghdr *)m, c)) {
		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS ||
		    c->cmsg_len < CMSG_LEN(0))
			continue;
		unsigned k = (unsigned)((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));
		for (unsigned i = 0; forget && i < k; i++) {
			int fd;
			memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
			fdtable_forget(fd);
		}
		n += k;
	}
	return n;
}

static void msg_done(uint8_t type, int fd, uint64_t w, uint64_t t0, ssize_t ret, int err,
		     unsigned nfds, bool main_wait)
{
	uint64_t t1 = clock_now_ns();
	int64_t f[4] = {(int64_t)(t1 - t0), fd, ret < 0 ? -err : ret, nfds};
	rec_emit_fd(type, t0, fd, fdw_kind(w), fdw_ino(w), f, 4);
	if (main_wait)
		loader_wait_finished(type, t0, t1 - t0);
}

DLBN_EXPORT ssize_t recvmsg(int fd, struct msghdr *msg, int flags)
{
	if (!recorder_on())
		return REAL(recvmsg)(fd, msg, flags);
	uint64_t w = fdtable_get(fd);
	if (!fdw_is_ipc(w) || !hook_enter()) {
		ssize_t ret = real_recvmsg(fd, msg, flags);
		if (ret >= 0)
			scm_rights(msg, true);
		return ret;
	}
	uint64_t t0 = clock_now_ns();
	bool main_wait = wait_begins(w, t0);
	ssize_t ret = real_recvmsg(fd, msg, flags);
	int err = errno;
	unsigned nfds = ret >= 0 ? scm_rights(msg, true) : 0;
	msg_done(DLBN_REC_RECVMSG, fd, w, t0, ret, err, nfds, main_wait);
	hook_leave();
	errno = err;
	return ret;
}

DLBN_EXPORT ssize_t sendmsg(int fd, const struct msghdr *msg, int flags)
{
	uint64_t w;
	if (!recorder_on() || !fdw_is_ipc(w = fdtable_get(fd)) || !hook_enter())
		return REAL(sendmsg)(fd, msg, flags);
	uint64_t t0 = clock_now_ns();
	ssize_t ret = real_sendmsg(fd, msg, flags);
	int err = errno;
	msg_done(DLBN_REC_SENDMSG, fd, w, t0, ret, err, ret >= 0 ? scm_rights(msg, false) : 0,
		 false);
	hook_leave();
	errno = err;
	return ret;
}

/* ---- positional file reads ---------------------------------------------- */

static void pread_done(int fd, uint64_t w, uint64_t t0, ssize_t ret, int err, int64_t off)
{
	int64_t f[4] = {(int64_t)(clock_now_ns() - t0), fd, ret < 0 ? -err : ret, off};
	rec_emit_fd(DLBN_REC_PREAD, t0, fd, fdw_kind(w), fdw_ino(w), f, 4);
}

#define PREAD_HOOK(call, real_call, off)                                                           \
	do {                                                                                       \
		uint64_t w_;                                                                       \
		if (!recorder_on() || !fdw_is_file(w_ = fdtable_get(fd)) || !hook_enter())         \
			return real_call;                                                          \
		uint64_t t0_ = clock_now_ns();                                                     \
		ssize_t ret_ = call;                                                               \
		int err_ = errno;                                                                  \
		pread_done(fd, w_, t0_, ret_, err_, (int64_t)(off));                               \
		hook_leave();                                                                      \
		errno = err_;                                                                      \
		return ret_;                                                                       \
	} while (0)

DLBN_EXPORT ssize_t pread(int fd, void *buf, size_t n, off_t off)
{
	PREAD_HOOK(real_pread(fd, buf, n, off), REAL(pread)(fd, buf, n, off), off);
}

DLBN_EXPORT ssize_t pread64(int fd, void *buf, size_t n, off64_t off)
{
	PREAD_HOOK(real_pread64(fd, buf, n, off), REAL(pread64)(fd, buf, n, off), off);
}

DLBN_EXPORT ssize_t preadv(int fd, const struct iovec *iov, int n, off_t off)
{
	PREAD_HOOK(real_preadv(fd, iov, n, off), REAL(preadv)(fd, iov, n, off), off);
}

DLBN_EXPORT ssize_t preadv64(int fd, const struct iovec *iov, int n, off64_t off)
{
	PREAD_HOOK(real_preadv64(fd, iov, n, off), REAL(preadv64)(fd, iov, n, off), off);
}

DLBN_EXPORT ssize_t preadv2(int fd, const struct iovec *iov, int n, off_t off, int flags)
{
	PREAD_HOOK(real_preadv2(fd, iov, n, off, flags), REAL(preadv2)(fd, iov, n, off, flags),
		   off);
}

DLBN_EXPORT ssize_t preadv64v2(int fd, const struct iovec *iov, int n, off64_t off, int flags)
{
	PREAD_HOOK(real_preadv64v2(fd, iov, n, off, flags),
		   REAL(preadv64v2)(fd, iov, n, off, flags), off);
}

/* ---- opens -------------------------------------------------------------- */

static bool mode_needed(int flags)
{
	return (flags & O_CREAT) || (flags & O_TMPFILE) == O_TMPFILE;
}

/* After any open: reset the fd's entry, and record regular files/FIFOs/shm. */
static int open_done(int fd, int flags, const char *path)
{
	if (fd < 0 || !recorder_on())
		return fd;
	int err = errno;
	fdtable_forget(fd);
	if (hook_enter()) {
		uint64_t w = fdtable_get(fd);
		unsigned kind = fdw_kind(w);
		if (kind == DLBN_FD_FILE || kind == DLBN_FD_SHM || kind == DLBN_FD_PIPE) {
			rec_emit_open(clock_now_ns(), fd, kind, fdw_ino(w), flags, path,
				      path ? strnlen(path, 4096) : 0);
		}
		hook_leave();
	}
	errno = err;
	return fd;
}

#define OPEN_MODE(flags)                                                                           \
	mode_t mode = 0;                                                                           \
	if (mode_needed(flags)) {                                                                  \
		va_list ap;                                                                        \
		va_start(ap, flags);                                                               \
		mode = (mode_t)va_arg(ap, unsigned);                                               \
		va_end(ap);                                                                        \
	}

DLBN_EXPORT int open(const char *path, int flags, ...)
{
	OPEN_MODE(flags);
	return open_done(REAL(open)(path, flags, mode), flags, path);
}

DLBN_EXPORT int open64(const char *path, int flags, ...)
{
	OPEN_MODE(flags);
	return open_done(REAL(open64)(path, flags, mode), flags, path);
}

DLBN_EXPORT int openat(int dirfd, const char *path, int flags, ...)
{
	OPEN_MODE(flags);
	return open_done(REAL(openat)(dirfd, path, flags, mode), flags, path);
}

DLBN_EXPORT int openat64(int dirfd, const char *path, int flags, ...)
{
	OPEN_MODE(flags);
	return open_done(REAL(openat64)(dirfd, path, flags, mode), flags, path);
}

DLBN_EXPORT int __open_2(const char *path, int flags)
{
	return open_done(REAL(__open_2)(path, flags), flags, path);
}

DLBN_EXPORT int __open64_2(const char *path, int flags)
{
	return open_done(REAL(__open64_2)(path, flags), flags, path);
}

DLBN_EXPORT int __openat_2(int dirfd, const char *path, int flags)
{
	return open_done(REAL(__openat_2)(dirfd, path, flags), flags, path);
}

DLBN_EXPORT int __openat64_2(int dirfd, const char *path, int flags)
{
	return open_done(REAL(__openat64_2)(dirfd, path, flags), flags, path);
}

DLBN_EXPORT int creat(const char *path, mode_t mode)
{
	return open_done(REAL(creat)(path, mode), O_CREAT | O_WRONLY | O_TRUNC, path);
}

DLBN_EXPORT int creat64(const char *path, mode_t mode)
{
	return open_done(REAL(creat64)(path, mode), O_CREAT | O_WRONLY | O_TRUNC, path);
}

/* ---- fd lifetime: reset table entries after the real call --------------- */

static int forget_result(int fd)
{
	if (fd >= 0)
		fdtable_forget(fd);
	return fd;
}

static int forget_pair(int rc, const int fds[2])
{
	if (rc == 0) {
		fdtable_forget(fds[0]);
		fdtable_forget(fds[1]);
	}
	return rc;
}

/* close of a classified fd: its word is reset after the call (for fds
 * made behind dlbn's back), and the last close of a batch's shared memory
 * frees its pages, timed on the loop's thread (loop_cost.c). */
__attribute__((noinline)) static int close_known(int fd, uint64_t w)
{
	struct loop_cost_free f;
	int timed = fdw_kind(w) == DLBN_FD_SHM && loop_cost_free_begin(&f);
	int rc = REAL(close)(fd);
	if (timed)
		loop_cost_free_end(&f);
	fdtable_forget(fd);
	return rc;
}

DLBN_EXPORT int close(int fd)
{
	/* A word still 0 needs nothing: calls that make fds reset theirs.
	 * That case is one load and a tail call, no stack frame. */
	uint64_t w = fdtable_peek(fd);
	if (DLBN_LIKELY(w == 0))
		return REAL(close)(fd);
	return close_known(fd, w);
}

DLBN_EXPORT int close_range(unsigned lo, unsigned hi, int flags)
{
	int rc = REAL(close_range)(lo, hi, flags);
	if (rc == 0 && !(flags & CLOSE_RANGE_CLOEXEC))
		fdtable_forget_range(lo, hi);
	return rc;
}

DLBN_EXPORT int dup(int fd)
{
	return forget_result(REAL(dup)(fd));
}

DLBN_EXPORT int dup2(int fd, int newfd)
{
	return forget_result(REAL(dup2)(fd, newfd));
}

DLBN_EXPORT int dup3(int fd, int newfd, int flags)
{
	return forget_result(REAL(dup3)(fd, newfd, flags));
}

/* fcntl's third argument is an int or a pointer: pass it on as a word. */
#define FCNTL_HOOK(name)                                                                           \
	va_list ap;                                                                                \
	va_start(ap, cmd);                                                                         \
	void *arg = va_arg(ap, void *);                                                            \
	va_end(ap);                                                                                \
	int rc = REAL(name)(fd, cmd, arg);                                                         \
	if (cmd == F_DUPFD || cmd == F_DUPFD_CLOEXEC)                                              \
		forget_result(rc);                                                                 \
	return rc;

DLBN_EXPORT int fcntl(int fd, int cmd, ...)
{
	FCNTL_HOOK(fcntl);
}

DLBN_EXPORT int fcntl64(int fd, int cmd, ...)
{
	FCNTL_HOOK(fcntl64);
}

DLBN_EXPORT int pipe(int fds[2])
{
	return forget_pair(REAL(pipe)(fds), fds);
}

DLBN_EXPORT int pipe2(int fds[2], int flags)
{
	return forget_pair(REAL(pipe2)(fds, flags), fds);
}

DLBN_EXPORT int socket(int domain, int type, int protocol)
{
	return forget_result(REAL(socket)(domain, type, protocol));
}

DLBN_EXPORT int socketpair(int domain, int type, int protocol, int fds[2])
{
	return forget_pair(REAL(socketpair)(domain, type, protocol, fds), fds);
}

/* ---- unix-socket connection set-up -------------------------------------- */

static void conn_done(uint8_t type, int fd, uint64_t t0, int rc, int err)
{
	int64_t f[3] = {(int64_t)(clock_now_ns() - t0), fd, rc < 0 ? -err : rc};
	rec_emit(type, t0, f, 3);
}

#define CONN_HOOK(type, call, real_call, is_accept)                                                \
	do {                                                                                       \
		if (!recorder_on() || fdw_kind(fdtable_get(fd)) != DLBN_FD_UNIX || !hook_enter())  \
			return (is_accept) ? forget_result(real_call) : real_call;                 \
		uint64_t t0_ = clock_now_ns();                                                     \
		int rc_ = call;                                                                    \
		int err_ = errno;                                                                  \
		if (is_accept)                                                                     \
			forget_result(rc_);                                                        \
		conn_done(type, fd, t0_, rc_, err_);                                               \
		hook_leave();                                                                      \
		errno = err_;                                                                      \
		return rc_;                                                                        \
	} while (0)

DLBN_EXPORT int connect(int fd, const struct sockaddr *addr, socklen_t len)
{
	CONN_HOOK(DLBN_REC_CONNECT, real_connect(fd, addr, len), REAL(connect)(fd, addr, len),
		  false);
}

DLBN_EXPORT int accept(int fd, struct sockaddr *addr, socklen_t *len)
{
	CONN_HOOK(DLBN_REC_ACCEPT, real_accept(fd, addr, len), REAL(accept)(fd, addr, len), true);
}

DLBN_EXPORT int accept4(int fd, struct sockaddr *addr, socklen_t *len, int flags)
{
	CONN_HOOK(DLBN_REC_ACCEPT, real_accept4(fd, addr, len, flags),
		  REAL(accept4)(fd, addr, len, flags), true);
}

/* ---- shared mappings ----------------------------------------------------- */

/*
 * Never resolve lazily or allocate here (allocators call mmap): before the
 * constructor resolved real_mmap, go to the kernel directly.
 */
static void *mmap_real(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
	if (DLBN_LIKELY(real_mmap != NULL))
		return real_mmap(addr, len, prot, flags, fd, off);
	return (void *)syscall(SYS_mmap, addr, len, prot, flags, fd, off);
}

static void *mmap_hook(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
	if (fd < 0 || (flags & MAP_ANONYMOUS) || !(flags & MAP_SHARED) || !recorder_on())
		return mmap_real(addr, len, prot, flags, fd, off);
	void *p = mmap_real(addr, len, prot, flags, fd, off);
	int err = errno;
	uint64_t w;
	if (p != MAP_FAILED && fdw_kind(w = fdtable_get(fd)) == DLBN_FD_SHM)
		loop_cost_mapped(p, len);
	if (p != MAP_FAILED && fdw_is_file(w) && hook_enter()) {
		int64_t f[5] = {fd, fdw_kind(w), fdw_ino(w), (int64_t)len,
				(int64_t)((unsigned)flags << 8 | ((unsigned)prot & 0xff))};
		rec_emit(DLBN_REC_MMAP, clock_now_ns(), f, 5);
		hook_leave();
	}
	errno = err;
	return p;
}

DLBN_EXPORT void *mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
	return mmap_hook(addr, len, prot, flags, fd, off);
}

DLBN_EXPORT void *mmap64(void *addr, size_t len, int prot, int flags, int fd, off64_t off)
{
	return mmap_hook(addr, len, prot, flags, fd, off);
}
