/*
 * test_lib_ops.c - a loader library's operators from its own NVTX ranges
 * (analyzer/model/lib_ops.c): DALI's "[DALI][CPU op] Run X" ranges are summed per
 * operator and thread-paired (a nested range of another name does not
 * close them), GPU and mixed runs are told apart, the reader's ReadOne is
 * "reader", other ranges and those closed before the window are not
 * counted, and the table is sorted by busy time.  ranges.c does not take
 * a "[DALI]" range for the loop's data wait.
 */
#include <string.h>

#include "check.h"
#include "model/lib_ops.h"
#include "model/ranges.h"

#define MS 1000000LL

static struct dlbn_stream_info streams[3] = {{.index = 0}, {.index = 1}, {.index = 2}};

static void feed(struct dlbn_lib_ops *o, int thread, int type, int64_t t, const char *msg,
		 int in_window)
{
	struct dlbn_record r;
	memset(&r, 0, sizeof(r));
	r.type = type;
	r.t_ns = t;
	r.stream = &streams[thread];
	if (type == DLBN_REC_RANGE_PUSH) {
		r.nfields = 3;
		r.kind[2] = DLBN_V_STR;
		r.str[2] = msg;
		r.f[2] = (int64_t)strlen(msg);
	} else {
		r.nfields = 1;
	}
	dlbn_lib_ops_record(o, &r, in_window);
}

static void range(struct dlbn_lib_ops *o, int thread, int64_t t, int64_t ms, const char *msg,
		  int in_window)
{
	feed(o, thread, DLBN_REC_RANGE_PUSH, t, msg, in_window);
	feed(o, thread, DLBN_REC_RANGE_POP, t + ms * MS, NULL, in_window);
}

static const struct dlbn_lib_op *find(const struct dlbn_lib_ops *o, const char *name)
{
	for (size_t i = 0; i < o->n; i++)
		if (!strcmp(o->v[i].name, name))
			return &o->v[i];
	return NULL;
}

int main(void)
{
	struct dlbn_lib_ops o;
	CHECK(dlbn_lib_ops_init(&o, 3) == 0, "init");

	/* Before the window: counted nowhere. */
	range(&o, 1, 0, 50, "[DALI][CPU op] Run decoders__Image", 0);
	for (int k = 0; k < 10; k++) {
		int64_t t = 100 * MS + k * 20 * MS;
		/* Thread 1: the decoder, with the codec's own range nested. */
		feed(&o, 1, DLBN_REC_RANGE_PUSH, t, "[DALI][CPU op] Run decoders__Image", 1);
		range(&o, 1, t + 1 * MS, 4, "nvimgcodecDecoderDecode", 1);
		feed(&o, 1, DLBN_REC_RANGE_POP, t + 6 * MS, NULL, 1);
		/* Thread 2: resize on the CPU, then a GPU run, the reader. */
		range(&o, 2, t, 3, "[DALI][CPU op] Run Resize", 1);
		range(&o, 2, t + 4 * MS, 1, "[DALI][GPU op] Run Resize", 1);
		range(&o, 2, t + 6 * MS, 1, "[DALI][Loader] ReadOne", 1);
		range(&o, 2, t + 8 * MS, 2, "[Exec] ~ExecNodeTask", 1);
	}
	/* A pop without its push (the trace began inside a range). */
	feed(&o, 0, DLBN_REC_RANGE_POP, 400 * MS, NULL, 1);
	dlbn_lib_ops_sort(&o);

	const struct dlbn_lib_op *dec = find(&o, "decoders__Image");
	CHECK(dec && dec->busy_ns == 60 * MS && dec->runs == 10,
	      "decoder: 10 runs of 6 ms in the window (nested range and the earlier run left out)");
	CHECK(find(&o, "Resize") && find(&o, "Resize")->busy_ns == 30 * MS, "CPU resize 30 ms");
	CHECK(find(&o, "Resize (GPU)") && find(&o, "Resize (GPU)")->busy_ns == 10 * MS,
	      "GPU resize apart: 10 ms");
	CHECK(find(&o, "reader") && find(&o, "reader")->runs == 10, "ReadOne is the reader");
	CHECK(o.n == 4, "only operator ranges in the table (%zu)", o.n);
	CHECK(o.busy_ns == 110 * MS, "total busy 110 ms");
	CHECK(!strcmp(o.v[0].name, "decoders__Image") && !strcmp(o.v[1].name, "Resize"),
	      "sorted by busy time: decoder first");

	static const char dali_data[] = "[DALI][DataReader] Prefetch #0";
	static const char user_data[] = "data loading";
	CHECK(dlbn_range_classify(dali_data, strlen(dali_data)) == DLBN_RANGE_OTHER,
	      "a DALI range is not the loop's data wait");
	CHECK(dlbn_range_classify(user_data, strlen(user_data)) == DLBN_RANGE_DATA,
	      "a program's data range still is");
	dlbn_lib_ops_free(&o);
	CHECK_EXIT();
}
