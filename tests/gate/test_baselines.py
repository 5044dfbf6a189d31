"""The baselines in one place (gate/baselines.py): kept in the store by workload, device, versions and
timing; only those within 10% of the faster are built and timed against candidates."""
from types import SimpleNamespace

import pytest

from kernelgate.config import GateConfig, TimingConfig
from kernelgate.gate import baselines
from kernelgate.records import Contract, Timing
from kernelgate.store import Store


def _t(label: str, ms: float) -> Timing:
    return Timing(label, (ms,), ms, ms, 0.0, label)


def test_faster_and_close_enough():
    ts = {"eager": _t("eager", 1.0), "compile": _t("compile", 1.05)}
    assert baselines.faster(ts) == "eager" and baselines.close_enough(ts) == ["eager", "compile"]
    ts["compile"] = _t("compile", 1.2)
    assert baselines.close_enough(ts) == ["eager"]
    assert baselines.faster({"compile": _t("compile", 2.0), "cand": _t("cand", 1.0)}) == "compile"


class _Session:
    def __init__(self, name):
        self.name, self.closed = name, False
        self.worker = SimpleNamespace(close=self.close)

    def close(self):
        self.closed = True


@pytest.fixture
def fake(monkeypatch):
    """build and measure stand-ins: eager 1 ms, compile 2 ms (more than 10% slower)."""
    seen = {"built": [], "measured": 0, "made": []}

    def build(task, names, cfg, say):
        seen["built"].append(list(names))
        made = {n: _Session(n) for n in names}
        seen["made"].append(dict(made))
        return made, {}, {n: 0.1 for n in names}

    def measure(task, sessions, cfg, tcfg, say, deadline=None, bystanders=()):
        seen["measured"] += 1
        seen.setdefault("bystanders", []).append(tuple(bystanders))
        return {n: _t(n, {"eager": 1.0, "compile": 2.0}[n]) for n in sessions}, {}
    monkeypatch.setattr(baselines, "build", build)
    monkeypatch.setattr(baselines, "measure", measure)
    return seen


def _task(source_hash="h"):
    return SimpleNamespace(hash=source_hash, target="cpu", device="cpu", contract=Contract())


def test_kept_in_the_store_and_only_the_close_ones_built_again(fake, tmp_path):
    store = Store(str(tmp_path / "s.sqlite"))
    notes, tcfg = [], TimingConfig(rounds=3)
    first = baselines.ready(_task(), GateConfig(), tcfg, store, lambda m: None, notes.append)
    assert fake["measured"] == 1 and fake["built"] == [["eager", "compile"]]
    assert first.faster == "eager" and list(first.sessions) == ["eager"] and fake["made"][0]["compile"].closed
    assert any("more than 10% slower" in n for n in notes)
    again = baselines.ready(_task(), GateConfig(), tcfg, store, lambda m: None, notes.append)
    assert fake["measured"] == 1 and fake["built"][1] == ["eager"]          # read from the store
    assert again.timings["compile"].median_ms == 2.0 and any("baselines from the store" in n for n in notes)
    baselines.ready(_task(), GateConfig(), TimingConfig(rounds=4), store, lambda m: None, notes.append)
    baselines.ready(_task("other"), GateConfig(), tcfg, store, lambda m: None, notes.append)
    assert fake["measured"] == 3                        # another timing configuration, another workload


def test_the_budget_may_shorten_the_measurement(fake, tmp_path, monkeypatch):
    got = []
    real = baselines.measure
    monkeypatch.setattr(baselines, "measure", lambda task, s, cfg, tcfg, say, deadline=None, bystanders=(): got.append(
        (tcfg, deadline)) or real(task, s, cfg, tcfg, say, deadline))
    baselines.ready(_task(), GateConfig(), TimingConfig(rounds=5), Store(str(tmp_path / "s.sqlite")),
                    lambda m: None, lambda m: None, lambda build_s: TimingConfig(rounds=2))
    assert got == [(TimingConfig(rounds=2), None)]


def test_the_budget_may_end_the_measurement_early(fake, tmp_path, monkeypatch):
    """The search's deadline (the time kept for the end of the run) is asked for when the measurement starts and
    reaches it; a measurement cut short says so, in the result's notes too."""
    got, notes, said = [], [], []

    def measure(task, s, cfg, tcfg, say, deadline=None, bystanders=()):
        got.append(deadline)
        say("stopped after 2 rounds: the time for this measurement is up")
        return {n: _t(n, {"eager": 1.0, "compile": 2.0}[n]) for n in s}, {}
    monkeypatch.setattr(baselines, "measure", measure)
    asked = []
    baselines.ready(_task(), GateConfig(), TimingConfig(rounds=5), Store(str(tmp_path / "s.sqlite")),
                    said.append, notes.append, deadline=lambda: asked.append(1) or 123.0)
    assert got == [123.0] and asked == [1]
    assert any("stopped after 2 rounds" in n for n in notes) and any("stopped after 2 rounds" in m for m in said)


