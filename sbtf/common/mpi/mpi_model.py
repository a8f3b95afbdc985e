"""What PPO1, TRPO and GAIL share: two policies (``model`` and ``oldpi``), one environment per process, trajectory
segments, and data-parallel training over MPI.

Under ``mpirun -np N python script.py`` every rank builds the same model, collects its own trajectory segment and
joins the collective calls of the update (gradient/statistics averaging), so the parameters stay identical. The MPI
rules (rank seeding, broadcasting rank 0's parameters when ``learn()`` starts, logging and saving on rank 0 only,
aborting the job when a rank fails) are ``sbtf.common.mpi.mpi_mixin.MpiDataParallelMixin``'s; the learn loop is the
on-policy family's (``sbtf.common.algo.on_policy.OnPolicyAlgorithm``), fed one ``TrajectorySegment`` per update.

In one process (no mpirun, with or without mpi4py installed) all of this reduces to ordinary training, and the
algorithms use fused compiled update loops instead of per-minibatch calls.
"""
from __future__ import annotations

import contextlib
import time
from collections import OrderedDict, deque
from typing import TYPE_CHECKING, Dict, Iterator, Optional, Tuple

import numpy as np
import tensorflow as tf

from sbtf import logger
from sbtf.common.base_class import SetVerbosity, TensorboardLogger, TensorboardWriter
from sbtf.common.math_util import safe_mean, total_episode_reward_logger
from sbtf.common.mpi.mpi_mixin import MpiDataParallelMixin
from sbtf.common.algo.on_policy import LearnProgress, OnPolicyAlgorithm
from sbtf.common.policies import ActorCriticPolicy
from sbtf.common.storage.rollout import RolloutBatch, TrajectorySegment, add_vtarg_and_adv
from sbtf.common.runners import traj_segment_generator
from sbtf.common.tf_util import make_assign_fn
from sbtf.common.arg_checks import check_total_timesteps

if TYPE_CHECKING:
    from sbtf.common.callbacks import BaseCallback


