"""C++ kernels for the CPU target (fused pointwise chains, row softmax, LayerNorm) and the torch.fx
rewrites that call them.

Like fx_rewrites.py, candidates embed this file's functions verbatim, so it stays self-contained. A
rewrite only records the C++ source of the kernels it needs; the first call of any of them builds
every recorded kernel into one extension (torch.utils.cpp_extension.load_inline, name from a hash of
the source), so a candidate builds once, in its own worker. The extension includes only <Python.h>
(no torch headers: a build takes seconds); the launchers hand it data pointers of contiguous float32
CPU tensors they allocated or checked, and otherwise fall back to torch (other dtypes, strides,
devices, broadcasting, autograd). Loops are OpenMP-parallel over rows (the OpenMP runtime torch has
loaded, so its thread count) and `omp simd` inside a row; exp/tanh/erf are branch-free polynomial
versions (Cephes, Eigen) that vectorize and stay within ~2 ulp. No -ffast-math; no FMA contraction,
so each pointwise op rounds as torch's does. Rewrites pass module parameters as get_attr nodes, so
load_state_dict is always seen.
"""

import hashlib
import logging
import operator
import os
import shutil
import struct

import torch
import torch.fx
import torch.nn.functional as F

_KG_CPP_FLAGS = ["-O3", "-march=native", "-fopenmp", "-ffp-contract=off", "-fno-math-errno"]
_KG_CPP_PAR_MIN = 32768          # elements below which a kernel runs on one thread

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

static inline float kg_sigmoid(float x) { return 1.0f / (1.0f + kg_exp(-x)); }
static inline float kg_silu(float x) { return x / (1.0f + kg_exp(-x)); }
static inline float kg_relu(float x) { return x < 0.0f ? 0.0f : x; }     // NaN stays NaN
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


# ---------------------------------------------------------------- building

def kg_cpp_compiler():
    """The C++ compiler for load_inline ($CXX, else c++, else g++), or None."""
    for cxx in (os.environ.get("CXX"), "c++", "g++"):
        path = shutil.which(cxx) if cxx else None
        if path:
            return path
    return None


KG_CPP_NO_COMPILER = ("no C++ compiler ($CXX, c++ or g++ on PATH): the cpp:* strategies (load_inline "
                      "kernels) do not apply")

_KG_CPP_WARNED = []


def _kg_cpp_missing():
    """True, with a note logged once, when there is no C++ compiler: the rewrites then apply nowhere."""
    if kg_cpp_compiler() is not None:
        return False
    if not _KG_CPP_WARNED:
        logging.getLogger("kernelgate.cpp_kernels").warning(KG_CPP_NO_COMPILER)
        _KG_CPP_WARNED.append(True)
    return True


_KG_CPP_PENDING = {}             # kernel name -> C++ source, recorded by rewrites, not yet built
_KG_CPP_BUILT = {}               # kernel name -> the extension's function


def _kg_cpp_want(name, source):
    if name not in _KG_CPP_BUILT:
        _KG_CPP_PENDING[name] = source


def _kg_cpp_build():
    """Build every pending kernel into one extension; its functions join _KG_CPP_BUILT."""
    cxx = kg_cpp_compiler()
    if cxx is None:
        raise RuntimeError(KG_CPP_NO_COMPILER)
    if not os.environ.get("CXX") and shutil.which("c++") is None:
        os.environ["CXX"] = cxx                      # load_inline takes $CXX, else c++
    from torch.utils.cpp_extension import load_inline
    names = sorted(_KG_CPP_PENDING)
    table = "".join(f'    {{"{k}", (PyCFunction){k}, METH_VARARGS, nullptr}},\n' for k in names)
    source = (_KG_CPP_PRELUDE + f"#define KG_PAR_MIN {_KG_CPP_PAR_MIN}\n"
              + "".join(_KG_CPP_PENDING[k] for k in names)
              + "static PyMethodDef kg_methods[] = {\n" + table + "    {nullptr, nullptr, 0, nullptr}};\n"
              + "static struct PyModuleDef kg_module = {PyModuleDef_HEAD_INIT, KG_STR(TORCH_EXTENSION_NAME), "
                "nullptr, -1, kg_methods};\n"
              + "PyMODINIT_FUNC KG_CAT(PyInit_, TORCH_EXTENSION_NAME)(void) { return PyModule_Create(&kg_module); }\n")
    digest = hashlib.sha256((source + " ".join(_KG_CPP_FLAGS) + torch.__version__).encode()).hexdigest()[:16]
    mod = load_inline(f"kg_cpp_{digest}", [source], extra_cflags=_KG_CPP_FLAGS, extra_ldflags=["-fopenmp"],
                      no_implicit_headers=True, with_cuda=False)
    for k in names:
        _KG_CPP_BUILT[k] = getattr(mod, k)
        del _KG_CPP_PENDING[k]


