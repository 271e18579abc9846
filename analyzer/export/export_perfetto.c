/*
 * export_perfetto.c - `--perfetto FILE`: the trace as Chrome trace-event
 * JSON, the format ui.perfetto.dev and chrome://tracing open
 * (docs/DESIGN.md, "Analyzer layers"), so a person can look at the timeline.
 *
 * Tracks:
 *   - one process track per traced process, named "<role> <pid> <argv0>",
 *     sorted training first, then workers, then the rest; one thread track
 *     per thread (main, pin-memory, worker, feeder, thread <tid>);
 *   - every call with a duration as a complete event ("X": reads, polls,
 *     semaphore waits, syncs, copies, forks ...), instantaneous records
 *     (launches, exits, marks, opens ...) as thread-scoped instants;
 *   - in the training process, three tracks of the analysis: "loader
 *     fetches" (one slice per step's fetch, with wait / GPU busy / GPU idle
 *     as args, and nested "GPU busy"/"GPU idle (stall)" slices when CUDA
 *     was recorded), "training steps" (end of one step to the end of the
 *     next) and "analysis" (warm-up and the steady-state window, with the
 *     verdict);
 *   - in each worker, a "batches" track of its batch segments, and more
 *     lanes "batches (lane N)" when batches overlap: a worker takes its
 *     next index before its feeder thread has written the previous result,
 *     so batch N often ends after N+1 began, and Perfetto drops a slice
 *     that overlaps another on its track without nesting.  Each batch goes
 *     on the first lane free at its start (greedy interval colouring: as
 *     many lanes as batches overlap at once, at most the pairing's queue);
 *   - NVTX push/pop ranges as slices of their thread, start/end ranges as
 *     async slices.
 *
 * Streaming: the model's steps first, then one pass over the reader,
 * each event written as it comes (Perfetto sorts by time itself), so
 * memory does not grow with the trace.  Timestamps are microseconds since
 * the model's t0 with three decimals (exact ns).  The file is always
 * complete JSON: it is written to a temporary and renamed at the end
 * (an existing pipe or device is written in place, see export.h).
 *
 * Track ids: JSON pids are the real pids (a pid reused by a later process
 * instance, e.g. after exec, gets SYNTH_BASE - 1 - proc index so the two
 * do not merge); tids are the real tids; the analysis tracks use
 * SYNTH_BASE + 4 * proc index + k, above any real pid or tid (pid_max <=
 * 2^22) and unique over the file (Perfetto keys threads by tid); batch
 * lane L >= 1 of process i is SYNTH_BASE + 4 * nprocs + (L - 1) * nprocs + i.
 */
#include <stdlib.h>
#include <string.h>

#include "analysis/damage.h"
#include "export/export.h"
#include "model/pairs.h"
#include "trace/recnames.h"

#define SYNTH_BASE 0x40000000
/* Synthetic tracks: k of synth_tid().  Training process: fetches, steps,
 * analysis; a worker: its batches (a worker is never the training one). */
enum { TRACK_FETCH = 1, TRACK_STEPS = 2, TRACK_ANALYSIS = 3, TRACK_BATCHES = 1 };

/* A worker's batch lanes: when each lane's last slice ends. */
struct lanes {
	int64_t *end;
	size_t n, cap;
};

struct pf {
	FILE *out;
	const struct dlbn_export_input *in;
	const struct dlbn_model *m;
	struct dlbn_pairs *pairs;
	int *jpid;	     /* per process: JSON pid */
	struct lanes *lanes; /* per process */
	struct dlbn_buf b;
	uint64_t events;
	int first;
};

static int64_t rel(const struct pf *p, int64_t t)
{
	return t - p->m->t0;
}

static int synth_tid(size_t proc_index, int k)
{
	return SYNTH_BASE + (int)(proc_index * 4) + k;
}

static int lane_tid(const struct pf *p, size_t proc_index, size_t lane)
{
	if (!lane)
		return synth_tid(proc_index, TRACK_BATCHES);
	size_t n = p->m->nprocs;
	return SYNTH_BASE + (int)(4 * n + (lane - 1) * n + proc_index);
}

