"""Export (sbtf_converters.export): SavedModel, ONNX and TF.js outputs equal predict(deterministic=True).

Every exported model is checked against the Python model on a batch of observations: ``action`` exactly (discrete)
or to 1e-5 (continuous), and the extra outputs (``logits``/``probabilities``, ``mean``/``std``, ``value``,
``q_values``, ``state``) against the model's own methods. Weights are randomised (biases included) before export,
so that graph rewrites that only show with non-zero biases (TF.js fuses MatMul+BiasAdd+Tanh) are exercised.

SavedModel tests need only TensorFlow; ONNX tests skip without tf2onnx/onnxruntime and TF.js tests without
tensorflowjs (all three come with ``pip install 'sbtf[export]'``). TF.js models are run by real @tensorflow/tfjs in
Node (``npm install`` in converters/web); those tests skip, saying so, when node or the npm packages are missing.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections import OrderedDict
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import tensorflow as tf

from sbtf import A2C, DQN, PPO2
from sbtf.common.identity_env import IdentityEnvMultiBinary, IdentityEnvMultiDiscrete
from sbtf_converters import export as sx

# tensorflowjs -> tensorflow_decision_forests imports IPython for a welcome message when stdout is captured
os.environ.setdefault("TFDF_DISABLE_WELCOME_MESSAGE", "1")

ROOT = Path(__file__).resolve().parents[1]
WEB = ROOT / "converters" / "web"
SB2_ZOO = ROOT.parent / "shared" / "fixtures" / "sb2_zoo"
ATOL = 1e-5
BATCH = 12


# ------------------------------------------------------------------------------------------------ helpers
def _needs_onnx():
    pytest.importorskip("tf2onnx", reason="the ONNX export needs tf2onnx: pip install 'sbtf[export]'")
    pytest.importorskip("onnx", reason="the ONNX export needs onnx: pip install 'sbtf[export]'")
    return pytest.importorskip("onnxruntime", reason="ONNX checks need onnxruntime: pip install 'sbtf[export]'")


def _needs_tfjs_node():
    pytest.importorskip("tensorflowjs", reason="the TF.js export needs tensorflowjs: pip install 'sbtf[export]'")
    node = shutil.which("node")
    if node is None:
        pytest.skip("TF.js checks run the model with @tensorflow/tfjs in Node.js, and `node` is not installed")
    if not (WEB / "node_modules" / "@tensorflow" / "tfjs" / "package.json").is_file():
        pytest.skip(f"@tensorflow/tfjs is not installed: run `npm install` in {WEB}")
    return node


class TinyImageEnv(gym.Env):
    """uint8 40x40x3 images, 3 actions: enough for the nature CNN."""

    observation_space = gym.spaces.Box(0, 255, (40, 40, 3), np.uint8)
    action_space = gym.spaces.Discrete(3)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self._t = 0
        return self.observation_space.sample(), {}

    def step(self, action):
        self._t += 1
        return self.observation_space.sample(), 0.0, self._t >= 10, False, {}


def _algorithm(name):
    import sbtf
    try:
        return getattr(sbtf, name)
    except (ImportError, AttributeError):
        pytest.skip(f"sbtf.{name} is not available in this version of sbtf yet")


CASES = OrderedDict([
    ("ppo2_discrete", lambda: PPO2("MlpPolicy", "CartPole-v1", n_steps=16, seed=0)),
    ("ppo2_box", lambda: PPO2("MlpPolicy", "Pendulum-v1", n_steps=16, seed=0)),
    ("a2c_discrete", lambda: A2C("MlpPolicy", "CartPole-v1", seed=1,
                                 policy_kwargs=dict(net_arch=[32, dict(pi=[16], vf=[16])], act_fun=tf.nn.relu))),
    ("a2c_box", lambda: A2C("MlpPolicy", "MountainCarContinuous-v0", seed=1)),
    ("ppo2_multidiscrete", lambda: PPO2("MlpPolicy", IdentityEnvMultiDiscrete(3), n_steps=16, seed=2)),
    ("a2c_multibinary", lambda: A2C("MlpPolicy", IdentityEnvMultiBinary(3), seed=2)),
    ("ppo2_cnn", lambda: PPO2("CnnPolicy", TinyImageEnv(), n_steps=8, nminibatches=1, seed=3)),
    ("ppo2_lstm", lambda: PPO2("MlpLnLstmPolicy", "CartPole-v1", n_steps=8, nminibatches=1, seed=3,
                               policy_kwargs=dict(n_lstm=16))),
    ("acer", lambda: _algorithm("ACER")("MlpPolicy", "CartPole-v1", seed=7)),
    ("acktr_box", lambda: _algorithm("ACKTR")("MlpPolicy", "Pendulum-v1", seed=7)),
    ("ppo1", lambda: _algorithm("PPO1")("MlpPolicy", "CartPole-v1", seed=8)),
    ("trpo_box", lambda: _algorithm("TRPO")("MlpPolicy", "Pendulum-v1", seed=8)),
    ("gail", lambda: _algorithm("GAIL")("MlpPolicy", "CartPole-v1", seed=9)),  # its policy: TRPO's actor-critic
    ("dqn", lambda: DQN("MlpPolicy", "CartPole-v1", seed=4, learning_starts=0)),
    ("sac", lambda: _algorithm("SAC")("MlpPolicy", "Pendulum-v1", seed=5)),
    ("td3", lambda: _algorithm("TD3")("MlpPolicy", "Pendulum-v1", seed=5)),
    ("ddpg", lambda: _algorithm("DDPG")("MlpPolicy", "Pendulum-v1", seed=6, normalize_observations=True,
                                        observation_range=(-2.0, 2.0))),
])
#: every case goes through every format (CNN and LSTM included)
TFJS_CASES = list(CASES)
_models: dict = {}


def _randomize(model, seed: int) -> None:
    """Non-trivial weights: N(0, 1/fan_in) kernels, non-zero biases / log-stds, a large Gaussian mean head."""
    rng = np.random.default_rng(seed)
    params = OrderedDict()
    for name, value in model.get_parameters().items():
        if "_rms/" in name:  # running statistics (DDPG): set through their own API below
            params[name] = value
            continue
        if value.ndim >= 2:
            fan_in = int(np.prod(value.shape[:-1]))
            new = rng.standard_normal(value.shape) * (1.5 / np.sqrt(fan_in))
        else:
            new = rng.normal(0.0, 0.3, value.shape)
        if name.endswith("pi/w:0") and isinstance(model.action_space, gym.spaces.Box):
            new = new * 4.0  # means beyond the action bounds: exercises the clipping
        params[name] = new.astype(value.dtype)
    model.load_parameters(params)
    if getattr(model, "obs_rms", None) is not None:  # DDPG's observation statistics: mean / std far from 0 / 1
        model.obs_rms.update(rng.normal([0.5, -0.5, 2.0], [0.3, 0.5, 3.0], (200, 3)))


def _model(case: str):
    if case not in _models:
        model = CASES[case]()
        _randomize(model, seed=len(case))
        _models[case] = model
    return _models[case]


def _observations(space: gym.Space, n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if isinstance(space, gym.spaces.Box):
        if space.dtype == np.uint8:
            return rng.integers(0, 256, (n,) + space.shape).astype(np.uint8)
        low = np.where(np.isfinite(space.low), space.low, -2.0)
        high = np.where(np.isfinite(space.high), space.high, 2.0)
        return rng.uniform(low, high, (n,) + space.shape).astype(np.float32)
    space.seed(seed)
    return np.stack([np.asarray(space.sample()) for _ in range(n)]).astype(np.int32 if not isinstance(
        space, gym.spaces.MultiBinary) else np.float32)


def _inputs(model, seed: int = 0) -> "OrderedDict[str, np.ndarray]":
    """The exported function's inputs for a batch (recurrent: a random state and a mask with some resets)."""
    policy = model.policy_tf
    obs = _observations(model.observation_space, BATCH, seed)
    if isinstance(model.observation_space, gym.spaces.Discrete):
        obs = obs.reshape(-1)
    feed = OrderedDict(observation=obs.astype(policy.obs_dtype))
    if getattr(policy, "recurrent", False):
        rng = np.random.default_rng(seed + 100)
        feed["state"] = rng.normal(0.0, 0.5, (BATCH, policy.state_size)).astype(np.float32)
        feed["mask"] = (np.arange(BATCH) % 3 == 0).astype(np.float32)
    return feed


