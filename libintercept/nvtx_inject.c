/*
 * nvtx_inject.c - NVTX v3 injection (ranges into the trace) and dlbn's own
 * "loader wait" ranges when another tool owns NVTX.  See nvtx_inject.h for
 * the two modes.
 *
 * Receive mode.  Each NVTX instance (one per library that compiled the
 * header-only nvtx3 in) calls InitializeInjectionNvtx2 once; we fill its CORE
 * and CORE2 callback tables with the functions below.  All instances share
 * one set of tables here, so a domain or registered string has one id per
 * process whichever library created it.
 *
 * Records (dlbn_trace.h):
 *   DOMAIN       once per domain (id >= 1; id 0 is NVTX's default domain)
 *   STRING       once per registered string (id >= 1)
 *   RANGE_PUSH / NVTX_MARK / RANGE_START carry (domain_id, msg_id, msg):
 *                msg_id != 0 and msg nil for a registered string, msg_id 0
 *                and the text inline (truncated to DLBN_NVTX_MSG_MAX bytes,
 *                UTF-8) for an ad-hoc message, msg_id 0 and nil for none.
 *   Wide (W) messages are converted to UTF-8 (wchar_t is UTF-32 on Linux),
 *   code points that are not valid become '?'.
 *
 * Invariants:
 *   - Domain and string handles handed to NVTX are their ids cast to
 *     pointers; tables are fixed-size arrays that never move or shrink, so
 *     the push/pop path reads them without locks and never allocates.
 *   - A table entry is fully written before its handle is returned, so a
 *     thread that holds a handle sees a complete entry.
 *   - emitted_gen == fork_gen means this process instance has already
 *     written the entry's DOMAIN/STRING record; a forked child bumps
 *     fork_gen, so the first use in the child re-announces the entry in the
 *     child's stream (the analyzer never needs the parent's records).
 *
 * Emit mode compiles the normal NVTX implementation into this file (no
 * NVTX_NO_IMPL): its calls go to whatever library NVTX_INJECTION64_PATH
 * names.  Nothing here calls that implementation in receive mode.
 */
#define NVTX_AS_SYSTEM_HEADER
#include <nvtx3/nvToolsExt.h>

#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <wchar.h>

#include "nvtx_inject.h"
#include "recorder.h"

#define NVTX_MAX_DOMAINS     256u
#define NVTX_MAX_STRINGS     4096u
#define NVTX_DOMAIN_NAME_MAX 64u
/* Push depth is tracked per thread for the default domain and the first
 * NVTX_DEPTH_SLOTS-1 domains; later domains share the last slot. */
#define NVTX_DEPTH_SLOTS 16u

enum nvtx_mode { NVTX_MODE_OFF = 0, NVTX_MODE_RECEIVE = 1, NVTX_MODE_EMIT = 2 };

struct nvtx_domain {
	uint32_t emitted_gen;
	uint32_t len;
	char name[NVTX_DOMAIN_NAME_MAX];
};

struct nvtx_string {
	uint32_t emitted_gen;
	uint32_t len;
	char text[DLBN_NVTX_MSG_MAX];
};

/* A message as recorded: registered id, or inline bytes, or neither. */
struct nvtx_msg {
	int64_t id;
	const char *text;
	size_t len;
	char utf8[DLBN_NVTX_MSG_MAX];
};

static int nvtx_mode = NVTX_MODE_RECEIVE; /* nvtx_setup() refines it */
static uint32_t fork_gen = 1;

/* Entry 0 of each table is unused: id 0 means "none / default domain". */
static struct nvtx_domain domains[NVTX_MAX_DOMAINS];
static uint32_t n_domains = 1; /* next free id; atomic */
static pthread_mutex_t domain_lock = PTHREAD_MUTEX_INITIALIZER;
static struct nvtx_string strings[NVTX_MAX_STRINGS];
static uint32_t n_strings = 1;	   /* next free id; atomic */
static uint64_t next_range_id = 1; /* atomic */

static __thread int32_t push_depth[NVTX_DEPTH_SLOTS];

/* ---- helpers ------------------------------------------------------------ */

static void nvtx_after_fork_child(void)
{
	__atomic_add_fetch(&fork_gen, 1, __ATOMIC_RELAXED);
}

