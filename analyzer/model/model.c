/*
 * model.c - reconstruct the training process tree, roles, steps, waits and
 * workers from a trace (see model.h; docs/DESIGN.md, "Analyzer layers", and
 * "How a DataLoader batch travels" for the DataLoader behaviour relied on).
 *
 * Pass 1 (roles): processes, threads, and for every pipe inode the threads
 * that read and write it.  The training process is the one with Python
 * FETCH marks, else the one that reads pipes written by its descendants
 * (pipe identity, not parentage: forkserver workers are grandchildren),
 * else the one whose thread declared NVTX data-loading ranges (ranges.h;
 * registered strings and domains are learnt here too).
 * Workers: processes that write a pipe the training process reads and
 * read an index pipe (written by the training process, polled by them).
 * Result pipes: read by the training process, written by workers.
 *
 * Pass 2 (evidence): the Python view from FETCH_BEGIN/END marks; the IPC
 * view from the hand-off sequence on the thread that reads result pipes
 * (main thread: direct path; pin-memory thread: pin path, where the main
 * thread's exposed waits are its SEM_WAITs that the pin thread posts);
 * the NVTX view from the main thread's outermost data-loading ranges;
 * worker batch segments, idle intervals and file-read time; schedstat
 * (SCHED) samples of training and worker threads; the training process's
 * MODULE/STACK records (waitstacks.h).  Each step goes to window.c as soon
 * as it is complete.  View preference: python > nvtx > ipc.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/model_int.h"
#include "util/quantiles.h"
#include "util/timings.h"

void dlbn_model_default_opts(struct dlbn_model_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->handoff_gap_ns = 2000000;
	o->force_view = DLBN_VIEW_NONE;
	o->warmup_steps = -1;
}

int dlbn_model_loader_unrecognised(const struct dlbn_model *m)
{
	const struct dlbn_loader_table *t = &m->loaders;
	return t->boot_note && !t->boot_incompatible && !t->boot_partial && !m->has_marks;
}

static int setup_procs(struct dlbn_model *m, struct dlbn_reader *r)
{
	size_t ns = dlbn_reader_nstreams(r);
	m->threads = calloc(ns ? ns : 1, sizeof(*m->threads));
	m->procs = calloc(ns ? ns : 1, sizeof(*m->procs));
	m->pipes = calloc(1, sizeof(*m->pipes));
	if (!m->threads || !m->procs || !m->pipes)
		return -1;
	m->nthreads = ns;
	/* Streams come sorted by proc_id, so one process's threads are adjacent. */
	for (size_t i = 0; i < ns; i++) {
		const struct dlbn_stream_info *si = dlbn_reader_stream(r, i);
		if (!m->nprocs || m->procs[m->nprocs - 1].proc_id != si->proc_id) {
			struct dlbn_proc *p = &m->procs[m->nprocs++];
			p->proc_id = si->proc_id;
			p->pid = (int)si->pid;
			p->parent_proc_id = -1;
			p->rank = p->local_rank = p->world_size = -1;
			p->t_first = INT64_MAX;
			p->t_last = INT64_MIN;
		}
		struct dlbn_thread *t = &m->threads[i];
		t->proc_index = (uint32_t)(m->nprocs - 1);
		t->thread_no = si->thread_no;
		t->tid = (int)si->tid;
		t->is_main = si->thread_no == 0 && si->tid == si->pid;
	}
	m->training = m->main_thread = m->pin_thread = m->mark_thread = m->nvtx_thread = -1;
	m->range_names = dlbn_range_names_new();
	if (!m->range_names || dlbn_wait_stacks_init(&m->stacks, ns) != 0 ||
	    dlbn_lib_ops_init(&m->lib_ops, ns) != 0)
		return -1;
	m->t0 = INT64_MAX;
	m->t_end = INT64_MIN;
	return 0;
}

