"""Input families a caller's code hands a module that no drawn distribution reaches: one-signed the other way
(log-probabilities, -relu; complex inputs purely imaginary), zeros (a zero initial state, an all-padding batch)
and a batch of one repeated entry (one prompt for several samples). A candidate may test for one and take a
wrong path there (red team 40: each of these was accepted, right on every drawn input). Each family is a trial of
its own (gate/trials.py, `plan`), kept where the reference gives finite outputs on it (prober.ok)."""
from __future__ import annotations

import math
import random
from typing import Any

import torch

from ..records import Contract
from . import timing

#: the families, each one trial (the lean memory plan: the first two that apply in a secret order). "constant" and
#: "constant rows" take powers of two, and only where every group of dims an honest mean may reduce has n with
#: n * (1/n) == 1 in the input's dtype (`exact_means`): one value everywhere leaves a normalization ill-conditioned
#: (its deviation is the mean's rounding, divided by sqrt(eps)); with an arbitrary value an honest LayerNorm erred
#: 49x the bound the reference's exact mean set
#: the structures real callers' inputs have that element-wise draws never do (red teams 43, 44: `_structured`)
STRUCTURED = ("sparse, bf16-exact", "scaled up", "scaled down", "probability rows", "unit rows", "smooth", "padded",
              "masked", "integer-valued", "one-hot rows", "constant feature", "constant rows", "skewed ids",
              "common offset", "channel offsets", "row offsets")
#: the offsets' sizes, in powers of two of the input's RMS: "common offset" and "channel offsets" (where a one-pass
#: variance cancels), "row offsets" (every row one of its own, up to far past any threshold a kernel might key on)
OFFSET_LOG2, ROW_OFFSET_LOG2 = (7, 10), (7, 16)
#: families whose inputs lie far from zero relative to their spread: the inputs' own rounding moves the exact
#: outputs more than the reference's error does there (an honest kernel scaling logits before it subtracts their
#: max errs as much), so a trial of these also permits the oracle's run on inputs one unit in the last place away
#: (oracle.Oracle.run, `rounding`)
ROUNDING = ("scaled up", "common offset", "channel offsets", "row offsets")
FAMILIES = ("non-positive", "zeros", "constant", "binary", "repeated entries", "some repeated entries") + STRUCTURED
LEAN_FAMILIES = 2


def exact_means(shape: tuple[int, ...], dtype: torch.dtype) -> bool:
    """Whether a mean over any group of `shape`'s dims comes out exact on an input of one power of two, however an
    honest kernel takes it: sums of equal powers of two are exact in every order, and n * (1/n) rounds to 1 for
    the group's n, in `dtype` and in float32 (one n in eight does not: 41, 47, 55...)."""
    dims = [int(d) for d in shape if int(d) > 1][:8]
    sizes = {1}
    for d in dims:
        sizes |= {n * d for n in sizes}
    n = torch.tensor(sorted(sizes), dtype=torch.float64)
    for dt in {dtype, torch.float32}:
        m = n.to(dt)
        if not bool((m * (1 / m) == 1).all()) or not bool((m.double() == n).all()):
            return False
    return True


def _numeric(x: Any) -> bool:
    return isinstance(x, torch.Tensor) and (x.is_floating_point() or x.is_complex()) and x.numel() > 0


def _holds(contract: Contract, i: int, low: float, high: float) -> bool:
    """Whether input i's contract domain (if any) holds [low, high]."""
    d = contract.domain_of(i)
    return d is None or (d.low <= low and high <= d.high)


