"""
The DeepMind-style Atari wrappers of stable-baselines 2, written against the gymnasium API.

The wrappers expect the ALE interface of ``ale-py`` envs on ``env.unwrapped``: ``get_action_meanings()`` (Noop /
Fire reset) and ``ale.lives()`` (episodic life).
"""
from __future__ import annotations

from collections import deque
from typing import Any, Dict, List, Optional, SupportsFloat, Tuple

import gymnasium
import numpy as np
from gymnasium import spaces

try:
    import cv2  # pytype:disable=import-error
    cv2.ocl.setUseOpenCL(False)
except ImportError:
    cv2 = None

StepResult = Tuple[Any, SupportsFloat, bool, bool, Dict[str, Any]]


class NoopResetEnv(gymnasium.Wrapper):
    """
    Start each episode after a random number (1 to noop_max) of no-op actions (action 0), for diverse start states.

    :param env: (gymnasium.Env) the environment to wrap
    :param noop_max: (int) the maximum value of no-ops to run
    """

    def __init__(self, env: gymnasium.Env, noop_max: int = 30):
        gymnasium.Wrapper.__init__(self, env)
        self.noop_max = noop_max
        self.override_num_noops: Optional[int] = None
        self.noop_action = 0
        meanings = env.unwrapped.get_action_meanings()
        if meanings[0] != 'NOOP':
            raise ValueError("NoopResetEnv needs action 0 to be NOOP, the env's actions are {}".format(meanings))

    def reset(self, **kwargs: Any) -> Tuple[Any, Dict[str, Any]]:
        obs, info = self.env.reset(**kwargs)
        if self.override_num_noops is not None:
            noops = self.override_num_noops
        else:
            noops = int(self.unwrapped.np_random.integers(1, self.noop_max + 1))
        if noops <= 0:
            raise ValueError("NoopResetEnv: the number of no-ops must be positive, got {}".format(noops))
        # Resets within the no-ops must not re-apply the seed (that would replay the same start).
        kwargs.pop("seed", None)
        for _ in range(noops):
            obs, _, terminated, truncated, info = self.env.step(self.noop_action)
            if terminated or truncated:
                obs, info = self.env.reset(**kwargs)
        return obs, info

    def step(self, action: int) -> StepResult:
        return self.env.step(action)


class FireResetEnv(gymnasium.Wrapper):
    """
    Press FIRE (and then action 2) on reset, for games that wait for FIRE before starting.

    :param env: (gymnasium.Env) the environment to wrap
    """

    def __init__(self, env: gymnasium.Env):
        gymnasium.Wrapper.__init__(self, env)
        meanings = env.unwrapped.get_action_meanings()
        if len(meanings) < 3 or meanings[1] != 'FIRE':
            raise ValueError("FireResetEnv needs action 1 to be FIRE (and at least 3 actions), the env's actions "
                             "are {}".format(meanings))

    def reset(self, **kwargs: Any) -> Tuple[Any, Dict[str, Any]]:
        self.env.reset(**kwargs)
        kwargs.pop("seed", None)
        obs, _, terminated, truncated, info = self.env.step(1)
        if terminated or truncated:
            self.env.reset(**kwargs)
        obs, _, terminated, truncated, info = self.env.step(2)
        if terminated or truncated:
            obs, info = self.env.reset(**kwargs)
        return obs, info

    def step(self, action: int) -> StepResult:
        return self.env.step(action)


