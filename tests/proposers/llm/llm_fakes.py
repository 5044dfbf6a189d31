"""Fakes for the LLM proposer tests: scripted model servers on localhost (OpenAI-compatible
/v1/chat/completions, Anthropic-style /v1/messages) replaying steps in order and recording every request,
scripted replies, a tiny workload, synthetic evaluations."""
from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler

from kernelgate.records import Candidate, Check, Evaluation, Reason, Speedup, Status, Timing, Verdict

FAKE_OPENAI_KEY = "sk-test-openai-0123456789abcdef"
FAKE_ANTHROPIC_KEY = "sk-ant-test-0123456789abcdef"

REFERENCE = '''import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.scale = nn.Parameter(torch.ones(n))

    def forward(self, x):
        return torch.relu(x * self.scale) + 1.0


def get_inputs():
    return [torch.randn(4, 8)]


def get_init_inputs():
    return [8]
'''

CORRECT = '''A fused version: one pass over the input.

```python
import torch


class ModelNew(Model):
    def forward(self, x):
        return torch.clamp_min(x * self.scale, 0.0).add_(1.0)
```
'''

BUILD_ERROR = '''```python
from torch.utils.cpp_extension import load_inline

_ext = load_inline(name="kg_relu", cpp_sources="torch::Tensor f(torch::Tensor x) { return foo(x); }",
                   functions=["f"])


class ModelNew(Model):
    def forward(self, x):
        return _ext.f(x * self.scale) + 1.0
```'''

WRONG = '''Fixed the build:

```py
class ModelNew(Model):
    def forward(self, x):
        return torch.relu(x) * self.scale + 2.0
```'''

PROSE = "I would fuse the multiply and the ReLU into one kernel, then add the constant in the epilogue."

SECOND = '''```
class ModelNew(Model):
    def forward(self, x):
        y = x * self.scale
        return y.clamp_min(0.0) + 1.0
```'''


class Script:
    """Steps replayed in order: ("reply", text[, (in_tokens, out_tokens)]), ("status", code, headers),
    ("sleep", seconds, text)."""

    def __init__(self) -> None:
        self.steps: list[tuple] = []
        self.models = ["coder"]
        self.models_status = 0
        self.requests: list[dict] = []
        self.lock = threading.Lock()

    def add(self, *steps: tuple) -> "Script":
        self.steps.extend(steps)
        return self

    def next(self) -> tuple:
        with self.lock:
            return self.steps.pop(0) if self.steps else ("status", 500, {})


class _Handler(BaseHTTPRequestHandler):
    script: Script
    style: str

    def log_message(self, *args):  # quiet
        pass

    def do_GET(self):  # noqa: N802 - the model list (`probe`): script.models, or script.models_status
        with self.script.lock:
            self.script.requests.append({"path": self.path, "body": None,
                                         "headers": {k.lower(): v for k, v in self.headers.items()}})
        if self.script.models_status:
            self._send(self.script.models_status, {"error": {"message": "scripted", "type": "scripted"}}, {})
            return
        if self.style == "openai":
            data = [{"id": m, "object": "model", "created": 0, "owned_by": "test"} for m in self.script.models]
            self._send(200, {"object": "list", "data": data}, {})
        else:
            data = [{"id": m, "type": "model", "display_name": m, "created_at": "2025-01-01T00:00:00Z"}
                    for m in self.script.models]
            self._send(200, {"data": data, "has_more": False, "first_id": None, "last_id": None}, {})

    def do_POST(self):  # noqa: N802
        body = json.loads(self.rfile.read(int(self.headers.get("content-length", 0))) or b"{}")
        with self.script.lock:
            self.script.requests.append({"path": self.path, "body": body,
                                         "headers": {k.lower(): v for k, v in self.headers.items()}})
        step = self.script.next()
        if step[0] == "sleep":
            time.sleep(step[1])
            step = ("reply", step[2])
        if step[0] == "status":
            code, headers = step[1], step[2]
            err = ({"error": {"message": f"scripted {code}", "type": "scripted"}} if self.style == "openai"
                   else {"type": "error", "error": {"type": "rate_limit_error" if code == 429 else "api_error",
                                                    "message": f"scripted {code}"}})
            self._send(code, err, headers)
            return
        text = step[1]
        tin, tout = step[2] if len(step) > 2 else (100, 50)
        model = body.get("model", "m")
        if self.style == "openai":
            doc = {"id": "chatcmpl-1", "object": "chat.completion", "created": 0, "model": model,
                   "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                                "finish_reason": "stop"}],
                   "usage": {"prompt_tokens": tin, "completion_tokens": tout, "total_tokens": tin + tout}}
        else:
            doc = {"id": "msg_1", "type": "message", "role": "assistant", "model": model,
                   "content": [{"type": "text", "text": text}], "stop_reason": "end_turn", "stop_sequence": None,
                   "usage": {"input_tokens": tin, "output_tokens": tout}}
        self._send(200, doc, {})

    def _send(self, code: int, doc: dict, headers: dict) -> None:
        data = json.dumps(doc).encode()
        try:
            self.send_response(code)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            for k, v in headers.items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(data)
        except OSError:      # the client gave up (a timeout test)
            pass


def rejected(c: Candidate, reason: Reason, message: str, check: str, detail: str) -> Evaluation:
    return Evaluation(c, Verdict(Status.REJECTED, reason, message, (Check("build", True, "ok"),
                                                                     Check(check, False, detail))))


def accepted(c: Candidate, ms: float, base_ms: float = 0.05, insight: dict | None = None) -> Evaluation:
    t = Timing(c.id, (ms,) * 5, ms, ms, 0.01, "candidate")
    b = Timing("eager", (base_ms,) * 5, base_ms, base_ms, 0.01)
    r = base_ms / ms
    return Evaluation(c, Verdict(Status.ACCEPTED, Reason.OK, "all checks passed"), t, b,
                      Speedup(r, r * 0.95, r * 1.05, 1.03, r * 0.95 > 1.03), insight)
