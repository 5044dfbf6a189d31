"""`kernelgate submit OUT_DIR cand.py`: a person's candidate joins an optimize run's population.

The run is the one recorded in OUT_DIR (run.json: its id, workload hash and target; result.json, when the run
finished: the workload's path, class and contract). The candidate goes through what every candidate of a
search goes through: one candidate file (the reference source verbatim, then the submitted code); the full
gate in a worker of its own; then, if accepted, a measurement interleaved with the run's baselines (their
kept measurement in the store is reused: gate/baselines.py), its speedup counted against the faster of them.
It is recorded in the store as an evaluation of that run with proposer "human", and as a `submit` result
(`kernelgate runs`). A candidate whose claimed speedup beats the run's best is emitted by resuming the run
(`Submission.next_step`): the resumed search confirms its best with a fresh measurement, emits
optimized.py and checks the emitted module through the gate, as every run does at its end.
"""
from __future__ import annotations

import ast
import hashlib
import json
import shlex
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from . import workload
from .config import GateConfig, TimingConfig, gate_config
from .errors import KernelgateError
from .records import Candidate, Contract, Evaluation, Reason
from .store import Store

#: the strategy name of a submitted candidate: "human:<file stem>"
STRATEGY = "human"
PROPOSER = "human"


@dataclass(frozen=True)
class Submission:
    """What came of a submitted candidate: its evaluation in the run, and where that leaves the run."""

    run_id: str
    out_dir: str
    workload: str
    target: str
    file: str                                   # the submitted file, as given
    evaluation: Evaluation
    run_best: Evaluation | None                 # the run's best (claimed) candidate before this one
    beats_best: bool                            # a claimed speedup above the run's best (or the kept baseline)
    already: bool = False                       # the same candidate was evaluated in this run before
    next_step: str | None = None                # the command that emits it (resuming the run)
    notes: tuple[str, ...] = ()
    seconds: float = 0.0

    @property
    def accepted(self) -> bool:
        return self.evaluation.accepted

    @property
    def exit_code(self) -> int:
        return self.evaluation.verdict.exit_code

    def to_json(self) -> dict[str, Any]:
        e, best = self.evaluation, self.run_best
        return {"status": e.verdict.status.value, "run_id": self.run_id, "out": self.out_dir,
                "workload": self.workload, "target": self.target, "file": self.file,
                "candidate": {"id": e.candidate.id, "strategy": e.candidate.strategy,
                              "proposer": e.candidate.proposer},
                "verdict": e.verdict.to_json(),
                "timing": e.timing.to_json() if e.timing else None,
                "baseline": e.baseline.to_json() if e.baseline else None,
                "speedup": e.speedup.to_json() if e.speedup else None,
                "run_best": None if best is None else {
                    "candidate": best.candidate.id, "strategy": best.candidate.strategy,
                    "median_ms": best.timing.median_ms if best.timing else None,
                    "speedup": best.speedup.ratio if best.speedup else None},
                "beats_best": self.beats_best, "already_evaluated": self.already, "next_step": self.next_step,
                "notes": list(self.notes), "seconds": self.seconds}


def load_run(out_dir: str | Path) -> dict[str, Any]:
    """run.json of the optimize run in `out_dir` (usage error, one line, when there is none)."""
    out = Path(out_dir)
    f = out / "run.json"
    if not f.is_file():
        where = "does not exist" if not out.exists() else "holds no run.json"
        raise KernelgateError(f"{out} {where}: give the --out folder of a kernelgate optimize run", Reason.USAGE)
    try:
        run = json.loads(f.read_text())
    except (OSError, ValueError) as e:
        raise KernelgateError(f"{f} cannot be read as a run's record: {e}", Reason.USAGE) from None
    if not isinstance(run, dict) or not all(isinstance(run.get(k), str) and run.get(k)
                                            for k in ("run_id", "workload_hash", "target")):
        raise KernelgateError(f"{f} is not an optimize run's record (run_id, workload_hash, target)", Reason.USAGE)
    return run


def run_best(history: list[Evaluation]) -> Evaluation | None:
    """The run's best: the fastest candidate with a claimed speedup over the baseline it was timed against
    (the search's rule)."""
    good = [e for e in history if e.accepted and e.speedup is not None and e.speedup.claimed]
    return max(good, key=lambda e: e.speedup.ratio) if good else None


def beats(e: Evaluation, best: Evaluation | None) -> bool:
    """Whether `e` would be the run's best: accepted with a claimed speedup, above the best's (or, with no
    best, above the kept baseline)."""
    if not (e.accepted and e.speedup is not None and e.speedup.claimed and not e.speedup.flagged):
        return False
    return best is None or e.speedup.ratio > best.speedup.ratio


def _result_doc(out: Path) -> dict[str, Any] | None:
    try:
        doc = json.loads((out / "result.json").read_text())
    except (OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) else None


