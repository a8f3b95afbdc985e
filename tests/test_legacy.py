"""stable-baselines 2.x agent files: loading, safety, maths parity, conversion, the stable_baselines shim.

Real zoo agents come from ../shared/fixtures/sb2_zoo (skipped when absent); every other file is written here
in both SB2 formats by tests/legacy_fixtures.py, so a fresh clone tests the same code paths.
"""
from __future__ import annotations

import importlib
import json
import os
import pickle
import subprocess
import sys
import textwrap
import warnings
import zipfile
from collections import OrderedDict
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest

import legacy_fixtures as fx
from legacy_fixtures import G, Call, NewObj, ZOO

from sbtf_converters import legacy
from sbtf_converters.legacy import (ConversionReport, CustomPolicyError, ModelFileError, ParameterShapeError,
                                    RefusedGlobalError, WrongAlgorithmError, convert, load_sb2_model, parse_sb2,
                                    read_running_mean_std, read_vec_normalize)
from sbtf_converters.sb2_algos import ALGORITHMS
from sbtf_converters.sb2_pickle import pickle_globals

REPO = Path(__file__).resolve().parents[1]


def _zoo(*parts: str) -> Path:
    path = ZOO.joinpath(*parts)
    if not path.exists():
        pytest.skip(f"shared fixture {path} is absent (fresh clone without ../shared/fixtures)")
    return path


def _algo_class(name: str):
    spec = ALGORITHMS[name]
    try:
        return spec.sbtf_class()
    except ImportError as exc:
        pytest.skip(f"{name} is not implemented in sbtf yet ({exc})")


# ================================================================================================
# real zoo agents: names/shapes against the reference tables, then scores
# ================================================================================================
MLP_AC = [("model/pi_fc0/w:0", "obs,64"), ("model/pi_fc0/b:0", "64"), ("model/vf_fc0/w:0", "obs,64"),
          ("model/vf_fc0/b:0", "64"), ("model/pi_fc1/w:0", "64,64"), ("model/pi_fc1/b:0", "64"),
          ("model/vf_fc1/w:0", "64,64"), ("model/vf_fc1/b:0", "64"), ("model/vf/w:0", "64,1"), ("model/vf/b:0", "1"),
          ("model/pi/w:0", "64,n"), ("model/pi/b:0", "n")]


def _ac_table(obs: int, n: int, box: bool, prefix: str = "") -> list:
    """Reference section 12.1 tables for default MlpPolicy files (14 / 15 arrays)."""
    def shape(text):
        return tuple(int({"obs": obs, "n": n}.get(p, p)) for p in text.split(","))
    table = [(prefix + name, shape(s)) for name, s in MLP_AC]
    if box:
        table.append((prefix + "model/pi/logstd:0", (1, n)))
    return table + [(prefix + "model/q/w:0", (64, n)), (prefix + "model/q/b:0", (n,))]


def _dqn_table() -> list:
    """Reference 12.1 DQN CartPole (zoo CustomDQNPolicy: layers [64], layer norm, dueling)."""
    out = [("deepq/eps:0", ())]
    for prefix in ("deepq/model/", "deepq/target_q_func/model/"):
        for stream, n_out in (("action_value", 2), ("state_value", 1)):
            out += [(f"{prefix}{stream}/fully_connected/weights:0", (4, 64)),
                    (f"{prefix}{stream}/fully_connected/biases:0", (64,)),
                    (f"{prefix}{stream}/LayerNorm/beta:0", (64,)), (f"{prefix}{stream}/LayerNorm/gamma:0", (64,)),
                    (f"{prefix}{stream}/fully_connected_1/weights:0", (64, n_out)),
                    (f"{prefix}{stream}/fully_connected_1/biases:0", (n_out,))]
    return out


def _mlp_dense(scope: str, n_in: int, n_out: int, hidden=(64, 64)) -> list:
    out, dim = [], n_in
    for i, h in enumerate(hidden):
        out += [(f"{scope}/fc{i}/kernel:0", (dim, h)), (f"{scope}/fc{i}/bias:0", (h,))]
        dim = h
    return out


def _sac_table(obs: int, n: int, auto_ent: bool) -> list:
    """Reference 12.1 SAC Pendulum / HER FetchReach."""
    table = _mlp_dense("model/pi", obs, n) + [("model/pi/dense/kernel:0", (64, n)), ("model/pi/dense/bias:0", (n,)),
                                              ("model/pi/dense_1/kernel:0", (64, n)), ("model/pi/dense_1/bias:0", (n,))]
    table += _mlp_dense("model/values_fn/vf", obs, 1) + [("model/values_fn/vf/vf/kernel:0", (64, 1)),
                                                         ("model/values_fn/vf/vf/bias:0", (1,))]
    for q in ("qf1", "qf2"):
        table += _mlp_dense(f"model/values_fn/{q}", obs + n, 1) + [(f"model/values_fn/{q}/{q}/kernel:0", (64, 1)),
                                                                   (f"model/values_fn/{q}/{q}/bias:0", (1,))]
    if auto_ent:
        table.append(("model/log_ent_coef:0", ()))
    table += _mlp_dense("target/values_fn/vf", obs, 1) + [("target/values_fn/vf/vf/kernel:0", (64, 1)),
                                                          ("target/values_fn/vf/vf/bias:0", (1,))]
    return table


def _td3_table(obs: int, n: int) -> list:
    table = []
    for prefix in ("model", "target"):
        table += _mlp_dense(f"{prefix}/pi", obs, n) + [(f"{prefix}/pi/dense/kernel:0", (64, n)),
                                                       (f"{prefix}/pi/dense/bias:0", (n,))]
        for q in ("qf1", "qf2"):
            table += _mlp_dense(f"{prefix}/values_fn/{q}", obs + n, 1) + [
                (f"{prefix}/values_fn/{q}/{q}/kernel:0", (64, 1)), (f"{prefix}/values_fn/{q}/{q}/bias:0", (1,))]
    return table


def _ddpg_table(obs: int, n: int) -> list:
    table = []
    for prefix in ("model", "target"):
        table += _mlp_dense(f"{prefix}/pi", obs, n) + [(f"{prefix}/pi/pi/kernel:0", (64, n)),
                                                       (f"{prefix}/pi/pi/bias:0", (n,))]
        table += [(f"{prefix}/qf/fc0/kernel:0", (obs, 64)), (f"{prefix}/qf/fc0/bias:0", (64,)),
                  (f"{prefix}/qf/fc1/kernel:0", (64 + n, 64)), (f"{prefix}/qf/fc1/bias:0", (64,)),
                  (f"{prefix}/qf/qf_output/kernel:0", (64, 1)), (f"{prefix}/qf/qf_output/bias:0", (1,))]
    return table


ZOO_TABLES = {
    "a2c/CartPole-v1.pkl": ("A2C", "list", _ac_table(4, 2, False)),
    "acer/CartPole-v1.pkl": ("ACER", "list", _ac_table(4, 2, False)),
    "acktr/CartPole-v1.pkl": ("ACKTR", "list", _ac_table(4, 2, False)),
    "acktr/Pendulum-v0.zip": ("ACKTR", "npz", _ac_table(3, 1, True)),
    "ppo2/CartPole-v1.pkl": ("PPO2", "list", _ac_table(4, 2, False)),
    "ppo2/MountainCar-v0.pkl": ("PPO2", "list", _ac_table(2, 3, False)),
    "trpo/CartPole-v1.pkl": ("TRPO", "list", _ac_table(4, 2, False) + _ac_table(4, 2, False, prefix="oldpi/")),
    "dqn/CartPole-v1.pkl": ("DQN", "list", _dqn_table()),
    "sac/Pendulum-v0.pkl": ("SAC", "list", _sac_table(3, 1, auto_ent=False)),
    "td3/Pendulum-v0.pkl": ("TD3", "OrderedDict", _td3_table(3, 1)),
    "ddpg/Pendulum-v0.pkl": ("DDPG", "list", _ddpg_table(3, 1)),
    "her/FetchReach-v1.pkl": ("HER", "OrderedDict", _sac_table(16, 4, auto_ent=True)),
}


@pytest.mark.parametrize("relpath", sorted(ZOO_TABLES))
def test_zoo_file_parses_to_reference_names_and_shapes(relpath):
    path = _zoo(*relpath.split("/"))
    algo, storage, table = ZOO_TABLES[relpath]
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)  # nothing of these files needs a replacement
        parsed = parse_sb2(path)
    assert parsed.algorithm == algo
    assert parsed.report.parameter_storage == storage
    assert [(name, tuple(np.shape(v))) for name, v in parsed.params.items()] == table
    assert parsed.report.replaced_values == []
    assert isinstance(parsed.data["observation_space"], gym.spaces.Space)
    assert isinstance(parsed.data["action_space"], gym.spaces.Space)


