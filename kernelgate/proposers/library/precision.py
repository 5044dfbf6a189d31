"""Strategies for workloads that are already in low-precision formats, as torch.fx rewrites.

- fp8 scaled matmul: `(a.to(f) * s_a) @ (w.to(f) * s_w).t()` on fp8 (e4m3/e5m2) tensors with per-tensor or
  per-row scales (optionally followed by a cast to bf16/fp16) -> `torch._scaled_mm` on the fp8 operands with the
  scales (fp32 accumulation, use_fast_accum=False). Matched only where at least one operand is statically fp8
  (an fp8 buffer or a cast to fp8); an fp32 result is rewritten only with the `fp32_out` flag (the library sets it
  when the contract declares a lower precision), because a fp8 GEMM's accumulation is not cuBLAS-fp32 accurate.
- int8 linear with requantization: `x.to(acc) @ w.to(acc).t()` on int8 tensors (acc: int32/int64/fp32/fp64),
  then a chain of elementwise ops ending in `round -> clamp -> .to(int8)` -> `torch._int_mm` (int32 accumulate,
  exact) and the chain as one Triton epilogue kernel (bias add, scales, round-half-to-even, clamp, int8 store),
  which reproduces torch's rounding bit for bit (IEEE mul, `div_rn`, exact half-even rounding). Chains the
  kernel does not cover are replayed op by op with torch, which is exact by construction.
- bf16/fp16 linear + ReLU / tanh-GELU -> `torch._addmm_activation` (cuBLASLt bias+activation epilogue). Exact-erf
  GELU is left alone: the cuBLASLt GELU epilogue is the tanh approximation, another function.

Every inserted function checks dtypes, shapes and devices at each call and otherwise runs the reference's own ops.
Like fx_rewrites.py, candidates embed this file verbatim (up to PRECISION_REWRITES), so it imports without Triton
and defines only `kg_lp_*` / `_kg_lp_*` / `_KG_LP_*` names.
"""

import torch
import torch.fx
import torch.nn.functional as F

try:
    import triton
    import triton.language as tl
except ImportError:  # the int8 epilogue then always runs as torch ops
    triton = None

_KG_LP_FP8 = (torch.float8_e4m3fn, torch.float8_e5m2)
_KG_LP_FLOATS = {"float": torch.float32, "double": torch.float64, "half": torch.float16, "bfloat16": torch.bfloat16,
                 "int": torch.int32, "long": torch.int64}


# ---------------------------------------------------------------- graph helpers

try:
    kg_trace, kg_finish, _kg_derived  # noqa: B018 - embedded in a candidate after fx_rewrites.py: its helpers
except NameError:
    from .fx_rewrites import _kg_derived, kg_finish, kg_trace
kg_lp_trace = kg_trace      # buffers stay get_attr nodes (see fx_rewrites.kg_trace)


def _kg_lp_is(node, *names):
    """Whether node calls a function or method with one of these names (operator.matmul is 'matmul')."""
    if not isinstance(node, torch.fx.Node):
        return False
    if node.op == "call_function":
        return getattr(node.target, "__name__", "") in names
    if node.op == "call_method":
        return node.target in names
    return False


def _kg_lp_attr(gm, node):
    """The tensor a get_attr node refers to, else None."""
    if not isinstance(node, torch.fx.Node) or node.op != "get_attr":
        return None
    obj = gm
    for part in str(node.target).split("."):
        obj = getattr(obj, part, None)
    return obj if torch.is_tensor(obj) else None


def _kg_lp_cast(node):
    """(source, dtype) if node is a dtype cast: x.to(d), x.to(dtype=d), x.float(), x.type(d), ...; dtype may be a
    torch.dtype or a Node computing one (e.g. `self.scale.dtype`). Else None."""
    if not isinstance(node, torch.fx.Node) or node.op != "call_method" or not node.args:
        return None
    if node.target in _KG_LP_FLOATS and len(node.args) == 1 and not node.kwargs:
        return node.args[0], _KG_LP_FLOATS[node.target]
    if node.target in ("to", "type"):
        rest = [a for a in node.args[1:]]
        dt = node.kwargs.get("dtype", rest[0] if len(rest) == 1 else None)
        extra = set(node.kwargs) - {"dtype"}
        if dt is not None and not extra and (isinstance(dt, torch.dtype) or isinstance(dt, torch.fx.Node)):
            return node.args[0], dt
    return None


def _kg_lp_static_dtype(gm, node):
    """The dtype of node's value when the graph alone says it (a buffer, a cast to a constant dtype), else None."""
    t = _kg_lp_attr(gm, node)
    if t is not None:
        return t.dtype
    c = _kg_lp_cast(node)
    if c is not None and isinstance(c[1], torch.dtype):
        return c[1]
    return None


