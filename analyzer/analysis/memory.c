/*
 * memory.c - the run's memory figures, the copy-on-write model, the
 * memory a worker count needs, and why a run died (see memory.h for the
 * model).  Reads the model's samples and the analysis's window and
 * workers; writes a->memory and the memory's lines of a.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/memory.h"
#include "analysis/verdict.h"
#include "util/lines.h"

#define PAGE_KIB	  4.0
#define COW_MIN_MIB	  8.0  /* a worker's private growth worth naming ... */
#define COW_MIN_SHARE	  0.05 /* ... and its share of what it could copy */
#define COW_MIN_KIB	  4.0  /* KiB a batch */
#define RSS_HOLDS_SHARE	  0.5  /* RSS grew less than half the private growth */
#define QUIET_MIN_BATCHES 2    /* batches in a stretch that sets a batch's own faults */
#define SATURATION_DROP	  0.25 /* the copy rate fell this much over the curve seen */
#define COPY_US_TYPICAL	  3.0  /* kernel us per 4 KiB copy-on-write fault, x86-64 */
#define COPY_US_MIN	  0.3
#define COPY_US_MAX	  50.0
#define COLLINEAR	  0.05 /* 1 - r^2 of batches vs copies below this: c not separable */
#define OOM_NEAR_LIMIT	  0.95 /* SIGKILL with the cgroup this full: the OOM killer */
#define SIGKILL_NO	  9
#define SIGBUS_NO	  7
#define PER_PROCESS_MAX	  32.0 /* MiB a process the cgroup charges beyond its samples */
#define SEGMENTS	  6    /* intervals a worker's curve is cut into ... */
#define SEGMENT_MIN	  8.0  /* ... of at least this many batches */

#define REASON(...) DLBN_LINES_ADD(a->reasons, a->nreasons, __VA_ARGS__)
#define REC(...)    DLBN_LINES_ADD(a->recs, a->nrecs, __VA_ARGS__)
#define WARN(...)   DLBN_LINES_ADD(a->warnings, a->nwarnings, __VA_ARGS__)

static double mib(int64_t kib)
{
	return kib < 0 ? -1 : (double)kib / 1024.0;
}

static double rel_s(const struct dlbn_model *m, int64_t t)
{
	return (double)(t - m->t0) / 1e9;
}

const char *dlbn_mem_failure_name(int failure)
{
	switch (failure) {
	case DLBN_FAIL_OOM:
		return "out_of_memory";
	case DLBN_FAIL_SHM:
		return "out_of_shared_memory";
	case DLBN_FAIL_KILLED:
		return "killed";
	case DLBN_FAIL_ERROR:
		return "loader_error";
	default:
		return "none";
	}
}

/* ---- rows --------------------------------------------------------------- */

/* How process p ended, from its EXIT record or a CHILD record of its pid. */
static void row_end(const struct dlbn_model *m, const struct dlbn_proc *p, struct dlbn_mem_row *r)
{
	r->ended = p->has_exit ? DLBN_MEM_END_EXITED : DLBN_MEM_END_RUNNING;
	r->end_code = p->has_exit ? p->exit_status : 0;
	const struct dlbn_failures *fl = &m->failures;
	for (size_t i = 0; i < fl->nends; i++)
		if (fl->ends[i].pid == p->pid && fl->ends[i].how != DLBN_CHILD_EXITED) {
			r->ended = DLBN_MEM_END_SIGNAL;
			r->end_code = fl->ends[i].code;
		}
}

/* What a row reads of a sample, from either a kept sample or a track
 * point. */
struct sample {
	int64_t t;
	uint64_t batches;
	int64_t rss, anon, pss, pss_anon, private_clean, private_dirty, shared_dirty;
};

/* A MEM point and a track point name these fields alike. */
#define SAMPLE_OF(p)                                                                               \
	((struct sample){.t = (p)->t,                                                              \
			 .batches = (p)->batches,                                                  \
			 .rss = (p)->rss,                                                          \
			 .anon = (p)->anon,                                                        \
			 .pss = (p)->pss,                                                          \
			 .pss_anon = (p)->pss_anon,                                                \
			 .private_clean = (p)->private_clean,                                      \
			 .private_dirty = (p)->private_dirty,                                      \
			 .shared_dirty = (p)->shared_dirty})

static struct sample of_point(const struct dlbn_mem_point *p)
{
	return SAMPLE_OF(p);
}

static struct sample of_track(const struct dlbn_mem_track_point *p)
{
	return SAMPLE_OF(p);
}

/* The first and last track points of pm with smaps_rollup up to the
 * cutoff (when the training process died, its workers' later samples see
 * its pages as theirs); 0 without two that made batches between them. */
static int anchors(const struct dlbn_proc_mem *pm, int64_t cutoff, size_t *i0, size_t *i1)
{
	int have = 0;
	for (size_t i = 0; i < pm->ntrack && pm->track[i].t <= cutoff; i++) {
		if (pm->track[i].private_dirty < 0)
			continue;
		if (!have)
			*i0 = i;
		*i1 = i;
		have = 1;
	}
	return have && *i1 > *i0 && pm->track[*i1].batches > pm->track[*i0].batches;
}

/* A worker's first and last samples with smaps_rollup up to the cutoff,
 * and its last one; 0 when it has none with smaps_rollup. */
static int worker_samples(const struct dlbn_proc_mem *pm, int64_t cutoff, struct sample *r0,
			  struct sample *r1, struct sample *last)
{
	int have = 0;
	*last = of_point(&pm->first);
	for (size_t i = 0; i < pm->ntrack && pm->track[i].t <= cutoff; i++) {
		*last = of_track(&pm->track[i]);
		if (pm->track[i].private_dirty < 0)
			continue;
		if (!have)
			*r0 = of_track(&pm->track[i]);
		*r1 = of_track(&pm->track[i]);
		have = 1;
	}
	return have;
}

static double uss_of(const struct sample *s)
{
	return s->private_clean < 0 || s->private_dirty < 0
		       ? -1
		       : mib(s->private_clean + s->private_dirty);
}

