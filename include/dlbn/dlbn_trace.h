/*
 * dlbn_trace.h - the dlbn trace format, version 4.1 (public interface).
 *
 * This header is the contract between the recorder (libdlbn.so) and every
 * reader (dlbn-analyze, tests).  It is documented for users in
 * man/dlbn-trace.5; keep the two in step.
 *
 * Layout of a trace file
 * ----------------------
 *   offset 0                 struct dlbn_file_header (DLBN_FILE_HEADER_SIZE bytes)
 *   offset H + k*E           extent k (E = header.extent_size), k = 0, 1, ...
 *
 * An extent is a struct dlbn_extent_header followed by msgpack records.  Every
 * extent belongs to exactly one stream; a stream is one thread of one process
 * instance and owns zero or more extents, numbered by extent_seq.  Extents are
 * handed out by an atomic counter in the file header, which every process of
 * the tree maps MAP_SHARED, so all processes (fork, spawn, forkserver children)
 * append to the one file without locks.
 *
 * Invariants
 *   - `committed` in an extent header counts the bytes of complete records
 *     that follow the header.  It only grows, and is stored with release
 *     ordering after the record bytes, so a reader that sees it sees the
 *     records.  A process killed with SIGKILL therefore leaves every record
 *     it finished.  Bytes past `committed` are garbage and must be ignored.
 *   - An extent whose magic is 0 was allocated but never initialised
 *     (process died in between): skip it.  (1.0 readers skip any magic but
 *     DLBN_EXTENT_MAGIC; in 1.1 another magic is damage, see below.)
 *   - Within a stream, records are in emission order.  Each record's time is
 *     the previous record's time plus its signed delta (the first record of an
 *     extent is relative to the extent's base_ns).  Records mark the *start*
 *     of what they describe; durations are separate fields.
 *   - All times are CLOCK_MONOTONIC nanoseconds of the recording host.
 *
 * Damage detection (version 1.1)
 *   Every single-bit error in an extent is detected by a reader of 1.1:
 *   - `commit` (one 64-bit word, stored with one release store after the
 *     record bytes) holds the committed length, the FINAL flag, an even
 *     parity bit over those two and the CRC-32C of the committed record
 *     bytes.  A flipped record bit fails the CRC; a flipped length or flag
 *     bit fails the parity; a flipped CRC bit fails the CRC.
 *   - `header_crc` is the CRC-32C of the fields fixed when the extent is
 *     initialised (proc_id .. tid, base_ns), so a flipped stream, sequence
 *     or time-origin bit is caught; a flipped magic bit leaves a magic one
 *     bit away from DLBN_EXTENT_MAGIC (or any other non-zero value), which
 *     is damage, not an extent "never initialised" (magic 0).
 *   - `committed` and `flags` repeat what `commit` says for readers of 1.0;
 *     a 1.1 reader does not use them, so their bits have no effect.
 *   A reader drops an extent that fails a check and says what was lost.
 *   The file header is not covered (its counters are updated by every
 *   process of the tree).
 *
 * Going passive (version 1.1)
 *   A process that stops recording (full file system, trace file replaced
 *   ...) sets DLBN_FILE_PASSIVE and takes the next slot of `passive[]`
 *   (atomic counter `passive_count`; slots past DLBN_MAX_PASSIVE are only
 *   counted): its proc_id, pid, errno and the time it stopped.  A slot is
 *   complete once `err` is non-zero (stored last).  Processes that start
 *   after the flag is set do not record at all.
 *
 * Records
 *   Each record is a msgpack array whose first two elements are
 *   [type, dt_ns, ...].  The fields that follow are listed per type below.
 *   Unless stated otherwise fields are msgpack integers.  A reader must skip
 *   record types it does not know, and ignore trailing fields it does not
 *   know (minor versions may append fields; they never remove or reorder).
 *
 * Fd announcements (version 2.0 and later)
 *   READ, WRITE, PREAD, RECVMSG and SENDMSG name their fd but not what
 *   it is: an FD record [FD, dt, fd, fd_kind, ino] earlier in the same
 *   extent says so, once for all the records of that fd there.  Its slot is
 *   fd % DLBN_FD_SLOTS.  An OPEN record of an fd announces it as well.
 *   The writer announces an fd again when what it is
 *   changed (closed and reused for another object) and after announcing
 *   another fd of the same slot, so a reader keeps the last FD record of
 *   each slot of the current extent and nothing more.  A record whose fd
 *   has no announcement in its slot reads fd_kind 0 and ino 0 (unknown).
 *   Semaphores likewise: SEM_WAIT and SEM_POST carry the slot of their
 *   semaphore, below DLBN_SEM_SLOTS, where 1.x has its address (the
 *   writer picks it: (address >> 5) % 16 in 2.0, a hash of the whole
 *   address in 3.0; readers take the slot as written),
 *   and a SEM record [SEM, dt, slot, address] earlier in the extent says
 *   which semaphore the slot holds (a slot without one reads address 0).
 *   The field lists below are the 1.x ones, which carry fd_kind, ino and
 *   the semaphore's address in place ("2.0: ..." gives the fields of a
 *   record of 2.0 and later), and readers present 2.0 records with them
 *   (the analyzer's --dump does).  The recorder wrote 1.x traces until 2.0: 4-9 bytes of a
 *   READ were its inode, 9 of a SEM_POST the address.
 *
 * Differences within an extent (version 3.0)
 *   Everything of 2.0 above, and: an OPEN's inode is written as its
 *   difference from the previous OPEN of the extent, its flags XORed with
 *   DLBN_OPEN_FLAGS_USUAL, and its path without the bytes it shares with
 *   that OPEN's at both ends; an FD record's inode as its difference from
 *   the previous FD record's; a STACK's frames without the end they share
 *   with the previous STACK's; a MARK's iter_id, arg and counters as
 *   differences from the extent's previous MARK (see OPEN, FD, STACK and
 *   MARK).
 *   Differences are taken modulo 2^64 and read back the same way.  Readers
 *   present 3.0 records with their 1.x fields as well.  The recorder wrote
 *   2.0 traces until 3.0: a Python import's OPEN was ~53 bytes (now ~30),
 *   a fetch MARK with counters 32-47 (now ~17-25).
 *
 * Recent paths (version 4.0)
 *   Everything of 3.0, and an OPEN's path may share its start and end with
 *   any of the extent's last 16 OPEN records' paths, not only the
 *   previous one's: a trailing `age` field (absent: 0) says which, 0 the
 *   previous OPEN, 1 the one before it, and so on (see OPEN).  A reader
 *   keeps the whole paths of the extent's last 16 OPENs (an OPEN whose
 *   path is not a string counts, with an empty path).  The recorder wrote
 *   3.0 traces until 4.0: Python's imports go back and forth between the
 *   standard library and site-packages, and the imports of a Python
 *   start-up (num_workers=0, 803 OPENs) averaged 29.4 bytes an OPEN (now
 *   24.0; 38.9 -> 23.9 for the 289 that share with an older OPEN).
 *
 * Memory and children (version 4.1)
 *   Everything of 4.0, and four record types that 4.0 readers skip: MEM
 *   (a process's memory), MEMSYS (the job's memory limit and use, the
 *   host's, /dev/shm), CHILD (how a child process ended) and NOTE (a
 *   loader's Python-level event, such as the exception a fetch raised);
 *   the file header's memsys_next_ns spaces the MEMSYS samples of all the
 *   processes of a file.
 */
