import argparse
import collections
import copy
import functools
import glob
import os
import pickle
import sys
import types
import warnings

import gymnasium
import numpy as np
import pytest
from gymnasium import spaces

from sbtf.common.identity_env import IdentityEnv, IdentityEnvBox, IdentityEnvMultiBinary, IdentityEnvMultiDiscrete
from sbtf.common.misc_util import boolean_flag, flatten_lists, mpi_rank_or_zero, zipsame
from sbtf.common.vec_env import (AlreadySteppingError, CloudpickleWrapper, DummyVecEnv, NotSteppingError,
                                 SubprocVecEnv, VecCheckNan, VecEnv, VecEnvWorkerError, VecEnvWrapper, VecFrameStack,
                                 VecNormalize, VecVideoRecorder, copy_obs_dict, dict_to_obs, obs_space_info,
                                 sync_envs_normalization, tile_images, unwrap_vec_normalize)


# --------------------------------------------------------------------------------------------------------------------
# Test environments
# --------------------------------------------------------------------------------------------------------------------
class CountingEnv(gymnasium.Env):
    """obs = [start + t]; reward = t (+ action); ends after ep_len steps (terminated, or truncated when `truncate`)."""

    metadata = {"render_modes": ["rgb_array"], "render_fps": 10}

    def __init__(self, ep_len=3, truncate=False, render_mode=None):
        self.observation_space = spaces.Box(-np.inf, np.inf, (1,), np.float32)
        self.action_space = spaces.Discrete(2)
        self.ep_len = ep_len
        self.truncate = truncate
        self.render_mode = render_mode
        self.t = 0
        self.start = 0.0
        self.custom = "initial"

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        self.start = float(self.np_random.integers(0, 1000))
        return np.array([self.start], dtype=np.float32), {"start": self.start}

    def step(self, action):
        self.t += 1
        done = self.t >= self.ep_len
        obs = np.array([self.start + self.t], dtype=np.float32)
        return obs, float(self.t + int(action)), done and not self.truncate, done and self.truncate, {"t": self.t}

    def render(self):
        return np.full((6, 8, 3), self.t % 256, dtype=np.uint8)

    def add(self, a, b=0):
        return a + b + self.t


class SpaceEnv(gymnasium.Env):
    """Observations sampled from an arbitrary space; episodes of 3 steps."""

    def __init__(self, observation_space):
        self.observation_space = observation_space
        self.action_space = spaces.Discrete(3)
        self.t = 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        if seed is not None:
            self.observation_space.seed(seed)
        self.t = 0
        return self.observation_space.sample(), {}

    def step(self, action):
        self.t += 1
        return self.observation_space.sample(), 1.0, self.t >= 3, False, {}


class NanEnv(gymnasium.Env):
    """Returns NaN observations from the given step on."""

    def __init__(self, nan_at=2):
        self.observation_space = spaces.Box(-1, 1, (2,), np.float32)
        self.action_space = spaces.Box(-1, 1, (1,), np.float32)
        self.nan_at = nan_at
        self.t = 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return np.zeros(2, dtype=np.float32), {}

    def step(self, action):
        self.t += 1
        obs = np.full(2, np.nan if self.t >= self.nan_at else 0.0, dtype=np.float32)
        return obs, 0.0, False, False, {}


class CrashingEnv(CountingEnv):
    def __init__(self, mode="raise"):
        super().__init__()
        self.mode = mode

    def step(self, action):
        if self.mode == "raise":
            raise RuntimeError("boom in step")
        os._exit(3)


class FailingConstructorEnv(CountingEnv):
    def __init__(self):
        raise ValueError("cannot build this env")


class OldStyleEnv(object):
    """gym <= 0.21 API, with duck-typed spaces built from gymnasium-free objects."""

    class _Box(object):
        def __init__(self):
            self.low = np.zeros(2, dtype=np.float32)
            self.high = np.full(2, 100.0, dtype=np.float32)
            self.shape = (2,)
            self.dtype = np.dtype(np.float32)

    class _Discrete(object):
        n = 2

    def __init__(self):
        self.observation_space = self._Box()
        self.action_space = self._Discrete()
        self.t = 0
        self.seeded = None

    def seed(self, seed=None):
        self.seeded = seed
        return [seed]

    def reset(self):
        self.t = 0
        return np.array([0.0, 0.0], dtype=np.float32)

    def step(self, action):
        self.t += 1
        info = {"TimeLimit.truncated": True} if self.t == 4 else {}
        return np.array([float(action), float(self.t)], dtype=np.float32), 1.0, self.t >= 4, info


def _counting(ep_len=3, truncate=False, render_mode=None):
    return CountingEnv(ep_len=ep_len, truncate=truncate, render_mode=render_mode)


# --------------------------------------------------------------------------------------------------------------------
# DummyVecEnv
# --------------------------------------------------------------------------------------------------------------------
def test_dummy_auto_reset_and_terminal_observation():
    venv = DummyVecEnv([functools.partial(_counting, 2), functools.partial(_counting, 3)])
    venv.seed(0)
    obs = venv.reset()
    assert obs.shape == (2, 1) and obs.dtype == np.float32
    starts = obs[:, 0].copy()
    obs, rewards, dones, infos = venv.step(np.array([1, 0]))
    assert rewards.dtype == np.float32 and rewards.shape == (2,)
    assert dones.dtype == np.bool_ and dones.shape == (2,)
    np.testing.assert_array_equal(rewards, [2.0, 1.0])
    np.testing.assert_array_equal(dones, [False, False])
    np.testing.assert_array_equal(obs[:, 0], starts + 1)
    obs, rewards, dones, infos = venv.step(np.array([0, 0]))
    np.testing.assert_array_equal(dones, [True, False])
    # the finished env was reset: its obs is a new start, the last obs of the episode is in the info
    np.testing.assert_array_equal(infos[0]["terminal_observation"], [starts[0] + 2])
    assert infos[0]["TimeLimit.truncated"] is False
    assert venv.reset_infos[0]["start"] == obs[0, 0]
    assert "terminal_observation" not in infos[1]
    assert obs[1, 0] == starts[1] + 2
    # returned arrays are copies, not views of internal buffers
    kept = obs.copy()
    venv.step(np.array([0, 0]))
    np.testing.assert_array_equal(obs, kept)
    venv.close()


def test_dummy_time_limit_truncated():
    venv = DummyVecEnv([lambda: gymnasium.wrappers.TimeLimit(CountingEnv(ep_len=100), max_episode_steps=2),
                        functools.partial(_counting, 2, True), functools.partial(_counting, 2, False)])
    venv.reset()
    venv.step(np.zeros(3, dtype=np.int64))
    _, _, dones, infos = venv.step(np.zeros(3, dtype=np.int64))
    assert dones.tolist() == [True, True, True]
    assert [info["TimeLimit.truncated"] for info in infos] == [True, True, False]
    for info in infos:
        assert "terminal_observation" in info