/* Start an event object: {"ph":..,"pid":..,"tid":..,"ts":.. */
static void ev_begin(struct pf *p, const char *ph, int pid, int tid, int64_t t)
{
	struct dlbn_buf *b = &p->b;
	b->n = 0;
	dlbn_buf_puts(b, p->first ? "\n{\"ph\":\"" : ",\n{\"ph\":\"");
	p->first = 0;
	dlbn_buf_puts(b, ph);
	dlbn_buf_puts(b, "\",\"pid\":");
	dlbn_buf_int(b, pid);
	dlbn_buf_puts(b, ",\"tid\":");
	dlbn_buf_int(b, tid);
	dlbn_buf_puts(b, ",\"ts\":");
	dlbn_buf_us(b, rel(p, t));
}

static void ev_name(struct pf *p, const char *cat, const char *name)
{
	dlbn_buf_puts(&p->b, ",\"cat\":\"");
	dlbn_buf_puts(&p->b, cat); /* categories are fixed identifiers */
	dlbn_buf_puts(&p->b, "\",\"name\":");
	dlbn_buf_json_str(&p->b, name, strlen(name));
}

static void ev_dur(struct pf *p, int64_t dur)
{
	dlbn_buf_puts(&p->b, ",\"dur\":");
	dlbn_buf_us(&p->b, dur < 0 ? 0 : dur);
}

static void arg_int(struct pf *p, const char *key, int64_t v, int *first)
{
	dlbn_buf_puts(&p->b, *first ? ",\"args\":{\"" : ",\"");
	*first = 0;
	dlbn_buf_puts(&p->b, key);
	dlbn_buf_puts(&p->b, "\":");
	dlbn_buf_int(&p->b, v);
}

/* A duration in microseconds (exact: three decimals of ns). */
static void arg_us(struct pf *p, const char *key, int64_t ns, int *first)
{
	dlbn_buf_puts(&p->b, *first ? ",\"args\":{\"" : ",\"");
	*first = 0;
	dlbn_buf_puts(&p->b, key);
	dlbn_buf_puts(&p->b, "\":");
	dlbn_buf_us(&p->b, ns);
}

static void arg_str(struct pf *p, const char *key, const char *v, int *first)
{
	dlbn_buf_puts(&p->b, *first ? ",\"args\":{\"" : ",\"");
	*first = 0;
	dlbn_buf_puts(&p->b, key);
	dlbn_buf_puts(&p->b, "\":");
	dlbn_buf_json_str(&p->b, v, strlen(v));
}

/* Close args (if any) and the event; write it out. */
static int ev_end(struct pf *p, int args_first)
{
	dlbn_buf_puts(&p->b, args_first ? "}" : "}}");
	if (p->b.oom)
		return -1;
	p->events++;
	return fwrite(p->b.p, 1, p->b.n, p->out) == p->b.n ? 0 : -1;
}

/* ---- metadata ----------------------------------------------------------- */

static int meta_event(struct pf *p, const char *what, int pid, int tid, const char *name,
		      int64_t sort)
{
	int first = 1;
	ev_begin(p, "M", pid, tid, p->m->t0);
	dlbn_buf_puts(&p->b, ",\"name\":\"");
	dlbn_buf_puts(&p->b, what);
	dlbn_buf_puts(&p->b, "\"");
	if (name)
		arg_str(p, "name", name, &first);
	else
		arg_int(p, "sort_index", sort, &first);
	return ev_end(p, first);
}

static const char *thread_label(const struct dlbn_model *m, size_t ti, char *buf, size_t len)
{
	const char *role = dlbn_thread_role(m, ti);
	int tid = m->threads[ti].tid;
	if (!strcmp(role, "main"))
		snprintf(buf, len, "main (training loop) %d", tid);
	else if (!strcmp(role, "pin"))
		snprintf(buf, len, "pin-memory %d", tid);
	else if (!strcmp(role, "worker"))
		snprintf(buf, len, "worker main %d", tid);
	else if (!strcmp(role, "feeder"))
		snprintf(buf, len, "feeder %d", tid);
	else
		snprintf(buf, len, "thread %d", tid);
	return buf;
}

