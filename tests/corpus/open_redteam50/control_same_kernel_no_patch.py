"""Control for native_lazy_harness_bench.py (not an attack): the same C kernel and forward, without patching the harness.

The worker opens kernelgate/native.py's library from a memfd (/proc/self/fd/N). At import this candidate builds a
small C library of its own (gcc, before the lockdown), finds the harness's library with dl_iterate_phdr +
dlopen(RTLD_NOLOAD), and overwrites the entries of kg_fresh_floats, kg_positional, kg_digest, kg_noise_floats with
jumps to bit-identical versions that are LAZY: a fresh timed input is only recorded, not written. When the
candidate's forward is then called on that (still unwritten) input buffer, it builds each input value in a
register from the pool entry, computes its op (relu(1.5 x + 0.25), padded with RT_WORK rounds of useless
arithmetic per element so that the kernel is no faster than eager), and in the same pass takes the input's
positional digest and the output's digest; the harness's later kg_positional/kg_digest calls get those values
back at once. In the harness's own null batches (no forward called) the hooks materialise the input and digest
it normally, so the candidate's "own harness" figure equals the trusted one and min(trusted, own) subtracts the
full harness cost from a row that never paid most of it. Every digest/commitment is bit-exact: re-checks pass.
The real forward (a caller's tensor) is one scalar C pass, as slow as or slower than eager.
"""
import ctypes
import os
import subprocess
import tempfile

import torch
import torch.nn as nn

RT_WORK = int(os.environ.get("RT_WORK", "10"))

