"""Machine-code fingerprints of what a forward launches, and a distance between two of them.

A fingerprint holds, at the finest level available:

- code (Triton kernels): the compiled artifacts the worker found in its private Triton / Inductor caches,
  matched to the launched kernels by name (and, between autotuning variants of one name, by block size
  and shared memory). SASS comes from `cuobjdump -sass` (else `nvdisasm`) on the cubin when either tool
  is on PATH; PTX and TTGIR are read as text. Each is reduced to an opcode histogram (static counts:
  each instruction in the code once, whatever it executes);
- launches (any CUDA kernel, cuBLAS/cuDNN/ATen included): the multiset of kernel names per forward, and
  of launch signatures (name, grid, block, registers, shared memory);
- ops (CPU): the multiset of top-level ATen op names per forward.

`distance(a, b)` is in [0, 1], symmetric, 0 for identical fingerprints:

- `1 - cosine similarity` of the summed opcode histograms, at the finest code level (sass > ptx > ttgir)
  that covers *every* kernel both sides launch; 0 = the same instruction mix, 1 = no opcode in common;
- otherwise the weighted Jaccard distance (1 - sum min / sum max) of kernel-name multisets (CPU: op
  names); 0 = the same kernels launched as often, 1 = no kernel in common.

When it misleads: an instruction mix is not a program. Two kernels with the same mix can differ in
schedule, unrolling, tiling, memory-access order and speed (distance near 0, different behaviour), and
the histograms are static, so a loop body counts once however often it runs. Kernel names are labels:
renaming a kernel makes it "disjoint" (distance 1) without changing a byte of code, while a kernel keeping
its name after its body changed (inductor's `triton_poi_fused_add_0`, a cuBLAS kernel picked by heuristics)
reads as identical. Code from different compiler versions differs for reasons unrelated to the candidate.
Use the distance to tell "the same code again" from "something new", not to rank speed.
"""
from __future__ import annotations

import json
import math
import re
import shutil
import subprocess
import tempfile
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping

from .records import Profile

LEVELS = ("sass", "ptx", "ttgir")          # finest first
_SASS_LINE = re.compile(r"^\s*/\*[0-9a-fA-F]{4,}\*/\s+(?:@!?U?P[T0-9]+\s+)?([A-Z][A-Z0-9_]*)(?:\.[A-Z0-9_.]+)?\b")
_PTX_SPACES = ("global", "shared", "local", "param", "const", "tex")
_PTX_OPCODE = re.compile(r"^(?:@!?%\w+\s+)?([a-z][a-z0-9_]*)((?:\.[a-z0-9_:]+)*)")
_MLIR_OP = re.compile(r"^\s*(?:%[\w#:, ]+=\s*)?\"?([a-z_][a-z0-9_]*\.[a-z_][a-z0-9_.]*)\"?[\s(<{]")


# ------------------------------------------------------------------ opcode histograms

def sass_histogram(text: str) -> Counter[str]:
    """Opcode counts of `cuobjdump -sass` / `nvdisasm` output: the mnemonic without modifiers or predicate."""
    counts: Counter[str] = Counter()
    for line in text.splitlines():
        m = _SASS_LINE.match(line)
        if m:
            counts[m.group(1)] += 1
    return counts


def ptx_histogram(text: str) -> Counter[str]:
    """Opcode counts of PTX: the mnemonic, plus the state space for memory ops (ld.global, st.shared, ...)."""
    counts: Counter[str] = Counter()
    for raw in text.splitlines():
        line = raw.split("//", 1)[0].strip()
        if not line or line.startswith((".", "{", "}", "$", "(", ")")) or line.endswith(":") or ";" not in line:
            continue
        m = _PTX_OPCODE.match(line)
        if not m:
            continue
        space = next((s for s in m.group(2).split(".") if s in _PTX_SPACES), "")
        counts[f"{m.group(1)}.{space}" if space else m.group(1)] += 1
    return counts


