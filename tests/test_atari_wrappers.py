import gymnasium
import numpy as np
import pytest
from gymnasium import spaces

import sbtf.common.atari_wrappers as atari_wrappers
from sbtf.common.atari_wrappers import (ClipRewardEnv, EpisodicLifeEnv, FireResetEnv, FrameStack, LazyFrames,
                                        MaxAndSkipEnv, NoopResetEnv, ScaledFloatFrame, WarpFrame, make_atari,
                                        wrap_deepmind)


class FakeALE(object):
    def __init__(self, env):
        self.env = env

    def lives(self):
        return self.env.lives_left


class FakeAtariEnv(gymnasium.Env):
    """
    A tiny stand-in for an ALE env: RGB frames whose channel 0 is 10 * t and channel 1 flickers (200 on odd steps),
    a life is lost every `life_every` steps, the game is over when no life is left. Reward = action - 1.5.
    """

    metadata = {"render_modes": []}

    def __init__(self, height=60, width=50, lives=3, life_every=5, meanings=("NOOP", "FIRE", "RIGHT", "LEFT")):
        self.observation_space = spaces.Box(0, 255, (height, width, 3), np.uint8)
        self.action_space = spaces.Discrete(len(meanings))
        self.meanings = list(meanings)
        self.max_lives = lives
        self.life_every = life_every
        self.ale = FakeALE(self)
        self.lives_left = lives
        self.t = 0
        self.actions = []
        self.n_resets = 0

    def get_action_meanings(self):
        return list(self.meanings)

    def _frame(self):
        frame = np.zeros(self.observation_space.shape, dtype=np.uint8)
        frame[..., 0] = (10 * self.t) % 256
        frame[..., 1] = 200 if self.t % 2 else 0
        frame[..., 2] = np.arange(frame.shape[1], dtype=np.uint8)[None, :] * 3
        return frame

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        self.lives_left = self.max_lives
        self.actions = []
        self.n_resets += 1
        return self._frame(), {}

    def step(self, action):
        self.t += 1
        self.actions.append(int(action))
        if self.t % self.life_every == 0:
            self.lives_left -= 1
        return self._frame(), float(action) - 1.5, self.lives_left == 0, False, {"t": self.t}


def test_noop_reset():
    env = NoopResetEnv(FakeAtariEnv(life_every=100), noop_max=30)
    env.override_num_noops = 4
    env.reset(seed=0)
    assert env.unwrapped.actions == [0, 0, 0, 0]
    env.override_num_noops = None
    counts = []
    for _ in range(2):
        env.reset(seed=3)
        counts.append(len(env.unwrapped.actions))
    assert counts[0] == counts[1] and 1 <= counts[0] <= 30  # seeded: reproducible
    many = set()
    for _ in range(20):
        env.reset()
        many.add(len(env.unwrapped.actions))
    assert len(many) > 1 and all(1 <= n <= 30 for n in many)
    # no-ops that end the game restart it
    short = NoopResetEnv(FakeAtariEnv(lives=1, life_every=2), noop_max=30)
    short.override_num_noops = 3
    short.reset()
    assert short.unwrapped.n_resets == 2 and short.unwrapped.actions == [0]
    with pytest.raises(ValueError, match="NOOP"):
        NoopResetEnv(FakeAtariEnv(meanings=("FIRE", "NOOP", "LEFT")))


def test_fire_reset():
    env = FireResetEnv(FakeAtariEnv())
    obs, info = env.reset()
    assert env.unwrapped.actions == [1, 2]
    assert obs[0, 0, 0] == 20
    with pytest.raises(ValueError, match="FIRE"):
        FireResetEnv(FakeAtariEnv(meanings=("NOOP", "RIGHT", "FIRE")))


def test_episodic_life():
    env = EpisodicLifeEnv(FakeAtariEnv(lives=2, life_every=3))
    env.reset()
    results = [env.step(2)[2] for _ in range(3)]
    assert results == [False, False, True]  # a life was lost
    assert not env.was_real_done
    env.reset()
    assert env.unwrapped.n_resets == 1  # no real reset, a no-op step instead
    assert env.unwrapped.actions == [2, 2, 2, 0]
    assert env.lives == 1
    terminated = [env.step(2)[2] for _ in range(2)]
    assert terminated == [False, True]  # the last life: the game is over
    assert env.was_real_done
    env.reset()
    assert env.unwrapped.n_resets == 2 and env.lives == 2


def test_max_and_skip():
    env = MaxAndSkipEnv(FakeAtariEnv(life_every=100), skip=4)
    env.reset()
    obs, reward, terminated, truncated, info = env.step(3)
    assert env.unwrapped.t == 4 and env.unwrapped.actions == [3, 3, 3, 3]
    assert reward == pytest.approx(4 * 1.5)
    # max over the frames of steps 3 and 4: channel 0 from step 4, flickering channel 1 from step 3
    assert obs[0, 0, 0] == 40 and obs[0, 0, 1] == 200
    assert obs.shape == (60, 50, 3) and obs.dtype == np.uint8
    ending = MaxAndSkipEnv(FakeAtariEnv(lives=1, life_every=2), skip=4)
    ending.reset()
    _, reward, terminated, _, _ = ending.step(2)
    assert terminated and ending.unwrapped.t == 2 and reward == pytest.approx(1.0)


