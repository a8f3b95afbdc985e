"""MPI helpers for the data-parallel algorithms (PPO1, TRPO, GAIL): communicator, collectives, failure handling.

``mpirun -np N python train.py`` starts N copies of a script; with mpi4py they form ``MPI.COMM_WORLD`` and the
algorithms average gradients and statistics over it. Everything here also works in a plain process:

* mpi4py is only imported when the process was started by an MPI launcher (``mpirun`` / ``mpiexec`` / ``srun`` set
  ``PMI_RANK``, ``OMPI_COMM_WORLD_RANK``, ...), when it is already imported, or when the caller asks for it
  (``get_comm(require=True)``). Otherwise a one-process stand-in (:class:`SingleProcessComm`) is used, with the
  subset of the mpi4py communicator API that sbtf calls.
* When mpi4py cannot be imported, the stand-in is used silently, except when the user asked for MPI explicitly:
  started under a launcher with more than one process, or ``require=True``. Then an :class:`MPIUnavailableError`
  says what to install (``pip install "sbtf[mpi]"``, i.e. ``mpi4py`` and ``mpich``).

Failure handling: a rank that raises while the others wait in a collective would hang the whole job, because mpi4py
finalises MPI at exit and the other ranks never return from ``Allreduce``. :func:`abort_on_exception` (used around
``learn()``) and :func:`install_abort_excepthook` print a clear message naming the rank and call
``COMM_WORLD.Abort(1)``, so that ``mpirun`` kills every rank and exits non-zero.
"""
from __future__ import annotations

import contextlib
import os
import sys
import threading
import time
import traceback
from typing import Any, Iterator, Optional

import numpy as np

from sbtf.common.misc_util import _MPI_RANK_VARIABLES

