"""Strategies as candidate-source generators, and the library proposer that samples and stacks them.

A candidate file is the reference source verbatim, then one class per strategy level, each a subclass
of the level below (`Model` at the bottom), rebound to `ModelNew`. So the state_dict layout is the
reference's, a level calls the one below with `super().forward`, and strategies stack.
"""
from __future__ import annotations

import inspect
import random
from dataclasses import dataclass, field
from typing import Any, Callable

from ...kernels import manifest
from ...records import Candidate, Level
from .. import EXPLORE, REFINE, Context, make_candidate
from . import cpp_kernels, fx_algebra, fx_rewrites, onednn, pallas_kernels, precision, triton_fusion, triton_kernels
from .runtime_levels import (GPU, _class, _compile_applies, _compile_modes, _cudagraph_variants, _has_conv,
                             _render_channels_last, _render_compile, _render_cudagraph, _render_cudnn_benchmark,
                             _render_precision)

REWRITE_FNS = {**fx_rewrites.REWRITES, **fx_algebra.ALGEBRA_REWRITES, **triton_kernels.TRITON_REWRITES, **triton_fusion.TRITON_FUSION_REWRITES,
               **cpp_kernels.CPP_REWRITES, **onednn.ONEDNN_REWRITES, **precision.PRECISION_REWRITES,
               **pallas_kernels.PALLAS_REWRITES}

#: rewrite -> the kernels/ runtime its candidates bundle (kernels/manifest.py)
KERNEL_RUNTIMES = {**dict.fromkeys(triton_fusion.TRITON_FUSION_REWRITES, triton_fusion.RUNTIME),
                   **dict.fromkeys(cpp_kernels.CPP_REWRITES, cpp_kernels.RUNTIME), **pallas_kernels.KERNEL_RUNTIMES}

@dataclass(frozen=True)
class Strategy:
    """One transformation; `variants` are its parameter settings; `kind` says how it stacks."""

    name: str
    kind: str                                   # rewrite | runtime | precision
    applies: Callable[[Context], bool]
    render: Callable[[Context, dict[str, Any], str], str]   # (ctx, params, class tag) -> body
    variants: Callable[[Context], list[dict[str, Any]]] = field(default=lambda ctx: [{}])
    doc: str = ""
    rewrite: str = ""                           # key in REWRITE_FNS, for kind "rewrite"
    #: variant parameters that schedule a kernel, never change what it computes (tiles, warps, stages; docs/GATE.md
    #: "Parametric variants"): never precision, a code path, a compile mode, output buffers or a layout
    tuning: frozenset[str] = frozenset()


def _tag(name: str, params: dict[str, Any]) -> str:
    raw = name + "".join(f"_{k}_{v}" for k, v in sorted(params.items()))
    return "".join(ch if ch.isalnum() else "_" for ch in raw).strip("_")[:60]


# ------------------------------------------------------------------ rewrites (torch.fx)

_FX_HEADER = "# graph rewrites (torch.fx), applied to the level below at the first call\n"


def _rewrite_source(rewrites: list[str]) -> str:
    """The code the rewrites run, in the candidate's file (self-contained): fx_rewrites' functions (triton_kernels' or
    onednn's for their rewrites) pasted verbatim, then the kernels/ runtimes they need (kernels/manifest.py's bundle)."""
    src = inspect.getsource(fx_rewrites).split("REWRITES = {")[0]
    if any(r in fx_algebra.ALGEBRA_REWRITES for r in rewrites):
        src += "\n" + inspect.getsource(fx_algebra).split("ALGEBRA_REWRITES = {")[0]
    if any(r in triton_kernels.TRITON_REWRITES for r in rewrites):
        src += "\n" + inspect.getsource(triton_kernels).split("TRITON_REWRITES = {")[0]
    if any(r in onednn.ONEDNN_REWRITES for r in rewrites):
        src += "\n" + inspect.getsource(onednn).split("ONEDNN_REWRITES = {")[0]
    runtimes = {KERNEL_RUNTIMES[r] for r in rewrites if r in KERNEL_RUNTIMES}
    if runtimes:
        src += "\n" + manifest.bundle(runtimes)
    return src


