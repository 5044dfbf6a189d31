"""Messages between the judge and a worker: tensors, numbers, strings, lists and dicts only.

Replies from a worker are untrusted, so they are decoded with `torch.load(weights_only=True)`,
which cannot run code.
"""
from __future__ import annotations

import io
from typing import Any

import torch


def encode(obj: Any) -> bytes:
    buf = io.BytesIO()
    torch.save(obj, buf)
    return buf.getvalue()


def decode(data: bytes) -> Any:
    return torch.load(io.BytesIO(data), weights_only=True, map_location="cpu")
