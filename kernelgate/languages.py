"""The kernel languages a source is written in, read from its text (nothing is run): the port's scan and the
oracle's choice for references written as GPU kernels (oracle.own_precision) both read them here."""
from __future__ import annotations

import re

#: kernel languages a source may be written in, and the text that shows each (a regular expression over the file)
LANGUAGE_SIGNS = {
    "triton": r"@triton\.jit|import triton\b|from triton\b",
    "cuda": r"load_inline\s*\([^)]*cuda_sources|__global__|cuda_sources\s*=",
    "pallas": r"pallas_call|from jax\.experimental import pallas|jax\.experimental\.pallas",
    "cpp": r"load_inline\s*\(|cpp_extension",
}


def kernel_languages(source: str) -> tuple[str, ...]:
    """The kernel languages a source uses (cpp only where no CUDA source is there); its text only, nothing run."""
    out = [lang for lang, sign in LANGUAGE_SIGNS.items() if re.search(sign, source)]
    if "cuda" in out and "cpp" in out:
        out.remove("cpp")
    return tuple(out)
