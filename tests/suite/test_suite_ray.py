"""The Ray executor on a local Ray instance, with the stand-in child: problems run as Ray tasks, the driver
alone writes what they return; a child killed with -9 and a Ray worker that dies are both retried once. Without
ray installed, the executor names the extra that installs it."""
import json
import sys

import pytest

from kernelgate import cli
from kernelgate.errors import MissingExtra
from kernelgate.store import Store
from kernelgate.suite import runner
from kernelgate.suite.executors import RayExecutor
from kernelgate.suite.runner import Settings


def test_without_ray_the_extra_is_named(monkeypatch, problems, tmp_path, capsys):
    monkeypatch.setitem(sys.modules, "ray", None)               # import ray -> ImportError
    with pytest.raises(MissingExtra, match=r"pip install 'kernelgate\[ray\]'"):
        RayExecutor("cpu")
    root = problems({"a": ""})
    assert cli.main(["suite", str(root), "--executor", "ray", "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1] == "error: this needs the optional package 'ray': pip install 'kernelgate[ray]'"


@pytest.fixture(scope="module")
def local_ray():
    ray = pytest.importorskip("ray")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    yield ray
    ray.shutdown()


@pytest.mark.slow
def test_ray_executor_runs_retries_and_the_driver_writes(local_ray, problems, fake_child, seen_by, tmp_path):
    root = problems({"level1/a": "speedup=1.5 store", "level1/b": "die=1", "level2/c": "killparent=1 speedup=1.2",
                     "level2/d": "degenerate"})
    out, lines = tmp_path / "out", []
    doc = runner.run(Settings(root=str(root), out=str(out), budget_per="10", executor="ray", workers=2,
                              command=fake_child, say=lines.append))
    st = {r["id"]: r for r in doc["rows"]}
    assert st["level1/a"]["outcome"] == "ok" and st["level1/a"]["claimed"] and len(st["level1/a"]["attempts"]) == 1
    assert st["level1/a"]["attempts"][0]["slot"].startswith("ray:")
    assert [a.get("reason") for a in st["level1/b"]["attempts"]] == ["killed by SIGKILL", None]
    c = st["level2/c"]["attempts"]
    assert len(c) == 2 and c[0]["rc"] is None and c[0]["reason"].startswith("the worker was lost")
    assert st["level2/c"]["outcome"] == "ok" and st["level2/d"]["outcome"] == "degenerate"
    # the files came back through the driver: result.json, the child's own record, the log of every attempt
    assert json.loads((out / "level1" / "a" / "result.json").read_text())["speedup"] == 1.5
    assert [s["attempt"] for s in seen_by(out, "level1/b")] == [2]            # the retry's files replaced the first's
    assert (out / "level1" / "b" / "optimize.log").read_text().count("--- attempt") == 2
    assert doc["claimed"] == ["level1/a", "level2/c"] and not doc["failures"]
    assert sum(" start " in ln for ln in lines) == 6
    assert any("start level1/a on Ray task" in ln for ln in lines)
    # the task kept a store of its own; the driver merged it into the suite's
    assert seen_by(out, "level1/a")[0]["store"] != str(tmp_path / "store.sqlite")
    assert [r.workload for r in Store(str(tmp_path / "store.sqlite")).recent()] == ["fake-a.py"]


def test_store_merge(tmp_path):
    a, b = Store(tmp_path / "a.sqlite"), Store(tmp_path / "b.sqlite")
    a.add("optimize", "w1", "h1", None, None, "cpu", "cpu", "accepted", None, "1.2x", {"k": 1})
    a.put_baselines("key", {"faster": "eager"})
    b.add("verify", "w0", "h0", None, None, "cpu", "cpu", "accepted", None, "ok", {})
    assert b.merge(tmp_path / "a.sqlite") == 1
    assert [(r.id, r.workload) for r in b.recent()] == [(2, "w1"), (1, "w0")]
    assert b.baselines("key")[1] == {"faster": "eager"} and b.payload(2) == {"k": 1}
