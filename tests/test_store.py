import pytest
import multiprocessing as mp

from kernelgate.store import Store


def _write_many(path, n, tag):
    s = Store(path)
    for i in range(n):
        s.add("verify", f"w{tag}", "h", f"c{i}", "ch", "cpu", "cpu", "accepted", "ok", "fine", {"i": i})


def test_roundtrip(tmp_path):
    s = Store(tmp_path / "s.sqlite")
    rid = s.add("bench", "w.py", "abc", None, None, "cpu", "cpu", "accepted", None, "eager 1 ms", {"rows": [1]})
    assert s.payload(rid) == {"rows": [1]}
    (row,) = s.recent()
    assert row.kind == "bench" and row.workload == "w.py" and row.summary == "eager 1 ms"


@pytest.mark.slow
def test_several_writers_lose_nothing(tmp_path):
    path = tmp_path / "s.sqlite"
    Store(path)
    ctx = mp.get_context("spawn")
    procs = [ctx.Process(target=_write_many, args=(str(path), 25, k)) for k in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    assert len(Store(path).recent(1000)) == 100
