"""The judge->worker shared region's growth (sandbox/host.py Worker._pack, ipc.grown): a large region grows to what the message
needs (it doubled: the 16 GiB average-pooling task's region became 32 GiB for a layout trial's 16.00003 GiB and
64 GiB for the gap trial's 36 GiB, and the judge died at 123 of 125 GiB of host memory), and the old region is gone
on the judge's side before the new one is reserved."""
import weakref

import torch

from kernelgate.sandbox import host, ipc


def test_small_regions_double_large_ones_grow_to_the_need():
    assert ipc.grown(0, 5 << 20) == 5 << 20
    assert ipc.grown(4 << 20, 5 << 20) == 8 << 20
    big = 16 << 30
    assert ipc.grown(big, big + 4096) == big + 4096
    assert ipc.grown(big, int(2.24 * big)) == int(2.24 * big)


def test_pack_grows_a_large_region_to_the_need_and_drops_the_old_one_first(monkeypatch):
    monkeypatch.setattr(ipc, "GROW_DOUBLE_BELOW", 1 << 20)
    w = host.Worker("regions-test")         # never started: _pack only stages a message
    try:
        made = []
        create = ipc.Bulk.create

        def tracked(size):
            made.append((size, [r() is not None for r in olds]))
            return create(size)
        olds = []
        monkeypatch.setattr(ipc.Bulk, "create", staticmethod(tracked))
        x = torch.randn(1 << 20)                     # 4 MiB
        w._pack({"op": "call", "inputs": [x]})
        assert w._in.size == 4 << 20
        olds.append(weakref.ref(w._in))
        y = torch.randn((1 << 20) + 4096)             # a little more: not twice as much
        w._pack({"op": "call", "inputs": [y]})
        assert w._in.size == ipc.bulk_bytes(y) and w._in.size < 5 << 20
        assert made[-1][1] == [False]                 # the old region was released before the new one was made
        w._pack({"op": "call", "inputs": [x]})        # smaller: the region is reused
        assert w._in.size == ipc.bulk_bytes(y)
    finally:
        w.close()
