"""Where does a short forward's timed window go? Kernel time, host launch work, and the harness itself.

    python benchmarks/diag_timed_window.py --out window.json [--only elementwise_chain,layernorm_residual]
                                           [--iters 30] [--scale 1.0]

On the H200 suite, single-kernel forwards measured far above their kernel time in the gate's timed
loop (elementwise_chain under torch.compile: 0.37 ms for a 0.13 ms kernel; the generated LayerNorm row
kernel: 0.74 ms for 0.37 ms). This script times the same modules several ways, side by side in one
process, so the difference can be attributed:

  gate        gate/timing.timed_loop as the worker runs it (fresh inputs, L2 flush, device-wide syncs)
  no_flush    the same loop without the L2 flush
  same_input  the same loop, one input set reused (no fresh allocation between iterations)
  events      start/end events around the call only (no synchronize before or inside the window)
  host        host time of the call alone (perf_counter, no synchronize: launch work only)
  kernels     sum of the kernels' own durations per forward (torch.profiler)

Modules: a trivial forward (the harness's own floor), and for each workload the reference in eager,
torch.compile, and the library's generated-kernel candidate (triton:pointwise / triton:row /
triton:rowreduce, rendered exactly as a search would), alone and under runtime:cudagraph (outputs copied
out, or handed out in the graph's buffers). Medians in ms; a table last, JSON in --out.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Callable

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from kernelgate.gate import timing  # noqa: E402


def _loop(model, make, plan, device, flush) -> list[float]:
    """gate/timing.timed_loop's in-process samples, one per step of the plan."""
    samples: list[float] = []
    timing.timed_loop(model, make, plan, device, flush, lambda i, xs, out, ms: samples.append(ms))
    return samples
from kernelgate.versions import conditions  # noqa: E402

WORKLOADS = {"elementwise_chain": "triton:pointwise", "layernorm_residual": "triton:row",
             "softmax_scale": "triton:row", "rms_norm": "triton:rowreduce"}


class Trivial(torch.nn.Module):
    """One tiny kernel: what the harness costs around any forward."""

    def forward(self, x):
        return x[:1, :1] * 1.0


def _candidate(path: Path, strategy: str, outputs: str | None = None) -> torch.nn.Module | None:
    """The library's candidate for `strategy` on the workload (with a runtime:cudagraph level on top when
    `outputs` names its outputs mode), built like the worker does."""
    from kernelgate.graph import analyse
    from kernelgate.proposers import Context
    from kernelgate.proposers.library import library
    from kernelgate.records import Contract
    from kernelgate.workload import Spec, load_reference

    ref = load_reference(Spec.parse(str(path), "Model"))
    graph = analyse(ref.build(), None, library.REWRITE_FNS)
    ctx = Context(path.read_text(), "Model", "cuda", "diag", Contract(), graph, (), {})
    s = next(x for x in library.STRATEGIES if x.name == strategy)
    if not s.applies(ctx):
        return None
    levels = [(s, s.variants(ctx)[0])]
    if outputs:
        levels.append((next(x for x in library.STRATEGIES if x.name == "runtime:cudagraph"), {"outputs": outputs}))
    src = path.read_text() + "\n\n" + library.render(ctx, levels)
    import importlib.util
    import tempfile
    file = Path(tempfile.mkdtemp(prefix="kg-diag-")) / f"{path.stem}_{outputs or 'plain'}.py"   # @triton.jit reads it
    file.write_text(src)
    spec = importlib.util.spec_from_file_location(f"kg_diag_{path.stem}", file)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.ModelNew(*mod.get_init_inputs())


