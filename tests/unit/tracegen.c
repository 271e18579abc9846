/*
 * tracegen.c - test-side writer of dlbn v1 traces (see tracegen.h).
 *
 * Each stream keeps the bytes of its current extent in memory; when the
 * next record does not fit, the extent gets the next slot of the file
 * (like the recorder's atomic counter) and is written with its header.
 */
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <msgpack.h>

#include "dlbn/crc32c.h"
#include "tracegen.h"

#define TG_OPEN_PATHS 16 /* recent OPEN paths a 4.0 OPEN may share bytes with */
#define TG_PATH_MAX   4096

struct tg_stream {
	struct tg *g;
	struct tg_stream *next;
	uint32_t proc_id, thread_no, pid, tid, seq;
	uint8_t *data; /* record bytes of the current extent */
	uint32_t used;
	int64_t base_ns, t_prev;
	int has_base, final;
	struct {
		int64_t fd, kind, ino;
	} said[DLBN_FD_SLOTS];	       /* fd announcements of the current extent (2.x) */
	uint64_t sems[DLBN_SEM_SLOTS]; /* semaphore announcements, likewise */
	char open_paths[TG_OPEN_PATHS][TG_PATH_MAX]; /* the extent's recent OPEN paths */
	unsigned open_count, open_newest; /* how many (1 at most before 4.0), the newest */
	int64_t open_ino;		  /* the previous OPEN's inode (3.x), 0 none */
	int64_t fd_ino;			  /* the extent's last FD record's inode (3.x) */
	int64_t stack[64];		  /* the extent's last STACK's frames (3.x) */
	int stack_len;
	int64_t mark_iter, mark_arg;		    /* the extent's previous MARK's (3.x), 0 none */
	int marked;				    /* a MARK with counters in this extent (3.x) */
	int64_t mark_t, mark_c[DLBN_MARK_COUNTERS]; /* the last one's time and counters */
};

struct tg {
	int fd;
	uint32_t extent_size;
	uint64_t next_extent;
	uint32_t max_proc;
	uint16_t major, minor;
	uint32_t garbage_tail;
	uint64_t records;
	uint64_t opens_aged; /* 4.0 OPENs sharing with an older OPEN than the previous */
	uint32_t npassive;
	struct dlbn_passive_entry passive[DLBN_MAX_PASSIVE];
	struct tg_stream *streams;
	msgpack_sbuffer sb;
	msgpack_packer pk;
	int failed;
};

struct tg *tg_open(const char *path, uint32_t extent_size)
{
	struct tg *g = calloc(1, sizeof(*g));
	if (!g)
		return NULL;
	g->fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (g->fd < 0) {
		free(g);
		return NULL;
	}
	g->extent_size = extent_size ? extent_size : DLBN_DEFAULT_EXTENT_SIZE;
	g->major = DLBN_VERSION_MAJOR;
	g->minor = DLBN_VERSION_MINOR;
	msgpack_sbuffer_init(&g->sb);
	msgpack_packer_init(&g->pk, &g->sb, msgpack_sbuffer_write);
	return g;
}

void tg_set_version(struct tg *g, uint16_t major, uint16_t minor)
{
	g->major = major;
	g->minor = minor;
}

void tg_set_garbage_tail(struct tg *g, uint32_t bytes)
{
	g->garbage_tail = bytes;
}

static uint64_t slot_offset(const struct tg *g, uint64_t slot)
{
	return DLBN_FILE_HEADER_SIZE + slot * (uint64_t)g->extent_size;
}

void tg_passive(struct tg *g, uint32_t proc_id, uint32_t pid, int64_t t_ns, int err)
{
	if (g->npassive < DLBN_MAX_PASSIVE)
		g->passive[g->npassive] = (struct dlbn_passive_entry){
			.proc_id = proc_id, .pid = pid, .t_ns = (uint64_t)t_ns, .err = err};
	g->npassive++;
}

