"""kernelgate as tools for coding agents: an MCP server (`kernelgate mcp`, `pip install 'kernelgate[mcp]'`).

server.py   the tools (load a workload, verify, bench, profile, explain the tolerance, submit to a run, a run's
            history, hints, proposed assumptions, review status) on the official `mcp` SDK; stdio or HTTP
runner.py   each evaluation a job in a process of its own: time limits per call, a cap on evaluations at once
jobs.py     the job's process: the API calls (candidates run in the gate's confined workers, as always)
replies.py  the records the CLI's --json prints, trimmed for an agent's context, the failure's reason first
auth.py     the HTTP transport's address policy and bearer token
command.py  the `kernelgate mcp` command
"""
