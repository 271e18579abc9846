/*
 * test_export.c - the --sqlite and --perfetto exports (analyzer/export/export.h)
 * on synthetic traces: the database holds every record, the model's
 * processes, threads, steps and workers, paired NVTX ranges and worker
 * batches, and its views answer; the Perfetto JSON parses (checked with
 * $PYTHON's (default /usr/bin/python3) json module) and has the tracks it promises; hostile
 * strings stay valid JSON; an unwritable path, the trace's own path and a
 * write that fails half way (RLIMIT_FSIZE) leave no file behind and keep
 * what was there.  Prints the event insert rate (rows/s) for a larger run.
 */
#include <dirent.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "export/export.h"
#include "gpu/gpu.h"
#include "model/model.h"
#include "trace/reader.h"
#include "tgsim.h"
#include "tracegen.h"
#include "analysis/verdict.h"

static char dir[] = "/tmp/dlbn-test-export-XXXXXX";
static char trace[512], dbpath[512], jsonpath[512];

/* A trace analysed the way main.c does it. */
struct run {
	struct dlbn_reader *r;
	struct dlbn_model m;
	struct dlbn_analysis a;
	struct dlbn_export_input in;
};

static void open_run(struct run *x, const char *path)
{
	char err[256];
	struct dlbn_model_opts mo;
	struct dlbn_verdict_opts vo;
	memset(x, 0, sizeof(*x));
	if (!(x->r = dlbn_reader_open(path, err, sizeof(err)))) {
		printf("cannot open %s: %s\n", path, err);
		exit(1);
	}
	dlbn_gpu_model_opts(&mo);
	dlbn_verdict_default_opts(&vo);
	if (dlbn_model_build(&x->m, x->r, &mo) != 0 ||
	    dlbn_analyze_gpu(&x->m, dlbn_reader_stats(x->r), &vo, &x->m.gpu, &x->a) != 0)
		exit(1);
	x->in = (struct dlbn_export_input){path, x->r, &x->m, &x->a, &x->m.gpu, "test"};
}

static void close_run(struct run *x)
{
	dlbn_analysis_free(&x->a);
	dlbn_model_free(&x->m);
	dlbn_reader_close(x->r);
}

/* First column of the first row of sql as an integer; -1 on error. */
static long long q_int(sqlite3 *db, const char *sql)
{
	sqlite3_stmt *st;
	long long v = -1;
	if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK) {
		printf("# sql error: %s: %s\n", sql, sqlite3_errmsg(db));
		return -1;
	}
	if (sqlite3_step(st) == SQLITE_ROW)
		v = sqlite3_column_int64(st, 0);
	sqlite3_finalize(st);
	return v;
}

/* First column of the first row as text (static buffer), "" on error. */
static const char *q_text(sqlite3 *db, const char *sql)
{
	static char buf[512];
	sqlite3_stmt *st;
	buf[0] = 0;
	if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK) {
		printf("# sql error: %s: %s\n", sql, sqlite3_errmsg(db));
		return buf;
	}
	if (sqlite3_step(st) == SQLITE_ROW && sqlite3_column_text(st, 0))
		snprintf(buf, sizeof(buf), "%s", (const char *)sqlite3_column_text(st, 0));
	sqlite3_finalize(st);
	return buf;
}

static sqlite3 *open_db(const char *path)
{
	sqlite3 *db = NULL;
	if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK) {
		printf("# cannot open %s\n", path);
		sqlite3_close(db);
		return NULL;
	}
	return db;
}

/*
 * Parse the JSON with Python and print figures about it, one "key value"
 * per line; returns the value of key, -1 when missing or unparsable.
 */
