"""The judge's side of timing: plans, statistics, the harness's cost, speedups.

The worker's loop (kernelgate/sandbox/loop.py) takes one step at a time from the judge (fresh inputs from
a pool entry times a random scale plus noise, an L2 flush on CUDA, the call, a device-wide synchronize);
the judge's clock around each step (kernelgate/clock.py) is the basis of every claim, less the harness's
own cost (`harness_cost`, `less_harness`); a candidate the clock cannot resolve apart from the harness is
compared with the harness included (`with_harness`), and a baseline it cannot resolve claims nothing
(`resolvable`). In-process samples are diagnostics only. The input-building functions both sides run
(`fresh`, `rms`, `slot`) live with the loop and are re-exported here.
"""
from __future__ import annotations

import dataclasses
import math
import random
import weakref
from dataclasses import dataclass
from typing import Any

import torch

from ..records import Speedup, Timing
from ..sandbox import loop
from ..sandbox.loop import BOOTSTRAP, FRESH, NOISE, RESAMPLE, SCALE, SCALE_RANGE, SLOTS, fresh, slot  # noqa: F401 - both sides build inputs alike

#: bump when what a timed iteration costs changes (inputs, checks, digests): kept measurements are then stale
HARNESS_VERSION = 12                 # 2: CPU noise from a keyed integer mix (sandbox/loop.py); 3: chunked CPU digest;
#                                      4: inputs with a declared domain varied inside it; 5: the inputs' commitment
#                                      a positional digest, refilled buffers keep their version; 6: the CPU mixes
#                                      in C (kernelgate/native.py); 7: a float32 CPU input's values in one C pass,
#                                      each op rounded on its own; 8: the GPU loop's synchronizes and events as
#                                      C functions, the digest kernels launched past Triton's dispatch; 9: float
#                                      inputs drawn fresh where the reference's outputs are still; 10: every
#                                      float input drawn afresh where the reference accepts it (task.drawn_fresh);
#                                      11: no claim where one is not (task.fixed_inputs); Python numbers the
#                                      workload varies drawn over their range, a list's floats noised; 12: each
#                                      pool's own marks, and every row timed on the workload's own draws (drawn_ms)
IMPLAUSIBLE = 3.0                    # speedups above this are flagged for review
BASELINES = ("eager", "compile")     # the baselines' labels (gate/baselines.py), eager first as the harness's host


# ------------------------------------------------------------------ judge side

#: elements above which the judge's RMS of a pool tensor is summed in chunks of this many (the whole-tensor form,
#: `x.double().pow(2)`, held two float64 copies at once: 64 GiB of the judge's host memory for a 16 GiB fp32 input
#: of the lean plan, 8-15 s, at every batch's `send_pool`)
RMS_CHUNK = 1 << 22
_RMS_KEPT: dict[int, tuple[Any, int, int, float]] = {}     # id -> (weakref, version, data_ptr, rms)


def _rms_one(x: torch.Tensor) -> float:
    """The RMS of one float or complex tensor: `loop.rms`'s figure at or below RMS_CHUNK elements; above it the
    same sum of squares in float64, chunk by chunk (one chunk's float64 copy at a time)."""
    if x.numel() <= RMS_CHUNK:
        return loop.rms([x], [True])[0]
    flat = x.reshape(-1)                    # a view where x is contiguous (a pool entry is)
    total = torch.zeros((), dtype=torch.float64, device=x.device)
    for start in range(0, flat.numel(), RMS_CHUNK):
        part = flat[start:start + RMS_CHUNK]
        part = part.abs() if part.is_complex() else part
        d = part.double()
        total += d.mul_(d).sum()
    return float((total / flat.numel()).sqrt())


def rms(xs: list[Any], scalable: list[Any]) -> list[float]:
    """The RMS of each input varied by scale and noise (0.0 for the others), the judge's figure: sent with the
    timing pool (the worker builds timed inputs from it) and used again to rebuild a re-checked iteration. Large
    tensors are summed in chunks; a tensor's figure is kept while the tensor lives unchanged (same object,
    version and storage), so a pool sent before every batch of the lean plan is read once."""
    out = []
    for x, ok in zip(xs, scalable):
        if not (loop.varied(ok) and isinstance(x, torch.Tensor) and x.numel()):
            out.append(0.0)
            continue
        if x.numel() <= RMS_CHUNK:          # small: as before, nothing kept
            out.append(_rms_one(x))
            continue
        key = id(x)
        kept = _RMS_KEPT.get(key)
        if kept is not None and kept[0]() is x and kept[1] == x._version and kept[2] == x.data_ptr():
            out.append(kept[3])
            continue
        value = _rms_one(x)
        _RMS_KEPT[key] = (weakref.ref(x, lambda _, key=key: _RMS_KEPT.pop(key, None)), x._version, x.data_ptr(),
                          value)
        out.append(value)
    return out