static void row_fill(const struct dlbn_model *m, const struct sample *q[2], struct dlbn_mem_row *r)
{
	for (int i = 0; i < 2; i++) {
		r->pss[i] = mib(q[i]->pss);
		r->uss[i] = uss_of(q[i]);
		r->private_dirty[i] = mib(q[i]->private_dirty);
		r->rollup_s[i] = rel_s(m, q[i]->t);
	}
	if (q[1]->batches > q[0]->batches && q[0]->private_dirty >= 0 && q[1]->private_dirty >= 0) {
		r->batches = q[1]->batches - q[0]->batches;
		r->growth_kib_per_batch =
			(double)(q[1]->private_dirty - q[0]->private_dirty) / (double)r->batches;
	}
}

/* A row compares two samples with smaps_rollup: a worker's first and
 * latest up to the cutoff (a worker leaves through os._exit, its last
 * sample is whole); the training process's nearest the window's ends (its
 * exit comes after the interpreter freed its objects). */
static void row_of(const struct dlbn_model *m, const struct dlbn_proc *p,
		   const struct dlbn_proc_mem *pm, int worker, int64_t cutoff,
		   struct dlbn_mem_row *r)
{
	memset(r, 0, sizeof(*r));
	r->pid = p->pid;
	r->role = p->role;
	r->peak_rss = mib(pm->peak_rss);
	r->growth_kib_per_batch = r->shared_dirty = r->anon_grown = -1;
	for (int i = 0; i < 2; i++)
		r->pss[i] = r->uss[i] = r->private_dirty[i] = r->rollup_s[i] = -1;
	row_end(m, p, r);
	if (worker) {
		struct sample r0, r1, last;
		int rolled = worker_samples(pm, cutoff, &r0, &r1, &last);
		r->rss[0] = mib(pm->first.rss);
		r->rss[1] = mib(last.rss);
		r->anon_grown = last.anon >= 0 && pm->first.anon >= 0
					? mib(last.anon - pm->first.anon)
					: -1;
		if (!rolled)
			return;
		const struct sample *q[2] = {&r0, &r1};
		row_fill(m, q, r);
		r->shared_dirty = mib(r0.shared_dirty);
		return;
	}
	r->rss[0] = mib((pm->has_base ? &pm->base : &pm->first)->rss);
	r->rss[1] = mib((pm->has_end ? &pm->end : &pm->cur)->rss);
	if (!pm->rollups)
		return;
	struct sample q0 = of_point(pm->has_rbase ? &pm->rbase : &pm->rfirst);
	struct sample q1 = of_point(pm->has_rend ? &pm->rend : &pm->rcur);
	const struct sample *q[2] = {&q0, &q1};
	row_fill(m, q, r);
	r->shared_dirty = mib(pm->rfirst.shared_dirty);
}

static int is_training_worker(const struct dlbn_model *m, size_t i)
{
	return m->procs[i].role == DLBN_ROLE_WORKER && dlbn_training_worker(m, i) &&
	       m->procs[i].mem.samples;
}

/* The recorder's own cost, summed over the sampled processes. */
static void sampling_cost(const struct dlbn_model *m, double wall_s, struct dlbn_memory *mem)
{
	double cost = 0, life = 0;
	for (size_t i = 0; i < m->nprocs; i++) {
		const struct dlbn_proc *p = &m->procs[i];
		if (!p->mem.samples || p->role == DLBN_ROLE_OTHER)
			continue;
		double own = (double)p->mem.sample_ns, span = (double)(p->t_last - p->t_first);
		cost += own;
		life += span > 0 ? span : 0;
		if ((ssize_t)i == m->training && span > 0)
			mem->sampling_main_share = own / span;
		if ((ssize_t)i == m->training && p->mem.has_end && wall_s > 0)
			mem->sampling_window_share =
				(double)(p->mem.sample_ns_end - p->mem.sample_ns_base) / 1e9 /
				wall_s;
	}
	mem->sampling_ms = cost / 1e6;
	mem->sampling_share = life > 0 ? cost / life : 0;
}

static void rows(const struct dlbn_model *m, const struct dlbn_proc_mem *pms,
		 struct dlbn_memory *mem)
{
	if (m->training >= 0 && m->procs[m->training].mem.samples) {
		row_of(m, &m->procs[m->training], &pms[m->training], 0, mem->cutoff_ns, &mem->main);
		mem->has_main = 1;
		mem->present = 1;
		mem->rollup = m->procs[m->training].mem.rollups > 0;
	}
	for (size_t i = 0; i < m->nprocs; i++) {
		if (!is_training_worker(m, i))
			continue;
		mem->nworkers++;
		mem->present = 1;
		if (m->procs[i].mem.rollups)
			mem->rollup = 1;
		if (mem->nrows < DLBN_MEM_ROWS)
			row_of(m, &m->procs[i], &pms[i], 1, mem->cutoff_ns,
			       &mem->workers[mem->nrows++]);
	}
}

/*
 * What a process holds that the job's memory limit counts and cannot give
 * back: its anonymous pages (the kernel can drop clean file pages, a
 * library's code, under pressure; a cgroup may not even be charged for
 * them, when another cgroup read them first), as its share (pss_anon) and
 * its own (private dirty: anonymous, and file pages it wrote).  Without
 * pss_anon (before Linux 5.7) all of PSS and USS, the pessimistic end.
 */
static void held(const struct sample *s, double *share, double *own)
{
	if (s->pss_anon >= 0 && s->private_dirty >= 0) {
		*share = mib(s->pss_anon);
		*own = mib(s->private_dirty);
		if (*own > *share)
			*own = *share;
	} else {
		*share = mib(s->pss);
		*own = uss_of(s);
	}
}

/* Sums over the training process and its workers at the window's end
 * (its workers' last samples up to the cutoff): PSS, the held memory and
 * its shared part, the training process's own, the workers' means. */
