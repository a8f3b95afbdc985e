"""Small helpers shared across sbtf (seeding, MPI rank, list utilities, argparse flags)."""
from __future__ import annotations

import argparse
import os
import random
import sys
from typing import Any, Iterable, Iterator, List, Optional, Sequence, Tuple

import numpy as np

# Environment variables that MPI launchers (MPICH / Hydra, Open MPI, PMIx, Intel MPI, Slurm's PMI) set in each rank.
_MPI_RANK_VARIABLES = ("PMI_RANK", "OMPI_COMM_WORLD_RANK", "PMIX_RANK", "MPI_LOCALRANKID", "MV2_COMM_WORLD_RANK")


def zipsame(*seqs: Sequence[Any]) -> Iterator[Tuple[Any, ...]]:
    """
    Performes a zip function, but asserts that all zipped elements are of the same size

    :param seqs: a list of arrays that are zipped together
    :return: the zipped arguments
    """
    length = len(seqs[0])
    if not all(len(seq) == length for seq in seqs[1:]):
        raise AssertionError("zipsame(): the sequences have different lengths {}".format([len(seq) for seq in seqs]))
    return zip(*seqs)


def set_global_seeds(seed: int) -> None:
    """
    set the seed for python random, tensorflow, numpy and gym spaces

    TensorFlow is imported here (only when this is called), so that env-only code does not pay for it. Gymnasium has
    no global generator: envs and spaces are seeded through ``reset(seed=...)`` / ``space.seed()`` (``VecEnv.seed``).

    :param seed: (int) the seed
    """
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    tf.random.set_seed(seed)
    np.random.seed(seed)
    random.seed(seed)


def boolean_flag(parser: argparse.ArgumentParser, name: str, default: Optional[bool] = False,
                 help_msg: Optional[str] = None) -> None:
    """
    Add a boolean flag to argparse parser: ``--name`` sets it, ``--no-name`` clears it.

    :param parser: (argparse.Parser) parser to add the flag to
    :param name: (str) --<name> will enable the flag, while --no-<name> will disable it
    :param default: (bool) default value of the flag
    :param help_msg: (str) help string for the flag
    """
    dest = name.replace('-', '_')
    parser.add_argument("--" + name, action="store_true", default=default, dest=dest, help=help_msg)
    parser.add_argument("--no-" + name, action="store_false", dest=dest)


def mpi_rank_or_zero() -> int:
    """
    Return the MPI rank if mpi is installed. Otherwise, return 0.

    MPI is only initialised (``mpi4py.MPI`` imported) when it already was, or when the process was started by an MPI
    launcher, so that calling this in a plain process stays cheap.

    :return: (int)
    """
    if "mpi4py.MPI" not in sys.modules and not any(var in os.environ for var in _MPI_RANK_VARIABLES):
        return 0
    try:
        from mpi4py import MPI  # pylint: disable=import-outside-toplevel
    except ImportError:
        return 0
    return int(MPI.COMM_WORLD.Get_rank())


def flatten_lists(listoflists: Iterable[Iterable[Any]]) -> List[Any]:
    """
    Flatten a python list of list

    :param listoflists: (list(list))
    :return: (list)
    """
    return [element for sublist in listoflists for element in sublist]
