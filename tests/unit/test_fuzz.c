/*
 * test_fuzz.c - fuzzing of the reader and everything behind it: thousands
 * of mutated copies of a valid DataLoader trace go through reader, model,
 * verdict and all three reports; random byte strings go through the record
 * decoder.  The GPU split (gpu.c) runs on them too.
 *
 * The property: a trace damaged anywhere past its file header
 * (single-bit flips, random cuts, multi-bit flips and garbage runs, hostile
 * extent header fields) either is reported damaged (dlbn-analyze's exit
 * status 1: rejected, or dlbn_reader_damaged) or gives the same report as
 * the original: never a silent different answer.  Mutations of the file
 * header itself (extent size, counters) are only required not to crash or
 * hang and to keep counts sane.  ASan/UBSan under `make sanitize` catch the
 * rest.  Deterministic seed.
 */
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "gpu/gpu.h"
#include "model/model.h"
#include "trace/reader.h"
#include "report/report.h"
#include "tgsim.h"
#include "analysis/verdict.h"

/* DLBN_FUZZ_ITERATIONS and DLBN_FUZZ_SEED in the environment override these. */
#define ITERATIONS 1500

static unsigned long long rng_state = 0x9e3779b97f4a7c15ull;

static unsigned rnd(unsigned n)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return n ? (unsigned)(rng_state % n) : 0;
}

enum { M_FLIP1, M_CUT, M_FLIPS, M_GARBAGE, M_EXTHDR, M_FILEHDR, M_KINDS };
static const char *const mutation_name[M_KINDS] = {"single-bit flip",	  "cut",
						   "bit flips",		  "garbage run",
						   "extent header field", "file header field"};

/* Apply one mutation of kind k; past the file header unless M_FILEHDR. */
static void mutate(int k, uint8_t *b, size_t *len)
{
	size_t n = *len;
	unsigned body = (unsigned)(n - DLBN_FILE_HEADER_SIZE);
	switch (k) {
	case M_FLIP1:
		b[DLBN_FILE_HEADER_SIZE + rnd(body)] ^= (uint8_t)(1u << rnd(8));
		break;
	case M_CUT:
		*len = DLBN_FILE_HEADER_SIZE + rnd(body);
		break;
	case M_FLIPS:
		for (unsigned j = 2 + rnd(15); j; j--)
			b[DLBN_FILE_HEADER_SIZE + rnd(body)] ^= (uint8_t)(1u << rnd(8));
		break;
	case M_GARBAGE: {
		size_t at = DLBN_FILE_HEADER_SIZE + rnd(body);
		for (unsigned j = 1 + rnd(200); j && at < n; j--, at++)
			b[at] = (uint8_t)rnd(256);
		break;
	}
	case M_EXTHDR: {
		struct dlbn_file_header h;
		memcpy(&h, b, sizeof(h));
		size_t slots = (n - DLBN_FILE_HEADER_SIZE) / h.extent_size;
		if (!slots)
			break;
		size_t at = DLBN_FILE_HEADER_SIZE + rnd((unsigned)slots) * h.extent_size;
		uint32_t v = rnd(4) == 0 ? 0xffffffffu : rnd(1u << 20);
		memcpy(b + at + 4 * (1 + rnd(7)), &v, 4); /* committed, ids, seq, pid ... */
		break;
	}
	default: /* file header fields: extent size, counters */
		if (rnd(2)) {
			uint32_t v = rnd(3) ? 128u + rnd(1u << 16) : rnd(300);
			memcpy(b + 16, &v, 4);
		} else {
			uint64_t v = rnd(1u << 30);
			memcpy(b + 24 + 8 * rnd(2), &v, 8);
		}
		break;
	}
}

/* The analysis part of the text report: everything above its "Trace:"
 * section (which lists the reader's own counts and warnings). */
static char *analysis_text(char *report)
{
	char *t = strstr(report, "\nTrace: format");
	if (t)
		*t = 0;
	return report;
}

/*
 * Analyse the trace at path.  Returns -1 insane counts, 0 rejected (exit
 * status 1), 1 reported damaged (exit status 1), 2 intact; *text gets the
 * analysis text (malloc'd) for 1 and 2.
 */
