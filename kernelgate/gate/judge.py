"""The judge: prepares a task once (oracle, admission), then checks candidates in their own processes."""
from __future__ import annotations

import json
import logging
import random
import struct
import secrets
import time
from dataclasses import dataclass, field
from typing import Any

import torch

from .. import clock, digest, workload
from ..sandbox import ipc
from ..config import GateConfig
from ..errors import KernelgateError
from ..oracle import Oracle, Runs
from ..records import Check, Contract, Reason, Status, Verdict
from ..sandbox import Spares, Worker, WorkerFailure
from . import admission, correctness, lowprec, screen, timing
from . import memory as memory_mod

log = logging.getLogger(__name__)

ALLOWED_FLAG_CHANGES = {
    "tf32": {"cuda.matmul.allow_tf32", "cudnn.allow_tf32", "float32_matmul_precision"},
    "bf16": {"cuda.matmul.allow_bf16_reduced_precision_reduction", "float32_matmul_precision"},
    "fp16": {"cuda.matmul.allow_fp16_reduced_precision_reduction"},
}


QUANTIZING_OPS = ("round", "quantize_per_tensor", "quantize_per_channel", "fake_quantize_per_tensor_affine",
                  "fake_quantize_per_channel_affine")


class Rejected(Exception):
    def __init__(self, reason: Reason, check: Check):
        super().__init__(check.detail)
        self.reason, self.check = reason, check


def resolve_device(target: str) -> str:
    """Map a target to a torch device; a CUDA target without a GPU is a task error (exit 2)."""
    t = target.lower()
    if t == "cpu":
        return "cpu"
    if t in ("cuda", "gpu") or t.startswith("cuda:") or t in ("h100", "h200", "a100", "l40s", "b200"):
        if not torch.cuda.is_available():
            raise KernelgateError(f"target '{target}' needs a CUDA GPU, and none is visible to PyTorch "
                                  f"(torch {torch.__version__}); use --target cpu", Reason.NO_DEVICE)
        return t if t.startswith("cuda:") else "cuda"
    raise KernelgateError(f"unknown target '{target}': use cpu or cuda")


def device_name(device: str) -> str:
    if device.startswith("cuda"):
        return torch.cuda.get_device_name(torch.device(device))
    import platform
    return f"cpu ({platform.processor() or platform.machine()}, {torch.get_num_threads()} threads)"


@dataclass
class Task:
    """A reference ready for judging: loaded, probed, admitted."""

    ref: workload.Reference
    oracle: Oracle
    contract: Contract
    device: str
    target: str
    admission: Check
    given: list[Any]
    out_meta: list[torch.Tensor] = field(default_factory=list)   # task-dtype outputs on the given inputs
    floor: Any = None                   # roofline.Floor on this device, or None when it cannot be counted
    memory: Any = None                  # memory.Plan: lean or not, and where the judge keeps its data

    @property
    def home(self) -> str:
        """Where the judge keeps inputs, the oracle and the outputs it compares (the device, or the host in
        the lean memory plan)."""
        return self.memory.home if self.memory is not None else self.device

    @property
    def lean(self) -> bool:
        return bool(self.memory is not None and self.memory.lean)

    @property
    def quantized(self) -> bool:
        """The reference rounds floats onto an integer grid (requantization), as recorded from its ops."""
        return any(op in self.oracle.ops for op in QUANTIZING_OPS)

    @property
    def hash(self) -> str:
        return self.ref.hash

    def out_bytes(self) -> int:
        return sum(o.numel() * o.element_size() for o in self.out_meta)


