"""Why torch.compile stacked on the generated 3xTF32 GEMM measured 0.29-0.47x of the GEMM alone.

    python benchmarks/diag_compile_over_gemm.py --out compile_over_gemm.json [--workload benchmarks/suite/mlp.py]

Builds the library's candidates exactly as a search renders them: triton:gemm-3xtf32 (first tile) alone,
and under runtime:compile in each mode; per candidate: first-call seconds (compile), the median of 30
timed calls (CUDA events, synchronized, fresh random inputs of the given shape), dynamo's counters
(graph breaks, recompiles, frames), and the five kernels with the most device time in 5 profiled calls.
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from kernelgate.versions import conditions  # noqa: E402


def build(path: Path, modes: list[str | None]):
    from kernelgate.graph import analyse
    from kernelgate.proposers import Context
    from kernelgate.proposers.library import library
    from kernelgate.records import Contract
    from kernelgate.workload import Spec, load_reference
    ref = load_reference(Spec.parse(str(path), "Model"))
    ctx = Context(path.read_text(), "Model", "cuda", "diag", Contract(), analyse(ref.build(), None, library.REWRITE_FNS),
                  (), {})
    by = {s.name: s for s in library.STRATEGIES}
    gemm = by["triton:gemm-3xtf32"]
    for mode in modes:
        levels = [(gemm, gemm.variants(ctx)[0])] + ([(by["runtime:compile"], {"mode": mode})] if mode else [])
        file = Path(tempfile.mkdtemp(prefix="kg-diag-")) / f"{path.stem}_{mode or 'plain'}.py".replace("-", "_")
        file.write_text(path.read_text() + "\n\n" + library.render(ctx, levels))
        spec = importlib.util.spec_from_file_location(file.stem, file)
        mod = importlib.util.module_from_spec(spec)
        sys.modules[file.stem] = mod            # dynamo imports the module it traces
        spec.loader.exec_module(mod)
        model = mod.ModelNew(*mod.get_init_inputs()).cuda().eval()
        yield mode or "gemm alone", model, [x.cuda() if isinstance(x, torch.Tensor) else x for x in mod.get_inputs()]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--workload", default=str(ROOT / "benchmarks/suite/mlp.py"))
    args = ap.parse_args()
    from torch._dynamo.utils import counters
    rows = []
    for label, model, xs in build(Path(args.workload), [None, "default", "max-autotune-no-cudagraphs",
                                                        "max-autotune"]):
        torch._dynamo.reset()
        counters.clear()
        with torch.no_grad():
            t0 = time.perf_counter()
            model(*xs)
            torch.cuda.synchronize()
            first_s = time.perf_counter() - t0
            for _ in range(3):
                model(*xs)
            ms = []
            for _ in range(30):
                fresh = [torch.randn_like(x) if isinstance(x, torch.Tensor) and x.is_floating_point() else x for x in xs]
                torch.cuda.synchronize()
                a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                a.record()
                model(*fresh)
                b.record()
                b.synchronize()
                ms.append(a.elapsed_time(b))
            from torch.profiler import ProfilerActivity, profile
            with profile(activities=[ProfilerActivity.CUDA]) as prof:
                for _ in range(5):
                    model(*xs)
                torch.cuda.synchronize()
        kern = sorted(((e.key, e.device_time_total / 5, e.count / 5) for e in prof.key_averages()
                       if e.device_time_total > 0), key=lambda t: -t[1])[:5]
        row = {"candidate": label, "first_call_s": first_s, "median_ms": statistics.median(ms),
               "counters": {k: dict(v) for k, v in counters.items() if k in ("stats", "graph_break", "recompiles")},
               "top_kernels_us_per_call": [{"name": n[:120], "us": us, "calls": c} for n, us, c in kern]}
        rows.append(row)
        print(json.dumps(row)[:700], flush=True)
    doc = {"conditions": conditions("cuda"), "rows": rows}
    Path(args.out).write_text(json.dumps(doc, indent=1))
    print(f"{'candidate':30} {'first s':>8} {'median ms':>10}")
    for r in rows:
        print(f"{r['candidate']:30} {r['first_call_s']:8.1f} {r['median_ms']:10.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
