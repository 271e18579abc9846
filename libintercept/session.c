/*
 * session.c - creating, joining and growing the shared trace file.
 *
 * Runs in the constructor (create/join) and on extent allocation (rare: once
 * per extent_size bytes of records per thread).  Only raw syscalls touch
 * files here, because open/close/mmap by name would bind to our own hooks.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "session.h"

struct session the_session = {.parent_proc_id = -1, .gen = 1};

#define MAX_NAME_TRIES 1000

long env_long(const char *name, long dflt)
{
	const char *v = getenv(name);
	if (!v || !*v)
		return dflt;
	char *end;
	errno = 0;
	long x = strtol(v, &end, 10);
	if (errno || *end)
		return dflt;
	return x;
}

long session_rank(void)
{
	static const char *const vars[] = {"RANK", "SLURM_PROCID", "OMPI_COMM_WORLD_RANK"};
	for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++) {
		long r = env_long(vars[i], -1);
		if (r >= 0)
			return r;
	}
	return 0;
}

const char *session_job_id(void)
{
	static const char *const vars[] = {"SLURM_JOB_ID", "PBS_JOBID", "LSB_JOBID"};
	for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++) {
		const char *v = getenv(vars[i]);
		if (v && *v)
			return v;
	}
	return "nojob";
}

void session_host(char *buf, size_t len)
{
	const char *v = getenv("DLBN_HOST");
	if (v && *v)
		snprintf(buf, len, "%s", v);
	else if (gethostname(buf, len - 1) != 0)
		snprintf(buf, len, "unknown");
	buf[len - 1] = '\0';
	/* The host becomes part of a file name (%h): keep it one. */
	for (char *c = buf; *c; c++)
		if (*c == '/')
			*c = '_';
}

static int sys_open(const char *path, int flags, mode_t mode)
{
	return (int)syscall(SYS_openat, AT_FDCWD, path, flags, mode);
}

static void sys_close(int fd)
{
	syscall(SYS_close, fd);
}

static void *sys_mmap_shared(int fd, size_t len, off_t off)
{
	long p = syscall(SYS_mmap, NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, off);
	return p == -1 ? NULL : (void *)p;
}

bool session_in_own_process(void)
{
	return the_session.pid == 0 || (pid_t)syscall(SYS_getpid) == the_session.pid;
}

static int append(char **p, char *end, const char *s)
{
	size_t n = strlen(s);
	if ((size_t)(end - *p) <= n)
		return -1;
	memcpy(*p, s, n);
	*p += n;
	**p = '\0';
	return 0;
}

int session_expand_template(const char *tmpl, char *out, size_t size)
{
	char *p = out, *end = out + size;
	char tmp[HOST_NAME_MAX + 32];
	*p = '\0';
	for (const char *t = tmpl; *t; t++) {
		if (*t != '%' || t[1] == '\0') {
			char c[2] = {*t, 0};
			if (append(&p, end, c))
				return -1;
			continue;
		}
		t++;
		switch (*t) {
		case 'p':
			snprintf(tmp, sizeof(tmp), "%ld", (long)getpid());
			break;
		case 'h':
			session_host(tmp, sizeof(tmp));
			break;
		case 'r':
			snprintf(tmp, sizeof(tmp), "%ld", session_rank());
			break;
		case 'j':
			snprintf(tmp, sizeof(tmp), "%s", session_job_id());
			/* A job id becomes part of a file name: keep it one. */
			for (char *c = tmp; *c; c++)
				if (*c == '/')
					*c = '_';
			break;
		case '%':
			strcpy(tmp, "%");
			break;
		default:
			snprintf(tmp, sizeof(tmp), "%%%c", *t);
			break;
		}
		if (append(&p, end, tmp))
			return -1;
	}
	return 0;
}

static int make_absolute(const char *path, char *out, size_t size)
{
	if (path[0] == '/') {
		size_t len = strlen(path);
		if (len >= size)
			return -1;
		memcpy(out, path, len + 1);
		return 0;
	}
	char cwd[PATH_MAX];
	if (!getcwd(cwd, sizeof(cwd)))
		return -1;
	int n = snprintf(out, size, "%s/%s", strcmp(cwd, "/") ? cwd : "", path);
	return (n < 0 || (size_t)n >= size) ? -1 : 0;
}