static uint32_t domain_id_of(nvtxDomainHandle_t domain)
{
	uintptr_t id = (uintptr_t)domain;
	return id < __atomic_load_n(&n_domains, __ATOMIC_ACQUIRE) ? (uint32_t)id : 0;
}

/* Make sure this process instance's trace has the DOMAIN record for id. */
static void announce_domain(uint64_t t, uint32_t id)
{
	struct nvtx_domain *d = &domains[id];
	uint32_t gen = __atomic_load_n(&fork_gen, __ATOMIC_RELAXED);

	if (id == 0 || DLBN_LIKELY(__atomic_load_n(&d->emitted_gen, __ATOMIC_RELAXED) == gen))
		return;
	/* Two threads may both announce after a fork: a duplicate is harmless. */
	__atomic_store_n(&d->emitted_gen, gen, __ATOMIC_RELAXED);
	int64_t f[1] = {id};
	rec_emit_str(DLBN_REC_DOMAIN, t, f, 1, d->name, d->len);
}

static void announce_string(uint64_t t, uint32_t id)
{
	struct nvtx_string *s = &strings[id];
	uint32_t gen = __atomic_load_n(&fork_gen, __ATOMIC_RELAXED);

	if (DLBN_LIKELY(__atomic_load_n(&s->emitted_gen, __ATOMIC_RELAXED) == gen))
		return;
	__atomic_store_n(&s->emitted_gen, gen, __ATOMIC_RELAXED);
	int64_t f[1] = {id};
	rec_emit_str(DLBN_REC_STRING, t, f, 1, s->text, s->len);
}

/* UTF-32 to UTF-8 into out (at most cap bytes, whole characters only). */
static size_t wide_to_utf8(const wchar_t *w, char *out, size_t cap)
{
	size_t n = 0;

	for (; *w; w++) {
		uint32_t c = (uint32_t)*w;
		size_t need = c < 0x80 ? 1 : c < 0x800 ? 2 : c < 0x10000 ? 3 : 4;

		if (c > 0x10ffff || (c >= 0xd800 && c <= 0xdfff)) {
			c = '?';
			need = 1;
		}
		if (n + need > cap)
			break;
		if (need == 1) {
			out[n++] = (char)c;
		} else if (need == 2) {
			out[n++] = (char)(0xc0 | (c >> 6));
			out[n++] = (char)(0x80 | (c & 0x3f));
		} else if (need == 3) {
			out[n++] = (char)(0xe0 | (c >> 12));
			out[n++] = (char)(0x80 | ((c >> 6) & 0x3f));
			out[n++] = (char)(0x80 | (c & 0x3f));
		} else {
			out[n++] = (char)(0xf0 | (c >> 18));
			out[n++] = (char)(0x80 | ((c >> 12) & 0x3f));
			out[n++] = (char)(0x80 | ((c >> 6) & 0x3f));
			out[n++] = (char)(0x80 | (c & 0x3f));
		}
	}
	return n;
}

/* Truncate an ASCII/UTF-8 message without splitting a character. */
static size_t utf8_prefix_len(const char *s)
{
	size_t n = strnlen(s, DLBN_NVTX_MSG_MAX + 1);

	if (n <= DLBN_NVTX_MSG_MAX)
		return n;
	n = DLBN_NVTX_MSG_MAX;
	while (n > 0 && ((unsigned char)s[n] & 0xc0) == 0x80)
		n--;
	return n;
}

static void msg_from_ascii(struct nvtx_msg *m, const char *s)
{
	m->id = 0;
	m->text = s;
	m->len = s ? utf8_prefix_len(s) : 0;
}

static void msg_from_wide(struct nvtx_msg *m, const wchar_t *w)
{
	m->id = 0;
	m->text = w ? m->utf8 : NULL;
	m->len = w ? wide_to_utf8(w, m->utf8, sizeof(m->utf8)) : 0;
}

