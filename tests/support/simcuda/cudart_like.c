/*
 * cudart_like.c - a miniature CUDA runtime over the driver API, for driving
 * the simulated GPU (or a real one) from tests and Python (ctypes).
 *
 * Built twice (tests/support/simcuda/simcuda.mk):
 *   libsimrt.so         reaches the driver the way libcudart does since
 *                       CUDA 11.3: dlopen("libcuda.so.1", RTLD_LOCAL), dlsym
 *                       of cuGetProcAddress_v2 through dlsym@GLIBC_2.2.5, and
 *                       every other entry point through cuGetProcAddress_v2
 *                       (reach path A);
 *   libsimrt_direct.so  -DSIMRT_DIRECT: linked against libcuda.so.1 and
 *                       calling cu* by symbol through the PLT (reach path B).
 * SIMRT_PER_THREAD=1 in the environment selects the per-thread default
 * stream variants (_ptsz/_ptds), as nvcc --default-stream per-thread does.
 * Every function returns a CUresult (0 = success).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#define __CUDA_API_VERSION_INTERNAL 1
#include <cuda.h>

#include <dlfcn.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define EXPORT __attribute__((visibility("default")))

EXPORT int simrt_init(void);
EXPORT int simrt_thread_attach(void);
EXPORT const char *simrt_reach(void);
EXPORT int simrt_stream_create(int nonblocking, uint64_t *stream);
EXPORT int simrt_stream_destroy(uint64_t stream);
EXPORT int simrt_launch_sleep_us(uint64_t stream, unsigned int us);
EXPORT int simrt_launch_ex_sleep_us(uint64_t stream, unsigned int us);
EXPORT int simrt_graph_launch_sleep_us(uint64_t stream, unsigned int us, unsigned int nodes);
EXPORT int simrt_memcpy_htod(uint64_t stream, size_t bytes, int pinned, int async);
EXPORT int simrt_memcpy_dtoh(uint64_t stream, size_t bytes, int pinned, int async);
EXPORT int simrt_stream_sync(uint64_t stream);
EXPORT int simrt_ctx_sync(void);
EXPORT int simrt_event_record(uint64_t stream, uint64_t *event);
EXPORT int simrt_event_sync(uint64_t event);
EXPORT int simrt_event_elapsed_ms(uint64_t start, uint64_t end, float *ms);
EXPORT int simrt_stream_wait_event(uint64_t stream, uint64_t event);
EXPORT uint64_t simrt_compute_queued_ns(void);

static struct {
	CUresult (*init)(unsigned int);
	CUresult (*device_get)(CUdevice *, int);
	CUresult (*primary_ctx_retain)(CUcontext *, CUdevice);
	CUresult (*ctx_set_current)(CUcontext);
	CUresult (*ctx_sync)(void);
	CUresult (*stream_create)(CUstream *, unsigned int);
	CUresult (*stream_destroy)(CUstream);
	CUresult (*stream_sync)(CUstream);
	CUresult (*stream_wait_event)(CUstream, CUevent, unsigned int);
	CUresult (*event_create)(CUevent *, unsigned int);
	CUresult (*event_record)(CUevent, CUstream);
	CUresult (*event_sync)(CUevent);
	CUresult (*event_elapsed)(float *, CUevent, CUevent);
	CUresult (*module_load_data)(CUmodule *, const void *);
	CUresult (*module_get_function)(CUfunction *, CUmodule, const char *);
	CUresult (*launch)(CUfunction, unsigned int, unsigned int, unsigned int, unsigned int,
			   unsigned int, unsigned int, unsigned int, CUstream, void **, void **);
	CUresult (*launch_ex)(const CUlaunchConfig *, CUfunction, void **, void **);
	CUresult (*graph_create)(CUgraph *, unsigned int);
	CUresult (*graph_add_kernel)(CUgraphNode *, CUgraph, const CUgraphNode *, size_t,
				     const CUDA_KERNEL_NODE_PARAMS *);
	CUresult (*graph_instantiate)(CUgraphExec *, CUgraph, unsigned long long);
	CUresult (*graph_launch)(CUgraphExec, CUstream);
	CUresult (*mem_alloc)(CUdeviceptr *, size_t);
	CUresult (*mem_alloc_host)(void **, size_t);
	CUresult (*htod)(CUdeviceptr, const void *, size_t);
	CUresult (*dtoh)(void *, CUdeviceptr, size_t);
	CUresult (*htod_async)(CUdeviceptr, const void *, size_t, CUstream);
	CUresult (*dtoh_async)(void *, CUdeviceptr, size_t, CUstream);
} cu;

static CUmodule module;
static CUcontext primary_ctx;
static int per_thread;

#ifdef SIMRT_DIRECT

const char *simrt_reach(void)
{
	return "direct";
}

#define PICK(legacy, pt) (per_thread ? (void *)(pt) : (void *)(legacy))

static CUresult load_driver(void)
{
	cu.init = cuInit;
	cu.device_get = cuDeviceGet;
	cu.primary_ctx_retain = cuDevicePrimaryCtxRetain;
	cu.ctx_set_current = cuCtxSetCurrent;
	cu.ctx_sync = cuCtxSynchronize;
	cu.stream_create = cuStreamCreate;
	cu.stream_destroy = cuStreamDestroy_v2;
	cu.stream_sync = PICK(cuStreamSynchronize, cuStreamSynchronize_ptsz);
	cu.stream_wait_event = PICK(cuStreamWaitEvent, cuStreamWaitEvent_ptsz);
	cu.event_create = cuEventCreate;
	cu.event_record = PICK(cuEventRecord, cuEventRecord_ptsz);
	cu.event_sync = cuEventSynchronize;
	cu.event_elapsed = cuEventElapsedTime;
	cu.module_load_data = cuModuleLoadData;
	cu.module_get_function = cuModuleGetFunction;
	cu.launch = PICK(cuLaunchKernel, cuLaunchKernel_ptsz);
	cu.launch_ex = PICK(cuLaunchKernelEx, cuLaunchKernelEx_ptsz);
	cu.graph_create = cuGraphCreate;
	cu.graph_add_kernel = cuGraphAddKernelNode_v2;
	cu.graph_instantiate = cuGraphInstantiateWithFlags;
	cu.graph_launch = PICK(cuGraphLaunch, cuGraphLaunch_ptsz);
	cu.mem_alloc = cuMemAlloc_v2;
	cu.mem_alloc_host = cuMemAllocHost_v2;
	cu.htod = PICK(cuMemcpyHtoD_v2, cuMemcpyHtoD_v2_ptds);
	cu.dtoh = PICK(cuMemcpyDtoH_v2, cuMemcpyDtoH_v2_ptds);
	cu.htod_async = PICK(cuMemcpyHtoDAsync_v2, cuMemcpyHtoDAsync_v2_ptsz);
	cu.dtoh_async = PICK(cuMemcpyDtoHAsync_v2, cuMemcpyDtoHAsync_v2_ptsz);
	return CUDA_SUCCESS;
}

#else /* the runtime's way */

