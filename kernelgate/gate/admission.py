"""Task admission: trivial mutants go through the same check first; if one passes, the task is degenerate."""
from __future__ import annotations

from typing import Any

import torch

from ..oracle import Oracle, Runs, bit_equal
from ..records import Check
from . import correctness


def lower_precision(oracle: Oracle) -> tuple[str, torch.dtype] | None:
    """The format one step below what the task and its contract permit, for the precision mutant."""
    dtypes = {p.dtype for p in oracle.model.parameters()} | {b.dtype for b in oracle.model.buffers()}
    floating = {d for d in dtypes if d.is_floating_point}
    if floating and floating <= {torch.float32} or not floating:
        if "bf16" not in oracle.contract.precision:
            return "bf16", torch.bfloat16
    return None


def output_means(runs: Runs) -> list[float]:
    """The mean of each oracle output of one trial (NaN/Inf counted as 0)."""
    return [float(g.double().nan_to_num().mean()) if g.numel() else 0.0 for g in runs.oracle]


def mutants(oracle: Oracle, xs: list[Any], runs: Runs, means: list[float] | None = None) -> dict[str, list[torch.Tensor]]:
    """Outputs of the trivial mutants on one trial's inputs. The constant mutant fills each output with
    `means` (taken from another trial's outputs; this trial's own when not given)."""
    task = runs.task
    means = output_means(runs) if means is None else means
    out: dict[str, list[torch.Tensor]] = {
        "zeros": [torch.zeros_like(b) for b in task],
        "constant at the mean": [torch.full_like(b, m if b.is_floating_point() else round(m)) for b, m in zip(task, means)],
    }
    tensors = [x for x in xs if isinstance(x, torch.Tensor)]
    if len(task) == 1 and tensors and tensors[0].shape == task[0].shape:
        out["input passthrough"] = [tensors[0].to(task[0].dtype).to(task[0].device)]
    low = lower_precision(oracle)
    if low is not None:
        name, dt = low
        out[f"reference in {name}"] = [r.to(b.dtype) for r, b in zip(oracle.run_as(dt, xs), task)]
    return out


def admit(oracle: Oracle, trials: list[tuple[list[Any], Runs]]) -> Check:
    """Run every mutant through the check on every admission trial; a mutant passing all of them fails admission.

    Degenerate means a trivial output passes across trials: the constant mutant of each trial is the mean of
    the previous trial's outputs (trials draw from different distributions), never of the outputs it is
    compared with, which a 0-dim output (a loss) would match exactly without the task being trivial."""
    passing = None
    means = [output_means(runs) for _, runs in trials]
    per_trial = [mutants(oracle, xs, runs, means[j - 1] if len(trials) > 1 else None)
                 for j, (xs, runs) in enumerate(trials)]
    # a "mutant" identical to the reference on every trial changes nothing (e.g. a bf16 run of a model that
    # casts to fp32 itself): it is not a mutant of this task
    names = [n for n in per_trial[0]
             if not (n.startswith("reference in") and all(
                 n in m and all(bit_equal(a, b) for a, b in zip(m[n], runs.task))
                 for m, (_, runs) in zip(per_trial, trials)))]
    tols = [[correctness.derive(g, {n: r[k] for n, r in runs.permitted.items()}, b.dtype)
             for k, (g, b) in enumerate(zip(runs.oracle, runs.task))] for _, runs in trials]
    for name in names:
        if all(name in muts and all(correctness.compare(c, g, b, tol, name).ok
                                    for c, g, b, tol in zip(muts[name], runs.oracle, runs.task, trial_tols))
               for (_, runs), muts, trial_tols in zip(trials, per_trial, tols)):
            passing = name
            break
    if passing:
        g = trials[0][1].oracle[0].double()
        scale = float(g[torch.isfinite(g)].abs().max()) if g.numel() else 0.0
        return Check("task admission", False,
                     f"degenerate task: the '{passing}' mutant passes the check (max |output| {scale:.3g}); "
                     "fix the task's inputs or outputs before trusting any candidate")
    return Check("task admission", True, f"{len(names)} trivial mutants rejected ({', '.join(names)})")