static const char py_check[] =
	"import json,sys,collections\n"
	"d=json.load(open(sys.argv[1]))\n"
	"ev=d['traceEvents']\n"
	"c=collections.Counter()\n"
	"for e in ev:\n"
	"  assert isinstance(e['pid'],int) and isinstance(e['tid'],int), e\n"
	"  assert isinstance(e['ts'],(int,float)) and e['ph'] in 'XiMbeC', e\n"
	"  if e['ph']=='X': assert e['dur']>=0, e\n"
	"  c['ph_'+e['ph']]+=1\n"
	"  c['cat_'+e.get('cat','meta')]+=1\n"
	"  n=e.get('name','')\n"
	"  if n.startswith('fetch '): c['fetch']+=1\n"
	"  if n.startswith('step '): c['step']+=1\n"
	"  if n.startswith('batch '): c['batch']+=1\n"
	"  if n=='process_name': c['process_name']+=1\n"
	"  if n=='thread_name': c['thread_name']+=1\n"
	"  if n=='steady-state window': c['window']+=1\n"
	"  if e['ph']=='X' and e.get('cat')=='nvtx': c['nvtx_x']+=1\n"
	"  if n=='process_name' and '\"' in e['args']['name']: c['quoted_name']+=1\n"
	"  if n=='outer' and e['ph']=='X': c['outer_dur_ns']=round(e['dur']*1000)\n"
	"  if n.startswith('read ') and 'ret' in e.get('args',{}): c['read_with_ret']+=1\n"
	"fetch={}\n"
	"for e in ev:\n"
	"  if e['ph']=='X' and e['name'].startswith('fetch '): "
	"fetch[(e['pid'],e['tid'],e['ts'])]=e\n"
	"for e in ev:\n"
	"  if e['ph']=='X' and e['name'].startswith('GPU '):\n"
	"    c['gpu_children']+=1\n"
	"    p=[f for f in fetch.values() if (f['pid'],f['tid'])==(e['pid'],e['tid']) and\n"
	"       f['ts']<=e['ts']+1e-9 and e['ts']+e['dur']<=f['ts']+f['dur']+1e-6]\n"
	"    c['gpu_children_inside']+=len(p)==1\n"
	"pids=collections.defaultdict(set)\n"
	"for e in ev:\n"
	"  if e.get('name')=='process_name': pids[e['args']['name'].split()[1]].add(e['pid'])\n"
	"c['max_tracks_per_pid']=max(len(v) for v in pids.values())\n"
	/* Perfetto drops a slice that overlaps another on its track without
	 * nesting: count those, and the batch lanes of each worker. */
	"tracks=collections.defaultdict(list)\n"
	"for e in ev:\n"
	"  if e['ph']=='X': tracks[(e['pid'],e['tid'])].append("
	"(round(e['ts']*1000),-round(e['dur']*1000)))\n"
	"for sl in tracks.values():\n"
	"  sl.sort(); st=[]\n"
	"  for b,nd in sl:\n"
	"    while st and st[-1]<=b: st.pop()\n"
	"    if st and b-nd>st[-1]: c['partial_overlaps']+=1\n"
	"    st.append(b-nd)\n"
	"lanes=collections.Counter()\n"
	"for e in ev:\n"
	"  if e.get('name')=='thread_name' and e['args']['name'].startswith('batches'): "
	"lanes[e['pid']]+=1\n"
	"c['max_batch_lanes']=max(lanes.values()) if lanes else 0\n"
	"c['events']=len(ev)\n"
	"c['verdict_ok']=int(d['otherData']['verdict'] in "
	"('DETECTED','POTENTIAL','NOT_DETECTED','INCONCLUSIVE'))\n"
	"for k,v in sorted(c.items()): print(k,v)\n";

static char py_out[4096];

static int json_parse(const char *path)
{
	char cmd[1024];
	snprintf(cmd, sizeof(cmd), "%s/check.py", dir);
	FILE *f = fopen(cmd, "w");
	if (!f)
		return -1;
	fputs(py_check, f);
	fclose(f);
	const char *python = getenv("PYTHON"); /* tests/run-tests sets it */
	snprintf(cmd, sizeof(cmd), "'%s' %s/check.py '%s' 2>&1",
		 python && *python ? python : "/usr/bin/python3", dir, path);
	FILE *p = popen(cmd, "r");
	if (!p)
		return -1;
	size_t n = fread(py_out, 1, sizeof(py_out) - 1, p);
	py_out[n] = 0;
	int st = pclose(p);
	if (st != 0)
		printf("# python says:\n%s\n", py_out);
	return st == 0 ? 0 : -1;
}

static long long json_fig(const char *key)
{
	size_t kl = strlen(key);
	for (const char *s = py_out; *s;) {
		if (!strncmp(s, key, kl) && s[kl] == ' ')
			return atoll(s + kl + 1);
		const char *nl = strchr(s, '\n');
		if (!nl)
			break;
		s = nl + 1;
	}
	return 0;
}

/* |a - b| within share of b. */
static int near(double a, double b, double share)
{
	double d = a > b ? a - b : b - a;
	return d <= share * (b > 0 ? b : -b);
}

/* Files in dir whose name contains needle. */
static int files_matching(const char *needle)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	int n = 0;
	while (d && (e = readdir(d)))
		n += strstr(e->d_name, needle) != NULL;
	if (d)
		closedir(d);
	return n;
}

/* ---- a DataLoader run -------------------------------------------------- */