static void msg_from_attr(struct nvtx_msg *m, const nvtxEventAttributes_t *a)
{
	m->id = 0;
	m->text = NULL;
	m->len = 0;
	if (!a || a->size < offsetof(nvtxEventAttributes_t, message) + sizeof(a->message))
		return;
	switch (a->messageType) {
	case NVTX_MESSAGE_TYPE_ASCII:
		msg_from_ascii(m, a->message.ascii);
		break;
	case NVTX_MESSAGE_TYPE_UNICODE:
		msg_from_wide(m, a->message.unicode);
		break;
	case NVTX_MESSAGE_TYPE_REGISTERED: {
		uintptr_t id = (uintptr_t)a->message.registered;
		if (id > 0 && id < __atomic_load_n(&n_strings, __ATOMIC_ACQUIRE))
			m->id = (int64_t)id;
		break;
	}
	default:
		break;
	}
}

/* Emit [type, t, fields..., domain_id, msg_id, msg] with the announcements
 * the record depends on. */
static void emit_with_msg(uint8_t type, uint64_t t, int64_t *f, unsigned n, uint32_t domain_id,
			  const struct nvtx_msg *m)
{
	announce_domain(t, domain_id);
	if (m->id)
		announce_string(t, (uint32_t)m->id);
	f[n] = domain_id;
	f[n + 1] = m->id;
	rec_emit_str(type, t, f, n + 2, m->text, m->len);
}

static int32_t *depth_slot(uint32_t domain_id)
{
	return &push_depth[domain_id < NVTX_DEPTH_SLOTS ? domain_id : NVTX_DEPTH_SLOTS - 1];
}

/* ---- the shared event paths (push/pop are the hot ones) ------------------ */

static int range_push(uint32_t domain_id, const struct nvtx_msg *m)
{
	int32_t *depth = depth_slot(domain_id);
	int level = (*depth)++;

	if (recorder_on() && hook_enter()) {
		int64_t f[2];
		emit_with_msg(DLBN_REC_RANGE_PUSH, clock_now_ns(), f, 0, domain_id, m);
		hook_leave();
	}
	return level;
}

static int range_pop(uint32_t domain_id)
{
	int32_t *depth = depth_slot(domain_id);

	if (*depth <= 0)
		return -1; /* unbalanced pop: NVTX's error value, nothing recorded */
	if (recorder_on() && hook_enter()) {
		int64_t f[1] = {domain_id};
		rec_emit(DLBN_REC_RANGE_POP, clock_now_ns(), f, 1);
		hook_leave();
	}
	return --(*depth);
}

static nvtxRangeId_t range_start(uint32_t domain_id, const struct nvtx_msg *m)
{
	nvtxRangeId_t id = __atomic_fetch_add(&next_range_id, 1, __ATOMIC_RELAXED);

	if (recorder_on() && hook_enter()) {
		int64_t f[3] = {(int64_t)id};
		emit_with_msg(DLBN_REC_RANGE_START, clock_now_ns(), f, 1, domain_id, m);
		hook_leave();
	}
	return id;
}

static void range_end(nvtxRangeId_t id)
{
	if (recorder_on() && hook_enter()) {
		int64_t f[1] = {(int64_t)id};
		rec_emit(DLBN_REC_RANGE_END, clock_now_ns(), f, 1);
		hook_leave();
	}
}

static void mark(uint32_t domain_id, const struct nvtx_msg *m)
{
	if (recorder_on() && hook_enter()) {
		int64_t f[2];
		emit_with_msg(DLBN_REC_NVTX_MARK, clock_now_ns(), f, 0, domain_id, m);
		hook_leave();
	}
}

/* ---- CORE callbacks ------------------------------------------------------- */

static void cb_mark_ex(const nvtxEventAttributes_t *a)
{
	struct nvtx_msg m;
	msg_from_attr(&m, a);
	mark(0, &m);
}

static void cb_mark_a(const char *s)
{
	struct nvtx_msg m;
	msg_from_ascii(&m, s);
	mark(0, &m);
}

static void cb_mark_w(const wchar_t *s)
{
	struct nvtx_msg m;
	msg_from_wide(&m, s);
	mark(0, &m);
}

static nvtxRangeId_t cb_range_start_ex(const nvtxEventAttributes_t *a)
{
	struct nvtx_msg m;
	msg_from_attr(&m, a);
	return range_start(0, &m);
}

static nvtxRangeId_t cb_range_start_a(const char *s)
{
	struct nvtx_msg m;
	msg_from_ascii(&m, s);
	return range_start(0, &m);
}

static nvtxRangeId_t cb_range_start_w(const wchar_t *s)
{
	struct nvtx_msg m;
	msg_from_wide(&m, s);
	return range_start(0, &m);
}

