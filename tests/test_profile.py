"""`kernelgate profile`: launch records, bottleneck lines, fingerprints and their distance, fusion estimates."""
import dataclasses
import json

import pytest
import torch
import torch.nn as nn

from kernelgate import api, bottleneck, fingerprint, launches, targets
from kernelgate.bottleneck import Fusion
from kernelgate.cli import main
from kernelgate.launches import MARKER, Launch, Profile
from kernelgate.roofline import Floor

H200 = targets.BUILTIN["h200"]

REF = """
import torch
import torch.nn as nn
class Model(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.fc = nn.Linear(d, d)
        self.ln = nn.LayerNorm(d)
    def forward(self, x):
        return self.ln(torch.nn.functional.gelu(self.fc(x))) + x
def get_inputs():
    return [torch.randn(32, 64)]
def get_init_inputs():
    return [64]
"""
CAND = """
import torch
import torch.nn as nn
class ModelNew(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.fc = nn.Linear(d, d)
        self.ln = nn.LayerNorm(d)
    def forward(self, x):
        y = torch.addmm(self.fc.bias, x, self.fc.weight.t())
        y = 0.5 * y * (1 + torch.erf(y / 2 ** 0.5))
        return torch.layer_norm(y, y.shape[-1:], self.ln.weight, self.ln.bias) + x
"""
CRASHES = """
import torch.nn as nn
class ModelNew(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.fc = nn.Linear(d, d)
        self.ln = nn.LayerNorm(d)
    def forward(self, x):
        raise RuntimeError("boom")
"""


@pytest.fixture(autouse=True)
def _isolated(tmp_path, monkeypatch):
    monkeypatch.setenv("KERNELGATE_MACHINES", str(tmp_path / "machines.toml"))
    monkeypatch.setenv("KERNELGATE_CALIBRATION", str(tmp_path / "calibration.json"))


def run(capsys, *argv):
    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


# ------------------------------------------------------------------ trace parsing (synthetic events)

def marker(i, ts, dur, tid=1):
    return {"name": f"{MARKER}.{i}", "cat": "user_annotation", "ts": ts, "dur": dur, "tid": tid, "args": {}}


def kernel(name, ts, dur, grid=(128, 1, 1), block=(256, 1, 1), regs=32, smem=0, stream=7):
    return {"name": name, "cat": "kernel", "ts": ts, "dur": dur, "tid": stream,
            "args": {"grid": list(grid), "block": list(block), "registers per thread": regs, "shared memory": smem,
                     "stream": stream, "device": 0}}


def test_cuda_trace_gives_launch_records_counts_gaps_and_persistent_kernels():
    events = []
    for i, t0 in enumerate((1000.0, 2000.0)):
        events += [marker(i, t0, 100.0),
                   kernel("void at::native::elementwise<float>(int, float*)", t0 + 10, 10, smem=1024),
                   kernel("triton_red_fused_0", t0 + 30, 60, grid=(132, 1, 1), block=(128, 1, 1), regs=96),
                   {"name": "Memcpy DtoD", "cat": "gpu_memcpy" if i else "Memcpy", "ts": t0 + 95, "dur": 2, "tid": 7,
                    "args": {"bytes": 4096, "stream": 7}}]
    events += [{"name": "junk"}, "not a dict", {"name": "k", "cat": "kernel", "ts": "x", "dur": 1},
               kernel("nan_kernel", float("nan"), 1.0)]
    p = launches.parse(events, "cuda", sm_count=132)
    assert p.forwards == 2 and p.kernels_applicable
    assert p.kernels_per_forward == 2 and p.launches_per_forward == 3
    first = p.launches[0]
    assert first.name.startswith("void at::native::elementwise")
    assert (first.grid, first.block, first.registers, first.shared_memory, first.stream) == \
        ((128, 1, 1), (256, 1, 1), 32, 1024, 7)
    assert first.forward == 0 and first.start_us == pytest.approx(10)
    assert p.persistent_kernels() == ["triton_red_fused_0"]          # 132 blocks on 132 SMs for 60 us
    assert not first.persistent
    assert p.busy_us == (72.0, 72.0) and p.forward_us == (100.0, 100.0)
    assert p.gap_share == pytest.approx(0.28)
    table = {s.name: s for s in p.stats()}
    assert table["triton_red_fused_0"].per_forward == 1 and table["triton_red_fused_0"].total_us == 60
    doc = p.to_json()
    assert doc["records_total"] == 6 and doc["records"][1]["persistent"] is True
    json.dumps(doc)


