/*
 * waitstacks.c - keep the stacks of the longest waits and symbolise them
 * (see waitstacks.h).
 *
 * The offset in a STACK record is already an ELF virtual address inside
 * the call instruction (the recorder subtracted one from the return
 * address), so it goes to the symboliser as recorded.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/waitstacks.h"
#include "util/symbolize.h"

struct dlbn_stack_module {
	uint32_t proc_id;
	int64_t id;
	char *path;
};

int dlbn_wait_stacks_init(struct dlbn_wait_stacks *ws, size_t nstreams)
{
	memset(ws, 0, sizeof(*ws));
	ws->last = calloc(nstreams ? nstreams : 1, sizeof(*ws->last));
	ws->nlast = nstreams;
	return ws->last ? 0 : -1;
}

static int add_module(struct dlbn_wait_stacks *ws, const struct dlbn_record *r)
{
	if (r->kind[0] != DLBN_V_INT || r->kind[2] != DLBN_V_STR)
		return 0;
	uint32_t proc = r->stream->proc_id;
	for (size_t i = 0; i < ws->nmods; i++)
		if (ws->mods[i].proc_id == proc && ws->mods[i].id == r->f[0])
			return 0; /* announced again (e.g. by a second thread after fork) */
	if (ws->nmods == ws->capmods) {
		size_t ncap = ws->capmods ? ws->capmods * 2 : 32;
		struct dlbn_stack_module *nm = realloc(ws->mods, ncap * sizeof(*nm));
		if (!nm)
			return -1;
		ws->mods = nm;
		ws->capmods = ncap;
	}
	char *p = strndup(r->str[2], (size_t)r->f[2]);
	if (!p)
		return -1;
	ws->mods[ws->nmods++] = (struct dlbn_stack_module){proc, r->f[0], p};
	return 0;
}

/* Does a stack (preferred, wait_ns) rank below b? */
static int ranks_below(int preferred, int64_t wait_ns, const struct dlbn_wait_stack *b)
{
	if (preferred != b->preferred)
		return preferred < b->preferred;
	return wait_ns < b->wait_ns;
}

/* Index of the kept stack to replace by this one, or -1 to drop it. */
static int slot_for(const struct dlbn_wait_stacks *ws, int preferred, int64_t wait_ns)
{
	if (ws->nkept < DLBN_WAIT_STACKS_KEPT)
		return (int)ws->nkept;
	size_t lowest = 0;
	for (size_t i = 1; i < ws->nkept; i++)
		if (ranks_below(ws->kept[i].preferred, ws->kept[i].wait_ns, &ws->kept[lowest]))
			lowest = i;
	const struct dlbn_wait_stack *low = &ws->kept[lowest];
	int new_ranks_higher = !ranks_below(preferred, wait_ns, low) &&
			       (preferred != low->preferred || wait_ns != low->wait_ns);
	return new_ranks_higher ? (int)lowest : -1;
}

static void add_stack(struct dlbn_wait_stacks *ws, const struct dlbn_record *r, int preferred)
{
	int64_t delta = r->kind[1] == DLBN_V_INT && r->f[1] > 0 ? r->f[1] : 0;
	if (delta > DLBN_DUR_LIMIT)
		delta = DLBN_DUR_LIMIT;
	int64_t begin = r->t_ns - delta, wait_ns = delta;
	const struct dlbn_stack_last_wait *lw =
		r->stream->index < ws->nlast ? &ws->last[r->stream->index] : NULL;
	/* The wait record precedes its STACK in the same stream. */
	if (lw && lw->type == (int)r->f[0] && lw->t == begin)
		wait_ns = lw->dur;
	ws->stacks_seen++;
	int k = slot_for(ws, preferred, wait_ns);
	if (k < 0)
		return;
	struct dlbn_wait_stack *s = &ws->kept[k];
	memset(s, 0, sizeof(*s));
	s->preferred = preferred;
	s->wait_begin = begin;
	s->wait_ns = wait_ns;
	s->wait_type = (int)r->f[0];
	s->proc_id = r->stream->proc_id;
	s->tid = (int)r->stream->tid;
	for (int i = 0; i + 1 < r->narr && s->nframes < DLBN_WAIT_STACK_FRAMES; i += 2) {
		s->module[s->nframes] =
			(int32_t)(r->arr[i] < 0 || r->arr[i] > INT32_MAX ? -1 : r->arr[i]);
		s->offset[s->nframes] = (uint64_t)r->arr[i + 1];
		s->nframes++;
	}
	if ((size_t)k == ws->nkept)
		ws->nkept++;
}