#ifndef DLBN_TRACE_H
#define DLBN_TRACE_H

#include <stdint.h>

#define DLBN_FILE_MAGIC		 "DLBNTRC1" /* 8 bytes, no terminator in the file */
#define DLBN_VERSION_MAJOR	 4
#define DLBN_VERSION_MINOR	 1
#define DLBN_VERSION_MAJOR_MIN	 1	 /* the oldest major a reader of this header reads */
#define DLBN_FD_SLOTS		 64	 /* fd announcement slots per extent (2.0) */
#define DLBN_SEM_SLOTS		 16	 /* semaphore announcement slots per extent (2.0) */
#define DLBN_MARK_COUNTERS	 8	 /* the loop's counters a MARK may carry */
#define DLBN_OPEN_FLAGS_USUAL	 0x80000 /* O_CLOEXEC: 3.0 OPEN flags are XORed with it */
#define DLBN_FILE_HEADER_SIZE	 4096u
#define DLBN_EXTENT_MAGIC	 0x58424c44u /* "DLBX" little-endian */
#define DLBN_EXTENT_HEADER_SIZE	 64u
#define DLBN_DEFAULT_EXTENT_SIZE (256u * 1024u)

/* File header flags. */
#define DLBN_FILE_PASSIVE 0x1u /* some process went passive (see its stderr) */

/* A process that went passive (version 1.1; zero when unused). */
struct dlbn_passive_entry {
	uint32_t proc_id; /* process instance */
	uint32_t pid;
	uint64_t t_ns; /* CLOCK_MONOTONIC when it stopped recording */
	int32_t err;   /* errno of the failure (ENOSPC: file system full); stored last */
	uint32_t reserved;
};

