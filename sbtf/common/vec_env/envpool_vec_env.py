"""``EnvPoolVecEnv``: EnvPool's C++ environments behind sbtf's VecEnv API.

`EnvPool <https://envpool.readthedocs.io>`_ steps many environments in C++ threads (Atari with its own DeepMind
preprocessing, MuJoCo, classic control, Box2D, ...), with no Python per env step. This module gives its pools the
semantics every sbtf algorithm relies on:

* same-step auto-reset: a finished env's next observation is already the first of its new episode, and the last
  observation of the finished one is in ``infos[i]["terminal_observation"]`` (EnvPool resets on the *next* step and
  ignores that step's action; the wrapper runs that reset step at once, for the finished envs only);
* time-limit truncation kept apart from termination: ``infos[i]["TimeLimit.truncated"]``;
* episode statistics as ``Monitor`` / ``VecMonitor`` report them: ``infos[i]["episode"] = {"r", "l", "t"}`` at the
  step that ends an episode, and ``*.monitor.csv`` files with ``monitor_dir``; on Atari with EnvPool's
  ``episodic_life`` (the DeepMind "a life loss ends the episode" for training) the reported episode is the whole
  game with its unclipped score, as ``Monitor`` below ``wrap_deepmind`` reports it;
* seeding: env ``i`` gets ``seed + i``; ``seed()`` takes effect at the next ``reset()``;
* images channel-last (sbtf's CNN layout; EnvPool's Atari frames are ``(stack, 84, 84)``: they become
  ``(84, 84, stack)`` as ``make_atari_env`` + ``VecFrameStack`` give them), unless ``channels_last=False``.

Gymnasium Atari ids (``PongNoFrameskip-v4``, ``ALE/Pong-v5``) are mapped to EnvPool's task (``Pong-v5``) with the
settings of rl-baselines-zoo's Atari entry (:data:`ZOO_ATARI_SETTINGS`); see docs/scaling.md for the differences
from gymnasium's wrappers.
"""
from __future__ import annotations

import os
import re
import time
import warnings
from typing import Any, Dict, List, Optional, Sequence

import numpy as np
from gymnasium import spaces

from sbtf.common.vec_env.base_vec_env import Indices, VecEnv
from sbtf.common.vec_env.vec_monitor import EpisodeCsvWriter

__all__ = ["EnvPoolVecEnv", "ZOO_ATARI_SETTINGS", "envpool_task_id"]

#: EnvPool's Atari options that reproduce the zoo's ``make_atari_env`` + ``VecFrameStack(4)`` (``wrap_deepmind``
#: with ``episode_life``, ``clip_rewards``, 84x84 grey frames, ``NoopResetEnv(30)``, ``MaxAndSkipEnv(4)``,
#: ``FireResetEnv``; ``NoFrameskip-v4``: no sticky actions, at most 100,000 agent steps)
ZOO_ATARI_SETTINGS: Dict[str, Any] = dict(
    episodic_life=True, reward_clip=True, stack_num=4, img_height=84, img_width=84, gray_scale=True, frame_skip=4,
    noop_max=30, use_fire_reset=True, repeat_action_probability=0.0, max_episode_steps=100_000,
)

#: gymnasium's warning for EnvPool's float64 bounds of float32 Boxes: nothing a user can act on
_CAST_WARNING = ".*precision lowered by casting to float32"

_ATARI_ID = re.compile(r"^(?:ALE/)?(?P<game>[A-Za-z0-9]+?)(?:NoFrameskip)?-v[045]$")


def _envpool():
    try:
        import envpool
    except ImportError as exc:  # pragma: no cover - depends on the installation
        raise ImportError("EnvPoolVecEnv needs EnvPool: pip install 'sbtf[envpool]' (or pip install envpool)") from exc
    return envpool


def envpool_task_id(env_id: str) -> tuple:
    """
    EnvPool's task id for a gymnasium env id, and whether it is an Atari game.

    ``CartPole-v1`` stays ``CartPole-v1``; ``PongNoFrameskip-v4`` and ``ALE/Pong-v5`` become ``Pong-v5``.

    :param env_id: (str) a gymnasium env id (or an EnvPool task id)
    :return: (str, bool) the EnvPool task id, and True for an Atari game
    :raises ValueError: when EnvPool has no such task (the message lists close names)
    """
    registered = set(_envpool().list_all_envs())
    match = _ATARI_ID.match(env_id)
    if match is not None:
        candidate = f"{match.group('game')}-v5"
        if candidate in registered and (env_id.startswith("ALE/") or "NoFrameskip" in env_id):
            return candidate, True
    if env_id in registered:
        return env_id, type(_envpool().make_spec(env_id)).__name__ == "AtariEnvSpec"
    close = sorted(name for name in registered if name.split("-")[0].lower() in env_id.lower())[:8]
    raise ValueError(f"EnvPool has no environment {env_id!r}" + (f"; close names: {', '.join(close)}" if close else
                                                                  "; envpool.list_all_envs() lists them"))


