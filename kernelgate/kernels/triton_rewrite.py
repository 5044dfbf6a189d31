"""The Triton rewrites: torch.fx graph -> calls of the Triton launchers (triton_launch.py).

- pointwise: every group (fx.py) of at least 2 pointwise ops -> one generated kernel;
- GEMM epilogue: nn.Linear / F.linear / matmul followed by a group. "library": the GEMM without bias by
  torch (cuBLAS), then one generated kernel applying the bias and the group; "triton": one generated Triton
  GEMM with the bias and the group applied to the accumulator tile before the store;
- row: softmax / LayerNorm over the last dim whose input is a group -> one row kernel with the group as
  its prologue; row reduce: a sum/mean over the last dim between two groups -> one row kernel.
Each rewrite returns how many places it changed (0 without Triton). Parameters stay get_attr nodes, read at
every call (load_state_dict works).

A runtime module (kernels/manifest.py): imports nothing of kernelgate; imports without Triton.
"""

import torch
import torch.fx

from .fx import (_kg_fx_attrs, _kg_fx_finish, _kg_fx_gemm_of, _kg_fx_groups, _kg_fx_info, _kg_fx_inputs,
                 _kg_fx_known_fp32, _kg_fx_program, _kg_fx_reduction, _kg_fx_replace, _kg_fx_replace_node,
                 _kg_fx_row_op)
from .ir import _KG_IR_IDENTITY
from .triton_launch import kg_tf_gemm, kg_tf_pointwise, kg_tf_row, kg_tf_rowred

try:
    import triton
except ImportError:  # the rewrites then apply nowhere
    triton = None


def kg_rewrite_triton_pointwise(gm, block=1024, num_warps=4):
    """Every group of at least 2 pointwise ops -> one kg_tf_pointwise call (one generated kernel)."""
    if triton is None:
        return 0
    _, info = _kg_fx_info(gm)
    n = 0
    for order in _kg_fx_groups(gm, info):
        if len(order) < 2:
            continue
        inputs = _kg_fx_inputs(order, info)
        _kg_fx_replace(gm, info, order, kg_tf_pointwise,
                       (_kg_fx_program(order, info, inputs), (block, num_warps), *inputs))
        n += 1
    return _kg_fx_finish(gm, n)


def _kg_tf_rewrite_gemms(gm, cfg, min_ops, fp32_weights=True, only_fp32=False):
    """Each GEMM whose users all lie in one pointwise group (bias + group of at least min_ops ops) -> one
    kg_tf_gemm call; fp32_weights False leaves GEMMs with a known fp32 weight alone, only_fp32 True takes
    only those."""
    mods, info = _kg_fx_info(gm)
    n = 0
    for order in _kg_fx_groups(gm, info):
        inputs = _kg_fx_inputs(order, info)
        for g in inputs:
            gemm = _kg_fx_gemm_of(g, mods)              # read now: an earlier rewrite may have changed its args
            if gemm is None or not all(u in order for u in g.users):
                continue
            kind, x, w, b = gemm
            if len(order) + (b is not None) < min_ops or (not fp32_weights and _kg_fx_known_fp32(gm, w)) \
                    or (only_fp32 and not _kg_fx_known_fp32(gm, w)):
                continue
            others = [a for a in inputs if a is not g]
            program = _kg_fx_program(order, info, [g] + others)
            w, b = _kg_fx_attrs(gm, order[-1], w, b)
            _kg_fx_replace(gm, info, order, kg_tf_gemm, (program, cfg, kind, x, w, b, *others), dead=(g,))
            n += 1
            break
    return _kg_fx_finish(gm, n)


def kg_rewrite_triton_epilogue(gm, block=1024, num_warps=4):
    """Linear/matmul (+ bias) -> pointwise ops (bias and at least 2 ops in all): torch's GEMM without bias,
    then one generated kernel for bias + the ops."""
    if triton is None:
        return 0
    return _kg_tf_rewrite_gemms(gm, ("library", block, num_warps), 2)


def kg_rewrite_triton_gemm(gm, block_m=128, block_n=128, block_k=64, num_warps=8, num_stages=3,
                           fp32_precision=""):
    """Linear/matmul (+ bias) -> pointwise ops: one generated Triton GEMM with the epilogue in-kernel.
    Without fp32_precision, GEMMs with a known fp32 weight are left alone (the fp32 tensor-core formats
    are the contract's to allow; an IEEE fp32 Triton GEMM would not beat cuBLAS)."""
    if triton is None:
        return 0
    cfg = ("triton", block_m, block_n, block_k, num_warps, num_stages, fp32_precision)
    return _kg_tf_rewrite_gemms(gm, cfg, 1, bool(fp32_precision))


