"""What PPO1, TRPO and GAIL share: two policies (``model`` and ``oldpi``), one environment per process, and
data-parallel training over MPI.

Under ``mpirun -np N python script.py`` every rank builds the same model, collects its own trajectory segment and
joins the collective calls of the update (gradient/statistics averaging), so the parameters stay identical:

* ``learn()`` starts by broadcasting rank 0's parameters to every rank;
* seeds: rank ``r`` seeds its generators and its environment with ``seed + 10000 * r`` (so the ranks collect
  different data), while the network weights come from rank 0;
* only rank 0 logs (the logger is disabled on the other ranks during ``learn()``), writes TensorBoard files and
  saves (``save()`` does nothing on the other ranks);
* a rank that raises inside ``learn()`` prints the error and aborts the MPI job, so ``mpirun`` exits non-zero
  instead of hanging.

In one process (no mpirun, with or without mpi4py installed) all of this reduces to ordinary training, and the
algorithms use fused compiled update loops instead of per-minibatch calls.
"""
from __future__ import annotations

import contextlib
import time
from abc import abstractmethod
from collections import OrderedDict, deque
from typing import TYPE_CHECKING, Dict, Iterator, Optional, Tuple

import numpy as np
import tensorflow as tf

from sbtf import logger
from sbtf.common.base_class import ActorCriticRLModel, SetVerbosity, TensorboardLogger, TensorboardWriter
from sbtf.common.math_util import safe_mean
from sbtf.common.mpi_util import (abort_on_exception, any_rank, get_comm, install_abort_excepthook, rank_seed,
                                  sync_check)
from sbtf.common.policies import ActorCriticPolicy
from sbtf.common.tf_util import GetFlat, SetFromFlat, make_assign_fn

if TYPE_CHECKING:
    from sbtf.common.callbacks import BaseCallback


