/*
 * mem_sample.c - how much memory each process of the training tree holds,
 * how that grows, and what the job may hold: the MEM and MEMSYS records.
 *
 * The advice dlbn gives most ("more workers", "a larger batch") fails in
 * practice on memory: each DataLoader worker is a fork of the training
 * process, and one that reads the dataset's Python objects writes their
 * reference counts, so the pages it touches are copied into it one by one
 * (copy-on-write growth, invisible in RSS: a shared page and its private
 * copy count the same).  The analyzer needs, per process, RSS and its
 * anonymous and shared-memory parts, the proportional set size, private
 * and shared-dirty pages over time; and for the job its memory cgroup's
 * limit, use and OOM kills, the host's available memory and /dev/shm.
 *
 * Cost.  /proc/self/status and getrusage cost ~20 us, at most every
 * DLBN_MEM_INTERVAL_MS (500) per process.  /proc/self/smaps_rollup walks
 * the page tables (~1.4 ms per 100 MiB resident, shared pages included),
 * so it is taken first once the process has lived ROLLUP_FIRST_NS (a
 * worker restarted every epoch of a short epoch would pay it before its
 * first batch, each epoch, for nothing the analysis can use), or at the
 * loop's first fetch (warm-up, before the steady state), then at most
 * every ROLLUP_MIN_NS and never sooner than ROLLUP_COST_FACTOR times its
 * own last cost, and a last one at the exit where the process has lived
 * ROLLUP_EXIT_FACTOR times that cost: under 0.1% of the process's time,
 * up to 1% for a life of a few seconds (the growth between the first and
 * the last is the copy-on-write evidence).  The job's
 * figures (a handful of cgroup files, /proc/meminfo, statfs) once a second
 * per trace file, claimed through the shared file header.  Samples are
 * taken before a thread blocks (a pipe, socket or semaphore wait; the
 * loop's fetch begin), never after a wait, where the program would pay.
 *
 * One thread of a process samples at a time (`busy`); the cgroup's
 * directory is found once per process image (fork children share their
 * parent's cgroup) and kept in static storage.
 */
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "mem_sample.h"
#include "session.h"

#define MEM_INTERVAL_MS_DEFAULT 500
#define ROLLUP_FIRST_NS		1000000000ull /* the first smaps_rollup 1 s into a life */
#define ROLLUP_MIN_NS		2000000000ull /* then at most every 2 s ... */
#define ROLLUP_COST_FACTOR	1000	      /* ... and 1000x its own cost apart */
#define ROLLUP_EXIT_FACTOR	200	      /* at the exit, after 200x its cost of life */
#define MEMSYS_INTERVAL_NS	1000000000ull /* the job's figures, per trace file */
#define KIB_UNKNOWN		(-1)
/* cgroup v1 writes "no limit" as a page-rounded LONG_MAX. */
#define CG_NO_LIMIT (1ull << 62)

uint64_t mem_next_ns;		/* atomic; see mem_sample.h */
static uint64_t interval_ns;	/* 0: memory not recorded */
static uint64_t rollup_next_ns; /* next smaps_rollup due (under busy); 0 none taken */
static uint64_t rollup_last_ns, rollup_cost_ns; /* the last one, and what it took */
static uint64_t born_ns;			/* when this process image started */
static int busy;				/* atomic: a thread of this process is sampling */
static int sampled;				/* this process took a sample */

/* The job's memory cgroup, found once (cg_find). */
static struct {
	int looked, version; /* version 0: none found */
	char dir[512];
	int64_t ancestors_limit; /* v2: the lowest memory.max above dir, bytes; -1 none */
} cg;

/* Scratch for the files read here (under busy: one thread at a time). */
static char scratch[16384];

/* ---- parsing ------------------------------------------------------------ */

/* The number after the word key at the start of a line of buf ("VmRSS:
 * 123 kB", "total_rss 4096" but not "total_rss_huge 0"), or dflt. */
static int64_t line_value(const char *buf, const char *key, int64_t dflt)
{
	size_t klen = strlen(key);
	for (const char *p = buf; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL) {
		if (strncmp(p, key, klen) != 0 || (p[klen] != ' ' && p[klen] != '\t'))
			continue;
		p += klen;
		while (*p == ' ' || *p == '\t')
			p++;
		return *p >= '0' && *p <= '9' ? (int64_t)strtoull(p, NULL, 10) : dflt;
	}
	return dflt;
}

