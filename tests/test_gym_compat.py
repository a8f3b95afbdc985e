import warnings

import gymnasium
import numpy as np
import pytest
from gymnasium import spaces

from sbtf.common.envs.gym_compat import (RETIRED_ENV_IDS, OldGymAPIAdapter, convert_space, is_old_gym_env,
                                         resolve_env_id, wrap_env)


# ---- duck-typed stand-ins for old ``gym.spaces`` (gym itself is not installed) ----
class Box(object):
    def __init__(self, low, high, shape, dtype=np.float32):
        self.low = np.full(shape, low, dtype=dtype)
        self.high = np.full(shape, high, dtype=dtype)
        self.shape = shape
        self.dtype = np.dtype(dtype)


class Discrete(object):
    def __init__(self, n):
        self.n = n
        self.shape = ()
        self.dtype = np.dtype(np.int64)


class MultiBinary(object):
    def __init__(self, n):
        self.n = n


class OldCounterEnv(object):
    """An env written for gym <= 0.21: reset() -> obs, 4-tuple step, seed()."""

    metadata = {"render.modes": ["human", "rgb_array"]}

    def __init__(self, limit=3, time_limit_cut=False):
        self.observation_space = Box(-10.0, 10.0, (2,))
        self.action_space = Discrete(2)
        self.limit = limit
        self.time_limit_cut = time_limit_cut
        self.seeds = []
        self.t = 0
        self.rng = np.random.RandomState(0)
        self.custom_attribute = "hello"

    def seed(self, seed=None):
        self.seeds.append(seed)
        self.rng = np.random.RandomState(seed)
        return [seed]

    def reset(self):
        self.t = 0
        return np.array([self.rng.uniform(-1, 1), 0.0], dtype=np.float32)

    def step(self, action):
        self.t += 1
        done = self.t >= self.limit
        info = {}
        if done and self.time_limit_cut:
            info["TimeLimit.truncated"] = True
        return np.array([float(action), float(self.t)], dtype=np.float32), 1.0, done, info

    def render(self, mode="human"):
        return np.zeros((4, 4, 3), dtype=np.uint8) if mode == "rgb_array" else None

    def close(self):
        self.closed = True


class Gym026Env(object):
    """gym 0.26 style: new API, but not a gymnasium.Env."""

    def __init__(self):
        self.observation_space = spaces.Box(-1, 1, (1,), np.float32)
        self.action_space = spaces.Discrete(2)

    def reset(self, seed=None, options=None):
        return np.zeros(1, dtype=np.float32), {"seed": seed}

    def step(self, action):
        return np.ones(1, dtype=np.float32), 0.5, False, True, {}


def test_retired_ids_table():
    for old, new in [("Pendulum-v0", "Pendulum-v1"), ("LunarLander-v2", "LunarLander-v3"),
                     ("LunarLanderContinuous-v2", "LunarLanderContinuous-v3"),
                     ("BipedalWalker-v2", "BipedalWalker-v3"),
                     ("BipedalWalkerHardcore-v2", "BipedalWalkerHardcore-v3")]:
        assert RETIRED_ENV_IDS[old] == new
    # ids gymnasium still has are not remapped
    for kept in ("CartPole-v0", "CartPole-v1", "MountainCar-v0", "Acrobot-v1"):
        assert kept not in RETIRED_ENV_IDS
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            assert resolve_env_id(kept) == kept
    # every successor is a registered gymnasium id
    for successor in RETIRED_ENV_IDS.values():
        assert successor in gymnasium.registry, successor


def test_retired_id_warns_and_resolves():
    with pytest.warns(UserWarning, match=r"Pendulum-v0.*Pendulum-v1"):
        env = wrap_env("Pendulum-v0")
    assert env.spec.id == "Pendulum-v1"
    obs, info = env.reset(seed=0)
    assert obs.shape == (3,)
    env.close()


def test_env_id_and_make_kwargs():
    env = wrap_env("CartPole-v1", max_episode_steps=3)
    assert env.spec.max_episode_steps == 3
    env.reset(seed=0)
    results = [env.step(step % 2)[2:4] for step in range(3)]
    # alternating pushes keep the pole up: the third step is cut by the time limit
    assert results == [(False, False), (False, False), (False, True)]
    with pytest.raises(ValueError, match="only used with an env id"):
        wrap_env(gymnasium.make("CartPole-v1"), max_episode_steps=3)
    with pytest.raises(TypeError, match="Expected an env id"):
        wrap_env(42)


