"""C++ launchers for the CPU: the build of a candidate's kernels and the calls that use them.

A rewrite only records the C++ source of the kernels it needs (_kg_cpp_want); the first call of any of them
builds every recorded kernel into one extension (cache.py: load_inline, named by the source's hash), so
a candidate builds once, in its own worker. The launchers hand the kernels
data pointers of contiguous float32 CPU tensors they allocated or checked, and otherwise fall back to torch
(other dtypes, strides, devices, broadcasting, autograd).

A runtime module (kernels/manifest.py): imports nothing of kernelgate.
"""

import hashlib
import logging
import os
import shutil

import torch
import torch.nn.functional as F

from .cache import _kg_cache_cpp
from .cpp_render import _KG_CPP_LAYERNORM, _KG_CPP_SOFTMAX, _kg_cpp_module_source, _kg_cpp_pointwise_source
from .ir import _kg_ir_eval

_KG_CPP_FLAGS = ["-O3", "-march=native", "-fopenmp", "-ffp-contract=off", "-fno-math-errno"]
_KG_CPP_PAR_MIN = 32768          # elements below which a kernel runs on one thread
_KG_CPP_CHUNK = 4096             # row length when no input is a last-dim vector


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
        logging.getLogger("kernelgate.kernels.cpp").warning(KG_CPP_NO_COMPILER)
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
    names = sorted(_KG_CPP_PENDING)
    mod = _kg_cache_cpp(_kg_cpp_module_source(dict(_KG_CPP_PENDING), _KG_CPP_PAR_MIN), _KG_CPP_FLAGS, ["-fopenmp"])
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


_KG_CPP_PROGRAMS = {}            # (program, number of inputs) -> (kernel name, source)


def _kg_cpp_program(program, n_in):
    hit = _KG_CPP_PROGRAMS.get((program, n_in))
    if hit is None:
        name = "kg_pw_" + hashlib.sha256(repr((program, n_in)).encode()).hexdigest()[:12]
        hit = (name, _kg_cpp_pointwise_source(name, program, n_in))
        _KG_CPP_PROGRAMS[(program, n_in)] = hit
    return hit


def kg_cpp_pointwise(program, *xs):
    """A fused pointwise program by one generated C++ loop, where every input is a float32 contiguous
    CPU tensor of the output's shape or a vector along its last dim; else the reference's torch ops."""
    if not all(_kg_cpp_ok(x) for x in xs):
        return _kg_ir_eval(program, xs)
    shape = max((x.shape for x in xs), key=len)
    n = shape[-1]
    vec = [x.shape != shape for x in xs]
    if any(v and x.shape != (n,) for v, x in zip(vec, xs)):
        return _kg_ir_eval(program, xs)              # any other broadcast: torch
    out = torch.empty(shape, dtype=torch.float32)
    total = out.numel()
    if not any(vec):                                # flat: rows are chunks, for parallelism
        n = min(total, _KG_CPP_CHUNK)
    rows = -(-total // n)
    args = [out.data_ptr(), rows, n, total]
    for v, x in zip(vec, xs):
        args += [x.data_ptr(), 0 if v else n]
    name, source = _kg_cpp_program(program, len(xs))
    _kg_cpp_fn(name, source)(*args)
    return out
