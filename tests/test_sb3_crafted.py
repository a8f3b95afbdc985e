"""Crafted stable-baselines3 zips and PyTorch ``.pth`` members: a valid one loads and computes what its weights say;
hostile or broken ones get typed ``ModelFileError`` subclasses only, with bounded memory and no code run.

The files are written here from scratch (a minimal pickle writer, ``tests/legacy_fixtures.py``, plus torch's
BINPERSID storages): no PyTorch, no fixtures needed.
"""
import base64
import io
import json
import os
import pickle
import struct
import tracemalloc
import zipfile
from collections import OrderedDict

import gymnasium as gym
import numpy as np
import pytest

from legacy_fixtures import Call, G, _Writer

from sbtf.common.file_errors import (CorruptedFileError, ModelDataError, ModelFileError,
                                     ParameterShapeError, UnsafeFileError, WrongAlgorithmError, load_limits)
from sbtf.sb3 import DQN, SAC
from sbtf_converters.torch_pickle import read_torch_file

CANARY = "/tmp/sbtf_sb3_crafted_canary"
OBS = gym.spaces.Box(-1.0, 1.0, (4,), np.float32)
ACT = gym.spaces.Discrete(2)


class PersId:
    """A persistent id (BINPERSID): how torch refers to storages."""

    def __init__(self, pid: tuple):
        self.pid = pid


class _TorchWriter(_Writer):
    def save(self, obj):
        if isinstance(obj, PersId):
            self.save(obj.pid)
            self.w(b"Q")
        else:
            super().save(obj)


def _pickle(obj) -> bytes:
    writer = _TorchWriter()
    writer.w(b"\x80\x02")
    writer.save(obj)
    writer.w(b".")
    return writer.out.getvalue()


def _tensor(key: str, shape: tuple, numel=None, offset: int = 0, stride=None, storage: str = "FloatStorage"):
    if stride is None:
        stride = tuple(int(np.prod(shape[i + 1:])) for i in range(len(shape)))
    numel = int(np.prod(shape)) if numel is None else numel
    return Call(G("torch._utils", "_rebuild_tensor_v2"),
                (PersId(("storage", G("torch", storage), key, "cpu", numel)), offset, tuple(shape), stride, False,
                 Call(G("collections", "OrderedDict"), ())))


def torch_zip(tensors: dict, storages: dict, pickle_bytes: bytes = None, extra_members=()) -> bytes:
    """A PyTorch zip-layout file: ``tensors`` (name -> _tensor) and ``storages`` (key -> raw bytes)."""
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_STORED) as archive:
        archive.writestr("archive/data.pkl", pickle_bytes or _pickle(OrderedDict(tensors)))
        archive.writestr("archive/byteorder", "little")
        for key, raw in storages.items():
            archive.writestr(f"archive/data/{key}", raw)
        for name, raw in extra_members:
            archive.writestr(name, raw)
        archive.writestr("archive/version", "3\n")
    return out.getvalue()


def _weights(seed: int = 0) -> "OrderedDict[str, np.ndarray]":
    """A DQN ``MlpPolicy`` state dict with net_arch [8], in PyTorch's (out, in) layout."""
    rng = np.random.default_rng(seed)
    shapes = OrderedDict([("q_net.q_net.0.weight", (8, 4)), ("q_net.q_net.0.bias", (8,)),
                          ("q_net.q_net.2.weight", (2, 8)), ("q_net.q_net.2.bias", (2,))])
    for name in list(shapes):
        shapes[name.replace("q_net.q_net", "q_net_target.q_net")] = shapes[name]
    return OrderedDict((name, rng.standard_normal(shape).astype(np.float32)) for name, shape in shapes.items())


def policy_pth(weights) -> bytes:
    tensors = OrderedDict((name, _tensor(str(i), value.shape)) for i, (name, value) in enumerate(weights.items()))
    storages = {str(i): value.tobytes() for i, value in enumerate(weights.values())}
    return torch_zip(tensors, storages)


def _serialized(value) -> dict:
    return {":type:": str(type(value)), ":serialized:": base64.b64encode(pickle.dumps(value)).decode()}


