"""dlbntrace.py - the test suites' reader of dlbn trace files (formats 1.x to 3.x).

One Python decoder of include/dlbn/dlbn_trace.h for every test suite
(recorder, nvtx, cxx, cuda, e2e).  It parses the file header and every
extent with `struct` and the records with Python's msgpack module, and
shares no code with the C reader (analyzer/): the tests use it as an
independent cross-check of the format.  Keep REC, FIELDS and the constants
below in step with dlbn_trace.h.

    t = Trace(path)                      # whole file, checked
    t.streams[(proc_id, thread_no)]      # Stream: pid, tid, extents, records, final
    t.records("READ", proc_id=0)         # Records in stream order
    t.processes()                        # proc_id -> PROCESS record
    t.records_of_pid(pid, "MARK")        # one OS process, main thread, by time
    read_records(path)                   # list(Trace(path).records())
    of_type(records, "STACK")

A Record is a dict: "type" (the name from REC, or the number of a type this
reader does not know), "t" (absolute CLOCK_MONOTONIC ns), "size" (encoded
bytes), "raw" (the msgpack array as decoded), the stream's "proc_id",
"thread_no", "pid", "tid", and the fields of its type by the names in FIELDS.
A field wins over a stream key of the same name (PROCESS.pid, THREAD.tid,
SCHED.tid: in a well-formed trace these equal the stream's anyway).

Format 2.0 announces what an fd is in FD records, and READ, WRITE, PREAD,
RECVMSG and SENDMSG leave out fd_kind and ino: their Records carry
"kind" and "ino" from the FD record of their extent as 1.x wrote them in
place ("raw" is the record as written); SEM_WAIT and SEM_POST carry
their semaphore's "sem" address from the SEM record of its slot likewise.
Like dlbn-analyze, the reader hands out no FD or SEM record: a Stream
keeps them apart, in fd_records (an OPEN announces its fd as well, and is
a Record as before).  A 2.0 OPEN's path leaves out what it shares with
the extent's previous OPEN (a trailing `shared` field says how many
bytes): its Record has the whole path and no `shared`.  Format 3.0 also
leaves out the end an OPEN's path shares with the previous one (`tail`),
writes its inode as a difference from that one's and its flags XORed with
O_CLOEXEC; an FD record's inode as a difference from the previous FD
record's; a STACK's frames without the end they share with the previous
STACK's; and a MARK's iter_id, arg and counters as differences from the
extent's previous MARK.  In format 4.0 an OPEN's path may share its ends
with any of the extent's last 16 OPENs' (a trailing `age` field says
which: 0 or absent, the previous one).  Records carry the 1.x fields all
the same ("raw" keeps what was written).

Invariants checked (a trace that breaks them raises ValueError): magic and
major version; within a stream, extent_seq runs 0, 1, 2 ... without a gap;
the `committed` bytes of an extent hold whole records only, each a msgpack
array [type, dt, ...] of two integers at least.  It reads the 1.0 fields
(`committed`, `flags`), which format 1.1 keeps equal to its commit word; the
1.1 checks (CRC-32C, parity, header CRC) are tested in tests/recorder/core.
"""
import collections
import struct

import msgpack

FILE_MAGIC = b"DLBNTRC1"
VERSION_MAJOR = 4
OPEN_PATHS = 16      # recent OPEN paths a 4.0 OPEN may share bytes with
PATH_MAX = 65536     # the longest OPEN path put back (dlbn-analyze's cap)
VERSION_MAJOR_MIN = 1
FD_SLOTS = 64        # fd announcement slots per extent (2.0)
SEM_SLOTS = 16       # semaphore announcement slots per extent (2.0)
MARK_COUNTERS = 8    # the loop's counters a MARK may carry
OPEN_FLAGS_USUAL = 0x80000  # 3.0 OPEN flags are XORed with it (O_CLOEXEC)
FILE_HEADER_SIZE = 4096
EXTENT_MAGIC = 0x58424C44
EXTENT_HEADER_SIZE = 64
FILE_PASSIVE = 0x1   # file header flag: some process went passive
EXTENT_FINAL = 0x1   # extent header flag: the stream ended cleanly here

