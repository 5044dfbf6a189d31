"""The loop with fake proposers and a fake evaluator: each proposer's share, interleaved; the generation and
mode in the context; a proposer's other mode when it has nothing in the asked one; restarts; the budget."""
from __future__ import annotations

import random

import pytest

from kernelgate.search.loop import Loop, interleave
from kernelgate.search.policy import EXPLORE, REFINE, RESTART, Budget, OutOfBudget, Planner, SearchConfig
from search_fakes import FakeClock, FakeEvaluator, FakeProposer, context_of


def make_loop(proposers, table=None, budget=Budget(10_000, 64), cfg=SearchConfig(), history=None, clock=None):
    clock = clock or FakeClock()
    history = [] if history is None else history
    planner = Planner(budget, clock)
    evaluate = FakeEvaluator(clock, table or {})
    said, recorded = [], []
    loop = Loop(proposers, evaluate, planner, cfg, context_of(history), history, random.Random(0), said.append,
                recorded.append)
    return loop, evaluate, history, said, recorded


def test_every_proposer_gets_its_share_interleaved_through_one_evaluator():
    lib = FakeProposer("library", {EXPLORE: ["l0", "l1", "l2"]}, modes=(EXPLORE, REFINE))
    llm = FakeProposer("llm", {EXPLORE: ["m0"], REFINE: ["m0"], RESTART: ["m0"]})
    loop, ev, history, said, recorded = make_loop([lib, llm], budget=Budget(10_000, 3),
                                                  cfg=SearchConfig(per_generation=2))
    with pytest.raises(OutOfBudget):                       # the candidate limit
        loop.run()
    assert [c.id for c in ev.seen] == ["l0", "m0", "l1"]    # the LLM's candidate between the library's
    assert lib.asked == [(0, EXPLORE, 2)] and llm.asked == [(0, EXPLORE, 2)]
    assert [e.candidate.id for e in history] == [e.candidate.id for e in recorded] == ["l0", "m0", "l1"]
    assert all(e.candidate.generation == 0 for e in history)
    assert said[0].startswith("[1] ") and len([s for s in said if s.startswith("[")]) == 3   # progress lines


def test_shares_are_per_proposer():
    lib = FakeProposer("library", {EXPLORE: ["l0", "l1", "l2"]}, modes=(EXPLORE, REFINE))
    llm = FakeProposer("llm", {EXPLORE: ["m0", "m1"]})
    loop, ev, *_ = make_loop([lib, llm], budget=Budget(10_000, 4), cfg=SearchConfig(shares=(("llm", 1),)))
    with pytest.raises(OutOfBudget):
        loop.run()
    assert lib.asked[0] == (0, EXPLORE, 2) and llm.asked[0] == (0, EXPLORE, 1)
    assert [c.id for c in ev.seen] == ["l0", "m0", "l1", "l2"]


def test_modes_follow_the_policy_and_a_proposer_falls_back_to_its_other_mode():
    """Generation 0 explores; generation 1 refines on a promising candidate; a proposer with nothing to refine
    is asked to explore in the same generation; one without modes is asked once."""
    lib = FakeProposer("library", {EXPLORE: ["a", "b", "c", "d"], REFINE: ["a+x"]}, modes=(EXPLORE, REFINE))
    other = FakeProposer("other", {})
    loop, ev, *_ = make_loop([lib, other], table={"a": (1.5, True, 1.0), "b": (0.5, True, 1.0)},
                             cfg=SearchConfig(per_generation=2, patience=5))
    loop.run()                                             # runs out of candidates
    assert lib.asked[:2] == [(0, EXPLORE, 2), (1, REFINE, 2)]
    assert [c.id for c in ev.seen] == ["a", "b", "a+x", "c", "d"]
    assert lib.asked[2:5] == [(2, EXPLORE, 2), (3, REFINE, 2), (3, EXPLORE, 2)]   # nothing to refine: explore
    # no modes: asked once a generation; it may have something later, so three empty generations end the search
    assert [(g, m) for g, m, _ in other.asked] == [(0, EXPLORE), (1, REFINE), (2, EXPLORE), (3, REFINE),
                                                   (4, EXPLORE), (5, REFINE)]


