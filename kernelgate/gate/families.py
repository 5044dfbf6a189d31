"""Input families a caller's code hands a module that no drawn distribution reaches: one-signed the other way
(log-probabilities, -relu; complex inputs purely imaginary), zeros (a zero initial state, an all-padding batch)
and a batch of one repeated entry (one prompt for several samples). A candidate may test for one and take a
wrong path there (red team 40: each of these was accepted, right on every drawn input). Each family is a trial of
its own (gate/trials.py, `plan`), kept where the reference gives finite outputs on it (prober.ok)."""
from __future__ import annotations

import random
from typing import Any

import torch

from ..records import Contract

#: the families, each one trial (the lean memory plan: two of them, a secret). "constant" (`make` builds it) is not
#: tried: one value everywhere leaves normalizations ill-conditioned (a row's deviation is rounding noise, divided
#: by sqrt(eps)), where an honest LayerNorm erred 49x the bound the reference's exact mean set
FAMILIES = ("non-positive", "zeros", "binary", "repeated entries", "some repeated entries",
            "sparse, bf16-exact", "scaled", "normalized rows", "smooth", "padded", "masked")
LEAN_FAMILIES = 2


def _numeric(x: Any) -> bool:
    return isinstance(x, torch.Tensor) and (x.is_floating_point() or x.is_complex()) and x.numel() > 0


def _holds(contract: Contract, i: int, low: float, high: float) -> bool:
    """Whether input i's contract domain (if any) holds [low, high]."""
    d = contract.domain_of(i)
    return d is None or (d.low <= low and high <= d.high)


def make(kind: str, xs: list[Any], contract: Contract, r: random.Random) -> list[Any] | None:
    """`xs` turned into `kind` (FAMILIES), or None where no input can be: "non-positive", every float input -|x|
    and every complex one i|x| (the inputs whose contract domain holds no negative values stay as they are);
    "zeros", a secret non-empty set of the float and complex inputs all zero; "constant", such a set each one of
    its own values everywhere; "binary", every float input 0 and 1 (masks, one-hot and multi-hot rows); "repeated
    entries", every tensor input of 2+ entries along its first dim (integer ones too) entry 0 repeated; "some
    repeated entries", about half of the entries (3+) each a copy of another, secretly drawn."""
    out = list(xs)
    changed = False
    if kind in ("zeros", "constant"):
        cands = [i for i, x in enumerate(xs) if _numeric(x) and (kind == "constant" or _holds(contract, i, 0.0, 0.0))]
        pick = {i for i in cands if r.random() < 0.5} or ({r.choice(cands)} if cands else set())
        for i in sorted(pick):
            flat = xs[i].detach().reshape(-1)
            value = 0 if kind == "zeros" else flat[r.randrange(flat.numel())].item()
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


#: the structures real callers' inputs have that element-wise draws never do (red team 43)
STRUCTURED = ("sparse, bf16-exact", "scaled", "normalized rows", "smooth", "padded", "masked")


def _structured(kind: str, i: int, x: torch.Tensor, contract: Contract, r: random.Random) -> torch.Tensor | None:
    """Input i (float, or integer ids for "padded") in one structure: "sparse, bf16-exact", relu(x) rounded to
    bf16 (post-ReLU activations of a bf16 layer: half zeros, every value bf16-exact); "scaled", x times 64 or 1/64
    (a secret: pixel values, tiny gradients); "normalized rows", each row along the last dim of unit norm or a
    probability distribution (a secret); "smooth", a 3x3 box average over the last two dims (image-like: neighbours
    correlated), rescaled to x's spread; "padded", along dim 1 (the sequence: dim 0 for 1-D inputs) every other
    entry's tail, each of its own secret length, zero (floats) or one pad id (integers); "masked", every other row's
    tail along the last dim, each of its own length, -inf (attention logits under a padding mask). None where the
    input's domain does not hold it."""
    g = torch.Generator().manual_seed(r.randrange(1 << 62))
    lo, hi = (float(x.min()), float(x.max())) if x.numel() else (0.0, 0.0)
    if not x.is_floating_point():
        if kind != "padded" or x.dim() == 0:
            return None
        return _pad(x, lo if r.random() < 0.5 else hi, r, g)
    if kind == "sparse, bf16-exact":
        y = x.clamp_min(0).to(torch.bfloat16).to(x.dtype)
    elif kind == "scaled":
        y = x * (64.0 if r.random() < 0.5 else 1 / 64)
    elif kind == "normalized rows":
        if x.dim() == 0 or x.shape[-1] < 2:
            return None
        y = torch.softmax(x.double(), -1) if r.random() < 0.5 else torch.nn.functional.normalize(x.double(), dim=-1)
        y = y.to(x.dtype)
    elif kind == "smooth":
        if x.dim() < 2 or min(x.shape[-2:]) < 3:
            return None
        flat = x.reshape(-1, 1, *x.shape[-2:]).double()
        y = torch.nn.functional.avg_pool2d(flat, 3, 1, 1, count_include_pad=False).reshape(x.shape)
        std0, std1 = float(x.double().std()), float(y.std())
        y = ((y - y.mean()) * (std0 / std1 if std1 > 0 else 1.0) + x.double().mean()).to(x.dtype)
    elif kind == "masked":
        if x.dim() == 0 or x.shape[-1] < 4:
            return None
        n = x.shape[-1]
        rows = x.reshape(-1, n)
        y = torch.where(_tails(rows.shape[0], n, g).to(x.device), float("-inf"), rows).reshape(x.shape)
        return y.to(x.dtype) if contract.domain_of(i) is None else None
    else:                                                     # padded
        y = _pad(x, 0, r, g)
        if y is None:
            return None
    d = contract.domain_of(i)
    if d is not None and not (d.low <= float(y.min()) and float(y.max()) <= d.high):
        return None
    return y


def _tails(rows: int, n: int, g: torch.Generator) -> torch.Tensor:
    """A (rows, n) mask: every other row (from row 0) a tail of its own secret length, n/4+1 to n-1 (sequences of
    varied lengths padded to one: some mostly padding, some nearly full)."""
    tail = torch.randint(n // 4 + 1, n, (rows,), generator=g)
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
