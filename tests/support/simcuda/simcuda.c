/*
 * simcuda.c - a simulated CUDA driver (build/tests/simcuda/libcuda.so.1) for
 * testing dlbn on machines without a GPU.
 *
 * One device.  Work runs on a virtual timeline, no threads: an item enqueued
 * at host time t on stream s starts at max(t, ready(s), engine tail) and
 * ends start + duration, where ready(s) is the stream's tail plus the legacy
 * default stream's implicit synchronisation, and the device has one compute
 * engine (kernels, one at a time) and one copy engine (copies).  Kernels are
 * functions named "sleep_<us>" of any module; they take <us> microseconds.
 * Copies run at SIMCUDA_GBPS GB/s (default 10) and really copy the bytes;
 * an async one from pinned memory moves them later, off the calling
 * thread's clock (see deferred copies below), as a copy engine would.
 * SIMCUDA_FAIL=cuEventCreate,cuEventRecord,cuEventQuery makes those entry
 * points fail (fault injection for the recorder's error paths).
 * Host-side blocking (syncs, sync copies, async copies from pageable memory,
 * which the real driver stages through a pinned buffer) is a
 * clock_nanosleep until the relevant end time.  Events carry the completion
 * time of the work before them, so cuEventQuery, cuEventSynchronize and
 * cuEventElapsedTime behave like the real ones.
 *
 * cuGraphLaunch runs graphs of sleep kernels (cuGraphCreate,
 * cuGraphAddKernelNode, cuGraphInstantiateWithFlags).
 *
 * Exported names follow the real driver exactly (cuMemcpyHtoD_v2,
 * cuLaunchKernel_ptsz, ...; cuda.h is included as the driver includes it) and
 * cuGetProcAddress(_v2) hand out the variant asked for: the _ptsz/_ptds one
 * with CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, the ABI selected by
 * cudaVersion.  Link with -Bsymbolic-functions, like the real libcuda, so
 * that pointers handed out are our own functions, never an interposer's.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#define __CUDA_API_VERSION_INTERNAL 1
#include <cuda.h>

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define EXPORT		   __attribute__((visibility("default")))
#define SIM_DRIVER_VERSION 12040
#define SIM_MAX_STREAMS	   1024
#define SIM_MAX_RANGES	   4096

/* ---- time ----------------------------------------------------------------- */

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void sleep_until(uint64_t t_ns)
{
	struct timespec ts = {(time_t)(t_ns / 1000000000ull), (long)(t_ns % 1000000000ull)};

	while (now_ns() < t_ns && clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) != 0)
		;
}

static uint64_t max_u64(uint64_t a, uint64_t b)
{
	return a > b ? a : b;
}

/* ---- state ---------------------------------------------------------------- */

struct sim_stream {
	uint64_t tail;	    /* end of the last item enqueued */
	unsigned int flags; /* CU_STREAM_NON_BLOCKING or 0 */
	bool legacy;
};

struct sim_event {
	uint64_t time; /* completion time of the work before the record */
	bool recorded;
	unsigned int flags;
};

struct sim_function {
	uint64_t dur_ns;
};

enum range_kind { RANGE_DEVICE = 1, RANGE_PINNED = 2 };

struct sim_range {
	uintptr_t base;
	size_t size;
	int kind;
	bool owned; /* allocated by us (free it) vs registered */
};

static pthread_mutex_t sim_lock = PTHREAD_MUTEX_INITIALIZER;
static bool initialized;
static int ctx_token; /* the one context is &ctx_token */
static __thread CUcontext current_ctx;
static struct sim_stream legacy_stream = {0, 0, true};
static __thread struct sim_stream *per_thread_stream;
static struct sim_stream *streams[SIM_MAX_STREAMS]; /* blocking + per-thread ones */
static uint64_t compute_tail, copy_tail;
static struct sim_range ranges[SIM_MAX_RANGES];
static double bytes_per_ns = 10.0; /* 10 GB/s */

static char fail_list[256]; /* SIMCUDA_FAIL: ",name,name," */

static void read_env(void)
{
	const char *g = getenv("SIMCUDA_GBPS");
	const char *f = getenv("SIMCUDA_FAIL");

	if (g && atof(g) > 0)
		bytes_per_ns = atof(g);
	if (f)
		snprintf(fail_list, sizeof(fail_list), ",%s,", f);
}

/* Fault injection: entry points named in SIMCUDA_FAIL=a,b return an error. */
static bool sim_fails(const char *name)
{
	char key[64];

	if (!fail_list[0])
		return false;
	snprintf(key, sizeof(key), ",%s,", name);
	return strstr(fail_list, key) != NULL;
}

static bool register_stream(struct sim_stream *s)
{
	for (int i = 0; i < SIM_MAX_STREAMS; i++)
		if (!streams[i]) {
			streams[i] = s;
			return true;
		}
	return false;
}

static void unregister_stream(struct sim_stream *s)
{
	for (int i = 0; i < SIM_MAX_STREAMS; i++)
		if (streams[i] == s)
			streams[i] = NULL;
}

/* Resolve a stream handle (NULL if invalid); called with sim_lock held. */
static struct sim_stream *stream_of(CUstream h, bool per_thread_api)
{
	if (h == CU_STREAM_LEGACY || (h == NULL && !per_thread_api))
		return &legacy_stream;
	if (h == CU_STREAM_PER_THREAD || h == NULL) {
		if (!per_thread_stream) {
			per_thread_stream = calloc(1, sizeof(*per_thread_stream));
			if (!per_thread_stream || !register_stream(per_thread_stream))
				return NULL;
		}
		return per_thread_stream;
	}
	for (int i = 0; i < SIM_MAX_STREAMS; i++)
		if (streams[i] == (struct sim_stream *)h)
			return streams[i];
	return NULL; /* destroyed or never created: CUDA_ERROR_INVALID_HANDLE */
}