def test_no_baseline_built(monkeypatch, tmp_path):
    monkeypatch.setattr(baselines, "build", lambda task, names, cfg, say: ({}, {n: "no" for n in names}, {}))
    notes = []
    with pytest.raises(RuntimeError):
        baselines.ready(_task(), GateConfig(), TimingConfig(), Store(str(tmp_path / "s.sqlite")), lambda m: None,
                        notes.append)
    assert notes == ["baseline eager unavailable: no", "baseline compile unavailable: no"]


def test_a_new_harness_version_makes_kept_baselines_stale(monkeypatch):
    """What a timed iteration costs is part of the key: a change of the harness (timing.HARNESS_VERSION) re-times."""
    from kernelgate.gate import timing
    k = baselines.key(_task(), TimingConfig())
    monkeypatch.setattr(timing, "HARNESS_VERSION", timing.HARNESS_VERSION + 1)
    assert baselines.key(_task(), TimingConfig()) != k


def test_only_trusted_and_own_code_sessions_share_the_trusted_cache(monkeypatch, tmp_path):
    """The reference as a baseline and modules kernelgate emitted from it get the trusted compile cache; a
    candidate's worker never does (it could plant compiled code a later baseline would load)."""
    from kernelgate.gate import session as session_mod
    made = []
    monkeypatch.setattr(session_mod, "Worker", lambda label, **kw: made.append((label, kw.get("cache"))) or
                        SimpleNamespace())
    task = SimpleNamespace(home="cpu", device="cpu", out_bytes=lambda: 0)
    cfg = GateConfig(trusted_cache=str(tmp_path / "cache"))
    session_mod.Session(task, None, cfg, "eager", trusted=True)
    session_mod.Session(task, None, cfg, "candidate")
    session_mod.Session(task, None, cfg, "candidate", own_code=True)
    assert made == [("eager", cfg.trusted_cache), ("candidate", None), ("candidate", cfg.trusted_cache)]


def test_optimize_and_bench_put_the_trusted_cache_beside_the_store(tmp_path):
    from kernelgate import api
    st = Store(str(tmp_path / "s.sqlite"))
    assert api._cached(GateConfig(), st).trusted_cache == str(tmp_path / "s.sqlite.compile-cache")
    assert api._cached(GateConfig(trusted_cache="/elsewhere"), st).trusted_cache == "/elsewhere"


def test_overlap_builds_compile_in_the_background_and_measures_on_complete(fake, tmp_path):
    """With overlap, a compile baseline that must be measured builds in a thread while the search goes on;
    complete() joins it and measures both (a second complete() does nothing)."""
    notes, said = [], []
    b = baselines.ready(_task(), GateConfig(), TimingConfig(rounds=3), Store(str(tmp_path / "s.sqlite")),
                        said.append, notes.append, overlap=True)
    assert b.pending is not None and b.timings == {} and list(b.sessions) == ["eager"]
    assert any("in the background" in m for m in said)
    waiting = _Session("candidate")
    b.complete(bystanders=(waiting,))
    assert b.pending is None and fake["measured"] == 1 and b.faster == "eager"
    assert fake["bystanders"][-1] == (waiting,)        # the candidate waiting to be timed is frozen meanwhile
    assert sorted(n for built in fake["built"] for n in built) == ["compile", "eager"]
    b.complete()
    assert fake["measured"] == 1
    kept = baselines.ready(_task(), GateConfig(), TimingConfig(rounds=3), Store(str(tmp_path / "s.sqlite")),
                           said.append, notes.append, overlap=True)
    assert kept.pending is None and fake["measured"] == 1             # read from the store: nothing to overlap


def test_measure_freezes_bystanders_throughout_even_on_failure(monkeypatch):
    from kernelgate.gate import measure as measure_mod
    log = []

    class Bystander:
        def pause(self):
            log.append("pause")

        def resume(self):
            log.append("resume")
    monkeypatch.setattr(measure_mod, "_measure", lambda *a, **k: log.append("measure") or ({}, {}))
    measure_mod.measure(None, {}, None, None, None, bystanders=(Bystander(),))
    assert log == ["pause", "measure", "resume"]

    def boom(*a, **k):
        raise RuntimeError("x")
    monkeypatch.setattr(measure_mod, "_measure", boom)
    with pytest.raises(RuntimeError):
        measure_mod.measure(None, {}, None, None, None, bystanders=(Bystander(),))
    assert log[-2:] == ["pause", "resume"]