void tg_blank_extent(struct tg *g)
{
	uint64_t slot = g->next_extent++;
	/* Extend the file over the slot so that it holds zeros. */
	if (ftruncate(g->fd, (off_t)slot_offset(g, slot + 1)) != 0)
		g->failed = 1;
}

static void flush_extent(struct tg_stream *s)
{
	struct tg *g = s->g;
	if (!s->used && !s->final)
		return;
	uint64_t slot = g->next_extent++;
	struct dlbn_extent_header eh = {
		.magic = DLBN_EXTENT_MAGIC,
		.committed = s->used,
		.proc_id = s->proc_id,
		.thread_no = s->thread_no,
		.extent_seq = s->seq++,
		.pid = s->pid,
		.tid = s->tid,
		.flags = s->final ? DLBN_EXTENT_FINAL : 0,
		.base_ns = (uint64_t)s->base_ns,
		.commit = dlbn_commit_word(s->used, s->final, dlbn_crc32c(s->data, s->used)),
	};
	eh.header_crc = dlbn_extent_header_crc(&eh);
	uint64_t off = slot_offset(g, slot);
	uint32_t room = g->extent_size - DLBN_EXTENT_HEADER_SIZE;
	uint32_t tail = g->garbage_tail;
	if (tail > room - s->used)
		tail = room - s->used;
	memset(s->data + s->used, 0xa5, tail);
	if (pwrite(g->fd, &eh, sizeof(eh), (off_t)off) != (ssize_t)sizeof(eh) ||
	    pwrite(g->fd, s->data, s->used + tail, (off_t)(off + sizeof(eh))) !=
		    (ssize_t)(s->used + tail))
		g->failed = 1;
	/* Every slot spans extent_size bytes in the file, like the recorder's. */
	if (ftruncate(g->fd, (off_t)slot_offset(g, g->next_extent)) != 0)
		g->failed = 1;
	s->used = 0;
	s->has_base = 0;
	for (unsigned k = 0; k < DLBN_FD_SLOTS; k++)
		s->said[k].fd = -1;
	memset(s->sems, 0, sizeof(s->sems));
	s->open_count = 0;
	s->open_ino = 0;
	s->fd_ino = 0;
	s->stack_len = 0;
	s->mark_iter = s->mark_arg = 0;
	s->marked = 0;
	memset(s->mark_c, 0, sizeof(s->mark_c));
}

struct tg_stream *tg_stream(struct tg *g, uint32_t proc_id, uint32_t thread_no, uint32_t pid,
			    uint32_t tid)
{
	struct tg_stream *s = calloc(1, sizeof(*s));
	if (!s)
		abort();
	s->g = g;
	s->proc_id = proc_id;
	s->thread_no = thread_no;
	s->pid = pid;
	s->tid = tid;
	s->data = malloc(g->extent_size);
	if (!s->data)
		abort();
	for (unsigned k = 0; k < DLBN_FD_SLOTS; k++)
		s->said[k].fd = -1;
	s->next = g->streams;
	g->streams = s;
	if (proc_id + 1 > g->max_proc)
		g->max_proc = proc_id + 1;
	return s;
}

void tg_stream_final(struct tg_stream *s)
{
	if (s->final)
		return;
	s->final = 1;
	flush_extent(s);
	free(s->data);
	s->data = NULL;
}

static void append(struct tg_stream *s, int64_t t_ns, int counted)
{
	struct tg *g = s->g;
	uint32_t room = g->extent_size - DLBN_EXTENT_HEADER_SIZE;
	if (s->final || !s->data || g->sb.size > room) {
		g->failed = 1;
		return;
	}
	if (s->used + g->sb.size > room)
		flush_extent(s);
	if (!s->has_base) {
		/* The extent's base is the time of its first record (dt = 0). */
		s->has_base = 1;
		s->base_ns = t_ns;
		s->t_prev = t_ns;
	}
	memcpy(s->data + s->used, g->sb.data, g->sb.size);
	s->used += (uint32_t)g->sb.size;
	g->records += (uint64_t)counted;
}

