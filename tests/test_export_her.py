"""Export of HER models (sbtf_converters.export): the goal env's dict observation in, predict(deterministic=True) out.

A HER export takes ``observation``, ``achieved_goal`` and ``desired_goal`` as three inputs, flattens them in the
graph as ``HERGoalEnvWrapper`` does (``concat`` in ``KEY_ORDER``; Discrete goal spaces stacked) and runs the wrapped
model's export graph. Every format is checked against ``HER.predict`` on a batch of dict observations given in the
env's own dtypes (int8 bits, int64 Discrete states, float64 Box goals), with randomised weights (non-zero biases).
HER over DQN (MultiBinary and Discrete observations), SAC, TD3 (Box goals in a Dict whose key order is not
``KEY_ORDER``) and DDPG (with its observation normalisation).
"""
from __future__ import annotations

import json
from collections import OrderedDict

import gymnasium as gym
import numpy as np
import pytest
import tensorflow as tf

from sbtf import DDPG, DQN, HER, SAC, TD3
from sbtf.common.bit_flipping_env import BitFlippingEnv
from sbtf.her import KEY_ORDER
from sbtf_converters import export as sx
from test_export import (ATOL, BATCH, SB2_ZOO, _cli, _compare, _needs_onnx, _needs_tfjs_node, _run_onnx,
                         _run_savedmodel, _run_tfjs)


class BoxGoalEnv(gym.Env):
    """Box goals of another size than the observation, float64 spaces, Dict keys not in KEY_ORDER."""

    observation_space = gym.spaces.Dict({
        "desired_goal": gym.spaces.Box(-1.0, 1.0, (2,), np.float64),
        "observation": gym.spaces.Box(-5.0, 5.0, (3,), np.float64),
        "achieved_goal": gym.spaces.Box(-2.0, 2.0, (2,), np.float64)})
    action_space = gym.spaces.Box(np.array([-1.0, 0.0], np.float32), np.array([1.0, 3.0], np.float32))

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return self.observation_space.sample(), {}

    def step(self, action):
        return self.observation_space.sample(), -1.0, False, False, {}

    def compute_reward(self, achieved_goal, desired_goal, info):
        return -np.linalg.norm(np.asarray(achieved_goal) - desired_goal, axis=-1)


SMALL = dict(policy_kwargs=dict(layers=[16, 16]))
CASES = OrderedDict([
    ("her_dqn", lambda: HER("MlpPolicy", BitFlippingEnv(5), DQN, seed=0, learning_starts=0, **SMALL)),
    ("her_dqn_discrete_obs", lambda: HER("MlpPolicy", BitFlippingEnv(4, discrete_obs_space=True), DQN, seed=1,
                                         learning_starts=0, **SMALL)),
    ("her_sac", lambda: HER("MlpPolicy", BitFlippingEnv(5, continuous=True), SAC, seed=2, **SMALL)),
    ("her_td3_box", lambda: HER("MlpPolicy", BoxGoalEnv(), TD3, seed=3, **SMALL)),
    ("her_ddpg", lambda: HER("MlpPolicy", BitFlippingEnv(4, continuous=True), DDPG, seed=4,
                             normalize_observations=True, observation_range=(-2.0, 2.0), **SMALL)),
])
_models: dict = {}


def _randomize(her, seed: int) -> None:
    """N(0, 1/fan_in) kernels, non-zero biases, large action heads (clipping / tanh saturation exercised)."""
    rng = np.random.default_rng(seed)
    params = OrderedDict()
    for name, value in her.get_parameters().items():
        if "_rms/" in name:  # DDPG's running statistics: through their own API below
            params[name] = value
            continue
        if value.ndim >= 2:
            new = rng.standard_normal(value.shape) * (1.5 / np.sqrt(int(np.prod(value.shape[:-1]))))
        else:
            new = rng.normal(0.0, 0.3, value.shape)
        params[name] = new.astype(value.dtype)
    her.load_parameters(params)
    if getattr(her.model, "obs_rms", None) is not None:
        dim = int(her.model.observation_space.shape[0])
        her.model.obs_rms.update(rng.normal(0.4, 0.6, (200, dim)))


def _model(case: str):
    if case not in _models:
        model = CASES[case]()
        _randomize(model, seed=len(case))
        _models[case] = model
    return _models[case]


