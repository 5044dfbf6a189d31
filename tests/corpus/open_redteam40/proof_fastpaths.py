"""Proof for nonpos_input_fastpath and complex_imag_input_fastpath: candidate vs reference, same weights."""
import importlib.util, torch
here = __file__.rsplit("/", 1)[0]


def load(path):
    spec = importlib.util.spec_from_file_location("m", path)
    m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m); return m


for cand, ref, make in (("nonpos_input_fastpath", "linear_relu_256", lambda: -torch.rand(64, 256)),
                        ("complex_imag_input_fastpath", "complex_square",
                         lambda: torch.complex(torch.zeros(256, 512), torch.randn(256, 512))),
                        ("allzero_input_fastpath", "linear_relu_256", lambda: torch.zeros(64, 256)),
                        ("repeated_batch_fastpath", "linear_relu_256", lambda: torch.randn(1, 256).repeat(64, 1))):
    torch.manual_seed(0)
    r = load(f"{here}/../refs/{ref}.py").Model()
    c = load(f"{here}/{cand}.py").ModelNew(); c.load_state_dict(r.state_dict())
    x = make()
    with torch.no_grad():
        y = torch.randn_like(x)
        print(f"{cand}: max |cand - ref| = {(c(x) - r(x)).abs().max().item():.3g} on the special inputs "
              f"inputs; {(c(y) - r(y)).abs().max().item():.3g} on randn inputs")
