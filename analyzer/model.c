/*
 * model.c - reconstruct the training process tree, roles, steps, waits and
 * workers from a trace (see model.h; DESIGN section 5 steps 1-3 and
 * shared/notes/dataloader-ipc.md for the DataLoader behaviour relied on).
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

#include "model.h"
#include "quantiles.h"

/* ---- growable arrays -------------------------------------------------- */

static int grow(void **v, size_t *cap, size_t need, size_t elem)
{
	if (need <= *cap)
		return 0;
	size_t ncap = *cap ? *cap * 2 : 16;
	while (ncap < need)
		ncap *= 2;
	void *nv = realloc(*v, ncap * elem);
	if (!nv)
		return -1;
	*v = nv;
	*cap = ncap;
	return 0;
}

#define PUSH(arr, n, cap, val)                                                                     \
	(grow((void **)&(arr), &(cap), (n) + 1, sizeof(*(arr))) ? -1 : ((arr)[(n)++] = (val), 0))

/* ---- pipe table ------------------------------------------------------- */

struct who {
	uint32_t thread;
	uint32_t count;
};

struct pipe_ent {
	int64_t ino; /* 0: empty slot */
	struct who *readers, *writers;
	size_t nreaders, capreaders, nwriters, capwriters;
	int polled_by_reader; /* some reader thread POLLed it (queue.get) */
	int is_result, is_index, seen_by_ipc;
};

struct pipe_table {
	struct pipe_ent *slots;
	size_t cap, n;
};

static inline size_t ino_hash(int64_t ino, size_t cap)
{
	uint64_t h = (uint64_t)ino * 0x9e3779b97f4a7c15ull;
	return (size_t)(h >> 17) & (cap - 1);
}

static struct pipe_ent *pipe_find(const struct pipe_table *t, int64_t ino)
{
	if (!t->cap || ino == 0)
		return NULL;
	for (size_t i = ino_hash(ino, t->cap);; i = (i + 1) & (t->cap - 1)) {
		if (t->slots[i].ino == ino)
			return &t->slots[i];
		if (t->slots[i].ino == 0)
			return NULL;
	}
}

