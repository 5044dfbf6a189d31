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