def _kg_lp_transposed(node):
    """x if node is x.t() / x.T / x.mT / x.transpose of the last two dims of a matrix, else None."""
    if _kg_lp_is(node, "t") and len(node.args) == 1:
        return node.args[0]
    if _kg_lp_is(node, "transpose") and len(node.args) == 3 and tuple(node.args[1:]) in ((0, 1), (1, 0), (-2, -1),
                                                                                         (-1, -2)):
        return node.args[0]
    if node.op == "call_function" and node.target is getattr and len(node.args) == 2 and node.args[1] in ("T", "mT"):
        return node.args[0]
    return None


def _kg_lp_matmul(node):
    """(a, b, b_is_transposed_weight) for a @ b, torch.matmul, torch.mm, or F.linear(a, w) without bias."""
    if _kg_lp_is(node, "matmul", "mm") and len(node.args) == 2 and not node.kwargs:
        return node.args[0], node.args[1], False
    if _kg_lp_is(node, "linear") and node.op == "call_function":
        bias = node.kwargs.get("bias", node.args[2] if len(node.args) > 2 else None)
        if bias is None and len(node.args) >= 2:
            return node.args[0], node.args[1], True
    return None


def _kg_lp_colmajor(w, transpose):
    """(w.t() if transpose else w) as a column-major (K, N) matrix: a view when it is one, else a copy cached
    with fx_rewrites' _kg_derived (checked against w at every call, contents included, so writes through
    `w.data` are seen too; the copy itself is what w is compared with)."""
    m = w.t() if transpose else w
    if m.t().is_contiguous():
        return m
    return _kg_derived(("lp-colmajor", id(w), transpose), (w,), lambda: m.t().contiguous().t(),
                       lambda c: (c.t() if transpose else c,))


# ---------------------------------------------------------------- fp8 scaled matmul

def _kg_lp_dequant(gm, node):
    """(source, scale, cast dtype) if node is src.to(f) * scale, scale * src.to(f) or src.to(f) (scale None).
    When both factors are casts (`x.to(f) * x_scale.to(f)`), the data is the one known to be fp8, else the first."""
    c = _kg_lp_cast(node)
    if c is not None:
        return c[0], None, c[1]
    if not _kg_lp_is(node, "mul") or len(node.args) != 2 or node.kwargs:
        return None
    options = []
    for x, s in (node.args, node.args[::-1]):
        c = _kg_lp_cast(x)
        if c is not None and isinstance(s, torch.fx.Node):
            rank = (_kg_lp_static_dtype(gm, c[0]) not in _KG_LP_FP8, _kg_lp_cast(s) is not None)
            options.append((rank, len(options), (c[0], s, c[1])))
    return min(options)[2] if options else None


def _kg_lp_fp8_ok(a, b, sa, sb, out_dtype):
    """Whether torch._scaled_mm takes these (a row-major (M, K), b column-major (K, N), fp32 scales)."""
    if a.dtype not in _KG_LP_FP8 or b.dtype not in _KG_LP_FP8 or a.dtype == b.dtype == torch.float8_e5m2:
        return False
    if a.device != b.device or sa.device != a.device or sb.device != a.device:
        return False
    if a.device.type == "cuda":
        if torch.cuda.get_device_capability(a.device) < (8, 9) or any(d % 16 for d in (*a.shape, b.shape[1])):
            return False
    elif a.device.type != "cpu":
        return False
    rowwise = sa.numel() != 1 or sb.numel() != 1
    if rowwise and (out_dtype != torch.bfloat16 or a.dtype != torch.float8_e4m3fn or b.dtype != torch.float8_e4m3fn):
        return False
    return not (torch.is_grad_enabled() and (sa.requires_grad or sb.requires_grad))


def _kg_lp_probe(dtype):
    """A one-element tensor of dtype: type promotion against it is promotion against a dimensioned tensor."""
    return torch.empty((1,), dtype=dtype)


def _kg_lp_fp8_scales(sa, sw, lead, m, n, w_is_nk, device):
    """The scales as torch._scaled_mm takes them (fp32; () and () per tensor, (M, 1) and (1, N) per row), or None."""
    def one(s):
        return torch.ones((), dtype=torch.float32, device=device) if s is None else s
    sa, sw = one(sa), one(sw)
    if sa.numel() == 1:
        scale_a = sa.reshape(()).float()
    elif tuple(sa.shape) == (*lead, 1):
        scale_a = sa.reshape(m, 1).float()
    else:
        return None
    if sw.numel() == 1:
        scale_b = sw.reshape(()).float()
    elif tuple(sw.shape) in (((n, 1),) if w_is_nk else ((1, n), (n,))):
        scale_b = sw.reshape(1, n).float()
    else:
        return None
    if scale_a.dim() != scale_b.dim():                   # one per row, the other per tensor: both per row
        scale_a = scale_a.expand(m, 1).contiguous() if scale_a.dim() == 0 else scale_a
        scale_b = scale_b.expand(1, n).contiguous() if scale_b.dim() == 0 else scale_b
    return scale_a, scale_b