def _kg_cpp_fn(name, source):
    fn = _KG_CPP_BUILT.get(name)
    if fn is None:
        _KG_CPP_PENDING[name] = source
        _kg_cpp_build()
        fn = _KG_CPP_BUILT[name]
    return fn


# ---------------------------------------------------------------- launchers

def _kg_cpp_ok(t):
    """A float32, contiguous, non-empty CPU tensor that autograd does not need."""
    return (torch.is_tensor(t) and t.dtype == torch.float32 and t.device.type == "cpu" and t.numel() > 0
            and t.dim() > 0 and t.is_contiguous() and not (torch.is_grad_enabled() and t.requires_grad))


def kg_cpp_softmax(x, dim=-1):
    """torch.softmax(x, dim) over the last dim by the C++ row kernel where it applies, else torch."""
    if not (_kg_cpp_ok(x) and dim in (-1, x.dim() - 1)):
        return torch.softmax(x, dim)
    out = torch.empty_like(x)
    n = x.shape[-1]
    _kg_cpp_fn("kg_softmax", _KG_CPP_SOFTMAX)(out.data_ptr(), x.data_ptr(), x.numel() // n, n)
    return out


def _kg_cpp_param_ok(p, x):
    return p is None or (_kg_cpp_ok(p) and p.dim() == 1 and p.shape[0] == x.shape[-1])


def kg_cpp_layernorm(x, normalized_shape, weight=None, bias=None, eps=1e-5):
    """F.layer_norm over the last dim by the C++ row kernel where it applies, else F.layer_norm."""
    shape = tuple(normalized_shape) if isinstance(normalized_shape, (tuple, list)) else (normalized_shape,)
    if not (_kg_cpp_ok(x) and shape == (x.shape[-1],) and _kg_cpp_param_ok(weight, x)
            and _kg_cpp_param_ok(bias, x)):
        return F.layer_norm(x, normalized_shape, weight, bias, eps)
    out = torch.empty_like(x)
    n = x.shape[-1]
    _kg_cpp_fn("kg_layernorm", _KG_CPP_LAYERNORM)(
        out.data_ptr(), x.data_ptr(), weight.data_ptr() if weight is not None else 0,
        bias.data_ptr() if bias is not None else 0, x.numel() // n, n, float(eps))
    return out


# A pointwise program: a tuple of instructions (op, *operands), the last one's value the output; an
# operand is ("x", i) the i-th input tensor, ("v", j) instruction j's value, or ("c", float).
_KG_CPP_UNARY_CXX = {"neg": "(-{0})", "relu": "kg_relu({0})", "sigmoid": "kg_sigmoid({0})", "tanh": "kg_tanh({0})",
                     "silu": "kg_silu({0})", "gelu": "kg_gelu({0})", "gelu_tanh": "kg_gelu_tanh({0})",
                     "exp": "kg_exp({0})"}
_KG_CPP_BINARY_CXX = {"add": "({0} + {1})", "sub": "({0} - {1})", "mul": "({0} * {1})", "div": "({0} / {1})",
                      "rdiv": "((1.0f / {1}) * {0})"}     # scalar / tensor is reciprocal(tensor) * scalar
_KG_CPP_TORCH = {"neg": operator.neg, "relu": torch.relu, "sigmoid": torch.sigmoid, "tanh": torch.tanh,
                 "silu": F.silu, "gelu": F.gelu, "gelu_tanh": lambda a: F.gelu(a, approximate="tanh"),
                 "exp": torch.exp, "add": operator.add, "sub": operator.sub, "mul": operator.mul,
                 "div": operator.truediv, "rdiv": operator.truediv}


def _kg_cpp_float_literal(c):
    return float.hex(struct.unpack("<f", struct.pack("<f", c))[0]) + "f"   # the float32 torch would use


def _kg_cpp_pointwise_source(name, prog, n_in):
    ptrs = "".join(f", &p{i}, &s{i}" for i in range(n_in))
    decl = "".join(f"    unsigned long long p{i}; kg_i s{i};\n" for i in range(n_in))
    rows = "".join(f"        const float* __restrict x{i} = (const float*)p{i} + r * s{i};\n" for i in range(n_in))
    body = "".join(f"            const float a{i} = x{i}[j];\n" for i in range(n_in))

    def arg(o):
        return {"x": lambda: f"a{o[1]}", "v": lambda: f"v{o[1]}", "c": lambda: _kg_cpp_float_literal(o[1])}[o[0]]()

    for k, (op, *ops) in enumerate(prog):
        table = _KG_CPP_UNARY_CXX if len(ops) == 1 else _KG_CPP_BINARY_CXX
        body += f"            const float v{k} = {table[op].format(*map(arg, ops))};\n"
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
{body}            y[j] = v{len(prog) - 1};
        }}
    }}
    Py_END_ALLOW_THREADS
    Py_RETURN_NONE;
}}
"""


_KG_CPP_PROGRAMS = {}            # program -> (kernel name, source)


def _kg_cpp_program(prog, n_in):
    hit = _KG_CPP_PROGRAMS.get((prog, n_in))
    if hit is None:
        name = "kg_pw_" + hashlib.sha256(repr((prog, n_in)).encode()).hexdigest()[:12]
        hit = (name, _kg_cpp_pointwise_source(name, prog, n_in))
        _KG_CPP_PROGRAMS[(prog, n_in)] = hit
    return hit


def _kg_cpp_eval(prog, xs):
    """The program with the torch ops the reference called."""
    vals = []
    for op, *ops in prog:
        args = [xs[o[1]] if o[0] == "x" else vals[o[1]] if o[0] == "v" else o[1] for o in ops]
        vals.append(_KG_CPP_TORCH[op](*args))
    return vals[-1]


_KG_CPP_CHUNK = 4096             # row length when no input is a last-dim vector


def kg_cpp_pointwise(prog, *xs):
    """A fused pointwise program by one generated C++ loop, where every input is a float32 contiguous
    CPU tensor of the output's shape or a vector along its last dim; else the reference's torch ops."""
    if not all(_kg_cpp_ok(x) for x in xs):
        return _kg_cpp_eval(prog, xs)
    shape = max((x.shape for x in xs), key=len)
    n = shape[-1]
    vec = [x.shape != shape for x in xs]
    if any(v and x.shape != (n,) for v, x in zip(vec, xs)):
        return _kg_cpp_eval(prog, xs)              # any other broadcast: torch
    out = torch.empty(shape, dtype=torch.float32)
    total = out.numel()
    if not any(vec):                                # flat: rows are chunks, for parallelism
        n = min(total, _KG_CPP_CHUNK)
    rows = -(-total // n)
    args = [out.data_ptr(), rows, n, total]
    for v, x in zip(vec, xs):
        args += [x.data_ptr(), 0 if v else n]
    name, source = _kg_cpp_program(prog, len(xs))
    _kg_cpp_fn(name, source)(*args)
    return out


# ---------------------------------------------------------------- rewrites (torch.fx)

def _kg_cpp_bind(node, names):
    bound = dict(zip(names, node.args))
    bound.update(node.kwargs)
    return bound


def _kg_cpp_replace(gm, node, fn, args):
    with gm.graph.inserting_before(node):
        new = gm.graph.call_function(fn, args)
    node.replace_all_uses_with(new)
    gm.graph.erase_node(node)


def _kg_cpp_finish(gm, n):
    if n:
        gm.graph.lint()
        gm.recompile()
    return n


def _kg_cpp_softmax_input(node, mods):
    """The input of a softmax over an int dim with no dtype argument, else None."""
    if node.op == "call_module" and isinstance(mods.get(node.target), torch.nn.Softmax):
        a = _kg_cpp_bind(node, ("input",))
        a["dim"] = mods[node.target].dim
    elif node.op == "call_function" and node.target is F.softmax:
        a = _kg_cpp_bind(node, ("input", "dim", "_stacklevel", "dtype"))
    elif (node.op == "call_function" and node.target is torch.softmax) or \
            (node.op == "call_method" and node.target == "softmax"):
        a = _kg_cpp_bind(node, ("input", "dim", "dtype"))
    else:
        return None
    dim = a.get("dim")
    if a.get("dtype") is not None or isinstance(dim, bool) or not isinstance(dim, int):
        return None                                  # the launcher takes the last dim, else torch
    return a.get("input")


def _kg_cpp_softmax_dim(node, mods):
    if node.op == "call_module":
        return mods[node.target].dim
    return _kg_cpp_bind(node, ("input", "dim"))["dim"]


def kg_rewrite_cpp_softmax(gm):
    """Softmax (torch/F/method/nn.Softmax, int dim, no dtype) -> kg_cpp_softmax (last dim, else torch)."""
    if _kg_cpp_missing():
        return 0
    mods = dict(gm.named_modules())
    n = 0
    for node in list(gm.graph.nodes):
        inp = _kg_cpp_softmax_input(node, mods)
        if inp is not None:
            _kg_cpp_replace(gm, node, kg_cpp_softmax, (inp, _kg_cpp_softmax_dim(node, mods)))
            n += 1
    if n:
        _kg_cpp_want("kg_softmax", _KG_CPP_SOFTMAX)
    return _kg_cpp_finish(gm, n)


def kg_rewrite_cpp_layernorm(gm):
    """nn.LayerNorm with a 1-D normalized_shape and F.layer_norm over one dim -> kg_cpp_layernorm."""
    if _kg_cpp_missing():
        return 0
    mods = dict(gm.named_modules())
    n = 0
    for node in list(gm.graph.nodes):
        m = mods.get(node.target) if node.op == "call_module" else None
        if isinstance(m, torch.nn.LayerNorm) and len(m.normalized_shape) == 1 and len(node.args) == 1:
            with gm.graph.inserting_before(node):      # parameters read at every call, never copied
                w = gm.graph.get_attr(node.target + ".weight") if m.weight is not None else None
                b = gm.graph.get_attr(node.target + ".bias") if getattr(m, "bias", None) is not None else None
            args = (node.args[0], tuple(m.normalized_shape), w, b, m.eps)
        elif node.op == "call_function" and node.target in (F.layer_norm, torch.layer_norm):
            a = _kg_cpp_bind(node, ("input", "normalized_shape", "weight", "bias", "eps", "cudnn_enable"))
            ns = a.get("normalized_shape")
            if "input" not in a or not (isinstance(ns, (tuple, list)) and len(ns) == 1):
                continue
            args = (a["input"], tuple(ns), a.get("weight"), a.get("bias"), a.get("eps", 1e-5))
        else:
            continue
        _kg_cpp_replace(gm, node, kg_cpp_layernorm, args)
        n += 1
    if n:
        _kg_cpp_want("kg_layernorm", _KG_CPP_LAYERNORM)
    return _kg_cpp_finish(gm, n)


_KG_CPP_FN_OPS = {operator.add: "add", operator.sub: "sub", operator.mul: "mul", operator.truediv: "div",
                  torch.add: "add", torch.sub: "sub", torch.mul: "mul", torch.div: "div",
                  torch.true_divide: "div", operator.neg: "neg", torch.neg: "neg", torch.relu: "relu",
                  F.relu: "relu", torch.sigmoid: "sigmoid", F.sigmoid: "sigmoid", torch.tanh: "tanh",
                  F.tanh: "tanh", F.silu: "silu", F.gelu: "gelu", torch.exp: "exp"}
_KG_CPP_METHOD_OPS = {"add": "add", "sub": "sub", "mul": "mul", "div": "div", "true_divide": "div", "neg": "neg",
                      "relu": "relu", "sigmoid": "sigmoid", "tanh": "tanh", "exp": "exp"}
_KG_CPP_MODULE_OPS = {torch.nn.ReLU: "relu", torch.nn.Sigmoid: "sigmoid", torch.nn.Tanh: "tanh",
                      torch.nn.SiLU: "silu", torch.nn.GELU: "gelu"}
_KG_CPP_MAX_INPUTS = 12


def _kg_cpp_scalar(v):
    """v as a finite float32-representable Python float, else None."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    try:
        f = struct.unpack("<f", struct.pack("<f", float(v)))[0]
    except (OverflowError, struct.error):
        return None
    return float(v) if abs(f) != float("inf") and f == f else None


