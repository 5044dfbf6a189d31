"""The MCP server: kernelgate's gate and timer as tools for coding agents (the official `mcp` SDK's FastMCP,
named MCPServer from mcp 2).

Every evaluation runs as a job of its own (kernelgate/mcp/jobs.py, under runner.Limits: a time limit per call,
a cap on evaluations at once); candidate code runs only in the gate's confined workers, as for the CLI.
Candidates come as a path or as source text (written to a private temporary file for the call). Replies carry
the records the CLI's --json prints, trimmed for an agent's context, with one line first (replies.py).
Results the gate flags and contract assumptions agents propose go to the review queue (kernelgate/review.py)
and wait for a person. Logs go to stderr; over stdio nothing but the protocol reaches stdout.
"""
from __future__ import annotations

import json
import logging
import os
import re
import sys
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, AsyncIterator

from .. import review
from ..errors import KernelgateError
from ..records import Reason
from ..store import Store
from . import replies
from .runner import Jobs, Limits, workspace, write_source

log = logging.getLogger("kernelgate.mcp")

INSTRUCTIONS = """kernelgate checks candidate PyTorch implementations (a file defining `class ModelNew`, with the
reference's constructor arguments) against a reference (KernelBench format: `class Model`, `get_inputs()`,
`get_init_inputs()`), and times them fairly against eager PyTorch and torch.compile. Typical loop:
load_workload (what it computes, its roofline floor) -> verify a candidate (by path or source text; a rejection
says why in its first line) -> fix and verify again -> bench the accepted one (its speedup and whether it is
claimable), or submit it to an optimize run (run_history shows that run's candidates and best). Speedups above
3x, timer disagreements and times near the roofline floor wait for a person's review; so do contract
assumptions (lower precision, input domains): propose_assumption, then pass the accepted item's id as
`assumption`. Paths are relative to the server's working directory."""


def _sdk() -> tuple[Any, Any]:
    """(the server class, ToolError) of the installed SDK: MCPServer (mcp 2) or FastMCP (mcp 1)."""
    try:
        from mcp.server.mcpserver import MCPServer
        from mcp.server.mcpserver.exceptions import ToolError
        return MCPServer, ToolError
    except ImportError:
        pass
    try:
        from mcp.server.fastmcp import FastMCP
        from mcp.server.fastmcp.exceptions import ToolError
        return FastMCP, ToolError
    except ImportError:
        raise KernelgateError("the MCP server needs the mcp package: pip install 'kernelgate[mcp]'",
                              Reason.USAGE) from None


RUN_ID = re.compile(r"^[0-9a-f]{6,32}$")


def _file(spec: str) -> str:
    """The file of `file.py` or `file.py:Class`."""
    head, sep, tail = spec.rpartition(":")
    return head if sep and head.endswith(".py") and tail.isidentifier() else spec


