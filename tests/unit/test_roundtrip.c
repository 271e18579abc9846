/*
 * test_roundtrip.c - format round trip: every record tracegen writes (all
 * field kinds: small/large/negative ints, strings, nil, arrays; many
 * extents; interleaved streams) comes back from the reader with the same
 * type, time and fields, and the merge hands records out in time order, in
 * formats 1.1, 2.0, 3.0 and 4.0 (what 2.0 and later say once per extent, or
 * as a difference from an earlier record, is put back).
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "trace/reader.h"
#include "tracegen.h"

#define NSTREAMS   3
#define PER_STREAM 3000

/* What record k of stream s must look like. */
static int64_t want_time(int s, int k)
{
	return 1000000000ll + (int64_t)k * 7919 + s * 13; /* interleaved streams */
}

#define KINDS 9 /* record k of a stream is of kind k % KINDS */

/* In 2.0 each path shares a start with the one before, in 3.0 an end as
 * well, in 4.0 with one of the 16 before (the last image shares most with
 * the one four OPENs back); the two cafés share the last byte of their last
 * character, which must not be left out alone. */
static const char *open_path(int k)
{
	static const char *const paths[] = {"",
					    "/data/images/0001.jpg \"quoted\"",
					    "/data/images/0002.jpg",
					    "/data/labels.txt",
					    "/data/caf\xc3\xa9",
					    "/data/caf\xc2\xa9",
					    "/usr/lib/python3/__pycache__/os.cpython-311.pyc",
					    "/usr/lib/python3/__pycache__/re.cpython-311.pyc",
					    "/data/images/0003.jpg"};
	return paths[(k / KINDS) % 9];
}

/* A failed open's inode (-1) or one that moves both ways between OPENs. */
static int64_t open_ino(int k)
{
	return (k / KINDS) % 5 == 2 ? -1 : 1000000000000ll + (k % 3) * 37 - k;
}

static int64_t open_flags(int k)
{
	return (k / KINDS) % 3 == 1 ? 0x241 : 0x80000; /* O_WRONLY|O_CREAT|O_TRUNC, O_CLOEXEC */
}

/* A stack of 2 to 64 elements whose outer part repeats: each STACK shares
 * some, all or none of its end with the one before. */
static int stack_frames(int k, int64_t frames[64])
{
	int j = k / KINDS, n = 2 + 2 * (j % 32);
	for (int i = 0; i < n; i++)
		frames[i] =
			i < 4 && j % 4 == 1 ? j * 1000 + i : (int64_t)(n - i) * 4096 + (j % 7 == 3);
	return n;
}

/* A fetch MARK's counters: growing, standing, unknown (-1), and near the
 * ends of int64 so that differences wrap. */
static void mark_counters(int k, int64_t c[DLBN_MARK_COUNTERS])
{
	c[0] = 1000000007ll * k;
	c[1] = k % 3 ? 0 : k;
	c[2] = -1;
	c[3] = INT64_MAX - k;
	c[4] = 0;
	c[5] = 7ll * k;
	c[6] = k % 5 ? k : INT64_MIN;
	c[7] = 12345;
}

static int read_fd(int k)
{
	return k % (4 * KINDS) == 2 * KINDS ? 7 + DLBN_FD_SLOTS : 7;
}

static void write_stream_record(struct tg_stream *st, int s, int k)
{
	int64_t t = want_time(s, k);
	int64_t inos[3] = {123456789012ll, -5, k};
	int64_t c[DLBN_MARK_COUNTERS];
	switch (k % KINDS) {
	case 0: /* fd 71 shares fd 7's announcement slot in 2.0 */
		tg_read(st, t, k * 1000, read_fd(k), DLBN_FD_PIPE, read_fd(k) * 1000, -11);
		break;
	case 1:
		tg_poll(st, t, 5000000000ll, 1, -1, inos, 3);
		break;
	case 2:
		tg_open_file(st, t, 9, DLBN_FD_FILE, open_ino(k), open_flags(k), open_path(k));
		break;
	case 3:
		tg_rec(st, DLBN_REC_RANGE_PUSH, t, "iis", (int64_t)1, (int64_t)0,
		       (const char *)NULL);
		break;
	case 4:
		tg_sem_wait(st, t, 25000, 0x7ffff7a00000ull + (uint64_t)k);
		break;
	case 5:
		tg_rec(st, 99, t, "iii", INT64_MIN, INT64_MAX, (int64_t)UINT32_MAX);
		break; /* unknown type */
	case 6:
		mark_counters(k, c);
		tg_mark_counters(st, t, DLBN_MARK_FETCH_END, 3, k, c, DLBN_MARK_COUNTERS);
		break;
	case 7:
		tg_mark(st, t, DLBN_MARK_STEP, 3, k);
		break;
	case 8: {
		int64_t frames[64];
		tg_stack(st, t, DLBN_REC_READ, k, frames, stack_frames(k, frames));
		break;
	}
	}
}