def _kg_cpp_pointwise_op(node, mods):
    """(op, operands) for a pointwise node the generated kernel computes as torch does, else None;
    an operand is a Node or a float."""
    if node.op == "call_module":
        m = mods.get(node.target)
        op = _KG_CPP_MODULE_OPS.get(type(m))
        if op is None or getattr(m, "inplace", False) or len(node.args) != 1 or node.kwargs:
            return None
        if op == "gelu":
            op = {"none": "gelu", "tanh": "gelu_tanh"}.get(m.approximate)
        return (op, list(node.args)) if op else None
    if node.op == "call_function":
        op = _KG_CPP_FN_OPS.get(node.target)
    elif node.op == "call_method":
        op = _KG_CPP_METHOD_OPS.get(node.target)
    else:
        return None
    if op is None:
        return None
    kwargs = dict(node.kwargs)
    if op == "gelu":
        approx = kwargs.pop("approximate", node.args[1] if len(node.args) > 1 else "none")
        op = {"none": "gelu", "tanh": "gelu_tanh"}.get(approx)
        args = list(node.args[:1])
    elif op in ("relu", "silu"):
        if kwargs.pop("inplace", node.args[1] if len(node.args) > 1 else False):
            return None
        args = list(node.args[:1])
    else:
        args = list(node.args)
    if op is None or kwargs or len(args) != (1 if op in _KG_CPP_UNARY_CXX else 2):
        return None
    operands = []
    for a in args:
        if isinstance(a, torch.fx.Node):
            operands.append(a)
        elif _kg_cpp_scalar(a) is not None:
            operands.append(_kg_cpp_scalar(a))
        else:
            return None
    if not isinstance(operands[0], torch.fx.Node):
        if len(operands) == 1 or not isinstance(operands[1], torch.fx.Node):
            return None
        if node.op != "call_function" or node.target not in (operator.add, operator.sub, operator.mul,
                                                             operator.truediv):
            return None                              # torch.div(2, x) and the like: left alone
        op = "rdiv" if op == "div" else op
    return op, operands