#define DLBN_MAX_PASSIVE 128

struct dlbn_file_header {
	char magic[8];		/* DLBN_FILE_MAGIC */
	uint16_t version_major; /* reader rejects a major it does not know */
	uint16_t version_minor;
	uint32_t header_size;	      /* DLBN_FILE_HEADER_SIZE */
	uint32_t extent_size;	      /* bytes per extent, header included */
	uint32_t flags;		      /* DLBN_FILE_* (atomic OR) */
	uint64_t next_extent;	      /* atomic: extents handed out so far */
	uint64_t next_proc_id;	      /* atomic: process instances that joined */
	uint64_t created_realtime_ns; /* a CLOCK_REALTIME/CLOCK_MONOTONIC pair */
	uint64_t created_monotonic_ns;
	char host[64]; /* the creator's host (DLBN_HOST, else gethostname()), NUL padded */
	/* Version 1.1: */
	uint32_t passive_count; /* atomic: processes that went passive */
	uint32_t reserved0;
	struct dlbn_passive_entry passive[DLBN_MAX_PASSIVE];
	/* Version 4.1: CLOCK_MONOTONIC time before which no process of the
	 * file takes another MEMSYS sample (atomic; claimed with a
	 * compare-and-swap, so one process takes each).  0: none taken yet. */
	uint64_t memsys_next_ns;
	/* zero up to header_size */
};

_Static_assert(sizeof(struct dlbn_file_header) <= DLBN_FILE_HEADER_SIZE,
	       "the file header fits its page");

/* Extent header flags. */
#define DLBN_EXTENT_FINAL 0x1u /* the stream ended cleanly in this extent */

struct dlbn_extent_header {
	uint32_t magic;	     /* DLBN_EXTENT_MAGIC once initialised */
	uint32_t committed;  /* atomic: bytes of complete records after header (1.0) */
	uint32_t proc_id;    /* process instance (file-unique; new after exec) */
	uint32_t thread_no;  /* 0 = the thread that started the process instance */
	uint32_t extent_seq; /* 0, 1, 2 ... within the stream */
	uint32_t pid;
	uint32_t tid;
	uint32_t flags;	  /* DLBN_EXTENT_* (1.0) */
	uint64_t base_ns; /* time origin for the first record's delta */
	/* Version 1.1: */
	uint64_t commit;     /* atomic: DLBN_COMMIT_* fields, see above */
	uint32_t header_crc; /* CRC-32C of proc_id..tid (20 bytes), then base_ns */
	uint8_t reserved[12];
};

/* The commit word: committed length, FINAL, parity, CRC-32C of the records. */
#define DLBN_COMMIT_LEN_MASK  0x3fffffffu /* bits 0-29: committed bytes */
#define DLBN_COMMIT_FINAL     (1u << 30)  /* bit 30: DLBN_EXTENT_FINAL */
#define DLBN_COMMIT_PARITY    (1u << 31)  /* bit 31: makes bits 0-31 even */
#define DLBN_COMMIT_CRC_SHIFT 32	  /* bits 32-63: CRC-32C of committed bytes */

static inline uint64_t dlbn_commit_word(uint32_t committed, int final, uint32_t crc)
{
	uint32_t low = (committed & DLBN_COMMIT_LEN_MASK) | (final ? DLBN_COMMIT_FINAL : 0);
	if (__builtin_parity(low))
		low |= DLBN_COMMIT_PARITY;
	return (uint64_t)crc << DLBN_COMMIT_CRC_SHIFT | low;
}

_Static_assert(sizeof(struct dlbn_extent_header) == DLBN_EXTENT_HEADER_SIZE,
	       "extent header size is part of the format");

