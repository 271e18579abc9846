# tests/unit/unit.mk - rules for the C unit tests (included by
# tests/tests.mk).  Each tests/unit/test_*.c is one test program linked with
# the analyzer's objects and the helpers (the trace writer tracegen, the
# synthetic DataLoader run tgsim, the record buffer recbuf); dlbn-gentrace
# is the helpers' command line (synthetic traces for the benchmark).

UNIT_CFLAGS = $(ANA_CFLAGS) -Itests/unit
UNIT_HDRS = $(wildcard tests/unit/*.h) $(ANA_HDRS) $(wildcard include/dlbn/*.h)
# Every tests/unit/*.c that is neither a test nor gentrace's main.
UNIT_HELPERS = $(patsubst tests/unit/%.c,$(BUILD)/tests/%.o,\
	$(filter-out tests/unit/test_%.c tests/unit/gentrace.c,$(wildcard tests/unit/*.c)))

$(UNIT_HELPERS): $(BUILD)/tests/%.o: tests/unit/%.c $(UNIT_HDRS)
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  CC      $<")
	$(Q)$(CC) $(UNIT_CFLAGS) -c $< -o $@

$(BUILD)/tests/test_%: tests/unit/test_%.c $(UNIT_HELPERS) $(ANA_LIB_OBJS) $(UNIT_HDRS)
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  CCLD    $@")
	$(Q)$(CC) $(UNIT_CFLAGS) -o $@ $< $(UNIT_HELPERS) $(ANA_LIB_OBJS) $(ANA_LIBS) $(MSGPACK_LIBS)

$(BUILD)/tests/dlbn-gentrace: tests/unit/gentrace.c $(UNIT_HELPERS) $(UNIT_HDRS)
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  CCLD    $@")
	$(Q)$(CC) $(UNIT_CFLAGS) -o $@ $< $(UNIT_HELPERS) $(MSGPACK_LIBS) -lm

tests-aux:: $(BUILD)/tests/dlbn-gentrace