def _expected(model, feed) -> dict:
    """What the exported outputs must equal, computed by the Python model."""
    obs = feed["observation"]
    state, mask = feed.get("state"), feed.get("mask")
    action, new_state = model.predict(obs, state=state, mask=mask, deterministic=True)
    expected = {"action": np.asarray(action)}
    name = type(model).__name__
    space = model.action_space
    if name == "DQN":
        expected["q_values"] = model.q_net.q_values_np(obs)
        return expected
    if name in ("SAC", "TD3", "DDPG"):
        if name == "SAC":
            mean, std = model.policy_tf.proba_step(obs)
            expected["mean"], expected["std"] = mean, std
        return expected
    policy = model.policy_tf
    flat = policy.flat_params(obs, state, mask)
    probabilities = model.action_probability(obs, state=state, mask=mask)
    if isinstance(space, gym.spaces.Box):
        expected["mean"], expected["std"] = probabilities
    else:
        expected["logits"] = flat
        expected["probabilities"] = (np.concatenate(probabilities, axis=-1)
                                     if isinstance(probabilities, list) else probabilities)
    expected["value"] = policy.value(obs, state, mask)
    if name == "ACER":  # ACER's value is sum_a pi(a|s) Q(s, a); its Q head is exported too
        expected["value"] = model.acer_value(obs, state, mask)
        expected["q_values"] = policy.forward(tf.constant(obs))[2].numpy()
    if new_state is not None:
        expected["state"] = new_state
    return expected


