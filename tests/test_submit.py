"""kernelgate submit: a hand-written candidate joins an optimize run's population through the same gate."""
import json
from pathlib import Path

import pytest

from kernelgate import submit as submit_mod
from kernelgate.cli import format_submission, main
from kernelgate.records import Candidate, Evaluation, Reason, Speedup, Status, Timing, Verdict
from kernelgate.store import Store
from kernelgate.workload import file_hash

# candidates for the projection workload (the proj fixture)
# honest: the same two maps, each as one addmm (bias folded into the GEMM)
ADDMM = """
import torch
import torch.nn as nn
class ModelNew(nn.Module):
    def __init__(self, d, mid):
        super().__init__()
        self.down = nn.Linear(d, mid)
        self.up = nn.Linear(mid, d)
    def forward(self, x):
        h = torch.addmm(self.down.bias, x, self.down.weight.t())
        return torch.addmm(self.up.bias, h, self.up.weight.t())
"""
# honest: the two maps merged into one (computed from the current parameters on every call)
MERGED = """
import torch
import torch.nn as nn
class ModelNew(nn.Module):
    def __init__(self, d, mid):
        super().__init__()
        self.down = nn.Linear(d, mid)
        self.up = nn.Linear(mid, d)
    def forward(self, x):
        w = self.up.weight @ self.down.weight
        b = torch.addmv(self.up.bias, self.up.weight, self.down.bias)
        return torch.addmm(b, x, w.t())
"""
# wrong: drops the second bias
NO_BIAS = ADDMM.replace("torch.addmm(self.up.bias, h, self.up.weight.t())", "h @ self.up.weight.t()")


def run(capsys, *argv):
    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


@pytest.fixture(scope="module")
def optimized(tmp_path_factory, optimize_tiny, proj):
    """A tiny optimize run on the CPU: one candidate, its own store."""
    r = optimize_tiny(tmp_path_factory.mktemp("submit"), proj)
    return r.dir, r.out, r.store, r.run_id


@pytest.mark.slow
def test_an_honest_candidate_is_accepted_timed_and_recorded_as_human(optimized, capsys, proj):
    d, out, store, run_id = optimized
    before = Store(store).evaluations(run_id)
    cand = d / "addmm.py"
    cand.write_text(ADDMM)
    rc, o, err = run(capsys, "submit", str(out), str(cand), "--store", store, "--json")
    doc = json.loads(o)
    assert rc == 0 and doc["status"] == "accepted" and doc["run_id"] == run_id, doc
    assert doc["candidate"]["proposer"] == "human" and doc["candidate"]["strategy"] == "human:addmm"
    assert doc["timing"]["median_ms"] > 0 and doc["baseline"]["label"] in ("eager", "compile")
    # the ratio of medians; a candidate whose call the judge's clock cannot resolve (a loaded machine) is compared
    # with its harness included (Speedup.bounded), each sample shifted by the harness's cost
    t = doc["timing"]
    cand_ms = t["median_ms"] + (t["harness_ms"] if doc["speedup"]["bounded"] else 0.0)
    assert doc["speedup"]["ratio"] == pytest.approx(doc["baseline"]["median_ms"] / cand_ms)
    # one more evaluation of the run, the human one, with the source that was judged
    evs = Store(store).evaluations(run_id)
    assert len(evs) == len(before) + 1
    e = evs[-1]
    assert e["candidate"]["proposer"] == "human" and e["candidate"]["id"] == doc["candidate"]["id"]
    assert e["verdict"]["status"] == "accepted" and e["timing"] and e["speedup"]
    src = e["candidate"]["source"]
    assert src.startswith(proj.rstrip()) and ADDMM.strip() in src         # the reference first, as every candidate
    assert (out / "candidates" / f"{e['candidate']['id']}.py").read_text() == src
    # visible in `kernelgate runs`
    rc, o, _ = run(capsys, "runs", "--store", store, "--json")
    rows = [r for r in json.loads(o) if r["kind"] == "submit"]
    assert rc == 0 and rows and rows[0]["status"] == "accepted" and rows[0]["candidate"].endswith("addmm.py")
    assert f"run {run_id}, human" in rows[0]["summary"]
    rc, o, _ = run(capsys, "runs", "--store", store)
    assert any(" submit " in line and "addmm.py" in line for line in o.splitlines())
    # the same file again: its evaluation stands, nothing is judged or recorded twice
    rc, o, _ = run(capsys, "submit", str(out), str(cand), "--store", store, "--json")
    doc2 = json.loads(o)
    assert rc == 0 and doc2["already_evaluated"] and doc2["candidate"]["id"] == doc["candidate"]["id"]
    assert len(Store(store).evaluations(run_id)) == len(before) + 1


