"""The worker's side of timing: the timed loop, warm-up, and the inputs of each step.

The loop takes one step at a time from the judge (fresh inputs from a pool entry times a random scale plus
noise, an L2 flush on CUDA, the call, a device-wide synchronize) and hands each output to the harness's
`after`, which commits to it in the answer that stops the judge's clock (kernelgate/gate/timing.py keeps
the statistics). The judge rebuilds any step's inputs with the same `fresh`, on the same device type.
Imports nothing of the gate: this runs in the candidate's process.
"""
from __future__ import annotations

import hashlib
import math
from typing import Any, Callable

import torch

from .. import clock, native
from . import handle

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
    # the torch ops of this frame (which holds the harness's callbacks) run in handle's frames (handle.py)
    flush = handle.flush_buffer(flush_bytes, device)
    if cuda:    # C functions only inside the loop (clock.py): one event pair, recorded again every iteration
        sync, ev = clock.device_sync, clock.EventBase
        record, wait, elapsed = ev.record, ev.synchronize, ev.elapsed_time
        start, end, stream = handle.event_pair(ev)
    with torch.no_grad():
        for index, step in enumerate(steps):
            xs = make(*step)
            handle.zero(flush)
            if cuda:
                sync()                    # inputs and flush done on every stream: nothing overlaps the start
                record(start, stream)
                wait(start)               # the start timestamp precedes anything the candidate launches
                out = model(*xs)
                sync()                    # device-wide: side-stream work lands inside the window
                record(end, stream)
                wait(end)
                sample = elapsed(start, end)
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

#: `scalable` of a float or complex input whose timed values are the entry's own at fresh positions (a draw with
#: replacement, `_resample`), then scaled and noised relative to each value (its sign kept): the workload's distribution of values, in no arrangement an
#: earlier call had (gate/task.py `drawn_fresh`); as the third item of a declared domain [low, high, BOOTSTRAP],
#: the same before the domain's move
BOOTSTRAP = "bootstrap"
#: `scalable` of a float input whose timed values are drawn fresh at the entry's RMS times the scale, keeping
#: nothing of the entry (where the reference refuses BOOTSTRAP's draws): Gaussian on a GPU, uniform on the CPU
#: from 31-bit words (continuous: 256 levels of noise bytes let a candidate tell them and tabulate a function)
FRESH = "fresh"
#: `scalable` of a float input the reference accepts neither drawn afresh nor noised (its outputs NaN there: red
#: team 59's ascending timestamps): the entry times the iteration's scale only
SCALE = "scale"
_BOOT_KEY = 1000003                     # BOOTSTRAP's positions come from a seed of their own (not the noise's)


def varied(ok: Any) -> bool:
    """Whether an input's `scalable` mark takes an RMS figure (scaled and noised, or drawn fresh at its RMS)."""
    return ok is True or (isinstance(ok, str) and ok in (FRESH, BOOTSTRAP))


def rms(xs: list[Any], scalable: list[Any]) -> list[float]:
    return [float((x.abs() if x.is_complex() else x).double().pow(2).mean().sqrt())
            if varied(ok) and isinstance(x, torch.Tensor) and x.numel() else 0.0 for x, ok in zip(xs, scalable)]


def has_floats(x: Any) -> bool:
    """Whether a list, tuple or dict holds, at any depth, a Python float or complex or a float or complex tensor."""
    if isinstance(x, (list, tuple)):
        return any(has_floats(y) for y in x)
    if isinstance(x, dict):
        return any(has_floats(y) for y in x.values())
    return isinstance(x, (float, complex)) or (isinstance(x, torch.Tensor) and (x.is_floating_point() or x.is_complex())
                                           and x.numel() > 0)


