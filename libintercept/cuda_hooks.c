/*
 * cuda_hooks.c - the CUDA driver hooks of libdlbn.so: one wrapper per driver
 * variant (launches, copies, synchronisation, cuStreamWaitEvent) and the
 * cuGetProcAddress(_v2) wrappers that hand those wrappers out.
 *
 * Each wrapper is exported under the exact driver symbol it stands for, so
 * it serves three callers: a PLT call from an application linked to libcuda,
 * a dlsym() on the libcuda handle (cuda_dlsym.c) and a cuGetProcAddress
 * answer.  It calls the real pointer captured in cu_real[]; if none was
 * captured (the PLT case) it finds it once through libcuda's own handle,
 * dlopen("libcuda.so.1", RTLD_NOLOAD).  libdlbn.so never links libcuda.
 *
 * Costs: a launch wrapper does one clock read, one record and one store into
 * the lock-free stream table of gpu_probe.c; no syscall, lock or allocation.
 * Copy wrappers additionally ask the driver whether the host side is pinned
 * (cuPointerGetAttribute), after the copy returned.
 */
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "cuda_hooks.h"

/* Which cudaVersion the drain probes and dlbn's own lookups ask for. */
#define CU_LOOKUP_VERSION 12000

void *cu_real[CUV_COUNT];

/* ---- real pointers ------------------------------------------------------ */

static void *libcuda_handle(void)
{
	static void *handle;
	void *h = __atomic_load_n(&handle, __ATOMIC_ACQUIRE);

	if (!h) {
		/* NOLOAD: only a libcuda the application loaded itself. */
		h = dlopen("libcuda.so.1", RTLD_NOLOAD | RTLD_LAZY);
		if (h)
			__atomic_store_n(&handle, h, __ATOMIC_RELEASE);
	}
	return h;
}

static bool is_own_wrapper(const void *p)
{
	for (int v = 0; v < CUV_COUNT; v++)
		if (cu_variants[v].wrapper == p)
			return true;
	return false;
}

static void note_unwrapped(int v)
{
	static int reported[CUV_COUNT];

	if (!__atomic_exchange_n(&reported[v], 1, __ATOMIC_RELAXED))
		cu_info(DLBN_CUDA_INFO_UNWRAPPED, v, cu_variants[v].name);
}

static void note_driver_found(void);

void *cu_capture(int v, void *real)
{
	void *expected = NULL;

	if (!real || is_own_wrapper(real))
		return real;
	if (!__atomic_compare_exchange_n(&cu_real[v], &expected, real, false, __ATOMIC_ACQ_REL,
					 __ATOMIC_ACQUIRE) &&
	    expected != real) {
		/* A second driver instance: leave its pointer alone. */
		note_unwrapped(v);
		return real;
	}
	note_driver_found();
	return cu_variants[v].wrapper;
}

/* Slow path of the wrappers: a PLT caller, nothing captured yet. */
static void *cu_resolve_plt(int v)
{
	void *h = libcuda_handle();
	void *real = h ? cu_real_dlsym(h, cu_variants[v].name) : NULL;

	if (!real || is_own_wrapper(real))
		return NULL;
	cu_capture(v, real);
	return __atomic_load_n(&cu_real[v], __ATOMIC_ACQUIRE);
}

static inline void *cu_load_real(int v)
{
	void *p = __atomic_load_n(&cu_real[v], __ATOMIC_ACQUIRE);

	return DLBN_LIKELY(p != NULL) ? p : cu_resolve_plt(v);
}

int cu_variant_by_name(const char *name)
{
	for (int v = 0; v < CUV_COUNT; v++)
		if (strcmp(cu_variants[v].name, name) == 0)
			return v;
	return -1;
}

/* ---- dlbn's own driver lookups ------------------------------------------ */

typedef CUresult (*gpa_v1_fn)(const char *, void **, int, cuuint64_t);
typedef CUresult (*gpa_v2_fn)(const char *, void **, int, cuuint64_t,
			      CUdriverProcAddressQueryResult *);

