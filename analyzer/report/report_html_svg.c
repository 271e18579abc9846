/*
 * report_html_svg.c - the HTML report's charts as inline SVG: the step
 * timeline, the wait histogram, per-worker utilisation and the what-if
 * curve.  Colours come from the page's CSS classes (report_html.c), so the
 * charts carry only geometry and the data attributes tests look for
 * (class "whatif-point" / "sweep-point" with data-value, data-step-ms).
 */
#include <math.h>
#include <stdarg.h>
#include <string.h>

#include "report/report_html.h"

/* A linear map from data [lo, hi] to pixels [p0, p1]. */
struct scale {
	double lo, hi, p0, p1;
};

static double at(const struct scale *s, double v)
{
	if (s->hi <= s->lo)
		return s->p0;
	return s->p0 + (v - s->lo) / (s->hi - s->lo) * (s->p1 - s->p0);
}

/* A "nice" tick step giving about n ticks over span. */
static double tick_step(double span, int n)
{
	if (!(span > 0))
		return 1;
	double raw = span / n, mag = pow(10, floor(log10(raw))), f = raw / mag;
	return (f < 1.5 ? 1 : f < 3 ? 2 : f < 7 ? 5 : 10) * mag;
}

static void svg_open(FILE *out, int w, int h, const char *id, const char *label)
{
	fprintf(out,
		"<svg id=\"%s\" class=\"chart\" viewBox=\"0 0 %d %d\" width=\"100%%\" "
		"role=\"img\" aria-label=\"",
		id, w, h);
	html_esc(out, label);
	fputs("\" xmlns=\"http://www.w3.org/2000/svg\">\n", out);
}

static void text_at(FILE *out, double x, double y, const char *anchor, const char *cls,
		    const char *fmt, ...) __attribute__((format(printf, 6, 7)));

static void text_at(FILE *out, double x, double y, const char *anchor, const char *cls,
		    const char *fmt, ...)
{
	char buf[256];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	fprintf(out, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"%s\" class=\"%s\">", x, y, anchor,
		cls);
	html_esc(out, buf);
	fputs("</text>\n", out);
}

static void rect(FILE *out, double x, double y, double w, double h, const char *cls)
{
	if (w < 0.4)
		w = 0.4;
	fprintf(out, "<rect x=\"%.2f\" y=\"%.1f\" width=\"%.2f\" height=\"%.1f\" class=\"%s\"/>", x,
		y, w, h, cls);
}

/* Horizontal axis with ticks and grid lines from y0 to y1 (grid) at y1. */
static void x_axis(FILE *out, const struct scale *x, double y0, double y1, double unit,
		   const char *suffix, int nticks)
{
	double span = (x->hi - x->lo) / unit, step = tick_step(span, nticks);
	double first = ceil(x->lo / unit / step) * step;
	fprintf(out, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" class=\"axis\"/>\n",
		x->p0, y1, x->p1, y1);
	int nt = (int)floor((x->hi / unit + 1e-9 - first) / step) + 1;
	for (int i = 0; i < nt && i < 64; i++) {
		double v = first + i * step, px = at(x, v * unit);
		fprintf(out,
			"<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" class=\"grid\"/>\n",
			px, y0, px, y1);
		text_at(out, px, y1 + 14, "middle", "tick", "%g%s", v, suffix);
	}
}

static void y_axis(FILE *out, const struct scale *y, double x0, double x1, const char *suffix)
{
	double step = tick_step(y->hi - y->lo, 5);
	double first = ceil(y->lo / step) * step;
	int nt = (int)floor((y->hi + 1e-9 - first) / step) + 1;
	for (int i = 0; i < nt && i < 64; i++) {
		double v = first + i * step, py = at(y, v);
		fprintf(out,
			"<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" class=\"grid\"/>\n",
			x0, py, x1, py);
		text_at(out, x0 - 6, py + 4, "end", "tick", "%g%s", v, suffix);
	}
	fprintf(out, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" class=\"axis\"/>\n", x0,
		y->p0, x0, y->p1);
}

/* ---- timeline ---------------------------------------------------------- */

#define TL_W	 1100
#define TL_LEFT	 132
#define TL_RIGHT 16
#define TL_ROW	 22
#define TL_GAP	 6
#define TL_TOP	 8

