"""The C++ rewrites for the CPU: torch.fx graph -> calls of the C++ launchers (cpp_launch.py).

- pointwise: each group (fx.py) of at least 2 pointwise ops the C++ renderer computes as torch does (every
  op of ir._KG_OPS; numbers that are finite in float32), with at most _KG_CPP_MAX_INPUTS inputs -> one
  generated loop;
- softmax (torch / F / method / nn.Softmax, an int dim, no dtype) -> the row kernel (last dim, else torch);
- LayerNorm over one dim (nn.LayerNorm, F.layer_norm, torch.layer_norm) -> the row kernel.
Each rewrite returns how many places it changed (0 without a C++ compiler) and records the kernels it needs.
Parameters stay get_attr nodes, read at every call (load_state_dict works).

A runtime module (kernels/manifest.py): imports nothing of kernelgate.
"""

import struct

import torch.fx

from .cpp_launch import (_kg_cpp_missing, _kg_cpp_program, _kg_cpp_want, kg_cpp_layernorm, kg_cpp_pointwise,
                         kg_cpp_softmax)
from .cpp_render import _KG_CPP_LAYERNORM, _KG_CPP_SOFTMAX
from .fx import (_kg_fx_attrs, _kg_fx_finish, _kg_fx_groups, _kg_fx_info, _kg_fx_inputs, _kg_fx_program,
                 _kg_fx_replace, _kg_fx_replace_node, _kg_fx_row_op)

_KG_CPP_MAX_INPUTS = 12


def _kg_cpp_scalar(v):
    """v is a number the kernel can hold as a finite float32 literal (not a bool)."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return False
    try:
        f = struct.unpack("<f", struct.pack("<f", float(v)))[0]
    except (OverflowError, struct.error):
        return False
    return abs(f) != float("inf") and f == f


def _kg_cpp_accepts(op, operands, params):
    return all(isinstance(a, torch.fx.Node) or _kg_cpp_scalar(a) for a in operands) and \
        all(p is None or _kg_cpp_scalar(p) for p in params)


def kg_rewrite_cpp_pointwise(gm):
    """Each group of >= 2 pointwise ops -> one kg_cpp_pointwise call."""
    if _kg_cpp_missing():
        return 0
    _, info = _kg_fx_info(gm, _kg_cpp_accepts)
    n = 0
    for order in _kg_fx_groups(gm, info):
        inputs = _kg_fx_inputs(order, info)
        if len(order) < 2 or not inputs or len(inputs) > _KG_CPP_MAX_INPUTS:
            continue
        program = _kg_fx_program(order, info, inputs)
        _kg_fx_replace(gm, info, order, kg_cpp_pointwise, (program, *inputs))
        _kg_cpp_want(*_kg_cpp_program(program, len(inputs)))
        n += 1
    return _kg_fx_finish(gm, n)


def kg_rewrite_cpp_softmax(gm):
    """Softmax (torch/F/method/nn.Softmax, int dim, no dtype) -> kg_cpp_softmax (last dim, else torch)."""
    if _kg_cpp_missing():
        return 0
    mods = dict(gm.named_modules())
    n = 0
    for node in list(gm.graph.nodes):
        row = _kg_fx_row_op(node, mods)
        if row is not None and row[0] == "softmax":
            _kg_fx_replace_node(gm, node, kg_cpp_softmax, (row[1], row[2]))
            n += 1
    if n:
        _kg_cpp_want("kg_softmax", _KG_CPP_SOFTMAX)
    return _kg_fx_finish(gm, n)


def kg_rewrite_cpp_layernorm(gm):
    """nn.LayerNorm with a 1-D normalized_shape and F.layer_norm over one dim -> kg_cpp_layernorm."""
    if _kg_cpp_missing():
        return 0
    mods = dict(gm.named_modules())
    n = 0
    for node in list(gm.graph.nodes):
        row = _kg_fx_row_op(node, mods)
        if row is None or row[0] != "layernorm":
            continue
        _, x, shape, w, b, eps = row
        w, b = _kg_fx_attrs(gm, node, w, b)
        _kg_fx_replace_node(gm, node, kg_cpp_layernorm, (x, shape, w, b, eps))
        n += 1
    if n:
        _kg_cpp_want("kg_layernorm", _KG_CPP_LAYERNORM)
    return _kg_fx_finish(gm, n)
