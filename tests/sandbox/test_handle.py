"""The harness's thread runs torch ops only from frames that hold nothing of the harness (kernelgate/sandbox/handle.py).

A dispatcher kernel the candidate registers for an op (torch.library) can be a chain of C callables that reads the
innermost Python frame's locals with builtin locals(): no trace or audit event sees it (red team 10,
`dispatch_full_kernel`). So no method of the worker's Harness (after prime, when no candidate code exists yet), no
closure inside one, and neither of the timed loop's frames calls a torch op itself."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest
import torch

from kernelgate.sandbox import handle

SANDBOX = Path(__file__).resolve().parents[2] / "kernelgate" / "sandbox"
#: calls through `torch.` that are no dispatcher op
ALLOWED = {"torch.cuda.empty_cache", "torch.cuda.set_device", "torch.device", "torch.no_grad"}
#: method names of tensor ops (a heuristic list: what the harness has called)
TENSOR_OPS = {"clone", "to", "contiguous", "copy_", "zero_", "cpu", "cuda", "full", "empty", "zeros", "ones", "detach",
              "reshape", "view", "item", "sum", "mul", "add", "fill_", "float", "double", "clamp", "equal", "new_full",
              "empty_like", "zeros_like", "randn", "rand", "stride", "untyped_storage"}
BEFORE_ANY_CANDIDATE = {"__init__", "op_hello", "op_prime"}


def _dotted(node: ast.AST) -> str:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
    return ".".join(reversed(parts))


def _offences(fn: ast.AST) -> list[str]:
    bad = []
    for node in ast.walk(fn):
        if isinstance(node, ast.Call):
            name = _dotted(node.func)
            if name.startswith("torch.") and name not in ALLOWED:
                bad.append(f"{name} (line {node.lineno})")
            elif isinstance(node.func, ast.Attribute) and node.func.attr in TENSOR_OPS and not name.startswith("handle."):
                bad.append(f"{name} (line {node.lineno})")
    return bad


def test_the_harness_calls_no_torch_op_in_its_own_frames():
    tree = ast.parse((SANDBOX / "worker.py").read_text())
    harness = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Harness")
    bad = {m.name: _offences(m) for m in harness.body
           if isinstance(m, ast.FunctionDef) and m.name not in BEFORE_ANY_CANDIDATE}
    assert not {k: v for k, v in bad.items() if v}, bad


def test_the_timed_loops_frames_call_no_torch_op():
    tree = ast.parse((SANDBOX / "loop.py").read_text())
    for fn in (n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name in ("timed_loop", "warm_up")):
        assert not _offences(fn), (fn.name, _offences(fn))


def test_the_check_sees_an_op():
    fn = ast.parse("def f(self, x):\n    return x.clone() + torch.full((1,), 0.0)\n").body[0]
    assert len(_offences(fn)) == 2


def test_handle_does_what_the_harness_did():
    xs = [torch.arange(6.0).reshape(2, 3), 3]
    snaps = handle.snapshot(xs)
    xs[0].add_(1)
    assert handle.changed(xs, snaps) == [0]
    buf = torch.zeros(2, 3)
    assert handle.place(buf, torch.ones(2, 3)) and torch.equal(buf, torch.ones(2, 3))
    assert not handle.place(buf, torch.ones(3, 2)) and not handle.place(None, torch.ones(1))
    kept = handle.keep([buf, xs[0]], [{"aliased": True}, {"aliased": False}])
    assert kept[0] is not buf and torch.equal(kept[0], buf) and kept[1] is xs[0]
    assert [t.shape for t in handle.empties([[[2, 2], "float32"]], "cpu")] == [torch.Size([2, 2])]


def test_leaves_sharing_memory_get_their_own_buffer():
    x = torch.randn(4, 4)
    other = torch.randn(4, 4)
    assert handle.apart(x, [other, None]) is x
    y = handle.apart(x, [other, x[1:]])
    assert y is not x and torch.equal(y, x) and y.untyped_storage().data_ptr() != x.untyped_storage().data_ptr()


def test_to_device_keeps_strides_gaps_and_the_storage_offset():
    """`Tensor.to` makes a tensor with gaps contiguous and drops a storage offset: the layout trials would reach a
    GPU worker in the plain layout. The meta device stands in for another device."""
    from kernelgate.gate import layouts
    x = torch.randn(4, 6, 5)
    for which in (0, 1, 2, 3, 4):
        y = layouts.relayout(x, which, 11)
        z = handle.to_device(y, "meta")
        assert z.device.type == "meta" and z.stride() == y.stride() and z.storage_offset() == y.storage_offset()
    assert handle.to_device(x, "cpu") is x
    prev = torch.zeros(10)[2:].view(2, 4)
    assert not handle.place(prev, torch.ones(2, 4))          # another storage offset: a buffer of its own



@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.float64, torch.int8,
                                   torch.bool, torch.complex64, torch.complex128, torch.int64])
def test_same_bits_reads_inputs_of_any_layout_in_place_and_sees_nan_payloads(dtype):
    """The inputs' integrity check compares bits in the inputs' own layout (flattening a column-major or gapped
    input copied it whole, twice a call); NaN payloads and -0.0 still count as changes."""
    from kernelgate.sandbox import handle as h
    base = torch.randn(40, 30, dtype=torch.float64).to(dtype) if dtype is not torch.bool else torch.rand(40, 30) > 0.5
    x = base.t()                                         # another layout
    snap = h.snapshot([x])[0]
    assert h.changed([x], [snap]) == []
    if dtype.is_floating_point:
        bits = x.view({2: torch.int16, 4: torch.int32, 8: torch.int64}[x.element_size()])
        nan = torch.tensor(float("nan"), dtype=dtype).view(bits.dtype)
        x[3, 4] = float("nan")
        snap = h.snapshot([x])[0]
        bits[3, 4] = nan + 1                              # another NaN payload: not the same bits
        assert h.changed([x], [snap]) == [0]
        x[3, 4] = 0.0
        snap = h.snapshot([x])[0]
        x[3, 4] = -0.0
        assert h.changed([x], [snap]) == [0]
    else:
        x[3, 4] = ~x[3, 4] if dtype is torch.bool else x[3, 4] + 1
        assert h.changed([x], [snap]) == [0]


def test_changes_outside_the_view_and_to_the_tensors_own_shape_count_as_changes():
    """Red teams 33, 34: writing into an input's gaps or before its offset writes over the caller's data, and
    `x.t_()` changes the caller's tensor without touching a byte: both are changes."""
    from kernelgate.sandbox import handle as h
    big = torch.randn(8, 12)
    x = big[1:, :10]
    snap = h.snapshot([x])
    assert h.changed([x], snap) == []
    big[0, 0] = 5.0                                  # before the view
    assert h.changed([x], snap) == [0]
    snap = h.snapshot([x])
    big[2, 11] = 7.0                                 # in a row's gap
    assert h.changed([x], snap) == [0]
    snap = h.snapshot([x])
    x.t_()
    assert h.changed([x], snap) == [0]
    y = torch.randn(4, 4)
    snap = h.snapshot([y])
    y.t_()                                           # square, same storage: the strides changed
    assert h.changed([y], snap) == [0]


