"""Contracts from TOML files or command-line flags.

    precision = ["tf32"]          # lower precisions the candidate may use: tf32, bf16, fp16
    inplace = false               # outputs may alias inputs / inputs may be overwritten
    strides = true                # output strides must match the reference's
    layouts = true                # one trial passes inputs in another memory layout (channels_last,
                                  # column-major): false when callers only ever pass the workload's own
    one_step = 0.001              # quantized (int8/fp8 grid) outputs: share of elements allowed one step off
                                  # (default: max(0.1%, twice the reference's own rate); two steps always fail)
    [domain]
    "0" = [-1.0, 1.0]             # input 0 lies in [-1, 1]
    [[vary]]
    inputs = [0]                  # these inputs' dimension `dim` takes each size
    dim = 0
    sizes = [1, 3, 17]
"""
from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

from .errors import KernelgateError
from .records import Contract, Domain, Vary

PRECISIONS = ("tf32", "bf16", "fp16")
KEYS = {"precision", "inplace", "strides", "layouts", "domain", "vary", "one_step"}


def load(path: str | None = None, **flags: Any) -> Contract:
    """A contract from a TOML file and/or flags (flags win)."""
    data: dict[str, Any] = {}
    if path:
        p = Path(path)
        if not p.exists():
            raise KernelgateError(f"no such contract file: {path}")
        try:
            data = tomllib.loads(p.read_text())
        except tomllib.TOMLDecodeError as e:
            raise KernelgateError(f"contract {p.name} is not valid TOML: {e}") from e
    data.update({k: v for k, v in flags.items() if v not in (None, (), [])})
    return parse(data)


def parse(data: dict[str, Any]) -> Contract:
    unknown = set(data) - KEYS
    if unknown:
        raise KernelgateError(f"unknown contract keys: {', '.join(sorted(unknown))} (known: {', '.join(sorted(KEYS))})")
    precision = data.get("precision", [])
    if isinstance(precision, str):
        precision = [p.strip() for p in precision.split(",") if p.strip()]
    bad = [p for p in precision if p not in PRECISIONS]
    if bad:
        raise KernelgateError(f"unknown precision {bad}; allowed: {', '.join(PRECISIONS)}")
    domain = []
    for key, rng in (data.get("domain") or {}).items():
        try:
            index, (low, high) = int(key), rng
        except (ValueError, TypeError) as e:
            raise KernelgateError(f"domain entries are \"INDEX\" = [low, high]; got {key} = {rng}") from e
        if not low < high:
            raise KernelgateError(f"domain of input {index}: low {low} must be below high {high}")
        domain.append((index, Domain(float(low), float(high))))
    vary = []
    for v in data.get("vary") or []:
        try:
            vary.append(Vary(tuple(int(i) for i in v["inputs"]), int(v["dim"]), tuple(int(s) for s in v["sizes"])))
        except (KeyError, TypeError, ValueError) as e:
            raise KernelgateError(f"each [[vary]] needs inputs = [..], dim = N, sizes = [..]; got {v}") from e
    one_step = data.get("one_step")
    if one_step is not None:
        try:
            one_step = float(one_step)
        except (TypeError, ValueError):
            raise KernelgateError(f"one_step is a fraction in [0, 1), got {one_step!r}") from None
        if not 0.0 <= one_step < 1.0:
            raise KernelgateError(f"one_step is a fraction in [0, 1), got {one_step}")
    return Contract(precision=tuple(precision), domain=tuple(sorted(domain)), vary=tuple(vary),
                    inplace=bool(data.get("inplace", False)), strides=bool(data.get("strides", True)),
                    one_step=one_step, layouts=bool(data.get("layouts", True)))


def parse_domain_flag(text: str) -> dict[str, list[float]]:
    """`0=-1:1,2=0:10` -> {"0": [-1, 1], "2": [0, 10]}."""
    out = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        try:
            key, rng = part.split("=")
            low, high = rng.split(":")
            out[key.strip()] = [float(low), float(high)]
        except ValueError as e:
            raise KernelgateError(f"--domain takes INDEX=LOW:HIGH[,...], got '{part}'") from e
    return out
