/*
 * export_sqlite.c - `--sqlite FILE`: the whole model in one SQLite
 * database (docs/DESIGN.md, "Analyzer layers"; schema in man dlbn-analyze(1)).
 *
 * Tables: meta (key/value: verdict, speedup, window, versions ...),
 * findings (reasons, recommendations, warnings), processes, threads,
 * events (every record), steps (the chosen view), workers, loaders (the
 * training process's DataLoaders), batches (worker batch segments), ranges
 * (NVTX intervals).  Indexes on events by
 * (proc_id, t_ns) and by type; views main_thread_waits, worker_busy,
 * step_summary, window_steps, time_by_type.
 *
 * Speed: one transaction, journal off, prepared statements bound per row,
 * indexes built after the bulk insert.  The database is built in a
 * temporary file and renamed over FILE at the end (export.h), so the
 * journal-less build cannot leave a half-written FILE behind.
 *
 * Times are ns relative to the model's t0; *_abs_ns columns and
 * meta.t0_ns give CLOCK_MONOTONIC.
 */
#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "analysis/damage.h"
#include "export/export.h"
#include "model/pairs.h"
#include "trace/recnames.h"

/* 2: the loaders table and workers.loader. */
#define SCHEMA_VERSION 2

static const char schema_sql[] =
	"CREATE TABLE meta(key TEXT PRIMARY KEY, value);\n"
	"CREATE TABLE findings(kind TEXT, seq INTEGER, text TEXT);\n"
	"CREATE TABLE processes(proc_id INTEGER PRIMARY KEY, pid INTEGER, ppid INTEGER,"
	" parent_proc_id INTEGER, role TEXT, argv0 TEXT, exe TEXT, host TEXT, rank INTEGER,"
	" local_rank INTEGER, world_size INTEGER, job_id TEXT, start TEXT, first_ns INTEGER,"
	" last_ns INTEGER, first_abs_ns INTEGER, exited INTEGER, exit_status INTEGER,"
	" exit_how TEXT, records INTEGER, threads INTEGER);\n"
	"CREATE TABLE threads(proc_id INTEGER, thread_no INTEGER, tid INTEGER, is_main INTEGER,"
	" role TEXT, records INTEGER, PRIMARY KEY(proc_id, thread_no));\n"
	"CREATE TABLE events(id INTEGER PRIMARY KEY, proc_id INTEGER, thread_no INTEGER,"
	" t_ns INTEGER, type TEXT, dur_ns INTEGER, fd INTEGER, fd_kind TEXT, ino INTEGER,"
	" ret INTEGER, detail TEXT);\n"
	"CREATE TABLE steps(step INTEGER PRIMARY KEY, epoch INTEGER, epoch_start INTEGER,"
	" begin_ns INTEGER, end_ns INTEGER, begin_abs_ns INTEGER, fetch_ns INTEGER,"
	" wait_ns INTEGER, gpu_busy_ns INTEGER, gpu_idle_ns INTEGER, gpu_evidence TEXT,"
	" recv_ns INTEGER, bytes INTEGER, nfds INTEGER, warmup INTEGER, in_window INTEGER,"
	" gpu_refill_ns INTEGER);\n"
	"CREATE TABLE workers(proc_id INTEGER PRIMARY KEY, pid INTEGER, batches INTEGER,"
	" busy_fraction REAL, busy_s REAL, mean_batch_ms REAL, file_read_s REAL, exited INTEGER,"
	" ended_s REAL, in_window INTEGER, loader INTEGER);\n"
	"CREATE TABLE loaders(id INTEGER PRIMARY KEY, role TEXT, training INTEGER,"
	" steps INTEGER, window_steps INTEGER, epochs INTEGER, num_workers INTEGER,"
	" worker_processes INTEGER, wait_s REAL, stall_s REAL, in_window_steps INTEGER,"
	" in_window_wait_s REAL, in_window_stall_s REAL, sampler TEXT, loader_class TEXT,"
	" batch_size INTEGER, config TEXT);\n"
	"CREATE TABLE batches(proc_id INTEGER, seq INTEGER, thread_no INTEGER,"
	" end_thread_no INTEGER, begin_ns INTEGER, end_ns INTEGER, dur_ns INTEGER);\n"
	"CREATE TABLE ranges(id INTEGER PRIMARY KEY, kind TEXT, proc_id INTEGER,"
	" thread_no INTEGER, end_thread_no INTEGER, domain TEXT, name TEXT, depth INTEGER,"
	" range_id INTEGER, begin_ns INTEGER, end_ns INTEGER, dur_ns INTEGER);\n";

