/*
 * gentrace.c - dlbn-gentrace: synthesise a realistic DataLoader trace
 * (the shape recorded from torch 1.13: docs/DESIGN.md, "How a DataLoader
 * batch travels") for
 * analyzer tests and the analyzer benchmark.
 *
 * The simulation itself is tgsim.c.
 *
 *   dlbn-gentrace -o trace.bin [--records N | --steps N] [--workers W]
 *       [--prefetch F] [--batch-ms X] [--loop-ms Y] [--file-ms Z]
 *       [--epochs E] [--persistent] [--pin] [--no-marks] [--kill-at STEP]
 *       [--extent-size BYTES] [--seed S] [--gpu-ms X] [--rank R --host NAME]
 *       (and see usage())
 */
#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tgsim.h"

static int usage(void)
{
	fprintf(stderr,
		"usage: dlbn-gentrace -o FILE [--records N | --steps N] [--workers W]\n"
		"  [--prefetch F] [--batch-ms X] [--loop-ms Y] [--file-ms Z] [--handoff-ms H]\n"
		"  [--tensors T] [--epochs E] [--persistent] [--pin] [--no-marks]\n"
		"  [--kill-at STEP] [--extent-size BYTES] [--seed S]\n"
		"  [--rank R] [--world-size N] [--local-rank L] [--host NAME]\n"
		"  [--sched] [--worker-runq SHARE] [--main-runq SHARE]\n"
		"  [--gpu-ms X]   (CUDA: an X ms kernel per step, probes at each fetch)\n"
		"  [--cpus N]     (the loader CONFIG's cpus=N: the job's CPU affinity count)\n");
	return 2;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{"output", required_argument, NULL, 'o'},
		{"records", required_argument, NULL, 'r'},
		{"steps", required_argument, NULL, 's'},
		{"workers", required_argument, NULL, 'w'},
		{"prefetch", required_argument, NULL, 'f'},
		{"batch-ms", required_argument, NULL, 'b'},
		{"loop-ms", required_argument, NULL, 'l'},
		{"file-ms", required_argument, NULL, 'F'},
		{"handoff-ms", required_argument, NULL, 'H'},
		{"tensors", required_argument, NULL, 'T'},
		{"epochs", required_argument, NULL, 'e'},
		{"persistent", no_argument, NULL, 'p'},
		{"pin", no_argument, NULL, 'P'},
		{"no-marks", no_argument, NULL, 'n'},
		{"kill-at", required_argument, NULL, 'k'},
		{"extent-size", required_argument, NULL, 'x'},
		{"seed", required_argument, NULL, 'S'},
		{"rank", required_argument, NULL, 'R'},
		{"world-size", required_argument, NULL, 'W'},
		{"local-rank", required_argument, NULL, 'L'},
		{"host", required_argument, NULL, 'h'},
		{"sched", no_argument, NULL, 'c'},
		{"worker-runq", required_argument, NULL, 'q'},
		{"main-runq", required_argument, NULL, 'Q'},
		{"gpu-ms", required_argument, NULL, 'G'},
		{"cpus", required_argument, NULL, 'C'},
		{NULL, 0, NULL, 0},
	};
	struct tgsim_params p;
	const char *out = NULL;
	long long records = -1;
	int ch;

	tgsim_default(&p);
	while ((ch = getopt_long(argc, argv, "o:", opts, NULL)) != -1) {
		switch (ch) {
		case 'o':
			out = optarg;
			break;
		case 'r':
			records = atoll(optarg);
			break;
		case 's':
			p.steps = atoll(optarg);
			break;
		case 'w':
			p.workers = atoi(optarg);
			break;
		case 'f':
			p.prefetch = atoi(optarg);
			break;
		case 'b':
			p.batch_ms = atof(optarg);
			break;
		case 'l':
			p.loop_ms = atof(optarg);
			break;
		case 'F':
			p.file_ms = atof(optarg);
			break;
		case 'H':
			p.handoff_ms = atof(optarg);
			break;
		case 'T':
			p.tensors = atoi(optarg);
			break;
		case 'e':
			p.epochs = atoi(optarg);
			break;
		case 'p':
			p.persistent = 1;
			break;
		case 'P':
			p.pin = 1;
			break;
		case 'n':
			p.marks = 0;
			break;
		case 'k':
			p.kill_at = atoll(optarg);
			break;
		case 'x':
			p.extent_size = (uint32_t)atol(optarg);
			break;
		case 'S':
			p.seed = (unsigned)atoi(optarg);
			break;
		case 'R':
			p.rank = atoi(optarg);
			break;
		case 'W':
			p.world_size = atoi(optarg);
			break;
		case 'L':
			p.local_rank = atoi(optarg);
			break;
		case 'h':
			p.host = optarg;
			break;
		case 'c':
			p.sched = 1;
			break;
		case 'q':
			p.worker_runq = atof(optarg);
			p.sched = 1;
			break;
		case 'Q':
			p.main_runq = atof(optarg);
			p.sched = 1;
			break;
		case 'G':
			p.gpu_ms = atof(optarg);
			break;
		case 'C':
			p.cpus = atoi(optarg);
			break;
		default:
			return usage();
		}
	}
	if (!out || optind != argc)
		return usage();
	if (records > 0) {
		/* Records per step: receive 3 + 5 per tensor, marks 2, index
		 * write 1, worker poll/reads 3 + 4 preads + result write 1,
		 * pin path 2 semaphore records, GPU launch, probe and its done. */
		long long per = 3 + 5 * p.tensors + (p.marks ? 2 : 0) + 1 + 8 + (p.pin ? 2 : 0) +
				(p.gpu_ms > 0 ? 3 : 0);
		p.steps = records / per > 0 ? records / per : 1;
	}
	uint64_t n = 0;
	if (tgsim_write(out, &p, &n) != 0) {
		fprintf(stderr, "dlbn-gentrace: writing %s failed (or bad parameters)\n", out);
		return 1;
	}
	fprintf(stderr, "dlbn-gentrace: %s: %llu records, %lld steps\n", out, (unsigned long long)n,
		p.steps);
	return 0;
}