def _render_rewrites(rewrites: list[tuple[str, dict[str, Any]]], tag: str) -> str:
    """One level that traces the level below once (buffers kept live: fx_rewrites.kg_trace) and
    applies every listed rewrite to the graph. In training mode the level below runs as it is: the gate
    verifies eval mode only, and a trace would freeze `self.training` (dropout, batch statistics) into
    the graph; so the graph is built and used in eval mode only."""
    calls = "\n".join(f"            {REWRITE_FNS[r].__name__}(gm{''.join(f', {k}={v!r}' for k, v in p.items())})"
                      for r, p in rewrites)
    body = f'''    _kg_rewrite_level = "{tag}"        # a compile level right above compiles the rewritten graph

    def forward(self, *args):
        if self.training:
            return super().forward(*args)
        gm = self.__dict__.get("_kg_gm_{tag}")
        if gm is None:
            base = __class__.__bases__[0]
            shadow = base.__new__(base)
            shadow.__dict__ = self.__dict__          # same parameters and submodules, the level below's forward
            gm = kg_trace(shadow)
{calls}
            object.__setattr__(self, "_kg_gm_{tag}", gm)  # not a submodule: state_dict keys unchanged
        return gm(*args)'''
    return _FX_HEADER + _class(tag, body)


def _render_rewrite(ctx: Context, params: dict[str, Any], tag: str) -> str:
    raise AssertionError("rewrites are rendered together by render()")


def _rewrite_applies(rewrite: str, gpu_only: bool = False, cpu_only: bool = False) -> Callable[[Context], bool]:
    return lambda ctx: (ctx.graph.patterns.get(rewrite, 0) > 0 and (ctx.target == GPU or not gpu_only)
                        and (ctx.target == "cpu" or not cpu_only))


def _rewrite(name: str, key: str, doc: str, gpu_only: bool = False, cpu_only: bool = False,
             variants: Callable[[Context], list[dict[str, Any]]] = lambda ctx: [{}],
             tuning: frozenset[str] = frozenset()) -> Strategy:
    return Strategy(name, "rewrite", _rewrite_applies(key, gpu_only, cpu_only), _render_rewrite, variants, doc, key,
                    tuning)


def _triton_gemm_applies(ctx: Context) -> bool:
    """GEMM + epilogue with a weight not known to be fp32 (pattern "triton-gemm"), or any GEMM + epilogue
    when the contract allows tf32 for fp32 operands."""
    p = ctx.graph.patterns
    return ctx.target == GPU and (p.get("triton-gemm", 0) > 0 or
                                  ("tf32" in ctx.contract.precision and p.get("triton-epilogue", 0) > 0))