/* When new work on s may start (legacy-stream implicit synchronisation). */
static uint64_t stream_ready(const struct sim_stream *s)
{
	uint64_t t = s->tail;

	if (s->legacy) {
		for (int i = 0; i < SIM_MAX_STREAMS; i++)
			if (streams[i] && !(streams[i]->flags & CU_STREAM_NON_BLOCKING))
				t = max_u64(t, streams[i]->tail);
	} else if (!(s->flags & CU_STREAM_NON_BLOCKING)) {
		t = max_u64(t, legacy_stream.tail);
	}
	return t;
}

/* Enqueue `dur` ns of work on s using `engine`; returns its end time. */
static uint64_t enqueue(struct sim_stream *s, uint64_t *engine, uint64_t dur)
{
	uint64_t start = max_u64(max_u64(now_ns(), stream_ready(s)), *engine);

	s->tail = start + dur;
	*engine = s->tail;
	return s->tail;
}

static struct sim_range *range_of(uintptr_t p)
{
	for (int i = 0; i < SIM_MAX_RANGES; i++)
		if (ranges[i].kind && p >= ranges[i].base && p < ranges[i].base + ranges[i].size)
			return &ranges[i];
	return NULL;
}

static CUresult add_range(void *base, size_t size, int kind, bool owned)
{
	for (int i = 0; i < SIM_MAX_RANGES; i++)
		if (!ranges[i].kind) {
			ranges[i] =
				(struct sim_range){(uintptr_t)base, size ? size : 1, kind, owned};
			return CUDA_SUCCESS;
		}
	return CUDA_ERROR_OUT_OF_MEMORY;
}

#define CHECK_INIT()                                                                               \
	do {                                                                                       \
		if (!initialized)                                                                  \
			return CUDA_ERROR_NOT_INITIALIZED;                                         \
	} while (0)
#define CHECK_CTX()                                                                                \
	do {                                                                                       \
		CHECK_INIT();                                                                      \
		if (!current_ctx)                                                                  \
			return CUDA_ERROR_INVALID_CONTEXT;                                         \
	} while (0)

/* ---- init, device, context ------------------------------------------------- */

EXPORT CUresult cuInit(unsigned int flags)
{
	if (flags != 0)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&sim_lock);
	if (!initialized)
		read_env();
	initialized = true;
	pthread_mutex_unlock(&sim_lock);
	return CUDA_SUCCESS;
}

EXPORT CUresult cuDriverGetVersion(int *version)
{
	if (!version)
		return CUDA_ERROR_INVALID_VALUE;
	*version = SIM_DRIVER_VERSION;
	return CUDA_SUCCESS;
}

EXPORT CUresult cuDeviceGetCount(int *count)
{
	CHECK_INIT();
	if (!count)
		return CUDA_ERROR_INVALID_VALUE;
	*count = 1;
	return CUDA_SUCCESS;
}

EXPORT CUresult cuDeviceGet(CUdevice *dev, int ordinal)
{
	CHECK_INIT();
	if (!dev || ordinal != 0)
		return CUDA_ERROR_INVALID_DEVICE;
	*dev = 0;
	return CUDA_SUCCESS;
}

EXPORT CUresult cuDeviceGetName(char *name, int len, CUdevice dev)
{
	CHECK_INIT();
	if (!name || len <= 0 || dev != 0)
		return CUDA_ERROR_INVALID_VALUE;
	snprintf(name, (size_t)len, "dlbn simulated GPU");
	return CUDA_SUCCESS;
}

EXPORT CUresult cuDeviceGetAttribute(int *pi, CUdevice_attribute attrib, CUdevice dev)
{
	CHECK_INIT();
	if (!pi || dev != 0)
		return CUDA_ERROR_INVALID_VALUE;
	switch (attrib) {
	case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR:
		*pi = 9;
		break;
	case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR:
		*pi = 0;
		break;
	case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT:
		*pi = 132;
		break;
	case CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING:
		*pi = 1;
		break;
	case CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT:
		*pi = 1;
		break;
	case CU_DEVICE_ATTRIBUTE_CONCURRENT_KERNELS:
		*pi = 0;
		break;
	default:
		return CUDA_ERROR_INVALID_VALUE;
	}
	return CUDA_SUCCESS;
}

EXPORT CUresult cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev)
{
	CHECK_INIT();
	if (!pctx || dev != 0)
		return CUDA_ERROR_INVALID_VALUE;
	*pctx = (CUcontext)&ctx_token;
	return CUDA_SUCCESS;
}

EXPORT CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev)
{
	CHECK_INIT();
	return dev == 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_DEVICE;
}

EXPORT CUresult cuCtxCreate_v2(CUcontext *pctx, unsigned int flags, CUdevice dev)
{
	(void)flags;
	CHECK_INIT();
	if (!pctx || dev != 0)
		return CUDA_ERROR_INVALID_VALUE;
	*pctx = (CUcontext)&ctx_token;
	current_ctx = *pctx;
	return CUDA_SUCCESS;
}

EXPORT CUresult cuCtxDestroy_v2(CUcontext ctx)
{
	CHECK_INIT();
	if (ctx != (CUcontext)&ctx_token)
		return CUDA_ERROR_INVALID_CONTEXT;
	if (current_ctx == ctx)
		current_ctx = NULL;
	return CUDA_SUCCESS;
}

EXPORT CUresult cuCtxSetCurrent(CUcontext ctx)
{
	CHECK_INIT();
	if (ctx && ctx != (CUcontext)&ctx_token)
		return CUDA_ERROR_INVALID_CONTEXT;
	current_ctx = ctx;
	return CUDA_SUCCESS;
}

