"""Why the SDPA rewrite of the suite's attention fails the NaN/Inf trial on a GPU and passes on the CPU.

The trial (kernelgate/workload.py `with_nonfinite`) puts NaN, +Inf and -Inf at one random position of each of
q, k, v. For several draws, this compares where the reference (written-out attention, in the task dtype and in
fp64) and `F.scaled_dot_product_attention` under each backend (math, flash, efficient, cudnn) give NaN/Inf,
and how many positions differ, and which input's special value drives the difference.

    python benchmarks/diag_sdpa_nonfinite.py --out sdpa.json [--device cuda] [--draws 6] [--scale 1]
"""
from __future__ import annotations

import argparse
import json
import math
import platform
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, ".")
from kernelgate import workload  # noqa: E402


class _NoDomains:
    def domain_of(self, i):
        return None


def reference(q, k, v):
    scores = torch.matmul(q, k.transpose(-2, -1)) * (1.0 / math.sqrt(q.shape[-1]))
    return torch.matmul(torch.softmax(scores, dim=-1), v)


def backends(device: str) -> dict:
    if not device.startswith("cuda"):
        return {"default": None}
    from torch.nn.attention import SDPBackend
    return {"math": SDPBackend.MATH, "flash": SDPBackend.FLASH_ATTENTION, "efficient": SDPBackend.EFFICIENT_ATTENTION,
            "cudnn": SDPBackend.CUDNN_ATTENTION, "default": None}


def sdpa(q, k, v, backend):
    if backend is None:
        return F.scaled_dot_product_attention(q, k, v)
    from torch.nn.attention import sdpa_kernel
    with sdpa_kernel(backend):
        return F.scaled_dot_product_attention(q, k, v)


def pattern(o: torch.Tensor) -> dict:
    return {"nan": int(torch.isnan(o).sum()), "posinf": int(torch.isposinf(o).sum()),
            "neginf": int(torch.isneginf(o).sum())}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--draws", type=int, default=6)
    ap.add_argument("--shape", default="4,16,2048,64")
    args = ap.parse_args()
    shape = tuple(int(s) for s in args.shape.split(","))
    dev = args.device
    rows = []
    for draw in range(args.draws):
        g = torch.Generator().manual_seed(draw)
        clean = [torch.randn(shape, generator=g) for _ in range(3)]
        xs = workload.with_nonfinite(clean, g, _NoDomains())
        where = {}
        for name, x in zip("qkv", xs):
            bad = (~torch.isfinite(x)).nonzero().tolist()
            where[name] = [[int(i) for i in b] + [str(x[tuple(b)].item())] for b in bad]
        xd = [x.to(dev) for x in xs]
        ref = reference(*xd).cpu()
        ref64 = reference(*[x.double() for x in xs])
        row = {"draw": draw, "specials": where, "reference": pattern(ref), "reference_fp64": pattern(ref64),
               "reference_vs_fp64_nan_differ": int((torch.isnan(ref) != torch.isnan(ref64)).sum()), "sdpa": {}}
        for name, b in backends(dev).items():
            try:
                out = sdpa(*xd, b).cpu()
            except Exception as e:  # noqa: BLE001 - a backend that does not run here
                row["sdpa"][name] = {"error": f"{type(e).__name__}: {str(e).splitlines()[0][:200]}"}
                continue
            nan_differ = torch.isnan(out) != torch.isnan(ref64)
            heads = sorted({tuple(i[:2]) for i in nan_differ.nonzero()[:, :2].tolist()})[:8]
            row["sdpa"][name] = {**pattern(out), "nan_differ": int(nan_differ.sum()),
                                 "inf_differ": int((torch.isinf(out) != torch.isinf(ref64)).sum()),
                                 "nan_where_fp64_finite": int((torch.isnan(out) & torch.isfinite(ref64)).sum()),
                                 "differ_heads": [list(h) for h in heads]}
        rows.append(row)
        print(json.dumps({k: row[k] for k in ("draw", "reference", "reference_fp64")}),
              {n: (r.get("nan_differ"), r.get("nan_where_fp64_finite"), r.get("error")) for n, r in row["sdpa"].items()},
              flush=True)
    env = {"python": platform.python_version(), "torch": torch.__version__, "device": dev,
           "gpu": torch.cuda.get_device_name() if dev.startswith("cuda") else platform.processor(),
           "command": "python benchmarks/diag_sdpa_nonfinite.py " + " ".join(sys.argv[1:]),
           "date": time.strftime("%Y-%m-%d")}
    with open(args.out, "w") as f:
        json.dump({"env": env, "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
