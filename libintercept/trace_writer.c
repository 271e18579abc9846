/*
 * trace_writer.c - per-thread streams of msgpack records in mapped extents.
 *
 * Invariants:
 *   - A stream belongs to one thread of one process instance.  A stream whose
 *     generation differs from the_session.gen was inherited through fork and
 *     belongs to the parent: it is dropped, never written.
 *   - `commit` of the current extent always describes exactly the complete
 *     records written so far: their length and CRC-32C, in one release
 *     store after the bytes (dlbn_trace.h); `committed` and `flags` repeat
 *     it for readers of format 1.0.  Only the stream's thread writes them.
 *   - fd_said[k] is the last FD record of slot k written in the current
 *     extent (fd -1: none): a record naming fd follows an FD record for it
 *     in the same extent, since the two are committed together.
 *   - sem_said[k] is the semaphore address the current extent's last SEM
 *     record gave slot k (0: none), under the same rule.
 *   - open_paths holds the paths of the last open_count (at most
 *     OPEN_PATHS) OPEN records of the current extent, the newest at
 *     open_newest and older ones before it, as the reader keeps them: each
 *     its first OPEN_PATH_KEPT bytes at most (whole: all of it, only then
 *     may the next OPEN share its end).  open_ino is the last OPEN's inode
 *     (0: none yet).
 *   - mark_iter and mark_arg are the iter_id and arg of the last MARK in
 *     the current extent (zeros: none yet), mark_t and mark_counters the
 *     time and counters of the last MARK with counters (the extent's
 *     base_ns and zeros: none yet); the next MARK's are differences from
 *     them.
 *   - stack holds the stack_len frame elements of the last STACK record
 *     in the current extent (0: none yet, or too long to keep), whose end
 *     the next STACK's may share.
 *   - Stores never go past `allocated`: disk for an extent is allocated
 *     (session_grow_extent: a first small step, then larger ones) before
 *     records are written there, so a full disk fails with ENOSPC, never
 *     SIGBUS.
 */
#include <pthread.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "dlbn/crc32c.h"
#include "session.h"
#include "trace_writer.h"

/* What an fd was announced as in the current extent (dlbn_trace.h, "Fd
 * announcements"). */
struct fd_said {
	int32_t fd;
	uint32_t kind;
	int64_t ino;
};

/* The OPEN paths of an extent a new OPEN's path may share bytes with, and
 * the bytes kept of each: a module's directory, however deep, and the start
 * of its file name.  Python's imports go back and forth between a few
 * directories (the standard library, site-packages, a package's
 * subpackages): 16 recent paths find one sharing the directory for most. */
#define OPEN_PATHS     16u
#define OPEN_PATH_KEPT 256u

struct open_path {
	uint32_t len; /* bytes kept */
	bool whole;   /* they are the whole path */
	char text[OPEN_PATH_KEPT];
};

/* Elements of a STACK's frame list kept for the next one to share: every
 * frame the stack sampler takes (32 module-offset pairs). */
#define STACK_KEPT 64u

struct stream {
	struct dlbn_extent_header *ext; /* current extent, NULL if none */
	uint8_t *data;			/* first record byte of ext */
	uint32_t used;			/* committed bytes in ext */
	uint32_t crc;			/* CRC-32C register over those bytes */
	bool final;			/* ext carries DLBN_EXTENT_FINAL */
	uint32_t cap;			/* record bytes an extent holds */
	uint32_t allocated;		/* bytes of ext (from its header) on disk */
	off_t file_off;			/* file offset of ext */
	uint64_t last_ns;		/* time of the previous record */
	uint32_t seq;			/* extent_seq of the next extent */
	uint32_t thread_no;
	uint32_t gen; /* the_session.gen it was opened in */
	bool closed;  /* thread is exiting: record nothing */
	struct fd_said fd_said[DLBN_FD_SLOTS];
	int64_t fd_ino; /* the inode of the extent's last FD record, 0 none */
	uint64_t sem_said[DLBN_SEM_SLOTS];
	uint32_t open_count, open_newest;
	int64_t open_ino;
	struct open_path open_paths[OPEN_PATHS];
	int64_t mark_iter, mark_arg;
	uint64_t mark_t;
	int64_t mark_counters[DLBN_MARK_COUNTERS];
	uint32_t stack_len;
	int64_t stack[STACK_KEPT];
};

