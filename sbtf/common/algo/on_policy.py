"""The one ``learn`` loop of the on-policy family (A2C, ACER, ACKTR, PPO2; PPO1, TRPO and GAIL over MPI).

One update of ``learn()``::

    progress_remaining <- the schedule point of this update      (_progress_remaining)
    repeat _rollouts_per_update() times (GAIL's g_step, else once):
        batch <- _collect_rollout(callback)                        (runner / segment generator; callbacks on_step)
        _record_rollout(batch, writer)                              (episode infos, TensorBoard episode rewards)
        stats <- train(batch)                                       (the algorithm's compiled train step)
    stats += _after_rollouts(batch, stats)                          (ACER's replay, GAIL's discriminator, MPI counts)
    TensorBoard: _tensorboard_scalars / _tensorboard_histograms
    logger: _log_update (the algorithm's SB2 keys), when _is_log_update

An algorithm file keeps its constructor, its losses, its compiled train step (``train(batch) -> {name: value}``) and
the few hooks above where stable-baselines 2 differed between algorithms (schedule points, log keys).
"""
from __future__ import annotations

import time
import warnings
from abc import abstractmethod
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Dict, Optional, Sequence

import gymnasium as gym
import numpy as np
import tensorflow as tf

from sbtf.common.base_class import ActorCriticRLModel, TensorboardLogger
from sbtf.common.policies import ActorCriticPolicy
from sbtf.common.algo.train_log import log_rollout_episode_rewards

if TYPE_CHECKING:
    from sbtf.common.callbacks import BaseCallback
    from sbtf.common.runners import AbstractEnvRunner


@dataclass
class LearnProgress:
    """
    Where ``learn()`` is: read by the schedules, the train step and the logs.

    :param total_timesteps: the ``total_timesteps`` of this ``learn()`` call
    :param n_updates: the number of updates (None: until ``total_timesteps`` steps were collected)
    :param start_timesteps: ``num_timesteps`` when ``learn()`` started
    :param t_start: ``time.time()`` when ``learn()`` started
    """

    total_timesteps: int
    n_updates: Optional[int]
    start_timesteps: int
    t_start: float
    #: the current update, from 1
    update: int = 0
    #: ``num_timesteps`` before this update's rollout(s)
    timesteps_before: int = 0
    #: ``time.time()`` when this update started
    t_update_start: float = 0.0
    #: the schedules' progress of this update: 1 at the start of training, 0 at the end
    progress_remaining: float = 1.0
    #: whether this update is logged (``verbose`` and ``log_interval``)
    log_now: bool = False
    #: per-update scratch values of the algorithm (e.g. the MPI family's local step count)
    scratch: Dict[str, Any] = field(default_factory=dict)