def ttgir_histogram(text: str) -> Counter[str]:
    """Op counts of Triton GPU IR (MLIR): dialect.op names (tt.load, ttg.convert_layout, arith.addf, ...)."""
    counts: Counter[str] = Counter()
    for line in text.splitlines():
        s = line.strip()
        if not s or s.startswith(("#", "//", "module", "}", "^")) or s.startswith("loc("):
            continue
        m = _MLIR_OP.match(s + " ")
        if m:
            counts[m.group(1)] += 1
    return counts


PARSERS = {"sass": sass_histogram, "ptx": ptx_histogram, "ttgir": ttgir_histogram}


def opcode_histogram(text: str, level: str) -> Counter[str]:
    """Opcode counts of code at `level` (sass | ptx | ttgir)."""
    if level not in PARSERS:
        raise ValueError(f"unknown code level '{level}': one of {', '.join(PARSERS)}")
    return PARSERS[level](text)


def normalized(hist: Mapping[str, float]) -> dict[str, float]:
    """Counts as shares summing to 1 ({} for an empty histogram)."""
    total = float(sum(hist.values()))
    return {k: v / total for k, v in sorted(hist.items())} if total > 0 else {}


def cosine_distance(a: Mapping[str, float], b: Mapping[str, float]) -> float:
    """1 - cosine similarity of two histograms, clamped to [0, 1]; two empty histograms are identical."""
    na = math.sqrt(sum(v * v for v in a.values()))
    nb = math.sqrt(sum(v * v for v in b.values()))
    if na == 0 or nb == 0:
        return 0.0 if na == nb else 1.0
    dot = sum(v * b.get(k, 0.0) for k, v in a.items())
    return min(1.0, max(0.0, 1.0 - dot / (na * nb)))


def jaccard_distance(a: Mapping[str, float], b: Mapping[str, float]) -> float:
    """Weighted Jaccard distance of two multisets: 1 - sum(min) / sum(max); two empty ones are identical."""
    keys = set(a) | set(b)
    top = sum(max(a.get(k, 0.0), b.get(k, 0.0)) for k in keys)
    if top == 0:
        return 0.0
    return 1.0 - sum(min(a.get(k, 0.0), b.get(k, 0.0)) for k in keys) / top


def kernel_name(name: str) -> str:
    """A launch name without a leading return type or trailing parameter list (demangled C++ kernels)."""
    s = name.strip()
    if s.startswith("void "):
        s = s[5:]
    if s.endswith(")"):
        depth = 0
        for i in range(len(s) - 1, -1, -1):
            depth += {")": 1, "(": -1}.get(s[i], 0)
            if depth == 0:
                if i > 0:
                    s = s[:i]
                break
    return s.strip()


# ------------------------------------------------------------------ disassembly

def disassembler() -> list[str] | None:
    """The command that turns a cubin into SASS text, when a CUDA binary tool is on PATH."""
    if shutil.which("cuobjdump"):
        return ["cuobjdump", "-sass"]
    if shutil.which("nvdisasm"):
        return ["nvdisasm"]
    return None


def disassemble(cubin: bytes, timeout: float = 60.0) -> str | None:
    """SASS of a cubin (cuobjdump -sass, else nvdisasm), or None when neither tool works on it."""
    cmd = disassembler()
    if cmd is None or not cubin:
        return None
    with tempfile.TemporaryDirectory(prefix="kernelgate-sass-") as d:
        path = Path(d) / "kernel.cubin"
        path.write_bytes(cubin)
        try:
            done = subprocess.run(cmd + [str(path)], capture_output=True, text=True, timeout=timeout)
        except (OSError, subprocess.SubprocessError):
            return None
    return done.stdout if done.returncode == 0 and done.stdout.strip() else None


# ------------------------------------------------------------------ fingerprints

@dataclass(frozen=True)
class KernelCode:
    """The compiled code found for one launched kernel name."""

    name: str
    levels: dict[str, dict[str, int]]      # level -> opcode counts
    num_warps: int | None = None
    shared: int | None = None
    variants: int = 1                      # cached builds of this name (autotuning); 1 was picked

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "levels": {k: sum(v.values()) for k, v in self.levels.items()},
                "num_warps": self.num_warps, "shared": self.shared, "variants": self.variants,
                "histograms": self.levels}


