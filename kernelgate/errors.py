"""Errors that end a command with exit code 2 (usage or task problems), each naming what to fix."""
from __future__ import annotations

from .records import Reason


class KernelgateError(Exception):
    """A usage or task error: reported in one line, exit code 2."""

    def __init__(self, message: str, reason: Reason = Reason.USAGE):
        super().__init__(message)
        self.reason = reason


class MissingExtra(KernelgateError):
    """An optional package is missing; names the package and the extra that installs it."""

    def __init__(self, package: str, extra: str):
        super().__init__(f"this needs the optional package '{package}': pip install 'kernelgate[{extra}]'")
