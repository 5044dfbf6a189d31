"""The candidate's process: builds one model, runs calls and timed loops on request, reports what it saw.

Everything the verdict depends on (reference outputs, the comparison, the seed) stays in the judge.
What this process reports (flags, timers, threads, aliasing) is also cross-checked from outside where possible.
Run as `python -m kernelgate.sandbox.worker FD`.
"""
from __future__ import annotations

# Clocks are captured by kernelgate/clock.py, imported before any candidate code.
import gc  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import secrets  # noqa: E402
import struct  # noqa: E402
import sys  # noqa: E402
import traceback  # noqa: E402
from multiprocessing.connection import Connection  # noqa: E402
from typing import Any  # noqa: E402

import torch  # noqa: E402

from .. import native  # noqa: E402
from ..digest import digests, positionals, warm as warm_digests  # noqa: E402
from ..workload import CANDIDATE_CLASS  # noqa: E402
from . import audit, caller, handle, history, ipc, jobs, loop, prebuild, public, runner  # noqa: E402
from .guard import Guard, harness_namespaces  # noqa: E402
from .runner import CandidateFailure, _first_line  # noqa: E402
# _same_bits stays importable here: older corpus cases patch it in this module (to no effect now: handle.py runs it)
from .sensors import (_same_bits, _storages, _tensors, _unclean, candidate_threads,  # noqa: E402,F401
                      describe_candidate_threads, describe_output, loaded_as, numerics_flags, profile_reply,
                      RNG_DRAWN, rng_fresh, rng_state, timer_ids, torch_threads)

_CUDA_SYNC = torch.cuda.synchronize