/* The steady-state window, behind the rows (down to bottom). */
static void tl_window(FILE *out, const struct scale *x, const struct dlbn_model *m,
		      const struct dlbn_analysis *a, double bottom)
{
	if (!a->steps_window)
		return;
	double ws = at(x, (double)(a->window_begin - m->t0)),
	       we = at(x, (double)(a->window_end - m->t0));
	if (ws < x->p0)
		ws = x->p0;
	if (we > x->p1)
		we = x->p1;
	if (we > ws)
		rect(out, ws, TL_TOP - 4, we - ws, bottom - TL_TOP + 4, "tl-window");
}

/* The training loop's row at y: each fetch (hidden wait, stall) and the
 * loop's own work until the next. */
static void tl_loop(FILE *out, const struct scale *x, const struct html_data *d,
		    const struct dlbn_model *m, double y)
{
	text_at(out, TL_LEFT - 8, y + 15, "end", "rowlabel", "training loop");
	for (size_t i = 0; i < d->nsteps; i++) {
		const struct html_step *s = &d->steps[i];
		double b = at(x, (double)(s->begin - m->t0)), e = at(x, (double)(s->end - m->t0));
		if (i + 1 < d->nsteps) { /* the loop's own work until the next fetch */
			double nb = at(x, (double)(d->steps[i + 1].begin - m->t0));
			rect(out, e, y + 4, nb - e, TL_ROW - 8, "tl-loop");
		}
		fprintf(out,
			"<g class=\"step\"><title>step %zu%s: fetch %.2f ms, wait %.2f ms, stall "
			"%.2f ms</title>",
			i, s->warmup ? " (warm-up)" : "", (double)(s->end - s->begin) / 1e6,
			(double)s->wait / 1e6, (double)s->stall / 1e6);
		rect(out, b, y, e - b, TL_ROW, "tl-fetch");
		double busy = (double)(s->wait - s->stall),
		       px_per_ns =
			       (e - b) / (double)(s->end - s->begin > 0 ? s->end - s->begin : 1);
		if (busy > 0)
			rect(out, b, y, busy * px_per_ns, TL_ROW, "tl-hidden");
		if (s->stall > 0)
			rect(out, b + busy * px_per_ns, y, (double)s->stall * px_per_ns, TL_ROW,
			     "tl-stall");
		fputs("</g>\n", out);
	}
}

/* The GPU's row at y: busy and idle during each wait. */
static void tl_gpu(FILE *out, const struct scale *x, const struct html_data *d,
		   const struct dlbn_model *m, double y)
{
	text_at(out, TL_LEFT - 8, y + 15, "end", "rowlabel", "GPU at the waits");
	for (size_t i = 0; i < d->nsteps; i++) {
		const struct html_step *s = &d->steps[i];
		double b = at(x, (double)(s->begin - m->t0));
		double e = at(x, (double)(s->end - m->t0));
		double px = (e - b) / (double)(s->end - s->begin > 0 ? s->end - s->begin : 1);
		if (s->gpu_busy > 0)
			rect(out, b, y + 3, (double)s->gpu_busy * px, TL_ROW - 6, "tl-gpu");
		if (s->stall > 0)
			rect(out, b + (double)(s->wait - s->stall) * px, y + 3,
			     (double)s->stall * px, TL_ROW - 6, "tl-gpuidle");
	}
}

/* Worker row r at y: its batches, clipped to the chart. */
static void tl_worker(FILE *out, const struct scale *x, const struct html_data *d,
		      const struct dlbn_model *m, size_t r, double y)
{
	text_at(out, TL_LEFT - 8, y + 15, "end", "rowlabel", "worker %d", d->row_pid[r]);
	for (size_t i = 0; i < d->nbatches; i++) {
		const struct html_batch *bt = &d->batches[i];
		if (bt->row != (int)r)
			continue;
		double b = at(x, (double)(bt->begin - m->t0)), e = at(x, (double)(bt->end - m->t0));
		if (b < x->p0)
			b = x->p0;
		if (e > x->p1)
			e = x->p1;
		if (e > b)
			rect(out, b, y + 3, e - b - (e - b > 2 ? 0.8 : 0), TL_ROW - 6, "tl-batch");
	}
}