FILE_HEADER = struct.Struct("<8sHHIIIQQQQ64s")
EXTENT_HEADER = struct.Struct("<IIIIIIIIQ24x")
assert EXTENT_HEADER.size == EXTENT_HEADER_SIZE

FileHeader = collections.namedtuple(
    "FileHeader", "magic major minor header_size extent_size flags next_extent "
    "next_proc_id created_realtime_ns created_monotonic_ns host")
ExtentHeader = collections.namedtuple(
    "ExtentHeader", "magic committed proc_id thread_no extent_seq pid tid flags base_ns")
# One initialised extent: its header fields that matter and its record bytes.
Extent = collections.namedtuple("Extent", "seq base_ns body flags offset")

REC = {
    "PROCESS": 1, "THREAD": 2, "FORK": 3, "EXEC": 4, "EXIT": 5, "FD": 6, "SEM": 7,
    "READ": 10, "WRITE": 11, "PREAD": 12, "RECVMSG": 13, "SENDMSG": 14,
    "POLL": 15, "CONNECT": 16, "ACCEPT": 17, "OPEN": 18, "MMAP": 19,
    "SEM_WAIT": 20, "SEM_POST": 21, "SCHED": 22, "TASK": 23,
    "MEM": 24, "MEMSYS": 25, "CHILD": 26,
    "MARK": 30, "CONFIG": 31, "STRING": 32, "NOTE": 33,
    "LAUNCH": 40, "MEMCPY": 41, "SYNC": 42, "WAITEVT": 43, "PROBE": 44,
    "PROBE_DONE": 45, "CUDA_INFO": 46,
    "RANGE_PUSH": 50, "RANGE_POP": 51, "RANGE_START": 52, "RANGE_END": 53,
    "NVTX_MARK": 54, "DOMAIN": 55,
    "MODULE": 60, "STACK": 61,
}
NAME = {v: k for k, v in REC.items()}

# Field names after [type, dt], in the order of dlbn_trace.h.  Short names:
# dur = dur_ns, kind = fd_kind (DLBN_FD_*), inos = POLL's inode list,
# frames = STACK's [module_id, offset, ...] list.
FIELDS = {
    "PROCESS": ["pid", "ppid", "parent_proc_id", "start", "rank", "local_rank",
                "world_size", "realtime_ns", "monotonic_ns", "argv0", "exe",
                "host", "job_id", "clock_source"],
    "THREAD": ["tid", "is_main"],
    "FORK": ["dur", "child_pid"],
    "EXEC": ["path"],
    "EXIT": ["status", "how", "clock_tsc", "clock_drift_ns"],
    "FD": ["fd", "kind", "ino"],
    "SEM": ["slot", "sem"],
    "READ": ["dur", "fd", "kind", "ino", "ret"],
    "WRITE": ["dur", "fd", "kind", "ino", "ret"],
    "PREAD": ["dur", "fd", "ino", "ret", "offset"],
    "RECVMSG": ["dur", "fd", "kind", "ino", "ret", "nfds"],
    "SENDMSG": ["dur", "fd", "kind", "ino", "ret", "nfds"],
    "POLL": ["dur", "call", "ret", "timeout_ms", "inos"],
    "CONNECT": ["dur", "fd", "ret"],
    "ACCEPT": ["dur", "fd", "ret"],
    "OPEN": ["fd", "kind", "ino", "flags", "path"],
    "MMAP": ["fd", "kind", "ino", "length", "prot_flags"],
    "SEM_WAIT": ["dur", "sem", "ret", "call"],
    "SEM_POST": ["sem"],
    "SCHED": ["tid", "run_ns", "runq_wait_ns"],
    "TASK": ["tid", "run_ns", "runq_wait_ns", "timeslices", "name"],
    "MEM": ["rss_kib", "anon_kib", "shmem_kib", "swap_kib", "minflt", "majflt", "utime_us",
            "stime_us", "sample_ns", "pss_kib", "pss_anon_kib", "pss_shmem_kib",
            "private_clean_kib", "private_dirty_kib", "shared_dirty_kib", "rollup_ns"],
    "MEMSYS": ["cg_version", "cg_limit_kib", "cg_usage_kib", "cg_peak_kib", "cg_oom_kills",
               "cg_anon_kib", "cg_shmem_kib", "cg_file_kib", "host_total_kib",
               "host_avail_kib", "shm_size_kib", "shm_free_kib", "rlimit_as_kib",
               "cg_limit_hits"],
    "CHILD": ["pid", "how", "code"],
    "MARK": ["kind", "iter_id", "arg", "run_ns", "runq_ns", "sys_ns", "minflt", "free_ns",
             "free_cpu_ns", "gil_ns", "gil_others_ns"],
    "CONFIG": ["iter_id", "text"],
    "NOTE": ["iter_id", "kind", "text"],
    "STRING": ["id", "text"],
    "LAUNCH": ["stream", "api"],
    "MEMCPY": ["dur", "api", "stream", "bytes", "dir", "async", "host_mem"],
    "SYNC": ["dur", "api", "handle", "gpu_done_ns"],
    "WAITEVT": ["stream", "event"],
    "PROBE": ["probe_id", "stream"],
    "PROBE_DONE": ["probe_id", "complete_ns", "status"],
    "CUDA_INFO": ["api", "ret", "text"],
    "RANGE_PUSH": ["domain_id", "msg_id", "msg"],
    "RANGE_POP": ["domain_id"],
    "RANGE_START": ["range_id", "domain_id", "msg_id", "msg"],
    "RANGE_END": ["range_id"],
    "NVTX_MARK": ["domain_id", "msg_id", "msg"],
    "DOMAIN": ["domain_id", "name"],
    "MODULE": ["module_id", "base", "path"],
    "STACK": ["wait_type", "wait_ts_delta", "frames"],
}
assert set(FIELDS) == set(REC)

