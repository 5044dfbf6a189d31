"""The supervisor: a multi-layer forward split into torch.fx pieces, each a workload of its own (its shapes at
the split points, none of the rest of the model), an LLM's optimized piece substituted back into the whole
model, and the recomposed candidate judged end to end by the real gate."""
from __future__ import annotations

import random
from dataclasses import replace

import pytest
import torch

from kernelgate import api
from kernelgate.graph import GraphInfo
from kernelgate.proposers import Context
from kernelgate.proposers.llm import LLMProposer, recompose_body, split_reference
from kernelgate.records import Contract, Evaluation, Reason

RNG = random.Random(0)

LAYERS = '''import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, d, h):
        super().__init__()
        self.fc1 = nn.Linear(d, h)
        self.norm = nn.LayerNorm(h)
        self.fc2 = nn.Linear(h, h)
        self.fc3 = nn.Linear(h, d)

    def forward(self, x):
        y = self.norm(F.gelu(self.fc1(x)))
        y = torch.relu(self.fc2(y))
        return self.fc3(y)


def get_inputs():
    return [torch.randn(64, 32)]


def get_init_inputs():
    return [32, 128]
'''

UNTRACEABLE = '''import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(8, 8)
        self.fc2 = nn.Linear(8, 8)

    def forward(self, x):
        if x.sum() > 0:                 # data-dependent control flow: torch.fx cannot trace it
            return self.fc2(self.fc1(x))
        return self.fc1(x)


def get_inputs():
    return [torch.randn(4, 8)]


def get_init_inputs():
    return []
'''

# the most expensive piece (fc2 + relu, 128x128) first, correct
FAST_FC2 = '''One GEMM with the bias, the ReLU in place on its output.

```python
import torch.nn.functional as F


class ModelNew(Model):
    def forward(self, x):
        return torch.addmm(self.fc2.bias, x, self.fc2.weight.t()).clamp_min_(0.0)
```'''

# the next piece (fc1 + gelu + layernorm), wrong: the tanh GELU's constant mistyped
WRONG_FC1 = '''```python
import math
import torch.nn.functional as F


class ModelNew(Model):
    def forward(self, x):
        y = F.linear(x, self.fc1.weight, self.fc1.bias)
        y = 0.5 * y * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (y + 0.47715 * y ** 3)))
        return F.layer_norm(y, self.norm.normalized_shape, self.norm.weight, self.norm.bias, self.norm.eps)
```'''


def context(source: str) -> Context:
    return Context(source, "Model", "cpu", "cpu (test)", Contract(), GraphInfo(True), (),
                   {"name": "cpu", "kind": "cpu", "sm_count": 2, "bandwidth": 2.0e10, "peak": {"fp32": 1.0e11}},
                   baseline_ms=0.05)


def load(source: str) -> dict:
    ns: dict = {}
    exec(compile(source, "<file>", "exec"), ns)
    return ns


def proposer(url: str, **kw) -> LLMProposer:
    pytest.importorskip("openai", reason="the openai SDK is not installed (pip install 'kernelgate[llm]')")
    return LLMProposer.from_args(f"openai:coder@{url}/v1", backoff=0.001, timeout=5.0, **kw)


# ------------------------------------------------------------------ the split

def test_a_three_layer_forward_splits_at_its_layers_most_expensive_first():
    sp = split_reference(LAYERS, machine=context(LAYERS).machine)
    assert not sp.reason
    assert [p.nodes for p in sp.pieces] == [("fc1", "gelu", "norm"), ("fc2", "relu"), ("fc3",)]
    assert [p.name for p in sp.by_cost()] == ["submod_1", "submod_0", "submod_2"]    # the 128x128 GEMM first
    fc2 = sp.get("submod_1")
    assert fc2.inputs == (("norm", "float32[64, 128]"),) and fc2.outputs == ("float32[64, 128]",)
    assert fc2.flops >= 2 * 64 * 128 * 128 and fc2.cost_s > 0
    # each piece is a workload of its own, computing what its part of the model computes
    ref = load(LAYERS)
    model = ref["Model"](32, 128).eval()
    x = torch.randn(64, 32)
    values = {"x": x}
    values["norm"] = model.norm(torch.nn.functional.gelu(model.fc1(x)))
    values["relu"] = torch.relu(model.fc2(values["norm"]))
    want = {"submod_0": values["norm"], "submod_1": values["relu"], "submod_2": model.fc3(values["relu"])}
    for p in sp.pieces:
        ns = load(p.source)
        piece = ns["Model"](*ns["get_init_inputs"]())
        assert [tuple(t.shape) for t in ns["get_inputs"]()] == [tuple(int(d) for d in s.split("[")[1][:-1].split(", "))
                                                                 for _, s in p.inputs]
        mine = dict(piece.named_children())
        piece.load_state_dict({k: v for k, v in model.state_dict().items() if k.split(".")[0] in mine})
        torch.testing.assert_close(piece(*[values[n] for n, _ in p.inputs]), want[p.name])
        assert "fc3" not in p.source or p.name == "submod_2"


