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
#include <sys/stat.h>
#include <unistd.h>

#include "analysis/baseline.h"
#include "analysis/hotspots.h"
#include "analysis/sweep.h"
#include "analysis/verdict.h"
#include "analysis/whatif.h"
#include "export/export.h"
#include "gpu/gpu.h"
#include "inputs.h"
#include "model/model.h"
#include "report/report.h"
#include "report/report_html.h"
#include "trace/reader.h"
#include "util/progress.h"
#include "util/timings.h"

/* The release, from the file VERSION at the top of the source tree (Makefile). */
#ifndef DLBN_VERSION_STRING
#error "DLBN_VERSION_STRING is not defined: build with make"
#endif

enum { EXIT_DONE = 0, EXIT_INPUT = 1, EXIT_USAGE = 2, EXIT_FAIL_ON = 3 };
enum { FORMAT_TEXT = 0, FORMAT_JSON, FORMAT_MARKDOWN };

static const char usage_text[] =
	"usage: dlbn-analyze [options] TRACE|SUMMARY [TRACE|SUMMARY...]\n"
	"\n"
	"Tell from a dlbn trace whether PyTorch training waits for its DataLoader.\n"
	"Several ranks of a data-parallel job (their traces, or the summaries\n"
	"--summarize wrote where they ran, mixed): the job verdict (the worst\n"
	"rank's) and what it rests on, the spread across ranks, slow hosts, the\n"
	"straggler (the rank that stalls longest on its input; step times of\n"
	"synchronous ranks are equal), then the worst rank's report.\n"
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
	"      --summarize           also write each trace's summary beside it\n"
	"                            (TRACE without .bin, plus .summary.json)\n"
	"      --rank N              the rank report is rank N's, not the worst's (a\n"
	"                            rank given by its summary: its trace is read)\n"
	"  -h, --help                this text\n"
	"  -V, --version             version and trace format\n"
	"\n"
	"With several ranks, --fail-on applies to the job verdict and --html writes\n"
	"the job's page; --dump, --sqlite, --perfetto, --baseline and --plot take\n"
	"one trace.\n"
	"\n"
	"Exit status: 0 analysis done, 1 unreadable, damaged or cut-short input or\n"
	"a summary not written (the report of the rest says what was lost), 2 usage,\n"
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
	int timings;   /* --timings */
	long jobs;     /* -j: traces analysed at a time; 0 = the CPUs */
	int rank;      /* --rank N: the rank report is N's; -1 the worst's */
	int summarize; /* --summarize: a summary beside each trace analysed */
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

/* parse_args' answer to go on with the analysis (any other: exit with it),
 * and an option group's for an option that is not one of its own. */
#define ARGS_GO_ON    (-1)
#define ARGS_NOT_MINE (-2)

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
	O_TIMINGS,
	O_RANK,
	O_SUMMARIZE
};

static const struct option long_options[] = {
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
	{"rank", required_argument, NULL, O_RANK},
	{"summarize", no_argument, NULL, O_SUMMARIZE},
	{"jobs", required_argument, NULL, 'j'},
	{"help", no_argument, NULL, 'h'},
	{"version", no_argument, NULL, 'V'},
	{NULL, 0, NULL, 0},
};

/* What to write and where: the report's format, the outputs beside it. */
static int output_option(int ch, const char *arg, struct cli *c)
{
	switch (ch) {
	case 'f':
		if (!strcmp(arg, "json"))
			c->format = FORMAT_JSON;
		else if (!strcmp(arg, "markdown"))
			c->format = FORMAT_MARKDOWN;
		else if (!strcmp(arg, "text"))
			c->format = FORMAT_TEXT;
		else
			return usage_error("unknown format (text, markdown, json)", arg);
		return ARGS_GO_ON;
	case 'o':
		c->output = arg;
		return ARGS_GO_ON;
	case O_DUMP:
		c->dump = 1;
		return ARGS_GO_ON;
	case O_SQLITE:
		c->sqlite = arg;
		return ARGS_GO_ON;
	case O_PERFETTO:
		c->perfetto = arg;
		return ARGS_GO_ON;
	case O_HTML:
		c->html = arg;
		return ARGS_GO_ON;
	case O_PLOT:
		c->plot = arg;
		return ARGS_GO_ON;
	case O_TIMINGS:
		c->timings = 1;
		return ARGS_GO_ON;
	case O_SUMMARIZE:
		c->summarize = 1;
		return ARGS_GO_ON;
	default:
		return ARGS_NOT_MINE;
	}
}