def test_parse_without_markers_is_an_error():
    with pytest.raises(ValueError, match="markers"):
        launches.parse([kernel("k", 0, 1)], "cuda")


def test_cpu_trace_keeps_top_level_ops_only():
    events = [marker(0, 0, 100), {"name": "aten::linear", "cat": "cpu_op", "ts": 10, "dur": 50, "tid": 1},
              {"name": "aten::addmm", "cat": "cpu_op", "ts": 15, "dur": 40, "tid": 1},
              {"name": "aten::gelu", "cat": "cpu_op", "ts": 70, "dur": 20, "tid": 1},
              {"name": "aten::other_thread", "cat": "cpu_op", "ts": 20, "dur": 5, "tid": 2}]
    p = launches.parse(events, "cpu")
    assert not p.kernels_applicable
    assert [x.name for x in p.launches] == ["aten::linear", "aten::gelu"]
    assert all(x.kind == "op" and x.grid is None for x in p.launches)
    assert p.gap_share == pytest.approx(0.3)
    assert any("not applicable" in n for n in p.notes)


# ------------------------------------------------------------------ bottleneck lines

def prof(kernels, wall_us, busy_us, device="cuda", sm_count=132, forwards=1):
    recs = tuple(Launch(n, "kernel" if device != "cpu" else "op", f, 0.0, d, grid=g, block=(128, 1, 1) if g else None)
                 for f in range(forwards) for n, d, g in kernels)
    return Profile(device, forwards, recs, (wall_us,) * forwards, (busy_us,) * forwards, sm_count)


MEM_FLOOR = Floor(compute_s=1e-5, memory_s=1e-3, floor_s=1e-3, bound="memory", derivation="", machine="h200")
COMPUTE_FLOOR = Floor(compute_s=2e-3, memory_s=1e-4, floor_s=2e-3, bound="compute", derivation="", machine="h200")


def test_launch_bound_line_names_kernels_and_gap_share():
    p = prof([(f"k{i}", 2.0, (64, 1, 1)) for i in range(41)], wall_us=222.0, busy_us=82.0)
    b = bottleneck.classify(MEM_FLOOR, p)
    assert b.kind == "launch"
    assert b.line == "launch-bound: 41 kernels, 63% of the forward between launches"
    assert b.evidence["kernels_per_forward"] == 41


def test_latency_bound_single_kernel_and_small_grids():
    one = bottleneck.classify(MEM_FLOOR, prof([("k", 3.0, (8, 1, 1))], wall_us=20.0, busy_us=3.0))
    assert one.kind == "latency" and one.line.startswith("latency-bound: 1 kernel")
    small = prof([("a", 40.0, (8, 1, 1)), ("b", 40.0, (16, 1, 1))], wall_us=85.0, busy_us=80.0)
    b = bottleneck.classify(Floor(0, 2e-6, 2e-6, "memory", "", "h200"), small)
    assert b.kind == "latency" and "fewer blocks than 132 SMs" in b.line


def test_memory_and_compute_bound_from_the_floor():
    busy = prof([("k", 1100.0, (4096, 1, 1))], wall_us=1110.0, busy_us=1100.0)
    m = bottleneck.classify(MEM_FLOOR, busy)
    assert m.kind == "memory" and m.line.startswith("memory-bound: floor 1 ms is the memory term")
    assert "90% of the floor" in m.line
    c = bottleneck.classify(COMPUTE_FLOOR, prof([("gemm", 2500.0, (4096, 1, 1))], 2510.0, 2500.0))
    assert c.kind == "compute" and c.line.startswith("compute-bound")
    assert bottleneck.classify(MEM_FLOOR, None).kind == "memory"