def prepare(spec: workload.Spec, target: str, contract: Contract, memory: str = "auto") -> Task:
    """Load the reference, measure what its forward needs on the device and plan the gate's memory
    (gate/memory.py), probe it (random? tensors out?), and run task admission."""
    device = resolve_device(target)
    ref = workload.load_reference(spec)
    ref_peak = None
    if device.startswith("cuda"):
        try:
            ref_peak = memory_mod.peak(ref.build(seed=0).to(device), ref.inputs(seed=0, device="cpu"), device)
        except torch.cuda.OutOfMemoryError as e:
            raise KernelgateError(f"the reference's forward does not fit on {device_name(device)}: {e}",
                                  Reason.TASK_LOAD) from None
    try:
        mplan = memory_mod.plan(device, ref_peak, memory)
    except ValueError as e:
        raise KernelgateError(str(e), Reason.USAGE) from None
    device_home = mplan.home
    oracle = Oracle(ref, device_home, contract)
    given = ref.inputs(seed=0, device=device_home)
    for i, _ in contract.domain:
        if i >= len(given):
            raise KernelgateError(f"contract declares a domain for input {i}, but the workload has {len(given)} inputs")
    out = oracle.probe(given)
    rng = torch.Generator().manual_seed(secrets.randbits(62))

    def trials():               # one at a time: a trial's inputs and outputs are dropped before the next
        for kind in ("given", "normal", "wide"):
            xs = workload.widen(ref.inputs(seed=int(torch.randint(1 << 30, (1,), generator=rng)), device=device_home),
                                kind, rng, contract)
            yield xs, oracle.run(xs)
    adm = admission.admit(oracle, trials())
    return Task(ref, oracle, contract, device, target, adm, given, out, _floor(oracle.model, given, device, contract),
                mplan)


def _floor(model: torch.nn.Module, given: list[Any], device: str, contract: Contract):
    """Roofline floor of the workload on this device (None, with a log line, when it cannot be counted)."""
    from .. import targets
    from ..profiling import roofline
    try:
        precision = "tf32" if "tf32" in contract.precision else None
        return roofline.floor(roofline.count(model, given), targets.machine(device), precision)
    except Exception as e:  # noqa: BLE001 - the floor is a signal, never a reason to refuse a task
        log.info("no roofline floor: %s", e)
        return None


@dataclass
class Batch:
    """One timed batch as the judge saw it: its plan, the judge's wall time, the worker's commitments."""

    tag: int
    plan: list
    walls_ms: list[float]                # per iteration, on the judge's clock: the basis of every claim
    samples_ms: list[float]              # in-process samples: diagnostics, never the basis of a claim
    commits: list                        # per iteration: [output digests, input digests after the call]


@dataclass
class Trial:
    name: str
    inputs: list[Any]
    state: dict[str, torch.Tensor] | None       # None: keep the current parameters


def make_trials(task: Task, seed: int, cfg: GateConfig) -> list[Trial]:
    """Correctness trials from the secret seed: widened distributions and integer ranges, perturbed and negated
    parameters, edits of one trial's inputs, NaN/Inf and extreme inputs (gate/trials.py), then varied shapes."""
    from . import trials as trial_plan
    g = torch.Generator().manual_seed(seed)
    trials = [Trial(name, xs, state) for name, xs, state in trial_plan.plan(task, g, cfg.trials)]
    for v in task.contract.vary:
        for size in v.sizes:
            xs = workload.resize(task.ref.inputs(seed=int(torch.randint(1 << 30, (1,), generator=g)), device=task.home),
                                 v.inputs, v.dim, size, g)
            trials.append(Trial(f"shape: dim {v.dim} = {size}", xs, task.oracle.state0))
    return trials


