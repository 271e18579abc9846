/*
 * trace_writer.h - per-thread record streams and the msgpack encoder.
 *
 * Each thread that records owns a stream: its current extent (mapped
 * MAP_SHARED from the trace file), the bytes used in it and the time of its
 * previous record (records carry signed time deltas).  Streams live in
 * initial-exec TLS, so reaching one costs a register-relative load.
 *
 * Writing a record: tw_begin reserves room in the extent (moving to a new
 * extent when the record does not fit), the caller encodes with the mp_*
 * helpers directly into the mapping, and tw_commit publishes the bytes with
 * a release store of the extent's commit word (length and CRC-32C of the
 * records, dlbn_trace.h).  Nothing is buffered outside
 * the file mapping, so a process killed by SIGKILL keeps every committed
 * record.
 */
#ifndef DLBN_TRACE_WRITER_H
#define DLBN_TRACE_WRITER_H

#include <string.h>

#include "recorder.h"

/* Largest encoding of one msgpack integer / of a str header. */
#define MP_INT_MAX     9u
#define MP_STR_HDR_MAX 5u
/* Longest string stored in a record; longer ones are cut. */
#define TW_STR_MAX 4096u

static inline uint8_t *mp_be16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
	return p + 2;
}

static inline uint8_t *mp_be32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
	return p + 4;
}

static inline uint8_t *mp_be64(uint8_t *p, uint64_t v)
{
	p = mp_be32(p, (uint32_t)(v >> 32));
	return mp_be32(p, (uint32_t)v);
}

/* The smallest msgpack encoding of v. */
static inline uint8_t *mp_int(uint8_t *p, int64_t v)
{
	if (v >= 0) {
		if (v < 128) {
			*p = (uint8_t)v;
			return p + 1;
		}
		if (v < 256) {
			p[0] = 0xcc;
			p[1] = (uint8_t)v;
			return p + 2;
		}
		if (v < 65536) {
			*p = 0xcd;
			return mp_be16(p + 1, (uint16_t)v);
		}
		if (v <= 0xffffffffLL) {
			*p = 0xce;
			return mp_be32(p + 1, (uint32_t)v);
		}
		*p = 0xcf;
		return mp_be64(p + 1, (uint64_t)v);
	}
	if (v >= -32) {
		*p = (uint8_t)(int8_t)v;
		return p + 1;
	}
	if (v >= -128) {
		p[0] = 0xd0;
		p[1] = (uint8_t)(int8_t)v;
		return p + 2;
	}
	if (v >= -32768) {
		*p = 0xd1;
		return mp_be16(p + 1, (uint16_t)(int16_t)v);
	}
	if (v >= -2147483648LL) {
		*p = 0xd2;
		return mp_be32(p + 1, (uint32_t)(int32_t)v);
	}
	*p = 0xd3;
	return mp_be64(p + 1, (uint64_t)v);
}

static inline uint8_t *mp_array(uint8_t *p, uint32_t n)
{
	if (n < 16) {
		*p = (uint8_t)(0x90 | n);
		return p + 1;
	}
	*p = 0xdc;
	return mp_be16(p + 1, (uint16_t)n);
}

/* str (cut to TW_STR_MAX) or nil when s is NULL. */
static inline uint8_t *mp_str(uint8_t *p, const char *s, size_t len)
{
	if (!s) {
		*p = 0xc0;
		return p + 1;
	}
	if (len > TW_STR_MAX)
		len = TW_STR_MAX;
	if (len < 32) {
		*p++ = (uint8_t)(0xa0 | len);
	} else if (len < 256) {
		*p++ = 0xd9;
		*p++ = (uint8_t)len;
	} else {
		*p = 0xda;
		p = mp_be16(p + 1, (uint16_t)len);
	}
	memcpy(p, s, len);
	return p + len;
}

/*
 * Start a record of `nelem` msgpack elements after [type, dt] (so the
 * array has nelem + 2 elements) needing at most `bound` bytes for those
 * elements.  Returns where to encode them, or NULL (recorder off, stream
 * failed, record too big).  Must be paired with tw_commit on success.
 */
uint8_t *tw_begin(uint8_t type, uint64_t t_ns, unsigned nelem, size_t bound) DLBN_HIDDEN;
void tw_commit(uint8_t *end) DLBN_HIDDEN;

/* Mark the calling thread's current extent final (EXIT). */
void tw_mark_final(void) DLBN_HIDDEN;
/* This process stops recording (recorder_fail, once): its slot of the file
 * header's passive table (dlbn_trace.h).  err: errno, 0 unknown. */
void tw_note_passive(int err) DLBN_HIDDEN;
/* Fork child: forget the inherited stream (its extent is the parent's). */
void tw_fork_child(void) DLBN_HIDDEN;
/* Constructor: set up thread-exit handling of streams. */
void tw_init(void) DLBN_HIDDEN;
/* Open the calling thread's stream now (writes PROCESS/THREAD). */
void tw_open_stream(uint64_t t_ns) DLBN_HIDDEN;

/* recorder.c: writes the PROCESS record of this process instance. */
void recorder_emit_process(uint64_t t_ns) DLBN_HIDDEN;

#endif /* DLBN_TRACE_WRITER_H */
