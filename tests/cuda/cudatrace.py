"""cudatrace.py - minimal reader of dlbn trace files (format v1) for the CUDA
tests: file header, extents, msgpack records (libintercept/dlbn_trace.h).
Independent of the C reader; decodes with Python's msgpack module.
"""
import struct

import msgpack

EXTENT_HEADER = struct.Struct("<IIIIIIIIQ24x")
FILE_HEADER = struct.Struct("<8sHHIIIQQ")
EXTENT_MAGIC = 0x58424C44

TYPES = {1: "PROCESS", 2: "THREAD", 10: "READ", 15: "POLL", 20: "SEM_WAIT",
         40: "LAUNCH", 41: "MEMCPY", 42: "SYNC", 43: "WAITEVT", 44: "PROBE",
         45: "PROBE_DONE", 46: "CUDA_INFO"}
FIELDS = {
    "READ": ["dur", "fd", "kind", "ino", "ret"],
    "POLL": ["dur", "call", "ret", "timeout_ms", "inos"],
    "SEM_WAIT": ["dur", "sem", "ret", "call"],
    "LAUNCH": ["stream", "api"],
    "MEMCPY": ["dur", "api", "stream", "bytes", "dir", "async", "host_mem"],
    "SYNC": ["dur", "api", "handle"],
    "WAITEVT": ["stream", "event"],
    "PROBE": ["probe_id", "stream"],
    "PROBE_DONE": ["probe_id", "complete_ns", "status"],
    "CUDA_INFO": ["api", "ret", "text"],
}

CU_LAUNCH_KERNEL, CU_LAUNCH_KERNEL_EX, CU_GRAPH_LAUNCH = 1, 2, 3
CU_MEMCPY_HTOD, CU_MEMCPY_DTOH = 11, 12
CU_STREAM_SYNC, CU_CTX_SYNC, CU_EVENT_SYNC = 20, 21, 22
COPY_HTOD, COPY_DTOH = 1, 2
HOSTMEM_PAGEABLE, HOSTMEM_PINNED = 1, 2
STREAM_PER_THREAD = 2


def read_records(path):
    """All records of all streams: dicts with type, t (absolute ns), pid,
    tid and the named fields; ordered by stream, then emission."""
    with open(path, "rb") as f:
        data = f.read()
    magic, major, _minor, header_size, extent_size, _flags, next_extent, _ = \
        FILE_HEADER.unpack_from(data, 0)
    assert magic == b"DLBNTRC1" and major == 1, "not a dlbn v1 trace"
    extents = []
    for k in range(next_extent):
        off = header_size + k * extent_size
        if off + 64 > len(data):
            break
        (emagic, committed, proc_id, thread_no, seq, pid, tid, _eflags,
         base_ns) = EXTENT_HEADER.unpack_from(data, off)
        if emagic != EXTENT_MAGIC:
            continue
        extents.append(((proc_id, thread_no, seq), pid, tid, base_ns,
                        data[off + 64: off + 64 + committed]))
    out = []
    for _key, pid, tid, base_ns, body in sorted(extents):
        t = base_ns
        for obj in _unpack(body):
            t += obj[1]
            name = TYPES.get(obj[0], obj[0])
            rec = {"type": name, "t": t, "pid": pid, "tid": tid}
            rec.update(zip(FIELDS.get(name, []), obj[2:]))
            out.append(rec)
    return out


def _unpack(body):
    unp = msgpack.Unpacker(raw=False, strict_map_key=False)
    unp.feed(body)
    return list(unp)


def of_type(records, name):
    return [r for r in records if r["type"] == name]
