"""Values the trials put where draws never go (gate/trials.py): exact special values in the float inputs, and
parameters far from their initial values. Pure functions of the inputs or parameters and the plan's random
stream; which the reference takes is the trials' call."""
from __future__ import annotations

import random
from typing import Any, Iterator

import torch

#: the exact values of the special-values trial, cycled: zeros of both signs, halves (rounding ties), integers.
#: Not subnormals: GPU kernels flush them to zero as a matter of course.
SPECIALS = (0.0, -0.0, 0.5, -1.5, 2.5, 1.0, -2.0, 3.0)


def special_inputs(xs: list[Any], contract: Any, r: random.Random) -> tuple[dict[int, Any], dict[int, Any]]:
    """({input: copy with every 2nd-5th element, from a random start, an exact special value (SPECIALS, those the
    contract's domain holds, cycled in a random order)}, {input: copy with those elements exactly 0 instead}).
    Continuous draws never hit these, yet ReLU outputs, padding and masks are full of zeros: a removable
    singularity at 0 (sin(pi x) / (pi x) for sinc), rounding half up where the reference rounds half to even,
    a sign bit read as x < 0 (-0.0), an integer test read as x != 0 are wrong only there. An input of two or more
    dimensions also gets one whole entry of its first dimension exactly 0 in both (a padding sample: red team
    32's L2 normalisation without its eps clamp is NaN only on an all-zero row)."""
    changed: dict[int, Any] = {}
    zeros: dict[int, Any] = {}
    for i, x in enumerate(xs):
        d = contract.domain_of(i)
        if not (isinstance(x, torch.Tensor) and x.is_floating_point() and x.numel() > 1):
            continue
        vals = [v for v in SPECIALS if d is None or d.low <= v <= d.high]
        if not vals:
            continue
        step, start = r.randint(2, 5), r.randrange(2)
        r.shuffle(vals)
        filled(i, torch.clone(x, memory_format=torch.contiguous_format), vals, step, start, 0.0 in vals, r,
               changed, zeros)
    return changed, zeros


def filled(i: int, y: torch.Tensor, fills: list[Any], step: int, start: int, zero: bool, r: random.Random,
           changed: dict[int, Any], zeros: dict[int, Any]) -> None:
    """Input i's copy `y` with `fills` cycled into every `step`-th element from `start` (a complex y's fills are
    (real, imaginary) pairs) into `changed`; with `zero`, a copy with those elements 0 instead into `zeros`, and
    one whole entry of the first dimension 0 in both (2+ dims)."""
    z = y.clone() if zero else None
    flat = torch.view_as_real(y).view(-1, 2) if y.is_complex() else y.view(-1)
    for j, v in enumerate(fills):              # strided fills: no index tensor the size of the input
        flat[start + j * step::step * len(fills)] = flat.new_tensor(v) if isinstance(v, tuple) else v
    changed[i] = y
    if z is not None:
        z.view(-1)[start::step] = 0.0
        zeros[i] = z
        if y.dim() >= 2 and y.shape[0] > 1:
            k = r.randrange(y.shape[0])
            y[k] = 0.0
            z[k] = 0.0


def far_params(state: dict[str, torch.Tensor], keys: list[str],
               r: random.Random) -> Iterator[tuple[dict[str, torch.Tensor], str]]:
    """Parameter sets far from where perturbation keeps them (within about 2x of their initial values), in the
    order to try: the float parameters `keys` scaled by a secret factor in [4, 8] with 1 in 3-5 elements exactly
    0 (pruned weights), the zeros alone, the scaling alone; each with a note. Made one at a time as they are asked
    for (three sets built at once held three copies of the parameters: 24 GiB of a GPU for an 8 GiB MLP)."""
    factor = r.uniform(4.0, 8.0)
    step, start = r.randint(3, 5), r.randrange(3)

    def made(zero: bool, scale: bool) -> dict[str, torch.Tensor]:
        out = dict(state)
        for k in keys:
            t = torch.clone(state[k], memory_format=torch.contiguous_format)
            if zero:
                t.view(-1)[start::step] = 0.0
            out[k] = t.mul_(factor) if scale else t
        return out

    yield made(True, True), f"x{factor:.2f}; 1 in {step} elements 0"
    yield made(True, False), f"1 in {step} elements 0"
    yield made(False, True), f"x{factor:.2f}"
