/*
 * recnames.c - names of record types and of their fields (dlbn_trace.h),
 * for --dump, error messages, the exports and tests, and what the field
 * names tell: the names of enum values and the record layout
 * (recnames.h).  Keep in step with dlbn_trace.h.
 */
#include <pthread.h>
#include <stddef.h>
#include <string.h>

#include "trace/recnames.h"

struct rec_desc {
	int type;
	const char *name;
	const char *fields[DLBN_REC_MAX_FIELDS];
};

static const struct rec_desc rec_descs[] = {
	{DLBN_REC_PROCESS,
	 "PROCESS",
	 {"pid", "ppid", "parent_proc_id", "start", "rank", "local_rank", "world_size",
	  "realtime_ns", "monotonic_ns", "argv0", "exe", "host", "job_id", "clock_source"}},
	{DLBN_REC_THREAD, "THREAD", {"tid", "is_main"}},
	{DLBN_REC_FORK, "FORK", {"dur_ns", "child_pid"}},
	{DLBN_REC_EXEC, "EXEC", {"path"}},
	{DLBN_REC_EXIT, "EXIT", {"status", "how", "clock_tsc", "clock_drift_ns"}},
	{DLBN_REC_FD, "FD", {"fd", "fd_kind", "ino"}},
	{DLBN_REC_SEM, "SEM", {"slot", "sem"}},
	{DLBN_REC_READ, "READ", {"dur_ns", "fd", "fd_kind", "ino", "ret"}},
	{DLBN_REC_WRITE, "WRITE", {"dur_ns", "fd", "fd_kind", "ino", "ret"}},
	{DLBN_REC_PREAD, "PREAD", {"dur_ns", "fd", "ino", "ret", "offset"}},
	{DLBN_REC_RECVMSG, "RECVMSG", {"dur_ns", "fd", "fd_kind", "ino", "ret", "nfds"}},
	{DLBN_REC_SENDMSG, "SENDMSG", {"dur_ns", "fd", "fd_kind", "ino", "ret", "nfds"}},
	{DLBN_REC_POLL, "POLL", {"dur_ns", "call", "ret", "timeout_ms", "inos"}},
	{DLBN_REC_CONNECT, "CONNECT", {"dur_ns", "fd", "ret"}},
	{DLBN_REC_ACCEPT, "ACCEPT", {"dur_ns", "fd", "ret"}},
	{DLBN_REC_OPEN, "OPEN", {"fd", "fd_kind", "ino", "flags", "path"}},
	{DLBN_REC_MMAP, "MMAP", {"fd", "fd_kind", "ino", "length", "prot_flags"}},
	{DLBN_REC_SEM_WAIT, "SEM_WAIT", {"dur_ns", "sem", "ret", "call"}},
	{DLBN_REC_SEM_POST, "SEM_POST", {"sem"}},
	{DLBN_REC_SCHED, "SCHED", {"tid", "run_ns", "runq_wait_ns"}},
	{DLBN_REC_TASK, "TASK", {"tid", "run_ns", "runq_wait_ns", "timeslices", "name"}},
	{DLBN_REC_MEM,
	 "MEM",
	 {"rss_kib", "anon_kib", "shmem_kib", "swap_kib", "minflt", "majflt", "utime_us",
	  "stime_us", "sample_ns", "pss_kib", "pss_anon_kib", "pss_shmem_kib", "private_clean_kib",
	  "private_dirty_kib", "shared_dirty_kib", "rollup_ns"}},
	{DLBN_REC_MEMSYS,
	 "MEMSYS",
	 {"cg_version", "cg_limit_kib", "cg_usage_kib", "cg_peak_kib", "cg_oom_kills",
	  "cg_anon_kib", "cg_shmem_kib", "cg_file_kib", "host_total_kib", "host_avail_kib",
	  "shm_size_kib", "shm_free_kib", "rlimit_as_kib", "cg_limit_hits"}},
	{DLBN_REC_CHILD, "CHILD", {"pid", "how", "code"}},
	{DLBN_REC_MARK, "MARK", {"kind", "iter_id", "arg"}},
	{DLBN_REC_CONFIG, "CONFIG", {"iter_id", "text"}},
	{DLBN_REC_STRING, "STRING", {"id", "text"}},
	{DLBN_REC_NOTE, "NOTE", {"iter_id", "kind", "text"}},
	{DLBN_REC_LAUNCH, "LAUNCH", {"stream", "api"}},
	{DLBN_REC_MEMCPY,
	 "MEMCPY",
	 {"dur_ns", "api", "stream", "bytes", "dir", "async", "host_mem"}},
	{DLBN_REC_SYNC, "SYNC", {"dur_ns", "api", "handle"}},
	{DLBN_REC_WAITEVT, "WAITEVT", {"stream", "event"}},
	{DLBN_REC_PROBE, "PROBE", {"probe_id", "stream"}},
	{DLBN_REC_PROBE_DONE, "PROBE_DONE", {"probe_id", "complete_ns", "status"}},
	{DLBN_REC_CUDA_INFO, "CUDA_INFO", {"api", "ret", "text"}},
	{DLBN_REC_RANGE_PUSH, "RANGE_PUSH", {"domain_id", "msg_id", "msg"}},
	{DLBN_REC_RANGE_POP, "RANGE_POP", {"domain_id"}},
	{DLBN_REC_RANGE_START, "RANGE_START", {"range_id", "domain_id", "msg_id", "msg"}},
	{DLBN_REC_RANGE_END, "RANGE_END", {"range_id"}},
	{DLBN_REC_NVTX_MARK, "NVTX_MARK", {"domain_id", "msg_id", "msg"}},
	{DLBN_REC_DOMAIN, "DOMAIN", {"domain_id", "name"}},
	{DLBN_REC_MODULE, "MODULE", {"module_id", "base", "path"}},
	{DLBN_REC_STACK, "STACK", {"wait_type", "wait_ts_delta", "frames"}},
	{DLBN_REC_PROF_STAGE,
	 "PROF_STAGE",
	 {"kind", "scope", "count", "wall_ns", "cpu_ns", "line", "text"}},
	{DLBN_REC_PROF_SAMPLE,
	 "PROF_SAMPLE",
	 {"scope", "weight_ns", "samples", "in_stage", "line", "text"}},
	{DLBN_REC_CALLSITE, "CALLSITE", {"iter_id", "text"}},
};

