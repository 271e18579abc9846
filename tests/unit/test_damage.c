/*
 * test_damage.c - how damage and stopped recordings weigh on the verdict
 * (damage.h): a synthetic DataLoader run (tgsim) that is DETECTED when
 * whole, then the same file with processes marked passive (file header
 * table) at chosen times and with a worker's extent dropped: the verdict
 * stands only when the loss is provably outside what the analysis uses,
 * and every report format says what was lost.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "analysis/damage.h"
#include "gpu/gpu.h"
#include "model/model.h"
#include "trace/reader.h"
#include "report/report.h"
#include "tgsim.h"
#include "analysis/verdict.h"

static char path[] = "/tmp/dlbn-test-damage-XXXXXX";
static uint8_t orig[1 << 21];
static size_t olen;

struct result {
	int verdict;
	char cause[32];
	int damaged, blocks;
	size_t nitems;
	int touches0;
	int64_t t0, window_begin, window_end;
	char json[1 << 16];
};

static int analyse(const uint8_t *b, size_t len, struct result *res)
{
	int fd = open(path, O_WRONLY | O_TRUNC);
	if (fd < 0 || write(fd, b, len) != (ssize_t)len)
		return -1;
	close(fd);
	char err[256];
	struct dlbn_reader *r = dlbn_reader_open(path, err, sizeof(err));
	if (!r)
		return -1;
	struct dlbn_model m;
	struct dlbn_analysis a;
	struct dlbn_model_opts mo;
	struct dlbn_verdict_opts vo;
	dlbn_gpu_model_opts(&mo);
	dlbn_verdict_default_opts(&vo);
	int rc = -1;
	if (dlbn_model_build(&m, r, &mo) == 0 &&
	    dlbn_analyze_gpu(&m, dlbn_reader_stats(r), &vo, &m.gpu, &a) == 0) {
		static struct dlbn_damage d;
		dlbn_damage_assess(&m, dlbn_reader_stats(r), &a, &d);
		res->verdict = a.verdict;
		snprintf(res->cause, sizeof(res->cause), "%s", dlbn_cause_name(a.cause));
		res->damaged = d.damaged;
		res->blocks = d.blocks_verdict;
		res->nitems = d.nitems;
		res->touches0 = d.nitems ? d.items[0].touches : -1;
		res->t0 = m.t0;
		res->window_begin = a.window_begin;
		res->window_end = a.window_end;
		struct dlbn_report_input in = {
			.path = path, .rs = dlbn_reader_stats(r), .m = &m, .a = &a, .gpu = &m.gpu};
		FILE *f = fmemopen(res->json, sizeof(res->json) - 1, "w");
		dlbn_report_json(f, &in);
		fclose(f);
		dlbn_analysis_free(&a);
		rc = 0;
	}
	dlbn_model_free(&m);
	dlbn_reader_close(r);
	return rc;
}

/* The original with one passive entry (proc_id, pid, at t). */
static void with_passive(uint8_t *b, uint32_t proc_id, uint32_t pid, int64_t t)
{
	memcpy(b, orig, olen);
	struct dlbn_file_header *h = (struct dlbn_file_header *)b;
	h->flags |= DLBN_FILE_PASSIVE;
	h->passive_count = 1;
	h->passive[0] = (struct dlbn_passive_entry){
		.proc_id = proc_id, .pid = pid, .t_ns = (uint64_t)t, .err = ENOSPC};
}

