/*
 * launchbench.c - cost of one cuLaunchKernel obtained the runtime's way
 * (dlopen + cuGetProcAddress_v2), to compare with and without libdlbn.so
 * preloaded (test_cuda.py and `make bench` report the difference).
 *
 *   launchbench [N]   prints launches=N ns_per_launch=X (best of 5 rounds)
 *
 * The kernel is the simulated driver's sleep_0 on a non-blocking stream, so
 * the figure is the host-side call cost: driver bookkeeping plus, under the
 * preload, the wrapper (clock read, one record, stream table mark).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#define __CUDA_API_VERSION_INTERNAL 1
#include <cuda.h>

#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

typedef CUresult (*gpa_fn)(const char *, void **, int, cuuint64_t,
			   CUdriverProcAddressQueryResult *);
typedef CUresult (*launch_fn)(CUfunction, unsigned int, unsigned int, unsigned int, unsigned int,
			      unsigned int, unsigned int, unsigned int, CUstream, void **, void **);

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void *get(gpa_fn gpa, const char *name)
{
	CUdriverProcAddressQueryResult st;
	void *p = NULL;

	if (gpa(name, &p, 12040, CU_GET_PROC_ADDRESS_LEGACY_STREAM, &st) != CUDA_SUCCESS || !p) {
		fprintf(stderr, "launchbench: %s not found\n", name);
		exit(2);
	}
	return p;
}

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 200000;
	void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
	gpa_fn gpa;
	launch_fn launch;
	CUdevice dev;
	CUcontext ctx;
	CUmodule mod;
	CUfunction f;
	CUstream s;
	double best = 1e30;

	if (!h || !(gpa = (gpa_fn)dlsym(h, "cuGetProcAddress_v2"))) {
		fprintf(stderr, "launchbench: no libcuda.so.1\n");
		return 2;
	}
	launch = (launch_fn)get(gpa, "cuLaunchKernel");
	if (((CUresult(*)(unsigned int))get(gpa, "cuInit"))(0) ||
	    ((CUresult(*)(CUdevice *, int))get(gpa, "cuDeviceGet"))(&dev, 0) ||
	    ((CUresult(*)(CUcontext *, CUdevice))get(gpa, "cuDevicePrimaryCtxRetain"))(&ctx, dev) ||
	    ((CUresult(*)(CUcontext))get(gpa, "cuCtxSetCurrent"))(ctx) ||
	    ((CUresult(*)(CUmodule *, const void *))get(gpa, "cuModuleLoadData"))(&mod, "m") ||
	    ((CUresult(*)(CUfunction *, CUmodule, const char *))get(gpa, "cuModuleGetFunction"))(
		    &f, mod, "sleep_0") ||
	    ((CUresult(*)(CUstream *, unsigned int))get(gpa, "cuStreamCreate"))(
		    &s, CU_STREAM_NON_BLOCKING)) {
		fprintf(stderr, "launchbench: driver setup failed\n");
		return 2;
	}
	for (int round = 0; round < 5; round++) {
		uint64_t t0 = now_ns();

		for (long i = 0; i < n; i++)
			if (launch(f, 1, 1, 1, 32, 1, 1, 0, s, NULL, NULL) != CUDA_SUCCESS)
				return 1;
		double per = (double)(now_ns() - t0) / (double)n;
		if (per < best)
			best = per;
	}
	printf("launches=%ld\nns_per_launch=%.1f\n", n, best);
	return 0;
}