class MpiActorCriticRLModel(ActorCriticRLModel):
    """
    Base class of the MPI actor-critic algorithms (PPO1, TRPO, GAIL): a current policy ``policy_pi`` (variables
    ``model/...``) and an old policy ``old_policy`` (``oldpi/model/...``) refreshed before every update.
    """

    def __init__(self, policy, env, _init_setup_model, verbose=0, policy_base=ActorCriticPolicy,
                 requires_vec_env=False, policy_kwargs=None, seed=None, n_cpu_tf_sess=1):
        self._comm = None
        self.policy_pi: Optional[ActorCriticPolicy] = None
        self.old_policy: Optional[ActorCriticPolicy] = None
        self._assign_old_eq_new_fn = None
        self._param_getflat = None
        self._param_setfromflat = None
        super().__init__(policy=policy, env=env, _init_setup_model=_init_setup_model, verbose=verbose,
                         policy_base=policy_base, requires_vec_env=requires_vec_env, policy_kwargs=policy_kwargs,
                         seed=seed, n_cpu_tf_sess=n_cpu_tf_sess)

    # ------------------------------------------------------------------ MPI
    @property
    def comm(self):
        """The communicator (``MPI.COMM_WORLD``, or a one-process stand-in without mpirun/mpi4py)."""
        if self._comm is None:
            self._comm = get_comm()
        return self._comm

    @property
    def rank(self) -> int:
        return int(self.comm.Get_rank())

    @property
    def nworkers(self) -> int:
        return int(self.comm.Get_size())

    def set_random_seed(self, seed: Optional[int]) -> None:
        """
        Seed python, numpy, TF, the env and the policies' samplers with ``seed + 10000 * rank`` (rank 0: ``seed``),
        so that MPI ranks collect different experience; network weights are shared from rank 0 by ``learn()``.

        :param seed: (int) the seed; None does nothing
        """
        super().set_random_seed(rank_seed(seed, self.comm))

    # ------------------------------------------------------------------ environment checks
    def _check_single_env(self) -> None:
        if self.n_envs is not None and self.n_envs != 1:
            raise ValueError(f"Error: {type(self).__name__} runs one environment per process (as in stable-baselines),"
                             f" got a VecEnv with {self.n_envs} envs. To collect data in parallel, run the script "
                             f"under MPI instead: mpirun -np {self.n_envs} python your_script.py (see docs/mpi.md).")

    def _check_policy(self) -> None:
        if not (isinstance(self.policy, type) and issubclass(self.policy, ActorCriticPolicy)):
            raise ValueError(f"Error: the input policy for the {type(self).__name__} model must be a subclass of "
                             f"sbtf.common.policies.ActorCriticPolicy, got {self.policy!r}.")
        if getattr(self.policy, "recurrent", False):
            raise ValueError(f"Error: {type(self).__name__} does not support recurrent policies "
                             f"({self.policy.__name__}), as in stable-baselines; use PPO2 or A2C for LSTM policies.")

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
        self._param_getflat = self._param_setfromflat = None
        self.policy_pi = self._make_policy(self.n_envs, 1, None)
        self.old_policy = self._make_policy(self.n_envs, 1, None)
        self._assign_old_eq_new_fn = make_assign_fn(list(self.old_policy.named_parameters().values()),
                                                    list(self.policy_pi.named_parameters().values()))
        self.assign_old_eq_new()
        self._bind_policy(self.policy_pi)

    def assign_old_eq_new(self) -> None:
        """Copy the current policy's parameters into the old policy (``oldpi``)."""
        self._assign_old_eq_new_fn()
        self.old_policy.mark_weights_changed()

    def _policies(self) -> list:
        return [p for p in (self.policy_pi, self.old_policy) if p is not None]

    def _synced_variables(self) -> list:
        """Every variable that must be identical on all ranks (the saved parameters)."""
        return list(self._named_parameters().values())

    def _flat_param_io(self):
        if self._param_getflat is None:
            variables = self._synced_variables()
            self._param_getflat = GetFlat(variables)
            self._param_setfromflat = SetFromFlat(variables)
        return self._param_getflat, self._param_setfromflat

    def sync_parameters(self) -> None:
        """Broadcast rank 0's parameters to every rank (a collective call; nothing to do in one process)."""
        if self.nworkers == 1:
            return
        getflat, setfromflat = self._flat_param_io()
        theta = np.ascontiguousarray(getflat(), dtype=np.float32)
        self.comm.Bcast(theta, root=0)
        setfromflat(theta)
        self._on_parameters_loaded()

    def check_parameters_synced(self) -> None:
        """Raise ``MpiSyncError`` when any rank's parameters differ from rank 0's (collective)."""
        if self.nworkers == 1:
            return
        getflat, _ = self._flat_param_io()
        sync_check(getflat(), name=f"{type(self).__name__} parameters", comm=self.comm)

    def _pretrain_variables(self) -> list:
        return list(self.policy_pi.named_parameters().values())

    # ------------------------------------------------------------------ learn helpers
    @abstractmethod
    def learn(self, total_timesteps, callback=None, log_interval=100, tb_log_name="run", reset_num_timesteps=True):
        """
        Train the model for ``total_timesteps`` environment steps (summed over MPI ranks).

        :param total_timesteps: (int) The total number of samples to train on
        :param callback: (callable, [BaseCallback] or BaseCallback) called at every step
        :param log_interval: (int) unused, as in SB2 (with ``verbose=1`` every iteration is logged)
        :param tb_log_name: (str) the name of the run for tensorboard log
        :param reset_num_timesteps: (bool) whether or not to reset the current timestep number (used in logging)
        :return: the trained model (``self``)
        """

    @contextlib.contextmanager
    def _learning(self, callback, total_timesteps: int, tb_log_name: str,
                  reset_num_timesteps: bool) -> Iterator[Tuple["BaseCallback", Optional[TensorboardLogger]]]:
        """
        The frame of ``learn()`` on every rank: reset the step count (when asked) and bind the callback, then for the
        body apply the verbosity, the MPI error handling and logging rules (``_mpi_learn_context``) and open the
        TensorBoard writer (rank 0), after checking the environment and broadcasting rank 0's parameters.

        :return: (BaseCallback, TensorboardLogger) the callback and the writer (None on other ranks or without
            ``tensorboard_log``)
        """
        new_tb_log = self._init_num_timesteps(reset_num_timesteps)
        callback = self._init_callback(callback, total_timesteps=total_timesteps)
        with SetVerbosity(self.verbose), self._mpi_learn_context(), \
                TensorboardWriter(self.graph, self._tensorboard_log_for_rank(), tb_log_name, new_tb_log) as writer:
            self._setup_learn()
            self._check_single_env()
            self.sync_parameters()
            yield callback, writer

    def _segment_arrays(self, seg: dict) -> Tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """
        The training arrays of a segment on which ``add_vtarg_and_adv`` ran.

        :return: the observations (in the policy's dtype), the actions, the standardized advantages, the TD(lambda)
            returns and the value predictions before the update (a copy)
        """
        observations = seg["observations"].astype(self.policy_pi.obs_dtype, copy=False)
        return observations, seg["actions"], self._standardize(seg["adv"]), seg["tdlamret"], seg["vpred"].copy()

    def _log_episodes(self, seg: dict, len_buffer: deque, reward_buffer: deque,
                      true_reward_buffer: Optional[deque] = None) -> int:
        """
        Gather the episodes that ended in the segment over all ranks (collective), add them to ``ep_info_buf`` and to
        the rolling buffers, and record ``EpLenMean``, ``EpRewMean``, ``EpTrueRewMean`` (GAIL) and ``EpThisIter``.

        :param seg: (dict) the segment (``ep_lens``, ``ep_rets`` and, with ``true_reward_buffer``, ``ep_true_rets``)
        :param len_buffer: (deque) the rolling buffer of episode lengths
        :param reward_buffer: (deque) the rolling buffer of episode returns
        :param true_reward_buffer: (deque) GAIL: the rolling buffer of the environment's returns, which then also
            go to ``ep_info_buf``
        :return: (int) the number of episodes
        """
        if true_reward_buffer is None:
            lens, rews = self._gather_episode_stats(seg["ep_lens"], seg["ep_rets"])
            info_rets = rews
        else:
            lens, rews, info_rets = self._gather_episode_stats(seg["ep_lens"], seg["ep_rets"], seg["ep_true_rets"])
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

    def _write_tensorboard(self, writer: Optional[TensorboardLogger], seg: dict, observations: np.ndarray,
                           mean_losses: np.ndarray, learning_rate: float, extra_scalars: Dict[str, float]) -> None:
        """
        Write an iteration to TensorBoard (nothing when ``writer`` is None): ``loss/<name>`` of ``loss_names``, the
        ``input_info/...`` scalars and, with ``full_tensorboard_log``, histograms of the returns, advantages and
        observations.

        :param writer: (TensorboardLogger) the writer
        :param seg: (dict) the (last) segment of the iteration (``tdlamret``, ``adv``)
        :param observations: (np.ndarray) its observations
        :param mean_losses: (np.ndarray) the losses, averaged over the ranks
        :param learning_rate: (float) ``input_info/learning_rate``
        :param extra_scalars: ({str: float}) the algorithm's other ``input_info/...`` scalars
        """
        if writer is None:
            return
        step = self.num_timesteps
        writer.add_scalars({f"loss/{name}": float(val) for name, val in zip(self.loss_names, mean_losses)}, step)
        writer.add_scalars({"input_info/discounted_rewards": float(np.mean(seg["tdlamret"])),
                            "input_info/learning_rate": learning_rate,
                            "input_info/advantage": float(np.mean(seg["adv"])), **extra_scalars}, step)
        if self.full_tensorboard_log:
            writer.add_histogram("input_info/discounted_rewards", seg["tdlamret"], step)
            writer.add_histogram("input_info/advantage", seg["adv"], step)
            writer.add_histogram("input_info/observation", observations, step)

    def _dump_iteration_log(self, episodes_so_far: int, t_start: float) -> None:
        """
        Record ``EpisodesSoFar``, ``TimestepsSoFar`` and ``TimeElapsed`` and dump the iteration's log (rank 0, verbose
        >= 1).

        :param episodes_so_far: (int) the episodes finished since ``learn()`` started
        :param t_start: (float) when ``learn()`` started (``time.time()``)
        """
        logger.record_tabular("EpisodesSoFar", episodes_so_far)
        logger.record_tabular("TimestepsSoFar", self.num_timesteps)
        logger.record_tabular("TimeElapsed", time.time() - t_start)
        if self._log_verbose():
            logger.dump_tabular()

    @contextlib.contextmanager
    def _mpi_learn_context(self) -> Iterator[None]:
        """Abort the job on a failure (several ranks); silence the logger on ranks other than 0 and at verbose=0."""
        comm = self.comm
        install_abort_excepthook(comm)
        old_level = None
        if self.rank > 0 or self.verbose <= 0:  # SB2's SetVerbosity silenced the logger at verbose=0
            old_level = logger.get_level()
            logger.set_level(logger.DISABLED)
        try:
            with abort_on_exception(comm, where=f"in {type(self).__name__}.learn()"):
                yield
        finally:
            if old_level is not None:
                logger.set_level(old_level)

    def _tensorboard_log_for_rank(self) -> Optional[str]:
        return getattr(self, "tensorboard_log", None) if self.rank == 0 else None

    def _log_verbose(self) -> bool:
        return self.verbose >= 1 and self.rank == 0

    def _gather_episode_stats(self, *local_lists) -> list:
        """Concatenate per-rank lists (episode lengths, returns, ...) over all ranks (collective)."""
        gathered = self.comm.allgather(tuple(list(values) for values in local_lists))
        return [[v for rank_values in gathered for v in rank_values[k]] for k in range(len(local_lists))]

    def _any_rank_stopped(self, stopped: bool) -> bool:
        """
        Whether a callback stopped training on any rank (collective): all ranks then leave ``learn()`` together,
        instead of the others waiting forever in the next collective call. This is where the ranks meet after
        their rollouts, so the wait is polite (no busy-polling while a slower rank still steps its environment).
        """
        return any_rank(stopped, self.comm)

    @staticmethod
    def _standardize(adv: np.ndarray) -> np.ndarray:
        return ((adv - adv.mean()) / (adv.std() + 1e-8)).astype(np.float32)

    def _action_spec(self):
        pdtype = self.policy_pi.pdtype
        shape = (None,) + tuple(pdtype.sample_shape())
        dtype = tf.int64 if pdtype.action_dtype == tf.int64 else tf.float32
        return tf.TensorSpec(shape, dtype)

    # ------------------------------------------------------------------ saving
    def save(self, save_path, cloudpickle: bool = False) -> None:
        """
        Save the model to a zip file (atomically). ``.zip`` is appended when the path has no extension.

        Under MPI only rank 0 writes the file: on the other ranks ``save`` does nothing (their parameters are
        identical to rank 0's), so that N processes never write the same path at once.

        :param save_path: (str or file-like) where to save
        :param cloudpickle: (bool) ignored: sbtf always writes its zip format
        """
        if self.rank != 0:
            return
        super().save(save_path, cloudpickle=cloudpickle)

    def _named_parameters(self) -> "OrderedDict[str, tf.Variable]":
        return self.policy_pi.named_parameters()


__all__ = ["MpiActorCriticRLModel"]