@dataclass(frozen=True)
class Fingerprint:
    basis: str                                              # code level | launches | ops | empty
    names: dict[str, float]                                 # kernel (CPU: op) name -> launches per forward
    signatures: dict[str, float] = field(default_factory=dict)   # name + launch configuration -> per forward
    code: dict[str, KernelCode] = field(default_factory=dict)    # kernel name -> its code
    notes: tuple[str, ...] = ()

    def coverage(self, level: str) -> bool:
        """True when every launched kernel has code at `level`."""
        return bool(self.names) and all(n in self.code and level in self.code[n].levels for n in self.names)

    def histogram(self, level: str) -> dict[str, int]:
        """Opcode counts at `level` summed over the launched kernels that have code there."""
        total: Counter[str] = Counter()
        for n in self.names:
            kc = self.code.get(n)
            if kc and level in kc.levels:
                total.update(kc.levels[level])
        return dict(sorted(total.items()))

    def to_json(self) -> dict[str, Any]:
        level = self.basis if self.basis in LEVELS else next((lv for lv in LEVELS if self.histogram(lv)), None)
        hist = normalized(self.histogram(level)) if level else {}
        return {"basis": self.basis, "kernels": dict(sorted(self.names.items(), key=lambda kv: -kv[1])),
                "signatures": self.signatures, "code": [c.to_json() for c in self.code.values()],
                "histogram_level": level, "histogram": {k: round(v, 5) for k, v in hist.items()},
                "notes": list(self.notes)}


@dataclass(frozen=True)
class Distance:
    value: float
    basis: str                 # sass | ptx | ttgir | launches | ops
    meaning: str
    components: dict[str, float] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"value": round(self.value, 6), "basis": self.basis, "meaning": self.meaning,
                "components": {k: round(v, 6) for k, v in self.components.items()}}


def _meta(text: str) -> tuple[int | None, int | None]:
    try:
        doc = json.loads(text)
    except ValueError:
        return None, None
    if not isinstance(doc, dict):
        return None, None
    warps, shared = doc.get("num_warps"), doc.get("shared")
    return (warps if isinstance(warps, int) else None, shared if isinstance(shared, int) else None)


def code_of(artifacts: Iterable[Mapping[str, Any]], launched: Mapping[str, tuple[int | None, int | None]],
            sass: bool = True) -> tuple[dict[str, KernelCode], list[str]]:
    """Code per launched kernel from the worker's artifacts.

    `launched` maps a kernel name to the (threads per block, shared memory) it ran with; among several cached
    builds of one name the one with matching num_warps x 32 and shared memory is taken."""
    builds: dict[tuple[str, str], dict[str, Any]] = {}
    for a in artifacts:
        kernel, kind, where, data = a.get("kernel"), a.get("kind"), a.get("dir"), a.get("data")
        if not (isinstance(kernel, str) and isinstance(kind, str) and isinstance(where, str)) or kernel not in launched:
            continue
        if kind == "cubin" and isinstance(data, (bytes, bytearray)):
            builds.setdefault((kernel, where), {})["cubin"] = bytes(data)
        elif kind in ("ptx", "ttgir", "json") and isinstance(data, str):
            builds.setdefault((kernel, where), {})[kind] = data
    notes: list[str] = []
    out: dict[str, KernelCode] = {}
    no_tool = sass and disassembler() is None
    for name, (threads, smem) in launched.items():
        variants = sorted((w, b) for (k, w), b in builds.items() if k == name)
        if not variants:
            continue

        def fits(b: dict[str, Any]) -> bool:
            warps, shared = _meta(b.get("json", ""))
            return ((threads is None or warps is None or warps * 32 == threads)
                    and (smem is None or shared is None or shared == smem))
        matching = [b for _, b in variants if fits(b)] or [b for _, b in variants]
        chosen = matching[0]
        levels: dict[str, dict[str, int]] = {}
        if sass and "cubin" in chosen:
            text = disassemble(chosen["cubin"])
            if text:
                levels["sass"] = dict(sass_histogram(text))
        for level in ("ptx", "ttgir"):
            if level in chosen:
                levels[level] = dict(opcode_histogram(chosen[level], level))
        levels = {k: v for k, v in levels.items() if v}
        if not levels:
            continue
        warps, shared = _meta(chosen.get("json", ""))
        out[name] = KernelCode(name, levels, warps, shared, len(variants))
        if len(matching) > 1:
            notes.append(f"{name}: {len(matching)} cached builds match its launch configuration; the first is used")
    if no_tool and any("cubin" in b for b in builds.values()):
        notes.append("neither cuobjdump nor nvdisasm is on PATH: no SASS, PTX/TTGIR histograms only")
    return out, notes


