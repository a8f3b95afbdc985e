"""Behaviour of sbtf.common.evaluation.evaluate_policy."""
import gymnasium
import numpy as np
import pytest
from gymnasium import spaces

from sbtf.bench import Monitor
from sbtf.common.evaluation import evaluate_policy
from sbtf.common.vec_env import DummyVecEnv, VecNormalize


class FixedEpisodeEnv(gymnasium.Env):
    """Episodes of ``ep_len`` steps with reward ``reward`` per step; obs = [step index]."""

    def __init__(self, ep_len=5, reward=2.0):
        self.observation_space = spaces.Box(0.0, 100.0, shape=(1,), dtype=np.float32)
        self.action_space = spaces.Discrete(2)
        self.ep_len, self.reward, self.t = ep_len, reward, 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return np.array([0.0], dtype=np.float32), {}

    def step(self, action):
        self.t += 1
        return np.array([self.t], dtype=np.float32), self.reward, self.t >= self.ep_len, False, {}


class LifeLoss(gymnasium.Wrapper):
    """Like Atari's EpisodicLifeEnv: a 'done' every 3 steps, the real episode goes on underneath."""

    def __init__(self, env):
        super().__init__(env)
        self.real_done, self.t, self.last_obs = True, 0, None

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        self.real_done = terminated or truncated
        self.t += 1
        self.last_obs = obs
        return obs, reward, terminated or truncated or self.t % 3 == 0, False, info

    def reset(self, **kwargs):
        if self.real_done:
            self.t = 0
            return self.env.reset(**kwargs)
        return self.last_obs, {}


class ConstantModel:
    def __init__(self):
        self.calls = []

    def predict(self, obs, state=None, mask=None, deterministic=False):
        self.calls.append(deterministic)
        return np.zeros(len(obs), dtype=np.int64), state


class RecurrentModel:
    """Checks that evaluate_policy hands the state back and passes mask=dones."""

    def __init__(self, n_envs):
        self.n_envs = n_envs
        self.expected_state = None
        self.expected_mask = np.zeros(n_envs, dtype=bool)
        self.calls = 0

    def predict(self, obs, state=None, mask=None, deterministic=False):
        if self.calls == 0:
            assert state is None
        else:
            assert state is self.expected_state
        np.testing.assert_array_equal(mask, self.expected_mask)
        self.calls += 1
        self.expected_state = np.full((self.n_envs, 2), float(self.calls))
        return np.zeros(len(obs), dtype=np.int64), self.expected_state


def test_single_gymnasium_env_mean_std():
    model = ConstantModel()
    with pytest.warns(UserWarning, match="Monitor"):
        mean, std = evaluate_policy(model, FixedEpisodeEnv(ep_len=5, reward=2.0), n_eval_episodes=3)
    assert (mean, std) == (10.0, 0.0)
    assert all(model.calls)  # deterministic=True by default
    with pytest.warns(UserWarning):
        rewards, lengths = evaluate_policy(model, FixedEpisodeEnv(4, 1.0), n_eval_episodes=2, deterministic=False,
                                           return_episode_rewards=True)
    assert rewards == [4.0, 4.0] and lengths == [4, 4] and model.calls[-1] is False


def test_several_envs_episode_count_and_distribution():
    lengths_by_env = [2, 3, 7]
    venv = DummyVecEnv([lambda n=n: Monitor(FixedEpisodeEnv(ep_len=n, reward=1.0), None) for n in lengths_by_env])
    rewards, lengths = evaluate_policy(ConstantModel(), venv, n_eval_episodes=7, return_episode_rewards=True)
    assert len(rewards) == 7
    # env i runs (7 + i) // 3 episodes: 2, 2 and 3; short episodes are not over-represented
    assert sorted(lengths) == [2, 2, 3, 3, 7, 7, 7]
    assert rewards == [float(n) for n in lengths]


def test_monitor_rewards_are_used_under_vecnormalize():
    venv = DummyVecEnv([lambda: Monitor(gymnasium.make("CartPole-v1"), None) for _ in range(2)])
    venv.seed(0)
    venv = VecNormalize(venv, norm_reward=True)
    venv.ret_rms.var[...] = 100.0  # make the normalized rewards clearly different from 1
    rewards, lengths = evaluate_policy(ConstantModel(), venv, n_eval_episodes=4, return_episode_rewards=True)
    assert len(rewards) == 4
    assert rewards == [float(length) for length in lengths]  # CartPole: raw reward 1 per step


def test_life_loss_done_is_not_an_episode_when_monitored():
    venv = DummyVecEnv([lambda: LifeLoss(Monitor(FixedEpisodeEnv(ep_len=9, reward=1.0), None))])
    rewards, lengths = evaluate_policy(ConstantModel(), venv, n_eval_episodes=2, return_episode_rewards=True)
    assert rewards == [9.0, 9.0] and lengths == [9, 9]


def test_recurrent_state_and_mask_are_passed():
    n_envs = 2
    venv = DummyVecEnv([lambda n=n: Monitor(FixedEpisodeEnv(ep_len=n), None) for n in (2, 3)])
    model = RecurrentModel(n_envs)
    seen_dones = []

    def callback(locals_, globals_):
        model.expected_mask = np.array(locals_["dones"], dtype=bool)
        seen_dones.append(locals_["dones"].copy())

    evaluate_policy(model, venv, n_eval_episodes=4, callback=callback)
    assert model.calls == len(seen_dones) == 6
    assert seen_dones[1].tolist() == [True, False] and seen_dones[2].tolist() == [False, True]


def test_reward_threshold():
    venv = DummyVecEnv([lambda: Monitor(FixedEpisodeEnv(3, 1.0), None)])
    assert evaluate_policy(ConstantModel(), venv, n_eval_episodes=2, reward_threshold=2.5) == (3.0, 0.0)
    with pytest.raises(AssertionError, match="below threshold"):
        evaluate_policy(ConstantModel(), venv, n_eval_episodes=2, reward_threshold=3.5)
    with pytest.raises(ValueError):
        evaluate_policy(ConstantModel(), venv, n_eval_episodes=0)


def test_render_is_called():
    class RenderCount(DummyVecEnv):
        renders = 0

        def render(self, mode="human"):
            RenderCount.renders += 1

    venv = RenderCount([lambda: Monitor(FixedEpisodeEnv(3, 1.0), None)])
    evaluate_policy(ConstantModel(), venv, n_eval_episodes=1, render=True)
    assert RenderCount.renders == 3
