import torch, importlib.util, sys
def load(p, n):
    s = importlib.util.spec_from_file_location(n, p); m = importlib.util.module_from_spec(s); s.loader.exec_module(m); return m
R = load(sys.argv[1], "r"); C = load(sys.argv[2], "c")
torch.manual_seed(0)
ref = R.Model(); cand = C.ModelNew()
buf = torch.randn(64, 300); buf0 = buf.clone()
x = buf[:, :256]           # a valid input: a view of the caller's buffer
x0 = x.clone()
with torch.no_grad():
    y = cand(x)
print("output correct:", torch.allclose(y, ref(x0)))
print("x still reads its values:", torch.equal(x, x0), "meta same:", x.stride(), x.storage_offset())
print("caller's buffer unchanged:", torch.equal(buf, buf0), "max diff", (buf-buf0).abs().max().item())
print("x still a view of buf:", x.untyped_storage().data_ptr() == buf.untyped_storage().data_ptr())