void tg_rec(struct tg_stream *s, int type, int64_t t_ns, const char *fmt, ...)
{
	struct tg *g = s->g;
	va_list ap;
	uint32_t room = g->extent_size - DLBN_EXTENT_HEADER_SIZE;

	size_t nelem = 2;
	va_start(ap, fmt);
	for (const char *c = fmt; *c; c++) {
		if (*c == 'i') {
			(void)va_arg(ap, int64_t);
			nelem++;
		} else if (*c == 's') {
			(void)va_arg(ap, const char *);
			nelem++;
		} else if (*c == 'a' || *c == 'v') {
			(void)va_arg(ap, const int64_t *);
			int n = va_arg(ap, int);
			nelem += *c == 'a' ? 1 : (size_t)n;
		}
	}
	va_end(ap);
	for (int pass = 0; pass < 2; pass++) {
		/* The delta depends on whether the record opens a new extent, so
		 * pack once, and again with dt 0 if it did not fit. */
		int64_t dt = s->has_base ? t_ns - s->t_prev : 0;
		if (pass == 1)
			dt = 0;
		msgpack_sbuffer_clear(&g->sb);
		msgpack_pack_array(&g->pk, nelem);
		msgpack_pack_int64(&g->pk, type);
		msgpack_pack_int64(&g->pk, dt);
		va_start(ap, fmt);
		for (const char *c = fmt; *c; c++) {
			if (*c == 'i') {
				msgpack_pack_int64(&g->pk, va_arg(ap, int64_t));
			} else if (*c == 's') {
				const char *str = va_arg(ap, const char *);
				if (!str) {
					msgpack_pack_nil(&g->pk);
				} else {
					msgpack_pack_str(&g->pk, strlen(str));
					msgpack_pack_str_body(&g->pk, str, strlen(str));
				}
			} else if (*c == 'a' || *c == 'v') {
				const int64_t *v = va_arg(ap, const int64_t *);
				int n = va_arg(ap, int);
				if (*c == 'a')
					msgpack_pack_array(&g->pk, (size_t)n);
				for (int k = 0; k < n; k++)
					msgpack_pack_int64(&g->pk, v[k]);
			}
		}
		va_end(ap);
		if (pass == 0 && s->has_base && s->used + g->sb.size > room) {
			flush_extent(s);
			continue;
		}
		break;
	}
	/* A reader hands out no FD or SEM record. */
	append(s, t_ns, type != DLBN_REC_FD && type != DLBN_REC_SEM);
	s->t_prev = t_ns;
}

int tg_close(struct tg *g)
{
	for (struct tg_stream *s = g->streams, *n; s; s = n) {
		n = s->next;
		if (!s->final)
			flush_extent(s);
		free(s->data);
		free(s);
	}
	struct dlbn_file_header h = {.version_major = g->major,
				     .version_minor = g->minor,
				     .header_size = DLBN_FILE_HEADER_SIZE,
				     .extent_size = g->extent_size,
				     .next_extent = g->next_extent,
				     .next_proc_id = g->max_proc,
				     .created_realtime_ns = 1700000000000000000ull,
				     .created_monotonic_ns = 0,
				     .flags = g->npassive ? DLBN_FILE_PASSIVE : 0,
				     .passive_count = g->npassive};
	memcpy(h.passive, g->passive, sizeof(h.passive));
	memcpy(h.magic, DLBN_FILE_MAGIC, 8);
	snprintf(h.host, sizeof(h.host), "tracegen");
	uint8_t page[DLBN_FILE_HEADER_SIZE] = {0};
	memcpy(page, &h, sizeof(h));
	if (pwrite(g->fd, page, sizeof(page), 0) != (ssize_t)sizeof(page))
		g->failed = 1;
	int rc = g->failed ? -1 : 0;
	if (close(g->fd) != 0)
		rc = -1;
	msgpack_sbuffer_destroy(&g->sb);
	free(g);
	return rc;
}

