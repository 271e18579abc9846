/*
 * dlsym_app.c - what dlsym returns under the preload (test_cuda.py).
 * Prints key=value lines:
 *   next_new / next_old   value of the function dlsym(RTLD_NEXT) found from
 *                         a library, through dlsym@@GLIBC_2.34 / @GLIBC_2.2.5
 *   <name>_obj            the object a handle lookup on libcuda.so.1
 *                         (opened RTLD_LOCAL) resolved to
 *   cos_same              a non-cu lookup on another handle gives the same
 *                         pointer as dlvsym (untouched)
 *   missing_null / missing_err  a failed lookup still fails, with dlerror
 *   default_launch        dlsym(RTLD_DEFAULT, "cuLaunchKernel") is non-NULL
 *   gpa_<case>_obj / _sym the object and symbol name of what
 *                         cuGetProcAddress_v2 returned for a (name, version,
 *                         flags) case: the same variant with and without the
 *                         preload, only the object changes
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#define __CUDA_API_VERSION_INTERNAL 1
#include <cuda.h>

#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

void *next_lookup(const char *name);
void *next_lookup_old(const char *name);

static const char *object_of(const void *p);

static const char *symbol_of(const void *p)
{
	Dl_info info;

	if (!p || !dladdr(p, &info) || !info.dli_sname)
		return "none";
	return info.dli_sname;
}

typedef CUresult (*gpa2_fn)(const char *, void **, int, cuuint64_t,
			    CUdriverProcAddressQueryResult *);
typedef CUresult (*gpa1_fn)(const char *, void **, int, cuuint64_t);

static void gpa_case(const char *label, gpa2_fn gpa, const char *name, int version,
		     cuuint64_t flags)
{
	CUdriverProcAddressQueryResult st = CU_GET_PROC_ADDRESS_SUCCESS;
	void *p = NULL;
	CUresult r = gpa(name, &p, version, flags, &st);

	printf("gpa_%s_rc=%d\ngpa_%s_status=%d\n", label, (int)r, label, (int)st);
	printf("gpa_%s_obj=%s\ngpa_%s_sym=%s\n", label, object_of(p), label, symbol_of(p));
}

/* cuGetProcAddress obtained through itself, 11.3 ABI, then used. */
static void gpa_v1_case(gpa2_fn gpa)
{
	void *p = NULL, *q = NULL;
	CUdriverProcAddressQueryResult st;

	gpa("cuGetProcAddress", &p, 11030, 0, &st);
	printf("gpa1_obj=%s\ngpa1_sym=%s\n", object_of(p), symbol_of(p));
	if (p && ((gpa1_fn)p)("cuLaunchKernel", &q, 12000,
			      CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) == CUDA_SUCCESS)
		printf("gpa1_launch_obj=%s\ngpa1_launch_sym=%s\n", object_of(q), symbol_of(q));
}

static const char *object_of(const void *p)
{
	Dl_info info;
	const char *slash;

	if (!p || !dladdr(p, &info) || !info.dli_fname)
		return "none";
	slash = strrchr(info.dli_fname, '/');
	return slash ? slash + 1 : info.dli_fname;
}

int main(int argc, char **argv)
{
	static const char *names[] = {"cuInit",
				      "cuLaunchKernel",
				      "cuLaunchKernel_ptsz",
				      "cuGetProcAddress_v2",
				      "cuMemcpyHtoDAsync_v2",
				      "cuStreamSynchronize"};
	int (*fn)(void);
	void *cuda, *libm;
	const char *err;

	(void)argc;
	(void)argv;
	fn = (int (*)(void))next_lookup("dlbn_t_next");
	printf("next_new=%d\n", fn ? fn() : -1);
	fn = (int (*)(void))next_lookup_old("dlbn_t_next");
	printf("next_old=%d\n", fn ? fn() : -1);

	cuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
	if (!cuda) {
		printf("error=%s\n", dlerror());
		return 1;
	}
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		printf("%s_obj=%s\n", names[i], object_of(dlsym(cuda, names[i])));

	libm = dlopen("libm.so.6", RTLD_NOW | RTLD_LOCAL);
	printf("cos_same=%d\n", libm && dlsym(libm, "cos") == dlvsym(libm, "cos", "GLIBC_2.2.5"));

	dlerror();
	printf("missing_null=%d\n", dlsym(cuda, "cuNoSuchFunction") == NULL);
	err = dlerror();
	printf("missing_err=%d\n", err != NULL && strstr(err, "cuNoSuchFunction") != NULL);
	printf("default_launch=%d\n", dlsym(RTLD_DEFAULT, "cuLaunchKernel") != NULL);

	gpa2_fn gpa = (gpa2_fn)dlsym(cuda, "cuGetProcAddress_v2");
	if (!gpa)
		return 1;
	gpa_case("launch", gpa, "cuLaunchKernel", 12000, CU_GET_PROC_ADDRESS_LEGACY_STREAM);
	gpa_case("launch_pt", gpa, "cuLaunchKernel", 12000,
		 CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM);
	gpa_case("launch_default", gpa, "cuLaunchKernel", 12000, CU_GET_PROC_ADDRESS_DEFAULT);
	gpa_case("htod_pt", gpa, "cuMemcpyHtoD", 12000,
		 CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM);
	gpa_case("htod_old", gpa, "cuMemcpyHtoD", 3000, CU_GET_PROC_ADDRESS_LEGACY_STREAM);
	gpa_case("ctxsync_pt", gpa, "cuCtxSynchronize", 12000,
		 CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM);
	gpa_case("elapsed", gpa, "cuEventElapsedTime", 12080, CU_GET_PROC_ADDRESS_LEGACY_STREAM);
	gpa_case("missing", gpa, "cuNoSuchFunction", 12000, CU_GET_PROC_ADDRESS_LEGACY_STREAM);
	gpa_v1_case(gpa);
	return 0;
}
