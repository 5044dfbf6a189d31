"""What the harness does to tensors, from frames that hold nothing of the harness.

Every torch op the harness's thread runs goes through the dispatcher, where candidate code can have registered a
kernel (`torch.library`) that is no Python function but a chain of C callables: no trace event, no audit event.
A builtin such as `locals()` in such a chain reads the innermost Python frame on the thread (red team 10,
`dispatch_full_kernel`). So the harness's thread runs its ops here, in frames whose locals are the tensors and
numbers they work on, never the harness (its object, connection, signer or runner). docs/GATE.md, "C callables
run from the harness's own frames". Imports nothing of the gate: this runs in the candidate's process.
"""
from __future__ import annotations

import ctypes
from typing import Any

import torch

from .ipc import span

_BITS = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}


def _bits(t: torch.Tensor) -> torch.Tensor:
    """`t`'s elements as integers of its width, a view in its own layout (no copy: an input of another layout,
    flattened, was copied whole, twice per call: 12 GiB more on the device for a 6 GiB input). A whole storage's
    bytes (`_whole`), where their count allows, as 8-byte words: the same bits, compared 8 at a time (a 16 MiB
    storage compared as bytes took 12 ms on a CPU core, as words 3 ms)."""
    if (t.dtype is torch.uint8 and t.dim() == 1 and t.is_contiguous() and t.numel() % 8 == 0
            and t.storage_offset() % 8 == 0):
        return t.view(torch.int64)
    if t.element_size() in _BITS and t.dtype is not torch.bool:
        return t.view(_BITS[t.element_size()])
    return t.reshape(-1).contiguous().view(torch.uint8)


def _same_bits(x: torch.Tensor, snap: torch.Tensor) -> bool:
    """Bit-identical to the snapshot (NaN payloads included), same shape and dtype."""
    if type(x) is not torch.Tensor or x.shape != snap.shape or x.dtype != snap.dtype or x.device != snap.device:
        return False
    if x.numel() == 0:
        return True
    return torch.equal(_bits(x), _bits(snap))


def _mallopt() -> Any:
    """glibc's `mallopt`, bound at import (before any candidate code); None without glibc."""
    try:
        libc = ctypes.CDLL(None)
        libc.gnu_get_libc_version          # glibc's own: another C library's mallopt may be a stub
        fn = libc.mallopt
    except (OSError, AttributeError):
        return None
    fn.argtypes, fn.restype = (ctypes.c_int, ctypes.c_int), ctypes.c_int
    return fn


_M_PERTURB = -6
_FILL = 0x100       # a perturb byte of 0: allocations filled with 0xFF bytes (NaN as floats, -1 as integers)


def _fill(device: str, mallopt: Any) -> bool:
    """Turn glibc's fill on for a CPU's allocations (`poison`, `filled`); whether it took."""
    return device == "cpu" and mallopt is not None and mallopt(_M_PERTURB, _FILL) == 1


