"""A caller's ordinary code, run in the worker before the candidate's import and again after its calls: a forward
leaves the rest of its caller's process as it found it only if this code computes the same bits afterwards.

Red teams 39-41 changed what a caller's other code computes through process-wide state: a rebound public function,
a private helper (`F._in_projection_packed`), a module's globals (`torch.nn.modules.linear.F`), `torch._C._nn`, a
mutable default (`SGD.__init__.__kwdefaults__`), a global optimizer hook, an LR scheduler's method, saved-tensor hooks
left on the calling thread, the autograd engine. A list of names (sandbox/public.py) cannot cover what a process
holds; what a caller runs can be run. `probe` trains and evaluates small models of the common kinds (linear, norm,
activation, convolution, pooling, attention, recurrent and embedding layers), with the optimizers, gradient
clipping and a scheduler, calls torch.nn.functional and Tensor methods as a caller spells them, and draws from
NumPy's and Python's generators; the judge's worker keeps the positional digests of its results (worker.py,
`caller0`) and compares them after the trials and after the timed batch. The values come from a secret seed (the
worker's), on the CPU, on the runner thread (where the candidate's calls run, so its thread-local state is the
caller's); the global generators are put back as they were."""
from __future__ import annotations

import random as _random
import sys
from typing import Any

import torch

from ..digest import positional

_C = torch._C
_GEN = _C.default_generator
_PY_GET, _PY_SET = _random.getstate, _random.setstate
try:
    import numpy as _np
    _NP_GET, _NP_SET = _np.random.get_state, _np.random.set_state
except ImportError:  # pragma: no cover - numpy comes with torch
    _np = None


def _sizes(seed: int) -> dict[str, int]:
    """The probe's sizes, from the secret seed: a change that spares tensors of fixed, known shapes is seen."""
    r = _random.Random(seed)
    return {"b": r.randint(3, 9), "f": r.randint(8, 20), "h": r.randint(10, 24), "e": 2 * r.randint(3, 8),
            "c": r.randint(2, 5), "p": r.randint(6, 11), "s": r.randint(3, 7), "v": r.randint(8, 20), "k": r.randint(2, 6)}


