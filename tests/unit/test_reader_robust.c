/*
 * test_reader_robust.c - the reader on damaged input: empty file, short
 * file, garbage, wrong magic, unknown major version (rejected with a clear
 * message), a trace cut in the middle of an extent, an uncommitted garbage
 * tail, an uninitialised extent and a corrupt record inside committed
 * bytes (tolerated, reported, the rest still read); format 1.1's checks:
 * single flipped bits repaired (records, extent header, stored CRC), two
 * dropped with the loss described, the 1.0 fields without effect, a cut at
 * an extent boundary truncated, the passive table read.  When build/dlbn-analyze
 * exists, also its exit status and message on the rejected files.
 */
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "trace/reader.h"
#include "trace/extent_state.h"
#include "tracegen.h"

#define EXT 4096

static char dir[] = "/tmp/dlbn-test-robust-XXXXXX";

static const char *tmp(const char *name)
{
	static char buf[8][256];
	static int k;
	char *b = buf[k++ % 8];
	snprintf(b, 256, "%s/%s", dir, name);
	return b;
}

static void write_bytes(const char *path, const void *data, size_t n)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0 || write(fd, data, n) != (ssize_t)n)
		abort();
	close(fd);
}

/* Two streams of n records each, in format 1.1, 2.0, 3.0 or 4.0 (major): the
 * byte offsets flipped below are the 1.1 layout's, and the version checks
 * edit a 1.x header. */
static void make_trace(const char *path, int n, uint32_t garbage_tail, int blank, int major)
{
	struct tg *g = tg_open(path, EXT);
	if (major < DLBN_VERSION_MAJOR)
		tg_set_version(g, (uint16_t)major, major < 2 ? 1 : 0);
	tg_set_garbage_tail(g, garbage_tail);
	struct tg_stream *a = tg_stream(g, 0, 0, 10, 10), *b = tg_stream(g, 1, 0, 11, 11);
	if (blank)
		tg_blank_extent(g);
	tg_process(a, 1000, 10, 1, -1, DLBN_START_ROOT, "python3");
	tg_process(b, 1001, 11, 10, 0, DLBN_START_FORK, "python3");
	for (int i = 1; i < n; i++) {
		tg_read(a, 1000 + i * 100, 50, 3, DLBN_FD_PIPE, 99, 4);
		tg_write(b, 1001 + i * 100, 50, 4, DLBN_FD_PIPE, 99, 4);
	}
	if (tg_close(g) != 0)
		abort();
}

/* 1 if the two traces hand out the same records (types, times, fields),
 * the first read with a reader opened with a_flags. */
static int same_records_flags(const char *a_path, unsigned a_flags, const char *b_path)
{
	char err[256];
	struct dlbn_reader *a = dlbn_reader_open_flags(a_path, a_flags, err, sizeof(err));
	struct dlbn_reader *b = dlbn_reader_open(b_path, err, sizeof(err));
	int same = a && b;
	while (same) {
		const struct dlbn_record *x = dlbn_reader_next(a), *y = dlbn_reader_next(b);
		if (!x || !y) {
			same = !x && !y;
			break;
		}
		same = x->type == y->type && x->t_ns == y->t_ns && x->nfields == y->nfields &&
		       !memcmp(x->kind, y->kind, sizeof(x->kind)) &&
		       !memcmp(x->f, y->f, sizeof(x->f[0]) * (size_t)x->nfields);
	}
	dlbn_reader_close(a);
	dlbn_reader_close(b);
	return same;
}

static int same_records(const char *a_path, const char *b_path)
{
	return same_records_flags(a_path, 0, b_path);
}

/* Whether the process maps any part of the file at path (/proc/self/maps). */
static int file_mapped(const char *path)
{
	char real[4096], line[8192];
	if (!realpath(path, real))
		return -1;
	FILE *f = fopen("/proc/self/maps", "r");
	if (!f)
		return -1;
	int found = 0;
	size_t n = strlen(real);
	while (!found && fgets(line, sizeof(line), f)) {
		size_t len = strcspn(line, "\n");
		found = len >= n && !memcmp(line + len - n, real, n);
	}
	fclose(f);
	return found;
}

