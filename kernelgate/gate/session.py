"""A worker session the judge holds: one implementation's process (a candidate, or a baseline that is the
reference itself) and the running list of checks. Every request, trial, timed batch and re-check goes
through a Session; a failed check raises Rejected (gate/judge.py turns it into the verdict)."""
from __future__ import annotations

import contextlib
import json
import secrets
import struct
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable, ContextManager

import torch

from .. import clock, digest, workload
from ..config import GateConfig
from ..oracle import Runs
from ..records import Check, Reason
from ..sandbox import Worker, WorkerFailure, ipc, isolation, prebuild
from . import checks, correctness, memory, timing
from .task import Task
from .layouts import LAYOUTS
from .trials import FAMILY, FAR, LAYOUT, iter_trials, layout_keys, main_count, relaid
from .workers import prebuilder, prime_request, spare_options, uses_jax, worker_limits  # noqa: F401 - callers' names

ALLOWED_FLAG_CHANGES = {
    "tf32": {"cuda.matmul.allow_tf32", "cudnn.allow_tf32", "float32_matmul_precision"},
    "bf16": {"cuda.matmul.allow_bf16_reduced_precision_reduction", "float32_matmul_precision"},
    "fp16": {"cuda.matmul.allow_fp16_reduced_precision_reduction"},
}


LEAN_LAYOUTS = 2                # layout kinds a judgement in the lean memory plan tries
FIRST_HOLD_BYTES = 4 << 30      # the build phase's calls held for judging (inputs and outputs) at most
Phase = Callable[[str], ContextManager]     # name -> a context timing that part (the search's accounting)


def no_phase(name: str) -> ContextManager:
    return contextlib.nullcontext()


class Rejected(Exception):
    """A failed check: its reason and the Check that records it."""

    def __init__(self, reason: Reason, check: Check):
        super().__init__(check.detail)
        self.reason, self.check = reason, check

    @property
    def line(self) -> str:
        """The check's name and the first line of its detail (a verdict's message)."""
        first = self.check.detail.splitlines()[0] if self.check.detail else ""
        return f"{self.check.name}: {first}" if first else self.check.name


@dataclass
class Batch:
    """One timed batch as the judge saw it: its plan, the judge's wall time, the worker's commitments."""

    tag: int
    plan: list
    walls_ms: list[float]                # per iteration, on the judge's clock: the basis of every claim
    samples_ms: list[float]              # in-process samples: diagnostics, never the basis of a claim
    commits: list                        # per iteration: [output digests, input digests after the call]


#: more runs of the reference, on inputs moved one ulp, before an ill-conditioned output is refused (Session.ill)
SECOND_LOOK = 4


def _pause() -> None:
    """0.2-0.6 s without a call, a secret: a candidate acting only on calls after a pause (red team 36) acts now."""
    time.sleep(0.2 + secrets.randbelow(400) / 1000)


