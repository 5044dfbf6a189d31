"""One end-to-end LLM-driven `kernelgate optimize` per problem against a scripted model, with the timeline of
every candidate: seconds waiting for the model, building, verifying (trials), timing; its verdict and reason.

    python benchmarks/llm_timeline.py DEV_DIR --target cuda --budget 90 --out $OUT/llm_timeline_h200.json \
        --keep $OUT/runs
    python benchmarks/llm_timeline.py .kbdev --target cpu --budget 240 --out benchmarks/results/llm_timeline_cpu.json

On a GPU machine without the `openai` SDK, from the repository root with the wheels in `.whl/` (git-ignored;
`pip download` of openai 3.57.0 and what it needs that such a machine lacks: pydantic 2.14.4, pydantic-core
2.50.5, annotated-types, typing-inspection, typing-extensions 4.16 (pydantic-core imports its `Sentinel`),
jiter, sniffio, httpx2, httpcore2, truststore; cp312 manylinux wheels):

    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
        && export PYTHONPATH=/tmp/site:$PYTHONPATH && python3 benchmarks/llm_timeline.py .kbdev --target cuda ...

A run ends once the scripted replies are used up (then the confirmation and the emitted module's check), so
`--budget` bounds a run rather than setting its length. The search stops asking for candidates when what is left
would not cover the next one and the end of the run (the faster baseline's emitted check, about 1.3 times what
building and timing a baseline took, or the best candidate's confirmation): on the 2-core CPU a 120 s budget
left room for one or two of the three replies and 240 s for all three, each run still ending after 60-80 s; the
H200 suite's 45 s runs evaluated one or two candidates (benchmarks/results/suite_h200_issue13_rerun_runs), hence
`--budget 90` for cuda.

DEV_DIR is a KernelBench-format directory (levels as subfolders); `--problems` picks files by globs relative to
it (default: three level-2 problems: a GEMM with a pointwise epilogue, with GELU + softmax, with GroupNorm +
Hardtanh; [1024, 8192] fp32 inputs (32 MiB), 8192 x 8192 weights). The benchmark starts an OpenAI-compatible
server on 127.0.0.1 that replays, in order, what an agent wrote for each problem
(benchmarks/llm_timeline_replies.py: Triton kernels for cuda, plain PyTorch for cpu), then runs
`python -m kernelgate optimize PROBLEM --proposer llm --llm-endpoint URL --llm-agents explorer
--llm-max-requests N` in a process of its own per problem (fresh store, `--budget`), so
every candidate comes from the scripted model, goes through the gate and is timed; one explorer agent makes the
turns deterministic (explore after an accepted candidate, fix after a rejected one, with the gate's reason).

Figures come from the run's own records (result.json): per candidate the model wait is its LLM usage (`wait_s` +
`queue_s`, the report's "Model usage per candidate"), and build / verify / timing are the search's phases for that
candidate (`phases.per_candidate`: worker start + build, trials + re-check, timing; profiling apart). The
benchmark adds only times it measured itself: when the server received and answered each request, when each
progress line was printed, each run's wall time. `--target cpu` shrinks the problems (`--shrink`, default 16:
module-level integer constants of 256 and more divided by it) so the flow runs on a small CPU.

Writes one JSON document (`--out`, `-` for stdout) with the conditions (kernelgate.versions.conditions), the
command, per problem the outcome and the per-candidate timeline; prints a short table last. Exit 0 when every
problem's optimize finished with a result, 1 when one did not, 2 on a usage error (no openai SDK, no problem
matched, a problem without scripted replies, no GPU for cuda).
"""
from __future__ import annotations

import argparse
import fnmatch
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from llm_timeline_replies import REPLIES  # noqa: E402

#: a GEMM + pointwise epilogue, a GEMM + GELU + row softmax, a GEMM + GroupNorm + Hardtanh ([1024, 8192] inputs)
DEFAULT_PROBLEMS = ("level2/81_Gemm_Swish_Divide_Clamp_Tanh_Clamp.py", "level2/99_Matmul_GELU_Softmax.py",
                    "level2/30_Gemm_GroupNorm_Hardtanh.py")
MODEL = "scripted-agent"
#: a candidate's phases (search/phases.py) grouped into the timeline's columns
GROUPS = {"build": ("worker start", "build", "spares"), "verify": ("trials", "re-check"), "timing": ("timing",),
          "profiling": ("profiling",)}
