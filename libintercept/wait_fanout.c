/*
 * wait_fanout.c - passes "a main-thread wait that may be a batch wait begins /
 * ends" from the libc hooks to the modules that act on it.
 *
 * The libc hooks know when the training loop blocks (poll/read on a pipe or
 * unix socket, a semaphore wait); three optional modules care:
 *   gpu_probe.c    records drain probes so the analyzer can tell whether the
 *                  GPU still had work while the loop waited;
 *   nvtx_inject.c  mirrors the wait as an NVTX range when another tool owns
 *                  NVTX injection;
 *   stacks.c       captures native stacks at the longest waits.
 * Each is referenced weakly so that a build without one of them still links
 * and the hooks pay one predictable branch for it.
 */
#include "recorder.h"

extern void gpu_probe_wait_begins(uint64_t t_ns) __attribute__((weak)) DLBN_HIDDEN;
extern void gpu_probe_wait_finished(uint8_t rec_type, uint64_t t0_ns, uint64_t dur_ns)
	__attribute__((weak)) DLBN_HIDDEN;
extern void nvtx_wait_begins(uint64_t t_ns) __attribute__((weak)) DLBN_HIDDEN;
extern void nvtx_wait_finished(uint8_t rec_type, uint64_t t0_ns, uint64_t dur_ns)
	__attribute__((weak)) DLBN_HIDDEN;
extern void stacks_wait_finished(uint8_t rec_type, uint64_t t0_ns, uint64_t dur_ns)
	__attribute__((weak)) DLBN_HIDDEN;

void loader_wait_begins(uint64_t t_ns)
{
	if (gpu_probe_wait_begins)
		gpu_probe_wait_begins(t_ns);
	if (nvtx_wait_begins)
		nvtx_wait_begins(t_ns);
}

void loader_wait_finished(uint8_t rec_type, uint64_t t0_ns, uint64_t dur_ns)
{
	if (gpu_probe_wait_finished)
		gpu_probe_wait_finished(rec_type, t0_ns, dur_ns);
	if (nvtx_wait_finished)
		nvtx_wait_finished(rec_type, t0_ns, dur_ns);
	if (stacks_wait_finished)
		stacks_wait_finished(rec_type, t0_ns, dur_ns);
}
