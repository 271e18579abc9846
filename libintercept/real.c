/*
 * real.c - resolution of the real libc functions behind the hooks.
 *
 * libdlbn.so interposes dlsym itself (cuda_dlsym.c), so a plain dlsym call
 * from here could land in our own wrapper.  The real dlsym is fetched once
 * with dlvsym, which nobody interposes, trying glibc's current symbol
 * version first and the historic one second.  Lookups with RTLD_NEXT are
 * made from this object, so "next" means the object after libdlbn.so.
 */
#include <dlfcn.h>

#include "real.h"

#define DLBN_REAL_DEFINE(name, ret, params) real_##name##_fn real_##name;
DLBN_REAL_FUNCS(DLBN_REAL_DEFINE)
#undef DLBN_REAL_DEFINE

typedef void *(*dlsym_fn)(void *, const char *);
static dlsym_fn the_real_dlsym;

static dlsym_fn find_real_dlsym(void)
{
	dlsym_fn fn = __atomic_load_n(&the_real_dlsym, __ATOMIC_ACQUIRE);
	if (fn)
		return fn;
	fn = (dlsym_fn)dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34");
	if (!fn)
		fn = (dlsym_fn)dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.2.5");
	if (fn)
		__atomic_store_n(&the_real_dlsym, fn, __ATOMIC_RELEASE);
	return fn;
}

void *real_dlsym(void *handle, const char *name)
{
	dlsym_fn fn = find_real_dlsym();
	return fn ? fn(handle, name) : NULL;
}

/*
 * Must be called directly from this object: glibc resolves RTLD_NEXT
 * relative to the caller of dlsym, which is real_dlsym's caller frame in
 * libdlbn.so either way.
 */
void *real_next(const char *name)
{
	dlsym_fn fn = find_real_dlsym();
	return fn ? fn(RTLD_NEXT, name) : NULL;
}

void *real_lazy(void **slot, const char *name)
{
	void *fn = real_next(name);
	/* Benign race: every thread stores the same value. */
	__atomic_store_n(slot, fn, __ATOMIC_RELAXED);
	return fn;
}

void real_resolve_all(void)
{
#define DLBN_REAL_RESOLVE(name, ret, params)                                                       \
	if (!real_##name)                                                                          \
		real_##name = (real_##name##_fn)real_next(#name);
	DLBN_REAL_FUNCS(DLBN_REAL_RESOLVE)
#undef DLBN_REAL_RESOLVE
}
