"""Builds the native part of the dlbn wheel with the Makefile.

Everything else is declared in pyproject.toml.  The recorder (libdlbn.so),
the analyzer (SQLite linked in), the scripts, the Python bootstrap and the
trace-format header go into the package as the installed layout of `make
install` under dlbn/_native/ (`make wheel-tree`), so that
dlbn-run finds libdlbn.so and dlbn-analyze beside itself as it does in
PREFIX; the man pages are data files.  The wheel is tagged py3-none-<platform>: no Python extension, any
CPython 3, native code for one platform; `make wheel` gives it its
manylinux tag with auditwheel.
"""

import glob
import os
import shutil
import subprocess

from setuptools import setup
from setuptools.command.bdist_wheel import bdist_wheel
from setuptools.command.build_py import build_py
from setuptools.dist import Distribution

HERE = os.path.dirname(os.path.abspath(__file__))


class BuildWithNative(build_py):
    """build_py, then the Makefile's installed layout into the package."""

    def run(self):
        super().run()
        dest = os.path.join(os.path.abspath(self.build_lib), "dlbn", "_native")
        shutil.rmtree(dest, ignore_errors=True)
        jobs = str(os.cpu_count() or 1)
        subprocess.check_call(["make", "-C", HERE, "-j" + jobs, "wheel-tree", "DEST=" + dest])
        # The man pages are the wheel's data files (PREFIX/share/man, where
        # man(1) looks beside the environment's bin/), not package data.
        shutil.rmtree(os.path.join(dest, "share"))


class PlatformWheel(bdist_wheel):
    """py3-none-<platform>: native programs, no extension module."""

    def finalize_options(self):
        super().finalize_options()
        self.root_is_pure = False

    def get_tag(self):
        _, _, platform = super().get_tag()
        return "py3", "none", platform


class NativeDistribution(Distribution):
    def has_ext_modules(self):
        return True


def man_pages(section):
    return ("share/man/man" + section, sorted(glob.glob("man/*." + section)))


setup(
    distclass=NativeDistribution,
    cmdclass={"build_py": BuildWithNative, "bdist_wheel": PlatformWheel},
    # Also where `man` looks beside the environment's bin/ (PREFIX/share/man).
    data_files=[man_pages("1"), man_pages("5"), man_pages("7")],
)