def make(kind: str, xs: list[Any], contract: Contract, r: random.Random) -> list[Any] | None:
    """`xs` turned into `kind` (FAMILIES), or None where no input can be: "non-positive", every float input -|x|
    and every complex one i|x| (the inputs whose contract domain holds no negative values stay as they are);
    "zeros", a secret non-empty set of the float and complex inputs all zero; "constant", such a set of the float
    inputs each one power of two everywhere, of its own (where `exact_means`); "binary", every float input 0 and 1
    (masks, one-hot and multi-hot rows); "repeated entries", every tensor input of 2+ entries along its first dim
    (integer ones too) entry 0 repeated; "some repeated entries", about half of the entries (3+) each a copy of
    another, secretly drawn; the others (STRUCTURED), `_structured`."""
    out = list(xs)
    changed = False
    if kind in ("zeros", "constant"):
        cands = [i for i, x in enumerate(xs) if _numeric(x) and (
            _holds(contract, i, 0.0, 0.0) if kind == "zeros" else
            x.is_floating_point() and exact_means(x.shape, x.dtype) and _holds(contract, i, -4.0, 4.0))]
        pick = {i for i in cands if r.random() < 0.5} or ({r.choice(cands)} if cands else set())
        for i in sorted(pick):
            value = 0 if kind == "zeros" else r.choice((0.5, 1.0, 2.0, 4.0)) * r.choice((1, -1))
            out[i] = torch.full_like(xs[i], value, memory_format=torch.contiguous_format)
        return out if pick else None
    for i, x in enumerate(xs):
        if not isinstance(x, torch.Tensor) or x.numel() == 0:
            continue
        x = x.detach()
        if kind == "non-positive" and _numeric(x):
            if x.is_complex():
                mag = x.abs()
                out[i] = torch.complex(torch.zeros_like(mag), mag).to(x.dtype)
            elif _holds(contract, i, -float(x.abs().max()), 0.0):
                out[i] = -x.abs()
            else:
                continue
            changed = True
        elif kind == "binary" and x.is_floating_point() and _holds(contract, i, 0.0, 1.0):
            out[i] = (torch.rand(x.shape, generator=torch.Generator().manual_seed(r.randrange(1 << 62))) < 0.3).to(
                x.dtype).to(x.device)
            changed = True
        elif kind == "repeated entries" and x.dim() >= 1 and x.shape[0] > 1:
            out[i] = x[:1].expand(x.shape).contiguous()
            changed = True
        elif kind == "some repeated entries" and x.dim() >= 1 and x.shape[0] > 2:
            n = x.shape[0]
            src = [j if r.random() < 0.5 else r.randrange(n) for j in range(n)]
            dup = r.randrange(n)
            src[dup] = (dup + 1 + r.randrange(n - 1)) % n          # at least one entry a copy of another
            out[i] = x[torch.tensor(src, device=x.device)].contiguous()
            changed = True
        elif kind in STRUCTURED and (x.is_floating_point() or not (x.is_complex() or x.dtype == torch.bool)):
            y = _structured(kind, i, x, contract, r)
            if y is not None:
                out[i], changed = y, True
    return out if changed else None


