"""A reference's forward split into pieces with torch.fx, each piece a small workload of its own, and the
whole-model candidate file that substitutes optimized pieces back into the traced graph.

`split_reference(source, cls)` traces the reference (buffers kept as live `get_attr` nodes), propagates
shapes on the meta device (the reference built under `torch.device("meta")`: no data, any size), and cuts the
node list before each *anchor*: a call of a layer that does the heavy work (Linear, Conv*, attention,
recurrent layers, Embedding) or of a matmul-class function. What follows an anchor (activations, norms,
reshapes) stays with it, what precedes the first one joins the first piece, and a non-tensor value (a size)
moves to the piece that uses it, so only tensors cross a cut (pieces that would still pass a non-tensor are
merged). Beyond `max_pieces` the cheapest neighbours are merged. `torch.fx.passes.split_module` then builds
one submodule per piece; each is costed by its FLOPs and least bytes (profiling/roofline.count on meta
tensors) on the target's machine model.

A piece's workload (`Piece.source`) is a KernelBench file: its own `Model` (the layers it calls, built from
their reprs; parameters it reads through `get_attr` arrive as inputs), its `forward` as fx writes it, and
`get_inputs` with the shapes and dtypes observed at the split points. It is checked before it is offered: it
must build and run on meta tensors with the submodule's state_dict and output shapes.

`recompose_body(split, {piece: code})` is the candidate's code after the reference: `class ModelNew(Model)`
(the reference's constructor and state_dict) that, on its first call in eval mode, traces the reference's
forward, splits it by the same node -> piece map, and puts each optimized piece in place of its submodule,
with its parameters bound to the whole model's own tensors (so load_state_dict reaches them). Each piece's
file (its workload, then the reply's code) runs in a namespace of its own, registered with linecache so that
Triton can read its kernels' source. The file imports only torch, never kernelgate.
"""
from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.fx as fx
import torch.nn as nn
from torch.fx.passes.shape_prop import ShapeProp, TensorMetadata
from torch.fx.passes.split_module import split_module

from ...profiling import roofline

#: layers whose call starts a piece
ANCHOR_MODULES = (nn.Linear, nn.Bilinear, nn.Conv1d, nn.Conv2d, nn.Conv3d, nn.ConvTranspose1d, nn.ConvTranspose2d,
                  nn.ConvTranspose3d, nn.MultiheadAttention, nn.RNNBase, nn.Embedding, nn.EmbeddingBag)
#: functions and methods whose call starts a piece
ANCHOR_FUNCTIONS = {"linear", "matmul", "mm", "bmm", "addmm", "baddbmm", "einsum", "conv1d", "conv2d", "conv3d",
                    "conv_transpose1d", "conv_transpose2d", "conv_transpose3d", "scaled_dot_product_attention",
                    "bilinear", "embedding"}


class _Tracer(fx.Tracer):
    proxy_buffer_attributes = True      # buffers stay get_attr nodes (live under load_state_dict)


@dataclass(frozen=True)
class Piece:
    """One piece: its submodule's name, the reference's nodes in it, its workload file and cost."""

    name: str                           # submod_<i>, as split_module names it
    index: int                          # position among the pieces, in forward order
    nodes: tuple[str, ...]              # the reference graph's node names
    calls: tuple[str, ...]              # what it calls, for a line in a prompt ("fc1: Linear", "gelu")
    inputs: tuple[tuple[str, str], ...]    # (name, "float32[16, 128]") at the split point
    outputs: tuple[str, ...]            # "float32[16, 128]" each
    source: str                         # the piece's own workload file
    flops: float = 0.0
    bytes: float = 0.0
    cost_s: float = 0.0                 # roofline estimate on the machine model (0: not counted)

    def describe(self) -> str:
        ins = ", ".join(f"{n} {s}" for n, s in self.inputs)
        return f"{self.name} ({', '.join(self.calls)}): inputs {ins} -> {', '.join(self.outputs)}"


@dataclass(frozen=True)
class Split:
    """The pieces of a forward (empty, with a reason, when it does not split)."""

    pieces: tuple[Piece, ...] = ()
    piece_of: dict[str, int] = field(default_factory=dict)     # reference node name -> partition id
    reason: str = ""

    def by_cost(self) -> list[Piece]:
        """Most expensive first (estimate, then FLOPs, then bytes); forward order among equals."""
        return sorted(self.pieces, key=lambda p: (-p.cost_s, -p.flops, -p.bytes, p.index))

    def get(self, name: str) -> Piece:
        return next(p for p in self.pieces if p.name == name)


# ------------------------------------------------------------------ splitting