/* Record types are below this (dlbn_trace.h). */
#define NTYPES 128

enum value_names { VN_NONE, VN_MARK, VN_START, VN_EXIT_HOW, VN_CU_API, VN_FD_KIND };

/* Per type, built once from rec_descs: its description, layout, and which
 * fields hold an enum value worth naming (the per-record calls of the
 * exports then do no lookups). */
static struct {
	const struct rec_desc *desc[NTYPES];
	struct dlbn_rec_layout layout[NTYPES];
	uint8_t value_names[NTYPES][DLBN_REC_MAX_FIELDS];
} by_type;
static pthread_once_t by_type_once = PTHREAD_ONCE_INIT;

static uint8_t value_names_of(int type, const char *field)
{
	if (type == DLBN_REC_MARK && !strcmp(field, "kind"))
		return VN_MARK;
	if (type == DLBN_REC_PROCESS && !strcmp(field, "start"))
		return VN_START;
	if (type == DLBN_REC_EXIT && !strcmp(field, "how"))
		return VN_EXIT_HOW;
	if ((type == DLBN_REC_LAUNCH || type == DLBN_REC_MEMCPY || type == DLBN_REC_SYNC) &&
	    !strcmp(field, "api"))
		return VN_CU_API;
	if (!strcmp(field, "fd_kind"))
		return VN_FD_KIND;
	return VN_NONE;
}

static void layout_of(int t, const struct rec_desc *d, struct dlbn_rec_layout *l)
{
	l->dur = l->fd = l->fd_kind = l->ino = l->ret = -1;
	for (int i = 0; d && i < DLBN_REC_MAX_FIELDS; i++) {
		const char *f = d->fields[i];
		if (!f)
			continue;
		by_type.value_names[t][i] = value_names_of(t, f);
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

static void by_type_init(void)
{
	for (size_t i = sizeof(rec_descs) / sizeof(rec_descs[0]); i-- > 0;)
		if (rec_descs[i].type >= 0 && rec_descs[i].type < NTYPES)
			by_type.desc[rec_descs[i].type] = &rec_descs[i]; /* the first one wins */
	for (int t = 0; t < NTYPES; t++)
		layout_of(t, by_type.desc[t], &by_type.layout[t]);
}

static const struct rec_desc *find_desc(int type)
{
	pthread_once(&by_type_once, by_type_init);
	return type >= 0 && type < NTYPES ? by_type.desc[type] : NULL;
}

const char *dlbn_record_name(int type)
{
	const struct rec_desc *d = find_desc(type);
	return d ? d->name : NULL;
}

const char *dlbn_field_name(int type, int i)
{
	const struct rec_desc *d = find_desc(type);
	if (!d || i < 0 || i >= DLBN_REC_MAX_FIELDS)
		return NULL;
	return d->fields[i];
}

const struct dlbn_rec_layout *dlbn_rec_layout(int type)
{
	static const struct dlbn_rec_layout none = {-1, -1, -1, -1, -1};
	pthread_once(&by_type_once, by_type_init);
	return type >= 0 && type < NTYPES ? &by_type.layout[type] : &none;
}

int64_t dlbn_rec_dur(const struct dlbn_record *r)
{
	int i = dlbn_rec_layout(r->type)->dur;
	if (i < 0 || i >= r->nfields || r->kind[i] != DLBN_V_INT || r->f[i] <= 0)
		return 0;
	return r->f[i] > DLBN_DUR_LIMIT ? DLBN_DUR_LIMIT : r->f[i];
}

/* ---- names of enum values --------------------------------------------- */

const char *dlbn_field_value_name(int type, int i, int64_t v)
{
	pthread_once(&by_type_once, by_type_init);
	if (type < 0 || type >= NTYPES || i < 0 || i >= DLBN_REC_MAX_FIELDS)
		return NULL;
	switch (by_type.value_names[type][i]) {
	case VN_MARK:
		return dlbn_mark_name(v);
	case VN_START:
		return dlbn_start_name(v);
	case VN_EXIT_HOW:
		return dlbn_exit_how_name(v);
	case VN_CU_API:
		return dlbn_cu_api_name(v);
	case VN_FD_KIND:
		return dlbn_fd_kind_name(v);
	default:
		return NULL;
	}
}

const char *dlbn_fd_kind_name(int64_t kind)
{
	static const char *const names[] = {"unknown", "pipe", "unix", "socket",
					    "file",    "shm",  "other"};
	return kind >= 0 && kind < 7 ? names[kind] : "unknown";
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