class EnvPoolVecEnv(VecEnv):
    """
    EnvPool's environments as an sbtf VecEnv (see the module docstring for the semantics).

    ``EnvPoolVecEnv("CartPole-v1", n_envs=8, seed=0)``, or through ``make_vec_env("CartPole-v1", n_envs=8,
    vec_env_cls=EnvPoolVecEnv)``.

    :param env_id: (str) a gymnasium env id or an EnvPool task id
    :param n_envs: (int) the number of environments
    :param seed: (int) env ``i`` gets ``seed + i`` (None: a random base seed)
    :param env_kwargs: (dict) EnvPool options of the task (``envpool.make``'s keyword arguments, e.g.
        ``max_episode_steps``, Atari's ``episodic_life``); for Atari they override :data:`ZOO_ATARI_SETTINGS`
    :param num_threads: (int) EnvPool's worker threads (0: one per env, up to the cores)
    :param monitor_dir: (str) folder of the ``0.monitor.csv`` episode file (None: no file; episodes are still in
        the infos)
    :param channels_last: (bool) give image observations as (height, width, channels)
    :param info_keywords: (tuple) extra keys of EnvPool's infos logged with each episode
    """

    def __init__(self, env_id: str, n_envs: int = 1, seed: Optional[int] = None,
                 env_kwargs: Optional[Dict[str, Any]] = None, num_threads: int = 0,
                 monitor_dir: Optional[str] = None, channels_last: bool = True, info_keywords: Sequence[str] = ()):
        if not isinstance(env_id, str):
            raise TypeError(f"EnvPoolVecEnv takes an env id (str), got {type(env_id).__name__}; EnvPool builds its "
                            "environments in C++ and cannot run a Python env")
        if int(n_envs) < 1:
            raise ValueError(f"EnvPoolVecEnv needs n_envs >= 1, got {n_envs}")
        self.env_id = env_id
        self.task_id, self.is_atari = envpool_task_id(env_id)
        self.env_kwargs = dict(ZOO_ATARI_SETTINGS if self.is_atari else {})
        self.env_kwargs.update(env_kwargs or {})
        self.num_threads = int(num_threads)
        self.channels_last = bool(channels_last)
        self.info_keywords = tuple(info_keywords)
        n_envs = int(n_envs)
        self._seed = self._draw_seed_for(seed, n_envs)
        self._pool = self._make_pool(n_envs, self._seed)
        with warnings.catch_warnings():  # the pool's spaces are built already (_make_pool); the filter is a safety net
            warnings.filterwarnings("ignore", message=_CAST_WARNING)
            #: EnvPool's own observation space of one env (before ``channels_last``)
            self._raw_observation_space = self._pool.single_observation_space
            action_space = self._pool.single_action_space
        super().__init__(n_envs, self._convert_space(self._raw_observation_space), action_space)
        self._reseed_pending = False
        self._actions: Optional[np.ndarray] = None
        self._episodic_life = bool(self.is_atari and self.env_kwargs.get("episodic_life", False))
        self.episode_returns = np.zeros(n_envs, dtype=np.float64)
        self.episode_lengths = np.zeros(n_envs, dtype=np.int64)
        self.episode_count = 0
        self.t_start = time.time()
        self._writer: Optional[EpisodeCsvWriter] = None
        if monitor_dir is not None:
            os.makedirs(monitor_dir, exist_ok=True)
            self._writer = EpisodeCsvWriter(os.path.join(monitor_dir, "0"), env_id=env_id, t_start=self.t_start,
                                            info_keywords=self.info_keywords)

    @classmethod
    def from_make_vec_env(cls, env_id: Any, n_envs: int = 1, seed: Optional[int] = None, start_index: int = 0,
                          monitor_dir: Optional[str] = None, wrapper_class: Any = None,
                          env_kwargs: Optional[Dict[str, Any]] = None, **kwargs: Any) -> "EnvPoolVecEnv":
        """What ``make_vec_env(env_id, ..., vec_env_cls=EnvPoolVecEnv, vec_env_kwargs=...)`` builds."""
        if wrapper_class is not None:
            raise ValueError("make_vec_env(..., vec_env_cls=EnvPoolVecEnv) cannot apply wrapper_class: EnvPool's "
                             "envs run in C++; use a VecEnv wrapper (VecFrameStack, VecNormalize, ...) around the "
                             "result, or EnvPool's own options through env_kwargs")
        base_seed = None if seed is None else int(seed) + int(start_index)
        return cls(env_id, n_envs=n_envs, seed=base_seed, env_kwargs=env_kwargs, monitor_dir=monitor_dir, **kwargs)

    # ------------------------------------------------------------------ building
    @staticmethod
    def _draw_seed_for(seed: Optional[int], n_envs: int) -> int:
        """``seed``, or a random base seed in EnvPool's range (its seeds are int32: env i gets seed + i)."""
        if seed is None:
            return int(np.random.randint(0, np.iinfo(np.int32).max - n_envs, dtype=np.int64))
        return int(seed)

    def _draw_seed(self, seed: Optional[int]) -> int:
        return self._draw_seed_for(seed, self.num_envs)

    def _make_pool(self, n_envs: int, seed: int):
        with warnings.catch_warnings():
            # EnvPool declares float64 bounds for float32 Boxes: gymnasium's cast warning says nothing a user can act on
            warnings.filterwarnings("ignore", message=_CAST_WARNING)
            pool = _envpool().make(self.task_id, env_type="gymnasium", num_envs=n_envs, seed=seed,
                                   num_threads=self.num_threads, **self.env_kwargs)
            # EnvPool builds (and caches) its spaces at their first use, which may be its own reset(): build them here
            _ = (pool.observation_space, pool.action_space)
            return pool

    def _image_axes(self, space: spaces.Space) -> bool:
        """Whether ``space`` is a channel-first image this wrapper turns channel-last."""
        return bool(self.channels_last and isinstance(space, spaces.Box) and len(space.shape) == 3
                    and space.dtype == np.uint8 and space.shape[0] < min(space.shape[1:]))

    def _convert_space(self, space: spaces.Space) -> spaces.Space:
        if isinstance(space, spaces.Dict):
            return spaces.Dict({key: self._convert_space(sub) for key, sub in space.spaces.items()})
        if self._image_axes(space):
            return spaces.Box(low=np.moveaxis(space.low, 0, -1), high=np.moveaxis(space.high, 0, -1),
                              dtype=space.dtype)
        return space

    def _convert_obs(self, obs: Any, space: spaces.Space) -> Any:
        if isinstance(space, spaces.Dict):
            return {key: self._convert_obs(obs[key], sub) for key, sub in space.spaces.items()}
        if self._image_axes(space):
            return np.ascontiguousarray(np.moveaxis(obs, 1, -1))
        return obs

    @staticmethod
    def _take(value: Any, order: np.ndarray) -> Any:
        if isinstance(value, dict):
            return {key: EnvPoolVecEnv._take(sub, order) for key, sub in value.items()}
        return value[order]

    def _ordered(self, obs: Any, env_ids: np.ndarray) -> tuple:
        """EnvPool may return envs in any order: the permutation that sorts them by env id."""
        env_ids = np.asarray(env_ids)
        if np.array_equal(env_ids, np.arange(len(env_ids))):
            return obs, None
        order = np.argsort(env_ids, kind="stable")
        return self._take(obs, order), order

    # ------------------------------------------------------------------ VecEnv API
    def reset(self) -> Any:
        if self._reseed_pending:
            self._pool.close()
            self._pool = self._make_pool(self.num_envs, self._seed)
            self._reseed_pending = False
        obs, info = self._pool.reset()
        obs, _ = self._ordered(obs, info["env_id"])
        self.episode_returns[:] = 0
        self.episode_lengths[:] = 0
        self._actions = None
        return self._convert_obs(obs, self._raw_observation_space)

    def step_async(self, actions: np.ndarray) -> None:
        self._actions = np.asarray(actions)

    def step_wait(self) -> Any:
        if self._actions is None:
            raise RuntimeError("EnvPoolVecEnv.step_wait() without step_async(): call step(actions)")
        actions, self._actions = self._actions, None
        if isinstance(self.action_space, spaces.Discrete):
            actions = actions.reshape(self.num_envs).astype(np.int32, copy=False)
        obs, rewards, terminated, truncated, info = self._pool.step(actions)
        obs, order = self._ordered(obs, info["env_id"])
        if order is not None:
            rewards, terminated, truncated = rewards[order], terminated[order], truncated[order]
            info = self._take(info, order)
        rewards = np.asarray(rewards, dtype=np.float32)
        terminated = np.asarray(terminated, dtype=bool)
        truncated = np.asarray(truncated, dtype=bool)
        dones = terminated | truncated
        infos = self._infos(info)
        # the statistics of whole episodes (Atari: the game's own score until the game is over)
        raw_rewards = info.get("reward", rewards) if self._episodic_life else rewards
        self.episode_returns += raw_rewards
        self.episode_lengths += 1
        game_over = dones
        if self._episodic_life and "terminated" in info:
            game_over = truncated | (np.asarray(info["terminated"]) != 0)
        for i in np.flatnonzero(game_over):
            episode = {"r": round(float(self.episode_returns[i]), 6), "l": int(self.episode_lengths[i]),
                       "t": round(time.time() - self.t_start, 6)}
            for key in self.info_keywords:
                episode[key] = infos[i].get(key)
            infos[i]["episode"] = episode
            self.episode_count += 1
            self.episode_returns[i] = 0
            self.episode_lengths[i] = 0
            if self._writer is not None:
                self._writer.write(episode)
        finished = np.flatnonzero(dones)
        obs = self._convert_obs(obs, self._raw_observation_space)
        if len(finished):
            obs = self._restart(obs, finished, infos, truncated & ~terminated)
        return obs, rewards, dones, infos

    def _restart(self, obs: Any, finished: np.ndarray, infos: List[dict], time_limit: np.ndarray) -> Any:
        """Run EnvPool's reset step for the finished envs now (same-step auto-reset), keeping their last frames."""
        space = self._raw_observation_space
        for i in finished:
            infos[i]["terminal_observation"] = ({key: value[i].copy() for key, value in obs.items()}
                                                if isinstance(obs, dict) else obs[i].copy())
            infos[i]["TimeLimit.truncated"] = bool(time_limit[i])
        noop = np.zeros((len(finished),) + self.action_space.shape, dtype=self.action_space.dtype)
        if isinstance(self.action_space, spaces.Discrete):
            noop = noop.astype(np.int32)
        new_obs, _, _, _, info = self._pool.step(noop, finished.astype(np.int32))
        new_obs, _ = self._ordered(new_obs, np.searchsorted(finished, info["env_id"]))
        new_obs = self._convert_obs(new_obs, space)
        if isinstance(obs, dict):
            for key in obs:
                obs[key][finished] = new_obs[key]
        else:
            obs[finished] = new_obs
        return obs

    def _infos(self, info: Dict[str, Any]) -> List[Dict[str, Any]]:
        """One dict per env of EnvPool's batched infos (scalars and small arrays; nested player data left out)."""
        keys = [key for key, value in info.items() if isinstance(value, np.ndarray) and key != "players"]
        infos: List[Dict[str, Any]] = [{} for _ in range(self.num_envs)]
        for key in keys:
            column = info[key]
            for i in range(self.num_envs):
                value = column[i]
                infos[i][key] = value.item() if np.ndim(value) == 0 else value
        return infos

    def close(self) -> None:
        self._pool.close()
        if self._writer is not None:
            self._writer.close()
            self._writer = None

    def seed(self, seed: Optional[int] = None) -> List[Optional[int]]:
        self._seed = self._draw_seed(seed)
        self._reseed_pending = True
        self.action_space.seed(self._seed)
        return [self._seed + i for i in range(self.num_envs)]

    # ------------------------------------------------------------------ attributes (C++ envs have few)
    def _no_python_env(self, what: str) -> NotImplementedError:
        return NotImplementedError(f"EnvPoolVecEnv: {what} is not available: EnvPool's environments run in C++ and "
                                   "have no Python object; use DummyVecEnv or SubprocVecEnv for envs you need to "
                                   "call into")

    def get_attr(self, attr_name: str, indices: Indices = None) -> List[Any]:
        indices = list(self._get_indices(indices))
        if attr_name == "metadata":
            return [dict(getattr(self._pool, "metadata", {}) or {}) for _ in indices]
        if attr_name == "render_mode":
            return [None for _ in indices]
        if attr_name in ("observation_space", "action_space"):
            return [getattr(self, attr_name) for _ in indices]
        raise self._no_python_env(f"the attribute {attr_name!r}")

    def set_attr(self, attr_name: str, value: Any, indices: Indices = None) -> None:
        raise self._no_python_env(f"setting {attr_name!r}")

    def env_method(self, method_name: str, *method_args: Any, indices: Indices = None,
                   **method_kwargs: Any) -> List[Any]:
        raise self._no_python_env(f"the method {method_name!r}")

    def get_images(self) -> Sequence[np.ndarray]:
        raise self._no_python_env("rendering")
