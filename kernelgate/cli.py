"""Command line: argument parsing and printing only; every command is an API call.

Exit codes everywhere: 0 success/accepted, 1 rejected/failed check, 2 usage or task error.
"""
from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from pathlib import Path
from typing import Any, Sequence

from . import __version__, api
from .config import TimingConfig, gate_config
from .contract import load as load_contract, parse_domain_flag
from .errors import KernelgateError
from .records import BenchResult, Reason, Verdict, claim_text
from .report import UNRELIABLE_SPREAD


def _common(p: argparse.ArgumentParser, target: str = "cpu") -> None:
    p.add_argument("--target", default=target, help=f"cpu or cuda (default: {target})")
    p.add_argument("--json", action="store_true", help="print one JSON document on stdout")
    p.add_argument("--store", default=None, help="SQLite store path (default: $KERNELGATE_STORE or ~/.cache/kernelgate/store.sqlite)")


def _contract_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--inputs", default=None, help="module:function or file.py:function returning the inputs")
    p.add_argument("--contract", default=None, help="contract TOML file")
    p.add_argument("--precision", default=None, help="allowed lower precisions, e.g. tf32,bf16")
    p.add_argument("--domain", default=None, help="input domains, e.g. 0=-1:1")
    p.add_argument("--inplace", action="store_true", default=None, help="outputs may alias / overwrite inputs")
    p.add_argument("--one-step", type=float, default=None, help="quantized outputs: allowed share of elements one grid step off (default: derived)")
    p.add_argument("--call-timeout", type=float, default=None, help="seconds allowed per forward (default 120)")


#: proposer names --proposer takes
PROPOSERS = ("builtin", "llm")
LLM_FLAGS = "--llm SPEC (openai:MODEL@URL, anthropic:MODEL, cmd:COMMAND), --llm-endpoint URL with --llm-model NAME, " \
            "or --llm-cmd COMMAND"