EXPORT CUresult cuCtxGetCurrent(CUcontext *pctx)
{
	CHECK_INIT();
	if (!pctx)
		return CUDA_ERROR_INVALID_VALUE;
	*pctx = current_ctx;
	return CUDA_SUCCESS;
}

EXPORT CUresult cuCtxGetDevice(CUdevice *dev)
{
	CHECK_CTX();
	if (!dev)
		return CUDA_ERROR_INVALID_VALUE;
	*dev = 0;
	return CUDA_SUCCESS;
}

/* ---- streams --------------------------------------------------------------- */

EXPORT CUresult cuStreamCreate(CUstream *ph, unsigned int flags)
{
	struct sim_stream *s;
	bool ok;

	CHECK_CTX();
	if (!ph || (flags & ~(unsigned int)CU_STREAM_NON_BLOCKING))
		return CUDA_ERROR_INVALID_VALUE;
	s = calloc(1, sizeof(*s));
	if (!s)
		return CUDA_ERROR_OUT_OF_MEMORY;
	s->flags = flags;
	pthread_mutex_lock(&sim_lock);
	ok = register_stream(s);
	pthread_mutex_unlock(&sim_lock);
	if (!ok) {
		free(s);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	*ph = (CUstream)s;
	return CUDA_SUCCESS;
}

EXPORT CUresult cuStreamCreateWithPriority(CUstream *ph, unsigned int flags, int priority)
{
	(void)priority;
	return cuStreamCreate(ph, flags);
}

EXPORT CUresult cuStreamDestroy_v2(CUstream h)
{
	CHECK_CTX();
	if (!h || h == CU_STREAM_LEGACY || h == CU_STREAM_PER_THREAD)
		return CUDA_ERROR_INVALID_HANDLE;
	pthread_mutex_lock(&sim_lock);
	unregister_stream((struct sim_stream *)h);
	pthread_mutex_unlock(&sim_lock);
	free(h);
	return CUDA_SUCCESS;
}

static CUresult stream_sync(CUstream h, bool per_thread_api)
{
	struct sim_stream *s;
	uint64_t t;

	CHECK_CTX();
	pthread_mutex_lock(&sim_lock);
	s = stream_of(h, per_thread_api);
	t = s ? stream_ready(s) : 0;
	pthread_mutex_unlock(&sim_lock);
	if (!s)
		return CUDA_ERROR_INVALID_HANDLE;
	sleep_until(t);
	return CUDA_SUCCESS;
}

EXPORT CUresult cuStreamSynchronize(CUstream h)
{
	return stream_sync(h, false);
}

EXPORT CUresult cuStreamSynchronize_ptsz(CUstream h)
{
	return stream_sync(h, true);
}

static CUresult stream_query(CUstream h, bool per_thread_api)
{
	struct sim_stream *s;
	uint64_t t;

	CHECK_CTX();
	pthread_mutex_lock(&sim_lock);
	s = stream_of(h, per_thread_api);
	t = s ? stream_ready(s) : 0;
	pthread_mutex_unlock(&sim_lock);
	if (!s)
		return CUDA_ERROR_INVALID_HANDLE;
	return now_ns() >= t ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}

EXPORT CUresult cuStreamQuery(CUstream h)
{
	return stream_query(h, false);
}

EXPORT CUresult cuStreamQuery_ptsz(CUstream h)
{
	return stream_query(h, true);
}

EXPORT CUresult cuCtxSynchronize(void)
{
	uint64_t t;

	CHECK_CTX();
	pthread_mutex_lock(&sim_lock);
	t = max_u64(compute_tail, copy_tail);
	pthread_mutex_unlock(&sim_lock);
	sleep_until(t);
	return CUDA_SUCCESS;
}

/* ---- events ---------------------------------------------------------------- */

EXPORT CUresult cuEventCreate(CUevent *ph, unsigned int flags)
{
	struct sim_event *e;

	CHECK_CTX();
	if (!ph)
		return CUDA_ERROR_INVALID_VALUE;
	if (sim_fails("cuEventCreate"))
		return CUDA_ERROR_OUT_OF_MEMORY;
	e = calloc(1, sizeof(*e));
	if (!e)
		return CUDA_ERROR_OUT_OF_MEMORY;
	e->flags = flags;
	*ph = (CUevent)e;
	return CUDA_SUCCESS;
}

EXPORT CUresult cuEventDestroy_v2(CUevent h)
{
	CHECK_INIT();
	if (!h)
		return CUDA_ERROR_INVALID_HANDLE;
	free(h);
	return CUDA_SUCCESS;
}

static CUresult event_record(CUevent h, CUstream sh, bool per_thread_api)
{
	struct sim_event *e = (struct sim_event *)h;
	struct sim_stream *s;

	CHECK_CTX();
	if (!e)
		return CUDA_ERROR_INVALID_HANDLE;
	if (sim_fails("cuEventRecord"))
		return CUDA_ERROR_LAUNCH_FAILED;
	pthread_mutex_lock(&sim_lock);
	s = stream_of(sh, per_thread_api);
	if (s) {
		/* An event occupies no engine: done when earlier work is done. */
		e->time = max_u64(now_ns(), stream_ready(s));
		e->recorded = true;
		if (s->legacy)
			s->tail = e->time; /* the legacy stream orders later work after it */
	}
	pthread_mutex_unlock(&sim_lock);
	return s ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

EXPORT CUresult cuEventRecord(CUevent h, CUstream s)
{
	return event_record(h, s, false);
}

EXPORT CUresult cuEventRecord_ptsz(CUevent h, CUstream s)
{
	return event_record(h, s, true);
}

EXPORT CUresult cuEventQuery(CUevent h)
{
	struct sim_event *e = (struct sim_event *)h;

	CHECK_INIT();
	if (!e)
		return CUDA_ERROR_INVALID_HANDLE;
	if (sim_fails("cuEventQuery"))
		return CUDA_ERROR_LAUNCH_FAILED;
	return !e->recorded || now_ns() >= e->time ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}

EXPORT CUresult cuEventSynchronize(CUevent h)
{
	struct sim_event *e = (struct sim_event *)h;

	CHECK_INIT();
	if (!e)
		return CUDA_ERROR_INVALID_HANDLE;
	if (e->recorded)
		sleep_until(e->time);
	return CUDA_SUCCESS;
}

EXPORT CUresult cuEventElapsedTime(float *ms, CUevent start, CUevent end)
{
	struct sim_event *a = (struct sim_event *)start, *b = (struct sim_event *)end;
	uint64_t now = now_ns();

	CHECK_INIT();
	if (!ms || !a || !b)
		return CUDA_ERROR_INVALID_HANDLE;
	if ((a->flags | b->flags) & CU_EVENT_DISABLE_TIMING)
		return CUDA_ERROR_INVALID_HANDLE;
	if (!a->recorded || !b->recorded)
		return CUDA_ERROR_INVALID_HANDLE;
	if (now < a->time || now < b->time)
		return CUDA_ERROR_NOT_READY;
	*ms = (float)(((double)b->time - (double)a->time) / 1e6);
	return CUDA_SUCCESS;
}

EXPORT CUresult cuEventElapsedTime_v2(float *ms, CUevent start, CUevent end)
{
	return cuEventElapsedTime(ms, start, end);
}

static CUresult stream_wait_event(CUstream sh, CUevent h, unsigned int flags, bool per_thread_api)
{
	struct sim_event *e = (struct sim_event *)h;
	struct sim_stream *s;

	CHECK_CTX();
	if (!e || flags != 0)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&sim_lock);
	s = stream_of(sh, per_thread_api);
	if (s && e->recorded)
		s->tail = max_u64(s->tail, e->time);
	pthread_mutex_unlock(&sim_lock);
	return s ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

EXPORT CUresult cuStreamWaitEvent(CUstream s, CUevent e, unsigned int flags)
{
	return stream_wait_event(s, e, flags, false);
}

EXPORT CUresult cuStreamWaitEvent_ptsz(CUstream s, CUevent e, unsigned int flags)
{
	return stream_wait_event(s, e, flags, true);
}

/* ---- modules and kernels ----------------------------------------------------- */

EXPORT CUresult cuModuleLoadData(CUmodule *module, const void *image)
{
	CHECK_CTX();
	if (!module || !image)
		return CUDA_ERROR_INVALID_VALUE;
	*module = (CUmodule)&ctx_token; /* every module has every sleep_<us> kernel */
	return CUDA_SUCCESS;
}

EXPORT CUresult cuModuleUnload(CUmodule module)
{
	CHECK_INIT();
	return module ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

EXPORT CUresult cuModuleGetFunction(CUfunction *f, CUmodule module, const char *name)
{
	struct sim_function *fn;
	char *end;
	unsigned long us;

	CHECK_CTX();
	if (!f || !module || !name)
		return CUDA_ERROR_INVALID_VALUE;
	if (strncmp(name, "sleep_", 6) != 0)
		return CUDA_ERROR_NOT_FOUND;
	us = strtoul(name + 6, &end, 10);
	if (end == name + 6 || *end)
		return CUDA_ERROR_NOT_FOUND;
	fn = calloc(1, sizeof(*fn));
	if (!fn)
		return CUDA_ERROR_OUT_OF_MEMORY;
	fn->dur_ns = (uint64_t)us * 1000;
	*f = (CUfunction)fn;
	return CUDA_SUCCESS;
}

/* Compute queued so far (ns): what a utilization counter would see run. */
static uint64_t compute_queued_ns;

/* Not a driver entry point: the eval's GPU utilization (busy / window). */
EXPORT uint64_t simcuda_compute_queued_ns(void);
uint64_t simcuda_compute_queued_ns(void)
{
	pthread_mutex_lock(&sim_lock);
	uint64_t v = compute_queued_ns;
	pthread_mutex_unlock(&sim_lock);
	return v;
}

/* Queue dur_ns of compute on stream h: kernels and graphs alike. */
static CUresult enqueue_compute(CUstream h, bool per_thread_api, uint64_t dur_ns)
{
	struct sim_stream *s;

	pthread_mutex_lock(&sim_lock);
	s = stream_of(h, per_thread_api);
	if (s) {
		enqueue(s, &compute_tail, dur_ns);
		compute_queued_ns += dur_ns;
	}
	pthread_mutex_unlock(&sim_lock);
	return s ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

static CUresult launch(CUfunction f, CUstream h, bool per_thread_api)
{
	struct sim_function *fn = (struct sim_function *)f;

	CHECK_CTX();
	if (!fn)
		return CUDA_ERROR_INVALID_HANDLE;
	return enqueue_compute(h, per_thread_api, fn->dur_ns);
}

#define LAUNCH_ARGS                                                                                \
	CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz, unsigned int bx,          \
		unsigned int by, unsigned int bz, unsigned int shmem, CUstream h, void **params,   \
		void **extra

static CUresult check_dims(unsigned int gx, unsigned int gy, unsigned int gz, unsigned int bx,
			   unsigned int by, unsigned int bz)
{
	return gx && gy && gz && bx && by && bz ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

EXPORT CUresult cuLaunchKernel(LAUNCH_ARGS)
{
	(void)shmem;
	(void)params;
	(void)extra;
	if (check_dims(gx, gy, gz, bx, by, bz) != CUDA_SUCCESS)
		return CUDA_ERROR_INVALID_VALUE;
	return launch(f, h, false);
}

EXPORT CUresult cuLaunchKernel_ptsz(LAUNCH_ARGS)
{
	(void)shmem;
	(void)params;
	(void)extra;
	if (check_dims(gx, gy, gz, bx, by, bz) != CUDA_SUCCESS)
		return CUDA_ERROR_INVALID_VALUE;
	return launch(f, h, true);
}

EXPORT CUresult cuLaunchKernelEx(const CUlaunchConfig *c, CUfunction f, void **params, void **extra)
{
	(void)params;
	(void)extra;
	if (!c || check_dims(c->gridDimX, c->gridDimY, c->gridDimZ, c->blockDimX, c->blockDimY,
			     c->blockDimZ) != CUDA_SUCCESS)
		return CUDA_ERROR_INVALID_VALUE;
	return launch(f, c->hStream, false);
}

EXPORT CUresult cuLaunchKernelEx_ptsz(const CUlaunchConfig *c, CUfunction f, void **params,
				      void **extra)
{
	(void)params;
	(void)extra;
	if (!c || check_dims(c->gridDimX, c->gridDimY, c->gridDimZ, c->blockDimX, c->blockDimY,
			     c->blockDimZ) != CUDA_SUCCESS)
		return CUDA_ERROR_INVALID_VALUE;
	return launch(f, c->hStream, true);
}

/*
 * Graphs: a graph is a list of sleep kernels; launching its executable
 * enqueues their total duration as one item (dependencies are ignored: the
 * nodes run back to back on the compute engine anyway).
 */
struct sim_graph {
	uint64_t total_ns;
};

EXPORT CUresult cuGraphCreate(CUgraph *graph, unsigned int flags)
{
	CHECK_CTX();
	if (!graph || flags)
		return CUDA_ERROR_INVALID_VALUE;
	*graph = (CUgraph)calloc(1, sizeof(struct sim_graph));
	return *graph ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}

EXPORT CUresult cuGraphAddKernelNode_v2(CUgraphNode *node, CUgraph graph, const CUgraphNode *deps,
					size_t ndeps, const CUDA_KERNEL_NODE_PARAMS *params)
{
	struct sim_graph *g = (struct sim_graph *)graph;

	(void)deps;
	(void)ndeps;
	CHECK_CTX();
	if (!node || !g || !params || !params->func)
		return CUDA_ERROR_INVALID_VALUE;
	g->total_ns += ((struct sim_function *)params->func)->dur_ns;
	*node = (CUgraphNode)g;
	return CUDA_SUCCESS;
}

EXPORT CUresult cuGraphInstantiateWithFlags(CUgraphExec *exec, CUgraph graph,
					    unsigned long long flags)
{
	struct sim_graph *copy;

	(void)flags;
	CHECK_CTX();
	if (!exec || !graph)
		return CUDA_ERROR_INVALID_VALUE;
	copy = malloc(sizeof(*copy));
	if (!copy)
		return CUDA_ERROR_OUT_OF_MEMORY;
	*copy = *(struct sim_graph *)graph;
	*exec = (CUgraphExec)copy;
	return CUDA_SUCCESS;
}

EXPORT CUresult cuGraphDestroy(CUgraph graph)
{
	free(graph);
	return CUDA_SUCCESS;
}

EXPORT CUresult cuGraphExecDestroy(CUgraphExec exec)
{
	free(exec);
	return CUDA_SUCCESS;
}

static CUresult graph_launch(CUgraphExec exec, CUstream h, bool per_thread_api)
{
	struct sim_graph *g = (struct sim_graph *)exec;

	CHECK_CTX();
	if (!g)
		return CUDA_ERROR_INVALID_HANDLE;
	return enqueue_compute(h, per_thread_api, g->total_ns);
}

EXPORT CUresult cuGraphLaunch(CUgraphExec exec, CUstream h)
{
	return graph_launch(exec, h, false);
}

EXPORT CUresult cuGraphLaunch_ptsz(CUgraphExec exec, CUstream h)
{
	return graph_launch(exec, h, true);
}

/* ---- memory ----------------------------------------------------------------- */

/*
 * Deferred copies.  An async copy from pinned host memory to the device is
 * the copy engine's work (DMA): on a real GPU the calling thread only
 * enqueues it.  A memmove in the call would be host CPU time that real
 * hardware does not spend (some 8 ms per 32 MiB on a busy 2-core machine,
 * inside the training loop), so such a copy moves its bytes later, in
 * order, at the first call that can read device memory or frees either
 * side: any other copy, cuMemFree, cuMemFreeHost, cuMemHostUnregister.
 * What that gives up: a program that rewrites a pinned buffer after its
 * copy completed and only then reads the device copy back gets the new
 * bytes (nothing here does).  A copy that repeats the last pending one
 * (same destination, source and size) adds nothing; a full list is moved
 * at once.  Caller holds sim_lock.
 */
#define SIM_MAX_DEFERRED 64

static struct deferred_copy {
	void *dst;
	const void *src;
	size_t n;
} deferred[SIM_MAX_DEFERRED];
static size_t ndeferred;

static void deferred_flush_locked(void)
{
	for (size_t i = 0; i < ndeferred; i++)
		memmove(deferred[i].dst, deferred[i].src, deferred[i].n);
	ndeferred = 0;
}

static void deferred_add_locked(void *dst, const void *src, size_t n)
{
	const struct deferred_copy *last = ndeferred ? &deferred[ndeferred - 1] : NULL;

	if (last && last->dst == dst && last->src == src && last->n == n)
		return; /* the same bytes again: one memmove moves both */
	if (ndeferred == SIM_MAX_DEFERRED)
		deferred_flush_locked();
	deferred[ndeferred++] = (struct deferred_copy){dst, src, n};
}

static CUresult alloc_range(void **p, size_t size, int kind)
{
	CUresult r;

	CHECK_CTX();
	if (!p || !size)
		return CUDA_ERROR_INVALID_VALUE;
	*p = malloc(size);
	if (!*p)
		return CUDA_ERROR_OUT_OF_MEMORY;
	pthread_mutex_lock(&sim_lock);
	r = add_range(*p, size, kind, true);
	pthread_mutex_unlock(&sim_lock);
	if (r != CUDA_SUCCESS)
		free(*p);
	return r;
}

static CUresult free_range(uintptr_t p, int kind, bool owned)
{
	struct sim_range *r;
	CUresult res = CUDA_ERROR_INVALID_VALUE;

	CHECK_INIT();
	pthread_mutex_lock(&sim_lock);
	deferred_flush_locked();
	r = range_of(p);
	if (r && r->base == p && r->kind == kind && r->owned == owned) {
		if (owned)
			free((void *)p);
		r->kind = 0;
		res = CUDA_SUCCESS;
	}
	pthread_mutex_unlock(&sim_lock);
	return res;
}

EXPORT CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t size)
{
	void *p = NULL;
	CUresult r = alloc_range(&p, size, RANGE_DEVICE);

	if (r == CUDA_SUCCESS)
		*dptr = (CUdeviceptr)(uintptr_t)p;
	return r;
}

EXPORT CUresult cuMemFree_v2(CUdeviceptr dptr)
{
	return free_range((uintptr_t)dptr, RANGE_DEVICE, true);
}

EXPORT CUresult cuMemHostAlloc(void **pp, size_t size, unsigned int flags)
{
	(void)flags;
	return alloc_range(pp, size, RANGE_PINNED);
}

EXPORT CUresult cuMemAllocHost_v2(void **pp, size_t size)
{
	return alloc_range(pp, size, RANGE_PINNED);
}

EXPORT CUresult cuMemFreeHost(void *p)
{
	return free_range((uintptr_t)p, RANGE_PINNED, true);
}

EXPORT CUresult cuMemHostRegister_v2(void *p, size_t size, unsigned int flags)
{
	CUresult r;

	(void)flags;
	CHECK_CTX();
	if (!p || !size)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&sim_lock);
	r = range_of((uintptr_t)p) ? CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED
				   : add_range(p, size, RANGE_PINNED, false);
	pthread_mutex_unlock(&sim_lock);
	return r;
}

EXPORT CUresult cuMemHostUnregister(void *p)
{
	return free_range((uintptr_t)p, RANGE_PINNED, false);
}

EXPORT CUresult cuPointerGetAttribute(void *data, CUpointer_attribute attribute, CUdeviceptr ptr)
{
	struct sim_range *r;
	int kind;

	CHECK_INIT();
	if (!data || attribute != CU_POINTER_ATTRIBUTE_MEMORY_TYPE)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&sim_lock);
	r = range_of((uintptr_t)ptr);
	kind = r ? r->kind : 0;
	pthread_mutex_unlock(&sim_lock);
	if (!kind)
		return CUDA_ERROR_INVALID_VALUE; /* pageable host memory: unknown to the driver */
	*(unsigned int *)data = kind == RANGE_DEVICE ? CU_MEMORYTYPE_DEVICE : CU_MEMORYTYPE_HOST;
	return CUDA_SUCCESS;
}

/*
 * One copy.  `host` is the host side (NULL for device-to-device).  The host
 * blocks until the copy has executed for sync copies and for async copies
 * whose host side is pageable.
 */
static CUresult copy(void *dst, const void *src, size_t bytes, const void *host, CUstream h,
		     bool async, bool per_thread_api)
{
	struct sim_stream *s;
	struct sim_range *hr;
	uint64_t end = 0;
	bool pinned;

	CHECK_CTX();
	if ((!dst || !src) && bytes)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&sim_lock);
	hr = host ? range_of((uintptr_t)host) : NULL;
	pinned = hr && hr->kind == RANGE_PINNED;
	s = stream_of(h, per_thread_api);
	if (s) {
		end = enqueue(s, &copy_tail, (uint64_t)((double)bytes / bytes_per_ns));
		if (async && pinned && host == src) {
			deferred_add_locked(dst, src, bytes);
			pthread_mutex_unlock(&sim_lock);
			return CUDA_SUCCESS;
		}
		deferred_flush_locked();
	}
	pthread_mutex_unlock(&sim_lock);
	if (!s)
		return CUDA_ERROR_INVALID_HANDLE;
	memmove(dst, src, bytes);
	if (!async || (host && !pinned))
		sleep_until(end);
	return CUDA_SUCCESS;
}

#define D2P(d) ((void *)(uintptr_t)(d))

EXPORT CUresult cuMemcpyHtoD_v2(CUdeviceptr dst, const void *src, size_t n)
{
	return copy(D2P(dst), src, n, src, NULL, false, false);
}

EXPORT CUresult cuMemcpyHtoD_v2_ptds(CUdeviceptr dst, const void *src, size_t n)
{
	return copy(D2P(dst), src, n, src, NULL, false, true);
}

EXPORT CUresult cuMemcpyDtoH_v2(void *dst, CUdeviceptr src, size_t n)
{
	return copy(dst, D2P(src), n, dst, NULL, false, false);
}

EXPORT CUresult cuMemcpyDtoH_v2_ptds(void *dst, CUdeviceptr src, size_t n)
{
	return copy(dst, D2P(src), n, dst, NULL, false, true);
}

EXPORT CUresult cuMemcpyDtoD_v2(CUdeviceptr dst, CUdeviceptr src, size_t n)
{
	return copy(D2P(dst), D2P(src), n, NULL, NULL, false, false);
}

EXPORT CUresult cuMemcpyDtoD_v2_ptds(CUdeviceptr dst, CUdeviceptr src, size_t n)
{
	return copy(D2P(dst), D2P(src), n, NULL, NULL, false, true);
}

EXPORT CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dst, const void *src, size_t n, CUstream s)
{
	return copy(D2P(dst), src, n, src, s, true, false);
}

