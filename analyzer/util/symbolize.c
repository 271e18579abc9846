/*
 * symbolize.c - ELF symbol lookup for native stacks (see symbolize.h).
 *
 * Each module is loaded once: the file is mapped read-only and stays mapped
 * (the names point into its string table), its function symbols are copied
 * into an array sorted by address.  Every offset read from the file is
 * bounds-checked against the file size before use, so a truncated or
 * hostile file yields "no symbols", never a crash.
 */
#include <elf.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/symbolize.h"

struct func_sym {
	uint64_t addr;
	uint64_t size; /* 0: unknown (assembly); covers up to the next symbol */
	const char *name;
	int rank; /* among aliases, lower wins: global, weak, local */
};

struct module_syms {
	char *path;
	void *map; /* NULL when the module could not be loaded */
	size_t map_len;
	struct func_sym *syms;
	size_t n_syms;
};

struct symbolizer {
	struct module_syms *mods;
	size_t n_mods, cap_mods;
};

/* ---- ELF parsing (bounds-checked) ---------------------------------------- */

struct elf_view {
	const uint8_t *base;
	size_t len;
	const Elf64_Ehdr *eh;
	const Elf64_Shdr *sh; /* section headers */
};

static bool in_file(const struct elf_view *v, uint64_t off, uint64_t size)
{
	return off <= v->len && size <= v->len - off;
}

static bool elf_open_view(struct elf_view *v, const void *base, size_t len)
{
	v->base = base;
	v->len = len;
	if (len < sizeof(Elf64_Ehdr))
		return false;
	v->eh = base;
	if (memcmp(v->eh->e_ident, ELFMAG, SELFMAG) != 0 ||
	    v->eh->e_ident[EI_CLASS] != ELFCLASS64 || v->eh->e_ident[EI_DATA] != ELFDATA2LSB ||
	    v->eh->e_shentsize != sizeof(Elf64_Shdr))
		return false;
	if (!in_file(v, v->eh->e_shoff, (uint64_t)v->eh->e_shnum * sizeof(Elf64_Shdr)))
		return false;
	if (v->eh->e_shoff % _Alignof(Elf64_Shdr) != 0)
		return false;
	v->sh = (const Elf64_Shdr *)(v->base + v->eh->e_shoff);
	return true;
}

static const Elf64_Shdr *find_section(const struct elf_view *v, uint32_t type)
{
	for (unsigned i = 0; i < v->eh->e_shnum; i++)
		if (v->sh[i].sh_type == type && v->sh[i].sh_size > 0)
			return &v->sh[i];
	return NULL;
}

static int by_addr(const void *a, const void *b)
{
	const struct func_sym *x = a, *y = b;
	if (x->addr != y->addr)
		return x->addr < y->addr ? -1 : 1;
	/* aliases: sized first, then the public name (qsort, not __GI_qsort),
	 * then by name for determinism */
	if ((x->size == 0) != (y->size == 0))
		return x->size ? -1 : 1;
	if (x->rank != y->rank)
		return x->rank - y->rank;
	return strcmp(x->name, y->name);
}

static int binding_rank(unsigned char info, unsigned char other)
{
	if (ELF64_ST_VISIBILITY(other) == STV_HIDDEN || ELF64_ST_BIND(info) == STB_LOCAL)
		return 2;
	return ELF64_ST_BIND(info) == STB_WEAK ? 1 : 0;
}

/* Function symbols of the symbol table section symtab; false if none. */
static bool collect_functions(const struct elf_view *v, const Elf64_Shdr *symtab,
			      struct module_syms *m)
{
	const Elf64_Shdr *strtab;
	const Elf64_Sym *syms;
	size_t n, k = 0;