/* The real cuGetProcAddress, whichever variant was captured (no PLT). */
static CUresult real_gpa(const char *sym, void **pfn, int version, cuuint64_t flags)
{
	gpa_v2_fn v2 = __atomic_load_n(&cu_real[CUV_GET_PROC_ADDRESS_V2], __ATOMIC_ACQUIRE);
	gpa_v1_fn v1 = __atomic_load_n(&cu_real[CUV_GET_PROC_ADDRESS], __ATOMIC_ACQUIRE);
	CUdriverProcAddressQueryResult status;

	*pfn = NULL;
	if (v2)
		return v2(sym, pfn, version, flags, &status);
	if (v1)
		return v1(sym, pfn, version, flags);
	return CUDA_ERROR_NOT_FOUND;
}

void *cu_driver_sym(const char *name)
{
	void *p = NULL;
	void *h;

	if (real_gpa(name, &p, CU_LOOKUP_VERSION, CU_GET_PROC_ADDRESS_LEGACY_STREAM) ==
		    CUDA_SUCCESS &&
	    p)
		return p;
	h = libcuda_handle();
	return h ? cu_real_dlsym(h, name) : NULL;
}

void cu_info(int64_t api, int64_t ret, const char *text)
{
	int64_t f[2] = {api, ret};

	int saved_errno = errno;

	if (!recorder_on() || !hook_enter())
		return;
	rec_emit_str(DLBN_REC_CUDA_INFO, clock_now_ns(), f, 2, text, strlen(text));
	hook_leave();
	errno = saved_errno;
}

static void note_driver_found(void)
{
	static int done;
	CUresult (*get_version)(int *);
	int version = 0;
	char text[64];

	if (__atomic_load_n(&done, __ATOMIC_RELAXED) ||
	    __atomic_exchange_n(&done, 1, __ATOMIC_RELAXED))
		return;
	get_version = (CUresult(*)(int *))cu_driver_sym("cuDriverGetVersion");
	if (get_version && get_version(&version) != CUDA_SUCCESS)
		version = 0;
	snprintf(text, sizeof(text), "driver %d", version);
	cu_info(DLBN_CUDA_INFO_DRIVER, version, text);
}

/* ---- cuGetProcAddress --------------------------------------------------- */

/*
 * Learn the real pointer of variant v from the driver itself: ask for its
 * base name with the stream flag and a cudaVersion that selects its ABI.
 */
static void learn_variant(int v)
{
	const struct cu_variant_info *info = &cu_variants[v];
	void *p = NULL;
	cuuint64_t flags = info->per_thread ? CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM
					    : CU_GET_PROC_ADDRESS_LEGACY_STREAM;

	if (real_gpa(info->base, &p, info->abi_version, flags) == CUDA_SUCCESS && p)
		cu_capture(v, p);
}

/*
 * Swap *pfn, which the real driver returned for `sym`, for the wrapper of
 * the variant it is.  Only a pointer equal to a variant's known real pointer
 * is swapped: an ABI we do not know (another cudaVersion) passes untouched.
 */
static void swap_for_wrapper(const char *sym, void **pfn)
{
	void *got;

	if (!sym || !pfn || sym[0] != 'c' || sym[1] != 'u')
		return;
	got = *pfn;
	if (!got || is_own_wrapper(got))
		return;
	for (int v = 0; v < CUV_COUNT; v++) {
		void *known;

		if (strcmp(cu_variants[v].base, sym) != 0)
			continue;
		known = __atomic_load_n(&cu_real[v], __ATOMIC_ACQUIRE);
		if (!known) {
			learn_variant(v);
			known = __atomic_load_n(&cu_real[v], __ATOMIC_ACQUIRE);
		}
		if (known == got) {
			*pfn = cu_variants[v].wrapper;
			return;
		}
	}
}

DLBN_EXPORT CUresult cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion,
				      cuuint64_t flags)
{
	gpa_v1_fn real = cu_load_real(CUV_GET_PROC_ADDRESS);
	CUresult r;

	if (!real)
		return CUDA_ERROR_NOT_INITIALIZED;
	r = real(symbol, pfn, cudaVersion, flags);
	if (r == CUDA_SUCCESS)
		swap_for_wrapper(symbol, pfn);
	return r;
}