class MpiActorCriticRLModel(MpiDataParallelMixin, OnPolicyAlgorithm):
    """
    Base class of the MPI actor-critic algorithms (PPO1, TRPO, GAIL): a current policy ``policy_pi`` (variables
    ``model/...``) and an old policy ``old_policy`` (``oldpi/model/...``) refreshed before every update; one
    trajectory segment of ``_horizon()`` steps per rank and update, trained on by ``train(batch)`` in the on-policy
    loop (``OnPolicyAlgorithm``), with the MPI rules of ``MpiDataParallelMixin``.
    """

    #: length of the rolling episode buffers of the log (``EpLenMean``, ``EpRewMean``)
    _episode_window = 100

    def __init__(self, policy, env, _init_setup_model, verbose=0, policy_base=ActorCriticPolicy,
                 requires_vec_env=False, policy_kwargs=None, seed=None, n_cpu_tf_sess=1):
        self.policy_pi: Optional[ActorCriticPolicy] = None
        self.old_policy: Optional[ActorCriticPolicy] = None
        self._assign_old_eq_new_fn = None
        self._seg_gen = None
        self._last_segment: Optional[TrajectorySegment] = None
        super().__init__(policy=policy, env=env, _init_setup_model=_init_setup_model, verbose=verbose,
                         policy_base=policy_base, requires_vec_env=requires_vec_env, policy_kwargs=policy_kwargs,
                         seed=seed, n_cpu_tf_sess=n_cpu_tf_sess)

    # ------------------------------------------------------------------ environment checks
    def _check_single_env(self) -> None:
        if self.n_envs is not None and self.n_envs != 1:
            raise ValueError(f"Error: {type(self).__name__} runs one environment per process (as in stable-baselines),"
                             f" got a VecEnv with {self.n_envs} envs. To collect data in parallel, run the script "
                             f"under MPI instead: mpirun -np {self.n_envs} python your_script.py (see docs/mpi.md).")

    def _check_policy(self) -> None:
        self._check_policy_class(ActorCriticPolicy)
        if getattr(self.policy_class, "recurrent", False):
            raise ValueError(f"Error: {type(self).__name__} does not support recurrent policies "
                             f"({self.policy_class.__name__}), as in stable-baselines; "
                             "use PPO2 or A2C for LSTM policies.")

    def _make_vec_env(self, env):
        vec_env = super()._make_vec_env(env)
        if vec_env.num_envs != 1:  # checked before the env replaces the current one
            self.n_envs, old = vec_env.num_envs, self.n_envs
            try:
                self._check_single_env()
            finally:
                self.n_envs = old
        return vec_env

    def _on_env_changed(self) -> None:
        self._check_single_env()

    # ------------------------------------------------------------------ policies
    def _setup_policies(self) -> None:
        """Build ``policy_pi`` (``model/``) and ``old_policy`` (``oldpi/model/``), and the ``oldpi <- pi`` copy."""
        self._check_policy()
        self._check_single_env()
        self._reset_parameter_sync()
        self.policy_pi = self._make_policy(self.n_envs, 1, None)
        self.old_policy = self._make_policy(self.n_envs, 1, None)
        self._assign_old_eq_new_fn = make_assign_fn(list(self.old_policy.named_parameters().values()),
                                                    list(self.policy_pi.named_parameters().values()))
        self.assign_old_eq_new()
        self._bind_policy(self.policy_pi)

    def assign_old_eq_new(self) -> None:
        """Copy the current policy's parameters into the old policy (``oldpi``)."""
        self._assign_old_eq_new_fn()  # a tracked write (tf_util.make_assign_fn)

    def _policies(self) -> list:
        return [p for p in (self.policy_pi, self.old_policy) if p is not None]

    def _pretrain_variables(self) -> list:
        return list(self.policy_pi.named_parameters().values())

    # ------------------------------------------------------------------ the on-policy loop's MPI parts
    @contextlib.contextmanager
    def _learning(self, callback, total_timesteps: int, tb_log_name: str, reset_num_timesteps: bool,
                  progress_bar: bool = False) -> Iterator[Tuple["BaseCallback", Optional[TensorboardLogger]]]:
        """
        The frame of ``learn()`` on every rank: reset the step count (when asked) and bind the callback, then for the
        body apply the verbosity, the MPI error handling and logging rules (``_mpi_learn_context``) and open the
        TensorBoard writer (rank 0), after checking the environment and broadcasting rank 0's parameters.

        :return: (BaseCallback, TensorboardLogger) the callback and the writer (None on other ranks or without
            ``tensorboard_log``)
        """
        check_total_timesteps(total_timesteps)
        new_tb_log = self._init_num_timesteps(reset_num_timesteps)
        callback = self._init_callback(callback, progress_bar, total_timesteps=total_timesteps)
        with SetVerbosity(self.verbose), self._mpi_learn_context(), \
                TensorboardWriter(self.graph, self._tensorboard_log_for_rank(), tb_log_name, new_tb_log) as writer:
            self._setup_learn()
            self._check_single_env()
            self.sync_parameters()
            yield callback, writer

    def _horizon(self) -> int:
        """The steps per segment (per rank)."""
        raise NotImplementedError

    def _progress_remaining(self, progress: LearnProgress) -> float:
        # SB2: 1 - (steps of the whole job so far) / total_timesteps, at least 0
        return max(1.0 - float(self.num_timesteps - progress.start_timesteps) / progress.total_timesteps, 0.0)

    def _is_log_update(self, update: int, log_interval: int) -> bool:
        return True  # every iteration is recorded (SB2: log_interval unused); only rank 0 at verbose >= 1 prints

    def _on_learn_start(self, progress: LearnProgress, callback: "BaseCallback") -> None:
        self._seg_gen = traj_segment_generator(self.policy_pi, self.env, self._horizon(),
                                               reward_giver=getattr(self, "reward_giver", None),
                                               gail=bool(getattr(self, "using_gail", False)), callback=callback,
                                               model=self, timestep_increment=self.nworkers)
        progress.scratch = {}
        self._episodes_so_far = 0
        self._len_buffer = deque(maxlen=self._episode_window)
        self._reward_buffer = deque(maxlen=self._episode_window)
        self._true_reward_buffer = deque(maxlen=self._episode_window) if getattr(self, "using_gail", False) else None

    def _on_update_start(self, progress: LearnProgress) -> None:
        logger.log("********** Iteration %i ************" % (progress.update - 1))
        progress.scratch["local_steps"] = 0

    def _collect_rollout(self, callback: "BaseCallback") -> Optional[RolloutBatch]:
        """The next segment with its GAE(lambda) advantages and TD(lambda) returns (None: a rank's callback stopped)."""
        seg = next(self._seg_gen)
        scratch = self._learn_progress.scratch
        scratch["local_steps"] += int(seg.total_timestep)
        if self._any_rank_stopped(not seg.continue_training):  # stopped early by a callback
            return None
        add_vtarg_and_adv(seg, self.gamma, self.lam)
        self._last_segment = seg
        return seg.to_batch(self.policy_pi.obs_dtype, standardize_advantages=False)

    def _record_rollout(self, batch: RolloutBatch, writer: Optional[TensorboardLogger]) -> None:
        """TensorBoard ``episode_reward`` of the segment (the episodes reach ``ep_info_buf`` once gathered)."""
        if writer is None:
            return
        seg, progress = self._last_segment, self._learn_progress
        steps_before_segment = progress.scratch["local_steps"] - int(seg.total_timestep)
        total_episode_reward_logger(self.episode_reward, seg.true_rewards.reshape((self.n_envs, -1)),
                                    seg.dones.reshape((self.n_envs, -1)), writer,
                                    progress.timesteps_before + steps_before_segment * self.nworkers)

    def _check_sync_every(self, period: int) -> None:
        """Every ``period`` iterations (from the first), check that the ranks' parameters agree (collective)."""
        if self.nworkers > 1 and (self._learn_progress.update - 1) % period == 0:
            self.check_parameters_synced()

    def _after_rollouts(self, batch: RolloutBatch, stats: Dict[str, float]) -> Dict[str, float]:
        """Gather the episodes over the ranks and count the iteration's steps of the whole job (collectives)."""
        progress = self._learn_progress
        self._episodes_so_far += self._log_episodes(self._last_segment, self._len_buffer, self._reward_buffer,
                                                    self._true_reward_buffer)
        # the generator counted nworkers steps per local step; make the count exact
        self.num_timesteps = progress.timesteps_before + int(self.comm.allreduce(progress.scratch["local_steps"]))
        return {}

    def _on_rollout_stopped(self, progress: LearnProgress) -> None:
        self.num_timesteps = progress.timesteps_before + int(self.comm.allreduce(progress.scratch["local_steps"]))

    def _tensorboard_histograms(self, batch: RolloutBatch) -> Dict[str, np.ndarray]:
        return {"input_info/discounted_rewards": batch.returns, "input_info/advantage": batch.advantages,
                "input_info/observation": batch.observations}

    def _mpi_tensorboard_scalars(self, batch: RolloutBatch, stats: Dict[str, float], learning_rate: float,
                                 extra_scalars: Dict[str, float]) -> Dict[str, float]:
        """``loss/<name>`` of ``loss_names`` and the ``input_info/...`` scalars of an iteration."""
        return {**{f"loss/{name}": float(stats[name]) for name in self.loss_names},
                "input_info/discounted_rewards": float(np.mean(batch.returns)),
                "input_info/learning_rate": learning_rate,
                "input_info/advantage": float(np.mean(batch.advantages)), **extra_scalars}

    def _dump_iteration_log(self) -> None:
        """
        Record ``EpisodesSoFar``, ``TimestepsSoFar`` and ``TimeElapsed`` and dump the iteration's log (rank 0, verbose
        >= 1).
        """
        progress = self._learn_progress
        logger.record_tabular("EpisodesSoFar", self._episodes_so_far)
        logger.record_tabular("TimestepsSoFar", self.num_timesteps)
        logger.record_tabular("TimeElapsed", time.time() - progress.t_start)
        if self._log_verbose():
            logger.dump_tabular()

    def _log_episodes(self, seg: TrajectorySegment, len_buffer: deque, reward_buffer: deque,
                      true_reward_buffer: Optional[deque] = None) -> int:
        """
        Gather the episodes that ended in the segment over all ranks (collective), add them to ``ep_info_buf`` and to
        the rolling buffers, and record ``EpLenMean``, ``EpRewMean``, ``EpTrueRewMean`` (GAIL) and ``EpThisIter``.

        :param seg: (TrajectorySegment) the segment (``ep_lens``, ``ep_rets`` and, with ``true_reward_buffer``,
            ``ep_true_rets``)
        :param len_buffer: (deque) the rolling buffer of episode lengths
        :param reward_buffer: (deque) the rolling buffer of episode returns
        :param true_reward_buffer: (deque) GAIL: the rolling buffer of the environment's returns, which then also
            go to ``ep_info_buf``
        :return: (int) the number of episodes
        """
        if true_reward_buffer is None:
            lens, rews = self._gather_episode_stats(seg.ep_lens, seg.ep_rets)
            info_rets = rews
        else:
            lens, rews, info_rets = self._gather_episode_stats(seg.ep_lens, seg.ep_rets, seg.ep_true_rets)
            true_reward_buffer.extend(info_rets)
        self.ep_info_buf.extend({"r": r, "l": length} for r, length in zip(info_rets, lens))
        len_buffer.extend(lens)
        reward_buffer.extend(rews)
        if len(len_buffer) > 0:
            logger.record_tabular("EpLenMean", safe_mean(len_buffer))
            logger.record_tabular("EpRewMean", safe_mean(reward_buffer))
        if true_reward_buffer is not None and len(true_reward_buffer) > 0:
            logger.record_tabular("EpTrueRewMean", safe_mean(true_reward_buffer))
        logger.record_tabular("EpThisIter", len(lens))
        return len(lens)

    def _gather_episode_stats(self, *local_lists) -> list:
        """Concatenate per-rank lists (episode lengths, returns, ...) over all ranks (collective)."""
        gathered = self.comm.allgather(tuple(list(values) for values in local_lists))
        return [[v for rank_values in gathered for v in rank_values[k]] for k in range(len(local_lists))]

    @staticmethod
    def _standardize(adv: np.ndarray) -> np.ndarray:
        return ((adv - adv.mean()) / (adv.std() + 1e-8)).astype(np.float32)

    def _action_spec(self):
        pdtype = self.policy_pi.pdtype
        shape = (None,) + tuple(pdtype.sample_shape())
        dtype = tf.int64 if pdtype.action_dtype == tf.int64 else tf.float32
        return tf.TensorSpec(shape, dtype)

    def _named_parameters(self) -> "OrderedDict[str, tf.Variable]":
        return self.policy_pi.named_parameters()


__all__ = ["MpiActorCriticRLModel"]
