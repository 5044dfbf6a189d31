"""Generated kernels: one pointwise/row IR, the fx recognizer that builds it, a Triton and a C++ renderer,
their launchers and rewrites, and one source cache.

Every module here but manifest.py is a *runtime* module: it imports torch, triton and the standard library,
and of this package only its sibling runtime modules (relatively), never the rest of kernelgate. A
candidate runs in a worker that may import torch and triton and what its own file holds, so manifest.py
bundles the runtime modules a candidate needs into its file, from an explicit list.

    ir.py             programs (op, refs, params), the op table (eager / Triton / C++ side by side), the
                      eager interpreter every launcher falls back to
    fx.py             the recognizer: pointwise nodes -> programs, maximal single-output groups, GEMMs,
                      softmax / LayerNorm, row reductions; graph surgery helpers
    cache.py          generated source -> a name from its content hash -> a file -> the module it loads as
    triton_render.py  Triton source: pointwise, GEMM + epilogue, row op with a prologue, row reduction
    triton_launch.py  Triton launchers (where a kernel applies, else the eager program)
    triton_rewrite.py the Triton fx rewrites
    cpp_render.py     C++ source: the vectorizable math prelude, pointwise loops, softmax, LayerNorm
    cpp_launch.py     the C++ build (one extension per candidate) and launchers
    cpp_rewrite.py    the C++ fx rewrites
    manifest.py       which runtime files go into a candidate, and their bundle
"""