DLBN_EXPORT CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion,
					 cuuint64_t flags,
					 CUdriverProcAddressQueryResult *symbolStatus)
{
	gpa_v2_fn real = cu_load_real(CUV_GET_PROC_ADDRESS_V2);
	CUresult r;

	if (!real)
		return CUDA_ERROR_NOT_INITIALIZED;
	r = real(symbol, pfn, cudaVersion, flags, symbolStatus);
	if (r == CUDA_SUCCESS)
		swap_for_wrapper(symbol, pfn);
	return r;
}

/* ---- records ------------------------------------------------------------ */

static inline uint64_t cu_t0(void)
{
	return recorder_on() ? clock_now_ns() : 0;
}

static inline void note_launch(CUstream stream, int api, uint64_t t_ns)
{
	int64_t f[2] = {(int64_t)(uintptr_t)stream, api};

	int saved_errno = errno;

	bool lock_probe = gpu_probe_stream_used(stream);
	if (hook_enter()) {
		rec_emit(DLBN_REC_LAUNCH, t_ns, f, 2);
		hook_leave();
	}
	if (DLBN_UNLIKELY(lock_probe)) /* after the record: the probe comes later */
		gpu_probe_after_lock_wait(true);
	errno = saved_errno;
}

/* After a sync the GPU work before it is done: a good moment to resolve
 * pending probes (the last wait of a run may have ended before its probe's
 * work did, and no later wait would resolve it).  drained: a stream sync's
 * drain event was recorded (sync_probe_begins), and the sync succeeded. */
static inline void note_sync(int api, const void *handle, uint64_t t0, bool drained)
{
	int64_t f[4] = {(int64_t)(clock_now_ns() - t0), api, (int64_t)(uintptr_t)handle, 0};

	int saved_errno = errno;

	if (hook_enter()) {
		if (drained)
			f[3] = (int64_t)gpu_probe_sync_drained();
		rec_emit(DLBN_REC_SYNC, t0, f, drained ? 4 : 3);
		gpu_probe_poll();
		hook_leave();
	}
	errno = saved_errno;
}

/* A stream sync is about to wait: an event on the stream tells afterwards
 * when the GPU finished (gpu_probe.c). */
static inline bool sync_probe_begins(CUstream stream, uint64_t t)
{
	bool recorded = false;
	int saved_errno = errno;

	if (hook_enter()) {
		recorded = gpu_probe_sync_begins(stream, t);
		hook_leave();
	}
	errno = saved_errno;
	return recorded;
}

typedef CUresult (*pointer_attr_fn)(void *, CUpointer_attribute, CUdeviceptr);

/* The real cuPointerGetAttribute, looked up once (benign race). */
static pointer_attr_fn pointer_attr(void)
{
	static pointer_attr_fn fn;
	pointer_attr_fn f = __atomic_load_n(&fn, __ATOMIC_RELAXED);

	if (!f) {
		f = (pointer_attr_fn)cu_driver_sym("cuPointerGetAttribute");
		__atomic_store_n(&fn, f, __ATOMIC_RELAXED);
	}
	return f;
}

/*
 * CU_MEMORYTYPE_* of a pointer, 0 when the driver does not know it, which
 * for a host pointer means pageable memory (the driver answers
 * CUDA_ERROR_INVALID_VALUE), -1 when the driver cannot be asked.
 */
static int mem_type(CUdeviceptr p)
{
	pointer_attr_fn get_attr = pointer_attr();
	unsigned int type = 0;

	if (!get_attr)
		return -1;
	if (get_attr(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, p) != CUDA_SUCCESS)
		return 0;
	return (int)type;
}

/* DLBN_HOSTMEM_* of a host pointer: pinned if the driver knows it. */
static int host_mem_kind(const void *host)
{
	int type = mem_type((CUdeviceptr)(uintptr_t)host);

	return type < 0			    ? DLBN_HOSTMEM_UNKNOWN
	       : type == 0		    ? DLBN_HOSTMEM_PAGEABLE
	       : type == CU_MEMORYTYPE_HOST ? DLBN_HOSTMEM_PINNED
					    : DLBN_HOSTMEM_UNKNOWN;
}