static void totals(const struct dlbn_model *m, const struct dlbn_proc_mem *pms, int64_t window_end,
		   struct dlbn_memory *mem)
{
	double pss = 0, share = 0, own = 0, wpss = 0, wuss = 0, wown = 0, base = 0, copyable = 0;
	size_t nw = 0, nbase = 0;
	const struct dlbn_proc_mem *tm = m->training >= 0 ? &m->procs[m->training].mem : NULL;
	if (tm && tm->rollups) {
		struct sample q = of_point(tm->has_rend ? &tm->rend : &tm->rcur);
		double sh, ow;
		held(&q, &sh, &ow);
		if (sh >= 0 && ow >= 0) {
			pss += mib(q.pss);
			share += sh;
			own += ow;
			mem->main_uss_mib = ow;
		}
	}
	for (size_t i = 0; i < m->nprocs; i++) {
		struct sample r0, r1, last;
		if (!is_training_worker(m, i) ||
		    !worker_samples(&pms[i], mem->cutoff_ns, &r0, &r1, &last))
			continue;
		double sh, ow;
		held(&r1, &sh, &ow);
		if (sh < 0 || ow < 0)
			continue;
		/* Workers that ended before the window's end count only while
		 * alive: the sum is of the processes at that time. */
		if (!m->procs[i].has_exit || m->procs[i].t_last >= window_end) {
			pss += mib(r1.pss);
			share += sh;
			own += ow;
		}
		wpss += mib(r1.pss);
		wuss += uss_of(&r1);
		wown += ow;
		nw++;
		double b0, o0;
		held(&r0, &b0, &o0);
		if (o0 >= 0 && r0.shared_dirty >= 0) {
			base += o0;
			copyable += mib(r0.shared_dirty);
			nbase++;
		}
	}
	mem->total_pss_mib = pss;
	mem->held_mib = share;
	mem->shared_mib = share - own > 0 ? share - own : 0;
	mem->worker_pss_mib = nw ? wpss / (double)nw : -1;
	mem->worker_uss_mib = nw ? wuss / (double)nw : -1;
	mem->worker_own_mib = nw ? wown / (double)nw : -1;
	mem->worker_base_mib = nbase ? base / (double)nbase : -1;
	mem->copyable_mib = nbase ? copyable / (double)nbase : -1;
}

/* ---- copy-on-write ------------------------------------------------------ */

/* Weighted least squares over the workers' intervals. */
struct cow_sums {
	double w, x, y, xx, xy;		/* rate (y) against pages copied so far (x) */
	double b2, bc, c2, by, cy;	/* system time (y) against batches (b), copies (c) */
	double copies, batches, faults; /* totals between the rollup anchors */
	double cmax;			/* the most pages a worker was seen to have copied */
};

/*
 * Without two smaps_rollups in any worker (short lives on a busy machine:
 * each read took 12 ms, the recorder took one), the quietest stretch of
 * any worker's life: the fewest faults a batch, past the interval that
 * holds its start.  Copies fade as a worker has copied what it reads, a
 * batch's own faults (its tensors, its shared memory) do not: taking them
 * all as copies named 10 MiB of copy-on-read in a numpy dataset's workers.
 */
static double quiet_faults(const struct dlbn_model *m, const struct dlbn_proc_mem *pms,
			   int64_t cutoff)
{
	double least = -1;
	for (size_t i = 0; i < m->nprocs; i++) {
		if (!is_training_worker(m, i))
			continue;
		const struct dlbn_mem_track_point *t = pms[i].track;
		for (size_t j = 1; j + 1 < pms[i].ntrack && t[j + 1].t <= cutoff; j++) {
			int64_t db = t[j + 1].batches - t[j].batches;
			if (db < QUIET_MIN_BATCHES)
				continue;
			double f = (double)(t[j + 1].minflt - t[j].minflt) / (double)db;
			if (least < 0 || f < least)
				least = f;
		}
	}
	return least > 0 ? least : 0;
}

/* Non-copy faults per batch: the anchors' faults less their copies. */
static double other_faults(const struct dlbn_model *m, const struct dlbn_proc_mem *pms,
			   int64_t cutoff)
{
	double faults = 0, copies = 0, batches = 0;
	for (size_t i = 0; i < m->nprocs; i++) {
		size_t i0, i1;
		if (!is_training_worker(m, i) || !anchors(&pms[i], cutoff, &i0, &i1))
			continue;
		const struct dlbn_mem_track_point *a = &pms[i].track[i0], *b = &pms[i].track[i1];
		faults += (double)(b->minflt - a->minflt);
		copies += (double)(b->private_dirty - a->private_dirty) / PAGE_KIB;
		batches += (double)(b->batches - a->batches);
	}
	if (!(batches > 0))
		return quiet_faults(m, pms, cutoff);
	double f = (faults - copies) / batches;
	return f > 0 ? f : 0;
}

/*
 * A page the training process wrote after the fork stays shared by the
 * workers alone; when one of them exits, the others' counts of it drop and
 * the last to go sees it as private dirty, a copy it never made (11 MiB of
 * a numpy dataset's workers, which copy nothing).  A worker's samples stop
 * where a worker that shared its life ended before it; forward_fill puts
 * its end forward from its faults.
 */
static void sibling_cutoff(const struct dlbn_model *m, struct dlbn_proc_mem *pms)
{
	for (size_t i = 0; i < m->nprocs; i++) {
		if (!is_training_worker(m, i))
			continue;
		const struct dlbn_proc *w = &m->procs[i];
		int64_t cut = INT64_MAX;
		for (size_t j = 0; j < m->nprocs; j++) {
			const struct dlbn_proc *v = &m->procs[j];
			if (j != i && is_training_worker(m, j) && v->t_first < w->t_last &&
			    v->t_last > w->t_first && v->t_last < w->t_last && v->t_last < cut)
				cut = v->t_last;
		}
		while (pms[i].ntrack > 1 && pms[i].track[pms[i].ntrack - 1].t > cut)
			pms[i].ntrack--;
	}
}

/*
 * A worker's first smaps_rollup comes a second into its life (the recorder
 * spares a short-lived worker the read), when a worker that reads a small
 * dataset fast has copied much of what it will: its start is put back from
 * its faults.  Its first sample, taken before its first batch, gets the
 * private pages of its first smaps_rollup less the copies its faults since
 * then show (beyond per_batch of a batch's own), and the shared dirty pages
 * it had then still to copy.
 */