def kg_lp_fp8_mm(a, sa, ca, w, sw, cw, w_is_nk, out_dtype, fp32_out):
    """(a.to(ca) * sa) @ (w.to(cw) * sw)[.t()] [.to(out_dtype)] as torch._scaled_mm on the fp8 operands
    (a scale None means no scale); the reference's own ops when _scaled_mm does not take these operands."""
    tensors = all(s is None or torch.is_tensor(s) for s in (sa, sw)) and torch.is_tensor(a) and torch.is_tensor(w)
    if tensors and isinstance(ca, torch.dtype) and isinstance(cw, torch.dtype) and a.dim() >= 2 and w.dim() == 2:
        cd_a = ca if sa is None else torch.result_type(_kg_lp_probe(ca), sa)
        cd_b = cw if sw is None else torch.result_type(_kg_lp_probe(cw), sw)
        out = out_dtype if out_dtype is not None else cd_a
        k = a.shape[-1]
        n = w.shape[0] if w_is_nk else w.shape[1]
        m = a.numel() // k if k else 0
        if (cd_a == cd_b and out in (torch.bfloat16, torch.float16, torch.float32) and (out != torch.float32 or fp32_out)
                and k == w.shape[1 if w_is_nk else 0] and m > 0 and n > 0):
            scales = _kg_lp_fp8_scales(sa, sw, a.shape[:-1], m, n, w_is_nk, a.device)
            if scales is not None:
                a2 = a.reshape(m, k)
                a2 = a2 if a2.is_contiguous() else a2.contiguous()
                b = _kg_lp_colmajor(w, w_is_nk)
                if _kg_lp_fp8_ok(a2, b, scales[0], scales[1], out):
                    y = torch._scaled_mm(a2, b, scale_a=scales[0], scale_b=scales[1], out_dtype=out,
                                         use_fast_accum=False)
                    return y.reshape(*a.shape[:-1], n)
    aq = a.to(ca) if sa is None else a.to(ca) * sa       # the reference's own ops
    bq = w.to(cw) if sw is None else w.to(cw) * sw
    y = torch.matmul(aq, bq.t() if w_is_nk else bq)
    return y.to(out_dtype) if out_dtype is not None else y


def _kg_lp_rewrite_fp8(gm, fp32_out):
    mods_dtype = lambda n: _kg_lp_static_dtype(gm, n)  # noqa: E731
    n = 0
    for node in list(gm.graph.nodes):
        mm = _kg_lp_matmul(node)
        if mm is None:
            continue
        a_dq, b, is_linear = mm
        da = _kg_lp_dequant(gm, a_dq)
        w_is_nk = is_linear
        b_dq = b
        if not is_linear:
            inner = _kg_lp_transposed(b)
            if inner is not None:
                b_dq, w_is_nk = inner, True
        db = _kg_lp_dequant(gm, b_dq)
        if da is None or db is None:
            continue
        sa_dt, sb_dt = mods_dtype(da[0]), mods_dtype(db[0])
        known = [d for d in (sa_dt, sb_dt) if d is not None]
        if not known or any(d not in _KG_LP_FP8 for d in known):
            continue                       # no evidence of fp8 operands, or a known non-fp8 one
        users = list(node.users)
        out_dtype, last = None, node
        if len(users) == 1:
            c = _kg_lp_cast(users[0])
            if c is not None and c[0] is node and c[1] in (torch.bfloat16, torch.float16, torch.float32):
                out_dtype, last = c[1], users[0]
        with gm.graph.inserting_before(last):
            new = gm.graph.call_function(kg_lp_fp8_mm, (da[0], da[1], da[2], db[0], db[1], db[2], w_is_nk,
                                                        out_dtype, fp32_out))
        last.replace_all_uses_with(new)
        _kg_lp_erase_dead(gm, [last, node, b, b_dq, a_dq])
        n += 1
    return kg_finish(gm, n)


def kg_rewrite_fp8_scaled_mm(gm):
    """Dequantize-then-matmul of fp8 tensors with a bf16/fp16 result -> torch._scaled_mm."""
    return _kg_lp_rewrite_fp8(gm, False)


def kg_rewrite_fp8_scaled_mm_f32(gm):
    """As kg_rewrite_fp8_scaled_mm, fp32 results included (only under a declared lower-precision contract)."""
    return _kg_lp_rewrite_fp8(gm, True)


