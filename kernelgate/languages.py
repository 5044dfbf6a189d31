"""The kernel languages a source is written in, read from its text (nothing is run): the port's scan and the
oracle's choice for references written as GPU kernels (oracle.own_precision) both read them here."""
from __future__ import annotations

import io
import re
import tokenize

#: kernel languages a source may be written in, and the text that shows each (a regular expression over the file)
LANGUAGE_SIGNS = {
    "triton": r"@triton\.jit|import triton\b|from triton\b",
    "cuda": r"load_inline\s*\([^)]*cuda_sources|__global__|cuda_sources\s*=",
    "pallas": r"pallas_call|from jax\.experimental import pallas|jax\.experimental\.pallas",
    "cpp": r"load_inline\s*\(|cpp_extension",
}
#: languages written in the Python code itself (their signs in a string are prose: a docstring); CUDA and C++
#: sources are strings handed to load_inline, so their signs count inside strings
IN_CODE = ("triton", "pallas")


def _views(source: str) -> tuple[str, str]:
    """(the source without comments, and without comments or strings); the text as is where it does not tokenize
    as Python. A comment or a docstring that names a language (`# TODO: port to Triton with @triton.jit`) is no
    kernel: it switched a CUDA reference's oracle to the reference's own precision (red team 29)."""
    try:
        toks = list(tokenize.generate_tokens(io.StringIO(source).readline))
    except (tokenize.TokenError, SyntaxError):
        return source, source
    lines = source.splitlines(keepends=True)
    starts = [0]
    for ln in lines:
        starts.append(starts[-1] + len(ln))

    def cut(kinds: tuple[int, ...]) -> str:
        out, pos = [], 0
        for t in toks:
            if t.type in kinds:
                a = starts[t.start[0] - 1] + t.start[1]
                b = starts[t.end[0] - 1] + t.end[1]
                out.append(source[pos:a])
                out.append(" ")
                pos = b
        out.append(source[pos:])
        return "".join(out)
    strings = (tokenize.STRING,) + tuple(getattr(tokenize, n) for n in ("FSTRING_START", "FSTRING_MIDDLE",
                                                                         "FSTRING_END") if hasattr(tokenize, n))
    return cut((tokenize.COMMENT,)), cut((tokenize.COMMENT,) + strings)


def kernel_languages(source: str) -> tuple[str, ...]:
    """The kernel languages a source uses (cpp only where no CUDA source is there); its text only, nothing run:
    Triton and Pallas in its code, CUDA and C++ in its code and strings, never in comments."""
    with_strings, code = _views(source)
    out = [lang for lang, sign in LANGUAGE_SIGNS.items()
           if re.search(sign, code if lang in IN_CODE else with_strings)]
    if "cuda" in out and "cpp" in out:
        out.remove("cpp")
    return tuple(out)
