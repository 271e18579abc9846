# dlbn Python bootstrap entry point (DESIGN section 3, "Python-level precision").
#
# libdlbn.so prepends this file's directory to PYTHONPATH, so CPython's `site`
# imports this module at start-up.  All the work is in _dlbn_boot; this stub
# only makes sure that a failure of dlbn itself never reaches the host
# program.  _dlbn_boot.start() then runs the sitecustomize this one shadows
# (the user's or the distribution's), exactly once; exceptions raised by
# *that* module propagate to `site` as they would without dlbn.
try:
    import _dlbn_boot
except Exception:
    _dlbn_boot = None

if _dlbn_boot is not None:
    _dlbn_boot.start()