static void training_record(struct pass2 *ps, const struct dlbn_record *r)
{
	struct dlbn_model *m = ps->m;
	struct pipe_ent *e;
	ssize_t ti = (ssize_t)r->stream->index;

	/* Index messages sent before the first result: the prefetch depth. */
	if (r->type == DLBN_REC_WRITE && ps->first_result_read < 0 && fld(r, 2) == DLBN_FD_PIPE &&
	    fld(r, 4) > 4 && (e = pipe_find(m->pipes, fld(r, 3))) && e->is_index)
		m->prefetch_writes++;
	if (ti == m->mark_thread && r->type == DLBN_REC_MARK)
		model_mark_record(ps, r);
	/* The batch's shared memory, mapped by the thread that received it
	 * (the loop's, or the pin-memory thread). */
	if (r->type == DLBN_REC_MMAP && fld(r, 1) == DLBN_FD_SHM && fld(r, 3) > 0)
		ps->shm_mapped += fld(r, 3);
	if (m->nvtx_thread >= 0 && r->type >= DLBN_REC_RANGE_PUSH && r->type <= DLBN_REC_RANGE_END)
		model_nvtx_record(ps, r, ti == m->nvtx_thread);
	if (m->path == DLBN_PATH_DIRECT && ti == m->main_thread)
		model_ipc_record(ps, r);
	if (m->path == DLBN_PATH_PIN) {
		if (ti == m->pin_thread)
			model_ipc_record(ps, r);
		if (ti == m->main_thread && r->type == DLBN_REC_SEM_WAIT) {
			model_pin_wait_record(ps, r);
			if (m->steps && m->steps->w.warmup && r->t_ns >= m->steps->w.ws)
				ps->main_sem_wait += rec_dur(r);
		}
		if (ti == m->pin_thread && r->type == DLBN_REC_SEM_POST)
			model_pin_post_record(ps, r);
	}
}

/*
 * The view to follow (unless overridden): Python marks (exact fetches),
 * else NVTX data ranges (declared by the program: exact if the names are
 * honest), else the IPC hand-offs (inferred from system calls).  The IPC
 * view is torch's DataLoader protocol; when the bootstrap wrapped every
 * DataLoader and none was ever fetched, pipe traffic is some other
 * protocol (torchdata.nodes' per-sample queues, a user's process pool),
 * whose messages are not batches: no IPC view then
 * (dlbn_model_loader_unrecognised).
 */
static void choose_view(struct dlbn_model *m, const struct dlbn_model_opts *o)
{
	int py = m->mark_thread >= 0, nvtx = m->nvtx_thread >= 0;
	int ipc = m->path != DLBN_PATH_NONE && !dlbn_model_loader_unrecognised(m);
	if (o->force_view == DLBN_VIEW_PYTHON)
		m->view = py ? DLBN_VIEW_PYTHON : DLBN_VIEW_NONE;
	else if (o->force_view == DLBN_VIEW_IPC)
		m->view = ipc ? DLBN_VIEW_IPC : DLBN_VIEW_NONE;
	else if (o->force_view == DLBN_VIEW_NVTX)
		m->view = nvtx ? DLBN_VIEW_NVTX : DLBN_VIEW_NONE;
	else
		m->view = py	 ? DLBN_VIEW_PYTHON
			  : nvtx ? DLBN_VIEW_NVTX
			  : ipc	 ? DLBN_VIEW_IPC
				 : DLBN_VIEW_NONE;
	m->steps = m->view == DLBN_VIEW_PYTHON ? &m->py_steps
		   : m->view == DLBN_VIEW_NVTX ? &m->nvtx_steps
					       : &m->ipc_steps;
}

