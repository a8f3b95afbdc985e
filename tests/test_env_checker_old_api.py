"""check_env on envs written for the old gym API: it says so, says sbtf adapts them, and checks the adapted env."""
import warnings

import gymnasium as gym  # what old code becomes after "import gym" -> "import gymnasium as gym"
import numpy as np
import pytest
from gymnasium import spaces

from sbtf.common.env_checker import OldGymAPIWarning, check_env
from sbtf.common.envs.gym_compat import OldGymAPIAdapter, is_old_gym_env, wrap_env
from sbtf.common.vec_env import DummyVecEnv


class OldWalkEnv(gym.Env):
    """An env written for gym <= 0.21: reset() -> obs, 4-tuple step, seed(); a 1-d walk ending at +-3 or 10 steps."""

    def __init__(self, bad_obs=False):
        self.observation_space = spaces.Box(-5.0, 5.0, (2,), np.float32)
        self.action_space = spaces.Discrete(2)
        self.bad_obs = bad_obs
        self.rng = np.random.RandomState(0)
        self.pos, self.t = 0.0, 0

    def seed(self, seed=None):
        self.rng = np.random.RandomState(seed)
        return [seed]

    def _obs(self):
        return np.array([9.0 if self.bad_obs else self.pos, self.t / 10.0], dtype=np.float32)

    def reset(self):
        self.pos, self.t = float(self.rng.uniform(-1, 1)), 0
        return self._obs()

    def step(self, action):
        self.pos += 1.0 if action == 1 else -1.0
        self.t += 1
        done = abs(self.pos) >= 3 or self.t >= 10
        info = {"TimeLimit.truncated": True} if self.t >= 10 and abs(self.pos) < 3 else {}
        return self._obs(), 1.0, done, info


class OldRandomEnv(gym.Env):
    """Old-API code that draws from self.np_random and has no seed(): seeding goes through gymnasium's np_random."""

    def __init__(self):
        self.observation_space = spaces.Box(-1.0, 1.0, (3,), np.float32)
        self.action_space = spaces.Box(-1.0, 1.0, (1,), np.float32)

    def reset(self):
        return self.np_random.uniform(-1, 1, 3).astype(np.float32)

    def step(self, action):
        return self.np_random.uniform(-1, 1, 3).astype(np.float32), 0.0, False, {}


class PlainOldEnv(object):
    """Not a gymnasium.Env at all (the old gym package's Env), with the old API."""

    def __init__(self):
        self.observation_space = spaces.Box(-1.0, 1.0, (2,), np.float32)
        self.action_space = spaces.Discrete(3)

    def seed(self, seed=None):
        return [seed]

    def reset(self):
        return np.zeros(2, np.float32)

    def step(self, action):
        return np.full(2, 0.5, np.float32), 1.0, False, {}


def _check(env, **kwargs):
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        check_env(env, **kwargs)
    return record


@pytest.mark.parametrize("env_cls, kind", [(OldWalkEnv, "subclasses gymnasium.Env"),
                                           (PlainOldEnv, "is not a gymnasium.Env")])
def test_old_api_env_is_reported_adapted_and_checked(env_cls, kind):
    record = _check(env_cls())
    assert len(record) == 1, [str(w.message) for w in record]  # nothing else is wrong with these envs
    warning = record[0]
    assert issubclass(warning.category, OldGymAPIWarning) and issubclass(warning.category, UserWarning)
    message = str(warning.message)
    assert message.startswith("{} uses the old gym API ({}".format(env_cls.__name__, kind))
    assert "sbtf adapts it automatically" in message and "OldGymAPIAdapter" in message
    # how to port it
    assert "reset(self, *, seed=None, options=None)" in message
    assert "super().reset(seed=seed)" in message and "self.np_random" in message
    assert "(obs, reward, terminated, truncated, info)" in message and "TimeLimit.truncated" in message


def test_problems_of_the_adapted_env_are_still_found():
    with pytest.warns(OldGymAPIWarning), \
            pytest.raises(AssertionError, match=r"`reset\(\)` is not within the observation space"):
        check_env(OldWalkEnv(bad_obs=True))


def test_seeding_an_old_env_without_seed_method_is_reproducible():
    # the adapter seeds the env's np_random, so the determinism check finds nothing to say
    record = _check(OldRandomEnv(), warn=True)
    assert [w.category for w in record] == [OldGymAPIWarning], [str(w.message) for w in record]


def test_sbtf_adapts_such_envs_as_check_env_says():
    env = OldWalkEnv()
    assert is_old_gym_env(env)
    adapted = wrap_env(env)
    assert isinstance(adapted, OldGymAPIAdapter) and adapted.env is env
    obs, info = adapted.reset(seed=4)
    assert obs.shape == (2,) and info == {}
    first = obs.copy()
    np.testing.assert_array_equal(adapted.reset(seed=4)[0], first)  # seed() was called
    # the old done + info["TimeLimit.truncated"] becomes truncated, not terminated
    result = None
    for _ in range(10):
        result = adapted.step(0 if _ % 2 else 1)
    _, _, terminated, truncated, _ = result
    assert truncated and not terminated

    venv = DummyVecEnv([OldWalkEnv, OldWalkEnv])
    assert venv.reset().shape == (2, 2)
    obs, rewards, dones, infos = venv.step(np.array([1, 0]))
    assert obs.shape == (2, 2) and rewards.tolist() == [1.0, 1.0]
    venv.close()


def test_gymnasium_envs_are_not_taken_for_old_ones():
    env = gym.make("CartPole-v1")
    assert not is_old_gym_env(env)
    assert wrap_env(env) is env
    record = _check(env)
    assert not record, [str(w.message) for w in record]


def test_a_model_learns_on_an_old_api_env():
    from sbtf import A2C

    model = A2C("MlpPolicy", OldWalkEnv(), n_steps=5, seed=0)
    model.learn(total_timesteps=20)
    action, _ = model.predict(np.zeros(2, np.float32))
    assert OldWalkEnv().action_space.contains(int(np.asarray(action).reshape(())))
