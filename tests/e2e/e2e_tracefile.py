"""Minimal reader of the dlbn trace format v1 (libintercept/dlbn_trace.h),
for tests that check what the recorder wrote independently of dlbn-analyze.

read_trace(path) -> {"header": {...}, "streams": {(proc_id, thread_no):
                     {"pid", "tid", "records": [[type, t_ns, fields...]]}}}
Record times are made absolute (the delta chain of the format).
"""

import struct

import msgpack

FILE_HEADER = struct.Struct("<8sHHIIIQQQQ64s")
EXTENT_HEADER = struct.Struct("<IIIIIIIIQ24s")
EXTENT_MAGIC = 0x58424C44

REC_PROCESS, REC_THREAD, REC_EXIT = 1, 2, 5
REC_MARK, REC_CONFIG = 30, 31


def read_trace(path):
    data = open(path, "rb").read()
    (magic, major, minor, header_size, extent_size, flags, next_extent,
     next_proc, rt_ns, mono_ns, host) = FILE_HEADER.unpack_from(data, 0)
    if magic != b"DLBNTRC1":
        raise ValueError("not a dlbn trace")
    header = {"version": (major, minor), "header_size": header_size,
              "extent_size": extent_size, "flags": flags,
              "extents": next_extent, "processes": next_proc}
    extents = {}
    offset = header_size
    while offset + EXTENT_HEADER.size <= len(data):
        (emagic, committed, proc_id, thread_no, seq, pid, tid, eflags,
         base_ns, _) = EXTENT_HEADER.unpack_from(data, offset)
        if emagic == EXTENT_MAGIC:
            body = data[offset + EXTENT_HEADER.size:
                        offset + EXTENT_HEADER.size + committed]
            extents.setdefault((proc_id, thread_no), []).append(
                (seq, pid, tid, base_ns, body))
        offset += extent_size
    streams = {}
    for key, parts in extents.items():
        records = []
        for seq, pid, tid, base_ns, body in sorted(parts):
            t = base_ns
            for rec in _unpack_all(body):
                t += rec[1]
                records.append([rec[0], t] + list(rec[2:]))
        streams[key] = {"pid": parts[0][1], "tid": parts[0][2], "records": records}
    return {"header": header, "streams": streams}


def _unpack_all(body):
    unpacker = msgpack.Unpacker(raw=False, strict_map_key=False)
    unpacker.feed(body)
    return list(unpacker)


def records_of(trace, pid, rec_type, main_thread_only=True):
    out = []
    for stream in trace["streams"].values():
        if stream["pid"] != pid or (main_thread_only and stream["tid"] != pid):
            continue
        out += [r for r in stream["records"] if r[0] == rec_type]
    return sorted(out, key=lambda r: r[1])