# ---------------------------------------------------------------- int8 linear with requantization

class _KgLpSide:
    """Marker for the i-th side operand of an epilogue step."""

    def __init__(self, i):
        self.i = i


_KG_LP_ACC = object()                      # marker for the running value in an epilogue step
_KG_LP_SPECS = {}                          # key -> epilogue steps (target, is_method, args, kwargs)

if triton is not None:
    @triton.jit
    def _kg_lp_requant_kernel(out_ptr, acc_ptr, b_ptr, s0_ptr, s1_ptr, s2_ptr, M, N, acc_sm, acc_sn, b_sm, b_sn,
                              s0_sm, s0_sn, s1_sm, s1_sn, s2_sm, s2_sn,
                              AD: tl.constexpr, CD: tl.constexpr, HAS_B: tl.constexpr, OP0: tl.constexpr,
                              OP1: tl.constexpr, OP2: tl.constexpr, AX: tl.constexpr, LO: tl.constexpr, HI: tl.constexpr,
                              BM: tl.constexpr, BN: tl.constexpr):
        rm = (tl.program_id(0) * BM + tl.arange(0, BM)).to(tl.int64)[:, None]
        rn = (tl.program_id(1) * BN + tl.arange(0, BN)).to(tl.int64)[None, :]
        mask = (rm < M) & (rn < N)
        # the int32 product, as the reference's accumulator dtype AX, then the bias add's dtype AD
        v = tl.load(acc_ptr + rm * acc_sm + rn * acc_sn, mask=mask, other=0).to(AX).to(AD)
        if HAS_B:
            v = v + tl.load(b_ptr + rm * b_sm + rn * b_sn, mask=mask, other=0).to(AD)
        v = v.to(CD)
        if OP0 == 1:
            v = v * tl.load(s0_ptr + rm * s0_sm + rn * s0_sn, mask=mask, other=1).to(CD)
        if OP0 == 2:
            d = tl.load(s0_ptr + rm * s0_sm + rn * s0_sn, mask=mask, other=1).to(CD)
            v = tl.math.div_rn(v, d) if CD == tl.float32 else v / d     # fp32 `/` is not IEEE in Triton
        if OP1 == 1:
            v = v * tl.load(s1_ptr + rm * s1_sm + rn * s1_sn, mask=mask, other=1).to(CD)
        if OP1 == 2:
            d = tl.load(s1_ptr + rm * s1_sm + rn * s1_sn, mask=mask, other=1).to(CD)
            v = tl.math.div_rn(v, d) if CD == tl.float32 else v / d
        if OP2 == 1:
            v = v * tl.load(s2_ptr + rm * s2_sm + rn * s2_sn, mask=mask, other=1).to(CD)
        if OP2 == 2:
            d = tl.load(s2_ptr + rm * s2_sm + rn * s2_sn, mask=mask, other=1).to(CD)
            v = tl.math.div_rn(v, d) if CD == tl.float32 else v / d
        # round half to even, exactly: |v| = f + d with d = |v| - floor(|v|) exact (Sterbenz, or f = 0)
        av = tl.abs(v)
        f = tl.floor(av)
        frac = av - f
        odd = (f - 2.0 * tl.floor(f * 0.5)) == 1.0
        r = f + tl.where((frac > 0.5) | ((frac == 0.5) & odd), 1.0, 0.0).to(CD)
        v = tl.where(v < 0, -r, r)
        v = tl.minimum(tl.maximum(v, LO, propagate_nan=tl.PropagateNan.ALL), HI,
                       propagate_nan=tl.PropagateNan.ALL)
        tl.store(out_ptr + rm * N + rn, v.to(tl.int8), mask=mask)

    _KG_LP_INTERPRETED = type(_kg_lp_requant_kernel).__name__ == "InterpretedFunction"
else:
    _KG_LP_INTERPRETED = False


def _kg_lp_fill(template, acc, sides):
    if template is _KG_LP_ACC:
        return acc
    if isinstance(template, _KgLpSide):
        return sides[template.i]
    if isinstance(template, (tuple, list)):
        return type(template)(_kg_lp_fill(t, acc, sides) for t in template)
    return template


def _kg_lp_replay(v, steps, sides):
    """The epilogue as the reference wrote it, op by op."""
    for target, is_method, args, kwargs in steps:
        a, kw = _kg_lp_fill(args, v, sides), {k: _kg_lp_fill(t, v, sides) for k, t in kwargs.items()}
        v = getattr(a[0], target)(*a[1:], **kw) if is_method else target(*a, **kw)
    return v