STRATEGIES: tuple[Strategy, ...] = (
    _rewrite("rewrite:avgpool-as-conv", "avgpool-as-conv", "average pooling as a depthwise convolution"),
    _rewrite("rewrite:fold-bn", "fold-bn", "eval-mode batch norm folded into the preceding conv/linear weights"),
    _rewrite("rewrite:fold-scale", "fold-scale", "a constant scale after a conv/linear folded into its weights"),
    _rewrite("rewrite:sdpa", "sdpa", "matmul-softmax-matmul attention as scaled_dot_product_attention"),
    _rewrite("rewrite:merge-linear", "merge-linear", "consecutive linear maps merged into one"),
    _rewrite("rewrite:reduce-linear", "reduce-linear", "a linear map whose output features are summed or averaged "
             "(through feature-wise scales and shifts) as one matrix-vector product"),
    _rewrite("rewrite:reduce-conv", "reduce-conv", "a convolution's output summed or averaged over spatial dims "
             "(through channel-wise scales and shifts) as a convolution over the input's sums per kernel offset, "
             "the reduced dims moved into the channels"),
    _rewrite("rewrite:triangular-matmul", "triangular-matmul", "the kept triangle of a matrix product (tril/triu "
             "of a matmul) computed by row blocks over the columns it keeps: about half the GEMM"),
    _rewrite("rewrite:activation-idioms", "activation-idioms",
             "activations written out (x * sigmoid(x), the tanh form of GELU) as the library's one-kernel versions"),
    _rewrite("triton:softmax", "triton-softmax", "one-program-per-row Triton softmax (exp2, max subtraction)",
             gpu_only=True, variants=lambda ctx: triton_kernels.VARIANTS["triton-softmax"],
             tuning=frozenset({"num_warps"})),
    _rewrite("triton:layernorm", "triton-layernorm", "one-program-per-row Triton LayerNorm",
             gpu_only=True, variants=lambda ctx: triton_kernels.VARIANTS["triton-layernorm"],
             tuning=frozenset({"num_warps"})),
    _rewrite("triton:attention", "triton-attention",
             "matmul-softmax-matmul attention as one Triton kernel with an online softmax (the score matrix stays "
             "on chip; fp32 operands as 3xTF32)", gpu_only=True,
             variants=lambda ctx: triton_kernels.VARIANTS["triton-attention"],
             tuning=frozenset({"block_m", "block_n", "num_warps", "num_stages"})),
    # generated Triton kernels (kernels/, triton_fusion.py): pointwise groups, and GEMM epilogues
    _rewrite("triton:pointwise", "triton-pointwise", "each group of pointwise ops as one generated Triton kernel",
             gpu_only=True, variants=lambda ctx: triton_fusion.VARIANTS["triton-pointwise"],
             tuning=frozenset({"block", "num_warps"})),
    _rewrite("triton:rowreduce", "triton-rowreduce",
             "a sum/mean over the last dim between two groups of pointwise ops (RMSNorm written out) as one "
             "generated row kernel", gpu_only=True),
    _rewrite("triton:row", "triton-row",
             "softmax / LayerNorm over the last dim with the pointwise ops before it computed as each row is "
             "loaded: one generated kernel, one read and one write of the row", gpu_only=True),
    _rewrite("triton:gemm-epilogue", "triton-epilogue",
             "linear/matmul by cuBLAS without bias, then bias + the pointwise ops after it as one generated kernel",
             gpu_only=True, variants=lambda ctx: triton_fusion.VARIANTS["triton-epilogue"],
             tuning=frozenset({"block", "num_warps"})),
    Strategy("triton:gemm", "rewrite", _triton_gemm_applies, _render_rewrite,
             lambda ctx: triton_fusion.gemm_variants("tf32" in ctx.contract.precision),
             doc="a generated Triton GEMM with bias + the pointwise ops after it applied in-kernel "
                 "(bf16/fp16, or fp32 where the contract allows tf32); tiles, warps and stages searched together",
             rewrite="triton-gemm",
             tuning=frozenset({"block_m", "block_n", "block_k", "num_warps", "num_stages"})),
    _rewrite("triton:gemm-3xtf32", "triton-gemm-3xtf32",
             "each fp32 linear/matmul (+ bias + the pointwise ops after it) as one generated Triton GEMM with 3xTF32 "
             "products (fp32-level error on tensor cores; no lower-precision contract needed)",
             gpu_only=True, variants=triton_fusion.gemm_3xtf32_variants,
             tuning=frozenset({"block_m", "block_n", "block_k", "num_warps", "num_stages"})),
    # C++ kernels for the CPU (kernels/, cpp_kernels.py); with no C++ compiler their patterns count 0
    _rewrite("cpp:pointwise", "cpp-pointwise", "chains of pointwise ops fused into one generated OpenMP/SIMD C++ loop",
             cpu_only=True),
    _rewrite("cpp:softmax", "cpp-softmax", "OpenMP/SIMD C++ row softmax over the last dim", cpu_only=True),
    _rewrite("cpp:layernorm", "cpp-layernorm", "OpenMP/SIMD C++ LayerNorm over the last dim", cpu_only=True),
    _rewrite("cpu:onednn", "onednn", "Conv2d / Linear (+ eval batch norm) + activation as one pre-packed oneDNN call "
             "(onednn.py)", cpu_only=True, variants=lambda ctx: [{"channels_last": True}, {}] if _has_conv(ctx) else [{}]),
    # workloads already in fp8 / int8 / bf16 (precision.py); matched on a trace with live buffers
    Strategy("precision:fp8-scaled-mm", "rewrite", lambda ctx: precision.applies(ctx, "fp8-scaled-mm"),
             _render_rewrite, doc="fp8 dequantize-then-matmul (bf16/fp16 result) as torch._scaled_mm with its scales",
             rewrite="fp8-scaled-mm"),
    Strategy("precision:fp8-scaled-mm-f32", "rewrite", lambda ctx: precision.applies(ctx, "fp8-scaled-mm-f32"),
             _render_rewrite, doc="as precision:fp8-scaled-mm for fp32 results, under a declared lower precision",
             rewrite="fp8-scaled-mm-f32"),
    Strategy("precision:int8-requant", "rewrite", lambda ctx: precision.applies(ctx, "int8-requant"),
             _render_rewrite, precision.int8_variants,
             doc="int8 matmul + requantization as torch._int_mm and one fused (Triton) epilogue", rewrite="int8-requant"),
    Strategy("precision:bf16-linear-act", "rewrite", lambda ctx: precision.applies(ctx, "bf16-linear-act"),
             _render_rewrite, doc="bf16/fp16 Linear + ReLU/tanh-GELU as one cuBLASLt bias+activation epilogue",
             rewrite="bf16-linear-act"),
    Strategy("runtime:compile", "runtime", _compile_applies, _render_compile, _compile_modes,
             doc="torch.compile with another mode"),
    Strategy("runtime:cudagraph", "runtime", lambda ctx: ctx.target == GPU, _render_cudagraph, _cudagraph_variants,
             doc="CUDA-graph capture of the whole forward, replayed on the inputs where they lie (copied into "
                 "static buffers past a few addresses per shape); outputs in the graph's buffers while no earlier "
                 "one is held, or cloned"),
    Strategy("runtime:channels-last", "runtime", _has_conv, _render_channels_last, doc="channels_last for convolutions"),
    Strategy("runtime:cudnn-benchmark", "runtime", lambda ctx: ctx.target == GPU and _has_conv(ctx),
             _render_cudnn_benchmark, doc="cuDNN autotuning"),
    Strategy("precision", "precision", lambda ctx: bool(ctx.contract.precision), _render_precision,
             lambda ctx: [{"format": f} for f in ctx.contract.precision],
             doc="lower precision, only as the contract declares"),
) + pallas_kernels.strategies(Strategy, _render_rewrite)     # JAX Pallas kernels (kernels/pallas_*.py), --languages pallas