static void back_fill(struct dlbn_proc_mem *pm, double per_batch)
{
	struct dlbn_mem_track_point *t0 = &pm->track[0];
	if (!pm->ntrack || t0->private_dirty >= 0)
		return;
	for (size_t j = 1; j < pm->ntrack; j++) {
		const struct dlbn_mem_track_point *r = &pm->track[j];
		if (r->private_dirty < 0)
			continue;
		double faults = (double)(r->minflt - t0->minflt) -
				per_batch * (double)(r->batches - t0->batches);
		double copied = faults > 0 ? faults * PAGE_KIB : 0;
		if (copied > (double)r->private_dirty)
			copied = (double)r->private_dirty;
		t0->private_dirty = r->private_dirty - (int64_t)copied;
		t0->private_clean = r->private_clean;
		t0->shared_dirty = r->shared_dirty >= 0 ? r->shared_dirty + (int64_t)copied : -1;
		t0->pss = t0->pss_anon = -1;
		return;
	}
}

/*
 * Likewise a worker's end: a short life may not leave room for a last
 * smaps_rollup (its cost against the life, mem_sample.c), and its figures
 * would stop at the last one.  Its last sample up to the cutoff gets the
 * private pages of its last smaps_rollup before it plus the copies its
 * faults since then show; they leave its shared pages and join its
 * anonymous PSS whole (the pessimistic end).
 */
static void forward_fill(struct dlbn_proc_mem *pm, int64_t cutoff, double per_batch)
{
	size_t last = pm->ntrack;
	while (last > 0 && pm->track[last - 1].t > cutoff)
		last--;
	if (!last || pm->track[last - 1].private_dirty >= 0)
		return;
	struct dlbn_mem_track_point *e = &pm->track[last - 1];
	for (size_t j = last - 1; j-- > 0;) {
		const struct dlbn_mem_track_point *r = &pm->track[j];
		if (r->private_dirty < 0)
			continue;
		double faults = (double)(e->minflt - r->minflt) -
				per_batch * (double)(e->batches - r->batches);
		double copied = faults > 0 ? faults * PAGE_KIB : 0;
		if (r->shared_dirty >= 0 && copied > (double)r->shared_dirty)
			copied = (double)r->shared_dirty;
		e->private_dirty = r->private_dirty + (int64_t)copied;
		e->private_clean = r->private_clean;
		e->shared_dirty = r->shared_dirty >= 0 ? r->shared_dirty - (int64_t)copied : -1;
		e->pss = r->pss >= 0 ? r->pss + (int64_t)copied : -1;
		e->pss_anon = r->pss_anon >= 0 ? r->pss_anon + (int64_t)copied : -1;
		return;
	}
}

static void cow_intervals(const struct dlbn_proc_mem *pm, int64_t cutoff, double per_batch,
			  struct cow_sums *s)
{
	size_t i0, i1;
	if (!anchors(pm, cutoff, &i0, &i1))
		return;
	const struct dlbn_mem_track_point *t = pm->track;
	double anchored = (double)(t[i1].private_dirty - t[i0].private_dirty) / PAGE_KIB;
	/* The faults between the anchors, less a batch's own, scaled to the
	 * copies the anchors saw: the curve's shape from the faults, its size
	 * from the private pages. */
	double raw = 0;
	for (size_t i = i0; i < i1; i++) {
		double db = (double)(t[i + 1].batches - t[i].batches);
		double d = (double)(t[i + 1].minflt - t[i].minflt) - per_batch * db;
		raw += d > 0 ? d : 0;
	}
	double scale = raw > 0 && anchored > 0 ? anchored / raw : 0;
	double copied = 0;
	size_t from = i0;
	/* Segments of at least a sixth of the worker's batches (and 8): a
	 * batch in progress at a sample's edge is a batch of error. */
	double total = (double)(t[i1].batches - t[i0].batches);
	double seg = total / SEGMENTS > SEGMENT_MIN ? total / SEGMENTS : SEGMENT_MIN;
	for (size_t i = i0 + 1; i <= i1; i++) {
		double db = (double)(t[i].batches - t[from].batches);
		if (db < seg && i < i1)
			continue; /* join it to the next interval */
		double df = (double)(t[i].minflt - t[from].minflt) - per_batch * db;
		double c = (df > 0 ? df : 0) * scale;
		/* System time: a copy is a page fault's work.  User time
		 * moves with the copies too, early in a worker's life, but as
		 * much with its warm-up (the first batches copy the most):
		 * fitted with it, c came out 5.9-7.7 us where the kernel's
		 * own part was 2.7-5.0 and a run at 5x the workers paid 3.7. */
		double ds = (double)(t[i].stime_us - t[from].stime_us);
		from = i;
		if (db < 1)
			continue;
		double x = copied + c / 2, y = c / db;
		s->w += db;
		s->x += db * x;
		s->y += db * y;
		s->xx += db * x * x;
		s->xy += db * x * y;
		s->b2 += db * db;
		s->bc += db * c;
		s->c2 += c * c;
		s->by += db * ds;
		s->cy += c * ds;
		copied += c;
	}
	s->copies += anchored > 0 ? anchored : 0;
	s->batches += (double)(t[i1].batches - t[i0].batches);
	if (copied > s->cmax)
		s->cmax = copied;
}

