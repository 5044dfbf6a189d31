"""Python entry points: verify(), bench(), runs(). The CLI is a thin layer over these."""
from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import shutil
import time
import uuid
from pathlib import Path
from typing import Callable

from . import contract as contract_mod
from . import workload
from .config import GateConfig, TimingConfig, gate_config
from .errors import KernelgateError
from .gate import baselines as baselines_mod
from .gate import bench as bench_mod
from .gate.judge import early_worker, judge, prepare
from .proposers import default_languages, parse_languages
from .records import BenchResult, Contract, Reason, Verdict
from .store import Row, Store
from .versions import code_hash

# kernelgate's code as loaded (a verdict the store keeps holds for this gate only: gate/baselines.verified_emit), read
# now: files changed on disk during a run must not lend their hash to the code that is running
code_hash()


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
    _check_config(cfg)
    st = _store(store)                   # opened first: a bad store is a usage error, not a lost verdict
    cfg = _cached(cfg, st)               # extensions' builds are kept beside the store (sandbox/prebuild.py)
    spec = workload.Spec.parse(ref, workload.REFERENCE_CLASS, inputs)
    cand_spec = _candidate(cand)
    worker = early_worker(target, cfg)   # its start overlaps the preparation
    try:
        task = prepare(spec, target, _contract(contract), cfg.memory)
    except BaseException:
        worker.close()
        raise
    verdict = judge(task, cand_spec, cfg, worker=worker)
    st.add("verify", spec.path, verdict.workload_hash, cand_spec.path, verdict.candidate_hash,
                      target, verdict.device, verdict.status.value, verdict.reason.value, verdict.message,
                      verdict.to_json())
    return verdict


def bench(ref: str, cands: list[str], *, target: str = "cpu", contract: Contract | str | None = None,
          inputs: str | None = None, config: GateConfig | None = None, timing: TimingConfig | None = None,
          baselines: tuple[str, ...] = bench_mod.BASELINES, store: Store | str | None = None,
          progress: Callable[[str], None] | None = None) -> BenchResult:
    """Time eager, torch.compile and each verified candidate side by side."""
    cfg = config or gate_config()
    _check_config(cfg)
    _check_timing(timing or TimingConfig())
    st = _store(store)
    spec = workload.Spec.parse(ref, workload.REFERENCE_CLASS, inputs)
    cand_specs = [_candidate(c) for c in cands]
    bad = [b for b in baselines if b not in bench_mod.BASELINES]
    if bad:
        raise KernelgateError(f"unknown baseline {bad}; known: {', '.join(bench_mod.BASELINES)}")
    task = prepare(spec, target, _contract(contract), cfg.memory)
    result = bench_mod.bench(task, cand_specs, _cached(cfg, st), timing or TimingConfig(), baselines, progress)
    summary = ", ".join(f"{r.label} {r.timing.median_ms:.4g} ms" for r in result.rows if r.timing)
    st.add("bench", spec.path, task.hash, ",".join(c.path for c in cand_specs) or None, None, target,
                      result.device, result.status.value, None, summary, result.to_json())
    return result


def explain_tolerance(ref: str, *, target: str = "cpu", contract: Contract | str | None = None,
                      inputs: str | None = None) -> list:
    """How the allowed error of each output is derived, on the workload's own inputs (one Derivation each)."""
    spec = workload.Spec.parse(ref, workload.REFERENCE_CLASS, inputs)
    return derivations(prepare(spec, target, _contract(contract)))


def derivations(task) -> list:
    """The tolerance derivation of each output of a prepared task, on its given inputs."""
    from .gate import lowprec
    from .oracle import reduce_k_of
    o = task.oracle
    xs = task.given
    runs = o.run(xs)
    fmts = lowprec.formats_of(o.model, xs)
    return [lowprec.explain(g, {n: r[i] for n, r in runs.permitted.items()}, b.dtype,      # each output's own
                            reduction_length=reduce_k_of(o, i) or None, formats=fmts)      # reduction length
            for i, (g, b) in enumerate(zip(runs.oracle, runs.task))]