SHRINK_MIN = 256           # --shrink divides module-level integer constants from this value up


# ------------------------------------------------------------------ the scripted model

class Script:
    """One problem's replies, replayed in order; every request recorded with the times it was received and
    answered (seconds since `t0`, the problem's start)."""

    def __init__(self, replies: list[str], delay: float = 0.0):
        self.replies, self.delay = list(replies), delay
        self.requests: list[dict[str, Any]] = []
        self.lock = threading.Lock()
        self.t0 = time.monotonic()

    def take(self, body: dict) -> tuple[int | None, str | None]:
        msgs = body.get("messages") or []
        user = next((m.get("content") or "" for m in reversed(msgs) if m.get("role") == "user"), "")
        with self.lock:
            n = len(self.requests)
            rec = {"received_s": round(time.monotonic() - self.t0, 3),
                   "reply": n + 1 if n < len(self.replies) else None,
                   "messages": len(msgs), "system_chars": sum(len(m.get("content") or "") for m in msgs
                                                             if m.get("role") == "system"),
                   "request_first_line": user.strip().splitlines()[0][:300] if user.strip() else "",
                   "feedback": feedback_lines(user)}
            self.requests.append(rec)
        if n >= len(self.replies):
            return None, None
        if self.delay > 0:
            time.sleep(self.delay)
        rec["answered_s"] = round(time.monotonic() - self.t0, 3)
        return n, self.replies[n]


def feedback_lines(user: str, limit: int = 12) -> list[str]:
    """What the request told the agent about its last candidate (the gate's verdict and error lines)."""
    lines = user.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith("Your last candidate")
                  or line.startswith("Your last reply")), None)
    if start is None:
        return []
    return [line[:300] for line in lines[start:start + limit]]


class Handler(BaseHTTPRequestHandler):
    script: Script | None = None           # set per problem

    def log_message(self, *args):  # quiet
        pass

    def do_GET(self):  # noqa: N802 - the model list (the proposer's probe before a run)
        if self.path.rstrip("/").endswith("/models"):
            self._send(200, {"object": "list", "data": [{"id": MODEL, "object": "model", "created": 0,
                                                         "owned_by": "llm_timeline"}]})
        else:
            self._send(404, {"error": {"message": "not found", "type": "invalid_request_error"}})

    def do_POST(self):  # noqa: N802 - chat completions
        body = json.loads(self.rfile.read(int(self.headers.get("content-length", 0))) or b"{}")
        script = type(self).script
        if script is None or not self.path.rstrip("/").endswith("/chat/completions"):
            self._send(404, {"error": {"message": "no script", "type": "invalid_request_error"}})
            return
        n, text = script.take(body)
        if text is None:       # not retried by the client (400): the run has no more replies
            self._send(400, {"error": {"message": "the scripted replies are exhausted",
                                       "type": "invalid_request_error"}})
            return
        # no "usage": the backend estimates tokens from characters and records them as estimated
        self._send(200, {"id": f"chatcmpl-{n + 1}", "object": "chat.completion", "created": int(time.time()),
                         "model": body.get("model") or MODEL,
                         "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                                      "finish_reason": "stop"}]})

    def _send(self, code: int, doc: dict) -> None:
        data = json.dumps(doc).encode()
        try:
            self.send_response(code)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        except OSError:
            pass


def serve() -> tuple[ThreadingHTTPServer, str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}/v1"


# ------------------------------------------------------------------ problems

def pick(dev: Path, globs: list[str]) -> list[Path]:
    files = sorted(p for p in dev.rglob("*.py") if p.is_file())
    out: list[Path] = []
    for g in globs:
        hits = [p for p in files if fnmatch.fnmatch(p.relative_to(dev).as_posix(), g)]
        out += [p for p in hits if p not in out]
    return out


def replies_for(path: Path, target: str) -> list[tuple[str, str, str]] | None:
    by_target = REPLIES.get(path.stem)
    return None if by_target is None else by_target.get(target)


def shrink(src: str, factor: int) -> tuple[str, dict[str, list[int]]]:
    """Module-level integer constants of SHRINK_MIN and more divided by `factor` (the problem's sizes)."""
    changed: dict[str, list[int]] = {}
    if factor <= 1:
        return src, changed

    def sub(m: re.Match) -> str:
        v = int(m.group(3))
        if v < SHRINK_MIN:
            return m.group(0)
        new = max(1, v // factor)
        changed[m.group(1)] = [v, new]
        return f"{m.group(1)}{m.group(2)}{new}{m.group(4)}"
    return re.sub(r"^([A-Za-z_]\w*)(\s*=\s*)(\d+)(\s*(?:#.*)?)$", sub, src, flags=re.M), changed


def child_env(store: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k.upper() not in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "OPENAI_API_KEY", "OPENAI_BASE_URL",
                                "KERNELGATE_LLM_PRICES")}
    env["NO_PROXY"] = env["no_proxy"] = "127.0.0.1,localhost"
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT)] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    env["PYTHONUNBUFFERED"] = "1"
    env["KERNELGATE_STORE"] = str(store)
    return env


