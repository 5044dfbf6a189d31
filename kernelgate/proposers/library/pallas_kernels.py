"""The JAX Pallas strategies: which kernels/ rewrites they are, when they apply, and the variants the search tries.

Kernels, launchers and rewrites live in kernelgate/kernels (the pointwise/row IR shared with Triton and C++:
ir.py, fx.py; pallas_render.py, pallas_launch.py, pallas_rewrite.py). Candidates using them bundle the runtime
"pallas" (kernels/manifest.py). They apply only where the user asked for the language (`--languages pallas`:
Context.allows), JAX is importable and the graph has the pattern; with pallas asked for and no JAX,
KG_PALLAS_NO_JAX says what to install (logged once here; the CLI may show it: `missing`).
"""
from __future__ import annotations

import logging
from typing import Any, Callable

from ...kernels.pallas_launch import KG_PALLAS_NO_JAX
from ...kernels.pallas_render import kg_pallas_available
from ...kernels.pallas_rewrite import (kg_rewrite_pallas_gemm, kg_rewrite_pallas_layernorm, kg_rewrite_pallas_pointwise,
                                       kg_rewrite_pallas_softmax)

__all__ = ["KERNEL_RUNTIMES", "KG_PALLAS_NO_JAX", "LANGUAGE", "PALLAS_REWRITES", "RUNTIME", "STRATEGIES", "applies",
           "kg_pallas_available", "missing", "strategies"]

RUNTIME = "pallas"                  # what candidates using these rewrites bundle (kernels/manifest.py)
LANGUAGE = "pallas"                 # the --languages name that enables them

PALLAS_REWRITES = {
    "pallas-gemm-epilogue": kg_rewrite_pallas_gemm,
    "pallas-layernorm": kg_rewrite_pallas_layernorm,
    "pallas-softmax": kg_rewrite_pallas_softmax,
    "pallas-pointwise": kg_rewrite_pallas_pointwise,
}

KERNEL_RUNTIMES = dict.fromkeys(PALLAS_REWRITES, RUNTIME)

# (block_m, block_n, block_k) of the GEMM (powers of 2: the GPU lowering needs them), the first the default
GEMM_BLOCKS = ((64, 64, 32), (128, 128, 32), (128, 64, 64), (64, 128, 32), (32, 64, 64))


def gemm_variants(ctx: Any = None) -> list[dict[str, int]]:
    return [{"block_m": bm, "block_n": bn, "block_k": bk} for bm, bn, bk in GEMM_BLOCKS]


def pointwise_variants(ctx: Any = None) -> list[dict[str, int]]:
    return [{"block": 1024}, {"block": 4096}]


_WARNED: list[bool] = []


def missing(ctx: Any) -> str | None:
    """KG_PALLAS_NO_JAX when the context allows pallas and JAX cannot be imported (logged once), else None."""
    if not ctx.allows(LANGUAGE) or kg_pallas_available():
        return None
    if not _WARNED:
        logging.getLogger("kernelgate.kernels.pallas").warning(KG_PALLAS_NO_JAX)
        _WARNED.append(True)
    return KG_PALLAS_NO_JAX


def applies(rewrite: str) -> Callable[[Any], bool]:
    """The strategy's test: pallas allowed, JAX importable, the graph has the pattern (graph.analyse counts each
    rewrite of REWRITE_FNS on a traced copy)."""
    return lambda ctx: (ctx.allows(LANGUAGE) and missing(ctx) is None and ctx.graph.patterns.get(rewrite, 0) > 0)


#: (strategy name, rewrite, doc, variants, tuning parameters); library.py makes them Strategy entries
STRATEGIES: tuple[tuple[str, str, str, Callable[[Any], list[dict[str, Any]]], frozenset[str]], ...] = (
    ("pallas:pointwise", "pallas-pointwise", "each group of pointwise ops as one JAX Pallas kernel",
     pointwise_variants, frozenset({"block"})),
    ("pallas:softmax", "pallas-softmax", "row softmax over the last dim as a JAX Pallas kernel",
     lambda ctx: [{}], frozenset()),
    ("pallas:layernorm", "pallas-layernorm", "LayerNorm / RMSNorm over the last dim as a JAX Pallas row kernel",
     lambda ctx: [{}], frozenset()),
    ("pallas:gemm-epilogue", "pallas-gemm-epilogue",
     "linear/matmul + bias + the pointwise ops after it as one blocked JAX Pallas GEMM (epilogue on the fp32 "
     "accumulator tile); block_m/block_n/block_k searched", gemm_variants,
     frozenset({"block_m", "block_n", "block_k"})),
)


def strategies(make: Callable[..., Any], render: Callable[..., str]) -> tuple[Any, ...]:
    """The library's Strategy entries: make(name, kind, applies, render, variants, doc, rewrite, tuning)."""
    return tuple(make(name, "rewrite", applies(rewrite), render, variants, doc, rewrite, tuning)
                 for name, rewrite, doc, variants, tuning in STRATEGIES)
