"""The built-in strategy library: rewrites above the kernel, runtime configurations, generated kernels."""
from .library import Library, STRATEGIES, Strategy

__all__ = ["Library", "STRATEGIES", "Strategy"]
