/*
 * model_workers.c - DataLoader workers in pass 2: batch segments (an index
 * read to its result written), idle time waiting for an index, file-read
 * time, and the schedstat samples of training and worker threads.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/model_int.h"

/*
 * An index message arrived: a batch starts.  The worker may read the next
 * index before its feeder thread has written the previous result, so
 * starts wait in a small FIFO until their result is written.
 */
static void seg_queue_push(struct dlbn_proc *p, int64_t t)
{
	if (p->seg_n == DLBN_SEG_QUEUE) { /* results never written: drop the oldest */
		p->seg_head = (p->seg_head + 1) % DLBN_SEG_QUEUE;
		p->seg_n--;
	}
	unsigned tail = (p->seg_head + p->seg_n) % DLBN_SEG_QUEUE;
	p->seg_q[tail] = t;
	p->seg_file[tail] = p->file_ns_total;
	p->seg_n++;
}

/* Blocked on the index pipe; the poll and the reads right after it are
 * kept as one interval (one per batch), so memory follows batches. */
static void worker_idle(struct pass2 *ps, struct dlbn_proc *p, int64_t t, int64_t end)
{
	const int64_t join_ns = 200000;
	if (p->nidle && t - p->idle[p->nidle - 1].end < join_ns &&
	    t >= p->idle[p->nidle - 1].begin) {
		if (end > p->idle[p->nidle - 1].end)
			p->idle[p->nidle - 1].end = end;
		return;
	}
	struct dlbn_ival iv = {t, end};
	if (PUSH(p->idle, p->nidle, p->capidle, iv))
		ps->oom = 1;
}

void model_worker_record(struct pass2 *ps, struct dlbn_proc *p, const struct dlbn_record *r)
{
	struct pipe_ent *e;
	int64_t t = r->t_ns, end = t + rec_dur(r);

	switch (r->type) {
	case DLBN_REC_POLL:
		for (int k = 0; k < r->narr; k++) {
			e = pipe_find(ps->m->pipes, r->arr[k]);
			if (e && e->is_index) {
				worker_idle(ps, p, t, end);
				break;
			}
		}
		break;
	case DLBN_REC_READ:
		if (fld(r, 2) == DLBN_FD_FILE) {
			p->file_ns_total += end - t;
			p->file_bytes += bounded(fld(r, 4), DLBN_DUR_LIMIT);
			break;
		}
		if (fld(r, 2) != DLBN_FD_PIPE || !(e = pipe_find(ps->m->pipes, fld(r, 3))) ||
		    !e->is_index)
			break;
		worker_idle(ps, p, t, end);
		if (fld(r, 4) == 4)
			p->index_msgs++;
		else if (fld(r, 4) > 4)
			seg_queue_push(p, end);
		break;
	case DLBN_REC_PREAD:
		p->file_ns_total += end - t;
		p->file_bytes += bounded(fld(r, 3), DLBN_DUR_LIMIT);
		break;
	case DLBN_REC_WRITE:
		if (fld(r, 2) != DLBN_FD_PIPE || fld(r, 4) <= 4 ||
		    !(e = pipe_find(ps->m->pipes, fld(r, 3))) || !e->is_result)
			break;
		p->result_msgs++;
		/* The feeder thread writes when the batch is ready: its start
		 * ends the batch (a full pipe may block the write itself). */
		if (p->seg_n) {
			struct dlbn_batch_seg sg = {p->seg_q[p->seg_head], t,
						    p->file_ns_total - p->seg_file[p->seg_head]};
			p->seg_head = (p->seg_head + 1) % DLBN_SEG_QUEUE;
			p->seg_n--;
			if (PUSH(p->segs, p->nsegs, p->capsegs, sg))
				ps->oom = 1;
		}
		break;
	default:
		break;
	}
}