/* A file holding one number ("max" and unreadable: dflt). */
static int64_t file_value(const char *dir, const char *name, int64_t dflt)
{
	char path[600], buf[64];
	size_t dl = strnlen(dir, sizeof(cg.dir)), nl = strlen(name);
	if (dl + 1 + nl >= sizeof(path))
		return dflt;
	memcpy(path, dir, dl);
	path[dl] = '/';
	memcpy(path + dl + 1, name, nl + 1);
	if (read_small_file_at(AT_FDCWD, path, buf, sizeof(buf)) <= 0 || buf[0] < '0' ||
	    buf[0] > '9')
		return dflt;
	return (int64_t)strtoull(buf, NULL, 10);
}

static ssize_t read_in_dir(const char *dir, const char *name, char *buf, size_t size)
{
	char path[600];
	size_t dl = strnlen(dir, sizeof(cg.dir)), nl = strlen(name);
	if (dl + 1 + nl >= sizeof(path))
		return -1;
	memcpy(path, dir, dl);
	path[dl] = '/';
	memcpy(path + dl + 1, name, nl + 1);
	return read_small_file_at(AT_FDCWD, path, buf, size);
}

static int64_t kib(int64_t bytes)
{
	return bytes < 0 ? KIB_UNKNOWN : bytes / 1024;
}

/* ---- finding the cgroup ------------------------------------------------- */

/* Field n (0-based, space separated) of a mountinfo line, copied to out. */
static int mount_field(const char *line, int n, char *out, size_t size)
{
	const char *p = line;
	for (int i = 0; i < n && p; i++) {
		p = strchr(p, ' ');
		p = p ? p + 1 : NULL;
	}
	if (!p)
		return -1;
	size_t len = strcspn(p, " \n");
	if (len >= size)
		return -1;
	memcpy(out, p, len);
	out[len] = '\0';
	return 0;
}

/* Whether the comma-separated list has word. */
static int has_word(const char *list, const char *word)
{
	size_t wl = strlen(word);
	for (const char *p = list; p; p = strchr(p, ','), p = p ? p + 1 : NULL)
		if (!strncmp(p, word, wl) && (p[wl] == ',' || p[wl] == '\0' || p[wl] == '\n'))
			return 1;
	return 0;
}

/*
 * The directory of cgroup path cgpath in the hierarchy mounted with
 * filesystem type fstype (and, for v1, the memory controller): the
 * mount's point plus the path below the mount's root (a container
 * without its own cgroup namespace sees the host's paths).
 */
static int cg_dir_of(const char *mountinfo, const char *fstype, const char *cgpath)
{
	for (const char *l = mountinfo; l && *l; l = strchr(l, '\n'), l = l ? l + 1 : NULL) {
		const char *dash = strstr(l, " - ");
		const char *eol = strchr(l, '\n');
		if (!dash || (eol && dash > eol))
			continue;
		char type[16], opts[256], root[256], point[256];
		if (mount_field(dash + 3, 0, type, sizeof(type)) || strcmp(type, fstype) != 0 ||
		    mount_field(dash + 3, 2, opts, sizeof(opts)) ||
		    (!strcmp(fstype, "cgroup") && !has_word(opts, "memory")) ||
		    mount_field(l, 3, root, sizeof(root)) ||
		    mount_field(l, 4, point, sizeof(point)))
			continue;
		const char *rel = cgpath;
		size_t rl = strlen(root);
		if (strcmp(root, "/") != 0) {
			if (strncmp(cgpath, root, rl) != 0 || (cgpath[rl] != '/' && cgpath[rl]))
				continue;
			rel = cgpath + rl;
		}
		size_t pl = strlen(point), ql = strlen(rel);
		if (pl + ql + 1 > sizeof(cg.dir))
			return -1;
		memcpy(cg.dir, point, pl);
		memcpy(cg.dir + pl, rel, ql + 1);
		while (pl + ql > 1 && cg.dir[pl + ql - 1] == '/')
			cg.dir[--ql + pl] = '\0';
		return 0;
	}
	return -1;
}

