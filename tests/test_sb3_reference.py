"""stable-baselines3 agents with CNN / Dict extractors and trained optimizers load into sbtf as SB3 runs them.

``tests/data/sb3`` holds small SB3 2.9 zips written by real stable-baselines3 + PyTorch
(``tests/data/sb3/make_reference.py``, run in a separate venv) and SB3's own outputs on fixed inputs
(``reference.json``) and optimizer states (``optimizer_state.npz``). Checked without PyTorch: deterministic actions,
values, log-probabilities, Q-values and critic values to float32 precision (NatureCNN, CombinedExtractor with an
image key, ``share_features_extractor=False`` for PPO and ``True`` for SAC); the optimizers' slots equal the
file's ``exp_avg`` / ``exp_avg_sq`` / ``square_avg`` and step; one optimizer step equals PyTorch's; training
continues; sbtf's own save / load round-trips; RMSpropTFLike leaves fresh state with one note;
``print_system_info``; error messages name the file.
"""
import io
import json
import logging
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf

DATA = Path(__file__).parent / "data" / "sb3"
sys.path.insert(0, str(DATA))

from reference_envs import make_env  # noqa: E402

from sbtf.common.file_errors import ModelFileError  # noqa: E402
from sbtf.sb3 import A2C, DQN, PPO, SAC  # noqa: E402
from sbtf_converters.sb3_layouts import plan_state_dict  # noqa: E402
from sbtf_converters.sb3_reader import read_sb3_zip  # noqa: E402

CLASSES = {"PPO": PPO, "A2C": A2C, "DQN": DQN, "SAC": SAC}
REFERENCE = json.loads((DATA / "reference.json").read_text())["agents"]
TOL = dict(rtol=1e-5, atol=1e-5)


def _obs(entry: dict):
    space = make_env(entry["env"]).observation_space
    if isinstance(entry["obs"], dict):
        return {key: np.asarray(value, dtype=space[key].dtype) for key, value in entry["obs"].items()}
    return np.asarray(entry["obs"], dtype=space.dtype)


def _load(name: str, **kwargs):
    return CLASSES[REFERENCE[name]["class"]].load(str(DATA / f"{name}.zip"), **kwargs)


@pytest.fixture(scope="module", params=sorted(REFERENCE))
def agent(request):
    return request.param, _load(request.param)


def test_outputs_equal_sb3(agent):
    name, model = agent
    entry = REFERENCE[name]
    obs = _obs(entry)
    wanted = np.asarray(entry["deterministic_actions"])
    actions, _ = model.predict(obs, deterministic=True)
    if wanted.dtype.kind in "iu":
        np.testing.assert_array_equal(np.asarray(actions).reshape(wanted.shape), wanted)
    else:
        np.testing.assert_allclose(np.asarray(actions, np.float64).reshape(wanted.shape), wanted, **TOL)
    policy = model.policy
    if "values" in entry:
        np.testing.assert_allclose(np.asarray(policy.predict_values(obs)).ravel(), entry["values"], **TOL)
        packed, _ = model._check_obs(obs)  # pylint: disable=protected-access
        _, log_prob, _ = policy.evaluate_actions(tf.constant(packed), tf.constant(
            wanted.astype(np.float32 if wanted.dtype.kind == "f" else np.int64)))
        np.testing.assert_allclose(np.asarray(log_prob).ravel(), entry["log_prob_of_deterministic_actions"],
                                   rtol=1e-4, atol=1e-4)
    if "q_values" in entry:
        np.testing.assert_allclose(policy.q_values_np(obs), entry["q_values"], **TOL)
    if "critic_q_of_scaled_deterministic_actions" in entry:
        packed, _ = model._check_obs(obs)  # pylint: disable=protected-access
        low, high = model.action_space.low, model.action_space.high
        scaled = (2.0 * (wanted - low) / (high - low) - 1.0).astype(np.float32)
        q = policy.critic.q_values(tf.constant(packed), tf.constant(scaled))
        np.testing.assert_allclose(np.asarray(q), entry["critic_q_of_scaled_deterministic_actions"], **TOL)


def test_extractor_weights_are_used():
    """The CNN agents' outputs depend on the image: a different image gives different values (the extractor's
    weights are not left at zero / built values that happen to agree)."""
    model = _load("ppo_cnn")
    obs = _obs(REFERENCE["ppo_cnn"])
    values = np.asarray(model.policy.predict_values(obs)).ravel()
    assert np.ptp(values) > 1e-4
    flipped = np.asarray(model.policy.predict_values(obs[:, ::-1])).ravel()
    assert not np.allclose(values, flipped)


