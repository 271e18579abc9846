/*
 * cuda_dlsym.c - dlsym interposition, so that the CUDA runtime's private
 * lookups of driver entry points hand back dlbn's wrappers.
 *
 * Since CUDA 11.3 libcudart dlopen()s libcuda.so.1 and dlsym()s
 * cuGetProcAddress(_v2) from that handle; a handle lookup never searches
 * LD_PRELOAD objects, so exporting cu* symbols alone catches nothing.
 * libdlbn.so therefore defines dlsym in both of glibc's symbol versions
 * (dlsym@GLIBC_2.2.5, which libcudart links, and dlsym@@GLIBC_2.34, what new
 * code links; see exports.map) and, for a lookup of a hooked cu* name on a
 * real handle, returns the wrapper after capturing the real pointer.
 *
 * Every other lookup (RTLD_NEXT, RTLD_DEFAULT, names not starting "cu",
 * cu* names we do not hook) is handed to glibc's dlsym by a tail jump, so
 * glibc sees the original caller's return address: RTLD_NEXT must resolve
 * "next" relative to the caller, not to libdlbn.so.  That is why the entry
 * points are a few lines of assembly on x86-64 (a guaranteed jump) rather
 * than C relying on sibling-call optimisation.
 */
#include <dlfcn.h>
#include <stddef.h>

#include "cuda_hooks.h"

typedef void *(*dlsym_fn)(void *, const char *);

/* glibc's dlsym per symbol version.  Read by the assembly stubs. */
dlsym_fn dlbn_real_dlsym_v34 DLBN_HIDDEN;
dlsym_fn dlbn_real_dlsym_v225 DLBN_HIDDEN;

void *dlbn_dlsym_filter(void *handle, const char *name) DLBN_HIDDEN;

static void resolve_real_dlsyms(void)
{
	dlsym_fn v34 = (dlsym_fn)dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34");
	dlsym_fn v225 = (dlsym_fn)dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.2.5");

	/* A glibc older than 2.34 has only the old version, and vice versa. */
	if (!v34)
		v34 = v225;
	if (!v225)
		v225 = v34;
	__atomic_store_n(&dlbn_real_dlsym_v225, v225, __ATOMIC_RELEASE);
	__atomic_store_n(&dlbn_real_dlsym_v34, v34, __ATOMIC_RELEASE);
}

void *cu_real_dlsym(void *handle, const char *name)
{
	dlsym_fn fn = __atomic_load_n(&dlbn_real_dlsym_v34, __ATOMIC_ACQUIRE);

	if (DLBN_UNLIKELY(!fn)) {
		resolve_real_dlsyms();
		fn = dlbn_real_dlsym_v34;
	}
	return fn ? fn(handle, name) : NULL;
}

/*
 * Decide a dlsym call.  Returns the pointer to hand back, or NULL to let
 * glibc's dlsym answer the call itself (the stub then jumps to it, so a
 * failed lookup gets glibc's own dlerror()).  Also makes sure the real dlsym
 * pointers are resolved before the stub jumps through them.
 */
void *dlbn_dlsym_filter(void *handle, const char *name)
{
	void *real;
	int v;

	if (DLBN_UNLIKELY(!__atomic_load_n(&dlbn_real_dlsym_v225, __ATOMIC_ACQUIRE)))
		resolve_real_dlsyms();
	if (handle == RTLD_NEXT || handle == RTLD_DEFAULT || !name || name[0] != 'c' ||
	    name[1] != 'u')
		return NULL;
	v = cu_variant_by_name(name);
	if (v < 0)
		return NULL;
	real = cu_real_dlsym(handle, name);
	if (!real)
		return NULL;
	return cu_capture(v, real);
}

#if defined(__x86_64__)
/*
 * dlsym entry points: call the filter with the caller's two arguments kept,
 * return its answer if any, otherwise jump (not call) to glibc's dlsym of the
 * same version.  The stack is 16-byte aligned at the call (entry rsp is
 * 8 mod 16; two pushes and 8 bytes make it 0 mod 16).
 */
#define DLBN_DLSYM_STUB(stub, real)                                                                \
	".globl " stub "\n"                                                                        \
	".type " stub ",@function\n"                                                               \
	".p2align 4\n" stub ":\n"                                                                  \
	"\t.cfi_startproc\n"                                                                       \
	"\tpushq %rdi\n"                                                                           \
	"\t.cfi_adjust_cfa_offset 8\n"                                                             \
	"\tpushq %rsi\n"                                                                           \
	"\t.cfi_adjust_cfa_offset 8\n"                                                             \
	"\tsubq $8, %rsp\n"                                                                        \
	"\t.cfi_adjust_cfa_offset 8\n"                                                             \
	"\tcall dlbn_dlsym_filter\n"                                                               \
	"\taddq $8, %rsp\n"                                                                        \
	"\t.cfi_adjust_cfa_offset -8\n"                                                            \
	"\tpopq %rsi\n"                                                                            \
	"\t.cfi_adjust_cfa_offset -8\n"                                                            \
	"\tpopq %rdi\n"                                                                            \
	"\t.cfi_adjust_cfa_offset -8\n"                                                            \
	"\ttestq %rax, %rax\n"                                                                     \
	"\tjz 1f\n"                                                                                \
	"\tret\n"                                                                                  \
	"1:\tjmp *" real "(%rip)\n"                                                                \
	"\t.cfi_endproc\n"                                                                         \
	".size " stub ", .-" stub "\n"

__asm__(".text\n" DLBN_DLSYM_STUB("__dlbn_dlsym_v34", "dlbn_real_dlsym_v34") DLBN_DLSYM_STUB(
	"__dlbn_dlsym_v225",
	"dlbn_real_dlsym_v225") ".symver __dlbn_dlsym_v34, dlsym@@GLIBC_2.34\n"
				".symver __dlbn_dlsym_v225, dlsym@GLIBC_2.2.5\n");

#else
/*
 * Other architectures: C, relying on the compiler turning the final call
 * into a tail jump (it does at -O2; tests/recorder/cuda checks RTLD_NEXT
 * lookups).
 */
DLBN_EXPORT void *__dlbn_dlsym_v34(void *handle, const char *name);
DLBN_EXPORT void *__dlbn_dlsym_v225(void *handle, const char *name);

void *__dlbn_dlsym_v34(void *handle, const char *name)
{
	void *p = dlbn_dlsym_filter(handle, name);

	if (p)
		return p;
	return dlbn_real_dlsym_v34(handle, name);
}

void *__dlbn_dlsym_v225(void *handle, const char *name)
{
	void *p = dlbn_dlsym_filter(handle, name);

	if (p)
		return p;
	return dlbn_real_dlsym_v225(handle, name);
}
__asm__(".symver __dlbn_dlsym_v34, dlsym@@GLIBC_2.34\n"
	".symver __dlbn_dlsym_v225, dlsym@GLIBC_2.2.5\n");
#endif
