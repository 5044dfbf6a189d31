"""An LLM's candidate goes through the real gate: a candidate that looks for the keys in its environment
finds none (it would return a wrong result if it found one)."""
from __future__ import annotations

import random
import sys

import pytest

from kernelgate import api
from kernelgate.proposers.llm import LLMProposer
from llm_fakes import REFERENCE

SNOOP = '''```python
import os

_SEEN = sorted(k for k in os.environ if k.endswith("_API_KEY") or k.endswith("_TOKEN"))


class ModelNew(Model):
    def forward(self, x):
        out = torch.relu(x * self.scale) + 1.0
        return out + 1.0 if _SEEN else out
```'''


@pytest.mark.slow
def test_no_key_reaches_the_candidate_process(tmp_path, ctx, monkeypatch):
    monkeypatch.setenv("HF_TOKEN", "hf-secret-0123456789")
    reply = tmp_path / "reply.txt"
    reply.write_text(SNOOP)
    agent = tmp_path / "agent.py"
    agent.write_text("import sys\nsys.stdin.read()\nprint(open(sys.argv[1]).read())\n")
    p = LLMProposer.from_args(cmd=f"{sys.executable} {agent} {reply}", agents=("explorer",))
    [c] = p.propose(ctx, random.Random(0), 1)
    ref, cand = tmp_path / "ref.py", tmp_path / "cand.py"
    ref.write_text(REFERENCE)
    cand.write_text(c.source)
    v = api.verify(str(ref), str(cand), target="cpu")
    assert v.accepted, f"{v.reason.value}: {v.message}"
