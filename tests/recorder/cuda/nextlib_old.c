/*
 * nextlib_old.c - the RTLD_NEXT lookup of nextlib.c made through the
 * historic dlsym@GLIBC_2.2.5, the version libcudart links.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>

__asm__(".symver dlsym, dlsym@GLIBC_2.2.5");

void *next_lookup_old(const char *name);
void *next_lookup_old(const char *name)
{
	return dlsym(RTLD_NEXT, name);
}
