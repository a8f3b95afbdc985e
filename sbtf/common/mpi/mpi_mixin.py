"""MPI data parallelism for a model (PPO1, TRPO, GAIL, DDPG): one mixin instead of a copy per algorithm.

Under ``mpirun -np N python script.py`` every rank builds the same model, collects its own experience and joins the
collective calls of the update, so the parameters stay identical:

* ``learn()`` starts by broadcasting rank 0's parameters to every rank (``sync_parameters``);
* seeds: rank ``r`` seeds its generators and its environment with ``seed + 10000 * r`` (the ranks collect different
  data), while the network weights come from rank 0;
* only rank 0 logs (the logger is disabled on the other ranks, and on every rank at ``verbose=0``, during
  ``learn()``), writes TensorBoard files and saves (``save()`` does nothing on the other ranks);
* a rank that raises inside ``learn()`` prints the error and aborts the MPI job, so ``mpirun`` exits non-zero instead
  of hanging.

In one process (no mpirun, with or without mpi4py installed) all of this reduces to ordinary training.

Usage: ``class MyAlgo(MpiDataParallelMixin, BaseRLModel)`` (the mixin comes first), override
``_synced_variables()`` when more than the saved parameters must agree, and ``_before_parameter_sync()`` when state
kept outside the variables must be written to them before a broadcast or check.
"""
from __future__ import annotations

import contextlib
from typing import Iterator, List, Optional, Tuple

import numpy as np

from sbtf import logger
from sbtf.common.mpi_util import abort_on_exception, any_rank, get_comm, install_abort_excepthook, rank_seed, sync_check


class MpiDataParallelMixin:
    """
    Data-parallel training over MPI for an ``sbtf`` model: the communicator, rank seeding, parameter broadcast and
    sync check, the ``learn()`` context (error handling and logging rules) and rank-0-only saving.
    """

    _comm = None
    _mpi_flat_io = None

    # ------------------------------------------------------------------ communicator
    @property
    def comm(self):
        """The communicator (``MPI.COMM_WORLD`` under mpirun, or a one-process stand-in without mpirun/mpi4py)."""
        if self._comm is None:
            self._comm = get_comm()
        return self._comm

    @property
    def rank(self) -> int:
        """This process's MPI rank (0 in one process)."""
        return int(self.comm.Get_rank())

    @property
    def nworkers(self) -> int:
        """The number of MPI processes (1 in one process)."""
        return int(self.comm.Get_size())

    def set_random_seed(self, seed: Optional[int]) -> None:
        """
        Seed python, numpy, TF and the env with ``seed + 10000 * rank`` (rank 0: ``seed``), so that MPI ranks collect
        different experience; the network weights are shared from rank 0 when ``learn()`` starts.

        :param seed: (int) the seed; None does nothing
        """
        super().set_random_seed(rank_seed(seed, self.comm))  # type: ignore[misc]

    # ------------------------------------------------------------------ parameter synchronisation
    def _synced_variables(self) -> list:
        """Every variable that must be identical on all ranks (default: the saved parameters)."""
        return list(self._named_parameters().values())  # type: ignore[attr-defined]

    def _before_parameter_sync(self) -> None:
        """Write state kept outside the variables into them before a broadcast or a check (default: nothing)."""

    def _reset_parameter_sync(self) -> None:
        """Forget the flat views of the synced variables (call after the variables were rebuilt)."""
        self._mpi_flat_io = None

    def _flat_param_io(self) -> Tuple[object, object, List]:
        """(GetFlat, SetFromFlat) of the float32 synced variables and the list of the other (float64) ones."""
        if self._mpi_flat_io is None:
            import tensorflow as tf

            from sbtf.common.tf_util import GetFlat, SetFromFlat

            variables = self._synced_variables()
            float32 = [v for v in variables if v.dtype == tf.float32]
            self._mpi_flat_io = (GetFlat(float32), SetFromFlat(float32),
                                 [v for v in variables if v.dtype != tf.float32])
        return self._mpi_flat_io

    def sync_parameters(self) -> None:
        """Broadcast rank 0's synced variables to every rank (a collective call; nothing to do in one process)."""
        if self.nworkers == 1:
            return
        self._before_parameter_sync()
        getflat, setfromflat, other_vars = self._flat_param_io()
        theta = np.ascontiguousarray(getflat(), dtype=np.float32)
        self.comm.Bcast(theta, root=0)
        setfromflat(theta)
        from sbtf.common.compile.weight_tracking import assign_variables

        pairs = []
        for var in other_vars:
            value = np.ascontiguousarray(np.array(var.numpy(), np.float64).reshape(-1))
            self.comm.Bcast(value, root=0)
            pairs.append((var, value.reshape(var.shape)))
        assign_variables(pairs)  # tracked writes (setfromflat's too): acting re-reads what the broadcast wrote
        self._on_parameters_loaded()  # type: ignore[attr-defined]

    def check_parameters_synced(self) -> None:
        """Raise ``MpiSyncError`` when any rank's synced variables differ from rank 0's (collective)."""
        if self.nworkers == 1:
            return
        self._before_parameter_sync()
        getflat, _, other_vars = self._flat_param_io()
        flat = np.concatenate([getflat().astype(np.float64)] + [np.ravel(v.numpy()) for v in other_vars])
        sync_check(flat, name=f"{type(self).__name__} parameters", comm=self.comm)

    # ------------------------------------------------------------------ learn
    @contextlib.contextmanager
    def _mpi_learn_context(self) -> Iterator[None]:
        """
        The MPI rules around the body of ``learn()``: a failure aborts the job (several ranks), and the logger is
        silenced on ranks other than 0 and at ``verbose=0`` (as SB2's ``SetVerbosity``).
        """
        comm = self.comm
        install_abort_excepthook(comm)
        old_level = None
        if self.rank > 0 or self.verbose <= 0:  # type: ignore[attr-defined]
            old_level = logger.get_level()
            logger.set_level(logger.DISABLED)
        try:
            with abort_on_exception(comm, where=f"in {type(self).__name__}.learn()"):
                yield
        finally:
            if old_level is not None:
                logger.set_level(old_level)

    def _tensorboard_log_for_rank(self) -> Optional[str]:
        """``tensorboard_log`` on rank 0, None on the other ranks (only rank 0 writes TensorBoard files)."""
        return getattr(self, "tensorboard_log", None) if self.rank == 0 else None

    def _log_verbose(self) -> bool:
        """Whether this process prints training logs (``verbose >= 1`` on rank 0)."""
        return self.verbose >= 1 and self.rank == 0  # type: ignore[attr-defined]

    def _any_rank_stopped(self, stopped: bool) -> bool:
        """Whether a callback stopped training on any rank (collective), so that all ranks leave together."""
        return any_rank(stopped, self.comm)

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
        super().save(save_path, cloudpickle=cloudpickle)  # type: ignore[misc]


__all__ = ["MpiDataParallelMixin"]