class Harness:
    def __init__(self, conn: Connection):
        # The functions the harness checks and reports with, bound before any candidate code is imported:
        # replacing them in this module (sys.modules) afterwards changes nothing here. (Code that walks
        # frames or gc to this object can still reach them: docs/GATE.md, known gaps.)
        self._describe, self._storages, self._digests = describe_output, _storages, digests
        self._positionals = positionals       # the inputs after a timed call: where each word lies counts
        self._fresh, self._loop, self._warm_up = loop.fresh, loop.timed_loop, loop.warm_up
        self.conn = conn
        self.model: torch.nn.Module | None = None
        self.device = "cpu"
        self.flags0, self.public0, self.timers0 = numerics_flags(), public.snapshot(), timer_ids()
        self.threads0, self.ref_path = candidate_threads(), ""
        self.batch: list[list[torch.Tensor]] = []          # outputs of the last timed batch, by iteration
        self.pool: list[list[Any]] = []
        self.scalable: list[Any] = []         # per input: how its timed values are drawn (loop.fresh)
        self.rms: list[list[float]] = []
        self.lean = False                     # the lean memory plan's timed calls (op_pool)
        self.slots: dict[tuple[int, int], torch.Tensor] = {}   # (input, slot) -> the buffer calls write into
        self.earlier = history.Earlier(secrets.randbits(62))   # earlier judged calls' tensors, read again later
        self.params: Any = None                   # the module's parameters' digests, as built or loaded
        self.grads, self.rng, self.loaded = {}, False, {}   # the reference's requires_grad; the RNG; the state
        self.hooks = False                        # the reference's parameters or submodules carry backward hooks
        self.probe_seed, self.caller0 = secrets.randbits(30), None   # sandbox/caller.py: a secret, its digests
        self.settled: list[Any] = []              # the build phase's calls (inputs, output), held unread
        self.in_bulk: ipc.Bulk | None = None
        self.out_bulk: ipc.Bulk | None = None
        self.guard: Guard | None = None             # installed before the import (enforced for candidates)
        self.enforce = False                        # a baseline's worker runs the same checks, for the same cost
        self.fatal = audit.make_fatal()
        # every call of candidate code goes to the runner thread (kernelgate/sandbox/runner.py), started at prime
        self.call: Any = None
        self.arm: Any = None
        self.dispose: Any = lambda obj: None        # runner.start's: drops what the harness is done with there
        self.sign: Any = None                       # ipc.signer, from the judge's first request

    # ------------------------------------------------------------ environment checks
    def observations(self) -> dict[str, Any]:
        flags = self.numerics()
        timers = timer_ids()
        return {
            "flags_changed": {k: [self.flags0.get(k), v] for k, v in flags.items() if self.flags0.get(k) != v},
            "timers_changed": sorted(k for k, v in timers.items() if self.timers0.get(k) != v),
            "py_threads": [self.threads0, candidate_threads()],
            "py_thread_names": describe_candidate_threads(),
            "torch_threads": torch_threads(),
            "loaded_reference": loaded_as(self.ref_path),
            "rebound": public.changed(self.public0),
        }

    def numerics(self) -> dict[str, Any]:
        """The numerics flags as the candidate's code sees them: read on the runner thread (torch's thread count
        is per thread), plain values only."""
        if self.call is None:
            return numerics_flags()
        pairs = self.call(jobs.flags)
        if type(pairs) is not tuple or not all(type(p) is tuple and len(p) == 2 and type(p[0]) is str
                                               and type(p[1]) in (bool, int, str) for p in pairs):
            return {"unreadable": "flags"}
        return dict(pairs)

    def sync(self) -> None:
        if self.device.startswith("cuda"):
            _CUDA_SYNC()

    # ------------------------------------------------------------ ops
    def op_hello(self, msg: dict) -> dict:
        return {"pid": os.getpid(), "torch": str(torch.__version__)}

    def op_prime(self, msg: dict) -> dict:
        """Start what torch starts on first use (the CUDA context, the intra-op thread pool) before any
        candidate code, so the judge can count this process's threads from before the candidate's import."""
        self.device = msg["device"]
        native.load(msg.get("native"))        # the harness's C mixes, from the judge's bytes (kernelgate/native.py)
        # no automatic collection: it would run wherever memory is allocated, the candidate's finalizers with it;
        # the runner collects between jobs instead (`collect`)
        gc.disable()
        if self.call is None:
            self.call, self.arm, self.dispose = runner.start(runner.stack_bytes(), self.fatal)
            self.call(jobs.prime, (self.device, bool(msg.get("profiler", True))))
            self.caller0 = self._probe()   # a caller's ordinary code before any candidate code (sandbox/caller.py)
            self.threads0 = candidate_threads()      # the runner's own thread record is the harness's
            self.flags0 = self.numerics()
        if msg.get("jax") and not getattr(self, "jax_primed", False):
            self.call(jobs.prime_jax, (self.device,))   # JAX's threads before the candidate's import, as torch's
            self.jax_primed = True
            self.threads0 = candidate_threads()
        if self.device.startswith("cuda"):
            torch.cuda.set_device(torch.device(self.device).index or 0)
            warm_digests(self.device)         # the digest kernels built before lockdown (digest.warm)
            self.sync()
        (torch.ones(1 << 20) + 1).sum().item()       # large enough for the intra-op pool to start
        self.primed = True
        return {"ok": True, "observations": self.observations(), "native": native.active()}

    def op_build(self, msg: dict) -> dict:
        if not getattr(self, "primed", False):
            self.op_prime(msg)
        self.ref_path = msg.get("ref_path", "")
        self.flags0, self.public0 = self.numerics(), public.snapshot()
        self.timers0 = timer_ids()
        self.threads0 = candidate_threads()
        if msg.get("prebuilt"):
            prebuild.install(msg["prebuilt"])      # before the candidate's import: its literal load_inline calls
        if msg.get("guard") and self.guard is None:
            # a candidate's worker refuses and reports; a baseline's (the user's own reference) runs the same
            # per-call checks unenforced, so every row of a measurement pays the same harness cost
            self.enforce = msg["guard"] != "observe"
            self.guard = Guard(enforce=self.enforce, library=tuple(msg.get("library_paths", ())), candidate=msg["path"])
            self.guard.install()
            self.guard.watch(*harness_namespaces(__name__), (torch._C._len_torch_function_stack,
                                                       torch._C._len_torch_dispatch_stack))
            self.arm(self.guard.own, self.guard.integrity, self.enforce, runner.JAX_SETTLE_S if getattr(
                self, "jax_primed", False) and self.device.startswith("cuda") else 0.0)   # measured on the GPU
            self.guard.seal()           # this thread is the harness's from here on (kernelgate/sandbox/guard.py)
        self.model = handle.filled(self.call, self.device, jobs.construct, (      # (its memory filled: handle.py)
            msg["path"], msg.get("cls") or CANDIDATE_CLASS, msg.get("init_inputs", []), msg["state"], msg.get("seed", 0),
            self.device, bool(msg.get("compile")), msg.get("compile_options", {}), msg.get("shape")))
        self.grads, self.rng, self.hooks = msg.get("grads") or {}, bool(msg.get("rng")), bool(msg.get("hooks"))
        self.collect()
        self.params, self.loaded = self._state(), msg["state"]
        why = self._caller(msg["state"]) or history.param_fault(self.params, self.grads)
        if why:
            return {"error": "build_error", "message": why}
        # no observations yet: threads of the candidate's may run until the lockdown, and reading what they can
        # change (modules, clocks, threads) could leave the harness a last reference; the judge asks after it
        return self._tampered() or {"ok": True}

    def op_observe(self, msg: dict) -> dict:
        """The observations, asked for once the judge has seen from outside that no thread of the candidate's is
        left after the lockdown (the judge's Session.settle). From here on Python on any thread but the gate's
        ends the worker (runner.py, `idle`): no thread can start, and the judge has seen none of the candidate's."""
        if self.arm is not None and self.guard is not None and self.enforce:
            self.arm.seal()
        return {"ok": True, "observations": self.observations()}

    def flush(self) -> None:
        """Drop what the harness disposed of, now, on the runner (where no frame of the harness's refers to it)."""
        if self.call is not None:
            self.call(jobs.nothing, (), False, True)

    def collect(self, generation: int = 2) -> None:      # on the runner (finalizers of the candidate's run there)
        self.call(gc.collect, (generation,))

    def _tampered(self, *tensors: Any) -> dict | None:
        """The error reply when a tensor the harness is about to use (an input buffer of its own, an output) is not
        a plain tensor with an empty plain attribute dict (sensors._unclean: attributes would shadow its methods, a
        dict of another type run the candidate's C callables), read through exact types only."""
        if self.guard is None:
            return None
        for t in _tensors(tensors):
            if type(t) is not torch.Tensor:       # judged as the output's kind, before anything reads it
                return {"error": "output_type", "message": "an output is a tensor subclass "
                        f"({type.__dict__['__qualname__'].__get__(type(t))}); expected a plain torch.Tensor"}
            why = _unclean(t)
            if why:
                return {"error": "introspection", "message": why} if self.enforce else None
        return None

    def op_load(self, msg: dict) -> dict:
        assert self.model is not None
        self.call(jobs.load, (self.model, msg["state"], self.device, bool(msg.get("quiet")), bool(msg.get("direct"))))
        built, self.params, self.loaded = self.params, self._state(), msg["state"]     # the caller's, as loaded
        moved = history.objects_change(built, self.params)     # by the build's settle calls
        why = moved or self._caller(msg["state"])
        return {"error": "input_mutated" if moved else "build_error", "message": why} if why else {"ok": True}

    def _caller(self, state: dict) -> str | None:
        """Its state_dict() against the state just loaded, or with keys of its own, loaded back (history.py)."""
        named = self.call(jobs.state_dict_of, (self.model,))
        if not history.own_keys(named, state):
            return history.roundtrip_fault(named, state, self.earlier.key, _unclean)
        failed = self.call(jobs.reload, (self.model,))
        if failed:
            return str(failed)[:500]
        return None if self._state() == self.params else history.RELOADED

    def op_call(self, msg: dict) -> dict:
        assert self.model is not None
        if msg.get("settle"):
            # a call of the build phase, not judged: threads of the candidate's may still run, so the harness
            # looks at nothing the candidate can reach (no output, no input buffer it has had) and keeps what it
            # handed over and got back until the request's end, when it dies on the runner
            xs = [handle.to_device(x, self.device) for x in msg["inputs"]]
            held = (xs, handle.filled(self.call, self.device, self.model, xs))
            self.sync()     # `hold`: kept unread for `op_settled` (the full plan); else it dies with the request
            (self.settled.append if msg.get("hold") else self.dispose)(held)
            return {"ok": True}
        lean = bool(msg.get("lean"))
        if lean:    # the lean memory plan (gate/memory.py): one call's worth on the device
            self._only(int(msg.get("slot", 0)))
            self.flush()
            if self.device.startswith("cuda"):
                torch.cuda.empty_cache()
        xs = [self._placed(i, x, int(msg.get("slot", 0))) for i, x in enumerate(msg["inputs"])]
        snapshot = handle.snapshot(xs)
        filled = handle.poison(msg.get("poison_bytes", 0), self.device, self.call)  # unwritten: NaN
        self.sync()
        in_ptrs = self._storages(xs)
        drawn = rng_fresh(self.device) if self.rng else b""
        try:
            out = self.call(self.model, xs)
        finally:
            if filled:
                handle.unpoison()
        unseeded = self._unseeded(drawn)
        if unseeded:
            return self.dispose(out) or unseeded
        self.dispose(out)
        self.sync()
        tampered = self._tampered(xs, out)
        if tampered:                      # before anything else touches them
            return tampered
        desc = self._describe(out, in_ptrs, self.device)
        raw = list(desc.get("tensors", []))
        if "error" not in desc:
            desc["tensors"] = handle.contiguous(desc["tensors"])
        changed = handle.changed(xs, snapshot)
        # the previous call's inputs and outputs read again, this call's held (sandbox/history.py; full plan only)
        earlier = None if lean or "error" in desc else self.earlier.check(xs, raw, _unclean)
        earlier = earlier or history.state_fault(self._state(), self.params)
        if lean or "error" in desc:
            self.dispose(self.earlier.take())
        else:
            earlier = self.earlier.keep(xs, raw) or earlier
        self.dispose(self.earlier.let_go())
        del snapshot, raw
        if lean and self.device.startswith("cuda"):
            torch.cuda.empty_cache()             # the snapshot's blocks: the judge's runs come next
        if "error" in desc or earlier:
            return desc if "error" in desc else earlier
        return {"ok": True, "output": desc, "observations": self.observations(), "inputs_changed": changed}

    def _state(self) -> Any:
        """The module's parameters' and buffers' signatures (history.state_sigs), or an error reply."""
        return history.state_sigs(self.call(jobs.state_of, (self.model, self.hooks)), self.earlier.key, _unclean)

    def op_settled(self, msg: dict) -> dict:
        """A build-phase call's output, held unread, described now that no thread of the candidate's is left (the
        judge compares it: red team 36 was wrong on each first call); `drop`: let them all go."""
        if msg.get("drop"):
            self.settled = self.dispose(self.settled) or []
            return {"ok": True}
        xs, out = self.settled[int(msg["index"])]
        desc = self._tampered(xs, out) or self._describe(out, self._storages(xs), self.device)
        if "error" in desc:
            return desc
        desc["tensors"] = handle.contiguous(desc["tensors"])
        return {"ok": True, "output": desc, "inputs_changed": []}

    def op_earlier(self, msg: dict) -> dict:
        """Every held judged call's tensors read again (after the trials: sandbox/history.py)."""
        reply = self.earlier.check([], [], _unclean, deep=True) or {"ok": True}
        self.dispose(self.earlier.let_go())
        return reply

    def _placed(self, i: int, x: Any, slot: int) -> Any:
        """Input i of a call, written into buffer `slot` (one of loop.SLOTS per input, chosen by the judge
        for every call, trial or timed alike) where shape, dtype and strides match: calls see new values at
        old addresses (a cache keyed on data_ptr() or on the tensor object answers stale) and old values'
        addresses change (a CUDA graph replayed on the addresses it captured reads stale inputs)."""
        if not isinstance(x, torch.Tensor):
            return x
        x = handle.to_device(x, self.device)
        prev = self.slots.get((i, slot))
        why = _unclean(prev) if prev is not None else None   # the candidate has had it: checked before any use
        if why:
            raise _Refused({"error": "introspection", "message": why})
        if handle.place(prev, x, secrets.randbelow(2) == 0):   # a refill with or without a version change
            return prev
        self.dispose(prev)
        x = handle.apart(x, [t for k, t in self.slots.items() if k != (i, slot)])   # [x, x]: buffers of their own
        self.slots[(i, slot)] = x
        return x

    def op_pool(self, msg: dict) -> dict:
        """Store the input pool on the device once; timed loops draw from it."""
        self.dispose((self.pool, self.batch))
        self.pool, self.batch = [], []
        self.flush()                              # the old pool goes before the new one arrives
        self.pool = handle.to_devices(msg["pool"], self.device)
        self.scalable = msg["scalable"]
        # the judge's figures (it rebuilds timed inputs bit for bit from them, wherever it keeps the pool)
        self.rms = msg.get("rms") or [loop.rms(xs, self.scalable) for xs in self.pool]
        self.lean = bool(msg.get("lean"))          # the lean plan: timed calls keep one input buffer (a task's worth)
        return {"ok": True}

    def op_release(self, msg: dict) -> dict:
        """Give back the device memory of inputs and outputs (the pool, the input buffers, the last batch's
        outputs, the allocator's cache) while another implementation is timed; the judge sends the pool again."""
        self.dispose((self.pool, self.batch, list(self.slots.values())))
        self.pool, self.batch, self.rms = [], [], []
        self.slots.clear()
        if msg.get("shed"):     # the shared regions' host memory: the judge makes new ones
            self.in_bulk = self.out_bulk = None
        self.flush()                 # what was disposed of dies now (no frame of the harness's refers to it), so
        self.collect(1)              # the allocator's cache can give its blocks back
        if self.device.startswith("cuda"):
            torch.cuda.empty_cache()
        return {"ok": True}

    def _only(self, slot: int) -> None:
        """Drop the input buffers of the other slots (the lean plan holds one: each is a task's worth)."""
        self.dispose([self.slots.pop(k) for k in [k for k in self.slots if k[1] != slot]])

    def _make(self, j: int, s: float, seed: int) -> list[Any]:
        """Fresh inputs written into the buffers the correctness trials used (the slot comes with the plan)."""
        slot = loop.slot(seed)
        if self.lean:
            self._only(slot)
        bufs = [self.slots.get((i, slot)) for i in range(len(self.pool[j]))]
        versions = [b._version if isinstance(b, torch.Tensor) else 0 for b in bufs]
        xs = self._fresh(self.pool[j], s, seed, self.scalable, self.rms[j], self.device, out=bufs)
        for i, x in enumerate(xs):
            if isinstance(x, torch.Tensor) and x is not bufs[i]:
                self.dispose(bufs[i])
                self.slots[(i, slot)] = x
            elif isinstance(x, torch.Tensor) and secrets.randbelow(2):   # refilled as by a caller, with or without
                handle.set_version(x, versions[i])                        # a version change (handle.place)
        return xs

    def _remote(self, target: Any) -> Any:
        """target(*xs) as a job on the runner thread, its output disposed of there with the next call."""
        call, dispose = self.call, self.dispose

        def remote(*xs: Any) -> Any:
            # the loops hold nothing of the previous call's when they make the next: the trash goes with it
            out = call(target, xs, False, True)
            dispose(out)
            return out
        return remote

    def op_warmup(self, msg: dict) -> dict:
        drawn = rng_fresh(self.device) if self.rng else b""
        n = self._warm_up(self._remote(self.model), self._make, msg["plan"], self.device, msg["warmup_ms"],
                          msg["warmup_min"])
        self.collect(1)
        return self._unseeded(drawn) or self._tampered() or {"ok": True, "calls": n, "observations": self.observations()}

    def _unseeded(self, drawn: bytes) -> dict | None:
        """The reply where calls since `drawn` (rng_fresh) changed the generators (red team 39: in a batch's only)."""
        return dict(RNG_DRAWN) if self.rng and rng_state(self.device) != drawn else None

    def _probe(self) -> Any:
        """The digests of what a caller's ordinary code computes, on the runner thread (sandbox/caller.py)."""
        return caller.signature(self.call(caller.probe, (self.probe_seed,)), self.earlier.key, _unclean)

    def op_state(self, msg: dict) -> dict:
        """The module's state (as loaded) and state_dict() after calls not judged one by one (red team 39 zeroed its
        weights in timed calls, and changed its state_dict() after 8 calls); what a caller's other code computes
        (red teams 40 and 41 changed it through process-wide state)."""
        changed = history.state_fault(self._state(), self.params)
        if changed:
            return changed
        try:
            changed = self._probe() != self.caller0
        except CandidateFailure:            # the caller's code fails now
            changed = True
        if changed:
            return {"error": "flags", "message": caller.CHANGED}
        why = self._caller(self.loaded)
        return {"error": "build_error", "message": why} if why else {"ok": True}

    def op_time(self, msg: dict) -> dict:
        """One timed batch (gate/loop.py), one step at a time: the judge sends each iteration's
        (pool index, scale, seed) and starts its clock; the inputs are built, the call made, and the
        output checked like a trial's (kind, layout, aliasing), kept until the next batch, and committed
        to by digests of the outputs and of the inputs after the call, in the answer that stops the
        judge's clock. The judge picks which ones to re-check only after the batch."""
        assert self.model is not None
        self.dispose(self.batch)
        self.batch = []
        target = self.model
        if msg.get("null"):                       # the harness's own cost: a stand-in output, no model
            null = handle.empties(msg["null"], self.device)
            target = (lambda *xs: null[0]) if len(null) == 1 and msg.get("single", True) else (lambda *xs: tuple(null))
        model = self._remote(target)              # the stand-in too runs on the runner thread
        drawn = rng_fresh(self.device) if self.rng else b""
        conn, sign = self.conn, self.sign or (lambda b: b)

        def steps():
            for _ in range(int(msg["n"])):
                j, s, seed = struct.unpack("<qdq", conn.recv_bytes())
                yield j, s, seed

        def after(index: int, xs: list[Any], out: Any, sample: float) -> None:
            tampered = self._tampered(xs, out)
            if tampered:
                raise _Refused(tampered)
            desc = self._describe(out, self._storages(xs), self.device)
            outs = desc.get("tensors", [])
            reply = json.dumps({"d": self._digests(outs), "i": self._positionals(xs), "t": sample,
                                "m": {"single": desc.get("single"), "meta": desc.get("meta")}}).encode()
            if "error" in desc:
                raise _Refused(desc)
            conn.send_bytes(sign(b"I" + reply))
            # an output written into an input (in-place contracts) is overwritten by the next iteration's inputs
            self.batch.append(handle.keep(outs, desc["meta"]))

        try:
            self._loop(model, self._make, steps(), self.device, msg.get("flush_bytes", 0), after)
        except _Refused as r:
            return r.desc
        self.collect(1)
        return self._unseeded(drawn) or {"ok": True, "observations": self.observations()}

    def op_fetch(self, msg: dict) -> dict:
        """The outputs of the named iterations of the last timed batch, as they are now."""
        picks = [int(i) for i in msg["indices"]]
        for i in picks:                           # the candidate may have kept them: checked again before use
            for o in (self.batch[i] if 0 <= i < len(self.batch) else []):
                why = _unclean(o) if self.guard is not None and self.enforce else None
                if why:
                    return {"error": "introspection", "message": why}
        return {"ok": True, "outputs": [handle.contiguous(self.batch[i]) for i in picks if 0 <= i < len(self.batch)]}

    def op_profile(self, msg: dict) -> dict:
        """Warm-up forwards, then `iters` forwards under torch.profiler, each in a `marker.<i>` record_function
        that ends after a device sync; returns the chrome trace's events (plain dicts, whitelisted args) and,
        with `artifacts`, the compiled kernels (.ptx/.ttgir/.cubin/.json) in this process's private caches.
        Parsed by the judge (kernelgate/profiling/launches.py, kernelgate/profiling/fingerprint.py)."""
        assert self.model is not None
        xs = [handle.to_device(x, self.device) for x in msg["inputs"]]
        text = self.call(jobs.profile, (self.model, xs, self.device, int(msg.get("warmup", 2)),
                                        int(msg.get("iters", 5)), str(msg["marker"])))
        self.dispose(xs)
        return profile_reply(text, msg, self.observations)

    def serve(self) -> None:
        while True:
            try:
                msg = ipc.decode(self.conn.recv_bytes())
            except EOFError:
                return
            key = msg.pop("key", None) if type(msg) is dict else None
            if self.sign is None and type(key) is bytes:
                self.sign = ipc.signer(key)      # the first request's, before any candidate code exists
            self.in_bulk = self._attach("in_bulk", msg.pop("_bulk", None))
            self.out_bulk = self._attach("out_bulk", msg.pop("_reply_bulk", None))
            msg = ipc.unpack(msg, self.in_bulk, msg.get("device", self.device), strided=True)
            op = msg.get("op")
            if op == "exit":
                return
            if op not in ("call", "load", "observe", "earlier", "settled"):   # the judge's own use of the buffers (timing)
                self.dispose(self.earlier.take())
            try:
                reply = getattr(self, f"op_{op}")(msg)
                if not isinstance(reply, dict):
                    reply = {"error": "crash", "message": "malformed reply"}
            except CandidateFailure as f:        # raised by candidate code on the runner, described there
                reply = f.reply
            except _Refused as r:
                reply = r.desc
            except torch.cuda.OutOfMemoryError as e:
                reply = {"error": "crash", "message": f"out of memory: {_first_line(e)}"}
            except Exception as e:  # noqa: BLE001 - every failure becomes a reply
                # no traceback: its frames are this thread's, and the harness's thread asks for none
                reply = {"error": "crash", "message": f"{type(e).__name__}: {_first_line(e)}"}
            if self.guard is not None and self.enforce and self.guard.denied:
                # candidate code asked for the interpreter's machinery (refused, kernelgate/sandbox/guard.py): whether
                # or not it went on without it, the verdict says so
                reply = {"error": "introspection", "message": self.guard.denied[0]}
            data = ipc.encode(ipc.pack(reply, self.out_bulk))
            self.conn.send_bytes(self.sign(data) if self.sign is not None else data)
            # what this request handed to candidate code, and what came back, dies on the runner (runner.py), now
            # that no frame of the harness's but this one refers to any of it
            self.dispose((msg, reply))
            msg = reply = data = None
            self.flush()

    def _attach(self, attr: str, named: Any) -> "ipc.Bulk | None":
        """The shared region the judge named in a message (mapped once per id; its descriptor arrives on the
        region channel that `main` opened). Another region than the one held: that one is let go first (both
        mapped at once held two task's worth of host memory; tensors still on it keep it alive as needed)."""
        current = getattr(self, attr)
        if current is not None and (not named or [current.ident, current.size] != [int(named[0]), int(named[1])]):
            setattr(self, attr, None)
            current = None
        regions = getattr(self, "regions", None) or ipc.Regions(None)
        return regions.attach(current, named)

    def op_lockdown(self, msg: dict) -> dict:
        """After the build: no new processes and no signal handler changes (a seccomp filter on every thread).
        The judge verifies the filter from /proc, not from this reply."""
        from . import isolation
        isolation.lockdown_self()
        return {"ok": True}


