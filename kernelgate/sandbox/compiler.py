"""A build failure's first compiler error, in one line (C/C++, CUDA, Triton): what the verdict's message leads with."""
from __future__ import annotations

import re

#: a C/C++ or CUDA compiler's diagnostic (gcc/clang: file:line:col: error: ...; nvcc: file(line): error: ...)
_CC_ERROR = re.compile(r"^(?P<loc>\S+?(?::\d+:\d+|\(\d+\))):?\s+(?:fatal\s+)?error:?\s*(?P<what>.+)$", re.M)


def compiler_error(text: str) -> str | None:
    """The first compiler error in a build failure's text, as one line with its file's name and position
    (`main.cpp:2:17: 'x' was not declared`; nvcc's `kernel.cu(12): ...`; a Triton CompilationError's position and
    cause); None when there is none."""
    m = _CC_ERROR.search(text)
    if m:
        loc = m.group("loc").rsplit("/", 1)[-1]
        return f"{loc}: {m.group('what').strip()}"[:300]
    t = re.search(r"CompilationError: at (\d+:\d+):\n(?:.*\n)*?\s*\^+\s*\n\s*(\S.*)", text)
    if t:
        return f"Triton, at {t.group(1)}: {t.group(2).strip()}"[:300]
    return None