def _kg_lp_step(step, sides):
    """(name, other operands, keyword operands) of a step that takes the running value once, first; else
    (name, None, None)."""
    target, is_method, args, kwargs = step
    name = target if is_method else getattr(target, "__name__", "")
    if not args or args[0] is not _KG_LP_ACC or any(x is _KG_LP_ACC for x in list(args[1:]) + list(kwargs.values())):
        return name, None, None
    return name, [_kg_lp_fill(x, None, sides) for x in args[1:]], {k: _kg_lp_fill(t, None, sides)
                                                                    for k, t in kwargs.items()}


def _kg_lp_plan(acc_dtype, shape, device, steps, sides):
    """The Triton epilogue's operands for this chain on an accumulator of acc_dtype and shape, or None where the
    kernel does not cover it. Covered: [+ tensor] [.to(fp32/fp64)] [* or / tensor]{0..3} round clamp .to(int8),
    each tensor on the accumulator's device, broadcastable to it, and not changing the working dtype."""
    v_dtype, bias, ops, i = acc_dtype, None, [], 0
    name, rest, kw = _kg_lp_step(steps[0], sides) if steps else (None, None, None)
    if name == "add" and rest is not None and len(rest) == 1 and not kw and torch.is_tensor(rest[0]):
        bias = rest[0]
        v_dtype, i = torch.result_type(_kg_lp_probe(v_dtype), bias), 1
        if bias.device != device or v_dtype not in (torch.int32, torch.int64, torch.float32, torch.float64):
            return None
    ad = v_dtype
    if i < len(steps):
        name, rest, kw = _kg_lp_step(steps[i], sides)
        if name in ("float", "double") and rest == [] and not kw:
            v_dtype, i = {"float": torch.float32, "double": torch.float64}[name], i + 1
        elif name in ("to", "type") and rest is not None and len(rest) + len(kw) == 1:
            dt = rest[0] if rest else kw.get("dtype")
            if not isinstance(dt, torch.dtype):
                return None
            v_dtype, i = dt, i + 1
    cd = v_dtype
    if cd not in (torch.float32, torch.float64):
        return None
    while i < len(steps):
        name, rest, kw = _kg_lp_step(steps[i], sides)
        if name not in ("mul", "truediv", "div") or rest is None or len(rest) != 1 or kw:
            break
        t = rest[0]
        # Python numbers stay with torch: CUDA divides by a CPU scalar as a multiplication by its reciprocal
        if not torch.is_tensor(t) or t.device != device or len(ops) == 3:
            return None
        if torch.result_type(_kg_lp_probe(cd), t) != cd:
            return None
        ops.append((1 if name == "mul" else 2, t))
        i += 1
    if len(steps) - i != 3:
        return None
    name, rest, kw = _kg_lp_step(steps[i], sides)
    if name != "round" or rest != [] or kw:
        return None
    name, rest, kw = _kg_lp_step(steps[i + 1], sides)
    if name not in ("clamp", "clip") or rest is None or set(kw) - {"min", "max"}:
        return None
    bounds = list(rest) + [None] * (2 - len(rest))
    lo, hi = kw.get("min", bounds[0]), kw.get("max", bounds[1])
    if not all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in (lo, hi)) \
            or not -128 <= lo <= hi <= 127:
        return None
    name, rest, kw = _kg_lp_step(steps[i + 2], sides)
    if name not in ("to", "type") or (rest + list(kw.values()) if rest is not None else None) != [torch.int8]:
        return None

    def flat(t):                                          # broadcast to the accumulator, as (M, N)
        try:
            e = torch.broadcast_to(t, shape)
        except RuntimeError:
            return None
        return e.reshape(-1, shape[-1])
    parts = [flat(t) for t in ([bias] if bias is not None else []) + [t for _, t in ops]]
    if any(p is None for p in parts):
        return None
    b = parts.pop(0) if bias is not None else None
    return ad, cd, b, [(op, p) for (op, _), p in zip(ops, parts)], float(lo), float(hi)


_KG_LP_TL = {torch.int32: "int32", torch.int64: "int64", torch.float32: "float32", torch.float64: "float64"}


