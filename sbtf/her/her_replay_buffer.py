"""Hindsight Experience Replay as a replay buffer (stable-baselines3's ``HerReplayBuffer``).

``DQN / SAC / TD3 / DDPG(..., replay_buffer_class=HerReplayBuffer, replay_buffer_kwargs=dict(n_sampled_goal=4,
goal_selection_strategy="future"))`` store the real transitions of a goal environment episode by episode; goals are
relabelled when a minibatch is *sampled* (SB3's "online sampling"): a fraction ``n_sampled_goal / (n_sampled_goal +
1)`` of the minibatch gets, as its desired goal, a goal achieved later in the same episode (``future``, the current
step included, as SB3), at its end (``final``) or anywhere in it (``episode``), with the reward recomputed by the
env's ``compute_reward(achieved_goal, desired_goal, info)``. Only finished episodes are sampled; an episode that a
time limit cut is finished but not terminal (the algorithm stores it with ``done = False``, SB3's
``handle_timeout_termination``), so its last value is bootstrapped.

The model sees each goal observation as one flat vector: the Dict observation packed by ``sbtf.common.envs.dict_obs``
(``MultiInputPolicy``, as in stable-baselines3; ``goal_layout_from_space``), or ``concat[observation, achieved_goal,
desired_goal]`` of ``sbtf.her.HERGoalEnvWrapper`` (``goal_layout_from_env``); the buffer stores these vectors and
knows where the two goals lie in them. ``save`` (``model.save_replay_buffer``) writes the transitions, episodes,
settings and goal layout into sbtf's replay buffer file (no pickle); ``load_buffer`` checks and restores them
(``_from_saved``), and the model attaches its env again. The SB2 ``HER`` wrapper
(``sbtf.her.HER``), which adds the virtual transitions to the buffer when an episode ends, stays for old code.
"""
from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any, List, Optional, Sequence, Union

import numpy as np

from sbtf.common.buffers import ReplayBatch, ReplayBuffer, saved_flag, saved_index_array, saved_int
from sbtf.common.envs.dict_obs import layout_of
from sbtf.common.file_errors import CorruptedFileError, ModelDataError, describe_value
from sbtf.common.fileio.load_budget import checked_prod
from sbtf.common.registry import register_class
from sbtf.her.replay_buffer import GoalSelectionStrategy, goal_selection_strategy_from

#: the version of HerReplayBuffer's own entries in a saved buffer file (episodes, settings, goal layout)
HER_FORMAT_VERSION = 1


@dataclass(frozen=True)
class GoalLayout:
    """Where the goals of a goal observation lie in the flat vector the model sees."""

    #: the achieved goal: ``flat[:, achieved_goal]``
    achieved_goal: slice
    #: the desired goal: ``flat[:, desired_goal]``
    desired_goal: slice
    #: the shape ``compute_reward`` gets each goal in (without the batch axis)
    goal_shape: tuple


def goal_layout_from_space(space: Any) -> GoalLayout:
    """The ``GoalLayout`` of a goal env's Dict observation space packed by ``sbtf.common.envs.dict_obs`` (the model's
    ``MultiInputPolicy`` sees it so)."""

    layout = layout_of(space)
    missing = [key for key in ("achieved_goal", "desired_goal") if key not in layout.keys]
    if missing:
        raise ValueError(f"Error: HerReplayBuffer needs a goal environment whose Dict observations have the keys "
                         f"'achieved_goal' and 'desired_goal'; {missing} missing in {layout.keys}.")
    achieved, desired = layout["achieved_goal"], layout["desired_goal"]
    if achieved.size != desired.size:
        raise ValueError("Error: the achieved and desired goals of the goal environment differ in size.")
    return GoalLayout(slice(achieved.offset, achieved.offset + achieved.size),
                      slice(desired.offset, desired.offset + desired.size), tuple(desired.shape))


