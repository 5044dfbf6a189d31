"""The Pallas rewrites: torch.fx graph -> calls of the Pallas launchers (pallas_launch.py).

- pointwise: each group (fx.py) of at least 2 pointwise ops -> one Pallas kernel;
- softmax (torch / F / method / nn.Softmax, an int dim, no dtype) -> the row kernel (last dim, else torch);
- LayerNorm over one dim (nn.LayerNorm, F.layer_norm, torch.layer_norm) and RMSNorm over one dim (nn.RMSNorm,
  F.rms_norm) -> the row kernel;
- GEMM epilogue: nn.Linear / F.linear / matmul whose users all lie in one pointwise group -> one Pallas GEMM
  with the bias and the group applied to the accumulator tile (block_m, block_n, block_k: the variant).
Each rewrite returns how many places it changed (0 without JAX: the launchers' module names the missing
package, KG_PALLAS_NO_JAX). Parameters stay get_attr nodes, read at every call (load_state_dict works).

A runtime module (kernels/manifest.py): imports nothing of kernelgate; imports without JAX.
"""

import torch
import torch.fx
import torch.nn.functional as F

from .fx import (_kg_fx_attrs, _kg_fx_bind, _kg_fx_finish, _kg_fx_gemm_of, _kg_fx_groups, _kg_fx_info, _kg_fx_inputs,
                 _kg_fx_number, _kg_fx_program, _kg_fx_replace, _kg_fx_replace_node, _kg_fx_row_op)
from .pallas_launch import kg_pl_gemm, kg_pl_layernorm, kg_pl_pointwise, kg_pl_rmsnorm, kg_pl_softmax
from .pallas_render import kg_pallas_available


def kg_rewrite_pallas_pointwise(gm, block=1024):
    """Every group of at least 2 pointwise ops -> one kg_pl_pointwise call (one Pallas kernel)."""
    if not kg_pallas_available():
        return 0
    _, info = _kg_fx_info(gm)
    n = 0
    for order in _kg_fx_groups(gm, info):
        if len(order) < 2:
            continue
        inputs = _kg_fx_inputs(order, info)
        _kg_fx_replace(gm, info, order, kg_pl_pointwise, (_kg_fx_program(order, info, inputs), (block,), *inputs))
        n += 1
    return _kg_fx_finish(gm, n)


def kg_rewrite_pallas_softmax(gm):
    """Softmax (torch/F/method/nn.Softmax, int dim, no dtype) -> kg_pl_softmax (last dim, else torch)."""
    if not kg_pallas_available():
        return 0
    mods = dict(gm.named_modules())
    n = 0
    for node in list(gm.graph.nodes):
        row = _kg_fx_row_op(node, mods)
        if row is not None and row[0] == "softmax":
            _kg_fx_replace_node(gm, node, kg_pl_softmax, (row[1], row[2]))
            n += 1
    return _kg_fx_finish(gm, n)


def _kg_pl_rms_of(node, mods):
    """(input, normalized shape, weight, eps) of an RMSNorm over one dim (nn.RMSNorm, F.rms_norm), else None;
    weight a module attribute path (str), a Node or None."""
    if node.op == "call_module" and type(mods.get(node.target)) is getattr(torch.nn, "RMSNorm", None):
        m = mods[node.target]
        if len(node.args) != 1 or node.kwargs:
            return None
        x, shape, w, eps = node.args[0], tuple(m.normalized_shape), \
            (node.target + ".weight" if m.weight is not None else None), m.eps
    elif node.op == "call_function" and node.target is getattr(F, "rms_norm", None):
        names = ("input", "normalized_shape", "weight", "eps")
        bound = _kg_fx_bind(node, names)
        if len(node.args) > len(names) or set(bound) - set(names):
            return None
        x, shape, w, eps = bound.get("input"), bound.get("normalized_shape"), bound.get("weight"), bound.get("eps")
        if not isinstance(shape, (tuple, list)):
            shape = (shape,)
        shape = tuple(shape)
    else:
        return None
    if not isinstance(x, torch.fx.Node) or len(shape) != 1 or not all(isinstance(d, int) for d in shape) or \
            not (eps is None or (_kg_fx_number(eps) and not isinstance(eps, bool))):
        return None
    return x, shape, w, eps


def kg_rewrite_pallas_layernorm(gm):
    """LayerNorm (nn.LayerNorm / F.layer_norm / torch.layer_norm) and RMSNorm (nn.RMSNorm / F.rms_norm) over one
    dim -> kg_pl_layernorm / kg_pl_rmsnorm."""
    if not kg_pallas_available():
        return 0
    mods = dict(gm.named_modules())
    n = 0
    for node in list(gm.graph.nodes):
        row = _kg_fx_row_op(node, mods)
        if row is not None and row[0] == "layernorm":
            _, x, shape, w, b, eps = row
            w, b = _kg_fx_attrs(gm, node, w, b)
            _kg_fx_replace_node(gm, node, kg_pl_layernorm, (x, shape, w, b, eps))
            n += 1
            continue
        rms = _kg_pl_rms_of(node, mods)
        if rms is not None:
            x, shape, w, eps = rms
            (w,) = _kg_fx_attrs(gm, node, w)
            _kg_fx_replace_node(gm, node, kg_pl_rmsnorm, (x, shape, w, eps))
            n += 1
    return _kg_fx_finish(gm, n)


def kg_rewrite_pallas_gemm(gm, block_m=64, block_n=64, block_k=32):
    """Each Linear / F.linear / matmul whose users all lie in one group of pointwise ops -> one kg_pl_gemm call:
    the GEMM, its bias and the group in one Pallas kernel."""
    if not kg_pallas_available():
        return 0
    mods, info = _kg_fx_info(gm)
    n = 0
    for order in _kg_fx_groups(gm, info):
        inputs = _kg_fx_inputs(order, info)
        for g in inputs:
            gemm = _kg_fx_gemm_of(g, mods)              # read now: an earlier rewrite may have changed its args
            if gemm is None or not all(u in order for u in g.users):
                continue
            kind, x, w, b = gemm
            others = [a for a in inputs if a is not g]
            program = _kg_fx_program(order, info, [g] + others)
            w, b = _kg_fx_attrs(gm, order[-1], w, b)
            _kg_fx_replace(gm, info, order, kg_pl_gemm, (program, (block_m, block_n, block_k), kind, x, w, b, *others),
                           dead=(g,))
            n += 1
            break
    return _kg_fx_finish(gm, n)