	if (symtab->sh_entsize != sizeof(Elf64_Sym) || symtab->sh_link >= v->eh->e_shnum ||
	    !in_file(v, symtab->sh_offset, symtab->sh_size) ||
	    symtab->sh_offset % _Alignof(Elf64_Sym) != 0)
		return false;
	strtab = &v->sh[symtab->sh_link];
	if (strtab->sh_type != SHT_STRTAB || !in_file(v, strtab->sh_offset, strtab->sh_size) ||
	    strtab->sh_size == 0 || v->base[strtab->sh_offset + strtab->sh_size - 1] != '\0')
		return false;
	syms = (const Elf64_Sym *)(v->base + symtab->sh_offset);
	n = symtab->sh_size / sizeof(Elf64_Sym);
	m->syms = calloc(n ? n : 1, sizeof(*m->syms));
	if (!m->syms)
		return false;
	for (size_t i = 0; i < n; i++) {
		unsigned type = ELF64_ST_TYPE(syms[i].st_info);
		if ((type != STT_FUNC && type != STT_GNU_IFUNC) || syms[i].st_shndx == SHN_UNDEF ||
		    syms[i].st_value == 0 || syms[i].st_name >= strtab->sh_size)
			continue;
		m->syms[k].addr = syms[i].st_value;
		m->syms[k].size = syms[i].st_size;
		m->syms[k].name = (const char *)v->base + strtab->sh_offset + syms[i].st_name;
		m->syms[k].rank = binding_rank(syms[i].st_info, syms[i].st_other);
		k++;
	}
	if (k == 0) {
		free(m->syms);
		m->syms = NULL;
		return false;
	}
	qsort(m->syms, k, sizeof(*m->syms), by_addr);
	m->n_syms = k;
	return true;
}

/* "/usr/lib/debug/.build-id/ab/cdef....debug" from the build-id note. */
static bool debug_file_path(const struct elf_view *v, char *out, size_t len)
{
	for (unsigned i = 0; i < v->eh->e_shnum; i++) {
		const Elf64_Shdr *s = &v->sh[i];
		if (s->sh_type != SHT_NOTE || !in_file(v, s->sh_offset, s->sh_size))
			continue;
		uint64_t off = 0;
		while (off + sizeof(Elf64_Nhdr) <= s->sh_size) {
			const Elf64_Nhdr *nh = (const void *)(v->base + s->sh_offset + off);
			uint64_t name_sz = (nh->n_namesz + 3u) & ~3u,
				 desc_sz = (nh->n_descsz + 3u) & ~3u;
			const uint8_t *name = (const uint8_t *)(nh + 1);
			const uint8_t *desc = name + name_sz;
			if (off + sizeof(*nh) + name_sz + desc_sz > s->sh_size)
				break;
			if (nh->n_type == NT_GNU_BUILD_ID && nh->n_namesz == 4 &&
			    memcmp(name, "GNU", 4) == 0 && nh->n_descsz >= 2 &&
			    nh->n_descsz <= 64) {
				size_t k = (size_t)snprintf(
					out, len, "/usr/lib/debug/.build-id/%02x/", desc[0]);
				for (unsigned j = 1; j < nh->n_descsz && k + 3 < len; j++)
					k += (size_t)snprintf(out + k, len - k, "%02x", desc[j]);
				snprintf(out + k, len - k, ".debug");
				return true;
			}
			off += sizeof(*nh) + name_sz + desc_sz;
		}
	}
	return false;
}

/* ---- module cache ------------------------------------------------------- */

static bool map_file(const char *path, void **map, size_t *len)
{
	struct stat st;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return false;
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size <= 0) {
		close(fd);
		return false;
	}
	*map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
	close(fd);
	if (*map == MAP_FAILED)
		return false;
	*len = (size_t)st.st_size;
	return true;
}

static void unmap_module(struct module_syms *m)
{
	free(m->syms);
	m->syms = NULL;
	m->n_syms = 0;
	if (m->map)
		munmap(m->map, m->map_len);
	m->map = NULL;
}

/* Loads path's symbols into m: .symtab, else the build-id debug file's
 * .symtab, else .dynsym. */