/* Workers' first result pipe: how many processes wrote it. */
static void infer_num_workers(struct dlbn_model *m)
{
	int64_t first_t = INT64_MAX;
	const struct pipe_ent *first = NULL;
	for (size_t s = 0; s < m->pipes->n; s++) {
		const struct pipe_ent *e = &m->pipes->ents[s];
		if (!e->is_result)
			continue;
		int64_t t = INT64_MAX;
		for (size_t w = 0; w < e->nwriters; w++) {
			const struct dlbn_proc *p =
				&m->procs[m->threads[e->writers[w].thread].proc_index];
			if (p->t_first < t)
				t = p->t_first;
		}
		if (t < first_t) {
			first_t = t;
			first = e;
		}
	}
	if (!first)
		return;
	int n = 0;
	for (size_t w = 0; w < first->nwriters; w++) {
		int dup = 0;
		uint32_t pw = m->threads[first->writers[w].thread].proc_index;
		for (size_t k = 0; k < w; k++)
			if (m->threads[first->writers[k].thread].proc_index == pw)
				dup = 1;
		if (!dup && m->procs[pw].role == DLBN_ROLE_WORKER)
			n++;
	}
	m->num_workers_inferred = n;
}

/*
 * Records of one thread come in the order they were written, and a call's
 * record is written when it returns but stamped when it began: what the
 * recorder wrote inside the call (the GPU probes at a wait's begin) comes
 * first with later stamps.  HORIZON_LAG_NS bounds that inversion (a hook's
 * own work before the call, microseconds) with a wide margin.
 */
#define HORIZON_LAG_NS 100000000

/*
 * No step still to come has its wait begin before the horizon: the open
 * fetch, hand-off or data range of each view, the pin-path waits not yet
 * in a step, else t (later steps begin later), less the lag above.  The
 * GPU split weighs CUDA records up to it (gpu.h).
 */
static int64_t horizon(const struct pass2 *ps, int64_t t)
{
	const struct dlbn_model *m = ps->m;
	int64_t h = t;
	for (size_t i = 0; i < m->loaders.n; i++)
		if (m->loaders.v[i].py_open >= 0 && m->loaders.v[i].py_open < h)
			h = m->loaders.v[i].py_open;
	if (ps->fsm.state != IPC_IDLE && ps->fsm.begin < h)
		h = ps->fsm.begin;
	if (m->path == DLBN_PATH_PIN) {
		if (ps->has_pin_held && ps->pin_held_first != INT64_MAX)
			h = min64(h, ps->pin_held_first -
					     max64(0, ps->pin_held_last - ps->pin_held.end));
		if (ps->pin_acc_first != INT64_MAX)
			h = min64(h, ps->pin_acc_first -
					     max64(0, ps->pin_acc_last - ps->fsm.last_end));
		for (size_t i = 0; i < ps->npend; i++)
			if (ps->pend[i].begin < h)
				h = ps->pend[i].begin;
	}
	for (size_t i = 0; ps->nvtx.data_open && i < ps->nvtx.npushed; i++)
		if (ps->nvtx.pushed[i].what != NVTX_OPEN_OTHER &&
		    ps->nvtx.pushed[i].what != NVTX_OPEN_STEP && ps->nvtx.pushed[i].begin < h)
			h = ps->nvtx.pushed[i].begin;
	for (size_t i = 0; ps->nvtx.data_open && i < ps->nvtx.nstarted; i++)
		if (ps->nvtx.started[i].what != NVTX_OPEN_OTHER &&
		    ps->nvtx.started[i].what != NVTX_OPEN_STEP && ps->nvtx.started[i].begin < h)
			h = ps->nvtx.started[i].begin;
	return h > INT64_MIN + HORIZON_LAG_NS ? h - HORIZON_LAG_NS : INT64_MIN;
}

/*
 * The GPU pass's share of a record.  For --timings one record in
 * GPU_TIMING_STRIDE is timed (wall clock, less what the clock reads
 * themselves cost) and scaled up: timing every record would cost more than
 * the pass.  The stride is prime so as not to follow a step's records.
 */
#define GPU_TIMING_STRIDE 61

