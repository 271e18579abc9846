/*
 * stacks.c - native stacks at the longest main-thread waits (see stacks.h
 * for the policy, the records and why libunwind is dlopen()ed).
 *
 * Everything here runs on the main thread at the end of a wait, so the
 * state is plain statics without locks.  Module lookups are cached in a
 * fixed table of address ranges; only a miss walks the loader's list
 * (dl_iterate_phdr).
 *
 * Invariants:
 *   - owner_pid is the pid the tables describe.  A forked child sees a
 *     different pid on its first capture and starts over: its MODULE records
 *     go into its own stream, its top-K and rate limit are its own.
 *   - A module's MODULE record is written (emitted) before any STACK that
 *     refers to its id in this process instance.
 */
#include <dlfcn.h>
#include <link.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "recorder.h"
#include "stacks.h"

#define STACK_TOP_K	   16
#define STACK_MIN_NS	   1000000ull /* waits shorter than 1 ms: never */
#define STACK_RATE_PER_S   10
#define STACK_BURST	   20
#define STACK_EXTRA_FRAMES 8 /* room for our own frames, skipped */
#define STACK_MAX_MODULES  256
#define STACK_PATH_MAX	   512

enum stacks_policy { POLICY_UNDECIDED = 0, POLICY_OFF, POLICY_ADAPTIVE, POLICY_ALL };

struct module {
	uintptr_t lo, hi; /* [lo, hi) spans the object's PT_LOAD segments */
	uintptr_t bias;	  /* dlpi_addr */
	bool emitted;
	char path[STACK_PATH_MAX];
};

typedef int (*unw_backtrace_fn)(void **buffer, int size);

static int policy;
static unw_backtrace_fn backtrace_fn;
static pid_t owner_pid;

static struct module modules[STACK_MAX_MODULES];
static unsigned n_modules;
static uintptr_t self_lo, self_hi; /* libdlbn.so itself */

static uint64_t top_k[STACK_TOP_K]; /* longest captured durations */
static unsigned n_top;
static uint64_t tokens_ns; /* rate limit bucket, in ns of credit */
static uint64_t last_refill_ns;

/* ---- set-up (first call) --------------------------------------------------- */

static int policy_from_env(void)
{
	const char *v = getenv("DLBN_STACKS");

	if (v && strcmp(v, "0") == 0)
		return POLICY_OFF;
	if (v && strcmp(v, "all") == 0)
		return POLICY_ALL;
	return POLICY_ADAPTIVE;
}

/* RTLD_LOCAL keeps libunwind's _Unwind_* and backtrace out of the global
 * scope; the lookup goes through the handle, with the real dlsym. */
static unw_backtrace_fn load_libunwind(void)
{
	void *h = dlopen("libunwind.so.8", RTLD_LOCAL | RTLD_LAZY);

	if (!h)
		return NULL;
	return (unw_backtrace_fn)real_dlsym(h, "unw_backtrace");
}

struct phdr_query {
	uintptr_t ip;
	struct module *out;
};

static int find_object(struct dl_phdr_info *info, size_t size, void *arg)
{
	struct phdr_query *q = arg;
	uintptr_t lo = UINTPTR_MAX, hi = 0;

	(void)size;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		if (ph->p_type != PT_LOAD)
			continue;
		uintptr_t start = info->dlpi_addr + ph->p_vaddr;
		if (start < lo)
			lo = start;
		if (start + ph->p_memsz > hi)
			hi = start + ph->p_memsz;
	}
	if (q->ip < lo || q->ip >= hi)
		return 0;
	q->out->lo = lo;
	q->out->hi = hi;
	q->out->bias = info->dlpi_addr;
	q->out->emitted = false;
	if (info->dlpi_name && info->dlpi_name[0]) {
		strncpy(q->out->path, info->dlpi_name, STACK_PATH_MAX - 1);
		q->out->path[STACK_PATH_MAX - 1] = '\0';
	} else {
		/* The main program has no name in the loader's list. */
		ssize_t n = readlink("/proc/self/exe", q->out->path, STACK_PATH_MAX - 1);
		q->out->path[n > 0 ? n : 0] = '\0';
	}
	return 1;
}

/* Fills *m with the object containing ip; false if none does. */
static bool lookup_object(uintptr_t ip, struct module *m)
{
	struct phdr_query q = {ip, m};
	return dl_iterate_phdr(find_object, &q) != 0;
}

static bool stacks_init(void)
{
	struct module self = {0};

	policy = policy_from_env();
	if (policy == POLICY_OFF)
		return false;
	backtrace_fn = load_libunwind();
	if (!backtrace_fn || !lookup_object((uintptr_t)&stacks_init, &self)) {
		policy = POLICY_OFF;
		return false;
	}
	self_lo = self.lo;
	self_hi = self.hi;
	return true;
}