class Tools:
    """What the tools do, apart from the SDK (tests call these directly too)."""

    def __init__(self, store: str | None = None, limits: Limits | None = None):
        self.store_path = store
        self.store = Store(store)              # a bad store is a usage error now, not at the first call
        self.jobs = Jobs(limits or Limits(), str(self.store.path))

    # ------------------------------------------------------------ arguments
    @staticmethod
    def path(text: str, what: str) -> str:
        """An existing file (`file.py` or `file.py:Class`), absolute; usage error otherwise."""
        if not text or not str(text).strip():
            raise KernelgateError(f"{what}: give a path", Reason.USAGE)
        base = _file(str(text))
        p = Path(base).expanduser()
        if not p.is_file():
            raise KernelgateError(f"{what}: no such file {p} (paths are relative to {os.getcwd()})", Reason.USAGE)
        return str(p.resolve()) + str(text)[len(base):]

    def contract(self, ref: str, assumption: int | None) -> dict[str, Any] | None:
        """An accepted assumption's contract for this workload (None: the default contract)."""
        if assumption is None:
            return None
        from .. import workload
        return review.accepted_contract(self.store, assumption, workload.file_hash(_file(ref)))

    @staticmethod
    def one(path: str | None, source: str | None) -> None:
        if (path is None) == (source is None):
            raise KernelgateError("give the candidate as candidate_path or as candidate_source (one of them)",
                                  Reason.USAGE)

    def run(self, run: str) -> dict[str, Any]:
        """An optimize run from its --out folder (run.json) or its id (known to the store)."""
        from ..submit import load_run
        p = Path(run).expanduser()
        if p.is_dir():
            return {**load_run(p), "out": str(p.resolve())}
        if RUN_ID.match(run) and self.store.evaluations(run):
            return {"run_id": run}
        raise KernelgateError(f"run {run}: neither an optimize --out folder (with run.json) nor a run id in the store "
                              f"{self.store.path}", Reason.USAGE)

    async def job(self, kind: str, args: dict[str, Any], d: Path, timeout: float | None) -> dict[str, Any]:
        res = await self.jobs.run(kind, args, d, timeout)
        if not res.get("ok"):
            raise JobError(res.get("message", ""), str(res.get("reason") or "internal"))
        return res["doc"]

    # ------------------------------------------------------------ tools
    async def load_workload(self, ref: str, target: str = "cpu", inputs: str | None = None,
                            assumption: int | None = None, baselines: bool = False, rounds: int = 5, iters: int = 10,
                            timeout_s: float | None = None) -> dict[str, Any]:
        ref = self.path(ref, "ref")
        args = {"ref": ref, "target": target, "inputs": inputs, "contract": self.contract(ref, assumption),
                "baselines": bool(baselines), "rounds": rounds, "iters": iters}
        with workspace() as d:
            return replies.workload_reply(await self.job("workload", args, d, timeout_s))

    async def verify(self, ref: str, candidate_path: str | None = None, candidate_source: str | None = None,
                     target: str = "cpu", inputs: str | None = None, assumption: int | None = None,
                     trials: int | None = None, timeout_s: float | None = None) -> dict[str, Any]:
        ref = self.path(ref, "ref")
        self.one(candidate_path, candidate_source)
        con = self.contract(ref, assumption)
        with workspace() as d:
            cand = (self.path(candidate_path, "candidate_path") if candidate_path is not None
                    else write_source(d, candidate_source or "", "candidate"))
            args = {"ref": ref, "cand": cand, "target": target, "inputs": inputs, "contract": con, "trials": trials}
            return replies.verify_reply(await self.job("verify", args, d, timeout_s))

    async def bench(self, ref: str, candidate_paths: list[str] | None = None,
                    candidate_sources: list[str] | None = None, names: list[str] | None = None, target: str = "cpu",
                    inputs: str | None = None, assumption: int | None = None, rounds: int = 10, iters: int = 10,
                    baselines: str = "eager,compile", timeout_s: float | None = None) -> dict[str, Any]:
        ref = self.path(ref, "ref")
        con = self.contract(ref, assumption)
        which = [b.strip() for b in baselines.split(",") if b.strip()]
        with workspace() as d:
            cands = [self.path(p, "candidate_paths") for p in candidate_paths or ()]
            taken = {Path(c.split(":")[0]).stem for c in cands}
            labels = list(names or ())
            for i, src in enumerate(candidate_sources or ()):
                cands.append(write_source(d, src, labels[i] if i < len(labels) else f"candidate_{i + 1}", taken))
            args = {"ref": ref, "cands": cands, "target": target, "inputs": inputs, "contract": con,
                    "rounds": rounds, "iters": iters, "which": which}
            doc = await self.job("bench", args, d, timeout_s)
        items = review.queue_bench(self.store, doc)
        return replies.bench_reply(doc, {k: review.short(v) for k, v in items.items()})

    async def profile(self, ref: str, candidate_path: str | None = None, candidate_source: str | None = None,
                      target: str = "cpu", inputs: str | None = None, assumption: int | None = None,
                      forwards: int = 5, warmup: int = 3, records: int = 20,
                      timeout_s: float | None = None) -> dict[str, Any]:
        ref = self.path(ref, "ref")
        con = self.contract(ref, assumption)
        with workspace() as d:
            cand = None
            if candidate_path is not None or candidate_source is not None:
                self.one(candidate_path, candidate_source)
                cand = (self.path(candidate_path, "candidate_path") if candidate_path is not None
                        else write_source(d, candidate_source or "", "candidate"))
            args = {"ref": ref, "cand": cand, "target": target, "inputs": inputs, "contract": con,
                    "forwards": forwards, "warmup": warmup, "records": max(0, min(int(records), 200))}
            return replies.profile_reply(await self.job("profile", args, d, timeout_s))

    async def explain_tolerance(self, ref: str, target: str = "cpu", inputs: str | None = None,
                                assumption: int | None = None, timeout_s: float | None = None) -> dict[str, Any]:
        ref = self.path(ref, "ref")
        args = {"ref": ref, "target": target, "inputs": inputs, "contract": self.contract(ref, assumption)}
        with workspace() as d:
            return replies.explain_reply(await self.job("explain", args, d, timeout_s))

    async def submit(self, run_dir: str, candidate_path: str | None = None, candidate_source: str | None = None,
                     name: str | None = None, model: str | None = None, inputs: str | None = None,
                     assumption: int | None = None, rounds: int | None = None, iters: int | None = None,
                     timeout_s: float | None = None) -> dict[str, Any]:
        run = self.run(run_dir)
        if "out" not in run:
            raise KernelgateError("submit needs the run's --out folder (run_dir), not only its id", Reason.USAGE)
        self.one(candidate_path, candidate_source)
        model = self.path(model, "model") if model else None
        con = None
        if assumption is not None:
            from ..submit import find_workload
            con = self.contract(find_workload(Path(run["out"]), run, model, inputs).path, assumption)
        with workspace() as d:
            cand = (self.path(candidate_path, "candidate_path") if candidate_path is not None
                    else write_source(d, candidate_source or "", name or "agent"))
            args = {"out_dir": run["out"], "cand": cand, "model": model, "inputs": inputs, "contract": con}
            if rounds or iters:
                args.update(rounds=rounds or 10, iters=iters or 10, warmup_ms=100.0)
            doc = await self.job("submit", args, d, timeout_s)
        c = doc.get("candidate") or {}
        if candidate_source is not None:         # the call's file is gone; the judged one stays with the run
            doc["file"] = "(source text)"
        doc["candidate_file"] = str(Path(run["out"]) / "candidates" / f"{c.get('id')}.py")
        item = review.queue_submission(self.store, doc, doc.pop("floor_fraction", None))
        return replies.submission_reply(doc, review.short(item) if item else None)

    async def run_history(self, run: str, limit: int = 20) -> dict[str, Any]:
        from ..records import Evaluation
        from ..submit import run_best
        r = self.run(run)
        evs = self.store.evaluations(r["run_id"])
        try:
            best = run_best([Evaluation.from_json(e) for e in evs])
        except (KeyError, TypeError, ValueError):
            best = None
        return replies.history_reply(r, evs, best.to_json() if best else None, self.store.hints(r["run_id"]),
                                     max(0, int(limit)))

    async def add_hint(self, run: str, text: str) -> dict[str, Any]:
        r = self.run(run)
        if not text or not text.strip():
            raise KernelgateError("the hint is empty: give its text", Reason.USAGE)
        hid = self.store.add_hint(r["run_id"], text.strip()[:4000], "mcp")
        hints = self.store.hints(r["run_id"])
        return {"summary": f"hint {hid} added to run {r['run_id']} ({len(hints)} in all): a later or resumed optimize "
                           "of the run reads it (its LLM proposer puts hints in every prompt)",
                "status": "ok", "run_id": r["run_id"], "hint_id": hid, "hints": len(hints)}

    async def propose_assumption(self, ref: str, contract: dict[str, Any], why: str) -> dict[str, Any]:
        from .. import workload
        path = _file(self.path(ref, "ref"))
        item = review.propose_assumption(self.store, path, workload.file_hash(path), contract, why)
        return {"summary": f"assumption {item['id']} is {item['status']}: {item['subject']}"
                           + (" (waits for a person: kernelgate review)" if item["status"] == "pending" else
                              f"; pass assumption={item['id']} to use it" if item["status"] == "accepted" else ""),
                "status": "ok", "review": review.short(item), "assumptions": item["evidence"].get("assumptions")}

    async def review_status(self, item: int) -> dict[str, Any]:
        it = self.store.review(int(item))
        if it is None:
            raise KernelgateError(f"no review item {item}", Reason.USAGE)
        note = f": {it['note']}" if it["note"] else ""
        return {"summary": f"item {it['id']} ({it['kind']}): {it['status']}{note}", "status": "ok",
                "review": review.short(it), "subject": it["subject"]}


