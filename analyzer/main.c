/*
 * main.c - dlbn-analyze command line: read one trace (or one per rank),
 * build the models, print the verdict (text, Markdown or JSON) or dump the
 * records.  With several traces the job verdict is the worst rank's
 * (report.h, dlbn_job_summarize) and --fail-on applies to it.
 *
 * Exit status (docs/DESIGN.md, "Analyzer layers"): 0 analysis done (any verdict);
 * 1 unreadable, damaged or cut-short input (message on stderr; a damaged
 * but readable trace still gets a report of its intact part, which says
 * what was lost); 2 usage; 3 --fail-on hit.
 */
#include <errno.h>
#include <getopt.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "baseline.h"
#include "export.h"
#include "gpu.h"
#include "hotspots.h"
#include "model.h"
#include "reader.h"
#include "report.h"
#include "report_html.h"
#include "sweep.h"
#include "timings.h"
#include "verdict.h"
#include "whatif.h"

#ifndef DLBN_VERSION_STRING
#define DLBN_VERSION_STRING "0.1.0"
#endif

enum { EXIT_DONE = 0, EXIT_INPUT = 1, EXIT_USAGE = 2, EXIT_FAIL_ON = 3 };
enum { FORMAT_TEXT = 0, FORMAT_JSON, FORMAT_MARKDOWN };

static const char usage_text[] =
	"usage: dlbn-analyze [options] TRACE [TRACE...]\n"
	"\n"
	"Tell from a dlbn trace whether PyTorch training waits for its DataLoader.\n"
	"Several traces (one per rank of a data-parallel job): a per-rank table,\n"
	"the straggler (the rank that stalls longest on its input; step times of\n"
	"synchronous ranks are equal) and the job verdict (the worst rank's).\n"
	"\n"
	"  -f, --format FMT          text (default), markdown or json\n"
	"  -o, --output FILE         write the report to FILE instead of stdout\n"
	"      --sqlite FILE         also export the whole model as a SQLite database\n"
	"      --perfetto FILE       also export a Chrome/Perfetto trace-event timeline\n"
	"      --baseline REPLAY     measured speedup: compare with a Replay run of the\n"
	"                            same training (dlbn-run --replay N)\n"
	"      --what-if             predicted step time for other loader settings\n"
	"                            (num_workers 0..N, persistent_workers,\n"
	"                            prefetch_factor, pin_memory, batch_size and the\n"
	"                            grid batch_size x num_workers), each with its limit\n"
	"      --html FILE           also write a self-contained HTML report (verdict,\n"
	"                            timeline, waits, workers, what-if curve)\n"
	"      --plot FILE.svg       the batch size x num_workers chart (samples/s,\n"
	"                            predicted and measured, the best marked) as SVG\n"
	"      --sweep-results FILE  measured sweep points (dlbn-run --sweep-out) for\n"
	"                            --what-if, --html and --plot: JSON [{\"setting\",\"value\",\n"
	"                            \"measured_step_ms\"}...]; runs of another batch\n"
	"                            size size the batch-size model's fixed parts\n"
	"      --dump                print every record as one line and exit\n"
	"      --fail-on LEVEL       exit 3 when the verdict is LEVEL or worse:\n"
	"                            detected | potential\n"
	"      --view VIEW           auto (default: python, else nvtx, else ipc),\n"
	"                            python (fetch marks), nvtx (data ranges) or ipc\n"
	"      --warmup N            skip N steps instead of prefetch depth + 1\n"
	"      --detected-above X    DETECTED threshold on the speedup (1.50)\n"
	"      --potential-above X   POTENTIAL threshold on the speedup (1.10)\n"
	"      --handoff-gap-ms X    max gap between hand-off ops of a batch (2)\n"
	"      --native-stacks       show native frames at the longest waits too (by\n"
	"                            default only Python frames, native where none)\n"
	"      --timings             print what each phase of the analysis cost (CPU\n"
	"                            seconds, records per CPU-second) to stderr\n"
	"  -j, --jobs N              analyse N traces at a time (default: the CPUs\n"
	"                            this process may use)\n"
	"  -h, --help                this text\n"
	"  -V, --version             version and trace format\n"
	"\n"
	"With several traces, --fail-on applies to the job verdict; --dump, --sqlite,\n"
	"--perfetto, --baseline and --html take one trace.\n"
	"\n"
	"Exit status: 0 analysis done, 1 unreadable, damaged or cut-short trace\n"
	"(the report says what was lost), 2 usage,\n"
	"3 --fail-on level reached.  See dlbn-analyze(1), dlbn-trace(5).\n";

