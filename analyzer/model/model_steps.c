/*
 * model_steps.c - where a view's step goes when it ends: numbered into its
 * epoch, folded into its view's window (window.c) and handed to the split
 * pass (opts.split), which hands it back once its wait's split is final.
 * The three views' files (model_marks.c, model_ipc.c) call in here; this
 * file calls only the window, so that the model's files call one way.
 */
#include "model/model_int.h"

/* Another loader's steps belong to the Python view (k = 0) too: the GPU
 * split sees all fetches of the loop in time order. */
int model_view_index(const struct dlbn_model *m, const struct dlbn_steps *st)
{
	return st == &m->ipc_steps ? 1 : st == &m->nvtx_steps ? 2 : 0;
}

struct dlbn_steps *model_view_steps(struct dlbn_model *m, int k)
{
	return k == 0 ? &m->py_steps : k == 1 ? &m->ipc_steps : &m->nvtx_steps;
}

/* The steps a step of view k belongs to: its loader's when aside. */
static struct dlbn_steps *steps_of(struct dlbn_model *m, int k, const struct dlbn_step *s)
{
	if (k == 0 && s->aside && s->loader >= 0)
		return &m->loaders.v[s->loader].steps;
	return model_view_steps(m, k);
}

/* A step's GPU split is final (the split pass calls back, in step order). */
void model_step_split(void *ctx, int k, struct dlbn_step *s, const struct dlbn_gpu_step *gs)
{
	struct pass2 *ps = ctx;
	if (dlbn_window_final(ps->m, steps_of(ps->m, k, s), s, gs) != 0)
		ps->oom = 1;
}

/*
 * A view's step ended.  The GPU seam (docs/DESIGN.md, "Analyzer layers"): its wait
 * is split into the part during which the GPU still had queued work
 * (gpu_busy, not a stall: prefetch hid it) and the part it sat idle
 * (gpu_idle, the stall) by the split pass (opts.split: gpu/gpu.h), once the
 * probes around it are in.
 * Without CUDA records the whole wait is stall, final at once.
 */
void model_feed(struct pass2 *ps, struct dlbn_steps *st, struct dlbn_step *s)
{
	struct dlbn_model *m = ps->m;
	s->gpu_busy_ns = 0;
	s->gpu_idle_ns = s->wait_ns;
	s->gpu_refill_ns = 0;
	s->gpu_lead_idle_ns = -1;
	s->gpu_lead_refill_ns = 0;
	s->gpu_lead_wrap_idle_ns = 0;
	dlbn_window_feed(m, st, s);
	if (st == m->steps && st->w.window)
		m->main_sem_wait_ns = ps->main_sem_wait; /* up to the window's last step */
	if (st == &m->ipc_steps && s->bytes > 0 && m->nipc_head < DLBN_HEAD_STEPS)
		m->ipc_head_bytes[m->nipc_head++] = s->bytes;
	if (ps->split)
		ps->o->split->step(ps->split, s->aside ? 0 : model_view_index(m, st), s);
	else if (dlbn_window_final(m, st, s, NULL) != 0)
		ps->oom = 1;
}

/* Epoch bookkeeping shared by both views. */
void model_number_epoch(struct dlbn_steps *st, struct dlbn_step *s, int new_epoch)
{
	if (st->epochs == 0 || new_epoch) {
		st->epochs++;
		s->epoch_start = 1;
	}
	s->epoch = st->epochs - 1;
}
