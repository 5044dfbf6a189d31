"""The worker's side of timing: the timed loop, warm-up, and the inputs of each step.

The loop takes one step at a time from the judge (fresh inputs from a pool entry times a random scale plus
noise, an L2 flush on CUDA, the call, a device-wide synchronize) and hands each output to the harness's
`after`, which commits to it in the answer that stops the judge's clock (kernelgate/gate/timing.py keeps
the statistics). The judge rebuilds any step's inputs with the same `fresh`, on the same device type.
Imports nothing of the gate: this runs in the candidate's process.
"""
from __future__ import annotations

from typing import Any, Callable

import torch

from .. import clock

SCALE_RANGE = (0.75, 1.33)


def warm_up(model: Callable, make: Callable[..., list[Any]], plan: list, device: str,
            warmup_ms: float, warmup_min: int) -> int:
    """Run until `warmup_ms` have passed and at least `warmup_min` calls were made (clocks ramp up, caches fill)."""
    sync = clock.cuda_sync if device.startswith("cuda") else (lambda: None)
    with torch.no_grad():
        t_end = clock.monotonic() + warmup_ms / 1e3
        i = 0
        while i < warmup_min or clock.monotonic() < t_end:
            model(*make(*plan[i % len(plan)]))
            sync()
            i += 1
    return i


def timed_loop(model: Callable, make: Callable[..., list[Any]], steps, device: str,
               flush_bytes: int, after: Callable[[int, list[Any], Any, float], None]) -> None:
    """Run the steps [(pool index, scale, noise seed), ...]: each one's inputs, an L2 flush, the call.

    `steps` is an iterator the judge feeds one step at a time (the worker cannot know an iteration's
    inputs before the judge's clock for it starts). `after(index, inputs, output, in-process ms)` then
    checks the output, commits to it and answers the judge, which stops its clock on that answer. The
    in-process sample is a diagnostic; claims are made from the judge's clock."""
    cuda = device.startswith("cuda")
    flush = torch.empty(max(flush_bytes // 4, 1), dtype=torch.float32, device=device)
    with torch.no_grad():
        for index, step in enumerate(steps):
            xs = make(*step)
            flush.zero_()
            if cuda:
                start, end = clock.Event(enable_timing=True), clock.Event(enable_timing=True)
                clock.cuda_sync()         # inputs and flush done on every stream: nothing overlaps the start
                start.record()
                start.synchronize()  # the start timestamp precedes anything the candidate launches
                out = model(*xs)
                clock.cuda_sync()         # device-wide: side-stream work lands inside the window
                end.record()
                end.synchronize()
                sample = start.elapsed_time(end)
            else:
                t0 = clock.perf_ns()
                out = model(*xs)
                sample = (clock.perf_ns() - t0) / 1e6
            after(index, xs, out, sample)
            del out


SLOTS = 2                             # input buffers per input; every call (trial or timed) writes into one


def slot(seed: int) -> int:
    """The input buffer a timed iteration writes into, from its (secret until sent) seed."""
    return (seed >> 17) % SLOTS


NOISE = 0.05                          # fresh noise, relative to each input's RMS, added every iteration


def rms(xs: list[Any], scalable: list[bool]) -> list[float]:
    return [float(x.double().pow(2).mean().sqrt()) if ok and x.numel() else 0.0 for x, ok in zip(xs, scalable)]


def fresh(xs: list[Any], s: float, seed: int, scalable: list[bool], rms_: list[float], device: str,
          out: list[Any] | None = None) -> list[Any]:
    """The inputs of one timed iteration: a pool entry times a random scale plus fresh noise from `seed`,
    written into `out` (the worker's persistent input buffers, the ones the correctness trials used, so
    addresses give no sign of which calls are timed) or into new tensors.

    No two iterations see the same values, and no transformation of earlier inputs (a scale, a sign)
    gives the next ones. The judge rebuilds any iteration bit for bit on the same device type: both
    sides run these same operations."""
    res = []
    g = torch.Generator(device=device).manual_seed(seed)
    for k, (x, ok, r) in enumerate(zip(xs, scalable, rms_)):
        if not isinstance(x, torch.Tensor):
            res.append(x)
            continue
        dst = out[k] if out is not None else None
        if dst is None or dst.shape != x.shape or dst.dtype != x.dtype or dst.device != x.device:
            dst = torch.empty_like(x)
        if ok and x.element_size() == 1:        # fp8 has no arithmetic: in fp32, rounded back onto its grid
            noise = torch.randn(x.shape, generator=g, device=device, dtype=torch.float32)
            top = torch.finfo(x.dtype).max if x.is_floating_point() else 127.0
            dst.copy_((x.float() * s + noise * (NOISE * r)).clamp(-top, top).to(x.dtype))
        elif ok:
            noise = torch.randn(x.shape, generator=g, device=device, dtype=torch.float32).to(x.dtype)
            noise.mul_(NOISE * r)
            torch.mul(x, s, out=dst)
            dst.add_(noise)
        else:
            dst.copy_(x)
        res.append(dst)
    return res