def _fresh_list(x: Any, s: float, seed: int, device: str) -> Any:
    """A list or tuple argument's float and complex tensors varied as top-level ones (each its own seed, its own
    RMS; new tensors), the rest as they are (red team 24: tensors inside a list were copied into every timed
    iteration, and a memo of their products claimed 2.1-2.9x); its Python floats scaled and noised as top-level
    ones (red team 61: a tuple of two floats copied, a memo of a solve keyed on it)."""
    keys = list(x) if isinstance(x, dict) else None
    items = [x[k] for k in keys] if keys is not None else list(x)
    seeds = [(seed * 1000003 + j + 1) & 0x7FFFFFFFFFFFFFFF for j in range(len(items))]
    out = [(_fresh_list(y, s, sd, device) if isinstance(y, (list, tuple, dict))      # nested: red team 62
            else fresh([y], s, sd, [True], rms([y], [True]) if isinstance(y, torch.Tensor) else [0.0], device)[0])
           if has_floats(y) else y for y, sd in zip(items, seeds)]
    if keys is not None:
        return dict(zip(keys, out))
    try:
        return type(x)(out)
    except TypeError:
        return x


_GOLDEN = 0x9E3779B97F4A7C15
_MASK31, _MASK64 = 0x7FFFFFFF, (1 << 64) - 1


def _splitmix(z: int) -> int:
    z = (z + _GOLDEN) & _MASK64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK64
    return z ^ (z >> 31)


def _noise_ab(seed: int) -> tuple[int, int]:
    """The odd multiplier and the offset of `cpu_noise_bytes`'s words for a seed."""
    z = _splitmix(seed)
    return (z & _MASK31) | 1, (z >> 32) & _MASK31