class OnPolicyAlgorithm(ActorCriticRLModel):
    """
    The base class of the on-policy actor-critic algorithms: owns the ``learn`` loop (callbacks, progress bar,
    schedules, logging, TensorBoard); a subclass provides the rollout collection and ``train(batch)``.
    """

    #: the current ``learn()`` progress (None outside ``learn()``)
    _learn_progress: Optional[LearnProgress] = None

    # ------------------------------------------------------------------ the loop
    def _learn(self, total_timesteps: int, callback=None, log_interval: int = 100, tb_log_name: str = "run",
               reset_num_timesteps: bool = True, progress_bar: bool = False):
        """
        The learn loop of every on-policy algorithm (the public ``learn`` methods keep SB2's signatures and
        defaults and call this).

        :param total_timesteps: (int) the number of environment steps to train for
        :param callback: (callable, [BaseCallback] or BaseCallback) called at every step
        :param log_interval: (int) the number of updates between logs (verbose >= 1)
        :param tb_log_name: (str) the name of the run for TensorBoard
        :param reset_num_timesteps: (bool) whether to reset ``num_timesteps``
        :param progress_bar: (bool) show a progress bar (tqdm)
        :return: the trained model (``self``)
        """
        with self._learning(callback, total_timesteps, tb_log_name, reset_num_timesteps,
                            progress_bar) as (callback, writer):
            progress = LearnProgress(total_timesteps=int(total_timesteps), n_updates=self._n_updates(total_timesteps),
                                     start_timesteps=self.num_timesteps, t_start=time.time())
            self._learn_progress = progress
            self._on_learn_start(progress, callback)
            callback.on_training_start(locals(), globals())
            try:
                while self._has_next_update(progress):
                    progress.update += 1
                    progress.timesteps_before = self.num_timesteps
                    progress.t_update_start = time.time()
                    progress.scratch = {}
                    progress.progress_remaining = self._progress_remaining(progress)
                    progress.log_now = self._is_log_update(progress.update, log_interval)
                    self._on_update_start(progress)
                    batch, stats, stopped = None, {}, False
                    for _ in range(self._rollouts_per_update()):
                        batch = self._collect_rollout(callback)
                        if batch is None:
                            stopped = True
                            break
                        self._record_rollout(batch, writer)
                        stats = self.train(batch)
                    if stopped:
                        self._on_rollout_stopped(progress)
                        break
                    stats = {**stats, **self._after_rollouts(batch, stats)}
                    self._write_tensorboard(writer, batch, stats)
                    if progress.log_now:
                        self._log_update(batch, stats)
            finally:
                self._learn_progress = None
            callback.on_training_end()
        return self

    # ------------------------------------------------------------------ hooks: pace and schedules
    def _n_updates(self, total_timesteps: int) -> Optional[int]:
        """The number of updates of a ``learn(total_timesteps)`` (None: until that many steps were collected)."""
        return None

    def _has_next_update(self, progress: LearnProgress) -> bool:
        if progress.n_updates is not None:
            return progress.update < progress.n_updates
        return self.num_timesteps - progress.start_timesteps < progress.total_timesteps

    def _progress_remaining(self, progress: LearnProgress) -> float:
        """
        The schedules' point for the coming update: 1 at the start of training, 0 at the end (default: PPO2's
        ``1 - (update - 1) / n_updates``).
        """
        n_updates = progress.n_updates or 1
        return 1.0 - (progress.update - 1.0) / n_updates

    def _is_log_update(self, update: int, log_interval: int) -> bool:
        """Whether the logger gets this update's block (SB2: the first update and every ``log_interval``-th)."""
        return self.verbose >= 1 and (update % log_interval == 0 or update == 1)

    def _rollouts_per_update(self) -> int:
        """Rollouts (each followed by a train step) per update (GAIL: ``g_step``)."""
        return 1

    # ------------------------------------------------------------------ hooks: one update
    def _on_learn_start(self, progress: LearnProgress, callback: "BaseCallback") -> None:
        """Set up what lives for one ``learn()`` call (replay buffers, segment generators, ...)."""

    def _on_update_start(self, progress: LearnProgress) -> None:
        """Called before the rollout(s) of an update."""

    @abstractmethod
    def _collect_rollout(self, callback: "BaseCallback"):
        """Collect one rollout (calling the callback's rollout and step hooks); None when a callback stopped."""

    def _record_rollout(self, batch, writer: Optional[TensorboardLogger]) -> None:
        """Keep the rollout's episode infos; write its finished episodes' rewards to TensorBoard."""
        self.ep_info_buf.extend(batch.episode_infos)
        if writer is not None:
            log_rollout_episode_rewards(self, writer, batch.true_rewards, batch.masks)

    @abstractmethod
    def train(self, batch) -> Dict[str, float]:
        """One update of the networks on ``batch``; returns the named statistics of the update."""

    def _after_rollouts(self, batch, stats: Dict[str, float]) -> Dict[str, float]:
        """After the update's train steps (ACER's replay, GAIL's discriminator); returns more statistics."""
        return {}

    def _on_rollout_stopped(self, progress: LearnProgress) -> None:
        """A callback stopped training during a rollout (before ``learn()`` returns)."""

    # ------------------------------------------------------------------ hooks: logs
    def _tensorboard_scalars(self, batch, stats: Dict[str, float]) -> Dict[str, float]:
        """The update's TensorBoard scalars (``loss/...``, ``input_info/...``)."""
        return {}

    def _tensorboard_histograms(self, batch) -> Dict[str, np.ndarray]:
        """The update's TensorBoard histograms (with ``full_tensorboard_log``)."""
        return {}

    def _write_tensorboard(self, writer: Optional[TensorboardLogger], batch, stats: Dict[str, float]) -> None:
        if writer is None:
            return
        step = self.num_timesteps
        writer.add_scalars(self._tensorboard_scalars(batch, stats), step)
        if getattr(self, "full_tensorboard_log", False):
            for tag, values in self._tensorboard_histograms(batch).items():
                writer.add_histogram(tag, values, step)

    def _log_update(self, batch, stats: Dict[str, float]) -> None:
        """Record and dump the update's logger block (the algorithm's SB2 keys)."""

    def _fps_since_start(self) -> int:
        """Steps per second since ``learn()`` started (A2C's, ACKTR's ``fps``)."""
        progress = self._learn_progress
        steps = self.num_timesteps - progress.start_timesteps
        return int(steps / max(time.time() - progress.t_start, 1e-9))


