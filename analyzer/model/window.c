/*
 * window.c - the steady-state window, aggregated as the steps arrive (see
 * struct dlbn_window in model.h), and the workers' figures inside it.
 *
 * A step is seen twice: as it ends (dlbn_window_feed: warm-up or window,
 * worker and CPU figures, hand-off detail) and once its GPU split is final
 * (dlbn_window_final: the wait and stall sums, the wait quantiles); it is
 * kept only with keep_steps.  Worker evidence is not kept either: worker
 * idle intervals and batch segments
 * wait in small pending arrays until the chosen view's next step end: those
 * ending by then are folded into the worker's window sums (clipped to the
 * window), the rest stay pending.  Records arrive in start-time order, so
 * when a step ending at e is fed, every worker interval starting before e
 * has been seen.
 */
#include <stdlib.h>
#include <string.h>

#include "model/model_int.h"
#include "util/quantiles.h"

static int64_t overlap(int64_t b, int64_t e, int64_t ws, int64_t we)
{
	int64_t lo = b > ws ? b : ws, hi = e < we ? e : we;
	return hi > lo ? hi - lo : 0;
}

void dlbn_prefetch_depth(struct dlbn_model *m)
{
	const struct dlbn_config *c = &m->config;
	if (c->present && c->num_workers >= 0) {
		int pf = c->prefetch_factor > 0 ? c->prefetch_factor : 2;
		int64_t depth = c->num_workers > 0 ? (int64_t)c->num_workers * pf : 0;
		m->prefetch_depth = depth > 1000000 ? 1000000 : (int)depth;
		m->prefetch_from_config = 1;
	} else if (m->prefetch_writes > 0) {
		m->prefetch_depth = m->prefetch_writes;
	} else {
		m->prefetch_depth = 2 * m->num_workers_inferred;
	}
	m->prefetch_known = 1;
}

/* Fold a worker's pending evidence up to e; accumulate the part after ws. */
static void fold_worker(struct dlbn_proc *p, int64_t ws, int64_t e, int accumulate)
{
	size_t k = 0;
	for (size_t i = 0; i < p->nidle; i++) {
		struct dlbn_ival iv = p->idle[i];
		if (accumulate)
			p->win_idle_ns += overlap(iv.begin, iv.end, ws, e);
		if (iv.end > e) {
			iv.begin = iv.begin > e ? iv.begin : e;
			p->idle[k++] = iv;
		}
	}
	p->nidle = k;
	k = 0;
	for (size_t i = 0; i < p->nsegs; i++) {
		const struct dlbn_batch_seg *sg = &p->segs[i];
		if (sg->end > e) {
			p->segs[k++] = *sg;
		} else if (accumulate && sg->end > ws) {
			p->win_batches++;
			p->win_batch_ns += sg->end - sg->begin;
			p->win_file_ns += sg->file_ns;
		}
	}
	p->nsegs = k;
}

/* The training loader's workers (and those of no known loader) count;
 * other loaders' workers only drop their pending evidence. */
static void fold_workers(struct dlbn_model *m, int64_t ws, int64_t e, int accumulate)
{
	for (size_t i = 0; i < m->nprocs; i++) {
		struct dlbn_proc *p = &m->procs[i];
		if (p->role == DLBN_ROLE_WORKER)
			fold_worker(p, ws, e, accumulate && dlbn_training_worker(m, i));
	}
}

/*
 * The chosen view's step just ended: its schedstat samples so far are the
 * window's start (warm-up) or its latest end.  Samples come at most every
 * 50 ms per thread (100 ms for the thread census), so the window's figures
 * are exact to about that.
 */
static void sched_mark(struct dlbn_model *m, int in_window)
{
	model_mem_mark(m, in_window);
	for (size_t k = 0; k < m->nsched_threads; k++) {
		struct dlbn_thread *t = &m->threads[m->sched_threads[k]];
		if (!in_window) {
			t->sched_base[0] = t->sched_cur[0];
			t->sched_base[1] = t->sched_cur[1];
		} else {
			t->sched_end[0] = t->sched_cur[0];
			t->sched_end[1] = t->sched_cur[1];
			t->sched_has_end = 1;
		}
	}
	for (size_t k = 0; k < m->ncensus; k++) {
		struct dlbn_census_thread *c = &m->census[k];
		if (!in_window) {
			c->base[0] = c->cur[0];
			c->base[1] = c->cur[1];
			c->base_t = c->cur_t;
			memcpy(c->period_base, c->period, sizeof(c->period));
		} else {
			c->end[0] = c->cur[0];
			c->end[1] = c->cur[1];
			c->end_t = c->cur_t;
			c->has_end = 1;
			memcpy(c->period_end, c->period, sizeof(c->period));
		}
	}
}