def test_unknown_without_a_floor():
    b = bottleneck.classify(None, prof([("k", 500.0, (4096, 1, 1))], 510.0, 500.0))
    assert b.kind == "unknown" and b.line.startswith("unknown")
    assert set(bottleneck.CLASSES) >= {"memory", "compute", "launch", "latency", "unknown"}


def test_cpu_launch_bound_speaks_of_ops():
    p = prof([("aten::add", 1.0, None)] * 5, wall_us=20.0, busy_us=5.0, device="cpu")
    b = bottleneck.classify(None, p)
    assert b.kind == "launch" and b.line == "launch-bound: 5 ops, 75% of the forward outside ops (Python and dispatch)"


# ------------------------------------------------------------------ fingerprints

SASS = """
        code for sm_90a
                Function : triton_poi_fused_add_0
        .headerflags    @"EF_CUDA_TEXMODE_UNIFIED EF_CUDA_64BIT_ADDRESS EF_CUDA_SM90 EF_CUDA_VIRTUAL_SM(EF_CUDA_SM90)"
        /*0000*/                   LDC R1, c[0x0][0x28] ;                          /* 0x00000a00ff017b82 */
        /*0010*/                   S2R R0, SR_CTAID.X ;                            /* 0x0000000000007919 */
        /*0020*/                   ULDC.64 UR4, c[0x0][0x208] ;                    /* 0x0000820000047ab9 */
        /*0030*/               @P0 LDG.E.128 R4, desc[UR4][R2.64] ;               /* 0x0000000402040981 */
        /*0040*/              @!P0 LDG.E R8, desc[UR4][R2.64+0x10] ;              /* 0x0000100402080981 */
        /*0050*/                   FADD R4, R4, R8 ;                               /* 0x0000000804047221 */
        /*0060*/                   STG.E.128 desc[UR4][R6.64], R4 ;                /* 0x0000000406007986 */
        /*0070*/                   EXIT ;                                          /* 0x000000000000794d */
        /*0080*/                   BRA 0x80;                                       /* 0xfffffffc00fc7947 */
        ..........
"""
PTX = """
//
// Generated by LLVM NVPTX Back-End
//
.version 8.4
.target sm_90a
.address_size 64
.visible .entry triton_poi_fused_add_0(
	.param .u64 triton_poi_fused_add_0_param_0,
	.param .u32 triton_poi_fused_add_0_param_1
)
{
	.reg .pred 	%p<3>;
	.reg .b32 	%r<10>;
$L__BB0_0:
	ld.param.u64 	%rd1, [triton_poi_fused_add_0_param_0];
	mov.u32 	%r1, %ctaid.x;
	// begin inline asm
	@%p1 ld.global.v4.b32 { %r2, %r3, %r4, %r5 }, [ %rd2 + 0 ];
	// end inline asm
	add.f32 	%f3, %f1, %f2;
	add.f32 	%f4, %f1, %f2;
	@%p1 st.global.v4.b32 [ %rd3 + 0 ], { %r2, %r3, %r4, %r5 };
	st.shared.f32 	[%r6], %f4;
	ret;
}
"""
TTGIR = """
#blocked = #ttg.blocked<{sizePerThread = [4], threadsPerWarp = [32], warpsPerCTA = [4], order = [0]}>
module attributes {"ttg.num-warps" = 4 : i32} {
  tt.func public @triton_poi_fused_add_0(%arg0: !tt.ptr<f32>) attributes {noinline = false} {
    %c512_i32 = arith.constant 512 : i32 loc(#loc1)
    %0 = tt.get_program_id x : i32 loc(#loc2)
    %1 = arith.muli %0, %c512_i32 : i32 loc(#loc3)
    %2 = tt.splat %arg0 : !tt.ptr<f32> -> tensor<512x!tt.ptr<f32>, #blocked> loc(#loc4)
    %3 = tt.load %2 : tensor<512x!tt.ptr<f32>, #blocked> loc(#loc5)
    %4 = arith.addf %3, %3 : tensor<512xf32, #blocked> loc(#loc6)
    tt.store %2, %4 : tensor<512x!tt.ptr<f32>, #blocked> loc(#loc7)
    tt.return loc(#loc8)
  } loc(#loc)
} loc(#loc)
#loc1 = loc(unknown)
"""