def test_dummy_seeding_is_reproducible():
    def rollout(seed):
        venv = DummyVecEnv([lambda: gymnasium.make("CartPole-v1") for _ in range(3)])
        seeds = venv.seed(seed)
        observations = [venv.reset()]
        actions = []
        for _ in range(30):
            action = np.array([venv.action_space.sample() for _ in range(3)])
            actions.append(action)
            observations.append(venv.step(action)[0])
        venv.close()
        return seeds, np.array(observations), np.array(actions)

    seeds_a, obs_a, act_a = rollout(5)
    seeds_b, obs_b, act_b = rollout(5)
    assert seeds_a == [5, 6, 7]
    np.testing.assert_array_equal(obs_a, obs_b)
    np.testing.assert_array_equal(act_a, act_b)
    _, obs_c, _ = rollout(6)
    assert not np.array_equal(obs_a[0], obs_c[0])
    # env i got seed + i at the reset
    for i in range(3):
        expected, _ = gymnasium.make("CartPole-v1").reset(seed=5 + i)
        np.testing.assert_array_equal(obs_a[0, i], expected)


def test_dummy_seed_applies_once_and_none_draws_seeds():
    venv = DummyVecEnv([_counting, _counting])
    venv.seed(3)
    first = venv.reset()
    second = venv.reset()  # no new seed: the generators go on
    venv.seed(3)
    third = venv.reset()
    np.testing.assert_array_equal(first, third)
    assert not np.array_equal(first, second)
    seeds = venv.seed(None)
    assert len(seeds) == 2 and seeds[1] == seeds[0] + 1 and all(isinstance(s, int) for s in seeds)
    # sub-env action spaces are seeded too
    venv.seed(11)
    draws_a = [space.sample() for space in venv.get_attr("action_space")]
    venv.seed(11)
    draws_b = [space.sample() for space in venv.get_attr("action_space")]
    assert draws_a == draws_b


@pytest.mark.parametrize("space", [
    spaces.Box(-1, 1, (3, 2), np.float32),
    spaces.Box(0, 255, (4, 4, 3), np.uint8),
    spaces.Discrete(5),
    spaces.MultiDiscrete([2, 3, 4]),
    spaces.MultiBinary(4),
])
def test_dummy_simple_spaces(space):
    venv = DummyVecEnv([functools.partial(SpaceEnv, space) for _ in range(2)])
    venv.seed(0)
    obs = venv.reset()
    assert obs.shape == (2,) + space.shape
    assert obs.dtype == space.dtype
    for _ in range(3):
        obs, _, dones, infos = venv.step(np.array([0, 1]))
        assert all(space.contains(o) for o in obs)
    assert dones.all()  # episodes of 3 steps
    assert all(space.contains(info["terminal_observation"]) for info in infos)


def test_dummy_dict_and_tuple_spaces():
    dict_space = spaces.Dict({"pos": spaces.Box(-1, 1, (2,), np.float32), "id": spaces.Discrete(4)})
    venv = DummyVecEnv([functools.partial(SpaceEnv, dict_space) for _ in range(3)])
    obs = venv.reset()
    assert isinstance(obs, dict) and set(obs) == {"pos", "id"}
    assert obs["pos"].shape == (3, 2) and obs["id"].shape == (3,)
    obs2, *_ = venv.step(np.zeros(3, dtype=np.int64))
    assert obs2["pos"] is not obs["pos"]

    tuple_space = spaces.Tuple((spaces.Box(-1, 1, (2,), np.float32), spaces.MultiBinary(3)))
    venv = DummyVecEnv([functools.partial(SpaceEnv, tuple_space) for _ in range(2)])
    obs = venv.reset()
    assert isinstance(obs, tuple) and len(obs) == 2
    assert obs[0].shape == (2, 2) and obs[1].shape == (2, 3) and obs[1].dtype == np.int8
    for _ in range(3):
        obs, _, dones, infos = venv.step(np.zeros(2, dtype=np.int64))
    assert dones.all() and isinstance(infos[0]["terminal_observation"], tuple)


def test_dummy_attr_methods_and_errors():
    venv = DummyVecEnv([_counting, _counting, _counting])
    venv.reset()
    assert venv.get_attr("custom") == ["initial"] * 3
    venv.set_attr("custom", "changed", indices=[0, 2])
    assert venv.get_attr("custom") == ["changed", "initial", "changed"]
    assert venv.get_attr("custom", indices=1) == ["initial"]
    venv.step(np.zeros(3, dtype=np.int64))
    assert venv.env_method("add", 1, b=2) == [4, 4, 4]
    assert venv.env_method("add", 10, indices=[1]) == [11]
    env = CountingEnv()
    with pytest.raises(ValueError, match="same environment instance"):
        DummyVecEnv([lambda: env, lambda: env])


def test_dummy_render_and_images():
    venv = DummyVecEnv([functools.partial(_counting, 5, False, "rgb_array") for _ in range(3)])
    venv.reset()
    venv.step(np.zeros(3, dtype=np.int64))
    images = venv.get_images()
    assert len(images) == 3 and images[0].shape == (6, 8, 3)
    big = venv.render(mode="rgb_array")
    assert big.shape == (12, 16, 3)  # 3 images tiled 2x2
    assert big[:6, :8].max() == 1 and big[6:, 8:].max() == 0  # padding cell is black
    no_render = DummyVecEnv([_counting])
    no_render.reset()
    with pytest.raises(ValueError, match="render_mode='rgb_array'"):
        no_render.get_images()


def test_tile_images():
    imgs = np.arange(5 * 2 * 2 * 1).reshape(5, 2, 2, 1)
    tiled = tile_images(imgs)
    assert tiled.shape == (6, 4, 1)
    np.testing.assert_array_equal(tiled[0:2, 0:2], imgs[0])
    np.testing.assert_array_equal(tiled[0:2, 2:4], imgs[1])
    np.testing.assert_array_equal(tiled[4:6, 0:2], imgs[4])
    assert tiled[4:6, 2:4].sum() == 0


def test_old_gym_env_inside_dummy_vec_env():
    venv = DummyVecEnv([OldStyleEnv, OldStyleEnv])
    assert isinstance(venv.observation_space, spaces.Box) and isinstance(venv.action_space, spaces.Discrete)
    venv.seed(21)
    obs = venv.reset()
    assert [env.unwrapped.env.seeded for env in venv.envs] == [21, 22]
    np.testing.assert_array_equal(obs, np.zeros((2, 2)))
    for _ in range(3):
        obs, rewards, dones, infos = venv.step(np.array([1, 0]))
    np.testing.assert_array_equal(obs, [[1.0, 3.0], [0.0, 3.0]])
    obs, rewards, dones, infos = venv.step(np.array([1, 0]))
    assert dones.tolist() == [True, True]
    assert infos[0]["TimeLimit.truncated"] is True
    np.testing.assert_array_equal(infos[0]["terminal_observation"], [1.0, 4.0])
    np.testing.assert_array_equal(obs, np.zeros((2, 2)))


