"""The MPI data-parallel mixin, in one process and with a simulated second rank."""
from collections import OrderedDict

import numpy as np
import pytest
import tensorflow as tf

from sbtf import logger
from sbtf.common.mpi.mpi_mixin import MpiDataParallelMixin
from sbtf.common.mpi_util import MpiSyncError, SingleProcessComm


class _RankOneComm(SingleProcessComm):
    """Rank 1 of 2: ``Bcast`` writes the values ``root_values`` (what rank 0 would send), one buffer per call."""

    def __init__(self, root_values):
        self.root_values = list(root_values)

    def Get_rank(self) -> int:  # noqa: N802
        return 1

    def Get_size(self) -> int:  # noqa: N802
        return 2

    def Bcast(self, buf, root: int = 0) -> None:  # noqa: N802
        buf[...] = np.asarray(self.root_values.pop(0), buf.dtype).reshape(buf.shape)

    def allgather(self, sendobj) -> list:
        return [sendobj, sendobj]


class _Base:
    """The part of a model the mixin relies on."""

    def __init__(self, verbose=0):
        self.verbose = verbose
        self.seeded_with = None
        self.saved_to = None
        self.loaded_calls = 0
        self.weights = tf.Variable(np.zeros((2, 3), np.float32))
        self.stats = tf.Variable(np.zeros((2,), np.float64))

    def set_random_seed(self, seed):
        self.seeded_with = seed

    def save(self, save_path, cloudpickle=False):
        self.saved_to = save_path

    def _named_parameters(self):
        return OrderedDict([("model/w:0", self.weights), ("model/stats:0", self.stats)])

    def _on_parameters_loaded(self):
        self.loaded_calls += 1


class _Model(MpiDataParallelMixin, _Base):
    pass


def test_one_process_is_rank_zero_of_one():
    model = _Model()
    assert (model.rank, model.nworkers) == (0, 1)
    model.set_random_seed(7)
    assert model.seeded_with == 7
    model.sync_parameters()  # nothing to do in one process
    model.check_parameters_synced()
    assert model.loaded_calls == 0
    model.save("somewhere.zip")
    assert model.saved_to == "somewhere.zip"
    assert model._tensorboard_log_for_rank() is None
    model.tensorboard_log = "tb"
    assert model._tensorboard_log_for_rank() == "tb"


def test_rank_one_seeds_apart_broadcasts_and_does_not_save():
    weights = np.arange(6, dtype=np.float32)
    stats = np.array([0.5, 1.5])
    model = _Model()
    model._comm = _RankOneComm([weights, stats])
    model.set_random_seed(3)
    assert model.seeded_with == 3 + 10000
    model.sync_parameters()
    np.testing.assert_array_equal(model.weights.numpy(), weights.reshape(2, 3))
    np.testing.assert_array_equal(model.stats.numpy(), stats)
    assert model.loaded_calls == 1
    model.save("somewhere.zip")
    assert model.saved_to is None
    model.tensorboard_log = "tb"
    assert model._tensorboard_log_for_rank() is None


def test_sync_check_names_the_model():
    model = _Model()
    model._comm = _RankOneComm([np.ones(8)])  # rank 0 has other values
    with pytest.raises(MpiSyncError, match="_Model parameters differ"):
        model.check_parameters_synced()


def test_before_parameter_sync_hook_runs_first():
    calls = []

    class _Flushing(_Model):
        def _before_parameter_sync(self):
            calls.append(self.weights.numpy().copy())
            self.weights.assign(np.ones((2, 3), np.float32))
            self.stats.assign(np.ones((2,), np.float64))

    model = _Flushing()
    model._comm = _RankOneComm([np.ones(8)])
    model.check_parameters_synced()  # the hook made this rank equal to "rank 0"
    assert len(calls) == 1


@pytest.mark.parametrize("verbose, rank_one, silenced", [(0, False, True), (1, False, False), (1, True, True)])
def test_learn_context_silences_logger_at_verbose_0_and_on_other_ranks(verbose, rank_one, silenced):
    model = _Model(verbose=verbose)
    if rank_one:
        model._comm = _RankOneComm([])
    before = logger.get_level()
    with model._mpi_learn_context():
        assert (logger.get_level() == logger.DISABLED) == silenced
    assert logger.get_level() == before
    assert model._log_verbose() == (verbose >= 1 and not rank_one)


def test_learn_context_lets_errors_through_in_one_process():
    model = _Model()
    with pytest.raises(ValueError, match="boom"):
        with model._mpi_learn_context():
            raise ValueError("boom")
    assert not model._any_rank_stopped(False)
    assert model._any_rank_stopped(True)
