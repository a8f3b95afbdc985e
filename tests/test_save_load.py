"""The sbtf model file: round trips, safety (no code runs on load), atomic writes, clear errors."""
from __future__ import annotations

import base64
import io
import json
import os
import pickle
import zipfile

import gymnasium as gym
import numpy as np
import pytest

from sbtf import A2C, PPO2
from sbtf.common import save_util
from sbtf.common.vec_env import DummyVecEnv


@pytest.fixture(scope="module")
def trained_ppo2():
    env = DummyVecEnv([lambda: gym.make("CartPole-v1") for _ in range(2)])
    model = PPO2("MlpPolicy", env, n_steps=16, nminibatches=2, noptepochs=2, seed=0, learning_rate=lambda f: 3e-4 * f)
    model.learn(64)
    return model


def _obs(n=8):
    return np.random.RandomState(0).uniform(-1, 1, (n, 4)).astype(np.float32)


def test_roundtrip_identical_predictions_and_parameters(tmp_path, trained_ppo2):
    trained_ppo2.save(str(tmp_path / "ppo2_cartpole"))
    assert (tmp_path / "ppo2_cartpole.zip").exists()  # SB2 rule: .zip appended
    loaded = PPO2.load(str(tmp_path / "ppo2_cartpole"))  # SB2 rule: .zip found
    np.testing.assert_array_equal(trained_ppo2.predict(_obs(), deterministic=True)[0],
                                  loaded.predict(_obs(), deterministic=True)[0])
    for name, value in trained_ppo2.get_parameters().items():
        np.testing.assert_array_equal(value, loaded.get_parameters()[name])
    assert loaded.n_steps == 16 and loaded.nminibatches == 2 and loaded.num_timesteps == 64
    assert loaded.get_env() is None


def test_file_members_are_data_only(tmp_path, trained_ppo2):
    path = tmp_path / "m.zip"
    trained_ppo2.save(path)
    with zipfile.ZipFile(path) as archive:
        assert set(archive.namelist()) == {"data", "parameters", "parameter_list", "sbtf_format"}
        data = json.loads(archive.read("data"))
        info = json.loads(archive.read("sbtf_format"))
    assert info["algo"] == "PPO2" and info["format_version"] == save_util.FORMAT_VERSION
    assert data["policy"] == {"__class__": "sbtf.common.policies:MlpPolicy"}
    assert data["gamma"] == 0.99
    # a custom learning-rate function is kept as sampled values (and an optional pickle)
    assert data["learning_rate"]["__callable__"]["sampled"][0] == [1.0, pytest.approx(3e-4)]


def test_custom_callable_is_rebuilt_without_running_code(tmp_path, trained_ppo2):
    trained_ppo2.save(tmp_path / "m.zip")
    with pytest.warns(UserWarning, match="rebuilt as a piecewise-linear schedule"):
        loaded = PPO2.load(tmp_path / "m.zip")
    assert loaded.learning_rate(0.5) == pytest.approx(1.5e-4)
    loaded_trusted = PPO2.load(tmp_path / "m.zip", allow_pickle=True)
    assert loaded_trusted.learning_rate(0.25) == pytest.approx(0.75e-4)
    replaced = PPO2.load(tmp_path / "m.zip", custom_objects={"learning_rate": 1e-3})
    assert replaced.learning_rate == 1e-3


class _Boom:
    def __reduce__(self):
        return (os.system, ("touch /tmp/sbtf_pwned_by_model_file",))


def test_booby_trapped_model_file_does_not_run_code(tmp_path, trained_ppo2):
    marker = "/tmp/sbtf_pwned_by_model_file"
    if os.path.exists(marker):
        os.remove(marker)
    path = tmp_path / "m.zip"
    trained_ppo2.save(path)
    with zipfile.ZipFile(path) as archive:
        members = {name: archive.read(name) for name in archive.namelist()}
    data = json.loads(members["data"])
    blob = base64.b64encode(pickle.dumps(_Boom())).decode()
    data["learning_rate"] = {"__pickle__": blob, "repr": "boom", "type": "x:y"}
    data["cliprange"] = {"__callable__": {"repr": "boom", "sampled": None, "pickle": blob}}
    members["data"] = json.dumps(data).encode()
    trapped = tmp_path / "trapped.zip"
    with zipfile.ZipFile(trapped, "w") as archive:
        for name, payload in members.items():
            archive.writestr(name, payload)
    model = PPO2.load(trapped)
    assert not os.path.exists(marker)
    assert isinstance(model.learning_rate, save_util.UnloadedObject)
    with pytest.raises(RuntimeError, match="allow_pickle"):
        model.cliprange(1.0)
    # a class reference to a module that is not imported is refused, not imported
    data["policy"] = {"__class__": "some_untrusted_module_xyz:Policy"}
    members["data"] = json.dumps(data).encode()
    with zipfile.ZipFile(trapped, "w") as archive:
        for name, payload in members.items():
            archive.writestr(name, payload)
    with pytest.raises(ValueError, match="custom_objects"):
        PPO2.load(trapped)