/* Whether a reader opened with flags maps the trace while it reads it;
 * its records are the good trace's either way. */
static int maps_while_reading(const char *path, unsigned flags, int *same)
{
	char err[256];
	struct dlbn_reader *r = dlbn_reader_open_flags(path, flags, err, sizeof(err));
	if (!r)
		return -1;
	int mapped = dlbn_reader_next(r) ? file_mapped(path) : -1;
	dlbn_reader_close(r);
	*same = same_records_flags(path, flags, tmp("good"));
	return mapped;
}

static long count_records(const char *path, struct dlbn_reader_stats *st)
{
	char err[256];
	struct dlbn_reader *r = dlbn_reader_open(path, err, sizeof(err));
	if (!r)
		return -1;
	long n = 0;
	while (dlbn_reader_next(r))
		n++;
	if (st)
		*st = *dlbn_reader_stats(r);
	dlbn_reader_close(r);
	return n;
}

static int rejected(const char *path, const char *want_in_msg)
{
	char err[256] = "";
	struct dlbn_reader *r = dlbn_reader_open(path, err, sizeof(err));
	if (r) {
		dlbn_reader_close(r);
		return 0;
	}
	printf("  message: %s\n", err);
	return strstr(err, want_in_msg) != NULL;
}

/* Exit status of build/dlbn-analyze on path, and whether stderr has want. */
static int cli_status(const char *path, const char *want)
{
	char cmd[512];
	snprintf(cmd, sizeof(cmd), "build/dlbn-analyze '%s' >/dev/null 2>%s/stderr.txt", path, dir);
	int st = system(cmd);
	if (!WIFEXITED(st))
		return -1;
	char msg[512] = "";
	FILE *f = fopen(tmp("stderr.txt"), "r");
	if (f) {
		size_t n = fread(msg, 1, sizeof(msg) - 1, f);
		msg[n] = 0;
		fclose(f);
	}
	if (want && !strstr(msg, want))
		return -2;
	return WEXITSTATUS(st);
}

/*
 * A hostile 4.0 extent: each OPEN's path is the whole of the one before
 * (shared) and 4000 bytes of its own, so the paths put back would grow
 * without end.  The reader stops at EXTENT_PATH_MAX (a record past it
 * keeps its own bytes) and gives every record back.  Returns the longest
 * path handed out, -1 if a record is missing.
 */
static long open_chain_longest(const char *path, int opens)
{
	struct tg *g = tg_open(path, 1u << 20);
	struct tg_stream *a = tg_stream(g, 0, 0, 10, 10);
	tg_process(a, 1000, 10, 1, -1, DLBN_START_ROOT, "python3");
	static char own[4001];
	memset(own, 'x', 4000);
	size_t len = 0;
	for (int i = 0; i < opens; i++) {
		tg_rec(a, DLBN_REC_OPEN, 2000 + i, "iiiisiii", (int64_t)3, (int64_t)DLBN_FD_FILE,
		       (int64_t)0, (int64_t)0, own, (int64_t)len, (int64_t)0, (int64_t)0);
		len += 4000;
	}
	tg_close(g);
	char err[256];
	struct dlbn_reader *r = dlbn_reader_open(path, err, sizeof(err));
	if (!r)
		return -1;
	long longest = 0, n = 0;
	const struct dlbn_record *rec;
	while ((rec = dlbn_reader_next(r)))
		if (rec->type == DLBN_REC_OPEN) {
			n++;
			if (rec->f[4] > longest)
				longest = (long)rec->f[4];
		}
	dlbn_reader_close(r);
	return n == opens ? longest : -1;
}

