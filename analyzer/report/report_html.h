/*
 * report_html.h - `dlbn-analyze --html FILE`: one self-contained HTML page
 * (inline CSS and SVG, no script, nothing fetched from the network) with
 * the verdict and its evidence, a timeline of steps (wait, stall, GPU
 * during the waits, each worker's batches), the distribution of the
 * window's waits, per-worker utilisation, the workers' time table and the
 * what-if curve (whatif.h) with the sweep's measured points (sweep.h).
 *
 * A report module: it reads the model, the analysis and the what-if
 * model, and never the other way round.  The timeline and the wait
 * histogram come from one more pass over the trace (the steps through
 * dlbn_model_each_step, worker batches through model/pairs.h's interval
 * pairing); only a bounded slice of steps and batches is kept, so memory
 * does not grow with the trace.  The file is replaced atomically
 * (util/outfile.h).
 *
 * report_html_data.c gathers that slice, report_html_svg.c draws SVG
 * primitives and charts, report_html.c writes the page.
 */
#ifndef DLBN_REPORT_HTML_H
#define DLBN_REPORT_HTML_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "analysis/sweep.h"
#include "report/report.h"
#include "trace/reader.h"

/* Write the page to path.  r: the trace in->m was built from (rewound and
 * read again).  sweep: NULL or the measured points.  0, or -1 with a
 * one-line reason in err (no file left at path). */
int dlbn_report_html(const char *path, struct dlbn_reader *r, const struct dlbn_report_input *in,
		     const struct dlbn_sweep *sweep, char *err, size_t errlen);

/* --plot: the batch size x workers chart of w as a standalone SVG file at
 * path (replaced atomically, as the page is; never the trace itself).  0,
 * or -1 with a one-line reason in err (no grid: the what-if's why_not, or
 * no batch size). */
int dlbn_plot_svg(const char *path, const char *trace_path, const struct dlbn_whatif *w, char *err,
		  size_t errlen);

/* --html with several ranks (report_html_job.c): the job's page from the
 * rows alone (in->ranks, in->job, in->failures; in->m may be NULL): the
 * job verdict and what it rests on, the spread across ranks, a rank-by-
 * host grid coloured by stall, the slow hosts, the straggler and the
 * ranks that stand out, and the worst ranks.  Same contract as above. */
int dlbn_report_html_job(const char *path, const struct dlbn_report_input *in, char *err,
			 size_t errlen);

/* ---- shared by the report_html*.c files -------------------------------- */

#define HTML_MAX_STEPS	 120  /* timeline: steps drawn */
#define HTML_MAX_BATCHES 6000 /* timeline: worker batches drawn */
#define HTML_MAX_ROWS	 16   /* timeline: worker rows */
#define HTML_HIST_BINS	 36   /* wait histogram: log bins, 10 us .. 10 s */

struct html_step {
	int64_t begin, end, wait, gpu_busy, stall;
	int warmup;
};

struct html_batch {
	int64_t begin, end;
	int row;
};

struct html_data {
	struct html_step steps[HTML_MAX_STEPS];
	size_t nsteps;
	struct html_batch *batches; /* HTML_MAX_BATCHES */
	size_t nbatches, batches_dropped;
	int row_pid[HTML_MAX_ROWS];
	size_t nrows, rows_dropped;
	int64_t t_lo, t_hi; /* timeline span (absolute ns) */
	uint64_t hist[HTML_HIST_BINS];
	uint64_t hist_zero; /* waits under the first bin */
	uint64_t hist_n;
	int gpu; /* steps carry a GPU split */
};

/* Gather the timeline slice and the wait histogram; 0, or -1 (err). */
int html_data_collect(struct html_data *d, struct dlbn_reader *r, const struct dlbn_model *m,
		      char *err, size_t errlen);
void html_data_free(struct html_data *d);
/* Lower edge of histogram bin i, ms. */
double html_hist_lo_ms(int i);

/* The page's style sheet (report_html.c): cards, tiles, tables, pills. */
extern const char html_css[];

/* Text with &, <, >, " escaped (bytes < 0x20 but tab/newline dropped);
 * report_html_data.c. */
void html_esc(FILE *out, const char *s);

/* Charts (report_html_svg.c).  Each writes one <svg> element. */
void svg_timeline(FILE *out, const struct html_data *d, const struct dlbn_model *m,
		  const struct dlbn_analysis *a);
void svg_wait_hist(FILE *out, const struct html_data *d, const struct dlbn_analysis *a);
void svg_worker_util(FILE *out, const struct dlbn_analysis *a);
void svg_whatif(FILE *out, const struct dlbn_whatif *w, const struct dlbn_sweep *sweep);
/* The batch size x workers grid: samples/s against the curve's setting,
 * one line per batch size, measured points, the best one marked.
 * standalone: a whole SVG file (XML declaration, its own styles). */
void svg_grid(FILE *out, const struct dlbn_whatif *w, int standalone);
extern const char svg_grid_css[];
/* A sweep point of another batch size than the run's (a grid's): not a
 * point of the run's worker curve. */
int svg_other_batch(const struct dlbn_sweep_point *p, const struct dlbn_whatif *w);

#endif /* DLBN_REPORT_HTML_H */
