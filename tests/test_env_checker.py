import warnings

import gymnasium
import numpy as np
import pytest
from gymnasium import spaces

from sbtf.common.env_checker import check_env
from sbtf.common.identity_env import IdentityEnv, IdentityEnvBox, IdentityEnvMultiBinary, IdentityEnvMultiDiscrete


class GoodEnv(gymnasium.Env):
    """A well-formed env; attributes tweak one thing at a time to break it."""

    def __init__(self, obs_space=None, action_space=None):
        self.observation_space = obs_space or spaces.Box(-1, 1, (3,), np.float32)
        self.action_space = action_space or spaces.Box(-1, 1, (2,), np.float32)

    def _obs(self):
        if isinstance(self.observation_space, spaces.Box) and self.observation_space.dtype == np.float32:
            space = self.observation_space
            return np.clip(self.np_random.normal(size=space.shape), space.low, space.high).astype(space.dtype)
        return self.observation_space.sample()

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        if seed is not None:
            self.observation_space.seed(seed)
        return self._obs(), {}

    def step(self, action):
        return self._obs(), 0.5, False, False, {}


def _no_warnings(callable_):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        callable_()


@pytest.mark.parametrize("env_fn", [
    GoodEnv,
    lambda: gymnasium.make("CartPole-v1"),
    lambda: gymnasium.make("Acrobot-v1"),
    lambda: IdentityEnv(5),
    IdentityEnvBox,
    lambda: IdentityEnvMultiDiscrete(3),
    lambda: IdentityEnvMultiBinary(4),
    lambda: GoodEnv(obs_space=spaces.Box(0, 255, (40, 40, 3), np.uint8)),
])
def test_good_envs_pass_without_warnings(env_fn):
    _no_warnings(lambda: check_env(env_fn()))


def test_wrong_observation_shape():
    class Env(GoodEnv):
        def step(self, action):
            return np.zeros(4, dtype=np.float32), 0.0, False, False, {}

    with pytest.raises(AssertionError, match=r"returned by `step\(\)` has shape \(4,\) but the observation space has "
                                             r"shape \(3,\)"):
        check_env(Env(), warn=False)


def test_observation_outside_space():
    class Env(GoodEnv):
        def reset(self, *, seed=None, options=None):
            super().reset(seed=seed)
            return np.array([0.0, 5.0, 0.0], dtype=np.float32), {}

    with pytest.raises(AssertionError, match=r"`reset\(\)` is not within the observation space: 1 value\(s\) outside "
                                             r"\[low, high\], first at index \(1,\)"):
        check_env(Env(), warn=False)


def test_observation_not_an_array_and_discrete_not_int():
    class ListEnv(GoodEnv):
        def reset(self, *, seed=None, options=None):
            super().reset(seed=seed)
            return [0.0, 0.0, 0.0], {}

    with pytest.raises(AssertionError, match="must be a numpy array"):
        check_env(ListEnv(), warn=False)

    class FloatDiscrete(GoodEnv):
        def __init__(self):
            super().__init__(obs_space=spaces.Discrete(3))

        def reset(self, *, seed=None, options=None):
            super().reset(seed=seed)
            return 1.0, {}

    with pytest.raises(AssertionError, match="must be an int for a Discrete observation space"):
        check_env(FloatDiscrete(), warn=False)


def test_old_style_returns_in_gymnasium_subclass():
    class ResetOnlyObs(GoodEnv):
        def reset(self, *, seed=None, options=None):
            super().reset(seed=seed)
            return self._obs()

    with pytest.raises(AssertionError, match=r"`reset\(\)` must return a tuple \(obs, info\)"):
        check_env(ResetOnlyObs(), warn=False)

    class FourTupleStep(GoodEnv):
        def step(self, action):
            return self._obs(), 0.0, False, {}

    with pytest.raises(AssertionError, match=r"must return a tuple of 5 values .* got 4 value"):
        check_env(FourTupleStep(), warn=False)

    class NoSeedReset(GoodEnv):
        def reset(self):
            return self._obs(), {}

    # a reset() without seed is the old gym API: sbtf adapts it, so check_env says so and checks the adapted env
    # (tests/test_env_checker_old_api.py)
    with pytest.warns(UserWarning, match="old gym API"):
        check_env(NoSeedReset(), warn=False)


def test_wrong_reward_done_info_types():
    class ArrayReward(GoodEnv):
        def step(self, action):
            return self._obs(), np.array([1.0]), False, False, {}

    with pytest.raises(AssertionError, match="reward returned by `step\\(\\)` must be a float"):
        check_env(ArrayReward(), warn=False)

    class IntTerminated(GoodEnv):
        def step(self, action):
            return self._obs(), 1.0, 0, False, {}

    with pytest.raises(AssertionError, match="`terminated` value returned by `step\\(\\)` must be a bool"):
        check_env(IntTerminated(), warn=False)

    class ListInfo(GoodEnv):
        def step(self, action):
            return self._obs(), 1.0, False, False, []

    with pytest.raises(AssertionError, match="info returned by `step\\(\\)` must be a dict"):
        check_env(ListInfo(), warn=False)