/* v2: the lowest memory.max of dir's ancestors up to the mount (bytes, -1 none). */
static int64_t cg2_ancestors_limit(void)
{
	char dir[sizeof(cg.dir)];
	memcpy(dir, cg.dir, sizeof(dir));
	int64_t low = -1;
	for (char *slash = strrchr(dir, '/'); slash && slash > dir; slash = strrchr(dir, '/')) {
		*slash = '\0';
		int64_t v = file_value(dir, "memory.max", -1);
		if (v < 0 && read_in_dir(dir, "memory.max", scratch, 64) < 0)
			break; /* above the hierarchy's mount */
		if (v >= 0 && (low < 0 || v < low))
			low = v;
	}
	return low;
}

static void cg_find(void)
{
	cg.looked = 1;
	char cgroups[2048], v1[512] = "", v2[512] = "";
	if (read_small_file_at(AT_FDCWD, "/proc/self/cgroup", cgroups, sizeof(cgroups)) <= 0)
		return;
	/* "ID:controllers:path" per line; v2 is "0::path". */
	for (char *l = cgroups; l && *l; l = strchr(l, '\n'), l = l ? l + 1 : NULL) {
		char *c1 = strchr(l, ':'), *eol = strchr(l, '\n');
		char *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
		if (!c2 || (eol && c2 > eol))
			continue;
		size_t len = eol ? (size_t)(eol - c2 - 1) : strlen(c2 + 1);
		char *dst = NULL;
		if (c2 == c1 + 1 && l[0] == '0' && c1 == l + 1)
			dst = v2;
		else {
			char ctl[128];
			size_t cl = (size_t)(c2 - c1 - 1);
			if (cl < sizeof(ctl)) {
				memcpy(ctl, c1 + 1, cl);
				ctl[cl] = '\0';
				if (has_word(ctl, "memory"))
					dst = v1;
			}
		}
		if (dst && len < 512) {
			memcpy(dst, c2 + 1, len);
			dst[len] = '\0';
		}
	}
	if (read_small_file_at(AT_FDCWD, "/proc/self/mountinfo", scratch, sizeof(scratch)) <= 0)
		return;
	if (v1[0] && cg_dir_of(scratch, "cgroup", v1) == 0 &&
	    file_value(cg.dir, "memory.limit_in_bytes", -1) >= 0) {
		cg.version = 1;
		return;
	}
	if (read_small_file_at(AT_FDCWD, "/proc/self/mountinfo", scratch, sizeof(scratch)) <= 0)
		return;
	if (v2[0] && cg_dir_of(scratch, "cgroup2", v2) == 0 &&
	    file_value(cg.dir, "memory.current", -1) >= 0) {
		cg.version = 2;
		cg.ancestors_limit = cg2_ancestors_limit();
	}
}

/* ---- the job's figures -------------------------------------------------- */

enum {
	SYS_CG_VERSION,
	SYS_CG_LIMIT,
	SYS_CG_USAGE,
	SYS_CG_PEAK,
	SYS_CG_OOM_KILLS,
	SYS_CG_ANON,
	SYS_CG_SHMEM,
	SYS_CG_FILE,
	SYS_HOST_TOTAL,
	SYS_HOST_AVAIL,
	SYS_SHM_SIZE,
	SYS_SHM_FREE,
	SYS_RLIMIT_AS,
	SYS_CG_LIMIT_HITS,
	SYS_FIELDS
};

static void cgroup_figures(int64_t *f)
{
	if (!cg.looked)
		cg_find();
	f[SYS_CG_VERSION] = cg.version;
	if (cg.version == 1) {
		int64_t limit = -1;
		if (read_in_dir(cg.dir, "memory.stat", scratch, sizeof(scratch)) > 0) {
			limit = line_value(scratch, "hierarchical_memory_limit", -1);
			f[SYS_CG_ANON] = kib(line_value(scratch, "total_rss", -1));
			f[SYS_CG_SHMEM] = kib(line_value(scratch, "total_shmem", -1));
			f[SYS_CG_FILE] = kib(line_value(scratch, "total_cache", -1));
		}
		if (limit < 0)
			limit = file_value(cg.dir, "memory.limit_in_bytes", -1);
		f[SYS_CG_LIMIT] = limit >= 0 && (uint64_t)limit < CG_NO_LIMIT ? kib(limit) : -1;
		f[SYS_CG_USAGE] = kib(file_value(cg.dir, "memory.usage_in_bytes", -1));
		f[SYS_CG_PEAK] = kib(file_value(cg.dir, "memory.max_usage_in_bytes", -1));
		f[SYS_CG_LIMIT_HITS] = file_value(cg.dir, "memory.failcnt", -1);
		if (read_in_dir(cg.dir, "memory.oom_control", scratch, 256) > 0)
			f[SYS_CG_OOM_KILLS] = line_value(scratch, "oom_kill", -1);
	} else if (cg.version == 2) {
		int64_t limit = file_value(cg.dir, "memory.max", -1);
		if (cg.ancestors_limit >= 0 && (limit < 0 || cg.ancestors_limit < limit))
			limit = cg.ancestors_limit;
		f[SYS_CG_LIMIT] = kib(limit);
		f[SYS_CG_USAGE] = kib(file_value(cg.dir, "memory.current", -1));
		f[SYS_CG_PEAK] = kib(file_value(cg.dir, "memory.peak", -1));
		if (read_in_dir(cg.dir, "memory.events", scratch, 512) > 0) {
			f[SYS_CG_OOM_KILLS] = line_value(scratch, "oom_kill", -1);
			f[SYS_CG_LIMIT_HITS] = line_value(scratch, "max", -1);
		}
		if (read_in_dir(cg.dir, "memory.stat", scratch, sizeof(scratch)) > 0) {
			f[SYS_CG_ANON] = kib(line_value(scratch, "anon", -1));
			f[SYS_CG_SHMEM] = kib(line_value(scratch, "shmem", -1));
			f[SYS_CG_FILE] = kib(line_value(scratch, "file", -1));
		}
	}
}