def _kg_lp_triton_epilogue(acc2, acc_dtype, plan, block_m=32, block_n=128, num_warps=4):
    """One kernel over the (M, N) int32 accumulator: bias, scales, round half to even, clamp, int8 store."""
    ad, cd, bias, ops, lo, hi = plan
    m, n = acc2.shape
    out = torch.empty((m, n), dtype=torch.int8, device=acc2.device)
    ts = [(0, acc2)] * 3                                   # unused operand slots point at the accumulator
    for k, (op, t) in enumerate(ops):
        ts[k] = (op, t)
    b = bias if bias is not None else acc2
    grid = (triton.cdiv(m, block_m), triton.cdiv(n, block_n))
    _kg_lp_requant_kernel[grid](
        out, acc2, b, ts[0][1], ts[1][1], ts[2][1], m, n, acc2.stride(0), acc2.stride(1), b.stride(0), b.stride(1),
        ts[0][1].stride(0), ts[0][1].stride(1), ts[1][1].stride(0), ts[1][1].stride(1),
        ts[2][1].stride(0), ts[2][1].stride(1),
        AX=getattr(tl, _KG_LP_TL[acc_dtype]), AD=getattr(tl, _KG_LP_TL[ad]), CD=getattr(tl, _KG_LP_TL[cd]),
        HAS_B=bias is not None, LO=lo, HI=hi, OP0=ts[0][0], OP1=ts[1][0], OP2=ts[2][0], BM=block_m, BN=block_n,
        num_warps=num_warps)
    return out


def _kg_lp_int_mm_ok(x2, wt, acc_dtype):
    """Whether torch._int_mm (int8 x int8 -> int32) gives the reference's integer products exactly here."""
    if x2.dtype != torch.int8 or wt.dtype != torch.int8 or x2.device != wt.device:
        return False
    m, k = x2.shape
    n = wt.shape[1]
    if acc_dtype not in (torch.int32, torch.int64, torch.float32, torch.float64) or k * 128 * 128 >= 2 ** 31:
        return False                                       # past that, int32 would wrap where the reference does not
    if x2.device.type == "cuda":
        return m > 16 and k % 8 == 0 and n % 8 == 0 and k > 0
    return x2.device.type == "cpu" and m > 0 and k > 0 and n > 0


def kg_lp_int8_requant(x, w, cx, cw, w_is_nk, key, triton_epilogue, *sides):
    """x.to(cx) @ (w.to(cw).t() if w_is_nk else w.to(cw)), then the recorded epilogue (ending in .to(int8)):
    the integer product from torch._int_mm, the epilogue as one Triton kernel where it covers it."""
    steps = _KG_LP_SPECS[key]
    acc = None
    if torch.is_tensor(x) and torch.is_tensor(w) and isinstance(cx, torch.dtype) and cx == cw and x.dim() >= 2 \
            and w.dim() == 2 and x.numel() > 0 and (w.shape[1] if w_is_nk else w.shape[0]) == x.shape[-1]:
        k = x.shape[-1]
        x2 = x.reshape(-1, k)
        x2 = x2 if x2.is_contiguous() else x2.contiguous()
        wt = w.t() if w_is_nk else w                       # (K, N)
        if _kg_lp_int_mm_ok(x2, wt, cx):
            acc2 = torch._int_mm(x2, wt if x2.device.type == "cpu" else _kg_lp_colmajor(w, w_is_nk))
            shape = (*x.shape[:-1], acc2.shape[1])
            if triton_epilogue and triton is not None and (acc2.is_cuda or _KG_LP_INTERPRETED) \
                    and not (torch.is_grad_enabled() and any(torch.is_tensor(s) and s.requires_grad for s in sides)):
                plan = _kg_lp_plan(cx, shape, acc2.device, steps, sides)
                if plan is not None:
                    return _kg_lp_triton_epilogue(acc2, cx, plan).view(shape)
            acc = acc2.view(shape).to(cx)
    if acc is None:                                        # the reference's own product
        wc = w.to(cw)
        acc = x.to(cx) @ (wc.t() if w_is_nk else wc)
    return _kg_lp_replay(acc, steps, sides)


_KG_LP_EPILOGUE_OPS = ("add", "sub", "mul", "truediv", "div", "to", "type", "float", "double", "round", "clamp",
                       "clip", "clamp_min", "clamp_max", "neg")


def _kg_lp_epilogue_chain(node):
    """The single-user elementwise chain after node, up to and including a cast to int8 preceded by a round.
    Returns (chain nodes, side-operand nodes) or None."""
    chain, cur, seen_round = [], node, False
    while True:
        users = list(cur.users)
        if len(users) != 1:
            return None
        u = users[0]
        if not _kg_lp_is(u, *_KG_LP_EPILOGUE_OPS):
            return None
        flat = list(u.args) + list(u.kwargs.values())
        if sum(a is cur for a in flat) != 1 or flat[0] is not cur:
            return None
        chain.append(u)
        seen_round = seen_round or _kg_lp_is(u, "round")
        c = _kg_lp_cast(u)
        if c is not None and c[1] == torch.int8:
            return chain if seen_round and any(_kg_lp_is(x, "clamp", "clip", "clamp_min", "clamp_max")
                                               for x in chain) else None
        cur = u


