"""The RL Zoo's trained stable-baselines3 / sb3-contrib agents load into sbtf without PyTorch and act as in SB3.

The fixtures (../shared/fixtures/sb3_zoo: six real RL-Zoo3 run folders, ``expected_outputs.json`` computed by real
SB3 2.9.2 / sb3-contrib 2.9.2 on 16 fixed policy inputs, the zoo's ``benchmark.md``) are skipped with a reason when
absent. Checked: deterministic actions, values / log-probabilities, Q-values, quantiles and critic outputs to
float32 precision through the sbtf policy's own functions; each agent's score, evaluated as the zoo does (its
config's VecNormalize statistics frozen, deterministic actions), within the benchmark's standard deviation of its
listed mean; PyTorch is never imported.
"""
import json
import re
import sys
import warnings

import gymnasium as gym
import numpy as np
import pytest
import tensorflow as tf

from conftest import shared_fixture

from sbtf.common.vec_env import DummyVecEnv, VecNormalize
from sbtf.contrib import QRDQN, TQC
from sbtf.sb3 import A2C, DQN, PPO, SAC

AGENTS = {
    "ppo/CartPole-v1_1": (PPO, "CartPole-v1"),
    "a2c/Pendulum-v1_1": (A2C, "Pendulum-v1"),
    "sac/Pendulum-v1_1": (SAC, "Pendulum-v1"),
    "dqn/CartPole-v1_1": (DQN, "CartPole-v1"),
    "qrdqn/CartPole-v1_1": (QRDQN, "CartPole-v1"),
    "tqc/Pendulum-v1_1": (TQC, "Pendulum-v1"),
}
TOL = dict(rtol=1e-5, atol=1e-5)


def _load(run: str):
    cls, env_id = AGENTS[run]
    path = shared_fixture("sb3_zoo", run, f"{env_id}.zip")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the old files' schedules are code: a warning says sbtf's defaults are used
        return cls.load(str(path))


def _expected(run: str) -> dict:
    return json.loads(shared_fixture("sb3_zoo", "expected_outputs.json").read_text())["agents"][run]


def _benchmark(algo: str, env_id: str) -> tuple:
    text = shared_fixture("sb3_zoo", "benchmark.md").read_text()
    match = re.search(rf"^\|{algo}\s*\|{re.escape(env_id)}\s*\|\s*([-\d.]+)\|\s*([-\d.]+)\|", text, re.M)
    assert match, f"{algo} {env_id} not in benchmark.md"
    return float(match.group(1)), float(match.group(2))


@pytest.fixture(scope="module", params=sorted(AGENTS))
def agent(request):
    return request.param, _load(request.param)


def test_no_torch_imported(agent):
    assert "torch" not in sys.modules


def test_deterministic_actions_equal_sb3(agent):
    run, model = agent
    expected = _expected(run)
    obs = np.asarray(expected["obs"], dtype=np.float32)
    actions, _ = model.predict(obs, deterministic=True)
    wanted = np.asarray(expected["deterministic_actions"])
    if wanted.dtype.kind in "iu":
        np.testing.assert_array_equal(np.asarray(actions).reshape(wanted.shape), wanted)
    else:
        np.testing.assert_allclose(np.asarray(actions, np.float64).reshape(wanted.shape), wanted, **TOL)


def _scaled(model, actions: np.ndarray) -> np.ndarray:
    low, high = model.action_space.low, model.action_space.high
    return (2.0 * (actions - low) / (high - low) - 1.0).astype(np.float32)


