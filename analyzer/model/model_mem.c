/*
 * model_mem.c - pass 2's share of the memory records (memory.h): each
 * process's MEM samples, the job's MEMSYS samples, CHILD and NOTE.
 *
 * A sample's batches are the worker's results written by its time: the
 * records of all streams arrive merged by time, so the count is the one
 * the process had when it sampled.  The window's edges follow the chosen
 * view's steps as the schedstat figures do (window.c): the latest sample
 * by the end of warm-up is the base, by the latest window step the end.
 */
#include <string.h>

#include "model/model_int.h"

static void mem_point_of(const struct dlbn_record *r, const struct dlbn_proc *p,
			 struct dlbn_mem_point *pt)
{
	const int64_t kib_limit = INT64_C(1) << 40; /* 1 EiB */
	pt->t = r->t_ns;
	pt->batches = p->result_msgs;
	int64_t *cheap[] = {&pt->rss,	 &pt->anon,   &pt->shmem,    &pt->swap,
			    &pt->minflt, &pt->majflt, &pt->utime_us, &pt->stime_us};
	for (int i = 0; i < DLBN_MEM_FIELDS_CHEAP - 1; i++)
		*cheap[i] =
			r->kind[i] == DLBN_V_INT && r->f[i] >= 0 ? min64(r->f[i], kib_limit) : -1;
	int64_t *roll[] = {&pt->pss,	       &pt->pss_anon,	   &pt->pss_shmem,
			   &pt->private_clean, &pt->private_dirty, &pt->shared_dirty};
	int at = DLBN_MEM_FIELDS_CHEAP;
	int rollup = r->nfields >= DLBN_MEM_FIELDS_ROLLUP - 1 && r->kind[at] == DLBN_V_INT &&
		     r->f[at] >= 0;
	for (int i = 0; i < 6; i++)
		*roll[i] = rollup && r->kind[at + i] == DLBN_V_INT && r->f[at + i] >= 0
				   ? min64(r->f[at + i], kib_limit)
				   : -1;
}

static void track_add(struct dlbn_proc_mem *pm, const struct dlbn_mem_point *pt)
{
	if (!pm->stride)
		pm->stride = 1;
	/* The first and every rollup sample are kept whatever the stride:
	 * they are the growth curve's anchors. */
	if (pm->seen++ % pm->stride != 0 && pt->pss < 0)
		return;
	if (pm->ntrack == DLBN_MEM_TRACK) {
		/* Every other point goes, but the first and those with
		 * smaps_rollup (while they leave room). */
		size_t k = 1;
		for (size_t i = 1; i < pm->ntrack; i++)
			if (i % 2 == 0 || (pm->track[i].private_dirty >= 0 && k < i))
				pm->track[k++] = pm->track[i];
		if (k == pm->ntrack)
			k = DLBN_MEM_TRACK / 2; /* all of them anchors: keep the older half */
		pm->ntrack = k;
		pm->stride *= 2;
	}
	pm->track[pm->ntrack++] = (struct dlbn_mem_track_point){.t = pt->t,
								.batches = pt->batches,
								.minflt = pt->minflt,
								.stime_us = pt->stime_us,
								.utime_us = pt->utime_us,
								.rss = pt->rss,
								.anon = pt->anon,
								.private_dirty = pt->private_dirty,
								.pss = pt->pss,
								.pss_anon = pt->pss_anon,
								.private_clean = pt->private_clean,
								.shared_dirty = pt->shared_dirty};
}

void model_mem_record(struct dlbn_proc *p, const struct dlbn_record *r)
{
	struct dlbn_proc_mem *pm = &p->mem;
	struct dlbn_mem_point pt;
	mem_point_of(r, p, &pt);
	if (!pm->samples++)
		pm->first = pt;
	pm->cur = pt;
	if (pt.rss > pm->peak_rss)
		pm->peak_rss = pt.rss;
	if (pt.pss >= 0) {
		if (!pm->rollups++)
			pm->rfirst = pt;
		pm->rcur = pt;
		if (pt.pss > pm->peak_pss)
			pm->peak_pss = pt.pss;
		if (r->kind[DLBN_MEM_FIELDS_ROLLUP - 1] == DLBN_V_INT)
			pm->rollup_ns += bounded(r->f[DLBN_MEM_FIELDS_ROLLUP - 1], DLBN_DUR_LIMIT);
	}
	if (r->kind[DLBN_MEM_FIELDS_CHEAP - 1] == DLBN_V_INT)
		pm->sample_ns += bounded(r->f[DLBN_MEM_FIELDS_CHEAP - 1], DLBN_DUR_LIMIT);
	track_add(pm, &pt);
}

