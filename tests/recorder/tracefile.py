"""tracefile.py - an independent reader of dlbn trace files (format v1).

Parses the file header, every extent and its msgpack records with Python's
msgpack module, following libintercept/dlbn_trace.h.  Used by the recorder
tests as a format round-trip check; it shares no code with the C reader.
"""
import struct

import msgpack

FILE_MAGIC = b"DLBNTRC1"
EXTENT_MAGIC = 0x58424C44
EXTENT_HEADER = struct.Struct("<IIIIIIIIQ24x")
FILE_HEADER = struct.Struct("<8sHHIIIQQQQ64s")

REC = {
    "PROCESS": 1, "THREAD": 2, "FORK": 3, "EXEC": 4, "EXIT": 5,
    "READ": 10, "WRITE": 11, "PREAD": 12, "RECVMSG": 13, "SENDMSG": 14,
    "POLL": 15, "CONNECT": 16, "ACCEPT": 17, "OPEN": 18, "MMAP": 19,
    "SEM_WAIT": 20, "SEM_POST": 21, "SCHED": 22,
    "MARK": 30, "CONFIG": 31, "STRING": 32,
}
NAME = {v: k for k, v in REC.items()}

FIELDS = {
    "PROCESS": ["pid", "ppid", "parent_proc_id", "start", "rank", "local_rank",
                "world_size", "realtime_ns", "monotonic_ns", "argv0", "exe",
                "host", "job_id", "clock_source"],
    "THREAD": ["tid", "is_main"],
    "FORK": ["dur", "child_pid"],
    "EXEC": ["path"],
    "EXIT": ["status", "how"],
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
    "MARK": ["kind", "iter_id", "arg"],
    "CONFIG": ["iter_id", "text"],
}


class Record(dict):
    """One record: type name, absolute time t, fields by name, raw bytes."""


class Stream:
    def __init__(self, proc_id, thread_no):
        self.proc_id = proc_id
        self.thread_no = thread_no
        self.extents = []
        self.records = []
        self.final = False
        self.pid = self.tid = None


class Trace:
    def __init__(self, path):
        with open(path, "rb") as f:
            data = f.read()
        if len(data) < 4096:
            raise ValueError("file shorter than its header")
        (magic, self.major, self.minor, self.header_size, self.extent_size,
         self.flags, self.next_extent, self.next_proc_id, self.created_rt,
         self.created_mono, host) = FILE_HEADER.unpack_from(data, 0)
        if magic != FILE_MAGIC:
            raise ValueError("bad magic %r" % magic)
        if self.major != 1:
            raise ValueError("unknown major version %d" % self.major)
        self.host = host.rstrip(b"\0").decode()
        self.streams = {}
        self.record_bytes = 0
        self.record_count = 0
        for k in range(self.next_extent):
            off = self.header_size + k * self.extent_size
            if off + 64 > len(data):
                break
            (emagic, committed, proc_id, thread_no, seq, pid, tid, eflags,
             base_ns) = EXTENT_HEADER.unpack_from(data, off)
            if emagic != EXTENT_MAGIC:
                continue
            body = data[off + 64: off + 64 + committed]
            key = (proc_id, thread_no)
            st = self.streams.setdefault(key, Stream(proc_id, thread_no))
            st.extents.append((seq, base_ns, body, eflags))
            st.pid, st.tid = pid, tid
        for st in self.streams.values():
            st.extents.sort()
            seqs = [e[0] for e in st.extents]
            if seqs != list(range(len(seqs))):
                raise ValueError("stream %r has extents %r" % ((st.proc_id, st.thread_no), seqs))
            for seq, base_ns, body, eflags in st.extents:
                t = base_ns
                unp = msgpack.Unpacker(raw=False, strict_map_key=False)
                unp.feed(body)
                pos = 0
                for obj in unp:
                    end = unp.tell()
                    t += obj[1]
                    name = NAME.get(obj[0], obj[0])
                    rec = Record(type=name, t=t, size=end - pos)
                    for fname, val in zip(FIELDS.get(name, []), obj[2:]):
                        rec[fname] = val
                    rec["raw"] = obj
                    st.records.append(rec)
                    self.record_bytes += end - pos
                    self.record_count += 1
                    pos = end
                if pos != len(body):
                    raise ValueError("trailing bytes in extent")
                if eflags & 1:
                    st.final = True

    def processes(self):
        """proc_id -> PROCESS record (from thread_no 0)."""
        out = {}
        for (pid, tno), st in self.streams.items():
            for r in st.records:
                if r["type"] == "PROCESS":
                    out[pid] = r
        return out

    def records(self, type_=None, proc_id=None):
        for (pid, tno), st in sorted(self.streams.items()):
            if proc_id is not None and pid != proc_id:
                continue
            for r in st.records:
                if type_ is None or r["type"] == type_:
                    r = Record(r)
                    r["proc_id"], r["thread_no"] = pid, tno
                    yield r
