# tests/perf/bench: programs for `make bench` (tests/perf/bench/run-bench).
# Included by tests/tests.mk.
#
#   build/tests/bench/hookcost   ns per hooked call (hookcost.c)
#   build/tests/bench/peakrss    peak RSS and CPU time of a command (peakrss.c)

BENCH_T := $(BUILD)/tests/bench

tests-aux:: $(BENCH_T)/hookcost $(BENCH_T)/peakrss

$(BENCH_T)/hookcost: tests/perf/bench/hookcost.c
	@mkdir -p $(dir $@)
	$(CC) -std=c11 -D_GNU_SOURCE $(WARN) -O2 -g -I$(CUDA_HOME)/include -o $@ $< -ldl

$(BENCH_T)/peakrss: tests/perf/bench/peakrss.c
	@mkdir -p $(dir $@)
	$(CC) -std=c11 -D_GNU_SOURCE $(WARN) -O2 -g -o $@ $<