static __thread struct stream tls_stream;

/* Closes a stream when its thread exits (created by recorder.c's ctor). */
static pthread_key_t stream_key;
static bool stream_key_ok;

static void stream_release_mapping(struct stream *s)
{
	if (s->ext)
		munmap(s->ext, the_session.extent_size);
	s->ext = NULL;
	s->data = NULL;
}

/* Publish used/crc/final: the 1.1 commit word, then the 1.0 fields. */
static inline void stream_publish(struct stream *s)
{
	__atomic_store_n(&s->ext->commit, dlbn_commit_word(s->used, s->final, ~s->crc),
			 __ATOMIC_RELEASE);
	__atomic_store_n(&s->ext->committed, s->used, __ATOMIC_RELEASE);
}

static void stream_set_final(struct stream *s)
{
	if (!s->ext || s->final)
		return;
	s->final = true;
	stream_publish(s);
	__atomic_fetch_or(&s->ext->flags, DLBN_EXTENT_FINAL, __ATOMIC_RELEASE);
}

static void stream_thread_exit(void *arg)
{
	struct stream *s = arg;
	if (s != &tls_stream || s->gen != the_session.gen)
		return;
	stream_set_final(s);
	stream_release_mapping(s);
	s->closed = true;
}

static bool extent_next(struct stream *s)
{
	off_t off;
	uint8_t *m = session_new_extent(&off);
	if (!m)
		return false;
	stream_release_mapping(s);
	struct dlbn_extent_header *h = (struct dlbn_extent_header *)m;
	h->committed = 0;
	h->proc_id = the_session.proc_id;
	h->thread_no = s->thread_no;
	h->extent_seq = s->seq++;
	h->pid = (uint32_t)the_session.pid;
	h->tid = (uint32_t)gettid();
	h->flags = 0;
	h->base_ns = s->last_ns;
	h->commit = dlbn_commit_word(0, 0, 0); /* the CRC-32C of nothing is 0 */
	h->header_crc = dlbn_extent_header_crc(h);
	__atomic_store_n(&h->magic, DLBN_EXTENT_MAGIC, __ATOMIC_RELEASE);
	s->ext = h;
	s->data = m + DLBN_EXTENT_HEADER_SIZE;
	s->used = 0;
	s->crc = DLBN_CRC32C_INIT;
	s->final = false;
	s->cap = the_session.extent_size - DLBN_EXTENT_HEADER_SIZE;
	s->file_off = off;
	s->allocated = the_session.extent_size < SESSION_FIRST_STEP ? the_session.extent_size
								    : SESSION_FIRST_STEP;
	for (unsigned k = 0; k < DLBN_FD_SLOTS; k++)
		s->fd_said[k].fd = -1;
	s->fd_ino = 0;
	memset(s->sem_said, 0, sizeof(s->sem_said));
	s->open_count = 0;
	s->open_ino = 0;
	s->mark_iter = s->mark_arg = 0;
	s->mark_t = s->last_ns;
	memset(s->mark_counters, 0, sizeof(s->mark_counters));
	s->stack_len = 0;
	return true;
}

/* Make sure `end` bytes of the extent (header included) are on disk. */
static bool extent_reserve(struct stream *s, size_t end)
{
	uint32_t size = the_session.extent_size;
	if (end > size)
		end = size;
	uint32_t want = s->allocated;
	while (want < end)
		want = want + SESSION_GROW_STEP < size ? want + SESSION_GROW_STEP : size;
	if (session_grow_extent(s->file_off + s->allocated, want - s->allocated) != 0)
		return false;
	s->allocated = want;
	return true;
}

static bool stream_open(struct stream *s, uint64_t t_ns)
{
	if (s->closed && s->gen == the_session.gen)
		return false;
	s->ext = NULL;
	s->data = NULL;
	s->closed = false;
	s->seq = 0;
	s->last_ns = t_ns;
	s->gen = __atomic_load_n(&the_session.gen, __ATOMIC_ACQUIRE);
	s->thread_no = __atomic_fetch_add(&the_session.next_thread_no, 1, __ATOMIC_RELAXED);
	if (!extent_next(s))
		return false;
	if (stream_key_ok)
		pthread_setspecific(stream_key, s);
	if (s->thread_no == 0)
		recorder_emit_process(t_ns);
	pid_t tid = gettid();
	int64_t f[2] = {tid, tid == the_session.pid};
	rec_emit(DLBN_REC_THREAD, t_ns, f, 2);
	return true;
}

