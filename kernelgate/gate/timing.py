"""The only timer. Worker side: the timed loop. Judge side: plans, interleaving, statistics, speedup.

CUDA: events, a device-wide synchronize before the end event (work on any stream counts), L2 flushed
before each sample, fresh inputs every iteration (a pool entry times a random scale), warm-up by time.
CPU: the same loop on a monotonic clock. The judge also times each batch on its own clock, outside the
candidate's process; a candidate whose in-process samples disagree with that clock is rejected.
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
CPU_FLUSH_BYTES = 16 << 20
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


def timed_loop(model: Callable, make: Callable[..., list[Any]], plan: list, device: str,
               flush_bytes: int, retain: Callable[[int, Any], None], tag0: int) -> list[float]:
    """Run the plan [(pool index, scale, noise seed), ...] and return one sample (ms) per iteration."""
    cuda = device.startswith("cuda")
    flush = torch.empty(max(flush_bytes // 4, 1), dtype=torch.float32, device=device)
    samples = []
    with torch.no_grad():
        for index, step in enumerate(plan):
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
                samples.append(start.elapsed_time(end))
            else:
                t0 = _perf_ns()
                out = model(*xs)
                samples.append((_perf_ns() - t0) / 1e6)
            retain(tag0 + index, out)
            del out
    return samples


# ------------------------------------------------------------------ judge side

def flush_bytes(device: str) -> int:
    """Bytes to write before each sample: 4x L2 on CUDA (cold cache), a fixed block on CPU."""
    if device.startswith("cuda") and torch.cuda.is_available():
        l2 = getattr(torch.cuda.get_device_properties(torch.device(device)), "L2_cache_size", 50 << 20)
        return 4 * int(l2)
    return CPU_FLUSH_BYTES


NOISE = 0.05                          # fresh noise, relative to each input's RMS, added every iteration


def make_plan(n: int, pool: int, rng: random.Random) -> list[tuple[int, float, int]]:
    return [(rng.randrange(pool), rng.uniform(*SCALE_RANGE), rng.randrange(1 << 62)) for _ in range(n)]


def rms(xs: list[Any], scalable: list[bool]) -> list[float]:
    return [float(x.double().pow(2).mean().sqrt()) if ok and x.numel() else 0.0 for x, ok in zip(xs, scalable)]


def fresh(xs: list[Any], s: float, seed: int, scalable: list[bool], rms_: list[float], device: str) -> list[Any]:
    """The inputs of one timed iteration: a pool entry times a random scale plus fresh noise from `seed`.

    No two iterations see the same values, and no transformation of earlier inputs (a scale, a sign)
    gives the next ones. The judge rebuilds any iteration bit for bit on the same device type."""
    out = []
    g = torch.Generator(device=device).manual_seed(seed)
    for x, ok, r in zip(xs, scalable, rms_):
        if ok and x.element_size() == 1:        # fp8 has no arithmetic: in fp32, rounded back onto its grid
            noise = torch.randn(x.shape, generator=g, device=device, dtype=torch.float32)
            top = torch.finfo(x.dtype).max if x.is_floating_point() else 127.0
            out.append((x.float() * s + noise * (NOISE * r)).clamp(-top, top).to(x.dtype))
        elif ok:
            noise = torch.randn(x.shape, generator=g, device=device, dtype=torch.float32).to(x.dtype)
            out.append(x * s + noise * (NOISE * r))
        else:
            out.append(x)
    return out


def quantile(xs: list[float], q: float) -> float:
    s = sorted(xs)
    pos = (len(s) - 1) * q
    lo, hi = math.floor(pos), math.ceil(pos)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


def summarize(label: str, samples: list[float], wall_ms_per_iter: float, kind: str) -> Timing:
    med = quantile(samples, 0.5)
    spread = (quantile(samples, 0.75) - quantile(samples, 0.25)) / (2 * med) if med > 0 else 0.0
    return Timing(label, tuple(samples), wall_ms_per_iter, med, spread, kind)


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
    return Speedup(ratio, low, high, threshold, claimed=low > threshold, flagged=ratio > IMPLAUSIBLE)


def clock_mismatch(base_gaps: list[float], cand_gaps: list[float], cand_walls: list[float]) -> str:
    """Compare in-process samples with the judge's clock, batch by batch. Both run the same harness, so
    the time a batch spends outside its timed windows per iteration (its 'gap': the judge's wall time
    per iteration minus the mean of its samples) should match the baseline's; a candidate that hides
    work from its samples (patched timers, unjoined work) shows a larger gap in every batch. Medians
    over batches: one batch slowed by the machine (another process compiling, a page-cache miss)
    is not a verdict."""
    gap_c, gap_b, wall_c = quantile(cand_gaps, 0.5), quantile(base_gaps, 0.5), quantile(cand_walls, 0.5)
    mean_c = wall_c - gap_c
    if gap_c < -0.05 * wall_c - 0.05:
        return f"in-process samples ({mean_c:.3g} ms) exceed the judge's clock ({wall_c:.3g} ms/iter)"
    if gap_c - gap_b > max(1.0, 0.5 * wall_c, 2.0 * abs(gap_b)):
        return (f"the judge's clock saw {wall_c:.3g} ms/iter but the samples say {mean_c:.3g} ms; "
                f"{gap_c - gap_b:.3g} ms/iter more than the baseline's harness overhead is unaccounted for "
                "(medians over batches)")
    return ""


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