def test_identity_envs_in_vec_env():
    venv = DummyVecEnv([lambda: IdentityEnv(dim=4, ep_length=5)])
    venv.seed(0)
    obs = venv.reset()
    total = 0.0
    for _ in range(5):
        obs, rewards, dones, infos = venv.step(obs)  # repeating the observation is always right
        total += rewards[0]
    assert total == 5.0
    assert dones[0] and infos[0]["TimeLimit.truncated"] is True
    wrong = (obs + 1) % 4
    assert venv.step(wrong)[1][0] == 0.0

    box = IdentityEnvBox(eps=0.1, ep_length=3)
    state, _ = box.reset(seed=1)
    assert box.step(state + 0.05)[1] == 1.0
    assert box.step(box.state + 0.2)[1] == 0.0
    multi = IdentityEnvMultiDiscrete(dim=3)
    assert multi.action_space == spaces.MultiDiscrete([3, 3])
    state, _ = multi.reset(seed=0)
    assert multi.step(state)[1] == 1.0
    binary = IdentityEnvMultiBinary(dim=5)
    state, _ = binary.reset(seed=0)
    assert binary.step(state)[1] == 1.0 and binary.step(1 - binary.state)[1] == 0.0
    with pytest.raises(ValueError, match="at most one"):
        IdentityEnv(dim=2, space=spaces.Discrete(2))


def test_util_functions():
    space = spaces.Dict({"a": spaces.Box(-1, 1, (2,)), "b": spaces.Discrete(3)})
    keys, shapes, dtypes = obs_space_info(space)
    assert sorted(keys) == ["a", "b"] and shapes["a"] == (2,) and shapes["b"] == () and dtypes["b"] == np.int64
    keys, shapes, _ = obs_space_info(spaces.Tuple((spaces.Discrete(2), spaces.Box(0, 1, (3,)))))
    assert keys == [0, 1] and shapes[1] == (3,)
    assert obs_space_info(spaces.Box(0, 1, (3,)))[0] == [None]
    with pytest.raises(NotImplementedError, match="Nested"):
        obs_space_info(spaces.Dict({"a": spaces.Dict({"b": spaces.Discrete(2)})}))
    data = collections.OrderedDict([("a", np.zeros(2)), ("b", np.ones(3))])
    copied = copy_obs_dict(data)
    copied["a"][0] = 5
    assert data["a"][0] == 0
    assert dict_to_obs(spaces.Box(0, 1, (2,)), {None: data["a"]}) is data["a"]
    assert dict_to_obs(spaces.Tuple((spaces.Discrete(2), spaces.Discrete(2))), {0: 1, 1: 2}) == (1, 2)
    with pytest.raises(ValueError):
        dict_to_obs(spaces.Box(0, 1, (2,)), {"x": 1})


def test_cloudpickle_wrapper_and_errors():
    offset = 3
    wrapper = pickle.loads(pickle.dumps(CloudpickleWrapper(lambda x: x + offset)))
    assert wrapper.var(1) == 4
    assert "already running" in str(AlreadySteppingError())
    assert "not running" in str(NotSteppingError())


# --------------------------------------------------------------------------------------------------------------------
# VecEnvWrapper
# --------------------------------------------------------------------------------------------------------------------
class _PassThrough(VecEnvWrapper):
    shadowed = "outer"

    def reset(self):
        return self.venv.reset()

    def step_wait(self):
        return self.venv.step_wait()


class _Inner(_PassThrough):
    shadowed = "inner"
    only_inner = "deep"


class _Plain(VecEnvWrapper):
    def reset(self):
        return self.venv.reset()

    def step_wait(self):
        return self.venv.step_wait()


def test_vec_env_wrapper_attribute_lookup():
    base = DummyVecEnv([_counting])
    inner = _Inner(base)
    outer = _PassThrough(inner)
    assert outer.only_inner == "deep"
    assert outer.num_envs == 1 and outer.unwrapped is base
    assert outer.envs is base.envs
    # an attribute defined by two wrappers below the one asked is ambiguous
    with pytest.raises(AttributeError, match="ambiguous"):
        _Plain(_Inner(_Inner(base))).only_inner  # noqa: B018
    assert _Plain(_Inner(base)).only_inner == "deep"
    # the inner 'shadowed' is hidden by the outer class attribute: direct access gives the outer one
    assert outer.shadowed == "outer"
    with pytest.raises(AttributeError):
        outer.does_not_exist  # noqa: B018
    obs = outer.reset()
    assert obs.shape == (1, 1)


# --------------------------------------------------------------------------------------------------------------------
# SubprocVecEnv
# --------------------------------------------------------------------------------------------------------------------
@pytest.mark.timeout(120)
@pytest.mark.parametrize("start_method", ["spawn", "forkserver"])
def test_subproc_matches_dummy(start_method):
    fns = [functools.partial(_counting, 2), functools.partial(_counting, 3, True)]
    sub = SubprocVecEnv(fns, start_method=start_method)
    dummy = DummyVecEnv(fns)
    try:
        assert sub.observation_space == dummy.observation_space and sub.action_space == dummy.action_space
        assert sub.seed(4) == dummy.seed(4) == [4, 5]
        np.testing.assert_array_equal(sub.reset(), dummy.reset())
        for step in range(7):
            action = np.array([step % 2, 1])
            s_obs, s_rew, s_done, s_info = sub.step(action)
            d_obs, d_rew, d_done, d_info = dummy.step(action)
            np.testing.assert_array_equal(s_obs, d_obs)
            assert s_obs.dtype == np.float32
            np.testing.assert_array_equal(s_rew, d_rew)
            assert s_rew.dtype == np.float32 and s_done.dtype == np.bool_
            np.testing.assert_array_equal(s_done, d_done)
            for si, di in zip(s_info, d_info):
                assert si.keys() == di.keys()
                if "terminal_observation" in si:
                    np.testing.assert_array_equal(si["terminal_observation"], di["terminal_observation"])
                    assert si["TimeLimit.truncated"] == di["TimeLimit.truncated"]
    finally:
        sub.close()
    assert all(not process.is_alive() for process in sub.processes)
    assert all(process.exitcode == 0 for process in sub.processes)
    sub.close()  # closing twice is fine