class JobError(KernelgateError):
    """A job that ended without a result document: its reason code as the job gave it (a records.Reason value,
    or the server's own: timeout, busy, crash, internal)."""

    def __init__(self, message: str, code: str):
        try:
            reason = Reason(code)
        except ValueError:
            reason = Reason.TASK_LOAD
        super().__init__(message, reason)
        self.code = code


TOOLS = ("load_workload", "verify", "bench", "profile", "explain_tolerance", "submit", "run_history", "add_hint",
         "propose_assumption", "review_status")


def build(store: str | None = None, limits: Limits | None = None, stdio: bool = False) -> Any:
    """The SDK server with kernelgate's tools registered."""
    Server, ToolError = _sdk()
    tools = Tools(store, limits)

    @asynccontextmanager
    async def lifespan(_: Any) -> AsyncIterator[None]:
        saved = sys.stdout
        if stdio:                        # the transport holds the wire; a stray print goes to stderr
            sys.stdout = sys.stderr
        try:
            yield None
        finally:
            sys.stdout = saved

    app = Server("kernelgate", instructions=INSTRUCTIONS, lifespan=lifespan)
    for name in TOOLS:
        app.tool(name=name, description=DESCRIPTIONS[name])(_wrap(getattr(tools, name), ToolError))
    app.kernelgate_tools = tools
    return app


