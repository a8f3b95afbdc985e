"""The base class of the off-policy algorithms (DQN, SAC, TD3, DDPG; HER wraps them) and their one learn loop.

Collection works with a VecEnv of ``n_envs`` environments: each loop iteration steps every env once and stores
``n_envs`` transitions. The next observation of a finished episode is ``infos[i]["terminal_observation"]`` (the
VecEnv has already reset that env), and an episode cut by a time limit (``infos[i]["TimeLimit.truncated"]``) is
stored with ``done = False``, so that its value is bootstrapped instead of being learnt as a termination. With one
env, the training schedule (``train_freq``, ``learning_starts``, target updates) is exactly stable-baselines 2's;
with ``n_envs`` envs, every env step counts as one timestep, so an iteration that passes ``k`` multiples of
``train_freq`` runs ``k`` training events (the ratio of gradient steps to transitions is kept).

An algorithm plugs into the loop through hooks: ``_learn_start`` (schedules, per-call state), ``_select_actions``
(exploration), ``_store`` (what goes into the replay buffer), ``_on_dones`` / ``_on_episode_end``,
``_training_due`` + ``_train`` (when and what to train; the loop brackets each training with the callbacks'
``on_rollout_end`` / ``on_rollout_start``, as stable-baselines 2 did), ``_log_due`` + ``_dump_logs`` (the verbose
table) and ``_learn_context`` (e.g. the MPI frame of DDPG).
"""
from __future__ import annotations

import contextlib
import math
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Callable, ContextManager, List, Optional, Tuple

import gymnasium as gym
import numpy as np

from sbtf import logger
from sbtf.common.fileio import model_schema as ms
from sbtf.common.base_class import OffPolicyRLModel
from sbtf.common.input import check_obs_space
from sbtf.common.math_util import safe_mean, total_episode_reward_logger
from sbtf.common.storage.packed_normalize import for_packed_rows
from sbtf.common.registry import registered_classes


#: the save-file keys of the replay buffer options (stable-baselines3's constructor arguments)
REPLAY_BUFFER_SCHEMA = dict(replay_buffer_class=ms.Nullable(ms.Text()), replay_buffer_kwargs=ms.PlainData(mapping=True),
                            optimize_memory_usage=ms.Flag())


def _builtin_replay_buffer_classes() -> dict:
    """sbtf's replay buffer classes by name (they register themselves: ``sbtf.common.registry``)."""
    return registered_classes("replay_buffer")


def resolve_replay_buffer_class(value: Any) -> Optional[type]:
    """
    A replay buffer class from itself or its name (a model file stores the name: sbtf's classes are found by it, a
    class of the user's must be passed again, e.g. ``load(..., custom_objects=dict(replay_buffer_class=MyBuffer))``).
    """
    if value is None:
        return None
    if isinstance(value, type):
        return value
    if isinstance(value, str):
        known = _builtin_replay_buffer_classes()
        name = value.rsplit(":", 1)[-1].rsplit(".", 1)[-1]
        if name in known:
            return known[name]
        raise ValueError(f"Error: unknown replay_buffer_class {value!r}; sbtf's are {sorted(known)} (pass a class of "
                         "your own again, e.g. load(..., custom_objects=dict(replay_buffer_class=MyBuffer))).")
    raise ValueError(f"Error: replay_buffer_class must be a replay buffer class, got {value!r}")


def _normalise_buffer_kwargs(kwargs: Optional[dict]) -> dict:
    """The replay buffer keywords as plain data (an enum such as a ``GoalSelectionStrategy`` by its name)."""
    import enum

    kwargs = dict(kwargs or {})
    return {key: value.name.lower() if isinstance(value, enum.Enum) else value for key, value in kwargs.items()}