static int write_metadata(struct pf *p)
{
	const struct dlbn_model *m = p->m;
	char name[160];
	int rc = 0, worker_no = 0;
	for (size_t i = 0; !rc && i < m->nprocs; i++) {
		const struct dlbn_proc *pr = &m->procs[i];
		int sort = pr->role == DLBN_ROLE_TRAINING ? 0
			   : pr->role == DLBN_ROLE_WORKER ? 1 + worker_no++
							  : 100000 + (int)i;
		snprintf(name, sizeof(name), "%s %d %s", dlbn_role_name(pr->role), pr->pid,
			 pr->argv0);
		rc = meta_event(p, "process_name", p->jpid[i], 0, name, 0) ||
		     meta_event(p, "process_sort_index", p->jpid[i], 0, NULL, sort);
		if (!rc && pr->role == DLBN_ROLE_TRAINING && m->steps && m->steps->n) {
			snprintf(name, sizeof(name), "loader fetches (%s view)",
				 dlbn_view_name(m->view));
			rc = meta_event(p, "thread_name", p->jpid[i], synth_tid(i, TRACK_FETCH),
					name, 0) ||
			     meta_event(p, "thread_name", p->jpid[i], synth_tid(i, TRACK_STEPS),
					"training steps", 0) ||
			     meta_event(p, "thread_name", p->jpid[i], synth_tid(i, TRACK_ANALYSIS),
					"analysis", 0) ||
			     meta_event(p, "thread_sort_index", p->jpid[i],
					synth_tid(i, TRACK_ANALYSIS), NULL, -3) ||
			     meta_event(p, "thread_sort_index", p->jpid[i],
					synth_tid(i, TRACK_STEPS), NULL, -2) ||
			     meta_event(p, "thread_sort_index", p->jpid[i],
					synth_tid(i, TRACK_FETCH), NULL, -1);
		}
		if (!rc && pr->role == DLBN_ROLE_WORKER)
			rc = meta_event(p, "thread_name", p->jpid[i], synth_tid(i, TRACK_BATCHES),
					"batches", 0);
	}
	for (size_t ti = 0; !rc && ti < m->nthreads; ti++) {
		int pid = p->jpid[m->threads[ti].proc_index];
		int tid = m->threads[ti].tid;
		rc = meta_event(p, "thread_name", pid, tid, thread_label(m, ti, name, sizeof(name)),
				0) ||
		     meta_event(p, "thread_sort_index", pid, tid, NULL,
				(int64_t)m->threads[ti].thread_no);
	}
	return rc;
}

/* ---- the analysis tracks ---------------------------------------------- */

static int slice(struct pf *p, int pid, int tid, int64_t b, int64_t e, const char *cat,
		 const char *name)
{
	ev_begin(p, "X", pid, tid, b);
	ev_name(p, cat, name);
	ev_dur(p, e - b);
	return ev_end(p, 1);
}

/* One step's fetch, with the GPU split as nested slices: the probe rule
 * puts the busy part at the start of the wait. */
static int fetch_slice(struct pf *p, int pid, size_t i, const struct dlbn_step *x, int warm,
		       int in_window, const struct dlbn_gpu_step *gs)
{
	int tid = synth_tid((size_t)p->m->training, TRACK_FETCH), first = 1;
	char name[48];
	snprintf(name, sizeof(name), "fetch %zu", i);
	ev_begin(p, "X", pid, tid, x->begin);
	ev_name(p, "loader", name);
	ev_dur(p, x->end - x->begin);
	arg_int(p, "step", (int64_t)i, &first);
	arg_int(p, "epoch", x->epoch, &first);
	arg_us(p, "wait_us", x->wait_ns, &first);
	arg_us(p, "gpu_busy_us", x->gpu_busy_ns, &first);
	arg_us(p, "gpu_idle_us", x->gpu_idle_ns, &first);
	if (gs) {
		const char *ev = dlbn_evidence_name(gs->evidence);
		arg_str(p, "gpu_evidence", ev ? ev : "none", &first);
	}
	arg_us(p, "receive_us", x->recv_ns, &first);
	arg_int(p, "bytes", x->bytes, &first);
	arg_int(p, "fds", x->nfds, &first);
	arg_str(p, "phase", warm ? "warm-up" : in_window ? "window" : "drain", &first);
	if (ev_end(p, first))
		return -1;
	if (!p->m->has_cuda || x->wait_ns <= 0)
		return 0;
	int64_t b = x->begin, busy_end = b + x->gpu_busy_ns, idle_end = busy_end + x->gpu_idle_ns;
	if (busy_end > x->end)
		busy_end = x->end;
	if (idle_end > x->end)
		idle_end = x->end;
	if (x->gpu_busy_ns > 0 && slice(p, pid, tid, b, busy_end, "loader", "GPU busy (hidden)"))
		return -1;
	if (x->gpu_idle_ns > 0 &&
	    slice(p, pid, tid, busy_end, idle_end, "loader", "GPU idle (stall)"))
		return -1;
	return 0;
}

