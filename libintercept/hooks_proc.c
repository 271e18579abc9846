/*
 * hooks_proc.c - process tree: fork, the exec family, exit/_exit/_Exit.
 *
 * fork: FORK is recorded in the parent with the child's pid; the child side
 * (new process instance, fresh stream) is set up by recorder.c's atfork
 * handler, which also covers fork calls that bypass this wrapper.
 * exec: EXEC is recorded before the real call; the new image joins the
 * trace from its constructor, and DLBN_PARENT=<proc_id>:<pid> in its
 * environment links it to the instance that exec'd it (or, in a vfork
 * child, to the parent).  In a vfork child (shares our memory and our
 * streams) nothing is recorded: session_in_own_process() is false there.
 * exit family: EXIT is recorded and the stream marked final before the real
 * call, because DataLoader workers leave through os._exit (no destructors).
 * wait family: CHILD records how a child ended, as the parent learns it; a
 * process killed by the OOM killer or by a bus error (a full /dev/shm)
 * writes nothing itself, and this is how the trace learns of it (torch's
 * DataLoader peeks at its workers with waitid(WNOWAIT) from its SIGCHLD
 * handler: the hooks are async-signal-safe, and a child is recorded once).
 * vfork is never wrapped.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "real.h"
#include "session.h"

/* ---- fork --------------------------------------------------------------- */

DLBN_EXPORT pid_t fork(void)
{
	if (!recorder_on())
		return REAL(fork)();
	uint64_t t0 = clock_now_ns();
	pid_t pid = real_fork();
	int err = errno;
	if (pid != 0 && hook_enter()) {
		int64_t f[2] = {(int64_t)(clock_now_ns() - t0), pid > 0 ? pid : -err};
		rec_emit(DLBN_REC_FORK, t0, f, 2);
		hook_leave();
	}
	errno = err;
	return pid;
}

/* ---- wait family -------------------------------------------------------- */

#define CHILDREN_SEEN 32

/* The last CHILDREN_SEEN children recorded (a ring; WNOWAIT peeks and a
 * later reaping wait see one child more than once). */
static pid_t children_seen[CHILDREN_SEEN];
static unsigned children_next;

static void child_ended(pid_t pid, int how, int code)
{
	for (unsigned i = 0; i < CHILDREN_SEEN; i++)
		if (__atomic_load_n(&children_seen[i], __ATOMIC_RELAXED) == pid)
			return;
	if (!recorder_on() || !session_in_own_process() || !hook_enter())
		return;
	unsigned slot = __atomic_fetch_add(&children_next, 1, __ATOMIC_RELAXED) % CHILDREN_SEEN;
	__atomic_store_n(&children_seen[slot], pid, __ATOMIC_RELAXED);
	int64_t f[3] = {pid, how, code};
	rec_emit(DLBN_REC_CHILD, clock_now_ns(), f, 3);
	hook_leave();
}

/* A wait*() status word, when it says the child ended. */
static void child_status(pid_t pid, int status)
{
	if (pid <= 0)
		return;
	if (WIFEXITED(status))
		child_ended(pid, DLBN_CHILD_EXITED, WEXITSTATUS(status));
	else if (WIFSIGNALED(status))
		child_ended(pid, WCOREDUMP(status) ? DLBN_CHILD_DUMPED : DLBN_CHILD_KILLED,
			    WTERMSIG(status));
}

#define WAIT_HOOK(status, pid_call)                                                                \
	do {                                                                                       \
		int own_ = 0;                                                                      \
		int *st_ = (status) ? (status) : &own_;                                            \
		pid_t pid_ = pid_call;                                                             \
		if (recorder_on() && pid_ > 0) {                                                   \
			int err_ = errno;                                                          \
			child_status(pid_, *st_);                                                  \
			errno = err_;                                                              \
		}                                                                                  \
		return pid_;                                                                       \
	} while (0)

DLBN_EXPORT pid_t wait(int *status)
{
	WAIT_HOOK(status, REAL(wait4)(-1, st_, 0, NULL));
}

DLBN_EXPORT pid_t waitpid(pid_t pid, int *status, int options)
{
	WAIT_HOOK(status, REAL(waitpid)(pid, st_, options));
}

DLBN_EXPORT pid_t wait3(int *status, int options, struct rusage *usage)
{
	WAIT_HOOK(status, REAL(wait4)(-1, st_, options, usage));
}

DLBN_EXPORT pid_t wait4(pid_t pid, int *status, int options, struct rusage *usage)
{
	WAIT_HOOK(status, REAL(wait4)(pid, st_, options, usage));
}

DLBN_EXPORT int waitid(idtype_t idtype, id_t id, siginfo_t *info, int options)
{
	int rc = REAL(waitid)(idtype, id, info, options);
	if (rc == 0 && info && info->si_pid > 0 && recorder_on()) {
		int err = errno;
		if (info->si_code == CLD_EXITED)
			child_ended(info->si_pid, DLBN_CHILD_EXITED, info->si_status);
		else if (info->si_code == CLD_KILLED || info->si_code == CLD_DUMPED)
			child_ended(info->si_pid,
				    info->si_code == CLD_DUMPED ? DLBN_CHILD_DUMPED
								: DLBN_CHILD_KILLED,
				    info->si_status);
		errno = err;
	}
	return rc;
}

/* ---- exec family -------------------------------------------------------- */

extern char **environ;

static void exec_record(const char *path)
{
	int saved = errno;
	if (recorder_on() && path && session_in_own_process() && hook_enter()) {
		rec_emit_str(DLBN_REC_EXEC, clock_now_ns(), NULL, 0, path, strnlen(path, 4096));
		hook_leave();
	}
	errno = saved;
}