class _Refused(Exception):
    """An output of a timed iteration failed the per-call checks; carries the error reply."""

    def __init__(self, desc: dict):
        super().__init__(desc.get("message", ""))
        self.desc = desc


def _serve(fd: int, regions_fd: int | None, mask: Any) -> None:
    """The harness thread: everything the worker does after start-up, the candidate's import and every call of
    its code included. Ends the process when the judge closes the connection (no interpreter teardown:
    candidate atexit hooks and thread joins cannot delay the judge), or when the harness itself fails.
    `mask`: the signal mask the process started with (the main thread blocked every signal before starting
    this one, which inherited that)."""
    import signal
    import socket
    code = 1
    try:
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        conn = Connection(fd)
        harness = Harness(conn)
        if regions_fd is not None:      # the channel shared-memory regions arrive on (as file descriptors)
            harness.regions = ipc.Regions(socket.socket(fileno=regions_fd))
        harness.serve()
        conn.close()
        code = 0
    except BaseException as e:  # noqa: BLE001 - the worker ends either way; the judge reads the tail of stderr
        # the exception alone: its traceback's frames are this thread's, which asks for none once sealed
        sys.stderr.write("".join(traceback.format_exception_only(type(e), e)))
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)


def _park() -> None:
    """The main thread, once the harness thread runs (every signal already blocked here): waiting on a lock
    nobody releases, for good. CPython runs Python-level signal handlers only in the main thread, handing each the
    frame it interrupted, and `signal.signal` works only there; so no candidate code can install one, and a
    handler installed anyway would see this frame, never the harness's (docs/GATE.md, "Signal handlers")."""
    import _thread
    lock = _thread.allocate_lock()
    lock.acquire()
    while True:
        try:
            lock.acquire()
        except BaseException:  # noqa: BLE001 - nothing may end the wait but the harness thread's os._exit
            pass


def main() -> None:
    import signal
    import threading
    from . import isolation
    isolation.worker_setup()
    signal.signal(signal.SIGINT, signal.default_int_handler)   # as in any start (a background job's is ignored)
    # Blocked in this thread before any candidate code exists (the harness thread restores the mask for itself):
    # a signal aimed at the main thread stays pending for good, never running Python's SIGINT handler here.
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, signal.valid_signals())
    args = (int(sys.argv[1]), int(sys.argv[2]) if len(sys.argv) > 2 else None, mask)
    # The harness runs in a thread of its own, started with only the descriptors' numbers and the mask (a Thread
    # object keeps its target and arguments, and threading.enumerate() hands it to anyone): the main thread,
    # where Python runs signal handlers, never has a frame of the harness on its stack.
    previous = threading.stack_size(runner.stack_bytes())
    try:
        threading.Thread(target=_serve, args=args, daemon=True).start()
    finally:
        threading.stack_size(previous)
    del args
    _park()


if __name__ == "__main__":
    main()
