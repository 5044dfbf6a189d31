"""Sweep the 3xTF32 Triton GEMM (triton:gemm-3xtf32) tile configurations against cuBLAS fp32 on a GPU.

    python benchmarks/gpu_gemm_3xtf32.py --out gemm3x.json [--reps 20]

For the fp32 GEMM + epilogue shapes of the suite (linear_bias_gelu: 8192x8192x2048; mlp: 16384x2048x1024
and 16384x2048x2048) and every configuration in CONFIGS, it runs the library's own rewrite
(triton_fusion.kg_rewrite_triton_gemm_3xtf32) on Linear + bias + GELU, and records the median time
(CUDA events, L2 flushed before each sample, 20 samples after a warm-up) and the max error against an
fp64 reference, next to eager fp32 (cuBLAS, TF32 off) and its error. A figure for choosing the
strategy's variants (their order is the explore order); the gate's verdicts in the suite are the
correctness evidence, this is not.
"""
from __future__ import annotations

import argparse
import copy
import json
import statistics
import sys
import time
from pathlib import Path

import torch
import torch.fx as fx
import torch.nn as nn

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from kernelgate.proposers.library import triton_fusion as T  # noqa: E402
from kernelgate.versions import conditions  # noqa: E402

SHAPES = ((8192, 8192, 2048), (16384, 2048, 1024), (16384, 2048, 2048))     # M (tokens), N (out), K (in)
CONFIGS = tuple(dict.fromkeys(T.GEMM_CONFIGS_F32 + (
    (128, 128, 32, 4, 3), (128, 256, 32, 8, 4), (256, 128, 32, 8, 3), (128, 128, 16, 4, 5), (64, 128, 32, 4, 4),
    (128, 128, 64, 4, 3), (64, 64, 32, 4, 4))))


class LinearGelu(nn.Module):
    def __init__(self, d_in: int, d_out: int):
        super().__init__()
        self.proj = nn.Linear(d_in, d_out)
        self.act = nn.GELU()

    def forward(self, x):
        return self.act(self.proj(x))


def timed(fn, x, reps: int) -> float:
    flush = torch.empty(int(200e6) // 4, device="cuda")
    for _ in range(3):
        fn(x)
    samples = []
    for _ in range(reps):
        flush.zero_()
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize()
        a.record()
        fn(x)
        b.record()
        b.synchronize()
        samples.append(a.elapsed_time(b))
    return statistics.median(samples)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--reps", type=int, default=20)
    args = ap.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    doc = {"conditions": conditions("cuda"), "shapes": []}
    for m, n, k in SHAPES:
        torch.manual_seed(0)
        model = LinearGelu(k, n).cuda().eval()
        x = torch.randn(m, k, device="cuda")
        with torch.no_grad():
            ref = copy.deepcopy(model).double()(x.double())
            eager_ms = timed(model, x, args.reps)
            eager_err = float((model(x).double() - ref).abs().max())
        flops = 2 * m * n * k
        row = {"m": m, "n": n, "k": k, "eager_ms": eager_ms, "eager_tflops": flops / eager_ms / 1e9,
               "eager_max_err": eager_err, "configs": []}
        for cfg in CONFIGS:
            gm = fx.symbolic_trace(copy.deepcopy(model))
            entry = {"config": dict(zip(("block_m", "block_n", "block_k", "num_warps", "num_stages"), cfg))}
            try:
                assert T.kg_rewrite_triton_gemm_3xtf32(gm, *cfg) == 1
                t0 = time.perf_counter()
                with torch.no_grad():
                    out = gm(x)
                    torch.cuda.synchronize()
                    entry["first_call_s"] = time.perf_counter() - t0
                    entry["max_err"] = float((out.double() - ref).abs().max())
                    entry["ms"] = timed(gm, x, args.reps)
                entry["tflops"] = flops / entry["ms"] / 1e9
                entry["speedup_vs_eager"] = eager_ms / entry["ms"]
            except Exception as e:  # noqa: BLE001 - a configuration that does not build is a result too
                entry["error"] = f"{type(e).__name__}: {str(e)[:300]}"
            row["configs"].append(entry)
            print(f"{m}x{n}x{k} {cfg}: " + (f"{entry['ms']:.3f} ms ({entry['speedup_vs_eager']:.2f}x eager "
                  f"{eager_ms:.3f}), err {entry['max_err']:.2e} vs {eager_err:.2e}" if "ms" in entry
                  else entry["error"]), flush=True)
            del gm
        doc["shapes"].append(row)
        Path(args.out).write_text(json.dumps(doc, indent=1))
    print("\nshape                 eager ms   best 3xtf32 ms  config                 err/eager err")
    for row in doc["shapes"]:
        ok = [c for c in row["configs"] if "ms" in c]
        if ok:
            b = min(ok, key=lambda c: c["ms"])
            print(f"{row['m']}x{row['n']}x{row['k']:<8} {row['eager_ms']:9.3f} {b['ms']:14.3f}  "
                  f"{tuple(b['config'].values())}  {b['max_err'] / row['eager_max_err']:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