# Expected speedup of each strategy before anything is measured: the explore order (one variant of every strategy
# before a second of any; higher first). Rewrites that remove work or use the workload's own low-precision formats
# lead; runtime configurations, which torch.compile (a baseline) already covers in part, come last.
PRIORS: dict[str, float] = {
    "precision:int8-requant": 4.0, "precision:fp8-scaled-mm": 3.0, "precision:fp8-scaled-mm-f32": 2.0,
    "rewrite:sdpa": 2.0, "rewrite:reduce-linear": 2.0, "rewrite:reduce-conv": 2.0, "rewrite:triangular-matmul": 1.6, "triton:attention": 1.8, "rewrite:merge-linear": 1.6, "rewrite:avgpool-as-conv": 1.5, "precision": 1.5,
    "rewrite:fold-bn": 1.3, "triton:pointwise": 1.3, "cpp:pointwise": 1.3, "precision:bf16-linear-act": 1.3,
    "triton:row": 1.35, "triton:rowreduce": 1.35,
    "rewrite:fold-scale": 1.2, "runtime:cudagraph": 1.2, "rewrite:activation-idioms": 1.2,
    "triton:gemm-epilogue": 1.15, "triton:gemm": 1.1, "triton:gemm-3xtf32": 1.4,
    "triton:softmax": 1.1, "triton:layernorm": 1.1, "runtime:compile": 1.1, "cpp:softmax": 1.05,
    "cpp:layernorm": 1.05, "cpu:onednn": 1.6, "runtime:channels-last": 1.25, "runtime:cudnn-benchmark": 1.05,
}