static int run_one(const char *path, const uint8_t *b, size_t len, FILE *devnull, char **text)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0 || write(fd, b, len) != (ssize_t)len)
		return -1;
	close(fd);
	*text = NULL;
	char err[256];
	struct dlbn_reader *r = dlbn_reader_open(path, err, sizeof(err));
	if (!r)
		return 0; /* rejected with a message: exit status 1 */
	struct dlbn_model m;
	struct dlbn_analysis a;
	struct dlbn_model_opts mo;
	struct dlbn_verdict_opts vo;
	dlbn_gpu_model_opts(&mo);
	dlbn_verdict_default_opts(&vo);
	int rc = -1;
	if (dlbn_model_build(&m, r, &mo) == 0 &&
	    dlbn_analyze_gpu(&m, dlbn_reader_stats(r), &vo, &m.gpu, &a) == 0) {
		struct dlbn_report_input in = {.path = "trace",
					       .rs = dlbn_reader_stats(r),
					       .m = &m,
					       .a = &a,
					       .gpu = &m.gpu};
		size_t n;
		FILE *mem = open_memstream(text, &n);
		dlbn_report_text(mem, &in);
		fclose(mem);
		analysis_text(*text);
		dlbn_report_json(devnull, &in);
		dlbn_report_markdown(devnull, &in);
		/* Each record takes at least 3 bytes. */
		if (m.records <= len / 3)
			rc = dlbn_reader_damaged(dlbn_reader_stats(r)) ? 1 : 2;
		dlbn_analysis_free(&a);
	}
	dlbn_model_free(&m);
	dlbn_reader_close(r);
	return rc;
}

int main(void)
{
	char path[] = "/tmp/dlbn-test-fuzz-XXXXXX";
	int fd = mkstemp(path);
	close(fd);
	struct tgsim_params p;
	tgsim_default(&p);
	p.steps = 40;
	p.extent_size = 2048;
	p.pin = 1;
	p.gpu_ms = 15; /* CUDA launches and probes: the streaming GPU split too */
	CHECK(tgsim_write(path, &p, NULL) == 0, "seed trace written");
	static uint8_t orig[1 << 20], work[1 << 20];
	fd = open(path, O_RDONLY);
	ssize_t olen = read(fd, orig, sizeof(orig));
	close(fd);
	CHECK(olen > DLBN_FILE_HEADER_SIZE + 4096, "seed trace has %zd bytes", olen);

	int iterations =
		getenv("DLBN_FUZZ_ITERATIONS") ? atoi(getenv("DLBN_FUZZ_ITERATIONS")) : ITERATIONS;
	if (getenv("DLBN_FUZZ_SEED"))
		rng_state += strtoull(getenv("DLBN_FUZZ_SEED"), NULL, 0);
	FILE *devnull = fopen("/dev/null", "w");
	char *orig_text;
	CHECK(run_one(path, orig, (size_t)olen, devnull, &orig_text) == 2, "seed trace is intact");
	int outcome[M_KINDS][3] = {{0}}, insane = 0, silent = 0;
	for (int i = 0; i < iterations; i++) {
		size_t len = (size_t)olen;
		memcpy(work, orig, len);
		/* One mutation of a kind (most runs), sometimes a few of any kind
		 * past the header (their kind is the first one's for the tally). */
		int kind = (int)rnd(M_KINDS), any_header = kind == M_FILEHDR;
		mutate(kind, work, &len);
		for (unsigned k = rnd(4) == 0 ? 1 + rnd(2) : 0; k; k--) {
			int more = (int)rnd(M_FILEHDR);
			if (len > DLBN_FILE_HEADER_SIZE + 64)
				mutate(more, work, &len);
		}
		char *text;
		int rc = run_one(path, work, len, devnull, &text);
		if (rc < 0) {
			insane++;
		} else {
			outcome[kind][rc]++;
			/* Reported intact: must be the original's report. */
			if (rc == 2 && !any_header && strcmp(text, orig_text) != 0) {
				if (silent++ < 3)
					printf("  silent change after a %s (iteration %d):\n%s\n",
					       mutation_name[kind], i, text);
			}
		}
		free(text);
	}
	CHECK(insane == 0, "%d mutated traces: no crash, sane counts", iterations);
	for (int k = 0; k < M_KINDS; k++)
		printf("  %-20s rejected %4d, reported damaged %4d, same report %4d\n",
		       mutation_name[k], outcome[k][0], outcome[k][1], outcome[k][2]);
	CHECK(silent == 0,
	      "damage past the file header is reported (exit status 1) or changes nothing: %d "
	      "silent changes",
	      silent);
	CHECK(outcome[M_FLIP1][1] > 0 && outcome[M_CUT][1] > 0 && outcome[M_FLIPS][1] > 0,
	      "flips and cuts are seen as damage");
	free(orig_text);

	/* Random byte strings through the decoder. */
	struct dlbn_record rec;
	int64_t dt;
	long decoded = 0, bad_len = 0;
	for (int i = 0; i < 200000; i++) {
		uint8_t buf[64];
		size_t n = 1 + rnd(sizeof(buf));
		for (size_t k = 0; k < n; k++)
			buf[k] = (uint8_t)rnd(256);
		if (rnd(2))
			buf[0] = (uint8_t)(0x92 + rnd(14)); /* mostly plausible arrays */
		long used = dlbn_decode_record(buf, n, &rec, &dt);
		if (used > (long)n)
			bad_len++;
		if (used > 0)
			decoded++;
	}
	CHECK(bad_len == 0, "decoder never reads past its buffer (%ld random records decoded)",
	      decoded);
	fclose(devnull);
	unlink(path);
	CHECK_EXIT();
}
