"""int8 linear with requantization, a low-precision strategy (precision.py lists it): `x.to(acc) @ w.to(acc).t()`
on int8 tensors (acc: int32/int64/fp32/fp64), then a chain of elementwise ops ending in
`round -> clamp -> .to(int8)` -> `torch._int_mm` (int32 accumulate, exact) and the chain as one Triton epilogue
kernel (bias add, scales, round-half-to-even, clamp, int8 store), which reproduces torch's rounding bit for bit
(IEEE mul, `div_rn`, exact half-even rounding). Chains the kernel does not cover are replayed op by op with
torch, which is exact by construction.

Candidates embed this file verbatim after precision_graph.py (precision.source()), so it imports without Triton
and defines only `kg_lp_*` / `_kg_lp_*` / `_KG_LP_*` names.
"""

import torch
import torch.fx

try:
    import triton
    import triton.language as tl
except ImportError:  # the int8 epilogue then always runs as torch ops
    triton = None

try:
    _kg_lp_is, _kg_lp_cast, _kg_lp_static_dtype  # noqa: B018 - embedded after precision_graph.py: its helpers
except NameError:
    from .precision_graph import (_kg_lp_cast, _kg_lp_colmajor, _kg_lp_erase_dead, _kg_lp_is, _kg_lp_matmul,
                                  _kg_lp_probe, _kg_lp_static_dtype, _kg_lp_transposed, kg_finish)


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
