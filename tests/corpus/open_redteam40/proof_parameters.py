"""Proof for parameters_detached_copies: one SGD step changes the reference's weights, not the candidate's."""
import importlib.util, torch
here = __file__.rsplit("/", 1)[0]


def load(path):
    spec = importlib.util.spec_from_file_location("m", path)
    m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m); return m


torch.manual_seed(0)
r = load(f"{here}/../refs/linear_relu_256.py").Model()
c = load(f"{here}/parameters_detached_copies.py").ModelNew(); c.load_state_dict(r.state_dict())
x = torch.randn(64, 256)
for name, m in (("reference", r), ("candidate", c)):
    w0 = m.fc.weight.detach().clone()
    opt = torch.optim.SGD(m.parameters(), lr=1.0)
    m(x).sum().backward(); opt.step()
    print(f"{name}: weight change after one SGD step {(m.fc.weight.detach() - w0).abs().max().item():.3g}")
