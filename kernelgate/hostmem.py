"""Host memory the GPU copies to and from at full speed (the lean memory plan moves gigabytes per trial).

Measured on the H200 (benchmarks/diag_transfers.py, 6 GiB): a device-to-host copy into fresh pageable memory
runs at 1.2 GB/s (the kernel zeroes each new page), into reused pageable memory at 12.7 GB/s, host to device
from pageable memory at 6.8 GB/s; page-locked memory runs at 55 GB/s both ways, the shared-memory regions too
once registered with the driver. So the judge keeps its host copies in page-locked memory from torch's caching
host allocator (its blocks are reused, not locked again), and the regions are registered where a GPU copies
through them. Imports nothing of kernelgate: the worker uses it too.
"""
from __future__ import annotations

import weakref
from typing import Any

import torch


def _cuda() -> bool:
    return torch.cuda.is_available() and torch.cuda.is_initialized()


def to_host(t: torch.Tensor) -> torch.Tensor:
    """A copy of `t` on the host: page-locked when it comes from a GPU (same shape, dtype and strides where
    they are dense), else `t.to("cpu")` (a host tensor is returned as is)."""
    if t.device.type != "cuda":
        return t.to("cpu")
    try:
        out = torch.empty_like(t, device="cpu", pin_memory=True)
    except RuntimeError:                          # no page-locked memory to be had: pageable
        return t.to("cpu")
    out.copy_(t)
    return out


def host_empty(shape: Any, dtype: torch.dtype) -> torch.Tensor:
    """An uninitialised host tensor, page-locked where a GPU is in use in this process (a reused block: no
    page faults), else pageable."""
    if _cuda():
        try:
            return torch.empty(shape, dtype=dtype, pin_memory=True)
        except RuntimeError:
            pass
    return torch.empty(shape, dtype=dtype)


def register(buf: torch.Tensor) -> bool:
    """Page-lock a host tensor's memory for the GPU in use in this process (a shared-memory region: 6 GiB took
    0.33 s); undone when `buf` is collected. False where there is no GPU in use, or the driver refuses."""
    if not _cuda() or buf.device.type != "cpu" or buf.numel() == 0:
        return False
    cudart = torch.cuda.cudart()
    ptr, nbytes = buf.data_ptr(), buf.numel() * buf.element_size()
    if int(cudart.cudaHostRegister(ptr, nbytes, 0)) != 0:
        return False
    weakref.finalize(buf, _unregister, ptr)
    return True


def _unregister(ptr: int) -> None:
    try:
        torch.cuda.cudart().cudaHostUnregister(ptr)
    except Exception:  # noqa: BLE001 - at interpreter exit the runtime may be gone
        pass
