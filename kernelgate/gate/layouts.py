"""Other memory layouts of the same values, for the layout trials (gate/trials.py): column-major at an offset,
a secret order with a middle dim innermost, gaps in every dim with every second innermost element at an offset,
gaps between outer entries at an offset, contiguous at an offset, column-major with gaps at an offset. The
memory outside the view (gaps, the part before the offset) holds other values of the tensor's own, so a kernel
reading it is wrong. Pure functions of a tensor and the task's secret seed."""
from __future__ import annotations

import itertools
import math
import random

import torch

from .. import hostmem

#: the layout trials (relayout): column-major, a secret order, with gaps, gaps between outer entries, shifted,
#: column-major with gaps
LAYOUTS = (0, 1, 2, 3, 4, 5)


def memory_orders(rank: int) -> list[tuple[int, ...]]:
    """The dims' orders in memory (outermost first) the layout trials draw from: the reversed order (column-major)
    first, then those where no two neighbouring dims stay neighbours in their own order, so no stride ratio of the
    row-major layout survives (a plane walked as H*W elements, a raw row-major read, both fail), and whose
    innermost dim is neither the first nor the last (as channels_last's: a kernel that handles the two orders a
    BLAS-minded author checks for, stride(-1) == 1 or stride(0) == 1, and reads any other as row-major, meets
    neither; red team 24). Up to 5 dims enumerated, beyond that the reversed order alone."""
    rev = tuple(range(rank))[::-1]
    if rank > 5:
        return [rev]
    out = [p for p in itertools.permutations(range(rank))
           if all(p.index(i + 1) != p.index(i) + 1 for i in range(rank - 1)) and p[-1] not in (0, rank - 1)]
    return [rev] + [p for p in out if p != rev]


def relayout(x: torch.Tensor, which: int = 0, seed: int = 0) -> torch.Tensor | None:
    """The same values in another memory layout, the same for every call with the same (which, seed) (the build
    phase's last calls see it, so a compiler's recompile for these strides happens before the lockdown). Each
    trial's kind is fixed, its sizes drawn by `seed` (a task's secret):
    0: the dims' order in memory reversed (column-major), dense, at an offset of 1-7 elements;
    1: another order of `memory_orders`, drawn by `seed` (a kernel right for row-major, column-major and a few
       layouts it special-cases and wrong for the rest, channels_last included, meets one it does not know: red
       teams 23, 24), dense, at offset 0 (2 dims: column-major at offset 0);
    2: row-major with gaps in every dim and every second innermost element, at an offset (`_gapped`; a vector
       every second or third element);
    3: gaps between outer entries only, at an offset (`_outer_gaps`: 2-D rows with a pitch, a slice along a
       middle dim; red team 33);
    4: contiguous at an offset (`_shifted`);
    5: the dims' order reversed with gaps in every dim, at an offset (a column pitch: red team 33).
    None when that is no other layout (fewer than two dims of size > 1 for another order; fewer than 2
    elements)."""
    if which == 2:
        return _gapped(x, seed, tuple(range(x.dim())), 2) if x.dim() > 1 else _vector(x, seed)
    if which == 3:
        return _outer_gaps(x, seed)
    if which == 4:
        return _shifted(x, seed)
    if sum(1 for n in x.shape if n > 1) < 2:
        return None
    orders = memory_orders(x.dim())
    if which == 5:
        return _gapped(x, seed, orders[0], 1)
    if which == 0:
        choices = orders[:1]
    else:           # (2 dims: column-major again, at offset 0)
        choices = orders[1:] or orders[:1]
        random.Random(seed * 1000003 + x.dim()).shuffle(choices)
    off = random.Random(seed * 2003 + x.dim()).randint(1, 7) if which == 0 else 0
    for order in choices:
        y = _dense(x, order, off, seed)
        if y.stride() != x.stride() and not y.is_contiguous():
            return y
    return None