@pytest.mark.timeout(120)
def test_subproc_default_start_method_attrs_and_spaces():
    dict_space = spaces.Dict({"pos": spaces.Box(-1, 1, (2,), np.float32), "id": spaces.Discrete(4)})
    sub = SubprocVecEnv([_counting, _counting])
    try:
        assert sub.start_method == "forkserver"
        sub.reset()
        assert sub.get_attr("custom") == ["initial", "initial"]
        sub.set_attr("custom", "x", indices=1)
        assert sub.get_attr("custom") == ["initial", "x"]
        sub.step(np.array([0, 0]))
        assert sub.env_method("add", 2, b=1) == [4, 4]
        assert sub.env_method("add", 2, indices=[0]) == [3]
    finally:
        sub.close()
    sub = SubprocVecEnv([functools.partial(SpaceEnv, dict_space), functools.partial(SpaceEnv, dict_space)],
                        start_method="forkserver")
    try:
        obs = sub.reset()
        assert isinstance(obs, dict) and obs["pos"].shape == (2, 2) and obs["id"].shape == (2,)
        for _ in range(3):
            obs, _, dones, infos = sub.step(np.array([0, 0]))
        assert dones.all() and set(infos[0]["terminal_observation"]) == {"pos", "id"}
    finally:
        sub.close()


@pytest.mark.timeout(120)
def test_subproc_tuple_space_and_old_gym_env():
    tuple_space = spaces.Tuple((spaces.Discrete(2), spaces.Box(0, 1, (3,), np.float32)))
    sub = SubprocVecEnv([functools.partial(SpaceEnv, tuple_space)] * 2, start_method="forkserver")
    try:
        obs = sub.reset()
        assert isinstance(obs, tuple) and obs[0].shape == (2,) and obs[1].shape == (2, 3)
    finally:
        sub.close()
    sub = SubprocVecEnv([OldStyleEnv, OldStyleEnv], start_method="forkserver")
    try:
        sub.seed(1)
        sub.reset()
        for _ in range(4):
            obs, _, dones, infos = sub.step(np.array([1, 1]))
        assert dones.all() and infos[1]["TimeLimit.truncated"] is True
        assert sub.get_attr("seeded") == [1, 2]
    finally:
        sub.close()


@pytest.mark.timeout(60)
def test_subproc_env_exception_gives_clear_error():
    sub = SubprocVecEnv([_counting, functools.partial(CrashingEnv, "raise")], start_method="forkserver")
    try:
        sub.reset()
        with pytest.raises(VecEnvWorkerError, match=r"env 1 raised RuntimeError: boom in step") as info:
            sub.step(np.array([0, 0]))
        assert "Traceback in the worker process" in str(info.value)
        # the pipes stay in step: the healthy env can still be used
        assert sub.get_attr("t", indices=0) == [1]
    finally:
        sub.close()
    assert all(not process.is_alive() for process in sub.processes)


@pytest.mark.timeout(60)
def test_subproc_dead_worker_raises_instead_of_hanging():
    sub = SubprocVecEnv([_counting, functools.partial(CrashingEnv, "exit")], start_method="forkserver")
    try:
        sub.reset()
        with pytest.raises(VecEnvWorkerError, match=r"env 1 .*died unexpectedly \(exit code 3\)"):
            sub.step(np.array([0, 0]))
        assert sub.get_attr("t", indices=0) == [1]  # the healthy worker stays in step
        with pytest.raises(VecEnvWorkerError, match="died"):
            sub.step(np.array([0, 0]))
        assert sub.get_attr("t", indices=0) == [2]
    finally:
        sub.close()
    with pytest.raises(RuntimeError, match="closed"):
        sub.reset()


@pytest.mark.timeout(60)
def test_subproc_failing_constructor():
    with pytest.raises(VecEnvWorkerError, match="env 1 raised ValueError: cannot build this env"):
        SubprocVecEnv([_counting, FailingConstructorEnv], start_method="forkserver")


# --------------------------------------------------------------------------------------------------------------------
# VecNormalize
# --------------------------------------------------------------------------------------------------------------------
class RewardEnv(gymnasium.Env):
    """Deterministic observations and rewards, episodes of `ep_len` steps."""

    def __init__(self, scale=1.0, ep_len=4):
        self.observation_space = spaces.Box(-np.inf, np.inf, (2,), np.float32)
        self.action_space = spaces.Box(-1, 1, (1,), np.float32)
        self.scale = scale
        self.ep_len = ep_len
        self.t = 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return np.array([self.scale, -self.scale], dtype=np.float32), {}

    def step(self, action):
        self.t += 1
        obs = np.array([self.scale * (self.t + 1), self.t ** 2], dtype=np.float32)
        return obs, float(self.scale * self.t), self.t >= self.ep_len, False, {}


def _moments_with_prior(data, epsilon=1e-4):
    data = np.asarray(data, dtype=np.float64)
    total = epsilon + data.shape[0]
    mean = data.sum(axis=0) / total
    var = (epsilon * (1.0 + mean ** 2) + ((data - mean) ** 2).sum(axis=0)) / total
    return mean, var


def _make_reward_venv():
    return DummyVecEnv([functools.partial(RewardEnv, 1.0, 3), functools.partial(RewardEnv, 2.0, 5)])


def test_vec_normalize_maths_against_numpy():
    gamma, eps = 0.9, 1e-8
    venv = VecNormalize(_make_reward_venv(), gamma=gamma, epsilon=eps, clip_obs=10.0, clip_reward=10.0)
    raw_venv = _make_reward_venv()
    obs = venv.reset()
    raw_obs = raw_venv.reset()
    # at reset the observation statistics are not updated (prior mean 0, var 1)
    np.testing.assert_allclose(obs, raw_obs / np.sqrt(1 + eps), rtol=1e-6)
    np.testing.assert_array_equal(venv.get_original_obs(), raw_obs)
    seen_obs = []
    returns = [np.zeros(2)]  # the zero returns of the reset count in the return statistics
    ret = np.zeros(2)
    for _ in range(9):
        action = np.zeros((2, 1), dtype=np.float32)
        obs, rewards, dones, infos = venv.step(action)
        raw_obs, raw_rewards, raw_dones, _ = raw_venv.step(action)
        seen_obs.extend(raw_obs)
        ret = ret * gamma + raw_rewards
        returns.append(ret.copy())
        mean, var = _moments_with_prior(seen_obs)
        expected_obs = np.clip((raw_obs - mean) / np.sqrt(var + eps), -10, 10)
        np.testing.assert_allclose(obs, expected_obs, rtol=1e-5, atol=1e-6)
        assert obs.dtype == np.float32 and rewards.dtype == np.float32
        _, ret_var = _moments_with_prior(np.concatenate(returns))
        np.testing.assert_allclose(rewards, np.clip(raw_rewards / np.sqrt(ret_var + eps), -10, 10), rtol=1e-5)
        np.testing.assert_array_equal(venv.get_original_reward(), raw_rewards)
        ret[raw_dones] = 0
    np.testing.assert_allclose(venv.obs_rms.mean, _moments_with_prior(seen_obs)[0], rtol=1e-10)