def _kg_lp_int_operand_b(b):
    """(weight source, cast dtype, weight is (N, K), nodes in between) for w.to(c).t(), w.t().to(c) or w.to(c)."""
    inner = _kg_lp_transposed(b)
    if inner is not None:
        c = _kg_lp_cast(inner)
        return (c[0], c[1], True, [b, inner]) if c is not None else None
    c = _kg_lp_cast(b)
    if c is None:
        return None
    t = _kg_lp_transposed(c[0])
    return (t, c[1], True, [b, c[0]]) if t is not None else (c[0], c[1], False, [b])


def _kg_lp_erase_dead(gm, nodes):
    """Erase the listed call nodes that have no users left, repeatedly."""
    nodes = [x for x in nodes if isinstance(x, torch.fx.Node) and x.op in ("call_function", "call_method")]
    changed = True
    while changed:
        changed = False
        for x in nodes:
            if x in gm.graph.nodes and not x.users:
                gm.graph.erase_node(x)
                changed = True


def _kg_lp_rewrite_int8(gm, triton_epilogue):
    n = 0
    for node in list(gm.graph.nodes):
        mm = _kg_lp_matmul(node)
        if mm is None or mm[2]:
            continue
        a, b, _ = mm
        ca, wb = _kg_lp_cast(a), _kg_lp_int_operand_b(b)
        if ca is None or wb is None:
            continue
        w_src, cw, w_is_nk, between = wb
        if not isinstance(ca[1], torch.dtype) or ca[1] != cw or \
                cw not in (torch.int32, torch.int64, torch.float32, torch.float64):
            continue
        known = [d for d in (_kg_lp_static_dtype(gm, ca[0]), _kg_lp_static_dtype(gm, w_src)) if d is not None]
        if not known or any(d != torch.int8 for d in known):
            continue                       # no evidence of int8 operands, or a known non-int8 one
        chain = _kg_lp_epilogue_chain(node)
        if chain is None:
            continue
        sides, steps = [], []

        def template(arg, cur):
            if arg is cur:
                return _KG_LP_ACC
            if isinstance(arg, torch.fx.Node):
                sides.append(arg)
                return _KgLpSide(len(sides) - 1)
            if isinstance(arg, (tuple, list)):
                return type(arg)(template(x, cur) for x in arg)
            return arg
        cur = node
        for c in chain:
            steps.append((c.target, c.op == "call_method", tuple(template(x, cur) for x in c.args),
                          {k: template(v, cur) for k, v in c.kwargs.items()}))
            cur = c
        key = f"int8-{len(_KG_LP_SPECS)}"
        _KG_LP_SPECS[key] = tuple(steps)
        with gm.graph.inserting_before(chain[-1]):
            new = gm.graph.call_function(kg_lp_int8_requant, (ca[0], w_src, ca[1], cw, w_is_nk, key,
                                                              triton_epilogue, *sides))
        chain[-1].replace_all_uses_with(new)
        _kg_lp_erase_dead(gm, chain + [node, a] + between)
        n += 1
    return kg_finish(gm, n)


def kg_rewrite_int8_requant(gm, triton_epilogue=True):
    """int8 x int8 matmul (cast to int32/int64/fp32/fp64) + requantizing epilogue -> torch._int_mm + one fused
    epilogue (Triton where it applies, else the same torch ops)."""
    return _kg_lp_rewrite_int8(gm, triton_epilogue)


# ---------------------------------------------------------------- bf16 / fp16 linear + activation epilogue

def kg_lp_linear_act(x, weight, bias, gelu):
    """F.linear then ReLU (gelu False) or tanh-GELU (gelu True), as one cuBLASLt bias+activation epilogue."""
    if (bias is not None and x.dim() >= 2 and x.dtype == weight.dtype == bias.dtype
            and x.dtype in (torch.bfloat16, torch.float16) and x.device == weight.device == bias.device
            and x.device.type in ("cuda", "cpu") and x.shape[-1] == weight.shape[1] and x.numel() > 0
            and not (torch.is_grad_enabled() and (x.requires_grad or weight.requires_grad))):
        x2 = x.reshape(-1, x.shape[-1])
        y = torch._addmm_activation(bias, x2, weight.t(), use_gelu=gelu)
        return y.reshape(*x.shape[:-1], weight.shape[0])
    y = F.linear(x, weight, bias)
    return F.gelu(y, approximate="tanh") if gelu else F.relu(y)


def _kg_lp_activation(gm, node):
    """'relu' / 'gelu' (tanh) if node applies that activation to its first argument only, else None."""
    if node.op == "call_module":
        m = dict(gm.named_modules()).get(node.target)
        if isinstance(m, torch.nn.ReLU):
            return "relu"
        if isinstance(m, torch.nn.GELU) and m.approximate == "tanh":
            return "gelu"
        return None
    if _kg_lp_is(node, "relu", "relu_") and len(node.args) == 1 and set(node.kwargs) <= {"inplace"}:
        return "relu"
    if _kg_lp_is(node, "gelu") and len(node.args) == 1 and node.kwargs.get("approximate") == "tanh" \
            and set(node.kwargs) == {"approximate"}:
        return "gelu"
    return None