void tw_init(void)
{
	dlbn_crc32c_init();
	stream_key_ok = pthread_key_create(&stream_key, stream_thread_exit) == 0;
}

void tw_open_stream(uint64_t t_ns)
{
	struct stream *s = &tls_stream;
	if (recorder_on() && (s->gen != the_session.gen || !s->ext))
		stream_open(s, t_ns);
}

/* tw_begin and tw_commit, inline in the rec_emit family: the record path
 * of every hook.  record_room: the calling thread's stream with `need`
 * bytes of room in its extent, or NULL (recorder off, no stream, no disk). */
static inline struct stream *record_room(uint64_t t_ns, size_t need)
{
	struct stream *s = &tls_stream;
	if (!recorder_on())
		return NULL;
	if (DLBN_UNLIKELY(s->gen != the_session.gen || !s->ext) && !stream_open(s, t_ns))
		return NULL;
	if (DLBN_UNLIKELY(s->used + need > s->cap)) {
		if (need > s->cap || !extent_next(s))
			return NULL;
	}
	if (DLBN_UNLIKELY(DLBN_EXTENT_HEADER_SIZE + s->used + need > s->allocated) &&
	    !extent_reserve(s, DLBN_EXTENT_HEADER_SIZE + s->used + need))
		return NULL;
	return s;
}

/* [type, dt: the array of a record of nelem fields, at p. */
static inline uint8_t *record_head(struct stream *s, uint8_t *p, uint8_t type, uint64_t t_ns,
				   unsigned nelem)
{
	p = mp_array(p, nelem + 2);
	p = mp_int(p, type);
	p = mp_int(p, (int64_t)(t_ns - s->last_ns));
	s->last_ns = t_ns;
	return p;
}

#define RECORD_HEAD_MAX (3 + 1 + MP_INT_MAX)

static inline uint8_t *record_begin(uint8_t type, uint64_t t_ns, unsigned nelem, size_t bound)
{
	struct stream *s = record_room(t_ns, RECORD_HEAD_MAX + bound);
	return s ? record_head(s, s->data + s->used, type, t_ns, nelem) : NULL;
}

static inline void record_commit(uint8_t *end)
{
	struct stream *s = &tls_stream;
	uint32_t used = (uint32_t)(end - s->data);
	s->crc = dlbn_crc32c_update(s->crc, s->data + s->used, used - s->used);
	s->used = used;
	stream_publish(s);
}

uint8_t *tw_begin(uint8_t type, uint64_t t_ns, unsigned nelem, size_t bound)
{
	return record_begin(type, t_ns, nelem, bound);
}

void tw_commit(uint8_t *end)
{
	record_commit(end);
}

void tw_mark_final(void)
{
	struct stream *s = &tls_stream;
	if (s->gen == the_session.gen)
		stream_set_final(s);
}

void tw_note_passive(int err)
{
	struct dlbn_file_header *h = the_session.hdr;
	if (!h)
		return;
	uint32_t slot = __atomic_fetch_add(&h->passive_count, 1, __ATOMIC_RELAXED);
	if (slot >= DLBN_MAX_PASSIVE)
		return;
	struct dlbn_passive_entry *e = &h->passive[slot];
	e->proc_id = the_session.proc_id;
	e->pid = (uint32_t)the_session.pid;
	e->t_ns = clock_now_ns();
	__atomic_store_n(&e->err, err ? err : -1, __ATOMIC_RELEASE);
}

void tw_fork_child(void)
{
	/* The inherited extent is the parent's: unmap our copy, never write it. */
	stream_release_mapping(&tls_stream);
	tls_stream.closed = false;
	tls_stream.gen = 0;
}

/* Wrapping difference a - b: the reader adds it back modulo 2^64. */
static inline int64_t wrap_diff(int64_t a, int64_t b)
{
	return (int64_t)((uint64_t)a - (uint64_t)b);
}

