"""Fixtures of the LLM proposer tests: scripted servers, a closed port, fake keys, a Context."""
from __future__ import annotations

import socket
import threading
from http.server import ThreadingHTTPServer

import pytest

from kernelgate.graph import GraphInfo
from kernelgate.proposers import Context
from kernelgate.records import Contract
from llm_fakes import FAKE_ANTHROPIC_KEY, FAKE_OPENAI_KEY, REFERENCE, Script, _Handler


def _serve(style: str):
    script = Script()
    handler = type("H", (_Handler,), {"script": script, "style": style})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    script.url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        yield script
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def openai_server():
    yield from _serve("openai")


@pytest.fixture
def anthropic_server():
    yield from _serve("anthropic")


@pytest.fixture
def closed_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


@pytest.fixture(autouse=True)
def _keys(monkeypatch):
    """Fake keys in the environment (every test checks none leaks); no proxies for localhost."""
    for var in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy",
                "OPENAI_BASE_URL", "ANTHROPIC_BASE_URL", "KERNELGATE_LLM_PRICES", "ANTHROPIC_AUTH_TOKEN"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("OPENAI_API_KEY", FAKE_OPENAI_KEY)
    monkeypatch.setenv("ANTHROPIC_API_KEY", FAKE_ANTHROPIC_KEY)


@pytest.fixture
def ctx() -> Context:
    return Context(REFERENCE, "Model", "cpu", "cpu (test)", Contract(), GraphInfo(True, ("Parameter",), ("relu",)),
                   (), {"name": "cpu", "kind": "cpu", "sm_count": 2, "bandwidth": 2.0e10, "l2_bytes": 8 << 20},
                   baseline_ms=0.05)