static void test_dataloader_run(int pin)
{
	struct tgsim_params p;
	struct run x;
	char err[256], sql[256];
	uint64_t records = 0;
	tgsim_default(&p);
	p.steps = 120;
	p.epochs = 2;
	p.workers = 3;
	p.pin = pin;
	p.file_ms = 10;
	if (tgsim_write(trace, &p, &records) != 0)
		exit(1);
	open_run(&x, trace);

	struct dlbn_export_stats es;
	int rc = dlbn_export_sqlite(dbpath, &x.in, &es, err, sizeof(err));
	CHECK(rc == 0, "pin=%d: sqlite export succeeds (%s)", pin, rc ? err : "ok");
	CHECK(es.events == records, "pin=%d: export pass saw every record (%llu of %llu)", pin,
	      (unsigned long long)es.events, (unsigned long long)records);
	sqlite3 *db = open_db(dbpath);
	CHECK(db != NULL, "pin=%d: database opens", pin);
	if (!db) {
		close_run(&x);
		return;
	}
	CHECK(q_int(db, "SELECT count(*) FROM events") == (long long)records,
	      "pin=%d: events rows = records written (%llu)", pin, (unsigned long long)records);
	CHECK(q_int(db, "SELECT count(*) FROM processes") == (long long)x.m.nprocs,
	      "pin=%d: one processes row per process (%zu)", pin, x.m.nprocs);
	CHECK(q_int(db, "SELECT count(*) FROM threads") == (long long)x.m.nthreads,
	      "pin=%d: one threads row per thread (%zu)", pin, x.m.nthreads);
	CHECK(q_int(db, "SELECT sum(records) FROM processes") == (long long)records,
	      "pin=%d: per-process record counts add up", pin);
	CHECK(x.m.steps && q_int(db, "SELECT count(*) FROM steps") == (long long)x.m.steps->n &&
		      x.m.steps->n == 120,
	      "pin=%d: steps rows = model steps (120)", pin);
	CHECK(q_int(db, "SELECT sum(in_window) FROM steps") == (long long)x.a.steps_window &&
		      x.a.steps_window > 0,
	      "pin=%d: in_window marks the verdict's window (%zu steps)", pin, x.a.steps_window);
	snprintf(sql, sizeof(sql), "SELECT min(step) FROM steps WHERE in_window");
	CHECK(q_int(db, sql) == (long long)x.a.steps_warmup, "pin=%d: window starts after warm-up",
	      pin);
	CHECK(q_int(db, "SELECT sum(wait_ns) FROM steps WHERE in_window") > 0,
	      "pin=%d: steps carry waits", pin);
	CHECK(!strcmp(q_text(db, "SELECT value FROM meta WHERE key = 'verdict'"),
		      dlbn_verdict_name(x.a.verdict)),
	      "pin=%d: meta verdict = analysis verdict (%s)", pin, dlbn_verdict_name(x.a.verdict));
	CHECK(!strcmp(q_text(db, "SELECT value FROM meta WHERE key = 'trace_path'"), trace),
	      "pin=%d: meta names the trace", pin);
	CHECK(q_int(db, "SELECT count(*) FROM processes WHERE role = 'training'") == 1,
	      "pin=%d: one training process", pin);
	CHECK(q_int(db, "SELECT count(*) FROM threads WHERE role = 'main'") == 1,
	      "pin=%d: one main thread", pin);
	CHECK(q_int(db, "SELECT count(*) FROM threads WHERE role = 'pin'") == pin,
	      "pin=%d: pin-memory thread found iff present", pin);
	long long nworkers = q_int(db, "SELECT count(*) FROM processes WHERE role = 'worker'");
	CHECK(nworkers >= 3 && q_int(db, "SELECT count(*) FROM workers") == nworkers,
	      "pin=%d: a workers row per worker process (%lld)", pin, nworkers);
	CHECK(q_int(db, "SELECT count(*) FROM worker_busy WHERE busy_fraction > 0 AND "
			"batches_total > 0") >= 3,
	      "pin=%d: worker_busy view: busy workers with batches", pin);
	long long nb = q_int(db, "SELECT count(*) FROM batches");
	CHECK(nb >= 120 - 3 * 2 && nb <= 120 + 3 * 2 * 2,
	      "pin=%d: worker batch segments ~ one per step (%lld)", pin, nb);
	CHECK(q_int(db, "SELECT count(*) FROM batches WHERE dur_ns <= 0 OR end_ns < begin_ns") == 0,
	      "pin=%d: batch segments are forward intervals", pin);
	/* Python view: each step carries its batch's hand-off from the IPC
	 * evidence, the figures the report gives per batch. */
	CHECK(x.m.view == DLBN_VIEW_PYTHON && x.a.recv_ms > 0 && x.a.recv_kib > 0 &&
		      x.a.recv_fds > 0,
	      "pin=%d: python view with hand-off figures (%.3f ms, %.1f KiB, %.2f fds)", pin,
	      x.a.recv_ms, x.a.recv_kib, x.a.recv_fds);
	double per = (double)x.a.steps_window;
	double t_ms =
		(double)q_int(db, "SELECT sum(recv_ns) FROM steps WHERE in_window") / per / 1e6;
	double t_kib =
		(double)q_int(db, "SELECT sum(bytes) FROM steps WHERE in_window") / per / 1024;
	double t_fds = (double)q_int(db, "SELECT sum(nfds) FROM steps WHERE in_window") / per;
	CHECK(near(t_ms, x.a.recv_ms, 0.01) && near(t_kib, x.a.recv_kib, 0.01) &&
		      near(t_fds, x.a.recv_fds, 0.01),
	      "pin=%d: steps' recv_ns/bytes/nfds over the window = the report's hand-off per batch "
	      "(%.3f ms %.1f KiB %.2f fds vs %.3f %.1f %.2f)",
	      pin, t_ms, t_kib, t_fds, x.a.recv_ms, x.a.recv_kib, x.a.recv_fds);
	CHECK(q_int(db,
		    "SELECT count(*) FROM steps WHERE in_window AND (recv_ns <= 0 OR bytes <= 0 "
		    "OR nfds <= 0)") == 0,
	      "pin=%d: every window step has its hand-off", pin);
	CHECK(q_int(db, "SELECT count(*) FROM step_summary") == 2,
	      "pin=%d: step_summary has one row per epoch", pin);
	CHECK(q_int(db, "SELECT count(*) FROM main_thread_waits") > 0,
	      "pin=%d: main_thread_waits view lists waits", pin);
	CHECK(q_int(db, "SELECT count(*) FROM window_steps") == (long long)x.a.steps_window,
	      "pin=%d: window_steps view", pin);
	CHECK(q_int(db, "SELECT count(*) FROM time_by_type WHERE type = 'PREAD'") >= 1,
	      "pin=%d: time_by_type view", pin);
	CHECK(q_int(db, "SELECT count(*) FROM events WHERE type = 'READ' AND fd_kind = 'pipe' "
			"AND ret > 0") > 0,
	      "pin=%d: fd_kind names and ret columns", pin);
	CHECK(q_int(db, "SELECT count(*) FROM events WHERE type = 'MARK' AND "
			"json_extract(detail, '$.kind') = 'FETCH_BEGIN'") == 120,
	      "pin=%d: detail is JSON (one FETCH_BEGIN mark per step)", pin);
	CHECK(q_int(db, "SELECT count(*) FROM events WHERE detail IS NOT NULL AND "
			"NOT json_valid(detail)") == 0,
	      "pin=%d: every detail is valid JSON", pin);
	CHECK(q_int(db, "SELECT count(*) FROM sqlite_master WHERE type = 'index' AND name LIKE "
			"'events_by_%'") == 2,
	      "pin=%d: events indexes exist", pin);
	CHECK(q_int(db, "SELECT count(*) FROM (SELECT 1 FROM events WHERE proc_id = 0 AND t_ns "
			"BETWEEN 0 AND 1000000000)") > 0,
	      "pin=%d: time-range query by process", pin);
	CHECK(q_int(db, "SELECT count(*) FROM events e LEFT JOIN threads t USING (proc_id, "
			"thread_no) WHERE t.tid IS NULL") == 0,
	      "pin=%d: every event belongs to a known thread", pin);
	sqlite3_close(db);

	rc = dlbn_export_perfetto(jsonpath, &x.in, NULL, err, sizeof(err));
	CHECK(rc == 0, "pin=%d: perfetto export succeeds (%s)", pin, rc ? err : "ok");
	CHECK(json_parse(jsonpath) == 0, "pin=%d: perfetto JSON parses", pin);
	CHECK(json_fig("fetch") == 120 && json_fig("step") == 120,
	      "pin=%d: one fetch and one step slice per step (%lld, %lld)", pin, json_fig("fetch"),
	      json_fig("step"));
	CHECK(json_fig("process_name") == (long long)x.m.nprocs,
	      "pin=%d: a named track per process", pin);
	CHECK(json_fig("thread_name") >= (long long)x.m.nthreads,
	      "pin=%d: a named track per thread", pin);
	CHECK(json_fig("batch") == nb, "pin=%d: worker batch slices = batches rows", pin);
	CHECK(json_fig("partial_overlaps") == 0,
	      "pin=%d: every track's slices nest (%lld partial overlaps)", pin,
	      json_fig("partial_overlaps"));
	CHECK(json_fig("window") == 1 && json_fig("verdict_ok") == 1,
	      "pin=%d: window slice and verdict", pin);
	CHECK(json_fig("read_with_ret") > 0, "pin=%d: reads carry args", pin);
	CHECK(files_matching(".tmp-") == 0, "pin=%d: no temporary files left", pin);
	close_run(&x);
}