def _load_meta(source: str, cls: str) -> tuple[nn.Module, list[Any]]:
    ns: dict[str, Any] = {"__name__": "kernelgate_reference"}
    with torch.random.fork_rng(devices=[]), torch.device("meta"):
        exec(compile(source, "<reference>", "exec"), ns)      # noqa: S102 - the user's own workload
        model = ns[cls](*ns["get_init_inputs"]())
        inputs = list(ns["get_inputs"]())
    return model.eval(), inputs


def _is_tensor(node: fx.Node) -> bool:
    return isinstance(node.meta.get("tensor_meta"), TensorMetadata) and isinstance(node.meta.get("type"), type) \
        and issubclass(node.meta["type"], torch.Tensor)


def _anchor(node: fx.Node, modules: dict[str, nn.Module]) -> bool:
    if node.op == "call_module":
        return isinstance(modules.get(str(node.target)), ANCHOR_MODULES)
    if node.op in ("call_function", "call_method"):
        return getattr(node.target, "__name__", str(node.target)) in ANCHOR_FUNCTIONS
    return False


def _partition(gm: fx.GraphModule) -> dict[str, int]:
    """Node name -> partition (ids in forward order, contiguous), for the compute nodes of gm."""
    modules = dict(gm.named_modules())
    compute = [n for n in gm.graph.nodes if n.op not in ("placeholder", "get_attr", "output")]
    part, current = {}, 0
    for i, n in enumerate(compute):
        if _anchor(n, modules) and i and any(_anchor(m, modules) for m in compute[:i]):
            current += 1
        part[n.name] = current
    for n in reversed(compute):                 # a non-tensor value goes where it is used
        users = [part[u.name] for u in n.users if u.name in part]
        if not _is_tensor(n) and users and "output" not in {u.op for u in n.users}:
            part[n.name] = max(part[n.name], min(users))
    while True:                                 # a non-tensor still crossing: merge what lies between
        crossing = [(part[n.name], part[u.name]) for n in compute if not _is_tensor(n)
                    for u in n.users if u.name in part and part[u.name] != part[n.name]]
        if not crossing:
            break
        lo, hi = crossing[0]
        part = {k: (lo if lo <= v <= hi else v) for k, v in part.items()}
    ids = {p: i for i, p in enumerate(sorted(set(part.values())))}
    return {k: ids[v] for k, v in part.items()}


def _meta_line(m: Any) -> str:
    if isinstance(m, TensorMetadata):
        return f"{str(m.dtype).removeprefix('torch.')}[{', '.join(str(d) for d in m.shape)}]"
    return type(m).__name__


def _cost(sub: nn.Module, inputs: list[Any], machine: dict[str, Any]) -> tuple[float, float, float]:
    try:
        work = roofline.count(sub, inputs)
    except Exception:  # noqa: BLE001 - an op the counter cannot run on meta: uncounted, ordered last
        return 0.0, 0.0, 0.0
    peak = max([v for v in (machine.get("peak") or {}).values() if v] or [1e12])
    bandwidth = machine.get("bandwidth") or 1e11
    flops = float(work.flops + work.elementwise_flops)
    return flops, float(work.min_bytes), max(flops / peak, work.min_bytes / bandwidth)


def split_reference(source: str, cls: str = "Model", *, max_pieces: int = 6,
                    machine: dict[str, Any] | None = None) -> Split:
    """The reference's forward in pieces (Split.reason says why there are none)."""
    try:
        model, inputs = _load_meta(source, cls)
    except Exception as e:  # noqa: BLE001
        return Split(reason=f"the reference does not build on the meta device ({type(e).__name__}: {e})")
    try:
        gm = fx.GraphModule(model, _Tracer().trace(model), cls)
        ShapeProp(gm).propagate(*inputs)
    except Exception as e:  # noqa: BLE001 - data-dependent control flow, untraceable calls
        return Split(reason=f"the forward does not trace with torch.fx ({type(e).__name__}: {str(e)[:200]})")
    part = _partition(gm)
    while len(set(part.values())) > max(1, max_pieces):   # merge the smallest neighbours (by node count)
        sizes = [sum(1 for v in part.values() if v == p) for p in range(max(part.values()) + 1)]
        j = min(range(len(sizes) - 1), key=lambda i: sizes[i] + sizes[i + 1])
        part = {k: (v - 1 if v > j else v) for k, v in part.items()}
    if len(set(part.values())) < 2:
        return Split(piece_of=part, reason="the forward is one piece (fewer than two layers)")
    try:
        split = split_module(gm, model, lambda n: part[n.name])
        ShapeProp(split).propagate(*inputs)
    except Exception as e:  # noqa: BLE001
        return Split(reason=f"split_module failed ({type(e).__name__}: {str(e)[:200]})")
    pieces = []
    for node in split.graph.nodes:
        if node.op != "call_module":
            continue
        piece = _piece(split, node, part, len(set(part.values())), machine or {})
        if piece is not None:
            pieces.append(piece)
    if not pieces:
        return Split(piece_of=part, reason="no piece makes a workload of its own")
    return Split(tuple(pieces), part)