void dlbn_sched_window(const struct dlbn_model *m, size_t ti, int64_t *run_ns, int64_t *wait_ns)
{
	const struct dlbn_thread *t = &m->threads[ti];
	*run_ns = *wait_ns = 0;
	if (!t->sched_samples || !t->sched_has_end)
		return;
	int64_t run = t->sched_end[0] - t->sched_base[0], wait = t->sched_end[1] - t->sched_base[1];
	*run_ns = run > 0 ? run : 0; /* counters only grow; a reset reads as nothing */
	*wait_ns = wait > 0 ? wait : 0;
}

void dlbn_census_window(const struct dlbn_model *m, size_t i, int64_t *run_ns, int64_t *wait_ns)
{
	const struct dlbn_census_thread *c = &m->census[i];
	*run_ns = *wait_ns = 0;
	if (!c->samples || !c->has_end)
		return;
	int64_t run = c->end[0] - c->base[0], wait = c->end[1] - c->base[1];
	*run_ns = run > 0 ? run : 0;
	*wait_ns = wait > 0 ? wait : 0;
}

void dlbn_census_periods(const struct dlbn_model *m, size_t i, int64_t out[4])
{
	const struct dlbn_census_thread *c = &m->census[i];
	for (int k = 0; k < 4; k++)
		out[k] = c->has_end && c->period_end[k] > c->period_base[k]
				 ? c->period_end[k] - c->period_base[k]
				 : 0;
}

static int is_warmup(const struct dlbn_model *m, const struct dlbn_steps *st, size_t i,
		     const struct dlbn_step *s)
{
	if (i == 0)
		return 1;
	if (st->depth >= 0) /* another loader: its own prefetch depth */
		return s->epoch == 0 && i < (size_t)st->depth + 1;
	if (m->warmup_steps >= 0)
		return i < (size_t)m->warmup_steps;
	return s->epoch == 0 && i < (size_t)m->prefetch_depth + 1;
}

/* A step of a later epoch's start-up: the workers (re)started, the queue refilling. */
static int startup_step(const struct dlbn_model *m, const struct dlbn_step *s)
{
	return s->epoch > 0 && s->in_epoch <= (uint32_t)m->prefetch_depth;
}

void dlbn_window_feed(struct dlbn_model *m, struct dlbn_steps *st, struct dlbn_step *s)
{
	struct dlbn_window *w = &st->w;
	size_t i = st->n++;
	int chosen = st == m->steps;

	if (!m->prefetch_known)
		dlbn_prefetch_depth(m);
	w->in_epoch = s->epoch_start ? 0 : w->in_epoch + 1;
	s->in_epoch = (uint32_t)(w->in_epoch > UINT32_MAX ? UINT32_MAX : w->in_epoch);
	w->last_end = s->end;
	if (st == &m->ipc_steps && m->steps && m->steps->w.warmup && s->end > m->steps->w.ws) {
		/* Hand-off detail inside the chosen view's window, whichever view
		 * that is (the Python view has none of its own). */
		w->recv_ns += s->recv_ns;
		if (!startup_step(m, s)) {
			w->arrive_ns += s->wait_ns > s->recv_ns ? s->wait_ns - s->recv_ns : 0;
			w->narrive++;
		}
		w->bytes += s->bytes;
		w->nfds += s->nfds;
		w->nrecv++;
	}
	s->warmup = (uint8_t)is_warmup(m, st, i, s);
	if (s->warmup) {
		w->warmup++;
		w->ws = s->end;
		if (chosen) {
			fold_workers(m, 0, s->end, 0);
			sched_mark(m, 0);
		}
		return;
	}
	w->window++;
	w->we = s->end;
	if (chosen) {
		fold_workers(m, w->ws, s->end, 1);
		sched_mark(m, 1);
	}
}

static int keep(struct dlbn_steps *st, const struct dlbn_step *s, const struct dlbn_gpu_step *gs)
{
	if (st->nkept == st->cap) {
		size_t ncap = st->cap ? st->cap * 2 : 256;
		struct dlbn_step *nv = realloc(st->v, ncap * sizeof(*nv));
		if (!nv)
			return -1;
		st->v = nv;
		struct dlbn_gpu_step *ng = realloc(st->gs, ncap * sizeof(*ng));
		if (!ng)
			return -1;
		st->gs = ng;
		st->cap = ncap;
	}
	st->v[st->nkept] = *s;
	if (gs)
		st->gs[st->nkept] = *gs;
	else
		memset(&st->gs[st->nkept], 0, sizeof(*gs));
	st->nkept++;
	return 0;
}