@pytest.mark.slow
def test_the_runs_kept_baseline_measurement_is_reused(optimized, fast_search):
    """Timed with the run's timing settings, the baselines' measurement comes from the store (the run's)."""
    d, out, store, run_id = optimized
    cand = d / "merged.py"
    cand.write_text(MERGED)
    lines = []
    sub = submit_mod.submit(out, str(cand), store=store, timing=fast_search.timing, progress=lines.append, profile=False)
    assert sub.accepted and sub.evaluation.timing is not None, sub.evaluation.verdict.message
    assert any(line.startswith("baselines from the store") for line in lines), lines
    assert not any(line.startswith("baselines: ") for line in lines)            # not measured again
    assert sub.evaluation.candidate.id in {e["candidate"]["id"] for e in Store(store).evaluations(run_id)}


@pytest.mark.slow
def test_a_wrong_candidate_is_rejected_with_exit_1_and_its_reason(optimized, capsys):
    d, out, store, run_id = optimized
    cand = d / "no_bias.py"
    cand.write_text(NO_BIAS)
    rc, o, _ = run(capsys, "submit", str(out), str(cand), "--store", store)
    assert rc == 1
    lines = o.splitlines()
    assert lines[0].startswith(f"run {run_id}") and "human:no_bias" in lines[0]
    assert lines[1].startswith("REJECTED  (mismatch)") and "max error too large" in lines[1]
    assert "recorded in the run's population as rejected" in o and "time:" not in o
    e = Store(store).evaluations(run_id)[-1]
    assert e["candidate"]["proposer"] == "human" and e["verdict"]["reason"] == "mismatch" and e["timing"] is None


def test_a_folder_with_no_run_is_exit_2_with_one_line(tmp_path, capsys, write):
    cand = write("cand.py", ADDMM)
    rc, o, err = run(capsys, "submit", str(tmp_path), cand)
    assert rc == 2 and o == "" and err.count("\n") == 1 and "holds no run.json" in err
    rc, o, _ = run(capsys, "submit", str(tmp_path / "nowhere"), cand, "--json")
    doc = json.loads(o)
    assert rc == 2 and doc["reason"] == "usage" and "does not exist" in doc["message"]


# ------------------------------------------------------------------ usage errors before any work

@pytest.fixture
def fake_run(tmp_path, proj):
    """An out folder as a finished run leaves it (run.json, result.json, reference.py), no worker started."""
    out = tmp_path / "out"
    out.mkdir()
    ref = tmp_path / "proj.py"
    ref.write_text(proj)
    (out / "reference.py").write_text(proj)
    run = {"run_id": "r1", "seed": 0, "workload_hash": file_hash(str(ref)), "target": "cpu"}
    (out / "run.json").write_text(json.dumps(run))
    from kernelgate.records import Contract
    result = {"workload": str(ref), "candidates": 0, "contract": Contract().assumptions(),
              "emitted_check": {"class": "Model"}}
    (out / "result.json").write_text(json.dumps(result))
    return out, ref, result


@pytest.mark.parametrize("case, words", [
    ("defines-model", "defines Model, the reference's class"),
    ("target", "targets cpu, not cuda"),
    ("other-model", "is not the workload run r1 optimized"),
    ("no-workload", "give it with --model file.py"),
    ("wrong-store", "holds none of run r1's 3 evaluations: give the run's --store"),
    ("contract", "the run was made under another contract"),
    ("class", "defines ModelNew (got the class Other)"),
    ("missing-cand", "no such candidate file"),
])
def test_submission_usage_errors(fake_run, tmp_path, capsys, write, proj, case, words):
    out, ref, result = fake_run
    cand = write("cand.py", ADDMM)
    extra = []
    if case == "defines-model":
        cand = write("cand.py", proj + ADDMM)
    elif case == "target":
        extra = ["--target", "cuda"]
    elif case == "other-model":
        extra = ["--model", write("other.py", proj + "\n# changed\n")]
    elif case == "no-workload":
        (out / "result.json").unlink()
        (out / "reference.py").write_text(proj + "\n# changed\n")
    elif case == "wrong-store":
        (out / "result.json").write_text(json.dumps({**result, "candidates": 3}))
    elif case == "contract":
        extra = ["--precision", "bf16"]
    elif case == "class":
        cand += ":Other"
    elif case == "missing-cand":
        cand = str(tmp_path / "missing.py")
    rc, o, _ = run(capsys, "submit", str(out), cand, *extra, "--json")
    doc = json.loads(o)
    assert rc == 2 and doc["status"] == "error" and doc["reason"] == "usage", doc
    assert words in doc["message"] and "\n" not in doc["message"]
    assert Store().evaluations("r1") == []