/*
 * Record types.  Field lists after [type, dt]:
 *
 * Process and thread structure
 *  PROCESS  pid, ppid, parent_proc_id (-1 none), start (DLBN_START_*),
 *           rank, local_rank, world_size (-1 unknown),
 *           realtime_ns, monotonic_ns (a clock pair taken together),
 *           argv0 (str), exe (str), host (str), job_id (str),
 *           clock_source (str)
 *           First record of thread_no 0 of every process instance.
 *  THREAD   tid, is_main (1 if tid == pid)          first record of a stream
 *  FORK     dur_ns, child_pid (or -errno)           in the parent
 *  EXEC     path (str)                              before the exec call
 *  EXIT     status, how (DLBN_EXIT_*),              last record of a process
 *           clock_tsc, clock_drift_ns (1.1+; 1 if times were read from the
 *           TSC anchored to CLOCK_MONOTONIC, and the largest correction an
 *           anchor needed: the bound on their error)
 *
 * Host input path (fd kinds are DLBN_FD_*; ino is st_ino, 0 if unknown;
 * ret is the call's return value, or -errno on failure)
 *  FD       fd, fd_kind, ino     (2.0) what fd is, for the records after it
 *           in this extent (see "Fd announcements").  3.0: ino minus the
 *           previous FD record's ino in the extent (the first: minus 0):
 *           the sockets a DataLoader passes its batches' fds through are
 *           numbered one after the other
 *  SEM      slot, sem (address)  (2.0) the semaphore of a slot, likewise
 *  READ     dur_ns, fd, fd_kind, ino, ret           read/readv/recv/recvfrom
 *           2.0: dur_ns, fd, ret
 *  WRITE    dur_ns, fd, fd_kind, ino, ret           write/writev/send/sendto
 *           2.0: dur_ns, fd, ret
 *  PREAD    dur_ns, fd, ino, ret, offset            pread/preadv (files)
 *           2.0: dur_ns, fd, ret, offset
 *  RECVMSG  dur_ns, fd, fd_kind, ino, ret, nfds     nfds = SCM_RIGHTS fds got
 *           2.0: dur_ns, fd, ret, nfds
 *  SENDMSG  dur_ns, fd, fd_kind, ino, ret, nfds
 *           2.0: dur_ns, fd, ret, nfds
 *  POLL     dur_ns, call (DLBN_POLL_*), ret, timeout_ms, [ino, ...]
 *           the inodes of the pipe/socket fds waited on (at most 8)
 *  CONNECT  dur_ns, fd, ret                          unix-domain sockets only
 *  ACCEPT   dur_ns, fd, ret                          unix-domain sockets only
 *  OPEN     fd (or -errno), fd_kind, ino, flags, path (str)[, shared]
 *           regular files, FIFOs and /dev/shm objects.  2.0: the path
 *           begins with the first `shared` bytes (absent: 0) of the path
 *           of the previous OPEN record of the same extent, which path
 *           leaves out (never inside a UTF-8 character): a module's
 *           directory is written once per extent
 *           (readers present the whole path, and no shared field).
 *           3.0: fd, fd_kind, ino minus the previous OPEN's ino in the
 *           extent (the first: minus 0), flags ^ DLBN_OPEN_FLAGS_USUAL,
 *           path (str)[, shared[, tail]]: the path also ends with the last
 *           `tail` bytes (absent: 0) of the previous OPEN's path, which it
 *           leaves out as well (never inside a UTF-8 character, never
 *           overlapping the shared bytes in either path): a .pyc file's
 *           ".cpython-311.pyc" is written once.
 *           4.0: path (str)[, shared[, tail[, age]]]: `shared` and `tail`
 *           are bytes of the path of the extent's OPEN `age` OPENs before
 *           the previous one (absent: 0, the previous one)
 *  MMAP     fd, fd_kind, ino, length, prot_flags     MAP_SHARED of an fd only
 *           (prot_flags = mmap flags << 8 | prot); in 2.0 too, since the fd
 *           of a shared-memory batch tensor is mapped once: an FD record
 *           would cost more than it saves
 *  SEM_WAIT dur_ns, sem (address), ret, call (DLBN_SEM_*)
 *           2.0: dur_ns, sem slot, ret, call
 *           only waits that blocked (dur_ns >= DLBN_SEM_MIN_NS)
 *  SEM_POST sem (address); 2.0: sem slot
 *           only for semaphores some thread of the process has begun to
 *           wait on (a small set, filled at wait entry: the post that wakes
 *           a waiter may come before the waiter blocks)
 *  SCHED    tid, run_ns, runq_wait_ns               /proc schedstat sample
 *  MEM      rss_kib, anon_kib, shmem_kib, swap_kib, minflt, majflt,
 *           utime_us, stime_us, sample_ns
 *           [, pss_kib, pss_anon_kib, pss_shmem_kib, private_clean_kib,
 *            private_dirty_kib, shared_dirty_kib, rollup_ns]
 *           (4.1) the process's memory: /proc/self/status (VmRSS, RssAnon,
 *           RssShmem, VmSwap) and getrusage (faults, CPU time), and what
 *           the whole sample cost (sample_ns: the MEMSYS beside it and
 *           smaps_rollup included), at most
 *           every DLBN_MEM_INTERVAL_MS (500) per process, taken before a
 *           blocking wait on a pipe, socket or semaphore or at a main-thread
 *           fetch begin, and once more before EXIT.  The trailing group is
 *           /proc/self/smaps_rollup (proportional set size, its anonymous
 *           and shared-memory parts (pss_anon_kib -1 before Linux 5.7),
 *           private and shared-dirty pages: a forked worker's
 *           copy-on-write growth is its private_dirty_kib growing while
 *           rss_kib stays), which walks the page tables: taken first once
 *           the process has lived 1 s or at the loop's first fetch, then at
 *           most every 2 s and every 1000 times its last cost (rollup_ns,
 *           the read's own wall time), and a last one before an _exit
 *           (a DataLoader worker's os._exit) where the process has lived
 *           200 times its cost, so that it stays under 0.1% of the
 *           process's time (1% for a life of seconds)
 *  MEMSYS   cg_version, cg_limit_kib, cg_usage_kib, cg_peak_kib,
 *           cg_oom_kills, cg_anon_kib, cg_shmem_kib, cg_file_kib,
 *           host_total_kib, host_avail_kib, shm_size_kib, shm_free_kib,
 *           rlimit_as_kib, cg_limit_hits
 *           (4.1) the job's memory: its memory cgroup (cg_version 1 or 2,
 *           0 none found; limit -1 none, the lowest of the cgroup and its
 *           ancestors; usage, peak, OOM kills counted in the cgroup, its
 *           anonymous, shared-memory and page-cache charge, and the times
 *           usage hit the limit: v1 failcnt, v2 memory.events max), the
 *           host's MemTotal and MemAvailable, /dev/shm's size and free
 *           space (statfs; -1 no /dev/shm), RLIMIT_AS (-1 unlimited); any
 *           figure -1 when unknown.  At most once a second per trace file
 *           (file header memsys_next_ns), beside a MEM sample, and before
 *           every EXIT of a process that took MEM samples
 *  CHILD    pid, how (DLBN_CHILD_*), code
 *           (4.1) a child process ended, as the wait call that saw it
 *           reported (wait, waitpid, wait3, wait4, waitid; WNOWAIT peeks
 *           included): exit status, or the signal that killed it; once
 *           per child in the waiting process
 *  TASK     tid, run_ns, runq_wait_ns, timeslices[, name (str)]
 *           thread census: another thread of the process (one that may
 *           call no hook: an intra-op pool's), sampled from
 *           /proc/self/task/TID/schedstat by the main thread at a
 *           batch's arrival (FETCH_END), at most every 100 ms, and again
 *           at the next fetch begin (an older recorder: at fetch begins
 *           only); name (its comm) with the first sample of each thread
 *
 * Python bootstrap marks (exact DataLoader view)
 *  MARK     kind (DLBN_MARK_*), iter_id, arg
 *           [, run_ns, runq_ns, sys_ns, minflt, free_ns, free_cpu_ns
 *            [, gil_ns, gil_others_ns]]
 *           FETCH_BEGIN/FETCH_END: arg = batch index within the epoch;
 *           FETCH_END arg2 semantics: see DLBN_MARK_*.
 *           FETCH_*, ITER_BEGIN and HANDOFF on the main thread add the
 *           thread's cumulative counters: schedstat run and run-queue time,
 *           system time (getrusage), minor faults, wall and CPU time inside
 *           munmap() and close(), wall time waiting for the Python
 *           interpreter's lock, the other threads' such waits summed
 *           (libintercept/hooks_gil.c; older traces stop after free_cpu_ns);
 *           -1 when unknown (libintercept/loop_cost.c).
 *           3.0: kind, iter_id - iter_prev, arg - arg_prev, then for a
 *           MARK with the eight counters either one value, counter 0's
 *           (the others did not move), or a bit mask `present` and, in
 *           counter order, the counters i with bit i set.  iter_prev and
 *           arg_prev are those of the stream's previous MARK in the extent
 *           (the first: 0).  Counter i is written as its difference from
 *           the same counter of the stream's previous MARK with counters in
 *           the extent (the first: from 0), a difference of 0 left out;
 *           run_ns is written as the wall time it did not run,
 *           (t - t_prev) - (run_ns - run_prev), t_prev being that MARK's
 *           time (the first: the extent's base_ns).
 *  CONFIG   iter_id, text (str)   "key=value;key=value" iterator config:
 *           num_workers, batch_size, prefetch_factor, pin_memory,
 *           persistent_workers, start_method, dataset_kind, drop_last,
 *           timeout, loader (Python id of the DataLoader object)
 *  STRING   id, text (str)        interned string (NVTX, modules)
 *  NOTE     iter_id, kind (DLBN_NOTE_*), text (str)
 *           (4.1) a Python-level event of the loader, e.g. the exception a
 *           fetch raised ("RuntimeError: DataLoader worker (pid 7) is
 *           killed by signal: Killed."), at most 1000 bytes
 *
 * GPU (CUDA driver; stream is the CUstream value, 0 = legacy default)
 *  LAUNCH   stream, api (DLBN_CU_*)                  no duration: async
 *  MEMCPY   dur_ns, api, stream, bytes, dir (DLBN_COPY_*), async,
 *           host_mem (DLBN_HOSTMEM_*)
 *  SYNC     dur_ns, api, handle (stream/event/0 for context)[, gpu_done_ns]
 *           gpu_done_ns (absolute; main-thread stream syncs): when the GPU
 *           finished the work the sync waited for (gpu_probe.c)
 *  WAITEVT  stream, event                            cuStreamWaitEvent
 *  PROBE    probe_id, stream                 event recorded on stream at t
 *  PROBE_DONE probe_id, complete_ns (absolute), status
 *           the probe's event completed at complete_ns (from
 *           cuEventElapsedTime against a reference); status 0 = ok,
 *           1 = lost (not resolvable)
 *  CUDA_INFO api (dlbn_cu_api or dlbn_cuda_info), ret, text (str)
 *
 * Ranges (NVTX)
 *  RANGE_PUSH domain_id, msg_id, msg (str or nil when msg_id is set)
 *  RANGE_POP  domain_id
 *  RANGE_START range_id, domain_id, msg_id, msg (str or nil)
 *  RANGE_END  range_id
 *  NVTX_MARK  domain_id, msg_id, msg (str or nil)
 *  DOMAIN     domain_id, name (str)
 *
 * Stacks (libunwind, at the longest waits)
 *  MODULE   module_id, base, path (str)               a loaded object
 *  STACK    wait_type, wait_ts_delta, [module_id, offset, module_id, offset...]
 *           native stack of the wait that began wait_ts_delta ns before
 *           this record's time.  3.0: wait_type, wait_ts_delta, [...]
 *           [, shared]: the list ends with the last `shared` elements
 *           (absent: 0) of the previous STACK's list in the extent, which
 *           it leaves out: the waits of one loop share their outer frames
 *           (readers present the whole list, and no shared field)
 *
 * Python-level localization (python/_dlbn_profile.py through
 * libintercept/marker_profile.c).  PROF_* are cumulative summaries since
 * the process started fetching, written every second while it fetches
 * and when it exits: a reader keeps the last record per (process, key),
 * so a worker killed with SIGKILL leaves its last partial summary.
 * scope is the iterator id of the fetching loop in the main process
 * (num_workers=0), 0 in a DataLoader worker (its loader is the one whose
 * CONFIG lists its pid).
 *  PROF_STAGE  kind (DLBN_PROF_*), scope, count, wall_ns, cpu_ns, line,
 *              text (str) "name<TAB>file": exactly timed stages (cpu_ns:
 *              the thread's CPU time inside them, -1 unknown)
 *  PROF_SAMPLE scope, weight_ns, samples, in_stage, line,
 *              text (str) "function<TAB>file<TAB>callers<TAB>leaf": samples
 *              of the fetching thread's Python stack, keyed by the library
 *              function the dataset's code called (or the user's own
 *              function when the innermost frame is there) at file:line;
 *              weight_ns = the thread's CPU time the samples stand for;
 *              in_stage 1 = taken inside an exactly timed stage, 2 and 3
 *              = a loader thread's busy stack sampled by wall time
 *              (python/_dlbn_threads.py: weight_ns = wall ns, 2 = the thread
 *              ran at least half of the interval, 3 = it mostly waited);
 *              callers = up to 3 "function:line" entries, outermost last,
 *              separated by "<"; leaf = "function file:line" of the
 *              innermost frame ("" when it is the function itself)
 *  CALLSITE    iter_id, text (str): where the training loop called next()
 *              on the iterator, "file:function:line" frames innermost
 *              first, separated by newlines (at most 4); once per iterator
 */