static void note_copy(uint64_t t0, int api, CUstream stream, size_t bytes, int dir, bool async,
		      const void *host)
{
	uint64_t t1 = clock_now_ns();
	int saved_errno = errno;
	int64_t f[7];
	/* Every async copy marks its stream; only a host-to-device one probes. */
	bool lock_probe = async && gpu_probe_stream_used(stream) && dir == DLBN_COPY_HTOD;

	if (hook_enter()) {
		f[0] = (int64_t)(t1 - t0);
		f[1] = api;
		f[2] = (int64_t)(uintptr_t)stream;
		f[3] = (int64_t)bytes;
		f[4] = dir;
		f[5] = async;
		f[6] = host ? host_mem_kind(host) : DLBN_HOSTMEM_NA;
		rec_emit(DLBN_REC_MEMCPY, t0, f, 7);
		hook_leave();
	}
	if (DLBN_UNLIKELY(lock_probe))
		gpu_probe_after_lock_wait(false);
	errno = saved_errno;
}

/* cuMemcpy/cuMemcpyAsync (unified addressing): direction from the pointers. */
static void note_unified_copy(uint64_t t0, CUstream stream, CUdeviceptr dst, CUdeviceptr src,
			      size_t bytes, bool async)
{
	int dt = mem_type(dst), st = mem_type(src);
	bool dst_dev = dt == CU_MEMORYTYPE_DEVICE, src_dev = st == CU_MEMORYTYPE_DEVICE;
	int dir = DLBN_COPY_OTHER;
	const void *host = NULL;

	if (src_dev && dst_dev) {
		dir = DLBN_COPY_DTOD;
	} else if (dst_dev) {
		dir = DLBN_COPY_HTOD;
		host = (const void *)(uintptr_t)src;
	} else if (src_dev) {
		dir = DLBN_COPY_DTOH;
		host = (const void *)(uintptr_t)dst;
	}
	note_copy(t0, DLBN_CU_MEMCPY, stream, bytes, dir, async, host);
}

/* ---- wrappers ----------------------------------------------------------- */

/*
 * The variant's real function with the wrapper's own prototype; returns
 * CUDA_ERROR_NOT_INITIALIZED if the driver cannot be reached (only possible
 * for a caller that found our export before loading libcuda).
 */
#define CU_REAL(v, fn, real)                                                                       \
	__typeof__(&fn) real = (__typeof__(&fn))cu_load_real(v);                                   \
	if (DLBN_UNLIKELY(!real))                                                                  \
	return CUDA_ERROR_NOT_INITIALIZED

#define LAUNCH_ARGS                                                                                \
	CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz, unsigned int bx,          \
		unsigned int by, unsigned int bz, unsigned int shmem, CUstream hStream,            \
		void **kernelParams, void **extra
#define LAUNCH_PASS f, gx, gy, gz, bx, by, bz, shmem, hStream, kernelParams, extra

DLBN_EXPORT CUresult cuLaunchKernel(LAUNCH_ARGS)
{
	CU_REAL(CUV_LAUNCH_KERNEL, cuLaunchKernel, real);
	uint64_t t = cu_t0();
	CUresult r = real(LAUNCH_PASS);

	if (t && r == CUDA_SUCCESS)
		note_launch(cu_stream_id(hStream), DLBN_CU_LAUNCH_KERNEL, t);
	return r;
}

DLBN_EXPORT CUresult cuLaunchKernel_ptsz(LAUNCH_ARGS)
{
	CU_REAL(CUV_LAUNCH_KERNEL_PTSZ, cuLaunchKernel_ptsz, real);
	uint64_t t = cu_t0();
	CUresult r = real(LAUNCH_PASS);

	if (t && r == CUDA_SUCCESS)
		note_launch(cu_ptsz_stream(hStream), DLBN_CU_LAUNCH_KERNEL, t);
	return r;
}

DLBN_EXPORT CUresult cuLaunchKernelEx(const CUlaunchConfig *config, CUfunction f,
				      void **kernelParams, void **extra)
{
	CU_REAL(CUV_LAUNCH_KERNEL_EX, cuLaunchKernelEx, real);
	uint64_t t = cu_t0();
	CUresult r = real(config, f, kernelParams, extra);

	if (t && r == CUDA_SUCCESS && config)
		note_launch(cu_stream_id(config->hStream), DLBN_CU_LAUNCH_KERNEL_EX, t);
	return r;
}

