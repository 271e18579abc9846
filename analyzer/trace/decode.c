/*
 * decode.c - the record decoder of the trace reader (dlbn_decode_record,
 * reader.h).  It handles the msgpack subset the format uses (ints, str,
 * bin, nil, arrays of ints) inline and skips anything else generically; it
 * is the hot path of the analyzer, so it works on raw bytes without
 * allocation.
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "trace/reader.h"

#define SKIP_DEPTH_MAX 8

/* ---- msgpack subset decoder ------------------------------------------- */

static inline uint16_t be16(const uint8_t *p)
{
	return (uint16_t)((uint16_t)p[0] << 8 | p[1]);
}

static inline uint32_t be32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static inline uint64_t be64(const uint8_t *p)
{
	return (uint64_t)be32(p) << 32 | be32(p + 4);
}

#define NEED(n)                                                                                    \
	do {                                                                                       \
		if ((size_t)(end - p) < (size_t)(n))                                               \
			return -2;                                                                 \
	} while (0)

/*
 * Read an integer at *pp.  Returns 1 and the value, 0 if the value there is
 * not an integer (nothing consumed), -2 if incomplete.
 */
static inline __attribute__((always_inline)) int read_int(const uint8_t **pp, const uint8_t *end,
							  int64_t *v)
{
	const uint8_t *p = *pp;
	NEED(1);
	uint8_t c = *p;
	if (c <= 0x7f || c >= 0xe0) {
		*v = (int8_t)c;
		if (c <= 0x7f)
			*v = c;
		*pp = p + 1;
		return 1;
	}
	switch (c) {
	case 0xcc:
		NEED(2);
		*v = p[1];
		*pp = p + 2;
		return 1;
	case 0xcd:
		NEED(3);
		*v = be16(p + 1);
		*pp = p + 3;
		return 1;
	case 0xce:
		NEED(5);
		*v = be32(p + 1);
		*pp = p + 5;
		return 1;
	case 0xcf:
		NEED(9);
		*v = (int64_t)be64(p + 1);
		*pp = p + 9;
		return 1;
	case 0xd0:
		NEED(2);
		*v = (int8_t)p[1];
		*pp = p + 2;
		return 1;
	case 0xd1:
		NEED(3);
		*v = (int16_t)be16(p + 1);
		*pp = p + 3;
		return 1;
	case 0xd2:
		NEED(5);
		*v = (int32_t)be32(p + 1);
		*pp = p + 5;
		return 1;
	case 0xd3:
		NEED(9);
		*v = (int64_t)be64(p + 1);
		*pp = p + 9;
		return 1;
	default:
		return 0;
	}
}

/* Array header: 1 and the count, 0 if not an array, -2 incomplete. */
static inline int read_array(const uint8_t **pp, const uint8_t *end, uint32_t *n)
{
	const uint8_t *p = *pp;
	NEED(1);
	uint8_t c = *p;
	if ((c & 0xf0) == 0x90) {
		*n = c & 0x0f;
		*pp = p + 1;
		return 1;
	}
	if (c == 0xdc) {
		NEED(3);
		*n = be16(p + 1);
		*pp = p + 3;
		return 1;
	}
	if (c == 0xdd) {
		NEED(5);
		*n = be32(p + 1);
		*pp = p + 5;
		return 1;
	}
	return 0;
}

/* Str/bin header: 1 with length and data pointer, 0 if not, -2 incomplete. */
static inline int read_str(const uint8_t **pp, const uint8_t *end, const char **s, uint32_t *n)
{
	const uint8_t *p = *pp;
	size_t hdr;
	NEED(1);
	uint8_t c = *p;
	if ((c & 0xe0) == 0xa0) {
		hdr = 1;
		*n = c & 0x1f;
	} else if (c == 0xd9 || c == 0xc4) {
		NEED(2);
		hdr = 2;
		*n = p[1];
	} else if (c == 0xda || c == 0xc5) {
		NEED(3);
		hdr = 3;
		*n = be16(p + 1);
	} else if (c == 0xdb || c == 0xc6) {
		NEED(5);
		hdr = 5;
		*n = be32(p + 1);
	} else {
		return 0;
	}
	NEED(hdr + *n);
	*s = (const char *)p + hdr;
	*pp = p + hdr + *n;
	return 1;
}

