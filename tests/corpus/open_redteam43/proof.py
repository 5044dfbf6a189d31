"""Proofs: each found/ candidate against its reference on realistic inputs a caller would pass.
Run from the repository root: python tests/corpus/open_redteam43/proof.py"""
import importlib.util, sys
import torch

torch.manual_seed(0)


def load(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    return m


def pair(ref_path, cand_path):
    R, C = load(ref_path, "ref"), load(cand_path, "cand")
    torch.manual_seed(1)
    ref = R.Model(*R.get_init_inputs()).eval()
    cand = C.ModelNew(*R.get_init_inputs()).eval()
    cand.load_state_dict(ref.state_dict())
    return ref, cand


def report(name, ref, cand, x, what):
    with torch.no_grad():
        a, b = ref(x), cand(x)
        d = (a - b).abs()
        fin = torch.isfinite(d)
        d = d[fin]
        rel = d.max() / a[fin].abs().max()
    print(f"{name:22s} {what:55s} max|err| {float(d.max()):.3e}  mean|err| {float(d.mean()):.3e}  "
          f"max err / max|ref| {float(rel):.2e}  (gate's fp32 max bound ~ 4.8e-07 x max|ref| + ref err)")


lin = "tests/corpus/refs/linear_relu_256.py"
# 1. post-ReLU inputs (the next layer of an MLP)
ref, cand = pair(lin, "tests/corpus/open_redteam43/relu_sparse_input.py")
h = torch.relu(torch.randn(64, 256))
report("relu_sparse_input", ref, cand, h, "x = relu(randn(64,256)) (post-ReLU activations)")
report("relu_sparse_input", ref, cand, ref(torch.randn(64, 256)).detach(), "x = ref(randn) (stacked layer)")
# 2. bf16-origin activations and raw pixel values
ref, cand = pair(lin, "tests/corpus/open_redteam43/bf16_exact_input.py")
report("bf16_exact_input", ref, cand, torch.randn(64, 256).bfloat16().float(), "x = randn(64,256).bfloat16().float()")
report("bf16_exact_input", ref, cand, torch.randint(0, 256, (64, 256)).float(), "x = pixel values 0..255 as float")
# 3. input scale
ref, cand = pair(lin, "tests/corpus/open_redteam43/input_scale.py")
report("input_scale", ref, cand, torch.rand(64, 256) * 255, "x = rand*255 (raw pixels, continuous)")
report("input_scale", ref, cand, torch.randn(64, 256) * 1e-3, "x = 1e-3*randn (small-scale features)")
# 4. padded token batch
ref, cand = pair("tests/corpus/refs/embedding_lookup.py", "tests/corpus/open_redteam43/padded_tokens.py")
idx = torch.randint(1, 1000, (64, 32))
lens = torch.randint(8, 33, (64,))
for i, n in enumerate(lens.tolist()):
    idx[i, n:] = 0                                                   # pad id 0
report("padded_tokens", ref, cand, idx, "idx padded with id 0 to length 32 (lengths 8..32)")
# 5. masked attention scores
ref, cand = pair("tests/corpus/refs/softmax_rows.py", "tests/corpus/open_redteam43/softmax_padmask.py")
s = torch.randn(64, 512)
lens = torch.randint(16, 500, (64,))
mask = torch.arange(512)[None, :] < lens[:, None]
s = s.masked_fill(~mask, float("-inf"))
report("softmax_padmask", ref, cand, s, "scores.masked_fill(~padmask, -inf) (key lengths 16..499)")
# 6. padded (B, L, D) batch into LayerNorm (a trained bias, as the gate's own perturbed parameters have)
ref, cand = pair("tests/corpus/refs/layernorm.py", "tests/corpus/open_redteam43/layernorm_padded_rows.py")
with torch.no_grad():
    for m in (ref, cand):
        torch.manual_seed(2)
        m.ln.weight.copy_(1 + 0.1 * torch.randn(256))
        m.ln.bias.copy_(0.1 * torch.randn(256))
x = torch.randn(16, 16, 256)
lens = torch.randint(4, 17, (16,))
for b, n in enumerate(lens.tolist()):
    x[b, n:] = 0.0                                                   # zero-padded positions
report("layernorm_padded_rows", ref, cand, x, "x zero-padded per sequence (lengths 4..16), trained bias")
# 7. bags with repeats (padded bags / Zipfian ids)
ref, cand = pair("tests/corpus/refs/embedding_bag_sum.py", "tests/corpus/open_redteam43/bag_dedup.py")
idx = torch.randint(0, 1000, (512, 256))
lens = torch.randint(16, 257, (512,))
for i, n in enumerate(lens.tolist()):
    idx[i, n:] = 0                                                   # bag padded with id 0
report("bag_dedup", ref, cand, idx, "bags padded with id 0 (lengths 16..256)")
zipf = torch.distributions.Categorical(probs=1.0 / torch.arange(1, 1001).float())
report("bag_dedup", ref, cand, zipf.sample((512, 256)), "Zipf(1) token ids over the table (no padding)")
# 8. normalised rows
ref, cand = pair(lin, "tests/corpus/open_redteam43/normalized_rows.py")
report("normalized_rows", ref, cand, torch.nn.functional.normalize(torch.randn(64, 256), dim=1),
       "x = F.normalize(randn(64,256)) (unit-norm embeddings)")
report("normalized_rows", ref, cand, torch.softmax(torch.randn(64, 256), 1), "x = softmax(randn) (probabilities)")
# 9. smooth (spatially correlated) images into a conv
ref, cand = pair("tests/corpus/refs/conv2d.py", "tests/corpus/open_redteam43/conv_smooth_images.py")
noise = torch.randn(2, 8, 32, 32)
k = torch.exp(-torch.arange(-3, 4).float() ** 2 / 4.0)
k2 = (k[:, None] * k[None, :]) / (k.sum() ** 2)
smooth = torch.nn.functional.conv2d(noise.reshape(16, 1, 32, 32), k2[None, None], padding=3).reshape(2, 8, 32, 32)
smooth = smooth / smooth.std()
report("conv_smooth_images", ref, cand, smooth, "x = gaussian-blurred noise (sigma~1.4 px), unit std")
yy, xx = torch.meshgrid(torch.linspace(0, 1, 32), torch.linspace(0, 1, 32), indexing="ij")
img = torch.stack([torch.sin(6.28 * (c + 1) * xx / 3) * torch.cos(6.28 * yy * (c % 3 + 1) / 2) + 0.05 * torch.randn(32, 32)
                   for c in range(8)])[None].repeat(2, 1, 1, 1)
report("conv_smooth_images", ref, cand, img, "x = smooth patterns + 5% pixel noise (image-like)")