DLBN_EXPORT CUresult cuLaunchKernelEx_ptsz(const CUlaunchConfig *config, CUfunction f,
					   void **kernelParams, void **extra)
{
	CU_REAL(CUV_LAUNCH_KERNEL_EX_PTSZ, cuLaunchKernelEx_ptsz, real);
	uint64_t t = cu_t0();
	CUresult r = real(config, f, kernelParams, extra);

	if (t && r == CUDA_SUCCESS && config)
		note_launch(cu_ptsz_stream(config->hStream), DLBN_CU_LAUNCH_KERNEL_EX, t);
	return r;
}

DLBN_EXPORT CUresult cuGraphLaunch(CUgraphExec hGraph, CUstream hStream)
{
	CU_REAL(CUV_GRAPH_LAUNCH, cuGraphLaunch, real);
	uint64_t t = cu_t0();
	CUresult r = real(hGraph, hStream);

	if (t && r == CUDA_SUCCESS)
		note_launch(cu_stream_id(hStream), DLBN_CU_GRAPH_LAUNCH, t);
	return r;
}

DLBN_EXPORT CUresult cuGraphLaunch_ptsz(CUgraphExec hGraph, CUstream hStream)
{
	CU_REAL(CUV_GRAPH_LAUNCH_PTSZ, cuGraphLaunch_ptsz, real);
	uint64_t t = cu_t0();
	CUresult r = real(hGraph, hStream);

	if (t && r == CUDA_SUCCESS)
		note_launch(cu_ptsz_stream(hStream), DLBN_CU_GRAPH_LAUNCH, t);
	return r;
}

/*
 * Copies.  COPY_SYNC/COPY_ASYNC define one wrapper; `stream_expr` is the
 * stream recorded (the legacy or per-thread default stream for sync ones),
 * `host_expr` the host side (NULL for device-to-device).
 */
#define COPY_WRAPPER(v, name, params, pass, api, dir, async, stream_expr, host_expr)               \
	DLBN_EXPORT CUresult name params                                                           \
	{                                                                                          \
		CU_REAL(v, name, real);                                                            \
		uint64_t t = cu_t0();                                                              \
		CUresult r = real pass;                                                            \
		if (t && r == CUDA_SUCCESS)                                                        \
			note_copy(t, api, stream_expr, ByteCount, dir, async, host_expr);          \
		return r;                                                                          \
	}

#define HTOD_P	(CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount)
#define HTOD_A	(dstDevice, srcHost, ByteCount)
#define DTOH_P	(void *dstHost, CUdeviceptr srcDevice, size_t ByteCount)
#define DTOH_A	(dstHost, srcDevice, ByteCount)
#define DTOD_P	(CUdeviceptr dstDevice, CUdeviceptr srcDevice, size_t ByteCount)
#define DTOD_A	(dstDevice, srcDevice, ByteCount)
#define HTODA_P (CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount, CUstream hStream)
#define HTODA_A (dstDevice, srcHost, ByteCount, hStream)
#define DTOHA_P (void *dstHost, CUdeviceptr srcDevice, size_t ByteCount, CUstream hStream)
#define DTOHA_A (dstHost, srcDevice, ByteCount, hStream)
#define DTODA_P (CUdeviceptr dstDevice, CUdeviceptr srcDevice, size_t ByteCount, CUstream hStream)
#define DTODA_A (dstDevice, srcDevice, ByteCount, hStream)

#define LEGACY_STREAM ((CUstream)0)
COPY_WRAPPER(CUV_MEMCPY_HTOD, cuMemcpyHtoD_v2, HTOD_P, HTOD_A, DLBN_CU_MEMCPY_HTOD, DLBN_COPY_HTOD,
	     false, LEGACY_STREAM, srcHost)
COPY_WRAPPER(CUV_MEMCPY_HTOD_PTDS, cuMemcpyHtoD_v2_ptds, HTOD_P, HTOD_A, DLBN_CU_MEMCPY_HTOD,
	     DLBN_COPY_HTOD, false, CU_STREAM_PER_THREAD, srcHost)
COPY_WRAPPER(CUV_MEMCPY_DTOH, cuMemcpyDtoH_v2, DTOH_P, DTOH_A, DLBN_CU_MEMCPY_DTOH, DLBN_COPY_DTOH,
	     false, LEGACY_STREAM, dstHost)