# Format 2.0: the records that name an fd without saying what it is, with
# the index of their fd and the 1.x fields that the FD record stands for.
ANNOUNCED = {
    "READ": (1, ["kind", "ino"]), "WRITE": (1, ["kind", "ino"]),
    "RECVMSG": (1, ["kind", "ino"]), "SENDMSG": (1, ["kind", "ino"]),
    "PREAD": (1, ["ino"]),
}

# Enumerations of dlbn_trace.h (DLBN_ prefix dropped).
START_ROOT, START_FORK, START_JOIN = 0, 1, 2
EXIT_EXIT, EXIT__EXIT, EXIT_DTOR = 0, 1, 2
FD_UNKNOWN, FD_PIPE, FD_UNIX, FD_SOCKET, FD_FILE, FD_SHM, FD_OTHER = range(7)
POLL_POLL, POLL_PPOLL, POLL_SELECT, POLL_PSELECT, POLL_EPOLL = range(5)
SEM_WAIT, SEM_TIMEDWAIT, SEM_CLOCKWAIT = 0, 1, 2
SEM_MIN_NS = 20000
MARK_FETCH_BEGIN, MARK_FETCH_END, MARK_FETCH_STOP, MARK_ITER_BEGIN, MARK_STEP = 1, 2, 3, 4, 5
CU_LAUNCH_KERNEL, CU_LAUNCH_KERNEL_EX, CU_GRAPH_LAUNCH = 1, 2, 3
CU_MEMCPY, CU_MEMCPY_HTOD, CU_MEMCPY_DTOH, CU_MEMCPY_DTOD = 10, 11, 12, 13
CU_STREAM_SYNC, CU_CTX_SYNC, CU_EVENT_SYNC, CU_STREAM_QUERY, CU_EVENT_QUERY = 20, 21, 22, 23, 24
COPY_HTOD, COPY_DTOH, COPY_DTOD, COPY_OTHER = 1, 2, 3, 4
HOSTMEM_NA, HOSTMEM_PAGEABLE, HOSTMEM_PINNED, HOSTMEM_UNKNOWN = 0, 1, 2, 3

# Not from dlbn_trace.h: cuda.h's CU_STREAM_PER_THREAD handle ((CUstream)0x2),
# which LAUNCH/MEMCPY/PROBE record verbatim as their `stream`.
STREAM_PER_THREAD = 2


class Record(dict):
    """One record: see the module docstring for its keys."""


