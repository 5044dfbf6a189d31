"""Port mode: a workload whose reference is itself a kernel implementation, rewritten in another kernel language,
through the same gate and timer as any candidate.

    kernelgate port impl.py --to pallas --target cuda --out out/

The pipeline, in order:
1. constructs.scan: the source's kernel languages and the constructs the target language cannot say directly
   (with lines), and how a port handles each;
2. match.matching: which operations of the template library's shape the implementation computes, found by running
   it on its own inputs (two draws);
3. render.PortProposer: those forms as candidates in the target language (block sizes as variants), beside the
   LLM proposer when one is configured (its prompts then carry the port's instructions and the constructs);
4. api.optimize with the implementation as the reference (its eager and torch.compile runs are the baselines)
   and `languages=(to,)`: every port candidate verified against an fp64 oracle and timed;
5. the port's outputs beside optimize's: port.py (the fastest verified port, faster than the source or not),
   port.json, and a "Port" section in report.md setting source and port side by side.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from ..errors import KernelgateError
from ..records import Reason
from . import constructs, match, render

#: target languages a port can write with built-in templates (others need an LLM proposer)
BUILTIN = tuple(render.TEMPLATES)
DRAWS = 2                   # input draws a form must match on


@dataclass
class PortResult:
    """What `port` produced."""

    workload: str
    to: str
    target: str
    scan: constructs.Scan
    forms: list[match.Form]
    source_ms: float | None              # the source implementation, eager (the baseline "eager")
    compile_ms: float | None             # the source under torch.compile
    best: dict[str, Any] | None          # the fastest verified port candidate: id, strategy, ms, ran_kernels
    candidates: list[dict[str, Any]] = field(default_factory=list)   # every port candidate: verdict, time
    notes: list[str] = field(default_factory=list)
    optimize: dict[str, Any] = field(default_factory=dict)            # optimize's result.json (less evaluations)

    @property
    def ratio(self) -> float | None:
        """source time / port time (> 1: the port is faster than the source)."""
        if self.best is None or not self.source_ms or not self.best.get("ms"):
            return None
        return self.source_ms / self.best["ms"]

    def to_json(self) -> dict[str, Any]:
        return {"workload": self.workload, "to": self.to, "target": self.target, "source": self.scan.to_json(),
                "handling": [{"construct": f.key, "direct": d, "how": how} for f in self.scan.found
                             for d, how in [constructs.handling(f, self.to)]],
                "forms": [f.to_json() for f in self.forms], "source_ms": self.source_ms,
                "compile_ms": self.compile_ms, "best": self.best, "port_vs_source": self.ratio,
                "candidates": self.candidates, "notes": self.notes}

    @property
    def exit_code(self) -> int:
        return 0 if self.best is not None else 1


def port_hint(scan: constructs.Scan, to: str) -> str:
    """The instruction every LLM prompt of a port carries: write the same computation in `to`, and how to
    handle the constructs the source uses."""
    lines = [f"This is a port: the workload's forward is itself a kernel implementation "
             f"({', '.join(scan.languages) or 'plain PyTorch'}). Write the same computation as {to} kernels "
             f"(only {to}), as fast as you can on this machine."]
    for f in scan.found:
        direct, how = constructs.handling(f, to)
        lines.append(f"The source uses {f.what} (lines {', '.join(map(str, f.lines[:6]))}): "
                     f"{'has a direct counterpart' if direct else 'no direct counterpart'} in {to}: {how}.")
    return " ".join(lines)


def _forms(spec, target: str) -> list[match.Form]:
    """The forms the implementation matches on its own inputs (run here, on the target device)."""
    import torch

    from .. import workload
    device = "cuda" if target == "cuda" else "cpu"
    ref = workload.load_reference(spec)
    try:
        model = ref.build().to(device)
        draws = [[x.to(device) if torch.is_tensor(x) else x for x in ref.inputs(seed, device)]
                 for seed in range(DRAWS)]
        found = match.matching(model, draws)
    except KernelgateError:
        raise
    except Exception as e:  # noqa: BLE001 - the implementation's own failure, reported as the task's
        raise KernelgateError(f"running {spec.path} on {device} failed: {type(e).__name__}: {e}",
                              Reason.TASK_LOAD) from e
    finally:
        if device == "cuda":
            torch.cuda.empty_cache()
    return found


def ran_kernels(source: str, spec, target: str, language: str) -> int | None:
    """How many distinct compiled kernel calls the candidate made on the reference's inputs (the launchers'
    cache of jitted calls), run here, in this process: only for the port proposer's own candidates (the
    reference's source and kernelgate's runtime), never another proposer's; None when the language's runtime
    keeps no such record."""
    import torch

    from .. import workload
    if language != "pallas":
        return None
    device = "cuda" if target == "cuda" else "cpu"
    ref = workload.load_reference(spec)
    ns: dict[str, Any] = {"__name__": "kg_port_check", "__file__": spec.path}
    exec(compile(source, spec.path, "exec"), ns)                # noqa: S102 - the reference plus kernelgate's code
    model = ns["ModelNew"](*ref.init_inputs).to(device).eval()
    model.load_state_dict(ref.build().to(device).state_dict())
    with torch.no_grad():
        model(*[x.to(device) if torch.is_tensor(x) else x for x in ref.inputs(0, device)])
    return len(ns.get("_KG_PL_CALLS", {}))


def port(impl: str, *, to: str = "pallas", target: str = "cuda", out: str = "out", budget: str | float = 300,
         max_candidates: int = 64, seed: int = 0, force: bool = False, store=None, config=None,
         llm: dict | None = None, hints=(), progress: Callable[[str], None] | None = None) -> PortResult:
    """Port the kernel implementation `impl` (KernelBench format) to the kernel language `to`; see the module's
    docstring. Exit code (PortResult.exit_code): 0 when a port was verified, 1 when none was."""
    from .. import api, workload
    from ..proposers import parse_languages
    say = progress or (lambda m: None)
    try:
        langs = parse_languages(to)
    except ValueError as e:
        raise KernelgateError(str(e), Reason.USAGE) from None
    if len(langs) != 1:
        raise KernelgateError(f"--to takes one kernel language, got {to!r}", Reason.USAGE)
    to = langs[0]
    if to not in BUILTIN and llm is None:
        raise KernelgateError(f"no built-in {to} templates: a port to {to} needs an LLM proposer "
                              "(--llm SPEC, --llm-endpoint URL --llm-model NAME, or --llm-cmd COMMAND)", Reason.USAGE)
    spec = workload.Spec.parse(impl, workload.REFERENCE_CLASS)
    api._check_out(Path(out), False, force)               # before any work: an earlier run is never replaced silently
    source = Path(spec.path).read_text()
    scan = constructs.scan(source)
    say(f"source: {', '.join(scan.languages) or 'no kernel language found (plain PyTorch)'}; "
        f"{len(scan.found)} construct(s) to translate")
    forms = _forms(spec, target) if to in BUILTIN else []
    say(f"matched forms: {', '.join(f.describe() for f in forms[:4]) or 'none'}")
    notes = []
    population: list[Any] = []
    proposer = render.PortProposer(forms, to)
    if proposer.forms:
        population.append(proposer)
    elif to in BUILTIN:
        notes.append(f"the implementation matched no form the {to} templates write; "
                     + ("the LLM proposer ports it" if llm is not None else "no candidate (give an LLM to port it)"))
    if llm is not None:
        population.append("llm")
    hints = [*hints, port_hint(scan, to)]
    if not population:
        res = None
    else:
        res = api.optimize(impl, target=target, budget=budget, max_candidates=max_candidates, out=out, seed=seed,
                           force=force, store=store, config=config, progress=progress, proposers=population,
                           llm=llm, hints=hints, languages=(to,))
    return _finish(res, spec, scan, forms, to, target, Path(out), notes)


def _finish(res, spec, scan, forms, to, target, out_dir: Path, notes) -> PortResult:
    result = PortResult(spec.path, to, target, scan, forms, None, None, None, notes=list(notes))
    if res is not None:
        result.source_ms = res.eager.median_ms if res.eager else None
        result.compile_ms = res.compiled.median_ms if res.compiled else None
        doc = res.to_json()
        result.optimize = {k: v for k, v in doc.items() if k != "evaluations"}
        ports = [e for e in res.evaluations if e.candidate.language == to]
        for e in ports:
            result.candidates.append({
                "id": e.candidate.id, "strategy": e.candidate.strategy, "params": dict(e.candidate.params),
                "proposer": e.candidate.proposer, "accepted": e.accepted, "reason": e.verdict.reason.value,
                "message": e.verdict.message[:300], "ms": e.timing.median_ms if e.timing else None})
        timed = [e for e in ports if e.accepted and e.timing is not None]
        if timed:
            best = min(timed, key=lambda e: e.timing.median_ms)
            out_dir.mkdir(parents=True, exist_ok=True)
            (out_dir / "port.py").write_text(best.candidate.source)
            ran = None
            if best.candidate.proposer == render.PortProposer.name:   # the reference and kernelgate's code only: never
                try:                                                    # an agent's candidate outside the sandbox
                    ran = ran_kernels(best.candidate.source, spec, target, to)
                except Exception as e:  # noqa: BLE001 - recorded, the gate's verdict stands
                    result.notes.append(f"the check that the port's kernels ran failed: {type(e).__name__}: {e}")
            result.best = {"id": best.candidate.id, "strategy": best.candidate.strategy,
                           "params": dict(best.candidate.params), "ms": best.timing.median_ms,
                           "spread": best.timing.spread, "ran_kernels": ran}
            if ran == 0:
                result.notes.append(f"on the reference's inputs the port's launchers fell back to torch: no {to} "
                                    "kernel ran")
        else:
            result.notes.append(f"no {to} candidate was verified")
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "port.json").write_text(json.dumps(result.to_json(), indent=1))
    report = out_dir / "report.md"
    if report.exists():
        report.write_text(report.read_text().rstrip() + "\n\n" + markdown(result) + "\n")
    return result


def line(r: PortResult) -> str:
    if r.best is None:
        return f"no verified {r.to} port" + (f" ({r.notes[-1]})" if r.notes else "")
    ratio = f" = {r.ratio:.2f}x the source" if r.ratio else ""
    return (f"port to {r.to}: {r.best['strategy']} {r.best['ms']:.4g} ms vs source (eager) "
            f"{r.source_ms if r.source_ms is None else format(r.source_ms, '.4g')} ms{ratio}")


def markdown(r: PortResult) -> str:
    """The report's port section: source and port side by side, the forms matched, the constructs and their
    handling."""
    def ms(v):
        return "-" if v is None else f"{v:.4g}"
    rows = ["## Port", "", f"Source: {', '.join(r.scan.languages) or 'plain PyTorch'}; port to **{r.to}** on "
            f"{r.target}.", "", "| implementation | median ms | vs source |", "|---|---|---|",
            f"| source (eager) | {ms(r.source_ms)} | 1.00x |"]
    if r.compile_ms:
        rows.append(f"| source under torch.compile | {ms(r.compile_ms)} | "
                    f"{(r.source_ms / r.compile_ms) if r.source_ms else 0:.2f}x |")
    for c in sorted(r.candidates, key=lambda c: (not c["accepted"], c["ms"] or 1e30)):
        verdict = f"{ms(c['ms'])}" if c["accepted"] else f"rejected ({c['reason']})"
        vs = f"{r.source_ms / c['ms']:.2f}x" if c["accepted"] and c["ms"] and r.source_ms else "-"
        block = f" block {tuple(c['params']['block'])}" if c["params"].get("block") else ""
        rows.append(f"| `{c['params'].get('form', c['strategy'])}`{block} | {verdict} | {vs} |")
    rows += ["", "Forms the implementation matched on its own inputs: "
             + (", ".join(f"`{f.describe()}`" for f in r.forms[:6]) or "none"), ""]
    if r.scan.found:
        rows += ["| construct in the source | lines | direct in " + r.to + " | how the port handles it |",
                 "|---|---|---|---|"]
        for f in r.scan.found:
            direct, how = constructs.handling(f, r.to)
            rows.append(f"| {f.what} ({f.language}) | {', '.join(map(str, f.lines[:8]))} | "
                        f"{'yes' if direct else 'no'} | {how} |")
    else:
        rows.append("No construct without a direct counterpart was found in the source.")
    if r.best is not None and r.best.get("ran_kernels") is not None:
        rows += ["", f"The port ran {r.best['ran_kernels']} compiled {r.to} kernel call(s) on the reference's "
                 "inputs (no fallback to torch)." if r.best["ran_kernels"] else
                 f"On the reference's inputs the port's launchers fell back to torch: no {r.to} kernel ran."]
    for n in r.notes:
        rows.append(f"- {n}")
    return "\n".join(rows)