/* The steps, seen again one by one (dlbn_model_each_step). */
struct step_writer {
	struct pf *p;
	int pid;
	int64_t prev_end, first_begin;
	int failed;
};

static void write_step(void *ctx, size_t i, const struct dlbn_step *x,
		       const struct dlbn_gpu_step *gs)
{
	struct step_writer *sw = ctx;
	struct pf *p = sw->p;
	const struct dlbn_analysis *a = p->in->a;
	int warm = i < a->steps_warmup;
	int in_window = !warm && i < a->steps_warmup + a->steps_window;
	char name[48];
	int first = 1;
	if (sw->failed)
		return;
	if (!p->in->gpu || !p->in->gpu->present)
		gs = NULL;
	if (fetch_slice(p, sw->pid, i, x, warm, in_window, gs)) {
		sw->failed = 1;
		return;
	}
	int64_t from = i ? sw->prev_end : x->begin;
	if (!i)
		sw->first_begin = x->begin;
	sw->prev_end = x->end;
	snprintf(name, sizeof(name), "step %zu", i);
	ev_begin(p, "X", sw->pid, synth_tid((size_t)p->m->training, TRACK_STEPS), from);
	ev_name(p, "steps", name);
	ev_dur(p, x->end - from);
	arg_int(p, "epoch", x->epoch, &first);
	arg_us(p, "wait_us", x->wait_ns, &first);
	if (ev_end(p, first))
		sw->failed = 1;
}

static int write_analysis(struct pf *p)
{
	const struct dlbn_model *m = p->m;
	const struct dlbn_analysis *a = p->in->a;
	const struct dlbn_steps *st = m->steps;
	if (m->training < 0 || !st || !st->n)
		return 0;
	struct step_writer sw = {.p = p, .pid = p->jpid[m->training]};
	if (dlbn_model_each_step(m, p->in->r, write_step, &sw) != 0) {
		p->b.oom = 1;
		return -1;
	}
	if (sw.failed)
		return -1;
	int tid = synth_tid((size_t)m->training, TRACK_ANALYSIS), first = 1;
	if (a->steps_window == 0)
		return 0;
	if (slice(p, sw.pid, tid, sw.first_begin, a->window_begin, "analysis", "warm-up"))
		return -1;
	ev_begin(p, "X", sw.pid, tid, a->window_begin);
	ev_name(p, "analysis", "steady-state window");
	ev_dur(p, a->window_end - a->window_begin);
	arg_str(p, "verdict", dlbn_verdict_name(a->verdict), &first);
	arg_us(p, "stall_us", (int64_t)(a->stall_s * 1e9), &first);
	arg_int(p, "steps", (int64_t)a->steps_window, &first);
	if (a->predicted_speedup > 0)
		arg_int(p, "predicted_speedup_x1000", (int64_t)(a->predicted_speedup * 1000 + 0.5),
			&first);
	return ev_end(p, first);
}

/* ---- records ---------------------------------------------------------- */

static int64_t ifld(const struct dlbn_record *r, int i)
{
	return i >= 0 && i < r->nfields && r->kind[i] == DLBN_V_INT ? r->f[i] : 0;
}

/* Categories to filter by: process structure, storage I/O (files, shm),
 * IPC (pipes, sockets, semaphores, polls), GPU, marks, scheduling. */
static const char *record_category(const struct dlbn_record *r, const struct dlbn_rec_layout *l)
{
	if (r->type >= DLBN_REC_FORK && r->type <= DLBN_REC_EXIT)
		return "process";
	if (r->type >= DLBN_REC_LAUNCH)
		return "gpu";
	if (r->type == DLBN_REC_SCHED)
		return "sched";
	if (r->type == DLBN_REC_CONFIG || r->type == DLBN_REC_MARK)
		return "mark";
	if (r->type == DLBN_REC_PREAD)
		return "io";
	if (l->fd_kind >= 0) {
		int64_t k = ifld(r, l->fd_kind);
		return k == DLBN_FD_FILE || k == DLBN_FD_SHM ? "io" : "ipc";
	}
	return "ipc";
}