def test_sass_histogram_counts_mnemonics_without_predicates_or_modifiers():
    h = fingerprint.opcode_histogram(SASS, "sass")
    assert h == {"LDC": 1, "S2R": 1, "ULDC": 1, "LDG": 2, "FADD": 1, "STG": 1, "EXIT": 1, "BRA": 1}


def test_ptx_histogram_keeps_state_spaces_and_skips_directives():
    h = fingerprint.opcode_histogram(PTX, "ptx")
    assert h == {"ld.param": 1, "mov": 1, "ld.global": 1, "add": 2, "st.global": 1, "st.shared": 1, "ret": 1}


def test_ttgir_histogram_counts_dialect_ops():
    h = fingerprint.opcode_histogram(TTGIR, "ttgir")
    assert h == {"arith.constant": 1, "tt.get_program_id": 1, "arith.muli": 1, "tt.splat": 1, "tt.load": 1,
                 "arith.addf": 1, "tt.store": 1, "tt.return": 1, "tt.func": 1}
    with pytest.raises(ValueError):
        fingerprint.opcode_histogram(TTGIR, "llir")


@pytest.mark.parametrize("dist", [fingerprint.cosine_distance, fingerprint.jaccard_distance])
def test_distance_properties(dist):
    a, b, c = {"LDG": 4, "FADD": 2}, {"LDG": 1, "FFMA": 3}, {"HMMA": 5}
    assert dist(a, a) == pytest.approx(0.0, abs=1e-12)
    assert dist(a, c) == 1.0
    assert dist(a, b) == pytest.approx(dist(b, a))
    assert 0.0 < dist(a, b) < 1.0
    assert dist({}, {}) == 0.0 and dist(a, {}) == 1.0


def test_kernel_name_drops_return_type_and_parameters():
    assert fingerprint.kernel_name("void at::native::vectorized_elementwise_kernel<4, at::native::Foo<float> >"
                                   "(int, at::native::Foo<float>, std::array<char*, 2ul>)") == \
        "at::native::vectorized_elementwise_kernel<4, at::native::Foo<float> >"
    assert fingerprint.kernel_name("triton_poi_fused_add_0") == "triton_poi_fused_add_0"


def _cuda_profile(names):
    return Profile("cuda", 1, tuple(Launch(n, "kernel", 0, 0.0, 5.0, (4, 1, 1), (128, 1, 1), 32, 0) for n in names),
                   (20.0,), (10.0,), 132)


def test_fingerprints_on_launches_then_code():
    a = fingerprint.build(_cuda_profile(["gemm", "gelu"]))
    b = fingerprint.build(_cuda_profile(["gemm", "gelu"]))
    c = fingerprint.build(_cuda_profile(["triton_poi_fused_add_0"]))
    assert a.basis == "launches"
    d_same, d_other = fingerprint.distance(a, b), fingerprint.distance(a, c)
    assert d_same.value == 0.0 and d_same.basis == "launches"
    assert d_other.value == 1.0 and fingerprint.distance(c, a).value == 1.0
    arts = [{"kernel": "triton_poi_fused_add_0", "kind": "ptx", "dir": "h1", "data": PTX},
            {"kernel": "triton_poi_fused_add_0", "kind": "json", "dir": "h1",
             "data": json.dumps({"num_warps": 8, "shared": 0})},          # 256 threads: not the launched build
            {"kernel": "triton_poi_fused_add_0", "kind": "ttgir", "dir": "h2", "data": TTGIR},
            {"kernel": "triton_poi_fused_add_0", "kind": "json", "dir": "h2",
             "data": json.dumps({"num_warps": 4, "shared": 0})},
            {"kernel": "not_launched", "kind": "ptx", "dir": "h3", "data": PTX}]
    coded = fingerprint.build(_cuda_profile(["triton_poi_fused_add_0"]), arts, sass=False)
    assert coded.basis == "ttgir"                       # the variant matching 128 threads per block
    kc = coded.code["triton_poi_fused_add_0"]
    assert kc.variants == 2 and kc.num_warps == 4
    same = fingerprint.distance(coded, coded)
    assert same.basis == "ttgir" and same.value == pytest.approx(0.0, abs=1e-12)
    mixed = fingerprint.distance(coded, a)               # code on one side only: names decide
    assert mixed.basis == "launches" and mixed.value == 1.0
    doc = coded.to_json()
    assert doc["histogram_level"] == "ttgir" and sum(doc["histogram"].values()) == pytest.approx(1.0, abs=1e-4)