class EpisodicLifeEnv(gymnasium.Wrapper):
    """
    Make a lost life end the episode for the learner, while the game itself is only reset when it is over
    (the DeepMind DQN setting, which helps value estimation).

    :param env: (gymnasium.Env) the environment to wrap
    """

    def __init__(self, env: gymnasium.Env):
        gymnasium.Wrapper.__init__(self, env)
        self.lives = 0
        self.was_real_done = True

    def step(self, action: int) -> StepResult:
        obs, reward, terminated, truncated, info = self.env.step(action)
        self.was_real_done = terminated or truncated
        # A lost life ends the (learner's) episode. Lives that went up (bonus lives) are simply tracked. Some games
        # (Qbert) sit at 0 lives for a few frames before the game is over: only the env's own end resets then.
        lives = self.env.unwrapped.ale.lives()
        if 0 < lives < self.lives:
            terminated = True
        self.lives = lives
        return obs, reward, terminated, truncated, info

    def reset(self, **kwargs: Any) -> Tuple[Any, Dict[str, Any]]:
        """
        Calls the Gym environment reset, only when lives are exhausted.
        This way all states are still reachable even though lives are episodic,
        and the learner need not know about any of this behind-the-scenes.

        :param kwargs: Extra keywords passed to env.reset() call
        :return: ([int] or [float], dict) the first observation and info of the environment
        """
        if self.was_real_done:
            obs, info = self.env.reset(**kwargs)
        else:
            # After a lost life, carry on in the same game with a no-op step.
            obs, _, terminated, truncated, info = self.env.step(0)
            if terminated or truncated:
                # the no-op ended the game: start a real new one
                obs, info = self.env.reset(**kwargs)
        self.lives = self.env.unwrapped.ale.lives()
        return obs, info


class _AleFrameAdvance:
    """
    One emulator frame of an ``ale_py`` env without reading its screen, for the frames of a skip whose observation
    :class:`MaxAndSkipEnv` discards (the first ``skip - 2``). Reading the 210x160 RGB screen costs about 16 us of
    the ~65 us an ALE frame takes through gymnasium (2026-11-28), so a skip of 4 saves ~10 % of an Atari env step.

    It does what ``ale_py.env.AtariEnv.step`` does for a discrete action and ``frameskip=1`` (act, game over,
    truncation, the info dict) except ``_get_obs()``, and is used only when every wrapper between
    :class:`MaxAndSkipEnv` and the ALE env is known to pass a step through unchanged (:class:`NoopResetEnv`,
    gymnasium's ``OrderEnforcing`` once the env was reset, ``PassiveEnvChecker`` after its first step): the
    rewards, terminations, infos and later observations are the same as through ``env.step``
    (tests/test_atari_wrappers.py compares whole trajectories).
    """

    #: wrappers whose ``step`` passes the call through unchanged (OrderEnforcing and PassiveEnvChecker: see ready())
    _PASS_THROUGH = ("NoopResetEnv", "OrderEnforcing", "PassiveEnvChecker")

    def __init__(self, ale_env: Any, order_enforcing: List[Any], env_checkers: List[Any]):
        self._env = ale_env
        self._ale = ale_env.ale
        self._action_set = ale_env._action_set
        self._order_enforcing = order_enforcing
        self._env_checkers = env_checkers

    @classmethod
    def for_env(cls, env: gymnasium.Env) -> Optional["_AleFrameAdvance"]:
        """The frame advance of ``env``, or None when ``env`` is not a pass-through chain over a discrete-action
        ``ale_py`` env with ``frameskip=1`` (then :class:`MaxAndSkipEnv` steps every frame through ``env.step``)."""
        order_enforcing: List[Any] = []
        env_checkers: List[Any] = []
        layer: Any = env
        while isinstance(layer, gymnasium.Wrapper):
            name = type(layer).__name__
            if name not in cls._PASS_THROUGH or type(layer).step is not _pass_through_step(name):
                return None
            if name == "OrderEnforcing":
                order_enforcing.append(layer)
            elif name == "PassiveEnvChecker":
                env_checkers.append(layer)
            layer = layer.env
        if type(layer).__module__ != "ale_py.env" or type(layer).__name__ != "AtariEnv":
            return None
        if getattr(layer, "_frameskip", None) != 1 or getattr(layer, "continuous", True) \
                or not hasattr(layer, "_action_set") or not callable(getattr(layer, "_get_info", None)):
            return None
        return cls(layer, order_enforcing, env_checkers)

    def ready(self) -> bool:
        """Whether a frame can skip the wrappers now: the env was reset and the env checker has seen its first two
        steps (before that, ``env.step`` raises or runs its checks, as it should)."""
        return all(getattr(w, "_has_reset", False) for w in self._order_enforcing) and \
            all(getattr(w, "checked_step", False) and getattr(w, "checked_data_reuse", True)
                for w in self._env_checkers)

    def __call__(self, action: int) -> Tuple[float, bool, bool, Dict[str, Any]]:
        ale = self._ale
        reward = 0.0 + ale.act(self._action_set[action], 1.0)
        return reward, ale.game_over(with_truncation=False), ale.game_truncated(), self._env._get_info()


