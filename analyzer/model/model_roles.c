/*
 * model_roles.c - pass 1 of the model: processes and threads, the pipe
 * table (for every pipe inode the threads that read and write it), the
 * roles decided from it (model.c's file comment has the rules) and their
 * names.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/model_int.h"

/* See model_decide_roles: how many times fewer fetch marks the main thread
 * may have and still be the loop's. */
#define MAIN_MARKS_SHARE 4.0

struct pipe_ent *model_pipe_get(struct pipe_table *t, int64_t ino)
{
	int added;
	struct dlbn_hash_entry *h =
		ino ? dlbn_hashtab_put(&t->by_ino, (uint64_t)ino, &added) : NULL;
	if (!h)
		return NULL; /* no inode, or out of memory */
	if (!added)
		return &t->ents[h->val.num];
	struct pipe_ent fresh = {.ino = ino};
	if (PUSH(t->ents, t->n, t->cap, fresh)) {
		dlbn_hashtab_delete(&t->by_ino, h);
		return NULL;
	}
	h->val.num = (int64_t)(t->n - 1);
	return &t->ents[t->n - 1];
}

static void who_add(struct who **v, size_t *n, size_t *cap, uint32_t thread)
{
	for (size_t i = 0; i < *n; i++) {
		if ((*v)[i].thread == thread) {
			(*v)[i].count++;
			return;
		}
	}
	struct who w = {thread, 1};
	(void)PUSH(*v, *n, *cap, w);
}

void model_pipe_table_free(struct pipe_table *t)
{
	if (!t)
		return;
	for (size_t i = 0; i < t->n; i++) {
		free(t->ents[i].readers);
		free(t->ents[i].writers);
	}
	free(t->ents);
	dlbn_hashtab_free(&t->by_ino);
	free(t);
}

/* String field i of r into buf (NUL-terminated, truncated); "" when absent. */
static void copy_str(char *buf, size_t len, const struct dlbn_record *r, int i)
{
	size_t n = 0;
	if (r->kind[i] == DLBN_V_STR)
		n = (size_t)r->f[i] < len - 1 ? (size_t)r->f[i] : len - 1;
	if (n)
		memcpy(buf, r->str[i], n);
	buf[n] = 0;
}

/* A PROCESS record: who the process is (its rank, when a launcher set one). */
static void process_record(struct dlbn_proc *p, const struct dlbn_record *r)
{
	p->has_process_rec = 1;
	p->pid = (int)fld(r, 0);
	p->ppid = (int)fld(r, 1);
	p->parent_proc_id = r->kind[2] == DLBN_V_INT ? r->f[2] : -1;
	p->start = (int)fld(r, 3);
	p->rank =
		r->kind[4] == DLBN_V_INT && r->f[4] >= 0 && r->f[4] < INT32_MAX ? (int)r->f[4] : -1;
	p->local_rank =
		r->kind[5] == DLBN_V_INT && r->f[5] >= 0 && r->f[5] < INT32_MAX ? (int)r->f[5] : -1;
	p->world_size =
		r->kind[6] == DLBN_V_INT && r->f[6] > 0 && r->f[6] < INT32_MAX ? (int)r->f[6] : -1;
	copy_str(p->argv0, sizeof(p->argv0), r, 9);
	copy_str(p->host, sizeof(p->host), r, 11);
}

/* A READ or WRITE of thread ti: a pipe's transfer names it a reader or a
 * writer of that pipe (an allocation failure leaves it unnamed). */
static void pipe_transfer(struct dlbn_model *m, uint32_t ti, const struct dlbn_record *r)
{
	if (fld(r, 2) != DLBN_FD_PIPE || fld(r, 4) <= 0)
		return;
	struct pipe_ent *e = model_pipe_get(m->pipes, fld(r, 3));
	if (!e)
		return;
	if (r->type == DLBN_REC_READ)
		who_add(&e->readers, &e->nreaders, &e->capreaders, ti);
	else
		who_add(&e->writers, &e->nwriters, &e->capwriters, ti);
}