def test_policy_outputs_equal_sb3(agent):
    run, model = agent
    expected = _expected(run)
    obs = np.asarray(expected["obs"], dtype=np.float32)
    actions = np.asarray(expected["deterministic_actions"])
    policy = model.policy
    if "values" in expected:  # PPO, A2C
        values, log_prob, _ = policy.evaluate_actions(tf.constant(obs), tf.constant(
            actions.astype(np.float32 if actions.dtype.kind == "f" else np.int64)))
        np.testing.assert_allclose(np.asarray(values).ravel(), expected["values"], **TOL)
        np.testing.assert_allclose(np.asarray(policy.predict_values(obs)).ravel(), expected["values"], **TOL)
        np.testing.assert_allclose(np.asarray(log_prob).ravel(), expected["log_prob_of_deterministic_actions"],
                                   rtol=1e-4, atol=1e-4)
    if "q_values" in expected:  # DQN
        np.testing.assert_allclose(policy.q_values_np(obs), expected["q_values"], **TOL)
        np.testing.assert_allclose(np.asarray(policy.q_values(tf.constant(obs))), expected["q_values"], **TOL)
    if "quantiles" in expected:  # QR-DQN: (batch, n_quantiles, n_actions)
        np.testing.assert_allclose(policy.quantiles_np(obs), expected["quantiles"], **TOL)
    if "critic_q_of_scaled_deterministic_actions" in expected:  # SAC: (batch, n_critics)
        q = policy.critic.q_values(tf.constant(obs), tf.constant(_scaled(model, actions)))
        np.testing.assert_allclose(np.asarray(q), expected["critic_q_of_scaled_deterministic_actions"], **TOL)
    if "critic_quantiles_of_scaled_deterministic_actions" in expected:  # TQC: (batch, n_critics, n_quantiles)
        q = policy.critic.quantiles(tf.constant(obs), tf.constant(_scaled(model, actions)))
        np.testing.assert_allclose(np.asarray(q), expected["critic_quantiles_of_scaled_deterministic_actions"],
                                   **TOL)


def _zoo_score(run: str, model, n_episodes: int, seed: int = 0) -> float:
    """Mean return of deterministic episodes, evaluated as the RL Zoo does: the run's VecNormalize statistics
    (if any) frozen, rewards not normalised."""
    _, env_id = AGENTS[run]
    env = DummyVecEnv([lambda: gym.make(env_id)])
    stats = shared_fixture("sb3_zoo").joinpath(run, env_id, "vecnormalize.pkl")
    if stats.exists():
        env = VecNormalize.load(str(stats), env)
        env.training = False
        env.norm_reward = False
    returns = []
    for episode in range(n_episodes):
        env.seed(seed + episode)
        obs = env.reset()
        total, done = 0.0, False
        while not done:
            action, _ = model.predict(obs, deterministic=True)
            obs, reward, dones, _ = env.step(action)
            total += float(env.get_original_reward()[0] if isinstance(env, VecNormalize) else reward[0])
            done = bool(dones[0])
        returns.append(total)
    return float(np.mean(returns))


def _check_score(run: str, model, n_episodes: int) -> None:
    algo = run.split("/")[0]
    mean, std = _benchmark(algo, AGENTS[run][1])
    score = _zoo_score(run, model, n_episodes)
    assert abs(score - mean) <= std + 1e-6, f"{run}: {score:.2f} over {n_episodes} episodes, zoo {mean} +- {std}"


_OPTIMIZER_ATTRS = {"policy.optimizer.pth": "optimizer", "actor.optimizer.pth": "actor_optimizer",
                    "critic.optimizer.pth": "critic_optimizer", "ent_coef_optimizer.pth": "ent_coef_optimizer"}