def poison(nbytes: int, device: str, via: Any, _mallopt=_mallopt()) -> bool:
    """Before a judged call, so that an unwritten output cannot hold a plausible value. On a CPU with glibc: every
    allocation until `unpoison` is filled with 0xFF bytes (mallopt M_PERTURB), whatever its size or thread (red
    team 54: glibc serves large blocks as fresh zeroed pages, and each thread allocates from an arena of its own, so
    NaN blocks laid on the harness's thread never reached the runner's allocations: a zero padding left unwritten
    was right by accident, and the earlier output's values came back whole at 1-24 MiB,
    benchmarks/results/cpu_poison_session32.json); True then. Elsewhere two NaN blocks of `nbytes` go to the
    allocator on the thread the candidate's code runs on (`via(nan_blocks, args)`: the runner; a GPU's caching
    allocator hands them out next); False."""
    if _fill(device, _mallopt):
        return True
    via(nan_blocks, (max(nbytes // 4, 1 << 16), device))
    return False


def filled(call: Any, device: str, fn: Any, args: Any = (), _mallopt=poison.__defaults__[-1]) -> Any:
    """`call(fn, args)` with every allocation filled as `poison` fills a judged call's (a CPU with glibc; as it is
    elsewhere): the build and the build phase's calls, whose memory a later call's output could be carved from
    (red team 55: an arena reserved in __init__, fresh zeroed pages, its slices handed out with a padding unwritten)."""
    on = _fill(device, _mallopt)
    try:
        return call(fn, args)
    finally:
        if on:
            _mallopt(_M_PERTURB, 0)


def unpoison(_mallopt=poison.__defaults__[-1]) -> None:
    """After the judged call: allocations are plain again (the timed loop never runs filled)."""
    if _mallopt is not None:
        _mallopt(_M_PERTURB, 0)


def nan_blocks(n: int, device: str) -> None:
    """Two NaN-filled blocks of n floats, allocated and freed (the allocator hands them out next)."""
    for _ in range(2):
        t = torch.full((n,), float("nan"), device=device)
        del t


def to_device(x: Any, device: str) -> Any:
    """`x` on `device` in the same memory layout: strides and storage offset, gaps included (`Tensor.to` makes a
    tensor with gaps contiguous, and drops the offset: the layout trials would reach a GPU worker as the plain
    layout)."""
    if not isinstance(x, torch.Tensor):
        return x
    d = torch.device(device)
    if x.device.type == d.type and (d.index is None or x.device.index == d.index) or x.numel() == 0 \
            or (x.is_contiguous() and x.storage_offset() == 0):
        return x.to(device)
    extent = x.storage_offset() + span(x.shape, x.stride())
    base = torch.empty(extent, dtype=x.dtype, device=device)
    y = base.as_strided(x.shape, x.stride(), x.storage_offset())
    y.copy_(x)
    return y


def to_devices(xss: list, device: str) -> list:
    return [[to_device(x, device) for x in xs] for xs in xss]


def place(prev: Any, x: torch.Tensor, keep_version: bool = True) -> bool:
    """Copy x into prev when shape, dtype, strides and device match; whether it did. With `keep_version` its version
    counter stays as it was, as where a caller refills its buffer through `.data`, numpy or DLPack (red team 36: a
    memo keyed on the input's version answered the previous batch's result); without, it moves, as a `copy_` of
    the caller's moves it (red team 37 acted only then). The worker draws which, a secret, for every call."""
    if (prev is not None and prev.shape == x.shape and prev.dtype == x.dtype and prev.stride() == x.stride()
            and prev.device == x.device and prev.storage_offset() == x.storage_offset()):
        version = prev._version
        prev.copy_(x)
        if keep_version:
            set_version(prev, version)
        return True
    return False


def set_version(t: torch.Tensor, version: int) -> None:
    """t's version counter set back to `version` (as a write through `.data` or numpy leaves it)."""
    try:
        torch._C._autograd._unsafe_set_version_counter((t,), (version,))
    except TypeError:           # older releases: one tensor and one version
        torch._C._autograd._unsafe_set_version_counter(t, version)


def apart(x: torch.Tensor, others: Any) -> torch.Tensor:
    """`x`, or a copy of it where it shares memory with one of `others` (leaves that arrived as one tensor)."""
    ptr = x.untyped_storage().data_ptr()
    if any(t is not None and t.untyped_storage().data_ptr() == ptr for t in others):
        return x.clone()
    return x


def _whole(x: torch.Tensor) -> torch.Tensor:
    """x, or where its storage holds more than its view (gaps, memory before its offset: the layout trials'),
    the whole storage as bytes: a candidate writing there writes over its caller's data (red team 33)."""
    st = x.untyped_storage()
    if x.is_contiguous() and x.storage_offset() == 0 and st.nbytes() == x.numel() * x.element_size():
        return x
    return torch.empty(0, dtype=torch.uint8, device=x.device).set_(st, 0, (st.nbytes(),), (1,))


def snapshot(xs: list) -> list:
    """Copies of the inputs before a call, where they are (a host copy of a GPU's inputs cost 5 s per 6 GiB in
    page faults, and as much again to compare; the lean plan allows the worker one input's worth more than the
    forward during a call, and it gives its cache back after: docs/GATE.md), of their whole storage where it
    holds more than the view; None for non-tensors."""
    return [(_whole(x).clone(), _meta(x)) if isinstance(x, torch.Tensor) else None for x in xs]


def _meta(x: torch.Tensor) -> tuple:
    """What the caller's tensor is besides its bits: shape, strides, offset, dtype, the memory it lives in (red
    team 35: `set_` onto a copy, the caller's buffer zeroed) and the negative and conjugate bits (a negative bit
    set on the caller's tensor negates every later read of it)."""
    st = x.untyped_storage()
    return (tuple(x.shape), x.stride(), x.storage_offset(), x.dtype, st.data_ptr(), st.nbytes(), x.is_neg(),
            x.is_conj())


def changed(xs: list, snaps: list) -> list[int]:
    """Indices of inputs whose bits (their whole storage's, as `snapshot` took them) or whose shape, strides,
    offset, dtype (red team 34: `x.t_()` on the caller's tensor), storage or negative/conjugate bits differ from
    their snapshot."""
    return [i for i, (x, s) in enumerate(zip(xs, snaps))
            if s is not None and not (type(x) is torch.Tensor and _meta(x) == s[1] and _same_bits(_whole(x), s[0]))]


def contiguous(ts: list) -> list:
    """The tensors contiguous, their negative and conjugate bits applied (the bytes that travel are the values)."""
    return [t.resolve_conj().resolve_neg().contiguous() if isinstance(t, torch.Tensor) else t for t in ts]


def empties(specs: list, device: str) -> list[torch.Tensor]:
    return [torch.empty(shape, dtype=getattr(torch, dt), device=device) for shape, dt in specs]


def keep(outs: list, meta: list) -> list:
    """A timed iteration's outputs as kept until the next batch: those written into an input copied (the next
    iteration's inputs overwrite them)."""
    return [o.clone() if m["aliased"] else o for o, m in zip(outs, meta)]


def flush_buffer(nbytes: int, device: str) -> torch.Tensor:
    return torch.empty(max(nbytes // 4, 1), dtype=torch.float32, device=device)


def zero(t: torch.Tensor) -> None:
    t.zero_()


def event_pair(event_type: Any) -> tuple[Any, Any, Any]:
    """Two timing events of `event_type` (clock.EventBase) and the harness thread's current CUDA stream, for the
    timed loop to record again every iteration."""
    return event_type(enable_timing=True), event_type(enable_timing=True), torch.cuda.current_stream()