/*
 * Other loaders' steps between two steps of the training loader lie inside
 * its window when the later one is a window step: they wait as pending
 * until then (the last ones, after the training loader's last step, never
 * count).  Their own warm-up counts too: the reference Replay caches every
 * loader before the loop, so a val loader's first epoch inside the window
 * (worker start-up, the first batches) is loading time it removes.
 */
static void other_loaders_window(struct dlbn_model *m, const struct dlbn_step *s)
{
	struct dlbn_loader_table *t = &m->loaders;
	if (s->aside) {
		if (s->loader < 0)
			return;
		struct dlbn_loader_sums *p = &t->v[s->loader].pending;
		p->steps++;
		p->wait_ns += s->wait_ns;
		p->stall_ns += s->gpu_idle_ns + s->gpu_refill_ns;
		dlbn_lead_sums_add(&p->leads, &s->lead, s->gpu_lead_idle_ns, s->gpu_lead_refill_ns,
				   s->gpu_lead_wrap_idle_ns);
		return;
	}
	for (size_t i = 0; i < t->n; i++) {
		struct dlbn_loader *l = &t->v[i];
		if (!s->warmup) {
			l->in_train_window.steps += l->pending.steps;
			l->in_train_window.wait_ns += l->pending.wait_ns;
			l->in_train_window.stall_ns += l->pending.stall_ns;
			dlbn_lead_sums_merge(&l->in_train_window.leads, &l->pending.leads);
		}
		memset(&l->pending, 0, sizeof(l->pending));
	}
}

/* See struct dlbn_gpu_pace: a window step whose GPU started idle after
 * the previous step adds its time; one that found it busy, a backlog. */
static void gpu_pace_add(struct dlbn_gpu_pace *p, const struct dlbn_step *s,
			 const struct dlbn_gpu_step *gs)
{
	if (p->have_prev && !s->warmup && p->prev_next_enqueue > 0 && p->prev_gpu_done > 0 &&
	    gs->gpu_done > 0) {
		if (p->prev_gpu_done <= p->prev_next_enqueue) {
			if (gs->gpu_done > p->prev_next_enqueue) {
				p->sum_ms += (double)(gs->gpu_done - p->prev_next_enqueue) / 1e6;
				p->samples++;
			}
		} else {
			p->backlog++;
		}
	}
	p->prev_next_enqueue = gs->next_enqueue;
	p->prev_gpu_done = gs->gpu_done;
	p->have_prev = 1;
}

int dlbn_window_final(struct dlbn_model *m, struct dlbn_steps *st, const struct dlbn_step *s,
		      const struct dlbn_gpu_step *gs)
{
	struct dlbn_window *w = &st->w;
	size_t i = st->nfinal++;
	int rc = 0;

	if (m->opts.keep_steps && keep(st, s, gs) != 0)
		rc = -1;
	if (st == m->steps && m->opts.sink)
		m->opts.sink(m->opts.sink_ctx, i, s, gs);
	if (gs)
		gpu_pace_add(&w->gpu_pace, s, gs);
	if (st == &m->py_steps || s->aside)
		other_loaders_window(m, s);
	if (s->warmup)
		return rc;
	w->exposed_ns += s->wait_ns;
	w->stall_ns += s->gpu_idle_ns + s->gpu_refill_ns;
	dlbn_lead_sums_add(&w->leads, &s->lead, s->gpu_lead_idle_ns, s->gpu_lead_refill_ns,
			   s->gpu_lead_wrap_idle_ns);
	if (startup_step(m, s)) {
		w->startup_ns += s->gpu_idle_ns;
	} else {
		w->steady_wait_ns += s->wait_ns;
		w->nsteady++;
	}
	if (w->waits && dlbn_quantiles_add(w->waits, s->wait_ns) != 0)
		rc = -1;
	return rc;
}

void dlbn_worker_window_stats(const struct dlbn_model *m, size_t pi, struct dlbn_worker_stats *out)
{
	const struct dlbn_proc *p = &m->procs[pi];
	const struct dlbn_window *w = m->steps ? &m->steps->w : NULL;
	memset(out, 0, sizeof(*out));
	out->pid = p->pid;
	out->exited = p->has_exit;
	out->ended_s = (double)(p->t_last - m->t0) / 1e9;
	out->busy_fraction = -1;
	if (!w || !w->window)
		return;
	int64_t life = overlap(p->t_first, p->t_last, w->ws, w->we);
	int64_t idle = p->win_idle_ns < life ? p->win_idle_ns : life;
	out->batches = p->win_batches;
	if (life > 0)
		out->busy_fraction = 1.0 - (double)idle / (double)life;
	out->busy_s = (double)(life - idle) / 1e9;
	out->mean_batch_ms =
		p->win_batches ? (double)p->win_batch_ns / (double)p->win_batches / 1e6 : 0;
	out->file_read_s = (double)p->win_file_ns / 1e9;
}