void svg_timeline(FILE *out, const struct html_data *d, const struct dlbn_model *m,
		  const struct dlbn_analysis *a)
{
	int rows = 1 + (d->gpu ? 1 : 0) + (int)d->nrows;
	int h = TL_TOP + rows * (TL_ROW + TL_GAP) + 30;
	struct scale x = {(double)(d->t_lo - m->t0), (double)(d->t_hi - m->t0), TL_LEFT,
			  TL_W - TL_RIGHT};
	double span_s = (x.hi - x.lo) / 1e9;
	double unit = span_s < 2 ? 1e6 : 1e9;
	svg_open(out, TL_W, h, "timeline", "Timeline of training steps and worker batches");
	double y = TL_TOP, bottom = TL_TOP + rows * (TL_ROW + TL_GAP);
	tl_window(out, &x, m, a, bottom);
	x_axis(out, &x, TL_TOP - 4, bottom, unit, unit == 1e6 ? " ms" : " s", 10);
	tl_loop(out, &x, d, m, y);
	y += TL_ROW + TL_GAP;
	if (d->gpu) {
		tl_gpu(out, &x, d, m, y);
		y += TL_ROW + TL_GAP;
	}
	for (size_t r = 0; r < d->nrows; r++) {
		tl_worker(out, &x, d, m, r, y);
		y += TL_ROW + TL_GAP;
	}
	fputs("</svg>\n", out);
}

/* ---- wait histogram ---------------------------------------------------- */

void svg_wait_hist(FILE *out, const struct html_data *d, const struct dlbn_analysis *a)
{
	const int W = 540, H = 240, L = 48, R = 12, T = 14, B = 40;
	uint64_t top = 1;
	for (int i = 0; i < HTML_HIST_BINS; i++)
		if (d->hist[i] > top)
			top = d->hist[i];
	struct scale x = {log10(html_hist_lo_ms(0)), log10(html_hist_lo_ms(HTML_HIST_BINS)), L,
			  W - R};
	struct scale y = {0, (double)top * 1.1, H - B, T};
	svg_open(out, W, H, "wait-hist", "Distribution of the loop's waits for a batch");
	y_axis(out, &y, L, W - R, "");
	fprintf(out, "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" class=\"axis\"/>\n", L, H - B,
		W - R, H - B);
	static const char *const dec[] = {"10 µs",  "100 µs", "1 ms", "10 ms",
					  "100 ms", "1 s",    "10 s"};
	for (int k = 0; k <= 6; k++) {
		double px = at(&x, -2.0 + k);
		text_at(out, px, H - B + 16, "middle", "tick", "%s", dec[k]);
	}
	for (int i = 0; i < HTML_HIST_BINS; i++) {
		if (!d->hist[i])
			continue;
		double x0 = at(&x, log10(html_hist_lo_ms(i))),
		       x1 = at(&x, log10(html_hist_lo_ms(i + 1)));
		double y0 = at(&y, (double)d->hist[i]);
		fprintf(out, "<g><title>%.3g-%.3g ms: %llu wait(s)</title>", html_hist_lo_ms(i),
			html_hist_lo_ms(i + 1), (unsigned long long)d->hist[i]);
		rect(out, x0 + 0.5, y0, x1 - x0 - 1, (H - B) - y0, "hist-bar");
		fputs("</g>\n", out);
	}
	struct {
		double ms;
		const char *name;
	} marks[] = {{a->p50_ms, "p50"}, {a->p95_ms, "p95"}};
	for (int k = 0; k < 2; k++) {
		if (!(marks[k].ms >= html_hist_lo_ms(0)))
			continue;
		double px = at(&x, log10(marks[k].ms));
		fprintf(out,
			"<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" class=\"marker\"/>\n",
			px, T, px, H - B);
		/* p50 to the left of its line, p95 to the right: they are often close. */
		text_at(out, px + (k ? 4 : -4), T + 10, k ? "start" : "end", "marklabel",
			"%s %.2f ms", marks[k].name, marks[k].ms);
	}
	text_at(out, (L + W - R) / 2.0, H - 6, "middle", "axislabel",
		"loader wait per step (log scale); %llu window steps, %llu under 10 µs",
		(unsigned long long)d->hist_n, (unsigned long long)d->hist_zero);
	fputs("</svg>\n", out);
}

/* ---- per-worker utilisation -------------------------------------------- */