void model_memsys_record(struct dlbn_model *m, const struct dlbn_record *r)
{
	struct dlbn_job_mem *j = &m->job_mem;
	struct dlbn_memsys_point s = {.t = r->t_ns};
	int64_t *f[] = {NULL,	     &s.cg_limit, &s.cg_usage,	&s.cg_peak,	 &s.cg_oom_kills,
			&s.cg_anon,  &s.cg_shmem, &s.cg_file,	&s.host_total,	 &s.host_avail,
			&s.shm_size, &s.shm_free, &s.rlimit_as, &s.cg_limit_hits};
	s.cg_version = r->kind[0] == DLBN_V_INT && r->f[0] >= 0 && r->f[0] <= 2 ? (int)r->f[0] : 0;
	for (int i = 1; i < 14; i++)
		*f[i] = r->kind[i] == DLBN_V_INT && r->f[i] >= 0 ? min64(r->f[i], INT64_C(1) << 40)
								 : -1;
	if (!j->samples++) {
		j->first = s;
		j->max_usage = j->min_host_avail = j->min_shm_free = -1;
		j->oom_kills_t = j->limit_hits_t = -1;
		j->before_oom_usage = -1;
	}
	if (j->oom_kills_t < 0 && s.cg_oom_kills > j->first.cg_oom_kills &&
	    j->first.cg_oom_kills >= 0) {
		j->oom_kills_t = s.t;
		j->before_oom_usage = j->last.cg_usage;
	}
	if (j->limit_hits_t < 0 && s.cg_limit_hits > j->first.cg_limit_hits &&
	    j->first.cg_limit_hits >= 0)
		j->limit_hits_t = s.t;
	j->last = s;
	if (s.cg_usage > j->max_usage)
		j->max_usage = s.cg_usage;
	if (s.host_avail >= 0 && (j->min_host_avail < 0 || s.host_avail < j->min_host_avail))
		j->min_host_avail = s.host_avail;
	if (s.shm_free >= 0 && (j->min_shm_free < 0 || s.shm_free < j->min_shm_free))
		j->min_shm_free = s.shm_free;
}

void model_child_record(struct dlbn_model *m, uint32_t proc, const struct dlbn_record *r)
{
	struct dlbn_failures *fl = &m->failures;
	int how = (int)fld(r, 1), code = (int)fld(r, 2);
	if (how == DLBN_CHILD_EXITED && code == 0)
		return;
	fl->nends_all++;
	if (fl->nends < DLBN_CHILD_ENDS)
		fl->ends[fl->nends++] =
			(struct dlbn_child_end){r->t_ns, proc, (int)fld(r, 0), how, code};
}

void model_note_record(struct dlbn_model *m, uint32_t proc, const struct dlbn_record *r)
{
	struct dlbn_failures *fl = &m->failures;
	if (fl->nnotes >= DLBN_NOTES || r->kind[2] != DLBN_V_STR)
		return;
	struct dlbn_note *n = &fl->notes[fl->nnotes++];
	n->t = r->t_ns;
	n->proc = proc;
	n->iter_id = fld(r, 0);
	n->kind = (int)fld(r, 1);
	size_t len = (size_t)r->f[2] < sizeof(n->text) - 1 ? (size_t)r->f[2] : sizeof(n->text) - 1;
	memcpy(n->text, r->str[2], len);
	n->text[len] = '\0';
}

void model_mem_mark(struct dlbn_model *m, int in_window)
{
	for (size_t i = 0; i < m->nprocs; i++) {
		struct dlbn_proc_mem *pm = &m->procs[i].mem;
		if (!pm->samples)
			continue;
		if (!in_window) {
			pm->base = pm->cur;
			pm->has_base = 1;
			pm->sample_ns_base = pm->sample_ns;
			if (pm->rollups) {
				pm->rbase = pm->rcur;
				pm->has_rbase = 1;
			}
		} else {
			pm->end = pm->cur;
			pm->has_end = 1;
			pm->sample_ns_end = pm->sample_ns;
			if (pm->rollups) {
				pm->rend = pm->rcur;
				pm->has_rend = 1;
			}
		}
	}
	struct dlbn_job_mem *j = &m->job_mem;
	if (!j->samples)
		return;
	if (!in_window) {
		j->base = j->last;
		j->has_base = 1;
	} else {
		j->end = j->last;
		j->has_end = 1;
	}
}