/*
 * Workers whose feeder thread writes each result after the worker took
 * its next index: batch N ends after batch N+1 began (as in real runs),
 * which one Perfetto track cannot show (it drops slices that overlap
 * without nesting): the batches go on as many lanes as overlap, and none
 * is lost.
 */
static void test_overlapping_batches(void)
{
	struct tgsim_params p;
	struct run x;
	char err[256];
	tgsim_default(&p);
	p.steps = 60;
	p.workers = 2;
	p.batch_ms = 8;
	p.loop_ms = 5;
	p.feeder_lag_ms = 6; /* most of the next batch's work */
	if (tgsim_write(trace, &p, NULL) != 0)
		exit(1);
	open_run(&x, trace);
	int rc = dlbn_export_sqlite(dbpath, &x.in, NULL, err, sizeof(err));
	CHECK(rc == 0, "overlap: sqlite export succeeds (%s)", rc ? err : "ok");
	sqlite3 *db = open_db(dbpath);
	long long nb = db ? q_int(db, "SELECT count(*) FROM batches") : -1;
	long long overlapping =
		db ? q_int(db, "SELECT count(*) FROM batches a JOIN batches b ON a.proc_id = "
			       "b.proc_id AND b.seq = a.seq + 1 WHERE a.end_ns > b.begin_ns")
		   : -1;
	CHECK(nb >= 50 && overlapping >= nb / 2,
	      "overlap: most batches end after the next began (%lld of %lld)", overlapping, nb);
	if (db)
		sqlite3_close(db);
	rc = dlbn_export_perfetto(jsonpath, &x.in, NULL, err, sizeof(err));
	CHECK(rc == 0 && json_parse(jsonpath) == 0, "overlap: perfetto JSON parses (%s)",
	      rc ? err : "ok");
	CHECK(json_fig("partial_overlaps") == 0,
	      "overlap: every track's slices nest (%lld partial overlaps)",
	      json_fig("partial_overlaps"));
	CHECK(json_fig("batch") == nb, "overlap: every batch is a slice (%lld of %lld)",
	      json_fig("batch"), nb);
	CHECK(json_fig("max_batch_lanes") >= 2,
	      "overlap: a worker's batches spread over %lld named lanes",
	      json_fig("max_batch_lanes"));
	close_run(&x);
}

