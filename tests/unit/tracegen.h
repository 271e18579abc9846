/*
 * tracegen.h - test-side writer of valid dlbn trace files (CRC-32C checked
 * extents, dlbn_trace.h): format 4.0, or 3.0, 2.0 or 1.1 after
 * tg_set_version (in 1.1 records that name an fd carry its kind and inode
 * in place; 2.0 writes OPENs and MARKs without 3.0's differences; 3.0
 * shares an OPEN's path with the previous OPEN's only).
 *
 * Tests and dlbn-gentrace describe a trace stream by stream (one stream =
 * one thread of one process instance) with absolute timestamps; tracegen
 * packs each record with msgpack-c's packer, computes the deltas, cuts the
 * streams into extents of the chosen size and writes extent headers with
 * their committed counters, the way the recorder lays them out.  Records of
 * one stream must be added in time order; streams may be interleaved.
 *
 * It also produces the damage the reader must survive: an extent allocated
 * but never initialised, garbage past `committed`, a chosen file header.
 */
#ifndef DLBN_TRACEGEN_H
#define DLBN_TRACEGEN_H

#include <stddef.h>
#include <stdint.h>

#include "dlbn/dlbn_trace.h"

struct tg;
struct tg_stream;

/* Create `path` (truncating it) with extents of extent_size bytes (0 = default). */
struct tg *tg_open(const char *path, uint32_t extent_size);
/* Flush every stream, write the file header; 0 on success. */
int tg_close(struct tg *g);

/* Override the header written at close (tests of version/magic checks); a
 * major below 2 also writes the records that follow in the 1.x layout. */
void tg_set_version(struct tg *g, uint16_t major, uint16_t minor);
/* Write this many bytes of 0xA5 garbage after the committed bytes of every
 * extent (the uncommitted tail a killed writer leaves). */
void tg_set_garbage_tail(struct tg *g, uint32_t bytes);
/* A process that went passive at t_ns with errno err (file header table
 * and DLBN_FILE_PASSIVE, as the recorder's recorder_fail leaves them). */
void tg_passive(struct tg *g, uint32_t proc_id, uint32_t pid, int64_t t_ns, int err);
/* Hand out one extent slot and leave it uninitialised (all zero). */
void tg_blank_extent(struct tg *g);

/* A new stream; thread_no 0 is the process's first thread. */
struct tg_stream *tg_stream(struct tg *g, uint32_t proc_id, uint32_t thread_no, uint32_t pid,
			    uint32_t tid);
/* Mark the stream's last extent DLBN_EXTENT_FINAL and flush it. */
void tg_stream_final(struct tg_stream *s);

/*
 * Append one record [type, dt, fields...] at absolute time t_ns.  fmt has
 * one letter per field: 'i' int64_t, 's' const char * (NULL = nil),
 * 'a' array: const int64_t *, int count; 'v' the same count of int64_t
 * fields in place (not an array).
 */
void tg_rec(struct tg_stream *s, int type, int64_t t_ns, const char *fmt, ...);

/* Shorthands for the records the tests use most. */
void tg_process(struct tg_stream *s, int64_t t, int pid, int ppid, int64_t parent_proc_id,
		int start, const char *argv0);
/* The same with the rank variables (RANK/LOCAL_RANK as rank, WORLD_SIZE). */
void tg_process_rank(struct tg_stream *s, int64_t t, int pid, int ppid, int64_t parent_proc_id,
		     int start, const char *argv0, int rank, int world_size);
/* The same with the local rank and the host named. */
void tg_process_host(struct tg_stream *s, int64_t t, int pid, int ppid, int64_t parent_proc_id,
		     int start, const char *argv0, int rank, int local_rank, int world_size,
		     const char *host);
void tg_thread(struct tg_stream *s, int64_t t, int tid, int is_main);
void tg_exit(struct tg_stream *s, int64_t t, int status, int how);
void tg_read(struct tg_stream *s, int64_t t, int64_t dur, int fd, int kind, int64_t ino,
	     int64_t ret);
void tg_write(struct tg_stream *s, int64_t t, int64_t dur, int fd, int kind, int64_t ino,
	      int64_t ret);
void tg_pread(struct tg_stream *s, int64_t t, int64_t dur, int fd, int64_t ino, int64_t ret,
	      int64_t offset);
void tg_poll(struct tg_stream *s, int64_t t, int64_t dur, int ret, int timeout_ms,
	     const int64_t *inos, int n);
void tg_recvmsg(struct tg_stream *s, int64_t t, int64_t dur, int fd, int64_t ino, int64_t ret,
		int nfds);
void tg_connect(struct tg_stream *s, int64_t t, int64_t dur, int fd, int ret);
void tg_mmap(struct tg_stream *s, int64_t t, int fd, int64_t ino, int64_t length);
/* An OPEN record; in a 2.x trace its path shares what it can with the
 * extent's previous OPEN, as the recorder writes it. */
void tg_open_file(struct tg_stream *s, int64_t t, int fd, int kind, int64_t ino, int64_t flags,
		  const char *path);
void tg_sem_wait(struct tg_stream *s, int64_t t, int64_t dur, uint64_t sem);
void tg_sem_post(struct tg_stream *s, int64_t t, uint64_t sem);
void tg_mark(struct tg_stream *s, int64_t t, int kind, int64_t iter_id, int64_t arg);
/* A fetch MARK with the loop's first n counters (dlbn_trace.h, MARK; n 0:
 * none, as tg_mark): in 3.x as differences from the extent's previous one,
 * the counters past n written as 0; before 3.0 the n counters as they are. */
void tg_mark_counters(struct tg_stream *s, int64_t t, int kind, int64_t iter_id, int64_t arg,
		      const int64_t *counters, int n);
/* A STACK of n frame elements (module_id, offset pairs); in 3.x without
 * the end it shares with the extent's previous STACK. */
void tg_stack(struct tg_stream *s, int64_t t, int wait_type, int64_t wait_ts_delta,
	      const int64_t *frames, int n);
void tg_config(struct tg_stream *s, int64_t t, int64_t iter_id, const char *text);
void tg_fork(struct tg_stream *s, int64_t t, int64_t dur, int child_pid);

/* Records written so far (all streams). */
uint64_t tg_records(const struct tg *g);
/* OPENs written (4.0) sharing bytes with an older path than the previous. */
uint64_t tg_opens_aged(const struct tg *g);

#endif /* DLBN_TRACEGEN_H */