/* [type, dt, fields...] at p in s, whose room the caller took; committed
 * with whatever the caller wrote before it from s->data + s->used. */
static inline void record_ints(struct stream *s, uint8_t *p, uint8_t type, uint64_t t_ns,
			       const int64_t *fields, unsigned n)
{
	p = record_head(s, p, type, t_ns, n);
	for (unsigned i = 0; i < n; i++)
		p = mp_int(p, fields[i]);
	record_commit(p);
}

void rec_emit(uint8_t type, uint64_t t_ns, const int64_t *fields, unsigned n)
{
	struct stream *s = record_room(t_ns, RECORD_HEAD_MAX + (size_t)n * MP_INT_MAX);
	if (s)
		record_ints(s, s->data + s->used, type, t_ns, fields, n);
}

void rec_emit_fd(uint8_t type, uint64_t t_ns, int fd, unsigned kind, int64_t ino,
		 const int64_t *fields, unsigned n)
{
	struct stream *s = record_room(t_ns, 2 * RECORD_HEAD_MAX + (3 + (size_t)n) * MP_INT_MAX);
	if (!s)
		return;
	uint8_t *p = s->data + s->used;
	struct fd_said *said = &s->fd_said[(unsigned)fd % DLBN_FD_SLOTS];
	if (DLBN_UNLIKELY(said->fd != fd || said->kind != kind || said->ino != ino)) {
		p = record_head(s, p, DLBN_REC_FD, t_ns, 3);
		p = mp_int(p, fd);
		p = mp_int(p, kind);
		p = mp_int(p, wrap_diff(ino, s->fd_ino));
		*said = (struct fd_said){fd, kind, ino};
		s->fd_ino = ino;
	}
	record_ints(s, p, type, t_ns, fields, n);
}

void rec_emit_sem(uint8_t type, uint64_t t_ns, int64_t *fields, unsigned n, unsigned sem_at)
{
	struct stream *s = record_room(t_ns, 2 * RECORD_HEAD_MAX + (2 + (size_t)n) * MP_INT_MAX);
	if (!s)
		return;
	uint8_t *p = s->data + s->used;
	uint64_t sem = (uint64_t)fields[sem_at];
	/* Every bit of the address picks the slot: the DataLoader's queues
	 * have semaphores at the same offset of mappings 128 MiB apart. */
	unsigned slot = (unsigned)(((sem >> 5) * 0x9e3779b97f4a7c15ull) >> 60) % DLBN_SEM_SLOTS;
	if (DLBN_UNLIKELY(s->sem_said[slot] != sem)) {
		p = record_head(s, p, DLBN_REC_SEM, t_ns, 2);
		p = mp_int(p, slot);
		p = mp_int(p, (int64_t)sem);
		s->sem_said[slot] = sem;
	}
	fields[sem_at] = slot;
	record_ints(s, p, type, t_ns, fields, n);
}

void rec_emit_str(uint8_t type, uint64_t t_ns, const int64_t *fields, unsigned n, const char *str,
		  size_t len)
{
	if (len > TW_STR_MAX)
		len = TW_STR_MAX;
	uint8_t *p = record_begin(type, t_ns, n + 1, (size_t)n * MP_INT_MAX + MP_STR_HDR_MAX + len);
	if (!p)
		return;
	for (unsigned i = 0; i < n; i++)
		p = mp_int(p, fields[i]);
	p = mp_str(p, str, len);
	record_commit(p);
}

/*
 * A MARK writes its iter_id and arg as differences from the extent's
 * previous MARK's, and the loop's counters, where it has them, each as its
 * difference from the extent's previous MARK with counters, only those
 * that are not 0, behind a bit mask that is left out when only run_ns
 * moved (dlbn_trace.h, MARK): a fetch mark's counters mostly stand
 * still.  run_ns moves with the wall clock while the loop runs, so what
 * is written for it is the wall time it did not run.
 */
