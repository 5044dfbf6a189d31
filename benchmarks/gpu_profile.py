"""`kernelgate profile` on a GPU, checked against the profiler's own view of the same forwards.

    python benchmarks/gpu_profile.py --out $OUT/gpu_profile.json

Three pairs are profiled through `api.profile` (reference and candidate each in their own worker):

- elementwise chain (7 eager ATen kernels) vs a Triton candidate fusing it into one kernel: launch
  records, Triton code fingerprint (SASS with cuobjdump/nvdisasm on PATH, else PTX), distance;
- linear + GELU (cuBLAS GEMM + GELU kernel, benchmarks/workloads) vs the honest addmm candidate:
  library kernels, name-based fingerprint, a compute-bound line expected;
- 48 small adds on 4096 elements (launch-bound expected) vs one Triton kernel doing them all.

For each implementation the script then runs the same model in this process under torch.profiler
and reads kernel names from `prof.events()` (FunctionEvents, not the chrome trace that profiling/launches.py
parses), and checks that the kernel names and counts per forward match the launch records. It writes
one JSON document with the conditions, every report, and the checks; exit code 1 when a check fails.
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

import torch  # noqa: E402

from kernelgate import api, workload  # noqa: E402
from kernelgate.versions import conditions  # noqa: E402

CHAIN_REF = '''
import torch
import torch.nn as nn
class Model(nn.Module):
    def __init__(self, cols):
        super().__init__()
        self.scale = nn.Parameter(torch.rand(cols) + 0.5)
        self.bias = nn.Parameter(0.1 * torch.randn(cols))
    def forward(self, x):
        y = x * torch.sigmoid(x)
        y = y * self.scale + self.bias
        y = y * torch.tanh(y)
        return y + x
def get_inputs():
    return [torch.randn(4096, 4096)]
def get_init_inputs():
    return [4096]
'''
CHAIN_TRITON = '''
import torch
import torch.nn as nn
import triton
import triton.language as tl

@triton.jit
def fused_chain_kernel(x_ptr, s_ptr, b_ptr, y_ptr, n, cols, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m)
    c = offs % cols
    s = tl.load(s_ptr + c, mask=m)
    b = tl.load(b_ptr + c, mask=m)
    y = x * tl.sigmoid(x)
    y = y * s + b
    e = tl.exp(-2.0 * tl.abs(y))
    t = (1.0 - e) / (1.0 + e)
    t = tl.where(y < 0, -t, t)
    tl.store(y_ptr + offs, y * t + x, mask=m)

class ModelNew(nn.Module):
    def __init__(self, cols):
        super().__init__()
        self.scale = nn.Parameter(torch.rand(cols) + 0.5)
        self.bias = nn.Parameter(0.1 * torch.randn(cols))
    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        n = x.numel()
        fused_chain_kernel[(triton.cdiv(n, 1024),)](x, self.scale, self.bias, y, n, x.shape[-1], BLOCK=1024)
        return y
'''
SMALL_REF = '''
import torch
import torch.nn as nn
class Model(nn.Module):
    def forward(self, x):
        for k in range(48):
            x = x + 0.01 * k
        return x
def get_inputs():
    return [torch.randn(4096)]
def get_init_inputs():
    return []
'''
SMALL_TRITON = '''
import torch
import torch.nn as nn
import triton
import triton.language as tl

@triton.jit
def adds_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m)
    for k in range(48):
        x = x + 0.01 * k
    tl.store(y_ptr + offs, x, mask=m)

class ModelNew(nn.Module):
    def forward(self, x):
        y = torch.empty_like(x)
        adds_kernel[(triton.cdiv(x.numel(), 1024),)](x, y, x.numel(), BLOCK=1024)
        return y
'''


def profiler_kernels(path: str, cls: str, ref_path: str, forwards: int, warmup: int) -> dict[str, float]:
    """Kernel names per forward from torch.profiler's FunctionEvents, in this process."""
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile
    ref = workload.load_reference(workload.Spec(str(Path(ref_path).resolve()), "Model"))
    module = workload.import_file(path)
    model = getattr(module, cls)(*ref.init_inputs).eval().cuda()
    xs = [x.cuda() if isinstance(x, torch.Tensor) else x for x in ref.inputs(seed=0)]
    with torch.no_grad():
        for _ in range(warmup):
            model(*xs)
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            for _ in range(forwards):
                model(*xs)
                torch.cuda.synchronize()
    names = Counter(e.name for e in prof.events() if e.device_type == DeviceType.CUDA
                    and not e.name.startswith(("Memcpy", "Memset")))
    return {k: v / forwards for k, v in names.items()}