/* name.N.ext for the N-th alternative of path (suffix before the extension). */
static int alternative_name(const char *path, unsigned n, char *out, size_t size)
{
	const char *base = strrchr(path, '/');
	base = base ? base + 1 : path;
	const char *dot = strrchr(base, '.');
	if (!dot || dot == base)
		dot = base + strlen(base);
	int k = snprintf(out, size, "%.*s.%u%s", (int)(dot - path), path, n, dot);
	return (k < 0 || (size_t)k >= size) ? -1 : 0;
}

/*
 * Allocate disk for [off, off + len) before anything stores there through a
 * mapping, so that a full disk fails here with ENOSPC instead of SIGBUS.
 *
 * Zeros are written with pwrite rather than reserved with fallocate: both
 * allocate (ext4 reserves delayed-allocation blocks at write time, tmpfs
 * allocates pages), but fallocate leaves "unwritten" extents whose first
 * store through the mapping costs a conversion in page_mkwrite: measured
 * ~30 ns more per record on ext4 (hookbench, 16 KiB steps).  fallocate
 * remains the fallback should pwrite be refused.
 */
static int grow(int fd, off_t off, off_t len)
{
	static const char zeros[SESSION_FIRST_STEP];
	off_t done = 0;
	while (done < len) {
		size_t chunk =
			(size_t)(len - done) < sizeof(zeros) ? (size_t)(len - done) : sizeof(zeros);
		ssize_t w = pwrite(fd, zeros, chunk, off + done);
		if (w <= 0)
			break;
		done += w;
	}
	if (done == len)
		return 0;
	if (errno == ENOSPC || errno == EDQUOT || errno == EFBIG)
		return -1;
	return fallocate(fd, 0, off + done, len - done);
}

static uint32_t extent_size_from_env(void)
{
	long kb = env_long("DLBN_EXTENT_KB", DLBN_DEFAULT_EXTENT_SIZE / 1024);
	long page_kb = sysconf(_SC_PAGESIZE) / 1024;
	if (page_kb <= 0)
		page_kb = 4;
	/* Room for the longest record (strings are cut at TW_STR_MAX). */
	if (kb < 64)
		kb = 64;
	if (kb > 64 * 1024)
		kb = 64 * 1024;
	kb -= kb % page_kb;
	return (uint32_t)kb * 1024u;
}

static void publish_session(long rank)
{
	char value[PATH_MAX + 32];
	snprintf(value, sizeof(value), "r%ld:%s", rank, the_session.path);
	setenv("DLBN_SESSION", value, 1);
}

static int create_file(const char *wanted)
{
	bool overwrite = env_long("DLBN_OVERWRITE", 0) == 1;
	int flags = O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC;
	char name[PATH_MAX];
	snprintf(name, sizeof(name), "%s", wanted);
	if (overwrite)
		unlink(wanted);
	int fd = sys_open(name, flags, 0600);
	for (unsigned n = 1; fd < 0 && errno == EEXIST && n < MAX_NAME_TRIES; n++) {
		if (alternative_name(wanted, n, name, sizeof(name)))
			break;
		fd = sys_open(name, flags, 0600);
	}
	if (fd < 0)
		return -1;
	snprintf(the_session.path, sizeof(the_session.path), "%s", name);
	if (strcmp(name, wanted) != 0) {
		char line[2 * PATH_MAX + 64];
		snprintf(line, sizeof(line), "%s exists; writing the trace to %s", wanted, name);
		recorder_info(line);
	}
	return fd;
}

/*
 * DLBN_TRACE_LIST names a file (made by dlbn-run) to which every trace this
 * job creates appends its path, one line each, so that the wrapper can
 * analyse them afterwards without guessing %p.  One write() with O_APPEND
 * keeps lines from different ranks whole.
 */
static void list_trace_path(void)
{
	const char *list = getenv("DLBN_TRACE_LIST");
	if (!list || !*list)
		return;
	int fd = sys_open(list, O_WRONLY | O_APPEND | O_NOFOLLOW | O_CLOEXEC, 0);
	if (fd < 0)
		return;
	char line[PATH_MAX + 1];
	int n = snprintf(line, sizeof(line), "%s\n", the_session.path);
	if (n > 0 && (size_t)n < sizeof(line) && syscall(SYS_write, fd, line, (size_t)n) != n)
		recorder_info("cannot append to DLBN_TRACE_LIST");
	sys_close(fd);
}