static void emit_memsys(uint64_t now_ns)
{
	int64_t f[SYS_FIELDS];
	for (int i = 0; i < SYS_FIELDS; i++)
		f[i] = -1;
	cgroup_figures(f);
	char buf[512];
	if (read_small_file_at(AT_FDCWD, "/proc/meminfo", buf, sizeof(buf)) > 0) {
		f[SYS_HOST_TOTAL] = line_value(buf, "MemTotal:", -1);
		f[SYS_HOST_AVAIL] = line_value(buf, "MemAvailable:", -1);
	}
	struct statfs sf;
	if (syscall(SYS_statfs, "/dev/shm", &sf) == 0) {
		f[SYS_SHM_SIZE] = (int64_t)(sf.f_blocks * (uint64_t)sf.f_bsize / 1024);
		f[SYS_SHM_FREE] = (int64_t)(sf.f_bavail * (uint64_t)sf.f_bsize / 1024);
	}
	struct rlimit rl;
	if (syscall(SYS_prlimit64, 0, RLIMIT_AS, NULL, &rl) == 0)
		f[SYS_RLIMIT_AS] =
			rl.rlim_cur == RLIM_INFINITY ? -1 : (int64_t)(rl.rlim_cur / 1024);
	rec_emit(DLBN_REC_MEMSYS, now_ns, f, SYS_FIELDS);
}

/* One process of the file takes each MEMSYS sample; force: this one. */
static void memsys_sample(uint64_t now_ns, int force)
{
	struct dlbn_file_header *h = the_session.hdr;
	if (!h)
		return;
	uint64_t due = __atomic_load_n(&h->memsys_next_ns, __ATOMIC_RELAXED);
	if (!force &&
	    (now_ns < due ||
	     !__atomic_compare_exchange_n(&h->memsys_next_ns, &due, now_ns + MEMSYS_INTERVAL_NS,
					  false, __ATOMIC_RELAXED, __ATOMIC_RELAXED)))
		return;
	emit_memsys(now_ns);
}

/* ---- the process's own figures ------------------------------------------ */

/* The MEM record of a sample taken at now_ns (and the job's MEMSYS
 * beside it, when memsys: 1 due, 2 forced): sample_ns, the sample's own
 * cost, is all of it, so that the recorder's share of each process's time
 * is in the trace. */