/* ---- NVTX ranges and hostile strings ---------------------------------- */

#define T0 1000000000ll
#define US 1000ll

/* A loop with GPU probes (as the recorder writes them): each 3 ms fetch
 * has its probe complete 1 ms in, so its wait splits 1 ms busy, 2 ms idle,
 * and the fetch slices get "GPU busy" / "GPU idle" children inside them. */
static void write_gpu_trace(int steps)
{
	const int64_t ms = 1000 * US, period = 10 * ms;
	struct tg *g = tg_open(trace, 0);
	if (!g)
		exit(1);
	struct tg_stream *s = tg_stream(g, 0, 0, 4444, 4444);
	tg_process(s, T0 - 10 * ms, 4444, 1, -1, DLBN_START_ROOT, "python3");
	tg_thread(s, T0 - 10 * ms, 4444, 1);
	for (int i = 0; i < steps; i++) {
		int64_t b = T0 + i * period;
		tg_rec(s, DLBN_REC_LAUNCH, b - 2 * ms, "ii", (int64_t)0x7000,
		       (int64_t)DLBN_CU_LAUNCH_KERNEL);
		tg_mark(s, b, DLBN_MARK_FETCH_BEGIN, 1, i);
		tg_rec(s, DLBN_REC_PROBE, b, "ii", (int64_t)(i + 1), (int64_t)0x7000);
		if (i > 0)
			tg_rec(s, DLBN_REC_PROBE_DONE, b + 5 * US, "iii", (int64_t)i,
			       b - period + ms, (int64_t)0);
		tg_mark(s, b + 3 * ms, DLBN_MARK_FETCH_END, 1, i);
	}
	int64_t end = T0 + steps * period;
	tg_rec(s, DLBN_REC_PROBE_DONE, end, "iii", (int64_t)steps, end - period + ms, (int64_t)0);
	tg_exit(s, end + ms, 0, DLBN_EXIT_DTOR);
	tg_stream_final(s);
	if (tg_close(g) != 0)
		exit(1);
}

static void test_gpu_split_slices(void)
{
	struct run x;
	char err[256];
	write_gpu_trace(40);
	open_run(&x, trace);
	CHECK(x.m.gpu.present && x.m.steps == &x.m.py_steps && x.m.py_steps.n == 40,
	      "gpu split: 40 Python-view steps with GPU work (got %zu)", x.m.py_steps.n);
	int rc = dlbn_export_perfetto(jsonpath, &x.in, NULL, err, sizeof(err));
	CHECK(rc == 0 && json_parse(jsonpath) == 0, "gpu split: JSON parses (%s)", rc ? err : "ok");
	CHECK(json_fig("gpu_children") >= 2 * 40 &&
		      json_fig("gpu_children_inside") == json_fig("gpu_children"),
	      "gpu split: %lld busy/idle slices, all inside their fetch (40 split waits)",
	      json_fig("gpu_children"));
	rc = dlbn_export_sqlite(dbpath, &x.in, NULL, err, sizeof(err));
	sqlite3 *db = rc == 0 ? open_db(dbpath) : NULL;
	CHECK(db &&
		      q_int(db, "SELECT count(*) FROM steps WHERE gpu_busy_ns + gpu_idle_ns != "
				"wait_ns") == 0 &&
		      q_int(db, "SELECT count(*) FROM steps WHERE gpu_busy_ns = 1000000 AND "
				"gpu_idle_ns = 2000000 AND gpu_evidence = 'probe'") == 40,
	      "gpu split: every steps row carries 1 ms busy + 2 ms idle from its probe");
	sqlite3_close(db);
	close_run(&x);
}

