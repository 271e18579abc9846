/*
 * recorder.c - the recorder core: constructor, state, failure handling,
 * process lifecycle (fork, exit) and the PROCESS record.
 *
 * The constructor decides once whether this process records (DLBN_DISABLE,
 * trace file created or joined) and everything else checks recorder_on().
 * Any internal failure goes through recorder_fail: one stderr line, the
 * recorder turns passive, the program continues untouched.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "fdtable.h"
#include "loop_cost.h"
#include "marker.h"
#include "mem_sample.h"
#include "nvtx_inject.h"
#include "real.h"
#include "session.h"
#include "thread_census.h"
#include "trace_writer.h"

int dlbn_state = DLBN_OFF;

static bool log_quiet;
static int fail_reported;

/* What the PROCESS record says besides pids (gathered in the constructor). */
static struct {
	char argv0[256];
	char exe[512];
	char host[65];
	char job_id[128];
	char clock_source[32];
	int64_t rank, local_rank, world_size;
} proc_info;

/* EXIT recorded for process instance (generation) exit_gen. */
static uint32_t exit_gen;

__thread struct hook_tls dlbn_hook_tls;

/* ---- small async-signal-safe helpers ----------------------------------- */

static void write_stderr(const char *const parts[], unsigned n)
{
	char line[1024];
	size_t len = 0;
	for (unsigned i = 0; i < n && parts[i]; i++) {
		size_t k = strlen(parts[i]);
		if (k > sizeof(line) - 1 - len)
			k = sizeof(line) - 1 - len;
		memcpy(line + len, parts[i], k);
		len += k;
	}
	line[len++] = '\n';
	int saved = errno;
	syscall(SYS_write, 2, line, len);
	errno = saved;
}

void recorder_info(const char *line)
{
	if (log_quiet)
		return;
	const char *parts[] = {"dlbn: ", line};
	write_stderr(parts, 2);
}

void recorder_fail(const char *what, int err)
{
	__atomic_store_n(&dlbn_state, DLBN_PASSIVE, __ATOMIC_RELAXED);
	if (the_session.hdr)
		__atomic_fetch_or(&the_session.hdr->flags, DLBN_FILE_PASSIVE, __ATOMIC_RELAXED);
	if (__atomic_exchange_n(&fail_reported, 1, __ATOMIC_RELAXED))
		return;
	tw_note_passive(err); /* which process stopped, when, why: for the analyzer */
	const char *desc = err ? strerrordesc_np(err) : NULL;
	const char *parts[] = {"dlbn: ", what, desc ? ": " : "", desc ? desc : "",
			       "; recording disabled, the program continues"};
	write_stderr(parts, 5);
}

bool main_thread_find(void)
{
	bool is_main = gettid() == (pid_t)syscall(SYS_getpid);
	dlbn_hook_tls.main_thread = is_main ? 1 : 2;
	return is_main;
}

/* ---- process information ------------------------------------------------ */