void svg_worker_util(FILE *out, const struct dlbn_analysis *a)
{
	const int W = 540, L = 96, R = 60, ROW = 22, T = 10;
	int H = T + (int)a->nworkers * ROW + 34;
	struct scale x = {0, 100, L, W - R};
	svg_open(out, W, H, "worker-util", "Per-worker utilisation over the window");
	x_axis(out, &x, T, T + (double)a->nworkers * ROW, 1, "%", 5);
	for (size_t i = 0; i < a->nworkers; i++) {
		const struct dlbn_worker_stats *w = &a->workers[i];
		double yy = T + (double)i * ROW;
		text_at(out, L - 8, yy + 15, "end", "rowlabel", "pid %d", w->pid);
		double busy = w->busy_fraction >= 0 ? w->busy_fraction * 100 : 0;
		double file = w->busy_s > 0 ? busy * w->file_read_s / w->busy_s : 0;
		fprintf(out,
			"<g><title>pid %d: busy %.0f%%, file reads %.0f%%, %.1f ms per batch"
			"</title>",
			w->pid, busy, file, w->mean_batch_ms);
		rect(out, L, yy + 4, at(&x, 100) - L, ROW - 8, "util-bg");
		rect(out, L, yy + 4, at(&x, busy) - L, ROW - 8,
		     busy >= 90 ? "util-hot" : "util-busy");
		if (file > 0)
			rect(out, L, yy + 4, at(&x, file) - L, ROW - 8, "util-file");
		fputs("</g>\n", out);
		text_at(out, at(&x, 100) + 6, yy + 15, "start", "tick", "%s",
			w->busy_fraction >= 0 ? "" : "n/a");
		if (w->busy_fraction >= 0)
			text_at(out, at(&x, 100) + 6, yy + 15, "start", "value", "%.0f%%", busy);
	}
	fputs("</svg>\n", out);
}

/* ---- what-if curve ----------------------------------------------------- */

static const char *limit_class(const char *lim)
{
	static const char *const known[] = {"workers", "cores",	  "gpu",	 "loop",
					    "handoff", "storage", "main_thread", "epoch_startup"};
	for (size_t i = 0; i < sizeof(known) / sizeof(known[0]); i++)
		if (!strcmp(lim, known[i]))
			return known[i];
	return "other";
}

int svg_other_batch(const struct dlbn_sweep_point *p, const struct dlbn_whatif *w)
{
	return p->batch_size >= 1 && w->batch_size > 0 &&
	       fabs(p->batch_size - w->batch_size) >= 0.5;
}

/* The curve chart's frame: size and margins, in pixels. */
enum { CURVE_W = 1100, CURVE_H = 340, CURVE_L = 64, CURVE_R = 180, CURVE_T = 16, CURVE_B = 44 };

/* The curve's axes: x over the knob's values up to the largest predicted
 * or swept (at most 256), y up to the longest step; returns x's end. */
static int curve_scales(const struct dlbn_whatif *w, const struct dlbn_sweep *sweep,
			struct scale *x, struct scale *y)
{
	double ymax = w->measured_ms;
	int xmax = w->max_workers;
	for (size_t i = 0; i < w->nrows; i++)
		if (!strcmp(w->rows[i].setting, w->knob) && w->rows[i].step_ms > ymax)
			ymax = w->rows[i].step_ms;
	for (size_t i = 0; sweep && i < sweep->n; i++) {
		const struct dlbn_sweep_point *p = &sweep->v[i];
		if (strcmp(p->setting, w->knob) != 0 || svg_other_batch(p, w))
			continue;
		if (p->measured_ms > ymax)
			ymax = p->measured_ms;
		if (p->value > xmax && p->value <= 256)
			xmax = (int)ceil(p->value);
	}
	*x = (struct scale){0, xmax > 0 ? xmax : 1, CURVE_L, CURVE_W - CURVE_R};
	*y = (struct scale){0, ymax * 1.12, CURVE_H - CURVE_B, CURVE_T};
	return xmax;
}

/* The predicted curve, then its points coloured by their limit, and this
 * run's measured step. */
