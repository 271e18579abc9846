/*
 * stacks.h - native stacks (module + offset) at the longest main-thread
 * waits, through libunwind loaded privately.
 *
 * libunwind.so.8 is dlopen()ed with RTLD_LOCAL on the first capture and
 * never linked: Debian's libunwind exports _Unwind_* and a weak backtrace
 * which, in the global scope, would take over C++ exception unwinding in the
 * whole process (docs/DESIGN.md, "Recorder").  Without libunwind there are
 * no stacks.
 *
 * Policy (DLBN_STACKS):
 *   unset/1  adaptive: a wait of at least 1 ms whose duration beats the
 *            16th longest seen so far in this process, at most 10 captures
 *            per second (bursts of 20);
 *   all      every wait of at least 1 ms (tests);
 *   0        off.
 *
 * Records: MODULE (module_id, base, path) once per loaded object per process
 * instance, before the first STACK that refers to it; STACK (wait_type,
 * wait_ts_delta, [module_id, offset, ...]) innermost frame first, without
 * libdlbn.so's own frames.  base is the object's load bias (dlpi_addr), so
 * offset is an ELF virtual address in that file; it is the return address
 * minus one, i.e. it points inside the call instruction.
 */
#ifndef DLBN_STACKS_H
#define DLBN_STACKS_H

#include <stdint.h>

#include "recorder.h"

#define DLBN_STACK_MAX_FRAMES 32

/*
 * Main thread, at the end of a wait that may be a batch wait
 * (wait_fanout.c), with the hook guard held: libunwind and the loader may
 * call hooked functions, which must not be recorded.  rec_type is the wait's
 * record type (DLBN_REC_POLL, DLBN_REC_SEM_WAIT ...), t0_ns its start.
 */
void stacks_wait_finished(uint8_t rec_type, uint64_t t0_ns, uint64_t dur_ns) DLBN_HIDDEN;

#endif /* DLBN_STACKS_H */