/* ---- per-process state ----------------------------------------------------- */

static void adopt_process(pid_t pid)
{
	owner_pid = pid;
	for (unsigned i = 0; i < n_modules; i++)
		modules[i].emitted = false;
	n_top = 0;
	tokens_ns = (uint64_t)STACK_BURST * 1000000000ull;
	last_refill_ns = 0;
}

/* ---- policy ---------------------------------------------------------------- */

static unsigned shortest_top(void)
{
	unsigned m = 0;
	for (unsigned i = 1; i < n_top; i++)
		if (top_k[i] < top_k[m])
			m = i;
	return m;
}

/* Each capture costs one token = 1e9 / STACK_RATE_PER_S ns of credit. */
static bool rate_allows(uint64_t now)
{
	const uint64_t cost = 1000000000ull / STACK_RATE_PER_S;
	const uint64_t cap = (uint64_t)STACK_BURST * cost;

	if (last_refill_ns)
		tokens_ns += (now - last_refill_ns) * STACK_RATE_PER_S;
	last_refill_ns = now;
	if (tokens_ns > cap)
		tokens_ns = cap;
	if (tokens_ns < cost)
		return false;
	tokens_ns -= cost;
	return true;
}

static bool worth_capturing(uint64_t dur_ns, uint64_t now)
{
	if (dur_ns < STACK_MIN_NS)
		return false;
	if (policy == POLICY_ALL)
		return true;
	if (n_top == STACK_TOP_K && dur_ns <= top_k[shortest_top()])
		return false;
	if (!rate_allows(now))
		return false;
	if (n_top < STACK_TOP_K)
		top_k[n_top++] = dur_ns;
	else
		top_k[shortest_top()] = dur_ns;
	return true;
}

/* ---- capture ----------------------------------------------------------------- */

/* Module id (index in modules[]) for ip; -1 when no object contains it. */
static int module_of(uintptr_t ip, uint64_t now)
{
	unsigned i;

	for (i = 0; i < n_modules; i++)
		if (ip >= modules[i].lo && ip < modules[i].hi)
			break;
	if (i == n_modules) {
		if (n_modules == STACK_MAX_MODULES || !lookup_object(ip, &modules[n_modules]))
			return -1;
		n_modules++;
	}
	if (!modules[i].emitted) {
		int64_t f[2] = {i, (int64_t)modules[i].bias};
		rec_emit_str(DLBN_REC_MODULE, now, f, 2, modules[i].path, strlen(modules[i].path));
		modules[i].emitted = true;
	}
	return (int)i;
}

static void capture(uint8_t rec_type, uint64_t t0_ns, uint64_t now)
{
	void *ips[DLBN_STACK_MAX_FRAMES + STACK_EXTRA_FRAMES];
	int64_t pairs[2 * DLBN_STACK_MAX_FRAMES];
	unsigned n_pairs = 0;
	int n = backtrace_fn(ips, (int)(sizeof(ips) / sizeof(ips[0])));
	int i = 0;

	/* Our own frames (this module, the fan-out, the hook) say nothing. */
	while (i < n && (uintptr_t)ips[i] >= self_lo && (uintptr_t)ips[i] < self_hi)
		i++;
	for (; i < n && n_pairs < 2 * DLBN_STACK_MAX_FRAMES; i++) {
		uintptr_t ip = (uintptr_t)ips[i] - 1; /* inside the call instruction */
		int id = module_of(ip, now);
		if (id < 0)
			continue;
		pairs[n_pairs++] = id;
		pairs[n_pairs++] = (int64_t)(ip - modules[id].bias);
	}
	if (n_pairs == 0)
		return;
	int64_t f[2] = {rec_type, (int64_t)(now - t0_ns)};
	rec_emit_stack(now, f, 2, pairs, n_pairs);
}

void stacks_wait_finished(uint8_t rec_type, uint64_t t0_ns, uint64_t dur_ns)
{
	uint64_t now;
	pid_t pid;

	/* A fetch mark ends inside the Python bootstrap's ctypes call: its
	 * native stack is libffi's, not the wait's.  The poll/read/semaphore
	 * waits inside the fetch are captured on their own. */
	if (rec_type == DLBN_REC_MARK)
		return;
	if (dur_ns < STACK_MIN_NS || policy == POLICY_OFF || !recorder_on())
		return;
	if (policy == POLICY_UNDECIDED && !stacks_init())
		return;
	pid = getpid();
	if (pid != owner_pid)
		adopt_process(pid);
	now = clock_now_ns();
	if (!worth_capturing(dur_ns, now))
		return;
	capture(rec_type, t0_ns, now);
}
