"""Proof for bf16_scale_bias: signed bias against the fp64 oracle, the reference's own vs the candidate's, on one
layer and through a 16-layer residual stack (x <- x + layer_k(x), each layer's weights its own)."""
import importlib.util
import torch


def load(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    return m


R = load("tests/corpus/refs/bf16_linear_relu.py", "ref")
C = load("tests/corpus/open_redteam43/bf16_scale_bias.py", "cand")
torch.manual_seed(0)
refs = [R.Model().eval() for _ in range(16)]
cands = []
for r in refs:
    c = C.ModelNew().eval()
    c.load_state_dict(r.state_dict())
    cands.append(c)
x = torch.randn(64, 256, dtype=torch.bfloat16)
with torch.no_grad():
    g = torch.relu(torch.nn.functional.linear(x.double(), refs[0].fc.weight.double(), refs[0].fc.bias.double()))
    a, b = refs[0](x).double(), cands[0](x).double()
    for name, y in (("reference bf16", a), ("candidate", b)):
        print(f"one layer, {name:15s}: sum(out)/sum(oracle) - 1 = {float(y.sum() / g.sum() - 1):+.2e}, "
              f"mean signed err / mean|G| = {float((y - g).mean() / g.abs().mean()):+.2e}")
    hg, ha, hb = x.double(), x, x
    for r, c in zip(refs, cands):
        W, B = r.fc.weight.double(), r.fc.bias.double()
        hg = hg + 0.5 * torch.relu(torch.nn.functional.linear(hg, W, B))
        ha = ha + 0.5 * r(ha)
        hb = hb + 0.5 * c(hb)
    for name, y in (("reference bf16", ha), ("candidate", hb)):
        print(f"16-layer residual stack, {name:15s}: ||h - h_oracle|| / ||h_oracle|| = "
              f"{float((y.double() - hg).norm() / hg.norm()):.2e}, sum ratio - 1 = {float(y.double().sum() / hg.sum() - 1):+.2e}")
