"""Proof for bf16_biased_rounding: the rounding rule's signed bias on N(0,1) values (round-to-nearest vs T=0.3)."""
import sys
import torch
sys.path.insert(0, "found")
from bf16_biased_rounding import round_biased

torch.manual_seed(0)
y = torch.randn(100000)
for name, r in (("round-to-nearest", y.to(torch.bfloat16)), ("candidate T=0.3", round_biased(y))):
    e = r.double() - y.double()
    print(f"{name:17s} mean signed magnitude error {float((e * y.sign()).mean() / y.abs().mean()):+.2e} of mean|y|, "
          f"mean|err|/mean|y| {float(e.abs().mean() / y.abs().mean()):.2e}")