def sb3_zip(policy: bytes = None, data: dict = None, members=None, policy_module="stable_baselines3.dqn.policies",
            duplicate: str = None) -> bytes:
    """A DQN SB3 zip (``data``, ``policy.pth``, ``_stable_baselines3_version``), parts replaceable."""
    if data is None:
        policy_class = {":type:": "<class 'abc.ABCMeta'>", ":serialized:": base64.b64encode(
            _pickle(G(policy_module, "DQNPolicy"))).decode(), "__module__": policy_module}
        data = {"policy_class": policy_class, "policy_kwargs": {"net_arch": [8]},
                "observation_space": _serialized(OBS), "action_space": _serialized(ACT), "n_envs": 1,
                "num_timesteps": 1000, "learning_rate": 0.001, "buffer_size": 5000, "batch_size": 32, "gamma": 0.9,
                "exploration_final_eps": 0.1, "train_freq": {":type:": "TrainFreq", ":serialized:": base64.b64encode(
                    _pickle(Call(G("stable_baselines3.common.type_aliases", "TrainFreq"),
                                 (4, Call(G("stable_baselines3.common.type_aliases", "TrainFrequencyUnit"),
                                          ("step",)))))).decode()}}
    members = members if members is not None else [("data", json.dumps(data).encode()),
                                                   ("policy.pth", policy if policy is not None else
                                                    policy_pth(_weights())),
                                                   ("_stable_baselines3_version", b"2.3.0")]
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, raw in members:
            archive.writestr(name, raw)
        if duplicate:
            import warnings
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # zipfile warns about the duplicate name
                archive.writestr(duplicate, dict(members)[duplicate])
    return out.getvalue()


def _load(tmp_path, payload: bytes, cls=DQN, **kwargs):
    path = tmp_path / "agent.zip"
    path.write_bytes(payload)
    return cls.load(str(path), **kwargs)


@pytest.fixture(autouse=True)
def _no_canary():
    if os.path.exists(CANARY):
        os.remove(CANARY)
    yield
    assert not os.path.exists(CANARY), "a crafted file ran code"