def _dict_batch(her, seed: int, n: int = BATCH) -> "OrderedDict[str, np.ndarray]":
    """A batch of dict observations in the goal env's own dtypes (what the env returns, stacked)."""
    rng = np.random.default_rng(seed)
    batch = OrderedDict()
    for key, space in her.observation_space.spaces.items():  # the Dict's own key order on purpose
        if isinstance(space, gym.spaces.MultiBinary):
            batch[key] = rng.integers(0, 2, (n,) + tuple(space.shape)).astype(np.int8)
        elif isinstance(space, gym.spaces.Discrete):
            batch[key] = rng.integers(0, int(space.n), n).astype(np.int64)
        else:
            low = np.where(np.isfinite(space.low), space.low, -3.0)
            high = np.where(np.isfinite(space.high), space.high, 3.0)
            batch[key] = rng.uniform(low, high, (n,) + tuple(space.shape)).astype(space.dtype)
    return batch


def _feed(bundle_inputs, batch) -> "OrderedDict[str, np.ndarray]":
    """The exported inputs (KEY_ORDER) in the dtypes of the metadata."""
    return OrderedDict((key, np.asarray(batch[key]).astype(bundle_inputs[key]["dtype"])) for key in bundle_inputs)


def _input_dtypes(her) -> "OrderedDict[str, dict]":
    return sx.build_export_module(her).metadata["inputs"]


def _expected(her, batch) -> dict:
    action, _ = her.predict(batch, deterministic=True)
    expected = {"action": np.asarray(action)}
    flat = her._check_obs(batch)  # pylint: disable=protected-access
    inner = her.model
    if isinstance(inner, DQN):
        expected["q_values"] = inner.q_net.q_values_np(flat)
    elif isinstance(inner, SAC):
        expected["mean"], expected["std"] = inner.policy_tf.proba_step(flat)
    return expected


# ------------------------------------------------------------------------------------------------ formats
@pytest.mark.parametrize("case", list(CASES))
def test_her_savedmodel_matches_predict(case, tmp_path):
    her = _model(case)
    batch = _dict_batch(her, seed=1)
    path = her.export(tmp_path / "saved", format="savedmodel")
    meta = json.loads((tmp_path / "saved" / sx.METADATA_FILE).read_text())
    assert list(meta["inputs"]) == KEY_ORDER and meta["algo"] == "HER"
    assert meta["her"]["wrapped_algo"] == type(her.model).__name__
    assert meta["observation_space"]["type"] == "Dict"
    got = _run_savedmodel(path, _feed(meta["inputs"], batch))
    expected = _expected(her, batch)
    _compare(case, got, expected, "savedmodel")
    assert got["action"].dtype == expected["action"].dtype
    assert list(meta["outputs"])[0] == "action" and set(expected) <= set(meta["outputs"])


@pytest.mark.parametrize("case", list(CASES))
def test_her_onnx_matches_predict(case, tmp_path):
    ort = _needs_onnx()
    her = _model(case)
    batch = _dict_batch(her, seed=2)
    path = her.export(tmp_path / "her.onnx", format="onnx")
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    assert [i.name for i in session.get_inputs()] == KEY_ORDER
    got = _run_onnx(ort, path, _feed(_input_dtypes(her), batch))
    expected = _expected(her, batch)
    _compare(case, got, expected, "onnx")
    assert got["action"].dtype == expected["action"].dtype


@pytest.mark.parametrize("case", list(CASES))
def test_her_tfjs_matches_predict(case, tmp_path):
    node = _needs_tfjs_node()
    her = _model(case)
    batch = _dict_batch(her, seed=3)
    model_dir = sx.export_model(her, tmp_path / case, format="tfjs")
    meta = json.loads((tmp_path / case / sx.METADATA_FILE).read_text())
    assert list(meta["tfjs_nodes"]["inputs"]) == KEY_ORDER
    got = _run_tfjs(node, [(model_dir, _feed(meta["inputs"], batch))])[0]
    expected = _expected(her, batch)
    if np.issubdtype(expected["action"].dtype, np.integer):
        expected["action"] = expected["action"].astype(np.int64)  # int64 is int32 in TF.js
    _compare(case, got, expected, "tfjs")


