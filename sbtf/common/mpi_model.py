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
from collections import OrderedDict
from typing import Iterator, Optional

import numpy as np
import tensorflow as tf

from sbtf import logger
from sbtf.common.base_class import ActorCriticRLModel
from sbtf.common.mpi_util import (abort_on_exception, any_rank, get_comm, install_abort_excepthook, rank_seed,
                                  sync_check)
from sbtf.common.policies import ActorCriticPolicy
from sbtf.common.tf_util import GetFlat, SetFromFlat, make_assign_fn


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