def profile(ref: str, cand: str | None = None, *, target: str = "cpu", contract: Contract | str | None = None,
            inputs: str | None = None, config: GateConfig | None = None, warmup: int = 3, forwards: int = 5):
    """Roofline floor, launch records, bottleneck line and machine-code fingerprint of the reference and
    (optionally) a candidate, each profiled in its own worker; plus the distance of the two fingerprints.
    Returns a profiling.records.Report (not a verification: run verify for that). A reference that cannot
    be profiled is a task error."""
    from . import targets
    from .gate.judge import device_name
    from .profiling import fingerprint, fusion
    from .profiling.records import Report
    if warmup < 0 or forwards < 1:
        raise KernelgateError(f"profile needs warmup >= 0 and forwards >= 1 (got {warmup}, {forwards})")
    spec = workload.Spec.parse(ref, workload.REFERENCE_CLASS, inputs)
    cand_spec = _candidate(cand) if cand else None
    cfg = config or gate_config()
    task = prepare(spec, target, _contract(contract), cfg.memory)
    ref_spec = workload.Spec(task.ref.spec.path, task.ref.spec.cls)
    ref_side = _profile_side(task, ref_spec, cfg, "reference", True, warmup, forwards)
    if ref_side.error or ref_side.profile is None:
        raise KernelgateError(f"profiling the reference failed: {ref_side.error}", Reason.TASK_LOAD)
    machine = targets.machine(task.device)
    try:
        if getattr(task.oracle, "own", False):   # kernels handed meta tensors would fault (oracle.own)
            raise KernelgateError("the reference launches its own kernels")
        whole = fusion.whole_forward(task.oracle.model, task.given, ref_side.profile.kernels_per_forward)
        ref_side = dataclasses.replace(ref_side, fusion=fusion.fusion_estimate(whole, machine))
    except Exception as e:  # noqa: BLE001 - the estimate is a hint; the profile stands without it
        ref_side = dataclasses.replace(ref_side, profile=dataclasses.replace(
            ref_side.profile, notes=ref_side.profile.notes + (f"no fusion estimate: {type(e).__name__}: {e}",)))
    side = dist = None
    if cand_spec is not None:
        side = _profile_side(task, cand_spec, cfg, "candidate", False, warmup, forwards)
        if side.fingerprint is not None and ref_side.fingerprint is not None:
            dist = fingerprint.distance(ref_side.fingerprint, side.fingerprint)
    return Report(task.ref.spec.path, task.target, device_name(task.device), machine.name, task.floor, ref_side,
                  side, dist)


def _profile_side(task, spec: workload.Spec, cfg: GateConfig, label: str, trusted: bool, warmup: int,
                  forwards: int):
    """One implementation profiled in a gate session's worker of its own: launch records, bottleneck line,
    fingerprint (a profiling.records.Side; a rejected build or a failed profile is its error)."""
    from .gate.judge import Rejected, Session
    from .profiling import bottleneck, fingerprint, launches
    from .profiling.records import Side
    session = Session(task, spec, cfg, label, trusted=trusted)
    try:
        prof, arts = launches.profile_session(session, task.given, warmup=warmup, forwards=forwards,
                                              artifacts=not task.device.startswith("cpu"), baseline=trusted)
    except Rejected as r:
        return Side(label, spec.path, spec.cls, error=f"{r.check.name}: {r.check.detail.splitlines()[0]}"
                    if r.check.detail else r.check.name)
    except ValueError as e:
        return Side(label, spec.path, spec.cls, error=f"profile: {e}")
    finally:
        session.worker.close()
    return Side(label, spec.path, spec.cls, prof, bottleneck.classify(task.floor, prof), fingerprint.build(prof, arts))


def runs(limit: int = 20, store: Store | str | None = None) -> list[Row]:
    """Recent results from the store, newest first."""
    return _store(store).recent(limit)


def _store(store: Store | str | None) -> Store:
    return store if isinstance(store, Store) else Store(store)


def _cached(cfg: GateConfig, st: Store) -> GateConfig:
    """The gate's settings with the trusted compile cache beside the store (unless one is set): baselines and
    modules emitted from the reference compile once per machine and software, not once per worker."""
    if cfg.trusted_cache is not None:
        return cfg
    return dataclasses.replace(cfg, trusted_cache=str(st.path.with_name(st.path.name + ".compile-cache")))


