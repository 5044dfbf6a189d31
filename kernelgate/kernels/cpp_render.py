"""The C++ renderer: programs (ir.py) -> OpenMP/SIMD loops, and the fixed row kernels (softmax, LayerNorm).

The extension includes only <Python.h> (no torch headers: a build takes seconds); kernels take data pointers
of contiguous float32 CPU tensors. Loops are OpenMP-parallel over rows (the OpenMP runtime torch has loaded,
so its thread count) and `omp simd` inside a row; exp/log/tanh/erf are branch-free polynomial versions
(Cephes, Eigen) that vectorize and stay within ~2 ulp; sqrt is the correctly rounded instruction. No
-ffast-math, no FMA contraction: each pointwise op rounds as torch's does.

A runtime module (kernels/manifest.py): imports nothing of kernelgate.
"""

import struct

from .ir import _KG_CPP, _kg_ir_code

_KG_CPP_PRELUDE = r"""
#include <Python.h>
#include <cstdint>
#include <cmath>
#include <algorithm>

#define KG_CAT2(a, b) a##b
#define KG_CAT(a, b) KG_CAT2(a, b)
#define KG_STR2(a) #a
#define KG_STR(a) KG_STR2(a)

typedef Py_ssize_t kg_i;

static inline float kg_bits(int32_t i) { return __builtin_bit_cast(float, i); }

// exp: 2^n * e^r, r = x - n ln2 by Cody-Waite, Cephes expf polynomial (~1 ulp); the 2^n scale is
// split in two factors so gradual underflow and 2^128 need no special case. NaN stays NaN.
static inline float kg_exp(float x) {
    float xc = x < -103.972084f ? -103.972084f : x;
    xc = xc > 88.7228394f ? 88.7228394f : xc;
    const float fn = (xc * 1.44269504088896341f + 12582912.0f) - 12582912.0f;   // rint
    float r = xc - fn * 0.693359375f;
    r = r - fn * -2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    float y = p * (r * r) + r + 1.0f;
    const int32_t n = (int32_t)fn;
    const int32_t h = n >> 1;
    y = y * kg_bits((h + 127) << 23) * kg_bits((n - h + 127) << 23);
    y = x > 88.7228394f ? INFINITY : y;
    return x < -103.972084f ? 0.0f : y;
}

// tanh: Cephes tanhf (odd polynomial below 0.625, 1 - 2/(e^2|x| + 1) above).
static inline float kg_tanh(float x) {
    const float ax = x < 0.0f ? -x : x;
    const float z = x * x;
    float p = -5.70498872745e-3f;
    p = p * z + 2.06390887954e-2f;
    p = p * z - 5.37397155531e-2f;
    p = p * z + 1.33314422036e-1f;
    p = p * z - 3.33332819422e-1f;
    const float small = p * z * x + x;
    float big = 1.0f - 2.0f / (kg_exp(ax + ax) + 1.0f);
    big = x < 0.0f ? -big : big;
    return ax < 0.625f ? small : big;
}

// erf: Eigen's rational approximation on [-4, 4] (erf is +-1 in float outside).
static inline float kg_erf(float x) {
    float c = x < -4.0f ? -4.0f : x;
    c = c > 4.0f ? 4.0f : c;
    const float z = c * c;
    float p = -2.72614225801306e-10f;
    p = p * z + 2.77068142495902e-08f;
    p = p * z - 2.10102402082508e-06f;
    p = p * z - 5.69250639462346e-05f;
    p = p * z - 7.34990630326855e-04f;
    p = p * z - 2.95459980854025e-03f;
    p = p * z - 1.60960333262415e-02f;
    float q = -1.45660718464996e-05f;
    q = q * z - 2.13374055278905e-04f;
    q = q * z - 1.68282697438203e-03f;
    q = q * z - 7.37332916720468e-03f;
    q = q * z - 1.42647390514189e-02f;
    return c * p / q;
}

// log: Cephes logf. x = m 2^e with m in [sqrt(1/2), sqrt(2)), log x = log(1 + (m - 1)) by a degree-9
// polynomial, plus e ln2 in two parts (~1 ulp); subnormals scaled by 2^23 first. Branch-free so it
// vectorizes. NaN and x < 0 give NaN, +-0 gives -inf, +inf gives +inf, as torch.log.
static inline float kg_log(float x) {
    const bool sub = x < 1.17549435e-38f;
    const int32_t i = __builtin_bit_cast(int32_t, sub ? x * 8388608.0f : x);
    int32_t e = ((i >> 23) & 0xff) - (sub ? 149 : 126);
    float m = kg_bits((i & 0x007fffff) | 0x3f000000);         // [0.5, 1)
    const bool low = m < 0.707106781186547524f;
    e = low ? e - 1 : e;
    m = low ? (m + m) - 1.0f : m - 1.0f;
    const float z = m * m;
    float p = 7.0376836292e-2f;
    p = p * m - 1.1514610310e-1f;
    p = p * m + 1.1676998740e-1f;
    p = p * m - 1.2420140846e-1f;
    p = p * m + 1.4249322787e-1f;
    p = p * m - 1.6668057665e-1f;
    p = p * m + 2.0000714765e-1f;
    p = p * m - 2.4999993993e-1f;
    p = p * m + 3.3333331174e-1f;
    const float fe = (float)e;
    float y = p * m * z;
    y = y + fe * -2.12194440e-4f;
    y = y - 0.5f * z;
    float r = m + y;
    r = r + fe * 0.693359375f;
    r = x == INFINITY ? INFINITY : r;
    r = x == 0.0f ? -INFINITY : r;
    return (x < 0.0f || x != x) ? NAN : r;
}

static inline float kg_sigmoid(float x) { return 1.0f / (1.0f + kg_exp(-x)); }
static inline float kg_silu(float x) { return x / (1.0f + kg_exp(-x)); }
static inline float kg_relu(float x) { return x < 0.0f ? 0.0f : x; }     // NaN stays NaN
static inline float kg_relu6p3(float x) { const float t = x + 3.0f; return t < 0.0f ? 0.0f : (t > 6.0f ? 6.0f : t); }
static inline float kg_hardswish(float x) { return x * kg_relu6p3(x) / 6.0f; }
static inline float kg_hardsigmoid(float x) { return kg_relu6p3(x) / 6.0f; }
static inline float kg_softplus(float x, float beta, float threshold) {
    return x * beta > threshold ? x : std::log1p(kg_exp(x * beta)) / beta;
}
static inline float kg_mish(float x) { return x * kg_tanh(std::log1p(kg_exp(x))); }
static inline float kg_gelu(float x) { return x * 0.5f * (1.0f + kg_erf(x * 0.707106781186547524f)); }
static inline float kg_gelu_tanh(float x) {
    const float inner = 0.797884560802865355f * (x + 0.044715f * (x * x * x));
    return 0.5f * x * (1.0f + kg_tanh(inner));
}
"""

