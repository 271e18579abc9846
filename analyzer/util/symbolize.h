/*
 * symbolize.h - turn (module path, offset) from MODULE/STACK records into
 * "function+0xoff (module)" by reading the module's ELF symbol tables.
 *
 * No external tools, no libbfd: the file is mapped read-only, .symtab is
 * used when present (else .dynsym, else the separate debug file
 * /usr/lib/debug/.build-id/xx/yyyy.debug named by the build-id note), and
 * the function symbols are kept sorted per module for the life of the
 * symbolizer (one load per module path).  A missing, unreadable or
 * non-ELF file gives "0xoff (module)"; nothing here exits or aborts.
 *
 * offset is an ELF virtual address in the file (what stacks.c records:
 * return address minus the load bias, minus one), so it works for PIE,
 * shared objects and non-PIE executables alike.  C++ names are reported
 * mangled.
 */
#ifndef DLBN_SYMBOLIZE_H
#define DLBN_SYMBOLIZE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct symbolizer;

struct symbolizer *symbolizer_new(void);
void symbolizer_free(struct symbolizer *s);

/*
 * Look up offset in the module at path.  On success *func points at the
 * function's name (valid until symbolizer_free) and *func_off is offset
 * minus the function's start.  False when the module or a covering
 * function symbol is not found (or on allocation failure).
 */
bool symbolize_lookup(struct symbolizer *s, const char *path, uint64_t offset, const char **func,
		      uint64_t *func_off);

/*
 * "function+0x1a (libfoo.so)" or, without a symbol, "0x1a2b (libfoo.so)"
 * (the module's base name) into buf (always NUL-terminated, truncated to
 * len).  Returns buf.
 */
const char *symbolize(struct symbolizer *s, const char *path, uint64_t offset, char *buf,
		      size_t len);

#endif /* DLBN_SYMBOLIZE_H */
