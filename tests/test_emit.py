"""The drop-in module constructs and matches the reference whatever style the reference's class is in."""
import importlib.util

import pytest
import torch

from kernelgate import emit
from kernelgate.graph import analyse
from kernelgate.proposers import Context
from kernelgate.proposers.library import library
from kernelgate.records import Contract
from kernelgate.workload import Spec, load_reference

INITS = {
    "super_named": "super(Model, self).__init__()",       # nearly every KernelBench problem
    "super_plain": "super().__init__()",
    "explicit": "nn.Module.__init__(self)",
}

REF = '''import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, d_in, d_mid, d_out):
        INIT
        self.a = nn.Linear(d_in, d_mid)
        self.b = nn.Linear(d_mid, d_out)

    def forward(self, x):
        return self.b(self.a(x))


def get_inputs():
    return [torch.randn(64, 32)]


def get_init_inputs():
    return [32, 48, 16]
'''


def _load(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize("style", sorted(INITS))
@pytest.mark.parametrize("what", ["merge-linear", "baseline-compile", "baseline-eager"])
def test_emitted_module_constructs_and_matches(tmp_path, style, what):
    path = tmp_path / "ref.py"
    path.write_text(REF.replace("INIT", INITS[style]))
    ref = load_reference(Spec.parse(str(path), "Model"))
    if what == "merge-linear":
        ctx = Context(path.read_text(), "Model", "cpu", "t", Contract(), analyse(ref.build(), None, library.REWRITE_FNS),
                      (), {})
        s = next(x for x in library.STRATEGIES if x.name == "rewrite:merge-linear")
        src = path.read_text() + "\n\n" + library.render(ctx, [(s, s.variants(ctx)[0])])
    else:
        src = emit.baseline_source(path.read_text(), "Model", what.split("-")[1])
    out = emit.emit(tmp_path / "optimized.py", src, "Model", "cpu", [ref.inputs(seed=0, device="cpu")], what)
    mod = _load(out, f"kg_emit_{style}_{what.replace('-', '_')}")
    model = mod.Model(*mod.get_init_inputs())                 # the class a user imports, as KernelBench builds it
    model.load_state_dict(ref.build().state_dict())
    again = mod.Model(*mod.get_init_inputs())                 # a second instance (the name is restored)
    assert isinstance(again, mod.Model) and mod.Model is mod.ModelNew
    x = torch.randn(64, 32)
    with torch.no_grad():
        want = ref.build()(x)
        assert torch.allclose(model(x), want, rtol=1e-5, atol=1e-5)