_KG_CPP_SOFTMAX = r"""
static PyObject* kg_softmax(PyObject*, PyObject* args) {
    unsigned long long po, pi; kg_i rows, n;
    if (!PyArg_ParseTuple(args, "KKnn", &po, &pi, &rows, &n)) return nullptr;
    float* out = (float*)po; const float* in = (const float*)pi;
    Py_BEGIN_ALLOW_THREADS
    #pragma omp parallel for schedule(static) if(rows * n >= KG_PAR_MIN)
    for (kg_i r = 0; r < rows; ++r) {
        const float* __restrict x = in + r * n;
        float* __restrict y = out + r * n;
        float m = -INFINITY;                          // a NaN or +inf in the row makes the sum, so the row, NaN
        #pragma omp simd reduction(max:m)
        for (kg_i j = 0; j < n; ++j) m = x[j] > m ? x[j] : m;
        float s = 0.0f;
        #pragma omp simd reduction(+:s)
        for (kg_i j = 0; j < n; ++j) { const float e = kg_exp(x[j] - m); y[j] = e; s += e; }
        const float inv = 1.0f / s;                   // one division per row, as torch does
        #pragma omp simd
        for (kg_i j = 0; j < n; ++j) y[j] = y[j] * inv;
    }
    Py_END_ALLOW_THREADS
    Py_RETURN_NONE;
}
"""

