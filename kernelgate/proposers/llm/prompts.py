"""Prompts from the Context: what an agent is told about the workload, the machine, the contract, the file it
must write, the best candidate so far, recent failures and the user's hints; and the feedback each agent gets
on its own last candidate (build error lines, the measured error, or its time and bottleneck).

Pure functions of records: nothing here asks a model or touches the gate.
"""
from __future__ import annotations

import re
from typing import Any, Iterable

from ...records import Evaluation, Reason
from .. import Context, default_languages

MAX_SOURCE = 30_000         # characters of the workload source in a prompt
MAX_BODY = 12_000           # characters of a candidate's own code in a prompt
ERROR_LINES = 14            # lines of a failure's detail in a prompt

#: how to write a candidate in each kernel language (Context.languages picks them; the target's defaults else)
LANGUAGE = {
    "triton": "Triton (`import triton`, `import triton.language as tl`, `@triton.jit`)",
    "cuda": ("CUDA C++ compiled with `torch.utils.cpp_extension.load_inline(name=..., cpp_sources=..., "
             "cuda_sources=..., functions=[...])`"),
    "pallas": ("JAX Pallas (`from jax.experimental import pallas as pl`, `pl.pallas_call`), called from the torch "
               "module through DLPack without copies (`jax.dlpack.from_dlpack(tensor)`, `torch.from_dlpack(array)`); "
               "set `os.environ['XLA_PYTHON_CLIENT_PREALLOCATE'] = 'false'` before the first `import jax`"),
    "cpp": ("C++ compiled with `torch.utils.cpp_extension.load_inline(name=..., cpp_sources=..., "
            "functions=[...], extra_cflags=['-O3', '-march=native', '-fopenmp'], extra_ldflags=['-fopenmp'])` "
            "(OpenMP threads and SIMD welcome; at::parallel_for too)"),
}
DEVICE = {"cuda": "NVIDIA GPU", "cpu": "CPU"}
LIBRARIES = {"cuda": "calling cuBLAS / cuDNN through torch where they are the fastest way, and rewrites in plain "
                     "PyTorch, count too",
             "cpu": "rewrites in plain PyTorch count too"}


def target_line(ctx: Context) -> str:
    """The target and the kernel languages a candidate may be written in (and those it may not)."""
    langs = [lang for lang in (ctx.languages or default_languages(ctx.target)) if lang in LANGUAGE]
    line = f"{DEVICE.get(ctx.target, ctx.target)}. "
    if langs:
        line += "Write kernels in " + ", or in ".join(LANGUAGE[lang] for lang in langs) + "; "
    line += LIBRARIES.get(ctx.target, LIBRARIES["cpu"]) + "."
    others = [lang for lang in ("triton", "cuda", "pallas") if lang not in langs]
    if others:
        line += " Not in " + ", ".join({"triton": "Triton", "cuda": "CUDA C++", "pallas": "Pallas"}[o]
                                       for o in others) + "."
    return line


FILE_CONTRACT = """\
The candidate file is the workload source above, verbatim, followed by your code. So `Model`,
`get_inputs`, `get_init_inputs` and the reference's imports are in scope: do not repeat them.
- Define `class ModelNew` (an `nn.Module`). It is constructed as `ModelNew(*get_init_inputs())`: the same
  constructor arguments as `Model`.
- Its `state_dict()` must have exactly `Model`'s keys and shapes: the reference's weights are loaded with
  `load_state_dict(strict=True)` after construction, and later trials load perturbed weights. Subclassing
  `Model`, or keeping its submodules and parameters under the same names, does this. Read parameters in
  `forward` (or recompute what you derive from them there): values computed in `__init__` go stale.
- `forward` takes `Model.forward`'s arguments and returns what it returns: plain `torch.Tensor`s of the same
  dtype, shape, device and strides, as accurate as the reference (the tolerance comes from the reference's
  own error against an fp64 oracle).
- Inputs are fresh on every call, from widened distributions (heavy tails, x4, x0.25, sign flips, NaN/Inf
  where the reference passes them through): assume no value range the contract does not state, and cache
  no outputs across calls.
- Rejected by the gate: writing into inputs or returning views of them (unless the contract allows it),
  lower precision than the contract allows, changing global flags (TF32, matmul precision, cuDNN settings)
  or torch's thread count, starting threads or processes, work on side CUDA streams, reaching for frames,
  gc, raw memory or the harness, replacing timers.
- Build at import or in `__init__` (load_inline), or on the first call (Triton JIT): after the first calls
  no new process can start, so nothing may need a compiler later.
"""