static void load_module(struct module_syms *m, const char *path, int depth)
{
	struct elf_view v;
	const Elf64_Shdr *tab;
	char debug_path[256];

	if (!map_file(path, &m->map, &m->map_len)) {
		m->map = NULL;
		return;
	}
	if (!elf_open_view(&v, m->map, m->map_len)) {
		unmap_module(m);
		return;
	}
	tab = find_section(&v, SHT_SYMTAB);
	if (tab && collect_functions(&v, tab, m))
		return;
	if (depth == 0 && debug_file_path(&v, debug_path, sizeof(debug_path))) {
		struct module_syms dbg = {0};
		load_module(&dbg, debug_path, 1);
		if (dbg.n_syms) {
			unmap_module(m);
			m->map = dbg.map;
			m->map_len = dbg.map_len;
			m->syms = dbg.syms;
			m->n_syms = dbg.n_syms;
			return;
		}
		unmap_module(&dbg);
	}
	tab = find_section(&v, SHT_DYNSYM);
	if (tab && collect_functions(&v, tab, m))
		return;
	if (depth == 0 && !m->n_syms) {
		/* keep nothing mapped for a module without symbols */
		unmap_module(m);
	}
}

static struct module_syms *module_for(struct symbolizer *s, const char *path)
{
	for (size_t i = 0; i < s->n_mods; i++)
		if (strcmp(s->mods[i].path, path) == 0)
			return &s->mods[i];
	if (s->n_mods == s->cap_mods) {
		size_t cap = s->cap_mods ? 2 * s->cap_mods : 16;
		struct module_syms *mods = realloc(s->mods, cap * sizeof(*mods));
		if (!mods)
			return NULL;
		s->mods = mods;
		s->cap_mods = cap;
	}
	struct module_syms *m = &s->mods[s->n_mods];
	memset(m, 0, sizeof(*m));
	m->path = strdup(path);
	if (!m->path)
		return NULL;
	s->n_mods++;
	load_module(m, path, 0);
	return m;
}

/* ---- public --------------------------------------------------------------- */

struct symbolizer *symbolizer_new(void)
{
	return calloc(1, sizeof(struct symbolizer));
}

void symbolizer_free(struct symbolizer *s)
{
	if (!s)
		return;
	for (size_t i = 0; i < s->n_mods; i++) {
		unmap_module(&s->mods[i]);
		free(s->mods[i].path);
	}
	free(s->mods);
	free(s);
}

bool symbolize_lookup(struct symbolizer *s, const char *path, uint64_t offset, const char **func,
		      uint64_t *func_off)
{
	struct module_syms *m;
	size_t lo = 0, hi;

	if (!s || !path || !(m = module_for(s, path)) || m->n_syms == 0 || !m->syms)
		return false;
	/* last symbol with addr <= offset */
	hi = m->n_syms;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (m->syms[mid].addr <= offset)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == 0)
		return false;
	/* among aliases at that address by_addr put the sized one first */
	size_t i = lo - 1;
	while (i > 0 && m->syms[i - 1].addr == m->syms[i].addr)
		i--;
	const struct func_sym *f = &m->syms[i];
	if (f->size && offset >= f->addr + f->size)
		return false; /* in a gap between functions */
	*func = f->name;
	*func_off = offset - f->addr;
	return true;
}

static const char *base_name(const char *path)
{
	const char *slash = strrchr(path, '/');
	return slash ? slash + 1 : path;
}

const char *symbolize(struct symbolizer *s, const char *path, uint64_t offset, char *buf,
		      size_t len)
{
	const char *func;
	uint64_t off;

	if (!buf || len == 0)
		return buf;
	if (!path)
		path = "?";
	if (symbolize_lookup(s, path, offset, &func, &off))
		snprintf(buf, len, "%s+0x%" PRIx64 " (%s)", func, off, base_name(path));
	else
		snprintf(buf, len, "0x%" PRIx64 " (%s)", offset, base_name(path));
	return buf;
}