int model_pass1_record(struct dlbn_model *m, const struct dlbn_record *r)
{
	uint32_t ti = r->stream->index;
	struct dlbn_thread *t = &m->threads[ti];
	struct dlbn_proc *p = &m->procs[t->proc_index];
	int64_t end = r->t_ns + rec_dur(r);

	p->records++;
	if (r->t_ns < p->t_first)
		p->t_first = r->t_ns;
	if (end > p->t_last)
		p->t_last = end;

	switch (r->type) {
	case DLBN_REC_PROCESS:
		process_record(p, r);
		break;
	case DLBN_REC_THREAD:
		t->tid = (int)fld(r, 0);
		t->is_main = fld(r, 1) != 0;
		break;
	case DLBN_REC_EXIT:
		p->has_exit = 1;
		p->exit_status = (int)fld(r, 0);
		p->exit_how = (int)fld(r, 1);
		break;
	case DLBN_REC_MARK:
		if (fld(r, 0) == DLBN_MARK_FETCH_BEGIN) {
			t->fetch_marks++;
			p->fetch_marks++;
			m->has_marks = 1;
		}
		return dlbn_loaders_record(m, t->proc_index, r);
	case DLBN_REC_CONFIG:
		return dlbn_loaders_record(m, t->proc_index, r);
	case DLBN_REC_READ:
	case DLBN_REC_WRITE:
		pipe_transfer(m, ti, r);
		break;
	case DLBN_REC_POLL:
		for (int k = 0; k < r->narr; k++) {
			struct pipe_ent *e = pipe_find(m->pipes, r->arr[k]);
			if (e)
				e->polled_by_reader = 1;
		}
		break;
	case DLBN_REC_LAUNCH:
	case DLBN_REC_MEMCPY:
	case DLBN_REC_SYNC:
	case DLBN_REC_PROBE:
	case DLBN_REC_PROBE_DONE:
		m->has_cuda = 1;
		break;
	case DLBN_REC_PROF_STAGE:
	case DLBN_REC_PROF_SAMPLE:
	case DLBN_REC_CALLSITE:
		m->profile_records++;
		break;
	case DLBN_REC_STRING:
	case DLBN_REC_DOMAIN:
		(void)dlbn_range_names_record(m->range_names, r); /* OOM: names unknown */
		break;
	case DLBN_REC_RANGE_PUSH:
	case DLBN_REC_RANGE_START:
		if (dlbn_range_class_of(m->range_names, r) == DLBN_RANGE_DATA)
			t->nvtx_data++;
		break;
	default:
		break;
	}
	return 0;
}

/* The parent process index of p, or -1 (by proc id, else by pid). */
static ssize_t find_parent(const struct dlbn_model *m, size_t pi)
{
	const struct dlbn_proc *p = &m->procs[pi];
	ssize_t by_pid = -1;
	for (size_t i = 0; i < m->nprocs; i++) {
		if (i == pi)
			continue;
		if (p->parent_proc_id >= 0 && m->procs[i].proc_id == (uint64_t)p->parent_proc_id)
			return (ssize_t)i;
		if (by_pid < 0 && m->procs[i].pid == p->ppid && m->procs[i].t_first <= p->t_first)
			by_pid = (ssize_t)i;
	}
	return by_pid;
}

static int is_descendant(const struct dlbn_model *m, size_t child, size_t anc)
{
	ssize_t c = (ssize_t)child;
	for (int depth = 0; depth < 64 && c >= 0; depth++) {
		c = m->procs[c].parent_index;
		if (c == (ssize_t)anc)
			return 1;
	}
	return 0;
}

static int pipe_has_proc(const struct dlbn_model *m, const struct who *v, size_t n, size_t pi)
{
	for (size_t i = 0; i < n; i++)
		if (m->threads[v[i].thread].proc_index == pi)
			return 1;
	return 0;
}

/*
 * Training process without marks: the process that reads pipes written by
 * other processes, its descendants weighing far more (a DataLoader's
 * workers descend from the training process; forkserver ones through the
 * forkserver).
 */