def test_zoo_data_keys_mapped_as_reference_11_2():
    acktr = parse_sb2(_zoo("acktr", "Pendulum-v0.zip"))
    assert "lam" not in acktr.data and "nprocs" not in acktr.data
    assert ("nprocs", "removed in 2.10 (n_cpu_tf_sess)") in acktr.report.dropped_keys
    dqn = parse_sb2(_zoo("dqn", "CartPole-v1.pkl"))
    assert dqn.data["double_q"] is True and "checkpoint_path" not in dqn.data
    assert dqn.policy_name == "LnMlpPolicy" and dqn.policy_kwargs == {"layers": [64]}
    assert isinstance(dqn.data["_vectorize_action"], bool)
    trpo = parse_sb2(_zoo("trpo", "CartPole-v1.pkl"))
    assert not {"pretrained_weight", "reward_giver", "task_name"} & set(trpo.data)
    ddpg = parse_sb2(_zoo("ddpg", "Pendulum-v0.pkl"))
    assert "memory_policy" not in ddpg.data and ddpg.data["buffer_size"] == 50000
    from sbtf.common.noise import OrnsteinUhlenbeckActionNoise
    assert isinstance(ddpg.data["action_noise"], OrnsteinUhlenbeckActionNoise)
    td3 = parse_sb2(_zoo("td3", "Pendulum-v0.pkl"))
    assert td3.data["learning_rate"] == pytest.approx(3e-4)
    her = parse_sb2(_zoo("her", "FetchReach-v1.pkl"))
    assert her.data["goal_selection_strategy"] == "future"
    assert isinstance(her.data["her_obs_space"], gym.spaces.Dict)
    assert isinstance(her.data["target_entropy"], float)
    ppo2 = parse_sb2(_zoo("ppo2", "CartPole-v1.pkl"))
    assert ppo2.data["learning_rate"] == pytest.approx(3e-4) and ppo2.data["cliprange"] == pytest.approx(0.2)


# (file, algorithm, gymnasium env, reference mean, std, deterministic, default episodes, normalise obs)
ZOO_SCORES = [
    ("ppo2/CartPole-v1.pkl", "PPO2", "CartPole-v1", 500.0, 0.0, False, 5, False),
    ("a2c/CartPole-v1.pkl", "A2C", "CartPole-v1", 499.903, 1.672, False, 5, False),
    ("ppo2/MountainCar-v0.pkl", "PPO2", "MountainCar-v0", -143.501, 22.928, False, 5, True),
    ("dqn/CartPole-v1.pkl", "DQN", "CartPole-v1", 500.0, 0.0, True, 5, False),
    ("acer/CartPole-v1.pkl", "ACER", "CartPole-v1", 498.620, 23.862, False, 3, False),
    ("acktr/CartPole-v1.pkl", "ACKTR", "CartPole-v1", 487.573, 63.866, False, 3, False),
    ("trpo/CartPole-v1.pkl", "TRPO", "CartPole-v1", 485.392, 70.505, False, 3, False),
    ("sac/Pendulum-v0.pkl", "SAC", "Pendulum-v1", -159.669, 86.665, True, 5, False),
    ("td3/Pendulum-v0.pkl", "TD3", "Pendulum-v1", -148.985, 84.155, True, 5, False),
    ("ddpg/Pendulum-v0.pkl", "DDPG", "Pendulum-v1", -169.829, 93.303, True, 5, False),
    ("acktr/Pendulum-v0.zip", "ACKTR", "Pendulum-v1", -213.831, 137.857, False, 5, False),
]


def _score(relpath, algo, env_id, deterministic, n_episodes, normalize):
    path = _zoo(*relpath.split("/"))
    cls = _algo_class(algo)
    # ACER keeps per-env state and (as in SB2) refuses an env with another number of environments than it was
    # trained with; predict() needs no env.
    model = cls.load(path, env=None if algo == "ACER" else env_id)
    if normalize:  # as the zoo evaluated: VecNormalize with the saved obs statistics, no reward normalisation
        return _score_vec_normalized(model, env_id, path.with_suffix(""), deterministic, n_episodes)
    env = gym.make(env_id)
    returns = []
    for episode in range(n_episodes):
        obs, _ = env.reset(seed=1000 + episode)
        model.set_random_seed(episode)
        done, total = False, 0.0
        while not done:
            action, _ = model.predict(obs, deterministic=deterministic)
            obs, reward, terminated, truncated, _ = env.step(action)
            total += float(reward)
            done = terminated or truncated
        returns.append(total)
    env.close()
    return float(np.mean(returns))