def goal_layout_from_env(env: Any) -> GoalLayout:
    """
    The ``GoalLayout`` of the observations of ``env`` (a VecEnv, or an env): an ``HERGoalEnvWrapper`` (found through
    the VecEnv and gymnasium wrappers) flattens ``observation``, ``achieved_goal``, ``desired_goal`` in this order.
    """
    try:
        if hasattr(env, "get_attr"):
            obs_dim, goal_dim = env.get_attr("obs_dim", [0])[0], env.get_attr("goal_dim", [0])[0]
        else:
            from sbtf.her.utils import HERGoalEnvWrapper

            inner = env
            while not isinstance(inner, HERGoalEnvWrapper) and hasattr(inner, "env"):
                inner = inner.env
            obs_dim, goal_dim = inner.obs_dim, inner.goal_dim
    except AttributeError as exc:
        raise ValueError("Error: HerReplayBuffer needs a goal environment whose Dict observations (observation, "
                         "achieved_goal, desired_goal) the model sees flattened: wrap it in "
                         "sbtf.her.HERGoalEnvWrapper.") from exc
    obs_dim, goal_dim = int(obs_dim), int(goal_dim)
    return GoalLayout(slice(obs_dim, obs_dim + goal_dim), slice(obs_dim + goal_dim, obs_dim + 2 * goal_dim),
                      (goal_dim,))