class NStepActorCriticRLModel(OnPolicyAlgorithm):
    """
    The base class of the actor-critic models that collect ``n_steps`` per environment of a VecEnv with a runner and
    train with a compiled train step (A2C, ACER, ACKTR, PPO2).

    A subclass sets its own hyperparameters, then calls this constructor, which builds the model when
    ``_init_setup_model``; it defines ``_make_runner`` and ``_make_train_step`` (the train step for ``n_batch``,
    built on first use).

    :param policy: (ActorCriticPolicy or str) policy class or name
    :param env: the environment (see ``BaseRLModel``), vectorised if it is not
    :param n_steps: (int) the number of steps to run for each environment per update
    :param verbose: (int) the verbosity level: 0 none, 1 training information, 2 tensorflow debug
    :param tensorboard_log: (str) the log location for tensorboard (if None, no logging)
    :param _init_setup_model: (bool) build the networks now
    :param policy_kwargs: (dict) additional arguments to be passed to the policy on creation
    :param full_tensorboard_log: (bool) also log histograms
    :param seed: (int) seed for python, numpy, TF and the env
    :param n_cpu_tf_sess: (int) threads for TensorFlow ops (set once per process, before TF starts)
    """

    def __init__(self, policy, env, n_steps: int, verbose: int = 0, tensorboard_log: Optional[str] = None,
                 _init_setup_model: bool = True, policy_kwargs: Optional[dict] = None,
                 full_tensorboard_log: bool = False, seed: Optional[int] = None, n_cpu_tf_sess: Optional[int] = None):
        self.n_steps = n_steps
        self.tensorboard_log = tensorboard_log
        self.full_tensorboard_log = full_tensorboard_log
        self.n_batch: Optional[int] = None
        self._train_step = None
        super().__init__(policy=policy, env=env, verbose=verbose, requires_vec_env=True,
                         _init_setup_model=_init_setup_model, policy_kwargs=policy_kwargs, seed=seed,
                         n_cpu_tf_sess=n_cpu_tf_sess)
        if _init_setup_model:
            self.setup_model()

    @staticmethod
    def _renamed_n_cpu(old_name: str, old_value: Optional[int], n_cpu_tf_sess: Optional[int]) -> Optional[int]:
        """
        SB2's deprecated thread-count argument (ACER's ``num_procs``, ACKTR's ``nprocs``): when given, warn and use it.

        :return: (int) the number of threads for TensorFlow operations
        """
        if old_value is None:
            return n_cpu_tf_sess
        warnings.warn(f"{old_name} will be removed in a future version (v3.x.x) use n_cpu_tf_sess instead",
                      DeprecationWarning, stacklevel=2)
        return old_value

    @property
    def runner(self) -> "AbstractEnvRunner":
        """The rollout collector of ``self.env``, made on first use (and again after the environment changed)."""
        if self._runner is None:
            self._runner = self._make_runner()
        return self._runner

    @abstractmethod
    def _make_runner(self) -> "AbstractEnvRunner":
        """A runner that collects ``n_steps`` per environment of ``self.env``."""

    def _on_env_changed(self) -> None:
        """A new environment: a new runner, and a new train step when the batch size changed."""
        self._runner = None
        if self.policy_tf is not None and self.n_batch != self.n_envs * self.n_steps:
            self.n_batch = self.n_envs * self.n_steps
            self._train_step = self._make_train_step()

    def _setup_policy(self, n_steps: int, n_batch: Optional[int]) -> ActorCriticPolicy:
        """
        Seed, build the policy (for ``n_envs`` environments) and bind it; ``_variables`` are its parameters.

        :param n_steps: (int) the steps per environment the policy is built for
        :param n_batch: (int) the batch size it is built for (None: any)
        :return: (ActorCriticPolicy) the policy
        """
        self.set_random_seed(self.seed)
        policy = self._make_policy(self.n_envs, n_steps, n_batch)
        self._bind_policy(policy)
        self._variables = self.get_parameter_list()
        return policy

    @abstractmethod
    def _make_train_step(self):
        """The compiled train step (a ``TrainStep``: traced on its first call, never at construction or load)."""

    def _rollout_distribution(self, obs, states, masks):
        """
        Inside a train step: the policy's action distribution and values on a rollout (a recurrent policy is
        unrolled over the ``n_steps`` of each env from ``states``, reset where ``masks`` is set).

        :return: (ProbabilityDistribution, tf.Tensor) the distribution and the values
        """
        policy = self.policy_tf
        if policy.recurrent:
            flat, vpred, _, _ = policy.forward(obs, states, masks, n_steps=self.n_steps)
        else:
            flat, vpred, _, _ = policy.forward(obs)
        return policy.proba_distribution_from_flat(flat), vpred

    def _rollout_inputs(self, n_batch: int, vectors: Sequence[str], n_states: Optional[int] = None) -> dict:
        """
        Train-step input specs of ``n_batch`` rollout samples: ``obs``, ``actions`` (float32 for Box action spaces,
        else the distribution's sample dtype), a float32 vector per name of ``vectors`` and, when ``n_states`` is
        given, ``states`` of shape ``(n_states, state_size)`` (``(n_states, 1)`` for a feed-forward policy).
        """
        policy = self.policy_tf
        pdtype = policy.pdtype
        act_dtype = tf.float32 if isinstance(self.action_space, gym.spaces.Box) else pdtype.sample_dtype()
        vec = tf.TensorSpec((n_batch,), tf.float32)
        inputs = {"obs": policy.obs_signature(n_batch),
                  "actions": tf.TensorSpec((n_batch,) + tuple(pdtype.sample_shape()), act_dtype)}
        inputs.update((name, vec) for name in vectors)
        if n_states is not None:
            state_size = policy.state_size if policy.recurrent else 1
            inputs["states"] = tf.TensorSpec((n_states, state_size), tf.float32)
        return inputs

    def _state_input(self, states: Optional[np.ndarray]) -> np.ndarray:
        """The train step's ``states`` input: the rollout's start states, or a (1, 1) placeholder (feed-forward)."""
        return np.zeros((1, 1), np.float32) if states is None else np.asarray(states, np.float32)

    # ------------------------------------------------------------------ the loop's n-step parts
    def _n_updates(self, total_timesteps: int) -> Optional[int]:
        return int(total_timesteps) // self.n_batch

    def _planned_gradient_steps(self, total_timesteps: int) -> Optional[int]:
        n_updates = self._n_updates(total_timesteps)
        if n_updates is None:  # sb3's pace: rollouts until total_timesteps steps were taken
            n_updates = -(-int(total_timesteps) // ((self.n_envs or 1) * self.n_steps))
        return n_updates * self._gradient_steps_per_update()

    def _gradient_steps_per_update(self) -> int:
        """Gradient steps per update (one by default; PPO2: epochs x minibatches)."""
        return 1

    def _collect_rollout(self, callback: "BaseCallback"):
        update = self._learn_progress.update  # noqa: F841 - in the callback's locals, as SB2's learn() had it
        callback.on_rollout_start()
        batch = self.runner.run(callback)
        callback.update_locals(locals())
        callback.on_rollout_end()
        if not self.runner.continue_training:
            return None
        return batch


__all__ = ["LearnProgress", "OnPolicyAlgorithm", "NStepActorCriticRLModel"]
