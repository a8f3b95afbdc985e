"""Small gymnasium envs the SB3 reference agents of ``tests/data/sb3`` were trained on (imported by
``make_reference.py``, run with stable-baselines3 + PyTorch in a separate venv, and by sbtf's tests, which never
import PyTorch).

Images are channel-last (H, W, C) uint8, as an env gives them: SB3 wraps them in ``VecTransposeImage`` and saves the
channel-first space; sbtf acts on channel-last images. Shapes are chosen so NatureCNN's last feature map is neither
1x1 nor square (44x52 -> 2x3), which exercises the flatten order.
"""
from __future__ import annotations

from typing import Optional

import gymnasium as gym
import numpy as np

IMAGE_SHAPE = (44, 52, 3)
GRAY_SHAPE = (44, 52, 1)


class _Base(gym.Env):
    """Deterministic pseudo-random observations from a seeded generator; reward favours action 0 / positive
    actions; 16-step episodes."""

    def __init__(self, observation_space: gym.Space, action_space: gym.Space):
        self.observation_space = observation_space
        self.action_space = action_space
        self._rng = np.random.default_rng(0)
        self._t = 0

    def _obs(self):
        self.observation_space.seed(int(self._rng.integers(1 << 31)))
        return self.observation_space.sample()

    def reset(self, *, seed: Optional[int] = None, options: Optional[dict] = None):
        if seed is not None:
            self._rng = np.random.default_rng(seed)
        self._t = 0
        return self._obs(), {}

    def step(self, action):
        self._t += 1
        if isinstance(self.action_space, gym.spaces.Discrete):
            reward = 1.0 if int(action) == 0 else 0.0
        else:
            reward = float(np.mean(np.clip(action, -1.0, 1.0)))
        return self._obs(), reward, False, self._t >= 16, {}


class ImageEnv(_Base):
    """RGB images (44, 52, 3), Discrete(3) actions (PPO / DQN CnnPolicy)."""

    def __init__(self, channels: int = 3):
        super().__init__(gym.spaces.Box(0, 255, IMAGE_SHAPE[:2] + (channels,), np.uint8), gym.spaces.Discrete(3))


class DictImageEnv(_Base):
    """Dict observations (an image, a vector, a Discrete; keys given unsorted), Box(2,) actions (PPO
    MultiInputPolicy)."""

    def __init__(self):
        space = gym.spaces.Dict({"vec": gym.spaces.Box(-1.0, 1.0, (3,), np.float32),
                                 "img": gym.spaces.Box(0, 255, GRAY_SHAPE, np.uint8),
                                 "disc": gym.spaces.Discrete(3)})
        super().__init__(space, gym.spaces.Box(-1.0, 1.0, (2,), np.float32))


class DictVectorEnv(_Base):
    """Dict observations of vectors only (keys given unsorted), Discrete(2) or Box(2,) actions (DQN / SAC
    MultiInputPolicy)."""

    def __init__(self, continuous: bool = False):
        space = gym.spaces.Dict({"zeta": gym.spaces.Box(-1.0, 1.0, (2,), np.float32),
                                 "alpha": gym.spaces.Box(-2.0, 2.0, (3,), np.float32),
                                 "mid": gym.spaces.MultiBinary(2)})
        action = gym.spaces.Box(-1.0, 1.0, (2,), np.float32) if continuous else gym.spaces.Discrete(2)
        super().__init__(space, action)


def make_env(name: str) -> gym.Env:
    """The env an agent of ``tests/data/sb3`` was trained on, by the name its reference entry records."""
    return {"image": lambda: ImageEnv(3), "gray": lambda: ImageEnv(1), "dict_image": DictImageEnv,
            "dict_vector": lambda: DictVectorEnv(False), "dict_vector_box": lambda: DictVectorEnv(True),
            "cartpole": lambda: gym.make("CartPole-v1"), "pendulum": lambda: gym.make("Pendulum-v1"),
            "lunar": lambda: gym.make("LunarLander-v3")}[name]()
