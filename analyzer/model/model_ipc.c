/*
 * model_ipc.c - the IPC view: batch hand-offs followed in system calls on
 * the thread that reads the result pipes (the main thread on the direct
 * path; on the pin-memory path the pin thread, whose semaphore posts end
 * the main thread's exposed waits).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/model_int.h"

void model_ipc_close(struct pass2 *ps)
{
	struct ipc_fsm *f = &ps->fsm;
	struct dlbn_model *m = ps->m;
	if (f->state == IPC_HANDOFF) {
		struct dlbn_step s = {.begin = f->begin,
				      .end = f->last_end,
				      .wait_ns = f->last_end - f->begin,
				      .recv_ns = f->last_end - f->hdr_t,
				      .bytes = f->bytes,
				      .nfds = f->nfds};
		model_number_epoch(&m->ipc_steps, &s, f->new_epoch);
		f->new_epoch = 0;
		if (m->path != DLBN_PATH_PIN) {
			model_feed(ps, &m->ipc_steps, &s);
		} else {
			if (ps->has_pin_held)
				model_feed(ps, &m->ipc_steps, &ps->pin_held);
			s.wait_ns = ps->pin_acc;
			ps->pin_held_first = ps->pin_acc_first;
			ps->pin_held_last = ps->pin_acc_last;
			ps->pin_acc = 0;
			ps->pin_acc_first = INT64_MAX;
			ps->pin_acc_last = INT64_MIN;
			ps->pin_held = s;
			ps->has_pin_held = 1;
		}
	}
	f->state = IPC_IDLE;
	f->bytes = 0;
	f->nfds = 0;
}

static void ipc_begin_if_idle(struct ipc_fsm *f, int64_t t)
{
	if (f->state == IPC_IDLE) {
		f->state = IPC_WAITING;
		f->begin = t;
	}
}

static void ipc_note_inode(struct pass2 *ps, struct pipe_ent *e)
{
	if (!e->seen_by_ipc) {
		e->seen_by_ipc = 1;
		ps->fsm.new_epoch = 1;
	}
}

static int poll_has_result(const struct dlbn_model *m, const struct dlbn_record *r,
			   struct pipe_ent **out)
{
	for (int k = 0; k < r->narr; k++) {
		struct pipe_ent *e = pipe_find(m->pipes, r->arr[k]);
		if (e && e->is_result) {
			*out = e;
			return 1;
		}
	}
	return 0;
}

/*
 * Operations that belong to receiving a batch: the per-tensor fd exchange,
 * and the semaphore posts right after it (the DataLoader queues the next
 * index, waking the index queue's feeder thread; the pin-memory thread
 * puts the batch into its queue).
 */
static int is_handoff_op(const struct dlbn_record *r)
{
	switch (r->type) {
	case DLBN_REC_CONNECT:
	case DLBN_REC_RECVMSG:
	case DLBN_REC_SENDMSG:
	case DLBN_REC_MMAP:
	case DLBN_REC_SEM_POST:
		return 1;
	case DLBN_REC_READ:
	case DLBN_REC_WRITE:
		return fld(r, 2) == DLBN_FD_UNIX;
	case DLBN_REC_OPEN:
		return fld(r, 1) == DLBN_FD_SHM;
	default:
		return 0;
	}
}

/* The thread that reads result pipes: follow one batch hand-off at a time. */
void model_ipc_record(struct pass2 *ps, const struct dlbn_record *r)
{
	struct ipc_fsm *f = &ps->fsm;
	struct pipe_ent *e = NULL;
	int64_t t = r->t_ns, end = t + rec_dur(r);

	if (r->type == DLBN_REC_POLL && poll_has_result(ps->m, r, &e)) {
		if (f->state == IPC_HANDOFF || f->state == IPC_RECEIVING)
			model_ipc_close(ps);
		ipc_note_inode(ps, e);
		ipc_begin_if_idle(f, t);
		return;
	}
	if (r->type == DLBN_REC_READ && fld(r, 2) == DLBN_FD_PIPE &&
	    (e = pipe_find(ps->m->pipes, fld(r, 3))) && e->is_result) {
		int64_t ret = fld(r, 4);
		if (ret <= 0) {
			ipc_begin_if_idle(f, t);
			return;
		}
		if (ps->first_result_read < 0)
			ps->first_result_read = t;
		/* A 4-byte read is a Connection message header: a new batch. */
		if (ret == 4 && f->state == IPC_HANDOFF)
			model_ipc_close(ps);
		ipc_note_inode(ps, e);
		ipc_begin_if_idle(f, t);
		if (f->state == IPC_WAITING && ret == 4) {
			f->state = IPC_RECEIVING;
			f->hdr_t = t;
		} else {
			if (f->state == IPC_WAITING)
				f->hdr_t = t;
			f->state = IPC_HANDOFF;
			f->bytes += bounded(ret, DLBN_DUR_LIMIT);
		}
		f->last_end = end;
		return;
	}
	if (f->state != IPC_HANDOFF)
		return;
	if (t - f->last_end > ps->o->handoff_gap_ns) {
		model_ipc_close(ps);
		return;
	}
	if (is_handoff_op(r)) {
		if (end > f->last_end)
			f->last_end = end;
		if (r->type == DLBN_REC_RECVMSG)
			f->nfds += (int32_t)bounded(fld(r, 5), 1024);
	}
}

void model_pin_wait_record(struct pass2 *ps, const struct dlbn_record *r)
{
	if (ps->npend == PENDING_MAX) {
		memmove(ps->pend, ps->pend + 1, (PENDING_MAX - 1) * sizeof(ps->pend[0]));
		ps->npend--;
	}
	ps->pend[ps->npend++] =
		(struct pending_wait){(uint64_t)fld(r, 1), r->t_ns, r->t_ns + rec_dur(r)};
}

/* A post by the pin thread wakes the main-thread wait on the same semaphore. */
void model_pin_post_record(struct pass2 *ps, const struct dlbn_record *r)
{
	uint64_t sem = (uint64_t)fld(r, 0);
	const int64_t slack = 200000;
	for (size_t i = 0; i < ps->npend; i++) {
		struct pending_wait *w = &ps->pend[i];
		if (w->sem != sem || r->t_ns < w->begin || r->t_ns > w->end + slack)
			continue;
		int64_t wait = w->end - w->begin;
		int in_handoff = ps->fsm.state == IPC_HANDOFF || ps->fsm.state == IPC_RECEIVING;
		if (!in_handoff && ps->has_pin_held) {
			ps->pin_held.wait_ns += wait; /* the batch just delivered */
			ps->pin_held_first = min64(ps->pin_held_first, w->begin);
			ps->pin_held_last = max64(ps->pin_held_last, w->end);
		} else {
			ps->pin_acc += wait;
			ps->pin_acc_first = min64(ps->pin_acc_first, w->begin);
			ps->pin_acc_last = max64(ps->pin_acc_last, w->end);
		}
		ps->pend[i] = ps->pend[--ps->npend];
		return;
	}
}
