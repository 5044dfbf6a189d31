"""Proof for shared_workspace_not_reentrant: two threads call the same module at once on different inputs;
count results that differ from the reference's on the same inputs."""
import importlib.util, os, threading
import torch
HERE = os.path.dirname(os.path.abspath(__file__))

def load(p, n):
    s = importlib.util.spec_from_file_location(n, p); m = importlib.util.module_from_spec(s); s.loader.exec_module(m); return m

ref = load(os.path.join(HERE, "..", "refs", "linear_relu_256.py"), "ref").Model().eval()
for name, mod in (("reference", ref), ("candidate", load(os.path.join(HERE, "shared_workspace_not_reentrant.py"), "c").ModelNew().eval())):
    if mod is not ref:
        mod.load_state_dict(ref.state_dict())
    bad = [0]
    def worker(seed):
        g = torch.Generator().manual_seed(seed)
        with torch.no_grad():
            for _ in range(300):
                x = torch.randn(64, 256, generator=g)
                if not torch.allclose(mod(x), ref(x), atol=1e-5):
                    bad[0] += 1
    ts = [threading.Thread(target=worker, args=(s,)) for s in (1, 2)]
    [t.start() for t in ts]; [t.join() for t in ts]
    with torch.no_grad():
        x = torch.randn(64, 256)
        seq = torch.allclose(mod(x), ref(x), atol=1e-5)
    print(f"{name}: sequential call right: {seq}; wrong results in 600 concurrent calls: {bad[0]}")