/* libcudart links the historic dlsym version; so do we. */
__asm__(".symver dlsym, dlsym@GLIBC_2.2.5");

const char *simrt_reach(void)
{
	return "runtime";
}

#define SIMRT_CUDA_VERSION 12040

static CUresult load_driver(void)
{
	CUresult (*gpa)(const char *, void **, int, cuuint64_t, CUdriverProcAddressQueryResult *);
	void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
	cuuint64_t flags = per_thread ? CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM
				      : CU_GET_PROC_ADDRESS_LEGACY_STREAM;
	CUdriverProcAddressQueryResult st;
	CUresult r = CUDA_SUCCESS;

	if (!h)
		return CUDA_ERROR_SHARED_OBJECT_INIT_FAILED;
	gpa = (CUresult(*)(const char *, void **, int, cuuint64_t,
			   CUdriverProcAddressQueryResult *))dlsym(h, "cuGetProcAddress_v2");
	if (!gpa)
		return CUDA_ERROR_NOT_FOUND;
#define GET(field, name)                                                                           \
	if (r == CUDA_SUCCESS)                                                                     \
	r = gpa(name, (void **)&cu.field, SIMRT_CUDA_VERSION, flags, &st)
	GET(init, "cuInit");
	GET(device_get, "cuDeviceGet");
	GET(primary_ctx_retain, "cuDevicePrimaryCtxRetain");
	GET(ctx_set_current, "cuCtxSetCurrent");
	GET(ctx_sync, "cuCtxSynchronize");
	GET(stream_create, "cuStreamCreate");
	GET(stream_destroy, "cuStreamDestroy");
	GET(stream_sync, "cuStreamSynchronize");
	GET(stream_wait_event, "cuStreamWaitEvent");
	GET(event_create, "cuEventCreate");
	GET(event_record, "cuEventRecord");
	GET(event_sync, "cuEventSynchronize");
	GET(event_elapsed, "cuEventElapsedTime");
	GET(module_load_data, "cuModuleLoadData");
	GET(module_get_function, "cuModuleGetFunction");
	GET(launch, "cuLaunchKernel");
	GET(launch_ex, "cuLaunchKernelEx");
	GET(graph_create, "cuGraphCreate");
	GET(graph_add_kernel, "cuGraphAddKernelNode");
	GET(graph_instantiate, "cuGraphInstantiateWithFlags");
	GET(graph_launch, "cuGraphLaunch");
	GET(mem_alloc, "cuMemAlloc");
	GET(mem_alloc_host, "cuMemAllocHost");
	GET(htod, "cuMemcpyHtoD");
	GET(dtoh, "cuMemcpyDtoH");
	GET(htod_async, "cuMemcpyHtoDAsync");
	GET(dtoh_async, "cuMemcpyDtoHAsync");
#undef GET
	return r;
}