def _proposer_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--proposer", default=None,
                   help="comma list of builtin,llm (default: builtin, or builtin,llm when an LLM is set)")
    p.add_argument("--llm", default=None, metavar="SPEC",
                   help="the model: openai:MODEL@URL, openai:MODEL, anthropic:MODEL, or cmd:COMMAND")
    p.add_argument("--llm-endpoint", default=None, metavar="URL",
                   help="an OpenAI-compatible endpoint (with --llm-model)")
    p.add_argument("--llm-model", default=None, metavar="NAME", help="the model's name at the endpoint")
    p.add_argument("--llm-cmd", default=None, metavar="CMD", help="a program: the prompt on its stdin, the reply on "
                                                                  "its stdout (its environment holds no keys)")
    p.add_argument("--llm-price", action="append", default=[], metavar="MODEL=IN/OUT",
                   help="USD per million input/output tokens (repeatable), or a .json/.toml prices file")
    p.add_argument("--llm-max-cost", type=float, default=None, metavar="USD",
                   help="stop asking the model past this cost")
    p.add_argument("--llm-max-requests", type=int, default=None, metavar="N", help="stop asking after N requests")
    p.add_argument("--llm-agents", default=None, metavar="ROLES",
                   help="the LLM agents, comma-separated from explorer, refiner, supervisor (the supervisor splits a "
                        "multi-layer forward into FX pieces and optimizes one at a time); default explorer,refiner")
    p.add_argument("--hint", action="append", default=[], metavar="TEXT",
                   help="a hint put in every prompt (repeatable)")
    p.add_argument("--hints", action="append", default=[], metavar="FILE",
                   help="a markdown file whose text is one hint (repeatable)")


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="kernelgate", description="Verify and time PyTorch kernels against a reference.")
    ap.add_argument("-v", "--verbose", action="store_true")
    ap.add_argument("--version", action="version", version=f"kernelgate {__version__}")
    sub = ap.add_subparsers(dest="command", required=True)
    v = sub.add_parser("verify", help="check a candidate against a reference")
    v.add_argument("ref", help="reference: file.py (class Model) or file.py:Class")
    v.add_argument("cand", help="candidate: file.py (class ModelNew) or file.py:Class")
    v.add_argument("--trials", type=int, default=None, help="correctness trials (default 8)")
    _contract_args(v)
    _common(v)
    b = sub.add_parser("bench", help="time eager, torch.compile and candidates side by side")
    b.add_argument("ref")
    b.add_argument("cands", nargs="*")
    b.add_argument("--rounds", type=int, default=10, help="interleaved rounds (default 10)")
    b.add_argument("--iters", type=int, default=10, help="timed iterations per round (default 10)")
    b.add_argument("--warmup-ms", type=float, default=300.0)
    b.add_argument("--lead-in", type=int, default=1,
                   help="untimed steps opening every timed batch (default 1)")
    b.add_argument("--baselines", default="eager,compile", help="comma list of eager,compile")
    _contract_args(b)
    _common(b)
    o = sub.add_parser("optimize", help="search for a faster verified implementation")
    o.add_argument("model", help="workload: file.py (class Model) or file.py:Class")
    o.add_argument("--budget", default="5m", help="wall-time budget: seconds, or 90s / 5m / 1h (default 5m)")
    o.add_argument("--max-candidates", type=int, default=64)
    o.add_argument("--out", default="out", help="output directory (default out/)")
    o.add_argument("--seed", type=int, default=0, help="search seed (proposal order)")
    o.add_argument("--resume", action="store_true", help="continue an interrupted run in --out")
    o.add_argument("--force", action="store_true", help="replace the results of an earlier run in --out")
    o.add_argument("--languages", default=None, metavar="LIST",
                   help="kernel languages candidates may be written in, a comma list of triton,cuda,pallas,cpp "
                        "(default: triton,cuda on cuda, cpp on cpu; pallas needs JAX: the extra kernelgate[pallas])")
    _proposer_args(o)
    _contract_args(o)
    _common(o)
    sb = sub.add_parser("submit", help="a hand-written candidate joins an optimize run's population, through the gate")
    sb.add_argument("out_dir", metavar="OUT_DIR", help="the --out folder of an optimize run")
    sb.add_argument("cand", help="candidate: file.py defining ModelNew (the reference's code is put before it)")
    sb.add_argument("--model", default=None, help="the run's workload file, when OUT_DIR does not name it "
                                                    "(a run that did not finish)")
    _contract_args(sb)
    sb.add_argument("--target", default=None, help="cpu or cuda (default: the run's)")
    sb.add_argument("--json", action="store_true", help="print one JSON document on stdout")
    sb.add_argument("--store", default=None, help="SQLite store path (default: $KERNELGATE_STORE or "
                                                  "~/.cache/kernelgate/store.sqlite)")
    e = sub.add_parser("explain-tolerance", help="how the allowed error of each output is derived")
    e.add_argument("ref")
    _contract_args(e)
    _common(e)
    pr = sub.add_parser("profile", help="launch records, bottleneck and machine-code fingerprint of a reference "
                                        "and optionally a candidate")
    pr.add_argument("ref", help="reference: file.py (class Model) or file.py:Class")
    pr.add_argument("cand", nargs="?", default=None, help="candidate: file.py (class ModelNew) or file.py:Class")
    pr.add_argument("--forwards", type=int, default=5, help="profiled forwards (default 5)")
    pr.add_argument("--warmup", type=int, default=3, help="forwards before profiling (default 3)")
    pr.add_argument("--records", type=int, default=2000, help="launch records kept in --json (default 2000)")
    _contract_args(pr)
    _common(pr)
    t = sub.add_parser("targets", help="known machine models and the detected device")
    _common(t)
    c = sub.add_parser("calibrate", help="measure this device's copy bandwidth and matmul rates, and store them")
    _common(c)
    r = sub.add_parser("runs", help="recent results from the store")
    r.add_argument("--limit", type=int, default=20)
    _common(r, target="any")
    from .port.command import add_parser as port_parser
    port_parser(sub, _common, _proposer_args)
    from .suite.command import add_parser as suite_parser
    suite_parser(sub, _common)
    from .mcp.command import add_parser as mcp_parser
    from .review import add_parser as review_parser
    mcp_parser(sub)
    review_parser(sub)
    return ap