def kg_rewrite_cpp_pointwise(gm):
    """Each maximal single-output group of >= 2 pointwise nodes (add/sub/mul/div with scalars or
    tensors, neg, relu, sigmoid, tanh, silu, gelu, exp) -> one kg_cpp_pointwise call."""
    if _kg_cpp_missing():
        return 0
    mods = dict(gm.named_modules())
    nodes = list(gm.graph.nodes)
    order = {node: i for i, node in enumerate(nodes)}
    ops = {node: op for node in nodes if (op := _kg_cpp_pointwise_op(node, mods)) is not None}
    done = set()
    n = 0
    for root in reversed(nodes):
        if root not in ops or root in done:
            continue
        group = {root}
        grew = True
        while grew:
            grew = False
            for member in sorted(group, key=order.get, reverse=True):
                for a in ops[member][1]:
                    if (isinstance(a, torch.fx.Node) and a in ops and a not in group and a not in done
                            and all(u in group for u in a.users)):
                        group.add(a)
                        grew = True
        done |= group
        if len(group) < 2:
            continue
        members = sorted(group, key=order.get)
        index = {m: k for k, m in enumerate(members)}
        inputs = []
        prog = []
        for m in members:
            op, operands = ops[m]
            refs = []
            for a in operands:
                if isinstance(a, float):
                    refs.append(("c", a))
                elif a in index:
                    refs.append(("v", index[a]))
                else:
                    if a not in inputs:
                        inputs.append(a)
                    refs.append(("x", inputs.index(a)))
            prog.append((op, *refs))
        if not inputs or len(inputs) > _KG_CPP_MAX_INPUTS:
            continue
        prog = tuple(prog)
        _kg_cpp_replace(gm, root, kg_cpp_pointwise, (prog, *inputs))
        for m in reversed(members[:-1]):
            gm.graph.erase_node(m)
        name, source = _kg_cpp_program(prog, len(inputs))
        _kg_cpp_want(name, source)
        n += 1
    return _kg_cpp_finish(gm, n)


CPP_REWRITES = {
    "cpp-pointwise": kg_rewrite_cpp_pointwise,
    "cpp-softmax": kg_rewrite_cpp_softmax,
    "cpp-layernorm": kg_rewrite_cpp_layernorm,
}