static size_t env_count(char *const envp[])
{
	size_t n = 0;
	while (envp && envp[n])
		n++;
	return n;
}

/* Decimal digits of v at p; returns the end. */
static char *put_u64(char *p, uint64_t v)
{
	char digits[20];
	int n = 0;
	do
		digits[n++] = (char)('0' + v % 10);
	while ((v /= 10) && n < (int)sizeof(digits));
	while (n > 0)
		*p++ = digits[--n];
	return p;
}

/*
 * Copy envp into out (room for n + 2 pointers) with
 * DLBN_PARENT=<proc_id>:<pid> of the calling process instance in place of
 * any inherited one, so that the exec'd image links its PROCESS record to
 * us (session.c).  Stack only: this also runs in vfork children, where the
 * instance is still the parent's.  Returns envp itself when not recording.
 */
static char *const *env_with_parent(char *const envp[], char **out, size_t n, char *var)
{
	if (!recorder_on())
		return envp;
	char *p = var;
	memcpy(p, SESSION_PARENT_VAR "=", sizeof(SESSION_PARENT_VAR));
	p += sizeof(SESSION_PARENT_VAR);
	p = put_u64(p, the_session.proc_id);
	*p++ = ':';
	p = put_u64(p, (uint64_t)the_session.pid);
	*p = '\0';
	size_t k = 0;
	for (size_t i = 0; i < n; i++)
		if (strncmp(envp[i], SESSION_PARENT_VAR "=", sizeof(SESSION_PARENT_VAR)) != 0)
			out[k++] = envp[i];
	out[k++] = var;
	out[k] = NULL;
	return out;
}

/* Declares `newenv`: envp with the parent link (see env_with_parent). */
#define PARENT_ENV(envp, newenv)                                                                   \
	size_t n_ = env_count(envp);                                                               \
	char *env_[n_ + 2];                                                                        \
	char var_[sizeof(SESSION_PARENT_VAR) + 48];                                                \
	char *const *newenv = env_with_parent(envp, env_, n_, var_)

DLBN_EXPORT int execve(const char *path, char *const argv[], char *const envp[])
{
	exec_record(path);
	PARENT_ENV(envp, env);
	return REAL(execve)(path, argv, env);
}

DLBN_EXPORT int execv(const char *path, char *const argv[])
{
	exec_record(path);
	PARENT_ENV(environ, env);
	return REAL(execve)(path, argv, env);
}

DLBN_EXPORT int execvp(const char *file, char *const argv[])
{
	exec_record(file);
	PARENT_ENV(environ, env);
	return REAL(execvpe)(file, argv, env);
}

DLBN_EXPORT int execvpe(const char *file, char *const argv[], char *const envp[])
{
	exec_record(file);
	PARENT_ENV(envp, env);
	return REAL(execvpe)(file, argv, env);
}

DLBN_EXPORT int fexecve(int fd, char *const argv[], char *const envp[])
{
	char path[32] = "/proc/self/fd/";
	*put_u64(path + strlen(path), fd < 0 ? 0u : (unsigned)fd) = '\0';
	exec_record(path);
	PARENT_ENV(envp, env);
	return REAL(fexecve)(fd, argv, env);
}

/* Collect execl-style arguments (arg0, ..., NULL) into argv. */
#define COLLECT_ARGS(arg0, last_named, argv)                                                       \
	size_t argc_ = 1;                                                                          \
	va_list ap_;                                                                               \
	va_start(ap_, last_named);                                                                 \
	while (va_arg(ap_, const char *) != NULL)                                                  \
		argc_++;                                                                           \
	va_end(ap_);                                                                               \
	const char *argv[argc_ + 1];                                                               \
	argv[0] = arg0;                                                                            \
	va_start(ap_, last_named);                                                                 \
	for (size_t i_ = 1; i_ <= argc_; i_++)                                                     \
		argv[i_] = va_arg(ap_, const char *);

DLBN_EXPORT int execl(const char *path, const char *arg, ...)
{
	COLLECT_ARGS(arg, arg, argv);
	va_end(ap_);
	exec_record(path);
	PARENT_ENV(environ, env);
	return REAL(execve)(path, (char *const *)argv, env);
}

DLBN_EXPORT int execlp(const char *file, const char *arg, ...)
{
	COLLECT_ARGS(arg, arg, argv);
	va_end(ap_);
	exec_record(file);
	PARENT_ENV(environ, env);
	return REAL(execvpe)(file, (char *const *)argv, env);
}

DLBN_EXPORT int execle(const char *path, const char *arg, ...)
{
	COLLECT_ARGS(arg, arg, argv);
	char *const *envp = va_arg(ap_, char *const *);
	va_end(ap_);
	exec_record(path);
	PARENT_ENV(envp, env);
	return REAL(execve)(path, (char *const *)argv, env);
}

/* ---- exits -------------------------------------------------------------- */

DLBN_EXPORT void exit(int status)
{
	recorder_record_exit(status, DLBN_EXIT_EXIT);
	REAL(exit)(status);
	__builtin_unreachable();
}

DLBN_EXPORT void _exit(int status)
{
	recorder_record_exit(status, DLBN_EXIT__EXIT);
	REAL(_exit)(status);
	__builtin_unreachable();
}

DLBN_EXPORT void _Exit(int status)
{
	recorder_record_exit(status, DLBN_EXIT__EXIT);
	REAL(_Exit)(status);
	__builtin_unreachable();
}
