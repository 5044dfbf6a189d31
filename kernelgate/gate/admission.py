"""Task admission: trivial mutants go through the same check first; if one passes, the task is degenerate."""
from __future__ import annotations

from typing import Any, Iterable

import torch

from ..oracle import Oracle, Runs, bit_equal
from ..records import Check
from . import checks, correctness


def lower_precision(oracle: Oracle) -> tuple[str, torch.dtype] | None:
    """The format one step below what the task and its contract permit, for the precision mutant (none for a
    reference whose kernels run in their own dtype only: oracle.own)."""
    if getattr(oracle, "own", False):
        return None
    dtypes = {p.dtype for p in oracle.model.parameters()} | {b.dtype for b in oracle.model.buffers()}
    if any(d.is_complex for d in dtypes):        # Module.to(bf16) would cast them to real (no such mutant)
        return None
    floating = {d for d in dtypes if d.is_floating_point}
    if floating and floating <= {torch.float32} or not floating:
        if "bf16" not in oracle.contract.precision:
            return "bf16", torch.bfloat16
    return None


def output_means(runs: Runs) -> list[float | complex]:
    """The mean of each oracle output of one trial (NaN/Inf counted as 0)."""
    return [correctness.mean_nonfinite_as_zero(g) for g in runs.oracle]


def mutants(oracle: Oracle, xs: list[Any], runs: Runs, means: list[float] | None):
    """The trivial mutants on one trial's inputs, one at a time as (name, outputs) (only one mutant's outputs
    are alive at once: a task's outputs can take much of the device). The constant mutant fills each output
    with `means` (taken from another trial's outputs) and is skipped without them. Where the oracle computes
    away from where it keeps its data (the lean memory plan), the mutants are made on the compute device,
    where the comparisons run (a full-size host tensor made anew costs its page faults: 4.6 s for 6 GiB)."""
    task = runs.task
    where = oracle.device if getattr(oracle, "away", False) else None
    yield "zeros", [torch.zeros_like(b, device=where) for b in task]
    if means is not None:
        yield "constant at the mean", [torch.full_like(b, m if b.is_floating_point() or b.is_complex() else
                                                       round(m.real), device=where) for b, m in zip(task, means)]
    tensors = [x for x in xs if isinstance(x, torch.Tensor)]
    if len(task) == 1 and tensors and tensors[0].shape == task[0].shape:
        x = tensors[0].abs() if tensors[0].is_complex() and not task[0].is_complex() else tensors[0]
        yield "input passthrough", [x.to(where or task[0].device).to(task[0].dtype)]
    low = lower_precision(oracle)
    if low is not None:
        name, dt = low
        try:                # a reference with no kernel in that dtype (CPU linear algebra in bf16) has no such mutant
            outs = oracle.run_as(dt, xs)
        except (NotImplementedError, RuntimeError, TypeError):
            return
        yield f"reference in {name}", [r.to(b.dtype) for r, b in zip(outs, task)]


def admit(oracle: Oracle, trials: Iterable[tuple[list[Any], Runs]]) -> Check:
    """Run every mutant through the candidates' comparison (gate/checks.py: the tolerance, or grid steps for
    quantized outputs) on every admission trial; a mutant passing all of them fails admission.

    Degenerate means a trivial output passes across trials: the constant mutant of each trial is the mean of
    the previous trial's outputs (trials draw from different distributions), never of the outputs it is
    compared with, which a 0-dim output (a loss) would match exactly without the task being trivial; so it
    is tried from the second trial on. Trials are taken one at a time and each is dropped before the next
    (inputs, oracle outputs and one mutant's outputs are what is alive at once)."""
    comparator = checks.Comparator.of(oracle)      # the candidates' comparison (gate/checks.py)
    passes: dict[str, bool] = {}         # mutant -> passed every trial it was tried on
    same: dict[str, bool] = {}           # mutant -> bit-identical to the reference on every trial
    seen: list[str] = []
    means: list[float] | None = None
    first_scale = None
    for xs, runs in trials:
        expected = comparator.expected(runs)           # each output's tolerance, derived once per trial
        for name, outs in mutants(oracle, xs, runs, means):
            if name not in seen:
                seen.append(name)
            same[name] = same.get(name, True) and all(bit_equal(a, b) for a, b in zip(outs, runs.task))
            ok = all(e.check(c, name).ok for c, e in zip(outs, expected))
            passes[name] = passes.get(name, True) and ok
            del outs
        if first_scale is None:
            first_scale = correctness.finite_abs_stats(runs.oracle[0], comparator.compute)[0]
        means = output_means(runs)
        del xs, runs, expected          # the tolerances hold the trial's outputs too
        give_back = getattr(oracle, "give_back", None)
        if give_back is not None:       # the lean plan: the trial's blocks go back before the next is made
            give_back()
    # a "mutant" identical to the reference on every trial changes nothing (e.g. a bf16 run of a model that
    # casts to fp32 itself): it is not a mutant of this task
    order = ("zeros", "constant at the mean", "input passthrough")          # the simplest explanation first
    seen.sort(key=lambda n: order.index(n) if n in order else len(order))
    names = [n for n in seen if not (n.startswith("reference in") and same.get(n))]
    passing = next((n for n in names if passes.get(n)), None)
    if passing:
        return Check("task admission", False,
                     f"degenerate task: the '{passing}' mutant passes the check (max |output| {first_scale:.3g}); "
                     "fix the task's inputs or outputs before trusting any candidate")
    return Check("task admission", True, f"{len(names)} trivial mutants rejected ({', '.join(names)})")