def test_the_recomposed_model_is_the_reference_with_the_piece_in_place():
    sp = split_reference(LAYERS)
    code = FAST_FC2.split("```python\n")[1].split("```")[0]
    src = LAYERS + "\n\n" + recompose_body(sp, {"submod_1": code})
    assert "kernelgate" not in src.replace("kernelgate piece", "")      # no import of kernelgate
    ns = load(src)
    ref, new = ns["Model"](32, 128).eval(), ns["ModelNew"](32, 128).eval()
    assert list(new.state_dict()) == list(ref.state_dict())
    new.load_state_dict(ref.state_dict(), strict=True)
    x = torch.randn(64, 32)
    torch.testing.assert_close(new(x), ref(x))
    with torch.no_grad():                       # new weights reach the substituted piece
        for t in ref.parameters():
            t.mul_(-1.5)
    new.load_state_dict(ref.state_dict(), strict=True)
    torch.testing.assert_close(new(x), ref(x))
    piece = new.__dict__["_kg_split"].submod_1
    assert type(piece).__name__ == "ModelNew" and piece.fc2.weight is new.fc2.weight


def test_no_split_for_an_untraceable_or_a_one_layer_forward(openai_server):
    assert "torch.fx" in split_reference(UNTRACEABLE).reason
    one = LAYERS.replace("y = torch.relu(self.fc2(y))\n        return self.fc3(y)", "return y")
    assert "one piece" in split_reference(one).reason
    # the supervisor agent is not asked there; the explorer is, and the notes say why once
    openai_server.add(("reply", FAST_FC2), ("reply", FAST_FC2))
    p = proposer(openai_server.url, agents=("explorer", "supervisor"))
    ctx = context(UNTRACEABLE)
    p.propose(ctx, RNG, 2)
    p.propose(replace(ctx, generation=1), RNG, 2)
    assert len(openai_server.requests) == 2 and all(a.agent == "explorer-1" for a in p.attempts)
    assert [n for n in p.notes if n.startswith("llm supervisor not used")] == [
        next(n for n in p.notes if "torch.fx" in n)]


# ------------------------------------------------------------------ through the gate

@pytest.mark.slow
def test_pieces_proposed_recomposed_and_judged_end_to_end(openai_server, tmp_path):
    s = openai_server
    p = proposer(s.url, agents=("supervisor",))
    ctx = context(LAYERS)
    ref = tmp_path / "ref.py"
    ref.write_text(LAYERS)

    def judge(c):
        path = tmp_path / f"{c.id}.py"
        path.write_text(c.source)
        return api.verify(str(ref), str(path), target="cpu", store=str(tmp_path / "store.sqlite"))

    # the most expensive piece first: its own workload in the prompt, not the model's
    s.add(("reply", FAST_FC2))
    [good] = p.propose(ctx, RNG, 1)
    system = s.requests[-1]["body"]["messages"][0]["content"]
    user = s.requests[-1]["body"]["messages"][-1]["content"]
    assert "nn.Linear(in_features=128, out_features=128, bias=True)" in system
    assert "float32[64, 128]" in system and "`norm` float32[64, 128]" in user and "piece 2 of 3" in system
    assert "self.fc3" not in system + user and "self.fc1" not in system + user
    assert "return [32, 128]" not in system                   # the whole model's file is not there
    assert good.proposer == "llm" and good.strategy == "llm:supervisor-1:submod_1" and good.parent is None
    assert dict(good.params)["piece"] == "submod_1" and dict(good.params)["agent"] == "supervisor-1"
    v1 = judge(good)
    assert v1.accepted, f"{v1.reason.value}: {v1.message}"

    # accepted: the agent moves on to the next piece; its wrong version is rejected with a mismatch
    ctx = replace(ctx, history=(Evaluation(good, v1),), generation=1)
    s.add(("reply", WRONG_FC1))
    [bad] = p.propose(ctx, RNG, 1)
    system = s.requests[-1]["body"]["messages"][0]["content"]
    user = s.requests[-1]["body"]["messages"][-1]["content"]
    assert "nn.LayerNorm((128,)" in system and "`x` float32[64, 32]" in user
    assert "self.fc2" not in system and bad.strategy == "llm:supervisor-1:submod_0"
    v2 = judge(bad)
    assert not v2.accepted and v2.reason == Reason.MISMATCH, f"{v2.reason.value}: {v2.message}"

    # the mismatch goes back to the same agent, on the same piece, with its piece code
    ctx = replace(ctx, history=ctx.history + (Evaluation(bad, v2),), generation=2)
    s.add(("reply", WRONG_FC1.replace("0.47715", "0.044715")))
    [fixed] = p.propose(ctx, RNG, 1)
    fix = s.requests[-1]["body"]["messages"][-1]["content"]
    assert "rejected: mismatch" in fix and "Fix it" in fix and fixed.strategy == "llm:supervisor-1:submod_0"
    assert fixed.parent == bad.id
    assert any(m["content"] == WRONG_FC1 for m in s.requests[-1]["body"]["messages"])   # the same conversation


def test_a_faster_piece_is_kept_in_the_next_pieces_candidates(openai_server):
    from llm_fakes import accepted
    s = openai_server
    p = proposer(s.url, agents=("supervisor",))
    ctx = context(LAYERS)
    s.add(("reply", FAST_FC2), ("reply", WRONG_FC1))
    [first] = p.propose(ctx, RNG, 1)
    ctx = replace(ctx, history=(accepted(first, 0.04, base_ms=0.05),), generation=1)   # beat the baseline
    [second] = p.propose(ctx, RNG, 1)
    assert dict(second.params)["piece"] == "submod_0"
    assert "'submod_1': r'''" in second.source and "'submod_0': r'''" in second.source   # both substituted
    assert "addmm" in second.source and "0.47715" in second.source


def test_a_supervisor_alone_stops_on_a_model_that_does_not_split(openai_server):
    p = proposer(openai_server.url, agents=("supervisor",))
    assert p.propose(context(UNTRACEABLE), RNG, 2) == [] and openai_server.requests == []
    assert p.stopped and "torch.fx" in p.stopped
