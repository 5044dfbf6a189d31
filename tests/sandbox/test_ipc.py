"""Messages and the shared-memory regions large tensors travel through."""
import os

import pytest
import torch

from kernelgate.sandbox import ipc as wire
from kernelgate.sandbox import Worker


def big(*shape, dtype=torch.float32):
    return torch.randn(*shape).to(dtype)


def test_pack_unpack_roundtrip_keeps_values_dtypes_and_small_tensors_inline():
    region = wire.Bulk.create(16 << 20)
    try:
        msg = {"a": big(512, 1024), "b": [big(1024, 1024, dtype=torch.bfloat16), torch.ones(3)],
               "c": (torch.arange(300_000, dtype=torch.int64),), "n": 7, "s": "x"}
        packed = wire.pack(msg, region)
        assert isinstance(packed["a"], dict) and isinstance(packed["b"][0], dict)
        assert isinstance(packed["b"][1], torch.Tensor)          # small: inline
        back = wire.unpack(wire.decode(wire.encode(packed)), region)
        assert torch.equal(back["a"], msg["a"]) and back["b"][0].dtype == torch.bfloat16
        assert torch.equal(back["b"][0], msg["b"][0]) and torch.equal(back["c"][0], msg["c"][0])
        assert back["n"] == 7 and back["s"] == "x"
        # copied out: later writes to the region do not change what was read
        region.buf.zero_()
        assert torch.equal(back["a"], msg["a"])
    finally:
        region.unlink()


def test_what_does_not_fit_and_non_contiguous_tensors_stay_inline():
    region = wire.Bulk.create(2 << 20)
    try:
        x, y, t = big(512, 1024), big(512, 1024), big(1024, 512).t()
        packed = wire.pack([x, y, t], region)
        assert isinstance(packed[0], dict) and isinstance(packed[1], torch.Tensor) and isinstance(packed[2], torch.Tensor)
        back = wire.unpack(packed, region)
        assert torch.equal(back[1], y) and back[2].stride() == t.stride()
    finally:
        region.unlink()


def test_judge_to_worker_layouts_travel_through_the_region_with_strides_offset_and_gaps():
    """The layout trials' inputs (column-major, another order, gaps with a storage offset, broadcast strides) go
    through the region as their storage up to their last element (they went inline, pickled: gigabytes through
    the socket in the lean plan); the receiver gets the same values, strides, offset and gap contents."""
    from kernelgate.gate.layouts import relayout
    region = wire.Bulk.create(64 << 20)
    try:
        x = big(64, 48, 128)
        ys = {w: relayout(x, w, seed=5) for w in (0, 1, 2, 3)}
        ys["bcast"] = torch.randn(1, 512, 1024).expand(4, 512, 1024)
        ys = {k: y for k, y in ys.items() if y is not None}
        assert len(ys) >= 4 and any(y.storage_offset() > 0 for y in ys.values())
        packed = wire.pack(ys, region, strided=True)
        assert all(isinstance(p, dict) for p in packed.values()), packed.keys()
        assert wire.bulk_bytes(ys, strided=True) <= region.size
        back = wire.unpack(wire.decode(wire.encode(packed)), region, strided=True)
        for k, y in ys.items():
            b = back[k]
            assert torch.equal(b, y) and b.stride() == y.stride() and b.storage_offset() == y.storage_offset(), k
            n = y.storage_offset() + 1 + sum((d - 1) * st for d, st in zip(y.shape, y.stride()))
            whole = lambda t: t.as_strided((n,), (1,), 0)    # noqa: E731 - gaps and the part before the offset
            assert torch.equal(whole(b).view(torch.int32), whole(y).view(torch.int32)), k     # NaN gaps: bits
        with pytest.raises(ValueError):         # a worker's reply may not carry one
            wire.unpack(packed, region)
    finally:
        region.unlink()


@pytest.mark.parametrize("ref", [[0, 60, "float32", [4, 4], 0, [1, 4]], [0, 64, "float32", [4, 4], 0, [4, -1]],
                                 [0, 64, "float32", [4, 4], 0, [100, 1]], [0, 1 << 22, "float32", [4, 4], 0, [1 << 18, 1]],
                                 [0, 64, "float32", [4, 4], 1 << 20, [4, 1]], [0, 64, "float32", [4], 0, [1, 1]]])
