/*
 * recbuf.c - see recbuf.h.  A growable array sorted once at flush time.
 */
#include "recbuf.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

struct rec {
	int64_t t;
	uint64_t seq;
	int type, nf;
	int64_t f[7];
	const char *str;
};

static struct rec *recs;
static size_t nrec, caprec;

static struct rec *next_slot(int64_t t, int type)
{
	if (nrec == caprec) {
		caprec = caprec ? caprec * 2 : 1024;
		recs = realloc(recs, caprec * sizeof(*recs));
		if (!recs)
			exit(2);
	}
	struct rec *r = &recs[nrec];
	memset(r, 0, sizeof(*r));
	r->t = t;
	r->seq = nrec++;
	r->type = type;
	return r;
}

void recbuf_add(int64_t t, int type, int nf, ...)
{
	struct rec *r = next_slot(t, type);
	va_list ap;
	r->nf = nf > 7 ? 7 : nf;
	va_start(ap, nf);
	for (int i = 0; i < r->nf; i++)
		r->f[i] = va_arg(ap, int64_t);
	va_end(ap);
}

void recbuf_add_str(int64_t t, int type, int64_t f0, int64_t f1, const char *str)
{
	struct rec *r = next_slot(t, type);
	r->nf = 2;
	r->f[0] = f0;
	r->f[1] = f1;
	r->str = str;
}

static int by_time(const void *x, const void *y)
{
	const struct rec *a = x, *b = y;
	if (a->t != b->t)
		return a->t < b->t ? -1 : 1;
	return a->seq < b->seq ? -1 : a->seq > b->seq;
}

int64_t recbuf_flush(struct tg_stream *s, int64_t none)
{
	static const char *const fmts[8] = {"",	    "i",     "ii",     "iii",
					    "iiii", "iiiii", "iiiiii", "iiiiiii"};
	qsort(recs, nrec, sizeof(*recs), by_time);
	for (size_t i = 0; i < nrec; i++) {
		const struct rec *r = &recs[i];
		if (r->str)
			tg_rec(s, r->type, r->t, "iis", r->f[0], r->f[1], r->str);
		else if (r->type == DLBN_REC_MARK && r->nf >= 3) /* 3.x: differences */
			tg_mark_counters(s, r->t, (int)r->f[0], r->f[1], r->f[2], r->f + 3,
					 r->nf - 3);
		else
			tg_rec(s, r->type, r->t, fmts[r->nf], r->f[0], r->f[1], r->f[2], r->f[3],
			       r->f[4], r->f[5], r->f[6]);
	}
	int64_t last = nrec ? recs[nrec - 1].t : none;
	nrec = 0;
	return last;
}

void recbuf_free(void)
{
	free(recs);
	recs = NULL;
	nrec = caprec = 0;
}
