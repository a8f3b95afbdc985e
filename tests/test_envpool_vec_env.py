"""EnvPoolVecEnv: EnvPool's C++ envs with the VecEnv semantics sbtf's algorithms rely on."""
from __future__ import annotations

import numpy as np
import pytest

envpool = pytest.importorskip("envpool", reason="EnvPool is not installed (pip install 'sbtf[envpool]')")

from sbtf.bench import load_results  # noqa: E402
from sbtf.common.cmd_util import make_vec_env  # noqa: E402
from sbtf.common.vec_env import EnvPoolVecEnv, VecFrameStack  # noqa: E402
from sbtf.common.vec_env.envpool_vec_env import envpool_task_id  # noqa: E402

CARTPOLE_X_LIMIT, CARTPOLE_THETA_LIMIT = 2.4, 12 * 2 * np.pi / 360


def _run(env, steps, rng):
    """Step with random actions; returns every (obs, rewards, dones, infos)."""
    out = []
    for _ in range(steps):
        actions = np.array([env.action_space.sample() for _ in range(env.num_envs)])
        out.append(env.step(actions))
    return out


def test_same_step_auto_reset_with_terminal_observation():
    env = EnvPoolVecEnv("CartPole-v1", n_envs=4, seed=3)
    env.reset()
    env.action_space.seed(0)
    finished = 0
    for obs, rewards, dones, infos in _run(env, 400, None):
        assert obs.shape == (4, 4) and rewards.dtype == np.float32 and dones.dtype == bool
        for i in np.flatnonzero(dones):
            finished += 1
            terminal = infos[i]["terminal_observation"]
            # the episode ended because the pole fell or the cart left: the terminal frame shows it
            assert abs(terminal[0]) > CARTPOLE_X_LIMIT or abs(terminal[2]) > CARTPOLE_THETA_LIMIT
            # and the returned observation already starts the next episode (CartPole starts within +-0.05)
            assert np.all(np.abs(obs[i]) <= 0.05)
            assert infos[i]["TimeLimit.truncated"] is False
        for i in np.flatnonzero(~dones):
            assert "terminal_observation" not in infos[i]
    assert finished > 10
    env.close()


def test_time_limit_truncation_is_kept_apart_and_episodes_are_reported(tmp_path):
    env = make_vec_env("CartPole-v1", n_envs=3, seed=0, vec_env_cls=EnvPoolVecEnv, monitor_dir=str(tmp_path),
                       env_kwargs=dict(max_episode_steps=7))
    env.reset()
    returns = np.zeros(3)
    episodes = []
    for _obs, rewards, dones, infos in _run(env, 60, None):
        returns += rewards
        for i in np.flatnonzero(dones):
            episode = infos[i]["episode"]
            assert episode["r"] == pytest.approx(returns[i]) and episode["l"] <= 7
            if episode["l"] == 7:  # cut by the time limit, not a terminal state
                assert infos[i]["TimeLimit.truncated"] is True
            episodes.append(episode)
            returns[i] = 0
    env.close()
    assert any(e["l"] == 7 for e in episodes)
    frame = load_results(str(tmp_path))
    assert len(frame) == len(episodes)
    assert np.allclose(frame["r"].to_numpy(), [e["r"] for e in episodes])


def test_seeding_reproduces_trajectories():
    def trajectory(seed, reseed=None):
        env = EnvPoolVecEnv("CartPole-v1", n_envs=2, seed=seed)
        if reseed is not None:
            env.seed(reseed)
        first = env.reset()
        frames = [first]
        for _ in range(50):
            frames.append(env.step(np.array([1, 0]))[0])
        env.close()
        return np.stack(frames)

    assert np.array_equal(trajectory(5), trajectory(5))
    assert not np.array_equal(trajectory(5), trajectory(6))
    assert np.array_equal(trajectory(1, reseed=5), trajectory(5))  # seed() takes effect at the next reset()
    assert not np.array_equal(trajectory(5)[:, 0], trajectory(5)[:, 1])  # env i gets seed + i
    env = EnvPoolVecEnv("CartPole-v1", n_envs=2, seed=0)
    np.random.seed(1)
    for _ in range(20):  # seed(None) draws base seeds EnvPool takes (int32), as the constructor does
        assert max(env.seed()) < 2 ** 31
        env.reset()
    env.close()


def test_atari_ids_map_to_envpool_with_the_zoo_layout():
    assert envpool_task_id("PongNoFrameskip-v4") == ("Pong-v5", True)
    assert envpool_task_id("ALE/Breakout-v5") == ("Breakout-v5", True)
    assert envpool_task_id("CartPole-v1") == ("CartPole-v1", False)
    with pytest.raises(ValueError, match="EnvPool has no environment"):
        envpool_task_id("NoSuchGame-v9")
    env = EnvPoolVecEnv("PongNoFrameskip-v4", n_envs=2, seed=0)
    # what make_atari_env + VecFrameStack(4) give: 84x84 grey frames, 4 stacked, channel-last
    assert env.observation_space.shape == (84, 84, 4) and env.observation_space.dtype == np.uint8
    obs = env.reset()
    assert obs.shape == (2, 84, 84, 4) and obs.flags["C_CONTIGUOUS"]
    env.close()


def test_atari_episode_is_the_whole_game_with_its_raw_score():
    env = EnvPoolVecEnv("BreakoutNoFrameskip-v4", n_envs=1, seed=0)
    env.reset()
    rng = np.random.default_rng(0)
    life_losses, games, clipped = 0, [], 0.0
    for _ in range(4000):
        obs, rewards, dones, infos = env.step(rng.integers(0, 4, size=1))
        clipped += float(rewards[0])
        assert set(np.unique(rewards)) <= {-1.0, 0.0, 1.0}  # the zoo's clip_rewards
        if dones[0]:
            if "episode" in infos[0]:
                games.append(infos[0]["episode"])
                break
            life_losses += 1  # a lost life ends the training episode (episodic life), not the game
    env.close()
    assert life_losses == 4 and len(games) == 1  # Breakout's 5 lives
    assert games[0]["r"] >= clipped  # Breakout's bricks score 1-7 points each; clipped, each counts 1


def test_learning_on_envpool_envs_and_frame_stacking():
    from sbtf import PPO2

    env = make_vec_env("CartPole-v1", n_envs=4, seed=0, vec_env_cls=EnvPoolVecEnv)
    model = PPO2("MlpPolicy", env, n_steps=64, seed=0)
    model.learn(1024)
    assert len(model.ep_info_buf) > 0  # Monitor-style episode infos reach the algorithm
    stacked = VecFrameStack(EnvPoolVecEnv("CartPole-v1", n_envs=2, seed=0), n_stack=3)
    assert stacked.reset().shape == (2, 12)
    stacked.close()
    env.close()


def test_what_envpool_envs_cannot_do_is_said():
    with pytest.raises(ValueError, match="wrapper_class"):
        make_vec_env("CartPole-v1", n_envs=2, vec_env_cls=EnvPoolVecEnv, wrapper_class=lambda e: e)
    with pytest.raises(TypeError, match="env id"):
        EnvPoolVecEnv(lambda: None)
    env = EnvPoolVecEnv("CartPole-v1", n_envs=2, seed=0)
    with pytest.raises(NotImplementedError, match="run in C\\+\\+"):
        env.env_method("compute_reward")
    with pytest.raises(NotImplementedError, match="DummyVecEnv or SubprocVecEnv"):
        env.get_attr("some_attribute")
    assert env.get_attr("render_mode") == [None, None]
    env.close()
