"""The population optimize runs (names or Proposer objects, the LLM configured or not, hints), candidates'
typed stacks (produced by the library, kept through the store's JSON, read by restore), and the search's
layering (it knows proposers only through the protocol)."""
from __future__ import annotations

import random
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from kernelgate import api
from kernelgate.errors import KernelgateError
from kernelgate.graph import analyse
from kernelgate.proposers import EXPLORE, REFINE, RESTART, Context, Proposer
from kernelgate.proposers.library import Library
from kernelgate.proposers.library.library import REWRITE_FNS, STRATEGIES
from kernelgate.records import Candidate, Contract, Evaluation, Level, Reason, Speedup, Status, Timing, Verdict
from kernelgate.workload import Spec, load_reference
from search_fakes import FakeProposer

ROOT = Path(__file__).resolve().parents[2]


def _ctx(target="cpu", **kw) -> Context:
    path = ROOT / "examples" / "projection.py"
    model = load_reference(Spec.parse(str(path), "Model")).build()
    ctx = Context(path.read_text(), "Model", target, "test", Contract(), analyse(model, None, REWRITE_FNS), (), {})
    return replace(ctx, **kw)


# ------------------------------------------------------------------ the population

def test_builtin_alone_says_no_llm_is_configured():
    pop, agent, notes = api.make_proposers(("builtin",), None, ())
    assert [type(p).__name__ for p in pop] == ["Library"] and agent is None
    assert notes == [api.NO_LLM]
    _, _, notes = api.make_proposers(("builtin",), {"llm": None, "endpoint": None}, ())   # flags left unset
    assert notes == [api.NO_LLM]


@pytest.mark.parametrize("llm", [None, {}, {"llm": None, "model": None}])
def test_llm_asked_without_a_model_is_a_usage_error_naming_the_flag(llm):
    with pytest.raises(KernelgateError, match="--llm") as e:
        api.make_proposers(("builtin", "llm"), llm, ())
    assert e.value.reason is Reason.USAGE


def test_unknown_or_no_proposer_is_a_usage_error():
    for bad in (("builtin", "oracle"), (), (object(),)):
        with pytest.raises(KernelgateError, match="known: builtin, llm") as e:
            api.make_proposers(bad, None, ())
        assert e.value.reason is Reason.USAGE


def test_optimize_refuses_llm_without_a_model_before_any_work(tmp_path, write):
    ref = write("p.py", (ROOT / "examples" / "projection.py").read_text())
    with pytest.raises(KernelgateError, match="--proposer llm needs a model: set --llm") as e:
        api.optimize(ref, out=str(tmp_path / "o"), proposers=("llm",))
    assert e.value.reason is Reason.USAGE and not (tmp_path / "o").exists()


def test_an_llm_proposer_with_hints(tmp_path):
    agent_py = tmp_path / "agent.py"
    agent_py.write_text("import sys\nsys.stdin.read()\nprint('nothing')\n")
    llm = {"cmd": f"{sys.executable} {agent_py}", "agents": ("explorer",)}
    pop, agent, notes = api.make_proposers(("builtin", "llm"), llm, ["  fuse the bias  ", ""])
    assert [p.name for p in pop] == ["library", "llm"] and pop[1] is agent
    assert agent.hints == ["fuse the bias"] and notes == []
    pop, agent, notes = api.make_proposers(("builtin",), llm, ["fuse the bias"])      # configured, not asked
    assert agent is None and [p.name for p in pop] == ["library"]
    assert any("not used" in n for n in notes) and any("only the LLM proposer reads hints" in n for n in notes)


def test_proposer_objects_join_the_population():
    fake = FakeProposer("mine", {})
    assert isinstance(fake, Proposer) and isinstance(Library(), Proposer)
    pop, agent, notes = api.make_proposers(("builtin", fake), None, ())
    assert pop[1] is fake and agent is None and notes == []


# ------------------------------------------------------------------ typed stacks

def test_the_library_gives_each_candidate_its_stack():
    ctx = _ctx()
    by = {s.name: s for s in STRATEGIES}
    c = Library()._make(ctx, [(by["rewrite:merge-linear"], {}), (by["runtime:compile"], {"mode": "max-autotune"})],
                        None, 3)
    assert c.stack == (Level("rewrite:merge-linear"), Level("runtime:compile", (("mode", "max-autotune"),)))
    assert c.strategy == "rewrite:merge-linear + runtime:compile(mode=max-autotune)"     # the display, kept
    again = Candidate.from_json(c.to_json())
    assert again == c and again.stack == c.stack
    assert c.to_json()["stack"] == [{"name": "rewrite:merge-linear", "params": {}},
                                    {"name": "runtime:compile", "params": {"mode": "max-autotune"}}]


