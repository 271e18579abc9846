/*
 * recnames.c - names of record types and of their fields (dlbn_trace.h),
 * for --dump, error messages and tests.  Keep in step with dlbn_trace.h.
 */
#include <stddef.h>

#include "trace/reader.h"

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
	{DLBN_REC_MARK, "MARK", {"kind", "iter_id", "arg"}},
	{DLBN_REC_CONFIG, "CONFIG", {"iter_id", "text"}},
	{DLBN_REC_STRING, "STRING", {"id", "text"}},
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

static const struct rec_desc *find_desc(int type)
{
	for (size_t i = 0; i < sizeof(rec_descs) / sizeof(rec_descs[0]); i++)
		if (rec_descs[i].type == type)
			return &rec_descs[i];
	return NULL;
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