/* Category and display name of a record; NULL: not a timeline event. */
static const char *record_cat(const struct dlbn_record *r, char *name, size_t len,
			      struct dlbn_pairs *pairs)
{
	const struct dlbn_rec_layout *l = dlbn_rec_layout(r->type);
	const char *tn = dlbn_record_name(r->type);
	switch (r->type) {
	case DLBN_REC_PROCESS:
	case DLBN_REC_THREAD:
	case DLBN_REC_STRING:
	case DLBN_REC_DOMAIN:
	case DLBN_REC_MODULE:
	case DLBN_REC_STACK:
	case DLBN_REC_RANGE_PUSH: /* ranges come out paired (interval_event) */
	case DLBN_REC_RANGE_POP:
	case DLBN_REC_RANGE_START:
	case DLBN_REC_RANGE_END:
		return NULL;
	case DLBN_REC_LAUNCH:
	case DLBN_REC_SYNC:
		snprintf(name, len, "%s", dlbn_cu_api_name(ifld(r, 1)));
		return "gpu";
	case DLBN_REC_MEMCPY:
		snprintf(name, len, "%s", dlbn_cu_api_name(ifld(r, 1)));
		return "gpu";
	case DLBN_REC_MARK:
		snprintf(name, len, "%s", dlbn_mark_name(ifld(r, 0)));
		return "mark";
	case DLBN_REC_NVTX_MARK:
		snprintf(name, len, "%s", dlbn_pairs_msg(pairs, r, 1));
		return "nvtx";
	default:
		break;
	}
	if (!tn) {
		snprintf(name, len, "record %d", r->type);
		return "other";
	}
	size_t k = 0;
	for (; tn[k] && k + 1 < len; k++)
		name[k] = (char)(tn[k] >= 'A' && tn[k] <= 'Z' ? tn[k] - 'A' + 'a' : tn[k]);
	name[k] = 0;
	if (l->fd_kind >= 0 && l->fd_kind < r->nfields)
		snprintf(name + k, len - k, " %s", dlbn_fd_kind_name(ifld(r, l->fd_kind)));
	return record_category(r, l);
}

static int record_event(struct pf *p, const struct dlbn_record *r)
{
	char name[96];
	const char *cat = record_cat(r, name, sizeof(name), p->pairs);
	if (!cat)
		return 0;
	const struct dlbn_thread *t = &p->m->threads[r->stream->index];
	const struct dlbn_rec_layout *l = dlbn_rec_layout(r->type);
	int pid = p->jpid[t->proc_index];
	ev_begin(p, l->dur >= 0 ? "X" : "i", pid, t->tid, r->t_ns);
	ev_name(p, cat, name);
	if (l->dur >= 0)
		ev_dur(p, dlbn_rec_dur(r));
	else
		dlbn_buf_puts(&p->b, ",\"s\":\"t\"");
	/* args: the columns the SQLite export has, then the other fields */
	int first = 1;
	if (l->fd >= 0)
		arg_int(p, "fd", ifld(r, l->fd), &first);
	if (l->ino >= 0)
		arg_int(p, "ino", ifld(r, l->ino), &first);
	if (l->ret >= 0)
		arg_int(p, r->type == DLBN_REC_MEMCPY ? "bytes" : "ret", ifld(r, l->ret), &first);
	if (dlbn_rec_detail_json(&p->b, r, first ? ",\"args\":{" : ","))
		first = 0;
	return ev_end(p, first);
}

/* The lane of process pi for a batch [begin, end] (a new one, named,
 * when none is free); -1 out of memory or a failed write. */
static long batch_lane(struct pf *p, uint32_t pi, int64_t begin, int64_t end)
{
	struct lanes *l = &p->lanes[pi];
	size_t k = 0;
	while (k < l->n && l->end[k] > begin)
		k++;
	if (k == l->n) {
		if (l->n == l->cap) {
			size_t ncap = l->cap ? 2 * l->cap : 4;
			int64_t *ne = realloc(l->end, ncap * sizeof(*ne));
			if (!ne) {
				p->b.oom = 1;
				return -1;
			}
			l->end = ne;
			l->cap = ncap;
		}
		l->n++;
		if (k) { /* lane 0 is named with the other tracks */
			char name[48];
			snprintf(name, sizeof(name), "batches (lane %zu)", k + 1);
			if (meta_event(p, "thread_name", p->jpid[pi], lane_tid(p, pi, k), name,
				       0) ||
			    meta_event(p, "thread_sort_index", p->jpid[pi], lane_tid(p, pi, k),
				       NULL, (int64_t)k))
				return -1;
		}
	}
	l->end[k] = end > begin ? end : begin;
	return (long)k;
}

