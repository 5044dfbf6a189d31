"""What the extension build cache saves (kernelgate/sandbox/prebuild.py): a C++ (or, with --target cuda, CUDA)
candidate whose load_inline call has literal arguments verified twice against a fresh store, then a third time
with the cache off (KERNELGATE_PREBUILD=0: the worker builds, as before). Writes one JSON document.

    python benchmarks/prebuild_cache.py --out benchmarks/results/prebuild_cache_cpu.json [--target cuda]
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

REF = """
import torch
import torch.nn as nn
class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x) * 2
def get_inputs():
    return [torch.randn(256, 1024)]
def get_init_inputs():
    return []
"""

CPP = '''
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline
SRC = """
torch::Tensor relu2(torch::Tensor x) { return torch::relu(x) * 2; }
"""
ext = load_inline("kg_bench_relu2", SRC, functions=["relu2"], extra_cflags=["-O2"])
class ModelNew(nn.Module):
    def forward(self, x):
        return ext.relu2(x)
'''

CUDA = '''
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline
CU = """
__global__ void relu2_k(const float* x, float* y, long n) {
    long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
    if (i < n) { float v = x[i]; y[i] = v > 0.f ? 2.f * v : 0.f; }
}
torch::Tensor relu2(torch::Tensor x) {
    auto c = x.contiguous(); auto y = torch::empty_like(c); long n = c.numel();
    relu2_k<<<(n + 255) / 256, 256>>>(c.data_ptr<float>(), y.data_ptr<float>(), n);
    return y;
}
"""
DECL = "torch::Tensor relu2(torch::Tensor x);"
ext = load_inline("kg_bench_relu2_cu", DECL, cuda_sources=CU, functions=["relu2"], extra_cuda_cflags=["-O3"])
class ModelNew(nn.Module):
    def forward(self, x):
        return ext.relu2(x)
'''


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--target", default="cpu")
    a = ap.parse_args()
    import torch

    from kernelgate import api
    d = Path(tempfile.mkdtemp(prefix="kg-prebuild-bench-"))
    ref, cand = d / "ref.py", d / "cand.py"
    ref.write_text(REF)
    cand.write_text(CUDA if a.target.startswith("cuda") else CPP)
    store = str(d / "store.sqlite")
    rows = []
    for label, env in (("first (built outside the worker)", "1"), ("second (from the cache)", "1"),
                       ("cache off (built in the worker)", "0")):
        os.environ["KERNELGATE_PREBUILD"] = env
        t0 = time.monotonic()
        v = api.verify(str(ref), str(cand), target=a.target, store=store if env == "1" else str(d / "s0.sqlite"))
        rows.append({"run": label, "wall_s": round(time.monotonic() - t0, 2), "status": v.status.value,
                     "notes": [n for n in v.notes if n.startswith("extension ")]})
        print(f"{label:36s} {rows[-1]['wall_s']:7.1f} s  {v.status.value}  {rows[-1]['notes']}", flush=True)
    doc = {"what": "verify of one load_inline candidate: build cache cold, warm, and off",
           "command": "python benchmarks/prebuild_cache.py --out ... --target " + a.target,
           "target": a.target, "python": sys.version.split()[0], "torch": torch.__version__,
           "machine": platform.machine(), "cpus": os.cpu_count(),
           "load_average": os.getloadavg(),
           "gpu": torch.cuda.get_device_name() if a.target.startswith("cuda") else None,
           "rows": rows}
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(json.dumps(doc, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