EXPORT CUresult cuMemcpyHtoDAsync_v2_ptsz(CUdeviceptr dst, const void *src, size_t n, CUstream s)
{
	return copy(D2P(dst), src, n, src, s, true, true);
}

EXPORT CUresult cuMemcpyDtoHAsync_v2(void *dst, CUdeviceptr src, size_t n, CUstream s)
{
	return copy(dst, D2P(src), n, dst, s, true, false);
}

EXPORT CUresult cuMemcpyDtoHAsync_v2_ptsz(void *dst, CUdeviceptr src, size_t n, CUstream s)
{
	return copy(dst, D2P(src), n, dst, s, true, true);
}

EXPORT CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s)
{
	return copy(D2P(dst), D2P(src), n, NULL, s, true, false);
}

EXPORT CUresult cuMemcpyDtoDAsync_v2_ptsz(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s)
{
	return copy(D2P(dst), D2P(src), n, NULL, s, true, true);
}

/* Unified copies: the host side is whichever pointer is not device memory. */
static const void *unified_host(CUdeviceptr dst, CUdeviceptr src)
{
	struct sim_range *d, *s;
	const void *host;

	pthread_mutex_lock(&sim_lock);
	d = range_of((uintptr_t)dst);
	s = range_of((uintptr_t)src);
	host = !(s && s->kind == RANGE_DEVICE)	 ? D2P(src)
	       : !(d && d->kind == RANGE_DEVICE) ? D2P(dst)
						 : NULL;
	pthread_mutex_unlock(&sim_lock);
	return host;
}

