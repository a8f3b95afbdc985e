"""The sbtf model format is read against a schema: no code from the file, typed errors, bounded reads."""
from __future__ import annotations

import io
import json
import os
import stat
import warnings
import zipfile

import gymnasium as gym
import numpy as np
import pytest

from sbtf import DQN, PPO2
from sbtf.common import save_util
from sbtf.common.fileio import atomic_io
from sbtf.common.file_errors import (CorruptedFileError, FileLimitError, ModelDataError, ModelFileError,
                                     UnsafeFileError, WrongAlgorithmError, load_limits)
from sbtf.common.policies import FeedForwardPolicy
from sbtf.common.registry import lookup_class, register_class

CANARY = "/tmp/sbtf_schema_canary"


@pytest.fixture(scope="module")
def ppo2_file(tmp_path_factory):
    model = PPO2("MlpPolicy", "CartPole-v1", n_steps=32, nminibatches=1, noptepochs=1, seed=3)
    model.learn(64)
    path = str(tmp_path_factory.mktemp("schema") / "ppo2.zip")
    model.save(path)
    obs = np.random.RandomState(1).uniform(-1, 1, (6, 4)).astype(np.float32)
    return path, obs, model.predict(obs, deterministic=True)[0]


def _members(path):
    with zipfile.ZipFile(path) as archive:
        return {name: archive.read(name) for name in archive.namelist()}


def _rewrite(src, dst, data_edit=None, members_edit=None):
    members = _members(src)
    if data_edit is not None:
        data = json.loads(members["data"])
        data_edit(data)
        members["data"] = json.dumps(data).encode()
    if members_edit is not None:
        members_edit(members)
    with zipfile.ZipFile(dst, "w") as archive:
        for name, payload in members.items():
            archive.writestr(name, payload)
    return dst


@pytest.fixture(autouse=True)
def _no_canary():
    if os.path.exists(CANARY):
        os.remove(CANARY)
    yield
    assert not os.path.exists(CANARY), "a model file ran code"


@pytest.mark.parametrize("entry", [
    {"__enum__": "builtins:exec", "value": f"open({CANARY!r}, 'w')"},
    {"__enum__": "os:system", "value": f"touch {CANARY}"},
    {"__data_object__": "os:system", "state": f"touch {CANARY}"},
    {"__data_object__": "sbtf.common.schedules:ConstantSchedule", "state": {"__noise__": "os.system"}},
    {"__class__": "subprocess:Popen"},
    {"__class__": "builtins:eval"},
])
def test_no_name_in_data_reaches_a_callable(tmp_path, ppo2_file, entry):
    path = _rewrite(ppo2_file[0], tmp_path / "bad.zip", lambda d: d.update(gamma=entry))
    with pytest.raises(ModelFileError) as info:
        PPO2.load(path)
    assert "gamma" in str(info.value)
    # the weights-only path does not even decode the data
    model = PPO2.load(ppo2_file[0])
    model.load_parameters(str(path))
    np.testing.assert_array_equal(model.predict(ppo2_file[1], deterministic=True)[0], ppo2_file[2])


def test_unregistered_class_error_says_what_to_do(tmp_path, ppo2_file):
    path = _rewrite(ppo2_file[0], tmp_path / "bad.zip",
                    lambda d: d.update(policy={"__class__": "my_project.policies:BigPolicy"}))
    with pytest.raises(UnsafeFileError, match="custom_objects=.*policy"):
        PPO2.load(path)


@pytest.mark.parametrize("key", ["load_parameters", "predict", "_from_data", "setup_model", "__class__", "env"])
def test_unknown_keys_are_reported_never_assigned(tmp_path, ppo2_file, key):
    path = _rewrite(ppo2_file[0], tmp_path / "extra.zip", lambda d: d.update({key: 1}))
    with pytest.warns(UserWarning, match="ignored"):
        model = PPO2.load(path)
    assert callable(model.load_parameters) and callable(model.predict)
    np.testing.assert_array_equal(model.predict(ppo2_file[1], deterministic=True)[0], ppo2_file[2])


