/*
 * recbuf.h - records of one thread, collected out of time order and written
 * to a tracegen stream in time order (ties keep the order they were added).
 *
 * For tests that describe a run step by step, where one step adds records
 * at several times (a probe now, its completion at the next wait).
 */
#ifndef DLBN_TEST_RECBUF_H
#define DLBN_TEST_RECBUF_H

#include <stdint.h>

#include "tracegen.h"

/* Add [type, t, f...] with nf (at most 7) int64_t fields. */
void recbuf_add(int64_t t, int type, int nf, ...);
/* Add [type, t, f0, f1, str]: the CUDA_INFO shape.  str must outlive the flush. */
void recbuf_add_str(int64_t t, int type, int64_t f0, int64_t f1, const char *str);
/* Write every buffered record to s in time order and empty the buffer.
 * Returns the last record's time, or `none` when the buffer was empty. */
int64_t recbuf_flush(struct tg_stream *s, int64_t none);
/* Release the buffer's memory. */
void recbuf_free(void);

#endif /* DLBN_TEST_RECBUF_H */
