/*
 * test_fuzz.c - cheap fuzzing of the reader and everything behind it:
 * thousands of mutated copies of a valid DataLoader trace (bit flips,
 * random garbage runs, truncation, hostile extent headers) go through
 * reader, model, verdict and both reports; random byte strings go through
 * the record decoder.  The GPU split (gpu.c) runs on them too.  Passing
 * means no crash, no hang, and sane counts
 * (ASan/UBSan under `make sanitize` catch the rest).  Deterministic seed.
 */
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "gpu.h"
#include "model.h"
#include "reader.h"
#include "report.h"
#include "tgsim.h"
#include "verdict.h"

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

static void mutate(uint8_t *b, size_t *len)
{
	size_t n = *len;
	switch (rnd(5)) {
	case 0: /* bit flips anywhere after the file magic */
		for (unsigned k = 1 + rnd(16); k; k--)
			b[8 + rnd((unsigned)(n - 8))] ^= (uint8_t)(1u << rnd(8));
		break;
	case 1: { /* a run of garbage inside the records */
		size_t at = DLBN_FILE_HEADER_SIZE + rnd((unsigned)(n - DLBN_FILE_HEADER_SIZE));
		for (unsigned k = rnd(200); k && at < n; k--, at++)
			b[at] = (uint8_t)rnd(256);
		break;
	}
	case 2: /* truncation */
		*len = rnd((unsigned)n);
		break;
	case 3: { /* hostile extent header fields */
		struct dlbn_file_header h;
		memcpy(&h, b, sizeof(h));
		if (!h.extent_size || (n - DLBN_FILE_HEADER_SIZE) / h.extent_size == 0)
			break; /* an earlier mutation zeroed or grew the extent size */
		size_t slots = (n - DLBN_FILE_HEADER_SIZE) / h.extent_size;
		size_t at = DLBN_FILE_HEADER_SIZE + rnd((unsigned)slots) * h.extent_size;
		uint32_t v = rnd(4) == 0 ? 0xffffffffu : rnd(1u << 20);
		memcpy(b + at + 4 * (1 + rnd(7)), &v, 4); /* committed, ids, seq, pid ... */
		break;
	}
	default: /* file header fields: extent size, counters, version minor */
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

static int run_one(const char *path, const uint8_t *b, size_t len, FILE *devnull)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0 || write(fd, b, len) != (ssize_t)len)
		return -1;
	close(fd);
	char err[256];
	struct dlbn_reader *r = dlbn_reader_open(path, err, sizeof(err));
	if (!r)
		return 0; /* rejected with a message: fine */
	struct dlbn_model m;
	struct dlbn_analysis a;
	struct dlbn_model_opts mo;
	struct dlbn_verdict_opts vo;
	dlbn_model_default_opts(&mo);
	dlbn_verdict_default_opts(&vo);
	int ok = 1;
	if (dlbn_model_build(&m, r, &mo) == 0 &&
	    dlbn_analyze_gpu(&m, dlbn_reader_stats(r), &vo, &m.gpu, &a) == 0) {
		struct dlbn_report_input in = {
			.path = path, .rs = dlbn_reader_stats(r), .m = &m, .a = &a, .gpu = &m.gpu};
		dlbn_report_text(devnull, &in);
		dlbn_report_json(devnull, &in);
		dlbn_report_markdown(devnull, &in);
		/* Each record takes at least 3 bytes. */
		ok = m.records <= len / 3;
		dlbn_analysis_free(&a);
	}
	dlbn_model_free(&m);
	dlbn_reader_close(r);
	return ok ? 1 : -1;
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
	int opened = 0, rejected = 0, insane = 0;
	for (int i = 0; i < iterations; i++) {
		size_t len = (size_t)olen;
		memcpy(work, orig, len);
		for (unsigned k = 1 + rnd(3); k; k--)
			if (len > DLBN_FILE_HEADER_SIZE + 64)
				mutate(work, &len);
		int rc = run_one(path, work, len, devnull);
		if (rc > 0)
			opened++;
		else if (rc == 0)
			rejected++;
		else
			insane++;
	}
	CHECK(insane == 0, "%d mutated traces: %d analysed, %d rejected, no crash, sane counts",
	      iterations, opened, rejected);
	CHECK(opened > iterations / 2, "most mutations stay readable (%d)", opened);

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
