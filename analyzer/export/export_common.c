/*
 * export_common.c - what the SQLite and Perfetto exports share (export.h):
 * names of the trace's enum values,
 * a byte buffer with JSON escaping, the per-type record layout (which
 * field is dur_ns, fd, fd_kind, ino, ret), and the streaming pairing of
 * NVTX ranges and worker batch segments.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "export/export.h"
#include "util/json.h"

/* ---- names ------------------------------------------------------------ */

const char *dlbn_fd_kind_name(int64_t kind)
{
	static const char *const names[] = {"unknown", "pipe", "unix", "socket",
					    "file",    "shm",  "other"};
	return kind >= 0 && kind < 7 ? names[kind] : "unknown";
}

const char *dlbn_role_name(int role)
{
	return role == DLBN_ROLE_TRAINING ? "training"
	       : role == DLBN_ROLE_WORKER ? "worker"
					  : "other";
}

const char *dlbn_start_name(int64_t start)
{
	return start == DLBN_START_ROOT	  ? "root"
	       : start == DLBN_START_FORK ? "fork"
	       : start == DLBN_START_JOIN ? "join"
					  : "unknown";
}

const char *dlbn_exit_how_name(int64_t how)
{
	return how == DLBN_EXIT_EXIT	? "exit"
	       : how == DLBN_EXIT__EXIT ? "_exit"
	       : how == DLBN_EXIT_DTOR	? "return"
					: "unknown";
}

const char *dlbn_mark_name(int64_t kind)
{
	switch (kind) {
	case DLBN_MARK_FETCH_BEGIN:
		return "FETCH_BEGIN";
	case DLBN_MARK_FETCH_END:
		return "FETCH_END";
	case DLBN_MARK_FETCH_STOP:
		return "FETCH_STOP";
	case DLBN_MARK_ITER_BEGIN:
		return "ITER_BEGIN";
	case DLBN_MARK_STEP:
		return "STEP";
	case DLBN_MARK_HANDOFF:
		return "HANDOFF";
	default:
		return "MARK";
	}
}

const char *dlbn_evidence_name(int ev)
{
	switch (ev) {
	case DLBN_GPU_EV_PROBE:
		return "probe";
	case DLBN_GPU_EV_NO_WORK:
		return "no_work";
	case DLBN_GPU_EV_UNKNOWN:
		return "unknown";
	default:
		return NULL;
	}
}