struct cli {
	char **traces; /* one per rank; --dump, --sqlite, --perfetto, --baseline: one only */
	size_t ntraces;
	const char *output, *sqlite, *perfetto, *baseline;
	const char *html, *sweep_results; /* --html FILE, --sweep-results FILE */
	const char *plot;		  /* --plot FILE.svg */
	int format, dump, fail_on;
	int what_if; /* --what-if */
	int native_stacks;
	int timings; /* --timings */
	long jobs;   /* -j: traces analysed at a time; 0 = the CPUs */
	struct dlbn_model_opts mo;
	struct dlbn_verdict_opts vo;
};

static int usage_error(const char *msg, const char *arg)
{
	fprintf(stderr, "dlbn-analyze: %s%s%s\n", msg, arg ? ": " : "", arg ? arg : "");
	fprintf(stderr, "try 'dlbn-analyze --help'\n");
	return EXIT_USAGE;
}

static int parse_double(const char *s, double *out)
{
	char *end;
	errno = 0;
	*out = strtod(s, &end);
	return errno || end == s || *end || !(*out > 0);
}

/* Returns -1 to continue, else an exit status. */
static int parse_args(int argc, char **argv, struct cli *c)
{
	enum {
		O_DUMP = 256,
		O_FAIL,
		O_VIEW,
		O_WARMUP,
		O_DET,
		O_POT,
		O_GAP,
		O_SQLITE,
		O_PERFETTO,
		O_BASELINE,
		O_WHATIF,
		O_HTML,
		O_SWEEP,
		O_PLOT,
		O_NATIVE,
		O_TIMINGS
	};
	static const struct option opts[] = {
		{"format", required_argument, NULL, 'f'},
		{"output", required_argument, NULL, 'o'},
		{"dump", no_argument, NULL, O_DUMP},
		{"sqlite", required_argument, NULL, O_SQLITE},
		{"perfetto", required_argument, NULL, O_PERFETTO},
		{"baseline", required_argument, NULL, O_BASELINE},
		{"what-if", no_argument, NULL, O_WHATIF},
		{"html", required_argument, NULL, O_HTML},
		{"sweep-results", required_argument, NULL, O_SWEEP},
		{"plot", required_argument, NULL, O_PLOT},
		{"fail-on", required_argument, NULL, O_FAIL},
		{"view", required_argument, NULL, O_VIEW},
		{"warmup", required_argument, NULL, O_WARMUP},
		{"detected-above", required_argument, NULL, O_DET},
		{"potential-above", required_argument, NULL, O_POT},
		{"handoff-gap-ms", required_argument, NULL, O_GAP},
		{"native-stacks", no_argument, NULL, O_NATIVE},
		{"timings", no_argument, NULL, O_TIMINGS},
		{"jobs", required_argument, NULL, 'j'},
		{"help", no_argument, NULL, 'h'},
		{"version", no_argument, NULL, 'V'},
		{NULL, 0, NULL, 0},
	};
	int ch;
	double d;
	char *end;

	opterr = 0;
	while ((ch = getopt_long(argc, argv, ":f:o:j:hV", opts, NULL)) != -1) {
		switch (ch) {
		case 'f':
			if (!strcmp(optarg, "json"))
				c->format = FORMAT_JSON;
			else if (!strcmp(optarg, "markdown"))
				c->format = FORMAT_MARKDOWN;
			else if (!strcmp(optarg, "text"))
				c->format = FORMAT_TEXT;
			else
				return usage_error("unknown format (text, markdown, json)", optarg);
			break;
		case 'o':
			c->output = optarg;
			break;
		case O_DUMP:
			c->dump = 1;
			break;
		case O_SQLITE:
			c->sqlite = optarg;
			break;
		case O_PERFETTO:
			c->perfetto = optarg;
			break;
		case O_BASELINE:
			c->baseline = optarg;
			break;
		case O_WHATIF:
			c->what_if = 1;
			break;
		case O_HTML:
			c->html = optarg;
			break;
		case O_SWEEP:
			c->sweep_results = optarg;
			break;
		case O_PLOT:
			c->plot = optarg;
			break;
		case O_FAIL:
			if (!strcmp(optarg, "detected"))
				c->fail_on = DLBN_VERDICT_DETECTED;
			else if (!strcmp(optarg, "potential"))
				c->fail_on = DLBN_VERDICT_POTENTIAL;
			else
				return usage_error("--fail-on takes detected or potential", optarg);
			break;
		case O_VIEW:
			if (!strcmp(optarg, "python"))
				c->mo.force_view = DLBN_VIEW_PYTHON;
			else if (!strcmp(optarg, "ipc"))
				c->mo.force_view = DLBN_VIEW_IPC;
			else if (!strcmp(optarg, "nvtx"))
				c->mo.force_view = DLBN_VIEW_NVTX;
			else if (strcmp(optarg, "auto") != 0)
				return usage_error("--view takes auto, python, nvtx or ipc",
						   optarg);
			break;
		case O_WARMUP: {
			long v = strtol(optarg, &end, 10);
			if (*end || end == optarg || v < 0 || v > 1000000000)
				return usage_error("--warmup takes a step count", optarg);
			c->mo.warmup_steps = (int)v;
			break;
		}
		case O_DET:
			if (parse_double(optarg, &d))
				return usage_error("--detected-above takes a positive number",
						   optarg);
			c->vo.detected_above = d;
			break;
		case O_POT:
			if (parse_double(optarg, &d))
				return usage_error("--potential-above takes a positive number",
						   optarg);
			c->vo.potential_above = d;
			break;
		case O_GAP:
			if (parse_double(optarg, &d))
				return usage_error("--handoff-gap-ms takes a positive number",
						   optarg);
			c->mo.handoff_gap_ns = (int64_t)(d * 1e6);
			break;
		case O_TIMINGS:
			c->timings = 1;
			break;
		case 'j':
			c->jobs = strtol(optarg, &end, 10);
			if (*end || end == optarg || c->jobs < 1 || c->jobs > 4096)
				return usage_error("--jobs takes a count from 1 to 4096", optarg);
			break;
		case O_NATIVE:
			c->native_stacks = 1;
			break;
		case 'h':
			fputs(usage_text, stdout);
			return EXIT_DONE;
		case 'V':
			printf("dlbn-analyze %s (trace format %d.%d)\n", DLBN_VERSION_STRING,
			       DLBN_VERSION_MAJOR, DLBN_VERSION_MINOR);
			return EXIT_DONE;
		case ':':
			return usage_error("option needs an argument", argv[optind - 1]);
		default:
			return usage_error("unknown option", argv[optind - 1]);
		}
	}
	if (optind == argc)
		return usage_error("no trace file given", NULL);
	c->traces = argv + optind;
	c->ntraces = (size_t)(argc - optind);
	if (c->ntraces > 1 &&
	    (c->dump || c->sqlite || c->perfetto || c->baseline || c->html || c->plot))
		return usage_error("--dump, --sqlite, --perfetto, --baseline, --html and --plot "
				   "take one trace",
				   NULL);
	if (c->sweep_results && !c->html && !c->what_if && !c->plot)
		return usage_error("--sweep-results goes with --what-if, --html or --plot", NULL);
	return -1;
}