def test_vec_normalize_terminal_observation_is_normalized():
    venv = VecNormalize(DummyVecEnv([functools.partial(RewardEnv, 1.0, 2)]))
    venv.reset()
    venv.step(np.zeros((1, 1)))
    _, _, dones, infos = venv.step(np.zeros((1, 1)))
    assert dones[0]
    raw_terminal = np.array([3.0, 4.0])  # RewardEnv(scale 1) after 2 steps
    expected = np.clip((raw_terminal - venv.obs_rms.mean) / np.sqrt(venv.obs_rms.var + venv.epsilon), -10, 10)
    np.testing.assert_allclose(infos[0]["terminal_observation"], expected, rtol=1e-5)


def test_vec_normalize_training_flag_and_clipping():
    venv = VecNormalize(_make_reward_venv(), training=False, clip_obs=0.5, clip_reward=0.1)
    venv.reset()
    for _ in range(4):
        obs, rewards, _, _ = venv.step(np.zeros((2, 1)))
        assert np.all(np.abs(obs) <= 0.5) and np.all(np.abs(rewards) <= 0.1 + 1e-7)
    assert venv.obs_rms.count == pytest.approx(1e-4) and venv.ret_rms.count == pytest.approx(1e-4)
    plain = VecNormalize(_make_reward_venv(), norm_obs=False, norm_reward=False)
    obs = plain.reset()
    raw = _make_reward_venv().reset()
    np.testing.assert_array_equal(obs, raw)
    assert plain.step(np.zeros((2, 1)))[1].tolist() == [1.0, 2.0]
    assert plain.obs_rms.count > 1  # statistics are still updated while training
    # Dict spaces are normalised per entry (tests/test_vec_env_dict_normalize.py)
    with pytest.raises(ValueError, match="Tuple"):
        VecNormalize(DummyVecEnv([functools.partial(SpaceEnv, spaces.Tuple((spaces.Discrete(2),)))]))


def test_vec_normalize_save_load_round_trip(tmp_path):
    venv = VecNormalize(_make_reward_venv(), gamma=0.95, clip_obs=5.0, norm_reward=False)
    venv.reset()
    for _ in range(6):
        venv.step(np.zeros((2, 1)))
    path = str(tmp_path / "vecnormalize.pkl")
    venv.save(path)
    assert os.listdir(tmp_path) == ["vecnormalize.pkl"]  # no temporary file left behind

    # the file is plain data: a dict of numpy arrays and numbers, loadable without sbtf classes
    class NoClassesUnpickler(pickle.Unpickler):
        def find_class(self, module, name):
            if module.startswith("numpy"):
                return super().find_class(module, name)
            raise pickle.UnpicklingError("unexpected class {}.{}".format(module, name))

    with open(path, "rb") as handle:
        data = NoClassesUnpickler(handle).load()
    assert isinstance(data, dict) and "venv" not in data and data["gamma"] == 0.95

    loaded = VecNormalize.load(path, _make_reward_venv())
    np.testing.assert_array_equal(loaded.obs_rms.mean, venv.obs_rms.mean)
    np.testing.assert_array_equal(loaded.obs_rms.var, venv.obs_rms.var)
    assert loaded.obs_rms.count == venv.obs_rms.count
    np.testing.assert_array_equal(loaded.ret_rms.var, venv.ret_rms.var)
    assert (loaded.gamma, loaded.clip_obs, loaded.norm_reward, loaded.training) == (0.95, 5.0, False, True)
    assert loaded.num_envs == 2 and loaded.ret.shape == (2,)
    np.testing.assert_array_equal(loaded.reset(), venv.normalize_obs(_make_reward_venv().reset()))

    # overwriting keeps the file valid
    venv.training = False
    venv.save(path)
    assert VecNormalize.load(path, _make_reward_venv()).training is False

    # plain pickling of the wrapper works the same way (venv excluded), then set_venv
    clone = pickle.loads(pickle.dumps(venv))
    assert clone.__dict__.get("venv") is None
    clone.set_venv(_make_reward_venv())
    np.testing.assert_array_equal(clone.obs_rms.mean, venv.obs_rms.mean)
    with pytest.raises(ValueError, match="already initialized"):
        clone.set_venv(_make_reward_venv())
    with pytest.raises(ValueError, match="incompatible"):
        VecNormalize.load(path, DummyVecEnv([_counting]))


def test_vec_normalize_load_refuses_code(tmp_path):
    class Evil(object):
        def __reduce__(self):
            return (os.system, ("echo this must not run",))

    path = tmp_path / "evil.pkl"
    path.write_bytes(pickle.dumps({"obs_rms": Evil(), "ret_rms": Evil()}))
    # (not builtins.print: importing ray replaces it with its own function)
    with pytest.raises(ValueError, match=r"Refusing to load (os|posix)\.system"):
        VecNormalize.load(str(path), _make_reward_venv())
    (tmp_path / "garbage.pkl").write_bytes(b"not a pickle")
    with pytest.raises(ValueError, match="not a VecNormalize statistics file"):
        VecNormalize.load(str(tmp_path / "garbage.pkl"), _make_reward_venv())


@pytest.fixture
def fake_sb2(monkeypatch):
    """Fake stable_baselines / gym modules, to write pickles exactly as stable-baselines 2 did."""
    modules = {}
    for name in ("stable_baselines", "stable_baselines.common", "stable_baselines.common.running_mean_std",
                 "stable_baselines.common.vec_env", "stable_baselines.common.vec_env.vec_normalize",
                 "gym", "gym.spaces", "gym.spaces.box"):
        modules[name] = types.ModuleType(name)
        monkeypatch.setitem(sys.modules, name, modules[name])

    class RunningMeanStd(object):
        def __init__(self, epsilon=1e-4, shape=()):
            self.mean = np.zeros(shape, 'float64')
            self.var = np.ones(shape, 'float64')
            self.count = epsilon

    class VecNormalize(object):
        pass

    class Box(object):
        def __init__(self, low, high):
            self.low, self.high = low, high
            self.np_random = np.random.RandomState(0)

    for cls, module in ((RunningMeanStd, "stable_baselines.common.running_mean_std"),
                        (VecNormalize, "stable_baselines.common.vec_env.vec_normalize"), (Box, "gym.spaces.box")):
        cls.__module__ = module
        cls.__qualname__ = cls.__name__
        setattr(modules[module], cls.__name__, cls)
    return types.SimpleNamespace(RunningMeanStd=RunningMeanStd, VecNormalize=VecNormalize, Box=Box,
                                 undo=monkeypatch.undo)


