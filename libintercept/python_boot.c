/*
 * python_boot.c - bring the Python bootstrap into CPython hosts.
 *
 * When this process is a CPython interpreter, DLBN_PYTHON is not "0" and
 * <directory of libdlbn.so>/dlbn-python/sitecustomize.py exists, that
 * directory is prepended to PYTHONPATH.  The constructor runs before the
 * interpreter reads its environment, so site.py then imports our
 * sitecustomize (which chains to any other one).  `python -I`/`-E` ignore
 * PYTHONPATH: the bootstrap is then absent, by design.
 */
#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "session.h"

static bool is_cpython(void)
{
	char exe[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (n <= 0)
		return false;
	exe[n] = '\0';
	const char *base = strrchr(exe, '/');
	base = base ? base + 1 : exe;
	return strncmp(base, "python", 6) == 0;
}

/* <dir of libdlbn.so>/dlbn-python into out; false if it has no bootstrap. */
static bool bootstrap_dir(char *out, size_t size)
{
	Dl_info info;
	if (!dladdr((void *)python_boot_setup, &info) || !info.dli_fname)
		return false;
	const char *slash = strrchr(info.dli_fname, '/');
	int n;
	if (slash)
		n = snprintf(out, size, "%.*s/dlbn-python", (int)(slash - info.dli_fname),
			     info.dli_fname);
	else
		n = snprintf(out, size, "dlbn-python");
	if (n < 0 || (size_t)n >= size)
		return false;
	char probe[PATH_MAX + 32];
	snprintf(probe, sizeof(probe), "%s/sitecustomize.py", out);
	return access(probe, R_OK) == 0;
}

void python_boot_setup(void)
{
	const char *sw = getenv("DLBN_PYTHON");
	if ((sw && strcmp(sw, "0") == 0) || !is_cpython())
		return;
	char dir[PATH_MAX];
	if (!bootstrap_dir(dir, sizeof(dir)))
		return;
	char abs[PATH_MAX];
	if (dir[0] != '/' && realpath(dir, abs))
		snprintf(dir, sizeof(dir), "%s", abs);
	const char *old = getenv("PYTHONPATH");
	if (old && *old) {
		/* Already first (e.g. inherited from a parent we set it up in). */
		size_t k = strlen(dir);
		if (strncmp(old, dir, k) == 0 && (old[k] == ':' || old[k] == '\0'))
			return;
		size_t len = k + 1 + strlen(old) + 1;
		char *value = malloc(len);
		if (!value)
			return;
		snprintf(value, len, "%s:%s", dir, old);
		setenv("PYTHONPATH", value, 1);
		free(value);
	} else {
		setenv("PYTHONPATH", dir, 1);
	}
}
