"""Digests of tensors: the commitment a worker makes, inside the judge's clock, to every timed output.

The judge picks which timed outputs to re-check only after a batch has returned, with randomness the
worker never sees; the worker then hands over the chosen outputs, and their digests must equal the ones
it committed to while the judge's clock ran. To commit to the digest of a correct output, the worker
has to have that output, so work cannot move out of the timed window into the re-check.

The digest is a sum of a bitwise mix (w ^ (w >> 29)) of the tensor's 64-bit words (wrapping integer arithmetic, so the
sum does not depend on reduction order and is the same on every device of a type): nonlinear in the
bits, it cannot be computed from a cheaper linear function of the inputs the way a weighted sum of
the values could for a linear layer. It does not depend on the order of the words: a revealed output
must also match the oracle, so a permutation of the right values gains nothing, and leaving positions
out keeps it to one pass over the output (on the CPU in chunks of one intra-op grain through a reused
buffer: `CHUNK`). Checks that memory is unchanged (an earlier call's tensors, the module's parameters and
buffers, a timed call's inputs) need the order too: `positional`, keyed. On the CPU both run as one C loop
where the process has kernelgate/native.py's library loaded (bit for bit the torch forms here). Imports
nothing of kernelgate but that leaf: the worker and the judge both use it.
"""
from __future__ import annotations

import copy
import threading
from typing import Callable

import torch

from . import native