/* S and r of the touch model, and c, from the workers' intervals. */
static void cow_fit(const struct dlbn_model *m, const struct dlbn_proc_mem *pms,
		    struct dlbn_memory *mem)
{
	struct cow_sums s = {0};
	double per_batch = other_faults(m, pms, mem->cutoff_ns);
	mem->nocow_faults = per_batch;
	for (size_t i = 0; i < m->nprocs; i++)
		if (is_training_worker(m, i))
			cow_intervals(&pms[i], mem->cutoff_ns, per_batch, &s);
	if (!(s.batches > 0) || !(s.copies > 0))
		return;
	double cap = mem->copyable_mib > 0 ? mem->copyable_mib * 1024 / PAGE_KIB : 0;
	double mean_rate = s.copies / s.batches;
	double den = s.w * s.xx - s.x * s.x;
	double slope = den > 0 ? (s.w * s.xy - s.x * s.y) / den : 0;
	double r0 = den > 0 ? (s.y - slope * s.x) / s.w : mean_rate;
	double S = cap;
	if (slope < 0 && r0 > 0 && -slope * s.cmax >= SATURATION_DROP * r0) {
		S = -r0 / slope;
		if (S < s.cmax)
			S = s.cmax;
		if (cap > 0 && S > cap)
			S = cap;
		mem->touch_saturates = 1;
	} else if (S > 0) {
		/* No slowdown seen: the most it can copy, at the rate that
		 * gives the copies seen at the coverage they reached. */
		double mid = s.cmax / 2 < S ? s.cmax / 2 : 0;
		r0 = mean_rate / (1 - mid / S);
	}
	if (!(S > 0) || !(r0 > 0))
		return;
	mem->touch_mib = S * PAGE_KIB / 1024;
	mem->touch_kib = r0 * PAGE_KIB;
	/* c: system time against batches and copies (no intercept). */
	double det = s.b2 * s.c2 - s.bc * s.bc;
	mem->copy_us = COPY_US_TYPICAL;
	if (s.b2 > 0 && s.c2 > 0 && det / (s.b2 * s.c2) >= COLLINEAR) {
		double c = (s.b2 * s.cy - s.bc * s.by) / det;
		if (c >= COPY_US_MIN && c <= COPY_US_MAX) {
			mem->copy_us = c;
			mem->copy_us_fitted = 1;
		}
	}
}

/* Pages one worker has copied after k batches (touch model). */
static double copied_pages(const struct dlbn_memory *mem, double k)
{
	double S = mem->touch_mib * 1024 / PAGE_KIB, r = mem->touch_kib / PAGE_KIB;
	if (!(S > 0) || !(r > 0) || k <= 0)
		return 0;
	return isinf(k) ? S : S * (1 - exp(-r * k / S));
}

/* Batches a worker lives: to the epoch's end for workers started every
 * epoch, forever for persistent ones (or an epoch of unknown length). */
static double horizon(const struct dlbn_memory *mem, int n)
{
	if (n <= 0)
		return 0;
	if (mem->persistent || mem->epoch_batches <= 0)
		return INFINITY;
	return (double)mem->epoch_batches / n;
}

/* Pages n workers copy while the loop takes steps s0..s1 of an epoch. */
static double copies_between(const struct dlbn_memory *mem, int n, double s0, double s1)
{
	return n * (copied_pages(mem, s1 / n) - copied_pages(mem, s0 / n));
}

double dlbn_memory_worker_at_mib(const struct dlbn_memory *mem, int n, double *batches)
{
	double h = horizon(mem, n);
	if (batches)
		*batches = h;
	if (mem->worker_base_mib < 0)
		return -1;
	return mem->worker_base_mib + (mem->cow ? copied_pages(mem, h) * PAGE_KIB / 1024 : 0);
}

double dlbn_memory_copy_ms(const struct dlbn_memory *mem, int n)
{
	if (!mem->cow || n <= 0 || !mem->window_steps)
		return 0;
	double w0 = (double)mem->window_first_step, w1 = w0 + (double)mem->window_steps;
	double e = mem->persistent ? 0 : (double)mem->epoch_steps, pages = 0;
	if (e <= 0) {
		pages = copies_between(mem, n, w0, w1);
	} else {
		for (long k = (long)floor(w0 / e); (double)k * e < w1; k++) {
			double start = (double)k * e;
			double a = w0 > start ? w0 : start, b = w1 < start + e ? w1 : start + e;
			pages += copies_between(mem, n, a - start, b - start);
		}
	}
	return pages * mem->copy_us / 1000 / (double)mem->window_steps;
}

/* Name copy-on-read growth: the workers' private pages grew by a good
 * part of what they could copy while their RSS held. */
static void cow_detect(const struct dlbn_model *m, const struct dlbn_proc_mem *pms,
		       struct dlbn_memory *mem)
{
	double grown = 0, anon_grown = 0, batches = 0;
	size_t n = 0;
	for (size_t i = 0; i < mem->nrows; i++) {
		const struct dlbn_mem_row *r = &mem->workers[i];
		if (r->growth_kib_per_batch < 0 || r->private_dirty[0] < 0)
			continue;
		grown += r->private_dirty[1] - r->private_dirty[0];
		/* Anonymous RSS: a copied page stays one page of it; a new
		 * allocation adds one (RSS also counts the file pages a worker
		 * maps as it goes: 15-22 MiB in 9 s of a torch worker). */
		anon_grown += r->anon_grown > 0 ? r->anon_grown : 0;
		batches += (double)r->batches;
		n++;
	}
	if (!n || !(batches > 0))
		return;
	mem->cow_mib = grown / (double)n;
	mem->cow_kib_per_batch = grown * 1024 / batches;
	mem->cow = mem->cow_mib >= COW_MIN_MIB && mem->cow_kib_per_batch >= COW_MIN_KIB &&
		   (mem->copyable_mib <= 0 || mem->cow_mib >= COW_MIN_SHARE * mem->copyable_mib) &&
		   anon_grown / (double)n < RSS_HOLDS_SHARE * mem->cow_mib;
	if (mem->cow)
		cow_fit(m, pms, mem);
	if (!(mem->touch_mib > 0))
		mem->cow = 0;
}

/* ---- the job ------------------------------------------------------------ */

/*
 * What the memory cgroup charged at the window's end beyond what the
 * processes' samples hold: its usage less page cache and shared memory
 * (the batches, counted apart) against their anonymous pages.  The rest is
 * the kernel's for each process (page tables, stacks) and what the samples
 * missed (anonymous pages of processes the trace does not see, a worker's
 * growth since its last smaps_rollup): 23-33 MiB for a training process and
 * 2 workers of torch 2.11, 69 at 9, where the samples alone predicted a
 * 9-worker run 9% under the limit it was killed at.  Taken per process (n
 * workers + 1) up to PER_PROCESS_MAX, the rest as the same for any count
 * (other programs in the cgroup).
 */