class Scrub:
    """Paths of this machine out of what is recorded: the work folder, the dev folder, the repository."""

    def __init__(self, pairs: list[tuple[Path, str]]):
        self.pairs = sorted(((str(p), s) for p, s in pairs), key=lambda x: -len(x[0]))

    def __call__(self, x: Any) -> Any:
        if isinstance(x, str):
            for p, s in self.pairs:
                x = x.replace(p, s)
            return x
        if isinstance(x, list):
            return [self(v) for v in x]
        if isinstance(x, dict):
            return {k: self(v) for k, v in x.items()}
        return x


# ------------------------------------------------------------------ one problem

def run_problem(path: Path, rel: str, args: argparse.Namespace, url: str, work: Path, scrub: Scrub) -> dict:
    replies = replies_for(path, args.target)
    assert replies is not None
    here = work / path.stem
    if here.exists():
        shutil.rmtree(here)
    here.mkdir(parents=True)
    src, shrunk = shrink(path.read_text(), args.shrink)
    problem = path
    if shrunk:
        problem = here / path.name
        problem.write_text(src)
    out_dir, store = here / "out", here / "store.sqlite"
    cmd = [sys.executable, "-m", "kernelgate", "optimize", str(problem), "--target", args.target,
           "--budget", str(args.budget), "--out", str(out_dir), "--force", "--store", str(store),
           "--proposer", "llm", "--llm-endpoint", url, "--llm-model", MODEL, "--llm-agents", "explorer",
           "--llm-max-requests", str(len(replies))]
    script = Script([text for _, _, text in replies], args.reply_delay)
    Handler.script = script
    log: list[dict[str, Any]] = []
    sizes = ", ".join(f"{k} {a}->{b}" for k, (a, b) in shrunk.items())
    say(f"== {rel}: {len(replies)} scripted replies, budget {args.budget} s"
        + (f", shrunk by {args.shrink}: {sizes}" if shrunk else ""))
    t0 = time.monotonic()
    script.t0 = t0
    proc = subprocess.Popen(cmd, cwd=ROOT, env=child_env(store), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, bufsize=1)
    timer = threading.Timer(args.timeout, proc.kill)
    timer.start()
    try:
        for line in proc.stdout:
            line = scrub(line.rstrip("\n"))
            at = round(time.monotonic() - t0, 2)
            log.append({"t_s": at, "line": line})
            say(f"  {at:7.1f}s  {line}")
        rc = proc.wait()
    finally:
        timer.cancel()
    wall = time.monotonic() - t0
    Handler.script = None
    rec: dict[str, Any] = {
        "problem": rel, "exit_code": rc, "wall_s": round(wall, 2), "shrunk": shrunk,
        "command": scrub(" ".join(["python" if a == sys.executable else a for a in cmd])),
        "replies": [{"reply": k + 1, "intent": intent, "expected": expected} for k, (intent, expected, _) in
                    enumerate(replies)],
        "requests": script.requests, "log": log}
    res_file = out_dir / "result.json"
    if rc != 0 or not res_file.exists():
        rec["error"] = next((e["line"] for e in reversed(log) if e["line"].strip()), f"exit {rc}")
        return scrub(rec)
    result = json.loads(res_file.read_text())
    rec.update(summarize(result, script.requests, log, replies))
    if args.keep:
        keep = Path(args.keep)
        keep.mkdir(parents=True, exist_ok=True)
        (keep / f"{path.stem}_result.json").write_text(scrub(res_file.read_text()))
        if (out_dir / "report.md").exists():
            (keep / f"{path.stem}_report.md").write_text(scrub((out_dir / "report.md").read_text()))
    return scrub(rec)