/* Times are seconds from the first record, as in the reports. */
static int dump(struct dlbn_reader *r, FILE *out)
{
	const struct dlbn_record *rec = dlbn_reader_next(r);
	int64_t t0 = rec ? rec->t_ns : 0;
	for (; rec; rec = dlbn_reader_next(r))
		dlbn_dump_record(out, rec, t0);
	return 0;
}

/* A damaged or cut-short trace (reader.h): one stderr line saying what, exit 1. */
static int damaged(const char *path, const struct dlbn_reader_stats *rs)
{
	if (!dlbn_reader_damaged(rs))
		return 0;
	char what[256];
	int n = snprintf(what, sizeof(what), "%s%llu corrupt extent(s)",
			 rs->truncated ? "truncated, " : "",
			 (unsigned long long)(rs->extents_corrupt + rs->extents_bad_header));
	if (rs->extents_missing && n < (int)sizeof(what))
		n += snprintf(what + n, sizeof(what) - (size_t)n, ", %llu missing",
			      (unsigned long long)rs->extents_missing);
	if (rs->seq_gaps && n < (int)sizeof(what))
		n += snprintf(what + n, sizeof(what) - (size_t)n, ", %llu gap(s)",
			      (unsigned long long)rs->seq_gaps);
	if (rs->extents_repaired && n < (int)sizeof(what))
		n += snprintf(what + n, sizeof(what) - (size_t)n, ", %llu flipped bit(s) repaired",
			      (unsigned long long)rs->extents_repaired);
	if (dlbn_reader_cut_short(rs) && n < (int)sizeof(what))
		snprintf(what + n, sizeof(what) - (size_t)n,
			 ", recording stopped early in %u process(es)",
			 rs->passive_count ? rs->passive_count : 1);
	fprintf(stderr,
		"dlbn-analyze: %s: damaged trace (%s); the report covers the intact part and says "
		"what was lost\n",
		path, what);
	return 1;
}

