"""The search's policy without a gate: the budget on a fake clock, the modes of each generation, cost priors
by a candidate's stack, the incumbent."""
from __future__ import annotations

from dataclasses import replace

import pytest

from kernelgate.records import Candidate, Evaluation, Level, Reason, Status, Verdict
from kernelgate.search.policy import (EXPLORE, REFINE, RESTART, Budget, Modes, OutOfBudget, Planner, SearchConfig,
                                      best, best_ratio, cost_kind, family, promising)
from search_fakes import OK, FakeClock, timed

def test_the_budget_runs_on_the_injected_clock():
    clock = FakeClock()
    p = Planner(Budget(seconds=100.0), clock)
    assert p.left() == pytest.approx(95.0)            # 95% of the budget is planned
    clock.t += 60
    assert p.elapsed() == 60 and p.left() == pytest.approx(35.0)
    assert p.at(1.05, 5.0) == pytest.approx(1000.0 + 105.0 - 5.0)


def test_budget_keeps_room_to_confirm_the_best():
    """With a claimed best, the search stops early enough to evaluate that candidate once more; without one,
    early enough to check an emitted baseline."""
    clock = FakeClock()
    p = Planner(Budget(seconds=100.0), clock)
    clock.t += 60                                      # 35 s left to plan (95% of 100 s)
    history = [timed("slow", 0.9, claimed=False)]
    p.record("slow", 30.0)
    p.baseline_check_s = 2.0                           # building and timing a baseline
    p.check(history)                                   # no best: one more 30 s evaluation + 1.3 x 2 s fits
    p.baseline_check_s = 4.0
    with pytest.raises(OutOfBudget):                   # 30 s + 1.3 x 4 s for the emitted baseline's check > 35 s
        p.check(history)
    p.baseline_emit_s = 3.6                            # an earlier run measured that check: 3.6 s (4.5 s kept)
    p.check(history)
    history.append(timed("best", 2.0))
    p.record("best", 5.0)
    p.check(history)                                   # average 17.5 s + confirming the best 5 s < 35 s
    p.cost["best"] = 25.0
    with pytest.raises(OutOfBudget):                   # 17.5 s + 25 s > 35 s
        p.check(history)
    near = [timed("slow", 0.9, claimed=False), timed("near", 1.2, claimed=False)]
    p.record("near", 25.0)                             # an unclaimed near claim is confirmed too: its time is kept
    with pytest.raises(OutOfBudget):
        p.check(near)


def test_the_candidate_limit_ends_the_search():
    p = Planner(Budget(seconds=1e6, candidates=2), FakeClock())
    p.check([timed("a", 1.0, claimed=False)])
    with pytest.raises(OutOfBudget):
        p.check([timed("a", 1.0, claimed=False), timed("b", 1.0, claimed=False)])


def test_expected_cost_follows_the_stack_kind():
    """A compile-mode candidate is expected to cost what earlier compile candidates cost here, stacked or not;
    the kind is read from the typed stack, never from the display string."""
    compile_ro = Level("runtime:compile", (("mode", "reduce-overhead"),))
    p = Planner(Budget(300), FakeClock())
    history = [Evaluation(Candidate("a", "x", "", stack=(Level("runtime:compile", (("mode", "max-autotune"),)),)), OK),
               Evaluation(Candidate("b", "y", "", stack=(Level("rewrite:fold-bn"),)), OK)]
    p.record("a", 40.0)
    p.record("b", 4.0)
    stacked = Candidate("c", "whatever the label says", "", stack=(Level("rewrite:fold-bn"), compile_ro))
    assert cost_kind(stacked) == "runtime:compile" and family(stacked) == "rewrite:fold-bn"
    assert p.expected_s(stacked, history) == 40.0
    fold = Candidate("d", "runtime:compile + label", "", stack=(Level("rewrite:fold-bn"), Level("runtime:cudagraph")))
    assert p.expected_s(fold, history) == 22.0                    # its family took 4 s: the average is longer
    graph = Candidate("e", "runtime:cudagraph(outputs=in-place)", "",
                      stack=(Level("runtime:cudagraph", (("outputs", "in-place"),)),))
    assert p.expected_s(graph, history) == 22.0                   # the average