static void cb_range_end(nvtxRangeId_t id)
{
	range_end(id);
}

static int cb_range_push_ex(const nvtxEventAttributes_t *a)
{
	struct nvtx_msg m;
	msg_from_attr(&m, a);
	return range_push(0, &m);
}

static int cb_range_push_a(const char *s)
{
	struct nvtx_msg m;
	msg_from_ascii(&m, s);
	return range_push(0, &m);
}

static int cb_range_push_w(const wchar_t *s)
{
	struct nvtx_msg m;
	msg_from_wide(&m, s);
	return range_push(0, &m);
}

static int cb_range_pop(void)
{
	return range_pop(0);
}

/* ---- CORE2 (domain) callbacks -------------------------------------------- */

static void cb_domain_mark_ex(nvtxDomainHandle_t d, const nvtxEventAttributes_t *a)
{
	struct nvtx_msg m;
	msg_from_attr(&m, a);
	mark(domain_id_of(d), &m);
}

static nvtxRangeId_t cb_domain_range_start_ex(nvtxDomainHandle_t d, const nvtxEventAttributes_t *a)
{
	struct nvtx_msg m;
	msg_from_attr(&m, a);
	return range_start(domain_id_of(d), &m);
}

static void cb_domain_range_end(nvtxDomainHandle_t d, nvtxRangeId_t id)
{
	(void)d;
	range_end(id);
}

static int cb_domain_range_push_ex(nvtxDomainHandle_t d, const nvtxEventAttributes_t *a)
{
	struct nvtx_msg m;
	msg_from_attr(&m, a);
	return range_push(domain_id_of(d), &m);
}

static int cb_domain_range_pop(nvtxDomainHandle_t d)
{
	return range_pop(domain_id_of(d));
}

/* Returns the string's id, 0 when the table is full (NVTX then sees a NULL
 * handle and the events that use it are recorded without a message). */
static uint32_t register_string(const char *text, size_t len)
{
	uint32_t id = __atomic_load_n(&n_strings, __ATOMIC_RELAXED);

	do {
		if (id >= NVTX_MAX_STRINGS)
			return 0;
	} while (!__atomic_compare_exchange_n(&n_strings, &id, id + 1, true, __ATOMIC_ACQ_REL,
					      __ATOMIC_RELAXED));
	/* The slot is ours alone until the handle is returned (invariant). */
	struct nvtx_string *s = &strings[id];
	memcpy(s->text, text, len);
	s->len = (uint32_t)len;
	s->emitted_gen = 0;
	if (recorder_on() && hook_enter()) {
		announce_string(clock_now_ns(), id);
		hook_leave();
	}
	return id;
}

static nvtxStringHandle_t cb_domain_register_string_a(nvtxDomainHandle_t d, const char *s)
{
	(void)d; /* string ids are process-wide; the domain adds nothing */
	if (!s)
		return NULL;
	return (nvtxStringHandle_t)(uintptr_t)register_string(s, utf8_prefix_len(s));
}

static nvtxStringHandle_t cb_domain_register_string_w(nvtxDomainHandle_t d, const wchar_t *s)
{
	char utf8[DLBN_NVTX_MSG_MAX];

	(void)d;
	if (!s)
		return NULL;
	return (nvtxStringHandle_t)(uintptr_t)register_string(utf8,
							      wide_to_utf8(s, utf8, sizeof(utf8)));
}

/* Domains with the same name (e.g. created by two libraries) share an id. */
static uint32_t create_domain(const char *name, size_t len)
{
	uint32_t id;

	if (len >= NVTX_DOMAIN_NAME_MAX)
		len = NVTX_DOMAIN_NAME_MAX - 1;
	pthread_mutex_lock(&domain_lock);
	for (id = 1; id < n_domains; id++)
		if (domains[id].len == len && memcmp(domains[id].name, name, len) == 0)
			break;
	if (id == n_domains) {
		if (id >= NVTX_MAX_DOMAINS) {
			id = 0; /* full: events fall into the default domain */
		} else {
			memcpy(domains[id].name, name, len);
			domains[id].len = (uint32_t)len;
			domains[id].emitted_gen = 0;
			__atomic_store_n(&n_domains, id + 1, __ATOMIC_RELEASE);
		}
	}
	pthread_mutex_unlock(&domain_lock);
	if (id && recorder_on() && hook_enter()) {
		announce_domain(clock_now_ns(), id);
		hook_leave();
	}
	return id;
}