class Session:
    """One candidate under judgement: its worker and the running list of checks."""

    def __init__(self, task: Task, cand: workload.Spec, cfg: GateConfig, label: str = "candidate",
                 trusted: bool = False, worker: Worker | None = None):
        self.task, self.cand, self.cfg, self.trusted = task, cand, cfg, trusted
        self.worker = worker or Worker(label, **worker_limits(task, cfg))
        # outputs (and the re-check's retained outputs) come back through shared memory, to where the judge
        # keeps its data (the device, or the host in the lean memory plan)
        self.worker.device = task.home
        self.worker.reply_capacity = (cfg.rechecks + 1) * task.out_bytes() if task.out_bytes() >= ipc.BULK_MIN else 0
        self.checks: list[Check] = []
        self.notes: list[str] = []
        self.pooled = False                 # the worker holds the timing pool (lean plan: only while timed)
        self.os_threads0 = 0
        self.rechecked = 0
        self.torch_threads = self.torch_threads0 = 0

    def fail(self, reason: Reason, name: str, detail: str) -> None:
        raise Rejected(reason, Check(name, False, detail))

    def request(self, msg: dict, timeout: float, what: str, stream=None) -> dict:
        try:
            reply = self.worker.request(msg, timeout, stream=stream)
        except WorkerFailure as f:
            detail = f.message + (f"\n{f.detail}" if f.detail and f.reason is Reason.CRASH else "")
            raise Rejected(f.reason, Check(what, False, detail)) from None
        if "observations" in reply and not self.trusted:
            self.observe(reply["observations"], what)
        return reply

    def observe(self, obs: dict, what: str) -> None:
        allowed = set().union(*(ALLOWED_FLAG_CHANGES.get(p, set()) for p in self.task.contract.precision))
        changed = {k: v for k, v in obs.get("flags_changed", {}).items() if k not in allowed}
        if "num_threads" in changed:
            self.fail(Reason.THREADS, "thread settings", f"torch.get_num_threads changed {changed['num_threads'][0]} -> "
                      f"{changed['num_threads'][1]} during {what}")
        if changed:
            self.fail(Reason.FLAGS, "global numerics flags",
                      "changed during " + what + ": " + ", ".join(f"{k} {a} -> {b}" for k, (a, b) in changed.items()))
        if obs.get("timers_changed"):
            self.fail(Reason.TIMER, "timer identity", f"replaced during {what}: {', '.join(obs['timers_changed'])}")
        self.torch_threads = int(obs.get("torch_threads", 0))
        before, now = obs.get("py_threads", [0, 0])
        if now > before:
            names = [str(n) for n in obs.get("py_thread_names", [])][-(now - before):]
            self.fail(Reason.THREADS, "threads", f"{now - before} Python thread(s) started by the candidate ({what})"
                      + (f": {'; '.join(names)}" if names else ""))
        for m in obs.get("loaded_reference", []):
            note = f"the candidate loaded the reference file as module '{m}' (a fallback to the reference is not a speedup)"
            if note not in self.notes:
                self.notes.append(note)

    def build(self, compile_options: dict | None = None, baseline: bool = False) -> None:
        """Import and construct in the worker; baselines (the reference itself) skip the fallback note."""
        t = self.task
        self.request({"op": "prime", "device": t.device}, self.cfg.build_timeout, "start")
        # counted from outside before the candidate's import: threads it starts at import count too
        self.os_threads0, self.torch_threads0 = self.worker.os_threads(), self.torch_threads
        self.request({"op": "build", "path": self.cand.path, "cls": self.cand.cls, "init_inputs": t.ref.init_inputs,
                      "state": t.oracle.state0, "device": t.device, "ref_path": "" if baseline else t.ref.spec.path,
                      "guard": "observe" if baseline else "enforce",
                      "compile": compile_options is not None, "compile_options": compile_options or {}},
                     self.cfg.build_timeout, "build")
        self.checks.append(Check("build", True, f"{self.cand.cls} constructed, reference state_dict loaded (strict)"))

    def settle(self) -> None:
        """End of the build phase: one call on the workload's own inputs for each shape the trials will use
        (so torch.compile, Triton and extension builds, which start compilers, happen now), then the worker
        is locked down: no new processes from here on, checked from outside. The outputs of these calls are
        not judged; the trials' inputs are drawn from a secret seed afterwards."""
        t = self.task
        shapes = [t.given] + [workload.resize(t.ref.inputs(seed=0, device=t.home), v.inputs, v.dim, size,
                                              torch.Generator().manual_seed(0))
                              for v in t.contract.vary for size in v.sizes]
        for xs in shapes:
            self.call(xs)
        try:
            self.worker.lockdown(self.cfg.call_timeout)
        except WorkerFailure as f:
            self.fail(f.reason, "isolation", f.message)
        self.checks.append(Check("isolation", True, "; ".join(self.worker.protections) or "none reported"))

    def call(self, xs: list[Any]) -> dict:
        """One forward on `xs`, written into an input buffer the judge picks at random (timing.SLOTS)."""
        return self.request({"op": "call", "inputs": xs, "poison_bytes": (1 if self.task.lean else 2) * self.task.out_bytes(),
                             "slot": secrets.randbelow(timing.SLOTS)}, self.cfg.call_timeout, "forward")

    def check_outputs(self, name: str, xs: list[Any], runs: Runs, reply: dict) -> str:
        """Structure, metadata, aliasing, input integrity, then numbers. Returns the worst error line."""
        t = self.task
        out = reply["output"]
        if not isinstance(out.get("tensors"), list) or any(type(c) is not torch.Tensor for c in out["tensors"]):
            self.fail(Reason.OUTPUT_TYPE, "output type", f"the output is not made of plain tensors ({name})")
        self.check_meta(name, out.get("single"), out.get("meta"), runs.task)
        if len(out["tensors"]) != len(runs.task):
            self.fail(Reason.OUTPUT_TYPE, "output structure", f"{len(out['tensors'])} tensors for "
                      f"{len(runs.task)} outputs ({name})")
        changed = reply.get("inputs_changed")
        if not isinstance(changed, list) or not all(isinstance(i, int) for i in changed):
            self.fail(Reason.INPUT_MUTATED, "inputs unchanged", f"the worker did not report on the inputs ({name})")
        if changed and not t.contract.inplace:
            self.fail(Reason.INPUT_MUTATED, "inputs unchanged", f"input {changed[0]} was modified by the candidate "
                      f"({name}); declare inplace = true in the contract if intended")
        worst = ""
        for k, (c, g, b) in enumerate(zip(out["tensors"], runs.oracle, runs.task)):
            if correctness.NONFINITE_TRIAL in name:
                c = correctness.unjudged_where_nonfinite(c, g)
            chk = _compare(c, g, b, {n: r[k] for n, r in runs.permitted.items()}, name, t.quantized,
                           t.contract.one_step)
            if not chk.ok:
                reason = Reason.NONFINITE if "NaN/Inf" in chk.detail else Reason.MISMATCH
                self.fail(reason, name, chk.detail + ("" if len(runs.task) == 1 else f" (output {k})"))
            worst = chk.detail
        return worst

    def trials(self) -> None:
        seed = secrets.randbits(62)          # drawn after the candidate is constructed
        t = self.task
        for k, trial in enumerate(make_trials(t, seed, self.cfg)):
            if trial.state is not None:
                self.request({"op": "load", "state": trial.state}, self.cfg.call_timeout, "load_state_dict")
                t.oracle.load(trial.state)
            reply = self.call(trial.inputs)                  # candidate first, then the reference
            runs = t.oracle.run(trial.inputs)
            detail = self.check_outputs(trial.name, trial.inputs, runs, reply)
            self.checks.append(Check(trial.name, True, f"{workload.describe(trial.inputs)}: {detail}"))
        t.oracle.load(t.oracle.state0)
        self.request({"op": "load", "state": t.oracle.state0}, self.cfg.call_timeout, "load_state_dict")

    def pause(self) -> None:
        """Freeze the worker (while another implementation is timed); a no-op before it started."""
        if self.worker.proc is not None and not self.worker.frozen:
            self.worker.freeze()

    def resume(self) -> None:
        if self.worker.proc is not None and self.worker.frozen:
            self.worker.thaw()

    def send_pool(self, pool: list[list[Any]], scalable: list[bool]) -> None:
        """The timed loops' input pool, and the RMS of each entry's inputs (the judge's figures, so that it
        rebuilds a timed iteration's inputs bit for bit wherever it keeps the pool)."""
        rms = [timing.rms(xs, scalable) for xs in pool]
        self.request({"op": "pool", "pool": pool, "scalable": scalable, "rms": rms}, self.cfg.call_timeout,
                     "input pool")
        self.pooled = True

    def release(self) -> None:
        """The worker gives back its inputs' and outputs' device memory (lean memory plan)."""
        self.request({"op": "release"}, self.cfg.call_timeout, "release")
        self.pooled = False

    def warm_up(self, plan: list, warmup_ms: float, warmup_min: int) -> None:
        """Warm-up by time, in its own request so the judge's clock on timed batches excludes it."""
        self.request({"op": "warmup", "plan": plan, "warmup_ms": warmup_ms, "warmup_min": warmup_min},
                     self.cfg.call_timeout + warmup_ms / 1e3, "warm-up")

    def time_batch(self, tag: int, plan: list, null: bool = False) -> "Batch":
        """One timed batch, one iteration at a time on the judge's clock: each step's (pool index, scale,
        seed) is sent only when its clock starts, and its answer (digests of the outputs and of the inputs
        after the call, the output's description) stops it. Every iteration's output structure and metadata
        are checked as a trial's; `null` times the harness alone (a stand-in output)."""
        t = self.task
        msg = {"op": "time", "tag": tag, "n": len(plan), "flush_bytes": timing.flush_bytes(t.device)}
        if null:
            msg["null"] = [[list(o.shape), str(o.dtype).replace("torch.", "")] for o in t.out_meta]
            msg["single"] = t.oracle.single
        walls: list[float] = []
        answers: list[Any] = []

        def stream() -> None:
            for j, s, seed in plan:
                step = struct.pack("<qdq", j, s, seed)
                t0 = clock.perf_ns()
                got = self.worker.roundtrip(step, self.cfg.call_timeout, "timed loop")
                walls.append(clock.ms_since(t0))
                if got is None:                   # the worker's final reply came instead (an error)
                    return
                answers.append(json.loads(got))

        self.request(msg, self.cfg.call_timeout, "timed loop", stream=stream)
        ok = len(answers) == len(plan) and all(
            isinstance(a, dict) and isinstance(a.get("d"), list) and isinstance(a.get("i"), list)
            and isinstance(a.get("m"), dict) for a in answers)
        if not ok:
            self.fail(Reason.RECHECK, "timed loop", f"the worker answered {len(answers)} of {len(plan)} timed "
                      "iterations with a commitment")
        if not null:
            for k, a in enumerate(answers):
                self.check_meta(f"timed iteration {tag + k}", a["m"].get("single"), a["m"].get("meta"), t.out_meta)
        return Batch(tag, plan, walls, [float(a.get("t", 0.0)) for a in answers],
                     [[a["d"], a["i"]] for a in answers])

    def check_meta(self, name: str, single: Any, metas: Any, ref_outs: list[torch.Tensor]) -> None:
        """Output structure, dtype, shape, device, strides and aliasing, as reported for one call, against
        the reference's outputs on the same shapes."""
        t = self.task
        n = len(ref_outs)
        if single != t.oracle.single or not isinstance(metas, list) or len(metas) != n \
                or not all(isinstance(m, dict) for m in metas):
            want = "one tensor" if t.oracle.single else f"a sequence of {n} tensors"
            got = ("one tensor" if single is True else f"a sequence of {len(metas)} tensors"
                   if isinstance(metas, list) and single is False else "something else")
            self.fail(Reason.OUTPUT_TYPE, "output structure", f"returned {got}, expected {want} ({name})")
        for k, (meta, b) in enumerate(zip(metas, ref_outs)):
            label = f"output {k}" if n > 1 else "output"
            if not {"dtype", "shape", "stride", "device", "aliased"} <= set(meta):
                self.fail(Reason.OUTPUT_TYPE, "output structure", f"{label}: incomplete description ({name})")
            bad = correctness.check_meta(meta, b, t.device, t.contract.strides, label)
            if bad:
                self.fail(bad[0], "output dtype/shape/device/strides", f"{bad[1]} ({name})")
            if meta.get("aliased") and not t.contract.inplace:
                self.fail(Reason.ALIASING, "no aliasing", f"{label} shares memory with an input ({name}); "
                          "declare inplace = true in the contract if intended")

    def recheck(self, batch: "Batch", picks: list[int], pool: list[list[Any]], scalable: list[bool]) -> None:
        """Fetch the outputs of iterations picked after the batch returned; each must be the one committed
        to while the clock ran (digest), the inputs after the call must be the ones given (digest of the
        rebuilt inputs), and the numbers must match the oracle on those inputs."""
        reply = self.request({"op": "fetch", "indices": picks}, self.cfg.call_timeout, "re-check fetch")
        outputs = reply.get("outputs")
        if self.task.lean:          # the picked outputs are at home now: the worker gives its memory back
            self.release()
        if not isinstance(outputs, list) or len(outputs) != len(picks):
            self.fail(Reason.RECHECK, "timed-loop re-check", "the worker did not hand over the picked outputs")
        t = self.task
        for k, tensors in zip(picks, outputs):
            it = batch.tag + k
            out_digests, in_digests = batch.commits[k]
            if not isinstance(tensors, list) or len(tensors) != len(t.out_meta) \
                    or any(type(c) is not torch.Tensor for c in tensors):
                self.fail(Reason.RECHECK, "timed-loop re-check", f"iteration {it}: outputs of the wrong kind")
            if [digest.digest(c) for c in tensors] != list(out_digests):
                self.fail(Reason.RECHECK, "timed-loop re-check", f"the output of timed iteration {it} changed after "
                          "the clock stopped (it differs from the one committed while timed)")
            j, scale, seed = batch.plan[k]
            # rebuilt on the worker's device type (the same operations give the same bits), kept at home
            dev = [x.to(t.device) if isinstance(x, torch.Tensor) else x for x in pool[j]]
            xs = timing.fresh(dev, scale, seed, scalable, timing.rms(pool[j], scalable), t.device)
            xs = [x.to(t.home) if isinstance(x, torch.Tensor) else x for x in xs]
            del dev
            if digest.digests(xs) != list(in_digests) and not t.contract.inplace:
                self.fail(Reason.INPUT_MUTATED, "inputs unchanged", f"the inputs of timed iteration {it} were "
                          "modified by the candidate; declare inplace = true in the contract if intended")
            runs = t.oracle.run(xs)
            for o, (c, g, b) in enumerate(zip(tensors, runs.oracle, runs.task)):
                if c.shape != b.shape or c.dtype != b.dtype:
                    self.fail(Reason.RECHECK, "timed-loop re-check", f"iteration {it}: output {o} has the wrong kind")
                chk = _compare(c, g, b, {n: r[o] for n, r in runs.permitted.items()}, "re-check", t.quantized,
                               t.contract.one_step)
                if not chk.ok:
                    self.fail(Reason.RECHECK, "timed-loop re-check",
                              f"output of timed iteration {it} is wrong: {chk.detail}")
        self.rechecked += len(picks)

    def check_threads(self) -> None:
        """No process of the candidate's but its worker (a child forked before a lockdown it forged would
        show here); OS threads (read from outside) may grow only by threads torch itself started."""
        others = self.worker.descendants()
        if others:
            self.fail(Reason.THREADS, "processes", f"the candidate's worker has {len(others)} other process(es) "
                      f"alive after its build (pids {', '.join(map(str, list(others)[:5]))})")
        now = self.worker.os_threads()
        grown = now - self.os_threads0 - (self.torch_threads - self.torch_threads0)
        if self.os_threads0 and grown > 0:
            self.fail(Reason.THREADS, "threads", f"OS thread count of the candidate's process grew "
                      f"{self.os_threads0} -> {now} since before its import, {grown} not started by torch")
        self.checks.append(Check("threads", True, f"{now} OS threads: none started by the candidate since before "
                                 "its import"))


