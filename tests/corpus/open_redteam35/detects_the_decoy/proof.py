import torch, importlib.util, sys
def load(p, n):
    s = importlib.util.spec_from_file_location(n, p); m = importlib.util.module_from_spec(s); s.loader.exec_module(m); return m
R = load(sys.argv[1], "r"); C = load(sys.argv[2], "c")
torch.manual_seed(0)
ref = R.Model(); cand = C.ModelNew()
with torch.no_grad():
    for name, x in [("contiguous", torch.randn(64, 256)), ("column slice buf[:, :256]", torch.randn(64, 300)[:, :256]),
                    ("row slice buf[1:65]", torch.randn(70, 256)[1:65]), ("transposed slice", torch.randn(300, 64)[:256].t())]:
        d = (cand(x) - ref(x)).abs().max().item()
        print(f"{name:28s} max |cand - ref| = {d:.3g}")