def test_load_running_average_reads_sb2_pickles(tmp_path, fake_sb2):
    obs_rms = fake_sb2.RunningMeanStd(shape=(2,))
    obs_rms.mean = np.array([1.5, -2.0])
    obs_rms.var = np.array([4.0, 0.25])
    obs_rms.count = np.float64(123.0)  # SB2 stored a numpy scalar after updates
    ret_rms = fake_sb2.RunningMeanStd(shape=())
    ret_rms.var = np.array(9.0)
    ret_rms.count = 50.0001
    for rms, name in ((obs_rms, "obs_rms"), (ret_rms, "ret_rms")):
        with open(str(tmp_path / (name + ".pkl")), "wb") as handle:
            pickle.dump(rms, handle, protocol=2)
    fake_sb2.undo()
    # the class the pickles name is not importable any more: the files are read without it
    module = sys.modules.get("stable_baselines.common.running_mean_std")
    assert getattr(module, "RunningMeanStd", None) is not fake_sb2.RunningMeanStd

    venv = VecNormalize(_make_reward_venv())
    with pytest.warns(DeprecationWarning):
        venv.load_running_average(str(tmp_path))
    np.testing.assert_array_equal(venv.obs_rms.mean, [1.5, -2.0])
    np.testing.assert_array_equal(venv.obs_rms.var, [4.0, 0.25])
    assert venv.obs_rms.count == 123.0 and isinstance(venv.obs_rms.count, float)
    assert float(venv.ret_rms.var) == 9.0
    obs = venv.normalize_obs(np.array([[3.5, -1.0]]))
    np.testing.assert_allclose(obs, [[1.0, 2.0]], rtol=1e-6)

    # sbtf's own save_running_average writes files the same method reads back
    out = tmp_path / "sbtf"
    with pytest.warns(DeprecationWarning):
        venv.save_running_average(str(out))
    assert sorted(os.listdir(out)) == ["obs_rms.pkl", "ret_rms.pkl"]
    other = VecNormalize(_make_reward_venv())
    with pytest.warns(DeprecationWarning):
        other.load_running_average(str(out))
    np.testing.assert_array_equal(other.obs_rms.var, [4.0, 0.25])
    wrong_shape = VecNormalize(DummyVecEnv([_counting]))
    with pytest.warns(DeprecationWarning), pytest.raises(ValueError, match="do not match"):
        wrong_shape.load_running_average(str(out))


def test_load_sb2_vec_normalize_pickle(tmp_path, fake_sb2):
    legacy = fake_sb2.VecNormalize()
    obs_rms = fake_sb2.RunningMeanStd(shape=(2,))
    obs_rms.mean = np.array([1.0, 2.0])
    obs_rms.var = np.array([1.0, 4.0])
    legacy.__dict__.update({
        "obs_rms": obs_rms, "ret_rms": fake_sb2.RunningMeanStd(shape=()), "clip_obs": 3.0, "clip_reward": 7.0,
        "gamma": 0.98, "epsilon": 1e-8, "training": False, "norm_obs": True, "norm_reward": False,
        "old_obs": np.zeros((2, 2)), "num_envs": 2,
        "observation_space": fake_sb2.Box(np.zeros(2), np.ones(2)),
    })
    path = str(tmp_path / "vecnormalize.pkl")
    with open(path, "wb") as handle:
        pickle.dump(legacy, handle, protocol=2)
    fake_sb2.undo()

    loaded = VecNormalize.load(path, _make_reward_venv())
    assert isinstance(loaded, VecNormalize)
    assert (loaded.clip_obs, loaded.clip_reward, loaded.gamma, loaded.training, loaded.norm_reward) == \
        (3.0, 7.0, 0.98, False, False)
    np.testing.assert_allclose(loaded.normalize_obs(np.array([[2.0, 4.0]])), [[1.0, 1.0]], rtol=1e-6)


def test_unwrap_and_sync_normalization():
    train = VecFrameStack(VecNormalize(_make_reward_venv()), 1)
    evaluation = VecFrameStack(VecNormalize(_make_reward_venv(), training=False), 1)
    assert unwrap_vec_normalize(train) is train.venv
    assert unwrap_vec_normalize(_make_reward_venv()) is None
    train.reset()
    for _ in range(3):
        train.step(np.zeros((2, 1)))
    sync_envs_normalization(train, evaluation)
    np.testing.assert_array_equal(evaluation.venv.obs_rms.mean, train.venv.obs_rms.mean)
    assert evaluation.venv.obs_rms is not train.venv.obs_rms
    with pytest.raises(ValueError, match="no VecNormalize"):
        sync_envs_normalization(train, VecFrameStack(_make_reward_venv(), 1))


# --------------------------------------------------------------------------------------------------------------------
# VecFrameStack, VecCheckNan, VecVideoRecorder
# --------------------------------------------------------------------------------------------------------------------
def test_vec_frame_stack():
    venv = VecFrameStack(DummyVecEnv([functools.partial(_counting, 3), functools.partial(_counting, 5)]), n_stack=3)
    assert venv.observation_space.shape == (3,)
    venv.seed(0)
    obs = venv.reset()
    starts = obs[:, -1].copy()
    np.testing.assert_array_equal(obs[:, :2], np.zeros((2, 2)))
    obs, _, _, _ = venv.step(np.array([0, 0]))
    np.testing.assert_array_equal(obs, np.stack([[0, s, s + 1] for s in starts]))
    obs, _, _, _ = venv.step(np.array([0, 0]))
    np.testing.assert_array_equal(obs, np.stack([[s, s + 1, s + 2] for s in starts]))
    previous, previous_copy = obs, obs.copy()
    obs, _, dones, infos = venv.step(np.array([0, 0]))
    np.testing.assert_array_equal(previous, previous_copy)  # returned arrays are not views of the stack buffer
    assert dones.tolist() == [True, False]
    np.testing.assert_array_equal(infos[0]["terminal_observation"], [starts[0] + 1, starts[0] + 2, starts[0] + 3])
    # after the reset the history of env 0 starts from zeros again
    assert obs[0, 0] == 0 and obs[0, 1] == 0
    np.testing.assert_array_equal(obs[1], [starts[1] + 1, starts[1] + 2, starts[1] + 3])

    image_venv = VecFrameStack(DummyVecEnv([functools.partial(SpaceEnv, spaces.Box(0, 255, (4, 4, 2), np.uint8))]),
                               n_stack=4)
    assert image_venv.observation_space.shape == (4, 4, 8)
    assert image_venv.reset().shape == (1, 4, 4, 8)
    with pytest.raises(ValueError, match="Box"):
        VecFrameStack(DummyVecEnv([functools.partial(SpaceEnv, spaces.Discrete(3))]), 2)


class _RandomEpisodeEnv(gymnasium.Env):
    """Observations sampled from a space; each step ends the episode with probability 0.3."""

    def __init__(self, observation_space, seed):
        self.observation_space = copy.deepcopy(observation_space)  # its own sampler
        self.action_space = spaces.Discrete(2)
        self.observation_space.seed(seed)
        self.rng = np.random.default_rng(seed)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return self.observation_space.sample(), {}

    def step(self, action):
        return self.observation_space.sample(), 0.0, bool(self.rng.random() < 0.3), False, {}


