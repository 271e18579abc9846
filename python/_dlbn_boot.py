"""dlbn Python bootstrap, the entry: it loads the bootstrap's modules and
wires them (docs/DESIGN.md, "Python bootstrap").

sitecustomize.py (the start-up half) loads this module when one of the
loader modules it watches is imported (torch.utils.data.dataloader first)
and hands each over to patch_module().  The first one sets the bootstrap
up (_setup): the environment is read, the marker API loaded, and the
modules the run asks for are loaded.  Then each module is dispatched to
what patches it.

The modules, each with one concern:
  _dlbn_common    what they share: the run's switches, the wrapper helpers
  _dlbn_marks     the marker API of libdlbn.so
  _dlbn_compat    the check that torch's DataLoader internals are the known ones
  _dlbn_config    the CONFIG record of a DataLoader iterator
  _dlbn_patch     torch's DataLoader (and torchdata's StatefulDataLoader) wrapped
  _dlbn_loaders   the other loaders: torchdata.nodes, DALI, DLBN_LOADER's
  _dlbn_replay    Replay, only under DLBN_REPLAY
  _dlbn_wrappers  Replay of a wrapper iterable, only under DLBN_REPLAY
  _dlbn_settings  dlbn-run --set / --max-steps, only under DLBN_SET or
                  DLBN_MAX_STEPS
  _dlbn_profile   per-stage times and sampled stacks (with the library only)
  _dlbn_handoff   the time a wrapper iterable hands a fetched batch on
  _dlbn_threads   a loader's own threads sampled (_dlbn_loaders loads it)

It runs in every Python process under the preload, DataLoader workers
included, so it loads up front only the five it always needs (the first
five above, in that order) and the others when the environment asks for
them: a plain traced run loads neither replay nor settings.

Load order: the bootstrap's directory is not on sys.path, so sibling_module
loads each module from this file's directory into sys.modules, and a
module imports only those loaded before it, by name (an import statement
finds them in sys.modules).
"""

import os
import sys

_DIR = os.path.dirname(os.path.abspath(__file__))


def sibling_module(name):
    """A module of dlbn's bootstrap, from this file's directory (not from
    sys.path: the program's own modules cannot shadow it)."""
    module = sys.modules.get(name)
    if module is None:
        import _frozen_importlib
        import _frozen_importlib_external
        spec = _frozen_importlib_external.PathFinder.find_spec(name, [_DIR])
        if spec is None:
            raise ImportError("dlbn's %s is missing from %s" % (name, _DIR))
        module = _frozen_importlib.module_from_spec(spec)
        sys.modules[name] = module
        try:
            spec.loader.exec_module(module)
        except BaseException:
            del sys.modules[name]
            raise
    return module


# Always needed, in this order (each imports only those above it).
_common = sibling_module("_dlbn_common")
_marks = sibling_module("_dlbn_marks")
_compat = sibling_module("_dlbn_compat")
_config = sibling_module("_dlbn_config")
_patch = sibling_module("_dlbn_patch")

_set_up = None    # _setup ran: True when the bootstrap is on
_loaders = None   # the _dlbn_loaders module once set up
_wrappers = None  # the _dlbn_wrappers module, under replay


def patch_module(name, module):
    """Patch one module that sitecustomize's import hook saw executed; return
    the names of the modules still worth handing over (the hook stops
    listening when there are none)."""
    try:
        if name == _patch.TORCH_MODULE:
            patch_dataloader_module(module)
        elif name == _patch.STATEFUL_MODULE:
            _patch.patch_stateful_module(module)
        elif _setup():
            if _loaders is not None:
                _loaders.patch(name, module)
            if _wrappers is not None:
                _wrappers.patch(name, module)
        return _still_wanted()
    except Exception:
        return ()


def patch_dataloader_module(module, api=None, environ=None):
    """Wrap torch's DataLoader (_dlbn_patch), once; with the library's
    marker API also the localization profile, and the hand-off timer.

    `api` replaces the library's marker API (tests pass a recorder object
    with mark(kind, iter_id, arg) and config(iter_id, bytes) methods);
    `environ` replaces os.environ for the replay and log settings.
    """
    if _patch.patch_dataloader_module(module, _setup(api, environ)):
        if api is None:
            _install_profile()
        _install_handoff()


def _still_wanted():
    """The modules still worth being handed: StatefulDataLoader's only when
    torch's DataLoader was wrapped and torchdata is installed at all; the
    other loaders' (_dlbn_loaders) while the marker API is there."""
    wanted = _loaders.wanted() if _loaders is not None else ()
    if _wrappers is not None:
        wanted += _wrappers.wanted()
    stateful = _patch.STATEFUL_MODULE
    if _patch.status != "ok" or _patch.stateful_done or stateful in sys.modules:
        return wanted
    try:
        import _frozen_importlib_external
        if _frozen_importlib_external.PathFinder.find_spec("torchdata") is None:
            return wanted
    except Exception:
        return wanted
    return (stateful,) + wanted


def _setup(api=None, environ=None):
    """Read the environment and load the marker API, once (the first patched
    module does it: torch's DataLoader, or another loader's module imported
    before torch).  True when there is something to do: the recorder is
    active, or replay / settings were asked for."""
    global _set_up, _loaders, _wrappers
    if _set_up is not None:
        return _set_up
    _set_up = False
    try:
        if environ is None:
            environ = os.environ
        _common.environ = environ
        if _given(environ, "DLBN_REPLAY"):
            _common.replay = _optional("_dlbn_replay", environ)
        if _given(environ, "DLBN_SET", off=("",)) or _given(environ, "DLBN_MAX_STEPS"):
            _common.settings = _optional("_dlbn_settings", environ)
        _marks.api = api if api is not None else _marks.load_marker_api()
        if _marks.api is None and (_common.replay is not None or
                                   _common.settings is not None):
            _marks.api = _marks.NullApi()
        if _marks.api is None:
            return False
        _set_up = True
    except Exception:
        return False
    try:
        _loaders = sibling_module("_dlbn_loaders")
        _loaders.setup(environ, sibling_module)
    except Exception:
        _loaders = None
    _patch.loaders = _loaders
    if _common.replay is not None:  # after _loaders: it parses DLBN_WRAPPER with it
        try:
            _wrappers = sibling_module("_dlbn_wrappers")
            _wrappers.setup(environ, _loaders)
        except Exception:
            _wrappers = None
        _patch.wrappers = _wrappers
    return True


def _given(environ, variable, off=("", "0")):
    """Whether the variable asks for something (a bad value too: the
    module it loads says so)."""
    return environ.get(variable, "").strip() not in off


def _optional(name, environ):
    """Module `name`, when its setup() finds what it does switched on."""
    module = sibling_module(name)
    return module if module.setup(environ) else None


def _install_profile():
    """Localization (_dlbn_profile): per-stage times and sampled Python
    stacks in the fetching processes, and the loop's next() call site.
    Only with the library's marker API (tests that pass their own api, and
    replay or settings without the recorder, get none)."""
    if not isinstance(_marks.api, _marks.MarkerApi):
        return
    try:
        module = sibling_module("_dlbn_profile")
        if module.install(environ=_common.environ):
            _patch.profile = module
    except Exception:
        pass


def _install_handoff():
    """The hand-off timer (_dlbn_handoff): any marker API but the null one
    (marks that go nowhere need no hand-off); DLBN_HANDOFF=0 turns it off."""
    if isinstance(_marks.api, _marks.NullApi) or _common.environ.get("DLBN_HANDOFF", "1") == "0":
        return
    try:
        _patch.use_handoff(sibling_module("_dlbn_handoff"))
    except Exception:
        pass