def test_nan_detection():
    class NanEnv(GoodEnv):
        def __init__(self):
            super().__init__(obs_space=spaces.Box(-np.inf, np.inf, (3,), np.float32))
            self.t = 0

        def step(self, action):
            self.t += 1
            reward = float("nan") if self.t == 4 else 0.0
            return np.zeros(3, dtype=np.float32), reward, False, False, {}

    with pytest.raises(ValueError, match="returned NaN or inf after 3 random step"):
        check_env(NanEnv(), warn=False)


def test_missing_or_wrong_spaces():
    class NoSpace(gymnasium.Env):
        def __init__(self):
            self.action_space = spaces.Discrete(2)

    with pytest.raises(AssertionError, match="You must specify observation_space"):
        check_env(NoSpace())

    class WrongSpace(GoodEnv):
        def __init__(self):
            super().__init__()
            self.action_space = [0, 1]

    with pytest.raises(AssertionError, match="action_space must be a gymnasium.spaces.Space, got list"):
        check_env(WrongSpace())

    with pytest.raises(AssertionError, match="must inherit from gymnasium.Env"):
        check_env(object())


@pytest.mark.parametrize("action_space, message", [
    (spaces.Box(0, 5, (2,), np.float32), "symmetric and normalized Box action space"),
    (spaces.Box(-2, 2, (2,), np.float32), "symmetric and normalized Box action space"),
    (spaces.Box(-np.inf, np.inf, (2,), np.float32), "infinite bounds"),
    (spaces.Tuple((spaces.Discrete(2), spaces.Discrete(2))), "no sbtf algorithm supports"),
    (spaces.Discrete(3, start=1), r"start=1"),
])
def test_action_space_warnings(action_space, message):
    with pytest.warns(UserWarning, match=message):
        check_env(GoodEnv(action_space=action_space))


@pytest.mark.parametrize("obs_space, message", [
    (spaces.Box(0, 1, (40, 40, 3), np.float32), "image but its dtype is float32"),
    (spaces.Box(0, 100, (40, 40, 1), np.uint8), r"bounds are not \[0, 255\]"),
    (spaces.Box(0, 255, (20, 20, 3), np.uint8), "at least 36x36"),
    (spaces.Box(0, 255, (3, 40, 40), np.uint8), "channel-first"),
    (spaces.Dict({"a": spaces.Box(-1, 1, (2,), np.float32), "n": spaces.Dict({"x": spaces.Discrete(2)})}),
     r"Nested observation spaces are not supported .*keys \['n'\]\)\. You should flatten it"),
    (spaces.Tuple((spaces.Discrete(2), spaces.Discrete(3))), "Tuple space"),
])
def test_observation_space_warnings(obs_space, message):
    with pytest.warns(UserWarning, match=message):
        check_env(GoodEnv(obs_space=obs_space))


def test_dtype_mismatch_warns():
    class Float64Obs(GoodEnv):
        def step(self, action):
            return np.zeros(3, dtype=np.float64), 0.0, False, False, {}

    with pytest.warns(UserWarning, match=r"has dtype float64 but the observation space has dtype float32"):
        check_env(Float64Obs())


def test_non_deterministic_reset_warns():
    class Unseeded(GoodEnv):
        def reset(self, *, seed=None, options=None):
            return np.random.uniform(-1, 1, 3).astype(np.float32), {}

    with pytest.warns(UserWarning, match="not reproducible"):
        check_env(Unseeded())


class OldGymEnv(object):
    class Box(object):
        def __init__(self):
            self.low = np.full(2, -1.0, np.float32)
            self.high = np.full(2, 1.0, np.float32)
            self.shape = (2,)
            self.dtype = np.float32

    class Discrete(object):
        n = 3

    def __init__(self, bad_obs=False):
        self.observation_space = self.Box()
        self.action_space = self.Discrete()
        self.bad_obs = bad_obs
        self.rng = np.random.RandomState(0)

    def seed(self, seed=None):
        self.rng = np.random.RandomState(seed)

    def reset(self):
        return self.rng.uniform(-1, 1, 2).astype(np.float32)

    def step(self, action):
        obs = np.full(2, 3.0 if self.bad_obs else 0.5, np.float32)
        return obs, 1.0, False, {}


def test_old_gym_env_is_checked_through_the_adapter():
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        check_env(OldGymEnv())
    messages = [str(w.message) for w in record]
    assert any("old gym API" in m and "OldGymAPIAdapter" in m for m in messages)
    assert len(messages) == 1, messages  # nothing else is wrong with it
    with pytest.warns(UserWarning, match="old gym API"), \
            pytest.raises(AssertionError, match=r"`step\(\)` is not within the observation space"):
        check_env(OldGymEnv(bad_obs=True))


def test_render_check():
    class RenderEnv(GoodEnv):
        metadata = {"render_modes": ["rgb_array"]}

        def __init__(self):
            super().__init__()
            self.render_mode = "rgb_array"
            self.rendered = 0

        def render(self):
            self.rendered += 1
            return np.zeros((4, 4, 3), dtype=np.uint8)

    env = RenderEnv()
    check_env(env)
    assert env.rendered == 0
    check_env(env, skip_render_check=False)
    assert env.rendered == 1
    with pytest.warns(UserWarning, match="no render_mode"):
        check_env(GoodEnv(), skip_render_check=False)