/* After the bulk insert: indexes are cheaper built once than maintained. */
static const char index_sql[] =
	"CREATE INDEX events_by_proc_time ON events(proc_id, t_ns);\n"
	"CREATE INDEX events_by_type ON events(type);\n"
	"CREATE INDEX batches_by_proc ON batches(proc_id, begin_ns);\n"
	"CREATE INDEX ranges_by_name ON ranges(name);\n"
	"CREATE VIEW main_thread_waits AS SELECT e.id, e.t_ns, e.t_ns + e.dur_ns AS end_ns,"
	" e.type, e.dur_ns, e.fd, e.fd_kind, e.ino, e.ret, e.detail FROM threads t"
	" JOIN events e ON e.proc_id = t.proc_id AND e.thread_no = t.thread_no"
	" WHERE t.role = 'main' AND e.dur_ns > 0"
	" AND e.type IN ('POLL','READ','RECVMSG','SEM_WAIT','SYNC','CONNECT','ACCEPT');\n"
	"CREATE VIEW worker_busy AS SELECT w.proc_id, w.pid, w.batches AS window_batches,"
	" w.busy_fraction, w.mean_batch_ms, w.file_read_s,"
	" (SELECT count(*) FROM batches b WHERE b.proc_id = w.proc_id) AS batches_total,"
	" (SELECT avg(b.dur_ns) / 1e6 FROM batches b WHERE b.proc_id = w.proc_id)"
	" AS mean_batch_ms_total FROM workers w ORDER BY w.busy_fraction DESC;\n"
	"CREATE VIEW step_summary AS SELECT epoch, count(*) AS steps,"
	" sum(in_window) AS window_steps, sum(wait_ns) / 1e9 AS wait_s,"
	" sum(gpu_idle_ns + gpu_refill_ns) / 1e9 AS stall_s, avg(wait_ns) / 1e6 AS mean_wait_ms,"
	" max(wait_ns) / 1e6 AS max_wait_ms, (max(end_ns) - min(begin_ns)) / 1e9 AS span_s"
	" FROM steps GROUP BY epoch ORDER BY epoch;\n"
	"CREATE VIEW window_steps AS SELECT * FROM steps WHERE in_window = 1;\n"
	"CREATE VIEW time_by_type AS SELECT p.role, e.type, count(*) AS n,"
	" sum(e.dur_ns) / 1e9 AS total_s FROM events e JOIN processes p USING (proc_id)"
	" GROUP BY p.role, e.type ORDER BY total_s DESC;\n";

struct sq {
	sqlite3 *db;
	const struct dlbn_export_input *in;
	const struct dlbn_model *m;
	sqlite3_stmt *ev, *proc_upd, *batch, *range;
	struct dlbn_buf detail;
	char *err;
	size_t errlen;
	int failed;
};

/* The OS error behind an I/O failure ("File too large", "No space ..."). */
static const char *sys_error(struct sq *s)
{
	int e = s->db ? sqlite3_system_errno(s->db) : 0;
	return e ? strerror(e) : "";
}

static int sq_fail(struct sq *s, const char *what)
{
	if (!s->failed)
		snprintf(s->err, s->errlen, "sqlite: %s: %s%s%s%s", what,
			 s->db ? sqlite3_errmsg(s->db) : "cannot open", *sys_error(s) ? " (" : "",
			 sys_error(s), *sys_error(s) ? ")" : "");
	s->failed = 1;
	return -1;
}

static int sq_exec(struct sq *s, const char *sql)
{
	char *msg = NULL;
	if (sqlite3_exec(s->db, sql, NULL, NULL, &msg) == SQLITE_OK)
		return 0;
	if (!s->failed)
		snprintf(s->err, s->errlen, "sqlite: %s%s%s%s", msg ? msg : "error",
			 *sys_error(s) ? " (" : "", sys_error(s), *sys_error(s) ? ")" : "");
	sqlite3_free(msg);
	s->failed = 1;
	return -1;
}

static int sq_prepare(struct sq *s, const char *sql, sqlite3_stmt **st)
{
	if (sqlite3_prepare_v3(s->db, sql, -1, SQLITE_PREPARE_PERSISTENT, st, NULL) != SQLITE_OK)
		return sq_fail(s, "prepare");
	return 0;
}

/* Step a bound statement and reset it for the next row. */
static int sq_row(struct sq *s, sqlite3_stmt *st)
{
	int rc = sqlite3_step(st);
	sqlite3_reset(st);
	if (rc != SQLITE_DONE)
		return sq_fail(s, "insert");
	return 0;
}

/* Text from the trace (argv0, paths, NVTX names) as valid UTF-8. */
static void bind_text_n(sqlite3_stmt *st, int i, const char *t, size_t n)
{
	struct dlbn_buf b = {0};
	dlbn_buf_utf8(&b, t, n);
	if (b.oom || !b.p)
		sqlite3_bind_text(st, i, "", 0, SQLITE_STATIC);
	else
		sqlite3_bind_text(st, i, b.p, (int)b.n, SQLITE_TRANSIENT);
	dlbn_buf_free(&b);
}

static void bind_text(sqlite3_stmt *st, int i, const char *t)
{
	bind_text_n(st, i, t, strlen(t));
}

/* ns relative to t0 */
static int64_t rel(const struct sq *s, int64_t t)
{
	return t - s->m->t0;
}

/* ---- meta and findings ------------------------------------------------ */

/* Meta rows: a typed value, or NULL when !ok (or not finite). */
static int meta_int(struct sq *s, sqlite3_stmt *st, const char *key, int64_t v, int ok)
{
	sqlite3_bind_text(st, 1, key, -1, SQLITE_STATIC);
	if (ok)
		sqlite3_bind_int64(st, 2, v);
	else
		sqlite3_bind_null(st, 2);
	return sq_row(s, st);
}

static int meta_real(struct sq *s, sqlite3_stmt *st, const char *key, double v, int ok)
{
	sqlite3_bind_text(st, 1, key, -1, SQLITE_STATIC);
	if (ok && v == v && v < 1e300 && v > -1e300)
		sqlite3_bind_double(st, 2, v);
	else
		sqlite3_bind_null(st, 2);
	return sq_row(s, st);
}

static int meta_text(struct sq *s, sqlite3_stmt *st, const char *key, const char *v)
{
	sqlite3_bind_text(st, 1, key, -1, SQLITE_STATIC);
	bind_text(st, 2, v);
	return sq_row(s, st);
}

