/*
 * fdtable.c - lazy classification of file descriptors (see fdtable.h).
 */
#include <errno.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "fdtable.h"
#include "session.h"

uint64_t *fdtable_words;
/* Highest fd ever classified + 1: bounds close_range's reset loop. */
static unsigned fdtable_high;
/* st_dev of /dev/shm, to tell shared-memory objects from other files. */
static dev_t shm_dev;
static bool shm_dev_known;

void fdtable_init(void)
{
	if (fdtable_words)
		return;
	long p =
		syscall(SYS_mmap, NULL, (size_t)FDTABLE_SIZE * sizeof(uint64_t),
			PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (p == -1 || p == 0)
		return; /* fds are then simply never recorded */
	struct stat st;
	if (stat("/dev/shm", &st) == 0) {
		shm_dev = st.st_dev;
		shm_dev_known = true;
	}
	__atomic_store_n(&fdtable_words, (uint64_t *)p, __ATOMIC_RELEASE);
}

static unsigned kind_of(int fd, const struct stat *st)
{
	switch (st->st_mode & S_IFMT) {
	case S_IFIFO:
		return DLBN_FD_PIPE;
	case S_IFSOCK: {
		int domain = -1;
		socklen_t len = sizeof(domain);
		if (getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &domain, &len) == 0 && domain == AF_UNIX)
			return DLBN_FD_UNIX;
		return DLBN_FD_SOCKET;
	}
	case S_IFREG:
		if (shm_dev_known && st->st_dev == shm_dev)
			return DLBN_FD_SHM;
		return DLBN_FD_FILE;
	default:
		return DLBN_FD_OTHER;
	}
}

uint64_t fdtable_classify_slow(int fd)
{
	if (fd < 0)
		return 0;
	struct stat st;
	int saved = errno;
	int rc = fstat(fd, &st);
	unsigned kind = rc == 0 ? kind_of(fd, &st) : 0;
	errno = saved;
	if (rc != 0)
		return 0;
	uint64_t w = ((uint64_t)st.st_ino << 8) | FDW_VALID | kind;
	/* A vfork child shares this table with its parent: keep its view out. */
	if (!session_in_own_process())
		return w;
	__atomic_store_n(&fdtable_words[fd], w, __ATOMIC_RELAXED);
	unsigned high = __atomic_load_n(&fdtable_high, __ATOMIC_RELAXED);
	while ((unsigned)fd >= high &&
	       !__atomic_compare_exchange_n(&fdtable_high, &high, (unsigned)fd + 1, false,
					    __ATOMIC_RELAXED, __ATOMIC_RELAXED))
		;
	return w;
}

void fdtable_forget(int fd)
{
	uint64_t *words = fdtable_words;
	if (words && (unsigned)fd < FDTABLE_SIZE)
		__atomic_store_n(&words[fd], 0, __ATOMIC_RELAXED);
}

void fdtable_forget_range(unsigned lo, unsigned hi)
{
	uint64_t *words = fdtable_words;
	unsigned high = __atomic_load_n(&fdtable_high, __ATOMIC_RELAXED);
	if (!words)
		return;
	if (hi >= high)
		hi = high ? high - 1 : 0;
	for (unsigned fd = lo; fd <= hi && fd < high; fd++)
		__atomic_store_n(&words[fd], 0, __ATOMIC_RELAXED);
}