static void curve_points(FILE *out, const struct dlbn_whatif *w, const struct scale *x,
			 const struct scale *y)
{
	fputs("<polyline class=\"curve\" points=\"", out);
	for (size_t i = 0; i < w->nrows; i++)
		if (!strcmp(w->rows[i].setting, w->knob))
			fprintf(out, "%.1f,%.1f ", at(x, w->rows[i].value),
				at(y, w->rows[i].step_ms));
	fputs("\"/>\n", out);
	for (size_t i = 0; i < w->nrows; i++) {
		const struct dlbn_whatif_row *r = &w->rows[i];
		if (strcmp(r->setting, w->knob) != 0)
			continue;
		fprintf(out,
			"<circle class=\"whatif-point lim-%s\" cx=\"%.1f\" cy=\"%.1f\" r=\"5\" "
			"data-value=\"%d\" data-step-ms=\"%.3f\" data-limited-by=\"%s\">"
			"<title>num_workers=%d: %.2f ms per step predicted (%.2fx), limited by "
			"%s</title></circle>\n",
			limit_class(r->limited_by), at(x, r->value), at(y, r->step_ms), r->value,
			r->step_ms, r->limited_by, r->value, r->step_ms, r->speedup, r->limited_by);
		if (r->current) {
			double cx = at(x, r->value), cy = at(y, r->measured_ms);
			fprintf(out,
				"<circle class=\"measured-point\" cx=\"%.1f\" cy=\"%.1f\" r=\"8\" "
				"data-value=\"%d\" data-measured-ms=\"%.3f\"><title>this run: "
				"num_workers=%d, %.2f ms per step measured</title></circle>\n",
				cx, cy, r->value, r->measured_ms, r->value, r->measured_ms);
			text_at(out, cx + 10, cy - 10, "start", "marklabel", "this run %.1f ms",
				r->measured_ms);
		}
	}
}

/* The sweep's runs at the curve's batch size: measured, or failed. */
static void sweep_points(FILE *out, const struct dlbn_whatif *w, const struct dlbn_sweep *sweep,
			 const struct scale *x, const struct scale *y, int xmax)
{
	for (size_t i = 0; sweep && i < sweep->n; i++) {
		const struct dlbn_sweep_point *p = &sweep->v[i];
		if (strcmp(p->setting, w->knob) != 0 || p->value < 0 || p->value > xmax ||
		    svg_other_batch(p, w))
			continue;
		double cx = at(x, p->value);
		if (p->measured_ms > 0) {
			double cy = at(y, p->measured_ms);
			fprintf(out,
				"<path class=\"sweep-point\" d=\"M%.1f %.1fl6 6l-6 6l-6 -6z\" "
				"data-value=\"%g\" data-measured-ms=\"%.3f\"><title>sweep: "
				"num_workers=%g measured %.2f ms per step</title></path>\n",
				cx, cy - 6, p->value, p->measured_ms, p->value, p->measured_ms);
		} else {
			fprintf(out,
				"<g class=\"sweep-failed\" data-value=\"%g\"><title>sweep: "
				"num_workers=%g failed: ",
				p->value, p->value);
			html_esc(out, p->error[0] ? p->error : "no measurement");
			fprintf(out, "</title><path d=\"M%.1f %dl8 8m0 -8l-8 8\"/></g>\n", cx - 4,
				CURVE_T + 2);
			text_at(out, cx + 8, CURVE_T + 10, "start", "marklabel", "run failed");
		}
	}
}

static void curve_legend(FILE *out, int sweep)
{
	static const char *const legend[][2] = {{"workers", "workers' throughput"},
						{"storage", "storage (file reads)"},
						{"cores", "the job's CPUs"},
						{"gpu", "the GPU's step time"},
						{"loop", "the loop's own work"},
						{"handoff", "batch hand-off"},
						{"main_thread", "loading in the loop"},
						{"epoch_startup", "epoch start-up"}};
	const int lx = CURVE_W - CURVE_R;
	double ly = CURVE_T + 8;
	text_at(out, lx + 16, ly, "start", "legendhead", "limited by");
	for (size_t i = 0; i < sizeof(legend) / sizeof(legend[0]); i++) {
		ly += 18;
		fprintf(out, "<circle class=\"lim-%s\" cx=\"%d\" cy=\"%.1f\" r=\"5\"/>",
			legend[i][0], lx + 22, ly - 4);
		text_at(out, lx + 32, ly, "start", "legend", "%s", legend[i][1]);
	}
	ly += 26;
	fprintf(out, "<circle class=\"measured-point\" cx=\"%d\" cy=\"%.1f\" r=\"6\"/>", lx + 22,
		ly - 4);
	text_at(out, lx + 32, ly, "start", "legend", "this run (measured)");
	if (sweep) {
		ly += 18;
		fprintf(out, "<path class=\"sweep-point\" d=\"M%d %.1fl6 6l-6 6l-6 -6z\"/>",
			lx + 22, ly - 10);
		text_at(out, lx + 32, ly, "start", "legend", "sweep (measured)");
	}
}

