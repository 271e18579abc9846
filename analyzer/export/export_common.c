/*
 * export_common.c - what the SQLite and Perfetto exports share and
 * nothing else uses (export.h): the name of a step's GPU evidence, the
 * clock of their timings, and a record's fields as JSON members.
 */
#include <string.h>
#include <time.h>

#include "export/export.h"
#include "trace/recnames.h"

const char *dlbn_evidence_name(int ev)
{
	switch (ev) {
	case DLBN_GPU_EV_PROBE:
		return "probe";
	case DLBN_GPU_EV_NO_WORK:
		return "no_work";
	case DLBN_GPU_EV_UNKNOWN:
		return "unknown";
	default:
		return NULL;
	}
}

double dlbn_now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void field_json(struct dlbn_buf *b, const struct dlbn_record *r, int i)
{
	switch (r->kind[i]) {
	case DLBN_V_INT: {
		const char *en = dlbn_field_value_name(r->type, i, r->f[i]);
		if (en)
			dlbn_buf_json_str(b, en, strlen(en));
		else
			dlbn_buf_int(b, r->f[i]);
		break;
	}
	case DLBN_V_STR:
		dlbn_buf_json_str(b, r->str[i], (size_t)r->f[i]);
		break;
	case DLBN_V_ARR:
		dlbn_buf_put(b, "[", 1);
		for (int k = 0; k < r->narr; k++) {
			if (k)
				dlbn_buf_put(b, ",", 1);
			dlbn_buf_int(b, r->arr[k]);
		}
		dlbn_buf_put(b, "]", 1);
		break;
	default:
		dlbn_buf_put(b, "null", 4);
	}
}

int dlbn_rec_detail_json(struct dlbn_buf *b, const struct dlbn_record *r, const char *open)
{
	const struct dlbn_rec_layout *l = dlbn_rec_layout(r->type);
	int n = 0;
	for (int i = 0; i < r->nfields; i++) {
		if (i == l->dur || i == l->fd || i == l->fd_kind || i == l->ino || i == l->ret ||
		    r->kind[i] == DLBN_V_NONE)
			continue;
		const char *name = dlbn_field_name(r->type, i);
		dlbn_buf_puts(b, n ? "," : open);
		if (name) {
			dlbn_buf_put(b, "\"", 1);
			dlbn_buf_puts(b, name); /* names are plain identifiers */
			dlbn_buf_put(b, "\":", 2);
		} else {
			dlbn_buf_put(b, "\"f", 2);
			dlbn_buf_int(b, i);
			dlbn_buf_put(b, "\":", 2);
		}
		field_json(b, r, i);
		n++;
	}
	return n;
}