OUTPUT_FORMAT = """\
Reply with one ```python code block holding the complete code to append (imports, kernels, helpers and
`class ModelNew`), after at most a few sentences on what it does and why it is faster."""

#: what a rejection reason asks of the next attempt
REASON_HINT = {
    Reason.BUILD_ERROR: "the file must import, construct ModelNew and load Model's state_dict strictly",
    Reason.CRASH: "forward raised or the process died (an exception, illegal memory access, out of memory)",
    Reason.TIMEOUT: "the build or a call took too long",
    Reason.MISMATCH: "outputs differ from the fp64 oracle beyond the tolerance: check indexing, masking, "
                     "accumulation precision and the widened input distributions",
    Reason.NONFINITE: "NaN/Inf appear where the reference has none (or the reverse): guard overflow, keep the "
                      "reference's arithmetic order for large values",
    Reason.SHAPE: "return the reference's shapes", Reason.DTYPE: "return the reference's dtypes",
    Reason.DEVICE: "return outputs on the reference's device",
    Reason.STRIDE: "return the reference's strides (e.g. .contiguous() where its output is contiguous)",
    Reason.OUTPUT_TYPE: "return plain torch.Tensor(s), structured as the reference returns them",
    Reason.INPUT_MUTATED: "do not write into inputs", Reason.ALIASING: "do not return inputs or views of them",
    Reason.THREADS: "start no threads and leave torch.set_num_threads alone",
    Reason.FLAGS: "leave global numerics flags alone (TF32, matmul precision, cuDNN)",
    Reason.TIMER: "leave timing functions alone",
    Reason.RECHECK: "outputs from timed calls were wrong: compute every call afresh, cache nothing",
    Reason.INTROSPECTION: "do not reach for frames, gc, raw memory, audit hooks or the harness",
    Reason.EXIT: "do not exit the process", Reason.OUTPUT_LIMIT: "print nothing",
}

_ERR = re.compile(r"error|undefined|expected|cannot|no member|not declared|no matching|traceback|^\s*\^|"
                  r"line \d+|failed|max err|allowed|mismatch", re.IGNORECASE)


# ------------------------------------------------------------------ pieces

def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit] + f"\n# ... ({len(text) - limit} more characters cut)"


def error_lines(text: str, limit: int = ERROR_LINES) -> list[str]:
    """The lines of a failure's detail worth showing: all when few; else error lines with the two after
    each (a compiler's source line and caret), and the last line (a traceback's exception)."""
    lines = [line.rstrip()[:300] for line in text.splitlines() if line.strip()]
    if len(lines) <= limit:
        return lines
    keep: list[int] = []
    for i, line in enumerate(lines):
        if _ERR.search(line):
            keep.extend(j for j in range(i, min(i + 3, len(lines))) if j not in keep)
    keep = sorted(keep)[:limit - 1]
    if len(lines) - 1 not in keep:
        keep.append(len(lines) - 1)
    return [lines[i] for i in keep]


def machine_lines(machine: dict[str, Any], device: str) -> list[str]:
    """The machine model (targets.Machine as a dict, or any dict of facts) as short lines."""
    if not machine:
        return [f"device: {device} (no machine model given)"]
    m = dict(machine)
    gpu = m.get("kind", "gpu") == "gpu"
    out = [f"device: {m.get('label') or m.get('name') or device}"]
    peak = m.get("peak") or {}
    if peak:
        out.append("peak dense rates: " + ", ".join(f"{k} {v / 1e12:.4g} T{'OP' if k == 'int8' else 'FLOP'}/s"
                                                    for k, v in peak.items() if v))
    facts = [("bandwidth", "memory bandwidth",
              lambda v: f"{v / 1e12:.3g} TB/s" if v >= 1e12 else f"{v / 1e9:.3g} GB/s"),
             ("sm_count", "SMs" if gpu else "cores", str),
             ("l2_bytes", "L2" if gpu else "last-level cache", lambda v: f"{v / 2**20:.4g} MiB"),
             ("smem_per_sm_bytes", "shared memory per SM", lambda v: f"{v / 2**10:.4g} KiB"),
             ("registers_per_sm", "32-bit registers per SM", str),
             ("memory_bytes", "device memory", lambda v: f"{v / 1e9:.4g} GB"),
             ("cache_bytes", "data caches in all", lambda v: f"{v / 2**20:.4g} MiB"),
             ("launch_overhead_s", "kernel launch", lambda v: f"about {v * 1e6:.3g} us")]
    known = {"name", "label", "kind", "peak", "source", "notes", "planned", "origins", "cache_bandwidth"}
    for key, label, fmt in facts:
        known.add(key)
        if m.get(key):
            out.append(f"{label}: {fmt(m[key])}")
    out += [f"{k}: {v}" for k, v in m.items() if k not in known and v not in (None, "", {}, ())]
    return out


