"""dlbn Python bootstrap, start-up half (DESIGN section 3, Python precision).

libdlbn.so prepends this directory to PYTHONPATH (unless DLBN_PYTHON=0), so
CPython's `site` imports this module at start-up.  It must cost nothing
measurable there, so it only
  1. takes dlbn's directory back out of sys.path (the environment keeps it,
     so child interpreters - spawn/forkserver workers - bootstrap too);
  2. puts a meta-path finder in front that answers for exactly one module,
     torch.utils.data.dataloader: when torch imports it, the finder loads
     _dlbn_boot (from this directory) to wrap the DataLoader iterator;
  3. runs the sitecustomize this one shadows (the next one on sys.path
     outside dlbn's directories: the user's or the distribution's) exactly
     once, under the name "sitecustomize".
dlbn's own failures are swallowed here; exceptions raised by the shadowed
sitecustomize propagate to `site`, which reports them as it would without
dlbn.
"""
import os
import sys

_DLBN_DIR = os.path.dirname(os.path.abspath(__file__))
_DLBN_TARGET = "torch.utils.data.dataloader"


def _dlbn_is_own_dir(path):
    """A directory holding a copy of the dlbn bootstrap (this or another install)."""
    try:
        return os.path.isfile(os.path.join(path or os.curdir, "_dlbn_boot.py"))
    except Exception:
        return False


def _dlbn_machinery():
    """PathFinder and module_from_spec without importing importlib.util
    (~3 ms of imports): the frozen importlib modules are always loaded."""
    try:
        import _frozen_importlib
        import _frozen_importlib_external
        return (_frozen_importlib_external.PathFinder,
                _frozen_importlib.module_from_spec)
    except ImportError:
        from importlib.machinery import PathFinder
        from importlib.util import module_from_spec
        return PathFinder, module_from_spec


class _DlbnDataLoaderHook:
    """Meta-path finder for torch.utils.data.dataloader only.  Finds the real
    spec through the other finders and wraps its loader so that _dlbn_boot
    patches the module right after it executed.  Any other import costs one
    string comparison."""

    def __init__(self):
        self.busy = False

    def find_spec(self, fullname, path=None, target=None):
        if fullname != _DLBN_TARGET or self.busy:
            return None
        self.busy = True
        try:
            for finder in sys.meta_path:
                find = getattr(finder, "find_spec", None)
                if finder is self or find is None:
                    continue
                spec = find(fullname, path, target)
                if spec is not None:
                    break
            else:
                return None
            if spec.loader is None or not hasattr(spec.loader, "exec_module"):
                return None
            spec.loader = _DlbnPatchingLoader(spec.loader, self)
            return spec
        except Exception:
            return None
        finally:
            self.busy = False

    def invalidate_caches(self):
        pass


class _DlbnPatchingLoader:
    """Delegates to the real loader; hands the module to _dlbn_boot after it
    executed, then steps out of the way (restores the real loader)."""

    def __init__(self, loader, hook):
        self._loader = loader
        self._hook = hook

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module):
        self._loader.exec_module(module)
        try:
            module.__loader__ = self._loader
            if getattr(module, "__spec__", None) is not None:
                module.__spec__.loader = self._loader
            if self._hook in sys.meta_path:
                sys.meta_path.remove(self._hook)
            _dlbn_load_boot().patch_dataloader_module(module)
        except Exception:
            pass

    def __getattr__(self, name):
        return getattr(self._loader, name)


def _dlbn_load_boot():
    """_dlbn_boot from dlbn's directory (no longer on sys.path)."""
    boot = sys.modules.get("_dlbn_boot")
    if boot is None:
        path_finder, module_from_spec = _dlbn_machinery()
        spec = path_finder.find_spec("_dlbn_boot", [_DLBN_DIR])
        boot = module_from_spec(spec)
        sys.modules["_dlbn_boot"] = boot
        spec.loader.exec_module(boot)
    return boot


def _dlbn_start():
    sys.path[:] = [p for p in sys.path
                   if not (p and os.path.abspath(p) == _DLBN_DIR)]
    if os.environ.get("DLBN_PYTHON", "1") == "0":
        return
    if _DLBN_TARGET in sys.modules:
        _dlbn_load_boot().patch_dataloader_module(sys.modules[_DLBN_TARGET])
    else:
        sys.meta_path.insert(0, _DlbnDataLoaderHook())


def _dlbn_find_shadowed_sitecustomize():
    try:
        path_finder, module_from_spec = _dlbn_machinery()
        search = [p for p in sys.path if not _dlbn_is_own_dir(p)]
        spec = path_finder.find_spec("sitecustomize", search)
        if spec is None or spec.loader is None:
            return None, None
        return spec, module_from_spec(spec)
    except Exception:
        return None, None


try:
    _dlbn_start()
except Exception:
    pass

_dlbn_next_spec, _dlbn_next_module = _dlbn_find_shadowed_sitecustomize()
if _dlbn_next_module is not None:
    # The `import sitecustomize` in `site` that is running this module picks
    # up whatever sys.modules holds when it returns: the shadowed module.
    sys.modules["sitecustomize"] = _dlbn_next_module
    _dlbn_next_spec.loader.exec_module(_dlbn_next_module)