# ------------------------------------------------------------------------------------------------ valid
def test_crafted_valid_zip_computes_its_weights(tmp_path):
    weights = _weights()
    model = _load(tmp_path, sb3_zip())
    obs = np.random.default_rng(1).standard_normal((5, 4)).astype(np.float32)
    hidden = np.maximum(obs @ weights["q_net.q_net.0.weight"].T + weights["q_net.q_net.0.bias"], 0.0)
    q = hidden @ weights["q_net.q_net.2.weight"].T + weights["q_net.q_net.2.bias"]
    np.testing.assert_allclose(model.policy.q_values_np(obs), q, rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(model.predict(obs, deterministic=True)[0], q.argmax(axis=1))
    assert (model.batch_size, model.gamma, model.buffer_size, model.num_timesteps) == (32, 0.9, 5000, 1000)


def test_strided_and_offset_tensors_are_rebuilt_as_torch_does():
    base = np.arange(24, dtype=np.float32)
    payload = torch_zip({"t": _tensor("0", (3, 4), numel=24, offset=2, stride=(1, 5))}, {"0": base.tobytes()})
    got = read_torch_file(payload)["t"]
    want = np.lib.stride_tricks.as_strided(base[2:], (3, 4), (4, 20))
    np.testing.assert_array_equal(got, want)


def test_legacy_layout_is_read():
    raw = np.arange(6, dtype=np.float32)
    writer_parts = [_pickle(0x1950A86A20F9469CFC6C), _pickle(1001),
                    _pickle({"protocol_version": 1001, "little_endian": True}),
                    _pickle(OrderedDict(a=_legacy_tensor("k1", (2, 3)))), _pickle(["k1"])]
    payload = b"".join(writer_parts) + struct.pack("<q", 6) + raw.tobytes()
    np.testing.assert_array_equal(read_torch_file(payload)["a"], raw.reshape(2, 3))
    lying = b"".join(writer_parts) + struct.pack("<q", 600) + raw.tobytes()
    with pytest.raises(CorruptedFileError):
        read_torch_file(lying)
    with pytest.raises(CorruptedFileError):
        read_torch_file(payload[:-5])


def _legacy_tensor(key: str, shape: tuple):
    return Call(G("torch._utils", "_rebuild_tensor_v2"),
                (PersId(("storage", G("torch", "FloatStorage"), key, "cpu", int(np.prod(shape)), None)), 0, shape,
                 (shape[1], 1), False, Call(G("collections", "OrderedDict"), ())))


# ------------------------------------------------------------------------------------------------ hostile
def _system_call():
    return Call(G("os", "system"), (f"touch {CANARY}",))


HOSTILE_POLICIES = {
    "os.system in data.pkl": (lambda: torch_zip({}, {}, pickle_bytes=_pickle(_system_call())), UnsafeFileError),
    "os.system as tensor rebuild": (lambda: torch_zip({}, {}, pickle_bytes=_pickle(OrderedDict(
        w=Call(G("os", "system"), (f"touch {CANARY}",))))), UnsafeFileError),
    "non allow-listed storage type": (lambda: torch_zip({"w": _tensor("0", (2,), storage="ComplexFloatStorage")},
                                                        {"0": b"\0" * 16}), UnsafeFileError),
    "storage size lies (short member)": (lambda: torch_zip({"w": _tensor("0", (8, 4))}, {"0": b"\0" * 16}),
                                         CorruptedFileError),
    "storage size lies (long member)": (lambda: torch_zip({"w": _tensor("0", (2,))}, {"0": b"\0" * 4096}),
                                        ModelFileError),
    "offset past the end": (lambda: torch_zip({"w": _tensor("0", (4,), numel=4, offset=3)}, {"0": b"\0" * 16}),
                            CorruptedFileError),
    "huge shape on a tiny storage (zero strides)": (lambda: torch_zip(
        {"w": _tensor("0", (1 << 20, 1 << 20), numel=1, stride=(0, 0))}, {"0": b"\0" * 4}), ModelFileError),
    "huge declared storage": (lambda: torch_zip({"w": _tensor("0", (1 << 40,))}, {"0": b"\0" * 16}), ModelFileError),
    "missing storage member": (lambda: torch_zip({"w": _tensor("7", (2,))}, {}), CorruptedFileError),
    "negative stride": (lambda: torch_zip({"w": _tensor("0", (2,), stride=(-1,))}, {"0": b"\0" * 8}),
                        CorruptedFileError),
    "integer weights": (lambda: policy_pth(OrderedDict((k, v.astype(np.int32)) for k, v in _weights().items())),
                        None),
    "text persistent id": (lambda: torch_zip({}, {}, pickle_bytes=b"\x80\x02Pfoo\n."), UnsafeFileError),
    "not a pickle": (lambda: torch_zip({}, {}, pickle_bytes=b"garbage"), CorruptedFileError),
    "truncated policy.pth": (lambda: policy_pth(_weights())[:300], CorruptedFileError),
}


def _int_weights_pth() -> bytes:
    weights = _weights()
    tensors = OrderedDict((name, _tensor(str(i), value.shape, storage="IntStorage"))
                          for i, (name, value) in enumerate(weights.items()))
    return torch_zip(tensors, {str(i): v.astype(np.int32).tobytes() for i, v in enumerate(weights.values())})


HOSTILE_POLICIES["integer weights"] = (_int_weights_pth, ModelDataError)


@pytest.mark.parametrize("case", sorted(HOSTILE_POLICIES))
def test_hostile_policy_pth(tmp_path, case):
    make, error = HOSTILE_POLICIES[case]
    tracemalloc.start()
    try:
        with pytest.raises(error):
            _load(tmp_path, sb3_zip(policy=make()))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 64 << 20, f"{case}: {peak:,} bytes allocated"


def test_wrong_shape_is_refused_before_assignment(tmp_path):
    weights = _weights()
    weights["q_net.q_net.2.weight"] = np.zeros((3, 8), np.float32)
    with pytest.raises(ParameterShapeError) as info:
        _load(tmp_path, sb3_zip(policy=policy_pth(weights)))
    assert info.value.name == "model/q_net/out/kernel:0"
    assert info.value.stored_shape == (8, 3) and info.value.model_shape == (8, 2)


def test_unknown_and_missing_tensors_are_named(tmp_path):
    weights = _weights()
    weights["features_extractor.cnn.0.weight"] = np.zeros((2, 2), np.float32)
    with pytest.raises(ModelDataError, match="features_extractor.cnn.0.weight"):
        _load(tmp_path, sb3_zip(policy=policy_pth(weights)))
    weights = _weights()
    del weights["q_net_target.q_net.0.bias"]
    with pytest.raises(ModelDataError, match="q_net_target/fc0/bias"):
        _load(tmp_path, sb3_zip(policy=policy_pth(weights)))


def test_hostile_data_entries(tmp_path):
    base = json.loads(_data_of(sb3_zip()))
    for key in ("observation_space", "policy_kwargs", "train_freq", "learning_rate"):
        data = dict(base)
        data[key] = {":type:": "x", ":serialized:": base64.b64encode(_pickle(_system_call())).decode()}
        if key == "learning_rate":  # a schedule that is code: not run, the default is used (with a warning)
            with pytest.warns(UserWarning, match="cloudpickled"):
                _load(tmp_path, sb3_zip(data=data))
            continue
        with pytest.raises(UnsafeFileError):
            _load(tmp_path, sb3_zip(data=data))
    data = dict(base)
    data["observation_space"] = {":type:": "x", ":serialized:": "***not base64***"}
    with pytest.raises(CorruptedFileError):
        _load(tmp_path, sb3_zip(data=data))
    data = dict(base)
    data["observation_space"] = _serialized({"low": 1})
    with pytest.raises(ModelDataError):
        _load(tmp_path, sb3_zip(data=data))


def _data_of(payload: bytes) -> bytes:
    with zipfile.ZipFile(io.BytesIO(payload)) as archive:
        return archive.read("data")


def test_wrong_algorithm(tmp_path):
    with pytest.raises(WrongAlgorithmError, match="DQN"):
        _load(tmp_path, sb3_zip(), cls=SAC)


def test_broken_zips(tmp_path):
    good = sb3_zip()
    with pytest.raises(CorruptedFileError):
        _load(tmp_path, good[: len(good) // 2])
    with pytest.raises(ModelFileError):
        _load(tmp_path, sb3_zip(duplicate="data"))
    with pytest.raises(ModelFileError):
        _load(tmp_path, sb3_zip(policy=torch_zip({"w": _tensor("0", (2,))}, {"0": b"\0" * 8},
                                                 extra_members=[("archive/data/0", b"\1" * 8)])))


def test_zip_bomb_member(tmp_path):
    bomb = b"\0" * (4 << 20)  # deflates to a few KB
    with load_limits(max_json_bytes=1 << 20, max_array_bytes=1 << 20):
        tracemalloc.start()
        try:
            with pytest.raises(ModelFileError):
                _load(tmp_path, sb3_zip(members=[("data", bomb), ("policy.pth", policy_pth(_weights()))]))
            with pytest.raises(ModelFileError):
                _load(tmp_path, sb3_zip(members=[("data", _data_of(sb3_zip())), ("policy.pth", bomb)]))
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    assert peak < 16 << 20


# ------------------------------------------------------------------------------------------------ layouts
BOX_ACT = gym.spaces.Box(-2.0, 2.0, (1,), np.float32)
OBS3 = gym.spaces.Box(-1.0, 1.0, (3,), np.float32)


def _mlp(prefix: str, sizes, with_out: bool = True) -> "OrderedDict[str, tuple]":
    """SB3's names of an nn.Sequential of Linear + activation layers (indices count the activations)."""
    out = OrderedDict()
    for i, (n_in, n_out) in enumerate(zip(sizes[:-1], sizes[1:])):
        out[f"{prefix}.{2 * i}.weight"] = (n_out, n_in)
        out[f"{prefix}.{2 * i}.bias"] = (n_out,)
    return out


def _sb3_state(algo: str) -> "OrderedDict[str, tuple]":
    """The state-dict names and shapes stable-baselines3 / sb3-contrib save for an MlpPolicy with net_arch [8]."""
    state = OrderedDict()
    if algo in ("TD3", "DDPG"):
        for actor in ("actor", "actor_target"):
            state.update(_mlp(f"{actor}.mu", [3, 8, 1]))
        for critic in ("critic", "critic_target"):
            for j in range(2 if algo == "TD3" else 1):
                state.update(_mlp(f"{critic}.qf{j}", [4, 8, 1]))
    elif algo == "SAC":
        state.update(_mlp("actor.latent_pi", [3, 8]))
        state.update({"actor.mu.weight": (1, 8), "actor.mu.bias": (1,), "actor.log_std.weight": (1, 8),
                      "actor.log_std.bias": (1,)})
        for critic in ("critic", "critic_target"):
            for j in range(2):
                state.update(_mlp(f"{critic}.qf{j}", [4, 8, 1]))
    else:  # PPO family
        n_in, n_act = (4, 2) if algo == "MaskablePPO" else (3, 1)
        state.update(_mlp("mlp_extractor.policy_net", [n_in, 8]))
        state.update(_mlp("mlp_extractor.value_net", [n_in, 8]))
        state.update({"action_net.weight": (n_act, 8), "action_net.bias": (n_act,), "value_net.weight": (1, 8),
                      "value_net.bias": (1,)})
        if algo != "MaskablePPO":
            state["log_std"] = (1,)
    return state


_MODULES = {"TD3": "stable_baselines3.td3.policies", "DDPG": "stable_baselines3.td3.policies",
            "SAC": "stable_baselines3.sac.policies", "TRPO": "stable_baselines3.common.policies",
            "MaskablePPO": "sb3_contrib.common.maskable.policies"}


@pytest.mark.parametrize("algo", sorted(_MODULES))
def test_layouts_of_other_algorithms(tmp_path, algo):
    import sbtf.contrib
    import sbtf.sb3

    cls = getattr(sbtf.sb3, algo, None) or getattr(sbtf.contrib, algo)
    rng = np.random.default_rng(3)
    weights = OrderedDict((name, rng.standard_normal(shape).astype(np.float32))
                          for name, shape in _sb3_state(algo).items())
    discrete = algo == "MaskablePPO"
    data = json.loads(_data_of(sb3_zip()))
    data.update(policy_kwargs={"net_arch": [8]}, observation_space=_serialized(OBS if discrete else OBS3),
                action_space=_serialized(ACT if discrete else BOX_ACT), train_freq=1)
    data["policy_class"][":serialized:"] = base64.b64encode(_pickle(G(_MODULES[algo], "X"))).decode()
    members = [("data", json.dumps(data).encode()), ("policy.pth", policy_pth(weights))]
    if algo == "SAC":  # ent_coef="auto": SB3 saves log_ent_coef beside the policy
        members.append(("pytorch_variables.pth", policy_pth(OrderedDict(log_ent_coef=np.array([-0.5], np.float32)))))
    model = _load(tmp_path, sb3_zip(members=members), cls=cls)
    if algo == "SAC":
        assert float(model._named_parameters()["model/log_ent_coef:0"].numpy()) == -0.5
    obs = rng.uniform(-1, 1, (6, 4 if discrete else 3)).astype(np.float32)
    act = model.predict(obs, deterministic=True)[0]
    if algo in ("TD3", "DDPG"):  # tanh(mu(obs)) scaled to the action bounds
        hidden = np.maximum(obs @ weights["actor.mu.0.weight"].T + weights["actor.mu.0.bias"], 0)
        want = 2.0 * np.tanh(hidden @ weights["actor.mu.2.weight"].T + weights["actor.mu.2.bias"])
    elif algo == "SAC":
        hidden = np.maximum(obs @ weights["actor.latent_pi.0.weight"].T + weights["actor.latent_pi.0.bias"], 0)
        want = 2.0 * np.tanh(hidden @ weights["actor.mu.weight"].T + weights["actor.mu.bias"])
    else:
        hidden = np.tanh(obs @ weights["mlp_extractor.policy_net.0.weight"].T
                         + weights["mlp_extractor.policy_net.0.bias"])
        logits = hidden @ weights["action_net.weight"].T + weights["action_net.bias"]
        want = logits.argmax(axis=1) if discrete else np.clip(logits, -2, 2)
        values = np.tanh(obs @ weights["mlp_extractor.value_net.0.weight"].T
                         + weights["mlp_extractor.value_net.0.bias"]) @ weights["value_net.weight"].T \
            + weights["value_net.bias"]
        np.testing.assert_allclose(np.asarray(model.policy.value(obs)).ravel(), values.ravel(), rtol=1e-5,
                                   atol=1e-5)
    np.testing.assert_allclose(np.asarray(act, np.float64).reshape(np.shape(want)), want, rtol=1e-5, atol=1e-5)


# ------------------------------------------------------------------------------------------------ fuzzing
def test_fuzzed_policy_pth_gives_typed_errors_only():
    """Random byte changes of a valid policy.pth's pickle and storages: an array or a ModelFileError, nothing else."""
    rng = np.random.default_rng(7)
    weights = _weights()
    tensors = OrderedDict((name, _tensor(str(i), value.shape)) for i, (name, value) in enumerate(weights.items()))
    pickle_bytes = _pickle(tensors)
    storages = {str(i): value.tobytes() for i, value in enumerate(weights.values())}
    outcomes = {"ok": 0, "error": 0}
    for _ in range(300):
        mutated = bytearray(pickle_bytes)
        for _ in range(int(rng.integers(1, 4))):
            mutated[int(rng.integers(0, len(mutated)))] = int(rng.integers(0, 256))
        try:
            value = read_torch_file(torch_zip({}, storages, pickle_bytes=bytes(mutated)))
        except ModelFileError:
            outcomes["error"] += 1
            continue
        outcomes["ok"] += 1
        for item in (value.values() if isinstance(value, dict) else ()):
            if isinstance(item, np.ndarray):
                assert item.nbytes <= 4 * 256
    assert outcomes["error"] > 0


def test_fuzzed_sb3_zip_gives_typed_errors_only(tmp_path):
    rng = np.random.default_rng(11)
    good = sb3_zip()
    for _ in range(40):
        mutated = bytearray(good)
        for _ in range(int(rng.integers(1, 6))):
            mutated[int(rng.integers(0, len(mutated)))] = int(rng.integers(0, 256))
        try:
            _load(tmp_path, bytes(mutated))
        except ModelFileError:
            pass


def _closure_function(qualname: str, freevars: tuple, values: tuple):
    """What cloudpickle writes for a closure (code object with a body that is never run here)."""
    builtin = G("cloudpickle.cloudpickle", "_builtin_type")
    code = Call(Call(builtin, ("CodeType",)), (1, 0, 0, 1, 2, 19, b"|\x00S\x00", (None,), ("os", "system"), ("p",),
                                               "<evil>", "func", 1, b"", freevars, ()))
    function = Call(Call(builtin, ("LambdaType",)),
                    (code, {}, "func", None, tuple(Call(G("cloudpickle.cloudpickle", "_make_empty_cell"), ())
                                                 for _ in values)))
    cells = tuple(Call(G("cloudpickle.cloudpickle", "_make_cell"), (v,)) for v in values)
    return Call(G("cloudpickle.cloudpickle_fast", "_function_setstate"),
                (function, ({}, {"__qualname__": qualname, "__closure__": cells})))


def _function_blob(qualname: str, freevars: tuple, values: tuple) -> str:
    # _function_setstate returns None: the writer keeps the function on the stack with a memo, as cloudpickle does
    writer = _TorchWriter()
    writer.w(b"\x80\x02")
    function = _closure_function(qualname, freevars, values)
    inner = function.args[0]
    writer.save(inner)
    writer.w(b"q\x01")  # BINPUT 1: the function
    writer.save(function.func)
    writer.w(b"h\x01")  # BINGET 1
    writer.save(function.args[1])
    writer.w(b"\x86R0h\x01.")  # TUPLE2 REDUCE POP BINGET 1 STOP
    return base64.b64encode(writer.out.getvalue()).decode()


def test_closure_schedules_are_read_by_name_never_run(tmp_path):
    data = json.loads(_data_of(sb3_zip()))
    data["learning_rate"] = {":type:": "<class 'function'>",
                             ":serialized:": _function_blob("get_linear_fn.<locals>.func", ("end", "end_fraction",
                                                                                            "start"), (0.1, 0.5, 1.0))}
    model = _load(tmp_path, sb3_zip(data=data))
    assert [model.learning_rate(p) for p in (1.0, 0.75, 0.5, 0.0)] == pytest.approx([1.0, 0.55, 0.1, 0.1])
    data["learning_rate"][":serialized:"] = _function_blob("my_schedule.<locals>.func", ("x",), (0.5,))
    with pytest.warns(UserWarning, match="cloudpickled"):
        model = _load(tmp_path, sb3_zip(data=data))
    assert model.learning_rate != 0.5
    data["learning_rate"][":serialized:"] = _function_blob("constant_fn.<locals>.func", ("val",), ("rm -rf",))
    with pytest.warns(UserWarning, match="cloudpickled"):
        _load(tmp_path, sb3_zip(data=data))


def test_action_noise_and_schedule_objects_are_data():
    """SB3's noise objects and (recent SB3's) schedule objects decode into sbtf's, with no code of the file."""
    from legacy_fixtures import NewObj

    from sbtf.common.noise import NormalActionNoise, OrnsteinUhlenbeckActionNoise
    from sbtf_converters.sb3_reader import Sb3File

    def entry(obj) -> dict:
        return {":type:": "x", ":serialized:": base64.b64encode(_pickle(obj)).decode()}

    noise = NewObj(G("stable_baselines3.common.noise", "NormalActionNoise"), (),
                   {"_mu": np.zeros(2), "_sigma": np.full(2, 0.1)})
    ou = NewObj(G("stable_baselines3.common.noise", "OrnsteinUhlenbeckActionNoise"), (),
                {"_mu": np.zeros(1), "_sigma": np.full(1, 0.2), "_theta": 0.3, "_dt": 0.05})
    linear = NewObj(G("stable_baselines3.common.utils", "FloatSchedule"), (), {"value_schedule": NewObj(
        G("stable_baselines3.common.utils", "LinearSchedule"), (), {"start": 1.0, "end": 0.0, "end_fraction": 0.5})})
    evil = NewObj(G("stable_baselines3.common.noise", "NormalActionNoise"), (), {"_mu": _system_call()})
    sb3 = Sb3File({"a": entry(noise), "b": entry(ou), "c": entry(linear), "d": entry(evil)}, {}, "", "", [], "f",
                  False)
    decoded = sb3.decode("a")
    assert isinstance(decoded, NormalActionNoise) and np.allclose(decoded._sigma, 0.1)
    decoded = sb3.decode("b")
    assert isinstance(decoded, OrnsteinUhlenbeckActionNoise) and decoded._theta == 0.3
    schedule = sb3.decode("c")
    assert [schedule(p) for p in (1.0, 0.75, 0.5, 0.0)] == pytest.approx([1.0, 0.5, 0.0, 0.0])
    with pytest.raises(UnsafeFileError):
        sb3.decode("d")


# ------------------------------------------------------------------------------------------------ optimizer state
def _adam_state(weights, step: float = 7.0, eps: float = 1e-8, shapes=None, n_params: int = 4, seed: int = 3):
    """(payload, moments) of a ``policy.optimizer.pth`` for the DQN's online network (SB3 >= 1.x: q_net only)."""
    rng = np.random.default_rng(seed)
    names = [n for n in weights if n.startswith("q_net.")][:n_params]
    tensors, storages, moments, state = [], {}, {}, {}
    for index, name in enumerate(names):
        shape = (shapes or {}).get(name, weights[name].shape)
        avg, avg_sq = rng.standard_normal(shape).astype(np.float32), rng.random(shape).astype(np.float32)
        moments[name] = (avg, avg_sq)
        keys = [f"{index}a", f"{index}b", f"{index}s"]
        storages.update({keys[0]: avg.tobytes(), keys[1]: avg_sq.tobytes(),
                         keys[2]: np.float32(step).tobytes()})
        state[index] = {"step": _tensor(keys[2], ()), "exp_avg": _tensor(keys[0], shape),
                        "exp_avg_sq": _tensor(keys[1], shape)}
        tensors.append(name)
    groups = [{"lr": 0.001, "betas": (0.9, 0.999), "eps": eps, "weight_decay": 0, "amsgrad": False,
               "params": list(range(len(names)))}]
    payload = torch_zip({}, storages, pickle_bytes=_pickle({"state": state, "param_groups": groups}))
    return payload, moments


def _with_optimizer(payload: bytes) -> bytes:
    return sb3_zip(members=[(n, r) for n, r in _members(sb3_zip())] + [("policy.optimizer.pth", payload)])


def _members(payload: bytes):
    with zipfile.ZipFile(io.BytesIO(payload)) as archive:
        return [(name, archive.read(name)) for name in archive.namelist()]


def test_crafted_optimizer_state_is_restored(tmp_path):
    payload, moments = _adam_state(_weights())
    model = _load(tmp_path, _with_optimizer(payload))
    assert model.sb3_optimizer_restore == {"policy.optimizer.pth": "restored"}
    assert float(model.optimizer.t.numpy()) == 7.0
    named = model._named_parameters()  # pylint: disable=protected-access
    for name, (avg, avg_sq) in moments.items():
        sbtf = name.replace("q_net.q_net.0.", "model/q_net/fc0/").replace("q_net.q_net.2.", "model/q_net/out/")
        sbtf = sbtf.replace("weight", "kernel") + ":0"
        position = [id(v) for v in model.optimizer.variables_].index(id(named[sbtf]))
        np.testing.assert_array_equal(model.optimizer.m[position].numpy(), avg.T)
        np.testing.assert_array_equal(model.optimizer.v[position].numpy(), avg_sq.T)


@pytest.mark.parametrize("case", ["other eps", "wrong moment shape", "parameter count"])
def test_unusable_optimizer_state_is_left_fresh_with_a_note(tmp_path, caplog, case):
    weights = _weights()
    if case == "other eps":
        payload, _ = _adam_state(weights, eps=0.5)
    elif case == "wrong moment shape":
        payload, _ = _adam_state(weights, shapes={"q_net.q_net.0.weight": (3, 3)})
    else:
        payload, _ = _adam_state(weights, n_params=3)
    with caplog.at_level("WARNING", logger="sbtf.sb3"):
        model = _load(tmp_path, _with_optimizer(payload))
    notes = [r.getMessage() for r in caplog.records if "optimizer state is not restored" in r.getMessage()]
    assert len(notes) == 1 and "agent.zip" in notes[0]
    assert model.sb3_optimizer_restore["policy.optimizer.pth"] != "restored"
    assert float(model.optimizer.t.numpy()) == 0.0
    assert not any(np.any(slot.numpy()) for slot in model.optimizer.m + model.optimizer.v)


HOSTILE_OPTIMIZERS = {
    "os.system": (lambda: torch_zip({}, {}, pickle_bytes=_pickle({"state": _system_call(), "param_groups": []})),
                  UnsafeFileError),
    "storage size lies": (lambda: torch_zip({}, {"0": b"\0" * 8}, pickle_bytes=_pickle(
        {"state": {0: {"exp_avg": _tensor("0", (64, 64))}}, "param_groups": []})), CorruptedFileError),
    "huge declared storage": (lambda: torch_zip({}, {"0": b"\0" * 8}, pickle_bytes=_pickle(
        {"state": {0: {"exp_avg": _tensor("0", (1 << 40,))}}, "param_groups": []})), ModelFileError),
    "truncated": (lambda: _adam_state(_weights())[0][:200], CorruptedFileError),
}


@pytest.mark.parametrize("case", sorted(HOSTILE_OPTIMIZERS))
def test_hostile_optimizer_pth(tmp_path, case):
    make, error = HOSTILE_OPTIMIZERS[case]
    tracemalloc.start()
    try:
        with pytest.raises(error, match="policy.optimizer.pth"):
            _load(tmp_path, _with_optimizer(make()))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 64 << 20, f"{case}: {peak:,} bytes allocated"


def test_malformed_optimizer_contents_leave_fresh_state(tmp_path):
    """Whatever data an optimizer member holds (read safely as data), restoring it gives the note, never another
    exception, and leaves the optimizer fresh."""
    from sbtf_converters.sb3_layouts import plan_state_dict
    from sbtf_converters.sb3_optimizers import restore_optimizers

    model = _load(tmp_path, sb3_zip())
    weights = _weights()
    shapes = {n: tuple(v.shape) for n, v in model._named_parameters().items()}  # pylint: disable=protected-access
    targets, aliases = plan_state_dict("DQN", weights, shapes)
    group = {"betas": (0.9, 0.999), "eps": 1e-8, "params": [0, 1, 2, 3]}
    good = {"exp_avg": np.ones((8, 4), np.float32), "exp_avg_sq": np.ones((8, 4), np.float32), "step": 1.0}
    payloads = [None, [], "state", {"state": {}}, {"state": [], "param_groups": [group]},
                {"state": {0: good}, "param_groups": [dict(group, params="0123")]},
                {"state": {0: good}, "param_groups": [dict(group, params=[0, 0, 1, 2])]},
                {"state": {7: good}, "param_groups": [group]},
                {"state": {0: [good]}, "param_groups": [group]},
                {"state": {0: dict(good, step="seven")}, "param_groups": [group]},
                {"state": {0: dict(good, step=[1.0, 2.0])}, "param_groups": [group]},
                {"state": {0: dict(good, step=-3.0)}, "param_groups": [group]},
                {"state": {0: dict(good, exp_avg={"a": 1})}, "param_groups": [group]},
                {"state": {0: dict(good, exp_avg_sq=np.ones((8, 4), np.int32))}, "param_groups": [group]},
                {"state": {0: dict(good, exp_avg=np.ones((2, 2, 2, 2), np.float32))}, "param_groups": [group]},
                {"state": {0: good}, "param_groups": [dict(group, betas="no")]},
                {"state": {0: good}, "param_groups": [dict(group, eps=None)]},
                {"state": {0: good, 1: dict(good, step=2.0)}, "param_groups": [group]}]
    for index, payload in enumerate(payloads):
        outcome = restore_optimizers(model, "DQN", {"policy.optimizer.pth": payload}, list(weights), targets,
                                     aliases, source=f"case {index}")
        assert outcome["policy.optimizer.pth"] != "restored", index
        assert float(model.optimizer.t.numpy()) == 0.0
        assert not any(np.any(slot.numpy()) for slot in model.optimizer.m + model.optimizer.v), index


def test_fuzzed_optimizer_pickle_gives_typed_errors_or_a_note(tmp_path):
    """Byte mutations of a valid policy.optimizer.pth pickle (re-packed, so they reach the unpickler): the load
    either succeeds (the state restored or left fresh with the note) or raises a ModelFileError; bounded memory."""
    weights = _weights()
    _, moments = _adam_state(weights)
    state, storages = {}, {}
    for index, name in enumerate(moments):
        storages.update({f"{index}a": moments[name][0].tobytes(), f"{index}b": moments[name][1].tobytes(),
                         f"{index}s": np.float32(3.0).tobytes()})
        state[index] = {"step": _tensor(f"{index}s", ()), "exp_avg": _tensor(f"{index}a", weights[name].shape),
                        "exp_avg_sq": _tensor(f"{index}b", weights[name].shape)}
    good = _pickle({"state": state, "param_groups": [{"lr": 0.001, "betas": (0.9, 0.999), "eps": 1e-8,
                                                      "params": [0, 1, 2, 3]}]})
    rng = np.random.default_rng(5)
    outcomes = set()
    tracemalloc.start()
    try:
        for _ in range(60):
            mutated = bytearray(good)
            for _ in range(int(rng.integers(1, 4))):
                mutated[int(rng.integers(2, len(mutated) - 1))] = int(rng.integers(0, 256))
            try:
                model = _load(tmp_path, _with_optimizer(torch_zip({}, storages, pickle_bytes=bytes(mutated))))
                outcomes.add("restored" if model.sb3_optimizer_restore["policy.optimizer.pth"] == "restored"
                             else "note")
            except ModelFileError:
                outcomes.add("error")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 64 << 20
    assert "error" in outcomes
