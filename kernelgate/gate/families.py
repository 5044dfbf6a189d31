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

#: the families, each one trial
FAMILIES = ("non-positive", "zeros", "repeated entries")


def _numeric(x: Any) -> bool:
    return isinstance(x, torch.Tensor) and (x.is_floating_point() or x.is_complex()) and x.numel() > 0


def _holds(contract: Contract, i: int, low: float, high: float) -> bool:
    """Whether input i's contract domain (if any) holds [low, high]."""
    d = contract.domain_of(i)
    return d is None or (d.low <= low and high <= d.high)


def make(kind: str, xs: list[Any], contract: Contract, r: random.Random) -> list[Any] | None:
    """`xs` turned into `kind` (FAMILIES), or None where no input can be: "non-positive", every float input -|x|
    and every complex one i|x| (the inputs whose contract domain holds no negative values stay as they are);
    "zeros", a secret non-empty set of the float and complex inputs all zero; "repeated entries", every tensor
    input of 2+ entries along its first dim (integer ones too) entry 0 repeated, contiguous."""
    out = list(xs)
    changed = False
    if kind == "zeros":
        cands = [i for i, x in enumerate(xs) if _numeric(x) and _holds(contract, i, 0.0, 0.0)]
        pick = {i for i in cands if r.random() < 0.5} or ({r.choice(cands)} if cands else set())
        for i in pick:
            out[i] = torch.zeros_like(xs[i], memory_format=torch.contiguous_format)
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
        elif kind == "repeated entries" and x.dim() >= 1 and x.shape[0] > 1:
            out[i] = x[:1].expand(x.shape).contiguous()
            changed = True
    return out if changed else None