def _check_config(cfg: GateConfig) -> None:
    """Nonsense settings are usage errors (exit 2), never a verdict."""
    if cfg.trials < 1:
        raise KernelgateError(f"trials must be at least 1, got {cfg.trials}", Reason.USAGE)
    if cfg.soak_ms < 0:
        raise KernelgateError(f"soak_ms must not be negative, got {cfg.soak_ms:g}", Reason.USAGE)
    if not cfg.call_timeout > 0 or not cfg.build_timeout > 0:
        raise KernelgateError(f"timeouts must be positive, got call {cfg.call_timeout:g} s, build "
                              f"{cfg.build_timeout:g} s", Reason.USAGE)


def _check_timing(t: TimingConfig) -> None:
    if t.rounds < 1 or t.iters < 1 or t.pool < 1:
        raise KernelgateError(f"rounds, iters and pool must be at least 1, got {t.rounds}, {t.iters}, {t.pool}",
                              Reason.USAGE)
    if t.warmup_ms < 0:
        raise KernelgateError(f"warm-up must not be negative, got {t.warmup_ms:g} ms", Reason.USAGE)
    if t.lead_in < 0:
        raise KernelgateError(f"lead-in steps must not be negative, got {t.lead_in}", Reason.USAGE)


def _check_out(out_dir: Path, resume: bool, force: bool, clear: bool = True) -> None:
    """--out must be a directory we can write, and must not hold another run's results unless asked; with --force
    they are removed (`clear`; else by `_clear_out` once the run is sure to start)."""
    if out_dir.exists() and not out_dir.is_dir():
        raise KernelgateError(f"--out {out_dir} is a file, not a directory", Reason.USAGE)
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        probe = out_dir / ".kernelgate-write-test"
        probe.write_text("")
        probe.unlink()
    except OSError as e:
        raise KernelgateError(f"--out {out_dir} cannot be written: {e.strerror or e}", Reason.USAGE) from None
    previous = [n for n in ("run.json", "result.json", "optimized.py") if (out_dir / n).exists()]
    if previous and not resume and not force:
        raise KernelgateError(f"--out {out_dir} already holds a run's results ({', '.join(previous)}); use --resume "
                              "to continue that run, --force to replace it, or another --out", Reason.USAGE)
    if force and not resume and clear:
        _clear_out(out_dir)


def _clear_out(out_dir: Path) -> None:
    """Remove an earlier run's outputs (--force): nothing of it may be mistaken for this one's."""
    for name in OUTPUTS:
        p = out_dir / name
        if p.is_dir():
            shutil.rmtree(p, ignore_errors=True)
        elif p.exists():
            p.unlink()


#: what optimize writes into --out (removed by --force before a new run)
OUTPUTS = ("run.json", "result.json", "optimized.py", "reference.py", "report.md", "report.html", "reproduce.sh",
           "convergence.svg", "fingerprint.svg", "candidates")




def parse_budget(text: str | float | int) -> float:
    """'90', '90s', '5m', '1h' -> seconds."""
    if isinstance(text, (int, float)):
        text = str(text)
    t = text.strip().lower()
    mult = {"s": 1, "m": 60, "h": 3600}.get(t[-1:], None)
    try:
        seconds = float(t[:-1]) * mult if mult else float(t)
    except ValueError as e:
        raise KernelgateError(f"--budget takes seconds or a number with s/m/h, got '{text}'", Reason.USAGE) from e
    if not seconds > 0 or seconds == float("inf"):
        raise KernelgateError(f"--budget must be a positive time, got '{text}'", Reason.USAGE)
    return seconds


#: proposer names optimize takes: the built-in strategy library, the LLM proposer
PROPOSERS = ("builtin", "llm")
#: main trials of the gate's check of a module emitted from the faster baseline (the reference's own code)
EMITTED_BASELINE_TRIALS = 2
NO_LLM = "no LLM configured: the built-in strategy library only"
LLM_FLAGS = ("--llm (openai:MODEL@URL, anthropic:MODEL or cmd:COMMAND), --llm-endpoint with --llm-model, "
             "or --llm-cmd")


def _hints(hints) -> list[str]:
    return [h.strip() for h in ((hints,) if isinstance(hints, str) else hints or ()) if isinstance(h, str) and h.strip()]