static int interval_event(void *ctx, const struct dlbn_interval *iv)
{
	struct pf *p = ctx;
	const struct dlbn_model *m = p->m;
	int pid = p->jpid[iv->proc_index], first = 1;
	int64_t end = iv->end >= 0 ? iv->end : m->t_end;
	char name[48];
	if (iv->kind == DLBN_IV_BATCH) {
		long lane = batch_lane(p, iv->proc_index, iv->begin, end);
		if (lane < 0)
			return -1;
		snprintf(name, sizeof(name), "batch %llu", (unsigned long long)iv->id);
		ev_begin(p, "X", pid, lane_tid(p, iv->proc_index, (size_t)lane), iv->begin);
		ev_name(p, "worker", name);
		ev_dur(p, end - iv->begin);
		return ev_end(p, 1);
	}
	const char *nm = iv->name[0] ? iv->name : "(unnamed range)";
	if (iv->kind == DLBN_IV_PUSH) {
		ev_begin(p, "X", pid, m->threads[iv->thread_index].tid, iv->begin);
		ev_name(p, "nvtx", nm);
		ev_dur(p, end - iv->begin);
		if (iv->domain[0])
			arg_str(p, "domain", iv->domain, &first);
		if (iv->end < 0)
			arg_str(p, "open", "still open at the end of the trace", &first);
		return ev_end(p, first);
	}
	/* start/end ranges may cross threads: a process-scoped async slice */
	for (int k = 0; k < 2; k++) {
		const struct dlbn_thread *t =
			&m->threads[k ? iv->end_thread_index : iv->thread_index];
		ev_begin(p, k ? "e" : "b", pid, t->tid, k ? end : iv->begin);
		ev_name(p, "nvtx", nm);
		dlbn_buf_puts(&p->b, ",\"id\":\"");
		dlbn_buf_int(&p->b, (int64_t)iv->id);
		dlbn_buf_puts(&p->b, "\"");
		first = 1;
		if (!k && iv->domain[0])
			arg_str(p, "domain", iv->domain, &first);
		if (ev_end(p, first))
			return -1;
	}
	return 0;
}

static int record_pass(struct pf *p)
{
	const struct dlbn_record *r;
	int rc = 0;
	dlbn_reader_rewind(p->in->r);
	while (!rc && (r = dlbn_reader_next(p->in->r))) {
		if (r->stream->index >= p->m->nthreads)
			continue;
		rc = record_event(p, r);
		if (!rc)
			rc = dlbn_pairs_feed(p->pairs, r, interval_event, p);
	}
	return rc || dlbn_pairs_finish(p->pairs, interval_event, p) ? -1 : 0;
}

/* ---- the file --------------------------------------------------------- */

static void assign_pids(struct pf *p)
{
	const struct dlbn_model *m = p->m;
	for (size_t i = 0; i < m->nprocs; i++) {
		p->jpid[i] = m->procs[i].pid;
		for (size_t k = 0; k < i; k++)
			if (p->jpid[k] == p->jpid[i]) {
				p->jpid[i] = SYNTH_BASE - 1 - (int)i;
				break;
			}
	}
}

static void write_header(struct pf *p)
{
	const struct dlbn_analysis *a = p->in->a;
	struct dlbn_buf *b = &p->b;
	b->n = 0;
	dlbn_buf_puts(b, "{\"displayTimeUnit\":\"ms\",\"otherData\":{\"tool\":\"dlbn-analyze\","
			 "\"version\":");
	const char *v = p->in->version ? p->in->version : "unknown";
	dlbn_buf_json_str(b, v, strlen(v));
	dlbn_buf_puts(b, ",\"trace\":");
	v = p->in->trace_path ? p->in->trace_path : "";
	dlbn_buf_json_str(b, v, strlen(v));
	dlbn_buf_puts(b, ",\"t0_monotonic_ns\":");
	dlbn_buf_int(b, p->m->t0);
	dlbn_buf_puts(b, ",\"verdict\":\"");
	dlbn_buf_puts(b, dlbn_verdict_name(a->verdict));
	dlbn_buf_puts(b, "\",\"view\":\"");
	dlbn_buf_puts(b, dlbn_view_name(a->view));
	dlbn_buf_puts(b, "\",\"predicted_speedup\":");
	if (a->predicted_speedup > 0 && a->predicted_speedup < 1e9) {
		char num[32];
		snprintf(num, sizeof(num), "%.4f", a->predicted_speedup);
		dlbn_buf_puts(b, num);
	} else {
		dlbn_buf_puts(b, "null");
	}
	if (dlbn_reader_damaged(dlbn_reader_stats(p->in->r)))
		dlbn_buf_puts(b, ",\"damaged\":true"); /* see the "damage" events */
	dlbn_buf_puts(b, "},\"traceEvents\":[");
	fwrite(b->p, 1, b->n, p->out);
}

