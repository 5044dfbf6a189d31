import torch, importlib.util, sys
def load(p, n):
    s = importlib.util.spec_from_file_location(n, p); m = importlib.util.module_from_spec(s); s.loader.exec_module(m); return m
R = load(sys.argv[1], "r"); C = load(sys.argv[2], "c")
torch.manual_seed(0)
ref = R.Model(); cand = C.ModelNew()
p, t = torch.randn(128, 512), torch.randn(128, 512)
with torch.no_grad():
    print("finite inputs: ref", ref(p, t).item(), "cand", cand(p, t).item())
    p[3, 7] = float("nan"); p[10, 2] = float("inf")
    print("with a NaN and an Inf in pred: ref", ref(p, t).item(), "cand", cand(p, t).item())