class Stream:
    """One thread of one process instance: its extents (sorted by seq) and
    decoded records in emission order.  final: an extent carried
    EXTENT_FINAL (the stream ended cleanly)."""

    def __init__(self, proc_id, thread_no, pid=None, tid=None):
        self.proc_id = proc_id
        self.thread_no = thread_no
        self.pid = pid
        self.tid = tid
        self.extents = []
        self.records = []
        self.fd_records = []  # format 2.x: the FD and SEM records, in order
        self.final = False


def parse_file_header(data):
    """FileHeader of the bytes of a trace file; ValueError if not v1."""
    if len(data) < FILE_HEADER_SIZE:
        raise ValueError("file shorter than its header")
    h = FileHeader(*FILE_HEADER.unpack_from(data, 0))
    if h.magic != FILE_MAGIC:
        raise ValueError("bad magic %r" % h.magic)
    if not VERSION_MAJOR_MIN <= h.major <= VERSION_MAJOR:
        raise ValueError("unknown major version %d" % h.major)
    if h.header_size < FILE_HEADER.size or h.extent_size <= EXTENT_HEADER_SIZE:
        raise ValueError("bad header_size %d / extent_size %d"
                         % (h.header_size, h.extent_size))
    return h


def parse_extent_header(data, offset):
    return ExtentHeader(*EXTENT_HEADER.unpack_from(data, offset))


def _wrap(v):
    """v modulo 2^64 as a signed 64-bit integer, as the writer took it."""
    return (v + (1 << 63)) % (1 << 64) - (1 << 63)


