"""`kernelgate mcp`: the MCP server over stdio (an agent's MCP configuration starts it), or over streamable
HTTP with --http (localhost by default; any other address needs a bearer token)."""
from __future__ import annotations

import argparse
import os
from typing import Any

from ..errors import KernelgateError
from ..records import Reason


def add_parser(sub: Any) -> argparse.ArgumentParser:
    m = sub.add_parser("mcp", help="serve kernelgate's tools to coding agents over MCP (stdio, or --http)")
    m.add_argument("--http", nargs="?", const="127.0.0.1:8765", default=None, metavar="HOST:PORT",
                   help="streamable HTTP instead of stdio (default address 127.0.0.1:8765)")
    m.add_argument("--token", default=None, help="bearer token HTTP clients must send (default: "
                                                 "$KERNELGATE_MCP_TOKEN); required off localhost")
    m.add_argument("--max-concurrent", type=int, default=1, metavar="N",
                   help="evaluations at once (default 1: timed work on one machine disturbs itself)")
    m.add_argument("--timeout", type=float, default=900.0, metavar="S",
                   help="the most seconds any call may take, waiting for a slot included (default 900)")
    m.add_argument("--call-timeout", type=float, default=None, metavar="S",
                   help="seconds allowed per forward inside the gate (default 120)")
    m.add_argument("--store", default=None, help="SQLite store path (default: $KERNELGATE_STORE or "
                                                 "~/.cache/kernelgate/store.sqlite)")
    return m


def main(args: argparse.Namespace) -> int:
    from .auth import TOKEN_ENV, check_binding, parse_address
    from .runner import Limits
    if args.max_concurrent < 1:
        raise KernelgateError(f"--max-concurrent must be at least 1, got {args.max_concurrent}", Reason.USAGE)
    if not args.timeout > 0 or (args.call_timeout is not None and not args.call_timeout > 0):
        raise KernelgateError("--timeout and --call-timeout must be positive", Reason.USAGE)
    limits = Limits(args.max_concurrent, args.timeout, args.call_timeout)
    token = args.token or os.environ.get(TOKEN_ENV) or None
    if args.http is None:
        if args.token:
            raise KernelgateError("--token is for --http: over stdio the agent starts the server itself",
                                  Reason.USAGE)
        from .server import build
        build(args.store, limits, stdio=True).run("stdio")
        return 0
    host, port = parse_address(args.http)
    check_binding(host, token)
    import anyio
    from .server import build, serve_http
    app = build(args.store, limits)
    try:
        anyio.run(serve_http, app, host, port, token)
    except OSError as e:
        raise KernelgateError(f"cannot listen on {host}:{port}: {e.strerror or e}", Reason.USAGE) from None
    return 0
