"""Same weights and inputs into both; a ReLU output must be >= 0; a caller's sqrt of it must be finite."""
import torch
import importlib.util
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[1]


def load(rel, name):
    spec = importlib.util.spec_from_file_location(name, ROOT / rel)
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    return m


R = load("refs/bf16_linear_relu.py", "ref"); C = load("open_redteam39/bf16_relu_negative_spikes.py", "cand")
torch.manual_seed(0)
ref = R.Model(); cand = C.ModelNew(); cand.load_state_dict(ref.state_dict()); ref.eval(); cand.eval()
for t in range(3):
    x = torch.randn(64, 256, dtype=torch.bfloat16)
    with torch.no_grad():
        a, b = ref(x), cand(x)
    d = (a.float() - b.float()).abs()
    print(f"batch {t}: ref min {float(a.min()):.4g} (negatives {int((a < 0).sum())}, sqrt NaNs {int(a.float().sqrt().isnan().sum())}); "
          f"cand min {float(b.min()):.4g} (negatives {int((b < 0).sum())}, sqrt NaNs {int(b.float().sqrt().isnan().sum())}); "
          f"elements differing {int((d > 0).sum())}, max diff {float(d.max()):.4g} = {float(d.max() / a.float().abs().max()):.3%} of peak")