const char *dlbn_cu_api_name(int64_t api)
{
	switch (api) {
	case DLBN_CU_LAUNCH_KERNEL:
		return "cuLaunchKernel";
	case DLBN_CU_LAUNCH_KERNEL_EX:
		return "cuLaunchKernelEx";
	case DLBN_CU_GRAPH_LAUNCH:
		return "cuGraphLaunch";
	case DLBN_CU_MEMCPY:
		return "cuMemcpy";
	case DLBN_CU_MEMCPY_HTOD:
		return "cuMemcpyHtoD";
	case DLBN_CU_MEMCPY_DTOH:
		return "cuMemcpyDtoH";
	case DLBN_CU_MEMCPY_DTOD:
		return "cuMemcpyDtoD";
	case DLBN_CU_STREAM_SYNC:
		return "cuStreamSynchronize";
	case DLBN_CU_CTX_SYNC:
		return "cuCtxSynchronize";
	case DLBN_CU_EVENT_SYNC:
		return "cuEventSynchronize";
	case DLBN_CU_STREAM_QUERY:
		return "cuStreamQuery";
	case DLBN_CU_EVENT_QUERY:
		return "cuEventQuery";
	default:
		return "cu?";
	}
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

double dlbn_now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* ---- buffer and JSON -------------------------------------------------- */

static int buf_reserve(struct dlbn_buf *b, size_t more)
{
	if (b->n + more + 1 <= b->cap)
		return 0;
	size_t cap = b->cap ? b->cap : 256;
	while (cap < b->n + more + 1)
		cap *= 2;
	char *p = realloc(b->p, cap);
	if (!p) {
		b->oom = 1;
		return -1;
	}
	b->p = p;
	b->cap = cap;
	return 0;
}

void dlbn_buf_put(struct dlbn_buf *b, const char *s, size_t n)
{
	if (buf_reserve(b, n))
		return;
	memcpy(b->p + b->n, s, n);
	b->n += n;
	b->p[b->n] = 0;
}

void dlbn_buf_puts(struct dlbn_buf *b, const char *s)
{
	dlbn_buf_put(b, s, strlen(s));
}

void dlbn_buf_int(struct dlbn_buf *b, int64_t v)
{
	char tmp[24];
	char *e = tmp + sizeof(tmp), *s = e;
	uint64_t u = v < 0 ? 0 - (uint64_t)v : (uint64_t)v;
	do
		*--s = (char)('0' + u % 10);
	while (u /= 10);
	if (v < 0)
		*--s = '-';
	dlbn_buf_put(b, s, (size_t)(e - s));
}

void dlbn_buf_us(struct dlbn_buf *b, int64_t ns)
{
	char frac[4];
	uint64_t u = ns < 0 ? 0 - (uint64_t)ns : (uint64_t)ns;
	if (ns < 0)
		dlbn_buf_put(b, "-", 1);
	dlbn_buf_int(b, (int64_t)(u / 1000));
	unsigned r = (unsigned)(u % 1000);
	frac[0] = '.';
	frac[1] = (char)('0' + r / 100);
	frac[2] = (char)('0' + r / 10 % 10);
	frac[3] = (char)('0' + r % 10);
	dlbn_buf_put(b, frac, 4);
}

void dlbn_buf_json_str(struct dlbn_buf *b, const char *s, size_t n)
{
	static const char hex[] = "0123456789abcdef";
	const unsigned char *u = (const unsigned char *)s;
	if (buf_reserve(b, n + 2))
		return;
	dlbn_buf_put(b, "\"", 1);
	size_t run = 0; /* start of the pending run of plain bytes */
	for (size_t i = 0; i < n;) {
		unsigned char c = u[i];
		if (c >= 0x20 && c != '"' && c != '\\' && c < 0x7f) {
			i++;
			continue;
		}
		size_t ul = c >= 0x80 ? dlbn_utf8_len(u + i, n - i) : 0;
		if (ul) {
			i += ul;
			continue;
		}
		dlbn_buf_put(b, s + run, i - run);
		char esc[6] = {'\\', 'u', '0', '0', hex[c >> 4], hex[c & 15]};
		if (c == '"' || c == '\\') {
			esc[1] = (char)c;
			dlbn_buf_put(b, esc, 2);
		} else if (c == '\n') {
			dlbn_buf_put(b, "\\n", 2);
		} else if (c == '\t') {
			dlbn_buf_put(b, "\\t", 2);
		} else {
			dlbn_buf_put(b, esc, 6);
		}
		run = ++i;
	}
	dlbn_buf_put(b, s + run, n - run);
	dlbn_buf_put(b, "\"", 1);
}

void dlbn_buf_utf8(struct dlbn_buf *b, const char *s, size_t n)
{
	static const char replacement[] = "\xef\xbf\xbd"; /* U+FFFD */
	const unsigned char *u = (const unsigned char *)s;
	size_t run = 0;
	for (size_t i = 0; i < n;) {
		if (u[i] && u[i] < 0x80) {
			i++;
			continue;
		}
		size_t ul = u[i] ? dlbn_utf8_len(u + i, n - i) : 0;
		if (ul) {
			i += ul;
			continue;
		}
		dlbn_buf_put(b, s + run, i - run);
		if (u[i]) { /* U+0080..U+00FF, as the JSON writers' \u00XX reads */
			char latin1[2] = {(char)(0xc0 | u[i] >> 6), (char)(0x80 | (u[i] & 0x3f))};
			dlbn_buf_put(b, latin1, 2);
		} else {
			dlbn_buf_put(b, replacement, 3);
		}
		run = ++i;
	}
	dlbn_buf_put(b, s + run, n - run);
}

void dlbn_buf_free(struct dlbn_buf *b)
{
	free(b->p);
	memset(b, 0, sizeof(*b));
}

/* ---- record layout ---------------------------------------------------- */

#define NTYPES 128

enum field_enum { FE_NONE, FE_MARK, FE_START, FE_EXIT_HOW, FE_CU_API, FE_FD_KIND };

/* Per type, filled once: the layout, field names and which fields hold an
 * enum value worth naming (the per-record path then does no lookups). */
static struct dlbn_rec_layout layouts[NTYPES];
static const char *field_names[NTYPES][DLBN_REC_MAX_FIELDS];
static uint8_t field_enums[NTYPES][DLBN_REC_MAX_FIELDS];
static int layouts_ready;

static uint8_t field_enum_of(int type, const char *field)
{
	if (type == DLBN_REC_MARK && !strcmp(field, "kind"))
		return FE_MARK;
	if (type == DLBN_REC_PROCESS && !strcmp(field, "start"))
		return FE_START;
	if (type == DLBN_REC_EXIT && !strcmp(field, "how"))
		return FE_EXIT_HOW;
	if ((type == DLBN_REC_LAUNCH || type == DLBN_REC_MEMCPY || type == DLBN_REC_SYNC) &&
	    !strcmp(field, "api"))
		return FE_CU_API;
	if (!strcmp(field, "fd_kind"))
		return FE_FD_KIND;
	return FE_NONE;
}

static void layouts_init(void)
{
	for (int t = 0; t < NTYPES; t++) {
		struct dlbn_rec_layout *l = &layouts[t];
		l->dur = l->fd = l->fd_kind = l->ino = l->ret = -1;
		for (int i = 0; i < DLBN_REC_MAX_FIELDS; i++) {
			const char *f = dlbn_field_name(t, i);
			if (!f)
				continue;
			field_names[t][i] = f;
			field_enums[t][i] = field_enum_of(t, f);
			if (!strcmp(f, "dur_ns"))
				l->dur = (int8_t)i;
			else if (!strcmp(f, "fd"))
				l->fd = (int8_t)i;
			else if (!strcmp(f, "fd_kind"))
				l->fd_kind = (int8_t)i;
			else if (!strcmp(f, "ino"))
				l->ino = (int8_t)i;
			else if (!strcmp(f, "ret") || (t == DLBN_REC_MEMCPY && !strcmp(f, "bytes")))
				l->ret = (int8_t)i;
		}
	}
	layouts_ready = 1;
}

const struct dlbn_rec_layout *dlbn_rec_layout(int type)
{
	static const struct dlbn_rec_layout none = {-1, -1, -1, -1, -1};
	if (!layouts_ready)
		layouts_init();
	return type >= 0 && type < NTYPES ? &layouts[type] : &none;
}

int64_t dlbn_rec_dur(const struct dlbn_record *r)
{
	int i = dlbn_rec_layout(r->type)->dur;
	if (i < 0 || i >= r->nfields || r->kind[i] != DLBN_V_INT || r->f[i] <= 0)
		return 0;
	return r->f[i] > DLBN_DUR_LIMIT ? DLBN_DUR_LIMIT : r->f[i];
}

/* A name for an enum-valued field, or NULL to keep the number. */
static const char *enum_value_name(int type, int i, int64_t v)
{
	switch (type >= 0 && type < NTYPES && i < DLBN_REC_MAX_FIELDS ? field_enums[type][i]
								      : FE_NONE) {
	case FE_MARK:
		return dlbn_mark_name(v);
	case FE_START:
		return dlbn_start_name(v);
	case FE_EXIT_HOW:
		return dlbn_exit_how_name(v);
	case FE_CU_API:
		return dlbn_cu_api_name(v);
	case FE_FD_KIND:
		return dlbn_fd_kind_name(v);
	default:
		return NULL;
	}
}

static void field_json(struct dlbn_buf *b, const struct dlbn_record *r, int i)
{
	switch (r->kind[i]) {
	case DLBN_V_INT: {
		const char *en = enum_value_name(r->type, i, r->f[i]);
		if (en)
			dlbn_buf_json_str(b, en, strlen(en));
		else
			dlbn_buf_int(b, r->f[i]);
		break;
	}
	case DLBN_V_STR:
		dlbn_buf_json_str(b, r->str[i], (size_t)r->f[i]);
		break;
	case DLBN_V_ARR:
		dlbn_buf_put(b, "[", 1);
		for (int k = 0; k < r->narr; k++) {
			if (k)
				dlbn_buf_put(b, ",", 1);
			dlbn_buf_int(b, r->arr[k]);
		}
		dlbn_buf_put(b, "]", 1);
		break;
	default:
		dlbn_buf_put(b, "null", 4);
	}
}

int dlbn_rec_detail_json(struct dlbn_buf *b, const struct dlbn_record *r, const char *open)
{
	const struct dlbn_rec_layout *l = dlbn_rec_layout(r->type);
	int n = 0;
	for (int i = 0; i < r->nfields; i++) {
		if (i == l->dur || i == l->fd || i == l->fd_kind || i == l->ino || i == l->ret ||
		    r->kind[i] == DLBN_V_NONE)
			continue;
		const char *name =
			r->type >= 0 && r->type < NTYPES ? field_names[r->type][i] : NULL;
		dlbn_buf_puts(b, n ? "," : open);
		if (name) {
			dlbn_buf_put(b, "\"", 1);
			dlbn_buf_puts(b, name); /* names are plain identifiers */
			dlbn_buf_put(b, "\":", 2);
		} else {
			dlbn_buf_put(b, "\"f", 2);
			dlbn_buf_int(b, i);
			dlbn_buf_put(b, "\":", 2);
		}
		field_json(b, r, i);
		n++;
	}
	return n;
}

/* ---- pairing: NVTX ranges and worker batches -------------------------- */

/* uint64 key -> pointer, linear probing with backward-shift deletion. */
struct kv_slot {
	uint64_t key;
	void *val; /* NULL: empty */
};
struct kv_map {
	struct kv_slot *s;
	size_t cap, n;
};

static size_t kv_hash(uint64_t k, size_t cap)
{
	return (size_t)((k * 0x9e3779b97f4a7c15ull) >> 20) & (cap - 1);
}

static struct kv_slot *kv_find(const struct kv_map *m, uint64_t key)
{
	if (!m->cap)
		return NULL;
	for (size_t i = kv_hash(key, m->cap);; i = (i + 1) & (m->cap - 1)) {
		if (!m->s[i].val)
			return NULL;
		if (m->s[i].key == key)
			return &m->s[i];
	}
}

/* Put key -> val; returns the value it replaced (caller frees), or NULL.
 * On out of memory returns val itself (not stored). */
static void *kv_put(struct kv_map *m, uint64_t key, void *val)
{
	struct kv_slot *e = kv_find(m, key);
	if (e) {
		void *old = e->val;
		e->val = val;
		return old;
	}
	if ((m->n + 1) * 2 > m->cap) {
		size_t ncap = m->cap ? m->cap * 2 : 64;
		struct kv_slot *ns = calloc(ncap, sizeof(*ns));
		if (!ns)
			return val;
		for (size_t i = 0; i < m->cap; i++) {
			if (!m->s[i].val)
				continue;
			size_t j = kv_hash(m->s[i].key, ncap);
			while (ns[j].val)
				j = (j + 1) & (ncap - 1);
			ns[j] = m->s[i];
		}
		free(m->s);
		m->s = ns;
		m->cap = ncap;
	}
	size_t i = kv_hash(key, m->cap);
	while (m->s[i].val)
		i = (i + 1) & (m->cap - 1);
	m->s[i].key = key;
	m->s[i].val = val;
	m->n++;
	return NULL;
}

/* Remove the entry at e (from kv_find), keeping probe chains intact. */
static void kv_del(struct kv_map *m, struct kv_slot *e)
{
	size_t i = (size_t)(e - m->s), j = i;
	m->s[i].val = NULL;
	for (;;) {
		j = (j + 1) & (m->cap - 1);
		if (!m->s[j].val)
			break;
		size_t h = kv_hash(m->s[j].key, m->cap);
		/* move j back to i unless its home lies cyclically in (i, j] */
		if ((j > i && (h <= i || h > j)) || (j < i && h <= i && h > j)) {
			m->s[i] = m->s[j];
			m->s[j].val = NULL;
			i = j;
		}
	}
	m->n--;
}

static void kv_free(struct kv_map *m, int free_vals)
{
	for (size_t i = 0; free_vals && i < m->cap; i++)
		free(m->s[i].val);
	free(m->s);
	memset(m, 0, sizeof(*m));
}

#define PUSH_DEPTH_MAX 64
#define BATCH_QUEUE    16

struct open_range {
	int64_t begin;
	uint32_t thread;
	int64_t domain_id;
	char *name;
};

struct push_stack {
	struct open_range v[PUSH_DEPTH_MAX];
	int n;
};

struct batch_queue {
	int64_t start[BATCH_QUEUE];
	uint32_t thread[BATCH_QUEUE];
	unsigned head, n;
	uint64_t seq;
};

struct dlbn_pairs {
	const struct dlbn_model *m;
	struct kv_map strings;	     /* (proc, STRING id) -> char * */
	struct kv_map domains;	     /* (proc, domain id) -> char * */
	struct kv_map started;	     /* (proc, range id) -> struct open_range * */
	struct push_stack **stacks;  /* per thread, allocated on first push */
	struct batch_queue *batches; /* per process */
	struct dlbn_buf msg;	     /* inline message, NUL terminated */
};

static uint64_t pkey(uint32_t proc, int64_t id)
{
	return (uint64_t)proc << 32 | (uint32_t)id;
}

struct dlbn_pairs *dlbn_pairs_new(const struct dlbn_model *m)
{
	struct dlbn_pairs *p = calloc(1, sizeof(*p));
	if (!p)
		return NULL;
	p->m = m;
	p->stacks = calloc(m->nthreads ? m->nthreads : 1, sizeof(*p->stacks));
	p->batches = calloc(m->nprocs ? m->nprocs : 1, sizeof(*p->batches));
	if (!p->stacks || !p->batches) {
		dlbn_pairs_free(p);
		return NULL;
	}
	return p;
}

void dlbn_pairs_free(struct dlbn_pairs *p)
{
	if (!p)
		return;
	kv_free(&p->strings, 1);
	kv_free(&p->domains, 1);
	for (size_t i = 0; i < p->started.cap; i++) {
		struct open_range *o = p->started.s[i].val;
		if (o)
			free(o->name);
	}
	kv_free(&p->started, 1);
	for (size_t i = 0; p->stacks && i < p->m->nthreads; i++) {
		if (!p->stacks[i])
			continue;
		for (int k = 0; k < p->stacks[i]->n; k++)
			free(p->stacks[i]->v[k].name);
		free(p->stacks[i]);
	}
	free(p->stacks);
	free(p->batches);
	dlbn_buf_free(&p->msg);
	free(p);
}

static char *copy_str(const char *s, size_t n)
{
	char *c = malloc(n + 1);
	if (c) {
		memcpy(c, s, n);
		c[n] = 0;
	}
	return c;
}

/* Remember an interned text (STRING or DOMAIN record); -1 out of memory. */
static int remember(struct kv_map *map, uint32_t proc, const struct dlbn_record *r)
{
	if (r->nfields < 2 || r->kind[0] != DLBN_V_INT || r->kind[1] != DLBN_V_STR)
		return 0;
	char *c = copy_str(r->str[1], (size_t)r->f[1]);
	if (!c)
		return -1;
	void *old = kv_put(map, pkey(proc, r->f[0]), c);
	if (old == c) { /* not stored */
		free(c);
		return -1;
	}
	free(old); /* re-announced after a fork: same text */
	return 0;
}

const char *dlbn_pairs_msg(struct dlbn_pairs *p, const struct dlbn_record *r, int msg_id_field)
{
	int mi = msg_id_field + 1;
	if (mi < r->nfields && r->kind[mi] == DLBN_V_STR) {
		p->msg.n = 0;
		dlbn_buf_put(&p->msg, r->str[mi], (size_t)r->f[mi]);
		return p->msg.oom || !p->msg.p ? "" : p->msg.p;
	}
	if (msg_id_field < r->nfields && r->kind[msg_id_field] == DLBN_V_INT) {
		uint32_t proc = p->m->threads[r->stream->index].proc_index;
		struct kv_slot *e = kv_find(&p->strings, pkey(proc, r->f[msg_id_field]));
		if (e)
			return e->val;
	}
	return "";
}

static const char *domain_name(struct dlbn_pairs *p, uint32_t proc, int64_t id)
{
	struct kv_slot *e = id ? kv_find(&p->domains, pkey(proc, id)) : NULL;
	return e ? e->val : "";
}

static int64_t ifld(const struct dlbn_record *r, int i)
{
	return i < r->nfields && r->kind[i] == DLBN_V_INT ? r->f[i] : 0;
}

static int range_push(struct dlbn_pairs *p, const struct dlbn_record *r)
{
	uint32_t ti = r->stream->index;
	if (!p->stacks[ti] && !(p->stacks[ti] = calloc(1, sizeof(struct push_stack))))
		return -1;
	struct push_stack *s = p->stacks[ti];
	if (s->n == PUSH_DEPTH_MAX) /* runaway nesting: keep the outer ranges */
		return 0;
	struct open_range *o = &s->v[s->n];
	if (!(o->name = strdup(dlbn_pairs_msg(p, r, 1))))
		return -1;
	o->begin = r->t_ns;
	o->thread = ti;
	o->domain_id = ifld(r, 0);
	s->n++;
	return 0;
}

static int range_pop(struct dlbn_pairs *p, const struct dlbn_record *r, dlbn_interval_fn fn,
		     void *ctx)
{
	uint32_t ti = r->stream->index;
	struct push_stack *s = p->stacks[ti];
	int64_t dom = ifld(r, 0);
	int k = s ? s->n - 1 : -1;
	while (k >= 0 && s->v[k].domain_id != dom) /* NVTX stacks are per domain */
		k--;
	if (k < 0)
		return 0;
	struct open_range o = s->v[k];
	memmove(&s->v[k], &s->v[k + 1], (size_t)(s->n - k - 1) * sizeof(s->v[0]));
	s->n--;
	uint32_t proc = p->m->threads[ti].proc_index;
	struct dlbn_interval iv = {DLBN_IV_PUSH, proc, ti, ti,	   o.begin,
				   r->t_ns,	 k,    0,  o.name, domain_name(p, proc, dom)};
	int rc = fn(ctx, &iv);
	free(o.name);
	return rc;
}

static int range_start(struct dlbn_pairs *p, const struct dlbn_record *r)
{
	uint32_t ti = r->stream->index, proc = p->m->threads[ti].proc_index;
	struct open_range *o = malloc(sizeof(*o));
	if (!o || !(o->name = strdup(dlbn_pairs_msg(p, r, 2)))) {
		free(o);
		return -1;
	}
	o->begin = r->t_ns;
	o->thread = ti;
	o->domain_id = ifld(r, 1);
	struct open_range *old = kv_put(&p->started, pkey(proc, ifld(r, 0)), o);
	if (old == o) {
		free(o->name);
		free(o);
		return -1;
	}
	if (old) { /* range id reused without an END: drop the older one */
		free(old->name);
		free(old);
	}
	return 0;
}

static int range_end(struct dlbn_pairs *p, const struct dlbn_record *r, dlbn_interval_fn fn,
		     void *ctx)
{
	uint32_t ti = r->stream->index, proc = p->m->threads[ti].proc_index;
	uint64_t id = (uint64_t)ifld(r, 0);
	struct kv_slot *e = kv_find(&p->started, pkey(proc, (int64_t)id));
	if (!e)
		return 0;
	struct open_range *o = e->val;
	kv_del(&p->started, e);
	struct dlbn_interval iv = {
		DLBN_IV_START, proc, o->thread, ti,	 o->begin,
		r->t_ns,       0,    id,	o->name, domain_name(p, proc, o->domain_id)};
	int rc = fn(ctx, &iv);
	free(o->name);
	free(o);
	return rc;
}

/*
 * Worker batches, the model's rule without its pipe table: in a worker an
 * index message is a pipe read of more than its 4-byte length header, and
 * the result is a pipe write of more than 4 bytes (workers read only their
 * index queue and write only the result queue).  The write's start ends
 * the batch; starts queue up because the feeder thread writes late.
 */
static int batch_record(struct dlbn_pairs *p, const struct dlbn_record *r, dlbn_interval_fn fn,
			void *ctx)
{
	uint32_t ti = r->stream->index, proc = p->m->threads[ti].proc_index;
	if (p->m->procs[proc].role != DLBN_ROLE_WORKER || ifld(r, 2) != DLBN_FD_PIPE ||
	    ifld(r, 4) <= 4)
		return 0;
	struct batch_queue *q = &p->batches[proc];
	if (r->type == DLBN_REC_READ) {
		if (q->n == BATCH_QUEUE) { /* results never written: drop the oldest */
			q->head = (q->head + 1) % BATCH_QUEUE;
			q->n--;
		}
		unsigned tail = (q->head + q->n) % BATCH_QUEUE;
		q->start[tail] = r->t_ns + dlbn_rec_dur(r);
		q->thread[tail] = ti;
		q->n++;
		return 0;
	}
	if (!q->n)
		return 0;
	struct dlbn_interval iv = {DLBN_IV_BATCH, proc, q->thread[q->head], ti, q->start[q->head],
				   r->t_ns,	  0,	q->seq++,	    "", ""};
	q->head = (q->head + 1) % BATCH_QUEUE;
	q->n--;
	return fn(ctx, &iv);
}

int dlbn_pairs_feed(struct dlbn_pairs *p, const struct dlbn_record *r, dlbn_interval_fn fn,
		    void *ctx)
{
	uint32_t proc = p->m->threads[r->stream->index].proc_index;
	switch (r->type) {
	case DLBN_REC_STRING:
		return remember(&p->strings, proc, r);
	case DLBN_REC_DOMAIN:
		return remember(&p->domains, proc, r);
	case DLBN_REC_RANGE_PUSH:
		return range_push(p, r);
	case DLBN_REC_RANGE_POP:
		return range_pop(p, r, fn, ctx);
	case DLBN_REC_RANGE_START:
		return range_start(p, r);
	case DLBN_REC_RANGE_END:
		return range_end(p, r, fn, ctx);
	case DLBN_REC_READ:
	case DLBN_REC_WRITE:
		return batch_record(p, r, fn, ctx);
	default:
		return 0;
	}
}

int dlbn_pairs_finish(struct dlbn_pairs *p, dlbn_interval_fn fn, void *ctx)
{
	int rc = 0;
	for (size_t ti = 0; !rc && ti < p->m->nthreads; ti++) {
		struct push_stack *s = p->stacks[ti];
		uint32_t proc = p->m->threads[ti].proc_index;
		for (int k = 0; !rc && s && k < s->n; k++) {
			struct dlbn_interval iv = {DLBN_IV_PUSH,
						   proc,
						   (uint32_t)ti,
						   (uint32_t)ti,
						   s->v[k].begin,
						   -1,
						   k,
						   0,
						   s->v[k].name,
						   domain_name(p, proc, s->v[k].domain_id)};
			rc = fn(ctx, &iv);
		}
	}
	for (size_t i = 0; !rc && i < p->started.cap; i++) {
		struct open_range *o = p->started.s[i].val;
		if (!o)
			continue;
		uint32_t proc = (uint32_t)(p->started.s[i].key >> 32);
		struct dlbn_interval iv = {DLBN_IV_START,
					   proc,
					   o->thread,
					   o->thread,
					   o->begin,
					   -1,
					   0,
					   (uint32_t)p->started.s[i].key,
					   o->name,
					   domain_name(p, proc, o->domain_id)};
		rc = fn(ctx, &iv);
	}
	return rc;
}
