/*
 * baseline.c - `dlbn-analyze REAL --baseline REPLAY`: the measured speedup
 * of a Replay run next to the predicted one, and whether the two runs did
 * equivalent work (see baseline.h for the rules).
 */
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/baseline.h"
#include "gpu/gpu.h"
#include "trace/reader.h"
#include "util/lines.h"

static void note(struct dlbn_baseline *b, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static void note(struct dlbn_baseline *b, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	b->nnotes += dlbn_lines_vadd(DLBN_LINES(b->notes), b->nnotes, fmt, ap);
	va_end(ap);
}

static int replay_batches_of(const struct dlbn_config *c)
{
	const char *v = dlbn_config_value(c, "replay");
	char *end;
	long n;
	if (!v || !*v)
		return -1;
	n = strtol(v, &end, 10);
	return *end || n < 0 || n > 1000000000 ? -1 : (int)n;
}

/* Keys that legitimately differ between a Real and its Replay run. */
static int config_key_ignored(const char *key)
{
	return !strcmp(key, "replay") || !strcmp(key, "loader") || !strcmp(key, "workers") ||
	       !strcmp(key, "wrapper_replay");
}

/* 1 when every compared key has the same value in both (absent = ""). */
static int compare_one_way(struct dlbn_baseline *b, const struct dlbn_config *x,
			   const struct dlbn_config *y, int x_is_real)
{
	int same = 1;
	for (int i = 0; i < x->n; i++) {
		const char *other;
		if (config_key_ignored(x->key[i]))
			continue;
		other = dlbn_config_value(y, x->key[i]);
		if (other && !strcmp(other, x->val[i]))
			continue;
		if (!x_is_real && other)
			continue; /* differing values were reported from the Real side */
		note(b, "loader configuration differs: %s=%s in the real run, %s in the replay run",
		     x->key[i], x_is_real ? x->val[i] : (other ? other : "absent"),
		     x_is_real ? (other ? other : "absent") : x->val[i]);
		same = 0;
	}
	return same;
}

static int compare_configs(struct dlbn_baseline *b, const struct dlbn_model *real_m,
			   const struct dlbn_model *replay_m)
{
	const struct dlbn_config *x = &real_m->config, *y = &replay_m->config;
	if (!x->present || !y->present) {
		note(b, "loader configuration not compared: no CONFIG record in the %s trace",
		     !x->present ? "real" : "replay");
		return 1;
	}
	int same = compare_one_way(b, x, y, 1);
	return compare_one_way(b, y, x, 0) && same;
}

/* Mean IPC message bytes over the first k hand-offs that carried bytes
 * (the model keeps the first DLBN_HEAD_STEPS of them). */
static double mean_bytes(const struct dlbn_model *m, size_t k, size_t *used)
{
	double sum = 0;
	size_t n = m->nipc_head < k ? m->nipc_head : k;
	for (size_t i = 0; i < n; i++)
		sum += (double)m->ipc_head_bytes[i];
	*used = n;
	return n ? sum / (double)n : 0;
}

/*
 * Batch bytes: the Replay run received only the batches it cached, so
 * compare those with the Real run's first as many.
 */
static int compare_bytes(struct dlbn_baseline *b, const struct dlbn_model *real_m,
			 const struct dlbn_model *replay_m)
{
	size_t k = replay_m->nipc_head, nreal, nreplay;
	if (real_m->config.dali_proxy == 1) {
		/* its workers send DALI requests (sample paths), the batches are
		 * made by the DALI server in the training process */
		note(b, "batch bytes not compared: DALI's proxy DataLoader, whose workers send "
			"requests, not batches");
		return 1;
	}
	if (b->replay_batches > 0 && (size_t)b->replay_batches < k)
		k = (size_t)b->replay_batches;
	double replay_bytes = mean_bytes(replay_m, k, &nreplay);
	double real_bytes = mean_bytes(real_m, nreplay ? nreplay : 1, &nreal);
	if (!nreplay || !nreal) {
		note(b, "batch bytes not compared: no batch hand-off seen in the %s run",
		     !nreplay ? "replay" : "real");
		return 1;
	}
	double rel = fabs(replay_bytes / real_bytes - 1.0);
	if (rel <= DLBN_BASELINE_BYTES_TOLERANCE)
		return 1;
	note(b,
	     "batch bytes differ: %.0f per batch in the real run, %.0f in the replay run "
	     "(first %zu batches)",
	     real_bytes, replay_bytes, nreal);
	return 0;
}

static int compare_work(struct dlbn_baseline *b, const struct dlbn_model *real_m,
			const struct dlbn_model *replay_m)
{
	int same = 1;
	int real_replay = replay_batches_of(&real_m->config);
	if (b->replay_batches < 1) {
		note(b,
		     "%s is not a Replay run (its loader configuration has no replay=N); "
		     "record one with dlbn-run --replay N",
		     b->path);
		same = 0;
	}
	if (real_replay >= 1) {
		note(b, "the analysed trace is itself a Replay run (replay=%d)", real_replay);
		same = 0;
	}
	if (real_m->view != replay_m->view) {
		note(b, "the replay trace has no steps in the %s view of the real one",
		     dlbn_view_name(real_m->view));
		same = 0;
	}
	if (b->real_steps != b->replay_steps) {
		note(b, "step counts differ: %zu in the real run, %zu in the replay run",
		     b->real_steps, b->replay_steps);
		same = 0;
	}
	if (b->real_epochs != b->replay_epochs) {
		note(b, "epochs differ: %d in the real run, %d in the replay run", b->real_epochs,
		     b->replay_epochs);
		same = 0;
	}
	same = compare_configs(b, real_m, replay_m) && same;
	return compare_bytes(b, real_m, replay_m) && same;
}

struct step_ends {
	size_t first, last;
	int64_t first_end, last_end;
	int found;
};

/*
 * When step `index` was complete: its batch in hand, and the GPU done with
 * the work queued before its wait (the drain probes).  A loop that does not
 * synchronise runs ahead of the GPU on cached batches; host step ends alone
 * would then time Python, not training.
 */
static void step_ends_sink(void *ctx, size_t index, const struct dlbn_step *s,
			   const struct dlbn_gpu_step *gs)
{
	struct step_ends *e = ctx;
	int64_t t = s->end;
	if (gs && gs->gpu_done > t)
		t = gs->gpu_done;
	if (index == e->first) {
		e->first_end = t;
		e->found |= 1;
	}
	if (index == e->last) {
		e->last_end = t;
		e->found |= 2;
	}
}

/*
 * Wall clock from step `first` to step `last`, each taken when it was
 * complete (step_ends_sink).  Without GPU work the model keeps the ends of
 * its last warm-up step and of its last step; any other step, and every
 * step of a GPU run, is found by reading the trace again.  -1 when unknown.
 */
static double span_s(const struct dlbn_model *m, struct dlbn_reader *r, size_t first, size_t last)
{
	const struct dlbn_steps *st = m->steps;
	struct step_ends e = {first, last, 0, 0, 0};
	int host_only = !m->gpu.present; /* else each end needs its GPU side */
	if (host_only && st->w.warmup && first == st->w.warmup - 1) {
		e.first_end = st->w.ws;
		e.found |= 1;
	}
	if (host_only && st->n && last == st->n - 1) {
		e.last_end = st->w.last_end;
		e.found |= 2;
	}
	if (e.found != 3 && r && dlbn_model_each_step(m, r, step_ends_sink, &e) != 0)
		return -1;
	return e.found == 3 ? (double)(e.last_end - e.first_end) / 1e9 : -1;
}

static void measure(struct dlbn_baseline *b, struct dlbn_reader *real_r,
		    const struct dlbn_model *real_m, const struct dlbn_analysis *real_a,
		    struct dlbn_reader *replay_r, const struct dlbn_model *replay_m)
{
	const struct dlbn_steps *rs = real_m->steps, *ps = replay_m->steps;
	size_t common = b->real_steps < b->replay_steps ? b->real_steps : b->replay_steps;
	if (!rs || !ps || !real_a->steps_window || !real_a->steps_warmup) {
		note(b, "no measured speedup: the real trace has no steady-state window");
		return;
	}
	b->first_step = real_a->steps_warmup - 1;
	b->last_step = real_a->steps_warmup + real_a->steps_window - 1;
	if (b->last_step >= common)
		b->last_step = common ? common - 1 : 0;
	if (b->last_step <= b->first_step) {
		note(b,
		     "no measured speedup: the replay run has %zu steps, the real run's "
		     "window starts after step %zu",
		     b->replay_steps, b->first_step);
		return;
	}
	b->real_wall_s = span_s(real_m, real_r, b->first_step, b->last_step);
	b->replay_wall_s = span_s(replay_m, replay_r, b->first_step, b->last_step);
	if (!(b->replay_wall_s > 0) || !(b->real_wall_s > 0)) {
		note(b, "no measured speedup: empty interval over steps %zu..%zu", b->first_step,
		     b->last_step);
		return;
	}
	b->measured_speedup = b->real_wall_s / b->replay_wall_s;
	if (b->predicted_speedup > 0) {
		b->error_pct = (b->predicted_speedup / b->measured_speedup - 1.0) * 100.0;
		b->has_error = 1;
	}
}

/*
 * dlbn-run's Replay caches the DataLoader's batches: a wrapper iterable
 * between the loader and the loop (outside.h) still runs in it, as its
 * hand-offs show.  The prediction counts the wrapper's work as removed (as
 * a Replay of what the loop iterates, or DALI's LoaderEvaluator, removes
 * it), so this Replay is compared with the prediction that keeps what the
 * wrapper costs in the Replay run itself: its own GPU-idle wrapper time
 * (the Real run's is longer, its wrapper sharing the cores with the
 * workers), per window step, at most the Real run's charge.
 */
static void kept_wrapper(struct dlbn_baseline *b, const struct dlbn_analysis *real_a,
			 const struct dlbn_analysis *replay_a)
{
	double wrap = real_a->outside.charged_wrap_s;
	if (!replay_a || !replay_a->outside.wrapped || !replay_a->steps_window || !(wrap > 0) ||
	    !(real_a->wall_s > 0))
		return;
	double kept = replay_a->outside.charged_wrap_s * (double)real_a->steps_window /
		      (double)replay_a->steps_window;
	if (kept > wrap)
		kept = wrap;
	double rest = real_a->wall_s - real_a->stall_s + kept;
	if (!(rest > 1e-9))
		return;
	b->predicted_speedup = real_a->wall_s / rest;
	note(b,
	     "the replay run kept the wrapper iterator's work on each batch (it caches the "
	     "DataLoader's batches, under the wrapper; %.3f s of GPU idle time in it): compared "
	     "with the prediction that keeps it, %.2f (%.2f without it, as a Replay of what the "
	     "loop iterates removes it)",
	     kept, b->predicted_speedup, real_a->predicted_speedup);
}

/* The Replay trace's own prediction, less the wrapper's work it kept (that
 * is not loading left in it: see kept_wrapper). */
static double replay_loading_speedup(const struct dlbn_analysis *a)
{
	double wrap = a->outside.charged_wrap_s, rest = a->wall_s - (a->stall_s - wrap);
	if (!(wrap > 0) || !(a->wall_s > 0) || !(rest > 1e-9))
		return a->predicted_speedup;
	return a->wall_s / rest;
}

void dlbn_baseline_compare(struct dlbn_baseline *b, const char *replay_path,
			   struct dlbn_reader *real_r, const struct dlbn_model *real_m,
			   const struct dlbn_analysis *real_a, struct dlbn_reader *replay_r,
			   const struct dlbn_model *replay_m, const struct dlbn_analysis *replay_a)
{
	memset(b, 0, sizeof(*b));
	b->path = replay_path;
	b->replay_batches = replay_batches_of(&replay_m->config);
	b->real_steps = real_m->steps ? real_m->steps->n : 0;
	b->replay_steps = replay_m->steps ? replay_m->steps->n : 0;
	b->real_epochs = real_m->steps ? real_m->steps->epochs : 0;
	b->replay_epochs = replay_m->steps ? replay_m->steps->epochs : 0;
	b->predicted_speedup = real_a->predicted_speedup;
	b->replay_own_speedup = replay_a ? replay_loading_speedup(replay_a) : 0;
	const char *wrapper = dlbn_config_value(&replay_m->config, "wrapper_replay");
	if (wrapper && *wrapper)
		note(b,
		     "the replay run cached what the loop iterates: the items %s yields (a "
		     "wrapper iterable around the DataLoader)",
		     wrapper);
	kept_wrapper(b, real_a, replay_a);
	b->equivalent = compare_work(b, real_m, replay_m);
	measure(b, real_r, real_m, real_a, replay_r, replay_m);
	if (b->replay_own_speedup > DLBN_POTENTIAL_ABOVE)
		note(b,
		     "the replay run itself still waited for batches (its own predicted "
		     "speedup %.2f): its measured time includes loading",
		     b->replay_own_speedup);
}

int dlbn_baseline_load(struct dlbn_baseline *b, const char *path, const struct dlbn_model_opts *mo,
		       const struct dlbn_verdict_opts *vo, struct dlbn_reader *real_r,
		       const struct dlbn_model *real_m, const struct dlbn_analysis *real_a,
		       char *err, size_t errlen)
{
	struct dlbn_model_opts opts = *mo;
	struct dlbn_model *m;
	struct dlbn_analysis a;
	int rc = 0;

	struct dlbn_reader *r = dlbn_reader_open(path, err, errlen);
	if (!r)
		return -1;
	if (!(m = malloc(sizeof(*m)))) {
		dlbn_reader_close(r);
		return -2;
	}
	if (real_m->view != DLBN_VIEW_NONE)
		opts.force_view = real_m->view;
	if (real_m->loaders.train >= 0)
		opts.force_train = (int)real_m->loaders.train + 1;
	memset(&a, 0, sizeof(a));
	/* As dlbn-analyze does the Real trace: the model with its GPU split,
	 * then the analysis that reads them. */
	if (dlbn_model_build(m, r, &opts) != 0 ||
	    dlbn_analyze_gpu(m, dlbn_reader_stats(r), vo, &m->gpu, &a) != 0) {
		rc = -2;
	} else {
		const struct dlbn_reader_stats *rs = dlbn_reader_stats(r);
		dlbn_baseline_compare(b, path, real_r, real_m, real_a, r, m, &a);
		if (dlbn_reader_damaged(rs))
			note(b,
			     "the replay trace is damaged or cut short; it was compared as far as "
			     "it is intact");
	}
	dlbn_analysis_free(&a); /* zeroed above: safe when never filled */
	dlbn_model_free(m);
	free(m);
	dlbn_reader_close(r);
	return rc;
}