def build(profile: Profile, artifacts: Iterable[Mapping[str, Any]] = (), sass: bool = True) -> Fingerprint:
    """Fingerprint of a profiled forward: code where the worker found it, else kernel (CPU: op) names."""
    n = max(profile.forwards, 1)
    names: Counter[str] = Counter()
    sigs: Counter[str] = Counter()
    launched: dict[str, tuple[int | None, int | None]] = {}
    kinds = ("kernel",) if profile.kernels_applicable else ("op",)
    for x in profile.launches:
        if x.kind not in kinds:
            continue
        name = kernel_name(x.name)
        names[name] += 1
        if profile.kernels_applicable:
            sigs[f"{name} grid={x.grid} block={x.block} regs={x.registers} smem={x.shared_memory}"] += 1
            launched.setdefault(name, (x.threads_per_block, x.shared_memory))
    per_fwd = {k: v / n for k, v in names.items()}
    if not profile.kernels_applicable:
        return Fingerprint("ops" if per_fwd else "empty", per_fwd, {}, {},
                           ("CPU: no machine code is collected; the fingerprint is the top-level op names",))
    code, notes = code_of(artifacts, launched, sass)
    basis = next((lv for lv in LEVELS if per_fwd and all(k in code and lv in code[k].levels for k in per_fwd)),
                 "launches" if per_fwd else "empty")
    if basis == "launches" and code:
        notes.append(f"code found for {len(code)} of {len(per_fwd)} kernels (the others are library or "
                     "precompiled kernels): the fingerprint is the kernel names and launch configurations")
    return Fingerprint(basis, per_fwd, {k: v / n for k, v in sigs.items()}, code, tuple(notes))


def from_json(d: Mapping[str, Any]) -> Fingerprint:
    """A fingerprint back from `Fingerprint.to_json()` (distances between stored candidates)."""
    code = {}
    for c in d.get("code") or []:
        hist = c.get("histograms") or {}
        code[str(c["name"])] = KernelCode(str(c["name"]), {str(k): {str(o): int(n) for o, n in v.items()}
                                                            for k, v in hist.items()},
                                          c.get("num_warps"), c.get("shared"), int(c.get("variants", 1)))
    return Fingerprint(str(d.get("basis", "empty")), {str(k): float(v) for k, v in (d.get("kernels") or {}).items()},
                       {str(k): float(v) for k, v in (d.get("signatures") or {}).items()}, code,
                       tuple(d.get("notes") or ()))


MEANING = {
    "code": "1 - cosine similarity of {level} opcode histograms: 0 = the same static instruction mix "
            "(not necessarily the same program), 1 = no opcode in common",
    "launches": "weighted Jaccard distance of kernel-name multisets per forward: 0 = the same kernels launched "
                "as often, 1 = no kernel name in common (a renamed kernel counts as new)",
    "ops": "weighted Jaccard distance of top-level op-name multisets per forward: 0 = the same ops, 1 = none "
           "in common",
}


def distance(a: Fingerprint, b: Fingerprint) -> Distance:
    """Distance in [0, 1] between two fingerprints, on the finest basis both cover completely."""
    components = {"names": jaccard_distance(a.names, b.names)}
    if a.signatures or b.signatures:
        components["launch_signatures"] = jaccard_distance(a.signatures, b.signatures)
    for level in LEVELS:
        ha, hb = a.histogram(level), b.histogram(level)
        if ha and hb:
            components[level] = cosine_distance(normalized(ha), normalized(hb))
    for level in LEVELS:
        if a.coverage(level) and b.coverage(level):
            return Distance(components[level], level, MEANING["code"].format(level=level.upper()), components)
    basis = "ops" if "ops" in (a.basis, b.basis) else "launches"
    return Distance(components["names"], basis, MEANING[basis], components)