def _compare(case: str, got: dict, expected: dict, fmt: str) -> None:
    assert set(expected) <= set(got), f"{case} {fmt}: outputs {sorted(got)} lack {set(expected) - set(got)}"
    for name, want in expected.items():
        have = np.asarray(got[name])
        want = np.asarray(want)
        assert have.shape == want.shape, f"{case} {fmt} {name}: shape {have.shape} != {want.shape}"
        if name == "action" and np.issubdtype(want.dtype, np.integer):
            np.testing.assert_array_equal(have, want, err_msg=f"{case} {fmt} {name}")
        else:
            np.testing.assert_allclose(have, want, rtol=1e-5, atol=ATOL, err_msg=f"{case} {fmt} {name}")


def _run_savedmodel(path, feed, signature="serving_default") -> dict:
    fn = tf.saved_model.load(str(path)).signatures[signature]
    return {k: v.numpy() for k, v in fn(**{k: tf.constant(v) for k, v in feed.items()}).items()}


def _run_onnx(ort, path, feed) -> dict:
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    names = [out.name for out in session.get_outputs()]
    return dict(zip(names, session.run(None, dict(feed))))


def _run_tfjs(node, runs) -> list:
    """Run [(model_dir, feed)] through policy.js in Node; returns one {name: array} per run."""
    request = {"runs": [{"model_dir": str(d), "inputs": {k: v.tolist() for k, v in feed.items()}}
                        for d, feed in runs]}
    req_path = Path(runs[0][0]).parent / "tfjs_request.json"
    req_path.write_text(json.dumps(request))
    proc = subprocess.run([node, str(WEB / "tools" / "tfjs_run.js"), str(req_path)], capture_output=True, text=True,
                          timeout=120, cwd=str(WEB))
    assert proc.returncode == 0, proc.stderr[-3000:]
    payload = json.loads(proc.stdout)
    assert payload["tfjs_version"].startswith("4.")
    out = []
    for result in payload["results"]:
        out.append({k: np.asarray(v["data"], dtype=np.float64 if v["dtype"] == "float32" else np.int64)
                    .reshape(v["shape"]) for k, v in result.items()})
    return out


