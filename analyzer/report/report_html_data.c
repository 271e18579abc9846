/*
 * report_html_data.c - what the HTML report draws that the analysis does
 * not keep: a slice of steps (the whole run when it is short, else the
 * first HTML_MAX_STEPS steps of the window), the worker batches inside
 * that slice, and the histogram of every window wait.  Fixed-size arrays:
 * memory does not depend on the trace's length.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "model/pairs.h"
#include "report/report_html.h"

#define HIST_LO_MS   0.01 /* first bin's lower edge */
#define HIST_DECADES 6	  /* 0.01 ms .. 10 s */

double html_hist_lo_ms(int i)
{
	return HIST_LO_MS * pow(10.0, (double)i * HIST_DECADES / HTML_HIST_BINS);
}

static void hist_add(struct html_data *d, int64_t wait_ns)
{
	double ms = (double)wait_ns / 1e6;
	d->hist_n++;
	if (ms < HIST_LO_MS) {
		d->hist_zero++;
		return;
	}
	int i = (int)floor(log10(ms / HIST_LO_MS) * HTML_HIST_BINS / HIST_DECADES);
	if (i >= HTML_HIST_BINS)
		i = HTML_HIST_BINS - 1;
	d->hist[i]++;
}

struct collect {
	struct html_data *d;
	const struct dlbn_model *m;
	size_t keep_from;
};

static void step_sink(void *ctx, size_t index, const struct dlbn_step *s,
		      const struct dlbn_gpu_step *gs)
{
	struct collect *c = ctx;
	struct html_data *d = c->d;
	const struct dlbn_window *w = &c->m->steps->w;
	(void)gs;
	if (!s->warmup && s->end > w->ws && s->end <= w->we)
		hist_add(d, s->wait_ns);
	if (index < c->keep_from || d->nsteps >= HTML_MAX_STEPS)
		return;
	struct html_step *h = &d->steps[d->nsteps++];
	h->begin = s->begin;
	h->end = s->end;
	h->wait = s->wait_ns;
	h->gpu_busy = s->gpu_busy_ns;
	h->stall = s->gpu_idle_ns + s->gpu_refill_ns;
	if (h->stall > h->wait)
		h->stall = h->wait;
	h->warmup = s->warmup;
}

static int row_of(struct html_data *d, int pid)
{
	for (size_t i = 0; i < d->nrows; i++)
		if (d->row_pid[i] == pid)
			return (int)i;
	if (d->nrows >= HTML_MAX_ROWS) {
		d->rows_dropped++;
		return -1;
	}
	d->row_pid[d->nrows] = pid;
	return (int)d->nrows++;
}

static int batch_sink(void *ctx, const struct dlbn_interval *iv)
{
	struct collect *c = ctx;
	struct html_data *d = c->d;
	if (iv->kind != DLBN_IV_BATCH || iv->end < 0 || iv->end < d->t_lo || iv->begin > d->t_hi)
		return 0;
	if (!dlbn_training_worker(c->m, iv->proc_index))
		return 0;
	if (d->nbatches >= HTML_MAX_BATCHES) {
		d->batches_dropped++;
		return 0;
	}
	int row = row_of(d, c->m->procs[iv->proc_index].pid);
	if (row < 0)
		return 0;
	d->batches[d->nbatches++] = (struct html_batch){iv->begin, iv->end, row};
	return 0;
}

int html_data_collect(struct html_data *d, struct dlbn_reader *r, const struct dlbn_model *m,
		      char *err, size_t errlen)
{
	memset(d, 0, sizeof(*d));
	d->gpu = m->gpu.present;
	if (!m->steps || m->view == DLBN_VIEW_NONE || m->steps->n == 0)
		return 0;
	struct collect c = {d, m, 0};
	if (m->steps->n > HTML_MAX_STEPS)
		c.keep_from = m->steps->w.warmup;
	if (dlbn_model_each_step(m, r, step_sink, &c) != 0) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	if (!d->nsteps)
		return 0;
	d->t_lo = d->steps[0].begin;
	d->t_hi = d->steps[d->nsteps - 1].end;
	d->batches = calloc(HTML_MAX_BATCHES, sizeof(*d->batches));
	struct dlbn_pairs *pairs = dlbn_pairs_new(m);
	if (!d->batches || !pairs) {
		dlbn_pairs_free(pairs);
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	const struct dlbn_record *rec;
	int rc = 0;
	dlbn_reader_rewind(r);
	while (!rc && (rec = dlbn_reader_next(r))) {
		if (rec->stream->index >= m->nthreads)
			continue;
		rc = dlbn_pairs_feed(pairs, rec, batch_sink, &c);
	}
	if (!rc)
		rc = dlbn_pairs_finish(pairs, batch_sink, &c);
	dlbn_pairs_free(pairs);
	if (rc) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	return 0;
}

void html_data_free(struct html_data *d)
{
	free(d->batches);
	d->batches = NULL;
}

void html_esc(FILE *out, const char *s)
{
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;
		if (c == '&')
			fputs("&amp;", out);
		else if (c == '<')
			fputs("&lt;", out);
		else if (c == '>')
			fputs("&gt;", out);
		else if (c == '"')
			fputs("&quot;", out);
		else if (c >= 0x20 || c == '\t' || c == '\n')
			fputc(c, out);
	}
}