def kg_rewrite_triton_gemm_3xtf32(gm, block_m=128, block_n=128, block_k=64, num_warps=8, num_stages=3):
    """fp32 Linear/matmul (+ bias) (-> pointwise ops, or none) as one generated Triton GEMM whose products are split
    3xTF32 (a = a_hi + a_lo in tf32, a_hi*b_hi + a_hi*b_lo + a_lo*b_hi on tensor cores, fp32 accumulation):
    the error stays at the fp32 level, and the gate checks it like any other candidate's; no global flag
    changes, no lower-precision contract needed."""
    if triton is None:
        return 0
    cfg = ("triton", block_m, block_n, block_k, num_warps, num_stages, "tf32x3")
    n = _kg_tf_rewrite_gemms(gm, cfg, 1, True, only_fp32=True)          # with their epilogues
    return n + _kg_fx_finish(gm, _kg_tf_rewrite_bare_gemms(gm, cfg))    # then those without one


def _kg_tf_rewrite_bare_gemms(gm, cfg):
    """GEMMs with a known fp32 weight and no pointwise group after them (left by the epilogue pass) -> one
    kg_tf_gemm each, with the identity as its epilogue (the bias, if any, is added in-kernel)."""
    mods = dict(gm.named_modules())
    n = 0
    for node in list(gm.graph.nodes):
        gemm = _kg_fx_gemm_of(node, mods)
        if gemm is None or not _kg_fx_known_fp32(gm, gemm[2]):
            continue
        kind, x, w, b = gemm
        w, b = _kg_fx_attrs(gm, node, w, b)
        _kg_fx_replace_node(gm, node, kg_tf_gemm, (_KG_IR_IDENTITY, cfg, kind, x, w, b))
        n += 1
    return n


def kg_rewrite_triton_row(gm):
    """softmax / LayerNorm over the last dim whose input is a group of pointwise ops (used only there)
    -> one generated row kernel with the group computed as each row is loaded."""
    if triton is None:
        return 0
    mods, info = _kg_fx_info(gm)
    roots = {order[-1]: order for order in _kg_fx_groups(gm, info)}
    n = 0
    for node in list(gm.graph.nodes):
        row = _kg_fx_row_op(node, mods)
        if row is None or row[1] not in roots or (row[0] == "softmax" and row[2] != -1):
            continue
        kind, x, _, w, b, eps = row
        order = roots.pop(x)
        if len(x.users) != 1:
            continue
        inputs = _kg_fx_inputs(order, info)
        program = _kg_fx_program(order, info, inputs)
        w, b = _kg_fx_attrs(gm, node, w, b)
        _kg_fx_replace_node(gm, node, kg_tf_row, (program, (kind,), w, b, eps, *inputs))
        for m in reversed(order):
            gm.graph.erase_node(m)
            info.pop(m, None)
        n += 1
    return _kg_fx_finish(gm, n)


def kg_rewrite_triton_rowreduce(gm):
    """A sum/mean over the last dim (keepdim) of a pointwise group (or of a tensor), read only by one
    pointwise group -> one generated row kernel (RMSNorm written out, variance-style normalisations)."""
    if triton is None:
        return 0
    _, info = _kg_fx_info(gm)
    groups = _kg_fx_groups(gm, info)
    root_of = {order[-1]: order for order in groups}
    group_of = {m: order for order in groups for m in order}
    n = 0
    for node in list(gm.graph.nodes):
        red = _kg_fx_reduction(node)
        if red is None or not node.users or not isinstance(node.args[0], torch.fx.Node):
            continue
        src = node.args[0]
        g2 = group_of.get(next(iter(node.users)))
        if g2 is None or any(group_of.get(u) is not g2 for u in node.users) or group_of.get(src) is g2:
            continue
        if src in root_of and len(src.users) == 1 and root_of[src] is not g2:
            g1 = root_of[src]
            in1 = _kg_fx_inputs(g1, info)
            prog1 = _kg_fx_program(g1, info, in1)
        else:
            g1, in1, prog1 = [], [src], _KG_IR_IDENTITY       # the tensor itself (x * 1.0 is exact)
        in2 = _kg_fx_inputs(g2, info)
        rk = in2.index(node)
        prog2 = _kg_fx_program(g2, info, in2)
        rest = [a for a in in2 if a is not node]
        root = g2[-1]
        with gm.graph.inserting_before(root):
            new = gm.graph.call_function(kg_tf_rowred, (prog1, red, prog2, rk, len(in1), *in1, *rest))
        root.replace_all_uses_with(new)
        for m in list(reversed(g2)) + [node] + list(reversed(g1)):
            gm.graph.erase_node(m)
            info.pop(m, None)
        for order in (g1, g2):
            for m in order:
                group_of.pop(m, None)
            if order:
                root_of.pop(order[-1], None)
        n += 1
    return _kg_fx_finish(gm, n)