def test_her_discrete_observations_float_signature(tmp_path):
    """Discrete goal spaces: int32 inputs in serving_default, float32 ones (cast in the graph) in serving_float."""
    her = _model("her_dqn_discrete_obs")
    batch = _dict_batch(her, seed=4)
    path = her.export(tmp_path / "sm")
    loaded = tf.saved_model.load(str(path))
    assert set(loaded.signatures) == {"serving_default", "serving_float"}
    out = loaded.signatures["serving_float"](**{k: tf.constant(v.astype(np.float32)) for k, v in batch.items()})
    np.testing.assert_array_equal(out["action"].numpy(), her.predict(batch, deterministic=True)[0])


def test_her_single_observation_and_dict_order(tmp_path):
    """One observation as returned by the env (batch of 1); the Dict's key order does not matter, KEY_ORDER does."""
    her = _model("her_td3_box")
    assert list(her.observation_space.spaces) != KEY_ORDER
    obs, _ = BoxGoalEnv().reset(seed=5)
    fn = tf.saved_model.load(str(her.export(tmp_path / "sm"))).signatures["serving_default"]
    out = fn(**{k: tf.constant(np.asarray(v, np.float32)[None]) for k, v in obs.items()})
    np.testing.assert_allclose(out["action"].numpy()[0], her.predict(obs, deterministic=True)[0], atol=ATOL,
                               rtol=1e-5)


def test_her_export_errors(tmp_path):
    from sbtf.common.vec_env import DummyVecEnv, VecNormalize
    her = _model("her_sac")
    vec = VecNormalize(DummyVecEnv([lambda: gym.make("Pendulum-v1")]))
    with pytest.raises(sx.ExportError, match="HER trains without VecNormalize.*export without vecnormalize"):
        her.export(tmp_path / "v", vecnormalize=vec)
    with pytest.raises(sx.ExportError, match="simulates CartPole-v1"):
        sx.write_demo(her, tmp_path / "demo")
    data = her._get_save_data()  # pylint: disable=protected-access
    data["her_obs_space"] = None  # an old file without the goal observation space
    no_space = HER._from_data(data, her.get_parameters())  # pylint: disable=protected-access
    with pytest.raises(sx.ExportError, match=r"her_obs_space.*model\.model\.export"):
        no_space.export(tmp_path / "n")
    assert not (tmp_path / "n").exists()


# ------------------------------------------------------------------------------------------------ command line
def test_her_cli_exports_a_saved_zip(tmp_path, capsys):
    her = _model("her_sac")
    her.save(str(tmp_path / "her_sac.zip"))
    code, out, err = _cli([tmp_path / "her_sac.zip", "--format", "savedmodel", "-o", tmp_path / "sm"], capsys)
    assert code == 0, err
    assert "Exported HER (MlpPolicy of SAC)" in out
    batch = _dict_batch(her, seed=6)
    feed = _feed(_input_dtypes(her), batch)
    _compare("cli", _run_savedmodel(tmp_path / "sm", feed), _expected(her, batch), "savedmodel")
    ort = _needs_onnx()
    code, _, err = _cli([tmp_path / "her_sac.zip", "--format", "onnx", "--algo", "her", "-o", tmp_path / "h.onnx"],
                        capsys)
    assert code == 0, err
    _compare("cli", _run_onnx(ort, tmp_path / "h.onnx", feed), _expected(her, batch), "onnx")


@pytest.mark.skipif(not (SB2_ZOO / "her" / "FetchReach-v1.pkl").is_file(),
                    reason="shared fixture ../shared/fixtures/sb2_zoo is absent (fresh clone without ../shared)")
def test_her_cli_exports_stable_baselines2_files(tmp_path, capsys):
    """The zoo's HER+SAC FetchReach agent (a stable-baselines 2 pickle) through the legacy loader."""
    ort = _needs_onnx()
    path = SB2_ZOO / "her" / "FetchReach-v1.pkl"
    code, out, err = _cli([path, "--format", "onnx", "-o", tmp_path / "fetch.onnx"], capsys)
    assert code == 0, err
    assert "Exported HER" in out and "SAC" in out
    her = HER.load(str(path))
    batch = _dict_batch(her, seed=7, n=32)
    got = _run_onnx(ort, tmp_path / "fetch.onnx", _feed(_input_dtypes(her), batch))
    np.testing.assert_allclose(got["action"], her.predict(batch, deterministic=True)[0], atol=ATOL, rtol=1e-5)