def make_proposers(proposers=("builtin",), llm: dict | None = None, hints=()) -> tuple[list, object, list[str]]:
    """(the population, in order; the LLM proposer or None; notes for the run) from optimize's arguments.
    `proposers` holds names ("builtin": the strategy library, "llm": the LLM proposer) or Proposer objects;
    `llm` is LLMProposer.from_args's keywords; `hints` go to the LLM proposer's every prompt. A name that is
    not known, or "llm" with no model configured, is a usage error (exit 2)."""
    from .proposers import Proposer
    if isinstance(proposers, str):
        proposers = (proposers,)
    asked = list(dict.fromkeys(proposers))
    bad = [p for p in asked if isinstance(p, str) and p not in PROPOSERS
           or not isinstance(p, str) and not isinstance(p, Proposer)]
    if bad or not asked:
        what = f"unknown proposer {', '.join(map(str, bad))}" if bad else "no proposer named"
        raise KernelgateError(f"--proposer: {what}; known: {', '.join(PROPOSERS)}", Reason.USAGE)
    hints = _hints(hints)
    notes: list[str] = []
    agent = None
    configured = any((llm or {}).get(k) for k in ("llm", "endpoint", "model", "cmd"))
    if "llm" in asked:
        from .proposers.llm import LLMProposer
        kw = dict(llm or {})
        kw["hints"] = list(kw.get("hints") or ()) + [h for h in hints if h not in (kw.get("hints") or ())]
        agent = LLMProposer.from_args(**kw) if configured else None
        if agent is None:
            raise KernelgateError(f"--proposer llm needs a model: set {LLM_FLAGS}", Reason.USAGE)
    elif configured:
        notes.append("an LLM is configured but the proposers asked leave it out: it is not used")
    elif asked == ["builtin"]:
        notes.append(NO_LLM)
    if hints and agent is None:
        notes.append(f"{len(hints)} hint{'s' if len(hints) > 1 else ''} given: only the LLM proposer reads hints, "
                     "and it is not in use")
    out = []
    for p in asked:
        if p == "builtin":
            from .proposers.library import Library
            out.append(Library())
        elif p == "llm":
            out.append(agent)
        else:
            out.append(p)
    return out, agent, notes


def _languages(languages) -> tuple[str, ...]:
    """--languages checked: an unknown language, or pallas without JAX, is a usage error (one line)."""
    try:
        return parse_languages(languages)
    except ValueError as e:
        raise KernelgateError(str(e), Reason.USAGE) from None


def _baseline_sha(spec: workload.Spec, task, kind: str) -> str:
    """sha256 of the optimized.py a run writes from the baseline `kind` (as optimize's end writes it)."""
    from . import emit as emit_mod
    text = emit_mod.render(emit_mod.baseline_source(Path(spec.path).read_text(), spec.cls, kind), spec.cls,
                           task.device, [task.args(task.given)], f"baseline ({kind})")
    return hashlib.sha256(text.encode()).hexdigest()