uint64_t tg_opens_aged(const struct tg *g)
{
	return g->opens_aged;
}

uint64_t tg_records(const struct tg *g)
{
	return g->records;
}

/* ---- shorthands ------------------------------------------------------- */

void tg_process_host(struct tg_stream *s, int64_t t, int pid, int ppid, int64_t parent_proc_id,
		     int start, const char *argv0, int rank, int local_rank, int world_size,
		     const char *host)
{
	tg_rec(s, DLBN_REC_PROCESS, t, "iiiiiiiiisssss", (int64_t)pid, (int64_t)ppid,
	       parent_proc_id, (int64_t)start, (int64_t)rank, (int64_t)local_rank,
	       (int64_t)world_size, (int64_t)1700000000000000000 + t, t, argv0, "/usr/bin/python3",
	       host, "", "monotonic");
}

void tg_process_rank(struct tg_stream *s, int64_t t, int pid, int ppid, int64_t parent_proc_id,
		     int start, const char *argv0, int rank, int world_size)
{
	tg_process_host(s, t, pid, ppid, parent_proc_id, start, argv0, rank, rank, world_size,
			"tracegen");
}

void tg_process(struct tg_stream *s, int64_t t, int pid, int ppid, int64_t parent_proc_id,
		int start, const char *argv0)
{
	tg_process_rank(s, t, pid, ppid, parent_proc_id, start, argv0, -1, -1);
}

void tg_thread(struct tg_stream *s, int64_t t, int tid, int is_main)
{
	tg_rec(s, DLBN_REC_THREAD, t, "ii", (int64_t)tid, (int64_t)is_main);
}

void tg_exit(struct tg_stream *s, int64_t t, int status, int how)
{
	tg_rec(s, DLBN_REC_EXIT, t, "ii", (int64_t)status, (int64_t)how);
}

/*
 * Format 2.x: what fd is, announced in this extent unless it already is
 * there, the way the recorder does it (dlbn_trace.h, "Fd announcements");
 * 1 when the record that names fd leaves out fd_kind and ino, 0 for a 1.x
 * trace.  The announcement and the record go to one extent.
 */
static int64_t wrap_diff(int64_t a, int64_t b)
{
	return (int64_t)((uint64_t)a - (uint64_t)b);
}

static int fd_announced(struct tg_stream *s, int64_t t, int fd, int kind, int64_t ino)
{
	struct tg *g = s->g;
	if (g->major < 2)
		return 0;
	if (s->has_base && s->used + 96 > g->extent_size - DLBN_EXTENT_HEADER_SIZE)
		flush_extent(s);
	unsigned k = (unsigned)fd % DLBN_FD_SLOTS;
	if (s->said[k].fd != fd || s->said[k].kind != kind || s->said[k].ino != ino) {
		tg_rec(s, DLBN_REC_FD, t, "iii", (int64_t)fd, (int64_t)kind,
		       g->major >= 3 ? wrap_diff(ino, s->fd_ino) : ino);
		s->fd_ino = ino;
		s->said[k].fd = fd;
		s->said[k].kind = kind;
		s->said[k].ino = ino;
	}
	return 1;
}

void tg_read(struct tg_stream *s, int64_t t, int64_t dur, int fd, int kind, int64_t ino,
	     int64_t ret)
{
	if (fd_announced(s, t, fd, kind, ino))
		tg_rec(s, DLBN_REC_READ, t, "iii", dur, (int64_t)fd, ret);
	else
		tg_rec(s, DLBN_REC_READ, t, "iiiii", dur, (int64_t)fd, (int64_t)kind, ino, ret);
}