static struct pipe_ent *pipe_get(struct pipe_table *t, int64_t ino)
{
	struct pipe_ent *e = pipe_find(t, ino);
	if (e || ino == 0)
		return e;
	if ((t->n + 1) * 2 > t->cap) {
		size_t ncap = t->cap ? t->cap * 2 : 64;
		struct pipe_ent *ns = calloc(ncap, sizeof(*ns));
		if (!ns)
			return NULL;
		for (size_t i = 0; i < t->cap; i++) {
			if (!t->slots[i].ino)
				continue;
			size_t j = ino_hash(t->slots[i].ino, ncap);
			while (ns[j].ino)
				j = (j + 1) & (ncap - 1);
			ns[j] = t->slots[i];
		}
		free(t->slots);
		t->slots = ns;
		t->cap = ncap;
	}
	size_t i = ino_hash(ino, t->cap);
	while (t->slots[i].ino)
		i = (i + 1) & (t->cap - 1);
	t->slots[i].ino = ino;
	t->n++;
	return &t->slots[i];
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

static void pipe_table_free(struct pipe_table *t)
{
	if (!t)
		return;
	for (size_t i = 0; i < t->cap; i++) {
		free(t->slots[i].readers);
		free(t->slots[i].writers);
	}
	free(t->slots);
	free(t);
}

/* ---- helpers ---------------------------------------------------------- */

static inline int64_t fld(const struct dlbn_record *r, int i)
{
	return r->kind[i] == DLBN_V_INT ? r->f[i] : 0;
}

/* Duration field of a record type, or 0 for instantaneous ones. */
static int64_t rec_dur(const struct dlbn_record *r)
{
	switch (r->type) {
	case DLBN_REC_FORK:
	case DLBN_REC_READ:
	case DLBN_REC_WRITE:
	case DLBN_REC_PREAD:
	case DLBN_REC_RECVMSG:
	case DLBN_REC_SENDMSG:
	case DLBN_REC_POLL:
	case DLBN_REC_CONNECT:
	case DLBN_REC_ACCEPT:
	case DLBN_REC_SEM_WAIT:
	case DLBN_REC_MEMCPY:
	case DLBN_REC_SYNC: {
		int64_t d = fld(r, 0);
		return d <= 0 ? 0 : d > DLBN_DUR_LIMIT ? DLBN_DUR_LIMIT : d;
	}
	default:
		return 0;
	}
}

/* A count or size from the file, limited so that sums of them cannot overflow. */
static inline int64_t bounded(int64_t v, int64_t max)
{
	return v < 0 ? 0 : v > max ? max : v;
}

static inline int64_t min64(int64_t a, int64_t b)
{
	return a < b ? a : b;
}

static inline int64_t max64(int64_t a, int64_t b)
{
	return a > b ? a : b;
}

/* A small non-negative config number; -1 when not a number. */
static int config_int(const char *v)
{
	char *end;
	if (*v < '0' || *v > '9')
		return -1;
	long n = strtol(v, &end, 10);
	return n > 1000000 ? 1000000 : (int)n;
}

void dlbn_model_default_opts(struct dlbn_model_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->handoff_gap_ns = 2000000;
	o->force_view = DLBN_VIEW_NONE;
	o->warmup_steps = -1;
}

void dlbn_config_parse(struct dlbn_config *c, const char *text, size_t len)
{
	memset(c, 0, sizeof(*c));
	c->present = 1;
	c->num_workers = c->prefetch_factor = c->batch_size = -1;
	c->pin_memory = c->persistent_workers = -1;
	if (len >= sizeof(c->text))
		len = sizeof(c->text) - 1;
	memcpy(c->text, text, len);
	c->text[len] = 0;
	char *save = NULL;
	char buf[sizeof(c->text)];
	memcpy(buf, c->text, len + 1);
	for (char *tok = strtok_r(buf, ";", &save); tok && c->n < DLBN_CONFIG_MAX;
	     tok = strtok_r(NULL, ";", &save)) {
		char *eq = strchr(tok, '=');
		if (!eq)
			continue;
		*eq = 0;
		snprintf(c->key[c->n], sizeof(c->key[0]), "%s", tok);
		snprintf(c->val[c->n], sizeof(c->val[0]), "%s", eq + 1);
		const char *k = c->key[c->n], *v = c->val[c->n];
		int truth = !strcmp(v, "True") || !strcmp(v, "true") || !strcmp(v, "1");
		if (!strcmp(k, "num_workers"))
			c->num_workers = config_int(v);
		else if (!strcmp(k, "prefetch_factor"))
			c->prefetch_factor = config_int(v);
		else if (!strcmp(k, "batch_size"))
			c->batch_size = config_int(v);
		else if (!strcmp(k, "pin_memory"))
			c->pin_memory = truth;
		else if (!strcmp(k, "persistent_workers"))
			c->persistent_workers = truth;
		else if (!strcmp(k, "start_method"))
			snprintf(c->start_method, sizeof(c->start_method), "%s", v);
		else if (!strcmp(k, "dataset_kind"))
			snprintf(c->dataset_kind, sizeof(c->dataset_kind), "%s", v);
		c->n++;
	}
}

/* ---- setup from the stream list --------------------------------------- */

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
			p->rank = p->world_size = -1;
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
	if (!m->range_names || dlbn_wait_stacks_init(&m->stacks, ns) != 0)
		return -1;
	m->t0 = INT64_MAX;
	m->t_end = INT64_MIN;
	return 0;
}

/* ---- pass 1: structure and pipe identity ------------------------------ */

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