enum dlbn_record_type {
	DLBN_REC_PROCESS = 1,
	DLBN_REC_THREAD = 2,
	DLBN_REC_FORK = 3,
	DLBN_REC_EXEC = 4,
	DLBN_REC_EXIT = 5,
	DLBN_REC_FD = 6,
	DLBN_REC_SEM = 7,

	DLBN_REC_READ = 10,
	DLBN_REC_WRITE = 11,
	DLBN_REC_PREAD = 12,
	DLBN_REC_RECVMSG = 13,
	DLBN_REC_SENDMSG = 14,
	DLBN_REC_POLL = 15,
	DLBN_REC_CONNECT = 16,
	DLBN_REC_ACCEPT = 17,
	DLBN_REC_OPEN = 18,
	DLBN_REC_MMAP = 19,
	DLBN_REC_SEM_WAIT = 20,
	DLBN_REC_SEM_POST = 21,
	DLBN_REC_SCHED = 22,
	DLBN_REC_TASK = 23,
	DLBN_REC_MEM = 24,    /* 4.1 */
	DLBN_REC_MEMSYS = 25, /* 4.1 */
	DLBN_REC_CHILD = 26,  /* 4.1 */

	DLBN_REC_MARK = 30,
	DLBN_REC_CONFIG = 31,
	DLBN_REC_STRING = 32,
	DLBN_REC_NOTE = 33, /* 4.1 */