# What a refiner stacks first on a parent, by the parent's bottleneck (profiling/summary.py "bound"): multiplies PRIORS.
BOOSTS: dict[str, dict[str, float]] = {
    "launch": {"runtime:cudagraph": 2.0, "runtime:compile": 1.5, "triton:pointwise": 1.3, "cpp:pointwise": 1.3},
    "latency": {"runtime:cudagraph": 1.8, "runtime:compile": 1.3},
    "memory": {"triton:pointwise": 1.5, "cpp:pointwise": 1.5, "triton:row": 1.5, "triton:rowreduce": 1.5,
               "triton:gemm-epilogue": 1.4, "rewrite:fold-bn": 1.2, "runtime:channels-last": 1.2, "cpu:onednn": 1.3},
    "compute": {"precision": 1.5, "triton:gemm": 1.4, "triton:gemm-3xtf32": 1.4, "precision:bf16-linear-act": 1.3,
                "runtime:compile": 1.2, "runtime:cudnn-benchmark": 1.2, "cpu:onednn": 1.3},
}


def refine_weight(name: str, bound: str) -> float:
    """How early a refiner tries strategy `name` on a parent whose bottleneck is `bound`."""
    return PRIORS.get(name, 1.0) * BOOSTS.get(bound, {}).get(name, 1.0)


# Strategies whose fusion estimate (fusion_estimates.strategy_fusions) ranked measured savings on the H200
# suite (benchmarks/results/fusion_rank_h200.json); for GEMM replacements it did not (no term for the
# replaced kernel's efficiency), so their order stays the prior's.
ESTIMATE_TRUSTED = ("triton:pointwise", "cpp:pointwise", "triton:gemm-epilogue")


# Levels torch.compile is not stacked on: over the generated GEMM it measured 0.29-0.47x of the GEMM alone
# in all 7 tries of H200 suite runs 3-5 (mlp, linear_bias_gelu; 12-20 ms against 3.3-3.9), at 12-15 s each;
# the kernel time was the same, the rest dynamo's graph breaks (benchmarks/results/h200_compile_over_gemm.json).
# The compile level no longer traces generated calls, but there is nothing left for it to fuse around a
# GEMM that holds its epilogue; kept out until measured otherwise.
NO_COMPILE_ON = ("triton:gemm-3xtf32", "triton:gemm")


# Rewrites that replace the same pattern: stacking one on another finds nothing left to rewrite.
SAME_SITES = {"triton-attention": "sdpa"}


def _site(rewrite: str) -> str:
    return SAME_SITES.get(rewrite, rewrite)


def strategy_family(strategy: str) -> str:
    """A display name's strategy ("triton:row(...) + x" -> "triton:row"), for stored results (benchmarks/)."""
    return strategy.split(" + ")[0].split("(")[0].strip()


#: bottlenecks whose BOOSTS also order the first strategies tried from the reference: a launch-bound forward calls
#: for what acts on the whole forward (graph capture, compile), where a kernel for one op saves a share of little
#: (latency-bound is left out: small kernels on a busy device are not what graph capture removes)
EXPLORE_BOOSTED = ("launch",)


def prior(name: str, ctx: Context | None = None) -> float:
    """PRIORS, scaled for trusted fusion strategies by the predicted speedup over the faster baseline
    (clipped to [0.5, 2]): a fusion that torch.compile's own fusion already beats comes later; and by BOOSTS
    where the faster baseline is (or is expected to be) launch-bound (ctx.bound)."""
    p = refine_weight(name, ctx.bound) if ctx is not None and ctx.bound in EXPLORE_BOOSTED else PRIORS.get(name, 1.0)
    if ctx is not None and name in ESTIMATE_TRUSTED and ctx.baseline_ms and ctx.predicted_ms.get(name):
        p *= min(2.0, max(0.5, ctx.baseline_ms / ctx.predicted_ms[name]))
    return p


