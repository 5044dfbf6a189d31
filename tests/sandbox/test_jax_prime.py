"""JAX in a candidate's worker: started by the harness before the candidate's import when the file imports it
(sandbox/jobs.prime_jax), so JAX's own threads are the harness's; a thread the candidate starts is still refused."""
import pytest

from kernelgate import api
from kernelgate.gate.session import uses_jax

REF = """
import torch
import torch.nn as nn
class Model(nn.Module):
    def forward(self, x):
        return torch.tanh(x) * 2.0
def get_inputs():
    return [torch.randn(64, 64)]
def get_init_inputs():
    return []
"""

JAX_HONEST = """
import torch
import torch.nn as nn
import jax
import jax.numpy as jnp
class ModelNew(nn.Module):
    def forward(self, x):
        y = jax.jit(lambda v: jnp.tanh(v) * 2.0)(jax.dlpack.from_dlpack(x.contiguous()))
        return torch.from_dlpack(y).clone()
"""

JAX_THREAD = JAX_HONEST.replace("class ModelNew", """import threading
_kg_stop = threading.Event()
threading.Thread(target=_kg_stop.wait, daemon=True).start()
class ModelNew""")


def test_uses_jax_reads_imports_only(tmp_path):
    for text, want in (("import jax\n", True), ("    from jax.experimental import pallas as pl\n", True),
                       ("import jaxtyping\n", False), ("# no jax here: jaxlib\nx = 'jax'\n", False)):
        p = tmp_path / "f.py"
        p.write_text(text)
        assert uses_jax(str(p)) is want, text
    assert uses_jax(str(tmp_path / "missing.py")) is False


@pytest.mark.slow
def test_a_jax_candidate_is_judged_and_its_own_thread_still_refused(write, tmp_path):
    pytest.importorskip("jax")
    ref = write("ref.py", REF)
    v = api.verify(ref, write("honest.py", JAX_HONEST), store=str(tmp_path / "s.sqlite"))
    assert v.accepted, v.message
    v = api.verify(ref, write("thread.py", JAX_THREAD), store=str(tmp_path / "s.sqlite"))
    assert not v.accepted and v.reason.value == "threads", v.message
