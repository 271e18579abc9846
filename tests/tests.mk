# Included by the Makefile.  Each test area keeps its own rules in
# tests/<area>/<area>.mk and hangs its build products on `tests-aux::`.
include $(sort $(wildcard tests/*/*.mk))