# ------------------------------------------------------------------------------------------------ formats
@pytest.mark.parametrize("case", list(CASES))
def test_savedmodel_matches_predict(case, tmp_path):
    model = _model(case)
    feed = _inputs(model, seed=1)
    path = model.export(tmp_path / "saved", format="savedmodel")
    got = _run_savedmodel(path, feed)
    _compare(case, got, _expected(model, feed), "savedmodel")
    assert got["action"].dtype == np.asarray(model.predict(feed["observation"], state=feed.get("state"),
                                                           mask=feed.get("mask"), deterministic=True)[0]).dtype
    meta = json.loads((tmp_path / "saved" / sx.METADATA_FILE).read_text())
    assert meta["algo"] == type(model).__name__ and list(meta["outputs"])[0] == "action"
    assert list(meta["inputs"]) == list(feed)


@pytest.mark.parametrize("case", list(CASES))
def test_onnx_matches_predict(case, tmp_path):
    ort = _needs_onnx()
    model = _model(case)
    feed = _inputs(model, seed=2)
    path = sx.export_model(model, tmp_path / "policy.onnx", format="onnx")
    got = _run_onnx(ort, path, feed)
    if "state" in feed:  # ONNX value names are unique: the recurrent output is `next_state` there
        assert "state" not in got
        got["state"] = got.pop("next_state")
    _compare(case, got, _expected(model, feed), "onnx")
    import onnx
    proto = onnx.load(str(path))
    assert {entry.key for entry in proto.metadata_props} == {sx.METADATA_FILE}
    assert any(op.version == sx.DEFAULT_OPSET for op in proto.opset_import if op.domain in ("", "ai.onnx"))


@pytest.mark.parametrize("case", TFJS_CASES)
def test_tfjs_matches_predict(case, tmp_path):
    node = _needs_tfjs_node()
    model = _model(case)
    feed = _inputs(model, seed=3)
    model_dir = sx.export_model(model, tmp_path / case, format="tfjs")
    got = _run_tfjs(node, [(model_dir, feed)])[0]
    expected = _expected(model, feed)
    if np.issubdtype(expected["action"].dtype, np.integer):
        expected["action"] = expected["action"].astype(np.int64)  # int64 is int32 in TF.js
    _compare(case, got, expected, "tfjs")


def test_tfjs_rewrites_fused_tanh_for_the_browser(tmp_path):
    """The converter fuses MatMul+BiasAdd+Tanh, which TF.js 4.22 cannot run: the export splits the tanh off."""
    pytest.importorskip("tensorflowjs", reason="the TF.js export needs tensorflowjs: pip install 'sbtf[export]'")
    model = _model("ppo2_discrete")
    sx.export_model(model, tmp_path / "js", format="tfjs")
    nodes = json.loads((tmp_path / "js" / "model.json").read_text())["modelTopology"]["node"]
    import base64
    for node in nodes:
        fused = [base64.b64decode(s).decode() for s in node.get("attr", {}).get("fused_ops", {}).get("list", {})
                 .get("s", [])]
        assert "Tanh" not in fused, node
    assert sum(node["op"] == "Tanh" for node in nodes) >= 4  # 2 pi + 2 vf hidden layers
    meta = json.loads((tmp_path / "js" / sx.METADATA_FILE).read_text())
    assert set(meta["tfjs_nodes"]["outputs"]) == {"action", "logits", "probabilities", "value"}
    assert {node["name"] for node in nodes} >= set(meta["tfjs_nodes"]["outputs"].values())


def test_cnn_takes_uint8_and_float_images(tmp_path):
    model = _model("ppo2_cnn")
    path = model.export(tmp_path / "cnn")
    feed = _inputs(model, seed=4)
    assert feed["observation"].dtype == np.uint8
    as_uint8 = _run_savedmodel(path, feed)
    as_float = _run_savedmodel(path, {"observation": feed["observation"].astype(np.float32)}, "serving_float")
    np.testing.assert_array_equal(as_uint8["action"], as_float["action"])
    np.testing.assert_array_equal(as_float["action"], model.predict(feed["observation"].astype(np.float32),
                                                                    deterministic=True)[0])