static void gpu_pass_record(struct pass2 *ps, const struct dlbn_record *rec)
{
	struct dlbn_timings *t = ps->o->timings;
	int timed = t && ++ps->gpu_timing_count % GPU_TIMING_STRIDE == 0;
	int64_t t0 = timed ? dlbn_clock_ns(CLOCK_MONOTONIC) : 0;
	ps->o->split->record(ps->split, rec);
	ps->o->split->horizon(ps->split, horizon(ps, rec->t_ns));
	if (timed) {
		int64_t d = dlbn_clock_ns(CLOCK_MONOTONIC) - t0 - t->clock_read_ns;
		t->wall_ns[DLBN_PHASE_GPU] += (d > 0 ? d : 0) * GPU_TIMING_STRIDE;
		t->ran[DLBN_PHASE_GPU] = 1;
	}
}

static int run_pass2(struct dlbn_model *m, struct dlbn_reader *r, const struct dlbn_model_opts *o)
{
	struct pass2 ps = {.m = m,
			   .o = o,
			   .first_result_read = -1,
			   .census_arrival_t = -1,
			   .census_from_t = -1,
			   .census_to_t = -1,
			   .pin_acc_first = INT64_MAX,
			   .pin_held_first = INT64_MAX,
			   .pin_acc_last = INT64_MIN,
			   .pin_held_last = INT64_MIN};
	const struct dlbn_record *rec;

	if (o->split && m->has_cuda && m->training >= 0 &&
	    !(ps.split = o->split->start(m, &m->gpu, model_step_split, &ps)))
		return -1;
	dlbn_reader_rewind(r);
	while ((rec = dlbn_reader_next(r))) {
		struct dlbn_thread *t = &m->threads[rec->stream->index];
		struct dlbn_proc *p = &m->procs[t->proc_index];
		if (rec->type == DLBN_REC_SCHED && p->role != DLBN_ROLE_OTHER)
			model_sched_record(&ps, rec);
		if (rec->type == DLBN_REC_TASK && p->role == DLBN_ROLE_TRAINING)
			model_census_record(&ps, rec);
		switch (rec->type) {
		case DLBN_REC_MEM:
			if (p->role != DLBN_ROLE_OTHER)
				model_mem_record(p, rec);
			break;
		case DLBN_REC_MEMSYS:
			model_memsys_record(m, rec);
			break;
		case DLBN_REC_CHILD:
			model_child_record(m, t->proc_index, rec);
			break;
		case DLBN_REC_NOTE:
			if (p->role == DLBN_ROLE_TRAINING)
				model_note_record(m, t->proc_index, rec);
			break;
		default:
			break;
		}
		if (p->role == DLBN_ROLE_WORKER) {
			model_worker_record(&ps, p, rec);
		} else if (p->role == DLBN_ROLE_TRAINING) {
			training_record(&ps, rec);
			int in_window = m->steps && m->steps->w.window > 0;
			if (dlbn_wait_stacks_record(&m->stacks, rec, rec_dur(rec), in_window) != 0)
				ps.oom = 1;
			if (rec->type == DLBN_REC_RANGE_PUSH || rec->type == DLBN_REC_RANGE_POP)
				dlbn_lib_ops_record(&m->lib_ops, rec, in_window);
			if (ps.split)
				gpu_pass_record(&ps, rec);
		}
	}
	model_ipc_close(&ps);
	if (ps.has_pin_held)
		model_feed(&ps, &m->ipc_steps, &ps.pin_held);
	if (ps.split && o->split->end(ps.split) != 0)
		ps.oom = 1;
	return ps.oom ? -1 : 0;
}

