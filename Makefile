# dlbn - data-loading bottleneck detector.  See README.md.
#
#   make            build build/libdlbn.so and build/dlbn-analyze
#   make demo       build and analyse a bundled example (installs Debian deps)
#   make check      build and run the test suite (installs Debian deps)
#   make bench      hook cost, overhead and analyzer throughput figures
#   make sanitize   the C unit tests and analyzer under ASan/UBSan
#   make lint       layer check, clang-format --dry-run, cppcheck, clang-tidy
#   make install PREFIX=/usr/local [DESTDIR=...]
#   make wheel      dist/dlbn-VERSION-py3-none-manylinux_*.whl and the sdist
#
# Build outputs go to build/ only.

PREFIX ?= /usr/local
CUDA_HOME ?= /usr/local/cuda
# `make check` runs the Python suites on both PyTorch generations unless
# PYTHON is given (tests/run-tests); the other targets use PYTHON.
USER_PYTHON := $(PYTHON)
PYTHON ?= /usr/bin/python3
CC ?= cc
BUILD := build

# `make V=1` shows the full command lines.
ifeq ($(V),1)
Q :=
else
Q := @
endif

# The release: VERSION is its only source (the analyzer, the wheel's metadata).
DLBN_VERSION := $(shell cat VERSION)
CSTD := -std=c11 -D_GNU_SOURCE
WARN := -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes -Wmissing-prototypes
OPT ?= -O2 -g
CFLAGS_COMMON := $(CSTD) $(WARN) $(OPT) -Iinclude -Ilibintercept -I$(CUDA_HOME)/include
MSGPACK_LIBS := -lmsgpackc

