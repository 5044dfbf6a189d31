"""Typed, frozen records that flow through the pipeline: workload, contract, checks, verdicts, timings."""
from __future__ import annotations

import dataclasses
import enum
from dataclasses import dataclass, field
from typing import Any


class Status(str, enum.Enum):
    """Outcome of a verify: accepted (exit 0), rejected (exit 1), error = task or usage problem (exit 2)."""

    ACCEPTED = "accepted"
    REJECTED = "rejected"
    ERROR = "error"

    @property
    def exit_code(self) -> int:
        return {Status.ACCEPTED: 0, Status.REJECTED: 1, Status.ERROR: 2}[self]


class Reason(str, enum.Enum):
    """Why a candidate was rejected or a task could not be verified (stable machine-readable codes)."""

    OK = "ok"
    # candidate side (exit 1)
    BUILD_ERROR = "build_error"          # import/syntax error, no ModelNew, constructor raised, state_dict mismatch
    CRASH = "crash"                      # exception in forward, segfault, illegal memory access, OOM
    EXIT = "exit"                        # candidate called sys.exit / os._exit
    TIMEOUT = "timeout"                  # build or call exceeded its time limit
    OUTPUT_LIMIT = "output_limit"        # candidate printed more than allowed
    OUTPUT_TYPE = "output_type"          # not a plain torch.Tensor (subclass, list, None, ...)
    SHAPE = "shape"
    DTYPE = "dtype"
    DEVICE = "device"
    STRIDE = "stride"
    MISMATCH = "mismatch"                # numerical error above tolerance
    NONFINITE = "nonfinite"              # NaN/Inf positions differ from the oracle
    INPUT_MUTATED = "input_mutated"
    ALIASING = "aliasing"
    THREADS = "threads"                  # thread count or torch thread setting changed
    FLAGS = "flags"                      # global numerics flags changed
    TIMER = "timer"                      # timing functions replaced or timing inconsistent with outside clock
    RECHECK = "recheck"                  # outputs produced in the timed loop were wrong
    INTROSPECTION = "introspection"      # candidate code reached for the harness (frames, gc, raw memory, patches)
    # task side (exit 2)
    USAGE = "usage"                      # bad path, bad arguments
    TASK_LOAD = "task_load"              # reference cannot be loaded or run
    RANDOM_TASK = "random_task"          # reference forward is random
    DEGENERATE = "degenerate"            # a trivial mutant passes the check
    NO_DEVICE = "no_device"              # target device not present


TASK_REASONS = {Reason.USAGE, Reason.TASK_LOAD, Reason.RANDOM_TASK, Reason.DEGENERATE, Reason.NO_DEVICE}


@dataclass(frozen=True)
class Domain:
    """Declared input domain for one input: values lie in [low, high]."""

    low: float
    high: float


@dataclass(frozen=True)
class Vary:
    """A dimension that may vary: inputs[i].shape[dim] takes each of `sizes` (all listed inputs together)."""

    inputs: tuple[int, ...]
    dim: int
    sizes: tuple[int, ...]


@dataclass(frozen=True)
class Contract:
    """What the candidate may assume. Every field in force is printed with the verdict."""

    precision: tuple[str, ...] = ()          # allowed lower precisions: "tf32", "bf16", "fp16"
    domain: tuple[tuple[int, Domain], ...] = ()  # (input index, Domain)
    vary: tuple[Vary, ...] = ()
    inplace: bool = False                    # outputs may alias / inputs may be written
    strides: bool = True                     # output strides must match the reference's
    one_step: float | None = None            # allowed share of one-step differences on quantized outputs
    layouts: bool = True                     # one trial gives inputs in another memory layout (same values)

    def assumptions(self) -> list[str]:
        """Human-readable list of every assumption in force."""
        out = [f"precision: fp32-accurate plus {', '.join(self.precision)}" if self.precision
               else "precision: the reference's own"]
        out += [f"input {i} in [{d.low:g}, {d.high:g}]" for i, d in self.domain]
        if not self.domain:
            out.append("input domain: unrestricted (inputs widened beyond the given generator)")
        out += [f"inputs {list(v.inputs)} dim {v.dim} takes sizes {list(v.sizes)}" for v in self.vary]
        out.append("in-place / aliasing allowed" if self.inplace else "no in-place writes, no aliasing")
        out.append("output strides must match" if self.strides else "output strides free")
        out.append("inputs also tried in other memory layouts" if self.layouts
                   else "inputs in the workload's own memory layout only")
        if self.one_step is not None:
            out.append(f"quantized outputs: up to {self.one_step:.4%} of elements one grid step off")
        return out

    def domain_of(self, index: int) -> Domain | None:
        for i, d in self.domain:
            if i == index:
                return d
        return None