/* A schedstat sample of a training or worker thread (see struct dlbn_thread). */
void model_sched_record(struct pass2 *ps, const struct dlbn_record *r)
{
	struct dlbn_model *m = ps->m;
	uint32_t ti = r->stream->index;
	struct dlbn_thread *t = &m->threads[ti];
	if (r->kind[1] != DLBN_V_INT || r->kind[2] != DLBN_V_INT)
		return;
	if (!t->sched_samples) {
		if (PUSH(m->sched_threads, m->nsched_threads, m->capsched_threads, ti)) {
			ps->oom = 1;
			return;
		}
		t->sched_base[0] = bounded(r->f[1], DLBN_TIME_LIMIT);
		t->sched_base[1] = bounded(r->f[2], DLBN_TIME_LIMIT);
	}
	t->sched_samples++;
	t->sched_cur[0] = bounded(r->f[1], DLBN_TIME_LIMIT);
	t->sched_cur[1] = bounded(r->f[2], DLBN_TIME_LIMIT);
}

/*
 * A census sample taken at a batch's arrival opens a loop period; the
 * thread's sample at the fetch begin that ends it (the same time as the
 * mark, thread_census.c) closes it.  A thread missing from either end,
 * or counters that went back (a tid reused), leave the period out.
 */
static void census_period(const struct pass2 *ps, struct dlbn_census_thread *c)
{
	if (c->cur_t == ps->census_arrival_t) {
		c->arrived[0] = c->cur[0];
		c->arrived[1] = c->cur[1];
		c->arrived_t = c->cur_t;
		return;
	}
	if (c->cur_t != ps->census_to_t || ps->census_from_t < 0 ||
	    c->arrived_t != ps->census_from_t)
		return;
	c->arrived_t = -1;
	int64_t run = c->cur[0] - c->arrived[0], runq = c->cur[1] - c->arrived[1];
	if (run < 0 || runq < 0)
		return;
	c->period[0] += run;
	c->period[1] += runq;
	c->period[2] += ps->census_to_t - ps->census_from_t;
	c->period[3]++;
}

/*
 * A thread census sample of the training process (TASK).  Threads are few
 * (tens) and samples come every 100 ms at most: a linear search is enough.
 * A tid seen again after its thread ended is another thread with counters
 * that start over; the window's figures then read as nothing for it
 * (dlbn_census_window), which loses at most that thread.
 */
void model_census_record(struct pass2 *ps, const struct dlbn_record *r)
{
	struct dlbn_model *m = ps->m;
	if (r->nfields < 4 || r->kind[0] != DLBN_V_INT || r->kind[1] != DLBN_V_INT ||
	    r->kind[2] != DLBN_V_INT)
		return;
	struct dlbn_census_thread *c = NULL;
	for (size_t i = 0; i < m->ncensus && !c; i++)
		if (m->census[i].tid == (int)r->f[0])
			c = &m->census[i];
	if (!c) {
		if (m->ncensus >= DLBN_CENSUS_MAX)
			return;
		struct dlbn_census_thread fresh = {.tid = (int)r->f[0], .arrived_t = -1};
		if (PUSH(m->census, m->ncensus, m->capcensus, fresh)) {
			ps->oom = 1;
			return;
		}
		c = &m->census[m->ncensus - 1];
		c->base[0] = bounded(r->f[1], DLBN_TIME_LIMIT);
		c->base[1] = bounded(r->f[2], DLBN_TIME_LIMIT);
		c->base_t = r->t_ns;
	}
	if (r->nfields > 4 && r->kind[4] == DLBN_V_STR) {
		size_t n = (size_t)r->f[4] < sizeof(c->name) - 1 ? (size_t)r->f[4]
								 : sizeof(c->name) - 1;
		memcpy(c->name, r->str[4], n);
		c->name[n] = '\0';
	}
	c->samples++;
	c->cur[0] = bounded(r->f[1], DLBN_TIME_LIMIT);
	c->cur[1] = bounded(r->f[2], DLBN_TIME_LIMIT);
	c->cur_t = r->t_ns;
	census_period(ps, c);
}