ssize_t read_small_file_at(int dirfd, const char *path, char *buf, size_t size)
{
	int fd = (int)syscall(SYS_openat, dirfd, path, O_RDONLY | O_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	ssize_t n = syscall(SYS_read, fd, buf, size - 1);
	syscall(SYS_close, fd);
	buf[n > 0 ? n : 0] = '\0';
	return n;
}

static void copy_str(char *dst, size_t size, const char *src)
{
	size_t n = strnlen(src, size - 1);
	memcpy(dst, src, n);
	dst[n] = '\0';
}

static int64_t first_env_long(const char *a, const char *b, const char *c)
{
	long v = env_long(a, -1);
	if (v < 0)
		v = env_long(b, -1);
	if (v < 0)
		v = env_long(c, -1);
	return v;
}

static void gather_process_info(void)
{
	if (read_small_file_at(AT_FDCWD, "/proc/self/cmdline", proc_info.argv0,
			       sizeof(proc_info.argv0)) <= 0)
		copy_str(proc_info.argv0, sizeof(proc_info.argv0), program_invocation_name);
	ssize_t n = readlink("/proc/self/exe", proc_info.exe, sizeof(proc_info.exe) - 1);
	proc_info.exe[n > 0 ? n : 0] = '\0';
	session_host(proc_info.host, sizeof(proc_info.host));
	copy_str(proc_info.job_id, sizeof(proc_info.job_id), session_job_id());
	read_small_file_at(AT_FDCWD,
			   "/sys/devices/system/clocksource/clocksource0/current_clocksource",
			   proc_info.clock_source, sizeof(proc_info.clock_source));
	char *nl = strchr(proc_info.clock_source, '\n');
	if (nl)
		*nl = '\0';
	proc_info.rank = first_env_long("RANK", "SLURM_PROCID", "OMPI_COMM_WORLD_RANK");
	proc_info.local_rank =
		first_env_long("LOCAL_RANK", "SLURM_LOCALID", "OMPI_COMM_WORLD_LOCAL_RANK");
	proc_info.world_size = first_env_long("WORLD_SIZE", "SLURM_NTASKS", "OMPI_COMM_WORLD_SIZE");
}

void recorder_emit_process(uint64_t t_ns)
{
	struct timespec rt, mono;
	clock_gettime(CLOCK_REALTIME, &rt);
	clock_gettime(CLOCK_MONOTONIC, &mono);
	const char *strs[] = {proc_info.argv0, proc_info.exe, proc_info.host, proc_info.job_id,
			      proc_info.clock_source};
	size_t bound = 9 * MP_INT_MAX;
	for (unsigned i = 0; i < 5; i++)
		bound += MP_STR_HDR_MAX + strlen(strs[i]);
	uint8_t *p = tw_begin(DLBN_REC_PROCESS, t_ns, 14, bound);
	if (!p)
		return;
	p = mp_int(p, the_session.pid);
	p = mp_int(p, getppid());
	p = mp_int(p, the_session.parent_proc_id);
	p = mp_int(p, the_session.start_kind);
	p = mp_int(p, proc_info.rank);
	p = mp_int(p, proc_info.local_rank);
	p = mp_int(p, proc_info.world_size);
	p = mp_int(p, (int64_t)rt.tv_sec * 1000000000 + rt.tv_nsec);
	p = mp_int(p, (int64_t)mono.tv_sec * 1000000000 + mono.tv_nsec);
	for (unsigned i = 0; i < 5; i++)
		p = mp_str(p, strs[i], strlen(strs[i]));
	tw_commit(p);
}

/* ---- lifecycle ---------------------------------------------------------- */

void recorder_record_exit(int status, int how)
{
	uint32_t gen = __atomic_load_n(&the_session.gen, __ATOMIC_RELAXED);
	if (!recorder_on() || !session_in_own_process())
		return;
	if (__atomic_exchange_n(&exit_gen, gen, __ATOMIC_RELAXED) == gen)
		return;
	if (!hook_enter())
		return;
	mem_sample_exit(how);
	int64_t f[4] = {status, how, clock_uses_tsc(), (int64_t)clock_max_drift_ns()};
	rec_emit(DLBN_REC_EXIT, clock_now_ns(), f, 4);
	tw_mark_final();
	hook_leave();
}

void recorder_sched_read(uint64_t now_ns)
{
	dlbn_hook_tls.last_sched_ns = now_ns;
	char buf[96];
	if (read_small_file_at(AT_FDCWD, "/proc/thread-self/schedstat", buf, sizeof(buf)) <= 0)
		return;
	char *end;
	unsigned long long run = strtoull(buf, &end, 10);
	unsigned long long wait = strtoull(end, NULL, 10);
	int64_t f[3] = {gettid(), (int64_t)run, (int64_t)wait};
	rec_emit(DLBN_REC_SCHED, now_ns, f, 3);
}

static void atfork_child(void)
{
	/* The forking thread is the child's initial thread (tid == pid). */
	dlbn_hook_tls.in_hook = 0;
	dlbn_hook_tls.main_thread = 1;
	dlbn_hook_tls.last_sched_ns = 0;
	loop_cost_fork_child();
	thread_census_fork_child();
	mem_sample_fork_child();
	profile_fork_child();
	if (!recorder_on())
		return;
	session_fork_child();
	tw_fork_child();
	hook_enter();
	tw_open_stream(clock_now_ns());
	hook_leave();
}

__attribute__((constructor(101))) static void recorder_init(void)
{
	int saved = errno;
	real_resolve_all();
	const char *log = getenv("DLBN_LOG");
	log_quiet = log && strcmp(log, "quiet") == 0;
	if (env_long("DLBN_DISABLE", 0) == 1)
		goto out;
	python_boot_setup();
	gil_init();
	gather_process_info();
	clock_init();
	fdtable_init();
	mem_sample_init();
	tw_init();
	if (pthread_atfork(NULL, NULL, atfork_child) != 0) {
		recorder_fail("cannot register the fork handler", errno);
		goto out;
	}
	if (session_start() != 0)
		goto out;
	__atomic_store_n(&dlbn_state, DLBN_ON, __ATOMIC_RELEASE);
	hook_enter();
	tw_open_stream(clock_now_ns());
	hook_leave();
	/* After the stream exists: NVTX clients initialise lazily, but a DOMAIN
	 * record may follow at once in a program that calls NVTX early. */
	nvtx_setup();
out:
	errno = saved;
}

__attribute__((destructor)) static void recorder_fini(void)
{
	recorder_record_exit(0, DLBN_EXIT_DTOR);
}
