/*
 * cuda_hooks.h - shared state of the CUDA driver interception of libdlbn.so
 * (cuda_dlsym.c, cuda_hooks.c, gpu_probe.c).
 *
 * libdlbn.so never links libcuda and never calls the driver by symbol.  Real
 * driver entry points are captured when the application resolves them:
 *   - dlsym(handle, "cu...") on a real handle      (cuda_dlsym.c)
 *   - cuGetProcAddress / cuGetProcAddress_v2        (cuda_hooks.c)
 *   - PLT calls of an application linked to libcuda: our exported cu* hook
 *     finds the real one through dlopen("libcuda.so.1", RTLD_NOLOAD).
 * Each hooked entry point is one *variant* (exact driver symbol, so exact
 * ABI and default-stream semantics); each variant has one wrapper, which is
 * also what libdlbn.so exports under the variant's name, and one slot that
 * holds the real pointer the wrapper calls.
 *
 * This file includes cuda.h the way the driver itself does
 * (__CUDA_API_VERSION_INTERNAL) so that every exported name (cuLaunchKernel,
 * cuLaunchKernel_ptsz, cuMemcpyHtoD_v2, ...) is declared exactly once, without
 * the header's renaming macros.
 */
#ifndef DLBN_CUDA_HOOKS_H
#define DLBN_CUDA_HOOKS_H

#ifndef __CUDA_API_VERSION_INTERNAL
#define __CUDA_API_VERSION_INTERNAL 1
#endif
#include <cuda.h>

#include <stdbool.h>
#include <stdint.h>

#include "recorder.h"

/* The hooked driver entry points.  Order matches cu_variants[]. */
enum cu_variant {
	CUV_GET_PROC_ADDRESS,	 /* 4 args, CUDA 11.3 */
	CUV_GET_PROC_ADDRESS_V2, /* 5 args, CUDA 12.0 */
	CUV_LAUNCH_KERNEL,
	CUV_LAUNCH_KERNEL_PTSZ,
	CUV_LAUNCH_KERNEL_EX,
	CUV_LAUNCH_KERNEL_EX_PTSZ,
	CUV_GRAPH_LAUNCH,
	CUV_GRAPH_LAUNCH_PTSZ,
	CUV_MEMCPY_HTOD,
	CUV_MEMCPY_HTOD_PTDS,
	CUV_MEMCPY_DTOH,
	CUV_MEMCPY_DTOH_PTDS,
	CUV_MEMCPY_DTOD,
	CUV_MEMCPY_DTOD_PTDS,
	CUV_MEMCPY_HTOD_ASYNC,
	CUV_MEMCPY_HTOD_ASYNC_PTSZ,
	CUV_MEMCPY_DTOH_ASYNC,
	CUV_MEMCPY_DTOH_ASYNC_PTSZ,
	CUV_MEMCPY_DTOD_ASYNC,
	CUV_MEMCPY_DTOD_ASYNC_PTSZ,
	CUV_MEMCPY,
	CUV_MEMCPY_PTDS,
	CUV_MEMCPY_ASYNC,
	CUV_MEMCPY_ASYNC_PTSZ,
	CUV_STREAM_SYNC,
	CUV_STREAM_SYNC_PTSZ,
	CUV_CTX_SYNC,
	CUV_EVENT_SYNC,
	CUV_STREAM_WAIT_EVENT,
	CUV_STREAM_WAIT_EVENT_PTSZ,
	CUV_COUNT
};

struct cu_variant_info {
	const char *name; /* exact exported driver symbol */
	const char *base; /* the name a cuGetProcAddress caller passes */
	bool per_thread;  /* the _ptsz/_ptds variant of `base` */
	int abi_version;  /* a cudaVersion for which the driver hands out this ABI */
	void *wrapper;	  /* our function with this ABI (also exported as `name`) */
};

extern const struct cu_variant_info cu_variants[CUV_COUNT] DLBN_HIDDEN;

/* Real driver pointers, one per variant (NULL until captured). */
extern void *cu_real[CUV_COUNT] DLBN_HIDDEN;