def cpu_noise_bytes(n: int, seed: int) -> torch.Tensor:
    """`n` pseudo-random bytes (uint8) from `seed`, on the CPU, for a fraction of randn's cost (randn, a
    single-threaded generator, took 18-27 ms for 4M values on a 2-core CPU: most of the harness's
    per-iteration cost there, and its load-dependent variance hid calls of a few ms).

    Word i is murmur3's 32-bit finalizer of a*i + b, with an odd multiplier a and an offset b from the
    seed (so one seed's words are no shift of another's), read as four bytes. Deterministic and the same
    in the judge and the worker (the same torch ops on the same device type)."""
    m = max(-(-n // 4), 1)
    a, b = _noise_ab(seed)
    x = torch.arange(m, dtype=torch.int32)
    x.mul_(a).add_(b)
    x.bitwise_xor_((x >> 16).bitwise_and_(0xFFFF)).mul_(0x85EBCA6B - (1 << 32))
    x.bitwise_xor_((x >> 13).bitwise_and_(0x7FFFF)).mul_(0xC2B2AE35 - (1 << 32))
    x.bitwise_xor_((x >> 16).bitwise_and_(0xFFFF))
    return x.view(torch.uint8)[:n]


#: bytes (uniform on 0..255) to noise of mean 0 and standard deviation 1: (b - MID) * UNIT
MID, UNIT = 127.5, 3.0 ** 0.5 / 128


def cpu_noise(n: int, seed: int) -> torch.Tensor:
    """`n` float32 values of mean 0 and standard deviation 1 (uniform on 256 levels) from `seed`."""
    return cpu_noise_bytes(n, seed).float().sub_(MID).mul_(UNIT)


def _unit(seed: int, k: int) -> float:
    """Input k's one uniform value in [0, 1) for an iteration's seed (a Python number's draw), the same on both sides."""
    return (_splitmix(_seed_of(seed, k)) >> 11) / float(1 << 53)


def _seed_of(seed: int, k: int) -> int:
    """Input k's own noise seed (CPU)."""
    return (seed + k * _GOLDEN) & ((1 << 62) - 1)


#: `scalable` of an integer or bool input whose values are drawn again every iteration (`_resample`)
RESAMPLE = "resample"
#: the key of a `scalable` mark {MASKED: dtype}: the pool holds the input's bytes (a last dim of its item size) XOR a
#: keystream of the step's seed (`masked`), so no input of the workload's own draws is readable before its step
MASKED = "masked"
TREE = "tree"                  # {MASKED: TREE, "dtypes": [...]}: a list, tuple or dict of tensors (`masked_tree`)


def keystream(n: int, seed: int, device: str) -> torch.Tensor:
    """`n` bytes (uint8) from `seed` on `device`: SHAKE-128 of the seed on the CPU (an extendable-output hash: no
    run of known bytes gives the seed or the other bytes away, where `cpu_noise_bytes`' invertible mix of a*i + b
    gives a and b from two known words, and a workload's zeros, pads and high bytes of small integers are known);
    the device's generator (Philox, keyed by the seed) on a GPU, where hashing gigabytes a step would take seconds."""
    if torch.device(device).type == "cpu":
        if n == 0:
            return torch.empty(0, dtype=torch.uint8)
        key = hashlib.shake_128(b"kernelgate draw " + seed.to_bytes(8, "little"))
        return torch.frombuffer(bytearray(key.digest(n)), dtype=torch.uint8)
    g = torch.Generator(device=device).manual_seed(seed)
    return torch.randint(0, 256, (n,), generator=g, device=device, dtype=torch.uint8)


def masked(x: torch.Tensor, seed: int, k: int) -> tuple[torch.Tensor, dict]:
    """Input k of a step with seed `seed` as the pool holds it: its bytes (contiguous, uint8, a last dim of the item
    size) XOR the keystream, and its mark; `fresh` undoes it with the step's seed, which the worker learns only when
    the step starts."""
    b = x.contiguous().unsqueeze(-1).view(torch.uint8)
    key = keystream(b.numel(), _seed_of(seed, k), str(x.device)).view(b.shape)
    return b ^ key, {MASKED: str(x.dtype).replace("torch.", "")}


def masked_tree(x: Any, seed: int, k: int) -> tuple[Any, dict | bool]:
    """Input k when it is a list, tuple or dict holding tensors (at any depth): each tensor masked as `masked`
    does, with a seed of its own place, the rest as it is; the mark lists the tensors' dtypes in walk order (red
    team 69: tensors in a list argument reached the worker in plain). False where it holds no tensor."""
    dtypes: list[str] = []

    def leaf(y: torch.Tensor, sd: int) -> torch.Tensor:
        m, mark = masked(y, sd, 0)
        dtypes.append(mark[MASKED])
        return m

    out = _map_tree(x, _seed_of(seed, k), leaf)
    return (out, {MASKED: TREE, "dtypes": dtypes}) if dtypes else (x, False)


def _unmasked_tree(x: Any, ok: dict, seed: int, device: str, k: int) -> Any:
    dtypes = iter(ok["dtypes"])
    return _map_tree(x, _seed_of(seed, k), lambda y, sd: _unmasked(y, {MASKED: next(dtypes)}, sd, 0, device))


def _map_tree(y: Any, sd: int, leaf: Callable[[torch.Tensor, int], torch.Tensor]) -> Any:
    """`y` with every tensor in it (lists, tuples, dicts, at any depth) replaced by `leaf(tensor, its place's seed)`,
    in walk order."""
    if isinstance(y, torch.Tensor):
        return leaf(y, sd)
    if not isinstance(y, (list, tuple, dict)):
        return y
    keys = list(y) if isinstance(y, dict) else None
    items = [y[q] for q in keys] if keys is not None else list(y)
    out = [_map_tree(v, (sd * 1000003 + j + 1) & 0x7FFFFFFFFFFFFFFF, leaf) for j, v in enumerate(items)]
    return dict(zip(keys, out)) if keys is not None else type(y)(out) if isinstance(y, tuple) else out


def _unmasked(x: torch.Tensor, ok: dict, seed: int, k: int, device: str) -> torch.Tensor:
    key = keystream(x.numel(), _seed_of(seed, k), device).view(x.shape)
    return (x ^ key).view(getattr(torch, str(ok[MASKED]))).squeeze(-1)


def _randint(low: int, high: int, shape: tuple, k: int, seed: int, g: torch.Generator | None,
             device: str) -> torch.Tensor:
    """Integers uniform in [low, high] (int64) of `shape`: from the seeded generator on a GPU, from
    `cpu_noise_bytes` words on the CPU."""
    if g is not None:
        return torch.randint(low, high + 1, shape, generator=g, device=device)
    n = math.prod(shape)
    words = cpu_noise_bytes(4 * n, _seed_of(seed, k)).view(torch.int32).bitwise_and(_MASK31).long()
    return words.remainder_(high - low + 1).add_(low).view(shape)


def _resample(x: torch.Tensor, k: int, seed: int, g: torch.Generator | None, device: str) -> torch.Tensor:
    """x's elements drawn with replacement, in x's shape: each iteration's indices (labels, masks) are a new
    sample of the values the workload gives, so valid ones stay valid, the distribution stays the workload's,
    and nothing keyed on the whole tensor, its rows or its multiset of values sees the same key twice (an exact
    memo of an integer-only branch claimed 2.79x on copied indices)."""
    n = x.numel()
    return x.reshape(-1)[_randint(0, n - 1, (n,), k, seed, g, device)].view(x.shape)


def _uniform_ints(x: torch.Tensor, low: int, high: int, k: int, seed: int, g: torch.Generator | None,
                  device: str) -> torch.Tensor:
    """Fresh integers uniform in [low, high] in x's shape (int64): a timestep shared by a batch, or a
    one-element index, gets a new value every iteration (a bootstrap of a constant tensor is that constant:
    a memo keyed on it claimed 2.15x for a 0.97x candidate)."""
    return _randint(low, high, tuple(x.shape), k, seed, g, device)


_SQRT12 = 12.0 ** 0.5                   # a uniform kernel of width bw * sqrt(12) has standard deviation bw


def _reflected(v: torch.Tensor, low: int, high: int) -> torch.Tensor:
    """Integers reflected into [low, high] (v is overwritten): folded with period 2 (high - low), so a value any
    distance outside lands inside as repeated reflections at both ends would put it (a clamp past either end made a
    point mass there: an entry outside the span, its draws all `low`, a memo keyed on them)."""
    w = high - low
    if w <= 0:
        return v.fill_(low)
    v.sub_(low).remainder_(2 * w)
    return torch.where(v > w, 2 * w - v, v).add_(low)


def _jitter(x: torch.Tensor, bw: float, k: int, seed: int, g: torch.Generator | None, device: str) -> torch.Tensor:
    """Rounded jitter of standard deviation `bw` (a uniform kernel), int64, in x's shape."""
    return _uniform(x, k, seed, g, device).sub_(0.5).mul_(_SQRT12 * bw).round_().long()


def _smoothed_ints(x: torch.Tensor, ok: dict, k: int, seed: int, g: torch.Generator | None,
                   device: str) -> torch.Tensor:
    """A smoothed bootstrap of x's integers (int64, x's shape) for the mark `ok` ({"low", "high", "bw"}): the
    entry's values at fresh positions, each moved by a rounded jitter of standard deviation bw, reflected into
    [low, high] (a clamp would give the bounds the entry's own value half the time, a point a memo of the pool's
    ends keys on). The workload's density of values, not only its range (red team 63: long-tailed lengths drawn
    uniformly over their span filled half the window where the workload's fill four fifths, and a path for sparse
    batches claimed 1.68x), and values no pool entry holds (a memo of the pool's few timesteps misses).
    "atoms": values every pool entry holds at a point mass (a pad id), drawn as they are (red team 64: the jitter
    moved nearly every pad id, and a path for unpadded batches claimed 2.5-3.2x). "distinct": every pool entry's
    values differ (a permutation, distinct indices), and so do the draw's (`_distinct_ints`)."""
    low, high, bw = int(ok["low"]), int(ok["high"]), float(ok["bw"])
    if ok.get("distinct") and x.numel() > 1:
        return _distinct_ints(x, low, high, bw, k, seed, g, device)
    v = _resample(x, k + _BOOT_KEY, seed, g, device).long()
    jitter = _jitter(x, bw, k, seed, g, device)
    if ok.get("atoms"):
        jitter.masked_fill_(torch.isin(v, torch.tensor(ok["atoms"], dtype=torch.long, device=v.device)), 0)
    return _reflected(v.add_(jitter), low, high)


def _distinct_ints(x: torch.Tensor, low: int, high: int, bw: float, k: int, seed: int,
                   g: torch.Generator | None, device: str) -> torch.Tensor:
    """Distinct integers in [low, high] near the entry's distinct values, at fresh positions (red team 64: a
    permutation's bootstrap repeated about 37% of its values, and a candidate running its MLP once per distinct
    gathered row claimed 1.5x). The sorted values less their ranks (s_i - i: non-decreasing, inside
    [low, high - n + 1]) are jittered and reflected as `_smoothed_ints` does, sorted, and their ranks added back:
    strictly increasing again, inside [low, high]; a permutation of 0..n-1 stays one, newly arranged."""
    n = x.numel()
    rank = torch.arange(n, device=x.device)
    t = x.reshape(-1).long().sort().values.sub_(rank)
    t = _reflected(t.add_(_jitter(t, bw, k, seed, g, device)), low, high - n + 1).sort().values.add_(rank)
    if g is not None:
        where = torch.randperm(n, generator=g, device=device)
    else:
        words = cpu_noise_bytes(4 * n, _seed_of(seed, k + _BOOT_KEY)).view(torch.int32)
        where = torch.sort(words, stable=True).indices
    return torch.empty_like(t).index_copy_(0, where, t).view(x.shape)


def smoothed_number(x: int | float, ok: dict, u: float) -> int | float:
    """A Python number's smoothed draw from one uniform `u` in [0, 1) for the mark `ok` ({"low", "high", "bw"}):
    x moved by a jitter of standard deviation bw (rounded for an int), reflected into [low, high] (a sampler's
    timestep keeps the workload's density); x as it is where it is one of ok's "atoms" (a value two or more pool
    entries hold: a point mass of the workload's)."""
    if x in ok.get("atoms", ()):
        return x
    low, high = ok["low"], ok["high"]
    y = x + (u - 0.5) * _SQRT12 * float(ok["bw"])
    w = high - low
    if w > 0:       # folded as `_reflected` folds tensors: inside [low, high] from any distance outside
        r = (y - low) % (2 * w)
        y = low + (2 * w - r if r > w else r)
    return min(max(int(round(y)) if type(x) is int else y, low), high)


#: how far an input with a declared domain moves toward a fresh point of its domain each iteration
DOMAIN_MIX = 0.25


def _uniform(x: torch.Tensor, k: int, seed: int, g: torch.Generator | None, device: str) -> torch.Tensor:
    """Fresh values in (0, 1), float32, of x's shape: from the seeded generator on a GPU, from `cpu_noise_bytes`
    (256 levels) on the CPU."""
    if g is not None:
        return torch.rand(x.shape, generator=g, device=device, dtype=torch.float32)
    return cpu_noise_bytes(x.numel(), _seed_of(seed, k)).view(x.shape).float().add_(0.5).div_(256.0)


def _in_domain(x: torch.Tensor, lo: float, hi: float, s: float, u: torch.Tensor) -> torch.Tensor:
    """x moved to fresh values inside [lo, hi] (float32): a bounded domain pulls x DOMAIN_MIX of the way toward a
    fresh uniform point of it (a convex combination stays inside), a half-bounded one scales the distance from
    its bound by s times a fresh factor near 1; clamped to the domain against rounding."""
    v = x.to(torch.float32, copy=True)         # never the pool entry itself
    if lo > float("-inf") and hi < float("inf"):
        return v.add_(u.mul_(hi - lo).add_(lo).sub_(v).mul_(DOMAIN_MIX)).clamp_(lo, hi)
    factor = u.sub_(0.5).mul_(2 * NOISE).add_(1.0).mul_(s)
    if lo > float("-inf"):
        return v.sub_(lo).mul_(factor).add_(lo).clamp_(min=lo)
    return v.sub_(hi).mul_(factor).add_(hi).clamp_(max=hi)


def fresh(xs: list[Any], s: float, seed: int, scalable: list[Any], rms_: list[float], device: str,
          out: list[Any] | None = None) -> list[Any]:
    """The inputs of one timed iteration: a pool entry times a random scale plus fresh noise from `seed`,
    written into `out` (the worker's persistent input buffers, the ones the correctness trials used, so
    addresses give no sign of which calls are timed) or into new tensors.

    No two iterations see the same values, and no transformation of earlier inputs (a scale, a sign)
    gives the next ones. The judge rebuilds any iteration bit for bit on the same device type: both
    sides run these same operations. `scalable[k]`: True (scale and noise), {"low": a, "high": b} (integers:
    fresh uniform draws in [a, b], `_uniform_ints`; with "bw", a smoothed bootstrap inside [a, b],
    `_smoothed_ints`), RESAMPLE (integers and bools: new draws of the entry's own values, `_resample`), False
    (copied), or a declared domain [low, high] (moved to fresh values inside
    it: `_in_domain`; a third item BOOTSTRAP: from the entry's values at fresh positions), BOOTSTRAP (the entry's
    values at fresh positions, times the scale and 1 + NOISE times unit noise), FRESH (values drawn fresh at the entry's RMS times the scale), SCALE
    (the entry times the scale). A Python float marked True is scaled and noised too; a Python int marked
    {"low", "high"} drawn uniformly over that range ({"low", "high", "bw"}: `smoothed_number`)."""
    res = []
    g = torch.Generator(device=device).manual_seed(seed) if torch.device(device).type != "cpu" else None
    for k, (x, ok, r) in enumerate(zip(xs, scalable, rms_)):
        if isinstance(ok, dict) and ok.get(MASKED) == TREE:     # the workload's own draw, a structure of tensors
            res.append(_unmasked_tree(x, ok, seed, device, k))
            continue
        if isinstance(x, (list, tuple, dict)) and ok is True:
            res.append(_fresh_list(x, s, (seed * 31 + k) & 0x7FFFFFFFFFFFFFFF, device))
            continue
        if isinstance(x, (float, complex)) and ok is True:   # a Python float or complex: scaled and noised as a tensor
            res.append(x * s * (1.0 + NOISE * 3.0 ** 0.5 * (2.0 * _unit(seed, k) - 1.0)))
            continue
        if type(x) in (int, float) and isinstance(ok, dict) and "bw" in ok:     # smoothed over the pool's values
            res.append(smoothed_number(x, ok, _unit(seed, k)))
            continue
        if type(x) is int and isinstance(ok, dict):     # a Python int the workload varies: uniform over its range
            res.append(int(ok["low"]) + _splitmix(_seed_of(seed, k)) % (int(ok["high"]) - int(ok["low"]) + 1))
            continue
        if type(x) is float and isinstance(ok, dict):   # a Python float the workload varies: uniform over its range
            res.append(float(ok["low"]) + (float(ok["high"]) - float(ok["low"])) * _unit(seed, k))
            continue
        if not isinstance(x, torch.Tensor):
            res.append(x)
            continue
        if isinstance(ok, dict) and MASKED in ok:      # one of the workload's draws, as it was drawn
            x, ok = _unmasked(x, ok, seed, k, device), False
        dst = out[k] if out is not None else None
        if dst is None or dst.shape != x.shape or dst.dtype != x.dtype or dst.device != x.device \
                or dst.stride() != x.stride():     # a layout trial's buffer is not a timed input's
            dst = torch.empty_like(x)
        if isinstance(ok, str) and ok == BOOTSTRAP:     # the entry's values at fresh positions, scaled, noised
            v = _resample(x, k + _BOOT_KEY, seed, g, device)
            noise = (torch.randn(x.shape, generator=g, device=device, dtype=torch.float32) if g is not None
                     else cpu_noise(x.numel(), _seed_of(seed, k)).view(x.shape))
            # relative noise (1 + NOISE * unit noise, never below 0.9 on the CPU): every value keeps its sign, so a
            # positive input stays positive (red team 60: additive noise took values near 0 negative, NaN in a log)
            w = (v.float() if v.element_size() == 1 else v) * noise.mul_(NOISE * s).add_(s).to(
                torch.float32 if v.element_size() == 1 else v.real.dtype if v.is_complex() else v.dtype)
            dst.copy_(w.to(x.dtype) if x.element_size() == 1 else w)
            res.append(dst)
            continue
        if isinstance(ok, (list, tuple)):       # a declared domain: fresh values inside it
            if len(ok) > 2 and ok[2] == BOOTSTRAP:
                x = _resample(x, k + _BOOT_KEY, seed, g, device)
            dst.copy_(_in_domain(x, float(ok[0]), float(ok[1]), s, _uniform(x, k, seed, g, device)))
        elif isinstance(ok, str) and ok == FRESH:   # values of the entry's RMS, none of the entry's
            if g is None:                       # uniform on [-sqrt(3), sqrt(3)) from 31-bit words: unit variance
                w = cpu_noise_bytes(4 * x.numel(), _seed_of(seed, k)).view(torch.int32).float()
                dst.copy_(w.mul_(3.0 ** 0.5 * r * s / 2.0 ** 31).view(x.shape))
            else:
                dst.copy_(torch.randn(x.shape, generator=g, device=device, dtype=torch.float32).mul_(r * s))
        elif ok == RESAMPLE:
            dst.copy_(_resample(x, k, seed, g, device))
        elif isinstance(ok, str) and ok == SCALE:
            dst.copy_((x.float() * s).to(x.dtype) if x.element_size() == 1 else torch.mul(x, s))
        elif isinstance(ok, dict) and "bw" in ok:   # integers: a smoothed bootstrap inside the pool's span
            dst.copy_(_smoothed_ints(x, ok, k, seed, g, device))
        elif isinstance(ok, dict):              # integers with an inferred range: fresh uniform draws over it
            dst.copy_(_uniform_ints(x, int(ok["low"]), int(ok["high"]), k, seed, g, device))
        elif ok and x.element_size() == 1:      # fp8 has no arithmetic: in fp32, rounded back onto its grid
            noise = (torch.randn(x.shape, generator=g, device=device, dtype=torch.float32) if g is not None
                     else cpu_noise(x.numel(), _seed_of(seed, k)).view(x.shape))
            top = torch.finfo(x.dtype).max if x.is_floating_point() else 127.0
            dst.copy_((x.float() * s + noise * (NOISE * r)).clamp(-top, top).to(x.dtype))
        elif ok and g is None:                  # CPU: (noise bytes - MID) * c + x * s, each op rounded on its own
            a, b = _noise_ab(_seed_of(seed, k))
            if not native.fresh_floats(dst, x, a, b, UNIT * NOISE * r, s):     # float32: one C pass, the same bits
                dst.copy_(cpu_noise_bytes(x.numel(), _seed_of(seed, k)).view(x.shape))
                dst.sub_(MID).mul_(UNIT * NOISE * r).add_(torch.mul(x, s))
        elif ok:
            noise = torch.randn(x.shape, generator=g, device=device, dtype=torch.float32).to(x.dtype)
            noise.mul_(NOISE * r)
            torch.mul(x, s, out=dst)
            dst.add_(noise)
        else:
            dst.copy_(x)
        res.append(dst)
    return res
