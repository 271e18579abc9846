"""dlbn Python bootstrap: the compatibility check, run before anything is
wrapped (docs/DESIGN.md, "Python bootstrap").

The wrappers (_dlbn_patch) reach into torch's private DataLoader internals.
A torch that renamed or restructured them would get wrong marks (a batch
index that never moves, a CONFIG that describes nothing) or, worse, a
wrapper that gets in the way.  So patching first checks, without making a
loader (that would start workers, or need a dataset), that every internal
the wrappers and the CONFIG text use is where this code expects it: the
classes and methods exist and are plain functions, and every attribute read
from a loader or iterator is named by the __init__ that sets it (the names
a code object uses, co_names: present for an attribute it stores or loads,
gone when a rename happened).  On any mismatch nothing is wrapped and the
trace says why (the reason these functions return).
"""

# Set by DataLoader.__init__ (read by the CONFIG text; __len__ by replay).
_LOADER_ATTRS = ("num_workers", "batch_size", "batch_sampler", "sampler",
                 "prefetch_factor", "pin_memory", "persistent_workers",
                 "multiprocessing_context", "_dataset_kind", "drop_last", "timeout")
# Set by the iterator classes' __init__ (base class or one of the two kinds;
# torch 1.13 sets _prefetch_factor in the base, 2.x in the multiprocess one).
_ITER_ATTRS = ("_num_yielded", "_pin_memory", "_index_sampler", "_dataset_kind",
               "_num_workers", "_drop_last", "_timeout", "_persistent_workers",
               "_prefetch_factor")
# Set by the multiprocess iterator's __init__: its worker processes.
_MP_ITER_ATTRS = ("_workers",)


def _code_names(func):
    """Every name the code of func (and of the functions and comprehensions
    nested in it) uses: attributes, globals.  None when func has no code."""
    for _ in range(8):  # decorated with functools.wraps: the function inside
        inner = getattr(func, "__wrapped__", None)
        if inner is None:
            break
        func = inner
    code = getattr(func, "__code__", None)
    if code is None:
        return None
    names, todo = set(), [code]
    while todo:
        code = todo.pop()
        names.update(code.co_names)
        todo.extend(c for c in code.co_consts if hasattr(c, "co_names"))
    return names


def _init_names(cls):
    """Names used by the __init__ of cls and of its bases (each __init__ that
    runs, or may run through super(), on a new instance)."""
    names = set()
    for klass in cls.__mro__:
        found = _code_names(klass.__dict__.get("__init__"))
        if found:
            names |= found
    return names


def own_function(cls, name):
    """cls.__dict__[name] when it is a plain Python function, else a reason."""
    import types
    value = cls.__dict__.get(name)
    if value is None:
        return None, "%s.%s missing" % (cls.__name__, name)
    if not isinstance(value, types.FunctionType):
        return None, "%s.%s is a %s not a function" % (
            cls.__name__, name, type(value).__name__)
    return value, None


def _class(module, name, base=None):
    cls = getattr(module, name, None)
    if not isinstance(cls, type):
        return None, "no class %s" % name
    if base is not None and not issubclass(cls, base):
        return None, "%s is not a %s" % (name, base.__name__)
    if not cls.__dictoffset__:  # the wrappers keep their state in __dict__
        return None, "%s has no instance __dict__" % name
    return cls, None


def _missing(names, wanted):
    return [n for n in wanted if n not in names]


def _check_iterators(base_cls, single_cls, multi_cls):
    """Reason why these iterator classes do not fit, or None."""
    orig_next, reason = own_function(base_cls, "__next__")
    if reason:
        return reason
    for cls in (single_cls, multi_cls):
        if "__next__" in cls.__dict__:
            # its own __next__ would run instead of the wrapped one
            return "%s overrides __next__" % cls.__name__
    # The batch index of the marks: __next__ counts the batches it yielded.
    if "_num_yielded" not in (_code_names(orig_next) or ()):
        return "%s.__next__ does not count _num_yielded" % base_cls.__name__
    if "_num_yielded" in base_cls.__dict__:
        return "_num_yielded is a class attribute"
    single_names, multi_names = _init_names(single_cls), _init_names(multi_cls)
    lost = _missing(single_names | multi_names, _ITER_ATTRS)
    lost += _missing(multi_names, _MP_ITER_ATTRS)
    if lost:
        return "iterator __init__ sets no %s" % ",".join(lost)
    return None


def torch_incompatibility(module):
    """Why the wrappers cannot be trusted with this torch.utils.data.dataloader,
    or None when everything they use is where they expect it."""
    loader_cls, reason = _class(module, "DataLoader")
    if reason:
        return reason
    base_cls, reason = _class(module, "_BaseDataLoaderIter")
    if reason:
        return reason
    single_cls, reason = _class(module, "_SingleProcessDataLoaderIter", base_cls)
    if reason:
        return reason
    multi_cls, reason = _class(module, "_MultiProcessingDataLoaderIter", base_cls)
    if reason:
        return reason
    for name in ("__iter__", "__len__"):
        reason = own_function(loader_cls, name)[1]
        if reason:
            return reason
    lost = _missing(_init_names(loader_cls), _LOADER_ATTRS)
    if lost:
        return "DataLoader.__init__ sets no %s" % ",".join(lost)
    reason = _check_iterators(base_cls, single_cls, multi_cls)
    if reason:
        return reason
    kind = getattr(module, "_DatasetKind", None)
    if getattr(kind, "Iterable", None) != 1 or getattr(kind, "Map", None) != 0:
        return "_DatasetKind differs"   # _dataset_kind() reads 1 as iterable
    return None


def stateful_incompatibility(module, torch_module):
    """The same for torchdata's StatefulDataLoader (torchdata.stateful_dataloader
    .stateful_dataloader): a DataLoader subclass with its own __iter__ (it
    makes its iterators without DataLoader.__iter__) and iterator classes that
    reach torch's (wrapped) __next__ through super()."""
    loader_cls, reason = _class(module, "StatefulDataLoader", torch_module.DataLoader)
    if reason:
        return reason
    reason = own_function(loader_cls, "__iter__")[1]
    if reason:
        return reason
    lost = _missing(_init_names(loader_cls), _LOADER_ATTRS)
    if lost:
        return "StatefulDataLoader.__init__ sets no %s" % ",".join(lost)
    base_cls, reason = _class(module, "_StatefulBaseDataLoaderIter",
                              torch_module._BaseDataLoaderIter)
    if reason:
        return reason
    if "__next__" in base_cls.__dict__:
        own_next, reason = own_function(base_cls, "__next__")
        if reason:
            return reason
        if not {"super", "__next__"} <= (_code_names(own_next) or set()):
            return "_StatefulBaseDataLoaderIter.__next__ does not call super"
    single_cls, reason = _class(module, "_StatefulSingleProcessDataLoaderIter", base_cls)
    if reason:
        return reason
    multi_cls, reason = _class(module, "_StatefulMultiProcessingDataLoaderIter", base_cls)
    if reason:
        return reason
    return _check_iterators(torch_module._BaseDataLoaderIter, single_cls, multi_cls)