def _models(nn: Any, z: dict[str, int]) -> dict[str, Any]:
    f, h, e, c, k = z["f"], z["h"], z["e"], z["c"], z["k"]
    return {
        "mlp": nn.Sequential(nn.Linear(f, h), nn.LayerNorm(h), nn.GELU(), nn.Linear(h, h), nn.SiLU(),
                             nn.Dropout(0.1), nn.Linear(h, k)),
        "cnn": nn.Sequential(nn.Conv2d(c, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(), nn.MaxPool2d(2),
                             nn.Conv2d(4, 4, 3), nn.GroupNorm(2, 4), nn.Tanh(), nn.AdaptiveAvgPool2d(1),
                             nn.Flatten(), nn.Linear(4, k)),
        "mha": nn.MultiheadAttention(e, 2),
        "enc": nn.TransformerEncoderLayer(e, 2, dim_feedforward=h, dropout=0.0),
        "emb": nn.Embedding(z["v"], e),
        "gru": nn.GRU(e, e),
    }


def _losses(m: dict[str, Any], d: dict[str, torch.Tensor], nn: Any) -> list[torch.Tensor]:
    F = sys.modules["torch.nn.functional"]          # as a caller's module imported now looks it up
    q = d["seq"]
    att = m["mha"](q, q, q)[0]
    gru = m["gru"](m["emb"](d["tok"]))[0]
    return [nn.CrossEntropyLoss()(m["mlp"](d["x"]), d["y"]), nn.MSELoss()(m["cnn"](d["img"]), d["t"]),
            att.pow(2).mean(), m["enc"](q).abs().mean(), F.smooth_l1_loss(gru, q)]


def _functional(d: dict[str, torch.Tensor]) -> list[Any]:
    F = sys.modules["torch.nn.functional"]
    x, w = d["x"], d["w"]
    s, b, e = d["seq"].shape
    q = d["seq"].reshape(s, b, 2, e // 2).permute(1, 2, 0, 3)
    return [F.relu(x), F.gelu(x), F.silu(x), F.softmax(x, -1), F.log_softmax(x, -1), F.layer_norm(x, x.shape[-1:]),
            F.linear(x, w), F.normalize(x, dim=-1), F.dropout(x, 0.5, training=False), F.leaky_relu(x, 0.1),
            F.conv2d(d["img"], d["k"]), F.avg_pool2d(d["img"], 2), F.scaled_dot_product_attention(q, q, q),
            F.cross_entropy(x[:, :d["k"].shape[0]], d["y"]), F.mse_loss(x, x.flip(0)), F.interpolate(d["img"], scale_factor=2),
            torch.nn.functional.sigmoid(x), torch.matmul(x, w.T), torch.softmax(x, 0), torch.exp(x), torch.log1p(x.abs()),
            torch.sqrt(x.abs()), torch.tanh(x), torch.cumsum(x, 1), torch.sort(x, 1)[0], torch.topk(x, 3)[0],
            torch.einsum("ij,kj->ik", x, w), torch.linalg.vector_norm(x, dim=1), torch.linalg.matrix_norm(w),
            torch.fft.rfft(x).abs(), torch.var(x, 0), torch.mean(x), torch.clamp(x, -0.5, 0.5), torch.where(x > 0, x, -x),
            torch.cat([x, x]), torch.stack([x, x]).sum(0), torch.special.erf(x), torch.baddbmm(x[None, :, :1], x[None], w.T[None]),
            x.softmax(-1), x.relu(), x.sum(1), x @ w.T, x.mean(0), x.max(1)[0], x.abs().sqrt(), x.pow(2), x.std(0),
            x.argmax(1).float(), x.T.contiguous(), x.view(-1), x.clone(), x.reshape(-1, x.shape[0]).sum(-1)]


def _draws(seed: int) -> list[Any]:
    """NumPy's and Python's global generators as a caller uses them (seeded here, put back afterwards)."""
    out: list[Any] = []
    py = _PY_GET()
    try:
        _random.seed(seed)
        lst = list(range(12))
        _random.shuffle(lst)
        out.append(torch.tensor(lst + _random.sample(range(100), 5) + [_random.randrange(1000)], dtype=torch.float64))
        out.append(torch.tensor([_random.random(), _random.uniform(1, 2), _random.gauss(0, 1)], dtype=torch.float64))
    finally:
        _PY_SET(py)
    if _np is not None:
        st = _NP_GET()
        try:
            _np.random.seed(seed & 0xFFFFFFFF)
            a = _np.arange(12)
            _np.random.shuffle(a)
            out.append(torch.from_numpy(_np.concatenate([a, _np.random.permutation(12), _np.random.randint(0, 99, 4)])
                                        .astype(_np.float64)))
            out.append(torch.from_numpy(_np.random.rand(4) + _np.random.randn(4)))
        finally:
            _NP_SET(st)
    return out


def probe(seed: int) -> list[torch.Tensor]:
    """The caller's code on values from `seed`: every result as a detached plain tensor (float64 for the
    flags). The global torch generator is put back as it was."""
    nn = torch.nn
    state = _GEN.get_state()
    try:
        flags = [torch.is_grad_enabled(), torch.is_inference_mode_enabled(), torch.is_anomaly_enabled(),
                 torch.are_deterministic_algorithms_enabled(), _C._len_torch_function_stack(),
                 _C._len_torch_dispatch_stack(), sys.modules.get("torch.nn.functional") is torch.nn.functional]
        _GEN.manual_seed(seed)
        g = torch.Generator().manual_seed(seed + 1)
        z = _sizes(seed)
        b, f, c, p, s, e, k = z["b"], z["f"], z["c"], z["p"], z["s"], z["e"], z["k"]
        d = {"x": torch.randn(b, f, generator=g), "y": torch.randint(0, k, (b,), generator=g),
             "img": torch.randn(2, c, p, p, generator=g), "t": torch.randn(2, k, generator=g),
             "seq": torch.randn(s, 3, e, generator=g), "tok": torch.randint(0, z["v"], (s, 3), generator=g),
             "w": torch.randn(z["h"], f, generator=g), "k": torch.randn(k, c, 3, 3, generator=g)}
        out: list[Any] = []
        with torch.enable_grad():
            m = _models(nn, z)
            params = [p for mod in m.values() for p in mod.parameters()]
            opts = [torch.optim.SGD(m["mlp"].parameters(), lr=0.05, momentum=0.9, weight_decay=1e-4),
                    torch.optim.Adam(m["cnn"].parameters(), lr=1e-2),
                    torch.optim.AdamW(list(m["mha"].parameters()) + list(m["enc"].parameters())
                                      + list(m["emb"].parameters()) + list(m["gru"].parameters()), lr=1e-2),
                    torch.optim.RMSprop([torch.nn.Parameter(d["w"].clone())], lr=1e-2)]
            sched = torch.optim.lr_scheduler.StepLR(opts[0], 1, gamma=0.5)
            for mod in m.values():
                mod.train()
            for _ in range(2):               # a second step: the optimizers' state (momentum, moments) in use
                for o in opts:
                    o.zero_grad()
                losses = _losses(m, d, nn)
                total = sum(losses)
                total.backward()
                out += [v.detach() for v in losses]
                out.append(torch.nn.utils.clip_grad_norm_(params, 1.0).detach())
                out += [p.grad.detach().clone() for p in params if p.grad is not None]
                for o in opts:
                    o.step()
                sched.step()
            out.append(torch.tensor([o.param_groups[0]["lr"] for o in opts], dtype=torch.float64))
            out += [p.detach().clone() for p in params]
        with torch.no_grad():
            for mod in m.values():
                mod.eval()
            out += [v.detach() for v in _losses(m, d, nn)]
            out.append(m["cnn"][1].running_mean.clone())
            again = _models(nn, z)["mlp"]
            again.load_state_dict(m["mlp"].state_dict())
            out.append(again.eval()(d["x"]))
            out += [v.detach() for v in _functional(d)]
        with torch.inference_mode():                 # as a server runs a model (red team 42 spared only these)
            out.append(m["mlp"](d["x"]).clone())
        with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
            out.append(m["mlp"](d["x"]).float())
        with torch.no_grad():
            for dt in (torch.bfloat16, torch.float64):  # the caller's other dtypes
                out.append(m["mlp"].to(dt)(d["x"].to(dt)).double())
        out += _draws(seed)
        out.append(torch.tensor([float(f) for f in flags], dtype=torch.float64))
        return [t.detach().clone() for t in out]
    finally:
        _GEN.set_state(state)


#: the message when the caller's code computes other bits after the candidate's calls
CHANGED = ("a caller's ordinary code (training and evaluating small models, torch.nn.functional, Tensor methods, "
           "NumPy's and Python's generators: sandbox/caller.py) computes other results after the candidate's calls "
           "than before its import: the forward changed process-wide state the caller's other code runs on")


def signature(ts: Any, key: int, unclean: Any) -> list | str:
    """(shape, dtype, positional digest) of each result of `probe`, read by the harness (plain tensors only), or
    why not."""
    out: list = []
    for t in ts if type(ts) is list else ():
        why = unclean(t)
        if why:
            return why
        out.append((tuple(t.shape), t.dtype, positional(t, key)))
    return out if type(ts) is list else "the caller's code gave no list"