def test_no_improvement_for_patience_generations_restarts():
    lib = FakeProposer("library", {EXPLORE: [f"e{i}" for i in range(8)], RESTART: [f"r{i}" for i in range(8)],
                                   REFINE: [f"f{i}" for i in range(8)]}, modes=(EXPLORE, REFINE, RESTART))
    table = {"e0": (2.0, True, 1.0)}                       # the one improvement, in generation 0
    loop, ev, history, said, _ = make_loop([lib], table=table, budget=Budget(10_000, 8),
                                           cfg=SearchConfig(per_generation=1, patience=2))
    with pytest.raises(OutOfBudget):
        loop.run()
    modes = [m for _, m, _ in lib.asked]
    assert modes[:5] == [EXPLORE, REFINE, EXPLORE, RESTART, RESTART]
    assert any("no improvement for 2 generations; restarting from the reference" in s for s in said)


def test_the_loop_resumes_after_the_last_generation():
    from search_fakes import timed
    from dataclasses import replace
    old = timed("x", 1.0, claimed=False)
    history = [replace(old, candidate=replace(old.candidate, generation=3))]
    lib = FakeProposer("library", {EXPLORE: ["a"], REFINE: ["a"]}, modes=(EXPLORE, REFINE))
    loop, *_ = make_loop([lib], history=history)
    loop.run()
    assert lib.asked[0][0] == 4


def test_a_candidate_whose_kind_would_overrun_is_skipped():
    """Candidates of a kind that took long here are skipped when that long no longer fits; the budget then ends
    the run when nothing in a generation could be tried."""
    clock = FakeClock()
    lib = FakeProposer("library", {EXPLORE: ["slow-1", "fast-1", "fast-2", "slow-2", "fast-3"]}, modes=(EXPLORE,))
    table = {"slow-1": (1.0, True, 60.0), **{f"fast-{i}": (1.0, True, 10.0) for i in (1, 2, 3)}}
    loop, ev, history, said, _ = make_loop([lib], table=table, budget=Budget(140, 64), clock=clock,
                                           cfg=SearchConfig(per_generation=2))
    with pytest.raises(OutOfBudget):                       # generation 3: slow-2 alone, and it does not fit
        loop.run()
    assert [c.id for c in ev.seen] == ["slow-1", "fast-1", "fast-2", "fast-3"]
    assert any(s.startswith("skipped library:slow-2: candidates of its kind took 60 s here, 53 s left") for s in said)


def test_a_proposer_whose_proposals_take_longer_than_what_is_left_is_not_asked():
    clock = FakeClock()
    llm = FakeProposer("llm", {EXPLORE: [f"m{i}" for i in range(9)], REFINE: [f"n{i}" for i in range(9)]},
                       cost_s=50.0, clock=clock)
    lib = FakeProposer("library", {EXPLORE: [f"l{i}" for i in range(90)], REFINE: []}, modes=(EXPLORE, REFINE))
    loop, ev, history, said, _ = make_loop([llm, lib], clock=clock, budget=Budget(100, 64),
                                           cfg=SearchConfig(per_generation=1))
    with pytest.raises(OutOfBudget):
        loop.run()
    assert len(llm.asked) == 1 and len(lib.asked) > 1      # 50 s + 1 s no longer fit after the first generation
    assert sum(s.startswith("proposer llm not asked: its last proposal took 50 s") for s in said) == 1
    assert not any(c.proposer == "llm" for c in ev.seen[2:])


def test_without_proposals_the_loop_ends():
    loop, ev, history, said, _ = make_loop([FakeProposer("library", {}, modes=(EXPLORE, REFINE))])
    loop.run()
    assert said == ["no more candidates to try"] and not history