def test_a_candidate_without_a_stack_is_its_own_family():
    """An LLM's candidate (a whole file) and a row stored before stacks were recorded: the label is the family."""
    llm = Candidate("x", "llm:explorer-1:explore", "", proposer="llm")
    assert family(llm) == cost_kind(llm) == "llm:explorer-1:explore"
    p = Planner(Budget(300), FakeClock())
    p.baseline_check_s = 7.0
    assert p.expected_s(llm, []) == 7.0                          # before any evaluation: a baseline's check


def test_modes_explore_refine_and_restart():
    cfg = SearchConfig(patience=2)
    m = Modes(cfg)
    assert m.mode(0, near=True) == EXPLORE
    assert m.mode(1, near=True) == REFINE
    assert m.mode(1, near=False) == EXPLORE                      # nothing near the baseline to build on
    assert m.mode(2, near=True) == EXPLORE
    assert not m.after(1.5)                                       # an improvement
    assert not m.after(1.5)                                       # 1 generation without one
    assert m.after(1.4)                                           # 2: the next generation restarts
    assert m.mode(3, near=True) == RESTART and m.mode(4, near=True) == RESTART
    assert not m.after(1.6)                                       # improved: back to explore / refine
    assert m.mode(5, near=True) == REFINE


def test_refiners_stack_only_on_candidates_near_the_baseline():
    """A refine generation builds on a candidate within `promising` of the baseline."""
    cfg = SearchConfig()
    rejected = Evaluation(Candidate("r", "r", ""), Verdict(Status.REJECTED, Reason.MISMATCH, "no"))
    assert not promising([timed("a", 0.5), timed("b", 0.9), rejected], cfg)
    assert promising([timed("a", 0.5), timed("c", 0.98)], cfg)
    assert promising([timed("a", 0.7), timed("h", 0.7, insight={"bound": "latency"})], cfg)   # graph capture may pay
    assert not promising([timed("a", 0.7)], cfg)


def test_the_incumbent_is_the_fastest_claimed_candidate():
    history = [timed("a", 1.3), timed("b", 2.5, claimed=False), timed("c", 1.6)]
    assert best(history).candidate.id == "c" and best_ratio(history) == 1.6
    assert best([timed("b", 2.5, claimed=False)]) is None and best_ratio([]) == 1.0


def test_each_proposer_gets_its_share():
    cfg = SearchConfig(per_generation=2, shares=(("llm", 1),))
    assert cfg.share("library") == 2 and cfg.share("llm") == 1


def test_a_baseline_building_in_the_background_keeps_time_for_itself():
    """While the compile baseline builds in the background, the end of the run must wait for it, measure it and
    may check a module emitted from it: the time kept is at least twice what it has built so far, on top of the
    emitted check's; one built and not yet measured (or just started) keeps at least its measurement,
    PENDING_OVER_ADMISSION times task admission's trials."""
    from kernelgate.search.policy import PENDING_OVER_ADMISSION
    clock = FakeClock()
    p = Planner(Budget(seconds=60.0), clock)
    p.baseline_check_s = 2.0                       # the eager baseline's build and measurement share
    assert p.reserve_s(None) == pytest.approx(2.6)
    building = [5.0]
    p.pending_s = lambda: building[0]
    assert p.reserve_s(None) == pytest.approx(2.6 + 10.0)
    building[0] = 0.0                              # built, not measured: its measurement is still to come
    p.admission_s = 0.25
    assert p.reserve_s(None) == pytest.approx(2.6 + PENDING_OVER_ADMISSION * 0.25)
    p.admission_s = 0.0
    building[0] = 20.0
    clock.t += 20
    with pytest.raises(OutOfBudget):               # 57 - 20 = 37 s left, 42.6 s kept
        p.check([])
    building[0] = None                             # built and measured: its own figures again
    p.check([])
    best = timed("best", 1.0)
    p.record("best", 4.0)
    p.pending_s = lambda: 3.0
    assert p.reserve_s(best) == pytest.approx(4.0 + best.verdict.seconds + 6.0)