/* What the analysis adds: a baseline, the what-if, native stacks, sweep
 * results. */
static int analysis_option(int ch, const char *arg, struct cli *c)
{
	switch (ch) {
	case O_BASELINE:
		c->baseline = arg;
		return ARGS_GO_ON;
	case O_WHATIF:
		c->what_if = 1;
		return ARGS_GO_ON;
	case O_SWEEP:
		c->sweep_results = arg;
		return ARGS_GO_ON;
	case O_NATIVE:
		c->native_stacks = 1;
		return ARGS_GO_ON;
	default:
		return ARGS_NOT_MINE;
	}
}

/* The verdict's view, window and thresholds, and the --fail-on level. */
static int rule_option(int ch, const char *arg, struct cli *c)
{
	double d;
	char *end;
	switch (ch) {
	case O_FAIL:
		if (!strcmp(arg, "detected"))
			c->fail_on = DLBN_VERDICT_DETECTED;
		else if (!strcmp(arg, "potential"))
			c->fail_on = DLBN_VERDICT_POTENTIAL;
		else
			return usage_error("--fail-on takes detected or potential", arg);
		return ARGS_GO_ON;
	case O_VIEW:
		if (!strcmp(arg, "python"))
			c->mo.force_view = DLBN_VIEW_PYTHON;
		else if (!strcmp(arg, "ipc"))
			c->mo.force_view = DLBN_VIEW_IPC;
		else if (!strcmp(arg, "nvtx"))
			c->mo.force_view = DLBN_VIEW_NVTX;
		else if (strcmp(arg, "auto") != 0)
			return usage_error("--view takes auto, python, nvtx or ipc", arg);
		return ARGS_GO_ON;
	case O_WARMUP: {
		long v = strtol(arg, &end, 10);
		if (*end || end == arg || v < 0 || v > 1000000000)
			return usage_error("--warmup takes a step count", arg);
		c->mo.warmup_steps = (int)v;
		return ARGS_GO_ON;
	}
	case O_DET:
		if (parse_double(arg, &d))
			return usage_error("--detected-above takes a positive number", arg);
		c->vo.detected_above = d;
		return ARGS_GO_ON;
	case O_POT:
		if (parse_double(arg, &d))
			return usage_error("--potential-above takes a positive number", arg);
		c->vo.potential_above = d;
		return ARGS_GO_ON;
	case O_GAP:
		if (parse_double(arg, &d))
			return usage_error("--handoff-gap-ms takes a positive number", arg);
		c->mo.handoff_gap_ns = (int64_t)(d * 1e6);
		return ARGS_GO_ON;
	default:
		return ARGS_NOT_MINE;
	}
}

/* Several traces: how many at a time, which rank's report. */
static int ranks_option(int ch, const char *arg, struct cli *c)
{
	char *end;
	switch (ch) {
	case 'j':
		c->jobs = strtol(arg, &end, 10);
		if (*end || end == arg || c->jobs < 1 || c->jobs > 4096)
			return usage_error("--jobs takes a count from 1 to 4096", arg);
		return ARGS_GO_ON;
	case O_RANK: {
		long v = strtol(arg, &end, 10);
		if (*end || end == arg || v < 0 || v > INT32_MAX)
			return usage_error("--rank takes a rank (0, 1, ...)", arg);
		c->rank = (int)v;
		return ARGS_GO_ON;
	}
	default:
		return ARGS_NOT_MINE;
	}
}