def candidate_body(e: Evaluation, reference_source: str) -> str:
    """A candidate's own code: its file less the reference and the strategy header."""
    src = e.candidate.source
    ref = reference_source.rstrip()
    if src.startswith(ref):
        src = src[len(ref):]
    src = re.sub(r"^\s*# ---- kernelgate strategy: .* ----\n", "", src.lstrip("\n"), count=1)
    return src.strip("\n")


def timing_line(e: Evaluation, baseline_ms: float | None = None) -> str:
    if e.timing is None:
        return "accepted, not timed"
    s = f"{e.timing.median_ms:.4g} ms per call"
    if e.speedup is not None:
        sp = e.speedup
        s += (f", {sp.ratio:.2f}x the faster baseline (95% CI [{sp.low:.2f}, {sp.high:.2f}], "
              + ("claimed" if sp.claimed else "not a claimable speedup") + ")")
    elif baseline_ms:
        s += f", {baseline_ms / e.timing.median_ms:.2f}x the faster baseline"
    return s


def insight_lines(e: Evaluation) -> list[str]:
    ins = e.insight or {}
    out = []
    if ins.get("bottleneck"):
        out.append(f"bottleneck: {ins['bottleneck']}")
    prof = []
    if ins.get("kernels_per_forward") is not None:
        prof.append(f"{ins['kernels_per_forward']:g} kernels per forward")
    if ins.get("gap_share") is not None:
        prof.append(f"{100 * ins['gap_share']:.0f}% of the forward between kernels")
    if ins.get("forward_us") is not None:
        prof.append(f"forward {ins['forward_us']:g} us under the profiler")
    if prof:
        out.append("profile: " + ", ".join(prof))
    return out


def failure_lines(e: Evaluation, limit: int = ERROR_LINES) -> list[str]:
    """Why a candidate was rejected: its reason and message, the failing checks' detail (error lines, the
    measured error against the allowed one), and what the reason asks of the next attempt."""
    v = e.verdict
    out = [f"rejected: {v.reason.value}: {v.message}"]
    for c in v.checks:
        if not c.ok and c.detail:
            lines = error_lines(c.detail, limit)
            if lines and lines != [v.message]:
                out.append(f"check '{c.name}' failed:")
                out += ["    " + line for line in lines]
    if v.reason in REASON_HINT:
        out.append(f"({REASON_HINT[v.reason]})")
    return out


def _fence(code: str) -> str:
    return "```python\n" + code.rstrip() + "\n```"


def hint_lines(hints: Iterable[str]) -> list[str]:
    return [f"- {h.strip()}" for h in hints if h and h.strip()]


# ------------------------------------------------------------------ the prompts

def system_prompt(ctx: Context, hints: Iterable[str] = ()) -> str:
    """What every request starts with: the task, the target and its language, the machine, the workload,
    the contract, the candidate file's rules, the reply format, and the user's hints."""
    parts = [
        "You are a performance engineer writing faster implementations of a PyTorch module. Every candidate "
        "is built, checked against an fp64 oracle on fresh inputs and timed by a gate that cannot be fooled; "
        "only a verified, measurably faster candidate counts.",
        f"Target: {target_line(ctx)}",
        "Machine:\n" + "\n".join("- " + line for line in machine_lines(ctx.machine, ctx.device_name)),
        f"The workload (class `{ctx.reference_class}`):\n" + _fence(_clip(ctx.reference_source, MAX_SOURCE)),
    ]
    facts = []
    if ctx.graph is not None and ctx.graph.traced and ctx.graph.summary():
        facts.append(f"its forward calls: {ctx.graph.summary()}")
    if ctx.baseline_ms:
        facts.append(f"the faster of eager PyTorch and torch.compile takes {ctx.baseline_ms:.4g} ms per call: "
                     "that is the time to beat")
    if facts:
        parts.append("\n".join("- " + f for f in facts))
    parts.append("What a candidate may assume (the contract):\n"
                 + "\n".join("- " + a for a in ctx.contract.assumptions()))
    parts.append(FILE_CONTRACT.rstrip())
    parts.append(OUTPUT_FORMAT)
    hl = hint_lines(hints)
    if hl:
        parts.append("Direction from the user (follow it):\n" + "\n".join(hl))
    return "\n\n".join(parts) + "\n"