static int map_header(int fd)
{
	struct stat st;
	if (fstat(fd, &st) != 0)
		return -1;
	void *hdr = sys_mmap_shared(fd, DLBN_FILE_HEADER_SIZE, 0);
	if (!hdr)
		return -1;
	the_session.hdr = hdr;
	the_session.dev = st.st_dev;
	the_session.ino = st.st_ino;
	return 0;
}

static int create_session(long rank)
{
	const char *tmpl = getenv("DLBN_OUTPUT");
	char expanded[PATH_MAX], wanted[PATH_MAX];
	if (!tmpl || !*tmpl)
		tmpl = "dlbn-%p.bin";
	if (session_expand_template(tmpl, expanded, sizeof(expanded)) ||
	    make_absolute(expanded, wanted, sizeof(wanted))) {
		recorder_fail("DLBN_OUTPUT is too long", ENAMETOOLONG);
		return -1;
	}
	int fd = create_file(wanted);
	if (fd < 0) {
		char what[PATH_MAX + 32];
		snprintf(what, sizeof(what), "cannot create trace file %s", wanted);
		recorder_fail(what, errno);
		return -1;
	}
	if (grow(fd, 0, DLBN_FILE_HEADER_SIZE) || map_header(fd)) {
		int err = errno;
		sys_close(fd);
		recorder_fail("cannot set up the trace file header", err);
		return -1;
	}
	sys_close(fd);

	struct dlbn_file_header *h = the_session.hdr;
	struct timespec rt, mono;
	clock_gettime(CLOCK_REALTIME, &rt);
	clock_gettime(CLOCK_MONOTONIC, &mono);
	h->version_major = DLBN_VERSION_MAJOR;
	h->version_minor = DLBN_VERSION_MINOR;
	h->header_size = DLBN_FILE_HEADER_SIZE;
	h->extent_size = the_session.extent_size;
	h->created_realtime_ns = (uint64_t)rt.tv_sec * 1000000000u + (uint64_t)rt.tv_nsec;
	h->created_monotonic_ns = (uint64_t)mono.tv_sec * 1000000000u + (uint64_t)mono.tv_nsec;
	session_host(h->host, sizeof(h->host));
	__atomic_thread_fence(__ATOMIC_RELEASE);
	memcpy(h->magic, DLBN_FILE_MAGIC, 8);

	the_session.proc_id = (uint32_t)__atomic_fetch_add(&h->next_proc_id, 1, __ATOMIC_RELAXED);
	the_session.start_kind = DLBN_START_ROOT;
	publish_session(rank);
	list_trace_path();
	return 0;
}

/* DLBN_SESSION value of a tree whose root could not record. */
#define SESSION_FAILED "-"

enum join_result { JOIN_NONE = -1, JOIN_OK = 0, JOIN_SILENT_OFF = 1 };

/* Join the trace named by DLBN_SESSION if it is ours to join. */
static int join_session(long rank)
{
	const char *s = getenv("DLBN_SESSION");
	if (!s || s[0] != 'r')
		return JOIN_NONE;
	char *colon;
	errno = 0;
	long their_rank = strtol(s + 1, &colon, 10);
	if (errno || *colon != ':' || their_rank != rank)
		return JOIN_NONE;
	/* The root already said why it does not record: say nothing again. */
	if (strcmp(colon + 1, SESSION_FAILED) == 0)
		return JOIN_SILENT_OFF;
	if (colon[1] != '/')
		return JOIN_NONE;
	const char *path = colon + 1;
	if (strlen(path) >= sizeof(the_session.path))
		return JOIN_NONE;
	int fd = sys_open(path, O_RDWR | O_NOFOLLOW | O_CLOEXEC, 0);
	if (fd < 0)
		return JOIN_NONE;
	struct stat st;
	int ok = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == geteuid() &&
		 st.st_size >= (off_t)DLBN_FILE_HEADER_SIZE && map_header(fd) == 0;
	sys_close(fd);
	if (!ok)
		return JOIN_NONE;
	struct dlbn_file_header *h = the_session.hdr;
	char host[sizeof(h->host)] = {0};
	session_host(host, sizeof(host));
	if (memcmp(h->magic, DLBN_FILE_MAGIC, 8) != 0 || h->version_major != DLBN_VERSION_MAJOR ||
	    h->header_size != DLBN_FILE_HEADER_SIZE || h->extent_size < 4096 ||
	    strncmp(h->host, host, sizeof(host)) != 0) {
		munmap(h, DLBN_FILE_HEADER_SIZE);
		the_session.hdr = NULL;
		return JOIN_NONE;
	}
	if (__atomic_load_n(&h->flags, __ATOMIC_RELAXED) & DLBN_FILE_PASSIVE) {
		/* e.g. the disk filled up: another process already said so. */
		munmap(h, DLBN_FILE_HEADER_SIZE);
		the_session.hdr = NULL;
		return JOIN_SILENT_OFF;
	}
	memcpy(the_session.path, path, strlen(path) + 1);
	the_session.extent_size = h->extent_size;
	the_session.proc_id = (uint32_t)__atomic_fetch_add(&h->next_proc_id, 1, __ATOMIC_RELAXED);
	the_session.start_kind = DLBN_START_JOIN;
	return JOIN_OK;
}