def _score_vec_normalized(model, env_id, stats_folder, deterministic, n_episodes):
    from sbtf.common.vec_env import DummyVecEnv, VecNormalize
    venv = VecNormalize(DummyVecEnv([lambda: gym.make(env_id)]), training=False, norm_reward=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        venv.load_running_average(str(stats_folder))  # SB2's obs_rms.pkl / ret_rms.pkl
    venv.seed(1000)
    model.set_random_seed(0)
    obs = venv.reset()
    returns, total = [], 0.0
    while len(returns) < n_episodes:
        action, _ = model.predict(obs, deterministic=deterministic)
        obs, rewards, dones, _ = venv.step(action)
        total += float(venv.get_original_reward()[0])
        if dones[0]:
            returns.append(total)
            total = 0.0
    venv.close()
    return float(np.mean(returns))


def _check_score(mean, ref_mean, ref_std):
    threshold = ref_mean - max(ref_std, 0.1 * abs(ref_mean))
    assert mean >= threshold, f"mean return {mean:.2f} < {threshold:.2f} (reference {ref_mean} +- {ref_std})"


@pytest.mark.parametrize("case", ZOO_SCORES, ids=[c[0] for c in ZOO_SCORES])
def test_zoo_agent_scores_like_reference(case):
    relpath, algo, env_id, ref_mean, ref_std, deterministic, n_episodes, normalize = case
    _check_score(_score(relpath, algo, env_id, deterministic, n_episodes, normalize), ref_mean, ref_std)


@pytest.mark.slow
@pytest.mark.parametrize("case", ZOO_SCORES, ids=[c[0] for c in ZOO_SCORES])
def test_zoo_agent_scores_like_reference_10_episodes(case):
    relpath, algo, env_id, ref_mean, ref_std, deterministic, _, normalize = case
    _check_score(_score(relpath, algo, env_id, deterministic, 10, normalize), ref_mean, ref_std)


def test_zoo_her_fetchreach_loads_and_acts():
    """No published score for this file: HER+SAC must load and act on FetchReach's dict observations."""
    path = _zoo("her", "FetchReach-v1.pkl")
    her_cls = _algo_class("HER")
    parsed = parse_sb2(path)
    model = her_cls.load(path)
    obs = parsed.data["her_obs_space"].sample()
    # SB2's HER.predict needs the goal env to flatten dict observations (FetchReach needs gymnasium-robotics), so
    # act with the wrapped model (SB2 attribute `model`) on concat[observation, achieved_goal, desired_goal].
    flat = np.concatenate([obs["observation"], obs["achieved_goal"], obs["desired_goal"]]).astype(np.float32)
    action, _ = model.model.predict(flat, deterministic=True)
    assert parsed.data["her_action_space"].contains(np.asarray(action, dtype=np.float32))


def test_zoo_wrong_algorithm_message():
    from sbtf import A2C, PPO2
    with pytest.raises(WrongAlgorithmError, match=r"holds a PPO2 model.*use PPO2\.load.*instead of A2C\.load"):
        A2C.load(_zoo("ppo2", "CartPole-v1.pkl"))
    with pytest.raises(WrongAlgorithmError, match=r"holds a DQN model.*use DQN\.load"):
        PPO2.load(_zoo("dqn", "CartPole-v1.pkl"))
    with pytest.raises(WrongAlgorithmError, match=r"holds a SAC model"):
        PPO2.load(_zoo("sac", "Pendulum-v0.pkl"))


def test_zoo_running_mean_std_and_vecnormalize(tmp_path):
    folder = _zoo("ppo2", "MountainCar-v0")
    rms = read_running_mean_std(folder / "obs_rms.pkl")
    assert rms.mean.shape == (2,) and rms.var.shape == (2,) and rms.count > 1e5
    ret = read_running_mean_std(folder / "ret_rms.pkl")
    assert np.shape(ret.mean) == ()
    from sbtf.common.vec_env import DummyVecEnv, VecNormalize
    venv = VecNormalize(DummyVecEnv([lambda: gym.make("MountainCar-v0")]), training=False, norm_reward=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        venv.load_running_average(str(folder))
    np.testing.assert_allclose(venv.obs_rms.mean, rms.mean)
    np.testing.assert_allclose(venv.obs_rms.var, rms.var)


# ================================================================================================
# synthetic files: both formats, every actor-critic policy kind, NumPy maths parity
# ================================================================================================
def _ppo2():
    from sbtf import PPO2
    return PPO2


def _a2c():
    from sbtf import A2C
    return A2C


def _compare(model, flat_ref, value_ref, obs, state=None, mask=None, atol=1e-5):
    policy = model.policy_tf
    flat = policy.flat_params(obs, state, mask)
    value = policy.value(obs, state, mask)
    np.testing.assert_allclose(flat, flat_ref, rtol=1e-5, atol=atol)
    np.testing.assert_allclose(value, value_ref, rtol=1e-5, atol=atol)


def test_mlp_default_discrete_pkl_list_matches_numpy(tmp_path):
    """MlpPolicy default, Box(4) -> Discrete(3), pre-2.6 .pkl with a nameless parameter list."""
    params = fx.mlp_params(4, 3, [], [64, 64], [64, 64], box_logstd=False, seed=1)
    data = fx.ppo2_data(fx.box(-fx.F32_MAX, fx.F32_MAX, (4,)), fx.discrete(3), fx.policy("MlpPolicy"), old=True)
    path = fx.write_pkl(tmp_path / "m.pkl", data, params)
    model = _ppo2().load(path)
    obs = np.random.default_rng(0).standard_normal((7, 4)).astype(np.float32)
    flat, value = fx.feedforward_np(params, obs.astype(np.float64), [], 2, 2)
    _compare(model, flat, value, obs)
    actions, _ = model.predict(obs, deterministic=True)
    np.testing.assert_array_equal(actions, fx.mode_np(flat, "Discrete", 3))
    probs = model.action_probability(obs)
    np.testing.assert_allclose(probs, np.exp(flat) / np.exp(flat).sum(1, keepdims=True), rtol=1e-5, atol=1e-6)


def test_mlp_net_arch_shared_box_zip_matches_numpy(tmp_path):
    """net_arch with shared layers and unequal pi/vf depths, Box(5) -> Box(2) (logstd), .zip format."""
    net_arch = [16, {"pi": [32], "vf": [8, 8]}]
    params = fx.mlp_params(5, 2, [16], [32], [8, 8], box_logstd=True, seed=2)
    data = fx.a2c_data(fx.box(-10.0, 10.0, (5,)), fx.box(-1.0, 1.0, (2,)), fx.policy("MlpPolicy"),
                       policy_kwargs={"net_arch": net_arch})
    path = fx.write_zip(tmp_path / "m.zip", data, params)
    model = _a2c().load(path)
    assert model.policy_kwargs == {"net_arch": net_arch}
    obs = np.random.default_rng(1).uniform(-3, 3, (6, 5)).astype(np.float32)
    flat, value = fx.feedforward_np(params, obs.astype(np.float64), [16], 1, 2)
    _compare(model, flat, value, obs)
    actions, _ = model.predict(obs, deterministic=True)
    np.testing.assert_allclose(actions, np.clip(flat[:, :2], -1, 1), rtol=1e-5, atol=1e-6)
    mean, std = model.action_probability(obs)
    np.testing.assert_allclose(std, np.exp(flat[:, 2:]), rtol=1e-5)


def test_mlp_layers_relu_discrete_obs_multidiscrete_pkl_dict_matches_numpy(tmp_path):
    """layers=[24, 24] with act_fun=tf.nn.relu (pickled by reference), Discrete(6) obs (one-hot), MultiDiscrete."""
    params = fx.mlp_params(6, 5, [], [24, 24], [24, 24], box_logstd=False, seed=3)
    relu = G("tensorflow.python.ops.gen_nn_ops", "relu")
    data = fx.ppo2_data(fx.discrete(6), fx.multi_discrete([3, 2]), fx.policy("MlpPolicy"),
                        policy_kwargs={"layers": [24, 24], "act_fun": relu})
    path = fx.write_pkl(tmp_path / "m.pkl", data, params, as_dict=True)
    model = _ppo2().load(path)
    obs = np.array([0, 5, 2, 3, 1])
    x = fx.preprocess(obs, {"kind": "Discrete", "n": 6})
    flat, value = fx.feedforward_np(params, x, [], 2, 2, act=lambda v: np.maximum(v, 0))
    _compare(model, flat, value, obs)
    actions, _ = model.predict(obs, deterministic=True)
    np.testing.assert_array_equal(actions, fx.mode_np(flat, "MultiDiscrete", 5, [3, 2]))


def test_mlp_architecture_inferred_from_shapes_multibinary(tmp_path):
    """A nameless list whose sizes are not the default: the architecture is inferred from the shapes."""
    params = fx.mlp_params(4, 3, [], [32], [32], box_logstd=False, seed=4)
    data = fx.ppo2_data(fx.multi_binary(4), fx.multi_binary(3), fx.policy("MlpPolicy"), old=True)
    path = fx.write_pkl(tmp_path / "m.pkl", data, params)
    parsed = parse_sb2(path)
    assert parsed.policy_kwargs == {"net_arch": [{"pi": [32], "vf": [32]}]}
    assert parsed.report.inferred
    model = _ppo2().load(path)
    obs = np.array([[0, 1, 1, 0], [1, 1, 1, 1]], dtype=np.int8)
    flat, value = fx.feedforward_np(params, obs.astype(np.float64), [], 1, 1)
    _compare(model, flat, value, obs)
    actions, _ = model.predict(obs, deterministic=True)
    np.testing.assert_array_equal(actions, fx.mode_np(flat, "MultiBinary", 3))


def test_zoo_custom_mlp_policy_maps_to_layers_16(tmp_path):
    params = fx.mlp_params(4, 2, [], [16], [16], box_logstd=False, seed=5)
    data = fx.ppo2_data(fx.box(-1.0, 1.0, (4,)), fx.discrete(2), G("utils.utils", "CustomMlpPolicy"))
    path = fx.write_pkl(tmp_path / "m.pkl", data, params)
    model = _ppo2().load(path)
    assert model.policy_kwargs == {"net_arch": [{"pi": [16], "vf": [16]}]}
    obs = np.random.default_rng(2).uniform(-1, 1, (3, 4)).astype(np.float32)
    _compare(model, *fx.feedforward_np(params, obs.astype(np.float64), [], 1, 1), obs)


@pytest.mark.parametrize("layer_norm", [False, True], ids=["MlpLstmPolicy", "MlpLnLstmPolicy"])
@pytest.mark.parametrize("fmt", ["zip", "pkl-list"])
def test_mlp_lstm_with_masks_matches_numpy(tmp_path, layer_norm, fmt):
    n_lstm, n_env = 8, 2
    params = fx.lstm_params(3, 1, [16], n_lstm, layer_norm, box_logstd=True, seed=6)
    name = "MlpLnLstmPolicy" if layer_norm else "MlpLstmPolicy"
    data = fx.ppo2_data(fx.box(-5.0, 5.0, (3,)), fx.box(-2.0, 2.0, (1,)), fx.policy(name),
                        policy_kwargs={"n_lstm": n_lstm, "layers": [16]}, n_envs=n_env)
    if fmt == "zip":
        path = fx.write_zip(tmp_path / "m.zip", data, params)
    else:
        path = fx.write_pkl(tmp_path / "m.pkl", data, params)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        model = _ppo2().load(path)
    rng = np.random.default_rng(3)
    state_tf = np.zeros((n_env, 2 * n_lstm), np.float32)
    state_np = np.zeros((n_env, 2 * n_lstm))
    for mask in ([0.0, 0.0], [1.0, 0.0], [0.0, 1.0], [0.0, 0.0]):
        obs = rng.uniform(-2, 2, (n_env, 3)).astype(np.float32)
        flat_ref, value_ref, state_next = fx.lstm_step_np(params, obs.astype(np.float64), state_np, np.array(mask),
                                                          1, layer_norm)
        _compare(model, flat_ref, value_ref, obs, state_tf, np.array(mask, np.float32))
        actions, state_tf = model.predict(obs, state=state_tf, mask=np.array(mask), deterministic=True)
        np.testing.assert_allclose(state_tf, state_next, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(actions, np.clip(flat_ref[:, :1], -2, 2), rtol=1e-5, atol=1e-5)
        state_np = state_next


def test_cnn_policy_pkl_list_matches_numpy(tmp_path):
    """CnnPolicy on 40x40x2 uint8 images: conv biases saved (1, C, 1, 1), inputs scaled to [0, 1]."""
    rng = np.random.default_rng(7)
    params = OrderedDict()
    fx.cnn_params(params, (40, 40, 2), rng)
    fx.heads(params, 512, 512, 4, False, rng)
    data = fx.ppo2_data(fx.box(0, 255, (40, 40, 2), dtype=np.uint8), fx.discrete(4), fx.policy("CnnPolicy"))
    path = fx.write_pkl(tmp_path / "m.pkl", data, params)
    model = _ppo2().load(path)
    obs = rng.integers(0, 256, (3, 40, 40, 2)).astype(np.uint8)
    x = fx.preprocess(obs, {"kind": "Box", "scale": True, "low": 0.0, "high": 255.0})
    flat, value = fx.feedforward_np(params, x, [], 0, 0, cnn=True)
    _compare(model, flat, value, obs, atol=1e-4)


def test_cnn_lstm_policy_zip_matches_numpy(tmp_path):
    n_lstm = 8
    params = fx.lstm_params(0, 2, [], n_lstm, False, box_logstd=False, seed=8, cnn_shape=(36, 36, 1))
    data = fx.a2c_data(fx.box(0, 255, (36, 36, 1), dtype=np.uint8), fx.discrete(2), fx.policy("CnnLstmPolicy"),
                       policy_kwargs={"n_lstm": n_lstm}, n_envs=2)
    path = fx.write_zip(tmp_path / "m.zip", data, params)
    model = _a2c().load(path)
    obs = np.random.default_rng(4).integers(0, 256, (2, 36, 36, 1)).astype(np.uint8)
    state = np.random.default_rng(5).standard_normal((2, 2 * n_lstm)).astype(np.float32) * 0.5
    mask = np.array([0.0, 1.0], np.float32)
    x = fx.preprocess(obs, {"kind": "Box", "scale": True, "low": 0.0, "high": 255.0})
    flat, value, new_state = fx.lstm_step_np(params, x, state, mask, 0, False, cnn=True)
    _compare(model, flat, value, obs, state, mask, atol=1e-4)
    _, state_out = model.predict(obs, state=state, mask=mask, deterministic=True)
    np.testing.assert_allclose(state_out, new_state, rtol=1e-5, atol=1e-4)


def test_all_formats_give_identical_parameters(tmp_path):
    params = fx.mlp_params(3, 1, [], [64, 64], [64, 64], box_logstd=True, seed=9)
    data = fx.ppo2_data(fx.box(-8.0, 8.0, (3,)), fx.box(-2.0, 2.0, (1,)), fx.policy("MlpPolicy"))
    files = [fx.write_pkl(tmp_path / "list.pkl", data, params), fx.write_pkl(tmp_path / "dict.pkl", data, params, True),
             fx.write_zip(tmp_path / "m.zip", data, params),
             fx.write_pkl(tmp_path / "twice.pkl", data, params, duplicate=True)]
    for path in files:
        got = _ppo2().load(path).get_parameters()
        assert list(got) == list(params)
        for name in params:
            np.testing.assert_array_equal(got[name], params[name])
    assert any("twice" in note for note in parse_sb2(files[-1]).report.notes)
    from_bytes = load_sb2_model(_ppo2(), files[2].read_bytes())  # what BaseRLModel.load calls, with the bytes
    np.testing.assert_array_equal(from_bytes.get_parameters()["model/pi/w:0"], params["model/pi/w:0"])


def test_load_with_gymnasium_successor_env_and_predict(tmp_path):
    """Old gym CartPole bounds were +-float32 max; gymnasium's are +-inf: the env is accepted."""
    params = fx.mlp_params(4, 2, [], [64, 64], [64, 64], box_logstd=False, seed=10)
    high = [4.8, fx.F32_MAX, 0.41887903, fx.F32_MAX]
    data = fx.a2c_data(fx.box([-h for h in high], high, (4,)), fx.discrete(2), fx.policy("MlpPolicy"), n_envs=8)
    path = fx.write_pkl(tmp_path / "m.pkl", data, params)
    model = _a2c().load(path, env="CartPole-v1")
    assert model.n_envs == 1 and model.observation_space == gym.make("CartPole-v1").observation_space
    model.learn(total_timesteps=20)  # the loaded model trains


def test_schedules_rebuilt_or_replaced(tmp_path):
    from sbtf.common.schedules import SampledSchedule
    params = fx.mlp_params(4, 2, [], [64, 64], [64, 64], box_logstd=False, seed=11)
    data = fx.ppo2_data(fx.box(-1.0, 1.0, (4,)), fx.discrete(2), fx.policy("MlpPolicy"))
    data["learning_rate"] = fx.cloudpickled_function("linear_schedule.<locals>.func", "utils.utils", [1e-3])
    data["cliprange"] = fx.cloudpickled_function("<lambda>", "__main__", [], name="<lambda>", consts=(None, 0.3))
    path = fx.write_zip(tmp_path / "m.zip", data, params)
    with pytest.warns(UserWarning, match="cliprange.*replaced by the constant 0.2"):
        model = _ppo2().load(path)
    assert isinstance(model.learning_rate, SampledSchedule)
    assert model.learning_rate(1.0) == pytest.approx(1e-3) and model.learning_rate(0.5) == pytest.approx(5e-4)
    assert model.cliprange == 0.2
    report = parse_sb2(path).report
    assert report.replaced_values and "constants in its code: [0.3]" in report.replaced_values[0][1]
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        model = _ppo2().load(path, custom_objects={"cliprange": 0.1})
    assert model.cliprange == 0.1


# ================================================================================================
# errors
# ================================================================================================
def _simple_ppo2_file(tmp_path, fmt="pkl", **overrides):
    params = fx.mlp_params(4, 2, [], [64, 64], [64, 64], box_logstd=False, seed=12)
    data = fx.ppo2_data(fx.box(-1.0, 1.0, (4,)), fx.discrete(2), fx.policy("MlpPolicy"))
    data.update(overrides)
    if fmt == "zip":
        return fx.write_zip(tmp_path / "m.zip", data, params), params
    return fx.write_pkl(tmp_path / "m.pkl", data, params, as_dict=True), params


def test_wrong_algorithm_error(tmp_path):
    path, _ = _simple_ppo2_file(tmp_path)
    with pytest.raises(WrongAlgorithmError, match=r"holds a PPO2 model.*use PPO2\.load.*instead of A2C\.load"):
        _a2c().load(path)
    dqn_data = {"exploration_fraction": 0.1, "exploration_final_eps": 0.02, "target_network_update_freq": 500,
                "prioritized_replay": False, "observation_space": fx.box(-1.0, 1.0, (4,)),
                "action_space": fx.discrete(2), "policy": G("stable_baselines.deepq.policies", "MlpPolicy")}
    dqn_path = fx.write_pkl(tmp_path / "dqn.pkl", dqn_data, OrderedDict())
    with pytest.raises(WrongAlgorithmError, match=r"holds a DQN model.*use DQN\.load"):
        _ppo2().load(dqn_path)


def test_custom_policy_error_and_custom_objects(tmp_path):
    params = fx.mlp_params(4, 2, [], [32, 32], [32, 32], box_logstd=False, seed=13)
    data = fx.ppo2_data(fx.box(-1.0, 1.0, (4,)), fx.discrete(2), G("my_project.policies", "FancyPolicy"))
    path = fx.write_pkl(tmp_path / "m.pkl", data, params)
    with pytest.raises(CustomPolicyError) as info:
        _ppo2().load(path)
    message = str(info.value)
    assert "my_project.policies.FancyPolicy" in message and "custom_objects={'policy'" in message
    assert "policy_kwargs" in message and "'net_arch': [{'pi': [32, 32], 'vf': [32, 32]}]" in message
    from sbtf.common.policies import FeedForwardPolicy, MlpPolicy
    model = _ppo2().load(path, custom_objects={"policy": MlpPolicy})
    assert model.policy_kwargs == {"net_arch": [{"pi": [32, 32], "vf": [32, 32]}]}
    np.testing.assert_array_equal(model.get_parameters()["model/pi_fc1/w:0"], params["model/pi_fc1/w:0"])

    class FancyPolicy(FeedForwardPolicy):  # a user's sbtf port of the class: parameters mapped by position
        def __init__(self, *args, **kwargs):
            super().__init__(*args, net_arch=[{"pi": [32, 32], "vf": [32, 32]}], feature_extraction="mlp", **kwargs)

    model = _ppo2().load(path, custom_objects={"policy": FancyPolicy})
    np.testing.assert_array_equal(model.get_parameters()["model/q/w:0"], params["model/q/w:0"])


def test_custom_activation_in_policy_kwargs_is_refused_with_hint(tmp_path):
    act = fx.cloudpickled_function("my_act", "__main__", [], name="my_act")
    path, _ = _simple_ppo2_file(tmp_path, policy_kwargs={"act_fun": act})
    with pytest.raises(CustomPolicyError, match=r"policy_kwargs\['act_fun'\].*custom_objects=\{'policy_kwargs'"):
        _ppo2().load(path)


def test_parameter_shape_mismatch_names_parameter_and_shapes(tmp_path):
    params = fx.mlp_params(4, 2, [], [64, 64], [64, 64], box_logstd=False, seed=14)
    params["model/pi/w:0"] = np.zeros((64, 3), np.float32)
    data = fx.ppo2_data(fx.box(-1.0, 1.0, (4,)), fx.discrete(2), fx.policy("MlpPolicy"),
                        policy_kwargs={"net_arch": [{"pi": [64, 64], "vf": [64, 64]}]})
    path = fx.write_zip(tmp_path / "m.zip", data, params)
    with pytest.raises(ParameterShapeError, match=r"model/pi/w:0 has shape \(64, 3\) in the file but .* \(64, 2\)"):
        _ppo2().load(path)
    short = OrderedDict(list(fx.mlp_params(4, 2, [], [64, 64], [64, 64], False).items())[:-1])
    path = fx.write_pkl(tmp_path / "short.pkl", fx.ppo2_data(fx.box(-1.0, 1.0, (4,)), fx.discrete(2),
                                                             fx.policy("MlpPolicy"), old=True), short)
    with pytest.raises(ParameterShapeError, match="holds 13 parameter arrays but .* has 14"):
        _ppo2().load(path)


def test_truncated_and_corrupted_files(tmp_path):
    pkl, _ = _simple_ppo2_file(tmp_path, "pkl")
    payload = pkl.read_bytes()
    for cut in (len(payload) // 2, len(payload) - 3, 40):
        bad = tmp_path / f"cut{cut}.pkl"
        bad.write_bytes(payload[:cut])
        with pytest.raises(ModelFileError, match="truncated or corrupted"):
            _ppo2().load(bad)
    zpath, _ = _simple_ppo2_file(tmp_path, "zip")
    zbytes = zpath.read_bytes()
    bad = tmp_path / "cut.zip"
    bad.write_bytes(zbytes[: len(zbytes) // 2])
    with pytest.raises(ModelFileError, match="truncated or corrupted"):
        _ppo2().load(bad)
    with zipfile.ZipFile(zpath) as archive:
        members = {n: archive.read(n) for n in archive.namelist()}
    for member, garbage in (("parameters", b"PK\x03\x04garbage"), ("data", b"{not json")):
        broken = tmp_path / f"broken_{member}.zip"
        with zipfile.ZipFile(broken, "w") as archive:
            for name, content in members.items():
                archive.writestr(name, garbage if name == member else content)
        with pytest.raises(ModelFileError, match="corrupted"):
            _ppo2().load(broken)
    not_model = tmp_path / "list.pkl"
    not_model.write_bytes(pickle.dumps([1, 2, 3]))
    with pytest.raises(ModelFileError, match="not a stable-baselines model file"):
        _ppo2().load(not_model)
    junk = tmp_path / "junk.pkl"
    junk.write_bytes(b"hello world")
    with pytest.raises(ModelFileError):
        _ppo2().load(junk)


# ================================================================================================
# safety: booby-trapped files never run code
# ================================================================================================
def _traps(sentinel: Path) -> dict:
    cmd = f"touch {sentinel}"
    return {
        "os.system": Call(G("posix", "system"), (cmd,)),
        "builtins.eval": Call(G("builtins", "eval"), (f"__import__('os').system({cmd!r})",)),
        "subprocess.Popen": NewObj(G("subprocess", "Popen"), (["touch", str(sentinel)],)),
        "getattr": Call(Call(G("builtins", "getattr"), (G("os", "path"), "join")), ("a",)),
        "copyreg": Call(G("copyreg", "_reconstructor"), (G("subprocess", "Popen"), G("builtins", "object"), None)),
        "sb2-named": Call(G("stable_baselines.common.policies", "MlpPolicy"), (cmd,)),
    }


def test_booby_trap_fixture_is_real(tmp_path):
    """The trap really runs code under plain pickle (in a subprocess), so the tests below mean something."""
    sentinel = tmp_path / "plain_pickle_ran"
    trap = fx.dumps({"learning_rate": _traps(sentinel)["os.system"]})
    assert ("posix", "system") in pickle_globals(trap)
    code = f"import pickle, sys; pickle.loads(bytes.fromhex({trap.hex()!r}))"
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)
    assert sentinel.exists()


@pytest.mark.parametrize("trap", ["os.system", "builtins.eval", "subprocess.Popen", "getattr", "copyreg",
                                  "sb2-named"])
@pytest.mark.parametrize("where", ["pkl-data", "pkl-params", "zip-data"])
def test_booby_trapped_files_do_not_run_code(tmp_path, trap, where):
    sentinel = tmp_path / "pwned"
    payload = _traps(sentinel)[trap]
    params = fx.mlp_params(4, 2, [], [64, 64], [64, 64], box_logstd=False)
    data = fx.ppo2_data(fx.box(-1.0, 1.0, (4,)), fx.discrete(2), fx.policy("MlpPolicy"))
    if where == "pkl-data":
        data["learning_rate"] = payload
        path = fx.write_pkl(tmp_path / "m.pkl", data, params)
    elif where == "pkl-params":
        values = list(params.values())
        values[3] = payload
        path = tmp_path / "m.pkl"
        path.write_bytes(fx.dumps((data, values)))
    else:
        data["learning_rate"] = payload
        path = fx.write_zip(tmp_path / "m.zip", data, params)
    expected = {"os.system": "posix.system", "builtins.eval": "builtins.eval", "subprocess.Popen": "subprocess.Popen",
                "getattr": "builtins.getattr", "copyreg": "subprocess.Popen",
                "sb2-named": "stable_baselines.common.policies.MlpPolicy"}[trap]
    with pytest.raises(pickle.UnpicklingError, match=expected.replace(".", r"\.")):
        _ppo2().load(path)
    with pytest.raises(pickle.UnpicklingError):
        convert(path, tmp_path / "out.zip")
    assert not sentinel.exists()
    assert not (tmp_path / "out.zip").exists()


def test_trap_by_reference_is_refused_and_custom_objects_bypasses_it(tmp_path):
    sentinel = tmp_path / "pwned"
    path, params = _simple_ppo2_file(tmp_path, "zip", learning_rate=G("posix", "system"))
    with pytest.raises(RefusedGlobalError, match=r"'learning_rate'.*posix\.system"):
        _ppo2().load(path)
    path, params = _simple_ppo2_file(tmp_path, "zip", learning_rate=Call(G("posix", "system"),
                                                                          (f"touch {sentinel}",)))
    model = _ppo2().load(path, custom_objects={"learning_rate": 1e-4})  # the entry is not even unpickled
    assert model.learning_rate == 1e-4 and not sentinel.exists()


def test_pickled_function_code_is_never_executed(tmp_path):
    """A cloudpickled schedule whose code would run os.system is recorded, replaced, never built."""
    sentinel = tmp_path / "pwned"
    evil = fx.cloudpickled_function("evil", "__main__", [f"touch {sentinel}"], name="evil")
    path, _ = _simple_ppo2_file(tmp_path, "pkl", learning_rate=evil)
    with pytest.warns(UserWarning, match="learning_rate"):
        model = _ppo2().load(path)
    assert model.learning_rate == 2.5e-4  # PPO2's default
    assert not sentinel.exists()
    report = parse_sb2(path).report
    assert report.replaced_values[0][0] == "learning_rate" and "__main__.evil" in report.replaced_values[0][1]
    assert not report.lossless


def test_codecs_and_unknown_numpy_helpers_are_restricted():
    from sbtf_converters.sb2_pickle import restricted_loads
    with pytest.raises(pickle.UnpicklingError, match="encoding"):
        restricted_loads(fx.dumps(Call(G("_codecs", "encode"), ("x", "rot13"))))
    with pytest.raises(pickle.UnpicklingError, match=r"numpy\.load"):
        restricted_loads(fx.dumps(Call(G("numpy", "load"), ("/etc/passwd",))))
    assert restricted_loads(fx.dumps(Call(G("_codecs", "encode"), ("\xe9", "latin1")))) == b"\xe9"


# ================================================================================================
# algorithms sbtf does not have yet: files parse into (data, named params) per the reference tables
# ================================================================================================
def _arrays(table) -> "OrderedDict[str, np.ndarray]":
    rng = np.random.default_rng(0)
    return OrderedDict((name, rng.standard_normal(shape).astype(np.float32)) for name, shape in table)


def _dqn_cnn_table(prefix: str, n: int) -> list:
    """Reference 4.6: DQN CnnPolicy (dueling), 84x84x4."""
    av, sv = f"{prefix}/action_value", f"{prefix}/state_value"
    return [(f"{av}/c1/w:0", (8, 8, 4, 32)), (f"{av}/c1/b:0", (1, 32, 1, 1)), (f"{av}/c2/w:0", (4, 4, 32, 64)),
            (f"{av}/c2/b:0", (1, 64, 1, 1)), (f"{av}/c3/w:0", (3, 3, 64, 64)), (f"{av}/c3/b:0", (1, 64, 1, 1)),
            (f"{av}/fc1/w:0", (3136, 512)), (f"{av}/fc1/b:0", (512,)),
            (f"{av}/fully_connected/weights:0", (512, n)), (f"{av}/fully_connected/biases:0", (n,)),
            (f"{sv}/fully_connected/weights:0", (512, 64)), (f"{sv}/fully_connected/biases:0", (64,)),
            (f"{sv}/fully_connected_1/weights:0", (64, 64)), (f"{sv}/fully_connected_1/biases:0", (64,)),
            (f"{sv}/fully_connected_2/weights:0", (64, 1)), (f"{sv}/fully_connected_2/biases:0", (1,))]


def test_dqn_cnn_list_file_names(tmp_path):
    table = [("deepq/eps:0", ())] + _dqn_cnn_table("deepq/model", 6) + _dqn_cnn_table("deepq/target_q_func/model", 6)
    data = {"exploration_fraction": 0.1, "exploration_final_eps": 0.01, "target_network_update_freq": 1000,
            "prioritized_replay": True, "param_noise": False, "learning_rate": 1e-4,
            "observation_space": fx.box(0, 255, (84, 84, 4), dtype=np.uint8), "action_space": fx.discrete(6),
            "policy": G("stable_baselines.deepq.policies", "CnnPolicy"), "policy_kwargs": {}}
    parsed = parse_sb2(fx.write_pkl(tmp_path / "dqn.pkl", data, _arrays(table)))
    assert parsed.algorithm == "DQN" and parsed.policy_name == "CnnPolicy"
    assert [(n, tuple(np.shape(v))) for n, v in parsed.params.items()] == table


def test_dqn_param_noise_layout_inferred(tmp_path):
    """Reference 12: a DQN file with param noise holds 1 + 4 * 12 arrays (model, perturbed, adaptive, target)."""
    def stream(prefix, n_out):
        out = []
        for i, (a, b) in enumerate(((2, 64), (64, 64), (64, n_out))):
            fc = "fully_connected" if i == 0 else f"fully_connected_{i}"
            out += [(f"{prefix}/{fc}/weights:0", (a, b)), (f"{prefix}/{fc}/biases:0", (b,))]
        return out
    table = [("deepq/eps:0", ())]
    for scope in ("model", "perturbed_model/model", "adaptive_model/model", "target_q_func/model"):
        table += stream(f"deepq/{scope}/action_value", 3) + stream(f"deepq/{scope}/state_value", 1)
    data = {"exploration_fraction": 0.1, "exploration_final_eps": 0.1, "target_network_update_freq": 500,
            "prioritized_replay": False, "observation_space": fx.box(-1.0, 1.0, (2,)),
            "action_space": fx.discrete(3), "policy": G("stable_baselines.deepq.policies", "MlpPolicy")}
    parsed = parse_sb2(fx.write_pkl(tmp_path / "dqn.pkl", data, _arrays(table)))  # param_noise key missing
    assert len(parsed.params) == 49
    assert [n for n in parsed.params] == [n for n, _ in table]
    assert parsed.report.inferred


def test_ddpg_pre26_duplicated_list_with_obs_rms(tmp_path):
    """Reference 8/13.2: old DDPG lists are [params + target] * 2 + obs_rms; running stats are float64."""
    table = _ddpg_table(5, 2)
    norm = [("input/obs_rms/runningsum:0", (5,)), ("input/obs_rms/runningsumsq:0", (5,)),
            ("input/obs_rms/count:0", ())]
    arrays = _arrays(table)
    stats = [np.arange(5, dtype=np.float64), np.ones(5), np.array(7.0)]
    values = list(arrays.values()) * 2 + stats
    data = {"nb_train_steps": 50, "nb_rollout_steps": 100, "nb_eval_steps": 100, "actor_lr": 1e-4,
            "critic_lr": 1e-3, "normalize_observations": True, "normalize_returns": False, "param_noise": None,
            "action_noise": Call(G("stable_baselines.ddpg.noise", "NormalActionNoise"), (),
                                 {"_mu": np.zeros(2), "_sigma": 0.1 * np.ones(2)}),
            "observation_range": (-5.0, 5.0), "return_range": (-np.inf, np.inf),
            "observation_space": fx.box(-1.0, 1.0, (5,)), "action_space": fx.box(-1.0, 1.0, (2,)),
            "policy": G("stable_baselines.ddpg.policies", "MlpPolicy"), "memory_limit": None}
    path = tmp_path / "ddpg.pkl"
    path.write_bytes(fx.dumps((data, values)))
    parsed = parse_sb2(path)
    assert [n for n in parsed.params] == [n for n, _ in table + norm]
    assert parsed.params["input/obs_rms/runningsum:0"].dtype == np.float64
    np.testing.assert_array_equal(parsed.params["input/obs_rms/count:0"], 7.0)
    assert any("pre-2.6 DDPG" in note for note in parsed.report.notes)
    from sbtf.common.noise import NormalActionNoise
    assert isinstance(parsed.data["action_noise"], NormalActionNoise)
    assert parsed.data["observation_range"] == (-5.0, 5.0)


def test_sac_auto_entropy_layer_norm_dict_file(tmp_path):
    table = []
    for scope, n_in in (("model/pi", 6),):
        for i in range(2):
            table += [(f"{scope}/fc{i}/kernel:0", (n_in if i == 0 else 32, 32)), (f"{scope}/fc{i}/bias:0", (32,)),
                      (f"{scope}/LayerNorm{'' if i == 0 else '_1'}/beta:0", (32,)),
                      (f"{scope}/LayerNorm{'' if i == 0 else '_1'}/gamma:0", (32,))]
    table += [("model/pi/dense/kernel:0", (32, 2)), ("model/pi/dense/bias:0", (2,)),
              ("model/pi/dense_1/kernel:0", (32, 2)), ("model/pi/dense_1/bias:0", (2,))]
    for head, n_in in (("vf", 6), ("qf1", 8), ("qf2", 8)):
        for i in range(2):
            table += [(f"model/values_fn/{head}/fc{i}/kernel:0", (n_in if i == 0 else 32, 32)),
                      (f"model/values_fn/{head}/fc{i}/bias:0", (32,)),
                      (f"model/values_fn/{head}/LayerNorm{'' if i == 0 else '_1'}/beta:0", (32,)),
                      (f"model/values_fn/{head}/LayerNorm{'' if i == 0 else '_1'}/gamma:0", (32,))]
        table += [(f"model/values_fn/{head}/{head}/kernel:0", (32, 1)), (f"model/values_fn/{head}/{head}/bias:0", (1,))]
    table.append(("model/log_ent_coef:0", ()))
    for i in range(2):
        table += [(f"target/values_fn/vf/fc{i}/kernel:0", (6 if i == 0 else 32, 32)),
                  (f"target/values_fn/vf/fc{i}/bias:0", (32,)),
                  (f"target/values_fn/vf/LayerNorm{'' if i == 0 else '_1'}/beta:0", (32,)),
                  (f"target/values_fn/vf/LayerNorm{'' if i == 0 else '_1'}/gamma:0", (32,))]
    table += [("target/values_fn/vf/vf/kernel:0", (32, 1)), ("target/values_fn/vf/vf/bias:0", (1,))]
    data = {"learning_rate": fx.constfn(3e-4), "buffer_size": 1000, "learning_starts": 100, "train_freq": 1,
            "batch_size": 64, "tau": 0.005, "ent_coef": "auto", "target_entropy": np.float32(-2.0), "gamma": 0.99,
            "observation_space": fx.box(-1.0, 1.0, (6,)), "action_space": fx.box(-1.0, 1.0, (2,)),
            "policy": G("stable_baselines.sac.policies", "LnMlpPolicy"), "policy_kwargs": {"layers": [32, 32]}}
    parsed = parse_sb2(fx.write_zip(tmp_path / "sac.zip", data, _arrays(table)))
    assert parsed.algorithm == "SAC" and parsed.policy_name == "LnMlpPolicy"
    assert parsed.policy_kwargs == {"layers": [32, 32]}
    assert [n for n in parsed.params] == [n for n, _ in table]
    assert parsed.data["target_entropy"] == -2.0 and parsed.data["learning_rate"] == pytest.approx(3e-4)
    assert parsed.report.inferred == []


@pytest.mark.parametrize("algo", ["TRPO", "GAIL", "PPO1", "ACER", "ACKTR"])
def test_other_actor_critic_algorithms_parse(tmp_path, algo):
    table = _ac_table(4, 2, False)
    if algo in ("TRPO", "GAIL"):
        table = table + _ac_table(4, 2, False, prefix="oldpi/")
    if algo == "GAIL":  # adversary on concat[obs, one-hot action] (4 + 2), hidden_size_adversary 100
        table += [("adversary/fully_connected/weights:0", (6, 100)), ("adversary/fully_connected/biases:0", (100,)),
                  ("adversary/fully_connected_1/weights:0", (100, 100)),
                  ("adversary/fully_connected_1/biases:0", (100,)),
                  ("adversary/fully_connected_2/weights:0", (100, 1)), ("adversary/fully_connected_2/biases:0", (1,))]
    keys = {"TRPO": {"max_kl": 0.01, "cg_iters": 10, "timesteps_per_batch": 1024, "using_gail": False},
            "GAIL": {"max_kl": 0.01, "cg_iters": 10, "timesteps_per_batch": 1024, "using_gail": True,
                     "hidden_size_adversary": 100, "expert_dataset": NewObj(
                         G("stable_baselines.gail.dataset.dataset", "ExpertDataset"), (), {"observations": None})},
            "PPO1": {"timesteps_per_actorbatch": 256, "clip_param": 0.2, "optim_epochs": 4},
            "ACER": {"q_coef": 0.5, "rprop_alpha": 0.99, "replay_ratio": 4},
            "ACKTR": {"kfac_clip": 0.001, "vf_fisher_coef": 1.0, "lam": 0.95}}[algo]
    data = {**keys, "gamma": 0.99, "observation_space": fx.box(-1.0, 1.0, (4,)), "action_space": fx.discrete(2),
            "policy": fx.policy("MlpPolicy"), "verbose": 0}
    parsed = parse_sb2(fx.write_pkl(tmp_path / "m.pkl", data, _arrays(table)))
    assert parsed.algorithm == algo
    assert [(n, tuple(np.shape(v))) for n, v in parsed.params.items()] == table
    if algo == "ACKTR":
        assert parsed.data["gae_lambda"] == 0.95 and "lam" not in parsed.data
    if algo == "GAIL":
        assert parsed.data["expert_dataset"] is None and parsed.report.replaced_values


def test_not_yet_implemented_algorithm_says_so(tmp_path):
    missing = [name for name, spec in ALGORITHMS.items() if not spec.is_available()]
    if not missing:
        pytest.skip("every algorithm is implemented")
    with pytest.raises(ImportError, match=f"{missing[0]} is not available in this version of sbtf"):
        ALGORITHMS[missing[0]].sbtf_class()


# ================================================================================================
# convert, VecNormalize, CLI
# ================================================================================================
def _sb2_vecnormalize_pickle(path: Path) -> Path:
    """What SB2 >= 2.9 VecNormalize.save writes: the wrapper's __dict__ minus venv / class_attributes / ret."""
    def rms(mean, var, count):
        return NewObj(G("stable_baselines.common.running_mean_std", "RunningMeanStd"), (),
                      {"mean": np.asarray(mean, np.float64), "var": np.asarray(var, np.float64), "count": count})
    state = {"num_envs": 1, "observation_space": fx.box(-1.0, 1.0, (3,)), "action_space": fx.discrete(2),
             "obs_rms": rms([0.5, -0.5, 1.0], [2.0, 3.0, 4.0], 1234.0), "ret_rms": rms(0.0, 9.0, 99.0),
             "clip_obs": 5.0, "clip_reward": 7.0, "gamma": 0.95, "epsilon": 1e-8, "training": True,
             "norm_obs": True, "norm_reward": False, "old_obs": np.zeros((1, 3)), "old_rews": np.zeros(1)}
    path.write_bytes(fx.dumps(NewObj(G("stable_baselines.common.vec_env.vec_normalize", "VecNormalize"), (),
                                     state)))
    return path


def test_vecnormalize_load_accepts_sb2_files(tmp_path):
    from sbtf.common.vec_env import DummyVecEnv, VecNormalize
    path = _sb2_vecnormalize_pickle(tmp_path / "vecnormalize.pkl")
    stats = read_vec_normalize(path)
    assert stats["clip_obs"] == 5.0 and stats["norm_reward"] is False
    venv = DummyVecEnv([lambda: gym.wrappers.TimeLimit(_BoxEnv(), 10)])
    loaded = VecNormalize.load(str(path), venv)
    np.testing.assert_allclose(loaded.obs_rms.var, [2.0, 3.0, 4.0])
    assert loaded.clip_obs == 5.0 and loaded.gamma == 0.95 and loaded.norm_reward is False
    obs = loaded.reset()
    assert obs.shape == (1, 3)


class _BoxEnv(gym.Env):
    observation_space = gym.spaces.Box(-1.0, 1.0, (3,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        return np.full(3, 0.5, np.float32), {}

    def step(self, action):
        return np.full(3, 0.5, np.float32), 1.0, False, False, {}


def test_convert_writes_sbtf_model_and_vecnormalize(tmp_path):
    from sbtf.common.vec_env import DummyVecEnv, VecNormalize
    params = fx.mlp_params(3, 2, [], [64, 64], [64, 64], box_logstd=False, seed=15)
    data = fx.ppo2_data(fx.box(-1.0, 1.0, (3,)), fx.discrete(2), fx.policy("MlpPolicy"), old=True)
    data["learning_rate"] = fx.cloudpickled_function("<lambda>", "__main__", [], name="<lambda>")
    old = fx.write_pkl(tmp_path / "old.pkl", data, params)
    stats_dir = tmp_path / "stats"
    stats_dir.mkdir()
    rms = {"mean": np.array([0.1, 0.2, 0.3]), "var": np.array([1.0, 2.0, 3.0]), "count": 10.0}
    for name in ("obs_rms", "ret_rms"):
        state = rms if name == "obs_rms" else {"mean": np.float64(0.0), "var": np.float64(4.0), "count": 10.0}
        (stats_dir / f"{name}.pkl").write_bytes(fx.dumps(NewObj(
            G("stable_baselines.common.running_mean_std", "RunningMeanStd"), (), state)))
    with pytest.warns(UserWarning, match="learning_rate"):
        report = convert(old, tmp_path / "new", vecnormalize_folder=stats_dir)
    assert isinstance(report, ConversionReport)
    assert report.target.endswith("new.zip") and report.algorithm == "PPO2"
    assert len(report.parameters) == 14 and report.replaced_values[0][0] == "learning_rate"
    assert not report.lossless and "NOT RESTORED: learning_rate" in str(report)
    json.loads(report.to_json())
    new_model = _ppo2().load(tmp_path / "new.zip")  # the sbtf format now
    with zipfile.ZipFile(tmp_path / "new.zip") as archive:
        assert "sbtf_format" in archive.namelist()
    obs = np.random.default_rng(6).uniform(-1, 1, (5, 3)).astype(np.float32)
    flat, _ = fx.feedforward_np(params, obs.astype(np.float64), [], 2, 2)
    np.testing.assert_allclose(new_model.policy_tf.flat_params(obs), flat, rtol=1e-5, atol=1e-5)
    venv = VecNormalize.load(report.vecnormalize[0][1], DummyVecEnv([lambda: _BoxEnv()]))
    np.testing.assert_allclose(venv.obs_rms.var, [1.0, 2.0, 3.0])
    np.testing.assert_allclose(venv.ret_rms.var, 4.0)


def test_convert_zoo_mountaincar_with_stats(tmp_path):
    report = convert(_zoo("ppo2", "MountainCar-v0.pkl"), tmp_path / "mc.zip",
                     vecnormalize_folder=_zoo("ppo2", "MountainCar-v0"))
    assert report.lossless and report.vecnormalize
    old = _ppo2().load(_zoo("ppo2", "MountainCar-v0.pkl"))
    new = _ppo2().load(tmp_path / "mc.zip")
    obs = np.random.default_rng(0).uniform(-1, 1, (8, 2)).astype(np.float32)
    np.testing.assert_array_equal(old.predict(obs, deterministic=True)[0], new.predict(obs, deterministic=True)[0])


def test_cli_convert(tmp_path, capsys):
    path, _ = _simple_ppo2_file(tmp_path, "zip")
    assert legacy.main(["convert", str(path), str(tmp_path / "cli_out.zip"), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["algorithm"] == "PPO2" and out["target"].endswith("cli_out.zip")
    junk = tmp_path / "junk.pkl"
    junk.write_bytes(b"\x80\x04junk")
    assert legacy.main(["convert", str(junk), str(tmp_path / "x.zip")]) == 2
    assert "sbtf convert: error:" in capsys.readouterr().err
    import argparse
    parser = argparse.ArgumentParser(prog="sbtf")
    subparsers = parser.add_subparsers(dest="command")
    legacy.register_cli(subparsers)
    args = parser.parse_args(["convert", "a.pkl", "b.zip", "--vecnormalize-folder", "d"])
    assert args.func is legacy.run_cli and args.vecnormalize_folder == "d"


def test_sbtf_command_line_convert(tmp_path, capsys):
    """``sbtf convert`` through sbtf.cli: the CLI finds the converters' subcommands (entry point or import)."""
    from sbtf import cli
    assert "convert" in cli.registered_subcommands()
    path, params = _simple_ppo2_file(tmp_path, "pkl")
    assert cli.main(["convert", str(path), str(tmp_path / "via_cli.zip")]) == 0
    assert "algorithm: PPO2" in capsys.readouterr().out
    loaded = _ppo2().load(tmp_path / "via_cli.zip")
    np.testing.assert_array_equal(loaded.get_parameters()["model/vf/w:0"], params["model/vf/w:0"])


def test_allow_pickle_imports_classes_but_never_runs_pickled_functions(tmp_path):
    sentinel = tmp_path / "pwned"
    evil = fx.cloudpickled_function("evil", "__main__", [f"touch {sentinel}"], name="evil")
    path, _ = _simple_ppo2_file(tmp_path, "zip", policy=G("sbtf.common.policies", "MlpPolicy"), learning_rate=evil)
    with pytest.raises(CustomPolicyError, match="sbtf.common.policies.MlpPolicy"):
        _ppo2().load(path)  # not on the allow-list: a stable-baselines file has no business naming it
    with pytest.warns(UserWarning, match="learning_rate"):
        model = _ppo2().load(path, allow_pickle=True)
    from sbtf.common.policies import MlpPolicy
    assert model.policy is MlpPolicy and model.learning_rate == 2.5e-4
    assert not sentinel.exists()


# ================================================================================================
# the stable_baselines compatibility package
# ================================================================================================
SB2_SCRIPT = textwrap.dedent("""
    import numpy as np
    import stable_baselines
    from stable_baselines import A2C, PPO2
    from stable_baselines.common.policies import MlpPolicy
    from stable_baselines.common.vec_env import DummyVecEnv, VecNormalize
    from stable_baselines.common import make_vec_env, set_global_seeds
    from stable_baselines.common.evaluation import evaluate_policy
    from stable_baselines.common.callbacks import CheckpointCallback
    from stable_baselines.common.schedules import LinearSchedule
    from stable_baselines.ddpg.noise import NormalActionNoise, OrnsteinUhlenbeckActionNoise
    from stable_baselines.bench import Monitor
    from stable_baselines import logger, results_plotter
    import stable_baselines.common.policies as sb_policies
    import sbtf.common.policies as sbtf_policies
    assert sb_policies is sbtf_policies
    assert stable_baselines.__version__.startswith("2.10")

    env = make_vec_env("CartPole-v1", n_envs=1)
    model = A2C.load("a2c_cartpole", env=env)
    obs = env.reset()
    total, episodes = 0.0, []
    while len(episodes) < 2:
        action, _states = model.predict(obs)
        obs, rewards, dones, info = env.step(action)
        total += float(rewards[0])
        if dones[0]:
            episodes.append(total)
            total = 0.0
    print("EPISODES", episodes)
    try:
        import stable_baselines.gail.dataset
    except ImportError as exc:
        print("NOGAIL", exc)
    for name in ("stable_baselines.deepq.policies", "stable_baselines.sac", "stable_baselines.td3.policies",
                 "stable_baselines.ddpg.policies", "stable_baselines.her", "stable_baselines.ppo1",
                 "stable_baselines.acer", "stable_baselines.acktr", "stable_baselines.trpo_mpi"):
        try:
            __import__(name)
            print("HAVE", name)
        except ImportError as exc:
            assert "not available in this version of sbtf" in str(exc), exc
            print("LATER", name)
    print("OK")
""")


def test_stable_baselines_shim_runs_unmodified_sb2_script(tmp_path):
    params = fx.mlp_params(4, 2, [], [64, 64], [64, 64], box_logstd=False, seed=16)
    high = [4.8, fx.F32_MAX, 0.41887903, fx.F32_MAX]
    data = fx.a2c_data(fx.box([-h for h in high], high, (4,)), fx.discrete(2), fx.policy("MlpPolicy"))
    real = ZOO / "a2c" / "CartPole-v1.pkl"
    if real.exists():
        (tmp_path / "a2c_cartpole.pkl").write_bytes(real.read_bytes())
    else:
        fx.write_pkl(tmp_path / "a2c_cartpole.pkl", data, params)
    (tmp_path / "script.py").write_text(SB2_SCRIPT)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO / "legacy"), os.environ.get("PYTHONPATH", "")]),
               TF_CPP_MIN_LOG_LEVEL="3")
    result = subprocess.run([sys.executable, "script.py"], cwd=tmp_path, env=env, capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "OK" in result.stdout
    episodes = eval(result.stdout.split("EPISODES")[1].splitlines()[0])
    if real.exists():
        assert min(episodes) >= 400
    assert "HAVE stable_baselines.trpo_mpi" in result.stdout or "LATER stable_baselines.trpo_mpi" in result.stdout


def test_shim_maps_every_public_module_path():
    sys.path.insert(0, str(REPO / "legacy"))
    shim = importlib.import_module("stable_baselines")
    try:
        paths = shim._compat.public_module_paths()
        for name in ("stable_baselines.common", "stable_baselines.common.policies", "stable_baselines.common.vec_env",
                     "stable_baselines.common.callbacks", "stable_baselines.common.noise",
                     "stable_baselines.common.schedules", "stable_baselines.common.evaluation",
                     "stable_baselines.common.cmd_util", "stable_baselines.bench", "stable_baselines.results_plotter",
                     "stable_baselines.deepq.policies", "stable_baselines.sac.policies",
                     "stable_baselines.td3.policies", "stable_baselines.ddpg.policies", "stable_baselines.gail",
                     "stable_baselines.her", "stable_baselines.ppo1", "stable_baselines.ppo2", "stable_baselines.a2c",
                     "stable_baselines.acer", "stable_baselines.acktr", "stable_baselines.trpo_mpi",
                     "stable_baselines.logger"):
            assert name in paths
        resolved = 0
        for name in paths[1:]:
            try:
                module = importlib.import_module(name)
            except ImportError as exc:
                message = str(exc)
                assert "not available in this version of sbtf" in message or "no TensorFlow 2 equivalent" in message, \
                    (name, message)
                continue
            assert module is sys.modules[name]
            resolved += 1
        assert resolved >= 40
        import sbtf.common.policies
        import sbtf.common.vec_env
        assert importlib.import_module("stable_baselines.common.policies") is sbtf.common.policies
        vec_env = importlib.import_module("stable_baselines.common.vec_env")
        assert vec_env.VecNormalize is sbtf.common.vec_env.VecNormalize
        common = importlib.import_module("stable_baselines.common")
        from sbtf.common.math_util import explained_variance
        assert common.explained_variance is explained_variance and callable(common.set_global_seeds)
        from sbtf.common.noise import NormalActionNoise
        assert importlib.import_module("stable_baselines.ddpg").NormalActionNoise is NormalActionNoise
        assert importlib.import_module("stable_baselines.ddpg.noise").NormalActionNoise is NormalActionNoise
        from stable_baselines.a2c.utils import Scheduler, linear_schedule
        from sbtf.common.schedules import Scheduler as SbtfScheduler
        assert Scheduler is SbtfScheduler and linear_schedule(0.25) == 0.75
        try:
            tf_util = importlib.import_module("stable_baselines.common.tf_util")
            assert tf_util is importlib.import_module("sbtf.common.tf_util")
        except ModuleNotFoundError as exc:
            assert "no TensorFlow 2 equivalent" in str(exc)
        with pytest.raises(ModuleNotFoundError, match="not a stable-baselines 2.10 module"):
            importlib.import_module("stable_baselines.no_such_module")
        from stable_baselines import PPO2
        from sbtf import PPO2 as SbtfPPO2
        assert PPO2 is SbtfPPO2
    finally:
        shim._compat.uninstall()
        sys.path.remove(str(REPO / "legacy"))
        for name in [n for n in sys.modules if n == "stable_baselines" or n.startswith("stable_baselines.")]:
            del sys.modules[name]