static ssize_t find_training_ipc(const struct dlbn_model *m)
{
	long *score = calloc(m->nprocs ? m->nprocs : 1, sizeof(*score));
	if (!score)
		return -1;
	for (size_t s = 0; s < m->pipes->n; s++) {
		const struct pipe_ent *e = &m->pipes->ents[s];
		for (size_t rd = 0; rd < e->nreaders; rd++) {
			size_t rp = m->threads[e->readers[rd].thread].proc_index;
			if (pipe_has_proc(m, e->readers, rd, rp))
				continue; /* this process already counted for this pipe */
			for (size_t w = 0; w < e->nwriters; w++) {
				size_t wp = m->threads[e->writers[w].thread].proc_index;
				if (wp != rp)
					score[rp] += is_descendant(m, wp, rp) ? 1000 : 1;
			}
		}
	}
	ssize_t best = -1;
	for (size_t pi = 0; pi < m->nprocs; pi++) {
		if (score[pi] <= 0)
			continue;
		if (best < 0 || score[pi] > score[best] ||
		    (score[pi] == score[best] && m->procs[pi].t_first < m->procs[best].t_first))
			best = (ssize_t)pi;
	}
	free(score);
	return best;
}

static int writes_pipe_read_by(const struct dlbn_model *m, const struct pipe_ent *e, size_t wp,
			       size_t tp)
{
	return wp != tp && pipe_has_proc(m, e->readers, e->nreaders, tp) &&
	       pipe_has_proc(m, e->writers, e->nwriters, wp);
}

/*
 * Workers: processes writing a pipe the training process reads (the result
 * queue) that also read a pipe the training process writes and they poll
 * (their index queue).  The second condition keeps out helpers such as a
 * forkserver that only report to the training process; it is dropped when
 * no candidate meets it (a trace missing the workers' index reads).
 */
static void find_workers(struct dlbn_model *m, size_t tp)
{
	char *cand = calloc(m->nprocs ? m->nprocs : 1, 2);
	if (!cand)
		return;
	char *reads_index = cand + m->nprocs;
	int any_index = 0;
	for (size_t s = 0; s < m->pipes->n; s++) {
		const struct pipe_ent *e = &m->pipes->ents[s];
		for (size_t w = 0; w < e->nwriters; w++) {
			size_t wp = m->threads[e->writers[w].thread].proc_index;
			if (writes_pipe_read_by(m, e, wp, tp))
				cand[wp] = 1;
		}
	}
	for (size_t s = 0; s < m->pipes->n; s++) {
		struct pipe_ent *e = &m->pipes->ents[s];
		if (!e->polled_by_reader || !pipe_has_proc(m, e->writers, e->nwriters, tp))
			continue;
		for (size_t rd = 0; rd < e->nreaders; rd++) {
			size_t rp = m->threads[e->readers[rd].thread].proc_index;
			if (rp != tp && cand[rp]) {
				e->is_index = 1;
				reads_index[rp] = 1;
				any_index = 1;
			}
		}
	}
	for (size_t pi = 0; pi < m->nprocs; pi++) {
		if (cand[pi] && (reads_index[pi] || !any_index)) {
			m->procs[pi].role = DLBN_ROLE_WORKER;
			m->nworkers_total++;
		}
	}
	for (size_t s = 0; s < m->pipes->n; s++) {
		struct pipe_ent *e = &m->pipes->ents[s];
		for (size_t w = 0; w < e->nwriters; w++) {
			size_t wp = m->threads[e->writers[w].thread].proc_index;
			if (m->procs[wp].role == DLBN_ROLE_WORKER &&
			    writes_pipe_read_by(m, e, wp, tp))
				e->is_result = 1;
		}
	}
	free(cand);
}

/*
 * No fetch marks and no hand-off pipes (num_workers=0 without the Python
 * bootstrap): the thread that declared the most NVTX data-loading ranges
 * is the training loop.
 */