# ------------------------------------------------------------------ fusion estimates

def test_fusion_estimate_is_monotone_and_ranked():
    base = bottleneck.fusion_estimate(Fusion("f", 1 << 20, 2), H200)
    assert base.bytes_saved == 2 << 20
    assert base.memory_s == pytest.approx((2 << 20) / H200.bandwidth)
    assert base.launch_s == pytest.approx(2 * H200.launch_overhead_s)
    for more in (Fusion("f", 2 << 20, 2), Fusion("f", 1 << 20, 3), Fusion("f", 1 << 20, 2, reads=2)):
        assert bottleneck.fusion_estimate(more, H200).predicted_s > base.predicted_s
    ranked = bottleneck.rank_fusions([Fusion("small", 1 << 10, 1), Fusion("big", 1 << 30, 1),
                                      Fusion("launches", 0, 40)], H200)
    assert [e.name for e in ranked] == ["big", "launches", "small"]
    assert [e.predicted_s for e in ranked] == sorted((e.predicted_s for e in ranked), reverse=True)
    m = ranked[0].measured(before_s=1.0e-3, after_s=0.6e-3)
    assert m.measured_s == pytest.approx(0.4e-3) and m.predicted_s == ranked[0].predicted_s
    assert m.ratio == pytest.approx(0.4e-3 / ranked[0].predicted_s)
    assert set(m.to_json()) >= {"predicted_s", "measured_s", "ratio", "derivation"}
    with pytest.raises(ValueError):
        bottleneck.fusion_estimate(Fusion("bad", -1, 0), H200)


def test_whole_forward_counts_intermediates_read_by_later_ops():
    class Chain(nn.Module):
        def forward(self, x):
            y = x * 2.0             # intermediate, read once
            z = torch.sigmoid(y)    # intermediate, read twice
            return z * z + y.view(-1).view_as(z)
    x = torch.randn(16, 32)
    f = bottleneck.whole_forward(Chain(), [x], kernels_per_forward=4)
    # y read by sigmoid and by the add (through views); z read twice by one mul; z*z read by the add
    assert f.intermediate_bytes == 3 * x.numel() * 4
    assert f.launches_removed == 3 and f.reads >= 1


# ------------------------------------------------------------------ end to end on the CPU

def test_api_profile_gives_cpu_op_records(write):
    ref = write("ref.py", REF)
    rep = api.profile(ref, target="cpu", warmup=1, forwards=3)
    p = rep.reference.profile
    assert rep.candidate is None and rep.distance is None and rep.exit_code == 0
    assert p.forwards == 3 and not p.kernels_applicable
    names = [x.name for x in p.launches if x.forward == 0]
    assert names == ["aten::linear", "aten::gelu", "aten::layer_norm", "aten::add"]
    assert all(x.duration_us > 0 and x.grid is None for x in p.launches)
    assert p.kernels_per_forward == 4 and 0.0 <= p.gap_share < 1.0
    assert rep.reference.bottleneck.kind in bottleneck.CLASSES
    assert rep.reference.fingerprint.basis == "ops"
    assert rep.reference.fusion is not None and rep.reference.fusion.launches_removed == 3
    assert rep.floor is not None