/* --sqlite / --perfetto: one more pass each over the trace.  1 if one failed. */
static int run_exports(const struct cli *c, struct dlbn_reader *r, const struct dlbn_model *m,
		       const struct dlbn_analysis *a, const struct dlbn_gpu *gpu)
{
	struct dlbn_export_input in = {c->traces[0], r, m, a, gpu, DLBN_VERSION_STRING};
	char err[512];
	int failed = 0;
	if (c->sqlite && dlbn_export_sqlite(c->sqlite, &in, NULL, err, sizeof(err)) != 0) {
		fprintf(stderr, "dlbn-analyze: --sqlite %s: %s\n", c->sqlite, err);
		failed = 1;
	}
	if (c->perfetto && dlbn_export_perfetto(c->perfetto, &in, NULL, err, sizeof(err)) != 0) {
		fprintf(stderr, "dlbn-analyze: --perfetto %s: %s\n", c->perfetto, err);
		failed = 1;
	}
	return failed;
}

/* --html (report_html.h), with the --sweep-results points (NULL none).
 * 1 if it failed. */
static int write_html(const struct cli *c, struct dlbn_reader *r,
		      const struct dlbn_report_input *in, const struct dlbn_sweep *sweep)
{
	char err[512];
	if (dlbn_report_html(c->html, r, in, sweep, err, sizeof(err)) != 0) {
		fprintf(stderr, "dlbn-analyze: --html %s: %s\n", c->html, err);
		return 1;
	}
	return 0;
}

/* One trace, read and analysed; kept open until its report is written. */
struct run {
	const char *path;
	struct dlbn_reader *r;
	struct dlbn_model m;
	struct dlbn_analysis a;
	int built;
	struct dlbn_baseline baseline; /* --baseline: valid iff has_baseline */
	int has_baseline;
	struct dlbn_whatif whatif; /* always; printed with --what-if / --html */
	struct dlbn_hotspots hot;  /* where the workers' time goes (hotspots.h) */
	struct dlbn_timings times; /* --timings */
};

/* Decode and merge alone, for --timings: what reading costs without the model. */
static void time_reading(struct run *x)
{
	struct dlbn_stopwatch w;
	dlbn_stopwatch_start(&w);
	dlbn_reader_rewind(x->r);
	uint64_t n = 0;
	while (dlbn_reader_next(x->r))
		n++;
	dlbn_timings_add(&x->times, DLBN_PHASE_READ, &w);
	x->times.records = n;
}

static void print_phase(const struct dlbn_timings *t, enum dlbn_phase p, const char *what,
			int per_record)
{
	double cpu = (double)t->cpu_ns[p] / 1e9, wall = (double)t->wall_ns[p] / 1e9;
	if (!t->ran[p]) {
		fprintf(stderr, "  %-34s %s\n", what, "not run");
		return;
	}
	if (p == DLBN_PHASE_GPU) {
		fprintf(stderr, "  %-34s %8s %8.3f\n", what, "-", wall);
		return;
	}
	fprintf(stderr, "  %-34s %8.3f %8.3f", what, cpu, wall);
	if (per_record && t->cpu_ns[p] > 0)
		fprintf(stderr, " %9.1f", (double)t->records / 1e6 / cpu);
	fputc('\n', stderr);
}