def test_a_swapped_storage_and_a_negative_bit_count_as_changes():
    """Red team 35: `set_` onto a copy after zeroing the caller's buffer leaves the tensor reading as before, and
    a negative bit negates every read without a write; both change what the caller has."""
    from kernelgate.sandbox import handle as h
    x = torch.randn(6, 5)
    snap = h.snapshot([x])
    st = x.untyped_storage()
    fresh = st.clone()
    x.set_(fresh, x.storage_offset(), x.shape, x.stride())
    assert torch.equal(x, x.clone()) and h.changed([x], snap) == [0]
    big = torch.randn(8, 6)
    y = big[1:, :5]
    snap = h.snapshot([y])
    torch._C._set_neg(y, True)
    assert h.changed([y], snap) == [0]
    # the bytes that travel are the values: a negative or conjugate bit applied
    z = torch.randn(3, 4)
    r = h.contiguous([z._neg_view()])[0]
    assert not r.is_neg() and torch.equal(r, -z)


def test_a_whole_storage_compared_as_words_sees_every_byte():
    """Inputs whose storage holds more than their view are compared over the whole storage (red team 33), as 8-byte
    words where the byte count allows, else as bytes: a flip of any one byte, in the view, in a gap or after it,
    is seen, and a storage put back as it was is not."""
    for total in (4 * 4099 * 8 + 16, 4 * 4099 * 8 + 12):     # bytes: a multiple of 8, and one that is not
        base = torch.randn(total // 4)
        views = (base[4:].as_strided((64, 8), (4099 // 8, 1), 4),          # gaps between rows, an offset
                 base[: (total // 4) // 8 * 8].view(-1, 8).t())             # transposed: the storage read whole
        for v in views:
            snaps = handle.snapshot([v])
            raw = v.untyped_storage()
            n = raw.nbytes()
            for pos in (0, 3, n // 2 + 1, n - 1):
                b = torch.empty(0, dtype=torch.uint8).set_(raw, 0, (n,), (1,))
                b[pos] ^= 0x10
                assert handle.changed([v], snaps) == [0], (total, pos)
                b[pos] ^= 0x10
                assert handle.changed([v], snaps) == [], (total, pos)


def test_a_judged_call_on_the_cpu_allocates_nan_at_every_size_and_the_timed_loop_plainly():
    """handle.poison (red team 54): with glibc every allocation until unpoison holds 0xFF bytes, large blocks served
    as fresh pages too (a NaN block laid beforehand never reached those: a zero padding left unwritten was right by
    accident); after unpoison allocations are plain."""
    if not handle.poison(1 << 20, "cpu", lambda fn, args: fn(*args)):
        pytest.skip("no glibc: the NaN blocks serve instead")
    try:
        for n in (16, 1 << 18, 10 << 20):                 # 64 bytes, 1 MiB, 40 MiB (mmapped)
            e = torch.empty(n)
            assert bool(e.isnan().all()), n
            assert bool((torch.empty(n, dtype=torch.int32) == -1).all()), n
            del e
    finally:
        handle.unpoison()
    assert not bool(torch.empty(10 << 20).isnan().any())     # plain again: fresh pages


def test_without_glibcs_fill_the_nan_blocks_are_laid_on_the_thread_the_candidate_runs_on():
    calls = []
    assert handle.poison(1 << 20, "cpu", lambda fn, args: calls.append((fn, args)), None) is False
    assert calls == [(handle.nan_blocks, (1 << 18, "cpu"))]