static void emit_mem(uint64_t now_ns, int rollup, int memsys)
{
	int64_t f[DLBN_MEM_FIELDS_ROLLUP];
	char buf[2048];
	int64_t rss = -1, anon = -1, shmem = -1, swap = -1;
	if (read_small_file_at(AT_FDCWD, "/proc/self/status", scratch, sizeof(scratch)) > 0) {
		rss = line_value(scratch, "VmRSS:", -1);
		anon = line_value(scratch, "RssAnon:", -1);
		shmem = line_value(scratch, "RssShmem:", -1);
		swap = line_value(scratch, "VmSwap:", -1);
	}
	struct rusage ru;
	if (syscall(SYS_getrusage, RUSAGE_SELF, &ru) != 0)
		memset(&ru, 0, sizeof(ru));
	f[0] = rss;
	f[1] = anon;
	f[2] = shmem;
	f[3] = swap;
	f[4] = ru.ru_minflt;
	f[5] = ru.ru_majflt;
	f[6] = (int64_t)ru.ru_utime.tv_sec * 1000000 + ru.ru_utime.tv_usec;
	f[7] = (int64_t)ru.ru_stime.tv_sec * 1000000 + ru.ru_stime.tv_usec;
	unsigned n = DLBN_MEM_FIELDS_CHEAP;
	if (rollup) {
		uint64_t t0 = clock_now_ns();
		if (read_small_file_at(AT_FDCWD, "/proc/self/smaps_rollup", buf, sizeof(buf)) > 0) {
			uint64_t cost = clock_now_ns() - t0;
			f[9] = line_value(buf, "Pss:", -1);
			f[10] = line_value(buf, "Pss_Anon:", -1);
			f[11] = line_value(buf, "Pss_Shmem:", -1);
			f[12] = line_value(buf, "Private_Clean:", -1);
			f[13] = line_value(buf, "Private_Dirty:", -1);
			f[14] = line_value(buf, "Shared_Dirty:", -1);
			f[15] = (int64_t)cost;
			n = DLBN_MEM_FIELDS_ROLLUP;
			uint64_t gap = cost * ROLLUP_COST_FACTOR;
			rollup_next_ns = now_ns + (gap > ROLLUP_MIN_NS ? gap : ROLLUP_MIN_NS);
			rollup_last_ns = now_ns;
			rollup_cost_ns = cost;
		} else {
			rollup_next_ns = UINT64_MAX; /* before Linux 4.14: RSS only */
		}
	}
	if (memsys)
		memsys_sample(now_ns, memsys == 2);
	f[8] = (int64_t)(clock_now_ns() - now_ns);
	rec_emit(DLBN_REC_MEM, now_ns, f, n);
}

static uint64_t take(uint64_t now_ns, int eager)
{
	if (!interval_ns || __atomic_exchange_n(&busy, 1, __ATOMIC_ACQUIRE))
		return now_ns;
	__atomic_store_n(&mem_next_ns, now_ns + interval_ns, __ATOMIC_RELAXED);
	int rollup = rollup_next_ns ? now_ns >= rollup_next_ns
				    : eager || now_ns - born_ns >= ROLLUP_FIRST_NS;
	emit_mem(now_ns, rollup, 1);
	sampled = 1;
	__atomic_store_n(&busy, 0, __ATOMIC_RELEASE);
	return clock_now_ns();
}

uint64_t mem_sample_take(uint64_t now_ns)
{
	return take(now_ns, 0);
}

uint64_t mem_sample_fetch(uint64_t now_ns)
{
	if (__atomic_load_n(&rollup_next_ns, __ATOMIC_RELAXED) == 0 && interval_ns)
		return take(now_ns, 1);
	return mem_sample_due(now_ns);
}

void mem_sample_exit(int how)
{
	if (!interval_ns || !sampled || __atomic_exchange_n(&busy, 1, __ATOMIC_ACQUIRE))
		return;
	uint64_t now = clock_now_ns();
	/* The last one, where the growth since the first shows (a worker of
	 * a short epoch lives seconds): as long as the two cost under 1% of
	 * the life. */
	int rollup = how == DLBN_EXIT__EXIT && rollup_next_ns && rollup_next_ns != UINT64_MAX &&
		     now - born_ns >= rollup_cost_ns * ROLLUP_EXIT_FACTOR;
	emit_mem(now, rollup, 2);
	__atomic_store_n(&busy, 0, __ATOMIC_RELEASE);
}

void mem_sample_init(void)
{
	long ms = env_long("DLBN_MEM_INTERVAL_MS", MEM_INTERVAL_MS_DEFAULT);
	if (env_long("DLBN_MEM", 1) == 0 || ms <= 0) {
		interval_ns = 0;
		mem_next_ns = UINT64_MAX;
		return;
	}
	interval_ns = (uint64_t)ms * 1000000u;
	mem_next_ns = 0;
	born_ns = clock_now_ns();
}

void mem_sample_fork_child(void)
{
	busy = 0;
	sampled = 0;
	rollup_next_ns = rollup_last_ns = rollup_cost_ns = 0;
	born_ns = clock_now_ns();
	if (interval_ns)
		mem_next_ns = 0;
}