static void write_nvtx_trace(void)
{
	struct tg *g = tg_open(trace, 0);
	if (!g)
		exit(1);
	struct tg_stream *m = tg_stream(g, 0, 0, 4242, 4242);
	struct tg_stream *o = tg_stream(g, 0, 1, 4242, 4243);
	/* argv0 with a quote, a newline, a tab, a control byte and bytes that
	 * are not UTF-8, next to valid UTF-8 (é). */
	tg_process(m, T0, 4242, 1, -1, DLBN_START_ROOT, "tr\"ain\n\t\x01\xff\xfe\xc3\xa9.py");
	tg_thread(o, T0 + 1 * US, 4243, 0);
	tg_rec(m, DLBN_REC_DOMAIN, T0 + 2 * US, "is", (int64_t)1, "my-domain");
	tg_rec(m, DLBN_REC_STRING, T0 + 3 * US, "is", (int64_t)7, "interned \\ name");
	tg_rec(m, DLBN_REC_RANGE_PUSH, T0 + 10 * US, "iis", (int64_t)0, (int64_t)0, "outer");
	tg_rec(m, DLBN_REC_RANGE_PUSH, T0 + 20 * US, "iis", (int64_t)1, (int64_t)7,
	       (const char *)NULL);
	tg_read(m, T0 + 25 * US, 5 * US, 3, DLBN_FD_FILE, 99, 4096);
	tg_rec(m, DLBN_REC_RANGE_POP, T0 + 40 * US, "i", (int64_t)1);
	tg_rec(m, DLBN_REC_RANGE_POP, T0 + 50 * US, "i", (int64_t)0);
	tg_rec(m, DLBN_REC_RANGE_START, T0 + 60 * US, "iiis", (int64_t)5, (int64_t)0, (int64_t)0,
	       "cross-thread");
	tg_rec(o, DLBN_REC_RANGE_END, T0 + 90 * US, "i", (int64_t)5);
	tg_rec(m, DLBN_REC_RANGE_PUSH, T0 + 95 * US, "iis", (int64_t)0, (int64_t)0, "never popped");
	tg_rec(m, DLBN_REC_NVTX_MARK, T0 + 96 * US, "iis", (int64_t)0, (int64_t)0, "a mark");
	tg_rec(m, DLBN_REC_LAUNCH, T0 + 97 * US, "ii", (int64_t)0, (int64_t)DLBN_CU_LAUNCH_KERNEL);
	tg_rec(m, 99, T0 + 98 * US, "is", (int64_t)1, "unknown record type");
	tg_exit(m, T0 + 100 * US, 0, DLBN_EXIT_DTOR);
	/* exec keeps the pid: a second process instance with pid 4242 */
	struct tg_stream *e = tg_stream(g, 1, 0, 4242, 4242);
	tg_process(e, T0 + 110 * US, 4242, 1, -1, DLBN_START_JOIN, "after-exec");
	tg_rec(e, DLBN_REC_RANGE_PUSH, T0 + 120 * US, "iis", (int64_t)0, (int64_t)7,
	       (const char *)NULL);
	tg_rec(e, DLBN_REC_RANGE_POP, T0 + 130 * US, "i", (int64_t)0);
	tg_exit(e, T0 + 140 * US, 0, DLBN_EXIT_DTOR);
	tg_stream_final(e);
	tg_stream_final(o);
	tg_stream_final(m);
	if (tg_close(g) != 0)
		exit(1);
}