def flush_bytes(device: str) -> int:
    """Bytes to write before each sample: 4x L2 on CUDA (cold cache); none on CPU, where a flush of the
    last-level cache would dominate the harness's cost on the judge's clock (CPU figures are warm-cache)."""
    if device.startswith("cuda") and torch.cuda.is_available():
        l2 = getattr(torch.cuda.get_device_properties(torch.device(device)), "L2_cache_size", 50 << 20)
        return 4 * int(l2)
    return 0


def make_plan(n: int, pool: int, rng: random.Random) -> list[tuple[int, float, int]]:
    return [(rng.randrange(pool), rng.uniform(*SCALE_RANGE), rng.randrange(1 << 62)) for _ in range(n)]


def quantile(xs: list[float], q: float) -> float:
    s = sorted(xs)
    pos = (len(s) - 1) * q
    lo, hi = math.floor(pos), math.ceil(pos)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


def rel_spread(xs: list[float]) -> float:
    """The relative semi-interquartile range: (p75 - p25) / (2 median)."""
    med = quantile(xs, 0.5)
    return (quantile(xs, 0.75) - quantile(xs, 0.25)) / (2 * med) if med > 0 else 0.0


MIN_SPREAD_ROUNDS = 4                # fewer rounds: the claim's noise term is the per-sample spread


def summarize(label: str, samples: list[float], wall_ms_per_iter: float, kind: str, harness_ms: float = 0.0,
              inproc_ms: float | None = None, rounds: list[list[float]] | None = None) -> Timing:
    """`rounds`: the same samples by round (one batch each), for the spread of the rounds' medians."""
    meds = [quantile(r, 0.5) for r in rounds or () if r]
    return Timing(label, tuple(samples), wall_ms_per_iter, quantile(samples, 0.5), rel_spread(samples), kind,
                  harness_ms, inproc_ms, rel_spread(meds) if len(meds) >= MIN_SPREAD_ROUNDS else None)


def noise(t: Timing) -> float:
    """The relative noise a claim must clear three times: the spread of the per-round medians, where there are
    enough rounds, else the per-sample spread. The bootstrap interval already holds the samples' scatter;
    what it cannot see is drift between rounds (load, clocks, a thawed worker), which the rounds' medians
    show. On the judge's clock a sample's spread is mostly the round trip's jitter (2-8% per sample on the
    H200 against 0.4% in-process), which three times over would bar any claim under about 1.25x."""
    return t.round_spread if t.round_spread is not None else t.spread


def with_harness(t: Timing) -> Timing:
    """A row as the judge's clock saw it: the harness's cost subtracted from its samples added back (the
    candidate's row loses the smaller of the trusted figure and its own process's: measure.py), so each sample is
    at least the call's own time whatever the harness cost in the candidate's process."""
    samples = tuple(s + t.harness_ms for s in t.samples_ms)
    med = quantile(list(samples), 0.5)
    rs = t.round_spread * t.median_ms / med if t.round_spread is not None and med > 0 else t.round_spread
    drawn = t.drawn_ms + t.harness_ms if t.drawn_ms is not None else None
    return dataclasses.replace(t, samples_ms=samples, median_ms=med, spread=rel_spread(list(samples)),
                               harness_ms=0.0, round_spread=rs, drawn_ms=drawn)