void svg_whatif(FILE *out, const struct dlbn_whatif *w, const struct dlbn_sweep *sweep)
{
	struct scale x, y;
	int xmax = curve_scales(w, sweep, &x, &y);
	char title[64];
	snprintf(title, sizeof(title), "Predicted step time against %s", w->knob);
	svg_open(out, CURVE_W, CURVE_H, "whatif-curve", title);
	y_axis(out, &y, CURVE_L, CURVE_W - CURVE_R, "");
	x_axis(out, &x, CURVE_T, CURVE_H - CURVE_B, 1, "", xmax < 12 ? xmax : 12);
	text_at(out, (CURVE_L + CURVE_W - CURVE_R) / 2.0, CURVE_H - 8, "middle", "axislabel",
		w->knob);
	fprintf(out,
		"<text transform=\"translate(16 %.1f) rotate(-90)\" text-anchor=\"middle\" "
		"class=\"axislabel\">step time (ms)</text>\n",
		(CURVE_T + CURVE_H - CURVE_B) / 2.0);
	curve_points(out, w, &x, &y);
	sweep_points(out, w, sweep, &x, &y, xmax);
	curve_legend(out, sweep != NULL);
	fputs("</svg>\n", out);
}

/* ---- batch size x workers grid ----------------------------------------- */

/* The grid chart's classes: the page's <style> holds them, and so does a
 * standalone file's (dlbn_plot_svg). */
const char svg_grid_css[] =
	".grid-line{fill:none;stroke-width:2}.grid-point{stroke:#fff;stroke-width:1.2}\n"
	".grid-measured{stroke:#161b26;stroke-width:1.2}.grid-best{fill:none;stroke:#d94b3d;"
	"stroke-width:2.5}\n"
	".bs-0{stroke:#3056d3;fill:#3056d3}.bs-1{stroke:#2a9d8f;fill:#2a9d8f}"
	".bs-2{stroke:#b5651d;fill:#b5651d}.bs-3{stroke:#8e6bd1;fill:#8e6bd1}"
	".bs-4{stroke:#d94b3d;fill:#d94b3d}\n"
	".grid-line.bs-0,.grid-line.bs-1,.grid-line.bs-2,.grid-line.bs-3,.grid-line.bs-4"
	"{fill:none}\n";

/* The standalone file's rules for what the page's CSS gives the charts. */
static const char standalone_css[] =
	"text{font-family:system-ui,-apple-system,'Segoe UI',sans-serif}\n"
	".axis{stroke:#8a93a3;stroke-width:1}.grid{stroke:#eceef2;stroke-width:1}\n"
	".tick{fill:#6b7385;font-size:11px}.axislabel{fill:#4a5262;font-size:12px}\n"
	".marklabel{fill:#333a48;font-size:11.5px}.legend{fill:#333a48;font-size:12px}\n"
	".legendhead{fill:#6b7385;font-size:11px}.title{fill:#161b26;font-size:14px;"
	"font-weight:600}\n"
	".measured-point{fill:none;stroke:#161b26;stroke-width:2.5}\n";

static size_t grid_sizes_of(const struct dlbn_whatif *w, int *v)
{
	size_t n = 0;
	for (size_t i = 0; i < w->ngrid && n < DLBN_WHATIF_BATCHES; i++) {
		size_t j = 0;
		while (j < n && v[j] != w->grid[i].batch_size)
			j++;
		if (j == n)
			v[n++] = w->grid[i].batch_size;
	}
	return n;
}

static void diamond(FILE *out, double cx, double cy, int r)
{
	fprintf(out, " d=\"M%.1f %.1fl%d %dl-%d %dl-%d -%dz\"", cx, cy - r, r, r, r, r, r, r);
}