	DLBN_REC_LAUNCH = 40,
	DLBN_REC_MEMCPY = 41,
	DLBN_REC_SYNC = 42,
	DLBN_REC_WAITEVT = 43,
	DLBN_REC_PROBE = 44,
	DLBN_REC_PROBE_DONE = 45,
	DLBN_REC_CUDA_INFO = 46,

	DLBN_REC_RANGE_PUSH = 50,
	DLBN_REC_RANGE_POP = 51,
	DLBN_REC_RANGE_START = 52,
	DLBN_REC_RANGE_END = 53,
	DLBN_REC_NVTX_MARK = 54,
	DLBN_REC_DOMAIN = 55,

	DLBN_REC_MODULE = 60,
	DLBN_REC_STACK = 61,

	/* Python-level localization (appended block; never renumber). */
	DLBN_REC_PROF_STAGE = 70,
	DLBN_REC_PROF_SAMPLE = 71,
	DLBN_REC_CALLSITE = 72,
};

/* PROF_STAGE kinds: what was timed. */
enum dlbn_prof_kind {
	DLBN_PROF_FETCH = 1,		/* the whole fetch of one batch (samples + collate) */
	DLBN_PROF_TRANSFORM = 2,	/* one stage of a Compose (torchvision v1/v2, timm) */
	DLBN_PROF_HF = 3,		/* a Hugging Face set_transform function */
	DLBN_PROF_COLLATE = 4,		/* the loader's collate_fn */
	DLBN_PROF_SEND = 5,		/* pickling the batch for the hand-off (worker) */
	DLBN_PROF_GETITEM = 6,		/* names the dataset's __getitem__ (count/times 0) */
	DLBN_PROF_SAMPLER = 7,		/* sampler: count = 1 on, 0 off (text = why);
					 * wall_ns = CPU time in its handler,
					 * cpu_ns = samples taken */
	DLBN_PROF_RUNQ = 8,		/* wall_ns = the fetching thread's run-queue wait
					 * inside the fetches (schedstat), count = fetches;
					 * not written for fetches between two counted
					 * MARKs (the main thread's), whose counters hold it */
	DLBN_PROF_THREAD = 9,		/* a loader's thread in the training process
					 * (python/_dlbn_threads.py): its busy samples,
					 * their wall and CPU ns; text "thread NAME<TAB>file";
					 * a native pool thread (DALI's): count 0, busy
					 * wall = cpu = its CPU time */
	DLBN_PROF_THREAD_WATCHED = 10,	/* the same thread, over all its samples */
	DLBN_PROF_THREAD_GIL_WAIT = 11, /* the same thread, its busy samples' waits
					 * for the interpreter's lock: wall ns */
};

