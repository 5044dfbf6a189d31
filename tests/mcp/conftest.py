"""MCP tests: small workloads written by the tests, and a session with the real MCP client over stdio (the SDK's
stdio client starting `python -m kernelgate mcp`)."""
import json
import os
import sys
from pathlib import Path

import pytest

CORPUS = Path(__file__).resolve().parent.parent / "corpus"

REF = """
import torch
import torch.nn as nn
class Model(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.lin = nn.Linear(d, d)
    def forward(self, x):
        return torch.relu(self.lin(x)) * 2.0
def get_inputs():
    return [torch.randn(64, 128)]
def get_init_inputs():
    return [128]
"""
# wrong: the scale is missing
WRONG = """
import torch
import torch.nn as nn
class ModelNew(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.lin = nn.Linear(d, d)
    def forward(self, x):
        return torch.relu(self.lin(x))
"""
# fixed: the scale folded into one addmm and a relu
RIGHT = """
import torch
import torch.nn as nn
class ModelNew(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.lin = nn.Linear(d, d)
    def forward(self, x):
        return torch.relu(torch.addmm(self.lin.bias, x, self.lin.weight.t())) * 2.0
"""


@pytest.fixture
def ref_file(tmp_path):
    p = tmp_path / "ref.py"
    p.write_text(REF)
    return p


def call_result(res):
    """(is_error, the reply document) of a CallToolResult: an error's text is the CLI's --json error document
    after the SDK's prefix."""
    text = res.content[0].text if res.content else ""
    if res.is_error:
        return True, json.loads(text[text.index("{"):])
    doc = res.structured_content if isinstance(res.structured_content, dict) else json.loads(text)
    return False, doc


def stdio_session(steps, cwd, env=None):
    """Run `await steps(call)` against `python -m kernelgate mcp` started by the SDK's stdio client in `cwd`;
    `call(tool, **arguments)` returns (is_error, document). Returns what steps returns."""
    import anyio
    from mcp import ClientSession, StdioServerParameters, stdio_client

    async def main():
        params = StdioServerParameters(command=sys.executable, args=["-m", "kernelgate", "mcp"],
                                       env={**os.environ, **(env or {})}, cwd=str(cwd))
        async with stdio_client(params) as (r, w):
            async with ClientSession(r, w) as s:
                await s.initialize()
                names = {t.name for t in (await s.list_tools()).tools}

                async def call(tool, /, **arguments):
                    assert tool in names, f"the server has no tool {tool}: {sorted(names)}"
                    return call_result(await s.call_tool(tool, arguments))
                return await steps(call)
    return anyio.run(main)