int main(void)
{
	int fd = mkstemp(path);
	close(fd);
	struct tgsim_params p;
	tgsim_default(&p);
	p.steps = 120;
	p.extent_size = 2048; /* a worker fills several */
	p.batch_ms = 40;
	p.loop_ms = 10;
	CHECK(tgsim_write(path, &p, NULL) == 0, "run written");
	fd = open(path, O_RDONLY);
	olen = (size_t)read(fd, orig, sizeof(orig));
	close(fd);

	static struct result whole, r;
	CHECK(analyse(orig, olen, &whole) == 0 && whole.verdict == DLBN_VERDICT_DETECTED &&
		      !whole.damaged,
	      "the whole run: DETECTED, not damaged");
	CHECK(strstr(whole.json, "\"damaged\":false") && strstr(whole.json, "\"losses\":[]"),
	      "JSON of the whole run: damaged false, no losses");

	static uint8_t b[sizeof(orig)];
	/* A worker (proc 1, pid 2000) stopping after the window: the analysis
	 * had everything it uses. */
	with_passive(b, 1, 2000, whole.window_end + 1000000);
	CHECK(analyse(b, olen, &r) == 0 && r.damaged && !r.blocks &&
		      r.verdict == DLBN_VERDICT_DETECTED && r.touches0 == DLBN_TOUCH_NO,
	      "a worker stopping after the window: the verdict stands, the stop is reported");
	CHECK(strstr(r.json, "\"kind\":\"stopped\"") && strstr(r.json, "\"pid\":2000") &&
		      strstr(r.json, "\"window\":\"outside\"") &&
		      strstr(r.json, "\"cut_short\":true"),
	      "JSON names the stopped worker, outside the window");

	/* The same worker stopping inside the window. */
	with_passive(b, 1, 2000, (whole.window_begin + whole.window_end) / 2);
	CHECK(analyse(b, olen, &r) == 0 && r.blocks && r.verdict == DLBN_VERDICT_INCONCLUSIVE &&
		      !strcmp(r.cause, "recording_stopped") && r.touches0 == DLBN_TOUCH_YES,
	      "a worker stopping inside the window: INCONCLUSIVE (recording_stopped)");
	CHECK(strstr(r.json, "\"reasons\":[\"the run is not all in the trace"),
	      "the first reason says the run is not all in the trace");

	/* The training process stopping, even after its last step. */
	with_passive(b, 0, 1000, whole.window_end + 1000000000);
	CHECK(analyse(b, olen, &r) == 0 && r.blocks && r.verdict == DLBN_VERDICT_INCONCLUSIVE,
	      "the training process stopping at all: INCONCLUSIVE (its loop may have gone on)");

	/* The file flag without a table entry (which process is unknown). */
	memcpy(b, orig, olen);
	((struct dlbn_file_header *)b)->flags |= DLBN_FILE_PASSIVE;
	CHECK(analyse(b, olen, &r) == 0 && r.blocks && r.verdict == DLBN_VERDICT_INCONCLUSIVE,
	      "the passive flag alone: INCONCLUSIVE");

	/* A worker's extent dropped (two flipped bits), and a repaired one: one
	 * that begins inside the window, neither the worker's first nor its
	 * last (the next one's start bounds what was lost). */
	memcpy(b, orig, olen);
	size_t slots = (olen - DLBN_FILE_HEADER_SIZE) / p.extent_size, hit = 0;
	uint32_t last_seq = 0;
	for (int pick = 0; pick < 2; pick++)
		for (size_t s = 0; s < slots && !hit; s++) {
			struct dlbn_extent_header eh;
			size_t off = DLBN_FILE_HEADER_SIZE + s * p.extent_size;
			memcpy(&eh, b + off, sizeof(eh));
			if (eh.magic != DLBN_EXTENT_MAGIC || eh.proc_id != 1 || eh.thread_no != 0)
				continue;
			if (!pick && eh.extent_seq > last_seq)
				last_seq = eh.extent_seq;
			if (pick && eh.extent_seq >= 1 && eh.extent_seq < last_seq &&
			    (int64_t)eh.base_ns > whole.window_begin &&
			    (int64_t)eh.base_ns < whole.window_end)
				hit = off + DLBN_EXTENT_HEADER_SIZE;
		}
	CHECK(hit > 0, "an extent of worker proc 1 inside the window, not its last");
	b[hit + 10] ^= 0x01;
	CHECK(analyse(b, olen, &r) == 0 && r.damaged && !r.blocks && r.verdict == whole.verdict &&
		      !strcmp(r.cause, whole.cause),
	      "one flipped bit in a worker's records: repaired, the same verdict and cause");
	b[hit + 20] ^= 0x40;
	CHECK(analyse(b, olen, &r) == 0 && r.blocks && r.verdict == DLBN_VERDICT_INCONCLUSIVE &&
		      !strcmp(r.cause, "damaged_trace") && r.touches0 == DLBN_TOUCH_YES,
	      "two: the extent is dropped, it meets the window: INCONCLUSIVE (damaged_trace)");
	CHECK(strstr(r.json, "\"kind\":\"corrupt\"") && strstr(r.json, "\"window\":\"in\""),
	      "JSON lists the corrupt extent, in the window");
	unlink(path);
	CHECK_EXIT();
}