def _torch_to_sbtf(sb3_name: str, array: np.ndarray) -> np.ndarray:
    """The test's own statement of the layouts: conv OIHW -> HWIO; NatureCNN's linear after a (C, H, W) flatten
    -> rows in (H, W, C) order; other weights transposed."""
    if array.ndim == 4:
        return array.transpose(2, 3, 1, 0)
    if sb3_name.endswith("linear.0.weight"):
        out_dim, flat = array.shape
        return array.T.reshape(64, flat // 64, out_dim).transpose(1, 0, 2).reshape(flat, out_dim)
    if array.ndim == 2 and sb3_name != "log_std":
        return array.T
    return array


_SLOTS = {"exp_avg": "m", "exp_avg_sq": "v", "square_avg": "ms"}
_OPTIMIZERS = {"policy.optimizer": "optimizer", "actor.optimizer": "actor_optimizer",
               "critic.optimizer": "critic_optimizer", "ent_coef_optimizer": "ent_coef_optimizer"}


@pytest.mark.parametrize("name", ["ppo_cnn", "ppo_dict_separate", "dqn_cnn", "sac_dict", "sac_dict_image_shared",
                                  "a2c_rmsprop"])
def test_optimizer_state_equals_the_files(name):
    model = _load(name)
    assert set(model.sb3_optimizer_restore.values()) == {"restored"}
    sb3 = read_sb3_zip((DATA / f"{name}.zip").read_bytes())
    shapes = {n: tuple(v.shape) for n, v in model._named_parameters().items()}  # pylint: disable=protected-access
    targets, _ = plan_state_dict(type(model).__name__, sb3.state, shapes)
    variables = model._named_parameters()  # pylint: disable=protected-access
    saved = np.load(DATA / "optimizer_state.npz")
    checked = 0
    for key in saved.files:
        if key.startswith("step_check/"):
            continue
        agent, optimizer_name, sb3_name, slot = key.split("/")
        if agent != name:
            continue
        optimizer = getattr(model, _OPTIMIZERS[optimizer_name])
        if slot == "step":
            if hasattr(optimizer, "t"):  # Adam's bias correction; PyTorch's RMSprop counts steps it does not use
                assert float(optimizer.t.numpy()) == float(saved[key]), key
            continue
        if sb3_name not in targets:  # share_features_extractor=False: features_extractor is pi_features_extractor
            sb3_name = sb3_name.replace("features_extractor.", "pi_features_extractor.", 1)
        position = [id(v) for v in optimizer.variables_].index(id(variables[targets[sb3_name].name]))
        value = getattr(optimizer, _SLOTS[slot])[position].numpy()
        np.testing.assert_array_equal(value, _torch_to_sbtf(sb3_name, saved[key]).reshape(value.shape), err_msg=key)
        checked += 1
    assert checked >= 8


def test_rmsprop_tf_like_state_is_left_fresh_with_one_note(caplog):
    with caplog.at_level(logging.WARNING, logger="sbtf.sb3"):
        model = _load("a2c_rmsprop_tf_like")
    notes = [r.getMessage() for r in caplog.records if "optimizer state is not restored" in r.getMessage()]
    assert len(notes) == 1 and "RMSpropTFLike" in notes[0] and "a2c_rmsprop_tf_like.zip" in notes[0]
    assert all(not np.any(slot.numpy()) for slot in model.optimizer.ms)
    np.testing.assert_array_equal(model.predict(_obs(REFERENCE["a2c_rmsprop_tf_like"]), deterministic=True)[0],
                                  REFERENCE["a2c_rmsprop_tf_like"]["deterministic_actions"])


@pytest.mark.parametrize("name, steps", [("a2c_rmsprop", 200), ("sac_dict", 200), ("ppo_cnn", 64)])
def test_learning_continues_and_sbtf_format_round_trips(tmp_path, name, steps):
    entry = REFERENCE[name]
    model = _load(name, env=make_env(entry["env"]))
    before = int(model.num_timesteps)
    weights = {n: v.numpy().copy() for n, v in model._named_parameters().items()}  # pylint: disable=protected-access
    model.learn(steps, reset_num_timesteps=False)
    assert model.num_timesteps >= before + steps
    changed = [n for n, v in model._named_parameters().items()  # pylint: disable=protected-access
               if not np.array_equal(v.numpy(), weights[n])]
    assert changed
    assert all(np.all(np.isfinite(v.numpy())) for v in model._named_parameters().values())  # noqa: SLF001
    obs = _obs(entry)
    actions = model.predict(obs, deterministic=True)[0]
    model.save(tmp_path / "continued.zip")
    again = type(model).load(tmp_path / "continued.zip")
    np.testing.assert_array_equal(again.predict(obs, deterministic=True)[0], actions)
    if "values" in entry:
        np.testing.assert_array_equal(np.asarray(again.policy.predict_values(obs)),
                                      np.asarray(model.policy.predict_values(obs)))


def test_print_system_info_prints_the_files_and_this_machines(capsys):
    _load("dqn_dict", print_system_info=True)
    out = capsys.readouterr().out
    with zipfile.ZipFile(DATA / "dqn_dict.zip") as archive:
        stored = archive.read("system_info.txt").decode()
    saved, current = out.split("== CURRENT SYSTEM INFO ==")
    assert "== SAVED MODEL SYSTEM INFO" in saved and "dqn_dict.zip" in saved
    assert stored.strip().splitlines()[0] in saved and "PyTorch" in saved
    assert "TensorFlow" in current and "sbtf" in current


def test_errors_name_the_file(tmp_path):
    broken = tmp_path / "broken_agent.zip"
    out = io.BytesIO()
    with zipfile.ZipFile(DATA / "dqn_dict.zip") as source, zipfile.ZipFile(out, "w") as target:
        for item in source.infolist():
            payload = source.read(item.filename)
            target.writestr(item.filename, payload[: len(payload) // 2] if item.filename == "policy.pth" else payload)
    broken.write_bytes(out.getvalue())
    with pytest.raises(ModelFileError, match="broken_agent.zip"):
        DQN.load(str(broken))


@pytest.mark.parametrize("name", sorted(n for n, e in REFERENCE.items() if "step_check_lr" in e))
def test_one_optimizer_step_equals_pytorchs(name):
    """From the restored state, one step on the gradient of the sum of the Q-values / values at the reference
    inputs gives PyTorch's parameters (SB3 reloaded the same zip and stepped its optimizer: Adam's bias
    correction at the file's step count and epsilon placement, RMSprop's running mean square)."""
    entry = REFERENCE[name]
    model = _load(name)
    packed, _ = model._check_obs(_obs(entry))  # pylint: disable=protected-access
    optimizer = model.optimizer
    with tf.GradientTape() as tape:
        if "q_values" in entry:
            loss = tf.reduce_sum(model.policy.q_values(tf.constant(packed)))
        else:
            actions = np.asarray(entry["deterministic_actions"])
            values, _, _ = model.policy.evaluate_actions(tf.constant(packed), tf.constant(
                actions.astype(np.float32 if actions.dtype.kind == "f" else np.int64)))
            loss = tf.reduce_sum(values)
    grads = tape.gradient(loss, optimizer.variables_)
    variables = model._named_parameters()  # pylint: disable=protected-access
    before = {n: v.numpy().copy() for n, v in variables.items()}
    optimizer.apply(grads, entry["step_check_lr"])
    sb3 = read_sb3_zip((DATA / f"{name}.zip").read_bytes())
    targets, _ = plan_state_dict(type(model).__name__, sb3.state, {n: tuple(v.shape) for n, v in variables.items()})
    saved = np.load(DATA / "optimizer_state.npz")
    moved = 0.0
    for key in saved.files:
        if not key.startswith(f"step_check/{name}/"):
            continue
        sb3_name = key.split("/", 2)[2]
        if sb3_name not in targets:
            continue  # an alias of a loaded extractor, or DQN's target network (not in the optimizer)
        sbtf_name = targets[sb3_name].name
        got = variables[sbtf_name].numpy()
        np.testing.assert_allclose(got, _torch_to_sbtf(sb3_name, saved[key]).reshape(got.shape), rtol=1e-5,
                                   atol=1e-6, err_msg=key)
        moved = max(moved, float(np.abs(got - before[sbtf_name]).max()))
    assert moved > 1e-5  # the step changed the parameters: the comparison is not of untouched weights