/* PROF_SAMPLE in_stage values. */
enum dlbn_prof_sample_where {
	DLBN_PROF_IN_FETCH = 0,	      /* the fetch, outside the timed stages */
	DLBN_PROF_IN_STAGE = 1,	      /* inside an exactly timed stage */
	DLBN_PROF_THREAD_CPU = 2,     /* a loader thread, on the CPU; weight = wall */
	DLBN_PROF_THREAD_OFF_CPU = 3, /* a loader thread, mostly off the CPU */
	DLBN_PROF_THREAD_GIL = 4      /* a loader thread that waited for the
				       * interpreter's lock a third of the
				       * interval or more */
};

enum dlbn_start_kind {
	DLBN_START_ROOT = 0, /* created the trace file */
	DLBN_START_FORK = 1, /* child of fork(); parent_proc_id is set */
	DLBN_START_JOIN = 2, /* exec'd/spawned process that joined the trace */
};

enum dlbn_exit_how {
	DLBN_EXIT_EXIT = 0,  /* exit() */
	DLBN_EXIT__EXIT = 1, /* _exit() / _Exit() (os._exit in Python) */
	DLBN_EXIT_DTOR = 2,  /* library destructor (normal return from main) */
};

enum dlbn_child_how {
	DLBN_CHILD_EXITED = 0, /* code = exit status */
	DLBN_CHILD_KILLED = 1, /* code = the signal */
	DLBN_CHILD_DUMPED = 2, /* killed by code, core dumped */
};

