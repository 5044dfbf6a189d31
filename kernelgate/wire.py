"""Messages between the judge and a worker: tensors, numbers, strings, lists and dicts only.

Replies from a worker are untrusted, so they are decoded with `torch.load(weights_only=True)`,
which cannot run code.

Large contiguous tensors do not travel inside the message: they are copied into a shared-memory
region (`Bulk`, a file both processes map) and the message carries a reference (offset, bytes,
dtype, shape). Each direction has its own region, created and named by the judge; a reference read
from an untrusted reply is bounds-checked and copied out at once, so later writes to the region by
the worker cannot change what the judge has read.
"""
from __future__ import annotations

import io
import math
import os
import shutil
import tempfile
from typing import Any

import torch

#: tensors at least this large travel through the shared region (smaller ones inline)
BULK_MIN = 1 << 20
_ALIGN = 64
_TAG = "__kg_bulk__"


def encode(obj: Any) -> bytes:
    buf = io.BytesIO()
    torch.save(obj, buf)
    return buf.getvalue()


def decode(data: bytes) -> Any:
    return torch.load(io.BytesIO(data), weights_only=True, map_location="cpu")


def _shm_dir(size: int) -> str:
    """RAM-backed /dev/shm when it has room, else the temp directory (page cache)."""
    for d in ("/dev/shm", tempfile.gettempdir()):
        try:
            if os.path.isdir(d) and os.access(d, os.W_OK) and shutil.disk_usage(d).free > size + (256 << 20):
                return d
        except OSError:
            continue
    return tempfile.gettempdir()


class Bulk:
    """A shared-memory file of fixed size, mapped as a flat uint8 tensor."""

    def __init__(self, path: str, size: int, buf: torch.Tensor):
        self.path, self.size, self.buf = path, size, buf

    @classmethod
    def create(cls, size: int) -> "Bulk":
        """A new region (judge side). Space is reserved up front, so a full /dev/shm fails here, not later."""
        size = max(_ALIGN, -(-size // _ALIGN) * _ALIGN)
        fd, path = tempfile.mkstemp(prefix="kernelgate-bulk-", dir=_shm_dir(size))
        try:
            try:
                os.posix_fallocate(fd, 0, size)
            except (AttributeError, OSError):
                os.ftruncate(fd, size)
        finally:
            os.close(fd)
        return cls(path, size, torch.from_file(path, shared=True, size=size, dtype=torch.uint8))

    @classmethod
    def attach(cls, path: str, size: int) -> "Bulk":
        """Map a region the judge created (worker side)."""
        return cls(path, size, torch.from_file(path, shared=True, size=size, dtype=torch.uint8))

    def unlink(self) -> None:
        """Remove the name; mappings stay valid until dropped."""
        try:
            os.unlink(self.path)
        except OSError:
            pass


def _eligible(t: Any) -> bool:
    return (type(t) is torch.Tensor and t.layout == torch.strided and not t.is_meta and t.is_contiguous()
            and t.numel() * t.element_size() >= BULK_MIN)


def bulk_bytes(obj: Any) -> int:
    """Bytes (aligned) that `pack` would place in a region."""
    if _eligible(obj):
        return -(-obj.numel() * obj.element_size() // _ALIGN) * _ALIGN
    if isinstance(obj, dict):
        return sum(bulk_bytes(v) for v in obj.values())
    if isinstance(obj, (list, tuple)):
        return sum(bulk_bytes(v) for v in obj)
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


def pack(obj: Any, bulk: Bulk | None) -> Any:
    """`obj` with eligible tensors copied into `bulk` and replaced by references; what does not fit stays inline."""
    if bulk is None:
        return obj
    offset = [0]

    def leaf(o: Any) -> Any:
        if not _eligible(o):
            return _KEEP
        n = o.numel() * o.element_size()
        start = offset[0]
        if start + n > bulk.size:
            return o
        bulk.buf[start:start + n].view(o.dtype).view(o.shape).copy_(o.detach())
        offset[0] = start + -(-n // _ALIGN) * _ALIGN
        return {_TAG: [start, n, str(o.dtype).replace("torch.", ""), list(o.shape)]}

    return _walk(obj, leaf)


def unpack(obj: Any, bulk: Bulk | None, device: str = "cpu") -> Any:
    """References replaced by tensors copied out of `bulk` (onto `device`); malformed references raise ValueError."""
    return _walk(obj, lambda o: _read(o[_TAG], bulk, device) if isinstance(o, dict) and _TAG in o and len(o) == 1
                 else _KEEP)


def _read(ref: Any, bulk: Bulk | None, device: str) -> torch.Tensor:
    if bulk is None:
        raise ValueError("a shared-memory reference arrived, but no region is mapped")
    try:
        start, n, dtype_name, shape = ref
        start, n, shape = int(start), int(n), [int(s) for s in shape]
    except (TypeError, ValueError):
        raise ValueError(f"malformed shared-memory reference {ref!r}") from None
    dtype = getattr(torch, str(dtype_name), None)
    if not isinstance(dtype, torch.dtype):
        raise ValueError(f"unknown dtype {dtype_name!r} in a shared-memory reference")
    if (start < 0 or start % _ALIGN or n < 0 or start + n > bulk.size or any(s < 0 for s in shape)
            or math.prod(shape) * dtype.itemsize != n):
        raise ValueError(f"shared-memory reference out of bounds: {ref!r}")
    view = bulk.buf[start:start + n].view(dtype).view(shape)
    return view.to(device, copy=True)
