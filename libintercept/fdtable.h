/*
 * fdtable.h - what kind of object each file descriptor of the process is.
 *
 * One 64-bit word per fd in a per-process array (mmap'd in the constructor;
 * a fork child inherits a copy, which stays right because the fds are
 * inherited too).  A word is 0 ("not classified") or
 *     ino << 8 | FDW_VALID | kind          (kind = DLBN_FD_*)
 * and is filled lazily by fstat on the first hooked call that needs it.
 *
 * Invariant: a word is only ever set from fstat of that very fd in this
 * process, never from a guess.  Calls that create or destroy fds (open,
 * pipe, socket, accept, dup*, close, close_range, fcntl F_DUPFD, fds
 * received with SCM_RIGHTS) reset words to 0 after the real call.  A vfork
 * child shares this memory, so it must not fill words (checked by pid).
 */
#ifndef DLBN_FDTABLE_H
#define DLBN_FDTABLE_H

#include "recorder.h"

#define FDW_VALID     0x10u
#define FDW_KIND_MASK 0x0fu

/* Entries of the table; fds at or above this are never recorded. */
#define FDTABLE_SIZE (1u << 20)

extern uint64_t *fdtable_words DLBN_HIDDEN;

/* Classify fd (fast: one load; slow once per fd: fstat). 0 if unknown. */
uint64_t fdtable_classify_slow(int fd) DLBN_HIDDEN;

static inline uint64_t fdtable_get(int fd)
{
	uint64_t *words = fdtable_words;
	if (DLBN_UNLIKELY(words == NULL || (unsigned)fd >= FDTABLE_SIZE))
		return 0;
	uint64_t w = __atomic_load_n(&words[fd], __ATOMIC_RELAXED);
	if (DLBN_LIKELY(w != 0))
		return w;
	return fdtable_classify_slow(fd);
}

/* The word as it is, without classifying (0: unknown or out of range). */
static inline uint64_t fdtable_peek(int fd)
{
	uint64_t *words = fdtable_words;
	if (DLBN_UNLIKELY(words == NULL || (unsigned)fd >= FDTABLE_SIZE))
		return 0;
	return __atomic_load_n(&words[fd], __ATOMIC_RELAXED);
}

static inline unsigned fdw_kind(uint64_t w)
{
	return (unsigned)(w & FDW_KIND_MASK);
}

static inline int64_t fdw_ino(uint64_t w)
{
	return (int64_t)(w >> 8);
}

/* Pipes and unix sockets: the batch hand-off channels. */
static inline bool fdw_is_ipc(uint64_t w)
{
	unsigned k = fdw_kind(w);
	return k == DLBN_FD_PIPE || k == DLBN_FD_UNIX;
}

/* Regular files, including /dev/shm objects. */
static inline bool fdw_is_file(uint64_t w)
{
	unsigned k = fdw_kind(w);
	return k == DLBN_FD_FILE || k == DLBN_FD_SHM;
}

void fdtable_init(void) DLBN_HIDDEN;
void fdtable_forget(int fd) DLBN_HIDDEN;
void fdtable_forget_range(unsigned lo, unsigned hi) DLBN_HIDDEN;

#endif /* DLBN_FDTABLE_H */