def test_lstm_state_round_trip(tmp_path):
    """Feeding the exported state back over several steps follows predict's recurrent state exactly."""
    model = _model("ppo2_lstm")
    path = model.export(tmp_path / "lstm")
    fn = tf.saved_model.load(str(path)).signatures["serving_default"]
    obs = _observations(model.observation_space, 4 * 5, seed=9).reshape(5, 4, 4)
    state_py, state_ex = None, np.zeros((4, model.policy_tf.state_size), np.float32)
    for t in range(5):
        mask = np.array([t == 3, False, False, t == 2], np.float32)
        act_py, state_py = model.predict(obs[t], state=state_py, mask=mask, deterministic=True)
        out = fn(observation=tf.constant(obs[t]), state=tf.constant(state_ex), mask=tf.constant(mask))
        state_ex = out["state"].numpy()
        np.testing.assert_array_equal(out["action"].numpy(), act_py)
        np.testing.assert_allclose(state_ex, state_py, atol=ATOL, rtol=1e-5)
    assert np.abs(state_ex).max() > 1e-3


# ------------------------------------------------------------------------------------------------ VecNormalize
def _vec_normalize(tmp_path):
    from sbtf.common.vec_env import DummyVecEnv, VecNormalize
    vec = VecNormalize(DummyVecEnv([lambda: gym.make("Pendulum-v1")]), clip_obs=2.0, epsilon=1e-6)
    vec.obs_rms.mean = np.array([0.3, -0.2, 1.5])
    vec.obs_rms.var = np.array([0.25, 4.0, 9.0])
    path = tmp_path / "vecnormalize.pkl"
    vec.save(str(path))
    return vec, path


def test_vecnormalize_is_folded_in(tmp_path):
    model = _model("ppo2_box")
    vec, stats_path = _vec_normalize(tmp_path)
    raw = np.random.default_rng(5).uniform(-8, 8, (BATCH, 3)).astype(np.float32)  # some beyond clip_obs
    normalized = vec.normalize_obs(raw)
    assert np.any(np.abs(normalized) == 2.0)
    want = model.predict(normalized, deterministic=True)[0]
    assert not np.allclose(want, model.predict(raw, deterministic=True)[0], atol=1e-3)

    from_object = model.export(tmp_path / "sm_obj", vecnormalize=vec)
    np.testing.assert_allclose(_run_savedmodel(from_object, {"observation": raw})["action"], want, atol=ATOL)
    from_path = model.export(tmp_path / "sm_path", vecnormalize=str(stats_path))
    np.testing.assert_allclose(_run_savedmodel(from_path, {"observation": raw})["action"], want, atol=ATOL)
    meta = json.loads((tmp_path / "sm_path" / sx.METADATA_FILE).read_text())
    assert meta["vecnormalize"]["folded"] and meta["vecnormalize"]["clip_obs"] == 2.0

    ort = _needs_onnx()
    onnx_path = model.export(tmp_path / "n.onnx", format="onnx", vecnormalize=vec)
    np.testing.assert_allclose(_run_onnx(ort, onnx_path, {"observation": raw})["action"], want, atol=ATOL)


def test_vecnormalize_with_norm_obs_off_changes_nothing(tmp_path):
    model = _model("ppo2_box")
    vec, _ = _vec_normalize(tmp_path)
    vec.norm_obs = False
    raw = _observations(model.observation_space, BATCH, 6)
    got = _run_savedmodel(model.export(tmp_path / "sm", vecnormalize=vec), {"observation": raw})
    np.testing.assert_allclose(got["action"], model.predict(raw, deterministic=True)[0], atol=ATOL)


