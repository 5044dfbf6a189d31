"""The candidate's side of the boundary and the judge's hold on it.

host.py      the judge's handle on a worker process: start (confined), requests, timeouts, freeze/thaw, kill
isolation.py confinement applied between fork and exec (no_new_privs, capabilities, Landlock, seccomp)
worker.py    the candidate's process: builds the model, runs calls and timed loops, reports (python -m ...)
loop.py      the worker's timed loop and input building (the judge's statistics are in gate/timing.py)
guard.py     the interpreter guard in the worker (audit hook, namespace snapshot, trace over the harness)
ipc.py       messages and shared-memory regions between judge and worker

The worker imports nothing of the gate.
"""
from .host import Worker, WorkerFailure, scrubbed_env  # noqa: F401
from .spares import Spares  # noqa: F401