/* The grid chart: its frame (the top margin leaves a standalone file room
 * for its title), axes and batch sizes (the series, in the grid's order). */
enum { GRID_W = 1100, GRID_H = 380, GRID_L = 70, GRID_R = 200, GRID_B = 44 };

struct grid_chart {
	const struct dlbn_whatif *w;
	int top;
	struct scale x, y;
	int sizes[DLBN_WHATIF_BATCHES];
	size_t ns;
};

/* x over the grid's units, y up to the most samples/s predicted or measured. */
static void grid_scales(struct grid_chart *g)
{
	const struct dlbn_whatif *w = g->w;
	double ymax = 0;
	int umin = -1, umax = 0;
	for (size_t i = 0; i < w->ngrid; i++) {
		const struct dlbn_whatif_cell *c = &w->grid[i];
		double meas = c->measured_ms > 0 ? c->batch_size * 1e3 / c->measured_ms : 0;
		ymax = fmax(ymax, fmax(c->samples_per_s, meas));
		umin = umin < 0 || c->units < umin ? c->units : umin;
		umax = c->units > umax ? c->units : umax;
	}
	g->x = (struct scale){umin > 0 ? 0 : umin, umax > umin ? umax : umin + 1, GRID_L,
			      GRID_W - GRID_R};
	g->y = (struct scale){0, ymax > 0 ? ymax * 1.12 : 1, GRID_H - GRID_B, g->top};
}

/* The <svg> element (a standalone file's with its own style and title),
 * the axes and their labels. */
static void grid_frame(FILE *out, const struct grid_chart *g, int standalone)
{
	const int top = g->top;
	char title[96];
	snprintf(title, sizeof(title), "Predicted samples/s against %s, one line per batch size",
		 g->w->knob);
	if (standalone) {
		fprintf(out,
			"<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<svg id=\"grid-chart\" "
			"viewBox=\"0 0 %d %d\" width=\"%d\" height=\"%d\" role=\"img\" "
			"aria-label=\"%s\" xmlns=\"http://www.w3.org/2000/svg\">\n<style>\n%s%s"
			"</style>\n<rect width=\"100%%\" height=\"100%%\" fill=\"#fff\"/>\n",
			GRID_W, GRID_H, GRID_W, GRID_H, title, standalone_css, svg_grid_css);
		text_at(out, GRID_L, 24, "start", "title", "%s", title);
	} else {
		svg_open(out, GRID_W, GRID_H, "grid-chart", title);
	}
	int span = (int)(g->x.hi - g->x.lo);
	y_axis(out, &g->y, GRID_L, GRID_W - GRID_R, "");
	x_axis(out, &g->x, top, GRID_H - GRID_B, 1, "", span < 12 ? span : 12);
	text_at(out, (GRID_L + GRID_W - GRID_R) / 2.0, GRID_H - 8, "middle", "axislabel", "%s",
		g->w->knob);
	fprintf(out,
		"<text transform=\"translate(16 %.1f) rotate(-90)\" text-anchor=\"middle\" "
		"class=\"axislabel\">samples/s</text>\n",
		(top + GRID_H - GRID_B) / 2.0);
}

/* One point of the grid, its series' class k, and its measurement. */
static void grid_point(FILE *out, const struct grid_chart *g, const struct dlbn_whatif_cell *c,
		       size_t k)
{
	const char *knob = g->w->knob;
	double cx = at(&g->x, c->units);
	fprintf(out,
		"<circle class=\"grid-point bs-%zu\" cx=\"%.1f\" cy=\"%.1f\" r=\"4\" "
		"data-batch-size=\"%d\" data-units=\"%d\" data-samples-per-s=\"%.1f\" "
		"data-limited-by=\"%s\"><title>batch_size=%d, %s=%d: %.0f samples/s "
		"predicted "
		"(%.2f ms per step), limited by %s</title></circle>\n",
		k, cx, at(&g->y, c->samples_per_s), c->batch_size, c->units, c->samples_per_s,
		c->limited_by, c->batch_size, knob, c->units, c->samples_per_s, c->step_ms,
		c->limited_by);
	if (!(c->measured_ms > 0))
		return;
	double meas = c->batch_size * 1e3 / c->measured_ms, cy = at(&g->y, meas);
	fprintf(out, "<path class=\"grid-measured bs-%zu\"", k);
	diamond(out, cx, cy, 6);
	fprintf(out,
		" data-batch-size=\"%d\" data-units=\"%d\" "
		"data-measured-samples-per-s=\"%.1f\"><title>batch_size=%d, %s=%d: "
		"%.0f samples/s measured%s</title></path>\n",
		c->batch_size, c->units, meas, c->batch_size, knob, c->units, meas,
		c->current ? " (this run)" : "");
	if (c->current) {
		fprintf(out,
			"<circle class=\"measured-point\" cx=\"%.1f\" cy=\"%.1f\" "
			"r=\"10\"/>\n",
			cx, cy);
		text_at(out, cx + 12, cy + 16, "start", "marklabel", "this run");
	}
}

