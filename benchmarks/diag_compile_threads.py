"""Which Python threads torch.compile starts, and whom the worker's thread check attributes them to.

    python benchmarks/diag_compile_threads.py [--modes default,reduce-overhead,...]

Imports kernelgate.sandbox.worker first (it tracks Thread.start), compiles a small MLP in each mode on the GPU
(CPU without one), and prints the threads the gate would count as the candidate's, with their origin.
"""
from __future__ import annotations

import argparse
import json
import threading

from kernelgate.sandbox import worker  # noqa: F401 - installs the Thread.start tracking before torch compiles

import torch


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--modes", default="default,reduce-overhead,max-autotune-no-cudagraphs")
    args = ap.parse_args()
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    before = set(threading.enumerate())
    report = {}
    for mode in args.modes.split(","):
        model = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.GELU(), torch.nn.Linear(512, 256)).to(dev)
        fn = torch.compile(model, mode=None if mode == "default" else mode)
        with torch.no_grad():
            for _ in range(3):
                fn(torch.randn(64, 256, device=dev))
        report[mode] = {"candidate_threads": worker.describe_candidate_threads(),
                        "torch_threads": worker.torch_threads(),
                        "new_threads": [f"{t.name} ({type(t).__name__})" for t in threading.enumerate() if t not in before]}
        print(mode, json.dumps(report[mode], indent=1))


if __name__ == "__main__":
    main()