int dlbn_wait_stacks_record(struct dlbn_wait_stacks *ws, const struct dlbn_record *r, int64_t dur,
			    int preferred)
{
	switch (r->type) {
	case DLBN_REC_MODULE:
		return add_module(ws, r);
	case DLBN_REC_STACK:
		if (r->kind[0] == DLBN_V_INT)
			add_stack(ws, r, preferred);
		return 0;
	default:
		if (dur > 0 && r->stream->index < ws->nlast)
			ws->last[r->stream->index] =
				(struct dlbn_stack_last_wait){r->type, r->t_ns, dur};
		return 0;
	}
}

static const char *module_path(const struct dlbn_wait_stacks *ws, uint32_t proc, int32_t id)
{
	for (size_t i = 0; i < ws->nmods; i++)
		if (ws->mods[i].proc_id == proc && ws->mods[i].id == id)
			return ws->mods[i].path;
	return NULL;
}

static int longer_first(const void *x, const void *y)
{
	const struct dlbn_wait_stack *a = x, *b = y;
	if (a->preferred != b->preferred)
		return a->preferred ? -1 : 1;
	return a->wait_ns > b->wait_ns ? -1 : a->wait_ns < b->wait_ns;
}

void dlbn_wait_stacks_finish(struct dlbn_wait_stacks *ws)
{
	if (!ws->nkept)
		return;
	qsort(ws->kept, ws->nkept, sizeof(ws->kept[0]), longer_first);
	struct symbolizer *sym = symbolizer_new();
	for (size_t k = 0; k < ws->nkept; k++) {
		struct dlbn_wait_stack *s = &ws->kept[k];
		for (int i = 0; i < s->nframes; i++) {
			const char *path = module_path(ws, s->proc_id, s->module[i]);
			if (!path) {
				ws->modules_missing++;
				snprintf(s->frame[i], DLBN_WAIT_STACK_FRAME_LEN,
					 "0x%llx (module #%d, not announced)",
					 (unsigned long long)s->offset[i], (int)s->module[i]);
			} else if (sym) {
				symbolize(sym, path, s->offset[i], s->frame[i],
					  DLBN_WAIT_STACK_FRAME_LEN);
			} else {
				snprintf(s->frame[i], DLBN_WAIT_STACK_FRAME_LEN, "0x%llx (%s)",
					 (unsigned long long)s->offset[i], path);
			}
		}
	}
	symbolizer_free(sym);
}

void dlbn_wait_stacks_free(struct dlbn_wait_stacks *ws)
{
	for (size_t i = 0; i < ws->nmods; i++)
		free(ws->mods[i].path);
	free(ws->mods);
	free(ws->last);
	memset(ws, 0, sizeof(*ws));
}

const char *dlbn_wait_call_name(int wait_type)
{
	switch (wait_type) {
	case DLBN_REC_MARK:
		return "fetch (DataLoader __next__)";
	case DLBN_REC_POLL:
		return "poll";
	case DLBN_REC_READ:
		return "read";
	case DLBN_REC_RECVMSG:
		return "recvmsg";
	case DLBN_REC_SEM_WAIT:
		return "sem_wait";
	default: {
		const char *n = dlbn_record_name(wait_type);
		return n ? n : "?";
	}
	}
}
