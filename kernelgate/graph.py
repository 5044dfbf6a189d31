"""What a reference computes, as strategies see it: the torch.fx graph when it traces, else aten ops."""
from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.fx as fx

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class GraphInfo:
    """Module types, functions and methods called in forward, in order; `traced` False means fx failed."""

    traced: bool
    modules: tuple[str, ...] = ()          # e.g. ("Linear", "GELU")
    functions: tuple[str, ...] = ()        # e.g. ("softmax", "matmul", "add")
    methods: tuple[str, ...] = ()          # e.g. ("transpose", "view")
    aten: tuple[str, ...] = ()             # dispatcher-level ops from running it
    note: str = ""
    module_paths: dict[str, str] = field(default_factory=dict)   # qualified name -> type
    patterns: dict[str, int] = field(default_factory=dict)       # rewrite name -> places it applies

    def has_module(self, *names: str) -> bool:
        return any(m in names for m in self.modules)

    def has_function(self, *names: str) -> bool:
        return any(f in names for f in self.functions + self.methods)

    def has_aten(self, *names: str) -> bool:
        return any(a in names for a in self.aten)

    def summary(self) -> str:
        parts = list(dict.fromkeys(self.modules + self.functions + self.methods))
        return ", ".join(parts[:20]) + (" ..." if len(parts) > 20 else "")


def trace(model: torch.nn.Module) -> fx.GraphModule | None:
    try:
        return fx.symbolic_trace(model)
    except Exception as e:  # noqa: BLE001 - untraceable forwards fall back to whole-module strategies
        log.info("fx trace failed: %s", e)
        return None


def analyse(model: torch.nn.Module, aten_ops: set[str] | None = None,
            patterns: dict[str, Any] | None = None) -> GraphInfo:
    """Describe a reference for the strategy library; `patterns` are rewrites counted on a traced copy."""
    gm = trace(model)
    aten = tuple(sorted(aten_ops or ()))
    if gm is None:
        return GraphInfo(False, aten=aten, note="forward could not be traced with torch.fx; "
                         "only whole-module strategies apply")
    modules, functions, methods, paths = [], [], [], {}
    named = dict(gm.named_modules())
    for node in gm.graph.nodes:
        if node.op == "call_module":
            t = type(named[node.target]).__name__
            modules.append(t)
            paths[str(node.target)] = t
        elif node.op == "call_function":
            functions.append(_name(node.target))
        elif node.op == "call_method":
            methods.append(str(node.target))
    counts = {}
    for name, rewrite in (patterns or {}).items():
        copy = trace(model)
        try:
            counts[name] = int(rewrite(copy)) if copy is not None else 0
        except Exception as e:  # noqa: BLE001 - a rewrite that cannot handle this graph does not apply
            log.info("rewrite %s does not apply: %s", name, e)
            counts[name] = 0
    return GraphInfo(True, tuple(modules), tuple(functions), tuple(methods), aten, "", paths, counts)


def _name(target: Any) -> str:
    name = getattr(target, "__name__", str(target))
    return {"mul": "mul", "add": "add", "truediv": "div", "matmul": "matmul"}.get(name, name)