_KG_CPP_LAYERNORM = r"""
static PyObject* kg_layernorm(PyObject*, PyObject* args) {
    unsigned long long po, pi, pw, pb; kg_i rows, n; double eps;
    if (!PyArg_ParseTuple(args, "KKKKnnd", &po, &pi, &pw, &pb, &rows, &n, &eps)) return nullptr;
    float* out = (float*)po; const float* in = (const float*)pi;
    const float* w = (const float*)pw; const float* b = (const float*)pb;   // null: absent
    Py_BEGIN_ALLOW_THREADS
    #pragma omp parallel for schedule(static) if(rows * n >= KG_PAR_MIN)
    for (kg_i r = 0; r < rows; ++r) {
        const float* __restrict x = in + r * n;
        float* __restrict y = out + r * n;
        double s = 0.0;                               // two passes, double accumulators
        #pragma omp simd reduction(+:s)
        for (kg_i j = 0; j < n; ++j) s += x[j];
        const double mean = s / (double)n;
        double v = 0.0;
        #pragma omp simd reduction(+:v)
        for (kg_i j = 0; j < n; ++j) { const double d = (double)x[j] - mean; v += d * d; }
        const float rstd = (float)(1.0 / std::sqrt(v / (double)n + eps));
        const float mf = (float)mean;
        if (w && b) {
            #pragma omp simd
            for (kg_i j = 0; j < n; ++j) y[j] = (x[j] - mf) * rstd * w[j] + b[j];
        } else if (w) {
            #pragma omp simd
            for (kg_i j = 0; j < n; ++j) y[j] = (x[j] - mf) * rstd * w[j];
        } else if (b) {
            #pragma omp simd
            for (kg_i j = 0; j < n; ++j) y[j] = (x[j] - mf) * rstd + b[j];
        } else {
            #pragma omp simd
            for (kg_i j = 0; j < n; ++j) y[j] = (x[j] - mf) * rstd;
        }
    }
    Py_END_ALLOW_THREADS
    Py_RETURN_NONE;
}
"""


def _kg_cpp_float_literal(c):
    return float.hex(struct.unpack("<f", struct.pack("<f", c))[0]) + "f"   # the float32 torch would use


def _kg_cpp_pointwise_source(name, program, n_in):
    """A C function `name` computing the program over rows: inputs of the output's shape (row stride n) or
    last-dim vectors (row stride 0), one parallel loop over rows, a simd loop inside each."""
    ptrs = "".join(f", &p{i}, &s{i}" for i in range(n_in))
    decl = "".join(f"    unsigned long long p{i}; kg_i s{i};\n" for i in range(n_in))
    rows = "".join(f"        const float* __restrict x{i} = (const float*)p{i} + r * s{i};\n" for i in range(n_in))
    body = "".join(f"            const float a{i} = x{i}[j];\n" for i in range(n_in))
    for k, (op, refs, params) in enumerate(program):
        a = [(f"a{r[1:]}" if r[0] == "i" else f"v{r[1:]}") if isinstance(r, str) else _kg_cpp_float_literal(r)
             for r in refs]
        if op == "div" and not isinstance(refs[0], str):
            expr = f"((1.0f / {a[1]}) * {a[0]})"         # number / tensor is reciprocal(tensor) * number in torch
        else:
            expr = _kg_ir_code(op, a, params, _KG_CPP, _kg_cpp_float_literal)
        body += f"            const float v{k} = {expr};\n"
    return f"""
static PyObject* {name}(PyObject*, PyObject* args) {{
    unsigned long long po; kg_i rows, n, total;
{decl}    if (!PyArg_ParseTuple(args, "Knnn{'Kn' * n_in}", &po, &rows, &n, &total{ptrs})) return nullptr;
    float* out = (float*)po;
    Py_BEGIN_ALLOW_THREADS
    #pragma omp parallel for schedule(static) if(total >= KG_PAR_MIN)
    for (kg_i r = 0; r < rows; ++r) {{
        const kg_i len = std::min(n, total - r * n);
        float* __restrict y = out + r * n;
{rows}        #pragma omp simd
        for (kg_i j = 0; j < len; ++j) {{
{body}            y[j] = v{len(program) - 1};
        }}
    }}
    Py_END_ALLOW_THREADS
    Py_RETURN_NONE;
}}
"""


def _kg_cpp_module_source(kernels, par_min):
    """One extension module holding the kernels (name -> C source), named TORCH_EXTENSION_NAME by the build."""
    names = sorted(kernels)
    table = "".join(f'    {{"{k}", (PyCFunction){k}, METH_VARARGS, nullptr}},\n' for k in names)
    return (_KG_CPP_PRELUDE + f"#define KG_PAR_MIN {par_min}\n" + "".join(kernels[k] for k in names)
            + "static PyMethodDef kg_methods[] = {\n" + table + "    {nullptr, nullptr, 0, nullptr}};\n"
            + "static struct PyModuleDef kg_module = {PyModuleDef_HEAD_INIT, KG_STR(TORCH_EXTENSION_NAME), "
              "nullptr, -1, kg_methods};\n"
            + "PyMODINIT_FUNC KG_CAT(PyInit_, TORCH_EXTENSION_NAME)(void) { return PyModule_Create(&kg_module); }\n")