class Session:
    """One candidate under judgement: its worker and the running list of checks."""

    def __init__(self, task: Task, cand: workload.Spec, cfg: GateConfig, label: str = "candidate",
                 trusted: bool = False, worker: Worker | None = None, own_code: bool = False):
        """`trusted`: the reference as a baseline (checked, not enforced). `own_code`: code of the user's and
        kernelgate's only (a baseline, or a module emitted from one): its worker shares the trusted compile
        cache (cfg.trusted_cache), which no candidate's worker can write."""
        self.task, self.cand, self.cfg, self.trusted = task, cand, cfg, trusted
        # the lean plan's trials (two families, two layouts, no repeated calls, no deep re-read of held calls)
        # where the task's memory asks for it, or for own code: the module emitted from a baseline is the
        # reference's own code in kernelgate's wrapper, whose check is of the wrapper (construction, state, the
        # fast path), not of an adversary's numerics (a 6 GiB task's full plan took over 130 s on the H200)
        self.short = bool(getattr(task, "lean", False)) or own_code
        shared = cfg.trusted_cache if (trusted or own_code) else None
        self.worker = worker or Worker(label, **worker_limits(task, cfg), cache=shared)
        # outputs (and the re-check's retained outputs) come back through shared memory, to where the judge
        # keeps its data (the device, or the host in the lean memory plan)
        self.worker.device = task.home
        # (the lean plan fetches the re-check's outputs one at a time: a task's worth of host memory, not four)
        self.worker.reply_capacity = ((1 if task.lean else cfg.rechecks + 1) * task.out_bytes()
                                      if task.out_bytes() >= ipc.BULK_MIN else 0)
        self.checks: list[Check] = []
        self.notes: list[str] = []
        self.pooled = False                 # the worker holds the timing pool (lean plan: only while timed)
        self.os_threads0 = 0
        self.thread_stamps0: dict[int, int] = {}    # the worker's threads before the import: id -> start time
        self.rechecked = 0
        self.given: tuple[list[Any], float] | None = None      # trial 1's tolerances and input scale (`floored`)
        self.torch_threads = self.torch_threads0 = 0
        self.phase: Phase = no_phase        # the search times the worker's start apart from the build
        self.profiled = True                # the worker may be profiled: the prime starts the profiler's threads
        self.deadline: float | None = None  # time.monotonic() by which the judgement must be done (a search's)
        # the layout kinds tried: all, or in the lean memory plan two, a secret (each a call in the build phase and
        # a trial, each a task's worth through the host: a 16 GiB task's build phase took 60-90 s a layout)
        self.layouts = tuple(sorted(secrets.SystemRandom().sample(LAYOUTS, LEAN_LAYOUTS))) \
            if self.short else LAYOUTS
        self.first: list[tuple[str, list[Any]]] = []    # the build phase's calls held for judging (first_calls)

    def fail(self, reason: Reason, name: str, detail: str) -> None:
        raise Rejected(reason, Check(name, False, detail))

    def request(self, msg: dict, timeout: float, what: str, stream=None) -> dict:
        def out_of_budget() -> None:
            if self.deadline is not None and time.monotonic() >= self.deadline:
                self.fail(Reason.TIMEOUT, "budget", f"the judgement was not done when the search's budget for it "
                          f"ran out (at {what}): the candidate is not accepted, and no fault of its was found")
        out_of_budget()
        if self.deadline is not None:
            timeout = min(timeout, max(self.deadline - time.monotonic(), 1.0))
        try:
            reply = self.worker.request(msg, timeout, stream=stream)
        except WorkerFailure as f:
            if f.reason is Reason.TIMEOUT:
                out_of_budget()
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
        if obs.get("rebound"):
            self.fail(Reason.FLAGS, "process-wide functions and hooks", f"changed during {what}: "
                      f"{', '.join(map(str, obs['rebound'][:5]))} (every other model in the caller's process runs them)")
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
        with self.phase("worker start"):        # a spare started ahead has (part of) this behind it
            self.request(prime_request(t, self.cand.path, self.profiled), self.cfg.build_timeout, "start")
        # counted from outside before the candidate's import: threads it starts at import count too
        self.os_threads0, self.torch_threads0 = self.worker.os_threads(), self.torch_threads
        self.thread_stamps0 = isolation.thread_stamps(self.worker.pid) if self.worker.pid else {}
        with self.phase("build"):
            self._build(compile_options, baseline)
        self.checks.append(Check("build", True, f"{self.cand.cls} constructed, reference state_dict loaded (strict)"))

    def _prebuilt(self, baseline: bool) -> dict:
        """The candidate's literal load_inline calls, built outside its worker (sandbox/prebuild.py: the trusted
        build cache), copied into the worker's private directory; noted."""
        pb = None if baseline or self.trusted else prebuilder(self.cfg)
        if pb is None:
            return {}
        try:
            text = Path(self.cand.path).read_text(errors="replace")
        except OSError:
            return {}
        built = pb.ready(text, self.cfg.build_timeout)
        for b in built:
            how = ("from the build cache" if b.cached else f"built outside the worker in {b.seconds:.1f} s")
            self.notes.append(f"extension {b.spec['name']}: " + (how if b.library is not None else
                              "its build failed outside the worker (the same call fails in it)"))
        return prebuild.offer(built, self.worker.workdir)

    def _build(self, compile_options: dict | None, baseline: bool) -> None:
        t = self.task
        # (the oracle is not touched here: a baseline builds in the background while candidates' trials load
        # other parameters into it; a judgement that ends early sets it back itself, judge.py)
        self.request({"op": "build", "path": self.cand.path, "cls": self.cand.cls, "init_inputs": t.ref.init_inputs,
                      "prebuilt": self._prebuilt(baseline), "shape": t.shape,
                      "state": t.oracle.state0, "device": t.device, "ref_path": "" if baseline else t.ref.spec.path,
                      "grads": t.oracle.grads, "rng": not t.oracle.uses_rng, "hooks": t.oracle.hooked,
                      "guard": "observe" if baseline else "enforce",
                      "library_paths": self.worker.library_paths([self.cand.path, t.ref.spec.path]),
                      "compile": compile_options is not None, "compile_options": compile_options or {}},
                     self.cfg.build_timeout, "build")

    def settle(self) -> None:
        """End of the build phase: one call on the workload's own inputs for each shape and layout the trials
        will use (so torch.compile, Triton and extension builds, which start compilers, happen now), then the worker
        is locked down: no new processes from here on, checked from outside. The outputs of these calls are
        held unread (the full plan) and judged once no thread of the candidate's is left (`first_calls`); the
        trials' inputs are drawn from a secret seed afterwards."""
        t = self.task
        shapes = [t.given] + [workload.resize(t.inputs(0), v.inputs, v.dim, size,
                                              torch.Generator().manual_seed(0))
                              for v in t.contract.vary for size in v.sizes]
        lean = t.lean and t.device.startswith("cuda")     # the worker gives its memory back between calls: the
        calls = [("first call", lambda xs=xs: xs) for xs in shapes]  # judge probes the layouts on the device between
        for which in self.layouts:          # the layout trials' strides: a compiler recompiles for them now
            keys = layout_keys(t, which)
            if keys:
                calls.append((f"first call, {LAYOUT}: {which}", lambda keys=keys, which=which: relaid(
                    t, t.given, keys, which)))
        each = t.out_bytes() + sum(x.numel() * x.element_size() for x in t.given if isinstance(x, torch.Tensor))
        for k, (name, make) in enumerate(calls):
            xs = make()                     # built one at a time (a relaid 16 GiB input is 16 GiB more)
            hold = not t.lean and (k + 1) * each <= FIRST_HOLD_BYTES
            self.request({"op": "call", "inputs": xs, "settle": True, "hold": hold}, self.cfg.call_timeout,
                         "forward" + (" (inputs in another memory layout)" if LAYOUT in name else ""))
            if hold:
                self.first.append((name, xs))
            del xs
            if lean:
                self.release(shed=False)
        try:
            self.worker.lockdown(self.cfg.call_timeout)
        except WorkerFailure as f:
            self.fail(f.reason, "isolation", f.message)
        if self.worker.locked:
            self.threads_after_lockdown()
        # read in the worker only now: with no thread of the candidate's left, nothing the harness reads can change
        # under it (kernelgate/sandbox/worker.py, op_build)
        self.request({"op": "observe"}, self.cfg.call_timeout, "build")
        self.checks.append(Check("isolation", True, "; ".join(self.worker.protections) or "none reported"))
        if self.first:
            self.first_calls()

    def first_calls(self) -> None:
        """The build phase's calls judged, the first in each shape and layout (red team 36: a module returning zeros
        on its first call of each kind, right afterwards, was accepted). Each against the reference's run on its own
        inputs (a layout may change the reference's order of summation, so its bits)."""
        for i, (name, xs) in enumerate(self.first):
            reply = self.request({"op": "settled", "index": i}, self.cfg.call_timeout, name)
            self.check_outputs(name, xs, self.task.oracle.run(xs), reply)
        self.request({"op": "settled", "drop": True}, self.cfg.call_timeout, "build")
        self.first = []
    def threads_after_lockdown(self, wait_s: float = 2.0) -> None:
        """After the lockdown no thread can start (isolation._lockdown_program), so one of the candidate's that is
        still alive could only be there to run beside the harness: every thread of the worker's (read from /proc, by
        its id and start time) must be one from before the candidate's import. Not a count: red team 17
        (`omp_thread_swap`) retired one of the runner's OpenMP workers (libgomp's omp_pause_resource_all, through
        ctypes) to make room for a thread of its own. Threads winding down (a compiler's pool) get `wait_s`."""
        before = self.thread_stamps0
        if not before:
            return
        def fresh(now: dict[int, int]) -> list[int]:
            return [t for t in sorted(now) if before.get(t) != now[t]]

        deadline = time.monotonic() + wait_s
        while fresh(now := isolation.thread_stamps(self.worker.pid)) and time.monotonic() < deadline:
            time.sleep(0.05)
        new = fresh(now)
        if new:
            # threads may be gone (a fork ends OpenBLAS's server in the parent, to start again on its next call);
            # none may be new, whatever the count
            names = isolation.thread_names(self.worker.pid)
            gone = [str(t) for t in sorted(before) if now.get(t) != before[t]]
            self.fail(Reason.THREADS, "threads", f"{len(new)} thread(s) of the worker's alive at the end of the build "
                      f"that were not there before the candidate's import ({len(before)} -> {len(now)} threads; new: "
                      f"{', '.join(f'{names.get(t, chr(63))} ({t})' for t in new)[:200]}; gone: {', '.join(gone)[:200] or 'none'}): "
                      "a candidate may not leave threads running beside the gate's own")

    def call(self, xs: list[Any]) -> dict:
        """One forward on `xs`, written into an input buffer the judge picks at random (timing.SLOTS)."""
        return self.request({"op": "call", "inputs": xs, "poison_bytes": memory.poison_bytes(self.task),
                             "slot": secrets.randbelow(timing.SLOTS), "lean": self.task.lean},
                            self.cfg.call_timeout, "forward")

    def check_outputs(self, name: str, xs: list[Any], runs: Runs, reply: dict) -> str:
        """Structure, metadata, aliasing, input integrity, then numbers. Returns the worst error line."""
        t = self.task
        out = reply["output"]
        rules = t.outputs
        if LAYOUT in name:                  # inputs in another layout: the outputs' strides are free
            rules = replace(rules, strides=False)
        self.problem(rules.kind(out.get("tensors"), name) or rules.described(out.get("single"), out.get("meta"),
                                                                              runs.task, name)
                     or rules.handed(out["tensors"], runs.task, name))
        changed = reply.get("inputs_changed")
        if not isinstance(changed, list) or not all(isinstance(i, int) for i in changed):
            self.fail(Reason.INPUT_MUTATED, "inputs unchanged", f"the worker did not report on the inputs ({name})")
        if changed and not t.contract.inplace:
            self.fail(Reason.INPUT_MUTATED, "inputs unchanged", f"input {changed[0]} was modified by the candidate "
                      f"({name}); declare inplace = true in the contract if intended")
        worst = ""
        nonfinite = correctness.NONFINITE_TRIAL in name
        expected = t.comparator.expected(runs)
        if self.given is None and name.startswith("trial 1 (given"):
            self.given = [e.tol for e in expected], checks.input_scale(xs)
        ratio = self.scale_ratio(xs) if FAMILY in name else 0.0
        more: list[Any] = []             # the reference's runs on inputs moved one ulp (`ill`), made once
        for k, (c, e0) in enumerate(zip(out["tensors"], expected)):
            chk = self.judged(name, k, c, self.adjusted(name, k, e0, ratio), xs, more, runs, nonfinite)
            if not chk.ok:
                reason = Reason.NONFINITE if "NaN/Inf" in chk.detail else Reason.MISMATCH
                self.fail(reason, name, chk.detail + ("" if len(runs.task) == 1 else f" (output {k})"))
            worst = chk.detail
        return worst

    def judged(self, name: str, k: int, c: Any, e: Any, xs: list[Any], more: list[Any], runs: Runs,
               nonfinite: bool = False) -> Check:
        """Output k of a call on `xs` against its expectation `e`; where the trial is ill-conditioned for the
        reference, a refusal judged again on the reference's spread (`ill`), and a
        pass, where the output is a batch of independent problems, problem by problem (`each_problem`)."""
        chk = e.check(c, name, nonfinite_inputs=nonfinite)
        ill = not nonfinite and e.tol is not None and e.grid is None and e.tol.ill and self.task.oracle.continuous
        spread = False
        if ill and not chk.ok:
            chk = self.ill(name, k, c, e, xs, more) or chk
            spread = chk.ok
        if ill and chk.ok and (spread or checks.hides_a_problem(e.tol, c, xs)):
            chk = self.each_problem(name, k, c, xs, more, runs) or chk      # one system's error excuses no other's
        return chk

    def adjusted(self, name: str, k: int, e: Any, ratio: float) -> Any:
        """Output k's expectation as the trial's kind changes it (checks.for_trial)."""
        given = self.given[0][k] if self.given is not None and k < len(self.given[0]) else None
        return checks.for_trial(e, name, given, ratio)

    def ill(self, name: str, k: int, c: Any, e0: Any, xs: list[Any], more: list[Any]) -> Check | None:
        """Output k of a call, refused, where the task-dtype reference itself erred
        ILL_UNITS units or more (correctness.Tolerance.ill): one run there is one draw of a wide spread (an exact
        copy of a float32 solve erred 6.8x the reference's in CI). Judged again with the reference's own error the
        worst of that run and SECOND_LOOK more, each on its inputs moved one ulp against the oracle on those
        inputs (Oracle.moved_runs: never its sensitivity to the inputs, red team 67's atan2 at a moved -0.0),
        capped (correctness.spread; that sensitivity says only whether the output is determined at all). None
        where none can be made (out of memory, the reference raising on every moved input: the refusal stands)."""
        if not self.moved(xs, more):
            return None
        stats = [correctness.error_stats(r.task[k], r.oracle[k], e0.compute) for r in more]
        moves = max(correctness.error_stats(r.oracle[k], e0.g, e0.compute)[2] for r in more)
        tol = correctness.spread(e0.tol, stats, moves)
        chk = replace(e0, tol=tol).check(c, name)
        if chk.ok:
            head = f"{name}: output {k} judged on the spread of {len(more) + 1} runs of the reference"
            if not any(n.startswith(head) for n in self.notes):         # re-checks: once
                self.notes.append(f"{head} (it erred {e0.tol.own_fro:.3g}, relative Frobenius norm: an "
                                  f"ill-conditioned trial): {chk.detail}")
            return chk
        return replace(chk, detail=chk.detail + f" (on the spread of {len(more) + 1} runs of the reference: "
                                                "an ill-conditioned trial)")

    def moved(self, xs: list[Any], more: list[Any]) -> bool:
        """`more` holds up to SECOND_LOOK runs of the reference on `xs` moved one ulp (made once a call: those the
        reference raises on left out); False where none can be made (out of memory, every moved input refused)."""
        if not more:
            try:
                more.extend(self.task.oracle.moved_runs(xs, SECOND_LOOK))
            except Exception:  # noqa: BLE001 - out of memory, or the reference raising on a moved input (singular)
                return False
        return True

    def each_problem(self, name: str, k: int, c: Any, xs: list[Any], more: list[Any], runs: Runs) -> Check | None:
        """Output k of an ill-conditioned trial that passed as a whole on a bound loose enough to hide a problem
        wiped (checks.hides_a_problem) or on the spread, where it is a batch of independent problems (along any
        of its dimensions, or in blocks: Oracle.separable): each problem judged on its own spread
        (Comparator.each_problem). None where it is no such batch or the moved runs cannot be made (the whole
        output's verdict stands: docs/GATE.md, Known gaps)."""
        t = self.task
        view = t.oracle.separable(xs, k)
        if view is None or not self.moved(xs, more):
            return None
        chk = t.comparator.each_problem(c, runs, more, k, name, view)
        return chk if chk.ok else replace(chk, detail=chk.detail + " (an ill-conditioned trial: each problem of "
                                                                    "a batch on its own spread)")

    def scale_ratio(self, xs: list[Any]) -> float:
        """The scale of a trial's inputs over trial 1's, at most 1 (0 before trial 1 is judged)."""
        return min(1.0, checks.input_scale(xs) / self.given[1]) if self.given is not None and self.given[1] > 0 else 0.0

    def problem(self, p: checks.Problem | None) -> None:
        """Reject on a failed output-metadata check (gate/checks.py)."""
        if p is not None:
            self.fail(p.reason, p.check, p.detail)

    def trials(self) -> None:
        seed = secrets.randbits(62)          # drawn after the candidate is constructed
        t = self.task
        loads = 0
        # one trial, a secret, is called again and again on the same inputs (full plan): a memo may hand back the output
        # it returned before, which the caller still holds (the worker reads earlier calls' tensors: sandbox/history.py)
        again = -1 if self.short or t.contract.inplace else secrets.randbelow(max(1, main_count(t, self.cfg.trials)))
        # a trial called after a pause, with earlier trials' outputs held (a caller's next step may come much later)
        paused = 2 + secrets.randbelow(max(1, main_count(t, self.cfg.trials) - 2))
        # one trial's data at a time
        for k, trial in enumerate(iter_trials(t, seed, main_count(t, self.cfg.trials), self.layouts, self.short)):
            if trial.state is not None:       # loads in turn: plain, versions set back (a `.data` write), written
                self.request({"op": "load", "state": trial.state, "quiet": loads % 3 == 1,   # into the tensors
                              "direct": loads % 3 == 2}, self.cfg.call_timeout, "load_state_dict")   # (jobs.load)
                loads += 1
                t.oracle.load(trial.state)
            if k == paused:
                _pause()
            # the reference's runs in a thread of the judge while the candidate's call is out (not in the lean plan:
            # the candidate first, then the reference, never both holding a task's worth at once)
            pending = None if t.lean else t.oracle.run_async(trial.inputs, trial.rounding)
            try:
                reply = self.call(trial.inputs)
            except BaseException:
                if pending is not None:
                    pending.wait()              # nothing runs the oracle beside the next session
                raise
            with self.judging():
                runs = pending.result() if pending is not None else t.oracle.run(trial.inputs, trial.rounding)
                detail = self.check_outputs(trial.name, trial.inputs, runs, reply)
                # (a trial with NaN inputs is never bit-equal to itself: a memo keyed on equality misses it)
                if 0 <= again <= k and all(
                        not (isinstance(x, torch.Tensor) and x.is_floating_point()) or bool(torch.isfinite(x).all())
                        for x in trial.inputs):
                    self.repeated(trial, runs)
                    again = -1                   # once
                del runs
            self.checks.append(Check(trial.name, True, f"{workload.describe(trial.inputs)}: {detail}"))
            del trial, reply
        if not self.short:    # every held call's tensors read again (sandbox/history.py: the full plan)
            self.request({"op": "earlier"}, self.cfg.call_timeout, "earlier calls' inputs and outputs")
        self.caller_state("after the trials")
        t.oracle.reset()
        self.request({"op": "load", "state": t.oracle.state0}, self.cfg.call_timeout, "load_state_dict")

    def caller_state(self, when: str) -> None:
        """The module as its caller holds it (parameters, buffers, their .grad, state_dict()) after calls not judged one
        by one (worker.py, `op_state`)."""
        self.request({"op": "state"}, self.cfg.call_timeout, f"the module's state {when}")

    def repeated(self, trial: Any, runs: Runs) -> None:
        """As a caller's loop does: the trial's inputs 17-32 times in a row, every output held by the worker (a memo
        handing back an earlier output, a ring of output buffers writing over one: sandbox/history.py, red teams 35
        and 36), the last call after a pause; its output judged."""
        for n in range(16 + secrets.randbelow(16), 0, -1):
            if n == 1:
                _pause()
            reply = self.call(trial.inputs)
        self.check_outputs(f"{trial.name}, called again on the same inputs", trial.inputs, runs, reply)

    @contextlib.contextmanager
    def judging(self, release: bool = True):
        """Around the reference's runs on one call's inputs and their comparison. In the lean memory plan on a GPU
        the worker gives its memory back first (the call's outputs are at the judge's, in shared memory) and the
        oracle's outputs stay on the device for the block: the judge's run is then the only one holding data on
        the device (the fp64 run: about twice the forward's own peak), and no trial's outputs cross to the host
        and back (on the H200, 10-65 s a trial of a 6 GiB task through pageable host copies)."""
        t = self.task
        if not (t.lean and t.device.startswith("cuda")):
            yield
            return
        if release and self.worker.proc is not None:
            self.release(shed=False)
        with t.oracle.on_device():
            yield

    def pause(self) -> None:
        """Freeze the worker (while another implementation is timed); a no-op before it started."""
        if self.worker.proc is not None and not self.worker.frozen:
            self.worker.freeze()

    def resume(self) -> None:
        if self.worker.proc is not None and self.worker.frozen:
            self.worker.thaw()

    def send_pool(self, pool: list[list[Any]], scalable: list[Any]) -> None:
        """The timed loops' input pool, and the RMS of each entry's inputs (the judge's figures, so that it
        rebuilds a timed iteration's inputs bit for bit wherever it keeps the pool)."""
        rms = [timing.rms(xs, scalable) for xs in pool]
        self.request({"op": "pool", "pool": pool, "scalable": scalable, "rms": rms, "lean": self.task.lean},
                     self.cfg.call_timeout, "input pool")
        self.pooled = True

    def release(self, shed: bool = True) -> None:
        """The worker gives back its inputs' and outputs' device memory (lean memory plan); with `shed`, both
        sides their shared regions' host memory too (a task's worth each: where another worker is timed next,
        or this one goes idle; not between the trials of one judgement, where a new region would cost a
        second a trial)."""
        self.request({"op": "release", "shed": shed}, self.cfg.call_timeout, "release")
        if shed:
            self.worker.shed()
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
            rules = t.outputs
            for k, a in enumerate(answers):
                self.problem(rules.described(a["m"].get("single"), a["m"].get("meta"), t.out_meta,
                                             f"timed iteration {tag + k}"))
        return Batch(tag, plan, walls, [float(a.get("t", 0.0)) for a in answers],
                     [[a["d"], a["i"]] for a in answers])

    def recheck(self, batch: "Batch", picks: list[int], pool: list[list[Any]], scalable: list[Any]) -> None:
        """Fetch the outputs of iterations picked after the batch returned; each must be the one committed
        to while the clock ran (digest), the inputs after the call must be the ones given (digest of the
        rebuilt inputs), and the numbers must match the oracle on those inputs."""
        # the lean plan fetches them one at a time: its reply region holds one output (a task's worth)
        groups = [[k] for k in picks] if self.task.lean else [picks]
        outputs: list[Any] = []
        for group in groups:
            got = self.request({"op": "fetch", "indices": group}, self.cfg.call_timeout, "re-check fetch").get("outputs")
            if not isinstance(got, list) or len(got) != len(group):
                self.fail(Reason.RECHECK, "timed-loop re-check", "the worker did not hand over the picked outputs")
            outputs += got
            del got
        if self.task.lean:          # the picked outputs are at home now: the worker gives its memory back
            self.release()
        t = self.task
        for k, tensors in zip(picks, outputs):
            it = batch.tag + k
            out_digests, in_digests = batch.commits[k]
            bad = t.outputs.handed(tensors, t.out_meta, f"timed iteration {it}")
            if bad is not None:
                self.fail(Reason.RECHECK, "timed-loop re-check", f"outputs of the wrong kind: {bad.detail}")
            if [digest.digest(c) for c in tensors] != list(out_digests):
                self.fail(Reason.RECHECK, "timed-loop re-check", f"the output of timed iteration {it} changed after "
                          "the clock stopped (it differs from the one committed while timed)")
            j, scale, seed = batch.plan[k]
            # rebuilt on the worker's device type (the same operations give the same bits), kept at home
            dev = [x.to(t.device) if isinstance(x, torch.Tensor) else x for x in pool[j]]
            xs = timing.fresh(dev, scale, seed, scalable, timing.rms(pool[j], scalable), t.device)
            xs = [x.to(t.home) if isinstance(x, torch.Tensor) else x for x in xs]
            del dev
            if digest.positionals(xs) != list(in_digests) and not t.contract.inplace:
                self.fail(Reason.INPUT_MUTATED, "inputs unchanged", f"the inputs of timed iteration {it} were "
                          "modified by the candidate; declare inplace = true in the contract if intended")
            with self.judging(release=False):       # released above
                runs, more = t.oracle.run(xs), []
                for i, (c, e) in enumerate(zip(tensors, t.comparator.expected(runs))):
                    chk = self.judged("re-check", i, c, e, xs, more, runs)     # another dtype or shape: fails
                    if not chk.ok:
                        self.fail(Reason.RECHECK, "timed-loop re-check",
                                  f"output of timed iteration {it} is wrong: {chk.detail}")
                del runs
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
