import torch, importlib.util, sys, time
def load(p, n):
    s = importlib.util.spec_from_file_location(n, p); m = importlib.util.module_from_spec(s); s.loader.exec_module(m); return m
R = load(sys.argv[1], "r"); C = load(sys.argv[2], "c")
torch.manual_seed(0)
ref = R.Model(); cand = C.ModelNew()
a = torch.randn(64, 256); b = torch.randn(64, 256)
with torch.no_grad():
    ya = cand(a); print("first output correct right after the call:", torch.allclose(ya, ref(a)))
    time.sleep(0.1)
    yb = cand(b)
    print("second output correct:", torch.allclose(yb, ref(b)))
    print("first output (held by caller) still correct after the 2nd call:", torch.allclose(ya, ref(a)), "max err", (ya - ref(a)).abs().max().item())