def test_cli_profile_json_end_to_end(write, capsys):
    ref, cand = write("ref.py", REF), write("cand.py", CAND)
    rc, out, _ = run(capsys, "profile", ref, cand, "--json", "--forwards", "2", "--warmup", "1")
    assert rc == 0
    doc = json.loads(out)
    assert doc["status"] == "ok" and doc["target"] == "cpu" and doc["floor"]["bound"] in ("memory", "compute")
    for side in ("reference", "candidate"):
        s = doc[side]
        assert s["error"] is None
        assert s["launches"]["kernels_applicable"] is False and s["launches"]["forwards"] == 2
        assert s["launches"]["records"] and s["bottleneck"]["line"]
        assert s["fingerprint"]["basis"] == "ops"
    assert "aten::addmm" in doc["candidate"]["fingerprint"]["kernels"]
    assert doc["reference"]["fusion_estimate"]["predicted_s"] > 0
    d = doc["distance"]
    assert d["basis"] == "ops" and 0.0 < d["value"] < 1.0
    rc, out, _ = run(capsys, "profile", ref, "--forwards", "1", "--warmup", "0")
    assert rc == 0 and "reference (Model):" in out and "fingerprint: ops" in out


def test_profile_error_paths(write, capsys, tmp_path):
    ref = write("ref.py", REF)
    rc, out, _ = run(capsys, "profile", str(tmp_path / "missing.py"), "--json")
    assert rc == 2 and json.loads(out)["status"] == "error" and "no such file" in json.loads(out)["message"]
    rc, _, err = run(capsys, "profile", ref, str(tmp_path / "nope.py"))
    assert rc == 2 and "no such candidate file" in err
    rc, _, err = run(capsys, "profile", ref, "--forwards", "0")
    assert rc == 2 and "forwards >= 1" in err
    rc, _, _ = run(capsys, "profile")
    assert rc == 2
    if not torch.cuda.is_available():
        rc, out, _ = run(capsys, "profile", ref, "--target", "cuda", "--json")
        doc = json.loads(out)
        assert rc == 2 and doc["reason"] == "no_device" and "CUDA" in doc["message"]


def test_candidate_that_crashes_is_reported_not_raised(write, capsys):
    ref, bad = write("ref.py", REF), write("bad.py", CRASHES)
    rc, out, _ = run(capsys, "profile", ref, bad, "--json", "--forwards", "1", "--warmup", "0")
    doc = json.loads(out)
    assert rc == 1 and doc["status"] == "error"
    assert "boom" in doc["candidate"]["error"] and doc["distance"] is None
    assert doc["reference"]["error"] is None


# ------------------------------------------------------------------ GPU

TRITON_CAND = """
import torch
import torch.nn as nn
import triton
import triton.language as tl

@triton.jit
def add_one_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=m) + 1.0, mask=m)

class ModelNew(nn.Module):
    def forward(self, x):
        y = torch.empty_like(x)
        n = x.numel()
        add_one_kernel[(triton.cdiv(n, 1024),)](x, y, n, BLOCK=1024)
        return y
"""
ADD_ONE_REF = """
import torch
import torch.nn as nn
class Model(nn.Module):
    def forward(self, x):
        return x + 1.0
def get_inputs():
    return [torch.randn(1 << 20)]
def get_init_inputs():
    return []
"""


