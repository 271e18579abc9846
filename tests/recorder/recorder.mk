# Recorder test helpers.  Included from tests/tests.mk:
#     include tests/recorder/recorder.mk
#
#   build/tests/recorder/hookbench   per-hook cost program (hookbench.c)
#   make bench-hooks                 hook cost with vs without libdlbn.so
#   make test-recorder               the recorder's pytest suite
# (test_recorder.py compiles its own C scenarios with cc into a temp dir.)

$(BUILD)/tests/recorder/hookbench: tests/recorder/hookbench.c
	@mkdir -p $(dir $@)
	$(CC) $(CSTD) $(WARN) -O2 -o $@ $< -lpthread

tests-aux:: $(BUILD)/tests/recorder/hookbench

.PHONY: bench-hooks test-recorder
bench-hooks: $(BUILD)/libdlbn.so $(BUILD)/tests/recorder/hookbench
	@tests/recorder/hookbench.sh $(BUILD)/libdlbn.so $(BUILD)/tests/recorder/hookbench

test-recorder: $(BUILD)/libdlbn.so
	DLBN_LIB=$(abspath $(BUILD)/libdlbn.so) $(PYTHON) -m pytest -q tests/recorder
