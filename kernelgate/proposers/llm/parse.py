"""Code out of a model's reply, tolerantly: fenced blocks (```python, ```py, ``` with no language, ~~~),
several blocks (the last one defining `class ModelNew`, with the helper blocks it uses joined before it),
prose around the code, a fence left open by a reply cut short, or bare code with no fence at all. A reply
with no usable code gives `Parsed(None, reason)`: the reason is recorded and goes back to the agent.
"""
from __future__ import annotations

import ast
import re
import textwrap
from dataclasses import dataclass

CLASS = "ModelNew"
PYTHON_TAGS = {"", "python", "py", "python3", "py3", "ipython", "pycon", "torch"}
_OPEN = re.compile(r"^[ \t]*(`{3,}|~{3,})[ \t]*([\w+#.-]*)")
_CODE_START = re.compile(r"^(import |from \S+ import |class |def |@|[A-Za-z_]\w*\s*=)")


@dataclass(frozen=True)
class Block:
    lang: str
    text: str
    closed: bool = True


@dataclass(frozen=True)
class Parsed:
    """The code to put after the reference (None: none usable, and why), and how it was found."""

    code: str | None
    reason: str = ""
    blocks: int = 0                  # fenced blocks in the reply
    joined: int = 0                  # helper blocks joined before the one defining ModelNew
    language: str = "torch"          # torch | triton | cuda | cpp (what the code builds)

    @property
    def ok(self) -> bool:
        return self.code is not None


def fenced_blocks(text: str) -> list[Block]:
    """Every fenced block, in order; a fence still open at the end of the reply runs to its end."""
    lines = text.splitlines()
    blocks, i = [], 0
    while i < len(lines):
        m = _OPEN.match(lines[i])
        if not m:
            i += 1
            continue
        fence, lang = m.group(1), m.group(2).lower()
        close = re.compile(rf"^[ \t]*{re.escape(fence[0])}{{{len(fence)},}}[ \t]*$")
        body, i = [], i + 1
        while i < len(lines) and not close.match(lines[i]):
            body.append(lines[i])
            i += 1
        blocks.append(Block(lang, textwrap.dedent("\n".join(body)).strip("\n"), i < len(lines)))
        i += 1
    return blocks


def _tree(code: str) -> ast.Module | None:
    try:
        return ast.parse(code)
    except (SyntaxError, ValueError):
        return None


def _syntax_error(code: str) -> str:
    try:
        ast.parse(code)
    except SyntaxError as e:
        return f"line {e.lineno}: {e.msg}"
    except ValueError as e:
        return str(e)
    return ""


def defines(tree: ast.Module, name: str = CLASS) -> bool:
    return any(isinstance(n, ast.ClassDef) and n.name == name for n in tree.body)


def _top_names(tree: ast.Module) -> set[str]:
    names: set[str] = set()
    for n in tree.body:
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(n.name)
        elif isinstance(n, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in n.names)
        elif isinstance(n, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = n.targets if isinstance(n, ast.Assign) else [n.target]
            for t in targets:
                names.update(x.id for x in ast.walk(t) if isinstance(x, ast.Name))
    return names


def _used_names(tree: ast.Module) -> set[str]:
    return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}


def language_of(code: str) -> str:
    """What the code builds: triton | cuda (load_inline with CUDA sources) | cpp (load_inline) | torch."""
    if re.search(r"^\s*(import triton|from triton)|@triton\.(jit|autotune)", code, re.M):
        return "triton"
    if re.search(r"load_inline|cpp_extension", code):
        return "cuda" if re.search(r"cuda_sources\s*=|__global__", code) else "cpp"
    return "torch"


def _bare_code(text: str) -> str | None:
    """Code with prose before or after it and no fence: from the first line that opens code to the longest
    end at which it parses and defines ModelNew."""
    lines = text.splitlines()
    starts = [i for i, line in enumerate(lines) if _CODE_START.match(line)]
    for start in starts[:5]:
        for end in range(len(lines), start, -1):
            chunk = "\n".join(lines[start:end])
            tree = _tree(chunk)
            if tree is not None and defines(tree):
                return chunk.strip("\n")
    return None


def extract_code(text: str, cls: str = CLASS) -> Parsed:
    """The candidate code in a reply, or why there is none."""
    if not text or not text.strip():
        return Parsed(None, "empty reply")
    blocks = fenced_blocks(text)
    py = [b for b in blocks if b.lang in PYTHON_TAGS and b.text.strip()]
    trees = [(b, _tree(b.text)) for b in py]
    mains = [(k, b, t) for k, (b, t) in enumerate(trees) if t is not None and defines(t, cls)]
    if mains:
        k, main, tree = mains[-1]
        used, have = _used_names(tree), _top_names(tree)
        helpers: list[int] = []
        # helper blocks before it that define names it uses and does not define (transitively)
        changed = True
        while changed:
            changed = False
            for j in range(k):
                hb, ht = trees[j]
                if j in helpers or ht is None or defines(ht, cls):
                    continue
                gives = _top_names(ht) - have
                if gives & used:
                    helpers.append(j)
                    have |= gives
                    used |= _used_names(ht)
                    changed = True
        code = "\n\n\n".join([trees[j][0].text for j in sorted(helpers)] + [main.text])
        return Parsed(code, "", len(blocks), len(helpers), language_of(code))
    # a block that mentions ModelNew but does not parse: its syntax error is the reason
    broken = [b for b in py if re.search(rf"\bclass\s+{cls}\b", b.text)]
    if broken:
        b = broken[-1]
        cut = " (the reply was cut off inside it)" if not b.closed else ""
        return Parsed(None, f"the code block defining {cls} does not parse: {_syntax_error(b.text)}{cut}",
                      len(blocks))
    bare = _bare_code(text) if not py else None
    if bare is not None:
        return Parsed(bare, "", len(blocks), 0, language_of(bare))
    if py:
        return Parsed(None, f"{len(py)} code block(s), none defines class {cls}", len(blocks))
    if blocks:
        langs = ", ".join(sorted({b.lang or "none" for b in blocks}))
        return Parsed(None, f"no Python code block defining class {cls} (blocks in: {langs})", len(blocks))
    if re.search(rf"\bclass\s+{cls}\b", text):
        return Parsed(None, f"class {cls} appears outside a code block and does not parse as Python")
    return Parsed(None, f"no code: the reply is prose only ({len(text.split())} words)")