int main(void)
{
	if (!mkdtemp(dir))
		return 1;
	int have_cli = access("build/dlbn-analyze", X_OK) == 0;
	if (!have_cli)
		printf("note: build/dlbn-analyze not found from here; CLI checks skipped\n");

	write_bytes(tmp("empty"), "", 0);
	CHECK(rejected(tmp("empty"), "empty file"), "empty file rejected");

	write_bytes(tmp("short"), "DLBNTRC1\x01\x00", 10);
	CHECK(rejected(tmp("short"), "shorter than its header"),
	      "file shorter than a header rejected");

	char garbage[10000];
	unsigned x = 12345;
	for (size_t i = 0; i < sizeof(garbage); i++)
		garbage[i] = (char)((x = x * 1103515245u + 12345u) >> 16);
	write_bytes(tmp("garbage"), garbage, sizeof(garbage));
	CHECK(rejected(tmp("garbage"), "bad magic"), "garbage rejected (bad magic)");

	make_trace(tmp("good"), 100, 0, 0, 1);
	struct dlbn_reader_stats st;
	CHECK(count_records(tmp("good"), &st) == 200 && st.nwarnings == 0,
	      "good trace: 200 records");
	make_trace(tmp("good2"), 100, 0, 0, 2);
	CHECK(count_records(tmp("good2"), &st) == 200 && st.nwarnings == 0 && st.version_major == 2,
	      "good 2.0 trace: 200 records (its FD records not among them)");
	make_trace(tmp("good3"), 100, 0, 0, 3);
	CHECK(count_records(tmp("good3"), &st) == 200 && st.nwarnings == 0 && st.version_major == 3,
	      "good 3.0 trace: 200 records");
	make_trace(tmp("good4"), 100, 0, 0, 4);
	CHECK(count_records(tmp("good4"), &st) == 200 && st.nwarnings == 0 && st.version_major == 4,
	      "good 4.0 trace: 200 records");

	long longest = open_chain_longest(tmp("open-chain"), 40);
	CHECK(longest > 60000 && longest <= EXTENT_PATH_MAX,
	      "OPEN paths that would grow without end stop at %d bytes (longest %ld)",
	      EXTENT_PATH_MAX, longest);

	/* Wrong magic and the next major version on an otherwise good trace. */
	int fd = open(tmp("good"), O_RDONLY);
	static char buf[1 << 20];
	ssize_t len = read(fd, buf, sizeof(buf));
	close(fd);
	buf[0] = 'X';
	write_bytes(tmp("magic"), buf, (size_t)len);
	buf[0] = 'D';
	CHECK(rejected(tmp("magic"), "bad magic"), "wrong magic rejected");
	struct dlbn_file_header h;
	memcpy(&h, buf, sizeof(h));
	h.version_major = DLBN_VERSION_MAJOR + 1;
	memcpy(buf, &h, sizeof(h));
	write_bytes(tmp("vnext"), buf, (size_t)len);
	char want[128];
	snprintf(want, sizeof(want),
		 "version %d.1 is not supported (this dlbn-analyze reads versions 1.x to %d.x)",
		 DLBN_VERSION_MAJOR + 1, DLBN_VERSION_MAJOR);
	CHECK(rejected(tmp("vnext"), want), "the next major version rejected clearly");
	h.version_major = 1;
	h.version_minor = 7;
	memcpy(buf, &h, sizeof(h));
	write_bytes(tmp("v1.7"), buf, (size_t)len);
	CHECK(count_records(tmp("v1.7"), NULL) == 200, "a newer minor version is read");

	/* Truncated in the middle of the first extent's records. */
	write_bytes(tmp("cut"), buf, DLBN_FILE_HEADER_SIZE + DLBN_EXTENT_HEADER_SIZE + 301);
	long n = count_records(tmp("cut"), &st);
	CHECK(n > 0 && n < 200 && st.truncated && st.nwarnings > 0,
	      "cut mid-extent: %ld intact records, truncated reported", n);
	/* Truncated inside an extent header. */
	write_bytes(tmp("cuthdr"), buf, DLBN_FILE_HEADER_SIZE + 20);
	CHECK(count_records(tmp("cuthdr"), &st) == 0,
	      "cut inside the first extent header: no records, no crash");

	/* Uncommitted tail: garbage after committed is ignored. */
	make_trace(tmp("tail"), 100, 300, 0, 2);
	CHECK(count_records(tmp("tail"), &st) == 200 && st.extents_corrupt == 0,
	      "garbage after committed ignored");

	/* An extent allocated but never initialised. */
	make_trace(tmp("blank"), 100, 0, 1, 2);
	CHECK(count_records(tmp("blank"), &st) == 200 && st.extents_uninit == 1,
	      "uninitialised extent skipped and counted");

	/* A corrupt record inside committed bytes ends that extent only. */
	memcpy(buf, &h, sizeof(h));
	((struct dlbn_file_header *)buf)->version_minor = 0;
	/* The first record's array header becomes 0xc1, a byte msgpack never uses. */
	buf[DLBN_FILE_HEADER_SIZE + DLBN_EXTENT_HEADER_SIZE] = (char)0xc1;
	write_bytes(tmp("corrupt"), buf, (size_t)len);
	n = count_records(tmp("corrupt"), &st);
	CHECK(n == 100 && st.extents_corrupt == 1,
	      "corrupt record: the other stream's %ld records kept, 1 corrupt extent reported", n);
	if (have_cli)
		CHECK(cli_status(tmp("corrupt"), "damaged trace") == 1,
		      "dlbn-analyze: corrupt record -> exit 1");

	/* Format 1.1 checks on the good trace (its first extent: stream b, pid 11). */
	fd = open(tmp("good"), O_RDONLY);
	len = read(fd, buf, sizeof(buf));
	close(fd);
	size_t rec0 = DLBN_FILE_HEADER_SIZE + DLBN_EXTENT_HEADER_SIZE;
	buf[rec0 + 40] ^= 0x10; /* one flipped record bit: located by the CRC */
	write_bytes(tmp("flip1"), buf, (size_t)len);
	n = count_records(tmp("flip1"), &st);
	CHECK(n == 200 && st.extents_repaired == 1 && st.nlosses == 0 && dlbn_reader_damaged(&st),
	      "one flipped record bit: repaired, all %ld records, still reported damaged", n);
	CHECK(same_records(tmp("flip1"), tmp("good")), "the repaired records are the recorder's");
	/* The same read with pread() instead of mapped extents. */
	setenv("DLBN_NO_MMAP", "1", 1);
	CHECK(count_records(tmp("flip1"), &st) == 200 && st.extents_repaired == 1 &&
		      same_records(tmp("flip1"), tmp("good")),
	      "read with pread (DLBN_NO_MMAP=1): repaired alike");
	unsetenv("DLBN_NO_MMAP");
	/* Traces read side by side (dlbn-analyze -j) are read with pread():
	 * no mapping of the file while the reader reads it. */
	int same_mapped = 0, same_pread = 0;
	CHECK(maps_while_reading(tmp("flip1"), 0, &same_mapped) == 1 && same_mapped,
	      "read as opened: the extent being read is mapped");
	CHECK(maps_while_reading(tmp("flip1"), DLBN_READER_PREAD, &same_pread) == 0 && same_pread,
	      "opened with DLBN_READER_PREAD: nothing of the file mapped, the same records");
	buf[rec0 + 90] ^= 0x01; /* a second one: beyond repair, the extent is dropped */
	write_bytes(tmp("flip2"), buf, (size_t)len);
	n = count_records(tmp("flip2"), &st);
	CHECK(n < 200 && st.extents_corrupt == 1 && st.nlosses == 1 &&
		      st.losses[0].kind == DLBN_LOSS_CORRUPT && st.losses[0].known_stream &&
		      st.losses[0].pid == 11 && st.losses[0].t_from == 1001,
	      "two flipped bits: the extent dropped (%ld records left), the loss names its "
	      "stream (pid 11) from its start (t=1001)",
	      n);
	buf[rec0 + 40] ^= 0x10;
	buf[rec0 + 90] ^= 0x01;
	buf[DLBN_FILE_HEADER_SIZE + 8] ^= 0x04; /* proc_id: caught by header_crc */
	write_bytes(tmp("hdrflip"), buf, (size_t)len);
	CHECK(count_records(tmp("hdrflip"), &st) == 200 && st.extents_repaired == 1,
	      "a flipped extent header bit: repaired");
	buf[DLBN_FILE_HEADER_SIZE + 8] ^= 0x04;
	buf[DLBN_FILE_HEADER_SIZE + 44] ^= 0x20; /* the commit word's CRC */
	write_bytes(tmp("crcflip"), buf, (size_t)len);
	CHECK(count_records(tmp("crcflip"), &st) == 200 && st.extents_repaired == 1,
	      "a flipped bit in the stored CRC: repaired");
	buf[DLBN_FILE_HEADER_SIZE + 44] ^= 0x20;
	buf[DLBN_FILE_HEADER_SIZE + 4] ^= 0x01; /* the 1.0 committed: not read by 1.1 */
	write_bytes(tmp("legacy"), buf, (size_t)len);
	CHECK(count_records(tmp("legacy"), &st) == 200 && !dlbn_reader_damaged(&st),
	      "a flipped bit in the 1.0 committed field has no effect");
	buf[DLBN_FILE_HEADER_SIZE + 4] ^= 0x01;
	/* Cut exactly at an extent boundary: the later extents are missing. */
	write_bytes(tmp("cutext"), buf, DLBN_FILE_HEADER_SIZE + EXT);
	n = count_records(tmp("cutext"), &st);
	CHECK(st.truncated && st.extents_missing > 0 && dlbn_reader_damaged(&st),
	      "cut at an extent boundary: truncated, %llu extent(s) missing",
	      (unsigned long long)st.extents_missing);

	/* A process that went passive: the header's table. */
	struct tg *g = tg_open(tmp("passive"), EXT);
	struct tg_stream *a = tg_stream(g, 0, 0, 10, 10);
	tg_process(a, 1000, 10, 1, -1, DLBN_START_ROOT, "python3");
	tg_passive(g, 0, 10, 5000, 28);
	CHECK(tg_close(g) == 0, "passive trace written");
	count_records(tmp("passive"), &st);
	CHECK(st.npassive == 1 && st.passive[0].pid == 10 && st.passive[0].t_ns == 5000 &&
		      st.passive[0].err == 28 && dlbn_reader_cut_short(&st) &&
		      dlbn_reader_damaged(&st),
	      "passive process read from the file header (pid, time, errno)");

	if (have_cli) {
		CHECK(cli_status(tmp("flip2"), "damaged trace") == 1,
		      "dlbn-analyze: dropped extent -> exit 1");
		CHECK(cli_status(tmp("cutext"), "damaged trace") == 1,
		      "dlbn-analyze: cut at an extent boundary -> exit 1");
		CHECK(cli_status(tmp("passive"), "recording stopped early") == 1,
		      "dlbn-analyze: a process went passive -> exit 1");
		CHECK(cli_status(tmp("empty"), "empty file") == 1,
		      "dlbn-analyze: empty file -> exit 1");
		CHECK(cli_status(tmp("garbage"), "not a dlbn trace") == 1,
		      "dlbn-analyze: garbage -> exit 1");
		CHECK(cli_status(tmp("vnext"), "not supported") == 1,
		      "dlbn-analyze: the next major version -> exit 1");
		CHECK(cli_status(tmp("cut"), "damaged trace") == 1,
		      "dlbn-analyze: truncated -> report of the intact part, exit 1");
		CHECK(cli_status(tmp("good"), NULL) == 0, "dlbn-analyze: good trace -> exit 0");
		CHECK(cli_status(tmp("nonexistent"), "cannot open") == 1,
		      "dlbn-analyze: missing file -> exit 1");
	}
	char cmd[300];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	if (system(cmd) != 0)
		printf("note: could not remove %s\n", dir);
	CHECK_EXIT();
}