@dataclass(frozen=True)
class Check:
    """One line of a verdict: what was checked, and what was measured vs allowed."""

    name: str
    ok: bool
    detail: str = ""


@dataclass(frozen=True)
class Verdict:
    """Result of `verify`: status, the first failing reason, and every check that ran."""

    status: Status
    reason: Reason
    message: str
    checks: tuple[Check, ...] = ()
    notes: tuple[str, ...] = ()
    assumptions: tuple[str, ...] = ()
    workload_hash: str = ""
    candidate_hash: str = ""
    target: str = ""
    device: str = ""
    seconds: float = 0.0

    @property
    def accepted(self) -> bool:
        return self.status is Status.ACCEPTED

    @property
    def exit_code(self) -> int:
        return self.status.exit_code

    def to_json(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["status"] = self.status.value
        d["reason"] = self.reason.value
        return d

    @staticmethod
    def from_json(d: dict[str, Any]) -> "Verdict":
        return Verdict(Status(d["status"]), Reason(d["reason"]), d["message"],
                       tuple(Check(**c) for c in d.get("checks", ())), tuple(d.get("notes", ())),
                       tuple(d.get("assumptions", ())), d.get("workload_hash", ""), d.get("candidate_hash", ""),
                       d.get("target", ""), d.get("device", ""), d.get("seconds", 0.0))


@dataclass(frozen=True)
class Timing:
    """Per-call times (ms) of one implementation, from the judge's clock alone: one sample per timed batch,
    (batch wall time - the request's constant) / iterations - the harness's own per-iteration cost."""

    label: str
    samples_ms: tuple[float, ...]
    wall_ms_per_iter: float            # judge-side clock, includes the request and the per-iteration harness
    median_ms: float
    spread: float                      # relative semi-interquartile range
    kind: str = "eager"                # eager | compile | candidate
    harness_ms: float = 0.0            # the harness's per-iteration cost, subtracted (measured in a baseline's worker)
    inproc_ms: float | None = None     # median of the worker's own samples (diagnostic only, never claimed)
    round_spread: float | None = None  # relative semi-interquartile range of the per-round medians: the claim's
    #                                    noise term (gate/timing.py, noise); None with too few rounds
    #: median per-call time (harness subtracted) on fresh draws of the workload's own generator, each called once
    #: (gate/measure.py, `drawn`); None where not measured
    drawn_ms: float | None = None

    def to_json(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["samples_ms"] = list(self.samples_ms)
        return d

    @staticmethod
    def from_json(d: dict[str, Any] | None) -> "Timing | None":
        return None if d is None else Timing(**{**d, "samples_ms": tuple(d["samples_ms"])})


@dataclass(frozen=True)
class Speedup:
    """Speedup of a candidate over the faster baseline, with a bootstrap confidence interval."""

    ratio: float
    low: float
    high: float
    threshold: float                   # lower bound must exceed this to claim a speedup
    claimed: bool
    flagged: bool = False              # implausibly large: needs review, not counted
    #: the candidate's call was shorter than the harness's cost, which the judge's clock cannot separate from it:
    #: the figures compare its time with the harness included against the baseline's call (a lower bound)
    bounded: bool = False
    unresolved: bool = False           # the baseline's call is shorter than the harness's cost: never claimed
    #: inputs the timed iterations do not draw afresh (gate/task.fixed_inputs): timed near the trials' inputs, where
    #: a memo can be exact, so never claimed
    fixed: str = ""
    #: the ratio of mean times (baseline / candidate): what a caller pays over many calls; a claim needs it above
    #: the threshold too (a candidate slow on a minority of calls can have a fast median: red team 64)
    mean_ratio: float | None = None
    #: the ratio (baseline / candidate) on fresh draws of the workload's own generator (Timing.drawn_ms); a claim
    #: needs it near the timed draws' (gate/timing.py, DRAWN_AGREE)
    drawn_ratio: float | None = None

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @staticmethod
    def from_json(d: dict[str, Any] | None) -> "Speedup | None":
        return None if d is None else Speedup(**d)


def claim_text(sp: dict[str, Any]) -> str:
    """Whether a speedup (Speedup.to_json()) is claimed, and why not, in a few words."""
    bound = " (the candidate's time with the harness included: a lower bound)" if sp.get("bounded") else ""
    if sp.get("claimed"):
        return "claimed" + bound
    if sp.get("fixed"):
        return (f"not claimed (timed inputs near the trials': {sp['fixed']}, since the reference accepts no fresh "
                "draw of them; a memo could answer them)")
    if sp.get("unresolved"):
        return "not claimed (the baseline's call is shorter than the harness's cost: the clock cannot resolve it)"
    low, threshold, mean = sp.get("low"), sp.get("threshold"), sp.get("mean_ratio")
    if isinstance(low, (int, float)) and isinstance(threshold, (int, float)) and isinstance(mean, (int, float)) \
            and low > threshold and mean <= threshold:
        return f"not claimed (the ratio of mean times {mean:.3f} <= {threshold:.3f}: slower calls the median hides)"
    drawn, ratio = sp.get("drawn_ratio"), sp.get("ratio")
    if isinstance(low, (int, float)) and isinstance(threshold, (int, float)) and isinstance(drawn, (int, float)) \
            and low > threshold and isinstance(ratio, (int, float)):
        return (f"not claimed (on fresh draws of the workload's own inputs, each called once, the ratio is "
                f"{drawn:.3f} against {ratio:.3f} on the timed draws: the timed inputs favour the candidate)")
    if isinstance(low, (int, float)) and isinstance(threshold, (int, float)):
        return f"not claimed (CI low {low:.3f} <= {threshold:.3f}){bound}"
    return "not claimed" + bound


@dataclass(frozen=True)
class BenchRow:
    label: str
    timing: Timing | None
    verdict: Verdict | None = None
    speedup: Speedup | None = None
    note: str = ""
    floor_fraction: float | None = None   # roofline floor / median (1.0 = at the floor)

    def to_json(self) -> dict[str, Any]:
        return {
            "label": self.label, "floor_fraction": self.floor_fraction,
            "timing": self.timing.to_json() if self.timing else None,
            "verdict": self.verdict.to_json() if self.verdict else None,
            "speedup": self.speedup.to_json() if self.speedup else None,
            "note": self.note,
        }


@dataclass(frozen=True)
class BenchResult:
    workload: str
    target: str
    device: str
    baseline: str                       # label of the faster baseline
    rows: tuple[BenchRow, ...]
    conditions: dict[str, Any] = field(default_factory=dict)
    status: Status = Status.ACCEPTED
    message: str = ""

    @property
    def exit_code(self) -> int:
        return self.status.exit_code

    def to_json(self) -> dict[str, Any]:
        return {
            "workload": self.workload, "target": self.target, "device": self.device,
            "baseline": self.baseline, "rows": [r.to_json() for r in self.rows],
            "conditions": self.conditions, "status": self.status.value, "message": self.message,
        }


# ------------------------------------------------------------------ optimize (search) records

@dataclass(frozen=True)
class Level:
    """One level of a candidate's stack: a strategy's name and its parameters, in the strategy's own order
    (the order is part of the rendered source), and which of them only schedule the work (the strategy's
    `tuning` parameters: tile sizes, warps, stages; two stacks differing only in those compute the same
    function, search/policy.py's parametric variants)."""

    name: str
    params: tuple[tuple[str, Any], ...] = ()
    tuning: tuple[str, ...] = ()

    def label(self) -> str:
        """`name(k=v, ...)`, or the name alone without parameters (the display form)."""
        return self.name + (f"({', '.join(f'{k}={v}' for k, v in self.params)})" if self.params else "")

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "params": dict(self.params), **({"tuning": list(self.tuning)} if self.tuning else {})}

    @staticmethod
    def from_json(d: dict[str, Any]) -> "Level":
        return Level(d["name"], tuple(dict(d.get("params") or {}).items()), tuple(d.get("tuning") or ()))


@dataclass(frozen=True)
class Candidate:
    """A proposed implementation: full Python source defining `ModelNew`, and where it came from."""

    id: str                            # content hash of `source`
    strategy: str                      # e.g. "runtime:cudagraph", "rewrite:avgpool-as-conv", "triton:row-softmax"
    source: str
    parent: str | None = None          # id of the candidate it refines
    params: tuple[tuple[str, Any], ...] = ()
    language: str = "torch"            # torch | triton | cpp | cuda
    generation: int = 0
    proposer: str = "library"          # library | llm | human
    #: what proposing it cost (LLM proposers: model, requests, retries, tokens, cost, seconds waiting for the
    #: model; proposers/llm/accounting.py Usage.to_json); not part of its identity
    usage: dict[str, Any] | None = field(default=None, compare=False)
    #: the levels it was built from, bottom first (the strategy library's candidates; () for a whole-file
    #: candidate, e.g. an LLM's, and for rows stored before stacks were recorded); `strategy` is their display
    stack: tuple[Level, ...] = ()

    def to_json(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["params"] = dict(self.params)
        d["stack"] = [lv.to_json() for lv in self.stack]
        return d

    @staticmethod
    def from_json(d: dict[str, Any]) -> "Candidate":
        return Candidate(**{**d, "params": tuple(sorted(d.get("params", {}).items())),
                            "stack": tuple(Level.from_json(x) for x in d.get("stack") or ())})


@dataclass(frozen=True)
class Evaluation:
    """One candidate through the gate: its verdict, and (if accepted) its timing against the baseline."""

    candidate: Candidate
    verdict: Verdict
    timing: Timing | None = None
    baseline: Timing | None = None     # the baseline measured interleaved with it
    speedup: Speedup | None = None
    insight: dict[str, Any] | None = None   # bottleneck line, launch summary, fingerprint (profiling/summary.py)

    @property
    def accepted(self) -> bool:
        return self.verdict.accepted

    def to_json(self) -> dict[str, Any]:
        return {"candidate": self.candidate.to_json(), "verdict": self.verdict.to_json(),
                "timing": self.timing.to_json() if self.timing else None,
                "baseline": self.baseline.to_json() if self.baseline else None,
                "speedup": self.speedup.to_json() if self.speedup else None, "insight": self.insight}

    @staticmethod
    def from_json(d: dict[str, Any]) -> "Evaluation":
        return Evaluation(Candidate.from_json(d["candidate"]), Verdict.from_json(d["verdict"]),
                          Timing.from_json(d.get("timing")), Timing.from_json(d.get("baseline")),
                          Speedup.from_json(d.get("speedup")), d.get("insight"))


@dataclass(frozen=True)
class OptimizeResult:
    """What `optimize` produced: baselines, every evaluation in order, and the best verified candidate."""

    workload: str
    target: str
    device: str
    baseline_kind: str                 # eager | compile (the faster)
    baseline_ms: float
    eager: Timing | None
    compiled: Timing | None
    best: Evaluation | None            # None: no candidate beat the baseline; the baseline is kept
    final: Speedup | None              # best vs faster baseline, re-measured side by side at the end
    best_ms: float
    evaluations: tuple[Evaluation, ...]
    conditions: dict[str, Any]
    contract: tuple[str, ...]
    notes: tuple[str, ...] = ()
    seconds: float = 0.0
    confirmations: tuple[dict[str, Any], ...] = ()   # claimed candidates re-judged and re-timed afresh
    proposers: tuple[str, ...] = ()    # the population's names, in the order asked (library, llm, ...)
    hints: tuple[str, ...] = ()        # what the run was told (every LLM prompt carries them)
    llm: dict[str, Any] | None = None  # the LLM proposer's summary(): backend, totals, attempts, notes, stopped
    #: where the run's time went (search/phases.py): {"seconds": {phase: s}, "per_candidate": {id: {phase: s}},
    #: "total_s", "unaccounted_s", "candidates"}; {} for results made before phases were recorded
    phases: dict[str, Any] = field(default_factory=dict)
    #: the task's roofline floor on this device (profiling/roofline.Floor.to_json); None where it was not counted
    floor: dict[str, Any] | None = None

    @property
    def best_over_floor(self) -> float | None:
        """The best time (the kept baseline's where no candidate won) over the roofline floor: 1.0 is at the floor."""
        secs = (self.floor or {}).get("seconds")
        if not isinstance(secs, (int, float)) or secs <= 0 or self.best_ms <= 0:
            return None
        return self.best_ms / (1e3 * secs)

    @property
    def speedup(self) -> float:
        """The best's speedup over the faster baseline: the ratio of their medians, or where the best's call is
        shorter than the harness's cost the claim's lower bound (Speedup.bounded)."""
        if self.final is not None and self.final.bounded:
            return self.final.ratio
        return self.baseline_ms / self.best_ms if self.best_ms > 0 else 1.0

    def to_json(self) -> dict[str, Any]:
        return {
            "workload": self.workload, "target": self.target, "device": self.device,
            "baseline_kind": self.baseline_kind, "baseline_ms": self.baseline_ms, "best_ms": self.best_ms,
            "speedup": self.speedup,
            "speedup_ci": [self.final.low, self.final.high] if self.final else [1.0, 1.0],
            "speedup_claimed": bool(self.final and self.final.claimed),
            "speedup_bounded": bool(self.final and self.final.bounded),
            "best_strategy": self.best.candidate.strategy if self.best else "baseline:" + self.baseline_kind,
            "best_id": self.best.candidate.id if self.best else None,
            "confirmations": list(self.confirmations),
            "candidates": len(self.evaluations),
            "accepted": sum(1 for e in self.evaluations if e.accepted),
            "eager": self.eager.to_json() if self.eager else None,
            "compile": self.compiled.to_json() if self.compiled else None,
            "evaluations": [e.to_json() for e in self.evaluations],
            "conditions": self.conditions, "contract": list(self.contract), "notes": list(self.notes),
            "seconds": self.seconds, "proposers": list(self.proposers), "hints": list(self.hints), "llm": self.llm,
            "phases": self.phases, "floor": self.floor, "best_over_floor": self.best_over_floor,
        }
