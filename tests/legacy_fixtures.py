"""Helpers for tests/test_legacy.py: write stable-baselines 2.x files without stable_baselines, and
an independent NumPy statement of SB2's actor-critic network maths (reference section 4).

The pickle writer emits opcodes directly, so files can name ``stable_baselines.*`` / ``gym.spaces.*`` /
``numpy.core.*`` / cloudpickle internals exactly as real SB2 files do, without any of those being importable.
"""
from __future__ import annotations

import base64
import io
import json
import struct
import zipfile
from collections import OrderedDict
from pathlib import Path
from typing import Any, Dict, Optional, Sequence, Tuple

import numpy as np

ZOO = Path(__file__).resolve().parents[2] / "shared" / "fixtures" / "sb2_zoo"
F32_MAX = float(np.finfo(np.float32).max)


# ------------------------------------------------------------------------------------------------
# a minimal pickle writer
# ------------------------------------------------------------------------------------------------
class G:
    """A global ``module.name`` (GLOBAL opcode)."""

    def __init__(self, module: str, name: str):
        self.module, self.name = module, name


class Call:
    """``func(*args)`` (REDUCE), then ``BUILD state`` when ``state`` is given."""

    _NO = object()

    def __init__(self, func: Any, args: tuple = (), state: Any = _NO):
        self.func, self.args, self.state = func, tuple(args), state


class NewObj:
    """``cls.__new__(cls, *args)`` (NEWOBJ), then ``BUILD state``."""

    def __init__(self, cls: G, args: tuple = (), state: Any = None):
        self.cls, self.args, self.state = cls, tuple(args), state