def _structured(kind: str, i: int, x: torch.Tensor, contract: Contract, r: random.Random) -> torch.Tensor | None:
    """Input i (float, or integer ids for "padded" and "skewed ids") in one structure: "sparse, bf16-exact", relu(x)
    rounded to bf16 (post-ReLU activations of a bf16 layer: half zeros, every value bf16-exact); "scaled up" and
    "scaled down", x times 2^8 to 2^14 or its inverse (a secret: raw features, tiny gradients); "probability rows"
    and "unit rows", each row along the last dim a probability distribution or of unit norm; "smooth", a 3x3 box
    average over the last two dims (image-like: neighbours correlated), rescaled to x's spread; "padded", along dim
    1 (the sequence: dim 0 for 1-D inputs) every other entry's tail, each of its own secret length up to the whole
    entry, zero (floats) or one pad id (integers); "masked", every other row's tail along the last dim, each of its
    own length, -inf (attention logits under a padding mask); "integer-valued", |x| times 30-80 rounded, at most
    255 (pixel values, counts); "one-hot rows", each row along the last dim one 1 at a secret place; "constant
    feature", the first and last entries of the last dim 1 everywhere (features with a column of ones); "constant
    rows", every other row along the last dim one value of its own, a power of two (a broadcast scalar); "skewed
    ids", integer ids over their range by Zipf's law (a frequency-sorted vocabulary); "common offset", x plus one
    value 2^7 to 2^10 times its RMS, of a secret sign (raw features far from zero: temperatures, positions);
    "channel offsets", every entry of dim 1 (channels, features) its own such offset of its own sign (features of
    different means: a single shift removes none of them); "row offsets", every row along the last dim its own
    offset of 2^7 to 2^16 times the RMS, added and subtracted in turn (logits with a large shared term, far above 0
    in one row and far below in the next: a softmax whose shift is floored at a fixed value). Red team 32 and its
    follow-up: a one-pass variance E[x^2] - E[x]^2 (after a global shift, too) and softmax shifts floored at 0 or
    below pass every centred draw. None where the input's domain does not hold it (red teams 43, 44)."""
    g = torch.Generator().manual_seed(r.randrange(1 << 62))
    lo, hi = (float(x.min()), float(x.max())) if x.numel() else (0.0, 0.0)
    if not x.is_floating_point():
        if x.dim() == 0 or kind not in ("padded", "skewed ids"):
            return None
        if kind == "skewed ids":                 # Zipf's law over [lo, hi]: p(lo + k) ~ 1/(k + 1)
            m = int(hi - lo) + 1
            if m < 4:
                return None
            cdf = torch.cumsum(1.0 / torch.arange(1, m + 1, dtype=torch.float64), 0)
            u = torch.rand(x.numel(), generator=g, dtype=torch.float64) * cdf[-1]
            k = torch.searchsorted(cdf, u).clamp_max(m - 1)
            return (k + int(lo)).to(x.dtype).reshape(x.shape).to(x.device)
        return _pad(x, lo if r.random() < 0.5 else hi, r, g)
    if kind == "sparse, bf16-exact":
        y = x.clamp_min(0).to(torch.bfloat16).to(x.dtype)
    elif kind == "scaled up":
        y = x * float(2 ** r.randint(8, 14))
    elif kind == "scaled down":
        y = x * float(2 ** -r.randint(8, 14))
    elif kind in ("probability rows", "unit rows"):
        if x.dim() == 0 or x.shape[-1] < 2:
            return None
        y = _rowwise(x, x.shape[-1], (lambda d, a, b: torch.softmax(d, -1)) if kind == "probability rows" else
                     (lambda d, a, b: torch.nn.functional.normalize(d, dim=-1)))
    elif kind == "integer-valued":               # pixel values, counts: 0 to a few hundred
        y = x.abs().mul_(r.uniform(30.0, 80.0)).round_().clamp_max_(255.0)      # in place: one copy of x
    elif kind == "one-hot rows":
        if x.dim() == 0 or x.shape[-1] < 2:
            return None
        at = torch.randint(x.shape[-1], x.shape[:-1], generator=g).to(x.device)
        y = torch.zeros(x.shape, dtype=x.dtype, device=x.device).scatter_(-1, at[..., None], 1.0)   # no int64 copy
    elif kind == "constant feature":             # a column of ones beside the features ([x, 1]: a folded bias)
        if x.dim() == 0 or x.shape[-1] < 2:
            return None
        y = x.clone(memory_format=torch.contiguous_format)
        y[..., [0, -1]] = 1.0
    elif kind == "constant rows":                # a broadcast per-sample scalar, a flat frame
        if x.dim() == 0 or x.shape[-1] < 2 or not exact_means(x.shape, x.dtype):
            return None
        n = x.shape[-1]
        rows = x.reshape(-1, n)
        # powers of two: every order of summation of a row is exact, so a normalization's deviation is exactly 0
        # in any honest implementation (one value of 0.1 left an honest LayerNorm's rounding divided by sqrt(eps))
        c = torch.tensor([0.5, 1.0, 2.0, 4.0], dtype=x.dtype)[torch.randint(4, (rows.shape[0],), generator=g)]
        c = c * (torch.randint(2, (rows.shape[0],), generator=g) * 2 - 1).to(x.dtype)
        keep = torch.arange(rows.shape[0]) % 2 == 1
        y = torch.where(keep[:, None].to(x.device), rows, c[:, None].to(x.device)).reshape(x.shape)
    elif kind == "skewed ids":
        return None
    elif kind in ("common offset", "channel offsets", "row offsets"):
        rms = timing.rms([x], [True])[0]        # a chunk at a time above timing.RMS_CHUNK elements
        unit = rms if rms > 0 and math.isfinite(rms) else 1.0
        k = x.shape[-1] if x.dim() else 1
        if kind == "common offset":
            c0 = unit * float(2 ** r.randint(*OFFSET_LOG2)) * r.choice((1, -1))

            def offsets(a: int, b: int) -> Any:
                return c0
            k, whole = 1, (lambda d: d + c0)     # one offset for all: any rows will do
        elif kind == "channel offsets":          # dim 1: its own offset per entry, 1-2x one secret power, any sign
            if x.dim() < 2 or x.shape[1] < 2:
                return None
            n = x.shape[1]
            c = unit * float(2 ** r.randint(*OFFSET_LOG2)) * (1 + torch.rand(n, generator=g, dtype=torch.float64))
            c = c * (torch.randint(2, (n,), generator=g) * 2 - 1).to(torch.float64)
            c = c.to(x.device)
            per = math.prod(x.shape[2:-1]) if x.dim() > 2 else 0      # rows of x.reshape(-1, k) per entry of dim 1

            def whole(d: torch.Tensor) -> torch.Tensor:
                return d + c.reshape(1, n, *([1] * (x.dim() - 2)))

            def offsets(a: int, b: int) -> Any:
                if not per:                      # 2-D: dim 1 is the last
                    return c[None, :]
                return c[torch.div(torch.arange(a, b, device=x.device), per, rounding_mode="floor") % n][:, None]
        else:                                    # every row its own power, the signs alternating
            if x.dim() == 0 or x.numel() < 2 * k:
                return None
            m = x.numel() // k
            lo, hi = ROW_OFFSET_LOG2
            c = unit * torch.exp2(torch.randint(lo, hi + 1, (m,), generator=g).to(torch.float64))
            c[1::2] = -c[1::2]
            c = (c if r.random() < 0.5 else -c).to(x.device)
            whole = None

            def offsets(a: int, b: int) -> Any:
                return c[a:b, None]
        y = _rowwise(x, k, lambda d, a, b: d + offsets(a, b), whole)
    elif kind == "smooth":
        if x.dim() < 2 or min(x.shape[-2:]) < 3:
            return None
        y = _smooth(x)
    elif kind == "masked":
        if x.dim() == 0 or x.shape[-1] < 4:
            return None
        n = x.shape[-1]
        rows = x.reshape(-1, n)
        y = torch.where(_tails(rows.shape[0], n, g, whole=False).to(x.device), float("-inf"), rows).reshape(x.shape)
        return y.to(x.dtype) if contract.domain_of(i) is None else None
    else:                                                     # padded
        y = _pad(x, 0, r, g)
        if y is None:
            return None
    d = contract.domain_of(i)
    if d is not None and not (d.low <= float(y.min()) and float(y.max()) <= d.high):
        return None
    return y