def check_side(side: dict[str, Any], path: str, cls: str, ref_path: str, forwards: int, warmup: int) -> dict:
    ours: Counter[str] = Counter()
    for r in side["launches"]["records"]:
        if r["kind"] == "kernel":
            ours[r["name"]] += 1
    ours_pf = {k: v / forwards for k, v in ours.items()}
    theirs = profiler_kernels(path, cls, ref_path, forwards, warmup)
    kernels = [r for r in side["launches"]["records"] if r["kind"] == "kernel"]
    complete = sum(1 for r in kernels if r.get("grid") and r.get("block") and r.get("registers") is not None)
    return {"names_match": set(ours_pf) == set(theirs), "counts_match": ours_pf == theirs,
            "launch_records": ours_pf, "profiler_events": theirs,
            "kernels_with_grid_block_registers": f"{complete}/{len(kernels)}"}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--forwards", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=3)
    args = ap.parse_args()
    if not torch.cuda.is_available():
        print("needs a CUDA GPU", file=sys.stderr)
        return 2
    doc: dict[str, Any] = {"conditions": conditions("cuda"), "cases": {}}
    tmp = Path(tempfile.mkdtemp(prefix="kg-gpu-profile-"))
    cases = {
        "elementwise_chain_vs_triton": (CHAIN_REF, CHAIN_TRITON, None, None),
        "linear_gelu_cublas": (None, None, str(HERE / "workloads" / "linear_gelu.py"),
                               str(HERE / "workloads" / "linear_gelu_honest.py")),
        "small_adds_launch_bound": (SMALL_REF, SMALL_TRITON, None, None),
    }
    ok = True
    for name, (ref_src, cand_src, ref_path, cand_path) in cases.items():
        if ref_src is not None:
            ref_path, cand_path = str(tmp / f"{name}_ref.py"), str(tmp / f"{name}_cand.py")
            Path(ref_path).write_text(ref_src)
            Path(cand_path).write_text(cand_src)
        assert ref_path and cand_path
        t0 = time.perf_counter()
        rep = api.profile(ref_path, cand_path, target="cuda", warmup=args.warmup, forwards=args.forwards)
        case: dict[str, Any] = {"wall_s": time.perf_counter() - t0, "report": rep.to_json(records=5000)}
        checks = {}
        for label, path, cls in (("reference", ref_path, "Model"), ("candidate", cand_path, "ModelNew")):
            side = case["report"][label]
            if side is None or side["error"]:
                checks[label] = {"error": side["error"] if side else "missing"}
                ok = False
                continue
            checks[label] = check_side(side, path, cls, ref_path, args.forwards, args.warmup)
            ok = ok and checks[label]["names_match"] and checks[label]["counts_match"]
            print(f"{name} {label}: {side['bottleneck']['line']}; fingerprint {side['fingerprint']['basis']}; "
                  f"match names={checks[label]['names_match']} counts={checks[label]['counts_match']}", flush=True)
        case["checks"] = checks
        if rep.distance is not None:
            print(f"{name}: distance {rep.distance.value:.3f} ({rep.distance.basis})", flush=True)
        doc["cases"][name] = case
        Path(args.out).write_text(json.dumps(doc, indent=1, default=str))
    doc["all_checks_pass"] = ok
    Path(args.out).write_text(json.dumps(doc, indent=1, default=str))
    print(f"wrote {args.out}; all checks pass: {ok}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