/* The traces after the options, and the options that exclude each other. */
static int operands(int argc, char **argv, struct cli *c)
{
	if (optind == argc)
		return usage_error("no trace file given", NULL);
	c->traces = argv + optind;
	c->ntraces = (size_t)(argc - optind);
	if (c->ntraces > 1 && (c->dump || c->sqlite || c->perfetto || c->baseline || c->plot))
		return usage_error("--dump, --sqlite, --perfetto, --baseline and --plot take one "
				   "trace",
				   NULL);
	if (c->dump && (c->summarize || c->rank >= 0))
		return usage_error("--dump goes without --summarize and --rank", NULL);
	if (c->sweep_results && !c->html && !c->what_if && !c->plot)
		return usage_error("--sweep-results goes with --what-if, --html or --plot", NULL);
	return ARGS_GO_ON;
}

/* ARGS_GO_ON to go on with the analysis, else an exit status. */
static int parse_args(int argc, char **argv, struct cli *c)
{
	int ch;
	opterr = 0;
	while ((ch = getopt_long(argc, argv, ":f:o:j:hV", long_options, NULL)) != -1) {
		switch (ch) {
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
			break;
		}
		int rc = output_option(ch, optarg, c);
		if (rc == ARGS_NOT_MINE)
			rc = analysis_option(ch, optarg, c);
		if (rc == ARGS_NOT_MINE)
			rc = rule_option(ch, optarg, c);
		if (rc == ARGS_NOT_MINE)
			rc = ranks_option(ch, optarg, c);
		if (rc == ARGS_NOT_MINE)
			return usage_error("unknown option", argv[optind - 1]);
		if (rc != ARGS_GO_ON)
			return rc;
	}
	return operands(argc, argv, c);
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

static size_t usable_cpus(void)
{
	cpu_set_t set;
	if (sched_getaffinity(0, sizeof(set), &set) == 0 && CPU_COUNT(&set) > 0)
		return (size_t)CPU_COUNT(&set);
	long n = sysconf(_SC_NPROCESSORS_ONLN);
	return n > 0 ? (size_t)n : 1;
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

/* The first output (-o, --html, --plot, --sqlite, --perfetto) that is the
 * same file as one of the inputs, NULL none: writing it would destroy the
 * rank's record. */
static const char *output_over_input(const struct cli *c)
{
	const char *outputs[] = {c->output, c->html, c->plot, c->sqlite, c->perfetto};
	struct stat os, is;
	for (size_t k = 0; k < sizeof(outputs) / sizeof(outputs[0]); k++) {
		if (!outputs[k] || stat(outputs[k], &os) != 0 || !S_ISREG(os.st_mode))
			continue;
		for (size_t i = 0; i < c->ntraces; i++)
			if (stat(c->traces[i], &is) == 0 && is.st_dev == os.st_dev &&
			    is.st_ino == os.st_ino)
				return outputs[k];
	}
	return NULL;
}

/* The row the rank report is about: --rank N's, else the job's worst.
 * NULL: no row has rank N. */
static const struct dlbn_rank_row *subject_row(const struct cli *c, const struct dlbn_inputs *in,
					       const struct dlbn_job *job)
{
	const struct dlbn_rank_row *found = NULL;
	if (c->rank < 0)
		return &in->rows[job->worst];
	/* A rank the trace names before a position that stands for one. */
	for (size_t i = 0; i < in->nrows; i++)
		if (in->rows[i].rank == c->rank &&
		    (!found || in->rows[i].rank_known > found->rank_known))
			found = &in->rows[i];
	return found;
}

/* The run behind the subject row: the kept one, else its trace analysed
 * now (a rank given by its trace, or one asked for by --rank; the worst
 * rank known from its summary alone is reported from the summary, which
 * keeps a job report from summaries fast).  NULL: the report is the
 * summary's. */
static struct dlbn_run *subject_run(const struct cli *c, struct dlbn_inputs *in,
				    const struct dlbn_rank_row *s, struct dlbn_run *extra,
				    const struct dlbn_run_opts *ro)
{
	if (in->kept && in->kept->path == s->input)
		return in->kept;
	if (s->source == DLBN_RANK_FROM_SUMMARY && c->rank < 0)
		return NULL;
	char err[512];
	extra->path = s->trace;
	if (dlbn_run_analyze(extra, ro, err, sizeof(err)) == 0)
		return extra;
	fprintf(stderr,
		"dlbn-analyze: rank %d: its trace cannot be analysed here (%s); the report is "
		"its summary's\n",
		s->rank, err);
	return NULL;
}

/* Reports, --html, --plot, exports of one analysis call.  1 if an output
 * failed. */
static int write_outputs(const struct cli *c, FILE *out, struct dlbn_inputs *in,
			 const struct dlbn_rank_failure *aside, size_t naside,
			 const struct dlbn_job *job, const struct dlbn_rank_row *s,
			 struct dlbn_run *w, const struct dlbn_sweep *points)
{
	int failed = 0;
	char err[512];
	struct dlbn_report_input ri = {
		.path = w ? w->path : s->input,
		.rs = w ? dlbn_reader_stats(w->r) : NULL,
		.m = w ? &w->m : NULL,
		.a = w ? &w->a : NULL,
		.gpu = w ? &w->m.gpu : NULL,
		.ranks = in->rows,
		.nranks = in->nrows,
		.job = job,
		.subject = s,
		.subject_requested = c->rank >= 0,
		.failures = in->failures,
		.nfailures = in->nfailures,
		.aside = aside,
		.naside = naside,
		.baseline = w && w->has_baseline ? &w->baseline : NULL,
		.whatif = w && c->what_if ? &w->whatif : NULL,
		.hot = w ? &w->hot : NULL,
		.native_stacks = c->native_stacks,
		.version = DLBN_VERSION_STRING,
	};
	int several = dlbn_report_is_job(&ri);
	report(c, out, &ri);
	if (!w && (c->plot || c->sqlite || c->perfetto)) {
		fprintf(stderr,
			"dlbn-analyze: --plot, --sqlite and --perfetto need the rank's "
			"trace; %s is a summary\n",
			s->input);
		failed = 1;
	}
	if (c->html && (several || !w)) {
		if (dlbn_report_html_job(c->html, &ri, err, sizeof(err)) != 0) {
			fprintf(stderr, "dlbn-analyze: --html %s: %s\n", c->html, err);
			failed = 1;
		}
	} else if (c->html && w && (points || !c->sweep_results)) {
		ri.whatif = &w->whatif;
		failed |= write_html(c, w->r, &ri, points);
	}
	if (c->plot && w && (points || !c->sweep_results) &&
	    dlbn_plot_svg(c->plot, w->path, &w->whatif, err, sizeof(err)) != 0) {
		fprintf(stderr, "dlbn-analyze: --plot %s: %s\n", c->plot, err);
		failed = 1;
	}
	if (!several && w)
		failed |= run_exports(c, w->r, &w->m, &w->a, &w->m.gpu);
	return failed;
}

static void print_timings(const struct cli *c, const struct dlbn_inputs *in,
			  const struct dlbn_stopwatch *report_sw)
{
	for (size_t i = 0; c->timings && i < in->n; i++) {
		struct dlbn_timings t = in->times[i];
		/* The reports are the job's: their cost is shown with the last trace. */
		if (i == in->n - 1)
			dlbn_timings_add(&t, DLBN_PHASE_REPORT, report_sw);
		if (t.records || t.ran[DLBN_PHASE_OPEN])
			dlbn_run_print_timings(c->traces[i], &t);
	}
}

static int analyze(const struct cli *c, FILE *out)
{
	struct dlbn_inputs in;
	struct dlbn_job job;
	int export_failed = 0;
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
	struct dlbn_inputs_opts io = {
		.run = {c->mo, c->vo, c->baseline, points, c->timings},
		.jobs = c->jobs > 0 ? (size_t)c->jobs : usable_cpus(),
		.want_rank = c->rank,
		.summarize = c->summarize,
		.version = DLBN_VERSION_STRING,
	};
	if (dlbn_inputs_analyze(&in, c->traces, c->ntraces, &io) != 0) {
		fprintf(stderr, "dlbn-analyze: out of memory\n");
		dlbn_inputs_free(&in);
		dlbn_sweep_free(&sweep);
		return EXIT_INPUT;
	}
	dlbn_progress_stop(); /* the reports follow: none of their lines is shared */
	dlbn_inputs_print_notes(&in);
	int rc = in.nfailures || in.damaged || in.summaries_failed ? EXIT_INPUT : EXIT_DONE;
	struct dlbn_rank_failure *aside = calloc(in.nrows ? in.nrows : 1, sizeof(*aside));
	size_t naside = aside ? dlbn_rank_rows_set_aside(in.rows, &in.nrows, aside) : 0;
	/* Rows in rank order (a shell lists trace-r10 before trace-r2). */
	if (in.nrows && (!aside || dlbn_rank_rows_sort(in.rows, in.nrows) != 0 ||
			 dlbn_job_summarize(&job, in.rows, in.nrows, in.nfailures) != 0)) {
		fprintf(stderr, "dlbn-analyze: out of memory\n");
		in.nrows = 0;
		rc = EXIT_INPUT;
	}
	const struct dlbn_rank_row *s = in.nrows ? subject_row(c, &in, &job) : NULL;
	if (in.nrows && !s) {
		fprintf(stderr, "dlbn-analyze: --rank %d: no input is that rank\n", c->rank);
		rc = EXIT_USAGE;
	} else if (s) {
		struct dlbn_run extra = {0};
		struct dlbn_stopwatch sw;
		dlbn_stopwatch_start(&sw);
		struct dlbn_run_opts ro = io.run;
		struct dlbn_run *w = subject_run(c, &in, s, &extra, &ro);
		export_failed |= write_outputs(c, out, &in, aside, naside, &job, s, w, points);
		print_timings(c, &in, &sw);
		dlbn_run_free(&extra);
		if (export_failed)
			rc = EXIT_INPUT;
		else if (rc == EXIT_DONE && c->fail_on && job.verdict >= c->fail_on)
			rc = EXIT_FAIL_ON;
	}
	if (in.nrows)
		dlbn_job_free(&job);
	free(aside);
	dlbn_inputs_free(&in);
	dlbn_sweep_free(&sweep);
	return rc;
}

int main(int argc, char **argv)
{
	struct cli c = {.rank = -1};
	char err[512];
	dlbn_gpu_model_opts(&c.mo);
	dlbn_verdict_default_opts(&c.vo);
	int rc = parse_args(argc, argv, &c);
	if (rc >= 0)
		return rc;

	FILE *out = stdout;
	const char *clobber = output_over_input(&c);
	if (clobber) {
		fprintf(stderr, "dlbn-analyze: %s: is one of the inputs; not overwriting it\n",
			clobber);
		return EXIT_USAGE;
	}
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
		char note[600];
		rc = EXIT_DONE;
		if (dlbn_run_damage_note(c.traces[0], dlbn_reader_stats(r), note, sizeof(note))) {
			fprintf(stderr, "dlbn-analyze: %s\n", note);
			rc = EXIT_INPUT;
		}
		dlbn_reader_close(r);
	} else {
		if (c.output && !(out = fopen(c.output, "w"))) {
			fprintf(stderr, "dlbn-analyze: %s: %s\n", c.output, strerror(errno));
			return EXIT_USAGE;
		}
		if (isatty(STDERR_FILENO))
			dlbn_progress_enable();
		rc = analyze(&c, out);
	}
	if (fflush(out) != 0 || (out != stdout && fclose(out) != 0)) {
		fprintf(stderr, "dlbn-analyze: writing the report: %s\n", strerror(errno));
		rc = EXIT_INPUT;
	}
	return rc;
}