def _pass_through_step(name: str) -> Any:
    """The ``step`` that a wrapper named ``name`` must have for :class:`_AleFrameAdvance` to skip it: sbtf's own
    NoopResetEnv.step, or gymnasium's class's (a subclass that overrides ``step`` is not skipped)."""
    if name == "NoopResetEnv":
        return NoopResetEnv.step
    from gymnasium.wrappers import common as gym_common

    return getattr(getattr(gym_common, name, None), "step", None)


class MaxAndSkipEnv(gymnasium.Wrapper):
    """
    Return only every `skip`-th frame (frameskipping)

    :param env: (gymnasium.Env) the environment
    :param skip: (int) number of `skip`-th frame
    """

    def __init__(self, env: gymnasium.Env, skip: int = 4):
        gymnasium.Wrapper.__init__(self, env)
        # the last two raw frames of a skip, max-pooled to remove Atari sprite flicker
        self._obs_buffer = np.zeros((2,) + env.observation_space.shape, dtype=env.observation_space.dtype)
        self._skip = skip
        self._frame_advance = _AleFrameAdvance.for_env(env)

    def step(self, action: int) -> StepResult:
        """
        Step the environment with the given action
        Repeat action, sum reward, and max over last observations.

        :param action: ([int] or [float]) the action
        :return: ([int] or [float], [float], bool, bool, dict) observation, reward, terminated, truncated, info
        """
        total_reward = 0.0
        terminated = truncated = False
        info: Dict[str, Any] = {}
        advance = self._frame_advance
        for i in range(self._skip):
            if i < self._skip - 2 and advance is not None and advance.ready():
                # a frame whose screen no one reads: emulate it without fetching the screen
                reward, terminated, truncated, info = advance(action)
            else:
                obs, reward, terminated, truncated, info = self.env.step(action)
            if i == self._skip - 2:
                self._obs_buffer[0] = obs
            if i == self._skip - 1:
                self._obs_buffer[1] = obs
            total_reward += float(reward)
            if terminated or truncated:
                break
        # (when the episode ended early in the skip, the pooled frame may be stale: it is not used for learning)
        max_frame = self._obs_buffer.max(axis=0)

        return max_frame, total_reward, terminated, truncated, info

    def reset(self, **kwargs: Any) -> Tuple[Any, Dict[str, Any]]:
        return self.env.reset(**kwargs)


class ClipRewardEnv(gymnasium.RewardWrapper):
    """
    clips the reward to {+1, 0, -1} by its sign.

    :param env: (gymnasium.Env) the environment
    """

    def __init__(self, env: gymnasium.Env):
        gymnasium.RewardWrapper.__init__(self, env)

    def reward(self, reward: SupportsFloat) -> float:
        """
        Bin reward to {+1, 0, -1} by its sign.

        :param reward: (float)
        """
        return float(np.sign(float(reward)))


def _area_resize_matrix(in_size: int, out_size: int) -> np.ndarray:
    """(out_size, in_size) matrix whose rows average the input cells that each output cell covers (area weights)."""
    scale = in_size / out_size
    matrix = np.zeros((out_size, in_size), dtype=np.float64)
    for out_idx in range(out_size):
        start, end = out_idx * scale, (out_idx + 1) * scale
        first, last = int(np.floor(start)), min(int(np.ceil(end)), in_size)
        for in_idx in range(first, last):
            overlap = min(end, in_idx + 1) - max(start, in_idx)
            if overlap > 0:
                matrix[out_idx, in_idx] = overlap
        matrix[out_idx] /= matrix[out_idx].sum()
    return matrix


