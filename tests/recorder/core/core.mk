# tests/recorder/core: the recorder core's test helpers.  Included by
# tests/tests.mk.
#
#   build/tests/recorder/hookbench   per-hook cost program (hookbench.c)
#   make bench-hooks                 hook cost with vs without libdlbn.so
#   make test-recorder               the recorder core's pytest suite
#                                    (test_recorder.py)
# (test_recorder.py compiles its own C scenarios with cc into a temp dir.)

$(BUILD)/tests/recorder/hookbench: tests/recorder/core/hookbench.c
	@mkdir -p $(dir $@)
	$(CC) $(CSTD) $(WARN) -O2 -o $@ $< -lpthread

tests-aux:: $(BUILD)/tests/recorder/hookbench

.PHONY: bench-hooks test-recorder
bench-hooks: $(BUILD)/libdlbn.so $(BUILD)/tests/recorder/hookbench
	@tests/recorder/core/hookbench.sh $(BUILD)/libdlbn.so $(BUILD)/tests/recorder/hookbench

test-recorder: $(BUILD)/libdlbn.so
	DLBN_LIB=$(abspath $(BUILD)/libdlbn.so) $(PYTHON) -m pytest -q tests/recorder/core