def relayout_on(x: torch.Tensor, which: int, seed: int, compute: str | None = None) -> torch.Tensor | None:
    """`relayout`, made on `compute` (a GPU) where x lies elsewhere (the lean memory plan keeps inputs on the host)
    and brought back to x's device in the same strides and offset: on the host a relaid 16 GiB input took 30-45 s
    (its decoy drawn and scaled by the CPU, the strided copy), on the H200 a copy each way. The decoy's values
    come from that device's generator (plausible values either way; the layout is the same)."""
    if compute is None or torch.device(compute) == x.device:
        return relayout(x, which, seed)
    y = relayout(x.to(compute), which, seed)
    if y is None:
        return None
    span = torch.empty(0, dtype=y.dtype, device=y.device).set_(y.untyped_storage(), 0,
                                                              (y.untyped_storage().nbytes() // y.element_size(),))
    home = hostmem.to_host(span) if x.device.type == "cpu" else span.to(x.device)
    del span
    return home.as_strided(y.shape, y.stride(), y.storage_offset())


_CHUNK = 1 << 24


def _decoy(shape: list[int], x: torch.Tensor, seed: int) -> torch.Tensor:
    """A buffer of `shape` for x's values, filled with values like x's (x flattened, rotated by a secret amount,
    repeated; floats each scaled by a secret factor in [0.75, 1]): what a kernel reads outside the view is
    plausible and wrong, and no value of the view's own (red team 35 told a trial from a caller's tensor by
    finding the view's values outside it). Not NaN, a largest integer or True (red team 34: `nan_to_num`, a
    range mask and `all()` read those as no data, and a NaN before the view told a trial from a caller's
    tensor); never past x's own magnitude (no overflow)."""
    flat = x.detach().reshape(-1)
    n, m = math.prod(shape), flat.numel()
    buf = torch.empty(n, dtype=x.dtype, device=x.device)
    pos, src = 0, random.Random(seed * 31337 + n).randrange(m) if m else 0
    while pos < n and m:
        k = min(m - src, n - pos)
        buf[pos:pos + k] = flat[src:src + k]
        pos, src = pos + k, (src + k) % m
    if buf.dtype in (torch.float16, torch.bfloat16, torch.float32, torch.float64):
        g = torch.Generator(device=buf.device).manual_seed(seed * 7919 + n)
        for a in range(0, n, _CHUNK):             # a block at a time (a task's worth more on the device, else)
            part = buf[a:a + _CHUNK]
            part.mul_(torch.empty(part.shape, dtype=torch.float32, device=buf.device)
                      .uniform_(0.75, 1.0, generator=g).to(buf.dtype))
    return buf.view(shape)


def _inverse(order: tuple[int, ...]) -> list[int]:
    return [order.index(i) for i in range(len(order))]


def _dense(x: torch.Tensor, order: tuple[int, ...], off: int, seed: int) -> torch.Tensor:
    """x's values dense in memory order `order` (outermost first), `off` elements into its buffer."""
    flat = _decoy([off + x.numel()], x, seed)
    y = flat[off:].view([x.shape[d] for d in order]).permute(_inverse(order))
    y.copy_(x.detach())
    return y


def _gapped(x: torch.Tensor, seed: int, order: tuple[int, ...], step: int) -> torch.Tensor | None:
    """The same values in memory order `order` with gaps in every dim (a pitch longer than the row in each), the
    innermost dim every `step`-th element, and the view starting past the buffer's first element, as a padded
    buffer's valid region. The pitches and the start are drawn from the task's secret. A kernel rebuilding the
    dense layout of the strides' order (red team 25), one reading rows of one pitch with the other dims packed,
    one ignoring the storage offset (red team 27), a column pitch or an inner stride (red team 33) is wrong
    here. None for fewer than 2 elements."""
    if x.numel() < 2 or x.dim() == 0:
        return None
    r = random.Random(seed * 7919 + x.dim() + 17 * step)
    shape = [x.shape[d] for d in order]
    pads = [0 if n == 1 else r.randint(1, max(1, min(3, n // 4))) for n in shape]
    starts = [r.randint(0, p) for p in pads]
    if not any(starts):
        starts[max(range(x.dim()), key=lambda d: pads[d])] = 1
    ext = [n + p for n, p in zip(shape, pads)]
    ext[-1] = step * shape[-1] + pads[-1]
    big = _decoy(ext, x, seed)
    index = [slice(a, a + n) for a, n in zip(starts, shape)]
    index[-1] = slice(starts[-1], starts[-1] + step * shape[-1], step)
    y = big[tuple(index)].permute(_inverse(order))
    y.copy_(x.detach())
    return y


def _vector(x: torch.Tensor, seed: int) -> torch.Tensor | None:
    """A vector every second or third element of its buffer, past its first. None for fewer than 2 elements."""
    if x.numel() < 2:
        return None
    r = random.Random(seed * 7919 + x.dim())
    step = r.choice((2, 3))
    big = _decoy([step * x.shape[0] + step], x, seed)
    y = big[r.randint(1, step)::step][:x.shape[0]]
    y.copy_(x.detach())
    return y


def _outer_gaps(x: torch.Tensor, seed: int) -> torch.Tensor | None:
    """The same values with gaps only between the outermost dim's entries (the rest packed, so a `.view` over
    the inner dims still works), at a storage offset: the gap trial of a reference that refuses gaps
    everywhere (a flatten by `.view`: red team 27), and a trial of its own (a kernel that checks only that the
    innermost dims are packed: red team 33). None for fewer than 2 elements."""
    if x.numel() < 2 or x.dim() == 0:
        return None
    r = random.Random(seed * 104729 + x.dim())
    n0, inner = x.shape[0], max(1, x.numel() // max(1, x.shape[0]))
    pitch, off = inner + r.randint(1, 3), r.randint(1, 7)
    flat = _decoy([off + n0 * pitch], x, seed)
    y = flat[off:].view(n0, pitch)[:, :inner].view(x.shape)
    y.copy_(x.detach())
    return y


def _shifted(x: torch.Tensor, seed: int) -> torch.Tensor | None:
    """The same values, contiguous, at a storage offset of 1 to 7 elements (a view into a larger buffer, as
    `buf[k:].view(shape)` or a slice along the outermost dim gives): a kernel taking the storage's start for the
    data's (`untyped_storage().data_ptr()`, `as_strided(..., 0)`) is wrong here (red team 29).
    None for an empty tensor."""
    if x.numel() == 0:
        return None
    return _dense(x, tuple(range(x.dim())), random.Random(seed * 65537 + x.dim()).randint(1, 7), seed)