static void calibrate(const struct dlbn_model *m, struct dlbn_memory *mem)
{
	const struct dlbn_job_mem *j = &m->job_mem;
	const struct dlbn_memsys_point *e = j->has_end ? &j->end : &j->last;
	if (!mem->rollup || !(mem->held_mib > 0) || e->cg_usage < 0 || e->cg_file < 0)
		return;
	double charged =
		mib(e->cg_usage) - mib(e->cg_file) - (e->cg_shmem > 0 ? mib(e->cg_shmem) : 0);
	double gap = charged - mem->held_mib;
	if (!(gap > 0))
		return;
	double procs = (double)mem->run_workers + 1;
	mem->per_process_mib = gap / procs < PER_PROCESS_MAX ? gap / procs : PER_PROCESS_MAX;
	mem->others_mib = gap - mem->per_process_mib * procs;
}

static void job(const struct dlbn_model *m, struct dlbn_memory *mem)
{
	const struct dlbn_job_mem *j = &m->job_mem;
	mem->cg_limit_mib = mem->cg_usage_mib = mem->cg_peak_mib = -1;
	mem->cg_anon_mib = mem->cg_shmem_mib = mem->cg_file_mib = -1;
	mem->host_total_mib = mem->host_avail_mib = mem->shm_size_mib = mem->shm_free_mib = -1;
	mem->rlimit_as_mib = -1;
	mem->oom_kills = mem->limit_hits = -1;
	mem->budget_mib = mem->headroom_mib = -1;
	if (!j->samples)
		return;
	mem->job = 1;
	const struct dlbn_memsys_point *l = &j->last;
	const struct dlbn_memsys_point *e = j->has_end ? &j->end : l;
	mem->cg_version = l->cg_version;
	mem->cg_limit_mib = mib(l->cg_limit);
	mem->cg_usage_mib = mib(e->cg_usage);
	mem->cg_peak_mib = mib(l->cg_peak > j->max_usage ? l->cg_peak : j->max_usage);
	mem->cg_anon_mib = mib(e->cg_anon);
	mem->cg_shmem_mib = mib(e->cg_shmem);
	mem->cg_file_mib = mib(e->cg_file);
	if (j->first.cg_oom_kills >= 0 && l->cg_oom_kills >= 0)
		mem->oom_kills = (long)(l->cg_oom_kills - j->first.cg_oom_kills);
	if (j->first.cg_limit_hits >= 0 && l->cg_limit_hits >= 0)
		mem->limit_hits = (long)(l->cg_limit_hits - j->first.cg_limit_hits);
	mem->host_total_mib = mib(l->host_total);
	mem->host_avail_mib = mib(j->min_host_avail);
	mem->shm_size_mib = mib(l->shm_size);
	mem->shm_free_mib = mib(j->min_shm_free);
	mem->rlimit_as_mib = mib(l->rlimit_as);
	double held = mem->held_mib > 0 ? mem->held_mib : 0;
	calibrate(m, mem);
	if (mem->cg_limit_mib > 0) {
		mem->budget_mib = mem->cg_limit_mib;
		snprintf(mem->budget_from, sizeof(mem->budget_from),
			 "the memory cgroup's limit (cgroup v%d)", mem->cg_version);
		snprintf(mem->budget_short, sizeof(mem->budget_short), "limit");
		if (mem->cg_peak_mib >= 0)
			mem->headroom_mib = mem->cg_limit_mib - mem->cg_peak_mib;
	} else if (mem->host_avail_mib >= 0 && held > 0) {
		mem->budget_mib = held + mem->host_avail_mib;
		snprintf(mem->budget_from, sizeof(mem->budget_from),
			 "what the run held plus the host's least available memory (no memory "
			 "limit)");
		snprintf(mem->budget_short, sizeof(mem->budget_short), "the host has for it");
		mem->headroom_mib = mem->host_avail_mib;
	}
}

/* ---- predictions -------------------------------------------------------- */

static double shm_of(const struct dlbn_memory *mem, int n, double k)
{
	if (n <= 0 || !(mem->batch_shm_kib > 0))
		return 0;
	return ((double)n * mem->prefetch + 2) * mem->batch_shm_kib * k / 1024;
}

double dlbn_memory_need_mib(const struct dlbn_memory *mem, int n, double k, double *shm_mib)
{
	double shm = shm_of(mem, n, k);
	if (shm_mib)
		*shm_mib = shm;
	if (!mem->rollup || !mem->has_main || mem->main_uss_mib < 0)
		return -1;
	double worker = mem->worker_base_mib >= 0 ? mem->worker_base_mib : mem->worker_own_mib;
	if (n > 0 && worker < 0)
		return -1;
	if (n > 0 && mem->cow)
		worker += copied_pages(mem, horizon(mem, n)) * PAGE_KIB / 1024;
	else if (n > 0 && mem->worker_own_mib > worker)
		worker = mem->worker_own_mib; /* no growth model: as the run's workers ended */
	return mem->shared_mib + mem->main_uss_mib + (n > 0 ? n * worker : 0) + shm +
	       (double)(n + 1) * mem->per_process_mib + mem->others_mib;
}

const char *dlbn_memory_exceeds(const struct dlbn_memory *mem, double need_mib, double shm_mib)
{
	if (need_mib > 0 && mem->budget_mib > 0 && need_mib > DLBN_MEM_FIT_SHARE * mem->budget_mib)
		return "memory";
	if (shm_mib > 0 && mem->shm_size_mib > 0) {
		double others =
			mem->shm_size_mib - mem->shm_free_mib - shm_of(mem, mem->run_workers, 1);
		if (mem->shm_free_mib < 0 || others < 0)
			others = 0;
		if (shm_mib + others > DLBN_MEM_FIT_SHARE * mem->shm_size_mib)
			return "shm";
	}
	return NULL;
}

/* ---- failures ----------------------------------------------------------- */

static const char *signal_name(int sig)
{
	switch (sig) {
	case SIGKILL_NO:
		return "SIGKILL";
	case SIGBUS_NO:
		return "SIGBUS (bus error)";
	case 11:
		return "SIGSEGV";
	case 15:
		return "SIGTERM";
	case 6:
		return "SIGABRT";
	case 2:
		return "SIGINT";
	default:
		return "a signal";
	}
}

/* What pid was: a worker (by its role, or its loader's CONFIG named it:
 * one killed before its first batch has no worker's records), the training
 * process, or another child. */
