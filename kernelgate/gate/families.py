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
FAMILIES = ("non-positive", "zeros", "binary", "repeated entries", "some repeated entries")
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
    return out if changed else None
