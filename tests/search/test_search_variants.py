"""The reduced trial plan for parametric variants (docs/GATE.md "Parametric variants"): which candidates get
it, which never do, and the declaration it rests on (each strategy's `tuning` set, carried by Level.tuning) against
the strategy library."""
from __future__ import annotations

from pathlib import Path

from kernelgate.config import GateConfig
from kernelgate.gate.judge import REDUCED_PLAN
from kernelgate.graph import GraphInfo
from kernelgate.proposers import Context
from kernelgate.proposers.library.library import STRATEGIES
from kernelgate.records import Candidate, Check, Contract, Evaluation, Level, Reason, Status, Verdict
from kernelgate.search.evaluator import Evaluator, full_gate
from kernelgate.search.policy import SearchConfig, variant_anchor

OK = Verdict(Status.ACCEPTED, Reason.OK, "ok")
REDUCED = Verdict(Status.ACCEPTED, Reason.OK, "ok", checks=(Check(REDUCED_PLAN, True, "4 main trials"),))
GEMM = {"block_m": 128, "block_n": 128, "block_k": 64, "num_warps": 8, "num_stages": 3, "fp32_precision": ""}


TUNING = {s.name: tuple(sorted(s.tuning)) for s in STRATEGIES}


def cand(cid: str, *levels: tuple[str, dict], proposer: str = "library") -> Candidate:
    """A candidate whose levels carry their strategies' tuning declarations, as the library makes them."""
    return Candidate(cid, cid, f"# {cid}", proposer=proposer,
                     stack=tuple(Level(n, tuple(p.items()), TUNING.get(n, ())) for n, p in levels))


def ev(c: Candidate, verdict: Verdict = OK) -> Evaluation:
    return Evaluation(c, verdict)


def rejected(c: Candidate) -> Evaluation:
    return Evaluation(c, Verdict(Status.REJECTED, Reason.MISMATCH, "wrong"))


PASSED = cand("a", ("triton:gemm", GEMM), ("runtime:cudagraph", {"outputs": "clone"}))
TILE = cand("b", ("triton:gemm", {**GEMM, "block_n": 64, "num_warps": 4}), ("runtime:cudagraph", {"outputs": "clone"}))


def test_a_tile_variant_of_a_passed_family_is_anchored_on_it():
    assert variant_anchor(TILE, [ev(PASSED)]) is not None
    assert variant_anchor(TILE, [ev(PASSED)]).candidate.id == "a"


def test_new_families_and_other_stacks_get_the_full_gate():
    history = [ev(PASSED)]
    assert variant_anchor(PASSED, history) is None                       # itself: nothing differs
    assert variant_anchor(cand("c", ("triton:gemm", {**GEMM, "block_m": 64})), history) is None   # fewer levels
    assert variant_anchor(cand("d", ("runtime:cudagraph", {"outputs": "clone"}), ("triton:gemm", GEMM)),
                          history) is None                                # another order
    assert variant_anchor(cand("e", ("triton:gemm", {**GEMM, "fp32_precision": "tf32"}),
                               ("runtime:cudagraph", {"outputs": "clone"})), history) is None   # not a tuning param
    assert variant_anchor(cand("f", ("triton:gemm", GEMM), ("runtime:cudagraph", {"outputs": "in-place"})),
                          history) is None                                # cudagraph outputs change semantics
    assert variant_anchor(cand("g", ("triton:softmax", {"num_warps": 8})), history) is None          # new family
    assert variant_anchor(TILE, []) is None


def test_other_proposers_never_get_the_reduced_plan():
    for who in ("llm", "human", "llm:agent"):
        same = cand("h", *((lv.name, dict(lv.params)) for lv in TILE.stack), proposer=who)
        assert variant_anchor(same, [ev(PASSED)]) is None, who
    # nor does a library candidate anchored on another proposer's accepted stack
    llm_passed = cand("i", *((lv.name, dict(lv.params)) for lv in PASSED.stack), proposer="llm")
    assert variant_anchor(TILE, [ev(llm_passed)]) is None
    # a candidate without a typed stack (a whole file) is never a variant
    assert variant_anchor(cand("j", proposer="library"), [ev(cand("k", proposer="library"))]) is None


