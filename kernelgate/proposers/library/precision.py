"""Strategies for workloads that are already in low-precision formats, as torch.fx rewrites.

- fp8 scaled matmul: `(a.to(f) * s_a) @ (w.to(f) * s_w).t()` on fp8 (e4m3/e5m2) tensors with per-tensor or
  per-row scales (optionally followed by a cast to bf16/fp16) -> `torch._scaled_mm` on the fp8 operands with the
  scales (fp32 accumulation, use_fast_accum=False). Matched only where at least one operand is statically fp8
  (an fp8 buffer or a cast to fp8); an fp32 result is rewritten only with the `fp32_out` flag (the library sets it
  when the contract declares a lower precision), because a fp8 GEMM's accumulation is not cuBLAS-fp32 accurate.
- int8 linear with requantization (precision_int8.py): `torch._int_mm` and the requantizing epilogue as one
  Triton kernel, bit for bit.
- bf16/fp16 linear + ReLU / tanh-GELU -> `torch._addmm_activation` (cuBLASLt bias+activation epilogue). Exact-erf
  GELU is left alone: the cuBLASLt GELU epilogue is the tanh approximation, another function.

Every inserted function checks dtypes, shapes and devices at each call and otherwise runs the reference's own ops.
Like fx_rewrites.py, candidates embed the rewrite functions verbatim (`source()`: precision_graph.py,
precision_int8.py, then this file up to PRECISION_REWRITES), so they import without Triton and define only
`kg_lp_*` / `_kg_lp_*` / `_KG_LP_*` names.
"""

import torch
import torch.fx
import torch.nn.functional as F

try:
    kg_lp_trace, kg_rewrite_int8_requant  # noqa: B018 - embedded after precision_graph.py, precision_int8.py
except NameError:
    from .precision_graph import (_KG_LP_FP8, _kg_lp_cast, _kg_lp_colmajor, _kg_lp_erase_dead, _kg_lp_is,
                                  _kg_lp_matmul, _kg_lp_probe, _kg_lp_static_dtype, _kg_lp_transposed, kg_finish,
                                  kg_lp_trace)
    from .precision_int8 import kg_rewrite_int8_requant


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
    """The rewrite functions, embedded verbatim in candidates: the graph helpers, the int8 rewrite, then this
    file's (up to PRECISION_REWRITES)."""
    import inspect
    import sys
    from . import precision_graph, precision_int8
    return "\n".join([inspect.getsource(precision_graph), inspect.getsource(precision_int8),
                      inspect.getsource(sys.modules[__name__]).split("PRECISION_REWRITES = {")[0]])


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
