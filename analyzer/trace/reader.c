/*
 * reader.c - streaming trace reader: extent scan, per-stream buffered
 * decoding, k-way merge by timestamp (see reader.h for the contract).
 *
 * The records are decoded by decode.c; the format 1.1 checks of each
 * extent are extent_check.c's, and what a 2.0 or later extent says once
 * for its records is put back into them by extent_state.c.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "trace/reader.h"
#include "dlbn/crc32c.h"
#include "trace/extent_check.h"
#include "trace/extent_state.h"
#include "util/lines.h"
#include "util/progress.h"

#define STREAM_BUF_INIT (32u * 1024u)
#define STREAM_BUF_MAX	(64u * 1024u * 1024u) /* a record larger than this is corrupt */
#define MAP_DROP_STEP	(128u * 1024u)	      /* decoded bytes of a mapped extent kept resident */

/* One initialised extent, as found by the scan. */
struct ext_ref {
	uint64_t offset; /* file offset of the extent header */
	uint32_t proc_id, thread_no, seq;
	uint32_t pid, tid, flags;
	uint32_t avail; /* committed bytes actually present in the file */
	uint64_t base_ns;
	int dropped;	  /* failed its checks: its records are not handed out */
	int cut;	  /* the file ends inside its committed bytes */
	int loss;	  /* st.losses entry describing this extent, -1 */
	int loss_after;	  /* st.losses entry whose t_from is this extent's last record */
	int64_t fix_off;  /* repaired bit: byte offset in the records, -1 none */
	uint8_t fix_mask; /* ... and the bit to flip back */
	int decoded;	  /* decoded to its end once: its damage is counted */
};

struct stream {
	struct dlbn_stream_info info;
	struct ext_ref *ext; /* this stream's extents, by seq (slice of r->exts) */
	struct ext_ref *cur; /* extent being decoded */
	size_t next_ext, n_ext;
	int in_ext;
	uint64_t ext_off;  /* file offset of the first byte not yet buffered */
	uint64_t ext_left; /* committed bytes of the extent not yet buffered */
	/*
	 * The records being decoded, data[pos..len): the current extent
	 * mapped (map), or else what pread() put in buf.  Invariant: data is
	 * map + map_lead or buf.
	 */
	const uint8_t *data;
	uint8_t *buf;
	uint8_t *map;
	size_t map_len, map_lead, map_dropped;
	size_t cap, pos, len;
	int64_t t_prev;
	struct dlbn_record head;
	struct extent_state said; /* format 2.0 and later */
};

/*
 * A merge heap entry: the stream's head time kept beside its index, so that
 * sifting compares within the heap's own cache lines instead of reaching
 * into each stream.  Invariant: heap[k].t == streams[heap[k].stream].head.t_ns.
 */
struct heap_ent {
	int64_t t;
	size_t stream;
};

struct dlbn_reader {
	int fd;
	char *path;
	uint32_t header_size;
	struct dlbn_reader_stats st;
	struct ext_ref *exts;
	size_t n_exts;
	struct stream *streams;
	size_t n_streams;
	struct heap_ent *heap; /* the streams with a head, min-heap on t */
	size_t heap_n;
	ssize_t pending;    /* stream whose head was handed out, advanced lazily */
	unsigned passes;    /* rewinds since open: the pass being read (0: none yet, read as 1) */
	uint8_t *check_buf; /* DLBN_CHECK_BUF bytes while scanning */
	uint64_t committed; /* record bytes of every extent: one pass reads them */
	size_t page;	    /* mapping granularity; 0: the file cannot be mapped */
	/* Where the trace's records leave out fields an extent says once
	 * (format 2.0 and later, extent_state.c); NULL: none do (1.x). */
	const struct dlbn_field_gap *gaps;
	uint64_t pass_read; /* record bytes this pass has read (progress line) */
	unsigned flags;	    /* DLBN_READER_* of dlbn_reader_open_flags */
};

static void stream_unmap(struct stream *s);

