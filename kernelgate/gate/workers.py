"""What a candidate's worker is given before any candidate code runs: its limits, the harness's prime (sent ahead
to spares in a search), and the trusted builders of literal C++/CUDA extensions (sandbox/prebuild.py)."""
from __future__ import annotations

import re
from pathlib import Path

from .. import native
from ..config import GateConfig
from ..sandbox import prebuild
from . import memory
from .task import Task


def worker_limits(task: Task, cfg: GateConfig) -> dict:
    """The limits every candidate's worker gets (for sandbox.Spares)."""
    return device_limits(task.device, cfg)


def device_limits(device: str, cfg: GateConfig) -> dict:
    """`worker_limits` for a device, before its task is prepared (verify's early worker)."""
    return {"output_limit": cfg.output_limit, "memory_limit": cfg.memory_limit if device == "cpu" else None}


def prime_request(task: Task, path: str = "", profiler: bool = True) -> dict:
    """The harness's prime (sandbox/worker.py `op_prime`): before any candidate code, what torch starts on first
    use (the profiler's threads where the worker will be profiled), the digest kernels, and JAX's runtime for a
    file that imports JAX."""
    return {"op": "prime", "device": task.device, "jax": bool(path) and uses_jax(path), "profiler": profiler,
            "native": native.ensure()}      # the harness's C mixes (kernelgate/native.py)


#: spares kept started on a GPU, each priming ahead: a prime there (CUDA context, the profiler's first use, the
#: digest kernels) took 4.8 s after 2.7 s of imports on an H100, longer than one small candidate's build, trials and
#: re-check (4-6 s); with one spare each candidate still waited 3.6-7.7 s for it (h100_spares_reduce_conv_session38.json)
GPU_SPARES = 2


def spare_options(task: Task, cfg: GateConfig) -> dict:
    """sandbox.Spares's options for a search: the candidates' limits, the prime sent ahead to each spare, and how
    many spares are kept started (GPU_SPARES on a GPU, one on the CPU, where a prime is a small part of a
    candidate's checks); in a lean memory plan with no room for the spares' CUDA contexts (gate/memory.py
    `spare_primes`) one spare, holding none until taken."""
    depth = GPU_SPARES if str(task.device).startswith("cuda") else 1
    primes = memory.spare_primes(task, depth)
    return {**worker_limits(task, cfg), "prime": prime_request(task) if primes else None,
            "prime_timeout": cfg.build_timeout, "depth": depth if primes else 1}


def uses_jax(path: str) -> bool:
    """Whether a file's text imports JAX (the worker then starts JAX before the import: sandbox/jobs.prime_jax)."""
    try:
        return re.search(r"\b(import|from)\s+jax\b", Path(path).read_text(errors="replace")) is not None
    except OSError:
        return False


_PREBUILDERS: dict[str, prebuild.Prebuilder] = {}


def prebuilder(cfg: GateConfig) -> prebuild.Prebuilder | None:
    """The process's builders and build cache for C++/CUDA extensions (beside the trusted compile cache), or None
    where there is none (no trusted cache set, or sandbox/prebuild.py's `enabled` says no)."""
    if cfg.trusted_cache is None or not prebuild.enabled():
        return None
    root = str(Path(cfg.trusted_cache) / "extensions")
    pb = _PREBUILDERS.get(root)
    if pb is None:
        pb = _PREBUILDERS[root] = prebuild.Prebuilder(Path(root))
    return pb