def test_clip_reward():
    env = ClipRewardEnv(FakeAtariEnv())
    env.reset()
    assert [env.step(a)[1] for a in (0, 1, 2, 3)] == [-1.0, -1.0, 1.0, 1.0]
    assert ClipRewardEnv(FakeAtariEnv()).reward(0.0) == 0.0


def test_warp_frame_shapes_and_numpy_fallback(monkeypatch):
    env = WarpFrame(FakeAtariEnv(height=210, width=160))
    assert env.observation_space.shape == (84, 84, 1) and env.observation_space.dtype == np.uint8
    obs, _ = env.reset()
    assert obs.shape == (84, 84, 1) and obs.dtype == np.uint8
    rng = np.random.default_rng(0)
    frame = rng.integers(0, 256, size=(210, 160, 3), dtype=np.uint8)
    with_cv2 = env.observation(frame)
    numpy_only = env._numpy_warp(frame)
    assert numpy_only.shape == (84, 84, 1) and numpy_only.dtype == np.uint8
    if atari_wrappers.cv2 is not None:
        assert np.abs(with_cv2.astype(int) - numpy_only.astype(int)).max() <= 1
    # without OpenCV the observation method uses the numpy path
    monkeypatch.setattr(atari_wrappers, "cv2", None)
    np.testing.assert_array_equal(env.observation(frame), numpy_only)
    # a uniform image stays uniform, and the gray level follows the BT.601 weights
    flat = np.zeros((210, 160, 3), dtype=np.uint8)
    flat[..., 0], flat[..., 1], flat[..., 2] = 100, 50, 200
    assert np.all(env.observation(flat) == round(0.299 * 100 + 0.587 * 50 + 0.114 * 200))
    small = WarpFrame(FakeAtariEnv(height=30, width=20), width=10, height=15)
    assert small.observation(small.env.reset()[0]).shape == (15, 10, 1)


def test_frame_stack_and_lazy_frames():
    env = FrameStack(WarpFrame(FakeAtariEnv()), 3)
    assert env.observation_space.shape == (84, 84, 3)
    obs, _ = env.reset()
    assert isinstance(obs, LazyFrames)
    array = np.asarray(obs)
    assert array.shape == (84, 84, 3)
    assert np.all(array[..., 0] == array[..., 2])  # reset: the first frame repeated
    obs2, *_ = env.step(0)
    first_frames = obs2._frames
    stacked = np.asarray(obs2)
    assert np.array_equal(stacked[..., :2], array[..., 1:])
    assert not np.array_equal(stacked[..., 2], stacked[..., 1])
    obs3, *_ = env.step(0)
    assert obs3._frames[0] is first_frames[1]  # frames are shared, not copied
    assert len(obs3) == 84 and obs3[0].shape == (84, 3) and obs3.shape == (84, 84, 3)
    assert np.asarray(obs3, dtype=np.float32).dtype == np.float32


def test_scaled_float_frame():
    env = ScaledFloatFrame(WarpFrame(FakeAtariEnv()))
    assert env.observation_space.dtype == np.float32
    assert env.observation_space.high.max() == 1.0
    obs, _ = env.reset()
    raw = WarpFrame(FakeAtariEnv()).reset()[0]
    np.testing.assert_allclose(obs, raw / 255.0, rtol=1e-6)
    assert obs.dtype == np.float32


def test_wrap_deepmind_chain():
    env = wrap_deepmind(FakeAtariEnv(), episode_life=True, clip_rewards=True, frame_stack=True, scale=True)
    assert isinstance(env, FrameStack)
    chain = []
    layer = env
    while isinstance(layer, gymnasium.Wrapper):
        chain.append(type(layer))
        layer = layer.env
    assert chain == [FrameStack, ClipRewardEnv, ScaledFloatFrame, WarpFrame, FireResetEnv, EpisodicLifeEnv]
    obs, _ = env.reset()
    assert np.asarray(obs).shape == (84, 84, 4)
    obs, reward, *_ = env.step(0)
    assert reward == -1.0 and 0.0 <= np.asarray(obs).min() and np.asarray(obs).max() <= 1.0
    plain = wrap_deepmind(FakeAtariEnv(meanings=("NOOP", "LEFT", "RIGHT")), episode_life=False, clip_rewards=False)
    assert isinstance(plain, WarpFrame) and isinstance(plain.env, FakeAtariEnv)


@pytest.fixture
def fake_atari_ids():
    ids = ["FakePongNoFrameskip-v4", "FakePong-v4"]
    for env_id in ids:
        gymnasium.register(id=env_id, entry_point=FakeAtariEnv, max_episode_steps=1000)
    yield ids
    for env_id in ids:
        del gymnasium.registry[env_id]