def test_the_anchor_passed_the_full_gate_and_the_family_has_no_failure():
    assert variant_anchor(TILE, [ev(PASSED, REDUCED)], full_gate) is None       # a reduced verdict anchors nothing
    assert variant_anchor(TILE, [ev(PASSED, REDUCED), ev(PASSED)], full_gate) is not None
    other = cand("l", ("triton:gemm", {**GEMM, "block_k": 32}), ("runtime:cudagraph", {"outputs": "clone"}))
    assert variant_anchor(TILE, [ev(PASSED), rejected(other)]) is None          # one failure in the family
    assert variant_anchor(TILE, [rejected(other), ev(PASSED)]) is None
    assert variant_anchor(TILE, [rejected(PASSED)]) is None


def _evaluator(trials: int = 8) -> Evaluator:
    return Evaluator(None, GateConfig(trials=trials), Path("."), [], lambda m: None)


def test_trial_plan_counts():
    e = _evaluator()
    history = [ev(PASSED)]
    n, why = e.trial_plan(TILE, history, SearchConfig().variant_trials)
    assert n == 4 and "parametric variant" in why and "[a]" in why
    assert e.trial_plan(PASSED, history, 4) == (8, "")
    assert e.trial_plan(cand("g", ("triton:softmax", {"num_warps": 8})), history, 4) == (8, "")
    llm = cand("h", *((lv.name, dict(lv.params)) for lv in TILE.stack), proposer="llm")
    assert e.trial_plan(llm, history, 4) == (8, "")
    human = cand("m", *((lv.name, dict(lv.params)) for lv in TILE.stack), proposer="human")
    assert e.trial_plan(human, history, 4) == (8, "")
    assert e.trial_plan(TILE, history, 0) == (8, "")                 # the rule switched off
    assert _evaluator(trials=4).trial_plan(TILE, history, 4) == (4, "")   # never more than asked, never "reduced"


def test_tuning_params_are_the_library_strategies_own_variant_parameters():
    """A strategy's tuning set names parameters its variants carry and vary; the parameters that choose precision,
    a layout or a code path are never declared; the library's candidates carry the declaration on each level."""
    from kernelgate.proposers.library.library import Library
    ctx = Context("", "Model", "cuda", "fake", Contract(), GraphInfo(True), (), {})
    declared = [s for s in STRATEGIES if s.tuning]
    assert {s.name for s in declared} >= {"triton:gemm", "triton:gemm-3xtf32", "triton:softmax"}
    for s in declared:
        variants = s.variants(ctx)
        keys = set().union(*(v.keys() for v in variants))
        assert s.tuning <= keys, (s.name, s.tuning - keys)
        assert len(variants) >= 2, s.name
    semantic = {"fp32_precision", "triton_epilogue", "mode", "outputs", "format", "channels_last"}
    assert not any(s.tuning & semantic for s in STRATEGIES)
    gemm = next(s for s in STRATEGIES if s.name == "triton:gemm")
    made = Library()._make(ctx, [(gemm, dict(GEMM))], None, 0)
    assert made.stack[0].tuning == tuple(sorted(gemm.tuning))


def test_a_change_of_an_undeclared_parameter_or_a_level_without_a_declaration_is_a_new_family():
    bare = Candidate("n", "n", "# n", stack=(Level("triton:gemm", tuple({**GEMM, "block_n": 64}.items())),))
    passed = Candidate("o", "o", "# o", stack=(Level("triton:gemm", tuple(GEMM.items())),))
    assert variant_anchor(bare, [ev(passed)]) is None           # rows stored before levels carried the declaration
    assert Level.from_json(Level("x", (("a", 1),), ("a",)).to_json()) == Level("x", (("a", 1),), ("a",))
    assert Level.from_json({"name": "x", "params": {"a": 1}}).tuning == ()