void rec_emit_mark(uint64_t t_ns, const int64_t *fields, unsigned n)
{
	int counters = n == 3 + DLBN_MARK_COUNTERS;
	struct stream *s = record_room(t_ns, RECORD_HEAD_MAX + (4 + (size_t)n) * MP_INT_MAX);
	if (!s)
		return;
	int64_t d[DLBN_MARK_COUNTERS];
	unsigned present = 0, nd = 0;
	for (unsigned i = 0; counters && i < DLBN_MARK_COUNTERS; i++) {
		const int64_t c = fields[3 + i];
		int64_t v = wrap_diff(c, s->mark_counters[i]);
		if (i == 0)
			v = wrap_diff((int64_t)(t_ns - s->mark_t), v);
		if (v) {
			present |= 1u << i;
			d[nd++] = v;
		}
		s->mark_counters[i] = c;
	}
	int mask = counters && present > 1;
	if (counters && !mask) { /* only run_ns moved, or nothing: no mask */
		if (!nd)
			d[0] = 0;
		nd = 1;
	}
	if (counters)
		s->mark_t = t_ns;
	uint8_t *p = record_head(s, s->data + s->used, DLBN_REC_MARK, t_ns, 3 + mask + nd);
	p = mp_int(p, fields[0]);
	p = mp_int(p, wrap_diff(fields[1], s->mark_iter));
	p = mp_int(p, wrap_diff(fields[2], s->mark_arg));
	if (mask)
		p = mp_int(p, present);
	for (unsigned i = 0; i < nd; i++)
		p = mp_int(p, d[i]);
	record_commit(p);
	s->mark_iter = fields[1];
	s->mark_arg = fields[2];
}

/* Bytes a and b have in common from their start (forward) or counted from
 * their ends (backward), of at most `most`: eight at a time, an OPEN's
 * path is compared with each of the 16 kept. */
static size_t common_start(const char *a, const char *b, size_t most)
{
	size_t n = 0;
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
	for (; n + 8 <= most; n += 8) {
		uint64_t x, y;
		memcpy(&x, a + n, 8);
		memcpy(&y, b + n, 8);
		if (x != y)
			return n + (size_t)(__builtin_ctzll(x ^ y) >> 3);
	}
#endif
	while (n < most && a[n] == b[n])
		n++;
	return n;
}

static size_t common_end(const char *a_end, const char *b_end, size_t most)
{
	size_t m = 0;
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
	for (; m + 8 <= most; m += 8) {
		uint64_t x, y;
		memcpy(&x, a_end - m - 8, 8);
		memcpy(&y, b_end - m - 8, 8);
		if (x != y)
			return m + (size_t)(__builtin_clzll(x ^ y) >> 3);
	}
#endif
	while (m < most && a_end[-1 - (ptrdiff_t)m] == b_end[-1 - (ptrdiff_t)m])
		m++;
	return m;
}

/* How many bytes path shares with a kept one at its start (front) and
 * then at its end (back), never splitting a UTF-8 character: what is left
 * stays a string a strict decoder takes. */
static void open_path_shared(const struct open_path *kept, const char *path, size_t len,
			     size_t *front, size_t *back)
{
	size_t most = len < kept->len ? len : kept->len;
	size_t n = common_start(path, kept->text, most), m = 0;
	while (n > 0 && n < len && ((unsigned char)path[n] & 0xc0) == 0x80)
		n--;
	if (kept->whole) {
		m = common_end(path + len, kept->text + kept->len, most - n);
		while (m > 0 && ((unsigned char)path[len - m] & 0xc0) == 0x80)
			m--;
	}
	*front = n;
	*back = m;
}

/* The kept path an OPEN's path shares most with: its age (0: the newest)
 * and the bytes shared at both ends.  An older one costs its age's byte. */
static unsigned open_path_best(const struct stream *s, const char *path, size_t len, size_t *front,
			       size_t *back)
{
	unsigned best = 0;
	size_t best_saved = 0;
	*front = *back = 0;
	for (unsigned age = 0; age < s->open_count; age++) {
		const struct open_path *kept =
			&s->open_paths[(s->open_newest + OPEN_PATHS - age) % OPEN_PATHS];
		size_t n, m;
		if ((kept->len < len ? kept->len : len) <= best_saved)
			continue; /* it cannot share more */
		open_path_shared(kept, path, len, &n, &m);
		size_t saved = n + m > 0 && age ? n + m - 1 : n + m;
		if (saved > best_saved) {
			best = age;
			best_saved = saved;
			*front = n;
			*back = m;
		}
	}
	return best;
}

