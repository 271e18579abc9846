/*
 * extent_check.c - format 1.1 extent checks and single-bit repair (see
 * extent_check.h).
 */
#include <unistd.h>

#include "trace/extent_check.h"
#include "dlbn/crc32c.h"

int dlbn_extent_check_header(struct dlbn_extent_header *eh, int *repaired)
{
	*repaired = 0;
	uint32_t want = eh->header_crc, got = dlbn_extent_header_crc(eh);
	if (eh->magic != DLBN_EXTENT_MAGIC) {
		/* A magic one bit off with intact fields: the magic took the hit. */
		if (__builtin_popcount(eh->magic ^ DLBN_EXTENT_MAGIC) != 1 || want != got)
			return 0;
		eh->magic = DLBN_EXTENT_MAGIC;
		*repaired = 1;
		return 1;
	}
	if (want == got)
		return 1;
	*repaired = 1;
	if (__builtin_popcount(want ^ got) == 1)
		return 1; /* the fields are right, header_crc took the hit */
	uint8_t *b = (uint8_t *)eh;
	static const struct {
		unsigned from, to;
	} spans[] = {{8, 28}, {32, 40}};
	for (unsigned k = 0; k < 2; k++)
		for (unsigned i = spans[k].from; i < spans[k].to; i++)
			for (unsigned bit = 0; bit < 8; bit++) {
				b[i] ^= (uint8_t)(1u << bit);
				if (dlbn_extent_header_crc(eh) == want)
					return 1;
				b[i] ^= (uint8_t)(1u << bit);
			}
	*repaired = 0;
	return 0;
}

/* CRC-32C register over `len` bytes at file offset off; -1 on a read error. */
static int crc_of(int fd, uint64_t off, uint32_t len, uint8_t *buf, uint32_t *reg)
{
	uint32_t c = DLBN_CRC32C_INIT;
	while (len > 0) {
		size_t want = len < DLBN_CHECK_BUF ? len : DLBN_CHECK_BUF;
		ssize_t got = pread(fd, buf, want, (off_t)off);
		if (got <= 0)
			return -1;
		c = dlbn_crc32c_update(c, buf, (size_t)got);
		off += (uint64_t)got;
		len -= (uint32_t)got;
	}
	*reg = c;
	return 0;
}

/*
 * The records of n bytes fail their CRC by `syndrome` (stored ^ computed
 * CRC).  A single flipped bit at byte j, bit k leaves the syndrome
 * T[1 << k] advanced over the n - 1 - j bytes after it (the CRC is
 * linear).  Returns j and sets *mask, or -1 when no single bit explains
 * the syndrome.
 */
static int64_t locate_flip(uint32_t syndrome, uint32_t n, uint8_t *mask)
{
	if (n == 0 || n > (1u << 27))
		return -1;
	for (unsigned k = 0; k < 8; k++) {
		uint32_t v = dlbn_crc32c_table[1u << k];
		for (uint32_t d = 0; d < n; d++) {
			if (v == syndrome) {
				*mask = (uint8_t)(1u << k);
				return (int64_t)(n - 1 - d);
			}
			v = (v >> 8) ^ dlbn_crc32c_table[v & 0xff];
		}
	}
	return -1;
}

int dlbn_extent_check_records(int fd, uint64_t file_size, const struct dlbn_extent_header *eh,
			      uint64_t data_off, uint32_t room, uint8_t *buf,
			      struct dlbn_extent_check *out)
{
	uint32_t low = (uint32_t)eh->commit;
	uint32_t crc = (uint32_t)(eh->commit >> DLBN_COMMIT_CRC_SHIFT);
	uint32_t reg;
	*out = (struct dlbn_extent_check){.committed = low & DLBN_COMMIT_LEN_MASK,
					  .final = (low & DLBN_COMMIT_FINAL) != 0,
					  .fix_off = -1};
	if (__builtin_parity(low)) {
		/* One bit of length, FINAL or parity flipped: the length whose
		 * records match the CRC is the right one.  When it is the stored
		 * one, FINAL or parity flipped: FINAL then comes from the 1.0
		 * flags field, which the recorder keeps equal. */
		for (int bit = -1; bit < 30; bit++) {
			uint32_t len = bit < 0 ? out->committed : out->committed ^ (1u << bit);
			if (len > room || data_off + len > file_size ||
			    crc_of(fd, data_off, len, buf, &reg) != 0 || ~reg != crc)
				continue;
			out->committed = len;
			if (bit < 0)
				out->final = (eh->flags & DLBN_EXTENT_FINAL) != 0;
			out->repaired = DLBN_REPAIR_COMMIT;
			return 1;
		}
		return 0;
	}
	if (out->committed > room)
		return 0;
	if (data_off + out->committed > file_size) {
		out->cut = 1; /* what is there is read unchecked */
		return 1;
	}
	if (crc_of(fd, data_off, out->committed, buf, &reg) != 0)
		return 0;
	if (~reg == crc)
		return 1;
	uint32_t syndrome = crc ^ ~reg;
	if (__builtin_popcount(syndrome) == 1) {
		out->repaired = DLBN_REPAIR_CRC; /* no record bit has such a syndrome */
		return 1;
	}
	out->fix_off = locate_flip(syndrome, out->committed, &out->fix_mask);
	if (out->fix_off < 0)
		return 0;
	out->repaired = DLBN_REPAIR_RECORD;
	return 1;
}
