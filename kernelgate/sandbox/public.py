"""The process-wide state a caller's other code runs on, as the worker saw it before the candidate's import: the
public functions and classes of torch, torch.nn.functional, torch.linalg/fft/special, nn.init, Python's builtins,
math, random and NumPy; every member of torch.Tensor, nn.Module, nn.Parameter and of each module and optimizer class
torch defines (private bases such as _BatchNorm included), new members too (a `Tensor.softmax` entry shadows the C
method); nn.Module's global hooks and the warning filters that raise. A forward that changes any of them changes
every other model in its caller's process (red teams 39 and 40). Read by the worker (sandbox/worker.py,
`observations`); imported before any candidate code, which is when the namespaces and classes are bound."""
from __future__ import annotations

import builtins
import math
import operator
import random
import sys
import warnings
from types import CodeType, FunctionType, ModuleType
from typing import Any

import torch
import torch.nn.functional as F

_DICT = type.__dict__["__dict__"].__get__       # a class's own members, whatever the class defines
_MRO = type.__dict__["__mro__"].__get__
_NAMESPACES: list[tuple[str, ModuleType]] = [
    (name, m) for name, m in (("torch", torch), ("torch.nn", torch.nn), ("torch.nn.functional", F),
                              ("torch.linalg", torch.linalg), ("torch.fft", torch.fft), ("torch.special", torch.special),
                              ("torch.nn.init", torch.nn.init), ("torch.autograd", torch.autograd),
                              ("builtins", builtins), ("math", math), ("operator", operator), ("random", random),
                              ("warnings", warnings), ("numpy", sys.modules.get("numpy")))
    if isinstance(m, ModuleType)]
_HOOKS = torch.nn.modules.module
_CLASSES: list[tuple[str, type]] = []           # bound at the first snapshot (before the candidate's import)


def _classes() -> list[tuple[str, type]]:
    """torch.Tensor, nn.Module, nn.Parameter, and every class torch.nn.modules.* and torch.optim.* define."""
    if not _CLASSES:
        out = {"torch.Tensor": torch.Tensor, "torch.nn.Module": torch.nn.Module, "torch.nn.Parameter": torch.nn.Parameter}
        seen = set(map(id, out.values()))
        for name, m in list(sys.modules.items()):
            if not (isinstance(m, ModuleType) and (name.startswith("torch.nn.modules.") or name.startswith("torch.optim."))):
                continue
            for k, v in list(vars(m).items()):
                if type(v) is type and id(v) not in seen and getattr(v, "__module__", None) == name and any(
                        b in (torch.nn.Module, torch.optim.Optimizer) for b in _MRO(v)):
                    out[f"{name}.{k}"] = v
                    seen.add(id(v))
        _CLASSES.extend(sorted(out.items()))
    return _CLASSES


#: the modules whose every global (private ones too: `torch.optim.adam.adam`, `torch.nn.modules.linear.F`) a
#: caller's layers and optimizers look up at call time (red teams 41 and 42 rebound them), bound at the first snapshot
_INTERNAL_PREFIXES = ("torch.nn.modules.", "torch.nn.utils.", "torch.optim.", "torch.autograd.")
_INTERNAL: list[tuple[str, ModuleType]] = []


def _internal() -> list[tuple[str, ModuleType]]:
    if not _INTERNAL:
        _INTERNAL.extend(sorted((name, m) for name, m in list(sys.modules.items()) if isinstance(m, ModuleType) and (
            name.startswith(_INTERNAL_PREFIXES) or name in ("torch.nn.functional", "torch.nn.modules"))))
    return _INTERNAL


def snapshot() -> dict[str, Any]:
    """Name -> object (compared by identity); the marks under names ending in `[]` (compared by value)."""
    out: dict[str, Any] = {}
    for prefix, m in _NAMESPACES:
        for k, v in list(vars(m).items()):
            if not k.startswith("_") and (callable(v) or isinstance(v, type)):
                out[f"{prefix}.{k}"] = v
    named = {p for p, _ in _NAMESPACES}
    for prefix, m in _internal():
        for k, v in list(vars(m).items()):
            if prefix in named and not k.startswith("_"):       # (its public names: above)
                continue
            if not k.startswith("__") and (callable(v) or isinstance(v, (type, ModuleType))):
                out.setdefault(f"{prefix}:{k}", v)
    for prefix, cls in _classes():
        for k, v in list(_DICT(cls).items()):
            if k not in ("__doc__", "__annotations__", "__dict__", "__weakref__"):
                out[f"{prefix}.{k}"] = v
    for k, v in list(vars(_HOOKS).items()):
        if k.startswith("_global_") and isinstance(v, dict):
            out[f"torch.nn.modules.module.{k}[]"] = tuple(id(h) for h in list(v.values()))
    out["warnings.filters[]"] = tuple(str(f[:3]) for f in list(warnings.filters) if f and f[0] == "error")
    return out