def main(argv: Sequence[str] | None = None) -> int:
    ap = parser()
    try:
        args = ap.parse_args(argv)
    except SystemExit as e:
        return 2 if e.code not in (0, None) else 0
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING, format="%(message)s")
    try:
        return COMMANDS[args.command](args)
    except KernelgateError as e:
        if getattr(args, "json", False):
            print(json.dumps({"status": "error", "reason": e.reason.value, "message": str(e)}))
        else:
            print(f"error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


def _contract(args: argparse.Namespace):
    flags: dict[str, Any] = {}
    if args.precision:
        flags["precision"] = args.precision
    if args.domain:
        flags["domain"] = parse_domain_flag(args.domain)
    if args.inplace:
        flags["inplace"] = True
    if getattr(args, "one_step", None) is not None:
        flags["one_step"] = args.one_step
    return load_contract(args.contract, **flags)


def cmd_verify(args: argparse.Namespace) -> int:
    cfg = gate_config(call_timeout=args.call_timeout, trials=args.trials)
    if not args.json:
        print(f"verifying {args.cand} against {args.ref} on {args.target} ...", file=sys.stderr)
    v = api.verify(args.ref, args.cand, target=args.target, contract=_contract(args), inputs=args.inputs,
                   config=cfg, store=args.store)
    print(json.dumps(v.to_json(), indent=1) if args.json else format_verdict(v))
    return v.exit_code


def format_verdict(v: Verdict) -> str:
    lines = [f"{v.status.value.upper()}  ({v.reason.value})  {v.message}",
             f"  target {v.target} on {v.device}, {v.seconds:.1f} s"]
    for c in v.checks:
        lines.append(f"  {'ok  ' if c.ok else 'FAIL'}  {c.name:<44} {c.detail.splitlines()[0] if c.detail else ''}")
    if v.assumptions:
        lines.append("assumptions in force:")
        lines += [f"  - {a}" for a in v.assumptions]
    if v.notes:
        lines.append("notes:")
        lines += [f"  - {n}" for n in v.notes]
    return "\n".join(lines)


def cmd_bench(args: argparse.Namespace) -> int:
    tcfg = TimingConfig(warmup_ms=args.warmup_ms, rounds=args.rounds, iters=args.iters, lead_in=args.lead_in)
    progress = None if args.json else (lambda m: print(f"  {m}", file=sys.stderr))
    res = api.bench(args.ref, args.cands, target=args.target, contract=_contract(args), inputs=args.inputs,
                    config=gate_config(call_timeout=args.call_timeout), timing=tcfg,
                    baselines=tuple(b.strip() for b in args.baselines.split(",") if b.strip()),
                    store=args.store, progress=progress)
    print(json.dumps(res.to_json(), indent=1) if args.json else format_bench(res))
    if res.status.value == "error":
        return 2
    _queue(args, lambda st, review: review.queue_bench(st, res.to_json(), source="cli"))
    return 0 if all(r.verdict is None or r.verdict.accepted for r in res.rows) else 1


def format_bench(res: BenchResult) -> str:
    if res.status.value == "error":
        return f"ERROR  {res.message}"
    cold = "cold L2" if res.device and not res.device.startswith("cpu") else "warm caches"
    lines = [f"{res.workload}  on {res.device}  (baseline: {res.baseline}; median per call on the judge's clock, "
             f"interleaved, {cold})",
             f"  {'implementation':<24} {'median ms':>10} {'spread':>8} {'n':>5} {'floor%':>7} {'speedup':>8}  "
             f"{'95% CI':<16} verdict"]
    noisy = False
    for r in res.rows:
        if r.timing is None:
            lines.append(f"  {r.label:<24} {'-':>10} {'-':>8} {'-':>5} {'-':>7} {'-':>8}  {'':<16} {r.note}")
            continue
        t, sp = r.timing, r.speedup
        ratio = f"{sp.ratio:.3f}x" if sp else ""
        ci = f"[{sp.low:.3f}, {sp.high:.3f}]" if sp else ""
        verdict = r.note or ("")
        if sp:
            verdict = ("faster (claimed)" if sp.claimed else "not a claimable speedup" if not sp.fixed
                       else claim_text(sp.to_json())) + (f"; {r.note}" if r.note else "")
        if t.spread > UNRELIABLE_SPREAD:
            noisy = True
            verdict = f"unreliable timing (spread {100 * t.spread:.0f}%)" + (f"; {verdict}" if verdict else "")
        floor = f"{100 * r.floor_fraction:.1f}" if r.floor_fraction is not None else "-"
        lines.append(f"  {r.label:<24} {t.median_ms:>10.4g} {100 * t.spread:>7.2f}% {len(t.samples_ms):>5} {floor:>7} "
                     f"{ratio:>8}  {ci:<16} {verdict}")
    lines.append("  a speedup is claimed when the CI's lower bound clears 1 + max(3 x noise, 2%), the noise being the spread "
                 "of the per-round medians; "
                 "floor% = roofline floor / median")
    if noisy:
        lines.append(f"  unreliable: a spread above {100 * UNRELIABLE_SPREAD:.0f}% (the machine was probably busy); "
                     "such a figure may be far from a quiet run's: re-run on a quiet machine")
    h = next((r.timing for r in res.rows if r.timing is not None), None)
    if h is not None and h.harness_ms:
        lines.append(f"  the harness's own {h.harness_ms:.4g} ms per call (round trip, fresh inputs, flush, digests) "
                     "is subtracted from every row")
    if res.conditions.get("floor"):
        f = res.conditions["floor"]
        lines.append(f"  floor {1e3 * f['seconds']:.4g} ms ({f['bound']}-bound on {f['machine']})")
    return "\n".join(lines)


def _hints(args: argparse.Namespace) -> tuple[str, ...]:
    """--hint texts, then each --hints file's text as one hint."""
    out = []
    for h in args.hint:
        if not h.strip():
            raise KernelgateError("--hint is empty: give the hint's text", Reason.USAGE)
        out.append(h.strip())
    for f in args.hints:
        p = Path(f)
        if not p.is_file():
            raise KernelgateError(f"--hints {f}: {'not a file' if p.exists() else 'no such file'}", Reason.USAGE)
        try:
            text = p.read_text(encoding="utf-8").strip()
        except (OSError, UnicodeDecodeError) as e:
            raise KernelgateError(f"--hints {f} cannot be read as text: {e}", Reason.USAGE) from None
        if not text:
            raise KernelgateError(f"--hints {f} is empty", Reason.USAGE)
        out.append(text)
    return tuple(out)


def _prices(items: list[str]) -> dict[str, tuple[float, float]]:
    """--llm-price MODEL=IN/OUT or a prices file, each checked here (a bad one is a usage error)."""
    from .proposers.llm.accounting import parse_prices
    prices: dict[str, tuple[float, float]] = {}
    for item in items:
        if "=" not in item and not Path(item).is_file():
            raise KernelgateError(f"--llm-price {item}: write MODEL=IN/OUT (USD per million tokens) or name a "
                                  ".json/.toml prices file (no such file)", Reason.USAGE)
        try:
            prices.update(parse_prices(item))
        except KernelgateError:
            raise
        except (OSError, ValueError) as e:       # tomllib's and json's decode errors are ValueErrors
            raise KernelgateError(f"--llm-price {item}: the prices file does not parse: "
                                  f"{str(e).splitlines()[0] if str(e) else type(e).__name__}", Reason.USAGE) from None
    return prices


def proposer_options(args: argparse.Namespace) -> tuple[tuple[str, ...], dict[str, Any] | None, tuple[str, ...]]:
    """(proposers, the LLM proposer's LLMProposer.from_args keywords or None, hints) from optimize's flags;
    a bad value is a usage error (exit 2, one line)."""
    from .proposers.llm.accounting import Limits
    from .proposers.llm.spec import parse_spec
    hints = _hints(args)
    spec = parse_spec(args.llm, endpoint=args.llm_endpoint, model=args.llm_model, cmd=args.llm_cmd)
    if args.proposer is None:
        names: tuple[str, ...] = ("builtin", "llm") if spec is not None else ("builtin",)
    else:
        names = tuple(dict.fromkeys(n.strip() for n in args.proposer.split(",") if n.strip()))
        bad = [n for n in names if n not in PROPOSERS]
        if bad or not names:
            what = f"unknown proposer {', '.join(bad)}" if bad else "names no proposer"
            raise KernelgateError(f"--proposer {args.proposer}: {what}; known: {', '.join(PROPOSERS)}", Reason.USAGE)
    if "llm" in names and spec is None:
        raise KernelgateError(f"--proposer llm needs a model: set {LLM_FLAGS}", Reason.USAGE)
    if args.llm_max_cost is not None and not args.llm_max_cost > 0:
        raise KernelgateError(f"--llm-max-cost must be a positive amount of USD, got {args.llm_max_cost:g}",
                              Reason.USAGE)
    if args.llm_max_requests is not None and args.llm_max_requests < 1:
        raise KernelgateError(f"--llm-max-requests must be at least 1, got {args.llm_max_requests}", Reason.USAGE)
    prices = _prices(args.llm_price)
    agents = None
    if args.llm_agents is not None:
        from .proposers.llm.agents import ROLES
        agents = tuple(a.strip() for a in args.llm_agents.split(",") if a.strip())
        bad = [a for a in agents if a not in ROLES]
        if bad or not agents:
            raise KernelgateError(f"--llm-agents {args.llm_agents}: "
                                  f"{'unknown ' + ', '.join(bad) if bad else 'names no agent'}; known: {', '.join(ROLES)}",
                                  Reason.USAGE)
    extra = [f for f, v in (("--llm-price", args.llm_price), ("--llm-max-cost", args.llm_max_cost),
                            ("--llm-max-requests", args.llm_max_requests), ("--llm-agents", agents)) if v not in (None, [])]
    if "llm" not in names:
        if extra:
            why = "--proposer leaves it out" if spec else f"no LLM is set: set {LLM_FLAGS}"
            raise KernelgateError(f"{', '.join(extra)} set{'s' if len(extra) == 1 else ''} the LLM proposer's "
                                  f"limits, but {why}", Reason.USAGE)
        if spec is not None:
            print(f"note: an LLM is set ({spec}) but --proposer {args.proposer} leaves it out: it is not used",
                  file=sys.stderr)
        return names, None, hints
    llm: dict[str, Any] = {k: v for k, v in (("llm", args.llm), ("endpoint", args.llm_endpoint),
                                              ("model", args.llm_model), ("cmd", args.llm_cmd)) if v}
    if prices:
        llm["prices"] = prices
    if args.llm_max_cost is not None or args.llm_max_requests is not None:
        llm["limits"] = Limits(max_requests=args.llm_max_requests, max_cost_usd=args.llm_max_cost)
    if agents:
        llm["agents"] = agents
    return names, llm, hints


def cmd_optimize(args: argparse.Namespace) -> int:
    progress = (lambda m: print(m, file=sys.stderr, flush=True))
    proposers, llm, hints = proposer_options(args)
    res = api.optimize(args.model, target=args.target, budget=args.budget, max_candidates=args.max_candidates,
                       out=args.out, seed=args.seed, resume=args.resume, force=args.force, contract=_contract(args),
                       inputs=args.inputs, config=gate_config(call_timeout=args.call_timeout), store=args.store,
                       progress=None if args.json else progress, proposers=proposers, llm=llm, hints=hints,
                       languages=args.languages)
    doc = res.to_json()
    _queue(args, lambda st, review: review.queue_optimize(st, res, args.out))
    if args.json:
        print(json.dumps({k: v for k, v in doc.items() if k != "evaluations"}, indent=1))
        return 0
    ci = doc["speedup_ci"]
    print(f"best: {doc['best_strategy']}  {doc['best_ms']:.4g} ms vs {doc['baseline_kind']} {doc['baseline_ms']:.4g} ms"
          f"  -> {doc['speedup']:.3f}x (95% CI [{ci[0]:.3f}, {ci[1]:.3f}])"
          + ("" if doc["speedup_claimed"] else "  no claimable speedup: the baseline is kept"))
    print(f"{doc['candidates']} candidates, {doc['accepted']} accepted, {doc['seconds']:.0f} s; "
          f"wrote {args.out}/optimized.py, report.md, report.html, reproduce.sh, result.json")
    if doc.get("phases"):                 # where the time went (result.json "phases")
        from .search.phases import summary_line
        print(summary_line(doc["phases"]))
    llm = doc.get("llm")
    if isinstance(llm, dict) and isinstance(llm.get("totals"), dict):     # LLMProposer.summary()
        t = llm["totals"]
        print(f"llm ({llm.get('backend', '?')}): {t.get('requests', 0)} requests, "
              f"{t.get('input_tokens', 0)} tokens in / {t.get('output_tokens', 0)} out, ${t.get('cost_usd', 0):.4f}"
              + (f" (+{t['unpriced_tokens']} unpriced tokens)" if t.get("unpriced_tokens") else "")
              + (f"; stopped: {llm['stopped']}" if llm.get("stopped") else ""))
    return 0


def cmd_submit(args: argparse.Namespace) -> int:
    from . import submit as submit_mod
    say = None if args.json else (lambda m: print(f"  {m}", file=sys.stderr, flush=True))
    sub = submit_mod.submit(args.out_dir, args.cand, target=args.target, model=args.model, contract=_contract(args),
                            inputs=args.inputs, config=gate_config(call_timeout=args.call_timeout), store=args.store,
                            progress=say)
    print(json.dumps(sub.to_json(), indent=1) if args.json else format_submission(sub))
    _queue(args, lambda st, review: review.queue_submission(st, sub.to_json(), source="cli"))
    return sub.exit_code


def _queue(args: argparse.Namespace, put: Any) -> None:
    """A flagged result waits for a person (kernelgate review); said once on stderr, never fatal."""
    from . import review
    from .store import Store
    try:
        st = Store(args.store)
        items = put(st, review)
    except Exception as e:  # noqa: BLE001 - the result stands; only its review entry is lost
        print(f"  the result could not be queued for review: {type(e).__name__}: {e}", file=sys.stderr)
        return
    # queue_bench answers {label: item}; queue_optimize and queue_submission one item (a dict with an id) or None
    for item in [items] if isinstance(items, dict) and "id" in items else list((items or {}).values()):
        print(f"  flagged for review (item {item['id']}): {'; '.join(item['flags'])[:200]}; see kernelgate review",
              file=sys.stderr)


def format_submission(sub: Any) -> str:
    e = sub.evaluation
    lines = [f"run {sub.run_id} ({sub.workload} on {sub.target}): {e.candidate.strategy}, "
             f"proposer {e.candidate.proposer}"]
    if sub.already:
        lines.append("  (evaluated in this run before; its evaluation stands)")
    lines.append(format_verdict(e.verdict))
    if e.accepted and e.timing is not None and e.baseline is not None and e.speedup is not None:
        sp = e.speedup
        claim = claim_text(sp.to_json())
        lines.append(f"time: {e.timing.median_ms:.4g} ms vs {e.baseline.label} {e.baseline.median_ms:.4g} ms "
                     f"(the run's faster baseline, timed interleaved with it) -> {sp.ratio:.3f}x "
                     f"(95% CI [{sp.low:.3f}, {sp.high:.3f}]), {claim}"
                     + ("; flagged for review" if sp.flagged else ""))
    best = sub.run_best
    if best is not None and best.speedup is not None:
        lines.append(f"the run's best: {best.candidate.strategy} {best.speedup.ratio:.3f}x")
    elif e.accepted:
        lines.append("the run's best: the baseline (no candidate had a claimed speedup)")
    if sub.beats_best:
        lines.append("this candidate beats the run's best. To emit it (a fresh confirming measurement, then "
                     "optimized.py and the gate's check of it, as at the end of every run):")
        lines.append(f"  {sub.next_step}")
    elif e.accepted and not sub.already:
        lines.append("recorded in the run's population; it does not beat the run's best, so optimized.py stands")
    elif not e.accepted and not sub.already:
        lines.append("recorded in the run's population as rejected")
    lines += [f"note: {n}" for n in sub.notes]
    return "\n".join(lines)


def cmd_explain(args: argparse.Namespace) -> int:
    ds = api.explain_tolerance(args.ref, target=args.target, contract=_contract(args), inputs=args.inputs)
    if args.json:
        print(json.dumps([d.to_json() for d in ds], indent=1, default=str))
    else:
        for i, d in enumerate(ds):
            print(f"output {i}:" if len(ds) > 1 else "output:")
            print(d.to_text())
    return 0


def cmd_profile(args: argparse.Namespace) -> int:
    if args.records < 0:
        raise KernelgateError("--records must be >= 0")
    if not args.json:
        print(f"profiling {args.ref}" + (f" and {args.cand}" if args.cand else "") + f" on {args.target} ...",
              file=sys.stderr)
    rep = api.profile(args.ref, args.cand, target=args.target, contract=_contract(args), inputs=args.inputs,
                      config=gate_config(call_timeout=args.call_timeout), warmup=args.warmup, forwards=args.forwards)
    print(json.dumps(rep.to_json(args.records), indent=1, default=str) if args.json else format_profile(rep))
    return rep.exit_code


def _us(us: float) -> str:
    """Microseconds in a readable unit: 12 us, 142 ms, 3.1 s."""
    from .profiling.roofline import _secs
    return _secs(us * 1e-6)


def format_profile(rep: Any) -> str:
    lines = [f"{rep.workload}  on {rep.device} (machine model {rep.machine})"]
    if rep.floor is not None:
        lines.append(f"  floor {_us(1e6 * rep.floor.floor_s)} ({rep.floor.bound}-bound on {rep.floor.machine})")
    for side in (rep.reference, rep.candidate):
        if side is None:
            continue
        lines.append(f"{side.label} ({side.cls}):")
        if side.error:
            lines.append(f"  ERROR  {side.error}")
            continue
        p = side.profile
        lines.append(f"  {side.bottleneck.line}")
        gpu = p.kernels_applicable
        unit = "kernels" if gpu else "top-level ops"
        lines.append(f"  forward {_us(p.forward_median_us)} (median of {p.forwards}, under the profiler), "
                     f"{p.kernels_per_forward:g} {unit}, busy {_us(p.busy_median_us)}, "
                     f"{100 * p.gap_share:.0f}% " + ("between launches" if gpu else "outside ops"))
        if p.persistent_kernels():
            lines.append(f"  persistent: {', '.join(p.persistent_kernels())}")
        launch_cols = f" {'grid':>14} {'block':>12} {'regs':>5} {'smem':>7}" if gpu else ""   # CPU ops have none
        lines.append(f"    {'per fwd':>7} {'time/fwd':>9}{launch_cols}  name")
        for k in p.stats()[:12]:
            cols = ""
            if gpu:
                grid = "x".join(map(str, k.grid)) if k.grid else "-"
                block = "x".join(map(str, k.block)) if k.block else "-"
                cols = (f" {grid:>14} {block:>12} {k.registers if k.registers is not None else '-':>5} "
                        f"{k.shared_memory if k.shared_memory is not None else '-':>7}")
            lines.append(f"    {k.per_forward:>7g} {_us(k.total_us):>9}{cols}  {k.name[:90]}")
        fp = side.fingerprint.to_json()
        lines.append(f"  fingerprint: {fp['basis']}, {len(fp['kernels'])} distinct names"
                     + (f", {fp['histogram_level']} histogram of {len(fp['histogram'])} opcodes"
                        if fp["histogram_level"] else ""))
        if side.fusion is not None:
            lines.append(f"  fusion estimate ({side.fusion.name}): {side.fusion.derivation}")
        lines += [f"  note: {n}" for n in p.notes + side.fingerprint.notes]
    if rep.distance is not None:
        lines.append(f"distance {rep.distance.value:.3f} ({rep.distance.basis}): {rep.distance.meaning}")
    return "\n".join(lines)


def cmd_targets(args: argparse.Namespace) -> int:
    from . import targets
    if args.json:
        print(json.dumps(targets.table(), indent=1, default=str))
    else:
        print(targets.format_table())
    return 0


def cmd_calibrate(args: argparse.Namespace) -> int:
    from . import targets
    from .gate.judge import resolve_device
    device = resolve_device(args.target)
    found = targets.calibrate(device)
    name = targets.detect(device).name
    path = targets.save_calibration(name, {k: v for k, v in found.items() if k != "conditions"})
    if args.json:
        print(json.dumps({"machine": name, "measured": found, "stored": str(path)}, indent=1, default=str))
        return 0
    print(f"{name}: " + ", ".join(f"{k} {v / 1e12:.3g} T{'B' if k == 'bandwidth' else 'FLOP'}/s"
                                   for k, v in found.items() if isinstance(v, (int, float))))
    print(f"stored in {path}; measured values take precedence over datasheet values")
    return 0


def cmd_runs(args: argparse.Namespace) -> int:
    rows = api.runs(args.limit if args.target == "any" else args.limit * 10, store=args.store)
    if args.target != "any":
        rows = [r for r in rows if r.target == args.target][: args.limit]
    if args.json:
        print(json.dumps([r.to_json() for r in rows], indent=1))
        return 0
    if not rows:
        print("no results in the store yet" if args.target == "any" else f"no results for target {args.target}")
        return 0
    from .store import Store
    store = Store(args.store)
    print(f"{'id':>5} {'when':<16} {'kind':<8} {'status':<9} {'target':<6} {'workload':<24} {'candidate':<24} summary")
    for r in rows:
        when = time.strftime("%Y-%m-%d %H:%M", time.localtime(r.created))
        cand = ",".join(c.rsplit("/", 1)[-1] for c in (r.candidate or "").split(",") if c)
        status, summary = r.status, r.summary or ""
        if r.kind == "bench" and r.status != "error":
            status, summary = _bench_outcome(store.payload(r.id) or {}, summary)
        print(f"{r.id:>5} {when:<16} {r.kind:<8} {status:<9} {r.target:<6} {r.workload.rsplit('/', 1)[-1]:<24} "
              f"{cand:<24} {summary}")
    return 0


def _bench_outcome(doc: dict, summary: str) -> tuple[str, str]:
    """A stored bench's label from its candidates' verdicts (the bench itself ran either way): accepted when
    any was, rejected when none was, timed with none; and its summary with the rejected ones named."""
    cands = [r for r in doc.get("rows") or [] if isinstance(r, dict) and isinstance(r.get("verdict"), dict)]
    if not cands:
        return "timed", summary
    ok = [r for r in cands if r["verdict"].get("status") == "accepted"]
    bad = [f"{str(r.get('label') or '?').rsplit('/', 1)[-1]} {r['verdict'].get('status')} "
           f"({r['verdict'].get('reason') or '?'})" for r in cands if r not in ok]
    tail = f"{len(ok)} of {len(cands)} candidates accepted" + (f"; {', '.join(bad)}" if bad else "")
    return ("accepted" if ok else "rejected"), (f"{summary}; {tail}" if summary else tail)


def cmd_port(args: argparse.Namespace) -> int:
    from .port.command import main as port_main
    return port_main(args, proposer_options(args))


def cmd_suite(args: argparse.Namespace) -> int:
    from .suite.command import main as suite_main
    return suite_main(args)


def cmd_mcp(args: argparse.Namespace) -> int:
    from .mcp.command import main as mcp_main
    return mcp_main(args)


def cmd_review(args: argparse.Namespace) -> int:
    from .review import main as review_main
    return review_main(args)


COMMANDS = {"verify": cmd_verify, "bench": cmd_bench, "optimize": cmd_optimize, "runs": cmd_runs, "targets": cmd_targets,
            "calibrate": cmd_calibrate, "explain-tolerance": cmd_explain, "profile": cmd_profile, "suite": cmd_suite,
            "submit": cmd_submit, "mcp": cmd_mcp, "review": cmd_review, "port": cmd_port}

if __name__ == "__main__":          # `python -m kernelgate.cli`, as `python -m kernelgate`
    raise SystemExit(main())