/* What a damaged or cut-short trace lost (damage.h): one global instant
 * event per loss, at its start (the trace's start when unknown). */
static int write_damage(struct pf *p)
{
	static struct dlbn_damage d;
	dlbn_damage_assess(p->m, dlbn_reader_stats(p->in->r), p->in->a, &d);
	for (size_t i = 0; i < d.nitems; i++) {
		const struct dlbn_damage_item *x = &d.items[i];
		char name[64];
		int first = 1;
		snprintf(name, sizeof(name), "trace damage: %s", dlbn_damage_kind_name(x->kind));
		ev_begin(p, "i", x->pid, x->pid,
			 x->t_from != DLBN_LOSS_T_UNKNOWN ? x->t_from : p->m->t0);
		ev_name(p, "damage", name);
		dlbn_buf_puts(&p->b, ",\"s\":\"g\"");
		arg_str(p, "what", x->text, &first);
		arg_str(p, "window", dlbn_touch_text(x->touches), &first);
		if (x->t_to != DLBN_LOSS_T_UNKNOWN && x->kind != DLBN_DAMAGE_PASSIVE)
			arg_us(p, "until_us", rel(p, x->t_to), &first);
		if (ev_end(p, first))
			return -1;
	}
	return 0;
}

static int write_all(struct pf *p)
{
	assign_pids(p);
	write_header(p);
	if (p->b.oom || write_metadata(p) || write_analysis(p) || write_damage(p) || record_pass(p))
		return -1;
	fputs("\n]}\n", p->out);
	return 0;
}

static void free_lanes(struct pf *p)
{
	for (size_t i = 0; p->lanes && i < p->m->nprocs; i++)
		free(p->lanes[i].end);
	free(p->lanes);
	p->lanes = NULL;
}

int dlbn_export_perfetto(const char *path, const struct dlbn_export_input *in,
			 struct dlbn_export_stats *stats, char *err, size_t errlen)
{
	struct dlbn_out_file o;
	struct dlbn_export_stats local;
	struct pf p = {.in = in, .m = in->m, .first = 1};
	double t0 = dlbn_now_s();
	if (!stats)
		stats = &local;
	memset(stats, 0, sizeof(*stats));
	if (dlbn_out_begin(&o, path, in->trace_path, 1, err, errlen))
		return -1;
	p.out = fdopen(o.fd, "w");
	p.jpid = calloc(in->m->nprocs ? in->m->nprocs : 1, sizeof(*p.jpid));
	p.lanes = calloc(in->m->nprocs ? in->m->nprocs : 1, sizeof(*p.lanes));
	p.pairs = dlbn_pairs_new(in->m);
	if (!p.out || !p.jpid || !p.lanes || !p.pairs) {
		snprintf(err, errlen, "out of memory");
		if (p.out) {
			fclose(p.out); /* closes o.fd too */
			o.fd = -1;
		}
		goto fail;
	}
	o.fd = -1; /* the stream owns it now */
	setvbuf(p.out, NULL, _IOFBF, 1 << 20);
	int rc = write_all(&p);
	stats->events = p.events;
	stats->insert_s = dlbn_now_s() - t0;
	int werr = ferror(p.out);
	if (fclose(p.out) != 0 || werr) {
		snprintf(err, errlen, "writing %s failed (disk full?)", path);
		goto fail;
	}
	if (rc) {
		snprintf(err, errlen, "out of memory");
		goto fail;
	}
	free_lanes(&p);
	free(p.jpid);
	dlbn_pairs_free(p.pairs);
	dlbn_buf_free(&p.b);
	if (dlbn_out_commit(&o, err, errlen))
		return -1;
	stats->total_s = dlbn_now_s() - t0;
	return 0;
fail:
	free_lanes(&p);
	free(p.jpid);
	dlbn_pairs_free(p.pairs);
	dlbn_buf_free(&p.b);
	dlbn_out_abort(&o);
	return -1;
}
