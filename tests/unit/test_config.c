/*
 * test_config.c - the bootstrap's CONFIG text (analyzer/trace/config.c):
 * the figures parsed as numbers, the pairs kept, the value look-ups of a
 * parsed CONFIG and of a record's text, and the bounds of each.
 */
#include <string.h>

#include "check.h"
#include "trace/config.h"

static void parse(struct dlbn_config *c, const char *text)
{
	dlbn_config_parse(c, text, strlen(text));
}

static void check_figures(void)
{
	struct dlbn_config c;
	parse(&c, "num_workers=4;batch_size=32;prefetch_factor=2;pin_memory=True;"
		  "persistent_workers=false;start_method=fork;kind=nodes;threads=x;"
		  "cpu_quota=2.5;sampler=RandomSampler;noequals;num_workers=6");
	CHECK(c.present && c.num_workers == 6 && c.batch_size == 32 && c.prefetch_factor == 2,
	      "numbers parsed, a key given twice: its last value (%d workers)", c.num_workers);
	CHECK(c.pin_memory == 1 && c.persistent_workers == 0 && c.threads == -1 && c.cpus == -1 &&
		      c.cpu_quota == 2.5,
	      "truths, a value that is no number, an absent key, a fraction");
	CHECK(!strcmp(c.start_method, "fork") && !strcmp(c.kind, "nodes"),
	      "words kept as they are");
	CHECK(c.n == 11 && !strcmp(c.key[9], "sampler"), "every pair kept but one without '=' (%d)",
	      c.n);
	const char *s = dlbn_config_value(&c, "sampler");
	const char *w = dlbn_config_value(&c, "num_workers");
	CHECK(s && !strcmp(s, "RandomSampler") && w && !strcmp(w, "4") &&
		      !dlbn_config_value(&c, "device") && !dlbn_config_value(&c, "noequals"),
	      "look-up of a parsed CONFIG: its first value, NULL when absent");
	struct dlbn_config none;
	memset(&none, 0, sizeof(none));
	CHECK(!dlbn_config_value(&none, "sampler"), "no CONFIG: no value");
}

static void check_bounds(void)
{
	char text[2048];
	size_t n = (size_t)snprintf(text, sizeof(text), "batch_size=8;workers=");
	while (n < 1500)
		n += (size_t)snprintf(text + n, sizeof(text) - n, "%d,", 10000 + (int)n);
	n += (size_t)snprintf(text + n, sizeof(text) - n, ";loader=77");
	struct dlbn_config c;
	dlbn_config_parse(&c, text, n);
	CHECK(strlen(c.text) == sizeof(c.text) - 1 && c.batch_size == 8 &&
		      strlen(dlbn_config_value(&c, "workers")) == sizeof(c.val[0]) - 1 &&
		      !dlbn_config_value(&c, "loader"),
	      "a long text: cut at %zu bytes, a long value at %zu", sizeof(c.text) - 1,
	      sizeof(c.val[0]) - 1);
	char v[1024] = "untouched";
	CHECK(dlbn_config_text_value(text, n, "loader", v, sizeof(v)) && !strcmp(v, "77"),
	      "look-up of a record's text: past the parsed copy's bound");
	CHECK(dlbn_config_text_value(text, n, "workers", v, 8) && strlen(v) == 7,
	      "a value cut to its buffer");
	strcpy(v, "untouched");
	CHECK(!dlbn_config_text_value(text, n, "worker", v, sizeof(v)) &&
		      !dlbn_config_text_value(text, 12, "workers", v, sizeof(v)) &&
		      !strcmp(v, "untouched"),
	      "a key's prefix or a key past len: absent, buffer untouched");
}

int main(void)
{
	check_figures();
	check_bounds();
	CHECK_EXIT();
}