int dlbn_model_build(struct dlbn_model *m, struct dlbn_reader *r, const struct dlbn_model_opts *o)
{
	const struct dlbn_record *rec;

	memset(m, 0, sizeof(*m));
	m->opts = *o;
	m->py_steps.depth = m->ipc_steps.depth = m->nvtx_steps.depth = -1;
	m->loaders.train = -1;
	if (setup_procs(m, r) != 0)
		return -1;
	int oom = 0;
	struct dlbn_stopwatch w;
	dlbn_stopwatch_start(&w);
	dlbn_reader_rewind(r);
	while ((rec = dlbn_reader_next(r))) {
		if (model_pass1_record(m, rec) != 0)
			oom = 1;
		int64_t end = rec->t_ns + rec_dur(rec);
		if (rec->t_ns < m->t0)
			m->t0 = rec->t_ns;
		if (end > m->t_end)
			m->t_end = end;
		m->records++;
	}
	if (m->t0 == INT64_MAX)
		m->t0 = m->t_end = 0;
	dlbn_timings_add(o->timings, DLBN_PHASE_PASS1, &w);
	model_decide_roles(m);
	if (oom || dlbn_loaders_decide(m) != 0)
		return -1;
	if (m->loaders.train >= 0 && m->loaders.v[m->loaders.train].has_config)
		m->config = m->loaders.v[m->loaders.train].config;
	/* Results read off the loop's thread are a pin-memory thread's only
	 * in torch's DataLoader: another loader's own thread (nodes' sorting
	 * and prefetch threads) pins nothing. */
	if (m->path == DLBN_PATH_PIN && m->config.present &&
	    strcmp(dlbn_loader_kind(&m->config), "dataloader") != 0) {
		m->path = DLBN_PATH_NONE;
		m->pin_thread = -1;
	}
	infer_num_workers(m);
	choose_view(m, o);
	m->warmup_steps = o->warmup_steps;
	struct dlbn_steps *chosen = model_view_steps(m, model_view_index(m, m->steps));
	if (!(chosen->w.waits = dlbn_quantiles_new()))
		return -1;
	dlbn_stopwatch_start(&w);
	if (run_pass2(m, r, o) != 0)
		return -1;
	dlbn_timings_add(o->timings, DLBN_PHASE_PASS2, &w);
	if (!m->prefetch_known)
		dlbn_prefetch_depth(m);
	dlbn_wait_stacks_finish(&m->stacks);
	dlbn_lib_ops_sort(&m->lib_ops);
	/* The chosen view's GPU window is the verdict's: steps ending in
	 * (ws, we] (the IPC view when there is none, as the verdict's). */
	if (o->split)
		o->split->finish(&m->gpu, m->py_steps.n ? 0 : 1, model_view_index(m, m->steps),
				 m->steps->w.ws, m->steps->w.we);
	return 0;
}

int dlbn_model_each_step(const struct dlbn_model *m, struct dlbn_reader *r, dlbn_step_sink sink,
			 void *ctx)
{
	struct dlbn_model_opts o = m->opts;
	struct dlbn_model *again = malloc(sizeof(*again));
	if (!again)
		return -1;
	if (m->view != DLBN_VIEW_NONE)
		o.force_view = m->view;
	o.keep_steps = 0;
	o.sink = sink;
	o.sink_ctx = ctx;
	int rc = dlbn_model_build(again, r, &o);
	dlbn_model_free(again);
	free(again);
	return rc;
}

void dlbn_model_free(struct dlbn_model *m)
{
	for (size_t i = 0; i < m->nprocs; i++) {
		free(m->procs[i].segs);
		free(m->procs[i].idle);
	}
	free(m->procs);
	free(m->threads);
	for (int k = 0; k < 3; k++) {
		struct dlbn_steps *st = model_view_steps(m, k);
		free(st->v);
		free(st->gs);
		dlbn_quantiles_free(st->w.waits);
	}
	for (size_t i = 0; i < m->loaders.n; i++) {
		free(m->loaders.v[i].steps.v);
		free(m->loaders.v[i].steps.gs);
	}
	dlbn_loaders_free(m);
	free(m->sched_threads);
	free(m->census);
	dlbn_range_names_free(m->range_names);
	model_pipe_table_free(m->pipes);
	dlbn_wait_stacks_free(&m->stacks);
	dlbn_lib_ops_free(&m->lib_ops);
	memset(m, 0, sizeof(*m));
}
