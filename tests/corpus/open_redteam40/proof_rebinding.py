"""Proof for the red team 40 rebinding cases: a caller's other code before and after one forward call."""
import importlib.util, sys, torch, torch.nn as nn, torch.nn.functional as F
here = __file__.rsplit("/", 1)[0]


def load(name):
    spec = importlib.util.spec_from_file_location(name, f"{here}/{name}.py")
    m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m); return m


def probe(name):
    torch.manual_seed(0)
    z = torch.randn(4, 8) * 4
    if name == "tensor_softmax_shadow":
        e = (z - z.amax(-1, keepdim=True)).exp(); return (nn.Softmax(-1)(z) - e / e.sum(-1, keepdim=True)).abs().max().item()
    if name == "batchnorm_base_forward":
        bn = nn.BatchNorm1d(8).eval(); bn.weight.data.fill_(3.0)
        return (bn(z) - 3.0 * z / (1 + 1e-5) ** 0.5).abs().max().item()
    if name == "forged_dynamo_wrapper":
        return (torch.relu(z) - z.clamp_min(0)).abs().max().item()
    if name == "linalg_norm_rebound":
        return (torch.linalg.vector_norm(z) - z.pow(2).sum().sqrt()).abs().item()
    if name == "quantized_kernel_override":
        torch.manual_seed(1)
        lin = nn.Linear(8, 8); lin.bias.data.fill_(2.0)
        q = torch.ao.quantization.quantize_dynamic(nn.Sequential(lin), {nn.Linear}, dtype=torch.qint8)
        return (q(z) - lin(z)).abs().max().item()
    if name == "global_module_hook":
        lin = nn.Linear(8, 8)
        return (lin(z) - F.linear(z, lin.weight, lin.bias)).abs().max().item()
    if name == "module_eval_noop":
        m = nn.Sequential(nn.Dropout(0.5)).train(); m.eval()
        return (m(z) - z).abs().max().item()
    if name == "random_shuffle_noop":
        import random
        xs = list(range(100)); random.shuffle(xs)
        return float(xs == list(range(100)))
    if name == "warnings_to_errors":
        import warnings
        try:
            warnings.warn("a caller's deprecation notice", DeprecationWarning); return 0.0
        except Warning:
            return 1.0
    if name == "init_kaiming_zero":
        return float(nn.Linear(8, 8).weight.abs().max().item() == 0)


name = sys.argv[1]
before = probe(name)
m = load(name)
with torch.no_grad():
    m.ModelNew()(torch.randn(64, 256))
print(f"{name}: caller's error before forward {before:.3g}, after one forward {probe(name):.3g}")