def optimize(model: str, *, target: str = "cpu", budget: str | float = 300, max_candidates: int = 64,
             out: str = "out", seed: int = 0, resume: bool = False, contract: Contract | str | None = None,
             inputs: str | None = None, config: GateConfig | None = None, store: Store | str | None = None,
             progress: Callable[[str], None] | None = None, search_config=None, force: bool = False,
             proposers=("builtin",), llm: dict | None = None, hints=(), languages=None):
    """Search for a faster verified implementation; write optimized.py, report.md/html, reproduce.sh, result.json.

    proposers   the population, asked in this order each generation: "builtin" (the strategy library),
                "llm" (the LLM proposer, configured by `llm`), or Proposer objects
    llm         LLMProposer.from_args keywords (llm / endpoint / model / cmd / prices / limits / ...); None: none
    hints       texts put in every LLM prompt; recorded with the run (run.json, result.json, the store's row)
    languages   the kernel languages candidates may be written in (a comma list or sequence of triton, cuda,
                pallas, cpp; None: the target's defaults, proposers.DEFAULT_LANGUAGES); recorded in run.json
    """
    from . import emit as emit_mod
    from . import graph as graph_mod
    from . import report as report_mod
    from .proposers.library.fusion_estimates import strategy_fusions
    from .proposers.library.library import REWRITE_FNS
    from .search import Budget, OutOfBudget, Search, SearchConfig, finalize
    from .search.policy import OVERRUN, least_s

    say = progress or (lambda m: None)
    seconds = parse_budget(budget)
    if max_candidates < 1:
        raise KernelgateError(f"--max-candidates must be at least 1, got {max_candidates}", Reason.USAGE)
    _check_config(config or gate_config())
    hints = _hints(hints)
    langs = _languages(languages)
    population, agent, proposer_notes = make_proposers(proposers, llm, hints)
    spec = workload.Spec.parse(model, workload.REFERENCE_CLASS, inputs)
    out_dir = Path(out)
    _check_out(out_dir, resume, force, clear=False)   # cleared below, once a budget that fits is sure
    st = _store(store)
    t0 = time.monotonic()
    if agent is not None:                # an unreachable endpoint or a refused key ends the run here (exit 2)
        line = agent.check()
        say(line)
        proposer_notes.append(line)
    task = prepare(spec, target, _contract(contract), (config or gate_config()).memory)
    if not task.admission.ok:
        raise KernelgateError(task.admission.detail, Reason.DEGENERATE)
    scfg = search_config or SearchConfig()
    # a budget the run cannot keep to is refused now (nothing written), not overrun later
    kept = st.baselines(baselines_mod.key(task, scfg.timing))
    doc = kept[1] if kept else None
    # the store keeps the gate's verdict on the very bytes this run would emit from the baseline (check_baseline)
    verified = doc is not None and doc.get("emit_s") is not None and baselines_mod.verified_emit(
        doc, _baseline_sha(spec, task, doc.get("emit_kind") or doc.get("faster") or "eager")) is not None
    least, how = least_s(float(getattr(task, "admission_s", 0.0) or 0.0), doc, task.device,
                         float(getattr(task, "crossing_s", 0.0) or 0.0),
                         baselines_mod.EMIT_VERIFIED_S if verified else None, baselines_mod.kept_builds_s(doc),
                         bool(getattr(task, "lean", False)))
    prepared = time.monotonic() - t0
    if prepared + least > OVERRUN * seconds:
        raise KernelgateError(f"the budget ({seconds:g} s) is too small for this task: preparing it took {prepared:.0f} s "
                              f"and {how}; give --budget {math.ceil(1.2 * (prepared + least))} or more (that much tries "
                              "no candidate)", Reason.USAGE)
    if force and not resume:
        _clear_out(out_dir)
    run_file = out_dir / "run.json"
    run = {"run_id": uuid.uuid4().hex[:12], "seed": seed, "workload_hash": task.hash, "target": target}
    if resume:
        if not run_file.exists():
            raise KernelgateError(f"--resume: {run_file} not found; run without --resume first")
        old = json.loads(run_file.read_text())
        if old.get("workload_hash") != task.hash or old.get("target") != target:
            raise KernelgateError("--resume: the workload or target differs from the interrupted run's")
        run = old
        say(f"resuming run {run['run_id']}: {len(st.evaluations(run['run_id']))} candidates already evaluated")
        # hints given before (run.json) and added to the run since (kernelgate mcp's add_hint), then this call's
        earlier = [*old.get("hints", []), *st.hints(run["run_id"])]
        hints = list(dict.fromkeys([*earlier, *hints]))
        if agent is not None:
            agent.hints[:0] = [h for h in earlier if h not in agent.hints]
    run["proposers"] = [p.name for p in population]
    run["hints"] = hints
    run["languages"] = list(langs or default_languages(target))
    run_file.write_text(json.dumps(run, indent=1))
    cfg = _cached(config or gate_config(), st)
    search = Search(task, run["run_id"], out_dir, Budget(seconds - (time.monotonic() - t0), max_candidates),
                    int(run["seed"]), cfg, scfg, st, say, proposers=population,
                    analyse=lambda m, ops: graph_mod.analyse(m, ops, REWRITE_FNS), fusion_source=strategy_fusions,
                    languages=langs)
    search.notes.extend(proposer_notes)
    search.evaluator.emit_verified = verified     # the plan keeps EMIT_VERIFIED_S for the emitted check
    search.phases.since(t0, "prepare")   # the task, the oracle, admission, an LLM endpoint's check

    emitted_bytes: dict[str, bytes] = {}

    def emit_for(c):
        """The confirmation judges and times the module a user would import: optimized.py from contender c."""
        path = emit_mod.emit(out_dir / "optimized.py", c.source, spec.cls, task.device, [task.args(task.given)],
                             c.strategy)
        emitted_bytes[c.id] = path.read_bytes()
        return workload.Spec(str(path.resolve()), spec.cls)
    search.emit_for = emit_for
    search.planner.emit_confirms = True
    try:
        try:
            search.run()
        except OutOfBudget:
            say("budget spent")
        search.confirm()                 # the contenders, judged and timed afresh
    except RuntimeError as e:
        raise KernelgateError(str(e), Reason.TASK_LOAD) from e
    finally:
        search.close()
    if not search.timings:
        raise KernelgateError(f"the budget ({seconds:g} s) is too small even for the baselines")
    result = dataclasses.replace(finalize(search), proposers=tuple(run["proposers"]), hints=tuple(hints))
    if agent is not None:                # backend (no key), totals, each attempt with its outcome (per-candidate
        result = dataclasses.replace(    # usage stays on the candidates); why it stopped, what it cost
            result, llm=agent.summary(), notes=result.notes + tuple(agent.notes) + (agent.ledger.line(),))
    ref_source = Path(spec.path).read_text()
    (out_dir / "reference.py").write_text(ref_source)
    # a baseline's module the gate rejected in an earlier run of this workload is not tried again
    emit_kind = search.evaluator.baseline_emit_kind or result.baseline_kind
    if result.best is not None:
        src, strategy = result.best.candidate.source, result.best.candidate.strategy
    else:
        src, strategy = emit_mod.baseline_source(ref_source, spec.cls, emit_kind), f"baseline ({emit_kind})"
    emitted_kind = emit_kind if result.best is None else None      # the baseline in optimized.py, if one is

    reused: list[str] = []          # the bytes of an emitted baseline whose kept verdict stood in for its check

    def check_baseline(path: Path, kind: str):
        """The gate's check of a module emitted from a baseline: the reference's own code in the drop-in wrapper
        (under torch.compile for `kind` compile), so fewer main trials (every kind of check runs). Where an earlier
        run kept the gate's verdict on these very bytes, with this workload, device, software and kernelgate
        (baselines.verified_emit), that verdict."""
        sha = hashlib.sha256(path.read_bytes()).hexdigest()
        kept = st.baselines(search.evaluator.baseline_key) if search.evaluator.baseline_key else None
        earlier = baselines_mod.verified_emit(kept[1] if kept else None, sha)
        if earlier is not None:             # verified_emit: accepted, for these bytes, by this kernelgate
            say(f"the emitted module ({path.name}:{spec.cls}) is byte for byte the one the gate accepted in an earlier "
                "run of this workload, with this device, software and kernelgate: its verdict stands")
            reused.append(sha)
            return dataclasses.replace(Verdict.from_json(earlier), seconds=0.0, message=(
                "accepted in an earlier run (the same bytes, workload, device, software and kernelgate): "
                + str(earlier.get("message", ""))))
        return judge(task, workload.Spec(str(path.resolve()), spec.cls), dataclasses.replace(
            cfg, trials=min(cfg.trials, EMITTED_BASELINE_TRIALS)), own_code=True, reduced=(
            "the module is the reference itself" + (" under torch.compile" if kind == "compile" else "")
            + " in kernelgate's drop-in wrapper (a baseline)"))

    t_emit = time.monotonic()
    with search.phases.timed("emitted check"):
        judged = emitted_bytes.get(result.best.candidate.id) if result.best is not None else None
        if judged is not None and search.emitted_confirmed() and (out_dir / "optimized.py").read_bytes() == judged:
            # the confirmation judged and timed optimized.py itself, through the class a user imports (the file as it
            # was written then: one changed since is emitted and checked again below)
            emitted, emitted_verdict = out_dir / "optimized.py", result.best.verdict
            say(f"the emitted module ({emitted.name}:{spec.cls}) is the one the confirmation judged and timed")
        else:
            emitted = emit_mod.emit(out_dir / "optimized.py", src, spec.cls, task.device, [task.args(task.given)],
                                    strategy)
            # the last step: the file a user imports, through the class name they import, goes through the gate
            say(f"checking the emitted module ({emitted.name}:{spec.cls})")
            emitted_verdict = judge(task, workload.Spec(str(emitted.resolve()), spec.cls), cfg) \
                if result.best is not None else check_baseline(emitted, emit_kind)
        # what is emitted instead of a module the gate rejects: the faster baseline, then the reference itself
        # (torch.compile's output can fall outside the tolerance: 2.83e-6 against 2.8e-6 allowed for a conv)
        fallbacks = ([emit_kind] if result.best is not None else []) + (["eager"] if emit_kind == "compile" else [])
        for kind in fallbacks:
            if emitted_verdict.accepted:
                break
            rejected_emit, rejected_what = emitted_verdict, strategy
            strategy, emitted_kind = f"baseline ({kind})", kind
            say(f"the emitted module ({rejected_what}) was rejected ({rejected_emit.reason.value}: "
                f"{rejected_emit.message}); emitting {strategy} instead")
            emit_mod.emit(emitted, emit_mod.baseline_source(ref_source, spec.cls, kind), spec.cls, task.device,
                          [task.args(task.given)], strategy)
            emitted_verdict = check_baseline(emitted, kind)
            result = dataclasses.replace(result, best=None, final=None, best_ms=result.baseline_ms, notes=(
                *result.notes, f"the module emitted from {rejected_what} was rejected by the gate "
                f"({rejected_emit.reason.value}: {rejected_emit.message}); {strategy} was emitted instead"
                + (" (the reference itself: slower than the faster baseline's figure above)"
                   if kind != result.baseline_kind else "")))
    if emitted_verdict.accepted and emitted_kind is not None:
        if not reused:      # the check's time kept for the next run, with the verdict on these bytes (check_baseline)
            baselines_mod.remember_emit(st, search.evaluator.baseline_key, time.monotonic() - t_emit,
                                        emitted_kind if emitted_kind != result.baseline_kind else "",
                                        float(getattr(task, "admission_s", 0.0) or 0.0),
                                        hashlib.sha256(emitted.read_bytes()).hexdigest(), emitted_verdict.to_json())
        if emitted_kind != result.baseline_kind and emit_kind != result.baseline_kind:
            result = dataclasses.replace(result, notes=(*result.notes, (
                f"optimized.py is the reference itself: the module emitted from baseline ({result.baseline_kind}) "
                "was rejected by the gate in an earlier run of this workload")))
    if not emitted_verdict.accepted:
        raise KernelgateError(f"the emitted module {emitted} failed the gate: {emitted_verdict.reason.value}: "
                              f"{emitted_verdict.message}", Reason.TASK_LOAD)
    # which calls take the fast path (the modes the gate verified); optimized.py's docstring says the same
    result = dataclasses.replace(result, notes=result.notes + (f"optimized.py: {emit_mod.modes_text()}",),
                                 phases=search.phases_json())
    doc = result.to_json()
    doc["emitted_check"] = {"file": emitted.name, "class": spec.cls, "status": emitted_verdict.status.value,
                            "reason": emitted_verdict.reason.value, "message": emitted_verdict.message,
                            "seconds": emitted_verdict.seconds, "fast_path_modes": dict(emit_mod.GATE_MODES)}
    doc["run_id"] = run["run_id"]
    try:                      # how the allowed error was derived, per output (explain-tolerance's text)
        doc["tolerance"] = [d.to_text() for d in derivations(task)]
    except Exception as e:  # noqa: BLE001 - the report stands without it
        doc["tolerance"] = [f"(derivation unavailable: {type(e).__name__}: {e})"]
    (out_dir / "result.json").write_text(json.dumps(doc, indent=1))
    t = "cuda" if task.device.startswith("cuda") else "cpu"
    report_mod.write_report(doc, out_dir, reproduce_cmds={
        "verify the emitted module against the reference": f"kernelgate verify reference.py optimized.py --target {t}",
        "time it against eager and torch.compile": f"kernelgate bench reference.py optimized.py --target {t}",
    })
    st.add("optimize", spec.path, task.hash, str((out_dir / "optimized.py").resolve()), None, target, result.device,
           "accepted", None, f"{result.speedup:.3f}x ({doc['best_strategy']})", doc)
    return result