class HerReplayBuffer(ReplayBuffer):
    """
    Hindsight Experience Replay (HER) buffer (https://arxiv.org/abs/1707.01495): stores whole episodes and relabels
    goals when sampling (stable-baselines3's ``HerReplayBuffer``).

    :param size: (int) Max number of transitions to store (split evenly between the envs, as SB3). When the buffer
        overflows, the oldest episodes are dropped whole.
    :param env: (VecEnv) the training environment: its ``compute_reward`` gives the rewards of relabelled goals
        (the model passes it, and attaches its current env before every ``learn``)
    :param n_envs: (int) Number of parallel environments
    :param n_sampled_goal: (int) Number of virtual transitions per real transition, by sampling new goals
    :param goal_selection_strategy: (GoalSelectionStrategy or str) 'future', 'final' or 'episode'
    :param copy_info_dict: (bool) keep the ``info`` dicts and pass them to ``compute_reward`` (slower)
    :param handle_timeout_termination: (bool) a time-limit cut is not a terminal (always the case in sbtf's
        algorithms, which store it with ``done = False``); False stores such cuts as terminals, as SB3 does then
    :param optimize_memory_usage: (bool) not supported (as in SB3)
    :param goal_layout: (GoalLayout) where the goals lie in the observations (default: found from ``env``)
    :param observation_space: (gymnasium.Space) the goal env's Dict space (the model passes it): where the goals lie;
        its keys are stored in their own dtypes (see ``ReplayBuffer``)
    :param action_space: (gymnasium.Space) accepted for stable-baselines3's signature (unused)
    """

    def __init__(self, size: int, env: Any = None, n_envs: int = 1, n_sampled_goal: int = 4,
                 goal_selection_strategy: Union[GoalSelectionStrategy, str] = "future", copy_info_dict: bool = False,
                 handle_timeout_termination: bool = True, optimize_memory_usage: bool = False,
                 goal_layout: Optional[GoalLayout] = None, observation_space=None, action_space=None):
        if optimize_memory_usage:
            raise ValueError("Error: HerReplayBuffer does not support optimize_memory_usage (as in "
                             "stable-baselines3): the goals of stored observations are rewritten when sampling.")
        n_envs = int(n_envs)
        super().__init__(max(int(size) // max(n_envs, 1), 1) * n_envs, n_envs=n_envs,
                         observation_space=observation_space)
        self.strategy = goal_selection_strategy_from(goal_selection_strategy)
        if self.strategy not in (GoalSelectionStrategy.FUTURE, GoalSelectionStrategy.FINAL,
                                 GoalSelectionStrategy.EPISODE):
            raise ValueError(f"Error: HerReplayBuffer samples goals with 'future', 'final' or 'episode', got "
                             f"{describe_value(goal_selection_strategy)} (the SB2 HER wrapper also has 'random').")
        if int(n_sampled_goal) < 0:
            raise ValueError(f"Error: n_sampled_goal must be >= 0, got {n_sampled_goal}")
        self.n_sampled_goal = int(n_sampled_goal)
        #: the fraction of a minibatch with relabelled goals
        self.her_ratio = 1.0 - 1.0 / (self.n_sampled_goal + 1)
        self.copy_info_dict = bool(copy_info_dict)
        self.handle_timeout_termination = bool(handle_timeout_termination)
        self.env = env
        self._goal_layout = goal_layout
        if goal_layout is None and observation_space is not None and hasattr(observation_space, "spaces"):
            self._goal_layout = goal_layout_from_space(observation_space)  # a Dict space, packed
        self.n_rows = self._maxsize // n_envs
        self._pos = 0
        self._full = False
        # per (row, env): the first row of the transition's episode and the episode's length (0: not finished yet,
        # or dropped because the buffer overwrote part of it)
        # (rows are allocated as they are written: a buffer of 2**27 slots costs nothing until it fills)
        rows = min(self.n_rows, 1024)
        self._ep_start = np.zeros((rows, n_envs), dtype=np.int64)
        self._ep_length = np.zeros((rows, n_envs), dtype=np.int64)
        self._current_ep_start = np.zeros(n_envs, dtype=np.int64)
        self._infos = self._new_infos(rows) if self.copy_info_dict else None

    def _new_infos(self, rows: int) -> np.ndarray:
        infos = np.empty((rows, self.n_envs), dtype=object)
        for index in np.ndindex(infos.shape):
            infos[index] = {}
        return infos

    def _reserve_rows(self, row: int) -> None:
        """Make the per-row episode records hold row ``row`` (doubling, up to ``n_rows``)."""
        rows = len(self._ep_start)
        if row < rows:
            return
        while rows <= row:
            rows *= 2
        rows = min(rows, self.n_rows)
        for name in ("_ep_start", "_ep_length"):
            old = getattr(self, name)
            grown = np.zeros((rows, self.n_envs), dtype=np.int64)
            grown[:len(old)] = old
            setattr(self, name, grown)
        if self._infos is not None:
            grown = self._new_infos(rows)
            grown[:len(self._infos)] = self._infos
            self._infos = grown

    @property
    def goal_selection_strategy(self) -> GoalSelectionStrategy:
        return self.strategy

    # ------------------------------------------------------------------ environment
    def attach_env(self, env: Any) -> None:
        """Use ``env`` (the model's current VecEnv) for ``compute_reward`` (and to find the goal layout); a VecEnv
        must have the buffer's number of envs (e.g. after ``load_replay_buffer``)."""
        if env is None:
            return
        num_envs = getattr(env, "num_envs", None)
        if num_envs is not None and int(num_envs) != self.n_envs:
            raise ValueError(f"Error: this HerReplayBuffer stores the episodes of {self.n_envs} env(s), the env has "
                             f"{num_envs}; use a VecEnv of {self.n_envs} env(s).")
        self.env = env

    def use_observation_space(self, space) -> None:
        """``ReplayBuffer.use_observation_space``; a goal env's Dict space also tells where the goals lie (when the
        buffer does not know it yet, e.g. a loaded one)."""
        super().use_observation_space(space)
        if getattr(self, "_goal_layout", None) is None and hasattr(space, "spaces"):  # (None in __init__)
            self._goal_layout = goal_layout_from_space(space)

    def set_env(self, env: Any) -> None:
        """stable-baselines3's name of ``attach_env``."""
        self.attach_env(env)

    @property
    def goal_layout(self) -> GoalLayout:
        if self._goal_layout is None:
            if self.env is None:
                raise ValueError("Error: HerReplayBuffer needs the environment (to find the goals in the "
                                 "observations and compute rewards); the model attaches it in learn().")
            self._goal_layout = goal_layout_from_env(self.env)
        return self._goal_layout

    # ------------------------------------------------------------------ storage
    def _slots(self, row: int) -> np.ndarray:
        return row * self.n_envs + np.arange(self.n_envs)

    def add(self, obs_t, action, reward, obs_tp1, done, info: Optional[dict] = None) -> None:
        """
        Add one transition of a one-env model (SB2's ``add``, with the step's ``info``).

        :param info: (dict) the step's info: ``terminal_observation`` or ``TimeLimit.truncated`` mark the end of an
            episode that ``done`` (terminals only) does not
        """
        if self.n_envs != 1:
            raise ValueError(f"Error: add() stores one transition; this buffer has {self.n_envs} envs: use "
                             "store_step().")
        self.store_step(np.asarray(obs_t)[None], np.asarray(action)[None], np.asarray([reward], np.float32),
                        np.asarray(obs_tp1)[None], np.asarray([done], np.float32), [info or {}])

    def extend(self, obs_t, action, reward, obs_tp1, done) -> None:
        raise NotImplementedError("Error: HerReplayBuffer stores whole episodes; use store_step() with the infos.")

    def store_step(self, obs: np.ndarray, actions: np.ndarray, rewards: np.ndarray, next_obs: np.ndarray,
                   dones: np.ndarray, infos: Sequence[dict]) -> None:
        """
        Store one VecEnv step (one transition per env).

        :param obs: (np.ndarray) the observations (n_envs, ...)
        :param actions: (np.ndarray) the actions
        :param rewards: (np.ndarray) the rewards
        :param next_obs: (np.ndarray) the next observations (the terminal ones at episode ends)
        :param dones: (np.ndarray) terminals (1.0; a time-limit cut is 0.0)
        :param infos: ([dict]) the step's infos: an episode ends where ``done`` is set or the info has
            ``terminal_observation`` / ``TimeLimit.truncated``
        """
        obs, actions, next_obs = np.asarray(obs), np.asarray(actions), np.asarray(next_obs)
        dones = np.asarray(dones, dtype=np.float32).reshape(-1).copy()
        ended = dones > 0
        for i, info in enumerate(infos):
            if isinstance(info, dict) and ("terminal_observation" in info or info.get("TimeLimit.truncated", False)):
                ended[i] = True
                if not self.handle_timeout_termination and info.get("TimeLimit.truncated", False):
                    dones[i] = 1.0
        if self._obs_t is None:
            self._allocate(obs[0], actions[0])
        row = self._pos
        self._reserve_rows(row)
        # overwriting the oldest row drops the episodes it belongs to, whole
        for env_idx in range(self.n_envs):
            length = self._ep_length[row, env_idx]
            if length > 0:
                rows = (self._ep_start[row, env_idx] + np.arange(length)) % self.n_rows
                self._ep_length[rows, env_idx] = 0
        self._ep_start[row] = self._current_ep_start
        self._ep_length[row] = 0
        slots = self._slots(row)
        self._reserve(int(np.max(slots)))  # a loaded buffer holds the slots its file filled: more grow on demand
        self._obs_t[slots] = obs
        self._obs_tp1[slots] = next_obs
        self._actions[slots] = actions.reshape((self.n_envs,) + self._actions.shape[1:])
        self._rewards[slots] = np.asarray(rewards, np.float32).reshape(-1)
        self._dones[slots] = dones
        if self._infos is not None:
            self._infos[row] = [copy.deepcopy(info) for info in infos]
        self._pos = (row + 1) % self.n_rows
        self._full = self._full or self._pos == 0
        self._next_idx = self._pos * self.n_envs
        self._size = self._maxsize if self._full else self._pos * self.n_envs
        for env_idx in np.flatnonzero(ended):
            self._finish_episode(int(env_idx))

    def _finish_episode(self, env_idx: int) -> None:
        start, end = int(self._current_ep_start[env_idx]), self._pos
        if end <= start:
            end += self.n_rows
        rows = np.arange(start, end) % self.n_rows
        self._ep_length[rows, env_idx] = end - start
        self._current_ep_start[env_idx] = self._pos

    # ------------------------------------------------------------------ sampling
    def n_episode_transitions(self) -> int:
        """How many stored transitions belong to finished episodes (the ones that can be sampled)."""
        return int(np.count_nonzero(self._ep_length > 0))

    def can_sample(self, n_samples: int) -> bool:
        """Whether a finished episode is stored and the buffer holds at least ``n_samples`` transitions."""
        return self._size >= n_samples and bool(np.any(self._ep_length > 0))

    def sample(self, batch_size: int, env=None, **_kwargs):
        """
        Sample a minibatch: ``batch_size / (n_sampled_goal + 1)`` real transitions, the rest with relabelled goals.

        :param batch_size: (int) How many transitions to sample.
        :param env: (Optional[VecNormalize]) associated VecNormalize to normalize the observations/rewards
        :return: (obs, actions, rewards, next_obs, dones), as ``ReplayBuffer.sample``
        """
        valid = np.flatnonzero(self._ep_length > 0)
        if valid.size == 0:
            raise RuntimeError("Error: HerReplayBuffer cannot sample before the end of the first episode; choose a "
                               "learning_starts greater than the length of an episode.")
        flat = np.random.choice(valid, size=batch_size, replace=True)
        rows, env_idx = np.unravel_index(flat, self._ep_length.shape)
        slots = rows * self.n_envs + env_idx
        n_virtual = int(self.her_ratio * batch_size)
        obs = self._obs_t[slots].copy()
        next_obs = self._obs_tp1[slots].copy()
        rewards = self._rewards[slots].copy()
        if n_virtual > 0:
            virtual = slice(0, n_virtual)
            layout = self.goal_layout
            goals = self._sample_goals(rows[virtual], env_idx[virtual])
            obs[virtual, layout.desired_goal] = goals
            next_obs[virtual, layout.desired_goal] = goals
            rewards[virtual] = self._compute_reward(next_obs[virtual, layout.achieved_goal], goals,
                                                    rows[virtual], env_idx[virtual], layout)
        return (self._normalize_obs(obs, env), self._actions[slots], self._normalize_reward(rewards, env),
                self._normalize_obs(next_obs, env), self._dones[slots])

    def sample_batch(self, batch_size: int, env=None, **kwargs) -> ReplayBatch:
        return ReplayBatch(*self.sample(batch_size, env=env))

    def _sample_goals(self, rows: np.ndarray, env_idx: np.ndarray) -> np.ndarray:
        """Achieved goals (of next observations) from the transitions' episodes, by the goal selection strategy."""
        ep_start = self._ep_start[rows, env_idx]
        ep_length = self._ep_length[rows, env_idx]
        if self.strategy == GoalSelectionStrategy.FINAL:
            in_episode = ep_length - 1
        elif self.strategy == GoalSelectionStrategy.FUTURE:
            # inclusive, as stable-baselines3: the transition's own next achieved goal may be chosen
            in_episode = np.random.randint((rows - ep_start) % self.n_rows, ep_length)
        else:
            in_episode = np.random.randint(0, ep_length)
        goal_rows = (ep_start + in_episode) % self.n_rows
        return self._obs_tp1[goal_rows * self.n_envs + env_idx][:, self.goal_layout.achieved_goal]

    def _compute_reward(self, achieved: np.ndarray, desired: np.ndarray, rows: np.ndarray, env_idx: np.ndarray,
                        layout: GoalLayout) -> np.ndarray:
        if self.env is None:
            raise ValueError("Error: HerReplayBuffer needs the environment to compute the rewards of relabelled "
                             "goals; the model attaches it in learn() (or call attach_env(env)).")
        shape = (-1,) + tuple(layout.goal_shape)
        if self._infos is not None:
            infos: List[dict] = copy.deepcopy(list(self._infos[rows, env_idx]))
        else:
            infos = [{} for _ in range(len(rows))]
        achieved, desired = achieved.reshape(shape), desired.reshape(shape)
        if hasattr(self.env, "env_method"):
            rewards = self.env.env_method("compute_reward", achieved, desired, infos, indices=[0])[0]
        else:
            rewards = self.env.compute_reward(achieved, desired, infos)
        return np.asarray(rewards, dtype=np.float32).reshape(-1)

    # ------------------------------------------------------------------ SB3 helpers
    def truncate_last_trajectory(self) -> None:
        """Close the unfinished episodes (e.g. after loading a buffer saved mid-episode), as time-limit cuts: they
        can then be sampled and their last value is bootstrapped."""
        for env_idx in np.flatnonzero(self._current_ep_start != self._pos):
            self._finish_episode(int(env_idx))

    # ------------------------------------------------------------------ save / load
    def _state(self) -> dict:
        """The saved arrays (``ReplayBuffer.save``): the transitions, the episodes and the settings."""
        if self.copy_info_dict:
            raise ValueError("Error: a HerReplayBuffer with copy_info_dict=True keeps the envs' info dicts, which "
                             "cannot be saved without pickle; save_replay_buffer needs copy_info_dict=False.")
        state = super()._state()
        rows = self._size // self.n_envs
        state.update(her_format_version=np.array(HER_FORMAT_VERSION), n_envs=np.array(self.n_envs),
                     n_sampled_goal=np.array(self.n_sampled_goal),
                     goal_selection_strategy=np.array(self.strategy.value),
                     handle_timeout_termination=np.array(self.handle_timeout_termination), pos=np.array(self._pos),
                     full=np.array(self._full), ep_start=self._ep_start[:rows], ep_length=self._ep_length[:rows],
                     current_ep_start=self._current_ep_start.copy())
        layout = self._goal_layout
        if layout is not None:
            state.update(goal_slices=np.array([[layout.achieved_goal.start, layout.achieved_goal.stop],
                                               [layout.desired_goal.start, layout.desired_goal.stop]], np.int64),
                         goal_shape=np.array(layout.goal_shape, np.int64))
        return state

    @classmethod
    def _from_saved(cls, data: dict, path: str) -> "HerReplayBuffer":
        """
        A HerReplayBuffer from the arrays of a file written by ``save`` (``load_buffer`` has checked the transitions;
        the episodes, settings and goal layout are checked here, so that sampling cannot index outside the buffer).

        :raises ModelFileError: (a ValueError) when they are inconsistent
        """
        version = saved_int(data, "her_format_version", path, 1, 1 << 30)
        if version > HER_FORMAT_VERSION:
            raise CorruptedFileError(f"Error: {path} was written by a newer sbtf (HerReplayBuffer format {version}); "
                                     "upgrade sbtf to read it.")
        maxsize, size = int(data["maxsize"]), int(data["size"])
        n_envs = saved_int(data, "n_envs", path, 1, min(maxsize, 1 << 16))
        if maxsize % n_envs:
            raise ModelDataError(f"Error: the HerReplayBuffer file {path} holds {maxsize} slots, not rows of {n_envs} "
                                 "envs; the file is corrupted.")
        n_rows = maxsize // n_envs
        pos = saved_int(data, "pos", path, 0, n_rows - 1)
        full = saved_flag(data, "full", path)
        if size != (maxsize if full else pos * n_envs) or int(data["next_idx"]) != pos * n_envs:
            raise ModelDataError(f"Error: the size and write position of the HerReplayBuffer file {path} do not "
                                 "match; the file is corrupted.")
        rows = size // n_envs
        ep_start = saved_index_array(data, "ep_start", path, (rows, n_envs), 0, n_rows - 1)
        ep_length = saved_index_array(data, "ep_length", path, (rows, n_envs), 0, rows)
        current_ep_start = saved_index_array(data, "current_ep_start", path, (n_envs,), 0, n_rows - 1)
        finished = ep_length > 0
        offset = (np.arange(rows)[:, None] - ep_start) % n_rows
        inside = offset < ep_length if full else (offset < ep_length) & (ep_start + ep_length <= pos)
        if np.any(finished & ~inside):
            raise ModelDataError(f"Error: the episodes of the HerReplayBuffer file {path} do not lie in its stored "
                                 "transitions; the file is corrupted.")
        strategy = GoalSelectionStrategy(saved_int(data, "goal_selection_strategy", path, 0, 2))
        buffer = cls(maxsize, n_envs=n_envs, n_sampled_goal=saved_int(data, "n_sampled_goal", path, 0, 1 << 20),
                     goal_selection_strategy=strategy,
                     handle_timeout_termination=saved_flag(data, "handle_timeout_termination", path),
                     goal_layout=_saved_goal_layout(data, path))
        buffer._restore(data)
        buffer._pos, buffer._full = pos, full
        buffer._reserve_rows(max(rows, pos) - 1 if max(rows, pos) else 0)
        buffer._ep_start[:rows], buffer._ep_length[:rows] = ep_start, ep_length
        buffer._current_ep_start[:] = current_ep_start
        return buffer


def _saved_goal_layout(data: dict, path: str) -> Optional[GoalLayout]:
    """The ``GoalLayout`` of a saved HerReplayBuffer (None when it was not known yet), checked against the stored
    observation rows."""
    if "goal_slices" not in data:
        return None
    slices, goal_shape = data["goal_slices"], data.get("goal_shape")
    obs_size = checked_prod(data["obs_shape"].tolist(), f"'obs_shape' of the HerReplayBuffer file {path}",
                            1 << 40) if isinstance(data.get("obs_shape"), np.ndarray) else 1 << 30
    if not isinstance(slices, np.ndarray) or slices.shape != (2, 2) or slices.dtype.kind not in "iu" or \
            not isinstance(goal_shape, np.ndarray) or goal_shape.ndim != 1 or goal_shape.dtype.kind not in "iu" or \
            len(goal_shape) > 32 or np.any(goal_shape < 1) or np.any(slices < 0) or np.any(slices > obs_size):
        raise ModelDataError(f"Error: the goal layout of the HerReplayBuffer file {path} is invalid; the file is "
                             "corrupted.")
    (a_start, a_stop), (d_start, d_stop) = (tuple(int(v) for v in row) for row in slices)
    length = a_stop - a_start
    goal_size = checked_prod(goal_shape.tolist(), f"'goal_shape' of the HerReplayBuffer file {path}", 1 << 40)
    if length < 1 or d_stop - d_start != length or goal_size != length:
        raise ModelDataError(f"Error: the goals of the HerReplayBuffer file {path} differ in size from each other or "
                             "from their shape; the file is corrupted.")
    return GoalLayout(slice(a_start, a_stop), slice(d_start, d_stop), tuple(int(v) for v in goal_shape))


__all__ = ["HerReplayBuffer", "GoalLayout", "goal_layout_from_env", "goal_layout_from_space", "GoalSelectionStrategy"]


# ``replay_buffer_class`` is stored in model files by the class name
register_class(HerReplayBuffer, "replay_buffer", "HerReplayBuffer")
