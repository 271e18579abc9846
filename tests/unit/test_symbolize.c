/*
 * test_symbolize.c - analyzer/util/symbolize.c: offsets of known functions in
 * this test binary (.symtab) and in libc (.dynsym) come back as
 * "name+0xoff (module)"; missing and non-ELF files degrade to
 * "0xoff (module)".
 */
#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/symbolize.h"

static int failures;

#define CHECK(cond, ...)                                                                           \
	do {                                                                                       \
		if (!(cond)) {                                                                     \
			fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);                       \
			fprintf(stderr, __VA_ARGS__);                                              \
			fputc('\n', stderr);                                                       \
			failures++;                                                                \
		}                                                                                  \
	} while (0)

int symbolize_probe_target(int x);
__attribute__((noinline)) int symbolize_probe_target(int x)
{
	__asm__ volatile("" ::: "memory");
	return x * 3 + 1;
}

static int main_bias_cb(struct dl_phdr_info *info, size_t size, void *arg)
{
	(void)size;
	*(uintptr_t *)arg = info->dlpi_addr;
	return 1; /* the first entry is the main program */
}

static void test_own_binary(struct symbolizer *s)
{
	uintptr_t bias = 0;
	char exe[512], buf[256], want[300];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);

	CHECK(n > 0, "readlink /proc/self/exe");
	exe[n > 0 ? n : 0] = '\0';
	dl_iterate_phdr(main_bias_cb, &bias);
	uint64_t off = (uintptr_t)&symbolize_probe_target - bias + 4;
	const char *base = strrchr(exe, '/') + 1;
	snprintf(want, sizeof(want), "symbolize_probe_target+0x4 (%s)", base);
	symbolize(s, exe, off, buf, sizeof(buf));
	CHECK(strcmp(buf, want) == 0, "own binary: got '%s', want '%s'", buf, want);
	/* cached module: same answer again */
	symbolize(s, exe, off, buf, sizeof(buf));
	CHECK(strcmp(buf, want) == 0, "own binary (cached): got '%s'", buf);
	CHECK(symbolize_probe_target(1) == 4, "probe");
}

static void test_libc_dynsym(struct symbolizer *s)
{
	Dl_info info;
	struct link_map *lm = NULL;
	void *addr = (void *)&qsort;
	const char *func = NULL;
	uint64_t func_off = 99;

	CHECK(dladdr1(addr, &info, (void **)&lm, RTLD_DL_LINKMAP) && lm, "dladdr1 qsort");
	if (!lm)
		return;
	uint64_t off = (uintptr_t)addr - lm->l_addr;
	CHECK(symbolize_lookup(s, lm->l_name, off + 4, &func, &func_off), "libc lookup of %s",
	      lm->l_name);
	if (!func)
		return;
	/* an alias may be named; it must be a name of the same function */
	CHECK(func_off == 4, "libc func_off %llu", (unsigned long long)func_off);
	CHECK(dlsym(RTLD_DEFAULT, func) == addr, "libc: '%s' is not qsort", func);
	/* libc.so.6 normally; libasan.so under ASan, whose qsort interceptor
	 * the program then calls */
	char buf[256], want[300];
	snprintf(want, sizeof(want), "%s+0x4 (%s)", func, strrchr(lm->l_name, '/') + 1);
	symbolize(s, lm->l_name, off + 4, buf, sizeof(buf));
	CHECK(strcmp(buf, want) == 0, "libc format: '%s', want '%s'", buf, want);
}