@dataclass
class LearnState:
    """What the loop knows about the ``learn()`` call in progress (read by the hooks)."""

    #: the ``total_timesteps`` of this call
    total_timesteps: int
    #: the ``log_interval`` of this call (episodes, or DDPG's cycles per epoch)
    log_interval: Optional[int]
    #: whether the step count was reset (the fps of the log counts from 0 then)
    reset_num_timesteps: bool
    #: env steps of this call so far (summed over the envs)
    steps: int = 0
    #: finished episodes of this call
    num_episodes: int = 0
    #: returns of the last 100 episodes
    episode_rewards: deque = field(default_factory=lambda: deque(maxlen=100))
    #: ``is_success`` of the last 100 episodes that reported it
    episode_successes: deque = field(default_factory=lambda: deque(maxlen=100))
    #: the statistics of the last training (for the log), or None
    last_stats: Optional[np.ndarray] = None
    start_time: float = field(default_factory=time.time)


class OffPolicyAlgorithm(OffPolicyRLModel):
    """
    Shared machinery of sbtf's DQN, SAC, TD3 and DDPG (SB2 ``OffPolicyRLModel`` plus a multi-env collection loop).

    Subclasses implement ``_select_actions(obs)``, ``_training_due(...)`` and ``_train(...)`` (and the usual model
    API); the other hooks have defaults.
    """

    _vec_normalize_env = None
    #: observation spaces the algorithm accepts
    _supported_observation_spaces = (gym.spaces.Box, gym.spaces.Discrete, gym.spaces.MultiDiscrete,
                                     gym.spaces.MultiBinary)

    def _check_spaces(self, observation_space: gym.Space, action_space: gym.Space) -> None:
        super()._check_spaces(observation_space, action_space)
        check_obs_space(observation_space, type(self).__name__, allow_dict=True)  # Dict: MultiInputPolicy
        if isinstance(action_space, gym.spaces.Box) and not (np.all(np.isfinite(action_space.low))
                                                             and np.all(np.isfinite(action_space.high))):
            raise ValueError(f"Error: {type(self).__name__} rescales its [-1, 1] actions to the bounds of the action "
                             f"space, which must be finite; got {action_space!r}. Wrap the env in "
                             "gymnasium.wrappers.RescaleAction or give the Box finite low/high.")

    #: compile the train step with XLA: True, False or "auto" (XLA for Mlp networks whose layers are at most
    #: ``xla_max_layer`` wide; measured on CPU, XLA wins on small networks where per-op overhead dominates and loses on
    #: large ones, where TensorFlow's oneDNN matrix products beat XLA's)
    jit_compile = "auto"
    xla_max_layer = 128

    def _steps_after_learning_starts(self, total_timesteps: int) -> int:
        """The env steps of ``learn(total_timesteps)`` after ``learning_starts`` (for the gradient-step plan)."""
        return max(int(total_timesteps) - max(int(self.learning_starts) - int(self.num_timesteps), 0), 0)

    def _use_xla(self, policy) -> bool:
        if self.jit_compile in (True, False):
            return bool(self.jit_compile)
        sizes = list(getattr(policy, "layer_sizes", [])) + list(getattr(policy, "qf_layer_sizes", [])) or [0]
        extractor = getattr(policy, "features_extractor_class", None)
        if extractor is not None:  # a user's layers may not compile with XLA; sbtf's flattening does
            from sbtf.common.extractors import FlattenExtractor

            if extractor is not FlattenExtractor:
                return False
        elif getattr(policy, "feature_extraction", "mlp") != "mlp":
            return False
        return max(sizes) <= self.xla_max_layer

    @property
    def n_traces(self) -> int:
        """How many times the compiled train functions were traced (constant after warm-up)."""
        cache = getattr(self, "_train_steps", None)
        return 0 if cache is None else cache.n_traces

    # ------------------------------------------------------------------ SB2 OffPolicyRLModel API
    #: stable-baselines3's replay buffer options (``_set_replay_buffer_options``); None: the algorithm's own buffer
    _replay_buffer_class: Optional[type] = None
    replay_buffer_kwargs: dict = {}
    optimize_memory_usage: bool = False

    @property
    def replay_buffer_class(self) -> Optional[type]:
        """The replay buffer class (None: the algorithm's default); a name (from a model file) is resolved when set."""
        return self._replay_buffer_class

    @replay_buffer_class.setter
    def replay_buffer_class(self, value) -> None:
        from sbtf.common.buffers import ReplayBuffer

        value = resolve_replay_buffer_class(value)
        if value is not None and not issubclass(value, ReplayBuffer):
            raise ValueError(f"Error: {type(self).__name__}'s replay_buffer_class must derive from "
                             f"sbtf.common.buffers.ReplayBuffer, got {value!r}")
        self._replay_buffer_class = value

    def _set_replay_buffer_options(self, replay_buffer_class=None, replay_buffer_kwargs: Optional[dict] = None,
                                   optimize_memory_usage: bool = False) -> None:
        """
        Keep stable-baselines3's replay buffer options: the class (e.g. ``HerReplayBuffer``; a name read from a file
        is resolved), its keywords, and the memory-efficient variant of the default ``ReplayBuffer``.
        """
        self.replay_buffer_class = replay_buffer_class
        if replay_buffer_kwargs is not None and not isinstance(replay_buffer_kwargs, dict):
            raise ValueError(f"Error: replay_buffer_kwargs must be a dict, got {replay_buffer_kwargs!r}")
        self.replay_buffer_kwargs = _normalise_buffer_kwargs(replay_buffer_kwargs)
        self.optimize_memory_usage = bool(optimize_memory_usage)

    def _get_save_data(self) -> dict:
        data = super()._get_save_data()
        if "replay_buffer_class" in data and isinstance(data["replay_buffer_class"], type):
            data["replay_buffer_class"] = data["replay_buffer_class"].__name__
        return data

    def is_using_her(self) -> bool:
        """Check if is using HER (the replay buffer is HER's wrapper)."""
        return type(self.replay_buffer).__name__ == "HindsightExperienceReplayWrapper"

    def replay_buffer_add(self, obs_t, action, reward, obs_tp1, done, info) -> None:
        """
        Add a new transition to the replay buffer.

        :param obs_t: (np.ndarray) the last observation
        :param action: ([float]) the action
        :param reward: (float) the reward of the transition
        :param obs_tp1: (np.ndarray) the new observation
        :param done: (bool) is the episode done
        :param info: (dict) extra values used to compute the reward when using HER
        """
        kwargs = dict(info=info) if self.is_using_her() or self._buffer_takes_steps() else {}
        self.replay_buffer.add(obs_t, action, reward, obs_tp1, float(done), **kwargs)

    def _buffer_takes_steps(self) -> bool:
        """Whether the replay buffer stores whole VecEnv steps with their infos (``HerReplayBuffer.store_step``)."""
        return hasattr(self.replay_buffer, "store_step")

    def _make_replay_buffer(self):
        """The replay buffer of ``replay_buffer_class`` (default ``ReplayBuffer``) with ``replay_buffer_kwargs``; the
        class also gets ``env``, ``n_envs``, ``optimize_memory_usage`` and the spaces when its constructor takes them
        (as stable-baselines3 passes them)."""
        import inspect

        from sbtf.common.buffers import ReplayBuffer

        buffer_class = self.replay_buffer_class or ReplayBuffer
        kwargs = dict(self.replay_buffer_kwargs)
        accepted = inspect.signature(buffer_class.__init__).parameters
        offered = dict(env=self.env, n_envs=self.n_envs, observation_space=self.observation_space,
                       action_space=self.action_space)
        if self.optimize_memory_usage:
            if "optimize_memory_usage" not in accepted:
                raise ValueError(f"Error: {buffer_class.__name__} has no optimize_memory_usage option.")
            offered["optimize_memory_usage"] = True
        for key, value in offered.items():
            if key in accepted and key not in kwargs:
                kwargs[key] = value
        try:
            return buffer_class(self.buffer_size, **kwargs)
        except TypeError as exc:
            raise ValueError(f"Error: {type(self).__name__} could not create its replay buffer "
                             f"{buffer_class.__name__}(buffer_size, **{self.replay_buffer_kwargs}): {exc}") from exc

    def _ensure_replay_buffer(self) -> None:
        """Create the replay buffer unless a compatible one exists (e.g. loaded with ``load_replay_buffer``)."""
        if self.replay_buffer is None:
            self.replay_buffer = self._make_replay_buffer()
        self._buffer_uses_observation_space()

    def _buffer_uses_observation_space(self) -> None:
        """Tell the replay buffer the observation space: packed Dict observations are then stored key by key in
        their own dtypes (``ReplayBuffer.use_observation_space``)."""
        use = getattr(self.replay_buffer, "use_observation_space", None)
        if use is not None and self.observation_space is not None:
            use(self.observation_space)

    # ------------------------------------------------------------------ helpers for subclasses
    def _transitions(self, obs_, new_obs, new_obs_, rewards_, dones, infos):
        """
        The next observations and done flags to store for one VecEnv step.

        :return: (next_obs to store, done flags to store (float32): terminated, not truncated)
        """
        next_obs = new_obs_
        store_dones = dones.astype(np.float32)
        vec_normalize = self._vec_normalize_env
        if dones.any():
            next_obs = np.array(new_obs_, copy=True)
            for i in np.flatnonzero(dones):
                info = infos[i]
                terminal = info.get("terminal_observation")
                if terminal is not None:
                    # VecNormalize normalised it: stored unnormalised, as the other observations
                    next_obs[i] = terminal if vec_normalize is None else vec_normalize.unnormalize_obs(terminal)
                if info.get("TimeLimit.truncated", False):
                    store_dones[i] = 0.0
        return next_obs, store_dones

    @staticmethod
    def _count_multiples(low_exclusive: int, high_inclusive: int, freq: int) -> int:
        """How many multiples of ``freq`` lie in ``(low_exclusive, high_inclusive]``."""
        if high_inclusive <= low_exclusive:
            return 0
        return high_inclusive // freq - low_exclusive // freq

    # ------------------------------------------------------------------ hooks
    def _learn_context(self) -> ContextManager:
        """The frame around a whole ``learn()`` call (DDPG: MPI abort-on-failure and rank-0-only logging)."""
        return contextlib.nullcontext()

    def _learn_start(self, total_timesteps: int) -> None:
        """Schedules etc. for a learn() call (the replay buffer exists; the env is not reset yet)."""

    def _select_actions(self, obs: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
        """(actions to store in the buffer, actions for the env) for a batch of ``n_envs`` observations."""
        raise NotImplementedError

    def _store(self, obs_, buffer_actions, rewards_, next_obs, store_dones, infos) -> None:
        """Store one VecEnv step's transitions (unnormalized observations and rewards) in the replay buffer."""
        if self._buffer_takes_steps():
            self.replay_buffer.store_step(obs_, buffer_actions, rewards_, next_obs, store_dones, infos)
        elif self.n_envs == 1:
            if self.is_using_her():
                self.replay_buffer_add(obs_[0], buffer_actions[0], float(rewards_[0]), next_obs[0],
                                       store_dones[0], infos[0])
            else:
                self.replay_buffer.add(obs_[0], buffer_actions[0], float(rewards_[0]), next_obs[0],
                                       store_dones[0])
        elif self.is_using_her():
            for i in range(self.n_envs):
                self.replay_buffer_add(obs_[i], buffer_actions[i], float(rewards_[i]), next_obs[i],
                                       store_dones[i], infos[i])
        else:
            self.replay_buffer.extend(obs_, buffer_actions, rewards_, next_obs, store_dones)

    def _on_episode_end(self, episode_reward: float, episode_length: int, info: dict) -> None:
        """Called for every finished episode (before ``_on_dones``)."""

    def _on_dones(self, dones: np.ndarray) -> None:
        """Called after each VecEnv step in which some env finished an episode."""

    def _training_due(self, first_step: int, n_steps: int, state: LearnState) -> Optional[Any]:
        """
        What to train after the env steps ``first_step ... first_step + n_steps - 1`` of this learn() call
        (``self.num_timesteps`` already counts them): a plan for ``_train``, or None (no training now).
        """
        raise NotImplementedError

    def _train(self, plan: Any, state: LearnState, writer) -> Optional[np.ndarray]:
        """Run a plan of ``_training_due``; the training statistics for the log (or None)."""
        raise NotImplementedError

    def _log_values(self) -> List[Tuple[str, Any]]:
        """Extra (key, value) pairs for the verbose log."""
        return []

    def _stats_names(self) -> List[str]:
        """The names of the training statistics returned by ``_train``, for the verbose log."""
        return []

    def _log_due(self, state: LearnState, dones: np.ndarray) -> bool:
        """Whether to write the verbose log now: every ``log_interval`` episodes (verbose >= 1)."""
        return (self.verbose >= 1 and state.log_interval is not None and bool(dones.any())
                and state.num_episodes % state.log_interval < int(dones.sum()))

    def _dump_logs(self, state: LearnState) -> None:
        """The verbose log of stable-baselines 2's off-policy algorithms."""
        elapsed = max(time.time() - state.start_time, 1e-9)
        fps = int(self.num_timesteps / elapsed) if state.reset_num_timesteps else int(state.steps / elapsed)
        mean_reward = round(float(np.mean(state.episode_rewards)), 1) if state.episode_rewards else -np.inf
        logger.logkv("episodes", state.num_episodes)
        logger.logkv("mean 100 episode reward", mean_reward)
        if len(self.ep_info_buf) > 0 and len(self.ep_info_buf[0]) > 0:
            logger.logkv("ep_rewmean", safe_mean([ep_info["r"] for ep_info in self.ep_info_buf]))
            logger.logkv("eplenmean", safe_mean([ep_info["l"] for ep_info in self.ep_info_buf]))
        for key, value in self._log_values():
            logger.logkv(key, value)
        logger.logkv("fps", fps)
        logger.logkv("time_elapsed", int(time.time() - state.start_time))
        if len(state.episode_successes) > 0:
            logger.logkv("success rate", np.mean(state.episode_successes))
        if state.last_stats is not None:
            for name, val in zip(self._stats_names(), np.asarray(state.last_stats).reshape(-1)):
                logger.logkv(name, float(val))
        logger.logkv("total timesteps", self.num_timesteps)
        logger.dumpkvs()

    # ------------------------------------------------------------------ the loop
    def _learn(self, total_timesteps: int, callback=None, log_interval: Optional[int] = 100, tb_log_name: str = "run",
               reset_num_timesteps: bool = True, replay_wrapper=None, progress_bar: bool = False):
        """The learn loop of every off-policy algorithm (see the module docstring); returns ``self``."""
        from sbtf.common.vec_env import unwrap_vec_normalize

        with self._learn_context(), self._learning(callback, total_timesteps, tb_log_name, reset_num_timesteps,
                                                   progress_bar) as (callback, writer):
            # the replay buffer stores the original observations and rewards, normalised when sampled (as SB3); a
            # Dict observation space is normalised key by key on the packed rows
            self._vec_normalize_env = for_packed_rows(unwrap_vec_normalize(self.env))
            self._ensure_replay_buffer()
            if hasattr(self.replay_buffer, "attach_env"):  # HerReplayBuffer: compute_reward of the current env
                self.replay_buffer.attach_env(self.env)
                # the loop starts with env.reset(): an episode left unfinished by an earlier learn() (or in a loaded
                # buffer) ends here, as a time-limit cut, instead of running on into the next episode
                truncate = getattr(self.replay_buffer, "truncate_last_trajectory", None)
                if truncate is not None:
                    truncate()
            if replay_wrapper is not None:
                if self._buffer_takes_steps():
                    raise ValueError("Error: the SB2 HER wrapper cannot wrap a HerReplayBuffer; use one of them.")
                self.replay_buffer = replay_wrapper(self.replay_buffer)
            total_timesteps = int(total_timesteps)
            self._learn_start(total_timesteps)
            self._collect_and_train(total_timesteps, callback, log_interval, reset_num_timesteps, writer)
        return self

    def _collect_and_train(self, total_timesteps: int, callback, log_interval: Optional[int],
                           reset_num_timesteps: bool, writer) -> None:
        env = self.env
        n_envs = self.n_envs
        vec_normalize = self._vec_normalize_env
        state = LearnState(total_timesteps, log_interval, reset_num_timesteps)
        current_rewards = np.zeros(n_envs, dtype=np.float64)
        current_lengths = np.zeros(n_envs, dtype=np.int64)
        obs = env.reset()
        obs_ = vec_normalize.get_original_obs() if vec_normalize is not None else obs
        callback.on_training_start(locals(), globals())
        callback.on_rollout_start()
        n_iterations = int(math.ceil(total_timesteps / n_envs))
        for step in range(n_iterations):
            buffer_actions, env_actions = self._select_actions(obs)
            new_obs, rewards, dones, infos = env.step(env_actions)
            self.num_timesteps += n_envs
            state.steps += n_envs
            # SB2 local names, for callbacks that read them
            action, rew, reward, done, info = buffer_actions, rewards, rewards, dones, infos
            callback.update_locals(locals())
            if callback.on_step() is False:
                break
            if vec_normalize is not None:
                new_obs_ = vec_normalize.get_original_obs()
                rewards_ = vec_normalize.get_original_reward()
            else:
                new_obs_, rewards_ = new_obs, rewards
            next_obs, store_dones = self._transitions(obs_, new_obs, new_obs_, rewards_, dones, infos)
            self._store(obs_, buffer_actions, rewards_, next_obs, store_dones, infos)
            obs = new_obs
            obs_ = new_obs_

            if writer is not None:
                self.episode_reward = total_episode_reward_logger(
                    self.episode_reward, np.asarray(rewards_).reshape((n_envs, 1)), dones.reshape((n_envs, 1)),
                    writer, self.num_timesteps)
            current_rewards += rewards_
            current_lengths += 1
            if dones.any():
                for i in np.flatnonzero(dones):
                    self._episode_finished(state, float(current_rewards[i]), int(current_lengths[i]), infos[i])
                    current_rewards[i] = 0.0
                    current_lengths[i] = 0
                self._on_dones(dones)

            plan = self._training_due(step * n_envs, n_envs, state)
            if plan is not None:
                callback.on_rollout_end()
                stats = self._train(plan, state, writer)
                if stats is not None:
                    state.last_stats = stats
                callback.on_rollout_start()

            if self._log_due(state, dones):
                self._dump_logs(state)
        callback.on_training_end()

    def _episode_finished(self, state: LearnState, episode_reward: float, episode_length: int, info: dict) -> None:
        state.episode_rewards.append(episode_reward)
        state.num_episodes += 1
        maybe_ep_info = info.get("episode")
        if maybe_ep_info is not None:
            self.ep_info_buf.append(maybe_ep_info)
        maybe_is_success = info.get("is_success")
        if maybe_is_success is not None:
            state.episode_successes.append(float(maybe_is_success))
        self._record_episode_end(info)
        self._on_episode_end(episode_reward, episode_length, info)


_LEARN_DOC = """
        Train the model for ``total_timesteps`` environment steps (summed over the envs of a VecEnv).

        :param total_timesteps: (int) The total number of samples to train on
        :param callback: (callable, [BaseCallback] or BaseCallback) called at every step
        :param log_interval: (int) The number of episodes before logging (verbose >= 1)
        :param tb_log_name: (str) the name of the run for tensorboard log
        :param reset_num_timesteps: (bool) whether or not to reset the current timestep number (used in logging)
        :param replay_wrapper: (callable) wraps the replay buffer (HER)
        :param progress_bar: (bool) show a progress bar (tqdm)
        :return: ({algo}) the trained model
        """


def learn_doc(algo: str) -> Callable:
    """Decorator: the shared ``learn`` docstring of the off-policy algorithms, returning an ``algo`` model."""
    def decorate(fn: Callable) -> Callable:
        fn.__doc__ = _LEARN_DOC.replace("{algo}", algo)
        return fn
    return decorate


__all__ = ["OffPolicyAlgorithm", "LearnState", "learn_doc", "REPLAY_BUFFER_SCHEMA", "resolve_replay_buffer_class"]
