/*
 * extent_check.h - the format 1.1 checks of one extent (dlbn_trace.h):
 * magic, header CRC, commit word parity and the CRC-32C of the committed
 * records, with the repair of a single flipped bit.  The reader's scan
 * calls these before it hands out any record of the extent.
 *
 * Repair is exact, not a guess: CRC-32C has a Hamming distance of at least
 * 3 for messages below 2^31 bits, so two different single-bit errors never
 * leave the same mismatch, and the bit found is the bit that flipped.
 */
#ifndef DLBN_EXTENT_CHECK_H
#define DLBN_EXTENT_CHECK_H

#include <stdint.h>

#include "dlbn/dlbn_trace.h"

#define DLBN_CHECK_BUF (64u * 1024u) /* scratch bytes dlbn_extent_check_records reads into */

enum dlbn_repair {
	DLBN_REPAIR_NONE = 0,
	DLBN_REPAIR_HEADER = 1, /* a fixed header field, header_crc or the magic */
	DLBN_REPAIR_COMMIT = 2, /* the commit word's length, FINAL or parity bit */
	DLBN_REPAIR_CRC = 3,	/* the stored CRC of the records */
	DLBN_REPAIR_RECORD = 4, /* a record bit: flip fix_mask at fix_off back */
};

struct dlbn_extent_check {
	uint32_t committed; /* record bytes to use */
	int final;	    /* DLBN_EXTENT_FINAL */
	int cut;	    /* the file ends inside them: not checked (truncated) */
	int repaired;	    /* DLBN_REPAIR_* */
	int64_t fix_off;    /* DLBN_REPAIR_RECORD: byte offset in the records */
	uint8_t fix_mask;
};

/*
 * The header of an extent whose magic is not 0: 1 usable (repaired in place
 * when a single flipped bit of the magic, the fixed fields or header_crc
 * explains the mismatch; *repaired says so), 0 damaged beyond that.
 */
int dlbn_extent_check_header(struct dlbn_extent_header *eh, int *repaired);

/*
 * The records of an extent whose header passed: 1 usable (out filled,
 * perhaps repaired), 0 damaged beyond repair.  fd, file_size: the trace;
 * data_off: file offset of the records; room: record bytes an extent holds;
 * buf: DLBN_CHECK_BUF bytes of scratch.
 */
int dlbn_extent_check_records(int fd, uint64_t file_size, const struct dlbn_extent_header *eh,
			      uint64_t data_off, uint32_t room, uint8_t *buf,
			      struct dlbn_extent_check *out);

#endif /* DLBN_EXTENT_CHECK_H */