@pytest.mark.parametrize("key, value, expected", [
    ("gamma", "0.99", "gamma"),
    ("n_steps", 12.5, "n_steps"),
    ("nminibatches", True, "nminibatches"),
    ("policy_kwargs", [1, 2], "policy_kwargs"),
    ("observation_space", {"__space__": {"type": "Box", "low": 0, "high": 1, "shape": [10 ** 6, 10 ** 6],
                                         "dtype": "float32"}}, "elements"),
    ("observation_space", {"__space__": {"type": "Box", "low": [0], "high": [1, 2], "shape": [2],
                                         "dtype": "float32"}}, "values"),
    ("observation_space", {"__space__": {"type": "Box", "low": [0], "high": [1], "shape": [1], "dtype": "O"}},
     "dtype"),
    ("action_space", {"__space__": {"type": "Discrete", "n": -3}}, "Discrete"),
    ("gamma", {"__ndarray__": [1, 2], "dtype": "O", "shape": [2]}, "dtype"),
    ("gamma", {"__ndarray__": [1, 2], "dtype": "<f8", "shape": [3]}, "values"),
    ("gamma", {"__mystery__": 1}, "marker"),
])
def test_values_of_the_wrong_type_raise_model_data_errors(tmp_path, ppo2_file, key, value, expected):
    path = _rewrite(ppo2_file[0], tmp_path / "typed.zip", lambda d: d.update({key: value}))
    with pytest.raises(ModelFileError, match=expected):
        PPO2.load(path)


def test_data_and_format_must_be_json_objects(tmp_path, ppo2_file):
    for member, payload in (("data", b"[1, 2]"), ("sbtf_format", b"7"), ("parameter_list", b"{\"a\": 1}"),
                            ("data", b"\xff\xfe"), ("data", b"[" * 100000 + b"]" * 100000)):
        path = _rewrite(ppo2_file[0], tmp_path / "shape.zip",
                        members_edit=lambda m, member=member, payload=payload: m.update({member: payload}))
        with pytest.raises(ModelFileError):
            PPO2.load(path)


def test_deep_and_colliding_data_is_refused_fast(tmp_path, ppo2_file):
    deep = {"x": 1}
    for _ in range(200):
        deep = [deep]
    path = _rewrite(ppo2_file[0], tmp_path / "deep.zip", lambda d: d.update(policy_kwargs={"net_arch": deep}))
    with pytest.raises(FileLimitError):
        PPO2.load(path)
    items = [[k * (2 ** 61 - 1), 0] for k in range(20000)]
    path = _rewrite(ppo2_file[0], tmp_path / "collide.zip",
                    lambda d: d.update(policy_kwargs={"__dict_items__": items}))
    with pytest.raises(FileLimitError, match="non-string keys"):
        PPO2.load(path)


def test_huge_network_in_policy_kwargs_is_refused_before_building(tmp_path, ppo2_file):
    path = _rewrite(ppo2_file[0], tmp_path / "huge.zip",
                    lambda d: d.update(policy_kwargs={"net_arch": [10 ** 6, 10 ** 6]}))
    with pytest.raises(FileLimitError, match="parameter values"):
        PPO2.load(path)


def _npy(descr: str, shape: tuple, data: bytes = b"") -> bytes:
    header = repr({"descr": descr, "fortran_order": False, "shape": shape}).encode()
    header += b" " * (63 - (len(header) + 10) % 64) + b"\n"
    return b"\x93NUMPY\x01\x00" + len(header).to_bytes(2, "little") + header + data


