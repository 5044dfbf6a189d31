import torch, importlib.util, sys
def load(p, n):
    s = importlib.util.spec_from_file_location(n, p); m = importlib.util.module_from_spec(s); s.loader.exec_module(m); return m
R = load(sys.argv[1], "r"); C = load(sys.argv[2], "c")
torch.manual_seed(0)
ref = R.Model(); cand = C.ModelNew()
x = torch.randn(64, 256)
with torch.no_grad():
    y1 = cand(x); print("first call correct:", torch.allclose(y1, ref(x)))
    y1.mul_(0.0)          # the caller post-processes its own output in place
    y2 = cand(x)          # same input again
    print("second call on the same input correct:", torch.allclose(y2, ref(x)), "max err", (y2 - ref(x)).abs().max().item())
