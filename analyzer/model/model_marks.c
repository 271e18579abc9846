/*
 * model_marks.c - the views the program declares: the Python bootstrap's
 * fetch marks (exact fetches per loader, with the loop's counters that
 * give each step's lead, lead.h) and the main thread's NVTX data-loading
 * ranges.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/model_int.h"

static int loop_counters(const struct dlbn_record *r, int64_t *c)
{
	if (r->nfields < 3 + LOOP_COUNTERS_MIN)
		return 0;
	for (int i = 0; i < LOOP_COUNTERS; i++) {
		if (i >= LOOP_COUNTERS_MIN && 3 + i >= r->nfields) {
			c[i] = 0;
			continue;
		}
		c[i] = r->kind[3 + i] == DLBN_V_INT ? r->f[3 + i] : -1;
		if (c[i] < 0 && i != LC_SYS)
			return 0;
	}
	return 1;
}

/*
 * The lead of the fetch beginning at r: the loop period since the last
 * arrival.  Time off the CPU inside munmap/close is counted there (it is
 * the free's cost, run queue or not); only the run-queue time outside it
 * is the loop queued behind the workers.
 */
static struct dlbn_lead lead_of(const struct pass2 *ps, const struct dlbn_record *r)
{
	struct dlbn_lead d = {0};
	int64_t c[LOOP_COUNTERS];
	if (!ps->arrival_known || !loop_counters(r, c) || r->t_ns < ps->arrival_t)
		return d;
	const int64_t *a = ps->arrival_counters;
	int64_t run = c[LC_RUN] - a[LC_RUN], runq = c[LC_RUNQ] - a[LC_RUNQ];
	int64_t free_wall = c[LC_FREE] - a[LC_FREE], free_cpu = c[LC_FREE_CPU] - a[LC_FREE_CPU];
	if (run < 0 || runq < 0 || free_wall < 0 || free_cpu < 0)
		return d; /* counters of another thread or process instance */
	int64_t free_off_cpu = free_wall > free_cpu ? free_wall - free_cpu : 0;
	int64_t gil = c[LC_GIL] - a[LC_GIL], others = c[LC_GIL_OTHERS] - a[LC_GIL_OTHERS];
	d.gil_ns = gil > 0 ? gil : 0;
	d.gil_others_ns = others > 0 ? others : 0;
	d.wall_ns = r->t_ns - ps->arrival_t;
	d.free_ns = free_wall;
	d.free_cpu_ns = free_cpu;
	d.runq_ns = runq > free_off_cpu ? runq - free_off_cpu : 0;
	d.cpu_ns = run > free_cpu ? run - free_cpu : 0;
	d.sys_ns = c[LC_SYS] >= 0 && a[LC_SYS] >= 0 && c[LC_SYS] >= a[LC_SYS]
			   ? c[LC_SYS] - a[LC_SYS]
			   : 0;
	d.minflt = c[LC_MINFLT] - a[LC_MINFLT];
	d.shm_bytes = ps->arrival_shm;
	if (ps->handoff_t > 0) {
		d.wrap_ns = ps->handoff_t - ps->arrival_t;
		d.wrapped = 1;
	}
	d.known = 1;
	return d;
}

/* FETCH_BEGIN of loader l (st: its steps; aside: not the training
 * loader): the fetch opens, its lead ends, and the loader's start-up
 * since iter() joins the wait. */
static void mark_fetch_begin(struct pass2 *ps, struct dlbn_loader *l, const struct dlbn_steps *st,
			     int aside, const struct dlbn_record *r)
{
	int64_t c[LOOP_COUNTERS];
	l->py_open = r->t_ns;
	l->py_lead = lead_of(ps, r);
	int counted = loop_counters(r, c);
	l->py_gil_others_at = counted ? c[LC_GIL_OTHERS] : -1;
	l->py_runq_at = counted ? c[LC_RUNQ] : -1;
	l->py_lead_end = r->t_ns;
	/* The training loader's first iter() is warm-up; another loader's
	 * may fall inside the training window, where the reference Replay
	 * (every loader cached before the loop) has no worker start-up. */
	if (l->py_iter_begin >= 0 && (st->n > 0 || aside)) {
		int64_t start_up = r->t_ns - l->py_iter_begin - (ps->waited_ns - l->py_iter_waited);
		if (start_up > 0) {
			l->py_carry_ns += start_up;
			ps->waited_ns += start_up;
		}
		/* The start-up goes with the wait: a lead it lies in ends at
		 * the iter() (its counters are the ITER_BEGIN mark's; a trace
		 * without them leaves it unknown). */
		if (start_up > 0 && ps->arrival_known && l->py_iter_begin >= ps->arrival_t) {
			l->py_lead = l->py_iter_lead;
			l->py_lead_end = l->py_iter_begin;
		}
	}
	ps->arrival_known = 0;
	l->py_iter_begin = -1;
}