def _t(d: dict | None) -> float | None:
    return None if not isinstance(d, dict) or d.get("median_ms") is None else round(float(d["median_ms"]), 4)


def summarize(result: dict, requests: list[dict], log: list[dict], replies: list) -> dict:
    """The outcome and, per scripted reply, the candidate's timeline, from result.json's records."""
    evals = result.get("evaluations") or []
    by_id = {(e.get("candidate") or {}).get("id"): (k, e) for k, e in enumerate(evals)}
    per = (result.get("phases") or {}).get("per_candidate") or {}
    printed = {}                                      # evaluation index -> when its progress line was printed
    for entry in log:
        m = re.match(r"^\[(\d+)\] ", entry["line"])
        if m:
            printed.setdefault(int(m.group(1)) - 1, entry["t_s"])
    llm = result.get("llm") or {}
    attempts = [a for a in llm.get("attempts") or [] if a.get("outcome") != "stopped"]
    rows, at = [], 0
    for a in attempts:
        u = a.get("usage") or {}
        reqs = requests[at:at + max(1, int(u.get("requests") or 1))]
        at += len(reqs)
        answered = next((r for r in reqs if r.get("reply")), {})
        k = answered.get("reply")
        cid = a.get("candidate")
        idx, ev = by_id.get(cid, (None, None))
        ph = per.get(cid, {}) if cid else {}
        grouped = {g: round(sum(float(ph.get(n, 0.0)) for n in names), 3) for g, names in GROUPS.items()}
        row: dict[str, Any] = {
            "reply": k, "intent": replies[k - 1][0] if k else None, "expected": replies[k - 1][1] if k else None,
            "agent": a.get("agent"), "turn": a.get("turn"), "proposal": a.get("outcome"),
            "proposal_reason": a.get("reason") or None, "candidate": cid,
            "timeline_s": {"model_wait": round(float(u.get("wait_s") or 0.0) + float(u.get("queue_s") or 0.0), 3),
                           **grouped,
                           "other": round(sum(float(v) for n, v in ph.items()
                                              if not any(n in names for names in GROUPS.values())), 3)},
            "phases_s": ph,
            "usage": {x: u.get(x) for x in ("model", "requests", "retries", "input_tokens", "output_tokens",
                                             "estimated", "wait_s", "queue_s", "cost_usd")},
            "request": {x: answered.get(x) for x in ("received_s", "answered_s", "messages", "request_first_line",
                                                     "feedback")}}
        if ev is None:
            row["verdict"] = "not evaluated" if a.get("outcome") == "candidate" else a.get("outcome")
        else:
            v, sp, c = ev.get("verdict") or {}, ev.get("speedup") or {}, ev.get("candidate") or {}
            row.update({
                "evaluation": idx, "strategy": c.get("strategy"), "language": c.get("language"),
                "generation": c.get("generation"), "verdict": v.get("status"), "reason": v.get("reason"),
                "message": v.get("message"),
                "failed_checks": [{"name": ch.get("name"), "detail": (ch.get("detail") or "")[:600]}
                                  for ch in v.get("checks") or [] if not ch.get("ok")][:3],
                "gate_s": v.get("seconds"), "median_ms": _t(ev.get("timing")), "baseline_ms": _t(ev.get("baseline")),
                "baseline": (ev.get("baseline") or {}).get("label"),
                "speedup": round(float(sp["ratio"]), 4) if sp.get("ratio") is not None else None,
                "speedup_ci": [round(float(sp["low"]), 4), round(float(sp["high"]), 4)] if sp else None,
                "claimed": bool(sp.get("claimed")) if sp else None, "flagged": bool(sp.get("flagged")) if sp else None,
                "bottleneck": (ev.get("insight") or {}).get("bottleneck"),
                "verdict_printed_s": printed.get(idx)})
        rows.append(row)
    ph = result.get("phases") or {}
    confirmations = [{x: c.get(x) for x in ("candidate", "strategy", "confirmed", "fresh_ratio", "verdict")}
                     for c in result.get("confirmations") or [] if isinstance(c, dict)]
    outcome = {
        "speedup": round(float(result.get("speedup") or 1.0), 4), "speedup_ci": result.get("speedup_ci"),
        "claimed": bool(result.get("speedup_claimed")), "best_strategy": result.get("best_strategy"),
        "best_id": result.get("best_id"), "baseline": result.get("baseline_kind"),
        "baseline_ms": result.get("baseline_ms"), "best_ms": result.get("best_ms"),
        "eager_ms": _t(result.get("eager")), "compile_ms": _t(result.get("compile")),
        "candidates": result.get("candidates"), "accepted": result.get("accepted"),
        "confirmations": confirmations,
        "emitted_check": {x: (result.get("emitted_check") or {}).get(x) for x in ("status", "reason", "seconds")}}
    return {"outcome": outcome,
            "run": {"seconds": result.get("seconds"), "total_s": ph.get("total_s"),
                    "unaccounted_s": ph.get("unaccounted_s"), "phases_s": ph.get("seconds")},
            "llm": {x: llm.get(x) for x in ("backend", "agents", "totals", "outcomes", "stopped")},
            "notes": [n for n in result.get("notes") or [] if isinstance(n, str)][:20],
            "candidates": rows}