def measure(model: Callable, pool: list[list[Any]], device: str, iters: int) -> dict[str, float]:
    cuda = device.startswith("cuda")
    scalable = [isinstance(x, torch.Tensor) and x.is_floating_point() for x in pool[0]]
    rms = [timing.rms(xs, scalable) for xs in pool]

    def make(j, s, seed):
        return timing.fresh(pool[j], s, seed, scalable, rms[j], device)
    import random
    plan = timing.make_plan(iters, len(pool), random.Random(0))
    flush = timing.flush_bytes(device)
    timing.warm_up(model, make, plan, device, 300.0, 3)
    out: dict[str, float] = {}
    out["gate"] = statistics.median(_loop(model, make, plan, device, flush))
    out["no_flush"] = statistics.median(_loop(model, make, plan, device, 0))
    xs0 = make(*plan[0])
    out["same_input"] = statistics.median(_loop(model, lambda *a: xs0, plan, device, flush))
    host, events = [], []
    with torch.no_grad():
        for step in plan:
            xs = make(*step)
            if cuda:
                torch.cuda.synchronize()
                a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                a.record()
                t0 = time.perf_counter()
                model(*xs)
                host.append((time.perf_counter() - t0) * 1e3)
                b.record()
                b.synchronize()
                events.append(a.elapsed_time(b))
            else:
                t0 = time.perf_counter()
                model(*xs)
                host.append((time.perf_counter() - t0) * 1e3)
    out["host"] = statistics.median(host)
    if cuda:
        out["events"] = statistics.median(events)
        from torch.profiler import ProfilerActivity, profile
        with torch.no_grad(), profile(activities=[ProfilerActivity.CUDA]) as prof:
            for step in plan[:10]:
                model(*make(*step))
            torch.cuda.synchronize()
        kern = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
        total_us = sum(getattr(e, "device_time", getattr(e, "cuda_time", 0.0)) for e in kern)
        # fresh-input generation runs kernels too: subtract its share, measured alone
        with torch.no_grad(), profile(activities=[ProfilerActivity.CUDA]) as prof2:
            for step in plan[:10]:
                make(*step)
            torch.cuda.synchronize()
        gen_us = sum(getattr(e, "device_time", getattr(e, "cuda_time", 0.0)) for e in prof2.events()
                     if e.device_type == torch.autograd.DeviceType.CUDA)
        out["kernels"] = max(total_us - gen_us, 0.0) / 10 / 1e3
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--only", default=",".join(WORKLOADS))
    ap.add_argument("--iters", type=int, default=30)
    ap.add_argument("--scale", default=None, help="KG_SUITE_SCALE for the workloads (default: full size)")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    args = ap.parse_args()
    if args.scale:
        os.environ["KG_SUITE_SCALE"] = args.scale
    dev = args.device
    doc: dict[str, Any] = {"conditions": conditions(dev), "rows": []}
    rows = doc["rows"]
    x = torch.randn(4096, 4096, device=dev)
    rows.append({"workload": "trivial", "impl": "eager", **measure(Trivial(), [[x], [x * 2]], dev, args.iters)})
    print(rows[-1], flush=True)
    from kernelgate.workload import Spec, load_reference
    for name in args.only.split(","):
        path = ROOT / "benchmarks" / "suite" / f"{name}.py"
        ref = load_reference(Spec.parse(str(path), "Model"))
        model = ref.build().to(dev).eval()
        pool = [ref.inputs(seed=k, device=dev) for k in range(2)]
        impls: dict[str, Callable] = {"eager": model, "compile": torch.compile(model)}
        if dev.startswith("cuda"):
            for graph in (None, "clone", "in-place"):
                label = WORKLOADS[name] + (f" + graph({graph})" if graph else "")
                try:
                    cand = _candidate(path, WORKLOADS[name], graph)
                    if cand is not None:
                        cand = cand.to(dev).eval()
                        cand.load_state_dict(model.state_dict())
                        impls[label] = cand
                except Exception as e:  # noqa: BLE001 - a candidate that does not build is a row too
                    rows.append({"workload": name, "impl": label, "error": f"{type(e).__name__}: {e}"})
        for label, m in impls.items():
            try:
                rows.append({"workload": name, "impl": label, **measure(m, pool, dev, args.iters)})
            except Exception as e:  # noqa: BLE001
                rows.append({"workload": name, "impl": label, "error": f"{type(e).__name__}: {e}"})
            print(rows[-1], flush=True)
            Path(args.out).write_text(json.dumps(doc, indent=1))
        del impls, model, pool
        if dev.startswith("cuda"):
            torch.cuda.empty_cache()
    keys = ("gate", "no_flush", "same_input", "events", "host", "kernels")
    print(f"\n{'workload':<20} {'impl':<42} " + " ".join(f"{k:>10}" for k in keys) + "   (ms, medians)")
    for r in rows:
        vals = " ".join(f"{r[k]:>10.4f}" if isinstance(r.get(k), float) else f"{'-':>10}" for k in keys)
        print(f"{r['workload']:<20} {r['impl']:<42} {vals}" + (f"  {r['error'][:60]}" if "error" in r else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