EXPORT CUresult cuMemcpy(CUdeviceptr dst, CUdeviceptr src, size_t n)
{
	return copy(D2P(dst), D2P(src), n, unified_host(dst, src), NULL, false, false);
}

EXPORT CUresult cuMemcpy_ptds(CUdeviceptr dst, CUdeviceptr src, size_t n)
{
	return copy(D2P(dst), D2P(src), n, unified_host(dst, src), NULL, false, true);
}

EXPORT CUresult cuMemcpyAsync(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s)
{
	return copy(D2P(dst), D2P(src), n, unified_host(dst, src), s, true, false);
}

EXPORT CUresult cuMemcpyAsync_ptsz(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s)
{
	return copy(D2P(dst), D2P(src), n, unified_host(dst, src), s, true, true);
}

/* ---- errors ----------------------------------------------------------------- */

EXPORT CUresult cuGetErrorString(CUresult error, const char **str)
{
	if (!str)
		return CUDA_ERROR_INVALID_VALUE;
	switch (error) {
	case CUDA_SUCCESS:
		*str = "no error";
		break;
	case CUDA_ERROR_INVALID_VALUE:
		*str = "invalid argument";
		break;
	case CUDA_ERROR_NOT_INITIALIZED:
		*str = "initialization error";
		break;
	case CUDA_ERROR_INVALID_CONTEXT:
		*str = "invalid device context";
		break;
	case CUDA_ERROR_INVALID_HANDLE:
		*str = "invalid resource handle";
		break;
	case CUDA_ERROR_NOT_FOUND:
		*str = "named symbol not found";
		break;
	case CUDA_ERROR_NOT_READY:
		*str = "device not ready";
		break;
	default:
		*str = "unknown error (simcuda)";
		break;
	}
	return CUDA_SUCCESS;
}