/* One line per batch size, its points, and the best point ringed. */
static void grid_series(FILE *out, const struct grid_chart *g)
{
	const struct dlbn_whatif *w = g->w;
	for (size_t k = 0; k < g->ns; k++) {
		fprintf(out,
			"<polyline class=\"grid-line bs-%zu\" data-batch-size=\"%d\" points=\"", k,
			g->sizes[k]);
		for (size_t i = 0; i < w->ngrid; i++)
			if (w->grid[i].batch_size == g->sizes[k])
				fprintf(out, "%.1f,%.1f ", at(&g->x, w->grid[i].units),
					at(&g->y, w->grid[i].samples_per_s));
		fputs("\"/>\n", out);
	}
	for (size_t i = 0; i < w->ngrid; i++) {
		size_t k = 0;
		while (k + 1 < g->ns && g->sizes[k] != w->grid[i].batch_size)
			k++;
		grid_point(out, g, &w->grid[i], k);
	}
	if (w->grid_best < 0)
		return;
	const struct dlbn_whatif_cell *b = &w->grid[w->grid_best];
	double cx = at(&g->x, b->units), cy = at(&g->y, b->samples_per_s);
	fprintf(out,
		"<circle class=\"grid-best\" cx=\"%.1f\" cy=\"%.1f\" r=\"9\" "
		"data-batch-size=\"%d\" data-units=\"%d\"/>\n",
		cx, cy, b->batch_size, b->units);
	int right = cx > (GRID_L + GRID_W - GRID_R) / 2.0;
	text_at(out, right ? cx - 14 : cx + 14, cy - 12, right ? "end" : "start", "marklabel",
		"best: batch_size %d, %s %d: %.0f/s", b->batch_size, w->knob, b->units,
		b->samples_per_s);
}

/* Legend: one line per batch size, then the marks. */
static void grid_legend(FILE *out, const struct grid_chart *g)
{
	const int lx = GRID_W - GRID_R;
	double ly = g->top + 8;
	text_at(out, lx + 16, ly, "start", "legendhead", "batch size");
	for (size_t k = 0; k < g->ns; k++) {
		ly += 18;
		fprintf(out,
			"<line class=\"grid-line bs-%zu\" x1=\"%d\" y1=\"%.1f\" x2=\"%d\" "
			"y2=\"%.1f\"/>",
			k, lx + 16, ly - 4, lx + 34, ly - 4);
		text_at(out, lx + 40, ly, "start", "legend", "%d%s", g->sizes[k],
			g->sizes[k] == g->w->batch_size ? " (this run)" : "");
	}
	ly += 26;
	fprintf(out, "<path class=\"grid-measured bs-0\"");
	diamond(out, lx + 25, ly - 4, 6);
	fputs("/>", out);
	text_at(out, lx + 40, ly, "start", "legend", "measured");
	ly += 20;
	fprintf(out, "<circle class=\"grid-best\" cx=\"%d\" cy=\"%.1f\" r=\"7\"/>", lx + 25,
		ly - 4);
	text_at(out, lx + 40, ly, "start", "legend", "best predicted");
}

void svg_grid(FILE *out, const struct dlbn_whatif *w, int standalone)
{
	struct grid_chart g = {.w = w, .top = standalone ? 40 : 16};
	g.ns = grid_sizes_of(w, g.sizes);
	grid_scales(&g);
	grid_frame(out, &g, standalone);
	grid_series(out, &g);
	grid_legend(out, &g);
	fputs("</svg>\n", out);
}