/* The variant exported as `name`, or -1. */
int cu_variant_by_name(const char *name) DLBN_HIDDEN;

/*
 * What to hand back to an application that resolved variant v to `real`:
 * our wrapper (after capturing `real`), or `real` itself when it cannot be
 * wrapped safely (a different driver instance, or `real` is our own hook).
 */
void *cu_capture(int v, void *real) DLBN_HIDDEN;

/* The real dlsym of glibc (default version), never the interposed one. */
void *cu_real_dlsym(void *handle, const char *name) DLBN_HIDDEN;

/*
 * A driver entry point for dlbn's own use (probes, pointer queries), through
 * the captured real cuGetProcAddress or the loaded libcuda's handle.  NULL if
 * the driver is not reachable.  Not for the launch path.
 */
void *cu_driver_sym(const char *name) DLBN_HIDDEN;

/*
 * Stream activity for the drain probes (gpu_probe.c).  Lock-free, no
 * syscalls: called from every launch wrapper.  True when a wait for the
 * interpreter's lock asks for a probe after the launch's or copy's record
 * (gpu_probe_after_lock_wait).
 */
bool gpu_probe_stream_used(CUstream stream) DLBN_HIDDEN;

/*
 * The stream value recorded: 0 for the legacy default stream however it was
 * named (NULL on a legacy variant, CU_STREAM_LEGACY on any), and
 * CU_STREAM_PER_THREAD for the calling thread's per-thread default stream
 * (NULL on a _ptsz/_ptds variant); other handles as they are.
 */
static inline CUstream cu_stream_id(CUstream s)
{
	return s == CU_STREAM_LEGACY ? NULL : s;
}

static inline CUstream cu_ptsz_stream(CUstream s)
{
	return s == NULL ? CU_STREAM_PER_THREAD : cu_stream_id(s);
}

/*
 * Drain probes.  Called by the recorder's fan-out on the main thread, from
 * inside a libc hook (so not re-entering hook_enter here):
 *   gpu_probe_wait_begins   a main-thread wait that may be a batch wait is
 *                           about to block: record probes on the streams used
 *                           since the last probe, resolve finished ones.
 *   gpu_probe_wait_finished that wait ended: resolve finished probes.
 *   gpu_probe_poll          resolve finished probes (never blocks): called
 *                           after the sync hooks on the main thread, and by
 *                           the recorder's exit path as a last chance.
 * All are no-ops in a process that never launched GPU work, and off the
 * main thread.
 */
void gpu_probe_wait_begins(uint64_t t_ns) DLBN_HIDDEN;
/* A launch's (launch true) or host-to-device copy's record is written and
 * gpu_probe_stream_used said the main thread waited for the interpreter's
 * lock in this loop period or the one before (hooks_gil.c): probe the work
 * queued so far, whose drain the next wait's probes would not show when
 * the loop takes long to get there, or to its next launch. */
void gpu_probe_after_lock_wait(bool launch) DLBN_HIDDEN;
void gpu_probe_wait_finished(uint8_t rec_type, uint64_t t0_ns, uint64_t dur_ns) DLBN_HIDDEN;
void gpu_probe_poll(void) DLBN_HIDDEN;

/*
 * Sync drains (gpu_probe.c): gpu_probe_sync_begins(stream, now) records an event
 * on the stream a cuStreamSynchronize is about to wait for (main thread, when
 * probing works, rate-limited; false when it did not); after that sync has
 * returned, gpu_probe_sync_drained() is the host time at which the GPU
 * finished the work before it, 0 when unknown.  Called inside hook_enter.
 */
bool gpu_probe_sync_begins(CUstream stream, uint64_t now) DLBN_HIDDEN;
uint64_t gpu_probe_sync_drained(void) DLBN_HIDDEN;

/* One CUDA_INFO record: api (a DLBN_CU_* or CUDA_INFO_* code), ret, text. */
void cu_info(int64_t api, int64_t ret, const char *text) DLBN_HIDDEN;

#endif /* DLBN_CUDA_HOOKS_H */
