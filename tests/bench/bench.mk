# tests/bench: programs for `make bench` (tests/bench/run-bench).  Included by
# tests/tests.mk.
#
#   build/tests/bench/hookcost   ns per hooked call (hookcost.c)

BENCH_T := $(BUILD)/tests/bench

tests-aux:: $(BENCH_T)/hookcost

$(BENCH_T)/hookcost: tests/bench/hookcost.c
	@mkdir -p $(dir $@)
	$(CC) -std=c11 -D_GNU_SOURCE $(WARN) -O2 -g -I$(CUDA_HOME)/include -o $@ $< -ldl