def _compare(c: torch.Tensor, g: torch.Tensor, b: torch.Tensor, permitted: dict[str, torch.Tensor],
             label: str, quantized: bool, one_step: float | None = None) -> Check:
    """Tolerance and comparison on the oracle's device (the candidate's copy is moved there).

    Outputs on a quantization grid (fp8, or integer outputs of a reference that rounds floats to
    integers) are judged in grid steps: two or more steps fail anywhere; one-step differences may
    not exceed the contract's `one_step` share, by default max(0.1%, twice the reference's own rate)."""
    if b.dtype in lowprec.FP8 or (quantized and not b.dtype.is_floating_point and b.dtype != torch.bool
                                  and g.dtype == b.dtype):
        own = lowprec.quant_steps(b.cpu(), g.cpu())
        allowed = one_step if one_step is not None else max(lowprec.FLOOR, 2 * own.one_fraction)
        target = b if own.two_plus else g        # an oracle steps away from the reference is no grid reference
        ok, msg = lowprec.check_requant(c.cpu(), target.cpu(), allowed)
        return Check(label, ok, f"quantized output: {msg}" if ok else f"quantized output off the oracle: {msg}")
    tol = correctness.derive(g, permitted, b.dtype)
    return correctness.compare(c.to(g.device), g, b, tol, label)


