"""The audit hook's code looks nothing up when an event comes (kernelgate/sandbox/audit.py): candidate code can
rebind module globals and builtins without an audit event, so a global or builtin lookup inside the hook, the
harness thread's tracer, the integrity check or the runner's call would be a lever on the verdict."""
from __future__ import annotations

import dis
import types

import pytest

from kernelgate.sandbox import audit, runner

LOOKUPS = {"LOAD_GLOBAL", "LOAD_NAME", "STORE_GLOBAL", "DELETE_GLOBAL"}


def _nested(code: types.CodeType) -> list[types.CodeType]:
    out, stack = [], [k for k in code.co_consts if isinstance(k, types.CodeType)]
    while stack:
        c = stack.pop()
        out.append(c)
        stack.extend(k for k in c.co_consts if isinstance(k, types.CodeType))
    return out


@pytest.mark.parametrize("maker", [audit.make, audit.make_tracer, audit.make_integrity, audit.make_fatal,
                                   runner.start])
def test_functions_made_at_install_look_up_no_global(maker):
    inner = _nested(maker.__code__)
    assert inner, maker
    bad = [(c.co_name, ins.argval) for c in inner for ins in dis.get_instructions(c) if ins.opname in LOOKUPS]
    assert not bad, f"{maker.__name__}: global lookups at event time: {bad}"


def test_a_lookup_is_caught_by_the_check():
    def maker():
        def inner():
            return len(())            # a builtin, looked up when called
        return inner
    inner = _nested(maker.__code__)
    assert any(ins.opname in LOOKUPS for c in inner for ins in dis.get_instructions(c))


def test_the_runner_binds_what_it_calls():
    """`_execute` runs jobs with what it was given: what it calls besides the job and the lock are default
    arguments."""
    names = [ins.argval for ins in dis.get_instructions(runner._execute) if ins.opname in LOOKUPS]
    assert names == [], names
