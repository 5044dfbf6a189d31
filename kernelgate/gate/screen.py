"""Static screen of candidate source: advisory notes for messages and reviewers, never proof."""
from __future__ import annotations

import ast
import re
from pathlib import Path

PATTERNS = {
    r"\bthreading\b|\bconcurrent\.futures\b|\bmultiprocessing\b": "starts threads or processes",
    r"\bgc\.(get_objects|get_referrers|get_referents)|\binspect\.(stack|currentframe)|sys\._getframe|"
    r"__traceback__|\btb_frame\b|\bf_back\b|\bf_locals\b|LocalsToFast|\bsys\.modules\b|__main__":
        "reaches into the interpreter (frames, gc, sys.modules): the harness in its process can be rewritten "
        "this way, so a verdict on such a candidate deserves a reviewer's look",
    r"\bctypes\b": "uses ctypes",
    r"cuda\.Stream\(|torch\.cuda\.stream\(": "uses CUDA streams (work must be joined to the caller's stream)",
    r"allow_tf32|set_float32_matmul_precision|reduced_precision_reduction": "touches global precision flags",
    r"\bopen\(|\.write_bytes\(|\.write_text\(|pickle\.dump|torch\.save": "writes or reads files",
    r"\bCUDAGraph\b|cuda\.graph\(": "captures CUDA graphs (replays must see fresh inputs)",
    r"\bmanual_seed\(": "sets a random seed",
}


def scan(path: str) -> list[str]:
    """One note per suspicious pattern found in the candidate source."""
    try:
        text = Path(path).read_text(errors="replace")
    except OSError:
        return []
    notes = [f"static screen: {what}" for pat, what in PATTERNS.items() if re.search(pat, text)]
    if _forward_has_try(text):
        notes.append("static screen: forward has a try/except (a fallback path may hide what actually runs)")
    return notes


def _forward_has_try(text: str) -> bool:
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return False
    return any(isinstance(node, ast.FunctionDef) and node.name == "forward"
               and any(isinstance(n, ast.Try) for n in ast.walk(node)) for node in ast.walk(tree))