static int pass1_record(struct dlbn_model *m, const struct dlbn_record *r)
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
		p->has_process_rec = 1;
		p->pid = (int)fld(r, 0);
		p->ppid = (int)fld(r, 1);
		p->parent_proc_id = r->kind[2] == DLBN_V_INT ? r->f[2] : -1;
		p->start = (int)fld(r, 3);
		p->rank = r->kind[4] == DLBN_V_INT && r->f[4] >= 0 && r->f[4] < INT32_MAX
				  ? (int)r->f[4]
				  : -1;
		p->world_size = r->kind[6] == DLBN_V_INT && r->f[6] > 0 && r->f[6] < INT32_MAX
					? (int)r->f[6]
					: -1;
		copy_str(p->argv0, sizeof(p->argv0), r, 9);
		copy_str(p->host, sizeof(p->host), r, 11);
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
		if (fld(r, 2) == DLBN_FD_PIPE && fld(r, 4) > 0) {
			struct pipe_ent *e = pipe_get(m->pipes, fld(r, 3));
			if (!e)
				break;
			if (r->type == DLBN_REC_READ)
				who_add(&e->readers, &e->nreaders, &e->capreaders, ti);
			else
				who_add(&e->writers, &e->nwriters, &e->capwriters, ti);
		}
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
	for (size_t s = 0; s < m->pipes->cap; s++) {
		const struct pipe_ent *e = &m->pipes->slots[s];
		if (!e->ino)
			continue;
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
	for (size_t s = 0; s < m->pipes->cap; s++) {
		const struct pipe_ent *e = &m->pipes->slots[s];
		for (size_t w = 0; e->ino && w < e->nwriters; w++) {
			size_t wp = m->threads[e->writers[w].thread].proc_index;
			if (writes_pipe_read_by(m, e, wp, tp))
				cand[wp] = 1;
		}
	}
	for (size_t s = 0; s < m->pipes->cap; s++) {
		struct pipe_ent *e = &m->pipes->slots[s];
		if (!e->ino || !e->polled_by_reader ||
		    !pipe_has_proc(m, e->writers, e->nwriters, tp))
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
	for (size_t s = 0; s < m->pipes->cap; s++) {
		struct pipe_ent *e = &m->pipes->slots[s];
		for (size_t w = 0; e->ino && w < e->nwriters; w++) {
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

static void decide_roles(struct dlbn_model *m)
{
	/* Training process: FETCH marks first. */
	uint64_t most = 0;
	for (size_t ti = 0; ti < m->nthreads; ti++) {
		if (m->threads[ti].fetch_marks > most) {
			most = m->threads[ti].fetch_marks;
			m->mark_thread = (ssize_t)ti;
			m->training = m->threads[ti].proc_index;
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
		for (size_t s = 0; s < m->pipes->cap; s++) {
			const struct pipe_ent *e = &m->pipes->slots[s];
			if (!e->ino || !e->is_result)
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

/* ---- pass 2: steps, waits, workers ------------------------------------ */

enum ipc_state { IPC_IDLE, IPC_WAITING, IPC_RECEIVING, IPC_HANDOFF };

struct ipc_fsm {
	int state;
	int64_t begin, hdr_t, last_end, bytes;
	int32_t nfds;
	int new_epoch; /* the next step reads a result pipe never read before */
};

/* The counters a main-thread fetch mark carries after its 3 fields:
 * run_ns, runq_ns, sys_ns, minflt, free_ns, free_cpu_ns (MARK in
 * dlbn_trace.h). */
#define LOOP_COUNTERS 6
enum { LC_RUN, LC_RUNQ, LC_SYS, LC_MINFLT, LC_FREE, LC_FREE_CPU };

static int loop_counters(const struct dlbn_record *r, int64_t *c)
{
	if (r->nfields < 3 + LOOP_COUNTERS)
		return 0;
	for (int i = 0; i < LOOP_COUNTERS; i++) {
		c[i] = r->kind[3 + i] == DLBN_V_INT ? r->f[3 + i] : -1;
		if (c[i] < 0 && i != LC_SYS)
			return 0;
	}
	return 1;
}

struct pending_wait {
	uint64_t sem;
	int64_t begin, end;
};

#define PENDING_MAX 64

/* Open NVTX ranges of the followed thread: push/pop nest per domain,
 * start/end pair by range id (and may end on another thread). */
#define NVTX_OPEN_MAX 64
enum { NVTX_OPEN_OTHER, NVTX_OPEN_DATA, NVTX_OPEN_DATA_INNER, NVTX_OPEN_STEP };
struct nvtx_open {
	int64_t key; /* domain (push) or range id (start) */
	int64_t begin;
	int what; /* NVTX_OPEN_* */
};
struct nvtx_state {
	struct nvtx_open pushed[NVTX_OPEN_MAX], started[NVTX_OPEN_MAX];
	size_t npushed, nstarted;
	int data_open; /* data ranges open (the outermost one makes the step) */
};

struct pass2 {
	struct dlbn_model *m;
	const struct dlbn_model_opts *o;
	struct ipc_fsm fsm;
	int64_t first_result_read; /* -1 until seen */
	struct pending_wait pend[PENDING_MAX];
	size_t npend;
	/* Pin path: a pin-thread step is held back one step, because the
	 * post that ends the main thread's wait for it may come after it
	 * closed; waits ending during the next hand-off go to pin_acc. */
	struct dlbn_step pin_held;
	int has_pin_held;
	int64_t pin_acc;
	/* Earliest begin and latest end of the waits summed into pin_acc /
	 * pin_held (the horizon: a pin-path wait interval ends at its step's
	 * end and is as long as its sum, so it begins no earlier than the
	 * first wait's begin less how far the waits ran past the step). */
	int64_t pin_acc_first, pin_held_first, pin_acc_last, pin_held_last;
	struct nvtx_state nvtx;
	struct dlbn_gpu_pass *gpu; /* NULL: no CUDA records, CPU-only rule */
	int oom;
	/* The loop's counters at the last batch's arrival (a FETCH_END that
	 * carried them; loop_cost.c), the start of the next step's lead. */
	int64_t arrival_t, arrival_counters[LOOP_COUNTERS];
	int arrival_known;
	/* Shared memory the loop's thread mapped (MMAP records), in all and
	 * up to the last arrival: the pages the batch's first touch faults in. */
	int64_t shm_mapped, shm_at_arrival, arrival_shm;
	/* Time the loop has spent in any loader's fetches and iter() start-up
	 * so far: a loader's iter() time up to its first fetch excludes what
	 * other loaders' fetches took meanwhile (zip() starts both iterators,
	 * then waits for one while the other's workers start too). */
	int64_t waited_ns;
};

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
	d.wall_ns = r->t_ns - ps->arrival_t;
	d.free_ns = free_wall;
	d.free_cpu_ns = free_cpu;
	d.runq_ns = runq > free_off_cpu ? runq - free_off_cpu : 0;
	d.cpu_ns = run > free_cpu ? run - free_cpu : 0;
	d.sys_ns = c[LC_SYS] >= 0 && a[LC_SYS] >= 0 && c[LC_SYS] >= a[LC_SYS] ? c[LC_SYS] - a[LC_SYS]
									      : 0;
	d.minflt = c[LC_MINFLT] - a[LC_MINFLT];
	d.shm_bytes = ps->arrival_shm;
	d.known = 1;
	return d;
}

/* Another loader's steps belong to the Python view (k = 0) too: the GPU
 * split sees all fetches of the loop in time order. */
static int view_index(const struct dlbn_model *m, const struct dlbn_steps *st)
{
	return st == &m->ipc_steps ? 1 : st == &m->nvtx_steps ? 2 : 0;
}

static struct dlbn_steps *view_steps(struct dlbn_model *m, int k)
{
	return k == 0 ? &m->py_steps : k == 1 ? &m->ipc_steps : &m->nvtx_steps;
}

/* The steps a step of view k belongs to: its loader's when aside. */
static struct dlbn_steps *steps_of(struct dlbn_model *m, int k, const struct dlbn_step *s)
{
	if (k == 0 && s->aside && s->loader >= 0)
		return &m->loaders.v[s->loader].steps;
	return view_steps(m, k);
}

/* A step's GPU split is final (gpu.c calls back, in step order). */
static void step_split(void *ctx, int k, struct dlbn_step *s, const struct dlbn_gpu_step *gs)
{
	struct pass2 *ps = ctx;
	if (dlbn_window_final(ps->m, steps_of(ps->m, k, s), s, gs) != 0)
		ps->oom = 1;
}

/*
 * A view's step ended.  The GPU seam (DESIGN section 5 step 3): its wait
 * is split into the part during which the GPU still had queued work
 * (gpu_busy, not a stall: prefetch hid it) and the part it sat idle
 * (gpu_idle, the stall) by gpu.c, once the probes around it are in.
 * Without CUDA records the whole wait is stall, final at once.
 */
static void feed(struct pass2 *ps, struct dlbn_steps *st, struct dlbn_step *s)
{
	struct dlbn_model *m = ps->m;
	s->gpu_busy_ns = 0;
	s->gpu_idle_ns = s->wait_ns;
	s->gpu_refill_ns = 0;
	s->gpu_lead_idle_ns = -1;
	s->gpu_lead_refill_ns = 0;
	dlbn_window_feed(m, st, s);
	if (st == &m->ipc_steps && s->bytes > 0 && m->nipc_head < DLBN_HEAD_STEPS)
		m->ipc_head_bytes[m->nipc_head++] = s->bytes;
	if (ps->gpu)
		dlbn_gpu_pass_step(ps->gpu, s->aside ? 0 : view_index(m, st), s);
	else if (dlbn_window_final(m, st, s, NULL) != 0)
		ps->oom = 1;
}

/* Epoch bookkeeping shared by both views. */
static void number_epoch(struct dlbn_steps *st, struct dlbn_step *s, int new_epoch)
{
	if (st->epochs == 0 || new_epoch) {
		st->epochs++;
		s->epoch_start = 1;
	}
	s->epoch = st->epochs - 1;
}

static void ipc_close(struct pass2 *ps)
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
		number_epoch(&m->ipc_steps, &s, f->new_epoch);
		f->new_epoch = 0;
		if (m->path != DLBN_PATH_PIN) {
			feed(ps, &m->ipc_steps, &s);
		} else {
			if (ps->has_pin_held)
				feed(ps, &m->ipc_steps, &ps->pin_held);
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
static void ipc_record(struct pass2 *ps, const struct dlbn_record *r)
{
	struct ipc_fsm *f = &ps->fsm;
	struct pipe_ent *e = NULL;
	int64_t t = r->t_ns, end = t + rec_dur(r);

	if (r->type == DLBN_REC_POLL && poll_has_result(ps->m, r, &e)) {
		if (f->state == IPC_HANDOFF || f->state == IPC_RECEIVING)
			ipc_close(ps);
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
			ipc_close(ps);
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
		ipc_close(ps);
		return;
	}
	if (is_handoff_op(r)) {
		if (end > f->last_end)
			f->last_end = end;
		if (r->type == DLBN_REC_RECVMSG)
			f->nfds += (int32_t)bounded(fld(r, 5), 1024);
	}
}

/*
 * A fetch mark of the loop's thread.  Each loader keeps its own fetch
 * state (zipped loaders interleave their fetches).  Loader time between
 * epochs that no fetch returns a batch for - the fetch that ended the
 * epoch (it shuts non-persistent workers down) and iter() up to the next
 * fetch (it starts them) - is charged to the loader's next step: Replay has
 * neither.
 */
static void python_record(struct pass2 *ps, const struct dlbn_record *r)
{
	struct dlbn_model *m = ps->m;
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
		break;
	case DLBN_MARK_FETCH_BEGIN:
		l->py_open = r->t_ns;
		l->py_lead = lead_of(ps, r);
		ps->arrival_known = 0;
		/* The training loader's first iter() is warm-up; another
		 * loader's may fall inside the training window, where the
		 * reference Replay (every loader cached before the loop) has
		 * no worker start-up. */
		if (l->py_iter_begin >= 0 && (st->n > 0 || aside)) {
			int64_t start_up = r->t_ns - l->py_iter_begin -
					   (ps->waited_ns - l->py_iter_waited);
			if (start_up > 0) {
				l->py_carry_ns += start_up;
				ps->waited_ns += start_up;
			}
		}
		l->py_iter_begin = -1;
		break;
	case DLBN_MARK_FETCH_END:
		if (l->py_open >= 0)
			ps->waited_ns += r->t_ns - l->py_open;
		if (l->py_open >= 0) {
			struct dlbn_step s = {.begin = l->py_open,
					      .end = r->t_ns,
					      .wait_ns = r->t_ns - l->py_open + l->py_carry_ns,
					      .aside = (uint8_t)aside,
					      .loader = (int16_t)li,
					      .lead = l->py_lead};
			number_epoch(st, &s, l->py_new_epoch);
			l->py_new_epoch = 0;
			l->py_carry_ns = 0;
			feed(ps, st, &s);
		}
		l->py_open = -1;
		ps->arrival_t = r->t_ns;
		ps->arrival_known = loop_counters(r, ps->arrival_counters);
		ps->arrival_shm = ps->shm_mapped - ps->shm_at_arrival;
		ps->shm_at_arrival = ps->shm_mapped;
		break;
	case DLBN_MARK_FETCH_STOP:
		/* iter() up to the next fetch is charged whole (py_carry_ns). */
		ps->arrival_known = 0;
		if (l->py_open >= 0) {
			l->py_carry_ns += r->t_ns - l->py_open;
			ps->waited_ns += r->t_ns - l->py_open;
		}
		l->py_open = -1;
		break;
	default:
		break;
	}
}

static void pin_wait_record(struct pass2 *ps, const struct dlbn_record *r)
{
	if (ps->npend == PENDING_MAX) {
		memmove(ps->pend, ps->pend + 1, (PENDING_MAX - 1) * sizeof(ps->pend[0]));
		ps->npend--;
	}
	ps->pend[ps->npend++] =
		(struct pending_wait){(uint64_t)fld(r, 1), r->t_ns, r->t_ns + rec_dur(r)};
}

/* A post by the pin thread wakes the main-thread wait on the same semaphore. */
static void pin_post_record(struct pass2 *ps, const struct dlbn_record *r)
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

static void worker_record(struct pass2 *ps, struct dlbn_proc *p, const struct dlbn_record *r)
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
		number_epoch(&m->nvtx_steps, &s, 0);
		feed(ps, &m->nvtx_steps, &s);
	}
}

static void nvtx_record(struct pass2 *ps, const struct dlbn_record *r, int on_nvtx_thread)
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
		python_record(ps, r);
	if (ti == m->mark_thread && r->type == DLBN_REC_MMAP && fld(r, 3) > 0)
		ps->shm_mapped += fld(r, 3);
	if (m->nvtx_thread >= 0 && r->type >= DLBN_REC_RANGE_PUSH && r->type <= DLBN_REC_RANGE_END)
		nvtx_record(ps, r, ti == m->nvtx_thread);
	if (m->path == DLBN_PATH_DIRECT && ti == m->main_thread)
		ipc_record(ps, r);
	if (m->path == DLBN_PATH_PIN) {
		if (ti == m->pin_thread)
			ipc_record(ps, r);
		if (ti == m->main_thread && r->type == DLBN_REC_SEM_WAIT)
			pin_wait_record(ps, r);
		if (ti == m->pin_thread && r->type == DLBN_REC_SEM_POST)
			pin_post_record(ps, r);
	}
}

/*
 * The view to follow (unless overridden): Python marks (exact fetches),
 * else NVTX data ranges (declared by the program: exact if the names are
 * honest), else the IPC hand-offs (inferred from system calls).
 */
static void choose_view(struct dlbn_model *m, const struct dlbn_model_opts *o)
{
	int py = m->mark_thread >= 0, ipc = m->path != DLBN_PATH_NONE, nvtx = m->nvtx_thread >= 0;
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
	for (size_t s = 0; s < m->pipes->cap; s++) {
		const struct pipe_ent *e = &m->pipes->slots[s];
		if (!e->ino || !e->is_result)
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

/* A schedstat sample of a training or worker thread (see struct dlbn_thread). */
static void sched_record(struct pass2 *ps, const struct dlbn_record *r)
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

static int run_pass2(struct dlbn_model *m, struct dlbn_reader *r, const struct dlbn_model_opts *o)
{
	struct pass2 ps = {.m = m,
			   .o = o,
			   .first_result_read = -1,
			   .pin_acc_first = INT64_MAX,
			   .pin_held_first = INT64_MAX,
			   .pin_acc_last = INT64_MIN,
			   .pin_held_last = INT64_MIN};
	const struct dlbn_record *rec;

	if (m->has_cuda && m->training >= 0 &&
	    !(ps.gpu = dlbn_gpu_pass_new(m, &m->gpu, NULL, step_split, &ps)))
		return -1;
	dlbn_reader_rewind(r);
	while ((rec = dlbn_reader_next(r))) {
		struct dlbn_thread *t = &m->threads[rec->stream->index];
		struct dlbn_proc *p = &m->procs[t->proc_index];
		if (rec->type == DLBN_REC_SCHED && p->role != DLBN_ROLE_OTHER)
			sched_record(&ps, rec);
		if (p->role == DLBN_ROLE_WORKER) {
			worker_record(&ps, p, rec);
		} else if (p->role == DLBN_ROLE_TRAINING) {
			training_record(&ps, rec);
			int in_window = m->steps && m->steps->w.window > 0;
			if (dlbn_wait_stacks_record(&m->stacks, rec, rec_dur(rec), in_window) != 0)
				ps.oom = 1;
			if (ps.gpu) {
				dlbn_gpu_pass_record(ps.gpu, rec);
				dlbn_gpu_pass_horizon(ps.gpu, horizon(&ps, rec->t_ns));
			}
		}
	}
	ipc_close(&ps);
	if (ps.has_pin_held)
		feed(&ps, &m->ipc_steps, &ps.pin_held);
	if (ps.gpu) {
		dlbn_gpu_pass_end(ps.gpu);
		if (dlbn_gpu_pass_failed(ps.gpu))
			ps.oom = 1;
		dlbn_gpu_pass_free(ps.gpu);
	}
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
	dlbn_reader_rewind(r);
	while ((rec = dlbn_reader_next(r))) {
		if (pass1_record(m, rec) != 0)
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
	decide_roles(m);
	if (oom || dlbn_loaders_decide(m) != 0)
		return -1;
	if (m->loaders.train >= 0 && m->loaders.v[m->loaders.train].has_config)
		m->config = m->loaders.v[m->loaders.train].config;
	infer_num_workers(m);
	choose_view(m, o);
	m->warmup_steps = o->warmup_steps;
	struct dlbn_steps *chosen = view_steps(m, view_index(m, m->steps));
	if (!(chosen->w.waits = dlbn_quantiles_new()) || run_pass2(m, r, o) != 0)
		return -1;
	if (!m->prefetch_known)
		dlbn_prefetch_depth(m);
	dlbn_wait_stacks_finish(&m->stacks);
	/* The chosen view's GPU window is the verdict's: steps ending in
	 * (ws, we] (the IPC view when there is none, as the verdict's). */
	dlbn_gpu_finish(&m->gpu, m->py_steps.n ? 0 : 1, view_index(m, m->steps), m->steps->w.ws,
			m->steps->w.we);
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
		struct dlbn_steps *st = view_steps(m, k);
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
	dlbn_range_names_free(m->range_names);
	pipe_table_free(m->pipes);
	dlbn_wait_stacks_free(&m->stacks);
	memset(m, 0, sizeof(*m));
}