class _ReferenceStack:
    """The plain statement of frame stacking: a list of the last n frames per env, zeros before the first."""

    def __init__(self, first_obs, n_stack, axis):
        self.n_stack, self.axis = n_stack, axis
        self.frames = [self._fresh(obs) for obs in first_obs]

    def _fresh(self, obs):
        return [np.zeros_like(obs)] * (self.n_stack - 1) + [obs]

    def stacked(self, i):
        return np.concatenate(self.frames[i], axis=self.axis)

    def step(self, observations, dones, terminals):
        stacked_terminals = {}
        for i, obs in enumerate(observations):
            if dones[i]:
                stacked_terminals[i] = np.concatenate(self.frames[i][1:] + [terminals[i]], axis=self.axis)
                self.frames[i] = self._fresh(obs)
            else:
                self.frames[i] = self.frames[i][1:] + [obs]
        return stacked_terminals


@pytest.mark.parametrize("space_name, n_stack, channels_order, axis", [
    ("grey image", 4, None, -1),
    ("vector", 3, None, -1),
    ("rgb image", 2, "last", -1),
    ("channel-first image", 3, None, 0),
    ("vector", 3, "first", 0),
    ("vector", 1, None, -1),
])
def test_vec_frame_stack_matches_plain_stacking(space_name, n_stack, channels_order, axis):
    space = {"grey image": spaces.Box(0, 255, (5, 6, 1), np.uint8),
             "rgb image": spaces.Box(0, 255, (5, 6, 3), np.uint8),
             "channel-first image": spaces.Box(0, 255, (2, 5, 6), np.uint8),
             "vector": spaces.Box(-1, 1, (3,), np.float32)}[space_name]
    inner = DummyVecEnv([functools.partial(_RandomEpisodeEnv, space, seed) for seed in range(3)])
    plain = DummyVecEnv([functools.partial(_RandomEpisodeEnv, space, seed) for seed in range(3)])
    venv = VecFrameStack(inner, n_stack, channels_order=channels_order)
    expected_shape = list(space.shape)
    expected_shape[axis] *= n_stack
    assert venv.observation_space.shape == tuple(expected_shape)
    obs = venv.reset()
    reference = _ReferenceStack(plain.reset(), n_stack, axis)
    for i in range(3):
        np.testing.assert_array_equal(obs[i], reference.stacked(i))
    n_dones = 0
    for _ in range(40):
        obs, _, dones, infos = venv.step(np.zeros(3, dtype=np.int64))
        plain_obs, _, plain_dones, plain_infos = plain.step(np.zeros(3, dtype=np.int64))
        assert dones.tolist() == plain_dones.tolist()
        terminals = reference.step(plain_obs, plain_dones,
                                   [info.get("terminal_observation") for info in plain_infos])
        n_dones += int(dones.sum())
        for i in range(3):
            np.testing.assert_array_equal(obs[i], reference.stacked(i))
            if dones[i]:
                np.testing.assert_array_equal(infos[i]["terminal_observation"], terminals[i])
    assert n_dones > 5


def test_vec_frame_stack_dict_observations():
    space = spaces.Dict({"image": spaces.Box(0, 255, (5, 6, 1), np.uint8),
                         "state": spaces.Box(-1, 1, (3,), np.float32),
                         "first": spaces.Box(0, 255, (1, 5, 6), np.uint8)})
    inner = DummyVecEnv([functools.partial(_RandomEpisodeEnv, space, seed) for seed in range(2)])
    plain = DummyVecEnv([functools.partial(_RandomEpisodeEnv, space, seed) for seed in range(2)])
    venv = VecFrameStack(inner, 3, channels_order={"state": "last"})
    assert venv.observation_space["image"].shape == (5, 6, 3)
    assert venv.observation_space["state"].shape == (9,)
    assert venv.observation_space["first"].shape == (3, 5, 6)
    assert venv.observation_space["image"].dtype == np.uint8
    axes = {"image": -1, "state": -1, "first": 0}
    obs = venv.reset()
    first = plain.reset()
    references = {key: _ReferenceStack(first[key], 3, axes[key]) for key in axes}
    n_dones = 0
    for _ in range(30):
        obs, _, dones, infos = venv.step(np.zeros(2, dtype=np.int64))
        plain_obs, _, plain_dones, plain_infos = plain.step(np.zeros(2, dtype=np.int64))
        n_dones += int(dones.sum())
        for key, reference in references.items():
            terminals = reference.step(plain_obs[key], plain_dones,
                                       [info.get("terminal_observation", {}).get(key) for info in plain_infos])
            for i in range(2):
                np.testing.assert_array_equal(obs[key][i], reference.stacked(i))
                if dones[i]:
                    np.testing.assert_array_equal(infos[i]["terminal_observation"][key], terminals[i])
    assert n_dones > 3

    cube = VecFrameStack(DummyVecEnv([functools.partial(SpaceEnv, spaces.Box(0, 255, (3, 3, 3), np.uint8))]), 2)
    assert cube.observation_space.shape == (3, 3, 6)  # a tie stays channels-last (stable-baselines 2)
    with pytest.raises(ValueError, match="'count'.*Box"):
        VecFrameStack(DummyVecEnv([functools.partial(
            SpaceEnv, spaces.Dict({"count": spaces.Discrete(3), "state": spaces.Box(-1, 1, (2,))}))]), 2)
    with pytest.raises(ValueError, match="keys.*'nope'"):
        VecFrameStack(DummyVecEnv([functools.partial(_RandomEpisodeEnv, space, 0)]), 2, channels_order={"nope": "last"})
    with pytest.raises(ValueError, match="channels_order.*'middle'"):
        VecFrameStack(DummyVecEnv([functools.partial(_RandomEpisodeEnv, space, 0)]), 2, channels_order="middle")


def test_ppo2_multi_input_policy_on_stacked_dict_observations():
    from sbtf import PPO2
    from sbtf.common.multi_input_envs import SimpleMultiObsEnv

    venv = VecFrameStack(DummyVecEnv([SimpleMultiObsEnv, SimpleMultiObsEnv]), 2)
    assert venv.observation_space["img"].shape[-1] == 2 and venv.observation_space["vec"].shape == (10,)
    model = PPO2("MultiInputPolicy", venv, n_steps=8, nminibatches=2, noptepochs=1, seed=0,
                 policy_kwargs=dict(features_extractor_kwargs=dict(cnn_output_dim=8)))
    model.learn(32)
    obs = venv.reset()
    actions, _ = model.predict(obs, deterministic=True)
    assert actions.shape == (2,)


