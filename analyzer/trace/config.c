/*
 * config.c - the bootstrap's CONFIG text (see config.h).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trace/config.h"

/* A small non-negative config number; -1 when not a number. */
static int config_int(const char *v)
{
	char *end;
	if (*v < '0' || *v > '9')
		return -1;
	long n = strtol(v, &end, 10);
	return n > 1000000 ? 1000000 : (int)n;
}

/* The figure pair k=v names, if it is one the analysis reads. */
static void config_figure(struct dlbn_config *c, const char *k, const char *v)
{
	int truth = !strcmp(v, "True") || !strcmp(v, "true") || !strcmp(v, "1");
	if (!strcmp(k, "num_workers"))
		c->num_workers = config_int(v);
	else if (!strcmp(k, "prefetch_factor"))
		c->prefetch_factor = config_int(v);
	else if (!strcmp(k, "batch_size"))
		c->batch_size = config_int(v);
	else if (!strcmp(k, "pin_memory"))
		c->pin_memory = truth;
	else if (!strcmp(k, "persistent_workers"))
		c->persistent_workers = truth;
	else if (!strcmp(k, "start_method"))
		snprintf(c->start_method, sizeof(c->start_method), "%s", v);
	else if (!strcmp(k, "dataset_kind"))
		snprintf(c->dataset_kind, sizeof(c->dataset_kind), "%s", v);
	else if (!strcmp(k, "kind"))
		snprintf(c->kind, sizeof(c->kind), "%s", v);
	else if (!strcmp(k, "worker_method"))
		snprintf(c->worker_method, sizeof(c->worker_method), "%s", v);
	else if (!strcmp(k, "threads"))
		c->threads = config_int(v);
	else if (!strcmp(k, "cpus"))
		c->cpus = config_int(v);
	else if (!strcmp(k, "intraop_threads"))
		c->intraop_threads = config_int(v);
	else if (!strcmp(k, "cpu_quota"))
		c->cpu_quota = strtod(v, NULL) > 0 ? strtod(v, NULL) : 0;
	else if (!strcmp(k, "dali_proxy"))
		c->dali_proxy = config_int(v);
	else if (!strcmp(k, "batches"))
		c->epoch_batches = config_int(v);
}

void dlbn_config_parse(struct dlbn_config *c, const char *text, size_t len)
{
	memset(c, 0, sizeof(*c));
	c->present = 1;
	c->num_workers = c->prefetch_factor = c->batch_size = -1;
	c->pin_memory = c->persistent_workers = c->threads = c->cpus = c->dali_proxy = -1;
	c->intraop_threads = c->epoch_batches = -1;
	if (len >= sizeof(c->text))
		len = sizeof(c->text) - 1;
	memcpy(c->text, text, len);
	c->text[len] = 0;
	char *save = NULL;
	char buf[sizeof(c->text)];
	memcpy(buf, c->text, len + 1);
	for (char *tok = strtok_r(buf, ";", &save); tok && c->n < DLBN_CONFIG_MAX;
	     tok = strtok_r(NULL, ";", &save)) {
		char *eq = strchr(tok, '=');
		if (!eq)
			continue;
		*eq = 0;
		snprintf(c->key[c->n], sizeof(c->key[0]), "%s", tok);
		snprintf(c->val[c->n], sizeof(c->val[0]), "%s", eq + 1);
		config_figure(c, c->key[c->n], c->val[c->n]);
		c->n++;
	}
}

const char *dlbn_config_value(const struct dlbn_config *c, const char *key)
{
	if (!c->present)
		return NULL;
	for (int i = 0; i < c->n; i++)
		if (!strcmp(c->key[i], key))
			return c->val[i];
	return NULL;
}

int dlbn_config_text_value(const char *text, size_t len, const char *key, char *buf, size_t bufsz)
{
	size_t klen = strlen(key);
	for (size_t i = 0; i < len;) {
		size_t end = i;
		while (end < len && text[end] != ';')
			end++;
		if (end - i > klen && !memcmp(text + i, key, klen) && text[i + klen] == '=') {
			size_t n = end - i - klen - 1;
			if (n >= bufsz)
				n = bufsz - 1;
			memcpy(buf, text + i + klen + 1, n);
			buf[n] = 0;
			return 1;
		}
		i = end + 1;
	}
	return 0;
}