/* MEM: fields before the smaps_rollup group, and with it. */
#define DLBN_MEM_FIELDS_CHEAP  9
#define DLBN_MEM_FIELDS_ROLLUP 16

enum dlbn_note_kind {
	DLBN_NOTE_FETCH_ERROR = 1, /* the loader's next() raised: "Type: message" */
};

enum dlbn_fd_kind {
	DLBN_FD_UNKNOWN = 0,
	DLBN_FD_PIPE = 1,
	DLBN_FD_UNIX = 2,   /* AF_UNIX socket */
	DLBN_FD_SOCKET = 3, /* other socket (TCP ...) */
	DLBN_FD_FILE = 4,   /* regular file */
	DLBN_FD_SHM = 5,    /* regular file on /dev/shm */
	DLBN_FD_OTHER = 6,  /* tty, device, eventfd ... (not recorded) */
};

enum dlbn_poll_call {
	DLBN_POLL_POLL = 0,
	DLBN_POLL_PPOLL = 1,
	DLBN_POLL_SELECT = 2,
	DLBN_POLL_PSELECT = 3,
	DLBN_POLL_EPOLL = 4,
};

enum dlbn_sem_call {
	DLBN_SEM_WAIT = 0,
	DLBN_SEM_TIMEDWAIT = 1,
	DLBN_SEM_CLOCKWAIT = 2,
};

/* Blocking semaphore waits shorter than this are not recorded. */
#define DLBN_SEM_MIN_NS 20000

enum dlbn_mark_kind {
	DLBN_MARK_FETCH_BEGIN = 1, /* DataLoader iterator __next__ entered */
	DLBN_MARK_FETCH_END = 2,   /* __next__ returned a batch (arg = index) */
	DLBN_MARK_FETCH_STOP = 3,  /* __next__ raised StopIteration (epoch end) */
	DLBN_MARK_ITER_BEGIN = 4,  /* iter(loader): a new epoch's iterator */
	DLBN_MARK_STEP = 5,	   /* optional user step mark (arg = step) */
	DLBN_MARK_HANDOFF = 6,	   /* the wrapper iterator that fetched batch arg
				    * yielded it (python/_dlbn_handoff.py) */
};

enum dlbn_cu_api {
	DLBN_CU_LAUNCH_KERNEL = 1,
	DLBN_CU_LAUNCH_KERNEL_EX = 2,
	DLBN_CU_GRAPH_LAUNCH = 3,
	DLBN_CU_MEMCPY = 10, /* cuMemcpy / cuMemcpyAsync (unified) */
	DLBN_CU_MEMCPY_HTOD = 11,
	DLBN_CU_MEMCPY_DTOH = 12,
	DLBN_CU_MEMCPY_DTOD = 13,
	DLBN_CU_STREAM_SYNC = 20,
	DLBN_CU_CTX_SYNC = 21,
	DLBN_CU_EVENT_SYNC = 22,
	DLBN_CU_STREAM_QUERY = 23,
	DLBN_CU_EVENT_QUERY = 24,
};

/* CUDA_INFO api codes beyond dlbn_cu_api: what the recorder found out
 * about the driver and its own probing. */
enum dlbn_cuda_info {
	DLBN_CUDA_INFO_DRIVER = 100,	       /* driver reached: ret = driver version */
	DLBN_CUDA_INFO_PROBE_OFF = 101,	       /* probing stopped: ret = CUresult */
	DLBN_CUDA_INFO_UNWRAPPED = 102,	       /* a resolved entry point left unwrapped */
	DLBN_CUDA_INFO_STREAMS_OVERFLOW = 103, /* more streams than the probe table holds */
	DLBN_CUDA_INFO_STREAM_SKIPPED = 104,   /* a probe's stream was gone (first time) */
};

enum dlbn_copy_dir {
	DLBN_COPY_HTOD = 1,
	DLBN_COPY_DTOH = 2,
	DLBN_COPY_DTOD = 3,
	DLBN_COPY_OTHER = 4,
};

enum dlbn_host_mem {
	DLBN_HOSTMEM_NA = 0, /* no host side */
	DLBN_HOSTMEM_PAGEABLE = 1,
	DLBN_HOSTMEM_PINNED = 2,
	DLBN_HOSTMEM_UNKNOWN = 3,
};

#endif /* DLBN_TRACE_H */