def explore_order(options: list[list[tuple[Strategy, dict[str, Any]]]],
                  rng: random.Random, ctx: Context | None = None) -> list[list[tuple[Strategy, dict[str, Any]]]]:
    """Single-strategy options in explore order: round k holds the k-th variant of each strategy (in the
    strategy's own order, which lists the configurations measured fastest first), by prior within a
    round; ties keep a seeded shuffle (deterministic per --seed)."""
    seen: dict[str, int] = {}
    ranked = []
    for lv in options:
        name = lv[0][0].name
        ranked.append((seen.get(name, 0), lv))
        seen[name] = seen.get(name, 0) + 1
    rng.shuffle(ranked)
    keyed = [(k, -prior(lv[0][0].name, ctx), pos, lv) for pos, (k, lv) in enumerate(ranked)]
    return [lv for *_, lv in sorted(keyed, key=lambda t: t[:3])]


def neighbours(ctx: Context, base: list[tuple[Strategy, dict[str, Any]]]) -> list[list[tuple[Strategy, dict[str, Any]]]]:
    """The parent's stack with one level's parameters changed to another of its strategy's variants (tile,
    warp and stage settings of a kernel; a runtime level's mode), nearest in the strategy's order first."""
    out = []
    for j, (s, params) in enumerate(base):
        variants = s.variants(ctx)
        if params not in variants or len(variants) < 2:
            continue
        i = variants.index(params)
        for v in sorted((v for v in variants if v != params), key=lambda v: abs(variants.index(v) - i)):
            out.append((abs(variants.index(v) - i), j, base[:j] + [(s, v)] + base[j + 1:]))
    return [levels for *_, levels in sorted(out, key=lambda t: t[:2])]


def _interleave(first: list, second: list) -> list:
    out = []
    for k in range(max(len(first), len(second))):
        out += first[k:k + 1] + second[k:k + 1]
    return out


def render(ctx: Context, levels: list[tuple[Strategy, dict[str, Any]]]) -> str:
    """The strategy part of a candidate file for a stack of (strategy, params), bottom first.
    Rewrites sit at the bottom and share one traced graph; runtime and precision levels wrap them."""
    parts = ["import torch\nimport torch.fx\n", f"ModelNew = {ctx.reference_class}\n"]
    rewrites = [(s.rewrite, p) for s, p in levels if s.kind == "rewrite"]
    if rewrites:
        parts.append(_rewrite_source([r for r, _ in rewrites]))
        lowp = any(r in precision.PRECISION_REWRITES for r, _ in rewrites)
        if lowp:
            parts.append(precision.source())
        parts.append(_render_rewrites(rewrites, "0_" + _tag("rewrite", {"r": "_".join(r for r, _ in rewrites)})))
    for k, (s, params) in enumerate(levels, start=1):
        if s.kind != "rewrite":
            parts.append(s.render(ctx, params, f"{k}_{_tag(s.name, params)}"))
    return "\n".join(parts)


