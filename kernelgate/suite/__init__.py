"""`kernelgate suite DIR`: optimize every KernelBench-format problem under a directory, each in a process of its
own, and aggregate (geometric-mean speedup, fast_p, failures / flagged / degenerate apart).

discover.py picks the problems, child.py runs one, executors.py runs them (a local pool, or Ray), runner.py is
the driver (status files, --resume), aggregate.py writes summary.json / summary.csv / index.html. Nothing is
imported here: `python -m kernelgate.suite.child` must not find itself imported already."""