void tg_write(struct tg_stream *s, int64_t t, int64_t dur, int fd, int kind, int64_t ino,
	      int64_t ret)
{
	if (fd_announced(s, t, fd, kind, ino))
		tg_rec(s, DLBN_REC_WRITE, t, "iii", dur, (int64_t)fd, ret);
	else
		tg_rec(s, DLBN_REC_WRITE, t, "iiiii", dur, (int64_t)fd, (int64_t)kind, ino, ret);
}

void tg_pread(struct tg_stream *s, int64_t t, int64_t dur, int fd, int64_t ino, int64_t ret,
	      int64_t offset)
{
	if (fd_announced(s, t, fd, DLBN_FD_FILE, ino))
		tg_rec(s, DLBN_REC_PREAD, t, "iiii", dur, (int64_t)fd, ret, offset);
	else
		tg_rec(s, DLBN_REC_PREAD, t, "iiiii", dur, (int64_t)fd, ino, ret, offset);
}

void tg_poll(struct tg_stream *s, int64_t t, int64_t dur, int ret, int timeout_ms,
	     const int64_t *inos, int n)
{
	tg_rec(s, DLBN_REC_POLL, t, "iiiia", dur, (int64_t)DLBN_POLL_POLL, (int64_t)ret,
	       (int64_t)timeout_ms, inos, n);
}

void tg_recvmsg(struct tg_stream *s, int64_t t, int64_t dur, int fd, int64_t ino, int64_t ret,
		int nfds)
{
	if (fd_announced(s, t, fd, DLBN_FD_UNIX, ino))
		tg_rec(s, DLBN_REC_RECVMSG, t, "iiii", dur, (int64_t)fd, ret, (int64_t)nfds);
	else
		tg_rec(s, DLBN_REC_RECVMSG, t, "iiiiii", dur, (int64_t)fd, (int64_t)DLBN_FD_UNIX,
		       ino, ret, (int64_t)nfds);
}

void tg_connect(struct tg_stream *s, int64_t t, int64_t dur, int fd, int ret)
{
	tg_rec(s, DLBN_REC_CONNECT, t, "iii", dur, (int64_t)fd, (int64_t)ret);
}

void tg_mmap(struct tg_stream *s, int64_t t, int fd, int64_t ino, int64_t length)
{
	tg_rec(s, DLBN_REC_MMAP, t, "iiiii", (int64_t)fd, (int64_t)DLBN_FD_SHM, ino, length,
	       (int64_t)3);
}

/* What path shares with a kept one at its start, then at its end (3.x),
 * never splitting a UTF-8 character. */
static void shared_ends(const struct tg *g, const char *path, const char *kept, size_t *front,
			size_t *back)
{
	size_t len = strlen(path), prev = strlen(kept), n = 0, m = 0;
	while (path[n] && path[n] == kept[n])
		n++;
	while (n > 0 && ((unsigned char)path[n] & 0xc0) == 0x80)
		n--; /* as the recorder: never inside a UTF-8 character */
	size_t most = (len < prev ? len : prev) - n;
	while (g->major >= 3 && m < most && path[len - 1 - m] == kept[prev - 1 - m])
		m++;
	while (m > 0 && ((unsigned char)path[len - m] & 0xc0) == 0x80)
		m--;
	*front = n;
	*back = m;
}

static void keep_path(struct tg_stream *s, const char *path)
{
	unsigned room = s->g->major >= 4 ? TG_OPEN_PATHS : 1;
	s->open_newest = (s->open_newest + 1) % TG_OPEN_PATHS;
	snprintf(s->open_paths[s->open_newest], TG_PATH_MAX, "%s", path);
	if (s->open_count < room)
		s->open_count++;
}

