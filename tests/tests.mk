# Included by the Makefile.  Each folder that builds something keeps its
# rules in a .mk file of its own, named after the folder
# (tests/unit/unit.mk, tests/recorder/cuda/cuda.mk,
# tests/support/simcuda/simcuda.mk, ...), and hangs its build products on
# `tests-aux::`.  Tests sit one level deep (unit, e2e) or two (recorder/*,
# perf/*, support/*); build products keep the flat build/tests/<folder>/
# names (build/tests/simcuda/libcuda.so.1, build/tests/cuda/cuda_app).
include $(sort $(wildcard tests/*/*.mk tests/*/*/*.mk))