static void test_nvtx_and_strings(void)
{
	struct run x;
	char err[256];
	write_nvtx_trace();
	open_run(&x, trace);
	int rc = dlbn_export_sqlite(dbpath, &x.in, NULL, err, sizeof(err));
	CHECK(rc == 0, "nvtx: sqlite export succeeds (%s)", rc ? err : "ok");
	sqlite3 *db = open_db(dbpath);
	if (db) {
		CHECK(q_int(db, "SELECT count(*) FROM ranges") == 5, "nvtx: 5 ranges (%lld)",
		      q_int(db, "SELECT count(*) FROM ranges"));
		CHECK(q_int(db, "SELECT count(*) FROM ranges WHERE proc_id = 1 AND name = ''") == 1,
		      "nvtx: STRING ids are per process instance (not named after exec)");
		CHECK(q_int(db, "SELECT dur_ns FROM ranges WHERE name = 'outer' AND depth = 0") ==
			      40 * US,
		      "nvtx: outer push/pop paired, 40 us");
		CHECK(q_int(db, "SELECT dur_ns FROM ranges WHERE name = 'interned \\ name' AND "
				"depth = 1 AND domain = 'my-domain'") == 20 * US,
		      "nvtx: inner range named by its STRING id, in its domain, depth 1");
		CHECK(q_int(db, "SELECT end_thread_no FROM ranges WHERE kind = 'start' AND name = "
				"'cross-thread' AND range_id = 5 AND dur_ns = 30000") == 1,
		      "nvtx: start/end paired across threads");
		CHECK(q_int(db, "SELECT count(*) FROM ranges WHERE name = 'never popped' AND "
				"end_ns IS NULL") == 1,
		      "nvtx: a range open at the end has no end");
		CHECK(q_int(db, "SELECT count(*) FROM events WHERE type = 'TYPE_99'") == 1,
		      "nvtx: unknown record types are kept");
		CHECK(!strcmp(q_text(db, "SELECT argv0 FROM processes WHERE proc_id = 0"),
			      "tr\"ain\n\t\x01\xc3\xbf\xc3\xbe\xc3\xa9.py"),
		      "nvtx: argv0 stored as UTF-8, invalid bytes as their Latin-1 reading (the "
		      "string JSON's \\u00ff gives)");
		sqlite3_close(db);
	}
	rc = dlbn_export_perfetto(jsonpath, &x.in, NULL, err, sizeof(err));
	CHECK(rc == 0, "nvtx: perfetto export succeeds (%s)", rc ? err : "ok");
	CHECK(json_parse(jsonpath) == 0, "nvtx: JSON with hostile strings parses");
	CHECK(json_fig("quoted_name") == 1, "nvtx: the quote survives in the process name");
	CHECK(json_fig("nvtx_x") == 4, "nvtx: push/pop ranges as slices (%lld)",
	      json_fig("nvtx_x"));
	CHECK(json_fig("max_tracks_per_pid") == 2,
	      "nvtx: a pid reused after exec gets its own process track");
	CHECK(json_fig("outer_dur_ns") == 40 * US, "nvtx: slice duration exact (%lld ns)",
	      json_fig("outer_dur_ns"));
	CHECK(json_fig("ph_b") == 1 && json_fig("ph_e") == 1, "nvtx: start/end as async slice");
	close_run(&x);
}

/* ---- failures ---------------------------------------------------------- */

static int write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");
	if (!f)
		return -1;
	fputs(text, f);
	return fclose(f);
}

static int file_is(const char *path, const char *text)
{
	char buf[256] = {0};
	FILE *f = fopen(path, "r");
	if (!f)
		return 0;
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	return n == strlen(text) && !memcmp(buf, text, n);
}

/* In a child with a file size limit: the export must fail cleanly. */
static int export_under_fsize_limit(struct run *x, int sqlite, const char *path)
{
	fflush(stdout); /* the child must not repeat the parent's buffered lines */
	pid_t pid = fork();
	if (pid == 0) {
		char err[256];
		struct rlimit rl = {64 * 1024, 64 * 1024};
		signal(SIGXFSZ, SIG_IGN);
		setrlimit(RLIMIT_FSIZE, &rl);
		int rc = sqlite ? dlbn_export_sqlite(path, &x->in, NULL, err, sizeof(err))
				: dlbn_export_perfetto(path, &x->in, NULL, err, sizeof(err));
		if (rc)
			printf("# expected failure: %s\n", err);
		fflush(stdout);
		_exit(rc ? 0 : 1);
	}
	int st = 0;
	waitpid(pid, &st, 0);
	return WIFEXITED(st) && WEXITSTATUS(st) == 0;
}