/* Skip any one msgpack value.  0 ok, -1 malformed, -2 incomplete. */
static int skip_value(const uint8_t **pp, const uint8_t *end, int depth)
{
	const uint8_t *p = *pp;
	int64_t iv;
	const char *s;
	uint32_t n;
	int rc;

	if (depth > SKIP_DEPTH_MAX)
		return -1;
	if ((rc = read_int(pp, end, &iv)) != 0)
		return rc == 1 ? 0 : rc;
	if ((rc = read_str(pp, end, &s, &n)) != 0)
		return rc == 1 ? 0 : rc;
	if ((rc = read_array(pp, end, &n)) != 0) {
		if (rc < 0)
			return rc;
		for (uint32_t i = 0; i < n; i++)
			if ((rc = skip_value(pp, end, depth + 1)) != 0)
				return rc;
		return 0;
	}
	NEED(1);
	uint8_t c = *p;
	size_t pairs = 0, fixed = 0;
	switch (c) {
	case 0xc0:
	case 0xc2:
	case 0xc3:
		fixed = 1;
		break;
	case 0xca:
		fixed = 5;
		break;
	case 0xcb:
		fixed = 9;
		break;
	case 0xd4:
		fixed = 3;
		break;
	case 0xd5:
		fixed = 4;
		break;
	case 0xd6:
		fixed = 6;
		break;
	case 0xd7:
		fixed = 10;
		break;
	case 0xd8:
		fixed = 18;
		break;
	case 0xc7:
		NEED(2);
		fixed = 3 + (size_t)p[1];
		break;
	case 0xc8:
		NEED(3);
		fixed = 4 + (size_t)be16(p + 1);
		break;
	case 0xc9:
		NEED(5);
		fixed = 6 + (size_t)be32(p + 1);
		break;
	case 0xde:
		NEED(3);
		pairs = be16(p + 1);
		p += 3;
		break;
	case 0xdf:
		NEED(5);
		pairs = be32(p + 1);
		p += 5;
		break;
	default:
		if ((c & 0xf0) == 0x80) {
			pairs = c & 0x0f;
			p += 1;
			break;
		}
		return -1; /* 0xc1 is never used */
	}
	if (fixed) {
		NEED(fixed);
		*pp = p + fixed;
		return 0;
	}
	*pp = p;
	for (size_t i = 0; i < 2 * pairs; i++)
		if ((rc = skip_value(pp, end, depth + 1)) != 0)
			return rc;
	return 0;
}

/* Decode field i of a record (hot path: ints first). */
static inline int decode_field(const uint8_t **pp, const uint8_t *end, struct dlbn_record *rec,
			       int i)
{
	int64_t iv;
	const char *s;
	uint32_t n;
	int rc;

	if ((rc = read_int(pp, end, &iv)) != 0) {
		if (rc < 0)
			return rc;
		rec->kind[i] = DLBN_V_INT;
		rec->f[i] = iv;
		return 0;
	}
	if ((rc = read_str(pp, end, &s, &n)) != 0) {
		if (rc < 0)
			return rc;
		rec->kind[i] = DLBN_V_STR;
		rec->f[i] = n;
		rec->str[i] = s;
		return 0;
	}
	if (**pp == 0xc0) {
		(*pp)++;
		rec->kind[i] = DLBN_V_NIL;
		rec->f[i] = 0;
		return 0;
	}
	if ((rc = read_array(pp, end, &n)) != 0) {
		if (rc < 0)
			return rc;
		rec->kind[i] = DLBN_V_ARR;
		rec->f[i] = n;
		for (uint32_t k = 0; k < n; k++) {
			if ((rc = read_int(pp, end, &iv)) == 1) {
				if (rec->narr < DLBN_REC_MAX_ARR)
					rec->arr[rec->narr++] = iv;
				continue;
			}
			if (rc < 0)
				return rc;
			if ((rc = skip_value(pp, end, 1)) != 0)
				return rc;
		}
		return 0;
	}
	rec->kind[i] = DLBN_V_OTHER;
	rec->f[i] = 0;
	return skip_value(pp, end, 0);
}

long dlbn_decode_record(const uint8_t *buf, size_t len, struct dlbn_record *rec, int64_t *dt_ns)
{
	return dlbn_decode_record_gap(buf, len, rec, dt_ns, NULL);
}

long dlbn_decode_record_gap(const uint8_t *buf, size_t len, struct dlbn_record *rec, int64_t *dt_ns,
			    const struct dlbn_field_gap *gaps)
{
	const uint8_t *p = buf, *end = buf + len;
	uint32_t n;
	int64_t type;
	int rc;

	if ((rc = read_array(&p, end, &n)) != 1)
		return rc == -2 ? 0 : -1;
	if (n < 2)
		return -1;
	if ((rc = read_int(&p, end, &type)) != 1)
		return rc == -2 ? 0 : -1;
	if ((rc = read_int(&p, end, dt_ns)) != 1)
		return rc == -2 ? 0 : -1;
	if (type < 0 || type > 255)
		return -1;
	rec->type = (int)type;
	rec->narr = 0;
	n -= 2;
	/* Fields from gap.at on are stored gap.width places further on. */
	struct dlbn_field_gap gap = gaps ? gaps[type] : (struct dlbn_field_gap){0, 0};
	if (n < gap.at)
		gap.width = 0;
	uint32_t stored = n + gap.width < DLBN_REC_MAX_FIELDS ? n + gap.width : DLBN_REC_MAX_FIELDS;
	rec->nfields = (int)stored;
	memset(rec->kind, DLBN_V_NONE, sizeof(rec->kind));
	for (uint32_t i = 0; i < n; i++) {
		uint32_t at = i < gap.at ? i : i + gap.width;
		rc = at < stored ? decode_field(&p, end, rec, (int)at) : skip_value(&p, end, 1);
		if (rc != 0)
			return rc == -2 ? 0 : -1;
	}
	return (long)(p - buf);
}