def test_vec_check_nan():
    venv = VecCheckNan(DummyVecEnv([functools.partial(NanEnv, 2)]), raise_exception=True)
    venv.reset()
    venv.step(np.zeros((1, 1), dtype=np.float32))
    with pytest.raises(ValueError, match=r"(?s)found nan in observations.*Originated from the environment"):
        venv.step(np.zeros((1, 1), dtype=np.float32))
    venv = VecCheckNan(DummyVecEnv([functools.partial(NanEnv, 100)]), raise_exception=True)
    venv.reset()
    with pytest.raises(ValueError, match=r"(?s)found nan in actions.*RL model"):
        venv.step(np.array([[np.nan]], dtype=np.float32))
    with pytest.raises(ValueError, match=r"found inf in actions"):
        venv.step(np.array([[np.inf]], dtype=np.float32))
    no_inf = VecCheckNan(DummyVecEnv([functools.partial(NanEnv, 100)]), raise_exception=True, check_inf=False)
    no_inf.reset()
    no_inf.step(np.array([[np.inf]], dtype=np.float32))  # inf is not checked

    warn_venv = VecCheckNan(DummyVecEnv([functools.partial(NanEnv, 1)]))
    warn_venv.reset()
    with pytest.warns(UserWarning, match="found nan in observations"):
        warn_venv.step(np.zeros((1, 1), dtype=np.float32))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        warn_venv.step(np.zeros((1, 1), dtype=np.float32))  # warn_once: no second warning


def test_vec_video_recorder_npz_fallback(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "gymnasium.utils.save_video", None)  # as without moviepy
    monkeypatch.setitem(sys.modules, "imageio_ffmpeg", None)  # ... and without the video extra
    venv = DummyVecEnv([functools.partial(_counting, 50, False, "rgb_array") for _ in range(2)])
    recorder = VecVideoRecorder(venv, str(tmp_path), record_video_trigger=lambda step: step == 5, video_length=3)
    recorder.reset()
    with pytest.warns(UserWarning, match="no video library is installed"):
        for _ in range(8):
            recorder.step(np.zeros(2, dtype=np.int64))
    recorder.close()
    files = sorted(os.path.basename(p) for p in glob.glob(str(tmp_path / "*.npz")))
    assert files == ["rl-video-step-0-to-step-3.npz", "rl-video-step-5-to-step-8.npz"]
    data = np.load(str(tmp_path / "rl-video-step-5-to-step-8.npz"))
    frames = data["frames"]
    assert frames.shape == (4, 12, 8, 3) and frames.dtype == np.uint8  # 2 envs tiled one above the other
    assert [int(f.max()) for f in frames] == [5, 6, 7, 8]
    assert int(data["fps"]) == 10
    assert os.path.exists(str(tmp_path / "rl-video-step-5-to-step-8.meta.json"))


def test_vec_video_recorder_uses_gymnasium_save_video(tmp_path, monkeypatch):
    calls = []

    def fake_save_video(frames, video_folder, episode_trigger=None, name_prefix="rl-video", episode_index=0, **kw):
        assert episode_trigger(episode_index)
        calls.append((len(frames), kw["fps"]))
        with open(os.path.join(video_folder, "{}-episode-{}.mp4".format(name_prefix, episode_index)), "wb") as f:
            f.write(b"mp4")

    module = types.ModuleType("gymnasium.utils.save_video")
    module.save_video = fake_save_video
    monkeypatch.setitem(sys.modules, "gymnasium.utils.save_video", module)
    monkeypatch.setitem(sys.modules, "imageio_ffmpeg", None)  # moviepy (through gymnasium) is the fallback writer
    venv = DummyVecEnv([functools.partial(_counting, 50, False, "rgb_array")])
    recorder = VecVideoRecorder(venv, str(tmp_path / "videos"), record_video_trigger=lambda step: False,
                                video_length=2, name_prefix="clip")
    recorder.reset()
    for _ in range(4):
        recorder.step(np.zeros(1, dtype=np.int64))
    recorder.close()
    assert calls == [(3, 10)]
    assert sorted(os.listdir(tmp_path / "videos")) == ["clip-step-0-to-step-2.meta.json", "clip-step-0-to-step-2.mp4"]
    with pytest.raises(ValueError, match="render_mode='rgb_array'"):
        VecVideoRecorder(DummyVecEnv([_counting]), str(tmp_path), lambda step: False)


# --------------------------------------------------------------------------------------------------------------------
# cmd_util / misc_util
# --------------------------------------------------------------------------------------------------------------------
def test_make_vec_env_monitor_and_seeding(tmp_path):
    from sbtf.bench import Monitor
    from sbtf.common import make_vec_env

    venv = make_vec_env("CartPole-v1", n_envs=2, seed=3, monitor_dir=str(tmp_path), start_index=1)
    assert isinstance(venv, DummyVecEnv) and venv.num_envs == 2
    assert all(isinstance(env, Monitor) for env in venv.envs)
    obs = venv.reset()
    for i in range(2):
        np.testing.assert_array_equal(obs[i], gymnasium.make("CartPole-v1").reset(seed=3 + 1 + i)[0])
    episode_infos = []
    for _ in range(200):
        _, _, dones, infos = venv.step(np.array([0, 0]))
        episode_infos += [info["episode"] for info, done in zip(infos, dones) if done]
    assert episode_infos and {"r", "l", "t"} <= set(episode_infos[0])
    venv.close()
    assert sorted(os.listdir(tmp_path)) == ["1.monitor.csv", "2.monitor.csv"]

    class Wrapper(gymnasium.Wrapper):
        pass

    venv = make_vec_env(CountingEnv, n_envs=3, env_kwargs={"ep_len": 7}, wrapper_class=Wrapper,
                        vec_env_cls=DummyVecEnv)
    assert all(isinstance(env, Wrapper) for env in venv.envs)
    assert venv.get_attr("ep_len") == [7, 7, 7]
    old = make_vec_env(OldStyleEnv, n_envs=1)
    assert old.reset().shape == (1, 2)


def test_misc_util():
    assert list(zipsame([1, 2], "ab")) == [(1, "a"), (2, "b")]
    with pytest.raises(AssertionError):
        zipsame([1, 2], [1])
    assert flatten_lists([[1, 2], [], [3]]) == [1, 2, 3]
    parser = argparse.ArgumentParser()
    boolean_flag(parser, "use-thing", default=True, help_msg="help")
    assert parser.parse_args([]).use_thing is True
    assert parser.parse_args(["--no-use-thing"]).use_thing is False
    assert parser.parse_args(["--use-thing"]).use_thing is True
    assert mpi_rank_or_zero() == 0


def test_set_global_seeds():
    import random

    from sbtf.common import set_global_seeds

    set_global_seeds(123)
    a = (random.random(), np.random.rand())
    import tensorflow as tf
    t_a = float(tf.random.uniform(()))
    set_global_seeds(123)
    assert (random.random(), np.random.rand()) == a
    assert float(tf.random.uniform(())) == t_a


def test_vec_env_is_abstract():
    with pytest.raises(TypeError):
        VecEnv(1, spaces.Discrete(2), spaces.Discrete(2))
