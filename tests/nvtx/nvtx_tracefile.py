"""Test-side decoder for dlbn traces (tests/nvtx, tests/cxx).

Reads either the real trace format (dlbn_trace.h: 4096-byte file header,
extents with a 64-byte header whose `committed` counts record bytes,
msgpack records [type, dt, ...]) or the bare msgpack stream written by the
stand-in recorder (standin_recorder.c).  Returns records as Record tuples
with absolute times; streams are keyed by (proc_id, thread_no), the
stand-in's single stream by (0, 0).
"""
import collections
import struct

import msgpack

FILE_MAGIC = b"DLBNTRC1"
FILE_HEADER_SIZE = 4096
EXTENT_MAGIC = 0x58424C44
EXTENT_HEADER = struct.Struct("<IIIIIIIIQ24x")  # 64 bytes

REC = {
    "STRING": 32, "POLL": 15, "SEM_WAIT": 20,
    "RANGE_PUSH": 50, "RANGE_POP": 51, "RANGE_START": 52, "RANGE_END": 53,
    "NVTX_MARK": 54, "DOMAIN": 55, "MODULE": 60, "STACK": 61,
}

Record = collections.namedtuple("Record", "stream type t fields")


def _decode_stream(data, stream, base_ns):
    out = []
    t = base_ns
    for rec in _unpack_all(data):
        t += rec[1]
        out.append(Record(stream, rec[0], t, rec[2:]))
    return out


def _unpack_all(data):
    u = msgpack.Unpacker(raw=False)
    u.feed(data)
    return list(u)


def read_trace(path):
    """All records of the trace at path, grouped in emission order per stream."""
    with open(path, "rb") as f:
        data = f.read()
    if not data.startswith(FILE_MAGIC):
        return _decode_stream(data, (0, 0), 0)
    extent_size = struct.unpack_from("<I", data, 16)[0]
    extents = []
    off = FILE_HEADER_SIZE
    while off + EXTENT_HEADER.size <= len(data):
        (magic, committed, proc_id, thread_no, seq, _pid, _tid, _flags,
         base_ns) = EXTENT_HEADER.unpack_from(data, off)
        if magic == EXTENT_MAGIC:
            body = data[off + EXTENT_HEADER.size:off + EXTENT_HEADER.size + committed]
            extents.append(((proc_id, thread_no), seq, base_ns, body))
        off += extent_size
    extents.sort(key=lambda e: (e[0], e[1]))
    records = []
    for stream, _seq, base_ns, body in extents:
        records.extend(_decode_stream(body, stream, base_ns))
    return records


def of_type(records, name):
    return [r for r in records if r.type == REC[name]]