EXPORT CUresult cuGetErrorName(CUresult error, const char **str)
{
	if (!str)
		return CUDA_ERROR_INVALID_VALUE;
	*str = error == CUDA_SUCCESS ? "CUDA_SUCCESS" : "CUDA_ERROR_SIMCUDA";
	return CUDA_SUCCESS;
}

/* ---- cuGetProcAddress ------------------------------------------------------- */

/*
 * base name -> legacy variant, per-thread variant (NULL: same as legacy),
 * the cudaVersion from which this ABI exists, and a newer ABI (if any) with
 * the version that selects it.
 */
struct proc_entry {
	const char *base;
	void *legacy;
	void *per_thread;
	int since;
	void *newer;
	int newer_since;
};

#define P(name, since)                                                                             \
	{                                                                                          \
#name, (void *)name, NULL, since, NULL, 0                                          \
	}
#define PT(name, pt, since)                                                                        \
	{                                                                                          \
#name, (void *)name, (void *)pt, since, NULL, 0                                    \
	}

static CUresult gpa_v1(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags);
EXPORT CUresult cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags);
EXPORT CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion,
				    cuuint64_t flags, CUdriverProcAddressQueryResult *status);

static const struct proc_entry proc_table[] = {
	{"cuGetProcAddress", (void *)cuGetProcAddress, NULL, 11030, (void *)cuGetProcAddress_v2,
	 12000},
	P(cuInit, 2000),
	P(cuDriverGetVersion, 2020),
	P(cuDeviceGet, 2000),
	P(cuDeviceGetCount, 2000),
	P(cuDeviceGetName, 2000),
	P(cuDeviceGetAttribute, 2000),
	P(cuDevicePrimaryCtxRetain, 7000),
	{"cuDevicePrimaryCtxRelease", (void *)cuDevicePrimaryCtxRelease_v2, NULL, 11000, NULL, 0},
	{"cuCtxCreate", (void *)cuCtxCreate_v2, NULL, 3020, NULL, 0},
	{"cuCtxDestroy", (void *)cuCtxDestroy_v2, NULL, 4000, NULL, 0},
	P(cuCtxSetCurrent, 4000),
	P(cuCtxGetCurrent, 4000),
	P(cuCtxGetDevice, 2000),
	P(cuCtxSynchronize, 2000),
	P(cuStreamCreate, 2000),
	P(cuStreamCreateWithPriority, 5050),
	{"cuStreamDestroy", (void *)cuStreamDestroy_v2, NULL, 4000, NULL, 0},
	PT(cuStreamSynchronize, cuStreamSynchronize_ptsz, 2000),
	PT(cuStreamQuery, cuStreamQuery_ptsz, 2000),
	PT(cuStreamWaitEvent, cuStreamWaitEvent_ptsz, 3020),
	P(cuEventCreate, 2000),
	{"cuEventDestroy", (void *)cuEventDestroy_v2, NULL, 4000, NULL, 0},
	PT(cuEventRecord, cuEventRecord_ptsz, 2000),
	P(cuEventQuery, 2000),
	P(cuEventSynchronize, 2000),
	{"cuEventElapsedTime", (void *)cuEventElapsedTime, NULL, 2000,
	 (void *)cuEventElapsedTime_v2, 12080},
	P(cuModuleLoadData, 2000),
	P(cuModuleUnload, 2000),
	P(cuModuleGetFunction, 2000),
	PT(cuLaunchKernel, cuLaunchKernel_ptsz, 4000),
	PT(cuLaunchKernelEx, cuLaunchKernelEx_ptsz, 11060),
	P(cuGraphCreate, 10000),
	{"cuGraphAddKernelNode", (void *)cuGraphAddKernelNode_v2, NULL, 12000, NULL, 0},
	P(cuGraphInstantiateWithFlags, 11040),
	P(cuGraphDestroy, 10000),
	P(cuGraphExecDestroy, 10000),
	PT(cuGraphLaunch, cuGraphLaunch_ptsz, 10000),
	{"cuMemAlloc", (void *)cuMemAlloc_v2, NULL, 3020, NULL, 0},
	{"cuMemFree", (void *)cuMemFree_v2, NULL, 3020, NULL, 0},
	P(cuMemHostAlloc, 2020),
	{"cuMemAllocHost", (void *)cuMemAllocHost_v2, NULL, 3020, NULL, 0},
	P(cuMemFreeHost, 2000),
	{"cuMemHostRegister", (void *)cuMemHostRegister_v2, NULL, 6050, NULL, 0},
	P(cuMemHostUnregister, 4000),
	P(cuPointerGetAttribute, 4000),
	{"cuMemcpyHtoD", (void *)cuMemcpyHtoD_v2, (void *)cuMemcpyHtoD_v2_ptds, 3020, NULL, 0},
	{"cuMemcpyDtoH", (void *)cuMemcpyDtoH_v2, (void *)cuMemcpyDtoH_v2_ptds, 3020, NULL, 0},
	{"cuMemcpyDtoD", (void *)cuMemcpyDtoD_v2, (void *)cuMemcpyDtoD_v2_ptds, 3020, NULL, 0},
	{"cuMemcpyHtoDAsync", (void *)cuMemcpyHtoDAsync_v2, (void *)cuMemcpyHtoDAsync_v2_ptsz, 3020,
	 NULL, 0},
	{"cuMemcpyDtoHAsync", (void *)cuMemcpyDtoHAsync_v2, (void *)cuMemcpyDtoHAsync_v2_ptsz, 3020,
	 NULL, 0},
	{"cuMemcpyDtoDAsync", (void *)cuMemcpyDtoDAsync_v2, (void *)cuMemcpyDtoDAsync_v2_ptsz, 3020,
	 NULL, 0},
	PT(cuMemcpy, cuMemcpy_ptds, 4000),
	PT(cuMemcpyAsync, cuMemcpyAsync_ptsz, 4000),
	P(cuGetErrorString, 6000),
	P(cuGetErrorName, 6000),
};

