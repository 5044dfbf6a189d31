"""What each generated-kernel strategy would fuse in a workload: the strategy side of the fusion estimates.

The profiling package prices a fusion (profiling/fusion.py: bytes kept on chip, launches removed, on a
machine model) without knowing any strategy; this module, next to the strategies it describes, says what
each of them fuses, using the kernels' own grouping of pointwise ops and GEMM epilogues (kernels/fx.py). The
names are the strategy library's (library.PRIORS, library.ESTIMATE_TRUSTED).
"""
from __future__ import annotations

import math
from typing import Any, Sequence

import torch

from ...kernels import fx as kfx
from ...profiling.fusion import Fusion
from .fx_rewrites import kg_trace


def _nbytes(node: Any) -> int:
    tm = node.meta.get("tensor_meta") if hasattr(node, "meta") else None
    if tm is None or not hasattr(tm, "shape"):
        return 0
    return int(math.prod(tm.shape)) * tm.dtype.itemsize


def strategy_fusions(model: torch.nn.Module, inputs: Sequence[Any]) -> dict[str, Fusion]:
    """What each generated-kernel strategy would fuse in `model` (the trusted reference), by strategy name.

    Traced as the strategies trace it, shapes propagated on meta tensors: pointwise groups (at least two
    ops) keep their intermediates on chip and launch once; a library GEMM + fused epilogue does that
    for the groups a GEMM feeds; a Triton GEMM with the epilogue in-kernel also keeps the GEMM's output
    on chip and saves its launch. Strategies with nothing to fuse are left out.

    A `profiling.fusion.FusionSource`: the search prices it with `fusion.strategy_estimates`."""
    import copy

    from torch.fx.passes.shape_prop import ShapeProp

    meta = model if all(t.is_meta for t in model.state_dict().values()) else copy.deepcopy(model).to("meta")
    gm = kg_trace(meta)
    ShapeProp(gm).propagate(*[x.to("meta") if isinstance(x, torch.Tensor) else x for x in inputs])
    mods, info = kfx._kg_fx_info(gm)
    pw = [0, 0, 0]          # intermediate bytes, launches removed, bytes x reads
    epi = [0, 0, 0]
    gemm_out = [0, 0]       # GEMM output bytes kept on chip, GEMM launches folded
    for order in kfx._kg_fx_groups(gm, info):
        inner = sum(_nbytes(n) for n in order[:-1])
        reads = sum(_nbytes(n) * len(n.users) for n in order[:-1])
        if len(order) >= 2:
            pw[0], pw[1], pw[2] = pw[0] + inner, pw[1] + len(order) - 1, pw[2] + reads
        feeding = [g for g in kfx._kg_fx_inputs(order, info)
                   if kfx._kg_fx_gemm_of(g, mods) is not None and all(u in order for u in g.users)]
        if feeding:
            epi[0], epi[1], epi[2] = epi[0] + inner, epi[1] + len(order) - 1, epi[2] + reads
            gemm_out[0] += _nbytes(feeding[0])
            gemm_out[1] += 1
    out: dict[str, Fusion] = {}
    if pw[1]:
        for name in ("triton:pointwise", "cpp:pointwise"):
            out[name] = Fusion(name, pw[0], pw[1], max(1, round(pw[2] / pw[0])) if pw[0] else 1)
    if gemm_out[1]:         # a lone activation after a GEMM with bias: the same two launches, nothing saved
        out["triton:gemm-epilogue"] = Fusion("triton:gemm-epilogue", epi[0], epi[1],
                                             max(1, round(epi[2] / epi[0])) if epi[0] else 1)
    if gemm_out[1]:
        total = epi[0] + gemm_out[0]
        out["triton:gemm"] = Fusion("triton:gemm", total, epi[1] + gemm_out[1],
                                    max(1, round((epi[2] + gemm_out[0]) / total)) if total else 1)
    return out
