"""dlbn-analyze on bad input: empty, truncated, garbage and wrong-version
files, and a missing one.  Each must exit 1 with a clear one-shot message on
stderr, never crash (no signal, no sanitizer report), and usage errors exit 2.
"""

import os
import struct

import pytest

from e2e_common import analyze, run_workload

FILE_HEADER_SIZE = 4096          # DLBN_FILE_HEADER_SIZE
VERSION_MAJOR_OFFSET = 8         # after the 8-byte magic


@pytest.fixture(scope="module")
def good_trace(rundir):
    run = run_workload(rundir, "small", [
        "--workers", "1", "--batch-size", "2", "--sample-ms", "1",
        "--step-ms", "1", "--steps-per-epoch", "12"])
    proc = analyze(run.trace, "--format", "json")
    assert proc.returncode == 0, proc.stderr
    return run.trace.read_bytes()


def write(rundir, name, data):
    path = rundir / name
    path.write_bytes(data)
    return path


def assert_rejected(path, *keywords):
    proc = analyze(path)
    assert proc.returncode == 1, "exit %d\nstdout:%s\nstderr:%s" % (
        proc.returncode, proc.stdout[-2000:], proc.stderr[-2000:])
    err = proc.stderr.strip()
    assert err, "no message on stderr"
    assert "AddressSanitizer" not in err and "runtime error" not in err, err
    assert os.path.basename(str(path)) in err or "dlbn" in err.lower(), err
    for word in keywords:
        assert word in err.lower(), err
    return proc


def test_empty(rundir):
    assert_rejected(write(rundir, "empty.dlbn", b""))


def test_garbage(rundir):
    assert_rejected(write(rundir, "garbage.dlbn", os.urandom(8192)))


def test_text_file(rundir):
    assert_rejected(write(rundir, "text.dlbn", b"this is not a trace\n" * 300))


def test_truncated_in_file_header(rundir, good_trace):
    assert_rejected(write(rundir, "trunc_header.dlbn", good_trace[:100]))


def test_truncated_in_extent(rundir, good_trace):
    assert len(good_trace) > FILE_HEADER_SIZE + 1000
    assert_rejected(write(rundir, "trunc_extent.dlbn",
                          good_trace[:FILE_HEADER_SIZE + 1000]))


def test_wrong_major_version(rundir, good_trace):
    data = bytearray(good_trace)
    (major,) = struct.unpack_from("<H", data, VERSION_MAJOR_OFFSET)
    assert major == 4, "trace layout changed: version_major at offset 8 is %d" % major
    struct.pack_into("<H", data, VERSION_MAJOR_OFFSET, 99)
    assert_rejected(write(rundir, "v99.dlbn", bytes(data)), "version")


def test_missing_file(rundir):
    assert_rejected(rundir / "does-not-exist.dlbn")


def test_usage_errors_exit_2(rundir):
    assert analyze(rundir / "x.dlbn", "--no-such-option").returncode == 2
    assert analyze(rundir / "x.dlbn", "--format", "no-such-format").returncode == 2