/* FETCH_END of loader li: the step, and the batch's arrival that the
 * next lead starts from. */
static void mark_fetch_end(struct pass2 *ps, struct dlbn_loader *l, struct dlbn_steps *st,
			   int aside, int li, const struct dlbn_record *r)
{
	if (l->py_open >= 0)
		ps->waited_ns += r->t_ns - l->py_open;
	if (l->py_open >= 0) {
		/* The other threads' lock waits over the whole period: the
		 * lead's, then the fetch's. */
		int64_t c[LOOP_COUNTERS];
		int counted = loop_counters(r, c);
		if (l->py_lead.known && l->py_gil_others_at >= 0 && counted &&
		    c[LC_GIL_OTHERS] >= l->py_gil_others_at)
			l->py_lead.gil_others_ns += c[LC_GIL_OTHERS] - l->py_gil_others_at;
		if (l->py_runq_at >= 0 && counted && c[LC_RUNQ] >= l->py_runq_at)
			l->fetch_runq_ns += c[LC_RUNQ] - l->py_runq_at;
		struct dlbn_step s = {.begin = l->py_open,
				      .end = r->t_ns,
				      .wait_ns = r->t_ns - l->py_open + l->py_carry_ns +
						 ps->stop_carry_ns,
				      .aside = (uint8_t)aside,
				      .loader = (int16_t)li,
				      .lead = l->py_lead,
				      .lead_end = l->py_lead_end};
		if (!s.lead.known && ps->stop_lead.known) {
			s.lead = ps->stop_lead;
			s.lead_end = ps->stop_lead_end;
		}
		model_number_epoch(st, &s, l->py_new_epoch);
		l->py_new_epoch = 0;
		l->py_carry_ns = 0;
		ps->stop_carry_ns = 0;
		model_feed(ps, st, &s);
	}
	ps->stop_lead.known = 0; /* its other fields are read only when known */
	l->py_open = -1;
	ps->arrival_t = r->t_ns;
	ps->arrival_known = loop_counters(r, ps->arrival_counters);
	ps->arrival_iter = fld(r, 1);
	ps->handoff_t = 0;
	ps->arrival_shm = ps->shm_mapped - ps->shm_at_arrival;
	ps->shm_at_arrival = ps->shm_mapped;
}

/* HANDOFF: the wrapper's part of the coming lead ends here; without its
 * own counters it cannot be told from the rest and is left in the lead. */
static void mark_handoff(struct pass2 *ps, const struct dlbn_record *r)
{
	int64_t c[LOOP_COUNTERS];
	if (ps->arrival_known && !ps->handoff_t && fld(r, 1) == ps->arrival_iter &&
	    r->t_ns >= ps->arrival_t && loop_counters(r, c)) {
		memcpy(ps->arrival_counters, c, sizeof(c));
		ps->handoff_t = r->t_ns;
	}
}

/* FETCH_STOP: the next batch the loop gets, from whichever loader,
 * carries this fetch: a val loader's last fetch of an epoch shuts its
 * workers down between two training steps, while that loader's own next
 * step may come after the window.  That batch's step has no lead of its
 * own (no arrival since), so it takes this fetch's: the loop period after
 * the epoch's last batch, whose queueing and frees Replay removes too. */
static void mark_fetch_stop(struct pass2 *ps, struct dlbn_loader *l, const struct dlbn_record *r)
{
	ps->arrival_known = 0;
	if (l->py_open >= 0) {
		ps->stop_carry_ns += r->t_ns - l->py_open;
		ps->waited_ns += r->t_ns - l->py_open;
		if (l->py_lead.known && !ps->stop_lead.known) {
			ps->stop_lead = l->py_lead;
			ps->stop_lead_end = l->py_lead_end;
		}
	}
	l->py_open = -1;
}

/*
 * A fetch mark of the loop's thread.  Each loader keeps its own fetch
 * state (zipped loaders interleave their fetches).  Loader time between
 * epochs that no fetch returns a batch for - the fetch that ended the
 * epoch (it shuts non-persistent workers down) and iter() up to the next
 * fetch (it starts them) - is charged to a later step: iter() to the
 * loader's next one, the ending fetch to the next one the loop gets from any
 * loader.  Replay has neither.
 */