/* parent_proc_id of a joining process from SESSION_PARENT_VAR, if it is ours. */
static void take_parent_link(void)
{
	const char *v = getenv(SESSION_PARENT_VAR);
	if (!v)
		return;
	char *colon, *end;
	errno = 0;
	unsigned long long proc_id = strtoull(v, &colon, 10);
	if (errno || *colon != ':' || proc_id >= the_session.proc_id)
		return;
	long pid = strtol(colon + 1, &end, 10);
	if (errno || *end || (pid != getpid() && pid != getppid()))
		return;
	the_session.parent_proc_id = (int64_t)proc_id;
}

int session_start(void)
{
	long rank = session_rank();
	the_session.pid = getpid();
	the_session.extent_size = extent_size_from_env();
	int joined = join_session(rank);
	if (joined == JOIN_OK) {
		take_parent_link();
		return 0;
	}
	if (joined == JOIN_SILENT_OFF)
		return -1;
	if (create_session(rank) == 0)
		return 0;
	/* Descendants of our rank stay off quietly instead of failing again. */
	char value[32];
	snprintf(value, sizeof(value), "r%ld:%s", rank, SESSION_FAILED);
	setenv("DLBN_SESSION", value, 1);
	return -1;
}

void session_fork_child(void)
{
	the_session.pid = (pid_t)syscall(SYS_getpid);
	the_session.parent_proc_id = the_session.proc_id;
	the_session.start_kind = DLBN_START_FORK;
	the_session.next_thread_no = 0;
	if (the_session.hdr)
		the_session.proc_id = (uint32_t)__atomic_fetch_add(&the_session.hdr->next_proc_id,
								   1, __ATOMIC_RELAXED);
	__atomic_fetch_add(&the_session.gen, 1, __ATOMIC_RELEASE);
}

/* Open the trace file by path and check it is still our file. */
static int reopen_checked(void)
{
	int fd = sys_open(the_session.path, O_RDWR | O_NOFOLLOW | O_CLOEXEC, 0);
	if (fd < 0) {
		recorder_fail("cannot reopen the trace file", errno);
		return -1;
	}
	struct stat st;
	if (fstat(fd, &st) != 0 || st.st_dev != the_session.dev || st.st_ino != the_session.ino) {
		sys_close(fd);
		recorder_fail("the trace file was replaced", ESTALE);
		return -1;
	}
	return fd;
}

static void grow_failed(int err)
{
	recorder_fail(err == ENOSPC ? "trace file system is full" : "cannot grow the trace file",
		      err);
}

void *session_new_extent(off_t *file_off)
{
	struct dlbn_file_header *h = the_session.hdr;
	if (!h)
		return NULL;
	uint64_t index = __atomic_fetch_add(&h->next_extent, 1, __ATOMIC_RELAXED);
	off_t size = the_session.extent_size;
	off_t off = (off_t)DLBN_FILE_HEADER_SIZE + (off_t)index * size;
	off_t first = size < SESSION_FIRST_STEP ? size : SESSION_FIRST_STEP;

	int fd = reopen_checked();
	if (fd < 0)
		return NULL;
	void *ext = NULL;
	int err = 0;
	if (grow(fd, off, first) != 0)
		err = errno;
	else if (!(ext = sys_mmap_shared(fd, (size_t)size, off)))
		err = errno;
	sys_close(fd);
	if (!ext) {
		grow_failed(err);
		return NULL;
	}
	*file_off = off;
	return ext;
}

int session_grow_extent(off_t off, off_t len)
{
	int fd = reopen_checked();
	if (fd < 0)
		return -1;
	int rc = grow(fd, off, len);
	int err = errno;
	sys_close(fd);
	if (rc != 0)
		grow_failed(err);
	return rc;
}