static void print_timings(const char *path, const struct dlbn_timings *t)
{
	int64_t cpu = 0;
	for (int p = 0; p < DLBN_PHASE_COUNT; p++)
		if (p != DLBN_PHASE_READ && p != DLBN_PHASE_GPU)
			cpu += t->cpu_ns[p];
	fprintf(stderr, "dlbn-analyze: timings of %s (%llu records)\n", path,
		(unsigned long long)t->records);
	fprintf(stderr, "  %-34s %8s %8s %9s\n", "phase", "cpu s", "wall s", "Mrec/cpu-s");
	print_phase(t, DLBN_PHASE_OPEN, "open: header, extent checks", 0);
	print_phase(t, DLBN_PHASE_READ, "decode + merge alone (extra pass)", 1);
	print_phase(t, DLBN_PHASE_PASS1, "model pass 1: roles, loaders", 1);
	print_phase(t, DLBN_PHASE_PASS2, "model pass 2: steps, workers, GPU", 1);
	print_phase(t, DLBN_PHASE_GPU, "  of which the GPU pass (sampled)", 0);
	print_phase(t, DLBN_PHASE_VERDICT, "verdict, what-if", 0);
	print_phase(t, DLBN_PHASE_HOTSPOTS, "hot spots", 1);
	print_phase(t, DLBN_PHASE_REPORT, "reports, exports", 0);
	fprintf(stderr, "  %-34s %8.3f %8s %9.1f\n", "total, without the extra pass",
		(double)cpu / 1e9, "",
		cpu > 0 ? (double)t->records / 1e6 / ((double)cpu / 1e9) : 0.0);
}

/* 0 done, else an exit status (message printed).  sweep: the
 * --sweep-results points, NULL none. */
static int run_analyze(const struct cli *c, struct run *x, const struct dlbn_sweep *sweep)
{
	char err[512];
	struct dlbn_timings *times = c->timings ? &x->times : NULL;
	struct dlbn_stopwatch w;
	dlbn_stopwatch_start(&w);
	x->r = dlbn_reader_open(x->path, err, sizeof(err));
	if (!x->r) {
		fprintf(stderr, "dlbn-analyze: %s\n", err);
		return EXIT_INPUT;
	}
	dlbn_timings_add(times, DLBN_PHASE_OPEN, &w);
	if (times) {
		dlbn_timings_calibrate(times);
		time_reading(x);
	}
	/* Model (two passes; the GPU split of the waits and its figures over
	 * the chosen window come with the second), then the verdict. */
	struct dlbn_model_opts mo = c->mo;
	mo.timings = times;
	if (dlbn_model_build(&x->m, x->r, &mo) != 0) {
		fprintf(stderr, "dlbn-analyze: out of memory\n");
		dlbn_model_free(&x->m);
		return EXIT_INPUT;
	}
	if (dlbn_analyze_gpu(&x->m, dlbn_reader_stats(x->r), &c->vo, &x->m.gpu, &x->a) != 0) {
		fprintf(stderr, "dlbn-analyze: out of memory\n");
		dlbn_analysis_free(&x->a);
		dlbn_model_free(&x->m);
		return EXIT_INPUT;
	}
	x->built = 1;
	dlbn_stopwatch_start(&w);
	/* Always: the recommendation's worker count is the what-if's (printed
	 * only with --what-if / --html). */
	dlbn_whatif_compute(&x->m, &x->a, sweep, &x->whatif);
	dlbn_whatif_settle_advice(&x->whatif, &x->a);
	dlbn_timings_add(times, DLBN_PHASE_VERDICT, &w);
	dlbn_stopwatch_start(&w);
	if (dlbn_hotspots_build(&x->hot, x->r, &x->m) != 0) {
		fprintf(stderr, "dlbn-analyze: out of memory\n");
		return EXIT_INPUT;
	}
	if (x->m.profile_records) /* else no pass was made */
		dlbn_timings_add(times, DLBN_PHASE_HOTSPOTS, &w);
	/* --baseline (analyzer/baseline.h): the Replay trace through the same
	 * path, compared once x->a is final. */
	if (c->baseline) {
		int brc = dlbn_baseline_load(&x->baseline, c->baseline, &c->mo, &c->vo, x->r, &x->m,
					     &x->a, err, sizeof(err));
		if (brc != 0) {
			fprintf(stderr, "dlbn-analyze: --baseline %s\n",
				brc == -1 ? err : "out of memory");
			return EXIT_INPUT;
		}
		x->has_baseline = 1;
	}
	return 0;
}