/* A child's role by its pid: a loader's claim or its process's; -1 for a
 * child the trace does not know. */
static int role_of_pid(const struct dlbn_model *m, int pid)
{
	for (size_t i = 0; i < m->loaders.nclaims; i++)
		if (m->loaders.claims[i].pid == pid)
			return DLBN_ROLE_WORKER;
	for (size_t i = 0; i < m->nprocs; i++)
		if (m->procs[i].pid == pid)
			return (int)m->procs[i].role;
	return -1;
}

static const char *who(const struct dlbn_model *m, int pid)
{
	int role = role_of_pid(m, pid);
	return role == DLBN_ROLE_WORKER	    ? "worker"
	       : role == DLBN_ROLE_TRAINING ? "the training process"
	       : role >= 0		    ? "process"
					    : "child process";
}

/* The memory just before it: the training process and its workers. */
static void memory_before(const struct dlbn_memory *mem, char *out, size_t len)
{
	int n = 0;
	out[0] = 0;
	if (mem->has_main && mem->main.rss[1] >= 0)
		n = snprintf(out, len, "the training process %.0f MiB RSS", mem->main.rss[1]);
	if (mem->has_main && mem->main.pss[1] >= 0 && n < (int)len)
		n += snprintf(out + n, len - (size_t)n, " (%.0f MiB PSS)", mem->main.pss[1]);
	if (mem->nworkers && mem->worker_pss_mib >= 0 && n < (int)len)
		n += snprintf(out + n, len - (size_t)n,
			      ", %zu worker(s) %.0f MiB PSS each, %.0f MiB of it private",
			      mem->nworkers, mem->worker_pss_mib, mem->worker_uss_mib);
	if (mem->cow && n < (int)len)
		n += snprintf(out + n, len - (size_t)n,
			      " and growing %.1f KiB a batch (copy-on-read)",
			      mem->cow_kib_per_batch);
	if (mem->shm_size_mib > 0 && n < (int)len)
		snprintf(out + n, len - (size_t)n, "; /dev/shm %.0f of %.0f MiB free",
			 mem->shm_free_mib, mem->shm_size_mib);
}

/* What the job's memory says about a kill at time t. */
static int oom_evident(const struct dlbn_model *m, const struct dlbn_memory *mem)
{
	const struct dlbn_job_mem *j = &m->job_mem;
	if (mem->oom_kills > 0 || j->oom_kills_t >= 0)
		return 1;
	if (mem->cg_limit_mib > 0 && mem->cg_peak_mib >= OOM_NEAR_LIMIT * mem->cg_limit_mib)
		return 1;
	return mem->host_total_mib > 0 && mem->host_avail_mib >= 0 &&
	       mem->host_avail_mib < (1 - OOM_NEAR_LIMIT) * mem->host_total_mib;
}

static int note_says_shm(const char *text)
{
	return strstr(text, "Bus error") || strstr(text, "bus error") ||
	       strstr(text, "shared memory") || strstr(text, "(shm)") ||
	       strstr(text, "No space left on device");
}

static void job_oom_words(const struct dlbn_model *m, const struct dlbn_memory *mem, char *out,
			  size_t len)
{
	const struct dlbn_job_mem *j = &m->job_mem;
	int n = 0;
	out[0] = 0;
	if (mem->oom_kills > 0)
		n = snprintf(out, len, "; the memory cgroup's OOM killer killed %ld process(es)",
			     mem->oom_kills);
	if (j->oom_kills_t >= 0 && n < (int)len)
		n += snprintf(out + n, len - (size_t)n, " by t=%.2f s", rel_s(m, j->oom_kills_t));
	if (mem->cg_limit_mib > 0 && n < (int)len)
		n += snprintf(out + n, len - (size_t)n, " (limit %.0f MiB", mem->cg_limit_mib);
	if (mem->cg_limit_mib > 0 && j->before_oom_usage >= 0 && n < (int)len)
		n += snprintf(out + n, len - (size_t)n, ", %.0f MiB in use just before",
			      mib(j->before_oom_usage));
	if (mem->cg_limit_mib > 0 && mem->limit_hits > 0 && n < (int)len)
		n += snprintf(out + n, len - (size_t)n, ", the limit reached %ld times",
			      mem->limit_hits);
	if (mem->cg_limit_mib > 0 && n < (int)len)
		snprintf(out + n, len - (size_t)n, ")");
}

/* The first thing that went wrong, in time: a worker or the training
 * process killed, or the loader raising. */
