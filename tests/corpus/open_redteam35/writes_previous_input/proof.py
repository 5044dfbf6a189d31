import torch, importlib.util, sys
def load(p, n):
    s = importlib.util.spec_from_file_location(n, p); m = importlib.util.module_from_spec(s); s.loader.exec_module(m); return m
R = load(sys.argv[1], "r"); C = load(sys.argv[2], "c")
torch.manual_seed(0)
ref = R.Model(); cand = C.ModelNew()
a = torch.randn(64, 256); b = torch.randn(64, 256); a0 = a.clone()
with torch.no_grad():
    ya = cand(a); yb = cand(b)
print("outputs correct:", torch.allclose(ya, ref(a0)), torch.allclose(yb, ref(b)))
print("caller's first input unchanged after the second call:", torch.equal(a, a0), "max diff", (a - a0).abs().max().item())
