"""The only timer. Worker side: the timed loop. Judge side: plans, interleaving, statistics, speedup.

The worker's loop takes one step at a time from the judge (fresh inputs from a pool entry times a random
scale plus noise, an L2 flush on CUDA, the call, a device-wide synchronize); the judge's clock around each
step is the basis of every claim, less the harness's own cost (`harness_cost`, `less_harness`), and a row
the clock cannot resolve is never claimed (`resolvable`). In-process samples are diagnostics only.
"""
from __future__ import annotations

# Captured at import, before any candidate code runs in the worker.
import time as _time

_perf_ns = _time.perf_counter_ns
_monotonic = _time.monotonic

import math  # noqa: E402
import random  # noqa: E402
from dataclasses import dataclass  # noqa: E402
from typing import Any, Callable  # noqa: E402

import torch  # noqa: E402

from ..records import Speedup, Timing  # noqa: E402

_CUDA_SYNC = torch.cuda.synchronize
_EVENT = torch.cuda.Event
SCALE_RANGE = (0.75, 1.33)
IMPLAUSIBLE = 3.0                    # speedups above this are flagged for review


# ------------------------------------------------------------------ worker side

def warm_up(model: Callable, make: Callable[..., list[Any]], plan: list, device: str,
            warmup_ms: float, warmup_min: int) -> int:
    """Run until `warmup_ms` have passed and at least `warmup_min` calls were made (clocks ramp up, caches fill)."""
    sync = _CUDA_SYNC if device.startswith("cuda") else (lambda: None)
    with torch.no_grad():
        t_end = _monotonic() + warmup_ms / 1e3
        i = 0
        while i < warmup_min or _monotonic() < t_end:
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
                start, end = _EVENT(enable_timing=True), _EVENT(enable_timing=True)
                _CUDA_SYNC()         # inputs and flush done on every stream: nothing overlaps the start
                start.record()
                start.synchronize()  # the start timestamp precedes anything the candidate launches
                out = model(*xs)
                _CUDA_SYNC()         # device-wide: side-stream work lands inside the window
                end.record()
                end.synchronize()
                sample = start.elapsed_time(end)
            else:
                t0 = _perf_ns()
                out = model(*xs)
                sample = (_perf_ns() - t0) / 1e6
            after(index, xs, out, sample)
            del out


# ------------------------------------------------------------------ judge side

def flush_bytes(device: str) -> int:
    """Bytes to write before each sample: 4x L2 on CUDA (cold cache); none on CPU, where a flush of the
    last-level cache would dominate the harness's cost on the judge's clock (CPU figures are warm-cache)."""
    if device.startswith("cuda") and torch.cuda.is_available():
        l2 = getattr(torch.cuda.get_device_properties(torch.device(device)), "L2_cache_size", 50 << 20)
        return 4 * int(l2)
    return 0


SLOTS = 2                             # input buffers per input; every call (trial or timed) writes into one


def slot(seed: int) -> int:
    """The input buffer a timed iteration writes into, from its (secret until sent) seed."""
    return (seed >> 17) % SLOTS


NOISE = 0.05                          # fresh noise, relative to each input's RMS, added every iteration


def make_plan(n: int, pool: int, rng: random.Random) -> list[tuple[int, float, int]]:
    return [(rng.randrange(pool), rng.uniform(*SCALE_RANGE), rng.randrange(1 << 62)) for _ in range(n)]


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


def quantile(xs: list[float], q: float) -> float:
    s = sorted(xs)
    pos = (len(s) - 1) * q
    lo, hi = math.floor(pos), math.ceil(pos)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


def summarize(label: str, samples: list[float], wall_ms_per_iter: float, kind: str, harness_ms: float = 0.0,
              inproc_ms: float | None = None) -> Timing:
    med = quantile(samples, 0.5)
    spread = (quantile(samples, 0.75) - quantile(samples, 0.25)) / (2 * med) if med > 0 else 0.0
    return Timing(label, tuple(samples), wall_ms_per_iter, med, spread, kind, harness_ms, inproc_ms)


def speedup(base: Timing, cand: Timing, resamples: int = 2000, seed: int = 0) -> Speedup:
    """Ratio of medians (baseline / candidate) with a 95% bootstrap interval.

    A speedup is claimed only when the interval's lower bound clears 1 + max(3 x spread, 2%).
    """
    g = torch.Generator().manual_seed(seed)
    b = torch.tensor(base.samples_ms, dtype=torch.float64)
    c = torch.tensor(cand.samples_ms, dtype=torch.float64)
    bi = torch.randint(len(b), (resamples, len(b)), generator=g)
    ci = torch.randint(len(c), (resamples, len(c)), generator=g)
    ratios = b[bi].median(dim=1).values / c[ci].median(dim=1).values
    low, high = (float(torch.quantile(ratios, q)) for q in (0.025, 0.975))
    ratio = base.median_ms / cand.median_ms if cand.median_ms > 0 else math.inf
    threshold = 1 + max(3 * max(base.spread, cand.spread), 0.02)
    return Speedup(ratio, low, high, threshold, claimed=low > threshold and resolvable(base) and resolvable(cand),
                   flagged=ratio > IMPLAUSIBLE)


HARNESS_SHARE = 0.5                  # a row whose harness is more than this share of its judge time is not claimed


def resolvable(t: Timing) -> bool:
    """Whether the judge's clock resolves this row: its per-call figure is the judge's time less the
    harness's, so where the harness is most of the time (a call far cheaper than building its inputs and
    digesting its outputs) the difference is noise, and a candidate that made its own harness cheaper
    could look faster; such a row's speedup is shown, never claimed."""
    return t.harness_ms <= HARNESS_SHARE * (t.median_ms + t.harness_ms)


def harness_cost(harness: list[list[float]], baselines: list[list[float]]) -> float:
    """The per-iteration cost to subtract: the lower quartile of the harness's own samples (the round trip,
    input building, flush, checks and digests, with a stand-in output; noise there must not make rows
    look faster), and never more than 80% of a baseline's lower quartile (the baselines run the same
    harness plus the reference: a harness figure taken during a burst of load cannot take a row to
    nearly nothing)."""
    if not harness or not harness[0]:
        return 0.0
    h = max(0.0, quantile(harness[0], 0.25))
    for b in baselines:
        if b:
            h = min(h, 0.8 * max(0.0, quantile(b, 0.25)))
    return h


def less_harness(per_call: list[float], harness_ms: float) -> list[float]:
    """Per-call samples less the harness's own cost, kept positive (a sample the subtraction would take to
    zero or below is noise around a call cheaper than the harness: it keeps a twentieth of its figure)."""
    return [max(x - harness_ms, 0.05 * x, 1e-6) for x in per_call]


@dataclass
class Plans:
    """Every iteration's (pool index, scale), by tag, so the judge can rebuild any re-checked input."""

    rng: random.Random
    pool: int
    by_tag: dict[int, tuple[int, float, int]]
    next_tag: int = 0

    def new(self, n: int) -> tuple[int, list[tuple[int, float, int]]]:
        plan = make_plan(n, self.pool, self.rng)
        tag0 = self.next_tag
        for k, p in enumerate(plan):
            self.by_tag[tag0 + k] = p
        self.next_tag += n
        return tag0, plan
