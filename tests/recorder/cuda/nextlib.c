/*
 * nextlib.c - two test libraries for dlsym(RTLD_NEXT) under the preload
 * (tests/recorder/cuda/test_cuda.py).  Built twice: NEXTLIB_VALUE=1 as
 * libnext_a.so, which also holds the lookup functions, and NEXTLIB_VALUE=2 as
 * libnext_b.so, linked after it.  From inside libnext_a.so, RTLD_NEXT must
 * find libnext_b.so's dlbn_t_next (value 2); if libdlbn.so's dlsym made the
 * lookup relative to itself, it would find libnext_a.so's (value 1).
 * Built with -fno-optimize-sibling-calls: a tail call would make the
 * caller of dlsym the program, not this library.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>

int dlbn_t_next(void);
int dlbn_t_next(void)
{
	return NEXTLIB_VALUE;
}

#if NEXTLIB_VALUE == 1
void *next_lookup(const char *name);
void *next_lookup(const char *name)
{
	return dlsym(RTLD_NEXT, name);
}
#endif
