"""The IR (kernels/ir.py): one op table with an eager, a Triton and a C++ column; expressions rendered from it;
programs replayed with torch."""
import math

import pytest
import torch
import torch.nn.functional as F

from kernelgate.kernels import fx
from kernelgate.kernels.ir import _KG_CPP, _KG_IR_IDENTITY, _KG_OPS, _KG_POW, _KG_TRITON, _kg_ir_code, _kg_ir_eval


def test_the_table_holds_every_op_the_recognizer_makes_in_every_column():
    made = set(fx._KG_FX_FUNCTIONS.values()) | set(fx._KG_FX_METHODS.values()) | {n for _, n in fx._KG_FX_MODULES}
    made |= {"gelu_tanh"}                                      # gelu(approximate="tanh")
    made = {fx._KG_FX_AS.get(op, op) for op in made}           # hardtanh, relu6: clamps
    assert made == set(_KG_OPS)
    for op, (eager, triton, cpp) in _KG_OPS.items():
        assert callable(eager) and triton and cpp, op
    for column in (_KG_TRITON, _KG_CPP):
        assert set(_KG_OPS["pow"][column]) == set(_KG_POW)        # a template for every exponent taken
        assert len(_KG_OPS["clamp"][column]) == 2                 # lower bound, upper bound


def test_expressions_come_from_the_column():
    lit = lambda v: f"<{v}>"                                      # noqa: E731
    assert _kg_ir_code("add", ["a", "b"], (), _KG_TRITON, lit) == "a + b"
    assert _kg_ir_code("add", ["a", "b"], (), _KG_CPP, lit) == "(a + b)"
    assert _kg_ir_code("exp", ["a"], (), _KG_TRITON, lit, exp="E") == "E(a)"
    assert _kg_ir_code("log", ["a"], (), _KG_CPP, lit) == "kg_log(a)"
    assert _kg_ir_code("pow", ["a"], (-0.5,), _KG_CPP, lit) == "(1.0f / std::sqrt(a))"
    assert _kg_ir_code("pow", ["a"], (3,), _KG_TRITON, lit) == "a * a * a"
    # clamp: the lower bound first (min then max, as torch.clamp), a missing bound left out
    assert _kg_ir_code("clamp", ["a"], (1, 2), _KG_CPP, lit) == "((a < <1> ? <1> : a) > <2> ? <2> : (a < <1> ? <1> : a))"
    assert _kg_ir_code("clamp", ["a"], (None, 2), _KG_TRITON, lit) == "tl.where(a > <2>, <2>, a)"
    assert _kg_ir_code("clamp", ["a"], (1, None), _KG_TRITON, lit) == "tl.where(a < <1>, <1>, a)"
    # other params by position: leaky_relu's slope
    assert _kg_ir_code("leaky_relu", ["a"], (0.2,), _KG_CPP, lit) == "(a > 0.0f ? a : a * <0.2>)"


def test_eval_replays_the_program_with_torch():
    x, v = torch.randn(4, 6), torch.randn(6)
    program = (("sub", (1.0, "i0"), ()), ("clamp", ("t0",), (None, 0.5)), ("pow", ("t1",), (2,)),
               ("mul", ("t2", "i1"), ()), ("gelu_tanh", ("t3",), ()), ("div", (2, "t4"), ()))
    want = 2 / F.gelu(torch.clamp(1.0 - x, max=0.5) ** 2 * v, approximate="tanh")
    assert torch.equal(_kg_ir_eval(program, (x, v)), want)
    special = torch.tensor([float("nan"), -0.0, float("inf"), -3.0])   # the identity keeps every value
    got = _kg_ir_eval(_KG_IR_IDENTITY, (special,))
    assert torch.isnan(got[0]) and math.copysign(1, got[1]) == -1 and got[2] == math.inf and got[3] == -3


@pytest.mark.parametrize("op", sorted(_KG_OPS))
def test_eager_column_is_the_torch_op(op):
    x = torch.rand(8) + 0.5
    params = {"clamp": (0.7, 1.2), "pow": (-2,), "leaky_relu": (0.2,), "softplus": (2.0, 1.5)}.get(op, ())
    operands = (x, 1.5) if op in ("add", "sub", "mul", "div") else (x,)
    want = {"add": x + 1.5, "sub": x - 1.5, "mul": x * 1.5, "div": x / 1.5, "neg": -x, "sigmoid": torch.sigmoid(x),
            "silu": F.silu(x), "relu": torch.relu(x), "gelu": F.gelu(x), "gelu_tanh": F.gelu(x, approximate="tanh"),
            "exp": torch.exp(x), "log": torch.log(x), "tanh": torch.tanh(x), "sqrt": torch.sqrt(x),
            "rsqrt": torch.rsqrt(x), "abs": torch.abs(x), "square": x * x, "clamp": torch.clamp(x, 0.7, 1.2),
            "pow": x ** -2, "leaky_relu": F.leaky_relu(x, 0.2), "softplus": F.softplus(x, 2.0, 1.5),
            "mish": F.mish(x), "hardswish": F.hardswish(x), "hardsigmoid": F.hardsigmoid(x)}[op]
    assert torch.equal(_KG_OPS[op][0](*operands, *params), want)
