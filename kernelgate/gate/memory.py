"""The gate's device-memory plan: what the reference's forward needs, and where the judge keeps its data.

Every process of the gate holds device memory at once (the judge, the eager and torch.compile workers, the
candidate's, the next candidate's spare), and a frozen process keeps what it holds. On a task whose
forward needs a large share of the device (a 6 GB input, an 8 GB norm), the default plan (the oracle,
the trials' inputs and the re-checked outputs on the device; every worker with an input pool of its own)
runs out of memory. The lean plan keeps the gate's peak within `BOUND` times the reference forward's own
peak (its inputs, outputs, activations and parameters), all processes together:

- the judge keeps inputs and its probes' results on the host (outputs come back through shared memory,
  as always), or on the device where it has room for them beside the forwards (`decide`, HOME_*); task
  admission and each judged trial keep the fp64 oracle's outputs on the device, a judged trial's only after
  the worker has given its memory back (gate/session.py `judging`); it rebuilds a timed
  iteration's inputs bit for bit (same device type, same operations) while every worker is released;
- timed batches draw from one pool entry into one input buffer, only as many steps as the kept outputs fit
  (`kept_outputs`), and after each batch (its re-check and the harness's own
  measurement included) the worker gives back its inputs, outputs and the allocator's cache
  (`release`): one implementation holds a task's worth of memory at a time, the others their
  parameters;
- a call's NaN poison is one output's worth, not two.

The default plan holds about nine forwards' worth at its peak (on the H200: 129-138 GiB, 8.0-8.6x, for
three forwards of 16 GiB each before it ran out of memory), so `plan()` picks lean whenever the forward
needs more than `LEAN_ABOVE` (1 GiB; below it the default plan's peak is a few GiB, mostly the processes'
CUDA contexts, about 0.5 GiB each, which no plan can shrink), when the default plan would not fit (every
resident process holding a forward's worth), or when asked (`GateConfig.memory`). In the lean plan the
oracle and the task-dtype run are computed on the device and kept on the host, the judge's allocator cache
given back after each run; `peak()` measures the forward on the device. `Sampler`
samples the device's used memory (every process) for the benchmarks.
"""
from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable

import torch

BOUND = 3.0                 # the lean plan's target: gate peak / reference forward peak, all processes
RESIDENT = 5                # processes that may hold a forward's worth at once in the default plan
FIT = 0.8                   # share of the device the default plan may plan to use
LEAN_ABOVE = 1 << 30        # a forward needing more than this (bytes) is judged in the lean plan
#: the lean plan keeps the judge's data on the device where HOME_FORWARDS forwards and HOME_INPUTS inputs' worth fit
#: in FIT of it. Measured on an H100 (benchmarks/results/h100_lean_home_session35.json, a 12 GiB forward with 4 GiB
#: of inputs, the check of a module emitted from a baseline): the gate's peak was 3.44 forwards with the data on the
#: host, 4.85 (58 GiB) with it on the device: 4.25 inputs' worth more (the given inputs, a trial's and the timing
#: pool's entry among them; the rest was not broken down)
HOME_FORWARDS = 3.5
HOME_INPUTS = 4.5


CONTEXT = 1 << 29           # a process's CUDA context (about 0.5 GiB; no plan shrinks it)


def poison_bytes(task: Any) -> int:
    """The NaN blocks a worker hands its allocator before each judged call (sandbox/handle.py `nan_blocks`, two of
    this many bytes each): two outputs' worth on a GPU, whose caching allocator splits a freed block for the next
    requests; one output's worth in the lean plan and on the CPU. There the C library returns a block of its
    mmap threshold (32 MiB at most) or more to the system when freed, so a block twice a 16 MiB output's size was
    fresh pages every call (27-35 ms a call, 2 of them per trial) and poisoned nothing the next allocation reuses,
    while a block of the output's own size is the one an output-sized request gets back."""
    once = task.lean or str(getattr(task, "device", "cpu")).startswith("cpu")
    return (1 if once else 2) * task.out_bytes()


def given_bytes(task: Any) -> int:
    """The bytes of the task's given input tensors."""
    return sum(x.numel() * x.element_size() for x in task.given if isinstance(x, torch.Tensor))