def test_confirming_costs_the_evaluation_without_its_profile_and_baseline_waits():
    """The time kept for confirming the best is what judging and timing it again takes: a first candidate's
    evaluation also waited for the compile baseline and profiled (gru: 42 s counted, 6 s to confirm), and
    a reserve that large left a 5.8x unconfirmed with a third of the budget unspent."""
    p = Planner(Budget(seconds=90.0), FakeClock())
    best = timed("best", 5.8)
    p.record("best", 42.0)
    assert p.confirm_s(best) == pytest.approx(42.0 + best.verdict.seconds)     # nothing better known
    p.again["best"] = 9.0
    assert p.confirm_s(best) == pytest.approx(9.0 + best.verdict.seconds)
    p.timing_s["best"] = 2.0                           # its measurement, timed again with twice the rounds
    assert p.confirm_s(best) == pytest.approx(9.0 + 2.0 + best.verdict.seconds)
    assert p.reserve_s(best) == p.confirm_s(best)


def test_a_compiling_candidate_costs_at_least_what_the_compile_baseline_took():
    p = Planner(Budget(seconds=60.0), FakeClock())
    p.baseline_check_s, p.compile_build_s = 3.0, 27.0
    comp = Candidate("c", "runtime:compile(mode=max-autotune)", "",
                     stack=(Level("runtime:compile", (("mode", "max-autotune"),)),))
    other = Candidate("d", "rewrite:fold-bn", "", stack=(Level("rewrite:fold-bn"),))
    assert p.expected_s(comp, []) == 27.0 and p.expected_s(other, []) == 3.0


def test_a_first_candidate_that_compiles_nothing_is_expected_to_cost_an_eager_build_and_the_trials():
    """With torch.compile the faster baseline, building and timing it (its 20 s compile included) is no estimate
    for a C++ or rewrite candidate: 25 s left in a 60 s run let none be tried. Before any evaluation such a
    candidate is expected to cost the eager baseline's build, the measurement's share and task admission's trials;
    a compiling one still what the compile baseline cost."""
    clock = FakeClock()
    p = Planner(Budget(seconds=60.0), clock)
    p.baseline_check_s, p.compile_build_s = 22.0, 20.0       # compile: built in 20 s, measured in 2 s
    p.plain_check_s, p.admission_s = 3.5, 1.5                # eager: built in 1.5 s, the same 2 s of measurement
    cpp = Candidate("k", "cpp:pointwise", "", stack=(Level("cpp:pointwise"),))
    comp = Candidate("c", "runtime:compile(mode=max-autotune)", "",
                     stack=(Level("runtime:compile", (("mode", "max-autotune"),)),))
    assert p.expected_s(cpp, []) == pytest.approx(5.0) and p.expected_s(comp, []) == 22.0
    clock.t += 35                                            # 22 s left to plan, a 5 s baseline check kept
    p.baseline_emit_s = 4.0
    assert p.fits(p.expected_s(cpp, []), []) and not p.fits(p.expected_s(comp, []), [])
    p.plain_check_s = 0.0                                    # not known (no eager build): the faster's figure
    assert p.expected_s(cpp, []) == 22.0
    p.record("k0", 9.0)                                      # once evaluations are measured, they decide
    assert p.expected_s(cpp, []) == 9.0