void tg_open_file(struct tg_stream *s, int64_t t, int fd, int kind, int64_t ino, int64_t flags,
		  const char *path)
{
	struct tg *g = s->g;
	size_t len = strlen(path);
	if (g->major < 2 || len >= TG_PATH_MAX) {
		if (g->major >= 3) /* an unshared path, as a 3.x OPEN */
			tg_rec(s, DLBN_REC_OPEN, t, "iiiis", (int64_t)fd, (int64_t)kind,
			       wrap_diff(ino, s->open_ino), flags ^ DLBN_OPEN_FLAGS_USUAL, path);
		else
			tg_rec(s, DLBN_REC_OPEN, t, "iiiis", (int64_t)fd, (int64_t)kind, ino, flags,
			       path);
		keep_path(s, len >= TG_PATH_MAX ? "" : path);
		s->open_ino = ino;
		return;
	}
	/* The path and what it shares go to one extent. */
	if (s->has_base && s->used + 64 + len > g->extent_size - DLBN_EXTENT_HEADER_SIZE)
		flush_extent(s);
	/* The recent path sharing the most (4.0: an older one costs a byte). */
	size_t shared = 0, tail = 0;
	unsigned age = 0;
	for (unsigned a = 0; a < s->open_count; a++) {
		size_t n, m;
		shared_ends(g, path,
			    s->open_paths[(s->open_newest + TG_OPEN_PATHS - a) % TG_OPEN_PATHS], &n,
			    &m);
		if (n + m > shared + tail + (a > age ? 1 : 0)) {
			age = a;
			shared = n;
			tail = m;
		}
	}
	char own[TG_PATH_MAX];
	memcpy(own, path + shared, len - shared - tail);
	own[len - shared - tail] = 0;
	int64_t ino_f = g->major >= 3 ? wrap_diff(ino, s->open_ino) : ino;
	int64_t flags_f = g->major >= 3 ? flags ^ DLBN_OPEN_FLAGS_USUAL : flags;
	g->opens_aged += age > 0;
	if (age)
		tg_rec(s, DLBN_REC_OPEN, t, "iiiisiii", (int64_t)fd, (int64_t)kind, ino_f, flags_f,
		       own, (int64_t)shared, (int64_t)tail, (int64_t)age);
	else if (tail)
		tg_rec(s, DLBN_REC_OPEN, t, "iiiisii", (int64_t)fd, (int64_t)kind, ino_f, flags_f,
		       own, (int64_t)shared, (int64_t)tail);
	else if (shared)
		tg_rec(s, DLBN_REC_OPEN, t, "iiiisi", (int64_t)fd, (int64_t)kind, ino_f, flags_f,
		       own, (int64_t)shared);
	else
		tg_rec(s, DLBN_REC_OPEN, t, "iiiis", (int64_t)fd, (int64_t)kind, ino_f, flags_f,
		       own);
	keep_path(s, path);
	s->open_ino = ino;
	if (fd >= 0) {
		unsigned k = (unsigned)fd % DLBN_FD_SLOTS;
		s->said[k].fd = fd;
		s->said[k].kind = kind;
		s->said[k].ino = ino;
	}
}

/* Format 2.x: sem's slot, announced in this extent unless it already is
 * (as fd_announced does for fds); 1.x: the address itself. */
static int64_t sem_field(struct tg_stream *s, int64_t t, uint64_t sem)
{
	if (s->g->major < 2)
		return (int64_t)sem;
	if (s->has_base && s->used + 64 > s->g->extent_size - DLBN_EXTENT_HEADER_SIZE)
		flush_extent(s);
	unsigned k = (unsigned)(((sem >> 5) * 0x9e3779b97f4a7c15ull) >> 60) % DLBN_SEM_SLOTS;
	if (s->sems[k] != sem) {
		tg_rec(s, DLBN_REC_SEM, t, "ii", (int64_t)k, (int64_t)sem);
		s->sems[k] = sem;
	}
	return k;
}

void tg_sem_wait(struct tg_stream *s, int64_t t, int64_t dur, uint64_t sem)
{
	tg_rec(s, DLBN_REC_SEM_WAIT, t, "iiii", dur, sem_field(s, t, sem), (int64_t)0,
	       (int64_t)DLBN_SEM_CLOCKWAIT);
}