static int insert_meta(struct sq *s)
{
	const struct dlbn_export_input *in = s->in;
	const struct dlbn_analysis *a = in->a;
	const struct dlbn_model *m = s->m;
	const struct dlbn_reader_stats *rs = dlbn_reader_stats(in->r);
	char ver[32];
	sqlite3_stmt *st;
	if (sq_prepare(s, "INSERT OR REPLACE INTO meta VALUES(?, ?)", &st))
		return -1;
	snprintf(ver, sizeof(ver), "%u.%u", rs->version_major, rs->version_minor);
	int win = a->steps_window > 0;
	int rc = meta_int(s, st, "schema_version", SCHEMA_VERSION, 1) ||
		 meta_text(s, st, "dlbn_version", in->version ? in->version : "unknown") ||
		 meta_text(s, st, "trace_path", in->trace_path ? in->trace_path : "") ||
		 meta_text(s, st, "trace_format", ver) || meta_text(s, st, "host", rs->host) ||
		 meta_int(s, st, "created_realtime_ns", (int64_t)rs->created_realtime_ns, 1) ||
		 meta_int(s, st, "created_monotonic_ns", (int64_t)rs->created_monotonic_ns, 1) ||
		 meta_int(s, st, "t0_ns", m->t0, 1) ||
		 meta_int(s, st, "t_end_ns", rel(s, m->t_end), 1) ||
		 meta_int(s, st, "records", (int64_t)m->records, 1) ||
		 meta_int(s, st, "truncated", rs->truncated, 1) ||
		 meta_text(s, st, "verdict", dlbn_verdict_name(a->verdict)) ||
		 meta_real(s, st, "predicted_speedup", a->predicted_speedup,
			   a->predicted_speedup > 0) ||
		 meta_text(s, st, "view", dlbn_view_name(a->view)) ||
		 meta_text(s, st, "path", dlbn_path_name(a->path)) ||
		 meta_text(s, st, "cause", dlbn_cause_name(a->cause)) ||
		 meta_int(s, st, "steps_total", (int64_t)a->steps_total, 1) ||
		 meta_int(s, st, "steps_warmup", (int64_t)a->steps_warmup, 1) ||
		 meta_int(s, st, "steps_window", (int64_t)a->steps_window, 1) ||
		 meta_int(s, st, "epochs", a->epochs, 1) ||
		 meta_int(s, st, "window_begin_ns", rel(s, a->window_begin), win) ||
		 meta_int(s, st, "window_end_ns", rel(s, a->window_end), win) ||
		 meta_real(s, st, "window_wall_s", a->wall_s, win) ||
		 meta_real(s, st, "exposed_s", a->exposed_s, win) ||
		 meta_real(s, st, "stall_s", a->stall_s, win) ||
		 meta_real(s, st, "exposed_fraction", a->exposed_fraction, win) ||
		 meta_real(s, st, "stall_fraction", a->stall_fraction, win) ||
		 meta_int(s, st, "num_workers", a->num_workers, a->num_workers >= 0) ||
		 meta_int(s, st, "prefetch_depth", a->prefetch_depth, 1) ||
		 meta_real(s, st, "workers_mean_busy", a->mean_busy, a->mean_busy >= 0) ||
		 meta_int(s, st, "gpu_present", in->gpu && in->gpu->present, 1) ||
		 meta_text(s, st, "loader_config", m->config.present ? m->config.text : "");
	sqlite3_finalize(st);
	return rc ? -1 : 0;
}

static int finding_rows(struct sq *s, sqlite3_stmt *st, const char *kind, const char *lines,
			size_t stride, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		sqlite3_bind_text(st, 1, kind, -1, SQLITE_STATIC);
		sqlite3_bind_int64(st, 2, (int64_t)i);
		bind_text(st, 3, lines + i * stride);
		if (sq_row(s, st))
			return -1;
	}
	return 0;
}

static int insert_findings(struct sq *s)
{
	const struct dlbn_analysis *a = s->in->a;
	const struct dlbn_gpu *g = s->in->gpu;
	sqlite3_stmt *st;
	if (sq_prepare(s, "INSERT INTO findings VALUES(?, ?, ?)", &st))
		return -1;
	int rc = finding_rows(s, st, "reason", a->reasons[0], DLBN_LINE, a->nreasons) ||
		 finding_rows(s, st, "recommendation", a->recs[0], DLBN_LINE, a->nrecs) ||
		 finding_rows(s, st, "warning", a->warnings[0], DLBN_LINE, a->nwarnings) ||
		 (g && g->present &&
		  finding_rows(s, st, "gpu", g->reasons[0], DLBN_GPU_LINE, g->nreasons));
	sqlite3_finalize(st);
	return rc ? -1 : 0;
}

/*
 * What a damaged or cut-short trace lost (damage.h): meta damaged and
 * damage_summary, and one row per loss in table damage (times relative,
 * NULL unknown; window in / may / outside).
 */
