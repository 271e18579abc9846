"""loader_evaluator.py - DALI's LoaderEvaluator on either PyTorch generation.

    import loader_evaluator
    cls, origin = loader_evaluator.loader_evaluator()
    evaluator = cls(loader, mode="log")          # or mode="replay", num_cached_batches=N
    # or simply: loader_evaluator.LoaderEvaluator (loaded on first use)

The reference method (docs/DESIGN.md, "Replay and ground truth") is DALI's LoaderEvaluator,
nvidia.dali.plugin.pytorch.loader_evaluator.LoaderEvaluator (PyPI package
nvidia-dali-cuda130, pinned in .venv/).  Its module file, loader.py, imports
only json, time, collections, typing and torch.utils.data, so it runs
unchanged under Debian's python3 with torch 1.13, where DALI does not
install.  This helper finds that file and loads it on its own with importlib
(the file only: DALI's package __init__, its native backend and libcuda are
never imported), from
  1. the interpreter's own DALI, when one is on sys.path;
  2. the checkout's .venv/lib/python3*/site-packages/ (ROOT/.venv);
  3. $DLBN_LOADER_EVALUATOR, a path to loader.py, when set (checked first).
Nothing is copied: the class is DALI's code as shipped.  origin is a line for
a run's record saying which file was loaded.  ImportError when none is found.
"""

import glob
import importlib.util
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
REL = os.path.join("nvidia", "dali", "plugin", "pytorch", "loader_evaluator", "loader.py")
MODULE_NAME = "dlbn_dali_loader_evaluator"

_loaded = None  # (cls, origin) once loaded


def candidates():
    """loader.py files to try, best first."""
    env = os.environ.get("DLBN_LOADER_EVALUATOR")
    if env:
        yield env
    for entry in sys.path:
        if entry and os.path.isdir(entry):
            yield os.path.join(entry, REL)
    for path in sorted(glob.glob(os.path.join(ROOT, ".venv", "lib", "python3*",
                                              "site-packages", REL))):
        yield path


def loader_evaluator():
    """(LoaderEvaluator class, origin line)."""
    global _loaded
    if _loaded is not None:
        return _loaded
    tried = []
    for path in candidates():
        if not os.path.isfile(path):
            tried.append(path)
            continue
        spec = importlib.util.spec_from_file_location(MODULE_NAME, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[MODULE_NAME] = module  # so that cls.__module__ resolves
        try:
            spec.loader.exec_module(module)
        except Exception:
            sys.modules.pop(MODULE_NAME, None)
            raise
        _loaded = (module.LoaderEvaluator, "%s (loaded standalone)" % path)
        return _loaded
    raise ImportError("DALI's LoaderEvaluator (%s) not found; tried: %s"
                      % (REL, ", ".join(tried[:6]) or "nothing"))


def __getattr__(name):
    if name == "LoaderEvaluator":
        return loader_evaluator()[0]
    raise AttributeError("module %r has no attribute %r" % (__name__, name))


if __name__ == "__main__":
    print(loader_evaluator()[1])
