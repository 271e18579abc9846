/*
 * nvtx_inject.h - libdlbn.so as an NVTX v3 injection library, and dlbn's own
 * NVTX ranges when another tool owns the injection.
 *
 * Two modes, chosen once by nvtx_setup() in the library constructor:
 *   receive  NVTX_INJECTION64_PATH was unset (or already names libdlbn.so):
 *            it is set to libdlbn.so's own absolute path, every NVTX
 *            instance of the process (libtorch, NCCL, the application ...)
 *            calls InitializeInjectionNvtx2 on its first NVTX call, and the
 *            ranges become RANGE_* / NVTX_MARK / DOMAIN / STRING records.
 *   emit     NVTX_INJECTION64_PATH names another tool (Nsight Systems): it is
 *            left alone, dlbn receives no NVTX, and the main thread's loader
 *            waits are pushed to that tool as "loader wait" ranges in a "dlbn"
 *            domain through the NVTX implementation compiled into
 *            nvtx_inject.c.
 * DLBN_NVTX=0 turns both off (and InitializeInjectionNvtx2 then declines).
 */
#ifndef DLBN_NVTX_INJECT_H
#define DLBN_NVTX_INJECT_H

#include <stdint.h>

#include "recorder.h"

/* Longest ad-hoc or registered message recorded, in bytes (UTF-8). */
#define DLBN_NVTX_MSG_MAX 128

/*
 * Decide the mode (see above).  Call once from the library constructor of
 * the process, after the recorder is ON and before the program's first NVTX
 * call; it may call setenv.  Also registers a fork handler so that a forked
 * child re-announces the domains and strings it uses in its own stream.
 */
void nvtx_setup(void) DLBN_HIDDEN;

/*
 * Main thread only, around a wait that may be a batch wait (wait_fanout.c).
 * In emit mode they open and close one "loader wait" range in the "dlbn"
 * domain of the owning tool; otherwise they return at once.  Call them with
 * the hook guard held (hook_enter() done) so that whatever the other tool
 * does inside its callbacks (writes, allocations) is not recorded as the
 * program's I/O.
 */
void nvtx_wait_begins(uint64_t t_ns) DLBN_HIDDEN;
void nvtx_wait_finished(uint8_t rec_type, uint64_t t0_ns, uint64_t dur_ns) DLBN_HIDDEN;

/* The NVTX v3 injection entry point (exported; see exports.map). */
int InitializeInjectionNvtx2(const void *(*get_export_table)(uint32_t)) DLBN_EXPORT;

#endif /* DLBN_NVTX_INJECT_H */