static int insert_damage(struct sq *s)
{
	static struct dlbn_damage d;
	dlbn_damage_assess(s->m, dlbn_reader_stats(s->in->r), s->in->a, &d);
	sqlite3_stmt *st;
	if (sq_exec(s, "CREATE TABLE damage(kind TEXT, proc_id INTEGER, pid INTEGER,"
		       " extents INTEGER, bytes INTEGER, from_ns INTEGER, to_ns INTEGER,"
		       " window TEXT, blocks_verdict INTEGER, text TEXT);") ||
	    sq_prepare(s, "INSERT OR REPLACE INTO meta VALUES(?, ?)", &st))
		return -1;
	int rc = meta_int(s, st, "damaged", d.damaged, 1) ||
		 meta_text(s, st, "damage_summary", d.summary);
	sqlite3_finalize(st);
	if (rc || sq_prepare(s, "INSERT INTO damage VALUES(?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", &st))
		return -1;
	for (size_t i = 0; i < d.nitems && !rc; i++) {
		const struct dlbn_damage_item *x = &d.items[i];
		int64_t to = x->kind == DLBN_DAMAGE_PASSIVE ? DLBN_LOSS_T_UNKNOWN : x->t_to;
		sqlite3_bind_text(st, 1, dlbn_damage_kind_name(x->kind), -1, SQLITE_STATIC);
		if (x->proc_id >= 0) {
			sqlite3_bind_int64(st, 2, x->proc_id);
			sqlite3_bind_int64(st, 3, x->pid);
		} else {
			sqlite3_bind_null(st, 2);
			sqlite3_bind_null(st, 3);
		}
		sqlite3_bind_int64(st, 4, (int64_t)x->extents);
		sqlite3_bind_int64(st, 5, (int64_t)x->bytes);
		if (x->t_from != DLBN_LOSS_T_UNKNOWN)
			sqlite3_bind_int64(st, 6, rel(s, x->t_from));
		else
			sqlite3_bind_null(st, 6);
		if (to != DLBN_LOSS_T_UNKNOWN)
			sqlite3_bind_int64(st, 7, rel(s, to));
		else
			sqlite3_bind_null(st, 7);
		sqlite3_bind_text(st, 8,
				  x->touches == DLBN_TOUCH_YES	 ? "in"
				  : x->touches == DLBN_TOUCH_MAY ? "may"
								 : "outside",
				  -1, SQLITE_STATIC);
		sqlite3_bind_int64(st, 9, x->blocks);
		sqlite3_bind_text(st, 10, x->text, -1, SQLITE_TRANSIENT);
		rc = sq_row(s, st);
	}
	sqlite3_finalize(st);
	return rc ? -1 : 0;
}

/* ---- model tables ----------------------------------------------------- */

static int insert_processes(struct sq *s)
{
	const struct dlbn_model *m = s->m;
	sqlite3_stmt *st;
	if (sq_prepare(s,
		       "INSERT INTO processes(proc_id, pid, ppid, parent_proc_id, role, argv0,"
		       " start, first_ns, last_ns, first_abs_ns, exited, exit_status, exit_how,"
		       " records, threads) VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
		       &st))
		return -1;
	for (size_t i = 0; i < m->nprocs; i++) {
		const struct dlbn_proc *p = &m->procs[i];
		int64_t nthr = 0;
		for (size_t t = 0; t < m->nthreads; t++)
			nthr += m->threads[t].proc_index == i;
		int has_time = p->t_first <= p->t_last;
		sqlite3_bind_int64(st, 1, p->proc_id);
		sqlite3_bind_int64(st, 2, p->pid);
		sqlite3_bind_int64(st, 3, p->ppid);
		if (p->parent_proc_id >= 0)
			sqlite3_bind_int64(st, 4, p->parent_proc_id);
		else
			sqlite3_bind_null(st, 4);
		sqlite3_bind_text(st, 5, dlbn_role_name(p->role), -1, SQLITE_STATIC);
		bind_text(st, 6, p->argv0);
		sqlite3_bind_text(st, 7, p->has_process_rec ? dlbn_start_name(p->start) : "unknown",
				  -1, SQLITE_STATIC);
		for (int k = 8; k <= 10; k++)
			sqlite3_bind_null(st, k);
		if (has_time) {
			sqlite3_bind_int64(st, 8, rel(s, p->t_first));
			sqlite3_bind_int64(st, 9, rel(s, p->t_last));
			sqlite3_bind_int64(st, 10, p->t_first);
		}
		sqlite3_bind_int(st, 11, p->has_exit);
		if (p->has_exit) {
			sqlite3_bind_int64(st, 12, p->exit_status);
			sqlite3_bind_text(st, 13, dlbn_exit_how_name(p->exit_how), -1,
					  SQLITE_STATIC);
		} else {
			sqlite3_bind_null(st, 12);
			sqlite3_bind_null(st, 13);
		}
		sqlite3_bind_int64(st, 14, (int64_t)p->records);
		sqlite3_bind_int64(st, 15, nthr);
		if (sq_row(s, st))
			break;
	}
	sqlite3_finalize(st);
	return s->failed ? -1 : 0;
}

static int insert_threads(struct sq *s)
{
	const struct dlbn_model *m = s->m;
	sqlite3_stmt *st;
	if (sq_prepare(s, "INSERT OR REPLACE INTO threads VALUES(?,?,?,?,?,?)", &st))
		return -1;
	for (size_t i = 0; i < m->nthreads; i++) {
		const struct dlbn_thread *t = &m->threads[i];
		const struct dlbn_stream_info *si = dlbn_reader_stream(s->in->r, i);
		sqlite3_bind_int64(st, 1, m->procs[t->proc_index].proc_id);
		sqlite3_bind_int64(st, 2, t->thread_no);
		sqlite3_bind_int64(st, 3, t->tid);
		sqlite3_bind_int(st, 4, t->is_main);
		sqlite3_bind_text(st, 5, dlbn_thread_role(m, i), -1, SQLITE_STATIC);
		sqlite3_bind_int64(st, 6, si ? (int64_t)si->records : 0);
		if (sq_row(s, st))
			break;
	}
	sqlite3_finalize(st);
	return s->failed ? -1 : 0;
}