def words(t: torch.Tensor) -> torch.Tensor:
    """The tensor's bytes, in row-major order, as 64-bit words (zero-padded to a whole word, or copied to
    an aligned buffer, where the size or the address does not allow a view); of its values where it is a conjugate
    or negative view (their memory holds the conjugates or negations: no byte view of it is allowed)."""
    flat = t.detach().resolve_conj().resolve_neg().reshape(-1)
    if not flat.is_contiguous():
        flat = flat.contiguous()
    b = flat.view(torch.uint8)
    n = b.numel()
    if n % 8 == 0 and b.data_ptr() % 16 == 0:
        return b.view(torch.int64)
    padded = torch.zeros(-(-n // 8) * 8, dtype=torch.uint8, device=b.device)
    padded[:n] = b
    return padded.view(torch.int64)


def digest(t: torch.Tensor) -> int:
    """A 64-bit digest of the tensor's bytes (dtype and shape are checked apart)."""
    if t.numel() == 0:
        return 0
    w = words(t)
    fast = native.digest_words(w)
    if fast is not None:
        return fast
    if w.is_cuda and _fits(w) and _triton_kernel() is not None:
        return _digest_triton(w)
    return _digest_torch(w)


#: words per step of the CPU digest: one intra-op grain (each op runs on one thread, no wake-up of the others)
#: through a reused buffer (no temporaries the size of the tensor: 0.78 -> 0.18 ms for 1 MiB, 4.8 -> 2.7 ms for
#: 16 MiB on a loaded 2-core CPU with passive OpenMP waiting)
CHUNK = 1 << 15
_LOCAL = threading.local()


def _wrap(v: int) -> int:
    """v as the int64 that wrapping arithmetic gives."""
    return ((v + (1 << 63)) % (1 << 64)) - (1 << 63)


def _digest_torch(w: torch.Tensor) -> int:
    if w.device.type != "cpu":
        return int(torch.bitwise_xor(w, w >> 29).sum())
    buf = getattr(_LOCAL, "buf", None)
    if buf is None:
        buf = _LOCAL.buf = torch.empty(CHUNK, dtype=torch.int64)
    total = 0
    for i in range(0, w.numel(), CHUNK):
        c = w[i:i + CHUNK]
        o = buf[:c.numel()]
        torch.bitwise_right_shift(c, 29, out=o)
        total += int(o.bitwise_xor_(c).sum())
    return _wrap(total)      # the int64 sum, wrapped as torch's is


BLOCK = 4096
_KERNEL: list = []


def _triton_kernel():
    """The same mix as `_digest_torch` in one pass over the words, or None without Triton. Built on first
    use; the worker builds it before it is locked down (no compiler after)."""
    if not _KERNEL:
        try:
            import triton
            import triton.language as tl
        except ImportError:
            _KERNEL.append(None)
            return None

        @triton.jit(do_not_specialize=["n"])
        def _kg_digest(w_ptr, out_ptr, n, BLOCK: tl.constexpr):
            pid = tl.program_id(0)
            offs = pid.to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
            m = offs < n
            w = tl.load(w_ptr + offs, mask=m, other=0)
            x = w ^ (w >> 29)
            x = tl.where(m, x, 0)
            tl.store(out_ptr + pid, tl.sum(x, axis=0))

        @triton.jit(do_not_specialize=["n", "key", "step", "mul"])
        def _kg_positional(w_ptr, out_ptr, n, key, step, mul, BLOCK: tl.constexpr):
            pid = tl.program_id(0)
            offs = pid.to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
            m = offs < n
            w = tl.load(w_ptr + offs, mask=m, other=0)
            x = (offs * step + key) ^ w              # wrapping int64, as the torch form's
            x = x ^ (x >> 29)
            x = x * mul
            x = x ^ (x >> 32)
            x = tl.where(m, x, 0)
            tl.store(out_ptr + pid, tl.sum(x, axis=0))

        _KERNEL.append(_kg_digest)
        _KERNEL.append(_kg_positional)
    return _KERNEL[0]


_RAW_STREAM = getattr(torch._C, "_cuda_getCurrentRawStream", None)
_I32 = 1 << 31


def _dispatched(i: int, w: torch.Tensor, partial: torch.Tensor, args: tuple) -> bool:
    """Kernel i through Triton's dispatch (the judge's process, and a worker's before `warm`)."""
    _KERNEL[i][(partial.numel(),)](w, partial, w.numel(), *args, BLOCK=BLOCK)
    return True


def _unlaunched(i: int, w: torch.Tensor, partial: torch.Tensor, args: tuple) -> bool:
    """No kernel: the caller takes the torch form (a worker whose private launchers failed warm's self-test)."""
    return False


#: how the GPU digests launch their kernels. A worker's `warm` rebinds it (before the guard's snapshot of the names
#: the harness looks up: a later rebinding ends the worker) to a launcher over private copies of the compiled
#: kernels, or to `_unlaunched`: never Triton's dispatch after warm, whose caches (`_KERNEL[i].device_caches`) and
#: compiled kernels candidate code can reach and change without an audit event (red team 52 replaced a kept compiled
#: kernel with its own, and swapped a cached one's function handle)
_gpu = _dispatched


def _launch(i: int, w: torch.Tensor, args: tuple, via: Callable[..., bool] | None = None) -> torch.Tensor | None:
    """Kernel i over the words w (16-byte aligned) with its other arguments `args`, through `via` (default `_gpu`):
    the per-block partial sums (on w's device), or None where the torch form must serve. Past Triton's dispatch once
    warm ran: the dispatch (binding, the cache key, launch metadata: about 28 Python calls) runs on the harness's
    thread under its trace function, which every Python call pays (2-3 us each on an H100's host,
    benchmarks/results/h100_harness_fixed_session31.json)."""
    partial = torch.empty((w.numel() + BLOCK - 1) // BLOCK, dtype=torch.int64, device=w.device)
    return partial if (via or _gpu)(i, w, partial, args) else None


def _fits(w: torch.Tensor) -> bool:
    """Whether the built kernels take w: a word count under 2**31 (Triton types an int by its value: a larger one
    would compile another variant, on the harness's thread after the lockdown)."""
    return w.numel() < _I32


def _digest_triton(w: torch.Tensor) -> int:
    if w.data_ptr() % 16:                    # one compiled variant: 16-byte aligned words only
        w = w.clone()
    partial = _launch(0, w, ())
    return _digest_torch(w) if partial is None else int(partial.sum())


def digests(ts: list) -> list[int | None]:
    """Digest of each tensor in a list (None for non-tensors)."""
    return [digest(t) if isinstance(t, torch.Tensor) else None for t in ts]


_STEP = 0x9E3779B97F4A7C15 - (1 << 64)     # odd: every position its own offset (as an int64)
_MUL = 0xBF58476D1CE4E5B9 - (1 << 64)


def positional(t: torch.Tensor, key: int = 0) -> int:
    """A 64-bit digest of the tensor's bytes that depends on where each word lies: each word is offset by its
    position (times an odd constant) plus `key`, then mixed and summed (wrapping; the same on every device of a
    type, and between the CPU and a GPU). For checks that memory is unchanged (earlier calls' tensors, the module's
    parameters, the inputs after a timed call): `digest` sums the words' mixes whatever their order, and a
    candidate reversing the order of its caller's words went unseen (red team 37). On the CPU in chunks through
    reused scratch buffers (written before they are read), the positions' offsets made once per call, never kept
    between calls where the worker's other code could change them (a timed call's inputs are digested inside the
    judge's clock: 2.3 -> 1.5 ms for 8 MiB on one core; 0.1 ms as kernelgate/native.py's C loop)."""
    if t.numel() == 0:
        return 0
    w = words(t)
    fast = native.positional_words(w, _wrap(key))
    if fast is not None:
        return fast
    if w.is_cuda and key == 0 and _fits(w) and _triton_kernel() is not None:
        return _positional_triton(w, key)
    return _positional_torch(w, key)


def _positional_triton(w: torch.Tensor, key: int) -> int:
    """`positional` in one pass over the words (a GPU's: the torch form's eight passes took 2.1 ms for 256 MiB on an
    H100, `benchmarks/results/h100_harness_parts_session30.json`)."""
    if w.data_ptr() % 16:
        w = w.clone()
    partial = _launch(1, w, (_wrap(key), _STEP, _MUL))
    return _positional_torch(w, key) if partial is None else _wrap(int(partial.sum()))


def _positional_torch(w: torch.Tensor, key: int) -> int:
    total = 0
    cpu = w.device.type == "cpu"
    step = CHUNK if cpu else 1 << 24
    base = torch.arange(min(step, w.numel()), dtype=torch.int64, device=w.device).mul_(_STEP)
    bufs = getattr(_LOCAL, "pos", None) if cpu else None
    if cpu and bufs is None:
        bufs = _LOCAL.pos = (torch.empty(CHUNK, dtype=torch.int64), torch.empty(CHUNK, dtype=torch.int64))
    for i in range(0, w.numel(), step):
        c = w[i:i + step]
        x, y = (bufs[0][:c.numel()], bufs[1][:c.numel()]) if cpu else (torch.empty_like(c), torch.empty_like(c))
        torch.add(base[:c.numel()], _wrap(i * _STEP + key), out=x)     # (i + j) * _STEP + key, wrapping
        x.bitwise_xor_(c)
        torch.bitwise_right_shift(x, 29, out=y)
        x.bitwise_xor_(y).mul_(_MUL)
        torch.bitwise_right_shift(x, 32, out=y)
        total += int(x.bitwise_xor_(y).sum())
    return _wrap(total)


def warm(device: str) -> None:
    """Build the GPU kernels of `digest` and of `positional` with key 0 now (a worker, before its lockdown: nothing is
    compiled on the harness's thread after), then launch them past Triton's dispatch from here on (`_gpu`). A
    positional digest with another key (the worker's secret-keyed checks of parameters and earlier calls' tensors,
    outside the timed window) is the torch form on a GPU: no kernel object candidate code could reach serves it
    (red team 52). Triton types an int argument by its value: the key-0 kernel is built for a key that fits in 32 bits
    and word counts under 2**31 (`_fits`)."""
    global _gpu
    t = torch.ones(1 << 16, device=device)
    digests([t])
    positional(t, 0)
    if _triton_kernel() is None or _RAW_STREAM is None or _gpu is not _dispatched:
        return
    _gpu = _private_launcher(device)


def _private_launcher(device: str) -> Callable[..., bool]:
    """A launcher over private copies of the compiled digest kernels (each compiled kernel's launcher object copied,
    its mutable attributes deep-copied; held only as defaults of the function returned, which candidate code cannot
    read), kept where it gives the torch forms' sums on words of every bit pattern; else `_unlaunched`."""
    index = torch.device(device).index
    index = torch.cuda.current_device() if index is None else index
    g = torch.Generator(device=device).manual_seed(1)
    w = words(torch.randint(-(1 << 62), 1 << 62, (3 * BLOCK + 5,), dtype=torch.int64, device=device, generator=g))
    partial = torch.empty((w.numel() + BLOCK - 1) // BLOCK, dtype=torch.int64, device=device)
    kept = []
    try:
        for i, args in ((0, ()), (1, (0, _STEP, _MUL))):
            compiled = _KERNEL[i][(partial.numel(),)](w, partial, w.numel(), *args, BLOCK=BLOCK)
            mine = copy.copy(compiled.run)          # the launcher (a property in some Triton versions)
            for k, v in list(vars(mine).items()):
                if isinstance(v, (list, dict, set, bytearray)):
                    setattr(mine, k, copy.deepcopy(v))
            kept.append((mine, compiled.function, copy.deepcopy(compiled.packed_metadata), compiled))
    except Exception:  # noqa: BLE001 - another Triton's objects: the torch forms serve
        return _unlaunched
    table = {(0, index): kept[0], (1, index): kept[1]}

    def direct(i: int, w: torch.Tensor, partial: torch.Tensor, args: tuple, _table=table, _stream=_RAW_STREAM,
               _block=BLOCK, _I32=_I32) -> bool:
        entry = _table.get((i, w.device.index))
        if entry is None or (args and not -_I32 <= args[0] < _I32):     # the key-0 kernel takes a 32-bit key
            return False
        entry[0](partial.numel(), 1, 1, _stream(w.device.index), entry[1], entry[2], None, None, None,
                 w, partial, w.numel(), *args, _block)
        return True
    try:
        sums = [(_launch(i, w, args, direct), ref) for i, args, ref in (
            (0, (), _digest_torch(w)), (1, (0, _STEP, _MUL), _positional_torch(w, 0)))]
        ok = all(partial is not None and int(partial.sum()) == ref for partial, ref in sums)
    except Exception:  # noqa: BLE001 - another launcher signature: the torch forms serve
        ok = False
    return direct if ok else _unlaunched


def positionals(ts: list, key: int = 0) -> list[int | None]:
    """`positional` of each tensor in a list (None for non-tensors)."""
    return [positional(t, key) if isinstance(t, torch.Tensor) else None for t in ts]


#: `positional_many` batches GPU tensors of at most _ONE_WORDS words each (8 MiB), up to _BATCH_WORDS words a batch
#: (64 MiB): a large tensor's own pass is as fast (VGG-19's 38 tensors of 548 MiB: 7.2 ms one at a time, 23 ms all
#: batched, on an H100: benchmarks/results/h100_state_digests_session42.json)
_ONE_WORDS, _BATCH_WORDS = 1 << 20, 1 << 23


def positional_many(ts: list[torch.Tensor], key: int = 0) -> list[int]:
    """`positional` of each tensor, the same values; GPU tensors of up to _ONE_WORDS words batched, their words
    laid end to end and every tensor's mixes summed by segment (`_positional_segments`), one sync a batch. A
    module's keyed parameter checks took a sync and nine launches a tensor: 29 loads of EfficientNet-B0's 300-odd
    tensors cost 13.8 s of a 40 s judgement on an H100 (benchmarks/results/suite_kbdev40_h100_session42.json)."""
    out: list[int | None] = [None] * len(ts)
    batch: list[int] = []
    size = 0

    def flush() -> None:
        nonlocal batch, size
        if batch:
            for i, v in zip(batch, _positional_segments([words(ts[i]) for i in batch], key)):
                out[i] = v
        batch, size = [], 0
    for i, t in enumerate(ts):
        n = -(-t.numel() * t.element_size() // 8)
        if not t.is_cuda or n == 0 or n > _ONE_WORDS:
            out[i] = positional(t, key)
            continue
        if size + n > _BATCH_WORDS or (batch and ts[batch[0]].device != t.device):
            flush()
        batch.append(i)
        size += n
    flush()
    return [int(v) for v in out]


def _positional_segments(ws: list[torch.Tensor], key: int) -> list[int]:
    """`_positional_torch` of each word tensor in `ws` (one device), in one pass over their concatenation: each word
    offset by its position within its own tensor, mixed as there, summed per tensor (int64 sums wrap)."""
    w = torch.cat(ws)
    dev = w.device
    counts = torch.tensor([x.numel() for x in ws], dtype=torch.int64, device=dev)
    seg = torch.repeat_interleave(torch.arange(len(ws), device=dev), counts, output_size=w.numel())
    starts = torch.cumsum(counts, 0).sub_(counts)
    x = torch.arange(w.numel(), dtype=torch.int64, device=dev).sub_(starts[seg]).mul_(_STEP).add_(_wrap(key))
    x.bitwise_xor_(w)
    x.bitwise_xor_(x >> 29).mul_(_MUL)
    x.bitwise_xor_(x >> 32)
    sums = torch.zeros(len(ws), dtype=torch.int64, device=dev).index_add_(0, seg, x)
    return [_wrap(v) for v in sums.tolist()]