def timing_pool(task: Task, n: int, rng: torch.Generator) -> tuple[list[list[Any]], list[bool]]:
    """Input sets for timed loops, from the workload's own generator; which inputs may be rescaled."""
    pool = [task.ref.inputs(seed=int(torch.randint(1 << 30, (1,), generator=rng)), device=task.home) for _ in range(n)]
    scalable = [isinstance(x, torch.Tensor) and x.is_floating_point() and task.contract.domain_of(i) is None
                for i, x in enumerate(pool[0])]
    return pool, scalable


def judge(task: Task, cand: workload.Spec, cfg: GateConfig) -> Verdict:
    """Full correctness gate for one candidate, in a process of its own."""
    verdict, session = judge_session(task, cand, cfg)
    session.worker.close()
    return verdict


def worker_limits(task: Task, cfg: GateConfig) -> dict:
    """The limits every candidate's worker gets (for sandbox.Spares)."""
    return {"output_limit": cfg.output_limit, "memory_limit": cfg.memory_limit if task.device == "cpu" else None}


def judge_session(task: Task, cand: workload.Spec, cfg: GateConfig,
                  spares: Spares | None = None) -> tuple[Verdict, Session]:
    """The gate, returning the candidate's live worker as well (closed unless accepted), so the same
    process can be timed next. The caller closes it. With `spares`, the candidate's process is a spare
    started earlier, and the next spare starts once this candidate is built."""
    t0 = time.perf_counter()
    s = Session(task, cand, cfg, worker=spares.take() if spares is not None else None)
    s.checks.append(task.admission)
    s.notes.extend(screen.scan(cand.path))
    status, reason, message = Status.ACCEPTED, Reason.OK, "all checks passed"
    try:
        if not task.admission.ok:
            return _verdict(task, cand, Status.ERROR, Reason.DEGENERATE, task.admission.detail, s, t0), s
        s.checks.append(Check("contract", True, "; ".join(task.contract.assumptions())))
        s.build()
        if spares is not None:
            spares.refill()
        s.settle()
        s.trials()
        rng = torch.Generator().manual_seed(secrets.randbits(62))
        # the lean memory plan: one pool entry, and fewer outputs kept for the re-check (each is a task's worth)
        pool, scalable = timing_pool(task, 1 if task.lean else 2, rng)
        iters = min(cfg.recheck_iters, 3) if task.lean else cfg.recheck_iters
        s.send_pool(pool, scalable)
        plans = timing.Plans(random.Random(secrets.randbits(62)), len(pool), {})
        s.warm_up(plans.new(iters)[1], warmup_ms=0.0, warmup_min=1)
        batch = s.time_batch(*plans.new(iters))
        pick = random.Random(secrets.randbits(62))          # drawn after the batch returned
        picks = sorted(pick.sample(range(len(batch.plan)), min(cfg.rechecks, len(batch.plan))))
        s.recheck(batch, picks, pool, scalable)
        s.checks.append(Check("timed-loop re-check", True, f"{s.rechecked} outputs from timed iterations, picked "
                              "after the batch, match their commitments and the oracle"))
        s.check_threads()
    except Rejected as r:
        s.checks.append(r.check)
        status, reason, message = Status.REJECTED, r.reason, f"{r.check.name}: {r.check.detail.splitlines()[0]}"
    except BaseException:
        s.worker.close()
        raise
    if status is not Status.ACCEPTED:
        s.worker.close()
    return _verdict(task, cand, status, reason, message, s, t0), s


def _verdict(task: Task, cand: workload.Spec, status: Status, reason: Reason, message: str, s: Session,
             t0: float) -> Verdict:
    try:
        chash = workload.file_hash(cand.path)
    except OSError:
        chash = ""
    notes = tuple(s.notes)
    if task.lean:
        notes += (f"lean memory plan ({task.memory.reason}): inputs, oracle and compared outputs on the host, "
                  "workers hold a task's worth only while called or timed (docs/GATE.md)",)
    return Verdict(status, reason, message, tuple(s.checks), notes, tuple(task.contract.assumptions()),
                   task.hash, chash, task.target, device_name(task.device), time.perf_counter() - t0)