def test_malformed_strided_references_are_refused_even_where_accepted(ref):
    region = wire.Bulk.create(8 << 20)
    try:
        with pytest.raises(ValueError):
            wire.unpack({"out": {"__kg_bulk__": ref}}, region, strided=True)
    finally:
        region.unlink()


@pytest.mark.parametrize("ref", [[1 << 40, 16, "float32", [4]], [0, 16, "float32", [5]], [3, 16, "float32", [4]],
                                 [0, 16, "not_a_dtype", [4]], [0, 16, "Tensor", [4]], "junk", [0, -4, "float32", [-1]],
                                 [0, 16, "float32", [4], 1 << 20], [0, 16, "float32", [4], -1],
                                 [0, 16, "float32", [4], 1, 2]])
def test_malformed_references_from_an_untrusted_reply_are_refused(ref):
    region = wire.Bulk.create(1 << 20)
    try:
        with pytest.raises(ValueError):
            wire.unpack({"out": {"__kg_bulk__": ref}}, region)
    finally:
        region.unlink()


def test_a_contiguous_view_keeps_its_storage_offset_through_a_region():
    """Red team 29: the layout trial of contiguous inputs at a storage offset reached the worker at offset 0."""
    region = wire.Bulk.create(1 << 22)
    try:
        x = torch.randn(300_000)
        buf = torch.zeros(5 + x.numel())
        view = buf[5:]
        view.copy_(x)
        back = wire.unpack(wire.pack({"x": view, "y": x}, region), region)
        assert back["x"].storage_offset() == 5 and back["x"].is_contiguous() and torch.equal(back["x"], x)
        assert back["y"].storage_offset() == 0 and torch.equal(back["y"], x)
    finally:
        region.unlink()


def test_a_reference_without_a_region_is_refused():
    with pytest.raises(ValueError):
        wire.unpack([{"__kg_bulk__": [0, 4, "float32", [1]]}], None)


@pytest.mark.slow
def test_regions_travel_as_descriptors_and_large_tensors_cross_a_worker(tmp_path):
    """A worker receives a 4 MB input through the judge->worker region and replies through the other one;
    the regions reach it as file descriptors (closed on the judge's side once sent), never as files."""
    import glob
    import tempfile
    before = set(glob.glob("/dev/shm/kernelgate-bulk*") + glob.glob(f"{tempfile.gettempdir()}/kernelgate-bulk*"))
    w = Worker("wire-test")
    w.reply_capacity = 8 << 20
    try:
        w.request({"op": "hello"}, 60)
        model = tmp_path / "m.py"
        model.write_text("import torch\nclass ModelNew(torch.nn.Module):\n"
                         "    def forward(self, x):\n        return x * 2\n")
        w.request({"op": "build", "path": str(model), "cls": "ModelNew", "init_inputs": [], "state": {},
                   "device": "cpu"}, 60)
        for k in range(2):                       # the second call reuses both regions
            x = big(1024, 1024)
            reply = w.request({"op": "call", "inputs": [x], "poison_bytes": 0}, 60)
            out = reply["output"]["tensors"][0]
            assert torch.equal(out, x * 2) and reply["inputs_changed"] == []
        assert w._in is not None and w._out is not None and w._in.fd is None and w._out.fd is None
        y = big(2048, 1024)                      # a larger input: a new, larger region is sent
        reply = w.request({"op": "call", "inputs": [y], "poison_bytes": 0}, 60)
        assert torch.equal(reply["output"]["tensors"][0], y * 2) and w._in.size >= y.numel() * 4
        after = set(glob.glob("/dev/shm/kernelgate-bulk*") + glob.glob(f"{tempfile.gettempdir()}/kernelgate-bulk*"))
        assert after <= before
    finally:
        w.close()


def _region_maps(pid: int) -> int:
    """Mappings of shared regions (memfds named "buffer", or the unlinked fallback files) in a process."""
    with open(f"/proc/{pid}/maps") as f:
        return sum(1 for line in f if "memfd:buffer" in line or "kernelgate-bulk" in line)