@pytest.mark.slow
def test_lean_baselines_give_their_first_calls_memory_back_and_build_one_at_a_time(tmp_path, monkeypatch):
    """The lean memory plan holds one implementation's call at a time: a baseline's first call (torch.compile
    compiles there) is followed by a release - its device data and both shared regions go back (on the H200 the
    two baselines' first calls held a task's worth each beside every candidate's: 4.2-5.1x) - and a search
    builds the compile baseline before the candidates, not beside them."""
    from kernelgate import workload
    from kernelgate.gate.task import prepare
    from kernelgate.search import evaluator as ev_mod
    ref = tmp_path / "ref.py"
    ref.write_text("import torch\nclass Model(torch.nn.Module):\n    def forward(self, x):\n        return x * 2\n"
                   "def get_inputs():\n    return [torch.randn(512, 1024)]\ndef get_init_inputs():\n    return []\n")
    task = prepare(workload.Spec(str(ref), "Model"), "cpu", Contract(), "lean")
    built, unavailable, _ = baselines.build(task, ["eager"], GateConfig(memory="lean"), lambda m: None)
    try:
        w = built["eager"].worker
        assert not unavailable and w._in is None and w._out is None and not built["eager"].pooled
    finally:
        for s in built.values():
            s.worker.close()
    seen = {}
    monkeypatch.setattr(ev_mod.baselines_mod, "ready", lambda *a, **k: seen.update(k) or (_ for _ in ()).throw(
        RuntimeError("stop")))
    e = ev_mod.Evaluator(task, GateConfig(memory="lean"), tmp_path, [], lambda m: None)
    with pytest.raises(RuntimeError, match="stop"):
        e.baselines(Store(str(tmp_path / "s.sqlite")), TimingConfig(), None, False)
    assert seen["overlap"] is False


def test_each_baseline_is_the_faster_of_its_two_processes():
    """bench times every baseline in a second process and keeps the faster: an exact copy of the reference was
    claimed 1.06x on a loaded CI host against an eager process slowed all run long."""
    ts = {"eager": _t("eager", 9.47), "eager" + baselines.REPLICA: _t("eager" + baselines.REPLICA, 8.9),
          "compile": _t("compile", 7.0), "compile" + baselines.REPLICA: _t("compile" + baselines.REPLICA, 7.5),
          "cand": _t("cand", 8.91)}
    notes = baselines.merge_replicas(ts)
    assert set(ts) == {"eager", "compile", "cand"}
    assert ts["eager"].median_ms == 8.9 and ts["eager"].label == "eager" and ts["eager"].kind == "eager"
    assert ts["compile"].median_ms == 7.0
    assert "9.47" in notes["eager"] and "8.9" in notes["eager"] and set(notes) == {"eager", "compile"}


def test_bench_builds_a_second_process_per_baseline(monkeypatch):
    from kernelgate.gate import bench as bench_mod
    built = []

    def build(task, names, cfg, say):
        built.append(list(names))
        return {n: _Session(n) for n in names}, {}, {}

    def measure(task, sessions, cfg, tcfg, say):
        assert list(sessions) == ["eager", "compile", "eager" + baselines.REPLICA, "compile" + baselines.REPLICA]
        return {k: _t(k, {"eager": 3.0, "compile": 2.0}[k.split(" ")[0]] + 0.5 * k.endswith(")"))
                for k in sessions}, {}

    monkeypatch.setattr(baselines, "build", build)
    monkeypatch.setattr(bench_mod, "measure", measure)
    task = SimpleNamespace(admission=SimpleNamespace(ok=True), lean=False, device="cpu", memory=None, floor=None,
                           ref=SimpleNamespace(spec=SimpleNamespace(path="ref.py")), target="cpu")
    res = bench_mod.bench(task, [], GateConfig(), TimingConfig())
    assert built == [["eager", "compile"], ["eager", "compile"]]
    rows = {r.label: r for r in res.rows}
    assert set(rows) == {"eager", "compile"} and res.baseline == "compile"
    assert "faster of 2 processes" in rows["compile"].note and rows["compile"].timing.median_ms == 2.0


@pytest.mark.parametrize("name", ["eager (2nd process)", "compile (2nd process)", "(harness)", "eager", "compile"])
def test_a_candidate_file_name_never_takes_a_baseline_or_harness_row(name):
    """Red team 48: a candidate saved as 'eager (2nd process).py' replaced the second eager worker (the baseline
    was timed in one process again, the protection above gone); one saved as '(harness).py' crashed bench."""
    from kernelgate.gate import bench as bench_mod
    from kernelgate.gate.measure import HARNESS
    labels = bench_mod._labels([SimpleNamespace(path=f"/some/where/{name}.py")] * 2)
    reserved = set(baselines.NAMES) | {k + baselines.REPLICA for k in baselines.NAMES} | {HARNESS}
    assert len(set(labels)) == 2 and not reserved & set(labels), labels


def test_the_background_build_starts_first_and_goes_with_a_failing_foreground_build(monkeypatch, tmp_path):
    """With overlap, the compile baseline's build starts before the eager one (its compile runs meanwhile); when the
    eager build raises, the compile build is waited for and its worker closed before the error goes on."""
    import threading
    started = threading.Event()
    made: dict = {}

    def build(task, names, cfg, say):
        if names == ["compile"]:
            started.set()
            made["compile"] = _Session("compile")
            return {"compile": made["compile"]}, {}, {"compile": 0.1}
        assert started.wait(5), "the eager build ran before the compile build had started"
        raise KeyboardInterrupt
    monkeypatch.setattr(baselines, "build", build)
    with pytest.raises(KeyboardInterrupt):
        baselines.ready(_task(), GateConfig(), TimingConfig(rounds=3), Store(str(tmp_path / "s.sqlite")),
                        lambda m: None, lambda m: None, overlap=True)
    assert made["compile"].closed
