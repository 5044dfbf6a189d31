"""Python entry points: verify(), bench(), runs(). The CLI is a thin layer over these."""
from __future__ import annotations

from pathlib import Path
from typing import Callable

from . import contract as contract_mod
from . import workload
from .config import GateConfig, TimingConfig, gate_config
from .errors import KernelgateError
from .gate import bench as bench_mod
from .gate.judge import judge, prepare
from .records import BenchResult, Contract, Status, Verdict
from .store import Row, Store


def _contract(contract: Contract | str | None) -> Contract:
    if isinstance(contract, Contract):
        return contract
    return contract_mod.load(contract) if contract else Contract()


def _candidate(path: str) -> workload.Spec:
    spec = workload.Spec.parse(path, workload.CANDIDATE_CLASS)
    if not Path(spec.path).exists():
        raise KernelgateError(f"no such candidate file: {path}")
    return spec


def verify(ref: str, cand: str, *, target: str = "cpu", contract: Contract | str | None = None,
           inputs: str | None = None, config: GateConfig | None = None, store: Store | str | None = None,
           call_timeout: float | None = None) -> Verdict:
    """Check `cand` (ModelNew) against `ref` (Model); the verdict is recorded in the store."""
    cfg = config or gate_config(call_timeout=call_timeout)
    spec = workload.Spec.parse(ref, workload.REFERENCE_CLASS, inputs)
    cand_spec = _candidate(cand)
    task = prepare(spec, target, _contract(contract))
    verdict = judge(task, cand_spec, cfg)
    _store(store).add("verify", spec.path, verdict.workload_hash, cand_spec.path, verdict.candidate_hash,
                      target, verdict.device, verdict.status.value, verdict.reason.value, verdict.message,
                      verdict.to_json())
    return verdict


def bench(ref: str, cands: list[str], *, target: str = "cpu", contract: Contract | str | None = None,
          inputs: str | None = None, config: GateConfig | None = None, timing: TimingConfig | None = None,
          baselines: tuple[str, ...] = bench_mod.BASELINES, store: Store | str | None = None,
          progress: Callable[[str], None] | None = None) -> BenchResult:
    """Time eager, torch.compile and each verified candidate side by side."""
    cfg = config or gate_config()
    spec = workload.Spec.parse(ref, workload.REFERENCE_CLASS, inputs)
    cand_specs = [_candidate(c) for c in cands]
    bad = [b for b in baselines if b not in bench_mod.BASELINES]
    if bad:
        raise KernelgateError(f"unknown baseline {bad}; known: {', '.join(bench_mod.BASELINES)}")
    task = prepare(spec, target, _contract(contract))
    result = bench_mod.bench(task, cand_specs, cfg, timing or TimingConfig(), baselines, progress)
    summary = ", ".join(f"{r.label} {r.timing.median_ms:.4g} ms" for r in result.rows if r.timing)
    _store(store).add("bench", spec.path, task.hash, ",".join(c.path for c in cand_specs) or None, None, target,
                      result.device, result.status.value, None, summary, result.to_json())
    return result


def runs(limit: int = 20, store: Store | str | None = None) -> list[Row]:
    """Recent results from the store, newest first."""
    return _store(store).recent(limit)


def _store(store: Store | str | None) -> Store:
    return store if isinstance(store, Store) else Store(store)


__all__ = ["verify", "bench", "runs", "Status", "Verdict", "BenchResult"]