static void test_missing_and_bad_files(struct symbolizer *s)
{
	char buf[128];
	const char *func;
	uint64_t off;

	symbolize(s, "/nonexistent/dir/libgone.so", 0x1234, buf, sizeof(buf));
	CHECK(strcmp(buf, "0x1234 (libgone.so)") == 0, "missing file: '%s'", buf);
	CHECK(!symbolize_lookup(s, "/nonexistent/dir/libgone.so", 0x1234, &func, &off),
	      "missing file lookup");
	symbolize(s, "/proc/self/status", 0x10, buf, sizeof(buf)); /* not ELF */
	CHECK(strcmp(buf, "0x10 (status)") == 0, "non-ELF: '%s'", buf);
	symbolize(s, "/", 0x10, buf, sizeof(buf)); /* a directory */
	CHECK(strcmp(buf, "0x10 ()") == 0, "directory: '%s'", buf);
	symbolize(NULL, NULL, 0x10, buf, sizeof(buf));
	CHECK(strcmp(buf, "0x10 (?)") == 0, "null symbolizer: '%s'", buf);
	/* truncation keeps the terminator */
	symbolize(s, "/nonexistent/libgone.so", 0x1234, buf, 5);
	CHECK(strlen(buf) == 4, "truncated: '%s'", buf);
}

static void test_offset_below_first_function(struct symbolizer *s)
{
	char exe[512], buf[256];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);

	exe[n > 0 ? n : 0] = '\0';
	symbolize(s, exe, 0x1, buf, sizeof(buf)); /* inside the ELF header */
	CHECK(strncmp(buf, "0x1 (", 5) == 0, "below first function: '%s'", buf);
}

/* Damaged copies of this binary (truncated; bits flipped in the ELF header,
 * the section table and anywhere): every lookup must return without
 * crashing (also run under ASan by `make sanitize`). */
static void test_damaged_files(void)
{
	char exe[512], tmp[] = "/tmp/dlbn-symbolize-XXXXXX";
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	FILE *f;
	unsigned char *img;
	long len;
	uint32_t seed = 12345;

	exe[n > 0 ? n : 0] = '\0';
	f = fopen(exe, "rb");
	CHECK(f != NULL, "open own binary");
	if (!f)
		return;
	fseek(f, 0, SEEK_END);
	len = ftell(f);
	rewind(f);
	img = malloc((size_t)len);
	CHECK(img && fread(img, 1, (size_t)len, f) == (size_t)len, "read own binary");
	fclose(f);
	int fd = mkstemp(tmp);
	CHECK(fd >= 0, "mkstemp");
	if (fd < 0 || !img) {
		free(img);
		return;
	}
	const Elf64_Ehdr *eh = (const Elf64_Ehdr *)img;
	uint64_t shoff = eh->e_shoff;
	for (int round = 0; round < 200; round++) {
		unsigned char *copy = malloc((size_t)len);
		memcpy(copy, img, (size_t)len);
		size_t cut = (size_t)len;
		for (int k = 0; k < 8; k++) {
			seed = seed * 1103515245u + 12345u;
			uint64_t where;
			switch ((seed >> 8) % 3) {
			case 0: /* ELF header */
				where = (seed >> 4) % 64;
				break;
			case 1: /* section header table */
				where = shoff + (seed >> 3) % (uint64_t)(len - (long)shoff);
				break;
			default: /* anywhere (symbol and string tables, notes) */
				where = (seed >> 2) % (uint64_t)len;
				break;
			}
			if (where < (uint64_t)len)
				copy[where] ^= (unsigned char)(1u << (seed % 8));
		}
		if (round % 4 == 3)
			cut = (size_t)((seed >> 2) % (uint32_t)len);
		if (ftruncate(fd, 0) != 0 || pwrite(fd, copy, cut, 0) != (ssize_t)cut)
			CHECK(0, "write damaged copy");
		free(copy);
		/* a fresh symbolizer: modules are cached by path */
		struct symbolizer *s = symbolizer_new();
		char buf[256];
		for (uint64_t off = 0; off < 0x4000; off += 0x333)
			symbolize(s, tmp, off, buf, sizeof(buf));
		symbolizer_free(s);
	}
	close(fd);
	unlink(tmp);
	free(img);
}

int main(void)
{
	struct symbolizer *s = symbolizer_new();

	CHECK(s != NULL, "symbolizer_new");
	test_own_binary(s);
	test_libc_dynsym(s);
	test_missing_and_bad_files(s);
	test_offset_below_first_function(s);
	symbolizer_free(s);
	test_damaged_files();
	if (failures) {
		fprintf(stderr, "test_symbolize: %d failure(s)\n", failures);
		return 1;
	}
	printf("test_symbolize: ok\n");
	return 0;
}