# ------------------------------------------------------------------ output

def say(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def _f(x: Any, fmt: str = "{:.1f}") -> str:
    return "-" if x is None else fmt.format(x)


def table(problems: list[dict]) -> str:
    lines = []
    for p in problems:
        o = p.get("outcome")
        head = f"{p['problem']}: "
        if o is None:
            lines.append(head + f"FAILED ({p.get('error', 'no result')}), {p['wall_s']:.0f} s")
            continue
        ci = o.get("speedup_ci") or [None, None]
        lines.append(head + f"{o['speedup']:.3f}x [{_f(ci[0], '{:.3f}')}, {_f(ci[1], '{:.3f}')}] over {o['baseline']}, "
                     + ("claimed" if o["claimed"] else "not claimed") + f", best {o['best_strategy']}; "
                     f"run {_f(p['run'].get('seconds'), '{:.0f}')} s, wall {p['wall_s']:.0f} s")
        lines.append(f"  {'reply':>5} {'turn':<8} {'verdict':<28} {'wait':>6} {'build':>6} {'verify':>6} "
                     f"{'timing':>6} {'prof':>6} {'speedup':>8}")
        for c in p.get("candidates") or []:
            t = c["timeline_s"]
            verdict = str(c.get("verdict")) + (f" ({c['reason']})" if c.get("reason") not in (None, "ok") else "")
            sp = c.get("speedup")
            lines.append(f"  {_f(c.get('reply'), '{}'):>5} {str(c.get('turn')):<8} {verdict[:28]:<28} "
                         f"{t['model_wait']:>6.2f} {t['build']:>6.1f} {t['verify']:>6.1f} {t['timing']:>6.1f} "
                         f"{t['profiling']:>6.1f} " + (f"{sp:>7.3f}x" + ("*" if c.get("claimed") else "")
                                                       if sp is not None else f"{'-':>8}"))
    lines.append("seconds: wait = waiting for the model, build = worker start + build (first call: JIT), "
                 "verify = trials + re-check, timing = interleaved with the baselines, prof = profile; * claimed")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dev", help="KernelBench-format directory (levels as subfolders)")
    ap.add_argument("--problems", nargs="+", default=list(DEFAULT_PROBLEMS), metavar="GLOB",
                    help="file globs relative to DEV (default: %(default)s)")
    ap.add_argument("--target", default="cuda", choices=("cuda", "cpu"))
    ap.add_argument("--budget", type=float, default=45.0, help="optimize's budget per problem, seconds (default 45)")
    ap.add_argument("--out", required=True, help="the JSON document ('-': stdout)")
    ap.add_argument("--shrink", type=int, default=None,
                    help=f"divide module-level integer constants >= {SHRINK_MIN} by this "
                    "(default 1 for cuda, 16 for cpu)")
    ap.add_argument("--reply-delay", type=float, default=0.0, help="seconds the scripted model takes per reply")
    ap.add_argument("--keep", default=None, metavar="DIR", help="copy each run's result.json and report.md here")
    ap.add_argument("--work", default=None, metavar="DIR", help="where the runs go (default: a temporary folder)")
    ap.add_argument("--timeout", type=float, default=None, help="kill a run after this many seconds "
                    "(default: 1.5 x budget + 60)")
    args = ap.parse_args()
    args.shrink = args.shrink if args.shrink is not None else (16 if args.target == "cpu" else 1)
    args.timeout = args.timeout or 1.5 * args.budget + 60
    dev = Path(args.dev).resolve()
    try:
        import openai  # noqa: F401,PLC0415 - kernelgate's OpenAI-compatible backend needs the SDK
    except ImportError as e:
        say(f"the openai SDK does not import ({e}): install it (pip install 'kernelgate[llm]', or the wheels in .whl/)")
        return 2
    from kernelgate.proposers.llm.parse import extract_code  # noqa: PLC0415
    from kernelgate.versions import conditions  # noqa: PLC0415
    if args.target == "cuda":
        import torch  # noqa: PLC0415
        if not torch.cuda.is_available():
            say("--target cuda: no CUDA device is visible")
            return 2
    paths = pick(dev, args.problems) if dev.is_dir() else []
    if not paths:
        say(f"no problem under {args.dev} matches {' '.join(args.problems)}")
        return 2
    for p in paths:
        replies = replies_for(p, args.target)
        if not replies:
            say(f"{p.relative_to(dev)}: no scripted replies for --target {args.target} "
                f"(benchmarks/llm_timeline_replies.py has: {', '.join(REPLIES)})")
            return 2
        for k, (_, _, text) in enumerate(replies):
            parsed = extract_code(text)
            if not parsed.ok:
                say(f"{p.stem} reply {k + 1}: {parsed.reason}")
                return 2
    work = Path(args.work).resolve() if args.work else Path(tempfile.mkdtemp(prefix="kg_llm_timeline_"))
    work.mkdir(parents=True, exist_ok=True)
    pairs = [(work, "<work>"), (dev, args.dev.rstrip("/")), (ROOT, "."), (Path(sys.executable), "python")]
    for arg in (args.out, args.keep):       # an output folder outside the repository (the GPU machine's $OUT)
        if (arg and arg != "-" and Path(arg).is_absolute() and ROOT not in Path(arg).resolve().parents
                and len(Path(arg).resolve().parent.parts) > 1):
            pairs.append((Path(arg).resolve().parent, "$OUT"))
    scrub = Scrub(pairs)
    cond = conditions(args.target)
    cond["command"] = "python " + cond["command"]
    cond["openai"] = sys.modules["openai"].__version__
    server, url = serve()
    t0 = time.monotonic()
    problems: list[dict] = []

    def document() -> dict:
        return {"benchmark": "llm_timeline", "conditions": scrub(cond),
                "settings": {"target": args.target, "budget_s": args.budget, "dev": args.dev,
                             "problems": args.problems, "shrink": args.shrink, "reply_delay_s": args.reply_delay,
                             "model": MODEL, "agents": ["explorer"],
                             "server": "scripted OpenAI-compatible chat completions on 127.0.0.1 "
                             "(benchmarks/llm_timeline.py), replies from benchmarks/llm_timeline_replies.py"},
                "total_wall_s": round(time.monotonic() - t0, 2),
                "ok": len(problems) == len(paths) and all("outcome" in p for p in problems),
                "problems": problems}

    try:
        for p in paths:
            problems.append(run_problem(p, p.relative_to(dev).as_posix(), args, url, work, scrub))
            if args.out != "-":             # written after every problem: an interrupted run keeps what it did
                Path(args.out).parent.mkdir(parents=True, exist_ok=True)
                Path(args.out).write_text(json.dumps(document(), indent=1) + "\n")
    finally:
        server.shutdown()
        server.server_close()
        if not args.work:
            shutil.rmtree(work, ignore_errors=True)
    doc = document()
    ok = doc["ok"]
    text = json.dumps(doc, indent=1)
    if args.out == "-":
        print(text)
    else:
        Path(args.out).write_text(text + "\n")
    (sys.stderr if args.out == "-" else sys.stdout).write(table(problems) + f"\ntotal {doc['total_wall_s']:.0f} s\n")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
