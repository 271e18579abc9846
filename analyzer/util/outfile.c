/*
 * outfile.c - the analyzer's output files (outfile.h): written beside
 * their final name and renamed over it, so that a reader never sees half
 * a file and a failed write (full disk) leaves the old one.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/outfile.h"

/* umask() can only be read by setting it: done once, before any thread
 * of the analysis writes a file (-j writes rank summaries on threads). */
static mode_t umask_value;
static pthread_once_t umask_once = PTHREAD_ONCE_INIT;

static void read_umask(void)
{
	umask_value = umask(0);
	umask(umask_value);
}

static mode_t process_umask(void)
{
	pthread_once(&umask_once, read_umask);
	return umask_value;
}

/* An existing pipe, tty or device (/dev/stdout, /dev/null) is written in
 * place: renaming over it would replace the device node itself. */
static int out_open_special(struct dlbn_out_file *o, const char *path, int stream_ok, char *err,
			    size_t errlen)
{
	if (!stream_ok) {
		snprintf(err, errlen, "%s: not a regular file (a database needs one)", path);
		return -1;
	}
	o->fd = open(path, O_WRONLY | O_CLOEXEC | O_NOCTTY);
	if (o->fd < 0) {
		snprintf(err, errlen, "cannot open %s: %s", path, strerror(errno));
		return -1;
	}
	return 0;
}

int dlbn_out_begin(struct dlbn_out_file *o, const char *path, const char *trace_path, int stream_ok,
		   char *err, size_t errlen)
{
	struct stat st, ts;
	memset(o, 0, sizeof(*o));
	o->fd = -1;
	if (stat(path, &st) == 0) {
		if (S_ISDIR(st.st_mode)) {
			snprintf(err, errlen, "%s: is a directory", path);
			return -1;
		}
		if (trace_path && stat(trace_path, &ts) == 0 && ts.st_dev == st.st_dev &&
		    ts.st_ino == st.st_ino) {
			snprintf(err, errlen, "%s: is the trace being read; not overwriting it",
				 path);
			return -1;
		}
		if (!S_ISREG(st.st_mode))
			return out_open_special(o, path, stream_ok, err, errlen);
	}
	size_t n = strlen(path);
	o->path = strdup(path);
	o->tmp = malloc(n + sizeof(".tmp-XXXXXX"));
	if (!o->path || !o->tmp) {
		snprintf(err, errlen, "out of memory");
		dlbn_out_abort(o);
		return -1;
	}
	memcpy(o->tmp, path, n);
	memcpy(o->tmp + n, ".tmp-XXXXXX", sizeof(".tmp-XXXXXX"));
	o->fd = mkostemp(o->tmp, O_CLOEXEC);
	if (o->fd < 0) {
		snprintf(err, errlen, "cannot create %s: %s", path, strerror(errno));
		free(o->tmp); /* nothing was created: nothing to remove */
		o->tmp = NULL;
		dlbn_out_abort(o);
		return -1;
	}
	/* mkostemp makes 0600; an output is an ordinary file. */
	if (fchmod(o->fd, 0666 & ~process_umask()) != 0) {
		/* keep 0600: safe, only less convenient */
	}
	return 0;
}

int dlbn_out_commit(struct dlbn_out_file *o, char *err, size_t errlen)
{
	int rc = 0;
	if (o->fd >= 0 && close(o->fd) != 0) {
		snprintf(err, errlen, "writing %s: %s", o->path ? o->path : "", strerror(errno));
		rc = -1;
	}
	o->fd = -1;
	if (rc == 0 && o->tmp && rename(o->tmp, o->path) != 0) {
		snprintf(err, errlen, "cannot write %s: %s", o->path, strerror(errno));
		rc = -1;
	}
	if (rc == 0) {
		free(o->tmp);
		o->tmp = NULL;
	}
	dlbn_out_abort(o);
	return rc;
}

void dlbn_out_abort(struct dlbn_out_file *o)
{
	if (o->fd >= 0)
		close(o->fd);
	o->fd = -1;
	if (o->tmp)
		unlink(o->tmp);
	free(o->tmp);
	free(o->path);
	o->tmp = o->path = NULL;
}

int dlbn_out_write(const char *path, const char *trace_path,
		   void (*write)(FILE *out, const void *ctx), const void *ctx, char *err,
		   size_t errlen)
{
	struct dlbn_out_file o;
	if (dlbn_out_begin(&o, path, trace_path, 1, err, errlen) != 0)
		return -1;
	FILE *out = fdopen(o.fd, "w");
	if (!out) {
		snprintf(err, errlen, "out of memory");
		dlbn_out_abort(&o);
		return -1;
	}
	write(out, ctx);
	int bad = fflush(out) != 0 || ferror(out);
	bad |= fclose(out) != 0;
	o.fd = -1;
	if (bad) {
		snprintf(err, errlen, "writing %s failed", path);
		dlbn_out_abort(&o);
		return -1;
	}
	return dlbn_out_commit(&o, err, errlen);
}
