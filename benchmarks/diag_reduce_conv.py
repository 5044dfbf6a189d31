"""Where rewrite:reduce-conv's time goes on a GPU: a ConvTranspose3d (16 -> 64 channels, 3x3x3, padding 1) on a
16x16x32x128x128 fp32 input averaged over depth, the reference's ops against the rewrite, and the rewrite's parts
(the depth sums; the 2-D transposed convolution left, in float64 through cuDNN and as the unfold/fold GEMM form,
and in float32 for scale). TF32 off, as in the gate's strict contract.

    python benchmarks/diag_reduce_conv.py [--out F]
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from kernelgate.proposers.library import fx_algebra as A  # noqa: E402
from kernelgate.versions import conditions  # noqa: E402


def timed(f, n: int = 10) -> float:
    f()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(n):
        f()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) / n


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out")
    a = ap.parse_args()
    if not torch.cuda.is_available():
        print("needs a CUDA GPU", file=sys.stderr)
        return 2
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False
    dev = "cuda"
    x = torch.randn(16, 16, 32, 128, 128, device=dev)
    w = torch.randn(16, 64, 3, 3, 3, device=dev) * 0.05
    b = torch.randn(64, device=dev)
    geo = ((1, 1, 1), (1, 1, 1), (1, 1, 1), (0, 0, 0), 1)
    args = (x, w, b, "convT", *geo, [], (2,), True, True)
    rows = {}
    with torch.no_grad():
        rows["reference (convT3d + mean, fp32)"] = timed(lambda: A._kg_conv_chain(*args))
        rows["rewrite (kg_reduced_conv)"] = timed(lambda: A.kg_reduced_conv(*args))
        rows["part: depth sums (fold)"] = timed(lambda: A._kg_conv_fold(x, 0, 3, 1, 1, 1, 32, "convT"))
        xf = A._kg_conv_fold(x, 0, 3, 1, 1, 1, 32, "convT").permute(0, 1, 2, 3, 4).reshape(16, 48, 128, 128)
        w2 = w.double().permute(0, 2, 1, 3, 4).reshape(48, 64, 3, 3)
        xd = xf.double()          # the sums stay in the input's dtype; the convolution left runs in float64
        g2 = ((1, 1), (1, 1), (1, 1), (0, 0), 1)
        rows["part: convT2d float64, cuDNN"] = timed(lambda: A._kg_conv_call(xd, w2, None, "convT", *g2), 3)
        rows["part: convT2d float64, GEMM + fold"] = timed(lambda: A._kg_conv_gemm(xd, w2, "convT", *g2))
        rows["part: convT2d float32, cuDNN"] = timed(lambda: A._kg_conv_call(xf.float(), w2.float(), None, "convT", *g2))
        ref = A._kg_conv_chain(*[t.double() if torch.is_tensor(t) else t for t in args])
        err = {k: float((f().double() - ref).abs().max()) for k, f in
               (("reference", lambda: A._kg_conv_chain(*args)), ("rewrite", lambda: A.kg_reduced_conv(*args)))}
    for k, v in rows.items():
        print(f"{k:40s} {v:8.3f} ms")
    print("max error against float64:", err)
    if a.out:
        Path(a.out).write_text(json.dumps({"conditions": conditions(dev), "ms": rows, "max_error": err}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
