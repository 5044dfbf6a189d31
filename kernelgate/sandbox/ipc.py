"""Messages between the judge and a worker: tensors, numbers, strings, lists and dicts only.

Replies from a worker are untrusted, so they are decoded with `torch.load(weights_only=True)`,
which cannot run code.

Large contiguous tensors do not travel inside the message: they are copied into a shared-memory
region (`Bulk`, mapped by both processes) and the message carries a reference (offset, bytes,
dtype, shape). From the judge to a worker, a large tensor in another memory layout (the layout trials:
strides, gaps, a storage offset) travels so too, as its storage up to its last element, with its
strides and offset; a worker's replies may carry contiguous tensors only. Each direction has its own region, created by the judge and named in messages by a
number; the region itself reaches the worker as a file descriptor over a second socket (`send`,
`Regions`), never as a path. A region is a memfd sealed against shrinking and growing, so the worker
cannot truncate it under the judge's mapping (which would kill the judge with SIGBUS). A reference
read from an untrusted reply is bounds-checked and copied out at once, so later writes to the region
by the worker cannot change what the judge has read.
"""
from __future__ import annotations

import errno
import io
import itertools
import math
import mmap
import os
import socket
import struct
import tempfile
from typing import Any

import torch

from .. import hostmem

#: bytes of the tag on every message a worker sends (`signer`, `opener`)
TAG_BYTES = 16

try:                                   # the C function itself: nothing between it and the key to rebind
    from _hashlib import hmac_digest as _hmac_digest
except ImportError:                    # pragma: no cover - builds without OpenSSL
    from hmac import digest as _hmac_digest


def signer(key: bytes):
    """The worker's side: each message it sends gets an HMAC-SHA256 tag over (its sequence number, the bytes), with
    the key the judge sent in its first request, before any candidate code existed. Code that takes over the
    connection's descriptor (it is a plain number in the candidate's process) cannot answer in the harness's
    name without the key. Names bound now (default arguments)."""
    seq = [0]

    def sign(data: bytes, _key=key, _seq=seq, _digest=_hmac_digest, _to=int.to_bytes, _n=TAG_BYTES) -> bytes:
        tag = _digest(_key, _to(_seq[0], 8, "little") + data, "sha256")[:_n]
        _seq[0] += 1
        return data + tag
    return sign


def opener(key: bytes):
    """The judge's side of `signer`: the message without its tag, or None when the tag is not the harness's for
    the next sequence number (a forged, replayed or reordered message)."""
    import hmac
    seq = [0]

    def open_(data: bytes) -> bytes | None:
        if len(data) < TAG_BYTES:
            return None
        body, tag = data[:-TAG_BYTES], data[-TAG_BYTES:]
        want = _hmac_digest(key, seq[0].to_bytes(8, "little") + body, "sha256")[:TAG_BYTES]
        if not hmac.compare_digest(tag, want):
            return None
        seq[0] += 1
        return body
    return open_


#: tensors at least this large travel through the shared region (smaller ones inline)
BULK_MIN = 1 << 20
#: the largest storage offset (elements) a contiguous tensor keeps through the region (a reply cannot make the
#: reader allocate more than this beyond its data)
MAX_SHIFT = 1 << 12
_ALIGN = 64
#: the requests whose replies carry a task's outputs: a reply region is made for these (once a worker's regions
#: are shed, a request of another kind does not make one)
BULK_REPLIES = frozenset({"call", "fetch", "settled"})
_TAG = "__kg_bulk__"


def encode(obj: Any) -> bytes:
    buf = io.BytesIO()
    torch.save(obj, buf)
    return buf.getvalue()


def decode(data: bytes) -> Any:
    return torch.load(io.BytesIO(data), weights_only=True, map_location="cpu")