@pytest.mark.parametrize("descr, shape, error", [
    ("<f4", (20000, 20000), CorruptedFileError),
    ("(20000,20000)<f4", (1,), ModelDataError),
    ("|O", (4,), ModelDataError),
    ("<M8[s]", (4,), ModelDataError),
    ("<U4", (4,), ModelDataError),
])
def test_parameter_headers_are_checked_before_any_allocation(tmp_path, ppo2_file, descr, shape, error):
    members = _members(ppo2_file[0])
    names = json.loads(members["parameter_list"])
    buffer = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(members["parameters"])) as old, zipfile.ZipFile(buffer, "w") as new:
        for info in old.infolist():
            payload = old.read(info)
            if info.filename == names[0] + ".npy":
                payload = _npy(descr, shape)
            new.writestr(info.filename, payload)
    path = _rewrite(ppo2_file[0], tmp_path / "npy.zip", members_edit=lambda m: m.update(parameters=buffer.getvalue()))
    with pytest.raises(error):
        PPO2.load(path)


def test_wrong_shape_parameter_is_refused_from_its_header(tmp_path, ppo2_file):
    members = _members(ppo2_file[0])
    names = json.loads(members["parameter_list"])
    buffer = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(members["parameters"])) as old, zipfile.ZipFile(buffer, "w") as new:
        for info in old.infolist():
            payload = old.read(info)
            if info.filename == names[0] + ".npy":
                payload = _npy("<f4", (3,), np.zeros(3, np.float32).tobytes())
            new.writestr(info.filename, payload)
    path = _rewrite(ppo2_file[0], tmp_path / "shape.zip", members_edit=lambda m: m.update(parameters=buffer.getvalue()))
    with pytest.raises(ModelDataError, match=names[0]):
        PPO2.load(path)


def test_zip_bomb_member_is_refused_before_decompression(tmp_path, ppo2_file):
    path = tmp_path / "bomb.zip"
    members = _members(ppo2_file[0])
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for name, payload in members.items():
            if name != "data":
                archive.writestr(name, payload)
        with archive.open("data", "w", force_zip64=True) as handle:
            chunk = b" " * (1 << 20)
            for _ in range(200):  # 200 MB of spaces -> ~200 kB compressed
                handle.write(chunk)
    with load_limits(max_json_bytes=16 << 20):
        with pytest.raises(FileLimitError, match="zip bomb"):
            PPO2.load(path)


def test_wrong_algorithm_is_a_typed_error(ppo2_file):
    with pytest.raises(WrongAlgorithmError, match="PPO2.load"):
        DQN.load(ppo2_file[0])


def test_user_policy_subclasses_register_themselves(tmp_path):
    class SchemaTestPolicy(FeedForwardPolicy):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, layers=[16], feature_extraction="mlp", **kwargs)

    assert lookup_class(f"{__name__}:test_user_policy_subclasses_register_themselves.<locals>.SchemaTestPolicy") \
        is SchemaTestPolicy
    model = PPO2(SchemaTestPolicy, "CartPole-v1", n_steps=16, nminibatches=1)
    model.save(tmp_path / "custom.zip")
    loaded = PPO2.load(tmp_path / "custom.zip")
    assert loaded.policy is SchemaTestPolicy
    obs = np.zeros((2, 4), np.float32)
    np.testing.assert_array_equal(loaded.predict(obs, deterministic=True)[0], model.predict(obs, deterministic=True)[0])


def test_register_class_explicit_name():
    class Outside:
        pass

    register_class(Outside, "policy", name="elsewhere:Outside")
    assert lookup_class("elsewhere:Outside") is Outside
    with pytest.raises(ValueError, match="registry kind"):
        register_class(Outside, "gadget")


def test_orphan_temporaries_are_removed_and_permissions_normal(tmp_path):
    target = tmp_path / "model.zip"
    orphan = tmp_path / ".tmp-999999999-abcd-model.zip"  # a writer pid that cannot exist
    orphan.write_bytes(b"half a file")
    live = tmp_path / f".tmp-{os.getpid()}-abcd-model.zip"  # ours: in progress, kept
    live.write_bytes(b"in progress")
    atomic_io.atomic_write_bytes(target, b"payload")
    assert target.read_bytes() == b"payload"
    assert not orphan.exists() and live.exists()
    umask = os.umask(0)
    os.umask(umask)
    assert stat.S_IMODE(os.stat(target).st_mode) == 0o666 & ~umask