def speedup(base: Timing, cand: Timing, resamples: int = 2000, seed: int = 0, fixed: str = "") -> Speedup:
    """Ratio of medians (baseline / candidate) with a 95% bootstrap interval.

    A speedup is claimed only when the interval's lower bound clears 1 + max(3 x noise, 2%) (see noise), and the
    ratio of mean times does too (red team 64: a candidate 15x slower on one call in six, 4x faster on the rest,
    claimed 2.97x on the medians while costing 2.4x the reference's time on average).
    A candidate whose call is shorter than the harness's cost (not `resolvable`) is compared with its harness
    included (`with_harness`, Speedup.bounded): never faster than its call, so the figure is a lower bound on
    its speedup, which the candidate's process cannot raise by cheapening or slowing the harness. A baseline
    the clock cannot resolve claims nothing (its call is the difference of two similar numbers), nor does a run
    whose timed inputs are not all drawn afresh (`fixed`: gate/task.fixed_inputs).
    Where both rows were timed on fresh draws of the workload's own generator (Timing.drawn_ms), that ratio must
    reach DRAWN_AGREE of the interval's lower bound, and the threshold: the timed draws keep the workload's
    distribution of values, not its arrangement or the structure of its values (red team 64: nearly sorted floats
    at fresh positions slowed the reference's sort 3x, and a candidate claimed 3.9x; red team 65: an FFT length
    jittered off the 5-smooth lengths the workload uses, 3.5-6x).
    """
    bounded = resolvable(base) and not resolvable(cand)
    if bounded:
        cand = with_harness(cand)
    g = torch.Generator().manual_seed(seed)
    b = torch.tensor(base.samples_ms, dtype=torch.float64)
    c = torch.tensor(cand.samples_ms, dtype=torch.float64)
    bi = torch.randint(len(b), (resamples, len(b)), generator=g)
    ci = torch.randint(len(c), (resamples, len(c)), generator=g)
    ratios = b[bi].median(dim=1).values / c[ci].median(dim=1).values
    low, high = (float(torch.quantile(ratios, q)) for q in (0.025, 0.975))
    ratio = base.median_ms / cand.median_ms if cand.median_ms > 0 else math.inf
    threshold = 1 + max(3 * max(noise(base), noise(cand)), 0.02)
    cmean = float(c.mean())
    mean_ratio = float(b.mean()) / cmean if cmean > 0 else math.inf
    drawn = None
    if base.drawn_ms is not None and cand.drawn_ms is not None:
        drawn = base.drawn_ms / cand.drawn_ms if cand.drawn_ms > 0 else math.inf
    agrees = drawn_agrees(drawn, threshold, low)
    return Speedup(ratio, low, high, threshold,
                   claimed=low > threshold and mean_ratio > threshold and resolvable(base) and resolvable(cand)
                   and not fixed and agrees,
                   flagged=ratio > IMPLAUSIBLE, bounded=bounded, unresolved=not resolvable(base), fixed=fixed,
                   mean_ratio=mean_ratio, drawn_ratio=drawn)


#: a claim's ratio on the workload's own fresh draws must reach this share of the timed draws' interval's lower bound
#: (eight single calls per row: their median moves 5-10% on a quiet CPU; red team 64's sort measured 2.0x there
#: against a lower bound of 2.9x on the timed draws)
DRAWN_AGREE = 0.85


def drawn_agrees(drawn: float | None, threshold: float, low: float) -> bool:
    """Whether the ratio on the workload's own draws (None: not measured) lets a claim stand: above the threshold
    and DRAWN_AGREE of the timed draws' lower bound."""
    return drawn is None or drawn > max(threshold, DRAWN_AGREE * low)


HARNESS_SHARE = 0.5                  # a row whose harness is more than this share of its judge time is unresolved


def resolvable(t: Timing) -> bool:
    """Whether the judge's clock resolves this row: its per-call figure is the judge's time less the
    harness's, so where the harness is most of the time (a call far cheaper than building its inputs and
    digesting its outputs) the difference is noise, and a candidate that made its own harness cheaper
    could look faster: such a candidate is compared with its harness included (`with_harness`), and such a
    baseline claims nothing (`speedup`)."""
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
    """Every iteration's (pool index, scale), by tag, so the judge can rebuild any re-checked input. `rng` is the
    OS's (random.SystemRandom) in the judge: every step's seed reaches the worker, and a Mersenne Twister's state
    follows from some hundreds of its outputs (every later step's inputs, and a drawn step's mask, with it)."""

    rng: random.Random
    pool: int
    by_tag: dict[int, tuple[int, float, int]]
    next_tag: int = 0

    def new(self, n: int) -> tuple[int, list[tuple[int, float, int]]]:
        return self._tagged(make_plan(n, self.pool, self.rng))

    def each(self, n: int) -> tuple[int, list[tuple[int, float, int]]]:
        """A plan calling entries 0..n-1 of a pool once each, in a random order."""
        order = list(range(n))
        self.rng.shuffle(order)
        return self._tagged([(k, 1.0, self.rng.randrange(1 << 62)) for k in order])

    def again(self, plan: list[tuple[int, float, int]]) -> int:
        """A new tag for the same steps (the harness alone on a batch's steps)."""
        return self._tagged(list(plan))[0]

    def _tagged(self, plan: list[tuple[int, float, int]]) -> tuple[int, list[tuple[int, float, int]]]:
        n = len(plan)
        tag0 = self.next_tag
        for k, p in enumerate(plan):
            self.by_tag[tag0 + k] = p
        self.next_tag += n
        return tag0, plan