def test_make_atari(fake_atari_ids):
    env = make_atari("FakePongNoFrameskip-v4")
    assert isinstance(env, MaxAndSkipEnv) and isinstance(env.env, NoopResetEnv)
    env.reset(seed=0)
    env.step(2)
    with pytest.raises(ValueError, match="NoFrameskip"):
        make_atari("FakePong-v4")
    try:
        import ale_py  # noqa: F401
    except ImportError:  # without ale-py an unregistered Atari id says what to install
        with pytest.raises(ImportError, match="ale-py"):
            make_atari("UnknownGameNoFrameskip-v4")
    else:  # with ale-py, gymnasium names the unknown game
        with pytest.raises(gymnasium.error.NameNotFound, match="UnknownGameNoFrameskip"):
            make_atari("UnknownGameNoFrameskip-v4")


def test_make_atari_env(fake_atari_ids):
    from sbtf.bench import Monitor
    from sbtf.common import make_atari_env
    from sbtf.common.vec_env import DummyVecEnv

    venv = make_atari_env("FakePongNoFrameskip-v4", num_env=2, seed=0)
    assert isinstance(venv, DummyVecEnv)
    assert venv.observation_space.shape == (84, 84, 1)
    obs = venv.reset()
    assert obs.shape == (2, 84, 84, 1) and obs.dtype == np.uint8
    noops_a = [len(env.unwrapped.actions) for env in venv.envs]
    obs, rewards, dones, infos = venv.step(np.array([2, 3]))
    np.testing.assert_array_equal(rewards, [1.0, 1.0])  # clipped
    layer, found_monitor = venv.envs[0], False
    while isinstance(layer, gymnasium.Wrapper):
        found_monitor = found_monitor or isinstance(layer, Monitor)
        layer = layer.env
    assert found_monitor
    # same seed: same random no-op starts
    again = make_atari_env("FakePongNoFrameskip-v4", num_env=2, seed=0)
    again.reset()
    assert [len(env.unwrapped.actions) for env in again.envs] == noops_a
    stacked = make_atari_env("FakePongNoFrameskip-v4", num_env=1, seed=1, wrapper_kwargs={"frame_stack": True})
    assert stacked.reset().shape == (1, 84, 84, 4)


@pytest.mark.parametrize("game", ["PongNoFrameskip-v4", "BreakoutNoFrameskip-v4"])
def test_max_and_skip_frame_advance_keeps_trajectories(game):
    """MaxAndSkipEnv emulates the frames whose screen it discards without reading the screen: the whole trajectory
    (observations, rewards, terminations, infos, life losses and game overs through the DeepMind chain) is the one
    of stepping every frame through ``env.step``."""
    pytest.importorskip("ale_py", reason="needs ale-py (pip install 'sbtf[atari]')")

    def make(fast):
        env = make_atari(game)
        skip = env
        assert isinstance(skip, MaxAndSkipEnv)
        assert skip._frame_advance is not None  # the real ALE chain is recognised
        if not fast:
            skip._frame_advance = None
        return wrap_deepmind(env, episode_life=True, clip_rewards=False), skip

    (fast_env, fast_skip), (slow_env, _) = make(True), make(False)
    advanced = []
    real_advance = fast_skip._frame_advance

    def counting(action):
        advanced.append(action)
        return real_advance(action)

    counting.ready = real_advance.ready
    fast_skip._frame_advance = counting
    actions = np.random.default_rng(1).integers(0, fast_env.action_space.n, 1500)
    obs_fast, info_fast = fast_env.reset(seed=3)
    obs_slow, info_slow = slow_env.reset(seed=3)
    np.testing.assert_array_equal(obs_fast, obs_slow)
    episodes = 0
    for action in actions:
        fast = fast_env.step(action)
        slow = slow_env.step(action)
        np.testing.assert_array_equal(fast[0], slow[0])
        assert fast[1:4] == slow[1:4]
        assert fast[4] == slow[4]
        if fast[2] or fast[3]:
            episodes += 1
            np.testing.assert_array_equal(fast_env.reset()[0], slow_env.reset()[0])
    assert len(advanced) >= 2 * (len(actions) - 2 * episodes) - 2  # the first skip-2 frames of (nearly) every step
    if game.startswith("Breakout"):
        assert episodes > 0  # lives lost under random play: the early-break path was compared too


def test_max_and_skip_frame_advance_only_over_known_wrappers(fake_atari_ids):
    """A chain that is not ale_py's AtariEnv behind pass-through wrappers keeps stepping every frame through
    ``env.step``."""
    assert MaxAndSkipEnv(FakeAtariEnv())._frame_advance is None
    assert make_atari("FakePongNoFrameskip-v4")._frame_advance is None
    pytest.importorskip("ale_py", reason="needs ale-py (pip install 'sbtf[atari]')")

    class Recording(gymnasium.Wrapper):
        def step(self, action):
            return self.env.step(action)

    env = gymnasium.make("PongNoFrameskip-v4")
    assert MaxAndSkipEnv(NoopResetEnv(env))._frame_advance is not None
    assert MaxAndSkipEnv(Recording(env))._frame_advance is None
    with pytest.raises(gymnasium.error.ResetNeeded):  # before reset, the order check still runs
        MaxAndSkipEnv(NoopResetEnv(env)).step(0)