struct step_rows {
	struct sq *s;
	sqlite3_stmt *st;
	/* NULL: the steps carry their own hand-off (IPC view); else the
	 * queries of prepare_handoffs over hand-offs ending in (?1, ?2]. */
	sqlite3_stmt *sum, *first;
	int64_t taken; /* hand-offs ending up to here belong to earlier steps */
	int failed;
};

/*
 * Python and NVTX views: their steps are fetches, not receives, so the
 * model gives them no hand-off of their own; the report's per-batch
 * figures come from the IPC view's steps.  Those are built once more into
 * a temporary table (on disk: memory does not grow with steps) and handed
 * out in order, each to the step that took its batch: a step whose fetch
 * saw hand-offs complete (the direct path: the loop receives inside its
 * fetch) takes every one not yet taken up to its end; a step whose batch
 * was received before its fetch began (the pin-memory thread runs ahead)
 * takes the oldest one not yet taken.
 */
static void insert_handoff(void *ctx, size_t i, const struct dlbn_step *x,
			   const struct dlbn_gpu_step *gs)
{
	struct step_rows *sr = ctx;
	(void)i;
	(void)gs;
	if (sr->failed || (!x->recv_ns && !x->bytes && !x->nfds))
		return;
	sqlite3_bind_int64(sr->st, 1, x->end);
	sqlite3_bind_int64(sr->st, 2, x->recv_ns);
	sqlite3_bind_int64(sr->st, 3, x->bytes);
	sqlite3_bind_int64(sr->st, 4, x->nfds);
	if (sq_row(sr->s, sr->st))
		sr->failed = 1;
}

static int prepare_handoffs(struct sq *s, struct step_rows *out)
{
	const struct dlbn_model *m = s->m;
	if (m->view == DLBN_VIEW_IPC || !m->ipc_steps.n)
		return 0;
	struct step_rows sr = {.s = s};
	if (sq_exec(s, "CREATE TEMP TABLE handoffs(end_ns INTEGER, recv_ns INTEGER,"
		       " bytes INTEGER, nfds INTEGER);") ||
	    sq_prepare(s, "INSERT INTO handoffs VALUES(?,?,?,?)", &sr.st))
		return -1;
	struct dlbn_model *ipc = malloc(sizeof(*ipc));
	struct dlbn_model_opts o = m->opts;
	o.force_view = DLBN_VIEW_IPC;
	o.keep_steps = 0;
	o.sink = insert_handoff;
	o.sink_ctx = &sr;
	int rc = ipc ? dlbn_model_build(ipc, s->in->r, &o) : -1;
	if (ipc)
		dlbn_model_free(ipc);
	free(ipc);
	sqlite3_finalize(sr.st);
	if (rc != 0 && !s->failed) {
		snprintf(s->err, s->errlen, "out of memory");
		s->failed = 1;
	}
	if (s->failed || sr.failed ||
	    sq_exec(s, "CREATE INDEX temp.handoffs_by_end ON handoffs(end_ns);"))
		return -1;
	out->taken = INT64_MIN;
	return sq_prepare(s,
			  "SELECT count(*), max(end_ns), total(recv_ns), total(bytes), total(nfds)"
			  " FROM handoffs WHERE end_ns > ? AND end_ns <= ?",
			  &out->sum) ||
	       sq_prepare(s,
			  "SELECT 1, end_ns, recv_ns, bytes, nfds FROM handoffs"
			  " WHERE end_ns > ? AND end_ns <= ? ORDER BY end_ns LIMIT 1",
			  &out->first);
}

/* Run q over (from, to]: *n rows, up to *last, summing into v. */
static void handoff_query(struct step_rows *sr, sqlite3_stmt *q, int64_t from, int64_t to,
			  int64_t *n, int64_t *last, int64_t v[3])
{
	sqlite3_bind_int64(q, 1, from);
	sqlite3_bind_int64(q, 2, to);
	int rc = sqlite3_step(q);
	*n = 0;
	if (rc == SQLITE_ROW && sqlite3_column_int64(q, 0) > 0) {
		*n = sqlite3_column_int64(q, 0);
		*last = sqlite3_column_int64(q, 1);
		for (int k = 0; k < 3; k++)
			v[k] = (int64_t)sqlite3_column_double(q, 2 + k);
	} else if (rc != SQLITE_ROW && rc != SQLITE_DONE) {
		sr->failed = sq_fail(sr->s, "select");
	}
	sqlite3_reset(q);
}

/* The step's hand-off: its own, or (see prepare_handoffs) the IPC view's. */
static void step_handoff(struct step_rows *sr, const struct dlbn_step *x, int64_t v[3])
{
	v[0] = x->recv_ns;
	v[1] = x->bytes;
	v[2] = x->nfds;
	if (!sr->sum)
		return;
	int64_t n, last = sr->taken, ignored[3];
	v[0] = v[1] = v[2] = 0;
	handoff_query(sr, sr->sum, sr->taken > x->begin ? sr->taken : x->begin, x->end, &n, &last,
		      ignored);
	handoff_query(sr, n ? sr->sum : sr->first, sr->taken, x->end, &n, &last, v);
	if (n)
		sr->taken = last;
}