def test_non_model_and_corrupted_files_have_clear_errors(tmp_path, trained_ppo2):
    text = tmp_path / "notes.txt"
    text.write_text("hello")
    with pytest.raises(save_util.ModelFileError, match="not an sbtf or stable-baselines model file"):
        PPO2.load(text)
    path = tmp_path / "m.zip"
    trained_ppo2.save(path)
    truncated = tmp_path / "truncated.zip"
    truncated.write_bytes(path.read_bytes()[: len(path.read_bytes()) // 2])
    with pytest.raises(save_util.ModelFileError, match="truncated or corrupted"):
        PPO2.load(truncated)
    with pytest.raises(FileNotFoundError, match="could not be found"):
        PPO2.load(tmp_path / "missing")


def test_wrong_algorithm_is_named(tmp_path, trained_ppo2):
    trained_ppo2.save(tmp_path / "m.zip")
    with pytest.raises(ValueError, match=r"holds a PPO2 model; load it with PPO2.load"):
        A2C.load(tmp_path / "m.zip")


def test_atomic_save_keeps_previous_file_on_failure(tmp_path, trained_ppo2, monkeypatch):
    path = tmp_path / "m.zip"
    trained_ppo2.save(path)
    good = path.read_bytes()

    def failing_replace(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(save_util.os, "replace", failing_replace)
    with pytest.raises(OSError, match="disk full"):
        trained_ppo2.save(path)
    assert path.read_bytes() == good
    assert [p.name for p in tmp_path.iterdir()] == ["m.zip"]  # no temporary file left behind


def test_save_to_file_object(trained_ppo2):
    buffer = io.BytesIO()
    trained_ppo2.save(buffer)
    buffer.seek(0)
    loaded = PPO2.load(buffer)
    np.testing.assert_array_equal(trained_ppo2.predict(_obs(), deterministic=True)[0],
                                  loaded.predict(_obs(), deterministic=True)[0])


def test_load_parameters_dict_list_and_shape_errors(trained_ppo2):
    env = DummyVecEnv([lambda: gym.make("CartPole-v1")])
    other = PPO2("MlpPolicy", env, n_steps=16, nminibatches=1)
    params = trained_ppo2.get_parameters()
    other.load_parameters(params)
    np.testing.assert_array_equal(other.predict(_obs(), deterministic=True)[0],
                                  trained_ppo2.predict(_obs(), deterministic=True)[0])
    other2 = PPO2("MlpPolicy", env, n_steps=16, nminibatches=1)
    with pytest.warns(DeprecationWarning):
        other2.load_parameters(list(params.values()))
    np.testing.assert_array_equal(other2.predict(_obs(), deterministic=True)[0],
                                  trained_ppo2.predict(_obs(), deterministic=True)[0])
    bad = dict(params)
    bad["model/pi_fc0/w:0"] = np.zeros((3, 64), np.float32)
    with pytest.raises(ValueError, match=r"model/pi_fc0/w:0 has shape \(3, 64\).*\(4, 64\)"):
        other.load_parameters(bad)
    partial = {"model/vf/b:0": np.ones(1, np.float32)}
    with pytest.raises(RuntimeError, match="exact_match"):
        other.load_parameters(partial)
    other.load_parameters(partial, exact_match=False)
    assert other.get_parameters()["model/vf/b:0"][0] == 1.0
    assert len(other.get_parameter_list()) == len(params)


def test_load_with_env_and_continue_training(tmp_path, trained_ppo2):
    trained_ppo2.save(tmp_path / "m.zip")
    env = DummyVecEnv([lambda: gym.make("CartPole-v1") for _ in range(2)])
    loaded = PPO2.load(tmp_path / "m.zip", env=env, n_steps=32)
    assert loaded.n_steps == 32
    loaded.learn(64)
    assert loaded.num_timesteps == 64
    wrong = DummyVecEnv([lambda: gym.make("Pendulum-v1")])
    with pytest.raises(ValueError, match="The observation space of the env Box") as info:
        loaded.set_env(wrong)
    assert "the action space of the env Box" in str(info.value) and "differs from the model's Discrete(2)" in str(
        info.value) and "time feature" not in str(info.value)
    with pytest.raises(ValueError, match="policy kwargs"):
        PPO2.load(tmp_path / "m.zip", policy_kwargs={"net_arch": [8]})


def test_saved_file_has_normal_permissions(tmp_path, trained_ppo2):
    umask = os.umask(0)
    os.umask(umask)
    trained_ppo2.save(tmp_path / "m.zip")
    assert (tmp_path / "m.zip").stat().st_mode & 0o777 == 0o666 & ~umask