static void open_path_keep(struct stream *s, const char *path, size_t len)
{
	s->open_newest = (s->open_newest + 1) % OPEN_PATHS;
	if (s->open_count < OPEN_PATHS)
		s->open_count++;
	struct open_path *kept = &s->open_paths[s->open_newest];
	kept->len = (uint32_t)(len < OPEN_PATH_KEPT ? len : OPEN_PATH_KEPT);
	kept->whole = len <= OPEN_PATH_KEPT;
	if (kept->len)
		memcpy(kept->text, path, kept->len);
}

void rec_emit_open(uint64_t t_ns, int fd, unsigned kind, int64_t ino, int64_t flags,
		   const char *path, size_t len)
{
	if (!path)
		len = 0;
	if (len > TW_STR_MAX)
		len = TW_STR_MAX;
	struct stream *s =
		record_room(t_ns, RECORD_HEAD_MAX + 7 * MP_INT_MAX + MP_STR_HDR_MAX + len);
	if (!s)
		return;
	/* What the path shares with one of the extent's recent OPENs, its
	 * inode as a difference from the previous OPEN's, and its flags
	 * against the usual O_CLOEXEC are left out (dlbn_trace.h, OPEN). */
	size_t front, back;
	unsigned age = open_path_best(s, path, len, &front, &back);
	/* shared, tail and age: only as far as needed */
	unsigned nelem = age ? 8 : back ? 7 : front ? 6 : 5;
	uint8_t *p = record_head(s, s->data + s->used, DLBN_REC_OPEN, t_ns, nelem);
	p = mp_int(p, fd);
	p = mp_int(p, kind);
	p = mp_int(p, wrap_diff(ino, s->open_ino));
	p = mp_int(p, flags ^ DLBN_OPEN_FLAGS_USUAL);
	p = mp_str(p, path ? path + front : NULL, len - front - back);
	if (nelem > 5)
		p = mp_int(p, (int64_t)front);
	if (nelem > 6)
		p = mp_int(p, (int64_t)back);
	if (nelem > 7)
		p = mp_int(p, (int64_t)age);
	record_commit(p);
	/* The OPEN announces its fd as well. */
	if (fd >= 0)
		s->fd_said[(unsigned)fd % DLBN_FD_SLOTS] = (struct fd_said){fd, kind, ino};
	s->open_ino = ino;
	open_path_keep(s, path, len);
}

void rec_emit_stack(uint64_t t_ns, const int64_t *fields, unsigned n, const int64_t *frames,
		    unsigned nframes)
{
	struct stream *s =
		record_room(t_ns, RECORD_HEAD_MAX + (size_t)(n + 1 + nframes) * MP_INT_MAX + 3);
	if (!s)
		return;
	/* The outer frames it shares with the extent's previous STACK are
	 * left out (dlbn_trace.h, STACK): waits of one loop share most. */
	unsigned shared = 0;
	if (nframes <= STACK_KEPT)
		while (shared < nframes && shared < s->stack_len &&
		       frames[nframes - 1 - shared] == s->stack[s->stack_len - 1 - shared])
			shared++;
	uint8_t *p = record_head(s, s->data + s->used, DLBN_REC_STACK, t_ns, n + 1 + (shared > 0));
	for (unsigned i = 0; i < n; i++)
		p = mp_int(p, fields[i]);
	p = mp_array(p, nframes - shared);
	for (unsigned i = 0; i < nframes - shared; i++)
		p = mp_int(p, frames[i]);
	if (shared)
		p = mp_int(p, shared);
	record_commit(p);
	s->stack_len = nframes <= STACK_KEPT ? nframes : 0;
	memcpy(s->stack, frames, s->stack_len * sizeof(*frames));
}

void rec_emit_list(uint8_t type, uint64_t t_ns, const int64_t *fields, unsigned n,
		   const int64_t *list, unsigned nlist)
{
	if (nlist > 4096)
		nlist = 4096;
	uint8_t *p = record_begin(type, t_ns, n + 1, (size_t)(n + nlist) * MP_INT_MAX + 3);
	if (!p)
		return;
	for (unsigned i = 0; i < n; i++)
		p = mp_int(p, fields[i]);
	p = mp_array(p, nlist);
	for (unsigned i = 0; i < nlist; i++)
		p = mp_int(p, list[i]);
	record_commit(p);
}
