/*
 * outfile.h - an output file of the analyzer (reports' HTML and SVG,
 * exports, rank summaries), replaced atomically: written to
 * PATH.tmp-XXXXXX and renamed over PATH when complete.  Never the trace
 * being read.  A utility: libc only.
 */
#ifndef DLBN_OUTFILE_H
#define DLBN_OUTFILE_H

#include <stddef.h>
#include <stdio.h>

/* An output file being written: path.tmp-XXXXXX until committed (tmp
 * NULL: an existing non-regular file written in place). */
struct dlbn_out_file {
	char *path, *tmp;
	int fd;
};
/* Create the temporary file (mode 0666 & ~umask).  Refuses a directory and
 * the trace being read.  An existing non-regular file (pipe, /dev/null,
 * /dev/stdout) is opened in place when stream_ok, refused otherwise.
 * 0, or -1 with err set. */
int dlbn_out_begin(struct dlbn_out_file *o, const char *path, const char *trace_path, int stream_ok,
		   char *err, size_t errlen);
/* Rename the temporary file over path.  0, or -1 with err set (temp removed). */
int dlbn_out_commit(struct dlbn_out_file *o, char *err, size_t errlen);
/* Remove the temporary file (failure path); safe to call twice. */
void dlbn_out_abort(struct dlbn_out_file *o);

/* The whole cycle: begin, fill through write(out, ctx), commit.  0, or -1
 * with err set and nothing left at path (an existing file stays). */
int dlbn_out_write(const char *path, const char *trace_path,
		   void (*write)(FILE *out, const void *ctx), const void *ctx, char *err,
		   size_t errlen);

#endif /* DLBN_OUTFILE_H */