class _Writer:
    def __init__(self):
        self.out = io.BytesIO()

    def w(self, data: bytes) -> None:
        self.out.write(data)

    def save(self, obj: Any) -> None:  # noqa: C901 - one branch per kind
        w = self.w
        if obj is None:
            w(b"N")
        elif obj is True:
            w(b"\x88")
        elif obj is False:
            w(b"\x89")
        elif isinstance(obj, G):
            w(b"c" + obj.module.encode() + b"\n" + obj.name.encode() + b"\n")
        elif isinstance(obj, Call):
            self.save(obj.func)
            self.save(obj.args)
            w(b"R")
            if obj.state is not Call._NO:
                self.save(obj.state)
                w(b"b")
        elif isinstance(obj, NewObj):
            self.save(obj.cls)
            self.save(obj.args)
            w(b"\x81")
            if obj.state is not None:
                self.save(obj.state)
                w(b"b")
        elif isinstance(obj, np.ndarray):
            self.save(ndarray_call(obj))
        elif isinstance(obj, np.generic):
            self.save(Call(G("numpy.core.multiarray", "scalar"), (dtype_call(obj.dtype), obj.tobytes())))
        elif isinstance(obj, bool):
            w(b"\x88" if obj else b"\x89")
        elif isinstance(obj, int):
            if -2 ** 31 <= obj < 2 ** 31:
                w(b"J" + struct.pack("<i", obj))
            else:
                data = obj.to_bytes((obj.bit_length() + 8) // 8, "little", signed=True)
                w(b"\x8a" + bytes([len(data)]) + data)
        elif isinstance(obj, float):
            w(b"G" + struct.pack(">d", obj))
        elif isinstance(obj, str):
            data = obj.encode("utf-8")
            w(b"X" + struct.pack("<I", len(data)) + data)
        elif isinstance(obj, bytes):
            w(b"B" + struct.pack("<I", len(obj)) + obj)
        elif isinstance(obj, tuple):
            if not obj:
                w(b")")
            else:
                w(b"(")
                for item in obj:
                    self.save(item)
                w(b"t")
        elif isinstance(obj, list):
            w(b"]")
            if obj:
                w(b"(")
                for item in obj:
                    self.save(item)
                w(b"e")
        elif isinstance(obj, OrderedDict):
            self.save(Call(G("collections", "OrderedDict"), ()))
            if obj:
                w(b"(")
                for key, value in obj.items():
                    self.save(key)
                    self.save(value)
                w(b"u")
        elif isinstance(obj, dict):
            w(b"}")
            if obj:
                w(b"(")
                for key, value in obj.items():
                    self.save(key)
                    self.save(value)
                w(b"u")
        else:
            raise TypeError(f"cannot write {type(obj)}")


def dumps(obj: Any) -> bytes:
    """Pickle (protocol 4 header, no memo) of the writer's value tree."""
    writer = _Writer()
    writer.w(b"\x80\x04")
    writer.save(obj)
    writer.w(b".")
    return writer.out.getvalue()


def dtype_call(dtype: Any) -> Call:
    """``numpy.dtype('f4', 0, 1)`` + BUILD state, as numpy 1.x pickles dtypes."""
    dtype = np.dtype(dtype)
    order = "|" if dtype.itemsize == 1 else "<"
    return Call(G("numpy", "dtype"), (dtype.str[1:], 0, 1), (3, order, None, None, None, -1, -1, 0))


def ndarray_call(arr: np.ndarray) -> Call:
    """``numpy.core.multiarray._reconstruct(ndarray, (0,), b'b')`` + BUILD, as numpy 1.x pickles arrays."""
    arr = np.array(arr, order="C", copy=True)  # (ascontiguousarray would make 0-d arrays 1-d)
    return Call(G("numpy.core.multiarray", "_reconstruct"), (G("numpy", "ndarray"), (0,), b"b"),
                (1, tuple(int(s) for s in arr.shape), dtype_call(arr.dtype), False, arr.tobytes()))


# ------------------------------------------------------------------------------------------------
# old gym spaces, cloudpickled functions, policies
# ------------------------------------------------------------------------------------------------
def _rng_state() -> Call:
    return Call(G("numpy.random", "__RandomState_ctor"), (),
                ("MT19937", np.arange(624, dtype=np.uint32), 0, 0, 0.0))


def box(low: Any, high: Any, shape: Sequence[int], dtype: Any = np.float32, with_rng: bool = True) -> NewObj:
    dtype = np.dtype(dtype)
    state = {"low": np.broadcast_to(np.asarray(low, dtype), shape).copy(),
             "high": np.broadcast_to(np.asarray(high, dtype), shape).copy(),
             "shape": tuple(shape), "dtype": dtype_call(dtype)}
    if with_rng:
        state["np_random"] = _rng_state()
    return NewObj(G("gym.spaces.box", "Box"), (), state)


def discrete(n: int) -> NewObj:
    return NewObj(G("gym.spaces.discrete", "Discrete"), (),
                  {"n": n, "shape": (), "dtype": dtype_call(np.int64)})


def multi_discrete(nvec: Sequence[int]) -> NewObj:
    return NewObj(G("gym.spaces.multi_discrete", "MultiDiscrete"), (),
                  {"nvec": np.asarray(nvec, dtype=np.int64), "shape": (len(nvec),), "dtype": dtype_call(np.int64)})


def multi_binary(n: int) -> NewObj:
    return NewObj(G("gym.spaces.multi_binary", "MultiBinary"), (),
                  {"n": n, "shape": (n,), "dtype": dtype_call(np.int8)})


def cloudpickled_function(qualname: str, module: str, closure_values: Sequence[Any] = (), name: str = "func",
                          consts: tuple = (None,)) -> Call:
    """A function pickled by value the way cloudpickle 0.5-1.x did (15-argument Python 3.6 CodeType)."""
    code = Call(Call(G("cloudpickle.cloudpickle", "_builtin_type"), ("CodeType",)),
                (1, 0, 1, 1, 19, b"\x88\x00S\x00", tuple(consts), (), ("_",), "/home/user/" + module + ".py", name,
                 463, b"\x00\x01", ("val",), ()))
    skel = Call(G("cloudpickle.cloudpickle", "_make_skel_func"), (code, len(closure_values), module))
    state = {"globals": {}, "defaults": None, "dict": {}, "closure_values": list(closure_values), "module": module,
             "name": name, "doc": None, "qualname": qualname}
    return Call(G("cloudpickle.cloudpickle", "_fill_function"), (skel, state))


def constfn(value: float) -> Call:
    return cloudpickled_function("constfn.<locals>.func", "stable_baselines.common.schedules", [value])


def policy(name: str, module: str = "stable_baselines.common.policies") -> G:
    return G(module, name)


# ------------------------------------------------------------------------------------------------
# files
# ------------------------------------------------------------------------------------------------
def write_pkl(path: Path, data: dict, params: "OrderedDict[str, np.ndarray]", as_dict: bool = False,
              duplicate: bool = False) -> Path:
    """``cloudpickle.dump((data, params))``: params as a nameless list (SB2 <= 2.5) or an OrderedDict."""
    values: Any = OrderedDict(params) if as_dict else list(params.values())
    if duplicate:
        values = values + values
    Path(path).write_bytes(dumps((data, values)))
    return Path(path)


def _json_entry(value: Any) -> Any:
    if isinstance(value, (G, Call, NewObj, np.ndarray, np.generic)):
        kind = value.name if isinstance(value, G) else "object"
        return {":type:": f"<class '{kind}'>", ":serialized:": base64.b64encode(dumps(value)).decode("ascii")}
    if isinstance(value, dict):
        if any(isinstance(v, (G, Call, NewObj)) for v in value.values()):
            return {":type:": "<class 'dict'>", ":serialized:": base64.b64encode(dumps(value)).decode("ascii")}
        return value
    return value


def write_zip(path: Path, data: dict, params: "OrderedDict[str, np.ndarray]") -> Path:
    """The SB2 >= 2.8 zip layout: ``data`` JSON, ``parameters`` npz, ``parameter_list`` JSON."""
    buffer = io.BytesIO()
    np.savez(buffer, **params)
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("data", json.dumps({k: _json_entry(v) for k, v in data.items()}, indent=4))
        archive.writestr("parameters", buffer.getvalue())
        archive.writestr("parameter_list", json.dumps(list(params), indent=4))
    return Path(path)


def ppo2_data(obs_space: Any, act_space: Any, policy_ref: Any, policy_kwargs: Optional[dict] = None,
              n_envs: int = 1, old: bool = False) -> dict:
    """PPO2 data keys as 2.10 saves them (``old``: as <= 2.5 did: no policy_kwargs / seed / n_cpu_tf_sess)."""
    data = {"gamma": 0.99, "n_steps": 128, "vf_coef": 0.5, "ent_coef": 0.01, "max_grad_norm": 0.5,
            "learning_rate": constfn(2.5e-4), "lam": 0.95, "nminibatches": 1, "noptepochs": 4,
            "cliprange": constfn(0.2), "cliprange_vf": None, "verbose": 0, "policy": policy_ref,
            "observation_space": obs_space, "action_space": act_space, "n_envs": n_envs, "n_cpu_tf_sess": None,
            "seed": None, "_vectorize_action": False, "policy_kwargs": policy_kwargs or {}}
    if old:
        for key in ("cliprange_vf", "n_cpu_tf_sess", "seed", "policy_kwargs"):
            data.pop(key)
    return data


def a2c_data(obs_space: Any, act_space: Any, policy_ref: Any, policy_kwargs: Optional[dict] = None,
             n_envs: int = 1) -> dict:
    return {"gamma": 0.99, "n_steps": 5, "vf_coef": 0.25, "ent_coef": 0.01, "max_grad_norm": 0.5,
            "learning_rate": 7e-4, "alpha": 0.99, "epsilon": 1e-5, "lr_schedule": "constant", "verbose": 0,
            "policy": policy_ref, "observation_space": obs_space, "action_space": act_space, "n_envs": n_envs,
            "n_cpu_tf_sess": None, "seed": None, "_vectorize_action": False, "policy_kwargs": policy_kwargs or {}}


# ------------------------------------------------------------------------------------------------
# actor-critic parameters, named as in reference section 4 (written out independently of the converter)
# ------------------------------------------------------------------------------------------------
def _rand(rng: np.random.Generator, shape: Tuple[int, ...]) -> np.ndarray:
    fan_in = shape[0] if len(shape) == 2 else (int(np.prod(shape[:-1])) if len(shape) == 4 else 1)
    return (rng.standard_normal(shape) / np.sqrt(max(fan_in, 1))).astype(np.float32)


def linear(params: OrderedDict, scope: str, n_in: int, n_out: int, rng: np.random.Generator) -> None:
    params[f"model/{scope}/w:0"] = _rand(rng, (n_in, n_out))
    params[f"model/{scope}/b:0"] = (0.1 * rng.standard_normal(n_out)).astype(np.float32)


def heads(params: OrderedDict, pi_dim: int, vf_dim: int, n_act: int, box_logstd: bool,
          rng: np.random.Generator) -> None:
    linear(params, "vf", vf_dim, 1, rng)
    linear(params, "pi", pi_dim, n_act, rng)
    if box_logstd:
        params["model/pi/logstd:0"] = (0.3 * rng.standard_normal((1, n_act))).astype(np.float32)
    linear(params, "q", vf_dim, n_act, rng)


def mlp_params(obs_dim: int, n_act: int, shared: Sequence[int], pi: Sequence[int], vf: Sequence[int],
               box_logstd: bool, seed: int = 0) -> "OrderedDict[str, np.ndarray]":
    """FeedForward Mlp: shared_fc{idx}, then pi_fc{i} / vf_fc{i} interleaved by depth, then vf, pi, [logstd], q."""
    rng = np.random.default_rng(seed)
    params: "OrderedDict[str, np.ndarray]" = OrderedDict()
    dim = obs_dim
    for idx, size in enumerate(shared):
        linear(params, f"shared_fc{idx}", dim, size, rng)
        dim = size
    pi_dim = vf_dim = dim
    for i in range(max(len(pi), len(vf))):
        if i < len(pi):
            linear(params, f"pi_fc{i}", pi_dim, pi[i], rng)
            pi_dim = pi[i]
        if i < len(vf):
            linear(params, f"vf_fc{i}", vf_dim, vf[i], rng)
            vf_dim = vf[i]
    heads(params, pi_dim, vf_dim, n_act, box_logstd, rng)
    return params


def lstm_params(obs_dim: int, n_act: int, layers: Sequence[int], n_lstm: int, layer_norm: bool, box_logstd: bool,
                seed: int = 0, cnn_shape: Optional[Tuple[int, int, int]] = None) -> "OrderedDict[str, np.ndarray]":
    """Legacy-mode LSTM policy: pi_fc{i} (shared) or nature_cnn, lstm1/{wx,wh,b[,gx,bx,gh,bh,gc,bc]}, heads."""
    rng = np.random.default_rng(seed)
    params: "OrderedDict[str, np.ndarray]" = OrderedDict()
    if cnn_shape is not None:
        dim = cnn_params(params, cnn_shape, rng)
    else:
        dim = obs_dim
        for i, size in enumerate(layers):
            linear(params, f"pi_fc{i}", dim, size, rng)
            dim = size
    params["model/lstm1/wx:0"] = _rand(rng, (dim, 4 * n_lstm))
    params["model/lstm1/wh:0"] = _rand(rng, (n_lstm, 4 * n_lstm))
    params["model/lstm1/b:0"] = (0.1 * rng.standard_normal(4 * n_lstm)).astype(np.float32)
    if layer_norm:
        for name, n in (("gx", 4 * n_lstm), ("bx", 4 * n_lstm), ("gh", 4 * n_lstm), ("bh", 4 * n_lstm),
                        ("gc", n_lstm), ("bc", n_lstm)):
            base = 1.0 if name.startswith("g") else 0.0
            params[f"model/lstm1/{name}:0"] = (base + 0.2 * rng.standard_normal(n)).astype(np.float32)
    heads(params, n_lstm, n_lstm, n_act, box_logstd, rng)
    return params


def cnn_params(params: OrderedDict, shape: Tuple[int, int, int], rng: np.random.Generator) -> int:
    """nature_cnn under model/: c1 (8,8,C,32)/4, c2 (4,4,32,64)/2, c3 (3,3,64,64)/1, fc1 (flat, 512); bias (1,C,1,1)."""
    h, w, c = shape
    for scope, k, s, c_out in (("c1", 8, 4, 32), ("c2", 4, 2, 64), ("c3", 3, 1, 64)):
        params[f"model/{scope}/w:0"] = _rand(rng, (k, k, c, c_out))
        params[f"model/{scope}/b:0"] = (0.1 * rng.standard_normal((1, c_out, 1, 1))).astype(np.float32)
        h, w, c = (h - k) // s + 1, (w - k) // s + 1, c_out
    linear(params, "fc1", h * w * c, 512, rng)
    return 512


# ------------------------------------------------------------------------------------------------
# NumPy statement of SB2's actor-critic maths (reference sections 3, 4.1-4.4)
# ------------------------------------------------------------------------------------------------
def preprocess(obs: np.ndarray, space: dict) -> np.ndarray:
    """space: {"kind": "Box"/"Discrete"/"MultiDiscrete"/"MultiBinary", ...}; Cnn policies scale Box by bounds."""
    kind = space["kind"]
    if kind == "Discrete":
        return np.eye(space["n"])[np.asarray(obs, dtype=np.int64).reshape(-1)]
    if kind == "MultiDiscrete":
        obs = np.asarray(obs, dtype=np.int64)
        return np.concatenate([np.eye(n)[obs[:, i]] for i, n in enumerate(space["nvec"])], axis=1)
    x = np.asarray(obs, dtype=np.float64)
    if space.get("scale"):
        x = (x - space["low"]) / (space["high"] - space["low"])
    return x


def conv2d_valid(x: np.ndarray, w: np.ndarray, b: np.ndarray, stride: int) -> np.ndarray:
    """NHWC, HWIO kernel, VALID padding."""
    n, h, wd, c = x.shape
    k = w.shape[0]
    oh, ow = (h - k) // stride + 1, (wd - k) // stride + 1
    out = np.zeros((n, oh, ow, w.shape[3]))
    for i in range(oh):
        for j in range(ow):
            patch = x[:, i * stride:i * stride + k, j * stride:j * stride + k, :]
            out[:, i, j, :] = np.tensordot(patch, w, axes=([1, 2, 3], [0, 1, 2]))
    return out + b.reshape(1, 1, 1, -1)


def nature_cnn_np(p: Dict[str, np.ndarray], x: np.ndarray) -> np.ndarray:
    relu = lambda v: np.maximum(v, 0)  # noqa: E731
    x = relu(conv2d_valid(x, p["model/c1/w:0"], p["model/c1/b:0"], 4))
    x = relu(conv2d_valid(x, p["model/c2/w:0"], p["model/c2/b:0"], 2))
    x = relu(conv2d_valid(x, p["model/c3/w:0"], p["model/c3/b:0"], 1))
    x = x.reshape(x.shape[0], -1)
    return relu(x @ p["model/fc1/w:0"] + p["model/fc1/b:0"])


def _lin(p: dict, scope: str, x: np.ndarray) -> np.ndarray:
    return x @ p[f"model/{scope}/w:0"].astype(np.float64) + p[f"model/{scope}/b:0"].astype(np.float64)


def _heads_np(p: dict, latent_pi: np.ndarray, latent_vf: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
    value = _lin(p, "vf", latent_vf)[:, 0]
    flat = _lin(p, "pi", latent_pi)
    if "model/pi/logstd:0" in p:
        flat = np.concatenate([flat, flat * 0.0 + p["model/pi/logstd:0"]], axis=1)
    return flat, value


def feedforward_np(p: dict, x: np.ndarray, shared: Sequence[int], n_pi: int, n_vf: int, act=np.tanh,
                   cnn: bool = False) -> Tuple[np.ndarray, np.ndarray]:
    """(flat distribution parameters, value) of a feed-forward policy."""
    if cnn:
        latent = nature_cnn_np(p, x)
        return _heads_np(p, latent, latent)
    latent = x.reshape(x.shape[0], -1)
    for idx in range(len(shared)):
        latent = act(_lin(p, f"shared_fc{idx}", latent))
    latent_pi = latent_vf = latent
    for i in range(n_pi):
        latent_pi = act(_lin(p, f"pi_fc{i}", latent_pi))
    for i in range(n_vf):
        latent_vf = act(_lin(p, f"vf_fc{i}", latent_vf))
    return _heads_np(p, latent_pi, latent_vf)


def _ln(x: np.ndarray, g: np.ndarray, b: np.ndarray, eps: float = 1e-5) -> np.ndarray:
    mean = x.mean(axis=1, keepdims=True)
    var = x.var(axis=1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * g + b


def sigmoid(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


def lstm_step_np(p: dict, x: np.ndarray, state: np.ndarray, mask: np.ndarray, n_layers: int, layer_norm: bool,
                 cnn: bool = False, act=np.tanh) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One step of the step model (n_steps = 1): (flat, value, new state = concat[c, h])."""
    if cnn:
        feat = nature_cnn_np(p, x)
    else:
        feat = x.reshape(x.shape[0], -1)
        for i in range(n_layers):
            feat = act(_lin(p, f"pi_fc{i}", feat))
    n = p["model/lstm1/wh:0"].shape[0]
    c, h = state[:, :n].astype(np.float64), state[:, n:].astype(np.float64)
    keep = (1.0 - np.asarray(mask, dtype=np.float64))[:, None]
    c, h = c * keep, h * keep
    gx = feat @ p["model/lstm1/wx:0"]
    gh = h @ p["model/lstm1/wh:0"]
    if layer_norm:
        z = (_ln(gx, p["model/lstm1/gx:0"], p["model/lstm1/bx:0"]) + _ln(gh, p["model/lstm1/gh:0"],
                                                                         p["model/lstm1/bh:0"]) + p["model/lstm1/b:0"])
    else:
        z = gx + gh + p["model/lstm1/b:0"]
    i, f, o, u = np.split(z, 4, axis=1)
    i, f, o, u = sigmoid(i), sigmoid(f), sigmoid(o), np.tanh(u)
    c = f * c + i * u
    h = o * np.tanh(_ln(c, p["model/lstm1/gc:0"], p["model/lstm1/bc:0"]) if layer_norm else c)
    flat, value = _heads_np(p, h, h)
    return flat, value, np.concatenate([c, h], axis=1)


def mode_np(flat: np.ndarray, kind: str, n_act: int, nvec: Optional[Sequence[int]] = None) -> np.ndarray:
    """SB2 deterministic actions: argmax / per-component argmax / round(sigmoid) / Gaussian mean."""
    if kind == "Discrete":
        return flat.argmax(axis=1)
    if kind == "MultiDiscrete":
        splits = np.cumsum(nvec)[:-1]
        return np.stack([part.argmax(axis=1) for part in np.split(flat, splits, axis=1)], axis=1)
    if kind == "MultiBinary":
        return np.round(sigmoid(flat))
    return flat[:, :n_act]