class ExtentState:
    """What an extent of 2.x or later leaves to earlier records: the last FD
    (or OPEN) and SEM record of each announcement slot, the recent OPENs'
    paths (the previous one's before 4.0) and (3.x) the previous OPEN's
    inode, and (3.x) the previous MARK's time and counters."""

    def __init__(self, major=2, base_ns=0):
        self.major = major
        self.said = {}  # slot -> (fd, kind, ino)
        self.fd_ino = 0
        self.sems = {}  # slot -> semaphore address
        self.stack = []
        self.paths = []   # recent OPEN paths, the newest first
        self.open_ino = 0
        self.mark_iter = self.mark_arg = 0
        self.mark_t = base_ns
        self.mark_counters = [0] * MARK_COUNTERS

    def _open(self, fields):
        if self.major >= 3 and len(fields) >= 4:
            if isinstance(fields[2], int):
                self.open_ino = _wrap(self.open_ino + fields[2])
                fields = fields[:2] + [self.open_ino] + fields[3:]
            if isinstance(fields[3], int):
                fields = fields[:3] + [fields[3] ^ OPEN_FLAGS_USUAL] + fields[4:]
        if len(fields) < 5 or not isinstance(fields[4], str):
            self._keep_path(b"")   # a path that is not a string counts, empty
            return fields
        age = fields[7] if self.major >= 4 and len(fields) >= 8 \
            and isinstance(fields[7], int) else 0
        prev = self.paths[age] if 0 <= age < len(self.paths) else b""
        shared = fields[5] if len(fields) >= 6 and isinstance(fields[5], int) else 0
        tail = fields[6] if len(fields) >= 7 and isinstance(fields[6], int) else 0
        shared = min(max(shared, 0), len(prev))
        tail = min(max(tail, 0), len(prev) - shared)
        own = fields[4].encode("utf-8", "surrogateescape")
        if shared + len(own) + tail > PATH_MAX:   # a hostile trace's: its own bytes
            self._keep_path(b"")
            return fields[:4] + [fields[4]]
        whole = prev[:shared] + own + prev[len(prev) - tail:]
        self._keep_path(whole)
        return fields[:4] + [whole.decode("utf-8", "replace")]

    def _keep_path(self, path):
        self.paths.insert(0, path)
        del self.paths[OPEN_PATHS if self.major >= 4 else 1:]

    def _mark(self, fields, t):
        if self.major < 3 or len(fields) < 3:
            return fields
        head = list(fields[:3])
        if isinstance(fields[1], int):
            head[1] = self.mark_iter = _wrap(self.mark_iter + fields[1])
        if isinstance(fields[2], int):
            head[2] = self.mark_arg = _wrap(self.mark_arg + fields[2])
        if len(fields) == 3:
            return head
        # One value: counter 0's; more: the mask, then the values.
        if len(fields) == 4:
            present, values = 1, iter(fields[3:])
        else:
            present = fields[3] if isinstance(fields[3], int) else 0
            values = iter(fields[4:])
        for i in range(MARK_COUNTERS):
            d = next(values, 0) if present >> i & 1 else 0
            if i == 0:  # written: the wall time since the last not run
                d = t - self.mark_t - d
            self.mark_counters[i] = _wrap(self.mark_counters[i] + d)
        self.mark_t = t
        return head + list(self.mark_counters)

    def _stack(self, fields):
        if self.major < 3 or len(fields) < 3 or not isinstance(fields[2], list):
            self.stack = []
            return fields
        shared = fields[3] if len(fields) >= 4 and isinstance(fields[3], int) else 0
        shared = min(max(shared, 0), len(self.stack))
        frames = fields[2] + self.stack[len(self.stack) - shared:]
        self.stack = frames
        return fields[:2] + [frames]

    def fields_1x(self, name, fields, t=0):
        """The fields of a 2.x or 3.x record (at time t) in the 1.x layout
        (FD: its own)."""
        if name == "FD" and self.major >= 3 and len(fields) >= 3 \
                and isinstance(fields[2], int):
            self.fd_ino = _wrap(self.fd_ino + fields[2])
            fields = fields[:2] + [self.fd_ino] + fields[3:]
        if name == "STACK":
            fields = self._stack(fields)
        if name == "OPEN":
            fields = self._open(fields)
        if name == "MARK":
            fields = self._mark(fields, t)
        if name in ("FD", "OPEN") and len(fields) >= 3 \
                and isinstance(fields[0], int) and fields[0] >= 0:
            self.said[fields[0] % FD_SLOTS] = tuple(fields[:3])
        if name == "SEM" and len(fields) >= 2 and isinstance(fields[0], int):
            self.sems[fields[0]] = fields[1]
        if name in ("SEM_WAIT", "SEM_POST"):
            at = 1 if name == "SEM_WAIT" else 0
            if len(fields) > at and isinstance(fields[at], int):
                fields = fields[:at] + [self.sems.get(fields[at], 0)] + fields[at + 1:]
        if name in ANNOUNCED:
            fd_at, missing = ANNOUNCED[name]
            fd = fields[fd_at] if len(fields) > fd_at else None
            ann = self.said.get(fd % FD_SLOTS) if isinstance(fd, int) else None
            known = dict(zip(("kind", "ino"), ann[1:])) if ann and ann[0] == fd else {}
            at = fd_at + 1
            fields = fields[:at] + [known.get(k, 0) for k in missing] + fields[at:]
        return fields


def decode_records(body, base_ns, stream, major=1):
    """Records of one extent body (or of a bare msgpack stream), times made
    absolute from base_ns, fds of a 2.x extent resolved by its FD records.
    Raises ValueError on a partial trailing record."""
    unpacker = msgpack.Unpacker(raw=False, strict_map_key=False)
    unpacker.feed(body)
    out = []
    t = base_ns
    pos = 0
    state = ExtentState(major, base_ns)
    for obj in unpacker:
        end = unpacker.tell()
        if not (isinstance(obj, list) and len(obj) >= 2
                and isinstance(obj[0], int) and isinstance(obj[1], int)):
            raise ValueError("stream %r: not a [type, dt, ...] record at byte %d: %r"
                             % ((stream.proc_id, stream.thread_no), pos, obj))
        t += obj[1]
        name = NAME.get(obj[0], obj[0])
        rec = Record(type=name, t=t, size=end - pos, raw=obj,
                     proc_id=stream.proc_id, thread_no=stream.thread_no,
                     pid=stream.pid, tid=stream.tid)
        fields = state.fields_1x(name, obj[2:], t) if major >= 2 else obj[2:]
        rec.update(zip(FIELDS.get(name, ()), fields))
        if major >= 2 and name in ("FD", "SEM"):
            stream.fd_records.append(rec)  # handed out by no reader
        else:
            out.append(rec)
        pos = end
    if pos != len(body):
        raise ValueError("stream %r: %d trailing bytes after the last record"
                         % ((stream.proc_id, stream.thread_no), len(body) - pos))
    return out


