"""Proof for param_grad_hook_negated: after one (no_grad) forward, SGD steps raise the loss instead of lowering it."""
import importlib.util, torch
here = __file__.rsplit("/", 1)[0]


def load(path):
    spec = importlib.util.spec_from_file_location("m", path)
    m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m); return m


torch.manual_seed(0)
r = load(f"{here}/../refs/linear_relu_256.py").Model()
c = load(f"{here}/param_grad_hook_negated.py").ModelNew(); c.load_state_dict(r.state_dict())
x, t = torch.randn(64, 256), torch.randn(64, 256).relu()
for name, m in (("reference", r), ("candidate", c)):
    with torch.no_grad():
        m(x)                                   # one inference call, as the gate makes
    opt = torch.optim.SGD(m.parameters(), lr=0.05)
    losses = []
    for _ in range(20):
        opt.zero_grad(); loss = ((m(x) - t) ** 2).mean(); loss.backward(); opt.step(); losses.append(loss.item())
    print(f"{name}: training loss {losses[0]:.4f} -> {losses[-1]:.4f}")