class Library:
    """The built-in proposer: explorers try every applicable strategy on the reference; refiners stack one more on
    the best verified candidates, or change a level's parameters. A candidate carries its `Candidate.stack`."""

    name = "library"
    modes = (EXPLORE, REFINE)

    def __init__(self, strategies: tuple[Strategy, ...] = STRATEGIES):
        self.strategies = strategies
        self.stacks: dict[str, list[tuple[Strategy, dict[str, Any]]]] = {}

    def _make(self, ctx: Context, levels: list[tuple[Strategy, dict[str, Any]]], parent: str | None,
              generation: int) -> Candidate:
        stack = tuple(Level(s.name, tuple(p.items()), tuple(sorted(s.tuning))) for s, p in levels)
        params = {f"{k}.{s.name}.{pk}": pv for k, (s, p) in enumerate(levels) for pk, pv in p.items()}
        c = make_candidate(ctx, " + ".join(lv.label() for lv in stack), render(ctx, levels), parent=parent,
                           params=params, generation=generation, language="torch", stack=stack)
        self.stacks[c.id] = levels
        return c

    def restore(self, ctx: Context, candidates) -> int:
        """Rebuild the stacks of candidates evaluated before a resume (explored and refined alike) from their
        recorded `stack`; a stack counts only if it renders to the very same candidate. Candidates without a
        stack of this library's strategies (another proposer's, rows stored before stacks were recorded) are
        left out. Returns how many were restored."""
        by = {s.name: s for s in self.strategies}
        n = 0
        for c in candidates:
            if c.id in self.stacks or not c.stack or not all(lv.name in by for lv in c.stack):
                continue
            # the strategy's own variant where it is one (its key order is part of the rendered source)
            levels = [(by[lv.name], next((v for v in by[lv.name].variants(ctx) if v == dict(lv.params)),
                                         dict(lv.params))) for lv in c.stack]
            known = set(self.stacks)
            again = self._make(ctx, levels, c.parent, c.generation)
            if again.id == c.id:
                n += 1
            elif again.id not in known:
                del self.stacks[again.id]
        return n

    def singles(self, ctx: Context) -> list[list[tuple[Strategy, dict[str, Any]]]]:
        """Every applicable strategy's variants, each alone, if its kernel language is allowed (Context.allows)."""
        return [[(s, v)] for s in self.strategies if ctx.allows(s.name) and s.applies(ctx) for v in s.variants(ctx)]

    def propose(self, ctx: Context, rng: random.Random, n: int, generation: int | None = None,
                mode: str | None = None) -> list[Candidate]:
        """Up to n candidates in ctx.mode (or `mode`): refine stacks on the best verified candidates; explore
        and restart try single strategies on the reference. Generation: ctx.generation unless given."""
        generation = ctx.generation if generation is None else generation
        mode = ctx.mode if mode is None else mode
        tried = ctx.tried()
        out: list[Candidate] = []
        if mode != REFINE:
            for levels in explore_order(self.singles(ctx), rng, ctx):
                c = self._make(ctx, levels, None, generation)
                if c.id not in tried and c.id not in {o.id for o in out}:
                    out.append(c)
                if len(out) >= n:
                    break
            return out
        # refine: stack one more strategy on top of the best verified candidates
        ranked = sorted((e for e in ctx.history if e.accepted and e.timing is not None),
                        key=lambda e: e.timing.median_ms)
        for parent in ranked[:2]:
            base = self.stacks.get(parent.candidate.id)
            if base is None:
                continue
            used = {s.name for s, _ in base}
            extra = [lv[0] for lv in self.singles(ctx) if lv[0][0].name not in used
                     and not (lv[0][0].rewrite and any(_site(b.rewrite) == _site(lv[0][0].rewrite)
                                                       for b, _ in base))]
            rng.shuffle(extra)
            # what the parent's bottleneck calls for first (a rewrite then goes below runtime levels,
            # a runtime level on top)
            bound = str((parent.insight or {}).get("bound", ""))
            extra.sort(key=lambda sv: -refine_weight(sv[0].name, bound))
            stacks = []
            for s, v in extra:
                if s.kind == "runtime" and any(b.kind == "runtime" and b.name in ("runtime:compile", "runtime:cudagraph")
                                               for b, _ in base) and s.name in ("runtime:compile", "runtime:cudagraph"):
                    continue                       # compile and graph capture do not stack on each other
                if s.name == "runtime:compile" and any(b.name in NO_COMPILE_ON for b, _ in base):
                    continue
                stacks.append(([(s, v)] + base) if s.kind == "rewrite" else (base + [(s, v)]))
            # and the parent's own levels with other parameters: a kernel-bound parent (compute or memory)
            # tries its next tile first, one bound by host work a new level first
            near = neighbours(ctx, base)
            order = _interleave(near, stacks) if bound in ("compute", "memory") else _interleave(stacks, near)
            for levels in order:
                c = self._make(ctx, levels, parent.candidate.id, generation)
                if c.id not in tried and c.id not in {o.id for o in out}:
                    out.append(c)
                if len(out) >= n:
                    return out
        return out