# ------------------------------------------------------------------ a piece's workload

def _module_expr(mod: nn.Module) -> str | None:
    expr = "nn." + repr(mod)
    if "\n" in expr or getattr(nn, type(mod).__name__, None) is not type(mod):
        return None
    dtypes = {t.dtype for t in mod.state_dict().values()}
    if len(dtypes) == 1 and torch.float32 not in dtypes:
        expr += f".to({dtypes.pop()})"
    return expr


_FREE = re.compile(r";\s+[\w, ]+ = None$")       # fx's `;  x = None` (frees a value early)


def _input_expr(m: TensorMetadata) -> str:
    shape = "(" + ", ".join(str(d) for d in m.shape) + ("," if len(m.shape) == 1 else "") + ")"
    if m.dtype.is_floating_point:
        return f"torch.randn({shape}" + ("" if m.dtype == torch.float32 else f", dtype={m.dtype}") + ")"
    if m.dtype == torch.bool:
        return f"torch.rand({shape}) < 0.5"
    return f"torch.randint(0, 16, {shape}, dtype={m.dtype})"


def _piece(split: fx.GraphModule, node: fx.Node, part: dict[str, int], total: int,
           machine: dict[str, Any]) -> Piece | None:
    name = str(node.target)
    sub: fx.GraphModule = getattr(split, name)
    args = list(node.args)
    if node.kwargs or not all(isinstance(a, fx.Node) and _is_tensor(a) for a in args):
        return None
    index = int(name.rsplit("_", 1)[1])
    nodes = tuple(k for k, v in part.items() if v == index)
    modules = dict(sub.named_children())
    ctor = []
    for attr, mod in modules.items():
        expr = _module_expr(mod)
        if expr is None:
            return None
        ctor.append(f"        self.{attr} = {expr}")
    phs = [n.name for n in sub.graph.nodes if n.op == "placeholder"]
    metas = [a.meta["tensor_meta"] for a in args]
    outs = node.meta.get("tensor_meta")
    outs = (outs,) if isinstance(outs, TensorMetadata) else tuple(outs or ())
    if not outs or not all(isinstance(m, TensorMetadata) for m in outs):
        return None
    calls = tuple(f"{n.target}: {type(modules[str(n.target)]).__name__}" if n.op == "call_module"
                  else getattr(n.target, "__name__", str(n.target))
                  for n in sub.graph.nodes if n.op in ("call_module", "call_function", "call_method"))
    origin = dict(zip(phs, args))           # placeholder -> the value passed in the split graph
    inputs = [f"    {ph} = {_input_expr(m)}" + (f"    # the reference's `{origin[ph].target}`"
                                                  if origin[ph].op == "get_attr" else "")
              for ph, m in zip(phs, metas)]
    shapes = tuple((ph, _meta_line(m)) for ph, m in zip(phs, metas))
    forward = "\n".join(_FREE.sub("", line) for line in sub.code.strip("\n").splitlines() if line.strip())
    body = "\n".join(ctor) or "        pass"
    src = (f'"""Piece {index + 1} of {total} of a larger model\'s forward, as a workload of its own.\n'
           f"Inputs (the values at the split point): {', '.join(f'{n} {s}' for n, s in shapes)}.\n"
           f'Output: {", ".join(_meta_line(m) for m in outs)}."""\n'
           "import torch\nimport torch.nn as nn\n\n\nclass Model(nn.Module):\n"
           "    def __init__(self):\n        super().__init__()\n" + body + "\n\n"
           + "\n".join("    " + line if line.strip() else "" for line in forward.splitlines()).rstrip() + "\n\n\n"
           "def get_inputs():\n" + "\n".join(inputs) + f"\n    return [{', '.join(phs)}]\n\n\n"
           "def get_init_inputs():\n    return []\n")
    if not _valid(src, sub, metas, outs):
        return None
    flops, nbytes, cost = _cost(sub, [torch.empty(m.shape, dtype=m.dtype, device="meta") for m in metas], machine)
    return Piece(name, index, nodes, calls, shapes, tuple(_meta_line(m) for m in outs), src, flops, nbytes, cost)


