"""The harness's integer mixes on the CPU in C: output digests, positional digests, the timed inputs' noise and values.

Inside the judge's clock, every timed CPU iteration builds fresh inputs (noise from `sandbox/loop.py`'s
`cpu_noise_bytes`), digests its outputs (`digest.digest`) and digests its inputs after the call
(`digest.positional`). As chains of torch ops on one intra-op thread these were about 17 passes over an
8 MiB operand (2.6 ms of a 4 ms harness on a 2-core CPU): more than a memory-bound call of a few ms, whose
speedup the clock then could not resolve apart from the harness. One C loop each does the same integer
arithmetic in one pass, bit for bit (wrapping, the same shifts), so a process with this library and one
without it agree on every digest and every input.

The judge compiles the source once per process (`build`, a C compiler from $CC, cc or gcc; about 0.1 s) in a
private directory and keeps the bytes; each worker gets the bytes from the judge before any candidate code
(`load`: written to an anonymous memory file and opened from there, so no file a candidate could have written
is ever loaded), checks them against the torch forms on a test tensor, and uses them from then on. Where
there is no compiler, no memory file or the check fails, everything stays on the torch forms.
Imports nothing of kernelgate.
"""
from __future__ import annotations

import ctypes
import os
import shutil
import struct
import subprocess
import tempfile
import threading

import torch

SOURCE = r"""
#include <stdint.h>
#include <stddef.h>
/* digest.py `_digest_torch`: the wrapping sum of w ^ (w >> 29), arithmetic shift */
int64_t kg_digest(const int64_t *w, size_t n) {
    uint64_t t = 0;
    for (size_t i = 0; i < n; i++) { int64_t v = w[i]; t += (uint64_t)(v ^ (v >> 29)); }
    return (int64_t)t;
}
/* digest.py `positional`: word i offset by (first + i) * STEP + key, mixed, summed (wrapping) */
int64_t kg_positional(const int64_t *w, size_t n, uint64_t first, int64_t key) {
    const uint64_t STEP = 0x9E3779B97F4A7C15ull, MUL = 0xBF58476D1CE4E5B9ull;
    uint64_t t = 0;
    for (size_t i = 0; i < n; i++) {
        int64_t x = (int64_t)((first + (uint64_t)i) * STEP + (uint64_t)key);
        x ^= w[i];
        x ^= x >> 29;
        x = (int64_t)((uint64_t)x * MUL);
        x ^= x >> 32;
        t += (uint64_t)x;
    }
    return (int64_t)t;
}
/* loop.py `fresh`'s CPU float32 input: ((byte - 127.5) * c) + x * s, each product and sum rounded to float32 on
   its own (built with -ffp-contract=off: no fused multiply-add), as the torch form's separate ops round */
void kg_fresh_floats(float *dst, const float *x, size_t n, uint32_t a, uint32_t b, float c, float s) {
    uint32_t buf[1024];
    const uint8_t *bytes = (const uint8_t *)buf;
    for (size_t t = 0; t < n; t += 4096) {
        size_t e = n - t < 4096 ? n - t : 4096, words = (e + 3) / 4, first = t / 4;
        for (size_t i = 0; i < words; i++) {
            uint32_t v = a * (uint32_t)(first + i) + b;
            v ^= v >> 16; v *= 0x85EBCA6Bu; v ^= v >> 13; v *= 0xC2B2AE35u; v ^= v >> 16;
            buf[i] = v;
        }
        for (size_t j = 0; j < e; j++) {
            float noise = ((float)bytes[j] - 127.5f) * c;
            float scaled = x[t + j] * s;
            dst[t + j] = noise + scaled;
        }
    }
}
"""

FLAGS = ("-O3", "-march=native", "-shared", "-fPIC", "-fno-strict-aliasing", "-ffp-contract=off")
BUILD_TIMEOUT_S = 60.0

_LOCK = threading.Lock()
_BUILT: list = []            # [bytes | None]: this process's build, once
_LOADED: list = []           # [True] once the library is loaded and checked here


