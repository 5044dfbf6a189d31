"""Honest GPU candidates through `kernelgate verify`: torch.compile (default, reduce-overhead, max-autotune), a
Triton kernel, SDPA, each verdict with its reason and wall time. Checks that the gate's build-phase rules (no
thread of the worker's may outlive the build; none can start after the lockdown) refuse no honest candidate.

    python benchmarks/diag_gpu_honest.py --out honest.json [--device cuda]
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BODY = '''import math, torch, torch.nn as nn
class _Body(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(1024, 1024)
    def forward(self, x, q, k, v):
        s = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), dim=-1) @ v
        return torch.nn.functional.gelu(self.fc(x)), s
'''

# the reference is the body itself under the name the gate imports, with its inputs
REF = BODY.replace("_Body", "Model") + '''
def get_inputs():
    return [torch.randn(512, 1024)] + [torch.randn(2, 4, 256, 64) for _ in range(3)]
def get_init_inputs():
    return []
'''

CANDS = {
    "compile_default": BODY + '''
class ModelNew(_Body):
    def __init__(self):
        super().__init__()
        self._f = torch.compile(super().forward)
    def forward(self, *xs):
        return self._f(*xs)
''',
    "compile_reduce_overhead": BODY + '''
class ModelNew(_Body):
    def __init__(self):
        super().__init__()
        self._f = torch.compile(super().forward, mode="reduce-overhead")
    def forward(self, *xs):
        return tuple(t.clone() for t in self._f(*xs))
''',
    "compile_max_autotune": BODY + '''
class ModelNew(_Body):
    def __init__(self):
        super().__init__()
        self._f = torch.compile(super().forward, mode="max-autotune-no-cudagraphs")
    def forward(self, *xs):
        return self._f(*xs)
''',
    "triton_gelu": BODY + '''
import triton, triton.language as tl
@triton.jit
def _gelu(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = i < n
    x = tl.load(x_ptr + i, mask=m)
    y = 0.5 * x * (1 + tl.erf(x * 0.7071067811865476))
    tl.store(y_ptr + i, y, mask=m)
class ModelNew(_Body):
    def forward(self, x, q, k, v):
        h = self.fc(x)
        y = torch.empty_like(h)
        _gelu[(triton.cdiv(h.numel(), 1024),)](h, y, h.numel(), BLOCK=1024)
        s = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), dim=-1) @ v
        return y, s
''',
    "sdpa": BODY + '''
class ModelNew(_Body):
    def forward(self, x, q, k, v):
        return torch.nn.functional.gelu(self.fc(x)), torch.nn.functional.scaled_dot_product_attention(q, k, v)
''',
}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--only", nargs="*")
    args = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as d:
        ref = Path(d, "ref.py")
        ref.write_text(REF)
        for name, src in CANDS.items():
            if args.only and name not in args.only:
                continue
            cand = Path(d, f"{name}.py")
            cand.write_text(src)
            t0 = time.monotonic()
            r = subprocess.run([sys.executable, "-m", "kernelgate", "verify", str(ref), str(cand), "--target",
                                args.device, "--json", "--store", str(Path(d, "store.sqlite"))],
                               capture_output=True, text=True, timeout=400)
            wall = round(time.monotonic() - t0, 1)
            try:
                v = json.loads(r.stdout)
                row = {"candidate": name, "rc": r.returncode, "status": v.get("status"), "reason": v.get("reason"),
                       "message": str(v.get("message", ""))[:400], "wall_s": wall,
                       "checks": [c.get("name") for c in v.get("checks", []) if not c.get("ok", True)]}
            except json.JSONDecodeError:
                row = {"candidate": name, "rc": r.returncode, "status": "no json", "stderr": r.stderr[-800:],
                       "wall_s": wall}
            rows.append(row)
            print(f"{name:26s} {row['status']!s:10s} {row.get('reason')!s:14s} {wall:6.1f}s {row.get('message', '')[:150]}",
                  flush=True)
    env = {"python": platform.python_version(), "device": args.device,
           "command": "python benchmarks/diag_gpu_honest.py " + " ".join(sys.argv[1:]), "date": time.strftime("%Y-%m-%d")}
    try:
        import torch
        env.update(torch=torch.__version__, gpu=torch.cuda.get_device_name() if torch.cuda.is_available() else None)
        import triton
        env["triton"] = triton.__version__
    except Exception:  # noqa: BLE001
        pass
    Path(args.out).write_text(json.dumps({"env": env, "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