COPY_WRAPPER(CUV_MEMCPY_DTOH_PTDS, cuMemcpyDtoH_v2_ptds, DTOH_P, DTOH_A, DLBN_CU_MEMCPY_DTOH,
	     DLBN_COPY_DTOH, false, CU_STREAM_PER_THREAD, dstHost)
COPY_WRAPPER(CUV_MEMCPY_DTOD, cuMemcpyDtoD_v2, DTOD_P, DTOD_A, DLBN_CU_MEMCPY_DTOD, DLBN_COPY_DTOD,
	     false, LEGACY_STREAM, NULL)
COPY_WRAPPER(CUV_MEMCPY_DTOD_PTDS, cuMemcpyDtoD_v2_ptds, DTOD_P, DTOD_A, DLBN_CU_MEMCPY_DTOD,
	     DLBN_COPY_DTOD, false, CU_STREAM_PER_THREAD, NULL)
COPY_WRAPPER(CUV_MEMCPY_HTOD_ASYNC, cuMemcpyHtoDAsync_v2, HTODA_P, HTODA_A, DLBN_CU_MEMCPY_HTOD,
	     DLBN_COPY_HTOD, true, cu_stream_id(hStream), srcHost)
COPY_WRAPPER(CUV_MEMCPY_HTOD_ASYNC_PTSZ, cuMemcpyHtoDAsync_v2_ptsz, HTODA_P, HTODA_A,
	     DLBN_CU_MEMCPY_HTOD, DLBN_COPY_HTOD, true, cu_ptsz_stream(hStream), srcHost)
COPY_WRAPPER(CUV_MEMCPY_DTOH_ASYNC, cuMemcpyDtoHAsync_v2, DTOHA_P, DTOHA_A, DLBN_CU_MEMCPY_DTOH,
	     DLBN_COPY_DTOH, true, cu_stream_id(hStream), dstHost)
COPY_WRAPPER(CUV_MEMCPY_DTOH_ASYNC_PTSZ, cuMemcpyDtoHAsync_v2_ptsz, DTOHA_P, DTOHA_A,
	     DLBN_CU_MEMCPY_DTOH, DLBN_COPY_DTOH, true, cu_ptsz_stream(hStream), dstHost)
COPY_WRAPPER(CUV_MEMCPY_DTOD_ASYNC, cuMemcpyDtoDAsync_v2, DTODA_P, DTODA_A, DLBN_CU_MEMCPY_DTOD,
	     DLBN_COPY_DTOD, true, cu_stream_id(hStream), NULL)
COPY_WRAPPER(CUV_MEMCPY_DTOD_ASYNC_PTSZ, cuMemcpyDtoDAsync_v2_ptsz, DTODA_P, DTODA_A,
	     DLBN_CU_MEMCPY_DTOD, DLBN_COPY_DTOD, true, cu_ptsz_stream(hStream), NULL)

#define UNIFIED_COPY(v, name, stream_expr, async)                                                  \
	DLBN_EXPORT CUresult name(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount)              \
	{                                                                                          \
		CU_REAL(v, name, real);                                                            \
		uint64_t t = cu_t0();                                                              \
		CUresult r = real(dst, src, ByteCount);                                            \
		if (t && r == CUDA_SUCCESS)                                                        \
			note_unified_copy(t, stream_expr, dst, src, ByteCount, async);             \
		return r;                                                                          \
	}
#define UNIFIED_COPY_ASYNC(v, name, stream_expr)                                                   \
	DLBN_EXPORT CUresult name(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount,              \
				  CUstream hStream)                                                \
	{                                                                                          \
		CU_REAL(v, name, real);                                                            \
		uint64_t t = cu_t0();                                                              \
		CUresult r = real(dst, src, ByteCount, hStream);                                   \
		if (t && r == CUDA_SUCCESS)                                                        \
			note_unified_copy(t, stream_expr, dst, src, ByteCount, true);              \
		return r;                                                                          \
	}