def compiler() -> str | None:
    for name in (os.environ.get("CC", ""), "cc", "gcc"):
        if name and shutil.which(name):
            return shutil.which(name)
    return None


def build() -> bytes | None:
    """The compiled library's bytes (built once per process, in a private directory removed after), or None
    without a compiler or where the build fails."""
    with _LOCK:
        if not _BUILT:
            _BUILT.append(_compile())
        return _BUILT[0]


def _compile() -> bytes | None:
    cc = compiler()
    if cc is None:
        return None
    with tempfile.TemporaryDirectory(prefix="kg-native-") as d:      # mode 0700: only this user
        src, lib = os.path.join(d, "kg_native.c"), os.path.join(d, "kg_native.so")
        with open(src, "w") as f:
            f.write(SOURCE)
        try:
            subprocess.run([cc, *FLAGS, "-o", lib, src], check=True, capture_output=True, timeout=BUILD_TIMEOUT_S)
            with open(lib, "rb") as f:
                return f.read()
        except (OSError, subprocess.SubprocessError):
            return None


def _functions(lib) -> dict:
    """The library's functions, each a new function pointer object (never the ones `CDLL.__getattr__` caches on
    the library object), typed."""
    spec = {"kg_digest": (ctypes.c_int64, [ctypes.c_void_p, ctypes.c_size_t]),
            "kg_positional": (ctypes.c_int64, [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_uint64, ctypes.c_int64]),
            "kg_fresh_floats": (None, [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_uint32,
                                       ctypes.c_uint32, ctypes.c_float, ctypes.c_float])}
    out = {}
    for name, (res, args) in spec.items():
        f = lib[name]
        f.restype, f.argtypes = res, args
        out[name] = f
    return out


def load(data: bytes | None) -> bool:
    """Open the library from its bytes (an anonymous memory file) and check it against Python integers; True
    when this process now uses it. A second load keeps the first.

    The function pointers are bound as defaults of the functions below (kernelgate/sandbox/audit.py refuses to
    read a kernelgate function's defaults), and neither they nor the library object are kept anywhere else: in
    a worker, candidate code cannot reach them to set an `errcheck` or a `restype` the harness would then run."""
    global digest_words, positional_words, fresh_floats
    if _LOADED:
        return True
    if not data or not hasattr(os, "memfd_create"):
        return False
    try:
        fd = os.memfd_create("kg-native", 0)
    except OSError:
        return False
    try:
        os.write(fd, data)
        lib = ctypes.CDLL(f"/proc/self/fd/{fd}")
    except OSError:
        return False
    finally:
        os.close(fd)         # the mapping stays after the library is opened
    fns = _functions(lib)
    if not _selftest(fns):
        return False
    with _LOCK:
        if not _LOADED:
            digest_words, positional_words, fresh_floats = _bound(lib, fns)
            _LOADED.append(True)
    return True


_M64 = (1 << 64) - 1


def _i64(v: int) -> int:
    v &= _M64
    return v - (1 << 64) if v >> 63 else v


def _selftest(fns: dict) -> bool:
    """The three functions against the same arithmetic in Python integers, on a few words."""
    words = [0, -1, 1 << 62, -(1 << 40) + 12345, 0x0123456789ABCDEF, -7]
    w = torch.tensor(words, dtype=torch.int64)
    want = _i64(sum(v ^ (v >> 29) for v in words))
    key = _i64(0xDEADBEEF12345)
    pos = 0
    for i, v in enumerate(words):
        x = _i64(i * 0x9E3779B97F4A7C15 + key) ^ v
        x ^= x >> 29
        x = _i64(x * 0xBF58476D1CE4E5B9)
        x ^= x >> 32
        pos += x
    a, b = 0x12345677, 0x0BADF00D
    noise = []
    for i in range(2):
        x = (a * i + b) & 0xFFFFFFFF
        x ^= x >> 16
        x = (x * 0x85EBCA6B) & 0xFFFFFFFF
        x ^= x >> 13
        x = (x * 0xC2B2AE35) & 0xFFFFFFFF
        x ^= x >> 16
        noise += [(x >> (8 * k)) & 255 for k in range(4)]
    xs = torch.tensor([0.5, -1.25, 3.0, 1e-3, -7.0, 2.5, 0.0], dtype=torch.float32)
    fresh = torch.empty(7, dtype=torch.float32)
    fns["kg_fresh_floats"](fresh.data_ptr(), xs.data_ptr(), 7, a, b, 0.0123, 1.1)
    c, s = _f32(0.0123), _f32(1.1)
    want_fresh = [_f32(_f32(_f32(v - 127.5) * c) + _f32(xv * s)) for v, xv in zip(noise, xs.tolist())]
    return (fns["kg_digest"](w.data_ptr(), w.numel()) == want
            and fns["kg_positional"](w.data_ptr(), w.numel(), 0, key) == _i64(pos)
            and fresh.tolist() == want_fresh)


