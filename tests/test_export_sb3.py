"""stable-baselines3 / sb3-contrib agents out of sbtf: ``sbtf export`` and ``sbtf convert`` on the RL Zoo's agents.

The six real RL-Zoo3 run folders of ../shared/fixtures/sb3_zoo (skipped with a reason when absent) are exported by
``sbtf export`` (SavedModel always; ONNX with tf2onnx + onnxruntime; TF.js run in Node with @tensorflow/tfjs) and
the exported ``action`` is compared with ``predict(deterministic=True)`` of the agent loaded from its SB3 zip --
discrete actions exactly, continuous ones to 1e-5 -- on the fixture's 16 policy inputs. A run folder's
``vecnormalize.pkl`` is folded in (the export takes raw observations). ``sbtf convert`` writes sbtf's own format
(and an sbtf VecNormalize file) that loads back with the same actions and statistics.
"""
from __future__ import annotations

import json
import os
import warnings
import zipfile

import gymnasium as gym
import numpy as np
import pytest

from conftest import shared_fixture
from test_export import _needs_onnx, _needs_tfjs_node, _run_onnx, _run_savedmodel, _run_tfjs

from sbtf.cli import main
from sbtf.common.save_util import inspect_model_bytes
from sbtf.common.vec_env import DummyVecEnv, VecNormalize
from sbtf.contrib import QRDQN, TQC
from sbtf.sb3 import A2C, DQN, PPO, SAC

os.environ.setdefault("TFDF_DISABLE_WELCOME_MESSAGE", "1")

AGENTS = {
    "ppo/CartPole-v1_1": (PPO, "CartPole-v1"),
    "a2c/Pendulum-v1_1": (A2C, "Pendulum-v1"),
    "sac/Pendulum-v1_1": (SAC, "Pendulum-v1"),
    "dqn/CartPole-v1_1": (DQN, "CartPole-v1"),
    "qrdqn/CartPole-v1_1": (QRDQN, "CartPole-v1"),
    "tqc/Pendulum-v1_1": (TQC, "Pendulum-v1"),
}


def _zip(run: str):
    return shared_fixture("sb3_zoo", run, f"{AGENTS[run][1]}.zip")


