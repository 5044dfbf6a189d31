import torch, importlib.util, sys
def load(p, n):
    s = importlib.util.spec_from_file_location(n, p); m = importlib.util.module_from_spec(s); s.loader.exec_module(m); return m
R = load(sys.argv[1], "r"); C = load(sys.argv[2], "c")
torch.manual_seed(0)
ref = R.Model(); cand = C.ModelNew()
buf = torch.randn(64, 300); x = buf[:, :256]; x0 = x.clone()
with torch.no_grad():
    y = cand(x)
print("output correct:", torch.allclose(y, ref(x0)))
print("caller's x unchanged:", torch.equal(x, x0), "| x == -x0:", torch.equal(x, -x0), "| x.sum()", x.sum().item(), "vs", x0.sum().item())