/*
 * The traces are analysed by up to -j threads at a time: each analysis is
 * independent (its own reader, model and results), and the job report waits
 * for all of them.  After a failure no new trace is started (there will be
 * no report); the status is the first failed trace's, in command-line order.
 */
struct analyze_pool {
	const struct cli *c;
	const struct dlbn_sweep *sweep;
	struct run *runs;
	int *rcs;
	size_t n, next;
	int failed;
};

static void *analyze_worker(void *arg)
{
	struct analyze_pool *p = arg;
	while (!__atomic_load_n(&p->failed, __ATOMIC_RELAXED)) {
		size_t i = __atomic_fetch_add(&p->next, 1, __ATOMIC_RELAXED);
		if (i >= p->n)
			break;
		p->rcs[i] = run_analyze(p->c, &p->runs[i], p->sweep);
		if (p->rcs[i] != EXIT_DONE)
			__atomic_store_n(&p->failed, 1, __ATOMIC_RELAXED);
	}
	return NULL;
}

static size_t usable_cpus(void)
{
	cpu_set_t set;
	if (sched_getaffinity(0, sizeof(set), &set) == 0 && CPU_COUNT(&set) > 0)
		return (size_t)CPU_COUNT(&set);
	long n = sysconf(_SC_NPROCESSORS_ONLN);
	return n > 0 ? (size_t)n : 1;
}

static int analyze_all(const struct cli *c, struct run *runs, size_t n,
		       const struct dlbn_sweep *sweep)
{
	struct analyze_pool p = {.c = c, .sweep = sweep, .runs = runs, .n = n};
	if (!(p.rcs = calloc(n, sizeof(*p.rcs)))) {
		fprintf(stderr, "dlbn-analyze: out of memory\n");
		return EXIT_INPUT;
	}
	size_t want = c->jobs > 0 ? (size_t)c->jobs : usable_cpus();
	size_t nthreads = want < n ? want : n;
	pthread_t *t = nthreads > 1 ? calloc(nthreads - 1, sizeof(*t)) : NULL;
	size_t started = 0;
	while (t && started < nthreads - 1 &&
	       pthread_create(&t[started], NULL, analyze_worker, &p) == 0)
		started++; /* a thread that cannot start leaves its share to the others */
	analyze_worker(&p);
	for (size_t i = 0; i < started; i++)
		pthread_join(t[i], NULL);
	free(t);
	int rc = EXIT_DONE;
	for (size_t i = 0; i < n && rc == EXIT_DONE; i++)
		rc = p.rcs[i];
	free(p.rcs);
	return rc;
}

static void run_free(struct run *x)
{
	if (x->built) {
		dlbn_hotspots_free(&x->hot);
		dlbn_analysis_free(&x->a);
		dlbn_model_free(&x->m);
	}
	if (x->r)
		dlbn_reader_close(x->r);
	memset(x, 0, sizeof(*x));
}

static void report(const struct cli *c, FILE *out, const struct dlbn_report_input *in)
{
	if (c->format == FORMAT_JSON)
		dlbn_report_json(out, in);
	else if (c->format == FORMAT_MARKDOWN)
		dlbn_report_markdown(out, in);
	else
		dlbn_report_text(out, in);
}

