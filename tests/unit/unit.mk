# tests/unit/unit.mk - rules for the C unit tests' helpers (included by
# tests/tests.mk).  Unit tests link the trace writer (tracegen) and the
# synthetic DataLoader run (tgsim); dlbn-gentrace is their command line
# (synthetic traces for tests and the analyzer benchmark).

UNIT_CFLAGS = $(ANA_CFLAGS) -Itests/unit
UNIT_HDRS = $(wildcard tests/unit/*.h) $(wildcard analyzer/*.h) libintercept/dlbn_trace.h
UNIT_HELPERS = $(BUILD)/tests/tracegen.o $(BUILD)/tests/tgsim.o

$(UNIT_HELPERS): $(BUILD)/tests/%.o: tests/unit/%.c $(UNIT_HDRS)
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  CC      $<")
	$(Q)$(CC) $(UNIT_CFLAGS) -c $< -o $@

# More specific than the Makefile's $(BUILD)/tests/% rule, so it wins.
$(BUILD)/tests/test_%: tests/unit/test_%.c $(UNIT_HELPERS) $(ANA_LIB_OBJS) $(UNIT_HDRS)
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  CCLD    $@")
	$(Q)$(CC) $(UNIT_CFLAGS) -o $@ $< $(UNIT_HELPERS) $(ANA_LIB_OBJS) $(ANA_LIBS)

$(BUILD)/tests/dlbn-gentrace: tests/unit/gentrace.c $(UNIT_HELPERS) $(UNIT_HDRS)
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  CCLD    $@")
	$(Q)$(CC) $(UNIT_CFLAGS) -o $@ $< $(UNIT_HELPERS) $(MSGPACK_LIBS)

tests-aux:: $(BUILD)/tests/dlbn-gentrace