UNIFIED_COPY(CUV_MEMCPY, cuMemcpy, LEGACY_STREAM, false)
UNIFIED_COPY(CUV_MEMCPY_PTDS, cuMemcpy_ptds, CU_STREAM_PER_THREAD, false)
UNIFIED_COPY_ASYNC(CUV_MEMCPY_ASYNC, cuMemcpyAsync, cu_stream_id(hStream))
UNIFIED_COPY_ASYNC(CUV_MEMCPY_ASYNC_PTSZ, cuMemcpyAsync_ptsz, cu_ptsz_stream(hStream))

/* Synchronisation: the host is blocked on the GPU for dur_ns. */
DLBN_EXPORT CUresult cuStreamSynchronize(CUstream hStream)
{
	CU_REAL(CUV_STREAM_SYNC, cuStreamSynchronize, real);
	uint64_t t = cu_t0();
	bool probed = t && sync_probe_begins(hStream, t);
	CUresult r = real(hStream);

	if (t)
		note_sync(DLBN_CU_STREAM_SYNC, cu_stream_id(hStream), t,
			  probed && r == CUDA_SUCCESS);
	return r;
}

DLBN_EXPORT CUresult cuStreamSynchronize_ptsz(CUstream hStream)
{
	CU_REAL(CUV_STREAM_SYNC_PTSZ, cuStreamSynchronize_ptsz, real);
	uint64_t t = cu_t0();
	bool probed = t && sync_probe_begins(cu_ptsz_stream(hStream), t);
	CUresult r = real(hStream);

	if (t)
		note_sync(DLBN_CU_STREAM_SYNC, cu_ptsz_stream(hStream), t,
			  probed && r == CUDA_SUCCESS);
	return r;
}

DLBN_EXPORT CUresult cuCtxSynchronize(void)
{
	CU_REAL(CUV_CTX_SYNC, cuCtxSynchronize, real);
	uint64_t t = cu_t0();
	CUresult r = real();

	if (t)
		note_sync(DLBN_CU_CTX_SYNC, NULL, t, false);
	return r;
}

DLBN_EXPORT CUresult cuEventSynchronize(CUevent hEvent)
{
	CU_REAL(CUV_EVENT_SYNC, cuEventSynchronize, real);
	uint64_t t = cu_t0();
	CUresult r = real(hEvent);

	if (t)
		note_sync(DLBN_CU_EVENT_SYNC, hEvent, t, false);
	return r;
}

static void note_wait_event(CUstream stream, CUevent event, uint64_t t)
{
	int64_t f[2] = {(int64_t)(uintptr_t)stream, (int64_t)(uintptr_t)event};
	int saved_errno = errno;

	if (hook_enter()) {
		rec_emit(DLBN_REC_WAITEVT, t, f, 2);
		hook_leave();
	}
	errno = saved_errno;
}

DLBN_EXPORT CUresult cuStreamWaitEvent(CUstream hStream, CUevent hEvent, unsigned int Flags)
{
	CU_REAL(CUV_STREAM_WAIT_EVENT, cuStreamWaitEvent, real);
	uint64_t t = cu_t0();
	CUresult r = real(hStream, hEvent, Flags);

	if (t && r == CUDA_SUCCESS)
		note_wait_event(cu_stream_id(hStream), hEvent, t);
	return r;
}

DLBN_EXPORT CUresult cuStreamWaitEvent_ptsz(CUstream hStream, CUevent hEvent, unsigned int Flags)
{
	CU_REAL(CUV_STREAM_WAIT_EVENT_PTSZ, cuStreamWaitEvent_ptsz, real);
	uint64_t t = cu_t0();
	CUresult r = real(hStream, hEvent, Flags);

	if (t && r == CUDA_SUCCESS)
		note_wait_event(cu_ptsz_stream(hStream), hEvent, t);
	return r;
}

/* ---- the variant table ---------------------------------------------------- */

#define V(name, base, ptd, abi)                                                                    \
	{                                                                                          \
#name, base, ptd, abi, (void *)name                                                \
	}