class WarpFrame(gymnasium.ObservationWrapper):
    """
    Warp frames to 84x84 as done in the Nature paper and later work (grayscale).

    Uses OpenCV when it is installed, and an exact area-averaging NumPy resize (OpenCV's ``INTER_AREA`` when
    shrinking) otherwise.

    :param env: (gymnasium.Env) the environment
    :param width: (int) width of the warped frame (84 in stable-baselines 2)
    :param height: (int) height of the warped frame (84 in stable-baselines 2)
    """

    def __init__(self, env: gymnasium.Env, width: int = 84, height: int = 84):
        gymnasium.ObservationWrapper.__init__(self, env)
        self.width = width
        self.height = height
        self.observation_space = spaces.Box(low=0, high=255, shape=(self.height, self.width, 1),
                                            dtype=env.observation_space.dtype)
        in_shape = env.observation_space.shape
        self._rows = _area_resize_matrix(in_shape[0], self.height)
        self._cols = _area_resize_matrix(in_shape[1], self.width)

    def observation(self, frame: np.ndarray) -> np.ndarray:
        """
        returns the current observation from a frame

        :param frame: ([int] or [float]) environment frame (H, W, 3) RGB (or (H, W, 1) / (H, W) grayscale)
        :return: ([int] or [float]) the observation, of shape (84, 84, 1)
        """
        frame = np.asarray(frame)
        if cv2 is not None:
            if frame.ndim == 3 and frame.shape[-1] == 3:
                frame = cv2.cvtColor(frame, cv2.COLOR_RGB2GRAY)
            elif frame.ndim == 3:
                frame = frame[:, :, 0]
            frame = cv2.resize(frame, (self.width, self.height), interpolation=cv2.INTER_AREA)
            return frame[:, :, None]
        return self._numpy_warp(frame)

    def _numpy_warp(self, frame: np.ndarray) -> np.ndarray:
        if frame.ndim == 3 and frame.shape[-1] == 3:
            # ITU-R BT.601 luma, the weights OpenCV uses for RGB -> gray
            gray = frame.astype(np.float64) @ np.array([0.299, 0.587, 0.114])
            if np.issubdtype(frame.dtype, np.integer):
                gray = np.round(gray)
        elif frame.ndim == 3:
            gray = frame[:, :, 0].astype(np.float64)
        else:
            gray = frame.astype(np.float64)
        resized = self._rows @ gray @ self._cols.T
        if np.issubdtype(frame.dtype, np.integer):
            info = np.iinfo(frame.dtype)
            resized = np.clip(np.round(resized), info.min, info.max)
        return resized.astype(frame.dtype)[:, :, None]


class LazyFrames(object):
    """
    A stack of frames that shares the frame arrays with the neighbouring stacks (consecutive observations have
    n_frames - 1 frames in common), so that replay buffers of stacked frames take far less memory. The frames are
    concatenated (along the last axis) only when the object is converted with ``np.asarray``.

    :param frames: ([int] or [float]) environment frames
    """

    def __init__(self, frames: List[np.ndarray]):
        self._frames: Optional[List[np.ndarray]] = frames
        self._out: Optional[np.ndarray] = None

    def _force(self) -> np.ndarray:
        if self._out is None:
            self._out = np.concatenate(self._frames, axis=2)
            self._frames = None
        return self._out

    def __array__(self, dtype: Any = None, copy: Optional[bool] = None) -> np.ndarray:
        out = self._force()
        if dtype is not None:
            out = out.astype(dtype)
        elif copy:
            out = out.copy()
        return out

    def __len__(self) -> int:
        return len(self._force())

    def __getitem__(self, i: Any) -> Any:
        return self._force()[i]

    @property
    def shape(self) -> Tuple[int, ...]:
        return self._force().shape

    @property
    def dtype(self) -> np.dtype:
        return self._force().dtype