def _f32(v: float) -> float:
    return struct.unpack("<f", struct.pack("<f", v))[0]


def ensure() -> bytes | None:
    """The judge's side: build, load here, and return the bytes to hand to workers (None: torch forms only)."""
    data = build()
    return data if data is not None and load(data) else None


def active() -> bool:
    return bool(_LOADED)


def _cpu_words(w: torch.Tensor) -> bool:
    return w.device.type == "cpu" and w.dtype == torch.int64 and w.is_contiguous()


def _floats(t: torch.Tensor) -> bool:
    return t.device.type == "cpu" and t.dtype == torch.float32 and t.is_contiguous()


def digest_words(w: torch.Tensor) -> int | None:
    """`digest`'s sum over int64 words (contiguous, on the CPU), or None where the library is not loaded."""
    return None


def positional_words(w: torch.Tensor, key: int) -> int | None:
    """`positional`'s sum over int64 words (contiguous, on the CPU) with a wrapped int64 key, or None."""
    return None


def fresh_floats(dst: torch.Tensor, x: torch.Tensor, a: int, b: int, c: float, s: float) -> bool:
    """dst = ((noise byte - 127.5) * c) + x * s over float32 contiguous CPU tensors of one size, every operation
    rounded to float32 on its own (loop.py's torch form does the same ops); False, nothing written, where the
    library is not loaded or the tensors are not such."""
    return False


def _bound(lib, fns: dict) -> tuple:
    """The three functions above, with the library's function pointers bound as their defaults.

    The pointers' class (the library's own `_FuncPtr`) is reachable from anywhere (`_CFuncPtr.__subclasses__()`),
    and a `__call__` set on it is what calling its instances runs (red team 51; no audit event is raised for a
    class's attribute): each function looks at that class's own namespace before it calls, and serves the torch
    form (None or False) where anything there would be called instead of the pointer."""
    own = vars(type(fns["kg_digest"])).__contains__     # a live, read-only view of the class's own namespace
    def digest_words(w, _f=fns["kg_digest"], _lib=lib, _ok=_cpu_words, _int=int, _own=own):  # noqa: E306
        return _int(_f(w.data_ptr(), w.numel())) if _ok(w) and not _own("__call__") else None

    def positional_words(w, key, _f=fns["kg_positional"], _lib=lib, _ok=_cpu_words, _int=int, _own=own):
        return _int(_f(w.data_ptr(), w.numel(), 0, key)) if _ok(w) and not _own("__call__") else None

    def fresh_floats(dst, x, a, b, c, s, _f=fns["kg_fresh_floats"], _lib=lib, _ok=_floats, _own=own):
        if not (_ok(dst) and _ok(x) and dst.numel() == x.numel()) or _own("__call__"):
            return False
        _f(dst.data_ptr(), x.data_ptr(), dst.numel(), a & 0xFFFFFFFF, b & 0xFFFFFFFF, c, s)
        return True

    for new, old in zip((digest_words, positional_words, fresh_floats), _DOCS):
        new.__doc__ = old
    return digest_words, positional_words, fresh_floats


_DOCS = (digest_words.__doc__, positional_words.__doc__, fresh_floats.__doc__)