static nvtxDomainHandle_t cb_domain_create_a(const char *name)
{
	if (!name)
		return NULL;
	return (nvtxDomainHandle_t)(uintptr_t)create_domain(name,
							    strnlen(name, NVTX_DOMAIN_NAME_MAX));
}

static nvtxDomainHandle_t cb_domain_create_w(const wchar_t *name)
{
	char utf8[NVTX_DOMAIN_NAME_MAX];

	if (!name)
		return NULL;
	return (nvtxDomainHandle_t)(uintptr_t)create_domain(
		utf8, wide_to_utf8(name, utf8, sizeof(utf8) - 1));
}

/* Ids are never reused, so a destroyed domain's events stay attributable. */
static void cb_domain_destroy(nvtxDomainHandle_t d)
{
	(void)d;
}

/* ---- injection ------------------------------------------------------------ */

typedef int (*get_module_table_fn)(NvtxCallbackModule, NvtxFunctionTable *, unsigned int *);

#define SET_CB(table, size, cbid, fn)                                                              \
	do {                                                                                       \
		if ((size) > (unsigned)(cbid) && (table)[cbid])                                    \
			*(table)[cbid] = (NvtxFunctionPointer)(fn);                                \
	} while (0)

static bool fill_core(get_module_table_fn get_table)
{
	NvtxFunctionTable t = NULL;
	unsigned int n = 0;

	if (!get_table(NVTX_CB_MODULE_CORE, &t, &n) || !t)
		return false;
	SET_CB(t, n, NVTX_CBID_CORE_MarkEx, cb_mark_ex);
	SET_CB(t, n, NVTX_CBID_CORE_MarkA, cb_mark_a);
	SET_CB(t, n, NVTX_CBID_CORE_MarkW, cb_mark_w);
	SET_CB(t, n, NVTX_CBID_CORE_RangeStartEx, cb_range_start_ex);
	SET_CB(t, n, NVTX_CBID_CORE_RangeStartA, cb_range_start_a);
	SET_CB(t, n, NVTX_CBID_CORE_RangeStartW, cb_range_start_w);
	SET_CB(t, n, NVTX_CBID_CORE_RangeEnd, cb_range_end);
	SET_CB(t, n, NVTX_CBID_CORE_RangePushEx, cb_range_push_ex);
	SET_CB(t, n, NVTX_CBID_CORE_RangePushA, cb_range_push_a);
	SET_CB(t, n, NVTX_CBID_CORE_RangePushW, cb_range_push_w);
	SET_CB(t, n, NVTX_CBID_CORE_RangePop, cb_range_pop);
	return true;
}

static bool fill_core2(get_module_table_fn get_table)
{
	NvtxFunctionTable t = NULL;
	unsigned int n = 0;

	if (!get_table(NVTX_CB_MODULE_CORE2, &t, &n) || !t)
		return false;
	SET_CB(t, n, NVTX_CBID_CORE2_DomainMarkEx, cb_domain_mark_ex);
	SET_CB(t, n, NVTX_CBID_CORE2_DomainRangeStartEx, cb_domain_range_start_ex);
	SET_CB(t, n, NVTX_CBID_CORE2_DomainRangeEnd, cb_domain_range_end);
	SET_CB(t, n, NVTX_CBID_CORE2_DomainRangePushEx, cb_domain_range_push_ex);
	SET_CB(t, n, NVTX_CBID_CORE2_DomainRangePop, cb_domain_range_pop);
	SET_CB(t, n, NVTX_CBID_CORE2_DomainRegisterStringA, cb_domain_register_string_a);
	SET_CB(t, n, NVTX_CBID_CORE2_DomainRegisterStringW, cb_domain_register_string_w);
	SET_CB(t, n, NVTX_CBID_CORE2_DomainCreateA, cb_domain_create_a);
	SET_CB(t, n, NVTX_CBID_CORE2_DomainCreateW, cb_domain_create_w);
	SET_CB(t, n, NVTX_CBID_CORE2_DomainDestroy, cb_domain_destroy);
	return true;
}