def test_optimizer_state_is_restored(agent):
    """Every slot of sbtf's optimizers holds one parameter's state from the file's ``*.optimizer.pth`` (Adam's
    exp_avg / exp_avg_sq, RMSprop's square_avg, in the weight's layout), and Adam's step count is the file's."""
    import zipfile

    from sbtf_converters.torch_pickle import read_torch_file

    run, model = agent
    _, env_id = AGENTS[run]
    path = shared_fixture("sb3_zoo", run, f"{env_id}.zip")
    assert set(model.sb3_optimizer_restore.values()) == {"restored"}, model.sb3_optimizer_restore
    with zipfile.ZipFile(path) as archive:
        members = {m: read_torch_file(archive.read(m)) for m in archive.namelist() if m.endswith("optimizer.pth")}
    assert set(members) == set(model.sb3_optimizer_restore)
    for member, saved in members.items():
        optimizer = getattr(model, _OPTIMIZER_ATTRS[member])
        entries = list(saved["state"].values())
        if hasattr(optimizer, "m"):
            pairs = [(e["exp_avg"], e["exp_avg_sq"]) for e in entries]
            slots = list(zip(optimizer.m, optimizer.v))
            assert {float(e["step"]) for e in entries} == {float(optimizer.t.numpy())}
        else:
            pairs = [(e["square_avg"], e["square_avg"]) for e in entries]
            slots = list(zip(optimizer.ms, optimizer.ms))
        names = {id(v): n for n, v in model._named_parameters().items()}  # pylint: disable=protected-access
        for var, (first, second) in zip(optimizer.variables_, slots):
            if names[id(var)].startswith("model/q/"):
                continue  # sbtf's actor-critic q head: not in SB3's maths, no state in the file
            first, second = first.numpy(), second.numpy()
            assert any(np.array_equal(first, np.asarray(a).T.reshape(first.shape)) and
                       np.array_equal(second, np.asarray(b).T.reshape(second.shape))
                       for a, b in pairs if np.size(a) == first.size), (member, first.shape)


def test_score_within_benchmark(agent):
    run, model = agent
    _check_score(run, model, n_episodes=3 if "Pendulum" in run else 2)


@pytest.mark.slow
def test_score_within_benchmark_long(agent):
    run, model = agent
    _check_score(run, model, n_episodes=30)


def test_loaded_hyperparameters_and_spaces():
    model = _load("dqn/CartPole-v1_1")
    assert isinstance(model.observation_space, gym.spaces.Box) and model.observation_space.shape == (4,)
    assert isinstance(model.action_space, gym.spaces.Discrete) and model.action_space.n == 2
    assert (model.buffer_size, model.batch_size, model.gradient_steps, model.target_update_interval) == \
        (100000, 64, 128, 10)
    assert model.exploration_final_eps == pytest.approx(0.04) and model.gamma == pytest.approx(0.99)
    sac = _load("sac/Pendulum-v1_1")  # an SB3 0.x file: train_freq=-1 + n_episodes_rollout=1, tensors.pth
    assert sac.use_sde and sac.num_timesteps == 20000
    import zipfile

    from sbtf_converters.torch_pickle import read_torch_file
    with zipfile.ZipFile(shared_fixture("sb3_zoo", "sac", "Pendulum-v1_1", "Pendulum-v1.zip")) as archive:
        stored = read_torch_file(archive.read("tensors.pth"))["log_ent_coef"]
    assert stored.shape == (1,)
    assert float(sac._named_parameters()["model/log_ent_coef:0"].numpy()) == float(stored[0])
    a2c = _load("a2c/Pendulum-v1_1")
    assert a2c.use_sde and a2c.n_steps == 8 and a2c.vf_coef == pytest.approx(0.4)


def test_old_schedules_are_read_from_their_closures_without_running_them():
    """The zoo's files pickle their schedules as functions (code): sbtf reads the known ones' closure values."""
    path = shared_fixture("sb3_zoo", "ppo", "CartPole-v1_1", "CartPole-v1.zip")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # nothing defaulted
        model = PPO.load(str(path))
    assert model.n_epochs == 20 and model.batch_size == 256
    # config.yml: learning_rate lin_0.001, clip_range lin_0.2 (the zoo's linear_schedule)
    assert [model.learning_rate(p) for p in (1.0, 0.5, 0.0)] == pytest.approx([0.001, 0.0005, 0.0])
    assert [model.clip_range(p) for p in (1.0, 0.25)] == pytest.approx([0.2, 0.05])
    dqn = _load("dqn/CartPole-v1_1")  # SB3's constant_fn(0.0023)
    assert [dqn.learning_rate(p) for p in (1.0, 0.0)] == pytest.approx([0.0023, 0.0023])
    model = PPO.load(str(path), custom_objects={"learning_rate": 3e-4, "clip_range": 0.1})
    assert model.learning_rate == pytest.approx(3e-4)