@pytest.mark.slow
def test_release_sheds_both_regions_on_both_sides_and_the_next_call_makes_new_ones(tmp_path):
    """The lean memory plan: after `release`, neither the judge nor the worker maps a shared region (each held
    up to a task's worth of host memory, reserved); the next call gets regions of the size it needs, and a
    request whose reply carries no outputs makes no reply region."""
    import os
    w = Worker("shed-test")
    w.reply_capacity = 4 << 20
    try:
        w.request({"op": "hello"}, 60)
        model = tmp_path / "m.py"
        model.write_text("import torch\nclass ModelNew(torch.nn.Module):\n"
                         "    def forward(self, x):\n        return x + 1\n")
        w.request({"op": "build", "path": str(model), "cls": "ModelNew", "init_inputs": [], "state": {},
                   "device": "cpu"}, 60)
        x = big(1024, 1024)
        assert torch.equal(w.request({"op": "call", "inputs": [x], "poison_bytes": 0}, 60)["output"]["tensors"][0], x + 1)
        assert _region_maps(w.pid) == 2 and _region_maps(os.getpid()) >= 2
        mine = _region_maps(os.getpid()) - 2
        w.request({"op": "release", "shed": False}, 60)       # between one judgement's trials: kept
        assert _region_maps(w.pid) == 2
        w.request({"op": "release", "shed": True}, 60)
        w.shed()
        assert w._in is None and w._out is None
        assert _region_maps(w.pid) == 0 and _region_maps(os.getpid()) == mine
        w.request({"op": "hello"}, 60)                    # no outputs in its reply: no region made for it
        assert w._in is None and w._out is None and _region_maps(w.pid) == 0
        y = big(512, 1024)
        assert torch.equal(w.request({"op": "call", "inputs": [y], "poison_bytes": 0}, 60)["output"]["tensors"][0], y + 1)
        assert w._in is not None and w._in.size == y.numel() * 4 and _region_maps(w.pid) == 2
    finally:
        w.close()


def test_a_region_cannot_be_truncated_by_the_other_side_and_the_judge_still_reads():
    """The judge maps a region, another process holding its descriptor tries to shrink it (which would make
    the judge's next access a SIGBUS) and to grow it: both refused; the judge reads and writes on."""
    import socket
    import subprocess
    import sys
    from kernelgate.sandbox import isolation
    if not isolation.sealed_memory():
        pytest.skip("no memfd sealing on this platform")
    region = wire.Bulk.create(4 << 20)
    x = big(1024, 1024)
    packed = wire.pack([x], region)
    with pytest.raises(PermissionError):
        os.ftruncate(region.fd, 0)               # not even the judge can shrink it
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    code = ("import os, socket, sys\n"
            "s = socket.socket(fileno=int(sys.argv[1]))\n"
            "data, fds, _, _ = socket.recv_fds(s, 8, 1)\n"
            "out = []\n"
            "for size in (0, 1 << 30):\n"
            "    try:\n"
            "        os.ftruncate(fds[0], size); out.append('done')\n"
            "    except OSError as e:\n"
            "        out.append(str(e.errno))\n"
            "print(' '.join(out))\n")
    p = subprocess.Popen([sys.executable, "-c", code, str(theirs.fileno())], pass_fds=(theirs.fileno(),),
                         stdout=subprocess.PIPE, text=True)
    theirs.close()
    region.send(ours)
    assert region.fd is None
    got = p.communicate(timeout=60)[0].split()
    ours.close()
    import errno
    assert got == [str(errno.EPERM), str(errno.EPERM)], got     # before the judge touches its mapping again
    back = wire.unpack(packed, region)
    assert torch.equal(back[0], x)
    region.buf[-64:] = 7                         # the whole mapping is still backed
    assert int(region.buf[-1]) == 7


@pytest.mark.slow
def test_no_room_for_a_region_is_the_judges_error_not_the_candidates(monkeypatch):
    from kernelgate.errors import KernelgateError

    def full(size):
        raise OSError(28, "No space left on device")
    w = Worker("wire-full")
    try:
        w.request({"op": "hello"}, 60)
        monkeypatch.setattr(wire.Bulk, "create", staticmethod(full))
        with pytest.raises(KernelgateError, match="No space left"):
            w.request({"op": "hello", "x": big(1024, 1024)}, 60)
    finally:
        w.close()