# ------------------------------------------------------------------------------------------------ errors
def test_clear_errors(tmp_path, monkeypatch):
    model = _model("ppo2_discrete")
    with pytest.raises(sx.ExportError, match="unknown export format 'keras'.*savedmodel, tfjs, onnx"):
        model.export(tmp_path / "x", format="keras")
    (tmp_path / "dir.onnx").mkdir()
    with pytest.raises(sx.ExportError, match="ONNX export is one file"):
        model.export(tmp_path / "dir.onnx", format="onnx")
    (tmp_path / "exists").mkdir()
    with pytest.raises(sx.ExportError, match="exists"):
        sx.export_model(model, tmp_path / "exists", overwrite=False)

    class MyAlgo:
        policy_tf = object()

    with pytest.raises(sx.ExportError, match="no export graph is registered for it.*register_exporter"):
        sx.export_model(MyAlgo(), tmp_path / "mine")

    unbuilt = PPO2("MlpPolicy", "CartPole-v1", _init_setup_model=False)
    with pytest.raises(sx.ExportError, match="no network yet"):
        sx.export_model(unbuilt, tmp_path / "unbuilt")

    vec, _ = _vec_normalize(tmp_path)
    with pytest.raises(sx.ExportError, match=r"statistics are for observations of shape \(3,\).*\(4,\)"):
        model.export(tmp_path / "v", vecnormalize=vec)
    with pytest.raises(sx.ExportError, match="image policies take uint8"):
        _model("ppo2_cnn").export(tmp_path / "c", vecnormalize=_FakeStats((40, 40, 3)))
    with pytest.raises(sx.ExportError, match="not found"):
        model.export(tmp_path / "v2", vecnormalize=str(tmp_path / "missing.pkl"))
    with pytest.raises(sx.ExportError, match="no obs_rms"):
        model.export(tmp_path / "v3", vecnormalize=object())

    with pytest.raises(sx.ExportError, match="simulates CartPole-v1"):
        sx.write_demo(_model("ppo2_box"), tmp_path / "demo")
    monkeypatch.setenv("SBTF_TFJS_BUNDLE", str(tmp_path / "no-tf.min.js"))
    with pytest.raises(sx.ExportError, match="npm install"):
        sx.write_demo(model, tmp_path / "demo")
    assert not (tmp_path / "demo" / "model").exists()


def test_onnx_opset_is_checked(tmp_path):
    _needs_onnx()
    with pytest.raises(sx.ExportError, match="opset 99 is not supported"):
        _model("ppo2_discrete").export(tmp_path / "m.onnx", format="onnx", opset=99)
    path = _model("ppo2_discrete").export(tmp_path / "m13.onnx", format="onnx", opset=13)
    import onnx
    assert any(op.version == 13 for op in onnx.load(str(path)).opset_import if op.domain in ("", "ai.onnx"))


class _FakeStats:
    def __init__(self, shape):
        class _Rms:
            mean = np.zeros(shape)
            var = np.ones(shape)
        self.obs_rms = _Rms()
        self.epsilon, self.clip_obs, self.norm_obs = 1e-8, 10.0, True