def test_the_workload_is_found_from_result_json_then_the_runs_copy(fake_run, proj):
    out, ref, result = fake_run
    run = submit_mod.load_run(out)
    assert submit_mod.find_workload(out, run, None, None).path == str(ref.resolve())
    ref.write_text(proj + "\n# edited since the run\n")                 # the original changed: the run's copy
    assert submit_mod.find_workload(out, run, None, None).path == str((out / "reference.py").resolve())
    assert submit_mod.find_workload(out, run, str(out / "reference.py"), None).cls == "Model"


# ------------------------------------------------------------------ the run's best, and what to do next

def _ev(cid, accepted=True, ratio=None, claimed=False, flagged=False):
    c = Candidate(id=cid, strategy=f"s:{cid}", source="", proposer="human")
    v = Verdict(Status.ACCEPTED if accepted else Status.REJECTED, Reason.OK if accepted else Reason.MISMATCH, "m")
    if ratio is None:
        return Evaluation(c, v)
    t = Timing("cand", (1.0,), 1.0, 1.0 / ratio, 0.01, "candidate")
    base = Timing("eager", (1.0,), 1.0, 1.0, 0.01)
    return Evaluation(c, v, t, base, Speedup(ratio, ratio * 0.95, ratio * 1.05, 1.03, claimed, flagged))


def test_the_runs_best_is_the_fastest_claimed_candidate():
    history = [_ev("a", ratio=1.5, claimed=True), _ev("b", ratio=2.0, claimed=False), _ev("c", ratio=1.7, claimed=True),
               _ev("d", accepted=False)]
    assert submit_mod.run_best(history).candidate.id == "c"
    assert submit_mod.run_best([_ev("b", ratio=2.0)]) is None


@pytest.mark.parametrize("ev, best, wins", [
    (_ev("n", ratio=1.8, claimed=True), _ev("c", ratio=1.7, claimed=True), True),
    (_ev("n", ratio=1.6, claimed=True), _ev("c", ratio=1.7, claimed=True), False),
    (_ev("n", ratio=1.8, claimed=False), _ev("c", ratio=1.7, claimed=True), False),     # not claimed
    (_ev("n", ratio=1.2, claimed=True), None, True),                                    # over the kept baseline
    (_ev("n", ratio=1.01, claimed=False), None, False),
    (_ev("n", ratio=9.0, claimed=True, flagged=True), None, False),                     # implausible: review
    (_ev("n", accepted=False), None, False),
])
def test_beats_the_runs_best(ev, best, wins):
    assert submit_mod.beats(ev, best) is wins


def test_a_winner_is_told_how_to_emit_it(tmp_path):
    from kernelgate.workload import Spec
    cmd = submit_mod.resume_command(Spec("/w/my model.py", "Model"), "cpu", tmp_path / "out", None, None,
                                     "/s/store.sqlite", 90)
    assert cmd == (f"kernelgate optimize '/w/my model.py' --target cpu --out {tmp_path / 'out'} --resume "
                   "--budget 90 --store /s/store.sqlite")
    assert "x.py:Block --target cuda" in submit_mod.resume_command(Spec("x.py", "Block"), "cuda", Path("o"),
                                                                    None, None, None, 60)
    best = _ev("c", ratio=1.3, claimed=True)
    sub = submit_mod.Submission("r1", "out", "w.py", "cpu", "cand.py", _ev("n", ratio=1.5, claimed=True), best, True,
                                next_step=cmd)
    text = format_submission(sub)
    assert "time: 0.6667 ms vs eager 1 ms" in text and "1.500x" in text and ", claimed" in text
    assert "the run's best: s:c 1.300x" in text and "beats the run's best" in text and cmd in text
    sub = submit_mod.Submission("r1", "out", "w.py", "cpu", "cand.py", _ev("n", ratio=1.1), best, False)
    assert "does not beat the run's best" in format_submission(sub) and "--resume" not in format_submission(sub)
    assert json.loads(json.dumps(sub.to_json()))["run_best"]["speedup"] == 1.3