def _sealed_fd(size: int) -> tuple[int, bool]:
    """A file descriptor of `size` bytes, reserved up front (a lack of memory fails here, not later as SIGBUS),
    and whether it is sealed against shrinking: a memfd where the platform has them, else an unlinked
    temporary file."""
    import fcntl
    if hasattr(os, "memfd_create") and hasattr(fcntl, "F_ADD_SEALS"):
        fd = os.memfd_create("buffer", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
        sealed = True
    else:
        fd, path = tempfile.mkstemp(prefix="kernelgate-bulk-")
        os.unlink(path)
        sealed = False
    try:
        os.ftruncate(fd, size)
        try:
            os.posix_fallocate(fd, 0, size)
        except AttributeError:
            pass
        except OSError as e:
            if e.errno not in (errno.EOPNOTSUPP, errno.EINVAL):
                raise
        if sealed:
            fcntl.fcntl(fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_SEAL)
    except BaseException:
        os.close(fd)
        raise
    return fd, sealed


#: a judge->worker region grows to twice its size (fewer regrowths for small messages) only below this; above it,
#: to what the message needs: a 16 GiB region grown for a layout trial's 16.00003 GiB became 32 GiB, then 64 GiB for
#: the gap trial's 36 GiB, and the judge of the 16 GiB average-pooling task died at 123 of 125 GiB of host memory
GROW_DOUBLE_BELOW = 256 << 20


def grown(size: int, need: int) -> int:
    """The size of a judge->worker region replacing one of `size` bytes for a message needing `need`."""
    return max(need, 2 * size) if size < GROW_DOUBLE_BELOW else need


_IDS = itertools.count(1)
_ID = struct.Struct("<Q")


class Bulk:
    """A shared-memory region of fixed size, mapped as a flat uint8 tensor.

    `ident` names it in messages; `fd` is open on the judge's side until `send` hands it to the worker."""

    def __init__(self, ident: int, size: int, buf: torch.Tensor, fd: int | None = None, sealed: bool = False):
        self.ident, self.size, self.buf, self.fd, self.sealed = ident, size, buf, fd, sealed
        self.registered = False

    def for_gpu(self) -> None:
        """Register the region with the GPU in use before a copy between them goes through it (hostmem.py: 55
        GB/s against 7-14 unregistered); once."""
        if not self.registered:
            self.registered = True
            hostmem.register(self.buf)

    @staticmethod
    def _map(fd: int, size: int) -> torch.Tensor:
        return torch.frombuffer(mmap.mmap(fd, size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE),
                                dtype=torch.uint8)

    @classmethod
    def create(cls, size: int) -> "Bulk":
        """A new region (judge side). Space is reserved up front, so a lack of memory fails here, not later."""
        size = max(_ALIGN, -(-size // _ALIGN) * _ALIGN)
        fd, sealed = _sealed_fd(size)
        try:
            return cls(next(_IDS), size, cls._map(fd, size), fd, sealed)
        except BaseException:
            os.close(fd)
            raise

    @classmethod
    def attach(cls, fd: int, ident: int, size: int) -> "Bulk":
        """Map a region the judge sent (worker side); the descriptor is closed once mapped."""
        try:
            if os.fstat(fd).st_size < size:
                raise ValueError(f"shared region {ident} is smaller than {size} bytes")
            return cls(ident, size, cls._map(fd, size))
        finally:
            os.close(fd)

    def send(self, sock: socket.socket) -> None:
        """Hand the region to the worker (its descriptor, tagged with the id) and close it on this side."""
        if self.fd is None:
            return
        socket.send_fds(sock, [_ID.pack(self.ident)], [self.fd])
        self.close()

    def close(self) -> None:
        """Close the descriptor, if still open; the mapping stays valid while `buf` is referenced."""
        if self.fd is not None:
            fd, self.fd = self.fd, None
            os.close(fd)

    unlink = close


class Regions:
    """Worker side: the descriptors the judge sends, claimed by the id a message names."""

    def __init__(self, sock: socket.socket | None):
        self.sock = sock
        self.pending: dict[int, int] = {}

    def attach(self, current: Bulk | None, named: Any) -> Bulk | None:
        """The region a message names (`[id, size]`), mapped once per id."""
        if not named:
            return None
        ident, size = int(named[0]), int(named[1])
        if current is not None and current.ident == ident and current.size == size:
            return current
        while ident not in self.pending:
            if self.sock is None:
                raise ValueError("a shared region was named, but no channel for regions exists")
            data, fds, _flags, _addr = socket.recv_fds(self.sock, _ID.size, 4)
            if not data and not fds:
                raise EOFError("the judge closed the channel for shared regions")
            if len(data) != _ID.size or len(fds) != 1:
                for fd in fds:
                    os.close(fd)
                raise ValueError("malformed message on the channel for shared regions")
            self.pending[_ID.unpack(data)[0]] = fds[0]
        return Bulk.attach(self.pending.pop(ident), ident, size)


#: a tensor in another layout travels through the region when its storage up to its last element is at most
#: this many times its elements (the gap layouts' pitches stay well within it)
MAX_SPREAD = 4


def span(shape: Any, strides: Any) -> int:
    """Elements from a view's first to its last, inclusive (non-negative strides; 0 for an empty view)."""
    if any(n == 0 for n in shape):
        return 0
    return 1 + sum((n - 1) * st for n, st in zip(shape, strides))


def _strided_ok(numel: int, span: int, shift: int) -> bool:
    return 0 < span <= MAX_SPREAD * numel + MAX_SHIFT and shift <= max(MAX_SHIFT, span)


def _laid_out(t: torch.Tensor) -> int:
    """Elements of storage a tensor in another layout travels as (its offset and span), 0 when it travels
    otherwise (contiguous, or strides the region does not carry)."""
    if t.is_contiguous() or any(st < 0 for st in t.stride()):
        return 0
    extent, shift = span(t.shape, t.stride()), t.storage_offset()
    return shift + extent if _strided_ok(t.numel(), extent, shift) else 0


def _eligible(t: Any, strided: bool = False) -> bool:
    if not (type(t) is torch.Tensor and t.layout == torch.strided and not t.is_meta):
        return False
    if t.is_contiguous():
        return t.numel() * t.element_size() >= BULK_MIN
    return strided and _laid_out(t) * t.element_size() >= BULK_MIN


def _nbytes(t: torch.Tensor) -> int:
    """Bytes `pack` copies for an eligible tensor."""
    return (t.numel() if t.is_contiguous() else _laid_out(t)) * t.element_size()


def bulk_bytes(obj: Any, strided: bool = False) -> int:
    """Bytes (aligned) that `pack` would place in a region."""
    if _eligible(obj, strided):
        return -(-_nbytes(obj) // _ALIGN) * _ALIGN
    if isinstance(obj, dict):
        return sum(bulk_bytes(v, strided) for v in obj.values())
    if isinstance(obj, (list, tuple)):
        return sum(bulk_bytes(v, strided) for v in obj)
    return 0


def _walk(o: Any, leaf) -> Any:
    """`o` with every node for which `leaf` returns something other than `_KEEP` replaced by that value;
    dicts, lists and tuples are rebuilt around the results."""
    got = leaf(o)
    if got is not _KEEP:
        return got
    if isinstance(o, dict):
        return {k: _walk(v, leaf) for k, v in o.items()}
    if isinstance(o, list):
        return [_walk(v, leaf) for v in o]
    if isinstance(o, tuple):
        return tuple(_walk(v, leaf) for v in o)
    return o


_KEEP = object()


def pack(obj: Any, bulk: Bulk | None, strided: bool = False) -> Any:
    """`obj` with eligible tensors copied into `bulk` and replaced by references; what does not fit stays inline.
    `strided`: tensors in another memory layout go into the region too (the judge's messages only)."""
    if bulk is None:
        return obj
    offset = [0]

    def leaf(o: Any) -> Any:
        if not _eligible(o, strided):
            return _KEEP
        n = _nbytes(o)
        start = offset[0]
        if start + n > bulk.size:
            return o
        if o.device.type == "cuda":
            bulk.for_gpu()
        ref = [start, n, str(o.dtype).replace("torch.", ""), list(o.shape)]
        shift = o.storage_offset()
        if o.is_contiguous():
            bulk.buf[start:start + n].view(o.dtype).view(o.shape).copy_(o.detach())
            ref = ref + [shift] if 0 < shift <= MAX_SHIFT else ref
        else:       # its storage from the start to its last element, so the offset and the gaps keep their values
            bulk.buf[start:start + n].view(o.dtype).copy_(o.detach().as_strided((n // o.element_size(),), (1,), 0))
            ref = ref + [shift, list(o.stride())]
        offset[0] = start + -(-n // _ALIGN) * _ALIGN
        return {_TAG: ref}

    return _walk(obj, leaf)


def unpack(obj: Any, bulk: Bulk | None, device: str = "cpu", strided: bool = False) -> Any:
    """References replaced by tensors copied out of `bulk` (onto `device`); malformed references raise ValueError.
    `strided`: tensors in another memory layout are accepted (a worker reading the judge's message; never the
    judge reading a reply)."""
    return _walk(obj, lambda o: _read(o[_TAG], bulk, device, strided)
                 if isinstance(o, dict) and _TAG in o and len(o) == 1 else _KEEP)


def _read(ref: Any, bulk: Bulk | None, device: str, strided: bool = False) -> torch.Tensor:
    if bulk is None:
        raise ValueError("a shared-memory reference arrived, but no region is mapped")
    try:
        start, n, dtype_name, shape, *more = ref
        start, n, shape = int(start), int(n), [int(s) for s in shape]
        shift = int(more[0]) if more else 0
        strides = [int(st) for st in more[1]] if len(more) == 2 else None
        if len(more) > 2 or shift < 0 or (strides is None and shift > MAX_SHIFT) or (strides is not None and (
                not strided or len(strides) != len(shape) or any(st < 0 for st in strides))):
            raise ValueError
    except (TypeError, ValueError):
        raise ValueError(f"malformed shared-memory reference {ref!r}") from None
    dtype = getattr(torch, str(dtype_name), None)
    if not isinstance(dtype, torch.dtype):
        raise ValueError(f"unknown dtype {dtype_name!r} in a shared-memory reference")
    if (start < 0 or start % _ALIGN or n < 0 or start + n > bulk.size or any(s < 0 for s in shape)
            or (strides is None and math.prod(shape) * dtype.itemsize != n)):
        raise ValueError(f"shared-memory reference out of bounds: {ref!r}")
    gpu = device.startswith("cuda")
    if strides is not None:
        extent = span(shape, strides)
        if not _strided_ok(math.prod(shape), extent, shift) or (shift + extent) * dtype.itemsize != n:
            raise ValueError(f"shared-memory reference out of bounds: {ref!r}")
    if gpu:
        bulk.for_gpu()
    if strides is not None:
        flat = bulk.buf[start:start + n].view(dtype)
        base = flat.to(device, copy=True) if gpu else hostmem.host_empty(flat.shape, dtype).copy_(flat)
        return base.as_strided(shape, strides, shift)
    view = bulk.buf[start:start + n].view(dtype).view(shape)
    if shift:             # a contiguous view into a larger buffer (the layout trial that shifts inputs) stays one
        base = torch.empty(shift + view.numel(), dtype=dtype, device=device)
        return base[shift:].view(shape).copy_(view)
    return view.to(device, copy=True) if gpu else hostmem.host_empty(shape, dtype).copy_(view)