/* Every warning is counted; the first DLBN_READER_MAX_WARN are kept. */
static void warn(struct dlbn_reader *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void warn(struct dlbn_reader *r, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	dlbn_lines_vadd(DLBN_LINES(r->st.warnings), r->st.nwarnings, fmt, ap);
	va_end(ap);
	r->st.nwarnings++;
}

/* ---- opening and scanning --------------------------------------------- */

static int ext_cmp(const void *a, const void *b)
{
	const struct ext_ref *x = a, *y = b;
	if (x->proc_id != y->proc_id)
		return x->proc_id < y->proc_id ? -1 : 1;
	if (x->thread_no != y->thread_no)
		return x->thread_no < y->thread_no ? -1 : 1;
	if (x->seq != y->seq)
		return x->seq < y->seq ? -1 : 1;
	return x->offset < y->offset ? -1 : (x->offset > y->offset);
}

static int add_loss(struct dlbn_reader *r, int kind, const struct ext_ref *e, uint64_t extents,
		    uint64_t bytes, int64_t t_from, int64_t t_to)
{
	unsigned i = r->st.nlosses++;
	if (i >= DLBN_READER_MAX_LOSS)
		return -1;
	struct dlbn_loss *l = &r->st.losses[i];
	*l = (struct dlbn_loss){
		.kind = kind, .extents = extents, .bytes = bytes, .t_from = t_from, .t_to = t_to};
	if (e) {
		l->known_stream = 1;
		l->proc_id = e->proc_id;
		l->thread_no = e->thread_no;
		l->pid = e->pid;
		l->tid = e->tid;
	}
	return (int)i;
}

static int64_t base_time(uint64_t base_ns)
{
	return base_ns > (uint64_t)DLBN_TIME_LIMIT ? DLBN_TIME_LIMIT : (int64_t)base_ns;
}

static int check_header(struct dlbn_reader *r, char *err, size_t errlen)
{
	struct dlbn_file_header h;
	struct stat sb;

	if (fstat(r->fd, &sb) != 0) {
		snprintf(err, errlen, "%s: cannot stat: %s", r->path, strerror(errno));
		return -1;
	}
	r->st.file_size = (uint64_t)sb.st_size;
	if (S_ISREG(sb.st_mode) && !(r->flags & DLBN_READER_PREAD)) {
		long pg = sysconf(_SC_PAGESIZE);
		r->page = pg > 0 ? (size_t)pg : 4096;
	}
	if (sb.st_size == 0) {
		snprintf(err, errlen, "%s: empty file, not a dlbn trace", r->path);
		return -1;
	}
	memset(&h, 0, sizeof(h));
	ssize_t got = pread(r->fd, &h, sizeof(h), 0);
	if (got < 0) {
		snprintf(err, errlen, "%s: cannot read: %s", r->path, strerror(errno));
		return -1;
	}
	if ((size_t)got < sizeof(h.magic) || memcmp(h.magic, DLBN_FILE_MAGIC, 8) != 0) {
		snprintf(err, errlen, "%s: not a dlbn trace (bad magic)", r->path);
		return -1;
	}
	if ((size_t)got < offsetof(struct dlbn_file_header, passive_count)) {
		snprintf(err, errlen,
			 "%s: truncated dlbn trace: %zd bytes, shorter than its header", r->path,
			 got);
		return -1;
	}
	if (h.version_major < DLBN_VERSION_MAJOR_MIN || h.version_major > DLBN_VERSION_MAJOR) {
		snprintf(err, errlen,
			 "%s: trace format version %u.%u is not supported (this dlbn-analyze reads "
			 "versions %u.x to %u.x)",
			 r->path, (unsigned)h.version_major, (unsigned)h.version_minor,
			 (unsigned)DLBN_VERSION_MAJOR_MIN, (unsigned)DLBN_VERSION_MAJOR);
		return -1;
	}
	if (h.header_size < sizeof(h) || h.header_size > (1u << 20) ||
	    h.extent_size < 2 * DLBN_EXTENT_HEADER_SIZE || h.extent_size > (1u << 30)) {
		snprintf(err, errlen,
			 "%s: corrupt dlbn trace header (header_size %u, extent_size %u)", r->path,
			 h.header_size, h.extent_size);
		return -1;
	}
	r->header_size = h.header_size;
	r->st.version_major = h.version_major;
	r->gaps = h.version_major >= 2 ? extent_fd_gaps : NULL;
	r->st.version_minor = h.version_minor;
	r->st.checked = h.version_major > 1 || h.version_minor >= 1;
	r->st.extent_size = h.extent_size;
	r->st.file_flags = h.flags;
	r->st.extents_announced = h.next_extent;
	r->st.created_monotonic_ns = h.created_monotonic_ns;
	r->st.created_realtime_ns = h.created_realtime_ns;
	memcpy(r->st.host, h.host, sizeof(h.host));
	r->st.host[64] = 0;
	if (!r->st.checked)
		warn(r,
		     "trace format %u.%u carries no checksums: damage inside its records may go "
		     "unnoticed",
		     (unsigned)h.version_major, (unsigned)h.version_minor);
	/* The passive table: a short file (cut inside the header) has zeros. */
	r->st.passive_count = h.passive_count;
	uint32_t n = h.passive_count < DLBN_MAX_PASSIVE ? h.passive_count : DLBN_MAX_PASSIVE;
	for (uint32_t i = 0; i < n; i++)
		if (h.passive[i].err != 0)
			r->st.passive[r->st.npassive++] = h.passive[i];
	if ((size_t)got < sizeof(h) && (uint64_t)got < r->header_size)
		r->st.truncated = 1;
	return 0;
}

static void header_loss(struct dlbn_reader *r, uint64_t slot, const char *what)
{
	r->st.extents_bad_header++;
	add_loss(r, DLBN_LOSS_HEADER, NULL, 1, 0, DLBN_LOSS_T_UNKNOWN, DLBN_LOSS_T_UNKNOWN);
	warn(r, "extent %llu: damaged %s; its records are lost", (unsigned long long)slot, what);
}

/* Read one extent header; returns 1 if it takes part in its stream, 0 if not. */
static int scan_extent(struct dlbn_reader *r, uint64_t slot, struct ext_ref *out)
{
	struct dlbn_extent_header eh;
	uint64_t off = r->header_size + slot * (uint64_t)r->st.extent_size;
	ssize_t got = pread(r->fd, &eh, sizeof(eh), (off_t)off);
	int repaired;

	if (got != (ssize_t)sizeof(eh))
		return 0;
	/* Never initialised: magic 0 (in a 1.0 trace anything but the magic). */
	if (eh.magic == 0 || (eh.magic != DLBN_EXTENT_MAGIC && !r->st.checked)) {
		if (slot < r->st.extents_announced)
			r->st.extents_uninit++;
		return 0;
	}
	if (r->st.checked) {
		if (!dlbn_extent_check_header(&eh, &repaired)) {
			header_loss(r, slot,
				    eh.magic != DLBN_EXTENT_MAGIC ? "magic" : "header (CRC)");
			return 0;
		}
		if (repaired) {
			r->st.extents_repaired++;
			warn(r, "extent %llu: flipped bit in its header, repaired",
			     (unsigned long long)slot);
		}
	}
	uint32_t room = r->st.extent_size - DLBN_EXTENT_HEADER_SIZE;
	uint64_t data_off = off + DLBN_EXTENT_HEADER_SIZE;
	*out = (struct ext_ref){.offset = off,
				.proc_id = eh.proc_id,
				.thread_no = eh.thread_no,
				.seq = eh.extent_seq,
				.pid = eh.pid,
				.tid = eh.tid,
				.flags = eh.flags,
				.base_ns = eh.base_ns,
				.loss = -1,
				.loss_after = -1,
				.fix_off = -1};
	uint32_t committed = eh.committed;
	if (r->st.checked) {
		struct dlbn_extent_check c;
		if (!dlbn_extent_check_records(r->fd, r->st.file_size, &eh, data_off, room,
					       r->check_buf, &c)) {
			out->dropped = 1;
			r->st.extents_corrupt++;
			uint32_t len = (uint32_t)eh.commit & DLBN_COMMIT_LEN_MASK;
			out->loss = add_loss(r, DLBN_LOSS_CORRUPT, out, 1, len <= room ? len : 0,
					     base_time(eh.base_ns), DLBN_LOSS_T_UNKNOWN);
			warn(r, "stream %u/%u (pid %u) extent %u: records fail their CRC; dropped",
			     eh.proc_id, eh.thread_no, eh.pid, eh.extent_seq);
			return 1;
		}
		committed = c.committed;
		out->flags = c.final ? DLBN_EXTENT_FINAL : 0;
		out->fix_off = c.fix_off;
		out->fix_mask = c.fix_mask;
		if (c.repaired) {
			static const char *const where[] = {"", "header", "commit word", "CRC",
							    "records"};
			r->st.extents_repaired++;
			warn(r, "stream %u/%u (pid %u) extent %u: flipped bit in its %s, repaired",
			     eh.proc_id, eh.thread_no, eh.pid, eh.extent_seq, where[c.repaired]);
		}
	} else if (committed > room) {
		warn(r, "extent %llu: committed %u exceeds the extent; read up to its end",
		     (unsigned long long)slot, committed);
		r->st.extents_corrupt++;
		committed = room;
	}
	uint64_t present = r->st.file_size > data_off ? r->st.file_size - data_off : 0;
	if (committed > present) {
		r->st.extents_cut++;
		r->st.truncated = 1;
		out->cut = 1;
		out->loss = out->loss_after =
			add_loss(r, DLBN_LOSS_CUT, out, 1, committed - present,
				 base_time(eh.base_ns), DLBN_LOSS_T_UNKNOWN);
		committed = (uint32_t)present;
	}
	out->avail = committed;
	r->st.bytes += committed;
	return 1;
}

static int scan_extents(struct dlbn_reader *r)
{
	uint64_t body = r->st.file_size > r->header_size ? r->st.file_size - r->header_size : 0;
	uint64_t slots = body / r->st.extent_size;
	if (body % r->st.extent_size >= DLBN_EXTENT_HEADER_SIZE)
		slots++; /* a partial last extent: its header may still be there */
	r->st.extents = slots;
	if (r->st.extents_announced > slots) {
		/* Extents are handed out, then the file grows over them: the file
		 * holds every one handed out unless it was cut (or a process
		 * stopped recording before growing it: see passive). */
		r->st.extents_missing = r->st.extents_announced - slots;
		r->st.truncated = 1;
		add_loss(r, DLBN_LOSS_MISSING, NULL, r->st.extents_missing, 0, DLBN_LOSS_T_UNKNOWN,
			 DLBN_LOSS_T_UNKNOWN);
		warn(r,
		     "trace truncated: the file header announces %llu extents, the file holds "
		     "%llu",
		     (unsigned long long)r->st.extents_announced, (unsigned long long)slots);
	}
	r->exts = calloc(slots ? slots : 1, sizeof(*r->exts));
	r->check_buf = malloc(DLBN_CHECK_BUF);
	if (!r->exts || !r->check_buf)
		return -1;
	for (uint64_t s = 0; s < slots; s++)
		if (scan_extent(r, s, &r->exts[r->n_exts]))
			r->committed += r->exts[r->n_exts++].avail;
	free(r->check_buf);
	r->check_buf = NULL;
	if (r->st.extents_uninit)
		warn(r, "%llu extent(s) allocated but never initialised (process died?); skipped",
		     (unsigned long long)r->st.extents_uninit);
	if (r->st.extents_cut)
		warn(r, "trace truncated: %llu extent(s) cut by the end of the file",
		     (unsigned long long)r->st.extents_cut);
	qsort(r->exts, r->n_exts, sizeof(*r->exts), ext_cmp);
	return 0;
}

/* Extents missing before exts[k] of its stream (first: the stream's first). */
static void note_gap(struct dlbn_reader *r, struct ext_ref *prev, struct ext_ref *e,
		     uint32_t missing)
{
	r->st.seq_gaps++;
	int i = add_loss(r, DLBN_LOSS_GAP, e, missing, 0,
			 prev ? base_time(prev->base_ns) : DLBN_LOSS_T_UNKNOWN,
			 base_time(e->base_ns));
	if (prev && !prev->dropped && prev->loss_after < 0)
		prev->loss_after = i; /* from its last record, once decoded */
}

static int build_streams(struct dlbn_reader *r)
{
	r->streams = calloc(r->n_exts ? r->n_exts : 1, sizeof(*r->streams));
	r->heap = calloc(r->n_exts ? r->n_exts : 1, sizeof(*r->heap));
	if (!r->streams || !r->heap)
		return -1;
	for (size_t i = 0; i < r->n_exts;) {
		size_t j = i + 1;
		while (j < r->n_exts && r->exts[j].proc_id == r->exts[i].proc_id &&
		       r->exts[j].thread_no == r->exts[i].thread_no)
			j++;
		struct stream *s = &r->streams[r->n_streams++];
		s->info = (struct dlbn_stream_info){.proc_id = r->exts[i].proc_id,
						    .thread_no = r->exts[i].thread_no,
						    .pid = r->exts[i].pid,
						    .tid = r->exts[i].tid,
						    .index = (uint32_t)r->n_streams - 1};
		s->ext = &r->exts[i];
		s->n_ext = j - i;
		if (r->exts[i].seq != 0)
			note_gap(r, NULL, &r->exts[i], r->exts[i].seq);
		for (size_t k = i + 1; k < j; k++) {
			struct ext_ref *p = &r->exts[k - 1], *e = &r->exts[k];
			/* A dropped extent's records end where the next one starts. */
			if (p->dropped && p->loss >= 0 && p->loss < DLBN_READER_MAX_LOSS)
				r->st.losses[p->loss].t_to = base_time(e->base_ns);
			if (e->seq == p->seq) {
				warn(r, "stream %u/%u: extent_seq %u appears twice",
				     s->info.proc_id, s->info.thread_no, e->seq);
				if (r->st.checked) {
					/* Both passed their CRCs: a recorder bug, not a
					 * flipped bit; the later copy is dropped. */
					e->dropped = 1;
					r->st.extents_corrupt++;
					e->loss = add_loss(r, DLBN_LOSS_CORRUPT, e, 1, e->avail,
							   base_time(e->base_ns),
							   DLBN_LOSS_T_UNKNOWN);
				}
			} else if (e->seq != p->seq + 1) {
				note_gap(r, p, e, e->seq - p->seq - 1);
			}
		}
		s->cap = STREAM_BUF_INIT;
		i = j;
	}
	r->st.streams = r->n_streams;
	if (r->st.seq_gaps)
		warn(r, "%llu gap(s) in extent sequences (lost extents); records resume after them",
		     (unsigned long long)r->st.seq_gaps);
	return 0;
}

int dlbn_reader_cut_short(const struct dlbn_reader_stats *rs)
{
	return (rs->file_flags & DLBN_FILE_PASSIVE) || rs->passive_count > 0;
}

int dlbn_reader_damaged(const struct dlbn_reader_stats *rs)
{
	return rs->truncated || rs->extents_corrupt || rs->extents_bad_header ||
	       rs->extents_repaired || rs->extents_missing || rs->seq_gaps || rs->nlosses ||
	       dlbn_reader_cut_short(rs);
}

struct dlbn_reader *dlbn_reader_open(const char *path, char *err, size_t errlen)
{
	return dlbn_reader_open_flags(path, 0, err, errlen);
}

struct dlbn_reader *dlbn_reader_open_flags(const char *path, unsigned flags, char *err,
					   size_t errlen)
{
	struct dlbn_reader *r = calloc(1, sizeof(*r));
	if (!r) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	const char *no_map = getenv("DLBN_NO_MMAP");
	r->flags = flags | (no_map && *no_map && strcmp(no_map, "0") != 0 ? DLBN_READER_PREAD : 0);
	r->path = strdup(path);
	r->fd = open(path, O_RDONLY | O_CLOEXEC);
	if (r->fd < 0) {
		snprintf(err, errlen, "%s: cannot open: %s", path, strerror(errno));
		dlbn_reader_close(r);
		return NULL;
	}
	dlbn_crc32c_init();
	if (check_header(r, err, errlen) != 0) {
		dlbn_reader_close(r);
		return NULL;
	}
	if (scan_extents(r) != 0 || build_streams(r) != 0) {
		snprintf(err, errlen, "%s: out of memory while scanning", path);
		dlbn_reader_close(r);
		return NULL;
	}
	dlbn_reader_rewind(r);
	r->passes = 0; /* priming the streams is not a pass: a reader's first rewind begins one */
	return r;
}

void dlbn_reader_close(struct dlbn_reader *r)
{
	if (!r)
		return;
	if (r->fd >= 0)
		close(r->fd);
	for (size_t i = 0; i < r->n_streams; i++) {
		stream_unmap(&r->streams[i]);
		free(r->streams[i].buf);
		extent_state_free(&r->streams[i].said);
	}
	free(r->streams);
	free(r->heap);
	free(r->exts);
	free(r->check_buf);
	free(r->path);
	free(r);
}

/* ---- per-stream decoding ---------------------------------------------- */

/* Pull more committed bytes of the current extent into the buffer. */
static int stream_fill(struct dlbn_reader *r, struct stream *s)
{
	if (s->pos > 0) {
		memmove(s->buf, s->buf + s->pos, s->len - s->pos);
		s->len -= s->pos;
		s->pos = 0;
	}
	if (!s->buf || s->len == s->cap) {
		size_t ncap = s->buf ? s->cap * 2 : s->cap;
		if (ncap > STREAM_BUF_MAX)
			return -1;
		uint8_t *nb = realloc(s->buf, ncap);
		if (!nb)
			return -1;
		s->buf = nb;
		s->data = nb;
		s->cap = ncap;
	}
	size_t want = s->cap - s->len;
	if (want > s->ext_left)
		want = (size_t)s->ext_left;
	ssize_t got = pread(r->fd, s->buf + s->len, want, (off_t)s->ext_off);
	if (got <= 0) {
		s->ext_left = 0;
		return -1;
	}
	/* The bit the scan found flipped (its CRC located it): undo it. */
	const struct ext_ref *e = s->cur;
	if (e->fix_off >= 0) {
		uint64_t at = e->offset + DLBN_EXTENT_HEADER_SIZE + (uint64_t)e->fix_off;
		if (at >= s->ext_off && at < s->ext_off + (uint64_t)got)
			s->buf[s->len + (at - s->ext_off)] ^= e->fix_mask;
	}
	s->len += (size_t)got;
	s->ext_off += (uint64_t)got;
	s->ext_left -= (uint64_t)got;
	if (dlbn_progress_on) {
		r->pass_read += (uint64_t)got;
		dlbn_progress_bytes(r->path, r->passes ? r->passes : 1, r->pass_read, r->committed);
	}
	return 0;
}

/*
 * Map the current extent's records, so that they are decoded where the page
 * cache holds them instead of copied out by pread().  The mapping is
 * private: a repaired extent gets its flipped bit undone in its own copy of
 * that page.  0 if it cannot be mapped (a file that mmap refuses, address
 * space short): the extent is then read with pread().  A file cut shorter
 * while it is read would fault, as it would for any program that maps it.
 */
static int stream_map(struct dlbn_reader *r, struct stream *s)
{
	const struct ext_ref *e = s->cur;
	if (!r->page || e->avail == 0)
		return 0;
	uint64_t at = e->offset + DLBN_EXTENT_HEADER_SIZE;
	size_t lead = (size_t)(at % r->page);
	size_t len = lead + e->avail;
	int prot = PROT_READ | (e->fix_off >= 0 ? PROT_WRITE : 0);
	void *m = mmap(NULL, len, prot, MAP_PRIVATE, r->fd, (off_t)(at - lead));
	if (m == MAP_FAILED)
		return 0;
	s->map = m;
	s->map_len = len;
	s->map_lead = lead;
	s->map_dropped = 0;
	if (e->fix_off >= 0 && (uint64_t)e->fix_off < e->avail)
		s->map[lead + (size_t)e->fix_off] ^= e->fix_mask;
	s->data = s->map + lead;
	s->pos = 0;
	s->len = e->avail;
	s->ext_left = 0;
	if (dlbn_progress_on) {
		r->pass_read += e->avail;
		dlbn_progress_bytes(r->path, r->passes ? r->passes : 1, r->pass_read, r->committed);
	}
	return 1;
}

static void stream_unmap(struct stream *s)
{
	if (s->map) {
		munmap(s->map, s->map_len);
		s->map = NULL;
	}
	s->data = s->buf;
}

/*
 * Give back the pages of a mapped extent before data[upto], so that memory
 * follows the streams, not the extent size (up to 64 MiB).  upto is where
 * the record being handed out begins: its strings point at its bytes, and
 * a pass never goes back further (a repaired page given back would read
 * unrepaired again).
 */
static void stream_drop_decoded(struct dlbn_reader *r, struct stream *s, size_t upto_pos)
{
	size_t upto = (s->map_lead + upto_pos) / r->page * r->page;
	if (upto > s->map_dropped) {
		(void)madvise(s->map + s->map_dropped, upto - s->map_dropped, MADV_DONTNEED);
		s->map_dropped = upto;
	}
}

/* Start of the stream's next extent: where records lost in this one end. */
static int64_t next_base(const struct stream *s)
{
	return s->next_ext < s->n_ext ? base_time(s->ext[s->next_ext].base_ns)
				      : DLBN_LOSS_T_UNKNOWN;
}

/* The current extent is decoded: losses that start at its last record. */
static void ext_done(struct dlbn_reader *r, struct stream *s)
{
	s->in_ext = 0;
	stream_unmap(s);
	int i = s->cur->loss_after;
	if (!s->cur->decoded && i >= 0 && i < DLBN_READER_MAX_LOSS)
		r->st.losses[i].t_from = s->t_prev;
	s->cur->decoded = 1;
}

static void stream_corrupt(struct dlbn_reader *r, struct stream *s, const char *why)
{
	/* Counted once, on the first pass that gets here (a pass can stop
	 * early: the priming in dlbn_reader_rewind decodes one record). */
	if (!s->cur->decoded) {
		r->st.extents_corrupt++;
		struct ext_ref e = *s->cur;
		add_loss(r, DLBN_LOSS_CORRUPT, &e, 1, s->ext_left + (s->len - s->pos), s->t_prev,
			 next_base(s));
		warn(r, "stream %u/%u (pid %u) extent %u: %s; rest of the extent skipped",
		     s->info.proc_id, s->info.thread_no, s->info.pid, s->cur->seq, why);
	}
	ext_done(r, s);
}

/*
 * prev + dt, kept inside +-DLBN_TIME_LIMIT so that sums and differences of
 * times (and durations, see the model) never overflow on hostile input.
 */
static inline int64_t clamp_time(int64_t prev, int64_t dt)
{
	int64_t t;
	if (__builtin_add_overflow(prev, dt, &t))
		t = dt > 0 ? DLBN_TIME_LIMIT : -DLBN_TIME_LIMIT;
	if (t > DLBN_TIME_LIMIT)
		return DLBN_TIME_LIMIT;
	if (t < -DLBN_TIME_LIMIT)
		return -DLBN_TIME_LIMIT;
	return t;
}

/* Decode the stream's next record into s->head; 0 at the stream's end. */
static int stream_advance(struct dlbn_reader *r, struct stream *s)
{
	for (;;) {
		if (!s->in_ext) {
			if (s->next_ext >= s->n_ext) {
				/* Ended: give the buffer back, so that memory follows
				 * the streams alive at the same time, not all of them. */
				free(s->buf);
				s->buf = NULL;
				s->data = NULL;
				s->cap = STREAM_BUF_INIT;
				s->pos = s->len = 0;
				return 0;
			}
			struct ext_ref *e = &s->ext[s->next_ext++];
			if (e->dropped)
				continue; /* failed its checks (scan): a loss already */
			s->cur = e;
			s->in_ext = 1;
			s->ext_off = e->offset + DLBN_EXTENT_HEADER_SIZE;
			s->ext_left = e->avail;
			s->pos = s->len = 0;
			s->t_prev = base_time(e->base_ns);
			if (e->flags & DLBN_EXTENT_FINAL)
				s->info.ended_final = 1;
			if (r->gaps)
				extent_state_reset(&s->said, r->st.version_major, s->t_prev);
			(void)stream_map(r, s);
		}
		int64_t dt;
		size_t start = s->pos;
		long n = dlbn_decode_record_gap(s->data + s->pos, s->len - s->pos, &s->head, &dt,
						r->gaps);
		if (n > 0) {
			s->pos += (size_t)n;
			if (s->map && s->map_lead + start - s->map_dropped >= MAP_DROP_STEP)
				stream_drop_decoded(r, s, start);
			s->t_prev = clamp_time(s->t_prev, dt);
			if (r->gaps && !extent_state_complete(&s->said, &s->head, s->t_prev))
				continue;
			s->head.t_ns = s->t_prev;
			s->head.stream = &s->info;
			s->info.records++;
			return 1;
		}
		if (n < 0) {
			stream_corrupt(r, s, "undecodable record");
			continue;
		}
		if (s->ext_left > 0) {
			if (stream_fill(r, s) != 0)
				stream_corrupt(r, s, "record larger than any buffer or read error");
			continue;
		}
		if (s->pos < s->len && !s->cur->cut) {
			stream_corrupt(r, s, "incomplete record at the end of committed data");
			continue;
		}
		ext_done(r, s); /* a cut extent ends with a partial record: counted as CUT */
	}
}

/* ---- k-way merge ------------------------------------------------------ */

static void heap_down(struct heap_ent *heap, size_t n, size_t i)
{
	struct heap_ent e = heap[i];
	for (;;) {
		size_t l = 2 * i + 1;
		if (l >= n)
			break;
		if (l + 1 < n && heap[l + 1].t < heap[l].t)
			l++;
		if (heap[l].t >= e.t)
			break;
		heap[i] = heap[l];
		i = l;
	}
	heap[i] = e;
}

void dlbn_reader_rewind(struct dlbn_reader *r)
{
	r->heap_n = 0;
	r->pending = -1;
	r->st.records = 0;
	r->passes++;
	r->pass_read = 0;
	for (size_t i = 0; i < r->n_streams; i++) {
		struct stream *s = &r->streams[i];
		stream_unmap(s);
		s->next_ext = 0;
		s->in_ext = 0;
		s->pos = s->len = 0;
		s->info.records = 0;
		if (stream_advance(r, s))
			r->heap[r->heap_n++] = (struct heap_ent){s->head.t_ns, i};
	}
	for (size_t i = r->heap_n / 2; i-- > 0;)
		heap_down(r->heap, r->heap_n, i);
}

const struct dlbn_record *dlbn_reader_next(struct dlbn_reader *r)
{
	struct heap_ent *heap = r->heap;
	if (r->pending >= 0) {
		/* The record handed out last time is no longer needed: advance.
		 * A thread's records come in bursts, so the stream on top
		 * usually stays there: only a later head sifts down. */
		struct stream *s = &r->streams[r->pending];
		r->pending = -1;
		if (stream_advance(r, s)) {
			heap[0].t = s->head.t_ns;
		} else {
			heap[0] = heap[--r->heap_n];
			if (!r->heap_n)
				return NULL;
		}
		size_t n = r->heap_n;
		if ((n > 1 && heap[1].t < heap[0].t) || (n > 2 && heap[2].t < heap[0].t))
			heap_down(heap, n, 0);
	}
	if (!r->heap_n)
		return NULL;
	r->pending = (ssize_t)heap[0].stream;
	r->st.records++;
	return &r->streams[heap[0].stream].head;
}

const struct dlbn_reader_stats *dlbn_reader_stats(const struct dlbn_reader *r)
{
	return &r->st;
}

const struct dlbn_stream_info *dlbn_reader_stream(const struct dlbn_reader *r, size_t i)
{
	return i < r->n_streams ? &r->streams[i].info : NULL;
}

size_t dlbn_reader_nstreams(const struct dlbn_reader *r)
{
	return r->n_streams;
}
