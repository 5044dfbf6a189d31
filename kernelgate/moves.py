"""Inputs as the oracle moves them: in fp64 a chunk at a time, one unit in the last place up or down (more draws
of the reference's own rounding error: gate/session.py `ill`), one element of a batch moved (whether a batch's
problems are independent: oracle.Oracle.separable)."""
from __future__ import annotations

import math
import secrets
from typing import Any

import torch


def widened(t: torch.Tensor) -> torch.Tensor:
    """A float tensor in fp64, a complex one in complex128 (`Module.to(torch.float64)` casts complex parameters to
    real, dropping their imaginary parts: the oracle then computed something else, and a real output's bound,
    derived from the reference's error against it, grew to whatever that error was); others as they are."""
    return t.to(torch.float64) if t.is_floating_point() else t.to(torch.complex128) if t.is_complex() else t


def upcast(xs: list[Any], dtype: torch.dtype = torch.float64) -> list[Any]:
    if dtype == torch.float64:
        return [widened(x) if isinstance(x, torch.Tensor) else x for x in xs]
    return [x.to(dtype) if isinstance(x, torch.Tensor) and x.is_floating_point() else x for x in xs]


#: elements per chunk when an input is converted to fp64 on its way to the device
TO64_CHUNK = 1 << 24


def to_fp64(x: Any, device: str) -> Any:
    """`x` on `device`, in fp64 if it is a float tensor, converted a chunk at a time (no full-size fp64 copy
    where `x` is, no task-dtype copy beside the fp64 one on the device); other values as `.to(device)`."""
    if not isinstance(x, torch.Tensor):
        return x
    if x.is_complex():
        return x.to(device).to(torch.complex128)
    if not x.is_floating_point():
        return x.to(device)
    if not x.is_contiguous() or x.dtype == torch.float64:
        return x.to(device).to(torch.float64)
    out = torch.empty(x.shape, dtype=torch.float64, device=device)
    src, dst = x.reshape(-1), out.view(-1)
    for a in range(0, src.numel(), TO64_CHUNK):
        dst[a:a + TO64_CHUNK].copy_(src[a:a + TO64_CHUNK])
    return out


def one_ulp_fp64(x: Any, device: str, seed: int = 0) -> Any:
    """`to_fp64(x, device)` with every element of a float tensor first moved one unit in the last place of its own
    dtype, up or down by a fixed draw (the judge's, a chunk at a time: no full-size copy beside the fp64 one)."""
    if not isinstance(x, torch.Tensor) or not x.is_floating_point() or x.dtype == torch.float64 or x.numel() == 0:
        return to_fp64(x, device)
    out = torch.empty(x.shape, dtype=torch.float64, device=device)
    src, dst = x.reshape(-1), out.view(-1)
    g = torch.Generator().manual_seed(0x5EED + seed)
    for a in range(0, src.numel(), TO64_CHUNK):
        part = src[a:a + TO64_CHUNK].to(device)
        up = (torch.rand(part.shape, generator=g) < 0.5).to(device)
        step = _moved(part, up)
        dst[a:a + TO64_CHUNK].copy_(step)
        del part, up, step
    return out


def one_ulp(x: Any, device: str, seed: int) -> Any:
    """`x` on `device` with every element of a float tensor moved one unit in the last place of its own dtype, up or
    down by a draw of `seed` (infinities, NaN and the largest finite values as `one_ulp_fp64` leaves them)."""
    if not isinstance(x, torch.Tensor) or not x.is_floating_point() or x.numel() == 0:
        return x.to(device) if isinstance(x, torch.Tensor) else x
    part = x.to(device)
    g = torch.Generator().manual_seed(seed & ((1 << 63) - 1))
    return _moved(part, (torch.rand(x.shape, generator=g) < 0.5).to(device))


def _moved(part: torch.Tensor, up: torch.Tensor) -> torch.Tensor:
    """Each finite element one unit in the last place up (`up`) or down; the largest finite value moves down, never
    to infinity; infinities and NaN stay."""
    step = _step(part, up)
    finite = torch.isfinite(part)
    return torch.where(finite & ~torch.isfinite(step), _step(part, ~up), torch.where(finite, step, part))


def _step(part: torch.Tensor, up: torch.Tensor) -> torch.Tensor:
    """Each element one unit in the last place of its dtype up (`up`) or down."""
    return torch.where(up, torch.nextafter(part, torch.full_like(part, float("inf"))),
                       torch.nextafter(part, torch.full_like(part, float("-inf"))))


def batch_axis(x: Any, n: int) -> int | None:
    """The first dimension of length `n` of a float input (one element per problem of a batch: Oracle.separable),
    None where it has none."""
    if not (isinstance(x, torch.Tensor) and (x.is_floating_point() or x.is_complex())):
        return None
    return next((d for d, size in enumerate(x.shape) if size == n), None)


def batch_moved(xs: list[Any], device: str, n: int = 0, j: int = 0) -> list[Any]:
    """Copies of `xs` on `device`; with `n`, element j along every float input's first dimension of length n
    (`batch_axis`) moved by Gaussian noise of its own scale, drawn in secret."""
    out = []
    for x in xs:
        if isinstance(x, torch.Tensor):
            x = x.to(device, copy=True)
            d = batch_axis(x, n) if n else None
            if d is not None:
                part = x.select(d, j)
                g = torch.Generator().manual_seed(secrets.randbits(62))
                noise = torch.randn(part.shape, generator=g, dtype=torch.float64)
                scale = float(part.abs().nan_to_num(0.0, 0.0, 0.0).max()) + 1
                part += (noise * scale).to(x.device, x.dtype)
        out.append(x)
    return out


def problems(shape: tuple[int, ...], xs: list[Any]) -> list[tuple[int, Any]]:
    """The ways an output of `shape` could be a batch of n independent problems, each as (n, view), where view
    takes a tensor of that shape to one of n rows (problem by problem): along any of its dimensions, or as n
    blocks of its flattened elements where an input has a dimension of length n (a batch's solutions returned
    flattened). Oracle.separable tells which, if any, the reference's output is."""
    ways: list[tuple[int, Any]] = [(n, (lambda d: lambda t: t.movedim(d, 0))(d)) for d, n in enumerate(shape) if n > 1]
    numel = math.prod(shape)
    sizes = {size for x in xs if isinstance(x, torch.Tensor) and (x.is_floating_point() or x.is_complex())
             for size in x.shape}
    ways += [(n, (lambda n: lambda t: t.reshape(n, -1))(n)) for n in sorted(sizes)
             if 1 < n < numel and numel % n == 0 and n not in shape]
    return ways


#: draws of the element changed by `Oracle.separable` before it gives up on an output its change never moves
SEPARABLE_DRAWS = 3
