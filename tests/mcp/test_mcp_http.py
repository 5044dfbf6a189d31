"""The HTTP transport: localhost by default; off localhost it refuses to start without a token, and with one it
refuses every request that does not carry it. The server is bound to 0.0.0.0 on a free port (binding off
localhost works in the test machine's sandbox), and the middleware is also tested directly."""
import json
import os
import secrets
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

import pytest

from kernelgate.cli import main
from kernelgate.errors import KernelgateError
from kernelgate.mcp import auth

INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "test", "version": "1"}}}


def test_addresses():
    assert auth.parse_address(None) == ("127.0.0.1", 8765)
    assert auth.parse_address("0.0.0.0:9000") == ("0.0.0.0", 9000)
    assert auth.parse_address(":9000") == ("127.0.0.1", 9000) == auth.parse_address("9000")
    assert auth.parse_address("[::1]:9000") == ("::1", 9000)
    with pytest.raises(KernelgateError):
        auth.parse_address("host:port")
    assert auth.is_loopback("127.0.0.1") and auth.is_loopback("localhost") and auth.is_loopback("::1")
    assert not any(auth.is_loopback(h) for h in ("0.0.0.0", "192.168.1.4", "example.org"))


def test_off_localhost_without_a_token_it_refuses_to_start(capsys, monkeypatch):
    monkeypatch.delenv(auth.TOKEN_ENV, raising=False)
    assert main(["mcp", "--http", "0.0.0.0:0"]) == 2
    assert "refusing to listen on 0.0.0.0 without a token" in capsys.readouterr().err
    assert main(["mcp", "--http", "0.0.0.0:0", "--token", "short"]) == 2           # a token too short to hold
    assert "at least 16 characters" in capsys.readouterr().err
    auth.check_binding("127.0.0.1", None)                                           # localhost: no token needed
    auth.check_binding("0.0.0.0", "x" * 16)


def _asgi_call(token, headers, kind="http"):
    """One request through BearerAuth in front of an app: (the status or close message, whether the app ran)."""
    anyio = pytest.importorskip("anyio")
    sent, ran = [], []

    async def inner(scope, receive, send):
        ran.append(scope["type"])
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"ok"})

    async def receive():
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(msg):
        sent.append(msg)

    anyio.run(auth.BearerAuth(inner, token), {"type": kind, "method": "POST", "path": "/mcp", "headers": headers},
              receive, send)
    return sent[0].get("status", sent[0]["type"]), bool(ran)


def test_the_middleware_checks_the_header_on_every_request():
    token = secrets.token_urlsafe(24)
    assert _asgi_call(token, []) == (401, False)
    assert _asgi_call(token, [(b"authorization", b"Bearer " + b"x" * len(token))]) == (401, False)
    assert _asgi_call(token, [(b"authorization", token.encode())]) == (401, False)            # no scheme
    assert _asgi_call(token, [(b"authorization", f"Basic {token}".encode())]) == (401, False)
    assert _asgi_call(token, [(b"authorization", f"Bearer {token}".encode())] * 2) == (401, False)   # ambiguous
    assert _asgi_call(token, [], "websocket") == ("websocket.close", False)
    assert _asgi_call(token, [(b"authorization", f"Bearer {token}".encode())]) == (200, True)
    assert _asgi_call(token, [(b"authorization", f"bearer {token}".encode())]) == (200, True)


def _free_port():
    with socket.socket() as s:
        s.bind(("0.0.0.0", 0))
        return s.getsockname()[1]


def _post(url, body, headers):
    req = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST",
                                 headers={"content-type": "application/json",
                                          "accept": "application/json, text/event-stream", **headers})
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, r.read(4096).decode(errors="replace")
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode(errors="replace")


@pytest.mark.slow
def test_bound_off_localhost_a_request_without_the_token_is_refused(tmp_path):
    pytest.importorskip("mcp")
    pytest.importorskip("uvicorn")
    port, token = _free_port(), secrets.token_urlsafe(24)
    env = {**os.environ, auth.TOKEN_ENV: token}
    proc = subprocess.Popen([sys.executable, "-m", "kernelgate", "mcp", "--http", f"0.0.0.0:{port}"], env=env,
                            cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert proc.poll() is None, proc.communicate()[1].decode()
                assert time.monotonic() < deadline, "the server did not start listening"
                time.sleep(0.3)
        url = f"http://127.0.0.1:{port}/mcp"
        status, body = _post(url, INIT, {})
        assert status == 401 and json.loads(body)["error"] == "unauthorized"
        assert _post(url, INIT, {"authorization": "Bearer " + "y" * len(token)})[0] == 401
        status, body = _post(url, INIT, {"authorization": f"Bearer {token}"})
        assert status == 200 and '"serverInfo"' in body and "kernelgate" in body, body
    finally:
        proc.terminate()
        try:
            out, err = proc.communicate(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
    assert token not in err.decode() and not out.strip()                    # nothing on stdout; the token unlogged