static void insert_step(void *ctx, size_t i, const struct dlbn_step *x,
			const struct dlbn_gpu_step *gs)
{
	struct step_rows *sr = ctx;
	struct sq *s = sr->s;
	const struct dlbn_analysis *a = s->in->a;
	sqlite3_stmt *st = sr->st;
	if (sr->failed)
		return;
	const char *ev =
		gs && s->in->gpu && s->in->gpu->present ? dlbn_evidence_name(gs->evidence) : NULL;
	int in_window = i >= a->steps_warmup && i < a->steps_warmup + a->steps_window;
	int64_t v[] = {(int64_t)i,     x->epoch,      x->epoch_start,	 rel(s, x->begin),
		       rel(s, x->end), x->begin,      x->end - x->begin, x->wait_ns,
		       x->gpu_busy_ns, x->gpu_idle_ns};
	for (int k = 0; k < 10; k++)
		sqlite3_bind_int64(st, k + 1, v[k]);
	if (ev)
		sqlite3_bind_text(st, 11, ev, -1, SQLITE_STATIC);
	else
		sqlite3_bind_null(st, 11);
	int64_t handoff[3];
	step_handoff(sr, x, handoff);
	for (int k = 0; k < 3; k++)
		sqlite3_bind_int64(st, 12 + k, handoff[k]);
	sqlite3_bind_int(st, 15, i < a->steps_warmup);
	sqlite3_bind_int(st, 16, in_window);
	sqlite3_bind_int64(st, 17, x->gpu_refill_ns);
	if (sq_row(s, st))
		sr->failed = 1;
}

/* The chosen view's steps, read again from the trace (the model keeps
 * none). */
static int insert_steps(struct sq *s)
{
	const struct dlbn_model *m = s->m;
	if (!m->steps || !m->steps->n)
		return 0;
	struct step_rows sr = {.s = s};
	int rc = prepare_handoffs(s, &sr) ||
		 sq_prepare(s, "INSERT INTO steps VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
			    &sr.st);
	if (!rc)
		rc = dlbn_model_each_step(m, s->in->r, insert_step, &sr);
	sqlite3_finalize(sr.st);
	sqlite3_finalize(sr.sum);
	sqlite3_finalize(sr.first);
	if (sr.sum && !s->failed)
		sq_exec(s, "DROP TABLE temp.handoffs;");
	if (rc != 0 && !s->failed) {
		snprintf(s->err, s->errlen, "out of memory");
		s->failed = 1;
	}
	return s->failed || sr.failed ? -1 : 0;
}

static int worker_in_window(const struct dlbn_analysis *a, int pid)
{
	for (size_t i = 0; i < a->nworkers; i++)
		if (a->workers[i].pid == pid)
			return 1;
	return 0;
}

static void bind_real(sqlite3_stmt *st, int i, double v, int ok)
{
	if (ok && v == v)
		sqlite3_bind_double(st, i, v);
	else
		sqlite3_bind_null(st, i);
}

static int insert_workers(struct sq *s)
{
	const struct dlbn_model *m = s->m;
	sqlite3_stmt *st;
	if (sq_prepare(s, "INSERT INTO workers VALUES(?,?,?,?,?,?,?,?,?,?,?)", &st))
		return -1;
	for (size_t i = 0; i < m->nprocs; i++) {
		const struct dlbn_proc *p = &m->procs[i];
		struct dlbn_worker_stats w;
		if (p->role != DLBN_ROLE_WORKER)
			continue;
		dlbn_worker_window_stats(m, i, &w);
		sqlite3_bind_int64(st, 1, p->proc_id);
		sqlite3_bind_int64(st, 2, w.pid);
		sqlite3_bind_int64(st, 3, (int64_t)w.batches);
		bind_real(st, 4, w.busy_fraction, w.busy_fraction >= 0);
		bind_real(st, 5, w.busy_s, 1);
		bind_real(st, 6, w.mean_batch_ms, 1);
		bind_real(st, 7, w.file_read_s, 1);
		sqlite3_bind_int(st, 8, w.exited);
		bind_real(st, 9, w.ended_s, 1);
		sqlite3_bind_int(st, 10, worker_in_window(s->in->a, w.pid));
		if (p->loader >= 0)
			sqlite3_bind_int(st, 11, p->loader + 1);
		else
			sqlite3_bind_null(st, 11);
		if (sq_row(s, st))
			break;
	}
	sqlite3_finalize(st);
	return s->failed ? -1 : 0;
}

/* Every DataLoader of the training process (the JSON report's "loaders"). */
static int insert_loaders(struct sq *s)
{
	const struct dlbn_model *m = s->m;
	sqlite3_stmt *st;
	if (sq_prepare(s, "INSERT INTO loaders VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)", &st))
		return -1;
	for (size_t i = 0; i < m->loaders.n; i++) {
		struct dlbn_loader_summary ls;
		const struct dlbn_loader *l = &m->loaders.v[i];
		dlbn_loader_summary(m, i, &ls);
		sqlite3_bind_int(st, 1, ls.id);
		sqlite3_bind_text(st, 2, dlbn_loader_role_name(ls.role), -1, SQLITE_STATIC);
		sqlite3_bind_int(st, 3, ls.training);
		sqlite3_bind_int64(st, 4, (int64_t)ls.steps);
		sqlite3_bind_int64(st, 5, (int64_t)ls.window_steps);
		sqlite3_bind_int(st, 6, ls.epochs);
		if (ls.num_workers >= 0)
			sqlite3_bind_int(st, 7, ls.num_workers);
		else
			sqlite3_bind_null(st, 7);
		sqlite3_bind_int64(st, 8, (int64_t)ls.worker_procs);
		bind_real(st, 9, ls.wait_s, 1);
		bind_real(st, 10, ls.stall_s, 1);
		sqlite3_bind_int64(st, 11, (int64_t)ls.in_train_window.steps);
		bind_real(st, 12, (double)ls.in_train_window.wait_ns / 1e9, !ls.training);
		bind_real(st, 13, (double)ls.in_train_window.stall_ns / 1e9, !ls.training);
		sqlite3_bind_text(st, 14, ls.sampler, -1, SQLITE_TRANSIENT);
		sqlite3_bind_text(st, 15, ls.loader_class, -1, SQLITE_TRANSIENT);
		if (ls.batch_size >= 0)
			sqlite3_bind_int(st, 16, ls.batch_size);
		else
			sqlite3_bind_null(st, 16);
		sqlite3_bind_text(st, 17, l->has_config ? l->config.text : "", -1,
				  SQLITE_TRANSIENT);
		if (sq_row(s, st))
			break;
	}
	sqlite3_finalize(st);
	return s->failed ? -1 : 0;
}