static int check_record(const struct dlbn_record *r, int s, int k)
{
	if (r->t_ns != want_time(s, k))
		return 0;
	int64_t c[DLBN_MARK_COUNTERS];
	switch (k % KINDS) {
	case 0:
		return r->type == DLBN_REC_READ && r->nfields == 5 && r->f[0] == k * 1000 &&
		       r->f[1] == read_fd(k) && r->f[2] == DLBN_FD_PIPE &&
		       r->f[3] == read_fd(k) * 1000 && r->f[4] == -11;
	case 1:
		return r->type == DLBN_REC_POLL && r->nfields == 5 && r->f[0] == 5000000000ll &&
		       r->f[3] == -1 && r->kind[4] == DLBN_V_ARR && r->narr == 3 &&
		       r->arr[0] == 123456789012ll && r->arr[1] == -5 && r->arr[2] == k;
	case 2: {
		const char *want = open_path(k);
		return r->type == DLBN_REC_OPEN && r->nfields == 5 && r->kind[4] == DLBN_V_STR &&
		       r->f[4] == (int64_t)strlen(want) && !memcmp(r->str[4], want, strlen(want)) &&
		       r->f[2] == open_ino(k) && r->f[3] == open_flags(k);
	}
	case 3:
		return r->type == DLBN_REC_RANGE_PUSH && r->kind[2] == DLBN_V_NIL;
	case 4:
		return r->type == DLBN_REC_SEM_WAIT &&
		       r->f[1] == (int64_t)(0x7ffff7a00000ull + (uint64_t)k);
	case 5:
		return r->type == 99 && r->f[0] == INT64_MIN && r->f[1] == INT64_MAX &&
		       r->f[2] == (int64_t)UINT32_MAX;
	case 6:
		mark_counters(k, c);
		if (r->type != DLBN_REC_MARK || r->nfields != 3 + DLBN_MARK_COUNTERS ||
		    r->f[0] != DLBN_MARK_FETCH_END || r->f[1] != 3 || r->f[2] != k)
			return 0;
		for (int i = 0; i < DLBN_MARK_COUNTERS; i++)
			if (r->kind[3 + i] != DLBN_V_INT || r->f[3 + i] != c[i])
				return 0;
		return 1;
	case 7:
		return r->type == DLBN_REC_MARK && r->nfields == 3 && r->f[0] == DLBN_MARK_STEP &&
		       r->f[2] == k;
	case 8: {
		int64_t frames[64];
		int n = stack_frames(k, frames);
		return r->type == DLBN_REC_STACK && r->nfields == 3 && r->kind[2] == DLBN_V_ARR &&
		       r->f[2] == n && r->narr == n && !memcmp(r->arr, frames, (size_t)n * 8);
	}
	}
	return 0;
}

/* Write the records in format `major`, read them back. */
static void roundtrip(int major)
{
	char path[] = "/tmp/dlbn-test-roundtrip-XXXXXX";
	int fd = mkstemp(path);
	close(fd);

	printf("# format %d%s\n", major, getenv("DLBN_NO_MMAP") ? ", pread" : "");
	struct tg *g = tg_open(path, 4096); /* small extents: many per stream */
	if (major < DLBN_VERSION_MAJOR)
		tg_set_version(g, (uint16_t)major, major < 2 ? 1 : 0);
	struct tg_stream *st[NSTREAMS];
	for (int s = 0; s < NSTREAMS; s++)
		st[s] = tg_stream(g, (uint32_t)(s / 2), (uint32_t)(s % 2), 100 + (uint32_t)s / 2,
				  200 + (uint32_t)s);
	for (int k = 0; k < PER_STREAM; k++)
		for (int s = 0; s < NSTREAMS; s++)
			write_stream_record(st[s], s, k);
	uint64_t aged = tg_opens_aged(g);
	CHECK(tg_close(g) == 0, "tracegen wrote %d records", NSTREAMS * PER_STREAM);
	if (major >= 4)
		CHECK(aged > 0, "%" PRIu64 " OPENs share bytes with an older OPEN's path", aged);

	char err[256];
	struct dlbn_reader *r = dlbn_reader_open(path, err, sizeof(err));
	CHECK(r != NULL, "reader opens the trace");
	if (!r)
		return;
	const struct dlbn_reader_stats *rs = dlbn_reader_stats(r);
	CHECK(rs->streams == NSTREAMS, "3 streams found (got %" PRIu64 ")", rs->streams);
	CHECK(rs->extents > NSTREAMS * 3, "records span many extents (%" PRIu64 ")", rs->extents);
	CHECK((int)rs->version_major == major && !rs->truncated && rs->nwarnings == 0,
	      "version %d, not truncated, no warnings", major);

	int next[NSTREAMS] = {0}, bad = 0, order_bad = 0, total = 0;
	int64_t last_t = INT64_MIN;
	const struct dlbn_record *rec;
	while ((rec = dlbn_reader_next(r))) {
		int s = (int)(rec->stream->proc_id * 2 + rec->stream->thread_no);
		if (s < 0 || s >= NSTREAMS || next[s] >= PER_STREAM) {
			bad++;
			continue;
		}
		if (!check_record(rec, s, next[s]))
			bad++;
		if (rec->stream->tid != 200u + (unsigned)s ||
		    rec->stream->pid != 100u + (unsigned)s / 2)
			bad++;
		next[s]++;
		if (rec->t_ns < last_t)
			order_bad++;
		last_t = rec->t_ns;
		total++;
	}
	CHECK(total == NSTREAMS * PER_STREAM, "every record comes back (%d)", total);
	CHECK(bad == 0, "types, times and fields identical (%d mismatches)", bad);
	CHECK(order_bad == 0, "merged output is in time order");

	/* A second pass gives the same records again. */
	dlbn_reader_rewind(r);
	int again = 0;
	while (dlbn_reader_next(r))
		again++;
	CHECK(again == total, "rewind: second pass reads %d records", again);
	CHECK(strcmp(dlbn_record_name(DLBN_REC_SEM_WAIT), "SEM_WAIT") == 0 &&
		      strcmp(dlbn_field_name(DLBN_REC_READ, 3), "ino") == 0 &&
		      dlbn_record_name(99) == NULL,
	      "record and field names");
	dlbn_reader_close(r);
	unlink(path);
}

int main(void)
{
	for (int major = 1; major <= DLBN_VERSION_MAJOR; major++)
		roundtrip(major);
	setenv("DLBN_NO_MMAP", "1", 1); /* the reader's pread() path */
	roundtrip(DLBN_VERSION_MAJOR);
	CHECK_EXIT();
}
