"""Fixtures of the search tests: the LLM tests' scripted OpenAI-compatible server (tests/proposers/llm)."""
from __future__ import annotations

import sys
import threading
from http.server import ThreadingHTTPServer
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "proposers" / "llm"))
from llm_fakes import FAKE_OPENAI_KEY, Script, _Handler  # noqa: E402


@pytest.fixture
def openai_server(monkeypatch):
    for var in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy",
                "OPENAI_BASE_URL", "KERNELGATE_LLM_PRICES"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("OPENAI_API_KEY", FAKE_OPENAI_KEY)
    script = Script()
    server = ThreadingHTTPServer(("127.0.0.1", 0), type("H", (_Handler,), {"script": script, "style": "openai"}))
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    script.url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        yield script
    finally:
        server.shutdown()
        server.server_close()