# ---- libdlbn.so -----------------------------------------------------------
LIB_SRCS := $(sort $(wildcard libintercept/*.c))
LIB_OBJS := $(LIB_SRCS:%.c=$(BUILD)/%.o)
LIB_CFLAGS := $(CFLAGS_COMMON) -fPIC -fvisibility=hidden -ftls-model=initial-exec \
	-fno-strict-aliasing
LIB_LDFLAGS := -shared -Wl,--version-script=libintercept/exports.map \
	-Wl,-z,now -Wl,-z,relro -Wl,--no-undefined
LIB_LIBS := -ldl -lpthread

# ---- dlbn-analyze ---------------------------------------------------------
# One folder per layer (docs/DESIGN.md, "Analyzer layers"); sources include
# each other's headers by layer/name.h from analyzer/.
ANA_LAYERS := util trace model gpu analysis report export
ANA_SRCS := $(sort $(wildcard analyzer/*.c $(ANA_LAYERS:%=analyzer/%/*.c)))
ANA_HDRS := $(wildcard analyzer/*.h $(ANA_LAYERS:%=analyzer/%/*.h))
ANA_OBJS := $(ANA_SRCS:%.c=$(BUILD)/%.o)
ANA_LIB_OBJS := $(filter-out $(BUILD)/analyzer/main.o,$(ANA_OBJS))
# Link-time optimisation: the reader's decoder, the merge and the model's
# record handlers sit in separate files (one job each), and the calls
# between them cost 10-14% of the analyzer's time (docs/BENCHMARKS.md).
# The objects hold only GCC's intermediate code (nm reads them through the
# linker plugin); the unit tests' links optimise them too.
ANA_LTO := -flto=auto
ANA_CFLAGS := $(CFLAGS_COMMON) $(ANA_LTO) -Ianalyzer -DDLBN_VERSION_STRING='"$(DLBN_VERSION)"'
ANA_LIBS := -lsqlite3 -lm -lpthread

# ---- tests ----------------------------------------------------------------
UNIT_SRCS := $(sort $(wildcard tests/unit/test_*.c))
UNIT_BINS := $(UNIT_SRCS:tests/unit/%.c=$(BUILD)/tests/%)

PY_BOOT := $(addprefix $(BUILD)/dlbn-python/,sitecustomize.py _dlbn_boot.py \
	_dlbn_common.py _dlbn_marks.py _dlbn_compat.py _dlbn_config.py _dlbn_patch.py \
	_dlbn_replay.py _dlbn_settings.py _dlbn_profile.py _dlbn_handoff.py \
	_dlbn_loaders.py _dlbn_threads.py _dlbn_wrappers.py)

.PHONY: all tests-aux deps demo check unit bench eval sanitize lint install wheel wheel-tree clean
all: $(BUILD)/libdlbn.so $(BUILD)/dlbn-analyze $(PY_BOOT) tests-aux

$(BUILD)/%.o: %.c $(wildcard include/dlbn/*.h libintercept/*.h) $(ANA_HDRS)
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  CC      $<")
	$(Q)$(CC) $(if $(filter libintercept/%,$<),$(LIB_CFLAGS),$(ANA_CFLAGS)) -MMD -MP -c $< -o $@

$(BUILD)/analyzer/main.o: VERSION

$(BUILD)/libdlbn.so: $(LIB_OBJS) libintercept/exports.map
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) $(OPT) $(LIB_LDFLAGS) -o $@ $(LIB_OBJS) $(LIB_LIBS)

$(BUILD)/dlbn-analyze: $(ANA_OBJS)
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) $(OPT) $(ANA_LTO) -o $@ $(ANA_OBJS) $(ANA_LIBS)

# Byte-compiled next to the copy: Python processes under the preload would
# otherwise compile the bootstrap at every start-up (~1.4 ms each).
$(BUILD)/dlbn-python/%.py: python/%.py
	@mkdir -p $(dir $@)
	$(Q)cp $< $@
	$(Q)$(PYTHON) -m compileall -q $@ >/dev/null 2>&1 || true

# Test helpers (simulated CUDA driver, C test programs) add their rules here.
-include tests/tests.mk
tests-aux::
	@:

# The unit tests (build/tests/test_*) and their helpers: tests/unit/unit.mk.

# ---- entry points ---------------------------------------------------------
deps:
	@scripts/install-deps

demo: deps all
	@tests/demo/run-demo

check: deps all $(UNIT_BINS)
	@$(if $(USER_PYTHON),PYTHON=$(USER_PYTHON)) tests/run-tests

unit: all $(UNIT_BINS)
	@PYTHON=$(PYTHON) tests/run-tests --unit-only

bench: deps all
	@PYTHON=$(PYTHON) tests/perf/bench/run-bench

# Both PyTorch generations unless PYTHON is given (tests/perf/eval/run-eval).
eval: deps all
	@$(if $(USER_PYTHON),PYTHON=$(USER_PYTHON)) tests/perf/eval/run-eval

sanitize:
	$(MAKE) BUILD=build/san OPT="-O1 -g -fsanitize=address,undefined -fno-omit-frame-pointer" \
		CC=$(CC) build/san/dlbn-analyze $(UNIT_SRCS:tests/unit/%.c=build/san/tests/%)
	@for t in $(UNIT_SRCS:tests/unit/%.c=build/san/tests/%); do $$t || exit 1; done
	@echo "sanitize: unit tests clean under ASan/UBSan"

# Layout (.clang-format), cppcheck, and clang-tidy (.clang-tidy) over the
# library, the analyzer and the C unit tests; the analyzer's includes and
# calls point down its layers, without circles (scripts/check-layers).
LINT_SRCS := include/dlbn/*.h libintercept/*.[ch] $(ANA_SRCS) $(ANA_HDRS) tests/unit/*.[ch]
lint: $(ANA_OBJS)
	scripts/check-layers analyzer $(BUILD)/analyzer
	clang-format --dry-run --Werror $(LINT_SRCS)
	cppcheck --quiet --error-exitcode=1 --enable=warning,performance,portability \
		--suppress=missingIncludeSystem -D_GNU_SOURCE -DDLBN_VERSION_STRING='"$(DLBN_VERSION)"' \
		-Iinclude -Ilibintercept -Ianalyzer \
		libintercept analyzer
	clang-tidy --quiet $(LIB_SRCS) $(ANA_SRCS) -- $(CSTD) -Iinclude -Ilibintercept -Ianalyzer \
		-DDLBN_VERSION_STRING='"$(DLBN_VERSION)"' \
		-I$(CUDA_HOME)/include
	@echo "lint: clean"

# The installed layout; the wheel's native part is the same tree
# (wheel-tree).  INSTALL_ANALYZER, INSTALL_STRIP and INSTALL_PYC are for the
# wheel (pip compiles the bootstrap for the interpreter that installs it).
# dlbn(1) is the pip package's command, which this does not install.
INSTALL_ANALYZER := $(BUILD)/dlbn-analyze
INSTALL_STRIP :=
INSTALL_PYC := yes
install: $(BUILD)/libdlbn.so $(INSTALL_ANALYZER) $(PY_BOOT)
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/lib/dlbn/dlbn-python \
		$(DESTDIR)$(PREFIX)/share/man/man1 $(DESTDIR)$(PREFIX)/share/man/man5 $(DESTDIR)$(PREFIX)/share/man/man7 \
		$(DESTDIR)$(PREFIX)/include/dlbn
	install -m 0755 $(INSTALL_STRIP) $(INSTALL_ANALYZER) $(DESTDIR)$(PREFIX)/bin/dlbn-analyze
	install -m 0755 scripts/dlbn-run scripts/dlbn-preflight $(DESTDIR)$(PREFIX)/bin/
	install -m 0755 $(INSTALL_STRIP) $(BUILD)/libdlbn.so $(DESTDIR)$(PREFIX)/lib/dlbn/
	install -m 0644 $(PY_BOOT) $(DESTDIR)$(PREFIX)/lib/dlbn/dlbn-python/
	$(if $(INSTALL_PYC),$(PYTHON) -m compileall -q $(DESTDIR)$(PREFIX)/lib/dlbn/dlbn-python >/dev/null 2>&1 || true)
	install -m 0644 include/dlbn/dlbn_trace.h $(DESTDIR)$(PREFIX)/include/dlbn/
	install -m 0644 $(filter-out man/dlbn.1,$(wildcard man/*.1)) $(DESTDIR)$(PREFIX)/share/man/man1/
	install -m 0644 man/*.5 $(DESTDIR)$(PREFIX)/share/man/man5/
	install -m 0644 man/*.7 $(DESTDIR)$(PREFIX)/share/man/man7/

# ---- the wheel ------------------------------------------------------------
# `make wheel`: an sdist, a wheel built from it by setup.py (which calls
# wheel-tree in the unpacked sdist), and auditwheel's manylinux tag on it:
# dist/dlbn-VERSION.tar.gz and dist/dlbn-VERSION-py3-none-manylinux_*.whl.
# The tools (build, setuptools, auditwheel) come from .venv (make deps).
WHEEL_PYTHON ?= .venv/bin/python
WHEEL_SRCS := VERSION pyproject.toml setup.py MANIFEST.in Makefile $(LIB_SRCS) \
	$(wildcard include/dlbn/*.h libintercept/*.h libintercept/*.map) $(ANA_HDRS) $(ANA_SRCS) \
	$(wildcard python/*.py python/dlbn/*.py scripts/dlbn-* man/*.[157])

# The analyzer with SQLite inside it: a wheel cannot ask for libsqlite3.
$(BUILD)/static/dlbn-analyze: $(ANA_OBJS)
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) $(OPT) $(ANA_LTO) -o $@ $(ANA_OBJS) -Wl,-Bstatic -lsqlite3 -Wl,-Bdynamic -lm -lpthread -ldl

# The installed layout under DEST, binaries stripped (setup.py).
wheel-tree: $(BUILD)/static/dlbn-analyze
	@test -n "$(DEST)" || { echo "wheel-tree: DEST=dir required" >&2; exit 2; }
	$(Q)$(MAKE) --no-print-directory install PREFIX=$(DEST) DESTDIR= \
		INSTALL_ANALYZER=$(BUILD)/static/dlbn-analyze INSTALL_STRIP=-s INSTALL_PYC= >/dev/null

$(BUILD)/wheel.stamp: $(WHEEL_SRCS)
	@test -x $(WHEEL_PYTHON) || { echo "make wheel: $(WHEEL_PYTHON) missing (make deps)" >&2; exit 1; }
	$(Q)rm -rf $(BUILD)/wheel && mkdir -p $(BUILD)/wheel dist
	$(Q)rm -f dist/dlbn-$(DLBN_VERSION)-*.whl dist/dlbn-$(DLBN_VERSION).tar.gz
	$(Q)$(WHEEL_PYTHON) -m build --no-isolation --outdir $(BUILD)/wheel . >$(BUILD)/wheel/build.log 2>&1 || \
		{ tail -n 40 $(BUILD)/wheel/build.log >&2; exit 1; }
	$(Q)raw=$(BUILD)/wheel/dlbn-$(DLBN_VERSION)-py3-none-linux_x86_64.whl; \
	plat=$$($(WHEEL_PYTHON) -m auditwheel show $$raw | tr '\n' ' ' | \
		sed -n 's/.*consistent with the following *platform tag: *"\([^"]*\)".*/\1/p'); \
	test -n "$$plat" || { $(WHEEL_PYTHON) -m auditwheel show $$raw >&2; exit 1; }; \
	PATH=$(abspath $(dir $(WHEEL_PYTHON))):$$PATH \
		$(WHEEL_PYTHON) -m auditwheel repair --plat $$plat --wheel-dir dist $$raw \
		>>$(BUILD)/wheel/build.log 2>&1 || { tail -n 20 $(BUILD)/wheel/build.log >&2; exit 1; }
	$(Q)cp $(BUILD)/wheel/dlbn-$(DLBN_VERSION).tar.gz dist/
	$(Q)touch $@
	@ls -1 dist/dlbn-$(DLBN_VERSION)*

wheel: $(BUILD)/wheel.stamp

clean:
	rm -rf $(BUILD) dist

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)
