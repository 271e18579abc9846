"""dlbn Python bootstrap, start-up half (docs/DESIGN.md, "Python bootstrap").

libdlbn.so prepends this directory to PYTHONPATH (unless DLBN_PYTHON=0), so
CPython's `site` imports this module at start-up.  It must cost nothing
measurable there, so it only
  1. takes dlbn's directory back out of sys.path (the environment keeps it,
     so child interpreters - spawn/forkserver workers - bootstrap too);
  2. puts a meta-path finder in front that answers for exactly the modules
     of the loaders the bootstrap marks (torch.utils.data.dataloader,
     torchdata's stateful_dataloader and nodes, DALI's PyTorch plugin, the
     modules named in DLBN_LOADER): when one is imported, the finder loads
     _dlbn_boot (from this directory) to wrap the loader once the module
     executed; it leaves sys.meta_path as soon as _dlbn_boot wants no other
     module;
  3. runs the sitecustomize this one shadows (the next one on sys.path
     outside dlbn's directories: the user's or the distribution's) exactly
     once, under the name "sitecustomize".
dlbn's own failures are swallowed here; exceptions raised by the shadowed
sitecustomize propagate to `site`, which reports them as it would without
dlbn; an error executing one of the two modules (torch failing to import)
propagates with the traceback it has without dlbn (the hook's frame cut).
"""
import os
import sys

_DLBN_DIR = os.path.dirname(os.path.abspath(__file__))
# The modules the bootstrap patches (_dlbn_patch's TORCH_MODULE and
# STATEFUL_MODULE, _dlbn_loaders' NODES_MODULES, DALI_MODULE and SETTABLE), and those of the loaders
# named in DLBN_LOADER (MODULE:QUALNAME,...).  torchdata's are listed from
# the start: imported first, they import torch from inside their own
# execution, after their spec was found.
_DLBN_TARGETS = ("torch.utils.data.dataloader",
                 "torchdata.stateful_dataloader.stateful_dataloader",
                 "torchdata.nodes.base_node", "torchdata.nodes.loader",
                 "nvidia.dali.plugin.pytorch",
                 # their knobs, when DLBN_SET changes them
                 "torchdata.nodes.map", "torchdata.nodes.prefetch", "torchdata.nodes.batch",
                 "nvidia.dali.pipeline")


def _dlbn_named_modules():
    """The modules of DLBN_LOADER's items, and under DLBN_REPLAY those of
    the wrapper iterables it replays (_dlbn_wrappers: KNOWN and
    DLBN_WRAPPER's items); their syntax is checked later."""
    text = os.environ.get("DLBN_LOADER", "")
    if os.environ.get("DLBN_REPLAY", "").strip() not in ("", "0"):
        text += ",timm.data.loader:," + os.environ.get("DLBN_WRAPPER", "")
    names = []
    for item in text.replace(";", ",").split(","):
        module = item.partition(":")[0].strip()
        if module and module != "__main__" and module not in names:
            names.append(module)
    return tuple(names)


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
    """Meta-path finder for the modules in `pending` only.  Finds the real
    spec through the other finders and wraps its loader so that _dlbn_boot
    patches the module right after it executed.  Any other import costs one
    set lookup."""

    def __init__(self, targets):
        self.busy = False
        self.pending = set(targets)

    def find_spec(self, fullname, path=None, target=None):
        if fullname not in self.pending or self.busy:
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
            self.pending.discard(fullname)
            return spec
        except Exception:
            return None
        finally:
            self.busy = False

    def invalidate_caches(self):
        pass

    def keep_only(self, wanted):
        """Listen only for the modules _dlbn_boot still wants; leave
        sys.meta_path when there are none."""
        self.pending &= set(wanted)
        if not self.pending and self in sys.meta_path:
            sys.meta_path.remove(self)


class _DlbnPatchingLoader:
    """Delegates to the real loader; hands the module to _dlbn_boot after it
    executed, then steps out of the way (restores the real loader)."""

    def __init__(self, loader, hook):
        self._loader = loader
        self._hook = hook

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module):
        try:
            self._loader.exec_module(module)
        except BaseException as exc:
            # The module's own error (torch failing to import): the
            # traceback it has without dlbn, without this frame.
            try:
                _dlbn_load("_dlbn_common").drop_own_frames(exc)
            except Exception:
                pass
            raise
        try:
            module.__loader__ = self._loader
            if getattr(module, "__spec__", None) is not None:
                module.__spec__.loader = self._loader
            wanted = _dlbn_load("_dlbn_boot").patch_module(module.__name__, module)
            self._hook.keep_only(wanted)
        except Exception:
            try:
                self._hook.keep_only(())
            except Exception:
                pass

    def __getattr__(self, name):
        return getattr(self._loader, name)


def _dlbn_load(name):
    """A module of the bootstrap (_dlbn_boot, which loads the others; or
    _dlbn_common) from dlbn's directory (no longer on sys.path)."""
    module = sys.modules.get(name)
    if module is None:
        path_finder, module_from_spec = _dlbn_machinery()
        spec = path_finder.find_spec(name, [_DLBN_DIR])
        module = module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return module


def _dlbn_start():
    sys.path[:] = [p for p in sys.path
                   if not (p and os.path.abspath(p) == _DLBN_DIR)]
    if os.environ.get("DLBN_PYTHON", "1") == "0":
        return
    targets = _DLBN_TARGETS + _dlbn_named_modules()
    hook = _DlbnDataLoaderHook(targets)
    for name in targets:  # imported before start-up (torch first)
        if name in sys.modules:
            hook.pending.discard(name)
            wanted = _dlbn_load("_dlbn_boot").patch_module(name, sys.modules[name])
            hook.pending &= set(wanted)
    if hook.pending:
        sys.meta_path.insert(0, hook)
    if "__main__:" in os.environ.get("DLBN_LOADER", ""):
        _dlbn_load("_dlbn_boot")._setup()  # watches the script's class statements


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
