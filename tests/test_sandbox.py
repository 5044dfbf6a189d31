
import pytest

from kernelgate.records import Reason
from kernelgate.sandbox import Worker, WorkerFailure, scrubbed_env


def test_secrets_are_not_passed_and_cache_dirs_are_private(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("GH_TOKEN", "t")
    monkeypatch.setenv("MY_SECRET_THING", "s")
    monkeypatch.setenv("HARMLESS", "1")
    env = scrubbed_env(tmp_path)
    assert "OPENAI_API_KEY" not in env and "GH_TOKEN" not in env and "MY_SECRET_THING" not in env
    assert env["HARMLESS"] == "1"
    for var in ("TMPDIR", "TRITON_CACHE_DIR", "TORCH_EXTENSIONS_DIR", "TORCHINDUCTOR_CACHE_DIR"):
        assert env[var].startswith(str(tmp_path))


def test_two_workers_get_different_directories():
    a, b = Worker(), Worker()
    try:
        assert a.workdir != b.workdir
    finally:
        a.close()
        b.close()
    assert not a.workdir.exists()


def test_worker_answers_and_dies_cleanly():
    with Worker() as w:
        reply = w.request({"op": "hello"}, timeout=60)
        assert reply["pid"] == w.pid
    with Worker() as w:
        with pytest.raises(WorkerFailure) as e:
            w.request({"op": "no_such_op"}, timeout=60)
        assert e.value.reason is Reason.CRASH


def test_spares_start_ahead_and_are_never_shared():
    """A spare is started before it is needed; taking it leaves none until refill; a dead spare is
    replaced by a fresh worker; close stops the one left."""
    import os
    import signal
    from kernelgate.sandbox import Spares
    sp = Spares()
    sp.refill()
    first = sp._spare
    assert first is not None and first.proc is not None and first.proc.poll() is None   # already running
    w = sp.take("candidate")
    assert w is first and w.label == "candidate" and sp._spare is None
    assert sp.take() is not w                          # none left: a new, unstarted worker
    sp.refill()
    os.killpg(sp._spare.proc.pid, signal.SIGKILL)
    sp._spare.proc.wait()
    fresh = sp.take()
    assert fresh.proc is None                          # the dead spare was not handed out
    sp.refill()
    left = sp._spare
    sp.close()
    assert left.proc.poll() is not None and sp._spare is None
    w.close()