def tried_lines(ctx: Context, limit: int = 15) -> list[str]:
    out = []
    for e in ctx.history[-limit:]:
        state = timing_line(e, ctx.baseline_ms) if e.accepted else f"rejected ({e.verdict.reason.value})"
        out.append(f"- {e.candidate.strategy} [{e.candidate.proposer}]: {state}")
    return out


def recent_failures(ctx: Context, limit: int = 4, skip: Iterable[str] = ()) -> list[str]:
    """The last `limit` rejected candidates (any proposer), each with its reason and failing checks."""
    skip = set(skip)
    bad = [e for e in ctx.history if not e.accepted and e.candidate.id not in skip][-limit:]
    out = []
    for e in bad:
        lines = failure_lines(e, limit=8)
        out.append(f"- {e.candidate.strategy} [{e.candidate.proposer}]: " + lines[0])
        out += ["  " + line for line in lines[1:]]
    return out


def best_section(ctx: Context) -> str:
    best = ctx.best()
    if best is None:
        return ""
    lines = [f"The current best candidate: {best.candidate.strategy} [{best.candidate.proposer}], "
             f"{timing_line(best, ctx.baseline_ms)}"]
    lines += insight_lines(best)
    code = _clip(candidate_body(best, ctx.reference_source), MAX_BODY)
    return "\n".join(lines) + "\nIts code (after the reference):\n" + _fence(code)


def explore_prompt(ctx: Context, failures: int = 4, skip: Iterable[str] = ()) -> str:
    parts = ["Write a candidate that takes a new approach: a different algorithm, fusion or kernel design "
             "from those already tried."]
    tried = tried_lines(ctx)
    if tried:
        parts.append("Tried so far:\n" + "\n".join(tried))
    best = ctx.best()
    if best is not None:
        parts.append(f"Best so far: {best.candidate.strategy}, {timing_line(best, ctx.baseline_ms)}"
                     + "".join("\n" + line for line in insight_lines(best)))
    fl = recent_failures(ctx, failures, skip)
    if fl:
        parts.append("Recent failures (avoid them):\n" + "\n".join(fl))
    return "\n\n".join(parts)


def refine_prompt(ctx: Context, failures: int = 4, skip: Iterable[str] = ()) -> str:
    parts = [best_section(ctx) or "No candidate has been accepted yet.",
             "Make it faster: address its bottleneck (fewer kernels and bytes moved when memory- or launch-bound, "
             "better tiling and data reuse when compute-bound) while keeping it correct."]
    fl = recent_failures(ctx, failures, skip)
    if fl:
        parts.append("Recent failures (avoid them):\n" + "\n".join(fl))
    return "\n\n".join(parts)


def verdict_feedback(e: Evaluation, ctx: Context, *, with_code: bool = False) -> str:
    """What an agent is told about its own last candidate."""
    head = f"Your last candidate ({e.candidate.strategy})"
    if e.accepted:
        lines = [f"{head} was accepted: {timing_line(e, ctx.baseline_ms)}."] + insight_lines(e)
    else:
        lines = [f"{head} was {failure_lines(e)[0]}"] + failure_lines(e)[1:]
    text = "\n".join(lines)
    if with_code:
        text += "\nIts code was:\n" + _fence(_clip(candidate_body(e, ctx.reference_source), MAX_BODY))
    return text


def fix_prompt(e: Evaluation, ctx: Context, *, with_code: bool = False) -> str:
    return (verdict_feedback(e, ctx, with_code=with_code)
            + "\n\nFix it: reply with the complete corrected code, not a diff.")


def no_code_feedback(reason: str, truncated: bool = False) -> str:
    cut = " The reply was cut off at the token limit: write shorter code." if truncated else ""
    return (f"Your last reply had no usable code: {reason}.{cut} Reply with one ```python block holding the "
            "complete code, defining class ModelNew.")


def duplicate_feedback(strategy: str) -> str:
    return (f"Your last code is identical to a candidate already tried ({strategy}): change the approach or "
            "its parameters.")