/* ---- the event pass --------------------------------------------------- */

static int interval_row(void *ctx, const struct dlbn_interval *iv)
{
	struct sq *s = ctx;
	const struct dlbn_model *m = s->m;
	uint32_t proc_id = m->procs[iv->proc_index].proc_id;
	sqlite3_stmt *st;
	if (iv->kind == DLBN_IV_BATCH) {
		st = s->batch;
		sqlite3_bind_int64(st, 1, proc_id);
		sqlite3_bind_int64(st, 2, (int64_t)iv->id);
		sqlite3_bind_int64(st, 3, m->threads[iv->thread_index].thread_no);
		sqlite3_bind_int64(st, 4, m->threads[iv->end_thread_index].thread_no);
		sqlite3_bind_int64(st, 5, rel(s, iv->begin));
		sqlite3_bind_int64(st, 6, rel(s, iv->end));
		sqlite3_bind_int64(st, 7, iv->end - iv->begin);
		return sq_row(s, st);
	}
	st = s->range;
	sqlite3_bind_text(st, 1, iv->kind == DLBN_IV_PUSH ? "push" : "start", -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, 2, proc_id);
	sqlite3_bind_int64(st, 3, m->threads[iv->thread_index].thread_no);
	sqlite3_bind_int64(st, 4, m->threads[iv->end_thread_index].thread_no);
	bind_text(st, 5, iv->domain);
	bind_text(st, 6, iv->name);
	sqlite3_bind_int(st, 7, iv->depth);
	if (iv->kind == DLBN_IV_START)
		sqlite3_bind_int64(st, 8, (int64_t)iv->id);
	else
		sqlite3_bind_null(st, 8);
	sqlite3_bind_int64(st, 9, rel(s, iv->begin));
	if (iv->end >= 0) {
		sqlite3_bind_int64(st, 10, rel(s, iv->end));
		sqlite3_bind_int64(st, 11, iv->end - iv->begin);
	} else { /* still open when the trace ends */
		sqlite3_bind_null(st, 10);
		sqlite3_bind_null(st, 11);
	}
	return sq_row(s, st);
}

static int64_t ifld(const struct dlbn_record *r, int i)
{
	return i < r->nfields && r->kind[i] == DLBN_V_INT ? r->f[i] : 0;
}

static void bind_str_field(sqlite3_stmt *st, int col, const struct dlbn_record *r, int i)
{
	if (i < r->nfields && r->kind[i] == DLBN_V_STR)
		bind_text_n(st, col, r->str[i], (size_t)r->f[i]);
	else
		sqlite3_bind_null(st, col);
}

/* A PROCESS record fills in the header fields the model does not keep. */
static int update_process(struct sq *s, const struct dlbn_record *r, uint32_t proc_id)
{
	sqlite3_stmt *st = s->proc_upd;
	bind_str_field(st, 1, r, 10); /* exe */
	bind_str_field(st, 2, r, 11); /* host */
	for (int k = 0; k < 3; k++) { /* rank, local_rank, world_size: -1 unknown */
		int64_t v = ifld(r, 4 + k);
		if (4 + k < r->nfields && r->kind[4 + k] == DLBN_V_INT && v >= 0)
			sqlite3_bind_int64(st, 3 + k, v);
		else
			sqlite3_bind_null(st, 3 + k);
	}
	bind_str_field(st, 6, r, 12); /* job_id */
	sqlite3_bind_int64(st, 7, proc_id);
	return sq_row(s, st);
}

/* Bind column col to field i of r when it is an integer, else NULL. */
static inline void bind_field(sqlite3_stmt *st, int col, const struct dlbn_record *r, int i)
{
	if (i >= 0 && i < r->nfields && r->kind[i] == DLBN_V_INT)
		sqlite3_bind_int64(st, col, r->f[i]);
	else
		sqlite3_bind_null(st, col);
}

static int event_row(struct sq *s, const struct dlbn_record *r, const struct dlbn_thread *t,
		     uint32_t proc_id)
{
	static char unknown_names[128][16];
	sqlite3_stmt *st = s->ev;
	const struct dlbn_rec_layout *l = dlbn_rec_layout(r->type);
	const char *type = dlbn_record_name(r->type);
	if (!type) {
		int k = r->type & 127;
		snprintf(unknown_names[k], sizeof(unknown_names[k]), "TYPE_%d", r->type);
		type = unknown_names[k];
	}
	sqlite3_bind_int64(st, 1, proc_id);
	sqlite3_bind_int64(st, 2, t->thread_no);
	sqlite3_bind_int64(st, 3, rel(s, r->t_ns));
	sqlite3_bind_text(st, 4, type, -1, SQLITE_STATIC);
	if (l->dur >= 0)
		sqlite3_bind_int64(st, 5, dlbn_rec_dur(r));
	else
		sqlite3_bind_null(st, 5);
	bind_field(st, 6, r, l->fd);
	if (l->fd_kind >= 0 && l->fd_kind < r->nfields && r->kind[l->fd_kind] == DLBN_V_INT)
		sqlite3_bind_text(st, 7, dlbn_fd_kind_name(r->f[l->fd_kind]), -1, SQLITE_STATIC);
	else
		sqlite3_bind_null(st, 7);
	bind_field(st, 8, r, l->ino);
	bind_field(st, 9, r, l->ret);
	s->detail.n = 0;
	if (dlbn_rec_detail_json(&s->detail, r, "{"))
		dlbn_buf_put(&s->detail, "}", 1);
	if (s->detail.n && !s->detail.oom)
		sqlite3_bind_text(st, 10, s->detail.p, (int)s->detail.n, SQLITE_STATIC);
	else
		sqlite3_bind_null(st, 10);
	return sq_row(s, st);
}

