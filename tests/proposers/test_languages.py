"""optimize --languages: which kernel languages candidates may be written in, checked once, and honoured by the
strategy library and the LLM prompts."""
import dataclasses
import importlib.util
import json

import pytest

from pathlib import Path

from kernelgate.cli import main
from kernelgate.graph import analyse
from kernelgate.proposers import PALLAS_NEEDS_JAX, Context, default_languages, parse_languages
from kernelgate.proposers.library import Library
from kernelgate.proposers.library.library import REWRITE_FNS
from kernelgate.proposers.llm.prompts import system_prompt, target_line
from kernelgate.records import Contract
from kernelgate.workload import Spec, load_reference

CHAIN = """
import torch
import torch.nn as nn
class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = nn.LayerNorm(64)
    def forward(self, x):
        return torch.softmax(self.norm(torch.relu(x) * 2.0 + 1.0), dim=-1)
def get_inputs():
    return [torch.randn(32, 64)]
def get_init_inputs():
    return []
"""


def _context(path: str, target: str) -> Context:
    graph = analyse(load_reference(Spec.parse(path, "Model")).build(), None, REWRITE_FNS)
    return Context(Path(path).read_text(), "Model", target, "test", Contract(), graph, (), {})


def _names(lib: Library, ctx: Context) -> set[str]:
    return {levels[0][0].name for levels in lib.singles(ctx)}


def test_parse_languages_orders_dedups_and_refuses_unknown_names():
    assert parse_languages(None) == () and parse_languages("") == ()
    assert parse_languages("Triton, cuda,triton") == ("triton", "cuda")
    assert parse_languages(["cpp"]) == ("cpp",)
    with pytest.raises(ValueError, match="unknown kernel language 'fortran'.*known: triton, cuda, pallas, cpp"):
        parse_languages("triton,fortran")


def test_pallas_without_jax_names_the_extra(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "jax" else real(name, *a))
    with pytest.raises(ValueError) as e:
        parse_languages("pallas")
    assert str(e.value) == PALLAS_NEEDS_JAX and "kernelgate[pallas]" in str(e.value)


def test_defaults_follow_the_target():
    assert default_languages("cuda") == ("triton", "cuda") and default_languages("cpu") == ("cpp",)
    ctx = Context("", "Model", "cuda", "d", Contract(), None, (), {})
    assert ctx.allows("triton") and ctx.allows("cuda") and not ctx.allows("pallas")
    ctx = dataclasses.replace(ctx, languages=("pallas",))
    assert ctx.allows("pallas") and not ctx.allows("triton")


def test_the_library_leaves_out_strategies_of_languages_not_allowed(write):
    ctx = _context(write("chain.py", CHAIN), "cpu")
    lib = Library()
    everything = _names(lib, ctx)
    assert {"cpp:softmax", "cpp:layernorm"} <= everything
    only_torch = _names(lib, dataclasses.replace(ctx, languages=("triton",)))
    assert not any(n.startswith("cpp:") for n in only_torch)
    assert everything - only_torch == {n for n in everything if n.startswith("cpp:")}   # the rest stays


def test_prompts_name_the_allowed_languages_and_rule_out_the_others():
    ctx = Context("x = 1", "Model", "cuda", "d", Contract(), None, (), {})
    line = target_line(ctx)
    assert "Triton" in line and "CUDA C++" in line and "Not in Pallas." in line
    line = target_line(dataclasses.replace(ctx, languages=("pallas",)))
    assert "pl.pallas_call" in line and "from_dlpack" in line and "PREALLOCATE" in line
    assert "Not in Triton, CUDA C++." in line
    assert target_line(dataclasses.replace(ctx, languages=("pallas",))) in system_prompt(
        dataclasses.replace(ctx, languages=("pallas",)))
    cpu = target_line(Context("", "Model", "cpu", "d", Contract(), None, (), {}))
    assert cpu.startswith("CPU.") and "load_inline" in cpu and "Not in Triton, CUDA C++, Pallas." in cpu


def test_cli_languages_is_checked_before_any_work(write, capsys, tmp_path):
    ref = write("chain.py", CHAIN)
    rc = main(["optimize", ref, "--languages", "triton,fortran", "--out", str(tmp_path / "o"), "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert rc == 2 and doc["reason"] == "usage" and "fortran" in doc["message"]
    assert not (tmp_path / "o").exists()
