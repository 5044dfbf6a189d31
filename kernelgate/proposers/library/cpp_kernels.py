"""The C++ (CPU) strategies: which kernels/ rewrites they are.

Kernels, launchers and rewrites live in kernelgate/kernels (one pointwise/row IR for Triton and C++:
ir.py, fx.py; cpp_render.py, cpp_launch.py, cpp_rewrite.py). Candidates using them bundle the runtime
"cpp" (kernels/manifest.py). With no C++ compiler the rewrites apply nowhere (KG_CPP_NO_COMPILER, logged).
"""

from ...kernels.cpp_launch import KG_CPP_NO_COMPILER, kg_cpp_compiler
from ...kernels.cpp_rewrite import kg_rewrite_cpp_layernorm, kg_rewrite_cpp_pointwise, kg_rewrite_cpp_softmax

__all__ = ["CPP_REWRITES", "KG_CPP_NO_COMPILER", "RUNTIME", "kg_cpp_compiler"]

RUNTIME = "cpp"                     # what candidates using these rewrites bundle (kernels/manifest.py)

CPP_REWRITES = {
    "cpp-pointwise": kg_rewrite_cpp_pointwise,
    "cpp-softmax": kg_rewrite_cpp_softmax,
    "cpp-layernorm": kg_rewrite_cpp_layernorm,
}