#: elements of an input the families that work in float64 take to it at a time (an input of gigabytes in the lean
#: memory plan, on the host: the whole-tensor form held its float64 copy and the float64 result beside the rounded one)
ROW_CHUNK = 1 << 22


def _rowwise(x: torch.Tensor, k: int, f: Any, whole: Any = None) -> torch.Tensor:
    """f on x's rows of k entries (x.reshape(-1, k)) in float64, rounded once to x's dtype: `f(rows, a, b)` takes
    rows a..b in float64 and returns their new values; ROW_CHUNK elements at a time where x is contiguous (each
    row's values as from the whole tensor's form: f treats rows apart). At or below ROW_CHUNK, or where x is not
    contiguous, the whole tensor at once: `whole(x in float64)` where given, else f on all rows."""
    if not x.is_contiguous() or x.numel() <= ROW_CHUNK:
        if whole is not None:
            return whole(x.double()).to(x.dtype)
        return f(x.reshape(-1, k).double(), 0, x.numel() // max(k, 1)).to(x.dtype).reshape(x.shape)
    rows = x.reshape(-1, k)
    y = torch.empty_like(rows)
    step = max(1, ROW_CHUNK // max(k, 1))
    for a in range(0, rows.shape[0], step):
        b = min(a + step, rows.shape[0])
        y[a:b] = f(rows[a:b].double(), a, b)
    return y.reshape(x.shape)


def _smooth(x: torch.Tensor) -> torch.Tensor:
    """The "smooth" family: a 3x3 box average over the last two dims (in float64), rescaled to x's mean and spread.
    Above ROW_CHUNK elements (contiguous x) a chunk of planes at a time, twice (the moments, then the values), the
    means and spreads combined chunk by chunk: the whole form held about 8x a large input at once."""
    h, w = x.shape[-2:]
    planes = x.reshape(-1, 1, h, w)

    def pooled(a: int, b: int) -> torch.Tensor:
        return torch.nn.functional.avg_pool2d(planes[a:b].double(), 3, 1, 1, count_include_pad=False)

    if not x.is_contiguous() or x.numel() <= ROW_CHUNK:
        y = pooled(0, planes.shape[0]).reshape(x.shape)
        std0, std1 = float(x.double().std()), float(y.std())
        return ((y - y.mean()) * (std0 / std1 if std1 > 0 else 1.0) + x.double().mean()).to(x.dtype)
    step = max(1, ROW_CHUNK // (h * w))
    spans = [(a, min(a + step, planes.shape[0])) for a in range(0, planes.shape[0], step)]
    mx, my = _Moments(), _Moments()
    for a, b in spans:
        mx.add(planes[a:b].double())
        my.add(pooled(a, b))
    std0, std1 = mx.std(), my.std()
    ratio = std0 / std1 if std1 > 0 else 1.0
    y = torch.empty_like(planes)
    for a, b in spans:
        y[a:b] = (pooled(a, b) - my.mean) * ratio + mx.mean
    return y.reshape(x.shape)


class _Moments:
    """A running mean and sum of squared deviations over float64 chunks (Chan et al.'s pairwise update)."""

    def __init__(self) -> None:
        self.n, self.mean, self.m2 = 0, 0.0, 0.0

    def add(self, d: torch.Tensor) -> None:
        nb = d.numel()
        if not nb:
            return
        mb = float(d.mean())
        m2b = float((d - mb).pow_(2).sum())
        n = self.n + nb
        delta = mb - self.mean
        self.mean += delta * nb / n
        self.m2 += m2b + delta * delta * self.n * nb / n
        self.n = n

    def std(self) -> float:
        """The unbiased standard deviation (torch.std's default)."""
        return math.sqrt(self.m2 / (self.n - 1)) if self.n > 1 else float("nan")


def _tails(rows: int, n: int, g: torch.Generator, whole: bool = True) -> torch.Tensor:
    """A (rows, n) mask: every other row (from row 0) a tail of its own secret length, n/4+1 to n (sequences of
    varied lengths padded to one: some nearly full, some all padding: an empty sequence, one in four); without
    `whole`, to n-1 (a mask leaves a key: a row of -inf is NaN through a softmax, and the reference refusing the
    family let a masked fast path through)."""
    tail = torch.randint(n // 4 + 1, n + 1 if whole else n, (rows,), generator=g)
    if whole:
        tail[torch.rand(rows, generator=g) < 0.25] = n          # a quarter of them (of those padded) empty
    mask = torch.arange(n) >= (n - tail)[:, None]
    mask[1::2] = False
    return mask


def _pad(x: torch.Tensor, pad: Any, r: random.Random, g: torch.Generator) -> torch.Tensor | None:
    """`x` padded with `pad` along dim 1 (the sequence; dim 0 for 1-D inputs): every other entry of dim 0 a tail
    of its own length (`_tails`); a 1-D input one tail. None where that dim has fewer than 4 entries."""
    if x.dim() == 0:
        return None
    d = 1 if x.dim() >= 2 else 0
    n = x.shape[d]
    if n < 4:
        return None
    if d == 0:
        mask = torch.arange(n) >= n - r.randint(n // 4 + 1, n - 1)
    else:
        mask = _tails(x.shape[0], n, g).reshape(x.shape[0], n, *([1] * (x.dim() - 2)))
    return torch.where(mask.to(x.device), torch.tensor(pad, dtype=x.dtype, device=x.device), x).contiguous()
