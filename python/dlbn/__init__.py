"""dlbn: data-loading bottleneck detector for PyTorch training.

This package is the `dlbn` command (dlbn.cli) around the native programs
installed inside it, in the layout of `make install` under _native/:
bin/dlbn-run, bin/dlbn-analyze, bin/dlbn-preflight, lib/dlbn/libdlbn.so
with its Python bootstrap in lib/dlbn/dlbn-python/, share/man/ and
include/dlbn/dlbn_trace.h.  Nothing here is imported by the program being
recorded: the preload brings its own bootstrap.
"""

import os

__all__ = ["native_dir", "library_path", "include_dir"]


def native_dir():
    """The installed layout inside the package (PREFIX of make install)."""
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "_native")


def library_path():
    """libdlbn.so, the recorder to put in LD_PRELOAD."""
    return os.path.join(native_dir(), "lib", "dlbn", "libdlbn.so")


def include_dir():
    """Where dlbn/dlbn_trace.h is, for programs that read traces."""
    return os.path.join(native_dir(), "include")