def kept_outputs(task: Any, processes: int = 3) -> int | None:
    """Steps a timed batch of the lean plan may have: the worker keeps every step's outputs until the judge, after
    the batch, picks which to re-check, beside its pool entry and its input buffer (a task's inputs each) and the
    processes' contexts; within BOUND times the forward's peak (a 6 GiB ReLU's six kept outputs took the gate to
    3.6x). None where the plan is not lean or the peak was not measured."""
    plan = getattr(task, "memory", None)
    if plan is None or not plan.lean or not plan.ref_peak:
        return None
    ins = given_bytes(task)
    room = BOUND * plan.ref_peak - 2 * ins - processes * CONTEXT
    return max(2, int(room // max(task.out_bytes(), 1)))


#: forwards' worth the lean plan's gate may hold on the device at once, for the room a spare's context needs
#: (h100_lean_home_session35.json: a peak of 3.44 forwards with the judge's data on the host, 4.85 on the device)
LEAN_PEAK_FORWARDS = 5.0


def spare_primes(task: Any, spares: int = 1) -> bool:
    """Whether a spare worker may take its CUDA context before it is taken (sandbox/spares.py: primed ahead, else
    each candidate's worker start pays the prime: 4.8-7.3 s a candidate on an H100, level2/44 and level2/13 of the
    dev problems, forwards just over LEAN_ABOVE). Always outside the lean plan; in it where the gate's peak
    (LEAN_PEAK_FORWARDS forwards, and HOME_INPUTS inputs' worth where the judge keeps its data on the device), the
    RESIDENT processes' contexts and the `spares`' own fit in FIT of the device."""
    plan = getattr(task, "memory", None)
    if plan is None or not plan.lean:
        return True
    if not plan.ref_peak or not plan.capacity:
        return False
    ins = given_bytes(task) if plan.home != "cpu" else 0
    need = LEAN_PEAK_FORWARDS * plan.ref_peak + HOME_INPUTS * ins + (RESIDENT + spares) * CONTEXT
    return need <= FIT * plan.capacity


@dataclass(frozen=True)
class Plan:
    lean: bool
    home: str                       # where the judge keeps inputs, oracle and outputs
    ref_peak: int | None            # bytes the reference's forward needs on the device (None: not measured)
    capacity: int | None            # the device's memory, bytes
    reason: str

    def to_json(self) -> dict[str, Any]:
        return {"lean": self.lean, "home": self.home, "ref_peak_bytes": self.ref_peak,
                "capacity_bytes": self.capacity, "reason": self.reason}


def peak(model: torch.nn.Module, xs: list[Any] | Callable[[], list[Any]], device: str) -> int | None:
    """Device bytes the forward needs: its parameters, inputs, outputs and activations (a CUDA device's
    allocator peak over one forward, counted from before the inputs exist: `xs` may be a function that
    makes them, on the device); None on a CPU."""
    if not device.startswith("cuda"):
        return None
    dev = torch.device(device)
    torch.cuda.synchronize(dev)
    torch.cuda.empty_cache()
    base = torch.cuda.memory_allocated(dev)
    torch.cuda.reset_peak_memory_stats(dev)
    inputs = [x.to(dev) if isinstance(x, torch.Tensor) else x for x in (xs() if callable(xs) else xs)]
    with torch.no_grad():
        out = model(*inputs)
    torch.cuda.synchronize(dev)
    used = torch.cuda.max_memory_allocated(dev) - base
    params = sum(t.numel() * t.element_size() for t in (*model.parameters(), *model.buffers()) if t.device == dev)
    del out, inputs
    torch.cuda.empty_cache()
    return int(used + params)


def plan(device: str, ref_peak: int | None, asked: str = "auto", ins: int = 0) -> Plan:
    """The plan for a task whose forward needs `ref_peak` bytes on `device`, with `ins` bytes of inputs (see
    `decide`)."""
    capacity = torch.cuda.get_device_properties(torch.device(device)).total_memory if device.startswith("cuda") else None
    return decide(device, ref_peak, capacity, asked, ins)


def decide(device: str, ref_peak: int | None, capacity: int | None, asked: str = "auto", ins: int = 0) -> Plan:
    """Lean when asked, when the forward needs more than LEAN_ABOVE, or when RESIDENT processes each holding
    a forward's worth would not fit in FIT of the device's `capacity`; the default plan otherwise (and
    always on a CPU unless asked). A lean plan for a forward over LEAN_ABOVE keeps the judge's data (inputs,
    oracle, the outputs it compares) on the device where HOME_FORWARDS forwards and HOME_INPUTS times the inputs'
    `ins` bytes fit in FIT of it: on the host, every call the gate judges or times moved a task's worth through
    pageable memory (0.6-0.9 s a move of 4-8 GiB on an H100) and the fp64 oracle's inputs crossed again each
    run (2.2 s of a 4 GiB input's 3 s run), so a reduced check of a 12 GiB forward took 127 s (43 s with them on
    the device)."""
    if asked not in ("auto", "lean", "full"):
        raise ValueError(f"the memory plan is auto, lean or full, got {asked!r}")
    if asked == "lean":
        return Plan(True, "cpu", ref_peak, capacity, "asked for (memory = lean)")
    if asked == "full" or capacity is None or ref_peak is None:
        return Plan(False, device, ref_peak, capacity, "asked for (memory = full)" if asked == "full" else
                    "the host's memory (no device plan on a CPU)" if capacity is None else "peak not measured")
    if ref_peak > LEAN_ABOVE:
        why = (f"the forward needs {ref_peak / 2**30:.2f} GiB (over {LEAN_ABOVE / 2**30:.0f} GiB: the default plan "
               f"would hold about nine times that)")
        if ins and HOME_FORWARDS * ref_peak + HOME_INPUTS * ins <= FIT * capacity:
            return Plan(True, device, ref_peak, capacity, why + f"; the judge keeps its data on the device "
                        f"({HOME_FORWARDS:g} forwards and {HOME_INPUTS:g} inputs' worth fit in {FIT:.0%} of its "
                        f"{capacity / 2**30:.0f} GiB)")
        return Plan(True, "cpu", ref_peak, capacity, why)
    if RESIDENT * ref_peak > FIT * capacity:
        return Plan(True, "cpu", ref_peak, capacity,
                    f"the forward needs {ref_peak / 2**30:.2f} GiB; {RESIDENT} processes holding that would pass "
                    f"{FIT:.0%} of the device's {capacity / 2**30:.0f} GiB")
    return Plan(False, device, ref_peak, capacity, f"the forward needs {ref_peak / 2**30:.2f} GiB: fits")


def _meminfo() -> dict[str, int]:
    with open("/proc/meminfo") as f:
        return {k: int(v.split()[0]) * 1024 for k, v in (line.split(":", 1) for line in f)}


def host_used() -> int:
    """The host's memory in use by every process (MemTotal - MemAvailable), in bytes; 0 where unknown."""
    try:
        info = _meminfo()
        return info["MemTotal"] - info["MemAvailable"]
    except (OSError, KeyError, ValueError):
        return 0


def host_holders(n: int = 6) -> dict[str, Any]:
    """Who holds the host's memory now: shared memory (the regions) and the `n` processes of the largest
    resident sets (pid, command, GiB) - for a benchmark's record of its peak."""
    procs = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/status") as f:
                rss = next((int(ln.split()[1]) * 1024 for ln in f if ln.startswith("VmRSS:")), 0)
            with open(f"/proc/{d}/cmdline", "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode(errors="replace")[:80]
        except OSError:
            continue
        procs.append((rss, int(d), cmd))
    try:
        shmem = _meminfo().get("Shmem", 0)
    except (OSError, ValueError):
        shmem = 0
    return {"shmem_gib": round(shmem / 2**30, 2),
            "processes": [[pid, cmd, round(rss / 2**30, 2)] for rss, pid, cmd in sorted(procs, reverse=True)[:n]]}


class Sampler:
    """The device's used memory (every process: total - free), sampled every `every` seconds in a thread;
    `peak` is the largest sample less the used memory when sampling began. The host's memory in use is
    sampled alongside (`host_peak`, the same way): the lean plan moves the device's gigabytes to the host."""

    def __init__(self, device: str, every: float = 0.02):
        self.device, self.every = torch.device(device), every
        self.base = self.top = 0
        self.top_at = 0.0               # time.monotonic() of the largest sample
        self.host_base = self.host_top = 0
        self.holders: dict[str, Any] = {}     # host_holders() near the host's peak (taken 1 GiB apart)
        self._held_at = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _used(self) -> int:
        free, total = torch.cuda.mem_get_info(self.device)
        return int(total - free)

    def __enter__(self) -> "Sampler":
        self.base = self.top = self._used()
        self.host_base = self.host_top = host_used()
        self._thread = threading.Thread(target=self._run, name="kg-memory-sampler", daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.is_set():
            used = self._used()
            if used > self.top:
                self.top, self.top_at = used, time.monotonic()
            host = host_used()
            if host > max(self.host_top, self._held_at + (1 << 30)):
                self.holders, self._held_at = host_holders(), host
            self.host_top = max(self.host_top, host)
            time.sleep(self.every)

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self.top = max(self.top, self._used())

    @property
    def peak(self) -> int:
        return self.top - self.base

    @property
    def host_peak(self) -> int:
        return self.host_top - self.host_base