static int analyze(const struct cli *c, FILE *out)
{
	size_t n = c->ntraces;
	struct run *runs = calloc(n, sizeof(*runs));
	struct dlbn_rank_row *rows = calloc(n, sizeof(*rows));
	size_t *order = calloc(n, sizeof(*order)); /* row k is runs[order[k]] */
	struct dlbn_job job;
	int rc = EXIT_DONE, export_failed = 0, any_damaged = 0;

	if (!runs || !rows || !order) {
		fprintf(stderr, "dlbn-analyze: out of memory\n");
		free(runs);
		free(rows);
		free(order);
		return EXIT_INPUT;
	}
	/* A bad --sweep-results file costs the HTML page and the exit status,
	 * not the report. */
	struct dlbn_sweep sweep = {0};
	const struct dlbn_sweep *points = NULL;
	if (c->sweep_results) {
		char err[512];
		if (dlbn_sweep_load(&sweep, c->sweep_results, err, sizeof(err)) == 0) {
			points = &sweep;
		} else {
			fprintf(stderr, "dlbn-analyze: --sweep-results %s: %s\n", c->sweep_results,
				err);
			export_failed = 1;
		}
	}
	for (size_t i = 0; i < n; i++)
		runs[i].path = c->traces[i];
	rc = analyze_all(c, runs, n, points);
	if (rc == EXIT_DONE) {
		for (size_t i = 0; i < n; i++)
			dlbn_rank_row_fill(&rows[i], runs[i].path, (int)i, &runs[i].m, &runs[i].a);
		/* Rows in rank order (a shell lists trace-r10 before trace-r2). */
		(void)dlbn_rank_rows_sort(rows, n, order);
		dlbn_job_summarize(&job, rows, n);
		const struct run *w = &runs[order[job.worst]];
		struct dlbn_report_input in = {
			.path = w->path,
			.rs = dlbn_reader_stats(w->r),
			.m = &w->m,
			.a = &w->a,
			.gpu = &w->m.gpu,
			.ranks = rows,
			.nranks = n,
			.job = &job,
			.baseline = w->has_baseline ? &w->baseline : NULL,
			.whatif = c->what_if ? &w->whatif : NULL,
			.hot = &w->hot,
			.native_stacks = c->native_stacks,
		};
		struct dlbn_stopwatch sw;
		dlbn_stopwatch_start(&sw);
		report(c, out, &in);
		if (c->html && (points || !c->sweep_results)) {
			in.whatif = &w->whatif;
			export_failed |= write_html(c, w->r, &in, points);
		}
		if (c->plot && (points || !c->sweep_results)) {
			char err[512];
			if (dlbn_plot_svg(c->plot, w->path, &w->whatif, err, sizeof(err)) != 0) {
				fprintf(stderr, "dlbn-analyze: --plot %s: %s\n", c->plot, err);
				export_failed = 1;
			}
		}
		if (n == 1)
			export_failed |=
				run_exports(c, runs[0].r, &runs[0].m, &runs[0].a, &runs[0].m.gpu);
		if (c->timings) {
			/* The reports are the job's: their cost is shown with the last trace. */
			dlbn_timings_add(&runs[n - 1].times, DLBN_PHASE_REPORT, &sw);
			for (size_t i = 0; i < n; i++)
				print_timings(runs[i].path, &runs[i].times);
		}
		for (size_t i = 0; i < n; i++)
			any_damaged |= damaged(runs[i].path, dlbn_reader_stats(runs[i].r));
		if (any_damaged || export_failed)
			rc = EXIT_INPUT;
		else if (c->fail_on && job.verdict >= c->fail_on)
			rc = EXIT_FAIL_ON;
	}
	for (size_t i = 0; i < n; i++)
		run_free(&runs[i]);
	dlbn_sweep_free(&sweep);
	free(runs);
	free(rows);
	free(order);
	return rc;
}

int main(int argc, char **argv)
{
	struct cli c = {0};
	char err[512];
	dlbn_model_default_opts(&c.mo);
	dlbn_verdict_default_opts(&c.vo);
	int rc = parse_args(argc, argv, &c);
	if (rc >= 0)
		return rc;

	FILE *out = stdout;
	if (c.dump) {
		struct dlbn_reader *r = dlbn_reader_open(c.traces[0], err, sizeof(err));
		if (!r) {
			fprintf(stderr, "dlbn-analyze: %s\n", err);
			return EXIT_INPUT;
		}
		if (c.output && !(out = fopen(c.output, "w"))) {
			fprintf(stderr, "dlbn-analyze: %s: %s\n", c.output, strerror(errno));
			dlbn_reader_close(r);
			return EXIT_USAGE;
		}
		dump(r, out);
		rc = damaged(c.traces[0], dlbn_reader_stats(r)) ? EXIT_INPUT : EXIT_DONE;
		dlbn_reader_close(r);
	} else {
		if (c.output && !(out = fopen(c.output, "w"))) {
			fprintf(stderr, "dlbn-analyze: %s: %s\n", c.output, strerror(errno));
			return EXIT_USAGE;
		}
		rc = analyze(&c, out);
	}
	if (fflush(out) != 0 || (out != stdout && fclose(out) != 0)) {
		fprintf(stderr, "dlbn-analyze: writing the report: %s\n", strerror(errno));
		rc = EXIT_INPUT;
	}
	return rc;
}
