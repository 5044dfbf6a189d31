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
    return {"output_limit": cfg.output_limit, "memory_limit": cfg.memory_limit if task.device == "cpu" else None}


def prime_request(task: Task, path: str = "") -> dict:
    """The harness's prime (sandbox/worker.py `op_prime`): before any candidate code, what torch starts on first
    use, the digest kernels, and JAX's runtime for a file that imports JAX."""
    return {"op": "prime", "device": task.device, "jax": bool(path) and uses_jax(path),
            "native": native.ensure()}      # the harness's C mixes (kernelgate/native.py)


def spare_options(task: Task, cfg: GateConfig) -> dict:
    """sandbox.Spares's options for a search: the candidates' limits, and the prime sent ahead to each spare,
    except in a lean memory plan with no room for one more CUDA context (gate/memory.py `spare_primes`), where a
    spare holds none of its own until taken."""
    return {**worker_limits(task, cfg), "prime": prime_request(task) if memory.spare_primes(task) else None,
            "prime_timeout": cfg.build_timeout}



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