# ------------------------------------------------------------------------------------------------ command line
def _cli(args, capsys):
    from sbtf import cli
    code = cli.main(["export"] + [str(a) for a in args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_cli_exports_an_sbtf_file(tmp_path, capsys):
    from sbtf import cli
    assert "export" in cli.registered_subcommands()
    model = _model("a2c_discrete")
    model.save(str(tmp_path / "agent.zip"))
    code, out, err = _cli([tmp_path / "agent.zip", "--format", "savedmodel", "-o", tmp_path / "out"], capsys)
    assert code == 0, err
    assert "Exported A2C (MlpPolicy)" in out
    feed = _inputs(model, seed=7)
    _compare("cli", _run_savedmodel(tmp_path / "out", feed), _expected(model, feed), "savedmodel")
    # default output next to the model, --algo given explicitly
    code, out, err = _cli([tmp_path / "agent", "--algo", "a2c"], capsys)
    assert code == 0, err
    assert (tmp_path / "agent_savedmodel" / "saved_model.pb").is_file()


def test_cli_errors(tmp_path, capsys):
    code, _, err = _cli([tmp_path / "nothing.zip"], capsys)
    assert code == 2 and "model file" in err and "not found" in err
    _model("ppo2_discrete").save(str(tmp_path / "m.zip"))
    code, _, err = _cli([tmp_path / "m.zip", "--format", "onnx", "--demo", tmp_path / "d"], capsys)
    assert code == 2 and "--demo writes a TF.js web page" in err
    code, _, err = _cli([tmp_path / "m.zip", "--algo", "dqn"], capsys)
    assert code == 2 and "holds a PPO2 model" in err
    code, _, err = _cli([tmp_path / "m.zip", "--algo", "nope"], capsys)
    assert code == 2 and "unknown algorithm" in err
    (tmp_path / "junk.zip").write_bytes(b"not a model")
    code, _, err = _cli([tmp_path / "junk.zip"], capsys)
    assert code == 2 and "not an sbtf or stable-baselines model file" in err


def test_cli_demo_without_tfjs_bundle_says_how_to_get_it(tmp_path, capsys, monkeypatch):
    _model("ppo2_discrete").save(str(tmp_path / "m.zip"))
    monkeypatch.setenv("SBTF_TFJS_BUNDLE", str(tmp_path / "absent" / "tf.min.js"))
    code, _, err = _cli([tmp_path / "m.zip", "--format", "tfjs", "-o", tmp_path / "js", "--demo", tmp_path / "d"],
                        capsys)
    assert code == 1 and "npm install" in err and "tf.min.js" in err
    assert not (tmp_path / "d").exists()


def test_cli_demo_writes_a_ready_folder(tmp_path, capsys):
    pytest.importorskip("tensorflowjs", reason="the TF.js export needs tensorflowjs: pip install 'sbtf[export]'")
    if sx.find_tfjs_bundle() is None:
        pytest.skip(f"no tf.min.js: run `npm install` in {WEB}")
    _model("ppo2_discrete").save(str(tmp_path / "m.zip"))
    code, out, err = _cli([tmp_path / "m.zip", "--format", "tfjs", "-o", tmp_path / "js", "--demo", tmp_path / "d"],
                          capsys)
    assert code == 0, err
    for name in ("index.html", "cartpole.js", "policy.js", "vendor/tf.min.js", "model/model.json",
                 "model/sbtf_export.json"):
        assert (tmp_path / "d" / name).is_file(), name
    assert (tmp_path / "js" / "model.json").is_file()
    assert "http.server" in out
    html = (tmp_path / "d" / "index.html").read_text()
    assert "vendor/tf.min.js" in html and "://" not in html.split("<script")[1].split(">")[0]


@pytest.mark.skipif(not (SB2_ZOO / "ppo2" / "CartPole-v1.pkl").is_file(),
                    reason="shared fixture ../shared/fixtures/sb2_zoo is absent (fresh clone without ../shared)")
def test_cli_exports_stable_baselines2_files(tmp_path, capsys):
    ort = _needs_onnx()
    code, out, err = _cli([SB2_ZOO / "ppo2" / "CartPole-v1.pkl", "--format", "onnx", "-o", tmp_path / "cp.onnx"],
                          capsys)
    assert code == 0, err
    assert "Exported PPO2" in out
    model = PPO2.load(str(SB2_ZOO / "ppo2" / "CartPole-v1.pkl"))
    obs = _observations(model.observation_space, 64, 8)
    got = _run_onnx(ort, tmp_path / "cp.onnx", {"observation": obs})
    np.testing.assert_array_equal(got["action"], model.predict(obs, deterministic=True)[0])

    # the zoo's MountainCar agent was trained on normalised observations (obs_rms.pkl in MountainCar-v0/)
    stats = SB2_ZOO / "ppo2" / "MountainCar-v0"
    code, _, err = _cli([SB2_ZOO / "ppo2" / "MountainCar-v0.pkl", "-o", tmp_path / "mc", "--vecnormalize", stats],
                        capsys)
    assert code == 0, err
    from sbtf_converters.legacy import read_running_mean_std
    rms = read_running_mean_std(str(stats / "obs_rms.pkl"))
    model = PPO2.load(str(SB2_ZOO / "ppo2" / "MountainCar-v0.pkl"))
    raw = _observations(model.observation_space, 64, 9)
    normalized = np.clip((raw - rms.mean) / np.sqrt(rms.var + 1e-8), -10, 10).astype(np.float32)
    got = _run_savedmodel(tmp_path / "mc", {"observation": raw})
    np.testing.assert_array_equal(got["action"], model.predict(normalized, deterministic=True)[0])