static void test_failures(void)
{
	struct tgsim_params p;
	struct run x;
	char err[256], path[600];
	int rc;
	tgsim_default(&p);
	p.steps = 400; /* a trace whose exports exceed 64 KiB */
	if (tgsim_write(trace, &p, NULL) != 0)
		exit(1);
	open_run(&x, trace);

	err[0] = 0;
	snprintf(path, sizeof(path), "%s/no/such/dir/out.db", dir);
	CHECK(dlbn_export_sqlite(path, &x.in, NULL, err, sizeof(err)) == -1 &&
		      strstr(err, "no/such/dir/out.db") && strstr(err, "No such file"),
	      "unwritable sqlite path: error naming it (%s)", err);
	snprintf(path, sizeof(path), "%s/no/such/dir/out.json", dir);
	err[0] = 0;
	CHECK(dlbn_export_perfetto(path, &x.in, NULL, err, sizeof(err)) == -1 && err[0],
	      "unwritable perfetto path: error (%s)", err);
	err[0] = 0;
	CHECK(dlbn_export_sqlite(dir, &x.in, NULL, err, sizeof(err)) == -1 &&
		      strstr(err, "directory"),
	      "a directory as output: error (%s)", err);

	err[0] = 0;
	CHECK(dlbn_export_sqlite("/dev/null", &x.in, NULL, err, sizeof(err)) == -1 &&
		      strstr(err, "regular file"),
	      "sqlite to a device: refused (%s)", err);
	struct stat devnull;
	CHECK(dlbn_export_perfetto("/dev/null", &x.in, NULL, err, sizeof(err)) == 0 &&
		      stat("/dev/null", &devnull) == 0 && S_ISCHR(devnull.st_mode),
	      "perfetto to /dev/null: written in place, the device stays a device");
	snprintf(path, sizeof(path), "%s/fifo", dir);
	CHECK(mkfifo(path, 0600) == 0, "a FIFO as perfetto output");
	pid_t reader = fork();
	if (reader == 0) { /* consume the FIFO into a regular file */
		char cmd[1400];
		snprintf(cmd, sizeof(cmd), "timeout 30 cat '%s' > '%s.out'", path, path);
		_exit(system(cmd) == 0 ? 0 : 1);
	}
	rc = dlbn_export_perfetto(path, &x.in, NULL, err, sizeof(err));
	int st_reader = 0;
	waitpid(reader, &st_reader, 0);
	strcat(path, ".out");
	CHECK(rc == 0 && WIFEXITED(st_reader) && json_parse(path) == 0,
	      "perfetto streamed through a FIFO parses (%s)", rc ? err : "ok");

	struct stat before, after;
	stat(trace, &before);
	err[0] = 0;
	CHECK(dlbn_export_sqlite(trace, &x.in, NULL, err, sizeof(err)) == -1 &&
		      strstr(err, "trace"),
	      "the trace's own path is refused (%s)", err);
	CHECK(stat(trace, &after) == 0 && after.st_ino == before.st_ino &&
		      after.st_size == before.st_size,
	      "the trace is untouched");

	/* A write that fails half way keeps the previous file and leaves no
	 * temporary. */
	snprintf(path, sizeof(path), "%s/keep.db", dir);
	write_file(path, "previous\n");
	CHECK(export_under_fsize_limit(&x, 1, path), "sqlite export fails under a 64 KiB limit");
	CHECK(file_is(path, "previous\n"), "failed sqlite export keeps the previous file");
	snprintf(path, sizeof(path), "%s/keep.json", dir);
	write_file(path, "previous\n");
	CHECK(export_under_fsize_limit(&x, 0, path), "perfetto export fails under a 64 KiB limit");
	CHECK(file_is(path, "previous\n"), "failed perfetto export keeps the previous file");
	CHECK(files_matching(".tmp-") == 0, "failed exports leave no temporary files");

	/* A good export replaces an existing file. */
	CHECK(dlbn_export_perfetto(path, &x.in, NULL, err, sizeof(err)) == 0 &&
		      json_parse(path) == 0,
	      "an existing file is replaced by a complete export");
	struct stat st;
	mode_t um = umask(0);
	umask(um);
	CHECK(stat(path, &st) == 0 && (st.st_mode & 0777) == (0666 & ~um),
	      "export file mode follows the umask (%o)", (unsigned)(st.st_mode & 0777));
	close_run(&x);
}

/* ---- throughput (reported, not asserted) -------------------------------- */

static void bench(void)
{
	struct tgsim_params p;
	struct run x;
	char err[256];
	uint64_t records = 0;
	struct dlbn_export_stats es, ep;
	const char *steps = getenv("DLBN_EXPORT_BENCH_STEPS");
	tgsim_default(&p);
	p.steps = steps ? atoll(steps) : 8000;
	p.workers = 4;
	p.batch_ms = 8;
	if (tgsim_write(trace, &p, &records) != 0)
		exit(1);
	open_run(&x, trace);
	int rc = dlbn_export_sqlite(dbpath, &x.in, &es, err, sizeof(err));
	int rc2 = dlbn_export_perfetto(jsonpath, &x.in, &ep, err, sizeof(err));
	struct stat sd = {0}, sj = {0};
	stat(dbpath, &sd);
	stat(jsonpath, &sj);
	CHECK(rc == 0 && rc2 == 0 && es.events == records, "bench: %llu records exported",
	      (unsigned long long)records);
	printf("# sqlite: %llu event rows in %.3f s (%.0f rows/s; whole export %.3f s incl. "
	       "indexes, %.1f MB)\n",
	       (unsigned long long)es.events, es.insert_s, (double)es.events / es.insert_s,
	       es.total_s, (double)sd.st_size / 1e6);
	printf("# perfetto: %llu JSON events in %.3f s (%.0f events/s, %.1f MB)\n",
	       (unsigned long long)ep.events, ep.total_s, (double)ep.events / ep.total_s,
	       (double)sj.st_size / 1e6);
	close_run(&x);
}

int main(void)
{
	if (!mkdtemp(dir))
		return 1;
	snprintf(trace, sizeof(trace), "%s/trace.bin", dir);
	snprintf(dbpath, sizeof(dbpath), "%s/out.db", dir);
	snprintf(jsonpath, sizeof(jsonpath), "%s/out.json", dir);
	test_dataloader_run(0);
	test_dataloader_run(1);
	test_overlapping_batches();
	test_gpu_split_slices();
	test_nvtx_and_strings();
	test_failures();
	bench();
	char cmd[600];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	if (!check_failures && system(cmd) != 0)
		printf("# could not remove %s\n", dir);
	CHECK_EXIT();
}