static void find_training_nvtx(struct dlbn_model *m)
{
	uint64_t most = 0;
	for (size_t ti = 0; ti < m->nthreads; ti++) {
		if (m->threads[ti].nvtx_data > most) {
			most = m->threads[ti].nvtx_data;
			m->training = m->threads[ti].proc_index;
			m->main_thread = (ssize_t)ti;
		}
	}
}

void model_decide_roles(struct dlbn_model *m)
{
	/* Training process: FETCH marks first, on the thread with the most;
	 * a main thread with marks beats a thread with up to MAIN_MARKS_SHARE
	 * times more (a thread prefetcher fetches from a DataLoader to fill
	 * the queue that the loop's own loader, on the main thread, reads: a
	 * few batches ahead of the loop). */
	uint64_t most = 0;
	for (size_t ti = 0; ti < m->nthreads; ti++) {
		if (m->threads[ti].fetch_marks > most) {
			most = m->threads[ti].fetch_marks;
			m->mark_thread = (ssize_t)ti;
			m->training = m->threads[ti].proc_index;
		}
	}
	for (size_t ti = 0; m->mark_thread >= 0 && ti < m->nthreads; ti++) {
		const struct dlbn_thread *t = &m->threads[ti];
		if (t->is_main && t->proc_index == (uint32_t)m->training && t->fetch_marks &&
		    (double)t->fetch_marks * MAIN_MARKS_SHARE >= (double)most) {
			m->mark_thread = (ssize_t)ti;
			break;
		}
	}
	for (size_t pi = 0; pi < m->nprocs; pi++)
		m->procs[pi].parent_index = find_parent(m, pi);
	if (m->training < 0)
		m->training = find_training_ipc(m);
	if (m->training < 0)
		find_training_nvtx(m);
	if (m->training < 0)
		return;
	size_t tp = (size_t)m->training;
	m->procs[tp].role = DLBN_ROLE_TRAINING;

	find_workers(m, tp);
	/* Main thread, and the thread of the training process reading results. */
	uint64_t best_reads = 0;
	ssize_t reader = -1;
	for (size_t ti = 0; ti < m->nthreads; ti++) {
		struct dlbn_thread *t = &m->threads[ti];
		if (t->proc_index != tp)
			continue;
		if (t->is_main && m->main_thread < 0)
			m->main_thread = (ssize_t)ti;
		for (size_t s = 0; s < m->pipes->n; s++) {
			const struct pipe_ent *e = &m->pipes->ents[s];
			if (!e->is_result)
				continue;
			for (size_t rd = 0; rd < e->nreaders; rd++)
				if (e->readers[rd].thread == ti)
					t->result_reads += e->readers[rd].count;
		}
		if (t->result_reads > best_reads) {
			best_reads = t->result_reads;
			reader = (ssize_t)ti;
		}
	}
	if (m->main_thread < 0) {
		for (size_t ti = 0; ti < m->nthreads; ti++)
			if (m->threads[ti].proc_index == tp && m->threads[ti].thread_no == 0)
				m->main_thread = (ssize_t)ti;
	}
	if (m->mark_thread >= 0)
		m->main_thread = m->mark_thread;
	if (m->main_thread >= 0 && m->threads[m->main_thread].nvtx_data)
		m->nvtx_thread = m->main_thread;
	if (reader < 0)
		m->path = DLBN_PATH_NONE;
	else if (reader == m->main_thread)
		m->path = DLBN_PATH_DIRECT;
	else {
		m->path = DLBN_PATH_PIN;
		m->pin_thread = reader;
	}
}

const char *dlbn_role_name(int role)
{
	return role == DLBN_ROLE_TRAINING ? "training"
	       : role == DLBN_ROLE_WORKER ? "worker"
					  : "other";
}

const char *dlbn_thread_role(const struct dlbn_model *m, size_t ti)
{
	const struct dlbn_thread *t = &m->threads[ti];
	if ((ssize_t)ti == m->main_thread)
		return "main";
	if ((ssize_t)ti == m->pin_thread)
		return "pin";
	if (m->procs[t->proc_index].role == DLBN_ROLE_WORKER)
		return t->thread_no == 0 ? "worker" : "feeder";
	return "other";
}