static bool nvtx_disabled_by_env(void)
{
	const char *v = getenv("DLBN_NVTX");
	return v && strcmp(v, "0") == 0;
}

/*
 * Called by each NVTX instance on its first NVTX call, while that
 * instance's other threads spin: no NVTX calls from here.  Returning 0 turns
 * the instance's NVTX calls into no-ops, which is what a disabled or passive
 * recorder wants.
 */
int InitializeInjectionNvtx2(const void *(*get_export_table)(uint32_t))
{
	const NvtxExportTableCallbacks *etbl;

	if (!get_export_table || nvtx_mode != NVTX_MODE_RECEIVE || nvtx_disabled_by_env() ||
	    !recorder_on())
		return 0;
	etbl = get_export_table(NVTX_ETID_CALLBACKS);
	if (!etbl || etbl->struct_size < sizeof(*etbl) || !etbl->GetModuleFunctionTable)
		return 0;
	/* CORE2 is optional (an old instance without domains still works). */
	if (!fill_core(etbl->GetModuleFunctionTable))
		return 0;
	fill_core2(etbl->GetModuleFunctionTable);
	return 1;
}

/* ---- setup ---------------------------------------------------------------- */

static bool same_file(const char *a, const char *b)
{
	struct stat sa, sb;

	if (stat(a, &sa) != 0 || stat(b, &sb) != 0)
		return false;
	return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

void nvtx_setup(void)
{
	static char self[PATH_MAX];
	Dl_info info;
	const char *owner;

	if (nvtx_disabled_by_env()) {
		nvtx_mode = NVTX_MODE_OFF;
		return;
	}
	pthread_atfork(NULL, NULL, nvtx_after_fork_child);
	if (!dladdr((void *)&nvtx_setup, &info) || !info.dli_fname ||
	    !realpath(info.dli_fname, self)) {
		nvtx_mode = NVTX_MODE_OFF;
		return;
	}
	owner = getenv("NVTX_INJECTION64_PATH");
	if (!owner || !*owner) {
		/* An absolute path: the program may chdir before its first NVTX call. */
		if (setenv("NVTX_INJECTION64_PATH", self, 1) != 0) {
			nvtx_mode = NVTX_MODE_OFF;
			return;
		}
		nvtx_mode = NVTX_MODE_RECEIVE;
	} else {
		nvtx_mode = same_file(owner, self) ? NVTX_MODE_RECEIVE : NVTX_MODE_EMIT;
	}
}

/* ---- emit mode: dlbn's waits as ranges in the owning tool ------------------ */

static nvtxDomainHandle_t dlbn_domain;
static nvtxEventAttributes_t wait_attr;
static bool wait_range_open; /* main thread only */

static void emit_mode_init(void)
{
	dlbn_domain = nvtxDomainCreateA("dlbn");
	memset(&wait_attr, 0, sizeof(wait_attr));
	wait_attr.version = NVTX_VERSION;
	wait_attr.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
	wait_attr.colorType = NVTX_COLOR_ARGB;
	wait_attr.color = 0xffd62728; /* red: time the loop waited */
	wait_attr.messageType = NVTX_MESSAGE_TYPE_REGISTERED;
	wait_attr.message.registered = nvtxDomainRegisterStringA(dlbn_domain, "loader wait");
	if (!wait_attr.message.registered) {
		wait_attr.messageType = NVTX_MESSAGE_TYPE_ASCII;
		wait_attr.message.ascii = "loader wait";
	}
}

void nvtx_wait_begins(uint64_t t_ns)
{
	static bool initialised;

	(void)t_ns; /* NVTX takes its own timestamp; it is "now" anyway */
	if (nvtx_mode != NVTX_MODE_EMIT || wait_range_open)
		return;
	if (!initialised) {
		emit_mode_init();
		initialised = true;
	}
	nvtxDomainRangePushEx(dlbn_domain, &wait_attr);
	wait_range_open = true;
}

void nvtx_wait_finished(uint8_t rec_type, uint64_t t0_ns, uint64_t dur_ns)
{
	(void)rec_type;
	(void)t0_ns;
	(void)dur_ns;
	if (!wait_range_open)
		return;
	nvtxDomainRangePop(dlbn_domain);
	wait_range_open = false;
}