void model_mark_record(struct pass2 *ps, const struct dlbn_record *r)
{
	struct dlbn_model *m = ps->m;
	/* The loop period a census at each end bounds (thread_census.c):
	 * from any batch's arrival to the next fetch begin. */
	if (fld(r, 0) == DLBN_MARK_FETCH_END) {
		ps->census_arrival_t = r->t_ns;
	} else if (fld(r, 0) == DLBN_MARK_FETCH_BEGIN) {
		ps->census_from_t = ps->census_arrival_t;
		ps->census_to_t = r->t_ns;
		ps->census_arrival_t = -1;
	}
	int li = dlbn_loaders_of_iter(m, fld(r, 1));
	if (li < 0)
		return;
	struct dlbn_loader *l = &m->loaders.v[li];
	int aside = li != m->loaders.train;
	struct dlbn_steps *st = aside ? &l->steps : &m->py_steps;
	switch (fld(r, 0)) {
	case DLBN_MARK_ITER_BEGIN:
		l->py_new_epoch = 1;
		l->py_open = -1;
		l->py_iter_begin = r->t_ns;
		l->py_iter_waited = ps->waited_ns;
		l->py_iter_lead = lead_of(ps, r);
		break;
	case DLBN_MARK_FETCH_BEGIN:
		mark_fetch_begin(ps, l, st, aside, r);
		break;
	case DLBN_MARK_FETCH_END:
		mark_fetch_end(ps, l, st, aside, li, r);
		break;
	case DLBN_MARK_HANDOFF:
		mark_handoff(ps, r);
		break;
	case DLBN_MARK_FETCH_STOP:
		mark_fetch_stop(ps, l, r);
		break;
	default:
		break;
	}
}

static void nvtx_open(struct pass2 *ps, struct nvtx_open *v, size_t *n, int64_t key,
		      const struct dlbn_record *r)
{
	struct nvtx_state *ns = &ps->nvtx;
	int cls = dlbn_range_class_of(ps->m->range_names, r);
	int what = cls == DLBN_RANGE_STEP ? NVTX_OPEN_STEP : NVTX_OPEN_OTHER;
	if (cls == DLBN_RANGE_DATA)
		what = ns->data_open++ ? NVTX_OPEN_DATA_INNER : NVTX_OPEN_DATA;
	if (*n == NVTX_OPEN_MAX) { /* runaway nesting: forget the oldest */
		if (v[0].what == NVTX_OPEN_DATA || v[0].what == NVTX_OPEN_DATA_INNER)
			ns->data_open--;
		memmove(v, v + 1, (NVTX_OPEN_MAX - 1) * sizeof(*v));
		(*n)--;
	}
	v[(*n)++] = (struct nvtx_open){key, r->t_ns, what};
	ps->m->nvtx_ranges++;
}

/* Close entry i of v: an outermost data range is a step of the NVTX view. */
static void nvtx_close(struct pass2 *ps, struct nvtx_open *v, size_t *n, size_t i, int64_t t)
{
	struct dlbn_model *m = ps->m;
	struct nvtx_open o = v[i];
	memmove(v + i, v + i + 1, (*n - i - 1) * sizeof(*v));
	(*n)--;
	if (o.what == NVTX_OPEN_DATA || o.what == NVTX_OPEN_DATA_INNER)
		ps->nvtx.data_open--;
	if (o.what == NVTX_OPEN_STEP) {
		m->nvtx_step_ranges++;
		m->nvtx_step_ns += t - o.begin;
	} else if (o.what == NVTX_OPEN_DATA) {
		struct dlbn_step s = {.begin = o.begin, .end = t, .wait_ns = t - o.begin};
		m->nvtx_data_ranges++;
		model_number_epoch(&m->nvtx_steps, &s, 0);
		model_feed(ps, &m->nvtx_steps, &s);
	}
}

void model_nvtx_record(struct pass2 *ps, const struct dlbn_record *r, int on_nvtx_thread)
{
	struct nvtx_state *ns = &ps->nvtx;
	switch (r->type) {
	case DLBN_REC_RANGE_PUSH:
		if (on_nvtx_thread)
			nvtx_open(ps, ns->pushed, &ns->npushed, fld(r, 0), r);
		break;
	case DLBN_REC_RANGE_POP:
		for (size_t i = ns->npushed; on_nvtx_thread && i-- > 0;) {
			if (ns->pushed[i].key == fld(r, 0)) {
				nvtx_close(ps, ns->pushed, &ns->npushed, i, r->t_ns);
				break;
			}
		}
		break;
	case DLBN_REC_RANGE_START:
		if (on_nvtx_thread)
			nvtx_open(ps, ns->started, &ns->nstarted, fld(r, 0), r);
		break;
	case DLBN_REC_RANGE_END:
		for (size_t i = 0; i < ns->nstarted; i++) {
			if (ns->started[i].key == fld(r, 0)) {
				nvtx_close(ps, ns->started, &ns->nstarted, i, r->t_ns);
				break;
			}
		}
		break;
	default:
		break;
	}
}