def kg_rewrite_linear_act(gm):
    """bf16/fp16 nn.Linear (with bias) followed only by ReLU or tanh-GELU -> kg_lp_linear_act."""
    mods = dict(gm.named_modules())
    n = 0
    for node in list(gm.graph.nodes):
        lin = mods.get(node.target) if node.op == "call_module" else None
        if not isinstance(lin, torch.nn.Linear) or lin.bias is None or len(node.users) != 1:
            continue
        if lin.weight.dtype not in (torch.bfloat16, torch.float16):
            continue
        act = list(node.users)[0]
        kind = _kg_lp_activation(gm, act)
        if kind is None or act.args[0] is not node:
            continue
        with gm.graph.inserting_before(act):
            w = gm.graph.get_attr(f"{node.target}.weight")
            b = gm.graph.get_attr(f"{node.target}.bias")
            new = gm.graph.call_function(kg_lp_linear_act, (node.args[0], w, b, kind == "gelu"))
        act.replace_all_uses_with(new)
        gm.graph.erase_node(act)
        gm.graph.erase_node(node)
        n += 1
    return kg_finish(gm, n)


PRECISION_REWRITES = {
    "fp8-scaled-mm": kg_rewrite_fp8_scaled_mm,
    "fp8-scaled-mm-f32": kg_rewrite_fp8_scaled_mm_f32,
    "int8-requant": kg_rewrite_int8_requant,
    "bf16-linear-act": kg_rewrite_linear_act,
}


# ---------------------------------------------------------------- proposer side (not embedded in candidates)

_PATTERN_CACHE: dict = {}


def source() -> str:
    """This file's rewrite functions, embedded verbatim in candidates."""
    import inspect
    import sys
    return inspect.getsource(sys.modules[__name__]).split("PRECISION_REWRITES = {")[0]


def _build(reference_source: str, cls: str):
    """The reference module from its source, on the meta device when it builds there (no memory), else on CPU."""
    import types
    mod = types.ModuleType("_kg_lp_reference")
    exec(compile(reference_source, "<reference>", "exec"), mod.__dict__)   # noqa: S102 - the judge loads it anyway
    init = mod.get_init_inputs() if hasattr(mod, "get_init_inputs") else []
    try:
        with torch.device("meta"):
            return getattr(mod, cls)(*init)
    except Exception:  # noqa: BLE001 - constructors that need real values
        return getattr(mod, cls)(*init)


def count_patterns(reference_source: str, cls: str) -> dict:
    """Places each precision rewrite applies in the reference, traced with buffers kept live (kg_lp_trace);
    cached per source. Empty when the reference cannot be built or traced here."""
    key = (hash(reference_source), cls)
    if key not in _PATTERN_CACHE:
        counts = {}
        try:
            model = _build(reference_source, cls)
            for name, fn in PRECISION_REWRITES.items():
                counts[name] = int(fn(kg_lp_trace(model)))
        except Exception:  # noqa: BLE001 - a reference we cannot analyse here gets no precision strategy
            counts = {}
        _PATTERN_CACHE[key] = counts
    return _PATTERN_CACHE[key]


def applies(ctx, key: str) -> bool:
    """Whether the precision rewrite `key` applies to ctx's reference on ctx's target.

    fp8 and int8 rewrites apply on cpu and cuda (torch._scaled_mm and torch._int_mm run on both; the inserted
    functions check each call); the fp32-result fp8 rewrite only adds places under a declared lower precision;
    the bf16 linear epilogue only on cuda (on the CPU _addmm_activation is addmm followed by the activation)."""
    if ctx.target not in ("cpu", "cuda"):
        return False
    counts = count_patterns(ctx.reference_source, ctx.reference_class)
    n = max(ctx.graph.patterns.get(key, 0), counts.get(key, 0))
    if key == "fp8-scaled-mm-f32":
        base = max(ctx.graph.patterns.get("fp8-scaled-mm", 0), counts.get("fp8-scaled-mm", 0))
        return bool(ctx.contract.precision) and n > base
    if key == "bf16-linear-act":
        return n > 0 and ctx.target == "cuda"
    return n > 0


def int8_variants(ctx) -> list:
    """The fused Triton epilogue on cuda (and the torch-op epilogue to compare), torch ops on cpu."""
    return [{"triton_epilogue": True}, {"triton_epilogue": False}] if ctx.target == "cuda" \
        else [{"triton_epilogue": False}]