class Trace:
    """A whole trace file, decoded.  Header fields are attributes (major,
    minor, header_size, extent_size, flags, next_extent, next_proc_id,
    created_rt, created_mono, host); streams maps (proc_id, thread_no) to
    Stream; record_count / record_bytes total the decoded records.

    allow_bare: a file without the trace magic is read as the bare msgpack
    stream of tests/recorder/nvtx/standin_recorder.c (one stream (0, 0), times
    from 0, no header: header attributes are None)."""

    def __init__(self, path, allow_bare=False):
        with open(path, "rb") as f:
            data = f.read()
        self.streams = {}
        if allow_bare and not data.startswith(FILE_MAGIC):
            self._read_bare(data)
        else:
            self._read_extents(data)
        self.record_count = sum(len(st.records) for st in self.streams.values())
        self.record_bytes = sum(r["size"] for st in self.streams.values()
                                for r in st.records)

    def _read_bare(self, data):
        self.major = self.minor = self.header_size = self.extent_size = None
        self.flags = self.next_extent = self.next_proc_id = None
        self.created_rt = self.created_mono = self.host = None
        st = self.streams[(0, 0)] = Stream(0, 0)
        st.records = decode_records(data, 0, st)

    def _read_extents(self, data):
        h = parse_file_header(data)
        (self.major, self.minor, self.header_size, self.extent_size, self.flags,
         self.next_extent, self.next_proc_id, self.created_rt, self.created_mono) = h[1:10]
        self.host = h.host.rstrip(b"\0").decode()
        # Extents are handed out before they are initialised, so next_extent
        # bounds the initialised ones; the file may end early (killed writer).
        for k in range(self.next_extent):
            off = self.header_size + k * self.extent_size
            if off + EXTENT_HEADER_SIZE > len(data):
                break
            e = parse_extent_header(data, off)
            if e.magic != EXTENT_MAGIC:
                continue  # allocated, never initialised: skip
            body = data[off + EXTENT_HEADER_SIZE:off + EXTENT_HEADER_SIZE + e.committed]
            key = (e.proc_id, e.thread_no)
            st = self.streams.setdefault(key, Stream(e.proc_id, e.thread_no))
            st.pid, st.tid = e.pid, e.tid
            st.extents.append(Extent(e.extent_seq, e.base_ns, body, e.flags, off))
        for key, st in self.streams.items():
            st.extents.sort()
            seqs = [x.seq for x in st.extents]
            if seqs != list(range(len(seqs))):
                raise ValueError("stream %r has extents %r" % (key, seqs))
            for x in st.extents:
                st.records += decode_records(x.body, x.base_ns, st, self.major)
                if x.flags & EXTENT_FINAL:
                    st.final = True

    def records(self, type_=None, proc_id=None):
        """Records (optionally of one type name / process instance), stream
        by stream in (proc_id, thread_no) order, each in emission order."""
        for (pid, _tno), st in sorted(self.streams.items()):
            if proc_id is not None and pid != proc_id:
                continue
            for r in st.records:
                if type_ is None or r["type"] == type_:
                    yield r

    def processes(self):
        """proc_id -> that process instance's PROCESS record."""
        return {r["proc_id"]: r for r in self.records("PROCESS")}

    def records_of_pid(self, pid, type_=None, main_thread_only=True):
        """Records of OS process pid (every process instance it hosted, e.g.
        across exec), of its main thread (tid == pid) unless
        main_thread_only is false, sorted by time."""
        out = [r for st in self.streams.values()
               if st.pid == pid and (not main_thread_only or st.tid == pid)
               for r in st.records if type_ is None or r["type"] == type_]
        return sorted(out, key=lambda r: r["t"])


def read_records(path, allow_bare=False):
    """All records of the trace at path, in Trace.records() order."""
    return list(Trace(path, allow_bare=allow_bare).records())


def of_type(records, name):
    """The records of one type name, order kept."""
    return [r for r in records if r["type"] == name]
