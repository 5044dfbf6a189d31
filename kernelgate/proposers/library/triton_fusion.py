"""The generated-Triton strategies: which kernels/ rewrites they are, and the variants the search tries.

Kernels, launchers and rewrites live in kernelgate/kernels (one pointwise/row IR for Triton and C++:
ir.py, fx.py; triton_render.py, triton_launch.py, triton_rewrite.py). Candidates using them bundle the
runtime "triton" (kernels/manifest.py).
"""

from ...kernels.triton_rewrite import (kg_rewrite_triton_epilogue, kg_rewrite_triton_gemm,
                                       kg_rewrite_triton_gemm_3xtf32, kg_rewrite_triton_pointwise,
                                       kg_rewrite_triton_row, kg_rewrite_triton_rowreduce)

RUNTIME = "triton"                  # what candidates using these rewrites bundle (kernels/manifest.py)

TRITON_FUSION_REWRITES = {
    "triton-rowreduce": kg_rewrite_triton_rowreduce,
    "triton-row": kg_rewrite_triton_row,
    "triton-pointwise": kg_rewrite_triton_pointwise,
    "triton-epilogue": kg_rewrite_triton_epilogue,
    "triton-gemm": kg_rewrite_triton_gemm,
    "triton-gemm-3xtf32": kg_rewrite_triton_gemm_3xtf32,
}

# Hopper-sized tiles: (BLOCK_M, BLOCK_N, BLOCK_K, num_warps, num_stages), searched together
GEMM_CONFIGS = ((128, 256, 64, 8, 3), (128, 128, 64, 8, 3), (128, 128, 32, 4, 4), (64, 256, 32, 4, 4),
                (128, 64, 32, 4, 4))

VARIANTS = {
    "triton-pointwise": [{"block": 1024, "num_warps": 4}, {"block": 2048, "num_warps": 8}],
    "triton-epilogue": [{"block": 1024, "num_warps": 4}, {"block": 2048, "num_warps": 8}],
}


# fp32 operand tiles take twice the shared memory of 16-bit ones. Fastest first, from the H200 sweep
# (benchmarks/results/h200_gemm_3xtf32.json: 1.50-1.74x over cuBLAS fp32 on the suite's GEMM shapes)
GEMM_CONFIGS_F32 = ((128, 128, 64, 8, 3), (128, 64, 32, 4, 4), (128, 128, 32, 8, 3), (64, 128, 32, 4, 4),
                    (64, 64, 32, 4, 4))


def gemm_3xtf32_variants(ctx=None):
    return [{"block_m": bm, "block_n": bn, "block_k": bk, "num_warps": w, "num_stages": s}
            for bm, bn, bk, w, s in GEMM_CONFIGS_F32]


def gemm_variants(tf32):
    """Strategy variants of the in-kernel GEMM; tf32 when the contract allows it for fp32 operands."""
    return [{"block_m": bm, "block_n": bn, "block_k": bk, "num_warps": w, "num_stages": s,
             "fp32_precision": "tf32" if tf32 else ""} for bm, bn, bk, w, s in GEMM_CONFIGS]