def _load(cls, path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # old files' schedules that are code: sbtf's defaults, with a warning
        return cls.load(str(path))


def _obs(run: str) -> np.ndarray:
    data = json.loads(shared_fixture("sb3_zoo", "expected_outputs.json").read_text())
    return np.asarray(data["agents"][run]["obs"], dtype=np.float32)


def _assert_actions(got, want) -> None:
    got, want = np.asarray(got), np.asarray(want)
    if want.dtype.kind in "iu":
        np.testing.assert_array_equal(got.reshape(want.shape), want)
    else:
        np.testing.assert_allclose(got.reshape(want.shape), want, rtol=1e-5, atol=1e-5)


def _export(capsys, source, fmt: str, out) -> str:
    code = main(["export", str(source), "--format", fmt, "-o", str(out)])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    return captured.out


@pytest.fixture(scope="module", params=sorted(AGENTS))
def agent(request):
    run = request.param
    return run, _load(AGENTS[run][0], _zip(run))


def test_savedmodel_of_an_sb3_zip_equals_predict(agent, tmp_path, capsys):
    run, model = agent
    out = _export(capsys, _zip(run), "savedmodel", tmp_path / "sm")
    assert f"Exported {type(model).__name__} " in out
    obs = _obs(run)
    got = _run_savedmodel(tmp_path / "sm", {"observation": obs})
    _assert_actions(got["action"], model.predict(obs, deterministic=True)[0])


def test_onnx_of_an_sb3_zip_equals_predict(agent, tmp_path, capsys):
    ort = _needs_onnx()
    run, model = agent
    _export(capsys, _zip(run), "onnx", tmp_path / "agent.onnx")
    obs = _obs(run)
    got = _run_onnx(ort, tmp_path / "agent.onnx", {"observation": obs})
    _assert_actions(got["action"], model.predict(obs, deterministic=True)[0])


def test_tfjs_of_the_sb3_zips_equals_predict(tmp_path, capsys):
    """All six agents through TF.js, run together by @tensorflow/tfjs in one Node process."""
    node = _needs_tfjs_node()
    runs, wanted = [], []
    for index, run in enumerate(sorted(AGENTS)):
        model = _load(AGENTS[run][0], _zip(run))
        folder = tmp_path / f"js{index}"
        _export(capsys, _zip(run), "tfjs", folder)
        obs = _obs(run)
        runs.append((folder, {"observation": obs}))
        wanted.append((run, model.predict(obs, deterministic=True)[0]))
    for (_run, want), got in zip(wanted, _run_tfjs(node, runs)):
        _assert_actions(got["action"], want)


def _raw_pendulum_obs(n: int) -> np.ndarray:
    rng = np.random.default_rng(3)
    theta = rng.uniform(-np.pi, np.pi, n)
    return np.stack([np.cos(theta), np.sin(theta), rng.uniform(-8, 8, n)], axis=1).astype(np.float32)


def test_run_folder_export_folds_its_vecnormalize_statistics(tmp_path, capsys):
    """``sbtf export <run folder>``: ENV.zip with ENV/vecnormalize.pkl folded in; the export takes raw observations
    and acts as predict on the observations normalised as the zoo does (statistics frozen, clipped at clip_obs)."""
    run = shared_fixture("sb3_zoo", "a2c", "Pendulum-v1_1")
    out = _export(capsys, run, "savedmodel", tmp_path / "sm")
    assert "Folding the run's VecNormalize statistics" in out and "vecnormalize.pkl" in out
    env = DummyVecEnv([lambda: gym.make("Pendulum-v1")])
    stats = VecNormalize.load(str(run / "Pendulum-v1" / "vecnormalize.pkl"), env)
    stats.training = False
    model = _load(A2C, run / "Pendulum-v1.zip")
    raw = _raw_pendulum_obs(32)
    got = _run_savedmodel(tmp_path / "sm", {"observation": raw})
    _assert_actions(got["action"], model.predict(stats.normalize_obs(raw), deterministic=True)[0])
    # without the statistics the actions differ: the folding is what makes them equal
    assert not np.allclose(model.predict(raw, deterministic=True)[0], got["action"], atol=1e-3)


def test_export_of_an_sb3_file_errors(tmp_path, capsys):
    ppo = _zip("ppo/CartPole-v1_1")
    assert main(["export", str(ppo), "--algo", "sac", "-o", str(tmp_path / "x")]) == 2
    err = capsys.readouterr().err
    assert "PPO" in err and "SAC" in err and len(err.strip().splitlines()) == 1
    assert main(["export", str(ppo), "--algo", "ppo2", "-o", str(tmp_path / "y")]) == 2
    err = capsys.readouterr().err
    assert "stable-baselines3" in err and "ppo2" in err
    (tmp_path / "empty_run").mkdir()
    assert main(["export", str(tmp_path / "empty_run")]) == 2
    assert "not an RL-Zoo3 run folder" in capsys.readouterr().err


# ------------------------------------------------------------------------------------------------ convert
def test_convert_an_sb3_zip_to_sbtf(agent, tmp_path, capsys):
    run, model = agent
    target = tmp_path / "converted.zip"
    assert main(["convert", str(_zip(run)), str(target), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["file_format"] == "sb3-zip" and report["algorithm"] == type(model).__name__
    assert report["target"] == str(target) and report["parameters"]
    assert inspect_model_bytes(target.read_bytes()) == "sbtf"
    with zipfile.ZipFile(target) as archive:
        assert not any(name.endswith(".pth") for name in archive.namelist())
    again = type(model).load(str(target))
    assert type(again) is type(model)
    for mine, theirs in zip(again.get_parameter_list(), model.get_parameter_list()):
        np.testing.assert_array_equal(mine.numpy(), theirs.numpy())
    obs = _obs(run)
    np.testing.assert_array_equal(again.predict(obs, deterministic=True)[0], model.predict(obs, deterministic=True)[0])


def test_convert_an_rl_zoo3_run_folder(tmp_path, capsys):
    """``sbtf convert <run folder> NEW``: the model and the run's VecNormalize statistics as sbtf files."""
    run = shared_fixture("sb3_zoo", "a2c", "Pendulum-v1_1")
    target = tmp_path / "out" / "a2c_pendulum.zip"
    target.parent.mkdir()
    assert main(["convert", str(run), str(target)]) == 0
    out = capsys.readouterr().out
    assert "algorithm: A2C" in out and "VecNormalize statistics:" in out
    env = DummyVecEnv([lambda: gym.make("Pendulum-v1")])
    converted = VecNormalize.load(str(tmp_path / "out" / "vecnormalize.pkl"), env)
    original = VecNormalize.load(str(run / "Pendulum-v1" / "vecnormalize.pkl"), env)
    assert b"policy.pth" not in (tmp_path / "out" / "vecnormalize.pkl").read_bytes()
    np.testing.assert_array_equal(converted.obs_rms.mean, original.obs_rms.mean)
    np.testing.assert_array_equal(converted.obs_rms.var, original.obs_rms.var)
    assert converted.clip_obs == original.clip_obs and converted.epsilon == original.epsilon
    model = A2C.load(str(target))
    obs = _obs("a2c/Pendulum-v1_1")
    np.testing.assert_array_equal(model.predict(obs, deterministic=True)[0],
                                  _load(A2C, run / "Pendulum-v1.zip").predict(obs, deterministic=True)[0])


def test_convert_command_errors_and_help(tmp_path, capsys):
    ppo = _zip("ppo/CartPole-v1_1")
    assert main(["convert", str(ppo), str(tmp_path / "x.zip"), "--algo", "dqn"]) == 2
    err = capsys.readouterr().err
    assert "PPO" in err and "DQN" in err and len(err.strip().splitlines()) == 1
    assert main(["convert", str(ppo), str(tmp_path / "y.zip"), "--algo", "qrdqn_sb3"]) == 2
    assert "not a stable-baselines3 / sb3-contrib algorithm" in capsys.readouterr().err
    (tmp_path / "two").mkdir()
    for name in ("A-v1", "B-v1"):
        (tmp_path / "two" / f"{name}.zip").write_bytes(ppo.read_bytes())
        (tmp_path / "two" / name).mkdir()
    assert main(["convert", str(tmp_path / "two"), str(tmp_path / "z.zip")]) == 2
    assert "several models" in capsys.readouterr().err
    assert main(["convert", "--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "a stable-baselines3 / sb3-contrib model zip, or an RL-Zoo3 run folder" in text


@pytest.mark.parametrize("policy_class, data, algorithm", [
    ("stable_baselines3.common.policies.ActorCriticPolicy", {"clip_range": 0.2, "n_epochs": 10}, "PPO"),
    ("stable_baselines3.common.policies.ActorCriticPolicy", {"normalize_advantage": False}, "A2C"),
    ("stable_baselines3.common.policies.ActorCriticPolicy", {"cg_max_steps": 15, "target_kl": 0.01}, "TRPO"),
    ("stable_baselines3.td3.policies.TD3Policy", {"policy_delay": 2, "target_noise_clip": 0.5}, "TD3"),
    ("stable_baselines3.td3.policies.TD3Policy", {"policy_delay": 1, "target_noise_clip": 0.0}, "DDPG"),
    ("sb3_contrib.common.maskable.policies.MaskableActorCriticPolicy", {}, "MaskablePPO"),
    ("sb3_contrib.common.recurrent.policies.RecurrentActorCriticPolicy", {}, "RecurrentPPO"),
    ("sb3_contrib.ars.policies.ARSPolicy", {}, "ARS"),
    ("stable_baselines3.sac.policies.SACPolicy", {}, "SAC"),
])
def test_the_algorithm_of_an_sb3_file_is_read_from_its_policy_class(policy_class, data, algorithm):
    from sbtf_converters.sb3_files import sb3_algorithm_name, sb3_class
    from sbtf_converters.sb3_reader import Sb3File

    sb3 = Sb3File(dict(data, policy_class=policy_class), {}, "2.3.0", "", [], "test file", False)
    assert sb3_algorithm_name(sb3) == algorithm
    cls = sb3_class(algorithm)
    assert cls.__name__ == algorithm and cls.__module__.startswith(("sbtf.sb3.", "sbtf.contrib."))


def test_an_sb3_file_that_does_not_tell_its_algorithm_asks_for_it():
    from sbtf.common.file_errors import ModelDataError
    from sbtf_converters.sb3_files import sb3_algorithm_name
    from sbtf_converters.sb3_reader import Sb3File

    sb3 = Sb3File({"policy_class": "my_package.policies.MyPolicy"}, {}, "", "", [], "mine.zip", False)
    with pytest.raises(ModelDataError, match=r"mine.zip does not tell which algorithm.*pass the algorithm \(--algo"):
        sb3_algorithm_name(sb3)


@pytest.mark.parametrize("name", ["SAC", "TD3", "DDPG"])
def test_sb3_off_policy_classes_export_their_own_graph(name, tmp_path):
    """sbtf.sb3's SAC / TD3 / DDPG share their names with stable-baselines 2's: the export must use their own
    graph (_export_outputs), not SB2's builder registered for the name (no fixture needed)."""
    import sbtf.sb3
    from sbtf_converters import export as sx

    model = getattr(sbtf.sb3, name)("MlpPolicy", "Pendulum-v1", learning_starts=0, seed=0,
                                    policy_kwargs={"net_arch": [16, 16]})
    sx.export_model(model, str(tmp_path / "sm"))
    meta = json.loads((tmp_path / "sm" / sx.METADATA_FILE).read_text())
    assert meta["action"] == f"{name}._export_outputs"
    obs = np.random.default_rng(0).uniform([-1, -1, -8], [1, 1, 8], (10, 3)).astype(np.float32)
    got = _run_savedmodel(tmp_path / "sm", {"observation": obs})
    _assert_actions(got["action"], model.predict(obs, deterministic=True)[0])