def test_sb2_class_refuses_an_sb3_file_naming_the_right_class():
    from sbtf import A2C as SB2A2C
    from sbtf.common.file_errors import WrongAlgorithmError

    path = shared_fixture("sb3_zoo", "a2c", "Pendulum-v1_1", "Pendulum-v1.zip")
    with pytest.raises(WrongAlgorithmError, match=r"sbtf\.sb3\.A2C"):
        SB2A2C.load(str(path))
    with pytest.raises(WrongAlgorithmError, match="DQN"):
        SAC.load(str(shared_fixture("sb3_zoo", "dqn", "CartPole-v1_1", "CartPole-v1.zip")))


def test_enjoy_plays_an_rl_zoo3_run_folder(capsys):
    """``sbtf enjoy --algo a2c -f <rl-zoo3 logs>``: the SB3 model, its config and VecNormalize statistics from the
    run's <ENV>/ subfolder, deterministic actions; the score is the zoo's."""
    from sbtf.cli import main

    folder = shared_fixture("sb3_zoo")
    code = main(["enjoy", "--algo", "a2c", "--env", "Pendulum-v1", "-f", str(folder), "-n", "600", "--seed", "0"])
    out = capsys.readouterr().out
    assert code == 0
    assert "vecnormalize.pkl" in out and "stable-baselines3 model" in out
    returns = [float(v) for v in re.findall(r"Episode \d+: return (-?[\d.]+)", out)]
    assert len(returns) == 3
    mean, std = _benchmark("a2c", "Pendulum-v1")
    assert abs(np.mean(returns) - mean) <= std


def test_save_writes_sbtf_format_with_the_same_actions(agent, tmp_path):
    """A loaded SB3 agent saves in sbtf's own (safe) format; reloading it gives the same actions."""
    run, model = agent
    cls, _ = AGENTS[run]
    path = tmp_path / "converted.zip"
    model.save(str(path))
    import zipfile

    with zipfile.ZipFile(path) as archive:
        assert "policy.pth" not in archive.namelist()
    again = cls.load(str(path))
    obs = np.asarray(_expected(run)["obs"], dtype=np.float32)
    np.testing.assert_array_equal(again.predict(obs, deterministic=True)[0], model.predict(obs, deterministic=True)[0])


def test_learning_continues_from_a_loaded_agent():
    path = shared_fixture("sb3_zoo", "ppo", "CartPole-v1_1", "CartPole-v1.zip")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = PPO.load(str(path), env=DummyVecEnv([lambda: gym.make("CartPole-v1")]),
                         custom_objects={"learning_rate": 1e-4, "clip_range": 0.2, "n_steps": 64, "batch_size": 64,
                                         "n_epochs": 1})
    before = model.num_timesteps
    model.learn(64, reset_num_timesteps=False)
    assert model.num_timesteps == before + 64


def test_enjoy_reads_an_rl_zoo3_runs_env_kwargs(tmp_path, capsys):
    """``<ENV>/env_kwargs.yml`` of an RL-Zoo3 run reaches the env (a keyword Pendulum does not take is reported)."""
    import shutil

    from sbtf.cli import main

    run = shared_fixture("sb3_zoo", "a2c", "Pendulum-v1_1")
    logs = tmp_path / "logs"
    shutil.copytree(run, logs / "a2c" / "Pendulum-v1_1")
    (logs / "a2c" / "Pendulum-v1_1" / "Pendulum-v1" / "env_kwargs.yml").write_text("g: 5.0\n")
    assert main(["enjoy", "--algo", "a2c", "--env", "Pendulum-v1", "-f", str(logs), "-n", "5"]) == 0
    (logs / "a2c" / "Pendulum-v1_1" / "Pendulum-v1" / "env_kwargs.yml").write_text("not_a_pendulum_kwarg: 1\n")
    code = main(["enjoy", "--algo", "a2c", "--env", "Pendulum-v1", "-f", str(logs), "-n", "5"])
    assert code != 0 and "not_a_pendulum_kwarg" in capsys.readouterr().err