def test_a_proposer_repeating_a_tried_candidate_is_not_evaluated_twice():
    stubborn = FakeProposer("llm", {})
    stubborn.propose = lambda ctx, rng, n: [__import__("kernelgate.records", fromlist=["Candidate"]).Candidate(
        "same", "llm:x", "#", generation=ctx.generation, proposer="llm")]
    loop, ev, *_ = make_loop([stubborn])
    loop.run()
    assert [c.id for c in ev.seen] == ["same"]


def test_interleave():
    from kernelgate.records import Candidate
    a, b, c, d = (Candidate(i, i, "") for i in "abcd")
    assert interleave([[a, b, c], [d]]) == [a, d, b, c]
    assert interleave([[a], [a, b]]) == [a, b] and interleave([]) == []


def test_a_proposer_that_raises_is_left_out_and_the_others_go_on():
    broken = FakeProposer("llm", {})

    def boom(ctx, rng, n):
        raise ConnectionError("the SDK fell over")
    broken.propose = boom
    lib = FakeProposer("library", {EXPLORE: ["a", "b"]}, modes=(EXPLORE, REFINE))
    clock = FakeClock()
    planner = Planner(Budget(10_000), clock)
    history, said, notes = [], [], []
    loop = Loop([broken, lib], FakeEvaluator(clock, {}), planner, SearchConfig(), context_of(history), history,
                random.Random(0), said.append, note=notes.append)
    loop.run()
    assert [e.candidate.id for e in history] == ["a", "b"] and [p.name for p in loop.proposers] == ["library"]
    assert notes == ["proposer llm failed (ConnectionError: the SDK fell over): not asked again in this run"]


def test_a_model_with_nothing_this_time_is_asked_again():
    """A proposer without modes (a model) may reply with no code once; an empty generation ends the search only
    after `empty_generations` in a row, or at once when every proposer lists modes or has stopped."""
    replies = [[], [], ["m0"]]
    model = FakeProposer("llm", {})
    model.propose = lambda ctx, rng, n: [__import__("kernelgate.records", fromlist=["Candidate"]).Candidate(
        i, f"llm:{i}", "#", generation=ctx.generation, proposer="llm") for i in (replies.pop(0) if replies else [])]
    loop, ev, history, said, _ = make_loop([model], cfg=SearchConfig(empty_generations=3))
    loop.run()
    assert [(c.id, c.generation) for c in ev.seen] == [("m0", 2)]
    assert said[-1] == "no more candidates to try" and not replies
    replies[:] = [[], [], [], ["late"]]
    loop, ev, *_ = make_loop([model], cfg=SearchConfig(empty_generations=3))
    loop.run()
    assert ev.seen == [] and replies == [["late"]]                # three empty generations: the end
    model.stopped = "budget spent"
    replies[:] = [[], ["never"]]
    loop, ev, *_ = make_loop([model])
    loop.run()
    assert ev.seen == [] and replies == [["never"]]               # a stopped proposer: the end at once


def test_a_generations_candidates_are_handed_ahead_before_the_first_is_evaluated():
    """`ahead` sees the whole generation before its first evaluation (the evaluator starts their extensions'
    builds in parallel there)."""
    lib = FakeProposer("library", {EXPLORE: ["a", "b", "c"]}, modes=(EXPLORE,))
    clock = FakeClock()
    evaluate = FakeEvaluator(clock, {})
    events = []
    history: list = []

    def ev(c):
        events.append(("evaluated", c.id))
        return evaluate(c)

    loop = Loop([lib], ev, Planner(Budget(10_000, 3), clock), SearchConfig(per_generation=3), context_of(history),
                history, random.Random(0), lambda s: None, ahead=lambda cs: events.append(("ahead", [c.id for c in cs])))
    with pytest.raises(OutOfBudget):
        loop.run()
    assert events[:2] == [("ahead", ["a", "b", "c"]), ("evaluated", "a")]