def _cells(f: Any) -> dict[str, Any]:
    code, cells = getattr(f, "__code__", None), getattr(f, "__closure__", None) or ()
    try:
        return dict(zip(getattr(code, "co_freevars", ()), (c.cell_contents for c in cells)))
    except ValueError:                              # an empty cell
        return {}


#: the modules whose wrappers TorchDynamo puts around torch's functions and methods (on import: torch.manual_seed;
#: on a compile: nn.Module.__init__ and __setstate__, the optimizers' `_init_group` and `step`; an optimizer class's first
#: construction: its `step`, in a profiling hook)
_WRAPPERS = ("torch._compile", "torch._dynamo.eval_frame", "torch._dynamo.mutation_guard", "torch.optim.optimizer")
#: class members torch and Python add themselves: TorchDynamo's flag on a compile, copyreg's cache of a class's slot
#: names on a copy or pickle
_NEW_FLAGS = frozenset({"___needs_generation_tag_patch", "__slotnames__"})


def _codes(m: ModuleType) -> set[int]:
    """The ids of the code objects the functions and methods `m` defines hold, nested ones included."""
    out: set[int] = set()
    todo = []
    for v in list(vars(m).items()):
        obj = v[1]
        members = list(_DICT(obj).values()) if type(obj) is type else [obj]
        members = [f.__func__ if type(f) in (staticmethod, classmethod) else f for f in members]
        todo += [f.__code__ for f in members if type(f) is FunctionType]
    while todo:
        c = todo.pop()
        if type(c) is CodeType and id(c) not in out:
            out.add(id(c))
            todo += [k for k in c.co_consts if type(k) is CodeType]
    return out


def _torch_wrapper(w: Any, v: Any, depth: int = 0) -> bool:
    """`w` stands for `v` as TorchDynamo leaves it: either its wrapper around `v` (a function whose code one of
    `_WRAPPERS` defines, not a copy of torch's code with a closure of the candidate's, run in that module's globals,
    holding `v` and nothing else callable but TorchDynamo's own context), or `v`'s own code and globals with each
    function it holds so wrapped (an optimizer's `step` decorator around a wrapped step). `v`'s disabled form,
    where its first call cached one on `v`, is held to the same."""
    if type(w) is not FunctionType or depth > 3:
        return False
    cells = _cells(w)
    if type(v) is FunctionType and w.__code__ is v.__code__ and w.__globals__ is v.__globals__:
        old = _cells(v)
        return old.keys() == cells.keys() and all(
            a is b or (callable(b) and _torch_wrapper(a, b, depth + 1)) for a, b in
            ((cells[k], old[k]) for k in cells))
    if not any(isinstance(sys.modules.get(n), ModuleType) and w.__globals__ is vars(sys.modules[n])
               and id(w.__code__) in _codes(sys.modules[n]) for n in _WRAPPERS):
        return False
    ctx = getattr(sys.modules.get("torch._dynamo.eval_frame"), "DisableContext", None)
    held = [c for c in cells.values() if callable(c) and not (ctx is not None and type(c) is ctx)]
    if not held or any(c is not v and not _torch_wrapper(c, v, depth + 1) for c in held):   # wrappers in turn
        return False
    cached = getattr(v, "__dynamo_disable", None)
    return cached is None or cached is w or _torch_wrapper(cached, v, 3)


def _inherited(cls: type, key: str, before: dict[str, Any]) -> Any:
    """What `cls.key` was before, through its bases (the snapshot's names)."""
    names = {id(c): p for p, c in _classes()}
    for base in _MRO(cls)[1:]:
        p = names.get(id(base))
        if p is not None and f"{p}.{key}" in before:
            return before[f"{p}.{key}"]
    return None


def changed(before: dict[str, Any]) -> list[str]:
    """What differs from `before` (a snapshot): names bound to something else, removed, or new members of the
    classes (a subclass's entry shadows its base's). TorchDynamo's wrappers around torch's own are no change."""
    now, out = snapshot(), []
    for k, v in before.items():
        w = now.get(k, before)                      # `before` itself: a name that is gone
        if k.endswith("[]"):
            if w != v:
                out.append(k[:-2])
        elif w is not v and not _torch_wrapper(w, v):
            out.append(k)
    for p, cls in _classes():
        for k, w in list(_DICT(cls).items()):
            name = f"{p}.{k}"
            if name in before or name not in now:
                continue
            if k in _NEW_FLAGS and type(w) in (bool, list):
                continue
            v = _inherited(cls, k, before)
            if v is None or not _torch_wrapper(w, v):
                out.append(f"{name} (new)")
    return out