void tg_sem_post(struct tg_stream *s, int64_t t, uint64_t sem)
{
	tg_rec(s, DLBN_REC_SEM_POST, t, "i", sem_field(s, t, sem));
}

void tg_mark(struct tg_stream *s, int64_t t, int kind, int64_t iter_id, int64_t arg)
{
	tg_mark_counters(s, t, kind, iter_id, arg, NULL, 0);
}

void tg_mark_counters(struct tg_stream *s, int64_t t, int kind, int64_t iter_id, int64_t arg,
		      const int64_t *counters, int n)
{
	struct tg *g = s->g;
	if (g->major < 3) {
		tg_rec(s, DLBN_REC_MARK, t, "iiiv", (int64_t)kind, iter_id, arg, counters, n);
		return;
	}
	/* The differences are from this extent's previous MARK: it must not
	 * move to the next one in tg_rec. */
	if (s->has_base && s->used + 128 > g->extent_size - DLBN_EXTENT_HEADER_SIZE)
		flush_extent(s);
	int64_t v[2 + DLBN_MARK_COUNTERS];
	int nv = 0;
	if (n > 0) {
		int64_t since = s->marked ? s->mark_t : s->has_base ? s->base_ns : t;
		int64_t d[DLBN_MARK_COUNTERS];
		int nd = 0;
		int64_t present = 0;
		for (int i = 0; i < DLBN_MARK_COUNTERS; i++) {
			int64_t c = i < n ? counters[i] : 0;
			int64_t x = wrap_diff(c, s->mark_c[i]);
			if (i == 0)
				x = wrap_diff(t - since, x);
			if (x) {
				present |= 1 << i;
				d[nd++] = x;
			}
			s->mark_c[i] = c;
		}
		s->marked = 1;
		s->mark_t = t;
		if (present > 1)
			v[nv++] = present;
		if (present <= 1) /* counter 0's value alone, 0 when nothing moved */
			v[nv++] = nd ? d[0] : 0;
		else
			for (int i = 0; i < nd; i++)
				v[nv++] = d[i];
	}
	tg_rec(s, DLBN_REC_MARK, t, "iiiv", (int64_t)kind, wrap_diff(iter_id, s->mark_iter),
	       wrap_diff(arg, s->mark_arg), v, nv);
	s->mark_iter = iter_id;
	s->mark_arg = arg;
}

void tg_stack(struct tg_stream *s, int64_t t, int wait_type, int64_t wait_ts_delta,
	      const int64_t *frames, int n)
{
	struct tg *g = s->g;
	if (g->major < 3 || n > 64) {
		tg_rec(s, DLBN_REC_STACK, t, "iia", (int64_t)wait_type, wait_ts_delta, frames, n);
		s->stack_len = 0;
		return;
	}
	if (s->has_base &&
	    s->used + 16 + 9 * (uint32_t)n > g->extent_size - DLBN_EXTENT_HEADER_SIZE)
		flush_extent(s);
	int shared = 0;
	while (shared < n && shared < s->stack_len &&
	       frames[n - 1 - shared] == s->stack[s->stack_len - 1 - shared])
		shared++;
	if (shared)
		tg_rec(s, DLBN_REC_STACK, t, "iiai", (int64_t)wait_type, wait_ts_delta, frames,
		       n - shared, (int64_t)shared);
	else
		tg_rec(s, DLBN_REC_STACK, t, "iia", (int64_t)wait_type, wait_ts_delta, frames, n);
	memcpy(s->stack, frames, (size_t)n * sizeof(*frames));
	s->stack_len = n;
}

void tg_config(struct tg_stream *s, int64_t t, int64_t iter_id, const char *text)
{
	tg_rec(s, DLBN_REC_CONFIG, t, "is", iter_id, text);
}

void tg_fork(struct tg_stream *s, int64_t t, int64_t dur, int child_pid)
{
	tg_rec(s, DLBN_REC_FORK, t, "ii", dur, (int64_t)child_pid);
}
