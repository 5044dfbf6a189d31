"""kernelgate port: the source's constructs, the forms an implementation computes, the port's candidates, the CLI."""
import json

import pytest
import torch

from kernelgate.cli import main
from kernelgate.port import constructs, match, port_hint, render

CUDA_SRC = '''
import torch
from torch.utils.cpp_extension import load_inline
src = r"""
__global__ void k(const float* x, float* y, int n) {
    __shared__ float buf[256];
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        float v = x[i];
        v += __shfl_down_sync(0xffffffff, v, 16);
        buf[threadIdx.x] = v;
        __syncthreads();
        atomicAdd(y, buf[0]);
    }
}
"""
mod = load_inline("k", cpp_sources="", cuda_sources=src)
'''

TRITON_SRC = '''
import triton
import triton.language as tl

@triton.jit
def k(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    for t in range(pid, n, tl.num_programs(0)):
        x = tl.load(x_ptr + t)
        tl.atomic_add(y_ptr, tl.sum(x, axis=0))
'''

IMPL = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    """LayerNorm over the last dim, written out by hand (stands for a kernel the graph cannot see into)."""
    def __init__(self, n):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(n))
        self.bias = nn.Parameter(torch.zeros(n))

    def forward(self, x):
        m = x.mean(-1, keepdim=True)
        v = ((x - m) ** 2).mean(-1, keepdim=True)
        return (x - m) / torch.sqrt(v + 1e-5) * self.weight + self.bias


def get_inputs():
    return [torch.randn(16, 64)]


def get_init_inputs():
    return [64]
'''


def test_scan_finds_cuda_constructs_with_their_lines():
    s = constructs.scan(CUDA_SRC)
    assert s.languages == ("cuda",)
    keys = {f.key: f for f in s.found}
    assert {"shared-memory", "warp-shuffle", "barrier", "atomics", "persistent-grid"} <= set(keys)
    lines = CUDA_SRC.splitlines()
    assert "__shfl_down_sync" in lines[keys["warp-shuffle"].lines[0] - 1]
    direct, how = constructs.handling(keys["warp-shuffle"], "pallas")
    assert not direct and "reduction" in how
    assert constructs.handling(keys["atomics"], "pallas")[0]


def test_scan_finds_triton_constructs_and_the_hint_names_them():
    s = constructs.scan(TRITON_SRC)
    assert s.languages == ("triton",)
    assert {f.key for f in s.found} == {"persistent-grid", "atomics"}
    hint = port_hint(s, "pallas")
    assert "port" in hint and "persistent grids" in hint and "no direct counterpart" in hint
    assert constructs.scan("import torch\nx = 1\n").languages == ()


def _model(src, tmp_path):
    from kernelgate.workload import Spec, load_reference
    p = tmp_path / "impl.py"
    p.write_text(src)
    ref = load_reference(Spec.parse(str(p), "Model"))
    return ref.build(), [ref.inputs(0), ref.inputs(1)]


def test_matching_finds_the_operation_with_its_parameters(tmp_path):
    model, draws = _model(IMPL, tmp_path)
    with torch.no_grad():
        model.weight.normal_()
        model.bias.normal_()
    forms = match.matching(model, draws)
    assert forms and forms[0].describe() == "layernorm(x0, weight=weight, bias=bias, eps=1e-05)"
    assert all(f.kind == "layernorm" for f in forms)


def test_matching_tells_linear_activations_and_softmax_apart():
    class Lin(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = torch.nn.Linear(32, 16)

        def forward(self, x):
            return torch.relu(x @ self.fc.weight.t() + self.fc.bias)

    class Soft(torch.nn.Module):
        def forward(self, x):
            e = torch.exp(x - x.max(-1, keepdim=True).values)
            return e / e.sum(-1, keepdim=True)

    draws = [[torch.randn(8, 32)], [torch.randn(8, 32)]]
    assert [f.describe() for f in match.matching(Lin(), draws)] == ["relu(linear(x0, weight=fc.weight, bias=fc.bias))"]
    assert [f.describe() for f in match.matching(Soft(), draws)] == ["softmax(x0)"]
    assert match.matching(Soft(), [[torch.randn(8, 32)], [torch.randn(8, 32)]]) != []


def test_port_candidates_run_and_match_the_reference(tmp_path):
    pytest.importorskip("jax")
    model, draws = _model(IMPL, tmp_path)
    forms = match.matching(model, draws)
    for block in render.variants(forms[0]):
        src = IMPL + "\n\n" + render.body(forms[0], "pallas", block)
        ns = {"__name__": "kg_port_test"}
        exec(compile(src, "cand.py", "exec"), ns)                 # noqa: S102 - the test's own candidate
        cand = ns["ModelNew"](64).eval()
        with torch.no_grad():
            cand.weight.normal_()
            model.weight.copy_(cand.weight)
            torch.testing.assert_close(cand(*draws[1]), model(*draws[1]), rtol=1e-5, atol=1e-5)
        assert ns["_KG_PL_CALLS"], "the Pallas kernel ran (no fallback to torch)"


def test_cli_port_refuses_bad_languages_and_templateless_targets(write, capsys, tmp_path):
    impl = write("impl.py", IMPL)
    rc = main(["port", impl, "--to", "fortran", "--out", str(tmp_path / "o"), "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert rc == 2 and doc["reason"] == "usage" and "fortran" in doc["message"]
    rc = main(["port", impl, "--to", "cuda", "--out", str(tmp_path / "o"), "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert rc == 2 and "needs an LLM proposer" in doc["message"]
    assert not (tmp_path / "o").exists()


@pytest.mark.slow
def test_port_end_to_end_writes_the_port_and_its_report(write, tmp_path):
    pytest.importorskip("jax")
    from kernelgate.port import port
    impl = write("impl.py", IMPL)
    out = tmp_path / "o"
    r = port(impl, to="pallas", target="cpu", out=str(out), budget=90, max_candidates=2,
             store=str(tmp_path / "s.sqlite"))
    doc = json.loads((out / "port.json").read_text())
    assert doc["to"] == "pallas" and doc["forms"][0]["kind"] == "layernorm" and doc["source_ms"] > 0
    assert doc["candidates"] and all(c["strategy"].startswith("port:pallas:") for c in doc["candidates"])
    report = (out / "report.md").read_text()
    assert "## Port" in report and "layernorm(x0, weight=weight, bias=bias, eps=1e-05)" in report
    # the matched form with the module's weight and bias is verified (the others fail on perturbed parameters)
    assert r.best is not None and r.exit_code == 0, doc["candidates"]
    assert (out / "port.py").exists() and r.best["ran_kernels"] > 0 and doc["port_vs_source"] > 0
    assert "weight=weight, bias=bias" in r.best["params"]["form"]