#endif

int simrt_init(void)
{
	const char *pt = getenv("SIMRT_PER_THREAD");
	CUdevice dev;
	CUcontext ctx = NULL;
	CUresult r;

	per_thread = pt && *pt == '1';
	r = load_driver();
	if (r == CUDA_SUCCESS)
		r = cu.init(0);
	if (r == CUDA_SUCCESS)
		r = cu.device_get(&dev, 0);
	if (r == CUDA_SUCCESS)
		r = cu.primary_ctx_retain(&ctx, dev);
	if (r == CUDA_SUCCESS)
		r = cu.ctx_set_current(ctx);
	if (r == CUDA_SUCCESS)
		r = cu.module_load_data(&module, "simrt module");
	if (r == CUDA_SUCCESS)
		primary_ctx = ctx;
	return r;
}

/* Make the context current on the calling thread (after simrt_init). */
int simrt_thread_attach(void)
{
	return primary_ctx ? cu.ctx_set_current(primary_ctx) : CUDA_ERROR_NOT_INITIALIZED;
}

int simrt_stream_create(int nonblocking, uint64_t *stream)
{
	CUstream s = NULL;
	CUresult r = cu.stream_create(&s, nonblocking ? CU_STREAM_NON_BLOCKING : 0);

	*stream = (uint64_t)(uintptr_t)s;
	return r;
}

int simrt_stream_destroy(uint64_t stream)
{
	return cu.stream_destroy((CUstream)(uintptr_t)stream);
}

/* Kernels are looked up per call; the simulated module makes that cheap. */
static CUresult sleep_kernel(unsigned int us, CUfunction *f)
{
	char name[32];
	char *p = name + sizeof(name);

	*--p = '\0';
	do
		*--p = (char)('0' + us % 10);
	while (us /= 10);
	p -= 6;
	memcpy(p, "sleep_", 6);
	return cu.module_get_function(f, module, p);
}

int simrt_launch_sleep_us(uint64_t stream, unsigned int us)
{
	CUfunction f;
	CUresult r = sleep_kernel(us, &f);

	if (r != CUDA_SUCCESS)
		return r;
	return cu.launch(f, 1, 1, 1, 32, 1, 1, 0, (CUstream)(uintptr_t)stream, NULL, NULL);
}

int simrt_launch_ex_sleep_us(uint64_t stream, unsigned int us)
{
	CUlaunchConfig cfg;
	CUfunction f;
	CUresult r = sleep_kernel(us, &f);

	if (r != CUDA_SUCCESS)
		return r;
	memset(&cfg, 0, sizeof(cfg));
	cfg.gridDimX = cfg.gridDimY = cfg.gridDimZ = 1;
	cfg.blockDimX = 32;
	cfg.blockDimY = cfg.blockDimZ = 1;
	cfg.hStream = (CUstream)(uintptr_t)stream;
	return cu.launch_ex(&cfg, f, NULL, NULL);
}

