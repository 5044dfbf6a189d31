"""What a kernel's source says that the port's target language cannot say directly, and how a port handles it.

`scan(source)` finds the kernel languages a workload's source uses (Triton, CUDA C++ through load_inline, JAX
Pallas) and, in the kernels' text, the constructs a port has to translate: lane-level shuffles, persistent
grids, explicit shared memory, asynchronous copies, atomics, inline assembly, tensor-core intrinsics, barriers,
cooperative groups, block pointers and descriptors. Each `Found` carries its line numbers. `handling(found,
target)` says, for the port's target language, whether the construct has a direct counterpart and what the port
writes instead (report.py's port section lists them). A scan reads text only: it runs nothing.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from ..languages import kernel_languages as languages


@dataclass(frozen=True)
class Construct:
    """One construct of a kernel language a port must translate."""

    key: str
    language: str                   # the language whose source shows it
    pattern: str                    # a regular expression over one line of the source
    what: str                       # what it is, in words


CONSTRUCTS: tuple[Construct, ...] = (
    # CUDA C++
    Construct("warp-shuffle", "cuda", r"__shfl(_xor|_down|_up)?(_sync)?\s*\(", "warp-level shuffles"),
    Construct("warp-vote", "cuda", r"__(ballot|any|all)_sync\s*\(|__activemask\s*\(", "warp votes"),
    Construct("shared-memory", "cuda", r"__shared__", "explicit shared memory"),
    Construct("async-copy", "cuda", r"cp\.async|memcpy_async|__pipeline_memcpy_async|cuda::pipeline|"
              r"cp\.async\.bulk|cuTensorMap", "asynchronous copies (cp.async / TMA)"),
    Construct("atomics", "cuda", r"\batomic(Add|Max|Min|CAS|Exch|Sub|And|Or|Xor)\w*\s*\(", "atomics"),
    Construct("barrier", "cuda", r"__syncthreads\s*\(|__syncwarp\s*\(", "block / warp barriers"),
    Construct("persistent-grid", "cuda", r"\+=\s*(gridDim\.x\s*\*\s*blockDim\.x|blockDim\.x\s*\*\s*gridDim\.x|"
              r"gridDim\.x)\b", "persistent (grid-stride) loops"),
    Construct("tensor-core", "cuda", r"\bwmma::|mma\.sync|wgmma|\bmma_sync\s*\(", "tensor-core intrinsics"),
    Construct("inline-asm", "cuda", r"\basm\s*(volatile)?\s*\(", "inline PTX"),
    Construct("cooperative-groups", "cuda", r"cooperative_groups|this_grid\s*\(|\.sync\s*\(\s*\)",
              "cooperative groups"),
    Construct("read-only-cache", "cuda", r"__ldg\s*\(", "read-only cache loads"),
    # Triton
    Construct("atomics", "triton", r"\btl\.atomic_\w+\s*\(", "atomics"),
    Construct("inline-asm", "triton", r"\btl\.inline_asm_elementwise\s*\(", "inline PTX"),
    Construct("persistent-grid", "triton", r"\btl\.num_programs\s*\(", "persistent grids (a loop over tiles)"),
    Construct("tensor-core", "triton", r"\btl\.dot\s*\(", "tensor-core matrix products (tl.dot)"),
    Construct("block-pointer", "triton", r"\btl\.make_block_ptr\s*\(|\btl\.make_tensor_descriptor\s*\(|"
              r"_experimental_descriptor", "block pointers / tensor descriptors (TMA)"),
    Construct("barrier", "triton", r"\btl\.debug_barrier\s*\(", "barriers"),
    Construct("scan", "triton", r"\btl\.(cumsum|cumprod|associative_scan)\s*\(", "scans"),
    Construct("random", "triton", r"\btl\.(rand|randn|randint)\w*\s*\(", "in-kernel random numbers"),
    Construct("pipelining", "triton", r"\bnum_stages\s*=|tl\.range\s*\([^)]*num_stages",
              "software pipelining (num_stages)"),
)

#: target language -> construct key -> (direct counterpart?, how the port handles it)
HANDLING: dict[str, dict[str, tuple[bool, str]]] = {
    "pallas": {
        "warp-shuffle": (False, "no lane-level shuffles: a block-wide reduction over the block's array "
                                "(jnp.max / jnp.sum along an axis), which the compiler lowers to shuffles"),
        "warp-vote": (False, "no warp votes: a reduction of the block's boolean array (jnp.any / jnp.all)"),
        "shared-memory": (False, "no explicit shared memory: BlockSpecs place each block on chip, and values kept "
                                 "between steps live in the kernel's arrays (scratch refs where a kernel needs them)"),
        "async-copy": (False, "no hand-written asynchronous copies: the pipeline over the grid's BlockSpecs issues "
                              "and overlaps the copies"),
        "atomics": (True, "pl.atomic_add and its kin where the lowering offers them; a port prefers a grid whose "
                          "blocks own their outputs (a reduction within the block) over atomics"),
        "barrier": (False, "no explicit barriers: a Pallas kernel body is one block's program, ordered as written"),
        "persistent-grid": (False, "no persistent loop: the grid spans the tiles, one program per tile"),
        "tensor-core": (True, "jnp.dot / pl.dot of the blocks, lowered to the tensor cores"),
        "inline-asm": (False, "not expressible: the port writes the operation in jnp (the plain form the assembly "
                              "implements)"),
        "cooperative-groups": (False, "no grid-wide sync: split into separate pallas_calls"),
        "read-only-cache": (False, "no cache hints: plain block loads"),
        "block-pointer": (True, "BlockSpecs: a block shape and an index map per operand"),
        "scan": (True, "jnp.cumsum / lax.associative_scan inside the block"),
        "random": (False, "no in-kernel generator on every lowering: random values are drawn outside the kernel"),
        "pipelining": (True, "the grid's pipeline (num_stages in the compiler parameters where the lowering takes "
                             "them)"),
    },
    "triton": {
        "warp-shuffle": (False, "no shuffles: tl.max / tl.sum over a block, lowered to shuffles"),
        "warp-vote": (False, "a reduction of a boolean block"),
        "shared-memory": (False, "managed by the compiler: blocks of tl.load"),
        "async-copy": (True, "num_stages pipelining and tensor descriptors issue cp.async / TMA"),
        "atomics": (True, "tl.atomic_*"),
        "barrier": (True, "tl.debug_barrier, rarely needed"),
        "persistent-grid": (True, "a loop over tiles with tl.num_programs"),
        "tensor-core": (True, "tl.dot"),
        "inline-asm": (True, "tl.inline_asm_elementwise"),
        "cooperative-groups": (False, "no grid-wide sync: separate launches"),
        "read-only-cache": (True, "eviction / cache modifiers on tl.load"),
        "scan": (True, "tl.cumsum / tl.associative_scan"),
        "random": (True, "tl.rand"),
        "pipelining": (True, "num_stages"),
        "block-pointer": (True, "tl.make_block_ptr / tensor descriptors"),
    },
    "cuda": {key: (True, "written directly in CUDA C++") for key in {c.key for c in CONSTRUCTS}},
}


@dataclass(frozen=True)
class Found:
    key: str
    language: str
    what: str
    lines: tuple[int, ...]          # 1-based line numbers in the source

    def to_json(self) -> dict:
        return {"construct": self.key, "language": self.language, "what": self.what, "lines": list(self.lines)}


@dataclass(frozen=True)
class Scan:
    languages: tuple[str, ...]      # kernel languages the source uses, in languages.py's order
    found: tuple[Found, ...]

    def to_json(self) -> dict:
        return {"languages": list(self.languages), "constructs": [f.to_json() for f in self.found]}


def scan(source: str) -> Scan:
    """The source's kernel languages and, for each, the constructs its text shows (with their lines)."""
    langs = languages(source)
    lines = source.splitlines()
    found = []
    for c in CONSTRUCTS:
        if c.language not in langs:
            continue
        hits = tuple(i + 1 for i, line in enumerate(lines) if re.search(c.pattern, line))
        if hits:
            found.append(Found(c.key, c.language, c.what, hits))
    return Scan(langs, tuple(found))


def handling(found: Found, target: str) -> tuple[bool, str]:
    """(direct counterpart in the target language?, how a port to it handles the construct)."""
    return HANDLING.get(target, {}).get(found.key, (False, "no rule for this target: translated by hand"))