def _wrap(fn: Any, tool_error: Any) -> Any:
    """The tool as the SDK sees it: the same signature; a usage or task error becomes an error result whose text
    is the CLI's --json error document (with advice)."""
    import functools

    @functools.wraps(fn)
    async def tool(*args: Any, **kwargs: Any) -> dict[str, Any]:
        try:
            return await fn(*args, **kwargs)
        except KernelgateError as e:
            code = getattr(e, "code", e.reason.value)
            raise tool_error(json.dumps(replies.error_reply({"reason": code, "message": str(e)}))) from None
    return tool


DESCRIPTIONS = {
    "load_workload": "Load a reference (KernelBench format) on a target: inputs, outputs, parameters, whether the "
                     "gate can verify it, its roofline floor, and its baselines (kept ones, or measured with "
                     "baselines=true).",
    "verify": "Check a candidate (class ModelNew) against the reference through the full gate: candidate_path or "
              "candidate_source. The reply's summary says ACCEPTED, or REJECTED with the failing check and what "
              "to fix.",
    "bench": "Time eager, torch.compile and verified candidates side by side on the judge's clock: medians, spread, "
             "speedup over the faster baseline with its 95% CI and whether it is claimed. Lower rounds/iters for a "
             "quick look.",
    "profile": "Profile the reference and optionally a candidate: bottleneck line (memory/compute/launch/latency-"
               "bound), per-kernel or per-op table, fingerprint distance.",
    "explain_tolerance": "How the allowed error of each output is derived (precision, reduction length, the "
                         "reference's own error).",
    "submit": "Submit a candidate to an optimize run (run_dir: its --out folder): the gate, a measurement against the "
              "run's baselines, recorded in the run's population. Give the file ModelNew only: the reference is "
              "put before it.",
    "run_history": "An optimize run's candidates (newest last; verdict, time, speedup, bottleneck) and its best; run "
                   "is the --out folder or the run id.",
    "add_hint": "Add a hint to an optimize run (its --out folder or id): kept in the store; a later or resumed "
                "optimize passes it to its LLM proposer.",
    "propose_assumption": "Propose a contract assumption for a workload (e.g. {\"precision\": [\"bf16\"]} or "
                          "{\"domain\": {\"0\": [-1, 1]}}) with why it holds; a person accepts or rejects it "
                          "(kernelgate review). Once accepted, pass its id as `assumption`.",
    "review_status": "The state of a review item (a flagged result or a proposed assumption): pending, accepted or "
                     "rejected, with the person's note.",
}


async def serve_http(app: Any, host: str, port: int, token: str | None) -> None:
    """Streamable HTTP on host:port, every request checked for the token when one is set (auth.py)."""
    import uvicorn
    from .auth import BearerAuth
    try:
        asgi = app.streamable_http_app(host=host)          # mcp 2: DNS-rebinding protection on localhost
    except TypeError:
        asgi = app.streamable_http_app()                   # mcp 1: settings on the server
    if token:
        asgi = BearerAuth(asgi, token)
    log.warning("kernelgate MCP server on http://%s:%d/mcp%s", host, port, " (bearer token required)" if token else "")
    await uvicorn.Server(uvicorn.Config(asgi, host=host, port=port, log_level="warning")).serve()