static CUresult lookup(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags,
		       CUdriverProcAddressQueryResult *status)
{
	CUdriverProcAddressQueryResult st = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;

	if (!symbol || !pfn)
		return CUDA_ERROR_INVALID_VALUE;
	*pfn = NULL;
	for (size_t i = 0; i < sizeof(proc_table) / sizeof(proc_table[0]); i++) {
		const struct proc_entry *e = &proc_table[i];

		if (strcmp(e->base, symbol) != 0)
			continue;
		if (cudaVersion < e->since) {
			st = CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT;
			break;
		}
		if (e->newer && cudaVersion >= e->newer_since)
			*pfn = e->newer;
		else if (e->per_thread && (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM))
			*pfn = e->per_thread;
		else
			*pfn = e->legacy;
		st = CU_GET_PROC_ADDRESS_SUCCESS;
		break;
	}
	if (status)
		*status = st;
	return *pfn ? CUDA_SUCCESS : CUDA_ERROR_NOT_FOUND;
}

static CUresult gpa_v1(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags)
{
	return lookup(symbol, pfn, cudaVersion, flags, NULL);
}

CUresult cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags)
{
	return gpa_v1(symbol, pfn, cudaVersion, flags);
}

CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags,
			     CUdriverProcAddressQueryResult *status)
{
	return lookup(symbol, pfn, cudaVersion, flags, status);
}