def test_files_written_together_are_replaced_together(tmp_path, monkeypatch):
    first, second = tmp_path / "obs_rms.pkl", tmp_path / "ret_rms.pkl"
    atomic_io.atomic_write_many({first: b"old-1", second: b"old-2"})
    real_replace = os.replace
    calls = []

    def failing_replace(src, dst):
        calls.append(dst)
        if str(dst) == str(second):
            raise OSError("disk gone")
        return real_replace(src, dst)

    monkeypatch.setattr(atomic_io.os, "replace", failing_replace)
    with pytest.raises(OSError, match="disk gone"):
        atomic_io.atomic_write_many({first: b"new-1", second: b"new-2"})
    monkeypatch.setattr(atomic_io.os, "replace", real_replace)
    assert first.read_bytes() == b"old-1" and second.read_bytes() == b"old-2"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["obs_rms.pkl", "ret_rms.pkl"]


def test_a_good_file_loads_after_bad_ones(tmp_path, ppo2_file):
    for entry in ({"__enum__": "os:system", "value": "true"}, {"__class__": "os:system"}):
        path = _rewrite(ppo2_file[0], tmp_path / "bad.zip", lambda d, entry=entry: d.update(policy=entry))
        with pytest.raises(ModelFileError):
            PPO2.load(path)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        model = PPO2.load(ppo2_file[0])
    np.testing.assert_array_equal(model.predict(ppo2_file[1], deterministic=True)[0], ppo2_file[2])


def test_save_util_keeps_its_error_name():
    assert save_util.ModelFileError is ModelFileError and issubclass(ModelFileError, ValueError)
    assert gym is not None


@pytest.mark.parametrize("dtype", [np.bool_, np.uint64, np.int32])
def test_parameters_must_be_floating_point(tmp_path, ppo2_file, dtype):
    members = _members(ppo2_file[0])
    names = json.loads(members["parameter_list"])
    buffer = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(members["parameters"])) as old:
        arrays = {info.filename[:-4]: np.load(io.BytesIO(old.read(info))) for info in old.infolist()}
    arrays[names[0]] = arrays[names[0]].astype(dtype)
    np.savez(buffer, **arrays)
    path = _rewrite(ppo2_file[0], tmp_path / "dtype.zip", members_edit=lambda m: m.update(parameters=buffer.getvalue()))
    with pytest.raises(ModelDataError, match="floating|float"):
        PPO2.load(path)


def test_highly_compressed_large_parameters_member_is_a_bomb(tmp_path, ppo2_file):
    path = tmp_path / "pbomb.zip"
    members = _members(ppo2_file[0])
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for name, payload in members.items():
            if name != "parameters":
                archive.writestr(name, payload)
        with archive.open("parameters", "w", force_zip64=True) as handle:
            chunk = bytes(1 << 20)
            for _ in range(64):  # 64 MB of zeros -> ~64 kB
                handle.write(chunk)
    with pytest.raises(FileLimitError, match="ratio"):
        PPO2.load(path)


def test_load_parameters_missing_names_is_typed(tmp_path):
    """Missing parameters raise MissingParametersError (a ModelDataError and, as in SB2, a RuntimeError) naming them."""
    from sbtf import PPO2
    from sbtf.common.file_errors import MissingParametersError, ModelDataError

    model = PPO2("MlpPolicy", "CartPole-v1", n_steps=16)
    params = model.get_parameters()
    dropped = next(iter(params))
    del params[dropped]
    with pytest.raises(MissingParametersError) as info:
        model.load_parameters(params)
    assert isinstance(info.value, ModelDataError) and isinstance(info.value, RuntimeError)
    assert info.value.missing == (dropped,)
    model.load_parameters(params, exact_match=False)