const struct cu_variant_info cu_variants[CUV_COUNT] = {
	[CUV_GET_PROC_ADDRESS] = V(cuGetProcAddress, "cuGetProcAddress", false, 11030),
	[CUV_GET_PROC_ADDRESS_V2] = V(cuGetProcAddress_v2, "cuGetProcAddress", false, 12000),
	[CUV_LAUNCH_KERNEL] = V(cuLaunchKernel, "cuLaunchKernel", false, 12000),
	[CUV_LAUNCH_KERNEL_PTSZ] = V(cuLaunchKernel_ptsz, "cuLaunchKernel", true, 12000),
	[CUV_LAUNCH_KERNEL_EX] = V(cuLaunchKernelEx, "cuLaunchKernelEx", false, 12000),
	[CUV_LAUNCH_KERNEL_EX_PTSZ] = V(cuLaunchKernelEx_ptsz, "cuLaunchKernelEx", true, 12000),
	[CUV_GRAPH_LAUNCH] = V(cuGraphLaunch, "cuGraphLaunch", false, 12000),
	[CUV_GRAPH_LAUNCH_PTSZ] = V(cuGraphLaunch_ptsz, "cuGraphLaunch", true, 12000),
	[CUV_MEMCPY_HTOD] = V(cuMemcpyHtoD_v2, "cuMemcpyHtoD", false, 12000),
	[CUV_MEMCPY_HTOD_PTDS] = V(cuMemcpyHtoD_v2_ptds, "cuMemcpyHtoD", true, 12000),
	[CUV_MEMCPY_DTOH] = V(cuMemcpyDtoH_v2, "cuMemcpyDtoH", false, 12000),
	[CUV_MEMCPY_DTOH_PTDS] = V(cuMemcpyDtoH_v2_ptds, "cuMemcpyDtoH", true, 12000),
	[CUV_MEMCPY_DTOD] = V(cuMemcpyDtoD_v2, "cuMemcpyDtoD", false, 12000),
	[CUV_MEMCPY_DTOD_PTDS] = V(cuMemcpyDtoD_v2_ptds, "cuMemcpyDtoD", true, 12000),
	[CUV_MEMCPY_HTOD_ASYNC] = V(cuMemcpyHtoDAsync_v2, "cuMemcpyHtoDAsync", false, 12000),
	[CUV_MEMCPY_HTOD_ASYNC_PTSZ] =
		V(cuMemcpyHtoDAsync_v2_ptsz, "cuMemcpyHtoDAsync", true, 12000),
	[CUV_MEMCPY_DTOH_ASYNC] = V(cuMemcpyDtoHAsync_v2, "cuMemcpyDtoHAsync", false, 12000),
	[CUV_MEMCPY_DTOH_ASYNC_PTSZ] =
		V(cuMemcpyDtoHAsync_v2_ptsz, "cuMemcpyDtoHAsync", true, 12000),
	[CUV_MEMCPY_DTOD_ASYNC] = V(cuMemcpyDtoDAsync_v2, "cuMemcpyDtoDAsync", false, 12000),
	[CUV_MEMCPY_DTOD_ASYNC_PTSZ] =
		V(cuMemcpyDtoDAsync_v2_ptsz, "cuMemcpyDtoDAsync", true, 12000),
	[CUV_MEMCPY] = V(cuMemcpy, "cuMemcpy", false, 12000),
	[CUV_MEMCPY_PTDS] = V(cuMemcpy_ptds, "cuMemcpy", true, 12000),
	[CUV_MEMCPY_ASYNC] = V(cuMemcpyAsync, "cuMemcpyAsync", false, 12000),
	[CUV_MEMCPY_ASYNC_PTSZ] = V(cuMemcpyAsync_ptsz, "cuMemcpyAsync", true, 12000),
	[CUV_STREAM_SYNC] = V(cuStreamSynchronize, "cuStreamSynchronize", false, 12000),
	[CUV_STREAM_SYNC_PTSZ] = V(cuStreamSynchronize_ptsz, "cuStreamSynchronize", true, 12000),
	[CUV_CTX_SYNC] = V(cuCtxSynchronize, "cuCtxSynchronize", false, 12000),
	[CUV_EVENT_SYNC] = V(cuEventSynchronize, "cuEventSynchronize", false, 12000),
	[CUV_STREAM_WAIT_EVENT] = V(cuStreamWaitEvent, "cuStreamWaitEvent", false, 12000),
	[CUV_STREAM_WAIT_EVENT_PTSZ] = V(cuStreamWaitEvent_ptsz, "cuStreamWaitEvent", true, 12000),
};
#undef V
