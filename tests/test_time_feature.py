"""TimeFeatureWrapper: the rl-baselines-zoo / sb3-contrib time feature on gymnasium envs."""
import warnings

import gymnasium
import numpy as np
import pytest
from gymnasium import spaces
from gymnasium.wrappers import TimeLimit

from sbtf.common.env_checker import check_env
from sbtf.common.wrappers import TimeFeatureWrapper, find_max_episode_steps


class CounterEnv(gymnasium.Env):
    """Observations [t, -t] (float32 unless told), never terminates; optional Dict (goal env) observations."""

    def __init__(self, dtype=np.float32, goal=False):
        box = spaces.Box(-1e6, 1e6, (2,), dtype)
        if goal:
            self.observation_space = spaces.Dict({"observation": box, "achieved_goal": spaces.Box(-1, 1, (1,)),
                                                  "desired_goal": spaces.Box(-1, 1, (1,))})
        else:
            self.observation_space = box
        self.action_space = spaces.Discrete(2)
        self.goal = goal
        self.dtype = dtype
        self.t = 0

    def _obs(self):
        obs = np.array([self.t, -self.t], dtype=self.dtype)
        if self.goal:
            return {"observation": obs, "achieved_goal": np.zeros(1, np.float32),
                    "desired_goal": np.ones(1, np.float32)}
        return obs

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return self._obs(), {}

    def step(self, action):
        self.t += 1
        return self._obs(), 1.0, False, False, {}


def _feature(obs):
    return float((obs["observation"] if isinstance(obs, dict) else obs)[-1])


def test_box_observation_gets_the_remaining_time():
    env = TimeFeatureWrapper(gymnasium.make("Pendulum-v1"))
    assert env.max_steps == 200  # from the TimeLimit of gymnasium.make
    space = env.observation_space
    assert space.shape == (4,) and space.dtype == np.float32
    np.testing.assert_array_equal(space.low[-1:], [0.0])
    np.testing.assert_array_equal(space.high[-1:], [1.0])
    np.testing.assert_array_equal(space.low[:3], env.env.observation_space.low)
    obs, _ = env.reset(seed=0)
    assert obs.shape == (4,) and obs.dtype == np.float32 and _feature(obs) == 1.0
    steps = 0
    truncated = False
    while not truncated:
        obs, _, terminated, truncated, _ = env.step(env.action_space.sample())
        steps += 1
        assert space.contains(obs)
        assert _feature(obs) == pytest.approx(1.0 - steps / 200.0, abs=1e-6)
    assert steps == 200 and _feature(obs) == 0.0
    obs, _ = env.reset()
    assert _feature(obs) == 1.0  # the count restarts


def test_the_wrapped_observation_is_unchanged():
    inner = gymnasium.make("CartPole-v1")
    env = TimeFeatureWrapper(gymnasium.make("CartPole-v1"))
    raw, _ = inner.reset(seed=3)
    obs, _ = env.reset(seed=3)
    np.testing.assert_array_equal(obs[:-1], raw)
    raw, *_ = inner.step(1)
    obs, *_ = env.step(1)
    np.testing.assert_array_equal(obs[:-1], raw)
    assert _feature(obs) == pytest.approx(1.0 - 1 / 500.0)


def test_max_steps_sources():
    # no time limit: the max_steps argument (default 1000)
    assert TimeFeatureWrapper(CounterEnv()).max_steps == 1000
    assert TimeFeatureWrapper(CounterEnv(), max_steps=50).max_steps == 50
    # a TimeLimit wrapper (no spec) takes precedence over the argument
    assert TimeFeatureWrapper(TimeLimit(CounterEnv(), 30), max_steps=50).max_steps == 30
    assert find_max_episode_steps(TimeLimit(TimeLimit(CounterEnv(), 40), 30)) == 30
    assert find_max_episode_steps(CounterEnv()) is None


def test_feature_counts_down_and_stays_at_zero_past_max_steps():
    env = TimeFeatureWrapper(CounterEnv(), max_steps=4)
    obs, _ = env.reset()
    features = [_feature(obs)]
    for _ in range(6):
        obs, *_ = env.step(0)
        features.append(_feature(obs))
    assert features == pytest.approx([1.0, 0.75, 0.5, 0.25, 0.0, 0.0, 0.0])


def test_test_mode_keeps_the_feature_constant():
    env = TimeFeatureWrapper(CounterEnv(), max_steps=4, test_mode=True)
    assert env.test_mode
    obs, _ = env.reset()
    values = [_feature(obs)] + [_feature(env.step(0)[0]) for _ in range(6)]
    assert values == [1.0] * 7


def test_dict_observation_feature_goes_to_the_observation_entry():
    inner = CounterEnv(goal=True)
    inner_space = inner.observation_space
    env = TimeFeatureWrapper(inner, max_steps=10)
    space = env.observation_space
    assert isinstance(space, spaces.Dict)
    assert space["observation"].shape == (3,)
    assert space["achieved_goal"] == inner_space["achieved_goal"]
    assert inner.observation_space["observation"].shape == (2,)  # the wrapped env's space is not changed
    obs, _ = env.reset()
    np.testing.assert_array_equal(obs["observation"], [0.0, 0.0, 1.0])
    obs, *_ = env.step(0)
    np.testing.assert_allclose(obs["observation"], [1.0, -1.0, 0.9])
    np.testing.assert_array_equal(obs["desired_goal"], [1.0])
    assert space.contains(obs)


def test_integer_observations_get_a_float_feature():
    env = TimeFeatureWrapper(CounterEnv(dtype=np.int64), max_steps=3)
    assert env.observation_space.dtype == np.float32
    obs, _ = env.reset()
    obs, *_ = env.step(0)
    assert obs.dtype == np.float32
    np.testing.assert_allclose(obs, [1.0, -1.0, 2.0 / 3.0], rtol=1e-6)


def test_unsupported_spaces_and_arguments():
    class ImageEnv(CounterEnv):
        def __init__(self):
            super().__init__()
            self.observation_space = spaces.Box(0, 255, (4, 4, 1), np.uint8)

    with pytest.raises(TypeError, match="1-d Box"):
        TimeFeatureWrapper(ImageEnv())
    with pytest.raises(TypeError, match="1-d Box"):
        TimeFeatureWrapper(gymnasium.make("FrozenLake-v1"))

    class NoObservationKey(CounterEnv):
        def __init__(self):
            super().__init__()
            self.observation_space = spaces.Dict({"state": spaces.Box(-1, 1, (2,))})

    with pytest.raises(TypeError, match="'observation' entry"):
        TimeFeatureWrapper(NoObservationKey())
    with pytest.raises(ValueError, match="max_steps must be a positive integer"):
        TimeFeatureWrapper(CounterEnv(), max_steps=0)


def test_wrapped_env_passes_check_env():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check_env(TimeFeatureWrapper(gymnasium.make("CartPole-v1")))


def test_reset_seed_is_forwarded():
    env = TimeFeatureWrapper(gymnasium.make("Pendulum-v1"))
    first, _ = env.reset(seed=7)
    env.step(env.action_space.sample())
    again, _ = env.reset(seed=7)
    np.testing.assert_array_equal(first, again)