# Environment variables holding the job size, set by MPI launchers (Hydra/MPICH/Intel MPI, Open MPI, PMIx, MVAPICH).
_MPI_SIZE_VARIABLES = ("PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "PMIX_SIZE", "MPI_LOCALNRANKS", "MV2_COMM_WORLD_SIZE")

INSTALL_HINT = ('install the MPI extra into this environment: pip install "sbtf[mpi]" (that is mpi4py and mpich; '
                "the mpich wheel brings its own mpirun)")

_lock = threading.Lock()
_mpi_module: Any = None
_mpi_import_error: Optional[BaseException] = None
_excepthook_installed = False


class MPIUnavailableError(ImportError):
    """MPI was asked for (a launcher started several processes, or ``require=True``) but mpi4py cannot be used."""


class MpiSyncError(RuntimeError):
    """Parameters (or other values that must be identical) differ between MPI ranks."""


# ----------------------------------------------------------------------------------------------- stand-in
class _Op:
    """Stand-in for an ``MPI.Op`` (only its name matters to the one-process communicator)."""

    def __init__(self, name: str):
        self.name = name

    def __repr__(self) -> str:
        return f"<SingleProcessComm op {self.name}>"


# seconds a failing rank waits between printing why it fails and MPI_Abort (see abort_job)
ABORT_GRACE_SECONDS = 1.0

SUM = _Op("SUM")
MAX = _Op("MAX")
MIN = _Op("MIN")


class SingleProcessComm:
    """
    A one-process communicator with the part of mpi4py's ``Comm`` API that sbtf uses (rank 0 of size 1).

    Buffer collectives (``Allreduce``, ``Bcast``) copy or leave the buffers; object collectives return the
    value (``allreduce``, ``bcast``) or a one-element list (``allgather``, ``gather``).
    """

    rank = 0
    size = 1

    def Get_rank(self) -> int:  # noqa: N802 - mpi4py's name
        return 0

    def Get_size(self) -> int:  # noqa: N802 - mpi4py's name
        return 1

    def Allreduce(self, sendbuf, recvbuf, op=None) -> None:  # noqa: N802 - mpi4py's name
        sendbuf = _buffer_array(sendbuf)
        recvbuf = _buffer_array(recvbuf)
        recvbuf[...] = sendbuf

    def allreduce(self, sendobj, op=None):
        return sendobj

    def Bcast(self, buf, root: int = 0) -> None:  # noqa: N802 - mpi4py's name
        _check_root(root)

    def bcast(self, obj, root: int = 0):
        _check_root(root)
        return obj

    def allgather(self, sendobj) -> list:
        return [sendobj]

    def gather(self, sendobj, root: int = 0) -> list:
        _check_root(root)
        return [sendobj]

    def Barrier(self) -> None:  # noqa: N802 - mpi4py's name
        return None

    barrier = Barrier

    def Abort(self, errorcode: int = 1) -> None:  # noqa: N802 - mpi4py's name
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(int(errorcode))

    def __repr__(self) -> str:
        return "<SingleProcessComm rank 0 of 1 (mpi4py not in use)>"


def _buffer_array(buf) -> np.ndarray:
    """mpi4py accepts ``arr`` or ``[arr, MPI.TYPE]``; the stand-in needs the array."""
    if isinstance(buf, (list, tuple)):
        buf = buf[0]
    if not isinstance(buf, np.ndarray):
        raise TypeError(f"expected a NumPy buffer, got {type(buf).__name__}")
    return buf


def _check_root(root: int) -> None:
    if root != 0:
        raise ValueError(f"root {root} does not exist in a one-process communicator")


_SINGLE = SingleProcessComm()


# ----------------------------------------------------------------------------------------------- discovery
def launched_by_mpi() -> bool:
    """Whether an MPI launcher started this process (its rank variables are set)."""
    return any(var in os.environ for var in _MPI_RANK_VARIABLES)


def launcher_size() -> int:
    """The job size announced by the launcher's environment variables (1 when not launched by one)."""
    for var in _MPI_SIZE_VARIABLES:
        value = os.environ.get(var, "").strip()
        if value.isdigit():
            return int(value)
    return 1


def _import_mpi():
    """Import ``mpi4py.MPI`` once; remember the error when it fails."""
    global _mpi_module, _mpi_import_error  # pylint: disable=global-statement
    with _lock:
        if _mpi_module is None and _mpi_import_error is None:
            try:
                from mpi4py import MPI  # pylint: disable=import-outside-toplevel
                _mpi_module = MPI
            except (ImportError, RuntimeError, OSError) as exc:  # "cannot load MPI library" is a RuntimeError
                _mpi_import_error = exc
        return _mpi_module


def get_mpi(require: bool = False):
    """
    The ``mpi4py.MPI`` module when MPI is (or should be) in use, else None.

    :param require: (bool) raise :class:`MPIUnavailableError` when mpi4py cannot be imported
    :return: (module or None)
    """
    wanted = require or launched_by_mpi() or "mpi4py.MPI" in sys.modules
    if not wanted:
        return None
    mpi = _import_mpi()
    if mpi is None and (require or launcher_size() > 1):
        reason = f"{type(_mpi_import_error).__name__}: {_mpi_import_error}"
        if require:
            what = "MPI was requested"
        else:
            what = (f"this process was started by an MPI launcher as one of {launcher_size()} processes "
                    "(e.g. `mpirun -np N python script.py`)")
        raise MPIUnavailableError(
            f"{what}, but mpi4py cannot be used ({reason}). Without it every process would train on its own and "
            f"they would overwrite each other's files; {INSTALL_HINT}. To train in one process, run the script "
            "without mpirun.")
    return mpi


def get_comm(comm=None, require: bool = False):
    """
    The communicator to use: ``comm`` if given, else ``MPI.COMM_WORLD`` when MPI is in use, else the one-process
    stand-in.

    :param comm: (mpi4py Comm or SingleProcessComm) an explicit communicator
    :param require: (bool) fail with a clear message when mpi4py is not usable
    """
    if comm is not None:
        return comm
    mpi = get_mpi(require=require)
    return mpi.COMM_WORLD if mpi is not None else _SINGLE


def mpi_in_use() -> bool:
    """Whether ``COMM_WORLD`` has more than one process."""
    return get_size() > 1


def get_rank(comm=None) -> int:
    """This process's rank in ``comm`` (0 without MPI)."""
    return int(get_comm(comm).Get_rank())


def get_size(comm=None) -> int:
    """The number of processes in ``comm`` (1 without MPI)."""
    return int(get_comm(comm).Get_size())


def is_root(comm=None) -> bool:
    return get_rank(comm) == 0


def _op(comm, name: str):
    if isinstance(comm, SingleProcessComm):
        return {"SUM": SUM, "MAX": MAX, "MIN": MIN}[name]
    return getattr(get_mpi(require=True), name)


# ----------------------------------------------------------------------------------------------- collectives
def allreduce_sum(arr, comm=None, polite: bool = False) -> np.ndarray:
    """
    Element-wise sum of ``arr`` over the ranks (a new array; float32/float64 kept, others as float64).

    :param polite: (bool) wait without busy-polling (see ``_wait_politely``): for the points where ranks may wait
        long for each other (after collecting experience); the default blocking call has the lowest latency
    """
    comm = get_comm(comm)
    arr = np.ascontiguousarray(arr)
    if arr.dtype not in (np.float32, np.float64, np.int32, np.int64):
        arr = arr.astype(np.float64)
    out = np.empty_like(arr)
    if polite and not isinstance(comm, SingleProcessComm) and hasattr(comm, "Iallreduce"):
        _wait_politely(comm.Iallreduce(arr, out, op=_op(comm, "SUM")))
    else:
        comm.Allreduce(arr, out, op=_op(comm, "SUM"))
    return out


def _wait_politely(request, spin_seconds: float = 1e-3, max_sleep: float = 2e-3) -> None:
    """
    Wait for a non-blocking MPI request: test in a tight loop for ``spin_seconds``, then sleep between tests
    (growing to ``max_sleep``). MPI's blocking wait busy-polls, which takes a core away from the rank that is still
    working when there are fewer free cores than processes. Only for single-round collectives of a few bytes
    (a multi-round one would wait for a sleeping partner at every round).
    """
    if request.Test():
        return
    deadline = time.perf_counter() + spin_seconds
    while time.perf_counter() < deadline:
        if request.Test():
            return
    sleep = 5e-5
    while not request.Test():
        time.sleep(sleep)
        sleep = min(sleep * 2, max_sleep)


def any_rank(flag: bool, comm=None) -> bool:
    """
    Whether ``flag`` is true on any rank (a collective). Waits politely: it is meant for the point where the ranks
    meet after collecting experience, which they finish at different times.
    """
    comm = get_comm(comm)
    if comm.Get_size() == 1:
        return bool(flag)
    return int(allreduce_sum(np.array([int(bool(flag))], np.int64), comm, polite=True)[0]) > 0


def allreduce_mean(arr, comm=None) -> np.ndarray:
    """Element-wise mean of ``arr`` over the ranks (SB2's ``allmean``)."""
    comm = get_comm(comm)
    arr = np.ascontiguousarray(arr)
    if not np.issubdtype(arr.dtype, np.floating):
        arr = arr.astype(np.float64)
    out = allreduce_sum(arr, comm)
    out /= comm.Get_size()
    return out


def allreduce_tf(tensor, comm=None, mean: bool = True):
    """
    Sum (or mean) of a float tensor over the ranks, as an op inside a ``tf.function``: a ``tf.numpy_function`` that
    calls ``Allreduce``, so that loops with one collective per step (minibatch gradients, Fisher-vector products)
    stay in one compiled call. With one process the tensor is returned unchanged (no op is added).

    Every rank must run the same graph the same number of times (the collectives happen in program order).
    """
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    comm = get_comm(comm)
    if comm.Get_size() == 1:
        return tensor
    dtype = tensor.dtype

    def _reduce(arr):
        return (allreduce_mean(arr, comm) if mean else allreduce_sum(arr, comm)).astype(arr.dtype, copy=False)

    out = tf.numpy_function(_reduce, [tensor], dtype, stateful=True, name="mpi_allreduce")
    out.set_shape(tensor.shape)
    return out


def allgather(obj, comm=None) -> list:
    """The list of ``obj`` from every rank, in rank order."""
    return list(get_comm(comm).allgather(obj))


def allreduce_object_sum(value, comm=None):
    """The sum of a Python number over the ranks."""
    return get_comm(comm).allreduce(value)


def broadcast_array(arr: np.ndarray, root: int = 0, comm=None) -> np.ndarray:
    """Overwrite ``arr`` (in place, C-contiguous) with the root's values and return it."""
    comm = get_comm(comm)
    if not (isinstance(arr, np.ndarray) and arr.flags["C_CONTIGUOUS"]):
        raise TypeError("broadcast_array needs a C-contiguous NumPy array (it is overwritten in place)")
    comm.Bcast(arr, root=root)
    return arr


def sync_check(arr, name: str = "parameters", comm=None, root: int = 0) -> None:
    """
    Check that ``arr`` is identical on every rank; raise :class:`MpiSyncError` naming the ranks that differ.

    This is a collective call: every rank must make it.

    :param arr: (np.ndarray) the value that must agree (e.g. a flat parameter vector)
    :param name: (str) what it is, for the error message
    """
    comm = get_comm(comm)
    if comm.Get_size() == 1:
        return
    local = np.ascontiguousarray(arr, dtype=np.float64).ravel()
    shapes = comm.allgather(local.shape)
    if any(shape != shapes[root] for shape in shapes):
        raise MpiSyncError(f"{name} differ in size between ranks: {dict(enumerate(shapes))}")
    reference = local.copy()
    comm.Bcast(reference, root=root)
    differs = not np.array_equal(reference, local)
    flags = comm.allgather(bool(differs))
    bad = [rank for rank, flag in enumerate(flags) if flag]
    if bad:
        max_diff = float(np.max(np.abs(reference - local))) if differs else 0.0
        raise MpiSyncError(f"{name} differ between MPI ranks: ranks {bad} do not match rank {root} "
                           f"(this rank {comm.Get_rank()}: max abs difference {max_diff:.3g}). The ranks must start "
                           "from the same parameters and apply the same averaged updates.")


# ----------------------------------------------------------------------------------------------- failures
def _report_failure(comm, exc_type, exc_value, exc_tb, where: str) -> None:
    rank, size = comm.Get_rank(), comm.Get_size()
    lines = traceback.format_exception(exc_type, exc_value, exc_tb)
    message = (f"\n[sbtf] MPI rank {rank} of {size} failed {where}: {exc_type.__name__}: {exc_value}\n"
               f"[sbtf] aborting the whole MPI job (MPI_Abort with error code 1), so that the other ranks do not "
               "wait forever for this one.\n")
    sys.stderr.write("".join(lines) + message)
    sys.stderr.flush()
    sys.stdout.flush()


def abort_job(comm=None, errorcode: int = 1) -> None:
    """``COMM_WORLD.Abort(errorcode)``: ends every rank of the job (never returns)."""
    comm = get_comm(comm)
    sys.stdout.flush()
    sys.stderr.flush()
    # mpirun forwards each rank's output through its launcher asynchronously, and MPI_Abort kills the launcher's
    # processes: without a pause, the message just written (why this rank fails) can be lost (seen on a loaded CI)
    time.sleep(ABORT_GRACE_SECONDS)
    try:
        comm.Abort(int(errorcode))
    finally:
        # MPI_Abort may return before the launcher's kill arrives: never let this rank carry on
        os._exit(int(errorcode))


@contextlib.contextmanager
def abort_on_exception(comm=None, where: str = "") -> Iterator[None]:
    """
    Run the body; if it raises while more than one process is in the job, print the error with the rank and abort
    the MPI job (``mpirun`` then exits non-zero instead of hanging). In one process the exception propagates.

    :param comm: (Comm) the communicator (default ``COMM_WORLD``)
    :param where: (str) a description for the message, e.g. ``"in PPO1.learn()"``
    """
    comm = get_comm(comm)
    if comm.Get_size() == 1:
        yield
        return
    try:
        yield
    except BaseException:  # noqa: BLE001 - includes KeyboardInterrupt/SystemExit: the other ranks would hang
        exc_type, exc_value, exc_tb = sys.exc_info()
        if exc_type is SystemExit and exc_value.code in (0, None):
            raise
        _report_failure(comm, exc_type, exc_value, exc_tb, where or "")
        abort_job(comm, 1)


def install_abort_excepthook(comm=None) -> None:
    """
    Make an uncaught exception anywhere in the script abort the MPI job (once per process; only with more than one
    process). The previous ``sys.excepthook`` still prints the traceback first.
    """
    global _excepthook_installed  # pylint: disable=global-statement
    comm = get_comm(comm)
    if _excepthook_installed or comm.Get_size() == 1:
        return
    previous = sys.excepthook

    def _hook(exc_type, exc_value, exc_tb):
        try:
            previous(exc_type, exc_value, exc_tb)
        finally:
            sys.stderr.write(f"\n[sbtf] MPI rank {comm.Get_rank()} of {comm.Get_size()}: uncaught "
                             f"{exc_type.__name__}; aborting the whole MPI job (MPI_Abort with error code 1).\n")
            abort_job(comm, 1)

    sys.excepthook = _hook
    _excepthook_installed = True


def rank_seed(seed: Optional[int], comm=None) -> Optional[int]:
    """``seed + 10000 * rank`` (the convention of the baselines MPI scripts), None stays None."""
    if seed is None:
        return None
    return int(seed) + 10000 * get_rank(comm)


def mpi_rank_or_zero() -> int:
    """The MPI rank if MPI is in use, else 0 (SB2 ``misc_util.mpi_rank_or_zero``)."""
    return get_rank()


__all__ = ["SingleProcessComm", "MPIUnavailableError", "MpiSyncError", "INSTALL_HINT", "launched_by_mpi",
           "launcher_size", "get_mpi", "get_comm", "mpi_in_use", "get_rank", "get_size", "is_root", "allreduce_sum",
           "allreduce_mean", "allreduce_tf", "any_rank", "allgather", "allreduce_object_sum", "broadcast_array",
           "sync_check", "abort_job",
           "abort_on_exception", "install_abort_excepthook", "rank_seed", "mpi_rank_or_zero"]
