/*
 * real.h - pointers to the real libc functions behind libdlbn.so's hooks.
 *
 * real.c resolves every pointer in the library constructor (through the
 * real dlsym, since another module interposes dlsym).  A hook can run before
 * that constructor (another library's constructor may call read or open), so
 * hooks reach the real function through REAL(name), which resolves a missing
 * pointer on first use.  Inside the library, never call a hooked libc
 * function by name: it would bind to our own hook.  Use REAL() or a raw
 * syscall.
 */
#ifndef DLBN_REAL_H
#define DLBN_REAL_H

#include <poll.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>

#include "recorder.h"

/* X(name, return type, parameter list) for every real function we call. */
#define DLBN_REAL_FUNCS(X)                                                                         \
	X(read, ssize_t, (int, void *, size_t))                                                    \
	X(readv, ssize_t, (int, const struct iovec *, int))                                        \
	X(recv, ssize_t, (int, void *, size_t, int))                                               \
	X(recvfrom, ssize_t, (int, void *, size_t, int, struct sockaddr *, socklen_t *))           \
	X(recvmsg, ssize_t, (int, struct msghdr *, int))                                           \
	X(write, ssize_t, (int, const void *, size_t))                                             \
	X(writev, ssize_t, (int, const struct iovec *, int))                                       \
	X(send, ssize_t, (int, const void *, size_t, int))                                         \
	X(sendto, ssize_t, (int, const void *, size_t, int, const struct sockaddr *, socklen_t))   \
	X(sendmsg, ssize_t, (int, const struct msghdr *, int))                                     \
	X(pread, ssize_t, (int, void *, size_t, off_t))                                            \
	X(pread64, ssize_t, (int, void *, size_t, off64_t))                                        \
	X(preadv, ssize_t, (int, const struct iovec *, int, off_t))                                \
	X(preadv64, ssize_t, (int, const struct iovec *, int, off64_t))                            \
	X(preadv2, ssize_t, (int, const struct iovec *, int, off_t, int))                          \
	X(preadv64v2, ssize_t, (int, const struct iovec *, int, off64_t, int))                     \
	X(poll, int, (struct pollfd *, nfds_t, int))                                               \
	X(__poll_chk, int, (struct pollfd *, nfds_t, int, size_t))                                 \
	X(ppoll, int, (struct pollfd *, nfds_t, const struct timespec *, const sigset_t *))        \
	X(__ppoll_chk, int,                                                                        \
	  (struct pollfd *, nfds_t, const struct timespec *, const sigset_t *, size_t))            \
	X(select, int, (int, fd_set *, fd_set *, fd_set *, struct timeval *))                      \
	X(pselect, int,                                                                            \
	  (int, fd_set *, fd_set *, fd_set *, const struct timespec *, const sigset_t *))          \
	X(epoll_wait, int, (int, struct epoll_event *, int, int))                                  \
	X(epoll_pwait, int, (int, struct epoll_event *, int, int, const sigset_t *))               \
	X(epoll_pwait2, int,                                                                       \
	  (int, struct epoll_event *, int, const struct timespec *, const sigset_t *))             \
	X(sem_wait, int, (sem_t *))                                                                \
	X(sem_trywait, int, (sem_t *))                                                             \
	X(sem_timedwait, int, (sem_t *, const struct timespec *))                                  \
	X(sem_clockwait, int, (sem_t *, clockid_t, const struct timespec *))                       \
	X(sem_post, int, (sem_t *))                                                                \
	X(pthread_cond_timedwait, int,                                                             \
	  (pthread_cond_t *, pthread_mutex_t *, const struct timespec *))                          \
	X(open, int, (const char *, int, ...))                                                     \
	X(open64, int, (const char *, int, ...))                                                   \
	X(openat, int, (int, const char *, int, ...))                                              \
	X(openat64, int, (int, const char *, int, ...))                                            \
	X(__open_2, int, (const char *, int))                                                      \
	X(__open64_2, int, (const char *, int))                                                    \
	X(__openat_2, int, (int, const char *, int))                                               \
	X(__openat64_2, int, (int, const char *, int))                                             \
	X(creat, int, (const char *, mode_t))                                                      \
	X(creat64, int, (const char *, mode_t))                                                    \
	X(close, int, (int))                                                                       \
	X(close_range, int, (unsigned int, unsigned int, int))                                     \
	X(dup, int, (int))                                                                         \
	X(dup2, int, (int, int))                                                                   \
	X(dup3, int, (int, int, int))                                                              \
	X(fcntl, int, (int, int, ...))                                                             \
	X(fcntl64, int, (int, int, ...))                                                           \
	X(pipe, int, (int *))                                                                      \
	X(pipe2, int, (int *, int))                                                                \
	X(socket, int, (int, int, int))                                                            \
	X(socketpair, int, (int, int, int, int *))                                                 \
	X(accept, int, (int, struct sockaddr *, socklen_t *))                                      \
	X(accept4, int, (int, struct sockaddr *, socklen_t *, int))                                \
	X(connect, int, (int, const struct sockaddr *, socklen_t))                                 \
	X(mmap, void *, (void *, size_t, int, int, int, off_t))                                    \
	X(mmap64, void *, (void *, size_t, int, int, int, off64_t))                                \
	X(munmap, int, (void *, size_t))                                                           \
	X(fork, pid_t, (void))                                                                     \
	X(wait, pid_t, (int *))                                                                    \
	X(waitpid, pid_t, (pid_t, int *, int))                                                     \
	X(wait3, pid_t, (int *, int, struct rusage *))                                             \
	X(wait4, pid_t, (pid_t, int *, int, struct rusage *))                                      \
	X(waitid, int, (idtype_t, id_t, siginfo_t *, int))                                         \
	X(execve, int, (const char *, char *const[], char *const[]))                               \
	X(execv, int, (const char *, char *const[]))                                               \
	X(execvp, int, (const char *, char *const[]))                                              \
	X(execvpe, int, (const char *, char *const[], char *const[]))                              \
	X(fexecve, int, (int, char *const[], char *const[]))                                       \
	X(_exit, void, (int))                                                                      \
	X(_Exit, void, (int))                                                                      \
	X(exit, void, (int))

#define DLBN_REAL_DECLARE(name, ret, params)                                                       \
	typedef ret(*real_##name##_fn) params;                                                     \
	extern real_##name##_fn real_##name DLBN_HIDDEN;
DLBN_REAL_FUNCS(DLBN_REAL_DECLARE)
#undef DLBN_REAL_DECLARE

/* Resolve *slot from the next object after libdlbn.so (slow path of REAL). */
void *real_lazy(void **slot, const char *name) DLBN_HIDDEN;
/* Resolve every pointer above (constructor). */
void real_resolve_all(void) DLBN_HIDDEN;

#define REAL(name)                                                                                 \
	(DLBN_LIKELY(real_##name != NULL)                                                          \
		 ? real_##name                                                                     \
		 : (real_##name##_fn)real_lazy((void **)&real_##name, #name))

#endif /* DLBN_REAL_H */
