"""Which runtime files of kernels/ go into a candidate file, and the bundle they make.

A candidate is one file, run by a sandboxed worker that may import torch and triton and nothing of
kernelgate, so the code its rewrite level calls (rewrites, launchers, renderers, the source cache) travels
in that file. MANIFEST names the files each runtime needs; bundle() joins the files of the runtimes a
candidate uses, each whole and once, in RUNTIME_FILES order, with their relative imports of each other
dropped: in one namespace every name is defined above the files that import it. The modules the package
and its tests import are thus the very text a candidate runs.

Rules for a runtime file (tests/kernels/test_manifest.py checks them): it imports torch, triton, jax (the
pallas files, lazily) and the standard library, and of kernelgate only sibling runtime files listed before
it, relatively and at the top level; every name it defines at the top level starts with kg_ / _kg_ / KG_ / _KG_ (the candidate's
namespace also holds the reference's names and the other library code pasted there) and no other runtime
file defines it; no `from __future__` import (it would have to open the candidate file).
"""
from __future__ import annotations

import ast
import functools
from pathlib import Path

HERE = Path(__file__).resolve().parent

#: every runtime file, in bundle order (a file comes after the files it imports)
RUNTIME_FILES = ("ir.py", "fx.py", "cache.py", "triton_render.py", "triton_launch.py", "triton_rewrite.py",
                 "cpp_render.py", "cpp_launch.py", "cpp_rewrite.py", "pallas_render.py", "pallas_launch.py",
                 "pallas_rewrite.py")

#: runtime -> the files every candidate using it gets
MANIFEST: dict[str, tuple[str, ...]] = {
    "triton": ("ir.py", "fx.py", "cache.py", "triton_render.py", "triton_launch.py", "triton_rewrite.py"),
    "cpp": ("ir.py", "fx.py", "cache.py", "cpp_render.py", "cpp_launch.py", "cpp_rewrite.py"),
    "pallas": ("ir.py", "fx.py", "pallas_render.py", "pallas_launch.py", "pallas_rewrite.py"),
}


def files(runtimes) -> list[str]:
    """The files the runtimes need, each once, in bundle order."""
    wanted = {f for r in runtimes for f in MANIFEST[r]}
    return [f for f in RUNTIME_FILES if f in wanted]


def _without_relative_imports(name: str, text: str, before: list[str]) -> str:
    """The file's text less its top-level relative imports, each of a file bundled before it."""
    tree = ast.parse(text, name)
    top = set(map(id, tree.body))
    drop: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level:
            source = f"{node.module}.py"
            if id(node) not in top or node.level != 1 or source not in before:
                raise ValueError(f"kernels/{name}: `from {'.' * node.level}{node.module or ''} import` must be a "
                                 "top-level import of a runtime file bundled before it")
            drop.update(range(node.lineno - 1, node.end_lineno))
    return "".join(line for i, line in enumerate(text.splitlines(keepends=True)) if i not in drop)


@functools.lru_cache(maxsize=None)
def _bundle(runtimes: tuple[str, ...]) -> str:
    parts, done = [], []
    for name in files(runtimes):
        parts.append(f"# ---- kernels/{name} ----\n" + _without_relative_imports(name, (HERE / name).read_text(), done))
        done.append(name)
    return "\n\n".join(parts)


def bundle(runtimes) -> str:
    """The source a candidate holds for these runtimes (MANIFEST keys): self-contained, kernelgate-free."""
    return _bundle(tuple(sorted(set(runtimes))))