class FrameStack(gymnasium.Wrapper):
    """
    Stack n_frames last frames.

    Returns lazy array, which is much more memory efficient.

    See Also
    --------
    stable_baselines.common.atari_wrappers.LazyFrames

    :param env: (gymnasium.Env) the environment
    :param n_frames: (int) the number of frames to stack
    """

    def __init__(self, env: gymnasium.Env, n_frames: int):
        gymnasium.Wrapper.__init__(self, env)
        self.n_frames = n_frames
        self.frames: deque = deque([], maxlen=n_frames)
        shp = env.observation_space.shape
        self.observation_space = spaces.Box(low=0, high=255, shape=(shp[0], shp[1], shp[2] * n_frames),
                                            dtype=env.observation_space.dtype)

    def reset(self, **kwargs: Any) -> Tuple[LazyFrames, Dict[str, Any]]:
        obs, info = self.env.reset(**kwargs)
        for _ in range(self.n_frames):
            self.frames.append(obs)
        return self._get_ob(), info

    def step(self, action: int) -> Tuple[LazyFrames, SupportsFloat, bool, bool, Dict[str, Any]]:
        obs, reward, terminated, truncated, info = self.env.step(action)
        self.frames.append(obs)
        return self._get_ob(), reward, terminated, truncated, info

    def _get_ob(self) -> LazyFrames:
        assert len(self.frames) == self.n_frames
        return LazyFrames(list(self.frames))


class ScaledFloatFrame(gymnasium.ObservationWrapper):
    """
    Scales the observation (images in [0, 255]) to float32 values in [0, 1].

    :param env: (gymnasium.Env) the environment
    """

    def __init__(self, env: gymnasium.Env):
        gymnasium.ObservationWrapper.__init__(self, env)
        self.observation_space = spaces.Box(low=0, high=1.0, shape=env.observation_space.shape, dtype=np.float32)

    def observation(self, observation: Any) -> np.ndarray:
        # Makes a float copy of the frames: LazyFrames' memory sharing is lost from here on.
        return np.array(observation).astype(np.float32) / 255.0


def ensure_atari_registered(env_id: str) -> None:
    """Register the ALE envs with gymnasium (ale-py >= 0.9 needs an explicit import) when ``env_id`` is unknown."""
    if env_id in gymnasium.registry:
        return
    try:
        import ale_py  # pylint: disable=import-outside-toplevel
    except ImportError as exc:
        raise ImportError("The Atari env {!r} is not registered and ale-py is not installed: `pip install "
                          "sbtf[atari]` (gymnasium[atari] + opencv)".format(env_id)) from exc
    if hasattr(gymnasium, "register_envs"):
        gymnasium.register_envs(ale_py)


def make_atari(env_id: str) -> gymnasium.Env:
    """
    Create a wrapped atari Environment

    :param env_id: (str) the environment ID, a ``NoFrameskip`` one (e.g. ``BreakoutNoFrameskip-v4``)
    :return: (gymnasium.Env) the wrapped atari environment (no-op reset, frame skipping with max pooling)
    """
    ensure_atari_registered(env_id)
    env = gymnasium.make(env_id)
    if env.spec is None or 'NoFrameskip' not in env.spec.id:
        env.close()
        raise ValueError("make_atari() expects a NoFrameskip env id (e.g. 'BreakoutNoFrameskip-v4'): frame skipping "
                         "is done by MaxAndSkipEnv; got {!r}".format(env_id))
    env = NoopResetEnv(env, noop_max=30)
    env = MaxAndSkipEnv(env, skip=4)
    return env


def wrap_deepmind(env: gymnasium.Env, episode_life: bool = True, clip_rewards: bool = True, frame_stack: bool = False,
                  scale: bool = False) -> gymnasium.Env:
    """
    Configure environment for DeepMind-style Atari.

    :param env: (gymnasium.Env) gymnasium environment
    :param episode_life: (bool) wrap the episode life wrapper
    :param clip_rewards: (bool) wrap the reward clipping wrapper
    :param frame_stack: (bool) wrap the frame stacking wrapper
    :param scale: (bool) wrap the scaling observation wrapper
    :return: (gymnasium.Env) the wrapped atari environment
    """
    if episode_life:
        env = EpisodicLifeEnv(env)
    if 'FIRE' in env.unwrapped.get_action_meanings():
        env = FireResetEnv(env)
    env = WarpFrame(env)
    if scale:
        env = ScaledFloatFrame(env)
    if clip_rewards:
        env = ClipRewardEnv(env)
    if frame_stack:
        env = FrameStack(env, 4)
    return env