static int event_pass(struct sq *s, uint64_t *rows)
{
	const struct dlbn_model *m = s->m;
	const struct dlbn_record *r;
	struct dlbn_pairs *pairs = dlbn_pairs_new(m);
	if (!pairs) {
		snprintf(s->err, s->errlen, "out of memory");
		return -1;
	}
	int rc = 0;
	dlbn_reader_rewind(s->in->r);
	while (!rc && (r = dlbn_reader_next(s->in->r))) {
		if (r->stream->index >= m->nthreads)
			continue; /* the model was built from this reader: cannot happen */
		const struct dlbn_thread *t = &m->threads[r->stream->index];
		uint32_t proc_id = m->procs[t->proc_index].proc_id;
		rc = event_row(s, r, t, proc_id);
		if (!rc && r->type == DLBN_REC_PROCESS)
			rc = update_process(s, r, proc_id);
		if (!rc)
			rc = dlbn_pairs_feed(pairs, r, interval_row, s);
		(*rows)++;
	}
	if (!rc)
		rc = dlbn_pairs_finish(pairs, interval_row, s);
	dlbn_pairs_free(pairs);
	if (rc && !s->failed)
		snprintf(s->err, s->errlen, "out of memory");
	return rc ? -1 : 0;
}

/* ---- the database ----------------------------------------------------- */

static int prepare_pass_statements(struct sq *s)
{
	return sq_prepare(s,
			  "INSERT INTO events(proc_id, thread_no, t_ns, type, dur_ns, fd, fd_kind,"
			  " ino, ret, detail) VALUES(?,?,?,?,?,?,?,?,?,?)",
			  &s->ev) ||
	       sq_prepare(s,
			  "UPDATE processes SET exe = ?, host = ?, rank = ?, local_rank = ?,"
			  " world_size = ?, job_id = ? WHERE proc_id = ?",
			  &s->proc_upd) ||
	       sq_prepare(s, "INSERT INTO batches VALUES(?,?,?,?,?,?,?)", &s->batch) ||
	       sq_prepare(s,
			  "INSERT INTO ranges(kind, proc_id, thread_no, end_thread_no, domain,"
			  " name, depth, range_id, begin_ns, end_ns, dur_ns)"
			  " VALUES(?,?,?,?,?,?,?,?,?,?,?)",
			  &s->range);
}

static int build(struct sq *s, const char *file, struct dlbn_export_stats *stats)
{
	if (sqlite3_open_v2(file, &s->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, NULL) !=
	    SQLITE_OK)
		return sq_fail(s, "open");
	/* The file is a private temporary until renamed: no journal, no
	 * syncs; a crash leaves only the temporary. */
	if (sq_exec(s, "PRAGMA page_size = 8192; PRAGMA journal_mode = OFF;"
		       " PRAGMA synchronous = OFF; PRAGMA locking_mode = EXCLUSIVE;"
		       " PRAGMA cache_size = -32768;"
		       " BEGIN;") ||
	    sq_exec(s, schema_sql) || insert_meta(s) || insert_findings(s) || insert_damage(s) ||
	    insert_processes(s) || insert_threads(s) || insert_steps(s) || insert_workers(s) ||
	    insert_loaders(s) || prepare_pass_statements(s))
		return -1;
	double t = dlbn_now_s();
	if (event_pass(s, &stats->events))
		return -1;
	stats->insert_s = dlbn_now_s() - t;
	return sq_exec(s, index_sql) || sq_exec(s, "COMMIT;") ? -1 : 0;
}

int dlbn_export_sqlite(const char *path, const struct dlbn_export_input *in,
		       struct dlbn_export_stats *stats, char *err, size_t errlen)
{
	struct dlbn_out_file o;
	struct dlbn_export_stats local;
	struct sq s = {.in = in, .m = in->m, .err = err, .errlen = errlen};
	double t0 = dlbn_now_s();
	if (!stats)
		stats = &local;
	memset(stats, 0, sizeof(*stats));
	if (dlbn_out_begin(&o, path, in->trace_path, 0, err, errlen))
		return -1;
	close(o.fd); /* SQLite opens the (empty) temporary itself */
	o.fd = -1;
	int rc = build(&s, o.tmp, stats);
	sqlite3_finalize(s.ev);
	sqlite3_finalize(s.proc_upd);
	sqlite3_finalize(s.batch);
	sqlite3_finalize(s.range);
	if (s.db && sqlite3_close(s.db) != SQLITE_OK && !rc) {
		snprintf(err, errlen, "sqlite: closing %s failed", path);
		rc = -1;
	}
	dlbn_buf_free(&s.detail);
	if (rc) {
		dlbn_out_abort(&o);
		return -1;
	}
	if (dlbn_out_commit(&o, err, errlen))
		return -1;
	stats->total_s = dlbn_now_s() - t0;
	return 0;
}