def test_parameter_order_survives_the_json():
    lv = Level("triton:gemm", (("block_n", 64), ("block_m", 128)))
    assert Level.from_json(lv.to_json()) == lv and lv.label() == "triton:gemm(block_n=64, block_m=128)"


def test_rows_stored_before_stacks_load_and_are_not_restored():
    ctx = _ctx()
    by = {s.name: s for s in STRATEGIES}
    made = Library()._make(ctx, [(by["rewrite:merge-linear"], {})], None, 0)
    old = {k: v for k, v in made.to_json().items() if k not in ("stack", "usage")}      # an older store's row
    loaded = Candidate.from_json(old)
    assert loaded.stack == () and loaded.id == made.id and loaded.strategy == made.strategy
    lib = Library()
    assert lib.restore(ctx, [loaded]) == 0 and not lib.stacks                 # no display string parsed back
    assert lib.restore(ctx, [Candidate.from_json(made.to_json())]) == 1 and made.id in lib.stacks
    # a label that lies about the stack does not matter: the stack is what is read
    liar = Candidate.from_json({**made.to_json(), "strategy": "runtime:compile(mode=default)"})
    assert Library().restore(ctx, [liar]) == 1


def test_the_library_reads_generation_and_mode_from_the_context():
    ctx = _ctx(generation=5, mode=EXPLORE)
    lib = Library()
    first = lib.propose(ctx, random.Random(0), 1)
    assert first and first[0].generation == 5 and first[0].parent is None
    assert lib.propose(_ctx(mode=RESTART), random.Random(0), 1)[0].parent is None   # restart: from the reference
    ok = Verdict(Status.ACCEPTED, Reason.OK, "ok")
    t = Timing("c", (1.0,), 1.1, 1.0, 0.0)
    hist = (Evaluation(first[0], ok, t, t, Speedup(1.5, 1.4, 1.6, 1.02, True)),)
    refined = lib.propose(_ctx(history=hist, generation=6, mode=REFINE), random.Random(0), 2)
    assert refined and all(c.parent == first[0].id and c.generation == 6 for c in refined)
    assert first[0].stack == (Level("rewrite:merge-linear"),)
    assert all(len(c.stack) == 2 and first[0].stack[0] in c.stack for c in refined)    # one more level


# ------------------------------------------------------------------ layering

@pytest.mark.slow
def test_the_search_knows_proposers_only_through_the_protocol():
    sys.path.insert(0, str(ROOT / "tests"))
    from test_layers import import_graph, reachable
    g = import_graph()
    mods = [m for m in g if m == "kernelgate.search" or m.startswith("kernelgate.search.")]
    assert {"kernelgate.search.policy", "kernelgate.search.evaluator", "kernelgate.search.loop"} <= set(mods)
    reached = {m: sorted(t for t in reachable(g, m) if t.startswith(("kernelgate.proposers.", "kernelgate.api",
                                                                     "kernelgate.cli")))
               for m in mods}
    assert not any(reached.values()), reached
    assert "kernelgate.proposers" in g["kernelgate.search.loop"]


def test_the_context_carries_the_baselines_bound_measured_or_expected():
    """Before the baselines are profiled, a GPU task whose call sites' launches outweigh its roofline floor is
    expected launch-bound; once profiled, the profile's bound is the one proposers see; the CPU expects nothing."""
    from types import SimpleNamespace

    from kernelgate.graph import GraphInfo
    from kernelgate.profiling.roofline import Floor
    from kernelgate.search import Search
    graph = GraphInfo(True, modules=("Conv2d", "BatchNorm2d", "ReLU") * 100)
    task = SimpleNamespace(device="cuda:0", floor=Floor(3e-4, 3e-5, 3e-4, "compute", ""))
    fake = SimpleNamespace(base_insight=None, graph=graph, machine={"launch_overhead_s": 4e-6}, task=task)
    assert Search._bound(fake) == "launch"
    fake.base_insight = {"bound": "compute"}
    assert Search._bound(fake) == "compute"
    fake.base_insight, task.device = None, "cpu"
    assert Search._bound(fake) == ""