def _valid(src: str, sub: nn.Module, metas: list[TensorMetadata], outs: tuple) -> bool:
    """The workload builds, has the submodule's state_dict, and gives its output shapes (on meta)."""
    try:
        ns: dict[str, Any] = {"__name__": "kernelgate_piece"}
        with torch.device("meta"):
            exec(compile(src, "<piece>", "exec"), ns)     # noqa: S102 - text we wrote
            model = ns["Model"]()
            got = model(*[torch.empty(m.shape, dtype=m.dtype) for m in metas])
        want = {k: (tuple(v.shape), v.dtype) for k, v in sub.state_dict().items()}
        if {k: (tuple(v.shape), v.dtype) for k, v in model.state_dict().items()} != want:
            return False
        got = got if isinstance(got, (tuple, list)) else (got,)
        return [tuple(g.shape) for g in got] == [tuple(m.shape) for m in outs]
    except Exception:  # noqa: BLE001 - a piece that does not stand alone is not offered
        return False


# ------------------------------------------------------------------ the recomposed candidate

def _literal(text: str) -> str:
    """A readable string literal of text: triple-quoted raw when that round-trips, else repr."""
    lit = "r'''" + text + "'''"
    try:
        if ast.literal_eval(lit) == text:
            return lit
    except (SyntaxError, ValueError):
        pass
    return repr(text)


RECOMPOSE = '''
import linecache as _kg_linecache

import torch
import torch.fx
from torch.fx.passes.split_module import split_module as _kg_split_module

#: the reference's traced forward in pieces (node -> piece); the pieces below replace their submodules
_KG_PIECE_OF = {piece_of!r}
#: each replaced piece's own file: its workload (a Model of its own, get_inputs), then its ModelNew
_KG_PIECES = {{
{pieces}
}}


class _KgTracer(torch.fx.Tracer):
    proxy_buffer_attributes = True      # buffers stay live get_attr nodes


def _kg_piece_class(name, source):
    """A piece's file run in a namespace of its own (so its Model is not the reference's)."""
    filename = "<kernelgate piece " + name + ">"
    _kg_linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)   # for inspect (Triton)
    ns = {{"__name__": "kg_piece_" + name}}
    exec(compile(source, filename, "exec"), ns)
    return ns["ModelNew"]


_KG_CLASSES = {{name: _kg_piece_class(name, src) for name, src in _KG_PIECES.items()}}   # built at import


def _kg_recompose(model, device):
    """The reference's forward traced and split; each replaced piece bound to the model's own tensors."""
    gm = torch.fx.GraphModule(model, _KgTracer().trace(model), type(model).__name__)
    names = {{}}
    split = _kg_split_module(gm, model, lambda n: _KG_PIECE_OF[n.name], names)
    for name, cls in _KG_CLASSES.items():
        piece = cls().to(device).eval()
        for key, tensor in list(piece.state_dict(keep_vars=True).items()):
            top, _, rest = key.partition(".")
            whole_key = names[name + "." + top] + "." + rest       # the model's name for the same tensor
            owner_path, _, leaf = key.rpartition(".")
            owner = piece.get_submodule(owner_path)
            if leaf in owner._parameters:
                whole = owner._parameters[leaf] = model.get_parameter(whole_key)
            else:
                whole = owner._buffers[leaf] = model.get_buffer(whole_key)
            if tuple(whole.shape) != tuple(tensor.shape):
                raise RuntimeError(f"piece {{name}}: {{key}} has shape {{tuple(tensor.shape)}}, "
                                   f"the model's {{whole_key}} {{tuple(whole.shape)}}")
        setattr(split, name, piece)
    return split


class ModelNew(Model):
    def forward(self, *args):
        if self.training:
            return super().forward(*args)
        split = self.__dict__.get("_kg_split")
        if split is None:
            shadow = Model.__new__(Model)
            shadow.__dict__ = self.__dict__          # the same parameters and submodules, the reference's forward
            device = next((a.device for a in args if isinstance(a, torch.Tensor)), torch.device("cpu"))
            split = _kg_recompose(shadow, device)
            object.__setattr__(self, "_kg_split", split)   # not a submodule: state_dict keys unchanged
        return split(*args)
'''


def recompose_body(split: Split, codes: dict[str, str]) -> str:
    """The candidate's code after the reference: ModelNew with each named piece's code substituted."""
    if not codes:
        raise ValueError("recompose_body: no piece to substitute")
    entries = []
    for name, code in codes.items():
        text = split.get(name).source.rstrip() + "\n\n\n# ---- the optimized piece ----\n" + code.strip() + "\n"
        entries.append(f"    {name!r}: {_literal(text)},")
    return RECOMPOSE.format(piece_of=split.piece_of, pieces="\n".join(entries)).strip() + "\n"
