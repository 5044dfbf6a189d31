"""The recognizer (kernels/fx.py), shared by the Triton and the C++ rewrites: pointwise nodes and their
programs, groups, a renderer's filter, softmax / LayerNorm, row reductions and GEMMs."""
import operator

import torch
import torch.fx
import torch.nn as nn
import torch.nn.functional as F

from kernelgate.kernels import fx
from kernelgate.kernels.ir import _kg_ir_eval


def _classified(m):
    gm = torch.fx.symbolic_trace(m)
    mods, info = fx._kg_fx_info(gm)
    return gm, {n.name: (op, params) for n, (op, _, params) in info.items()}, info


def test_forms_of_an_op_and_their_arguments():
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.gelu, self.relu = nn.GELU(approximate="tanh"), nn.ReLU(inplace=True)

        def forward(self, x, y):
            a = torch.add(x, y, alpha=1) + torch.sub(x, y, alpha=2)        # alpha 2: not taken
            b = torch.div(x, 2.0) + torch.div(x, 2.0, rounding_mode="floor")
            c = x.clamp(min=-1.0) + torch.clamp(x, y) + x.pow(2) + x.pow(2.5) + x ** y
            d = self.gelu(x) + F.gelu(x, approximate="none") + self.relu(x * 3) + F.relu(x, inplace=True)
            return a + b + c + d + abs(x) + (-x)
    _, ops, _ = _classified(M())
    assert ops["add"] == ("add", ()) and "sub" not in ops
    assert ops["div"] == ("div", ()) and "div_1" not in ops
    assert ops["clamp"] == ("clamp", (-1.0, None)) and "clamp_1" not in ops            # a tensor bound: not taken
    assert ops["pow_1"] == ("pow", (2,)) and "pow_2" not in ops and "pow_3" not in ops  # 2.5, a tensor: not taken
    assert ops["gelu"] == ("gelu_tanh", ()) and ops["gelu_1"] == ("gelu", ())
    assert ops["relu"] == ("relu", ())                   # in place on x * 3, which nothing else reads
    assert "relu_1" not in ops                           # in place on an input: not taken
    assert ops["abs_1"] == ("abs", ()) and ops["neg"] == ("neg", ())


def test_groups_programs_and_a_renderers_filter():
    class M(nn.Module):
        def forward(self, x):
            s = torch.sigmoid(x) * 2                         # read twice below: the root of its own group
            t = torch.softmax(s, -1)
            return torch.tanh(t) + s, (x * 1e300).exp()
    gm = torch.fx.symbolic_trace(M())
    _, info = fx._kg_fx_info(gm)
    groups = [[n.name for n in g] for g in fx._kg_fx_groups(gm, info)]
    assert groups == [["sigmoid", "mul"], ["tanh", "add"], ["mul_1", "exp"]]
    order = fx._kg_fx_groups(gm, info)[1]
    inputs = fx._kg_fx_inputs(order, info)
    assert [n.name for n in inputs] == ["softmax", "mul"]
    program = fx._kg_fx_program(order, info, inputs)
    assert program == (("tanh", ("i0",), ()), ("add", ("t0", "i1"), ()))
    a, b = torch.randn(3), torch.randn(3)
    assert torch.equal(_kg_ir_eval(program, (a, b)), torch.tanh(a) + b)
    # a renderer that cannot hold 1e300 in its literals: that node is left out, so exp stands alone
    _, kept = fx._kg_fx_info(gm, lambda op, operands, params: all(not isinstance(v, float) or abs(v) < 1e38
                                                                 for v in operands))
    assert [[n.name for n in g] for g in fx._kg_fx_groups(gm, kept)][-1] == ["exp"]


def test_row_ops():
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.sm, self.sm0, self.ln = nn.Softmax(dim=-1), nn.Softmax(dim=None), nn.LayerNorm(8, bias=False)
            self.ln2 = nn.LayerNorm((2, 8))

        def forward(self, x):
            return (self.sm(x), self.sm0(x), F.softmax(x, dim=1), torch.softmax(x, -1, dtype=torch.float64),
                    x.softmax(-1), self.ln(x), F.layer_norm(x, (8,), None, None, 1e-3),
                    torch.layer_norm(x, [8]), self.ln2(x))
    gm = torch.fx.symbolic_trace(M())
    mods = dict(gm.named_modules())
    rows = {n.name: fx._kg_fx_row_op(n, mods) for n in gm.graph.nodes}
    x = next(n for n in gm.graph.nodes if n.op == "placeholder")
    assert rows["sm"] == ("softmax", x, -1, None, None, 0.0)
    assert rows["sm0"] is None                              # no dim
    assert rows["softmax"] == ("softmax", x, 1, None, None, 0.0)            # any int dim; rewrites decide
    assert rows["softmax_1"] is None                        # a dtype
    assert rows["softmax_2"] == ("softmax", x, -1, None, None, 0.0)
    assert rows["ln"] == ("layernorm", x, (8,), "ln.weight", None, 1e-5)
    assert rows["layer_norm"] == ("layernorm", x, (8,), None, None, 1e-3)
    assert rows["layer_norm_1"] == ("layernorm", x, (8,), None, None, 1e-5)
    assert rows["ln2"] is None                              # over two dims


def test_row_reductions_and_gemms():
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(8, 8)
            self.w = nn.Parameter(torch.randn(8, 8))

        def forward(self, x):
            return (x.mean(-1, keepdim=True), torch.sum(x, dim=[-1], keepdim=True), x.mean(-1), x.sum(0, keepdim=True),
                    self.fc(x), F.linear(x, self.w), x @ self.w, torch.matmul(x, self.w))
    gm = torch.fx.symbolic_trace(M())
    mods = dict(gm.named_modules())
    nodes = {n.name: n for n in gm.graph.nodes}
    assert [fx._kg_fx_reduction(nodes[k]) for k in ("mean", "sum_1", "mean_1", "sum_2")] == ["mean", "sum", None, None]
    assert fx._kg_fx_gemm_of(nodes["fc"], mods)[::2] == ("linear", "fc.weight")
    assert fx._kg_fx_gemm_of(nodes["fc"], mods)[3] == "fc.bias"
    assert fx._kg_fx_gemm_of(nodes["linear"], mods)[0] == "linear"
    assert fx._kg_fx_gemm_of(nodes["matmul"], mods)[0] == "matmul"
    assert fx._kg_fx_gemm_of(nodes["matmul_1"], mods)[0] == "matmul"
    assert fx._kg_fx_known_fp32(gm, "fc.weight") and not fx._kg_fx_known_fp32(gm, nodes["x"])


def test_replacing_a_group_updates_the_groups_after_it():
    class M(nn.Module):
        def forward(self, x):
            a = torch.exp(x) * 2
            return a + torch.tanh(a) + a.sum()
    gm = torch.fx.symbolic_trace(M())
    _, info = fx._kg_fx_info(gm)
    first, second = fx._kg_fx_groups(gm, info)
    fx._kg_fx_replace(gm, info, first, operator.neg, (first[0].args[0],))
    new = next(n for n in gm.graph.nodes if n.target is operator.neg)
    tanh, add = second[0], second[1]
    assert info[tanh][1] == (new,) and info[add][1] == (new, tanh) and first[-1] not in info
    assert fx._kg_fx_finish(gm, 1) == 1
    x = torch.randn(4)
    assert torch.allclose(gm(x), -x + torch.tanh(-x) + (-x).sum())