/* A graph of `nodes` sleep kernels, built and launched once per call. */
int simrt_graph_launch_sleep_us(uint64_t stream, unsigned int us, unsigned int nodes)
{
	CUDA_KERNEL_NODE_PARAMS p;
	CUgraph g;
	CUgraphNode node;
	CUgraphExec exec;
	CUresult r;

	memset(&p, 0, sizeof(p));
	r = sleep_kernel(us, &p.func);
	p.gridDimX = p.gridDimY = p.gridDimZ = 1;
	p.blockDimX = 32;
	p.blockDimY = p.blockDimZ = 1;
	if (r == CUDA_SUCCESS)
		r = cu.graph_create(&g, 0);
	for (unsigned int i = 0; r == CUDA_SUCCESS && i < nodes; i++)
		r = cu.graph_add_kernel(&node, g, NULL, 0, &p);
	if (r == CUDA_SUCCESS)
		r = cu.graph_instantiate(&exec, g, 0);
	if (r == CUDA_SUCCESS)
		r = cu.graph_launch(exec, (CUstream)(uintptr_t)stream);
	return r;
}

/* Buffers grow to the largest size asked for and are kept. */
static struct {
	CUdeviceptr dev;
	void *pinned;
	void *pageable;
	size_t size;
} buf;

static CUresult ensure_buffers(size_t bytes)
{
	CUresult r;

	if (bytes <= buf.size)
		return CUDA_SUCCESS;
	/* The old buffers are leaked on purpose: a test helper, sizes are few. */
	r = cu.mem_alloc(&buf.dev, bytes);
	if (r == CUDA_SUCCESS)
		r = cu.mem_alloc_host(&buf.pinned, bytes);
	if (r != CUDA_SUCCESS)
		return r;
	buf.pageable = calloc(1, bytes);
	if (!buf.pageable)
		return CUDA_ERROR_OUT_OF_MEMORY;
	buf.size = bytes;
	return CUDA_SUCCESS;
}

int simrt_memcpy_htod(uint64_t stream, size_t bytes, int pinned, int async)
{
	CUresult r = ensure_buffers(bytes);
	void *host;

	if (r != CUDA_SUCCESS)
		return r;
	host = pinned ? buf.pinned : buf.pageable;
	if (async)
		return cu.htod_async(buf.dev, host, bytes, (CUstream)(uintptr_t)stream);
	return cu.htod(buf.dev, host, bytes);
}

int simrt_memcpy_dtoh(uint64_t stream, size_t bytes, int pinned, int async)
{
	CUresult r = ensure_buffers(bytes);
	void *host;

	if (r != CUDA_SUCCESS)
		return r;
	host = pinned ? buf.pinned : buf.pageable;
	if (async)
		return cu.dtoh_async(host, buf.dev, bytes, (CUstream)(uintptr_t)stream);
	return cu.dtoh(host, buf.dev, bytes);
}

int simrt_stream_sync(uint64_t stream)
{
	return cu.stream_sync((CUstream)(uintptr_t)stream);
}

/* The simulated driver's compute queued so far (0: not the simulator). */
uint64_t simrt_compute_queued_ns(void)
{
	void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
	uint64_t (*f)(void) = h ? (uint64_t(*)(void))dlsym(h, "simcuda_compute_queued_ns") : NULL;
	uint64_t v = f ? f() : 0;
	if (h)
		dlclose(h);
	return v;
}

int simrt_ctx_sync(void)
{
	return cu.ctx_sync();
}

int simrt_event_record(uint64_t stream, uint64_t *event)
{
	CUevent e;
	CUresult r = cu.event_create(&e, CU_EVENT_DEFAULT);

	if (r == CUDA_SUCCESS)
		r = cu.event_record(e, (CUstream)(uintptr_t)stream);
	*event = (uint64_t)(uintptr_t)e;
	return r;
}

int simrt_event_sync(uint64_t event)
{
	return cu.event_sync((CUevent)(uintptr_t)event);
}

int simrt_event_elapsed_ms(uint64_t start, uint64_t end, float *ms)
{
	return cu.event_elapsed(ms, (CUevent)(uintptr_t)start, (CUevent)(uintptr_t)end);
}

int simrt_stream_wait_event(uint64_t stream, uint64_t event)
{
	return cu.stream_wait_event((CUstream)(uintptr_t)stream, (CUevent)(uintptr_t)event, 0);
}