def test_gymnasium_env_passes_through():
    env = gymnasium.make("CartPole-v1")
    assert wrap_env(env) is env
    assert not is_old_gym_env(env)


def test_old_env_adapter_api():
    old = OldCounterEnv(limit=3)
    assert is_old_gym_env(old)
    env = wrap_env(old)
    assert isinstance(env, OldGymAPIAdapter) and isinstance(env, gymnasium.Env)
    assert isinstance(env.observation_space, spaces.Box)
    assert env.observation_space.shape == (2,) and env.observation_space.dtype == np.float32
    assert isinstance(env.action_space, spaces.Discrete) and env.action_space.n == 2

    obs, info = env.reset(seed=7)
    assert old.seeds == [7]
    assert info == {}
    expected_first = np.random.RandomState(7).uniform(-1, 1)
    assert obs[0] == pytest.approx(expected_first)
    # reset without a seed does not reseed
    env.reset()
    assert old.seeds == [7]

    obs, reward, terminated, truncated, info = env.step(1)
    assert (terminated, truncated) == (False, False)
    env.step(0)
    obs, reward, terminated, truncated, info = env.step(1)
    assert terminated is True and truncated is False
    np.testing.assert_array_equal(obs, [1.0, 3.0])

    # attributes of the old env are reachable (also through gymnasium's get_wrapper_attr)
    assert env.custom_attribute == "hello"
    assert env.get_wrapper_attr("custom_attribute") == "hello"
    env.set_wrapper_attr("custom_attribute", "bye")
    assert old.custom_attribute == "bye"
    # rendering: the old env lists rgb_array, so the adapter reports that render mode
    assert env.render_mode == "rgb_array"
    assert env.render().shape == (4, 4, 3)
    env.close()
    assert old.closed


def test_old_env_time_limit_means_truncated():
    env = wrap_env(OldCounterEnv(limit=2, time_limit_cut=True))
    env.reset()
    env.step(0)
    _, _, terminated, truncated, info = env.step(0)
    assert truncated is True and terminated is False
    assert info["TimeLimit.truncated"] is True


def test_old_env_step_with_wrong_arity():
    class Broken(OldCounterEnv):
        def step(self, action):
            return np.zeros(2, dtype=np.float32), 0.0, False

    env = wrap_env(Broken())
    env.reset()
    with pytest.raises(ValueError, match="returned 3 values"):
        env.step(0)


def test_gym026_style_env_passes_results_through():
    env = wrap_env(Gym026Env())
    obs, info = env.reset(seed=3)
    assert info == {"seed": 3}
    np.testing.assert_array_equal(obs, [0.0])
    obs, reward, terminated, truncated, info = env.step(0)
    np.testing.assert_array_equal(obs, [1.0])
    assert (reward, terminated, truncated, info) == (0.5, False, True, {})


def test_convert_space_kinds():
    box = convert_space(Box(0, 255, (4, 4, 3), dtype=np.uint8))
    assert isinstance(box, spaces.Box) and box.dtype == np.uint8 and box.shape == (4, 4, 3)
    assert np.all(box.high == 255)
    assert convert_space(Discrete(5)) == spaces.Discrete(5)
    assert convert_space(MultiBinary(3)) == spaces.MultiBinary(3)

    class MultiDiscrete(object):
        def __init__(self, nvec):
            self.nvec = np.asarray(nvec)

    class Dict(object):
        def __init__(self, sub):
            self.spaces = sub

    class Tuple(object):
        def __init__(self, sub):
            self.spaces = sub

    md = convert_space(MultiDiscrete([3, 4]))
    assert isinstance(md, spaces.MultiDiscrete) and list(md.nvec) == [3, 4]
    nested = convert_space(Dict({"a": Discrete(2), "b": Tuple((Box(-1, 1, (2,)), MultiBinary(2)))}))
    assert isinstance(nested, spaces.Dict)
    assert isinstance(nested["b"], spaces.Tuple)
    assert isinstance(nested["b"][0], spaces.Box)
    gym_space = spaces.Discrete(3)
    assert convert_space(gym_space) is gym_space
    with pytest.raises(TypeError, match="Cannot convert the space"):
        convert_space(object())


def test_not_an_env():
    assert not is_old_gym_env(object())
    assert not is_old_gym_env("CartPole-v1")