def find_workload(out: Path, run: dict[str, Any], model: str | None, inputs: str | None) -> workload.Spec:
    """The workload the run optimized: `model` when given (its source must be the run's), else the path and
    class result.json names, else the copy the run kept (reference.py)."""
    h = run["workload_hash"]
    if model:
        spec = workload.Spec.parse(model, workload.REFERENCE_CLASS, inputs)
        if not Path(spec.path).is_file():
            raise KernelgateError(f"no such workload file: {spec.path}", Reason.USAGE)
        if workload.file_hash(spec.path) != h:
            raise KernelgateError(f"{spec.path} is not the workload run {run['run_id']} optimized (its source "
                                  "differs)", Reason.USAGE)
        return spec
    doc = _result_doc(out) or {}
    cls = str((doc.get("emitted_check") or {}).get("class") or workload.REFERENCE_CLASS)
    for path in (doc.get("workload"), out / "reference.py"):
        if path and Path(path).is_file() and workload.file_hash(str(path)) == h:
            return workload.Spec(str(Path(path).resolve()), cls, inputs)
    raise KernelgateError(f"cannot find the workload run {run['run_id']} optimized (no result.json or "
                          f"reference.py in {out} with its source): give it with --model file.py", Reason.USAGE)


def _check_contract(out: Path, contract: Contract) -> None:
    """The run's contract is recorded (result.json) as its assumptions: a submission is judged under the same."""
    doc = _result_doc(out)
    if doc is None or not isinstance(doc.get("contract"), list):
        return
    if sorted(map(str, doc["contract"])) != sorted(contract.assumptions()):
        run_side = "; ".join(map(str, doc["contract"])) or "none"
        raise KernelgateError(f"the run was made under another contract ({run_side}): pass the run's --contract / "
                              "--precision / --domain / --inplace flags", Reason.USAGE)