static void failure(const struct dlbn_model *m, struct dlbn_analysis *a, struct dlbn_memory *mem)
{
	const struct dlbn_failures *fl = &m->failures;
	/* A worker or the training process killed; another child (a tool the
	 * program ran, ended by a timeout) only with the OOM killer's count. */
	const struct dlbn_child_end *kill = NULL;
	for (size_t i = 0; i < fl->nends && !kill; i++) {
		int role = role_of_pid(m, fl->ends[i].pid);
		if (fl->ends[i].how != DLBN_CHILD_EXITED &&
		    (role == DLBN_ROLE_WORKER || role == DLBN_ROLE_TRAINING ||
		     (fl->ends[i].code == SIGKILL_NO && oom_evident(m, mem))))
			kill = &fl->ends[i];
	}
	const struct dlbn_note *note = NULL;
	for (size_t i = 0; i < fl->nnotes && !note; i++)
		if (fl->notes[i].kind == DLBN_NOTE_FETCH_ERROR)
			note = &fl->notes[i];
	const struct dlbn_proc *train = m->training >= 0 ? &m->procs[m->training] : NULL;
	int main_gone = train && !train->has_exit;
	char before[DLBN_MEM_LINE], oom[200];
	memory_before(mem, before, sizeof(before));
	job_oom_words(m, mem, oom, sizeof(oom));
	if (kill) {
		int shm = kill->code == SIGBUS_NO || (note && note_says_shm(note->text));
		int oomish = kill->code == SIGKILL_NO && oom_evident(m, mem);
		mem->failure = shm ? DLBN_FAIL_SHM : oomish ? DLBN_FAIL_OOM : DLBN_FAIL_KILLED;
		mem->failure_s = rel_s(m, kill->t);
		snprintf(mem->failure_line, sizeof(mem->failure_line),
			 "%s: %s pid %d was killed by %s at t=%.2f s%s",
			 shm	  ? "out of shared memory (/dev/shm)"
			 : oomish ? "out of memory"
				  : "a process was killed",
			 who(m, kill->pid), kill->pid, signal_name(kill->code), mem->failure_s,
			 oomish ? oom : "");
	} else if (note) {
		int shm = note_says_shm(note->text);
		int killed = strstr(note->text, "killed by signal") != NULL;
		int oomish = killed && oom_evident(m, mem);
		mem->failure = shm ? DLBN_FAIL_SHM : oomish ? DLBN_FAIL_OOM : DLBN_FAIL_ERROR;
		mem->failure_s = rel_s(m, note->t);
		snprintf(mem->failure_line, sizeof(mem->failure_line),
			 "%s: the loader raised at t=%.2f s: %.200s%s",
			 shm	  ? "out of shared memory (/dev/shm)"
			 : oomish ? "out of memory"
				  : "the run failed",
			 mem->failure_s, note->text, oomish ? oom : "");
	} else if (main_gone && oom_evident(m, mem)) {
		mem->failure = DLBN_FAIL_OOM;
		mem->failure_s = rel_s(m, train->t_last);
		snprintf(mem->failure_line, sizeof(mem->failure_line),
			 "out of memory: the training process pid %d stopped without exiting at "
			 "t=%.2f s%s",
			 train->pid, mem->failure_s, oom);
	}
	if (mem->failure == DLBN_FAIL_NONE)
		return;
	if (mem->failure != DLBN_FAIL_ERROR || main_gone)
		snprintf(mem->failure_detail, sizeof(mem->failure_detail), "memory before it: %s",
			 before[0] ? before : "no samples");
	WARN("%s", mem->failure_line);
}

/* ---- lines -------------------------------------------------------------- */

static void cow_lines(struct dlbn_analysis *a, const struct dlbn_memory *mem)
{
	if (!mem->cow)
		return;
	double h = horizon(mem, mem->run_workers);
	double steady = mem->worker_base_mib + copied_pages(mem, h) * PAGE_KIB / 1024;
	char when[96];
	if (isinf(h))
		snprintf(when, sizeof(when), "%s",
			 mem->persistent ? "over a long run (persistent workers)"
					 : "over a long run");
	else
		snprintf(when, sizeof(when), "by the epoch's end (%.0f batches each)", h);
	REASON("copy-on-read: each worker's private memory grew %.0f MiB, %.1f KiB a batch, while "
	       "its RSS held (reading a Python object writes its reference count: a worker "
	       "copies each page of the dataset it reads); %s a worker holds ~%.0f MiB of its "
	       "own, %.0f MiB for %d",
	       mem->cow_mib, mem->cow_kib_per_batch, when, steady, steady * mem->run_workers,
	       mem->run_workers);
	REC("keep the dataset's per-sample data out of Python objects (numpy arrays, a pyarrow "
	    "table, or one bytes buffer with offsets hold no per-object reference counts): the "
	    "workers would share it instead of copying about %.0f MiB each",
	    steady - mem->worker_base_mib);
}

void dlbn_memory_compute(const struct dlbn_model *m, struct dlbn_analysis *a)
{
	struct dlbn_memory *mem = &a->memory;
	memset(mem, 0, sizeof(*mem));
	mem->main_uss_mib = mem->worker_pss_mib = mem->worker_uss_mib = -1;
	mem->worker_base_mib = mem->copyable_mib = -1;
	mem->epoch_batches = -1;
	const struct dlbn_config *c = &m->config;
	mem->persistent = c->present && c->persistent_workers == 1;
	mem->run_workers = a->num_workers > 0 ? a->num_workers : 0;
	mem->prefetch = c->present && c->prefetch_factor > 0 ? c->prefetch_factor : 2;
	mem->batch_shm_kib =
		a->outside.shm_mib_per_step > 0 ? a->outside.shm_mib_per_step * 1024 : 0;
	if (m->steps) {
		mem->window_first_step = a->steps_warmup;
		mem->window_steps = a->steps_window;
		if (a->epochs > 1 && m->steps->n)
			mem->epoch_steps = m->steps->n / (size_t)a->epochs;
	}
	if (c->present && c->epoch_batches > 0)
		mem->epoch_batches = c->epoch_batches;
	else if (a->epochs > 1)
		mem->epoch_batches = (int)mem->epoch_steps;
	if (mem->epoch_batches > 0 && !mem->epoch_steps)
		mem->epoch_steps = (size_t)mem->epoch_batches;
	/* A training process gone without exiting (killed): its workers live
	 * on until they notice, and their later samples see its pages as
	 * theirs.  The figures stop where it did. */
	mem->cutoff_ns = INT64_MAX;
	if (m->training >= 0 && !m->procs[m->training].has_exit)
		mem->cutoff_ns = m->procs[m->training].t_last;
	/* The samples as the analysis reads them: a worker's start put back
	 * (back_fill); m's own where there is no room for a copy. */
	struct dlbn_proc_mem *copy = calloc(m->nprocs ? m->nprocs : 1, sizeof(*copy));
	const struct dlbn_proc_mem *pms = copy;
	if (copy) {
		for (size_t i = 0; i < m->nprocs; i++)
			copy[i] = m->procs[i].mem;
		sibling_cutoff(m, copy);
		double per_batch = other_faults(m, copy, mem->cutoff_ns);
		for (size_t i = 0; i < m->nprocs; i++)
			if (is_training_worker(m, i)) {
				back_fill(&copy[i], per_batch);
				forward_fill(&copy[i], mem->cutoff_ns, per_batch);
			}
	}
	if (pms) {
		rows(m, pms, mem);
		sampling_cost(m, a->wall_s, mem);
		if (mem->present && mem->rollup)
			totals(m, pms, a->window_end, mem);
	}
	job(m, mem);
	if (pms && mem->present && m->steps)
		cow_detect(m, pms, mem);
	failure(m, a, mem);
	cow_lines(a, mem);
	free(copy);
}
