"""What the MPI scaling benchmarks (``mpi_scaling.py``, ``ddpg_mpi_scaling.py``) share: timing ``learn()`` on every
rank, running a worker process (under ``mpirun -np N``) and reading its result, the tree's git revision, and
replacing their section of ``docs/benchmarks.md``.

Standard library only (the drivers import it before sbtf is needed; the workers pass their MPI communicator in).
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import time
from typing import Callable, List, Sequence, Tuple

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
RESULT_PREFIX = "RESULT "


# ----------------------------------------------------------------------------------------------- worker side
def timed_learn(comm, learn: Callable[[], object]) -> Tuple[float, List[float]]:
    """
    Run ``learn()`` between two barriers, so that every rank starts and stops together.

    :param comm: the MPI communicator (``sbtf.common.mpi_util.get_comm()``)
    :param learn: the call to time
    :return: the wall time of ``learn()`` and the CPU time every rank spent in it
    """
    comm.Barrier()
    cpu0, wall0 = time.process_time(), time.perf_counter()
    learn()
    comm.Barrier()
    wall = time.perf_counter() - wall0
    return wall, comm.allgather(time.process_time() - cpu0)


def print_result(result: dict) -> None:
    """Print the worker's result line (``RESULT {json}``), the one line of stdout ``run_worker`` reads."""
    print(RESULT_PREFIX + json.dumps(result), flush=True)


# ----------------------------------------------------------------------------------------------- driver side
def run_worker(python: str, script: str, worker_args: Sequence[str], nprocs: int, timeout: int) -> dict:
    """
    Run ``<python> script --worker *worker_args`` in a fresh process (under the venv's ``mpirun -np nprocs`` when
    ``nprocs > 1``), with one thread per process and the repository on ``PYTHONPATH``.

    :param python: the interpreter (with sbtf and the ``mpi`` extra); ``mpirun`` is looked up beside it
    :param script: the benchmark script that runs its worker when given ``--worker``
    :param worker_args: the worker's other command-line arguments
    :param nprocs: the number of MPI processes
    :param timeout: seconds before the run is abandoned (``subprocess.TimeoutExpired``)
    :return: the JSON of the worker's ``RESULT`` line
    :raises RuntimeError: when the worker printed no result
    """
    cmd = [python, os.path.abspath(script), "--worker"] + list(worker_args)
    if nprocs > 1:
        mpirun = os.path.join(os.path.dirname(python), "mpirun")
        cmd = [mpirun, "-np", str(nprocs)] + cmd
    child_env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", OMP_NUM_THREADS="1",
                     PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.run(cmd, capture_output=True, text=True, env=child_env, timeout=timeout)
    for line in proc.stdout.splitlines():
        if line.startswith(RESULT_PREFIX):
            return json.loads(line[len(RESULT_PREFIX):])
    raise RuntimeError(f"worker failed ({proc.returncode}): {proc.stderr[-2000:]}")


def git_revision() -> str:
    """The short HEAD revision, with ``+dirty(sbtf/)`` when ``sbtf/`` has uncommitted changes (``unknown`` without
    git)."""
    try:
        rev = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=REPO,
                             check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "sbtf"], capture_output=True, text=True,
                               cwd=REPO).stdout.strip()
        return rev + ("+dirty(sbtf/)" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def update_docs(path: str, section: str, begin: str, end: str) -> None:
    """
    Replace the text from ``begin`` to ``end`` in the page at ``path`` by ``section`` (appended when the page has
    no such section yet; the rest of the page is kept), atomically.

    :param path: the Markdown page (created when missing)
    :param section: the new section, ``begin`` and ``end`` included
    :param begin: the marker that opens the section
    :param end: the marker that closes it
    """
    text = open(path, encoding="utf-8").read() if os.path.exists(path) else "# Benchmarks\n"
    pattern = re.compile(re.escape(begin) + ".*?" + re.escape(end), re.DOTALL)
    if pattern.search(text):
        text = pattern.sub(lambda _m: section, text, count=1)
    else:
        text = text.rstrip("\n") + "\n\n" + section + "\n"
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as handle:
        handle.write(text)
    os.replace(tmp, path)