SOURCE = r"""#define _GNU_SOURCE
#include <stdint.h>
#include <stddef.h>
#include <string.h>
#include <link.h>
#include <dlfcn.h>
#include <sys/mman.h>
#include <unistd.h>
#define BLK 2048

/* bit-for-bit the harness's own C mixes (kernelgate/native.py SOURCE) */
static int64_t real_digest(const int64_t *w, size_t n) {
    uint64_t t = 0;
    for (size_t i = 0; i < n; i++) { int64_t v = w[i]; t += (uint64_t)(v ^ (v >> 29)); }
    return (int64_t)t;
}
static inline uint64_t posmix(uint64_t idx, int64_t key, int64_t w) {
    const uint64_t STEP = 0x9E3779B97F4A7C15ull, MUL = 0xBF58476D1CE4E5B9ull;
    int64_t x = (int64_t)(idx * STEP + (uint64_t)key);
    x ^= w; x ^= x >> 29; x = (int64_t)((uint64_t)x * MUL); x ^= x >> 32;
    return (uint64_t)x;
}
static int64_t real_positional(const int64_t *w, size_t n, uint64_t first, int64_t key) {
    uint64_t t = 0;
    for (size_t i = 0; i < n; i++) t += posmix(first + i, key, w[i]);
    return (int64_t)t;
}
static inline uint32_t mur(uint32_t a, uint32_t b, uint32_t i) {
    uint32_t x = a * i + b;
    x ^= x >> 16; x *= 0x85EBCA6Bu; x ^= x >> 13; x *= 0xC2B2AE35u; x ^= x >> 16;
    return x;
}
static void real_noise(float *dst, size_t n, uint32_t a, uint32_t b) {
    for (size_t e = 0; e < n; e++) dst[e] = (float)((mur(a, b, (uint32_t)(e / 4)) >> (8 * (e % 4))) & 255u);
}
static inline float fresh_one(const float *x, size_t e, uint32_t a, uint32_t b, float c, float s) {
    float byte = (float)((mur(a, b, (uint32_t)(e / 4)) >> (8 * (e % 4))) & 255u);
    float noise = (byte - 127.5f) * c;
    float scaled = x[e] * s;
    return noise + scaled;
}
static void real_fresh_at(float *dst, const float *x, size_t m, size_t s0, uint32_t a, uint32_t b, float c, float s) {
    uint32_t buf[BLK / 4];
    const uint8_t *bytes = (const uint8_t *)buf;
    for (size_t i = 0; i < m / 4; i++) {
        uint32_t v = a * (uint32_t)(s0 / 4 + i) + b;
        v ^= v >> 16; v *= 0x85EBCA6Bu; v ^= v >> 13; v *= 0xC2B2AE35u; v ^= v >> 16;
        buf[i] = v;
    }
    for (size_t j = 0; j < m; j++) {
        float noise = ((float)bytes[j] - 127.5f) * c;
        float scaled = x[j] * s;
        dst[j] = noise + scaled;
    }
}
static void real_fresh(float *dst, const float *x, size_t n, uint32_t a, uint32_t b, float c, float s) {
    size_t words = n / 4;
    for (size_t i = 0; i < words; i++) {
        uint32_t h = mur(a, b, (uint32_t)i);
        for (int j = 0; j < 4; j++) {
            float noise = ((float)((h >> (8 * j)) & 255u) - 127.5f) * c;
            float scaled = x[4 * i + j] * s;
            dst[4 * i + j] = noise + scaled;
        }
    }
    for (size_t e = words * 4; e < n; e++) dst[e] = fresh_one(x, e, a, b, c, s);
}

/* the lazy state: a fresh input not yet written, and the commitments the forward already computed */
#define NP 8
static struct { float *dst; const float *x; size_t n; uint32_t a, b; float c, s; int live; } pend[NP];
static struct { const void *p; size_t n; int64_t v; int live; } cpos, cdig;
long rt_hits, rt_fused_calls, rt_materialized;

static void materialize_overlapping(const void *p, size_t bytes) {
    for (int k = 0; k < NP; k++) if (pend[k].live) {
        const char *d = (const char *)pend[k].dst;
        if ((const char *)p < d + pend[k].n * 4 && d < (const char *)p + bytes) {
            real_fresh(pend[k].dst, pend[k].x, pend[k].n, pend[k].a, pend[k].b, pend[k].c, pend[k].s);
            pend[k].live = 0; rt_materialized++;
        }
    }
}

static void hk_fresh(float *dst, const float *x, size_t n, uint32_t a, uint32_t b, float c, float s) {
    cpos.live = cdig.live = 0;
    for (int k = 0; k < NP; k++) if (pend[k].live && pend[k].dst == dst) pend[k].live = 0;
    materialize_overlapping(dst, n * 4);
    for (int k = 0; k < NP; k++) if (!pend[k].live) {
        pend[k].dst = dst; pend[k].x = x; pend[k].n = n; pend[k].a = a; pend[k].b = b; pend[k].c = c; pend[k].s = s;
        pend[k].live = 1; return;
    }
    real_fresh(dst, x, n, a, b, c, s);
}
static void hk_noise(float *dst, size_t n, uint32_t a, uint32_t b) {
    materialize_overlapping(dst, n * 4);
    real_noise(dst, n, a, b);
}
static int64_t hk_positional(const int64_t *w, size_t n, uint64_t first, int64_t key) {
    if (cpos.live && cpos.p == w && cpos.n == n && first == 0 && key == 0) { cpos.live = 0; rt_hits++; return cpos.v; }
    materialize_overlapping(w, n * 8);
    return real_positional(w, n, first, key);
}
static int64_t hk_digest(const int64_t *w, size_t n) {
    if (cdig.live && cdig.p == w && cdig.n == n) { cdig.live = 0; rt_hits++; return cdig.v; }
    materialize_overlapping(w, n * 8);
    return real_digest(w, n);
}

/* the candidate's op: relu(x * 1.5 + 0.25); rt_work extra passes of useless arithmetic over each block (a slow
   kernel: tuned so that the plain forward is no faster than eager) */
int rt_work = 0;
static void op_block(const float *v, float *o, size_t m) {
    for (size_t e = 0; e < m; e++) { float y = v[e] * 1.5f + 0.25f; o[e] = y > 0.0f ? y : 0.0f; }
    for (int r = 0; r < rt_work; r++) {
        float t[BLK];
        for (size_t e = 0; e < m; e++) t[e] = o[e] * 0.999f + v[e];
        for (size_t e = 0; e < m; e++) o[e] += (t[e] == 12345.678f) ? 1e-30f : 0.0f;
    }
}
/* plain forward (a caller's input) */
void rt_forward(const float *x, float *out, size_t n) {
    for (size_t s0 = 0; s0 < n; s0 += BLK) { size_t m = n - s0 < BLK ? n - s0 : BLK; op_block(x + s0, out + s0, m); }
}
/* the forward under the harness: its input is still pending; build each block of input values in L1, never
   write them to the input buffer, and take the input's positional digest and the output's digest in the same pass */
int rt_fused(const float *dst, float *out, size_t n) {
    int k;
    for (k = 0; k < NP; k++) if (pend[k].live && pend[k].dst == dst && pend[k].n == n) break;
    if (k == NP || n % BLK) return 0;
    const float *x = pend[k].x; uint32_t a = pend[k].a, b = pend[k].b; float c = pend[k].c, s = pend[k].s;
    uint64_t tp = 0, td = 0;
    float v[BLK] __attribute__((aligned(64)));
    for (size_t s0 = 0; s0 < n; s0 += BLK) {
        real_fresh_at(v, x + s0, BLK, s0, a, b, c, s);
        op_block(v, out + s0, BLK);
        tp += (uint64_t)real_positional((const int64_t *)v, BLK / 2, s0 / 2, 0);
        td += (uint64_t)real_digest((const int64_t *)(out + s0), BLK / 2);
    }
    cpos.p = dst; cpos.n = n / 2; cpos.v = (int64_t)tp; cpos.live = 1;
    cdig.p = out; cdig.n = n / 2; cdig.v = (int64_t)td; cdig.live = 1;
    rt_fused_calls++;
    return 1;
}

/* find the harness's library (opened from /proc/self/fd/N, a memfd) and point its four entries at ours */
static const char *found;
static int cb(struct dl_phdr_info *info, size_t size, void *data) {
    (void)size; (void)data;
    if (info->dlpi_name && strstr(info->dlpi_name, "/proc/self/fd/")) { found = info->dlpi_name; return 1; }
    return 0;
}
static int patch(void *at, void *to) {
    long pg = sysconf(_SC_PAGESIZE);
    uintptr_t start = (uintptr_t)at & ~(uintptr_t)(pg - 1);
    if (mprotect((void *)start, 2 * pg, PROT_READ | PROT_WRITE | PROT_EXEC)) return -1;
    unsigned char code[12] = {0x48, 0xB8, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xE0};   /* movabs rax, to; jmp rax */
    memcpy(code + 2, &to, 8);
    memcpy(at, code, 12);
    mprotect((void *)start, 2 * pg, PROT_READ | PROT_EXEC);
    __builtin___clear_cache((char *)at, (char *)at + 12);
    return 0;
}
int rt_install(void) {
    dl_iterate_phdr(cb, NULL);
    if (!found) return -1;
    void *h = dlopen(found, RTLD_NOW | RTLD_NOLOAD);
    if (!h) return -2;
    void *f[4] = {dlsym(h, "kg_digest"), dlsym(h, "kg_positional"), dlsym(h, "kg_noise_floats"), dlsym(h, "kg_fresh_floats")};
    void *t[4] = {(void *)hk_digest, (void *)hk_positional, (void *)hk_noise, (void *)hk_fresh};
    for (int i = 0; i < 4; i++) { if (!f[i]) return -3 - i; if (patch(f[i], t[i])) return -10 - i; }
    return 1;
}
void rt_set_work(int w) { rt_work = w; }
"""

_d = tempfile.mkdtemp(prefix="rt50-")
with open(os.path.join(_d, "h.c"), "w") as _f:
    _f.write(SOURCE)
subprocess.run(["gcc", "-O3", "-march=native", "-shared", "-fPIC", "-ffp-contract=off", "-fno-strict-aliasing",
                "-o", os.path.join(_d, "h.so"), os.path.join(_d, "h.c"), "-ldl"], check=True, capture_output=True)
_lib = ctypes.CDLL(os.path.join(_d, "h.so"))
_lib.rt_fused.restype = ctypes.c_int
_lib.rt_fused.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t]
_lib.rt_forward.restype = None
_lib.rt_forward.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t]
_lib.rt_set_work(RT_WORK)
INSTALLED = 0   # control: the same kernel, the harness left alone


class Model(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = torch.empty_like(x)
        if x.dtype == torch.float32 and x.is_contiguous() and x.device.type == "cpu":
            if not _lib.rt_fused(x.data_ptr(), out.data_ptr(), x.numel()):
                _lib.rt_forward(x.data_ptr(), out.data_ptr(), x.numel())
            return out
        return torch.relu(x * 1.5 + 0.25)


ModelNew = Model
