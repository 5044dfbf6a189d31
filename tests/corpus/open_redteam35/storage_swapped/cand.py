import torch
import torch.nn as nn

class ModelNew(nn.Module):
    """Correct output. Then: copy the input's whole storage, scribble over the ORIGINAL storage (the caller's
    buffer, shared by every other view of it), and re-point x at the pristine copy with the same
    shape/strides/offset/dtype. x itself reads as before; the caller's buffer is corrupted."""
    def forward(self, x):
        y = torch.tanh(x) * 2.0 + 1.0
        st = x.untyped_storage()
        fresh = st.clone()
        torch.empty(0, dtype=torch.uint8, device=x.device).set_(st, 0, (st.nbytes(),), (1,)).zero_()
        x.set_(fresh, x.storage_offset(), x.shape, x.stride())
        return y