@pytest.mark.gpu
def test_gpu_profile_records_triton_and_aten_kernels(write):
    ref, cand = write("ref.py", ADD_ONE_REF), write("cand.py", TRITON_CAND)
    rep = api.profile(ref, cand, target="cuda", warmup=2, forwards=3)
    r, c = rep.reference.profile, rep.candidate.profile
    assert r.kernels_applicable and r.kernels_per_forward == 1
    assert c.kernels_per_forward == 1
    k = next(x for x in c.launches if x.kind == "kernel")
    assert k.name == "add_one_kernel" and k.grid == ((1 << 20) // 1024, 1, 1) and k.registers
    assert rep.candidate.fingerprint.basis in ("sass", "ptx", "ttgir")
    assert rep.distance is not None and rep.distance.basis == "launches" and rep.distance.value == 1.0
    doc = dataclasses.asdict(rep.reference.profile)
    assert doc["sm_count"]


WRITES_CACHE = CAND + """
import os as _os
_d = _os.path.join(_os.environ["TRITON_CACHE_DIR"], "abc123")
_os.makedirs(_d, exist_ok=True)
open(_os.path.join(_d, "my_kernel.ptx"), "w").write('''""" + PTX.replace("triton_poi_fused_add_0", "my_kernel") + """''')
open(_os.path.join(_d, "my_kernel.json"), "w").write('{"num_warps": 4, "shared": 0, "name": "my_kernel"}')
open(_os.path.join(_d, "my_kernel.ttir"), "w").write("not collected")
open(_os.path.join(_d, "__grp__my_kernel.json"), "w").write("{}")
open(_os.path.join(_d, "orphan.json"), "w").write("{}")
"""


def test_worker_collects_compiled_artifacts_from_its_private_cache(write):
    from kernelgate import workload
    from kernelgate.config import gate_config
    from kernelgate.gate.judge import Session, prepare
    from kernelgate.records import Contract
    ref, cand = write("ref.py", REF), write("cand.py", WRITES_CACHE)
    task = prepare(workload.Spec.parse(ref, "Model"), "cpu", Contract())
    s = Session(task, workload.Spec.parse(cand, "ModelNew"), gate_config())
    try:
        p, arts = launches.profile_session(s, task.given, warmup=0, forwards=1, artifacts=True)
    finally:
        s.worker.close()
    assert p.forwards == 1 and p.launches
    assert sorted((a["kernel"], a["kind"]) for a in arts) == [("my_kernel", "json"), ("my_kernel", "ptx")]
    launched = Profile("cuda", 1, (Launch("my_kernel", "kernel", 0, 0.0, 3.0, (1, 1, 1), (128, 1, 1)),), (5.0,),
                       (3.0,), 132)
    fp = fingerprint.build(launched, arts, sass=False)
    assert fp.basis == "ptx" and fp.histogram("ptx")["ld.global"] == 1


def test_strategy_fusions_count_what_each_generated_kernel_strategy_fuses():
    from kernelgate import bottleneck

    class Chain(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(64, 128)
            self.scale = torch.nn.Parameter(torch.ones(128))

        def forward(self, x):
            y = torch.nn.functional.gelu(self.lin(x))      # GEMM feeding a group of 3 pointwise ops
            y = y * self.scale + 1.0
            z = torch.sigmoid(x) * x                        # a second group, not fed by a GEMM
            return y, z

    f = bottleneck.strategy_fusions(Chain().eval(), [torch.randn(32, 64)])
    assert f["triton:pointwise"].launches_removed == 3                 # (gelu, mul, add) + (sigmoid, mul)
    assert f["triton:pointwise"].intermediate_bytes == (2 * 32 * 128 + 32 * 64) * 4
    assert f["triton:gemm-epilogue"].intermediate_bytes == 2 * 32 * 128 * 4
    gemm = f["triton:gemm"]
    assert gemm.intermediate_bytes == 3 * 32 * 128 * 4 and gemm.launches_removed == 3

    class Lone(torch.nn.Module):
        def forward(self, x):
            return torch.softmax(x, -1)
    assert bottleneck.strategy_fusions(Lone(), [torch.randn(4, 8)]) == {}


def test_cpu_profile_text_has_readable_times_and_no_gpu_columns():
    """Issue 12 item 9: `profile` on a CPU printed `1.418e+05 us` and grid/block/regs/smem columns that
    only a GPU fills."""
    from kernelgate.cli import format_profile
    p = prof([("aten::softmax", 90_000.0, None), ("aten::layer_norm", 50_000.0, None)], wall_us=141_800.0,
             busy_us=140_000.0, device="cpu")
    side = launches.Side("reference", "ref.py", "Model", p, bottleneck.classify(None, p), fingerprint.build(p))
    text = format_profile(launches.Report("ref.py", "cpu", "cpu", "cpu", None, side))
    assert "e+0" not in text and "142 ms" in text and "90 ms" in text
    for column in ("grid", "block", "regs", "smem"):
        assert column not in text
    gpu = prof([("k", 2.5, (64, 1, 1))], wall_us=12.0, busy_us=2.5)
    side = launches.Side("reference", "ref.py", "Model", gpu, bottleneck.classify(None, gpu), fingerprint.build(gpu))
    text = format_profile(launches.Report("ref.py", "cuda", "NVIDIA H200", "h200", None, side))
    assert "grid" in text and "block" in text and "12 us" in text and "2.5 us" in text
