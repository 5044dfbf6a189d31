import sys, importlib.util, torch
def load(p, n):
    s = importlib.util.spec_from_file_location(n, p); m = importlib.util.module_from_spec(s); s.loader.exec_module(m); return m
R, C = load(sys.argv[1], "ref"), load(sys.argv[2], "cand")
torch.manual_seed(0)
ref = R.Model(*R.get_init_inputs()); cand = C.ModelNew(*R.get_init_inputs())
x = R.get_inputs()[0]
with torch.no_grad():
    a, b = ref(x), cand(x)
    zeroed = (b == 0) & (a > 0)
    print("probabilities flushed to 0:", int(zeroed.sum()), "of", a.numel(), "; largest flushed:", a[zeroed].max().item())
    print("relative error at those entries: 100%")
    r, c = zeroed.nonzero()[0].tolist()
    print(f"row {r} class {c}: ref p = {a[r, c].item():.3e} (log p = {a[r, c].log().item():.2f}), cand p = {b[r, c].item()} (log p = {b[r, c].log().item()})")
    t = torch.full((1,), c)
    print("NLL of that target  ref:", torch.nn.functional.nll_loss(a[r:r+1].log(), t).item(),
          " cand:", torch.nn.functional.nll_loss(b[r:r+1].log(), t).item())
    print("WRONG" if zeroed.any() else "ok")