def test_the_emitted_check_is_expected_to_cost_its_trials_before_it_was_measured():
    """Before a run measured the emitted baseline's check, its reserve is at least EMIT_OVER_ADMISSION times what
    task admission's trials took (a 256 MiB CPU input: admission 4.7 s, the check 18.8 s, eager's build 2 s);
    a measured check replaces the estimate."""
    from kernelgate.search.policy import (EMIT_AGAIN, EMIT_OVER_ADMISSION, EMIT_OVER_ADMISSION_GPU,
                                          emit_over_admission)
    p = Planner(Budget(seconds=60.0), FakeClock())
    p.baseline_check_s = 2.0
    p.admission_s = 4.7
    assert p.reserve_s(None) == pytest.approx(EMIT_OVER_ADMISSION * 4.7)
    p.admission_s = 0.1                            # a small task: building and timing the baseline dominates
    assert p.reserve_s(None) == pytest.approx(2.6)
    p.emit_over_admission = emit_over_admission("cuda:0")          # a GPU task: the ratio measured there before
    p.admission_s = 4.7
    assert p.reserve_s(None) == pytest.approx(EMIT_OVER_ADMISSION_GPU * 4.7)
    from kernelgate.search.policy import LEAN_CHECK_S, LEAN_EMIT_CROSSINGS, LEAN_TRIALS_OVER_ADMISSION
    p.lean_gpu = True                              # the lean plan on a GPU: a worker and its build, its trials
    assert p.reserve_s(None) == pytest.approx(LEAN_CHECK_S + LEAN_TRIALS_OVER_ADMISSION * 4.7)
    p.crossing_s = 1.5                             # and its inputs' moves through the host
    assert p.reserve_s(None) == pytest.approx(LEAN_CHECK_S + LEAN_TRIALS_OVER_ADMISSION * 4.7
                                              + LEAN_EMIT_CROSSINGS * 1.5)
    p.admission_s, p.baseline_emit_s = 4.7, 9.0
    assert p.reserve_s(None) == pytest.approx(EMIT_AGAIN * 9.0)      # a measured check varies from run to run


def test_a_shared_compile_cache_makes_the_emitted_checks_reserve_smaller():
    """With the trusted compile cache the emitted check loads what the baseline's build compiled: on the H200 it
    took about half the build, and 1.3x the build kept 36 s of a 60 s run."""
    from kernelgate.search.policy import EMIT_OVER_BASELINE_CACHED
    p = Planner(Budget(seconds=60.0), FakeClock())
    p.baseline_check_s = 28.0
    assert p.reserve_s(None) == pytest.approx(1.3 * 28.0)
    p.emit_over_baseline = EMIT_OVER_BASELINE_CACHED
    assert p.reserve_s(None) == pytest.approx(0.7 * 28.0)


def test_a_confirmation_of_the_emitted_module_keeps_time_for_the_baselines_module_only():
    """optimize's confirmation judges and times the emitted module itself (the emitted check and the confirmation
    in one judgement): what is kept beside judging and timing the best again is the check of the baseline's module
    that would be emitted should the confirmation fail, not the best's own verdict time again."""
    from kernelgate.search.policy import EMIT_AGAIN
    p = Planner(Budget(seconds=90.0), FakeClock())
    best = timed("best", 1.7)
    best = replace(best, verdict=replace(best.verdict, seconds=30.0))
    p.again["best"], p.timing_s["best"] = 20.0, 4.0
    p.baseline_check_s = 10.0
    assert p.confirm_s(best) == pytest.approx(20.0 + 4.0 + 30.0)
    p.emit_confirms = True
    assert p.confirm_s(best) == pytest.approx(20.0 + 4.0 + p.baseline_emit_estimate())
    assert p.baseline_emit_estimate() < 30.0 and p.reserve_s(None) == pytest.approx(p.baseline_emit_estimate())
    p.baseline_emit_s = 13.0                           # an earlier run's check of the baseline's module
    assert p.confirm_s(best) == pytest.approx(20.0 + 4.0 + 13.0 * EMIT_AGAIN)