def defines(source: str, name: str) -> bool:
    """Whether a module's top level binds `name` (a class, a function, an assignment or an import)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return False                    # the gate's build reports it
    for node in tree.body:
        if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == name:
            return True
        if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(n, ast.Name) and n.id == name for t in targets for n in ast.walk(t)):
                return True
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            if any((a.asname or a.name.split(".")[0]) == name for a in node.names):
                return True
    return False


def make_candidate(reference_source: str, ref_cls: str, cand: Path, generation: int) -> Candidate:
    """The candidate file every proposer's candidates are: the reference verbatim, then the submitted code
    (which defines ModelNew; the emitted module takes the reference's class from the reference)."""
    text = cand.read_text()
    if defines(text, ref_cls):
        raise KernelgateError(f"{cand} defines {ref_cls}, the reference's class: a submitted candidate defines "
                              f"{workload.CANDIDATE_CLASS} only (the reference is put before it, as for every "
                              "candidate)", Reason.USAGE)
    strategy = f"{STRATEGY}:{cand.stem}"
    source = (reference_source.rstrip() + "\n\n\n" + f"# ---- kernelgate: submitted by hand ({cand.name}) ----\n"
              + text.strip() + "\n")
    cid = hashlib.sha256(source.encode()).hexdigest()[:16]
    return Candidate(id=cid, strategy=strategy, source=source, params=(("file", cand.name),), generation=generation,
                     proposer=PROPOSER)


def evaluate(task, c: Candidate, out: Path, cfg: GateConfig, tcfg: TimingConfig, st: Store,
             say: Callable[[str], None], notes: list[str], profile: bool = True) -> Evaluation:
    """What the search does with each candidate (search.evaluator.Evaluator): the full gate in a fresh
    worker, then a measurement interleaved with the run's baselines (their kept measurement reused), the
    speedup against the faster of them, and a profile. The gate runs first: a rejected candidate costs no
    baseline build."""
    from .search.evaluator import Evaluator

    ev = Evaluator(task, cfg, out, notes, say)

    def baselines() -> None:
        try:
            ev.baselines(st, tcfg, None, profile=False)
        except RuntimeError as e:
            raise KernelgateError(str(e), Reason.TASK_LOAD) from e
        say(f"timing {c.strategy} interleaved with {', '.join(ev.base_sessions)}")

    say(f"judging {c.strategy} ({ev.candidate_path(c).relative_to(out)})")
    try:
        return ev.judge_and_time(c, tcfg, profile, on_accept=baselines)
    finally:
        ev.close()


def submit(out_dir: str | Path, cand: str, *, target: str | None = None, model: str | None = None,
           contract: Contract | str | None = None, inputs: str | None = None, config: GateConfig | None = None,
           timing: TimingConfig | None = None, store: Store | str | None = None,
           progress: Callable[[str], None] | None = None, profile: bool = True) -> Submission:
    """Judge `cand` (a file defining ModelNew) against the workload of the optimize run in `out_dir`, time
    it against that run's baselines, and record it in the store as an evaluation of the run (proposer
    "human"). `timing`: the measurement's settings (default: the search's, so the run's kept baseline
    measurement is found). Usage and task problems raise KernelgateError (exit 2)."""
    from . import api
    from .gate.judge import prepare
    from .search import SearchConfig

    say = progress or (lambda m: None)
    t0 = time.monotonic()
    out = Path(out_dir)
    run = load_run(out)
    if target is not None and target != run["target"]:
        raise KernelgateError(f"run {run['run_id']} targets {run['target']}, not {target}: leave --target out "
                              "or give the run's", Reason.USAGE)
    target = run["target"]
    cfg = config or gate_config()
    api._check_config(cfg)
    tcfg = timing or SearchConfig().timing
    api._check_timing(tcfg)
    cand_spec = api._candidate(cand)
    if cand_spec.cls != workload.CANDIDATE_CLASS:
        raise KernelgateError(f"a submitted candidate defines {workload.CANDIDATE_CLASS} (got the class "
                              f"{cand_spec.cls})", Reason.USAGE)
    st = api._store(store)
    con = api._contract(contract)
    spec = find_workload(out, run, model, inputs)
    _check_contract(out, con)
    history = [Evaluation.from_json(d) for d in st.evaluations(run["run_id"])]
    notes: list[str] = []
    made = (_result_doc(out) or {}).get("candidates")
    if not history and isinstance(made, int) and made > 0:
        raise KernelgateError(f"the store {st.path} holds none of run {run['run_id']}'s {made} evaluations: give "
                              "the run's --store", Reason.USAGE)
    best = run_best(history)
    c = make_candidate(Path(spec.path).read_text(), spec.cls, Path(cand_spec.path),
                       max((e.candidate.generation for e in history), default=-1) + 1)
    earlier = next((e for e in history if e.candidate.id == c.id), None)
    if earlier is not None:
        notes.append(f"this candidate was evaluated in run {run['run_id']} before (as {earlier.candidate.strategy}); "
                     "its evaluation stands, nothing was judged again")
        return Submission(run["run_id"], str(out), spec.path, target, cand, earlier, best, False, True, None,
                          tuple(notes), time.monotonic() - t0)
    task = prepare(spec, target, con, cfg.memory)
    if not task.admission.ok:
        raise KernelgateError(task.admission.detail, Reason.DEGENERATE)
    ev = evaluate(task, c, out, cfg, tcfg, st, say, notes, profile)
    st.add_evaluation(run["run_id"], ev)
    wins = beats(ev, best)
    seconds = time.monotonic() - t0
    nxt = None
    if wins:
        nxt = resume_command(spec, target, out, inputs, contract, None if store is None else str(st.path),
                             max(60, int(3 * seconds) + 1))
        if not isinstance(contract, str) and con.assumptions() != Contract().assumptions():
            notes.append("resume it with the run's contract flags (--precision / --domain / --inplace)")
    sub = Submission(run["run_id"], str(out), spec.path, target, cand, ev, best, wins, False, nxt, tuple(notes),
                     seconds)
    st.add("submit", spec.path, task.hash, str(Path(cand).resolve()), ev.verdict.candidate_hash, target,
           ev.verdict.device, ev.verdict.status.value, ev.verdict.reason.value, summary_line(sub), sub.to_json())
    return sub


def resume_command(spec: workload.Spec, target: str, out: Path, inputs: str | None, contract: Any,
                   store: str | None, budget: int) -> str:
    """The command that resumes the run: its search confirms the best candidate (this one) with a fresh
    measurement, emits optimized.py from it and checks the emitted module through the gate."""
    model = spec.path if spec.cls == workload.REFERENCE_CLASS else f"{spec.path}:{spec.cls}"
    return (f"kernelgate optimize {shlex.quote(model)} --target {target} --out {shlex.quote(str(out))} --resume "
            f"--budget {budget}" + (f" --inputs {shlex.quote(inputs)}" if inputs else "")
            + (f" --contract {shlex.quote(contract)}" if isinstance(contract, str) and contract else "")
            + (f" --store {shlex.quote(store)}" if store else ""))


def summary_line(sub: Submission) -> str:
    """One line for the store's results table (`kernelgate runs`)."""
    e = sub.evaluation
    head = f"run {sub.run_id}, {e.candidate.proposer}"
    if not e.accepted:
        return f"{head}: {e.verdict.reason.value}: {e.verdict.message}"
    if e.speedup is None or e.baseline is None:
        return f"{head}: accepted, untimed"
    claim = "claimed" if e.speedup.claimed else "not claimed"
    return (f"{head}: {e.speedup.ratio:.3f}x over {e.baseline.label} ({claim})"
            + ("; beats the run's best" if sub.beats_best else ""))
