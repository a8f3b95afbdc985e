"""sbtf: Stable Baselines on TensorFlow 2 / Keras.

The stable-baselines 2.x public API on TF2: ``from sbtf import PPO2`` works like
``from stable_baselines import PPO2`` did. Algorithms are imported lazily (their list
is :mod:`sbtf.algorithms`) so that ``import sbtf`` stays cheap and an optional
dependency (mpi4py) is only needed by the algorithm that uses it.
"""
from __future__ import annotations

from typing import Any

from sbtf import _native_logs, algorithms
from sbtf._version import read_version

# Quiet TensorFlow's C++ start-up chatter unless the user asked for it (SBTF_TF_LOGS=1 shows everything).
_native_logs.install()

#: the version of the installed package (its one source: ``version`` in pyproject.toml)
__version__ = read_version()

#: the sb3-contrib algorithms offered at top level (``sbtf.MaskablePPO``; those whose name SB2 uses stay in contrib)
_CONTRIB_TOP_LEVEL = {algo.name: algo for algo in algorithms.CONTRIB_ALGORITHMS.values() if algo.top_level}
#: stable-baselines3's algorithms offered at top level (``sbtf.PPO``; those whose name SB2 uses stay in ``sbtf.sb3``)
_CONTRIB_TOP_LEVEL.update({algo.name: algo for algo in algorithms.SB3_ALGORITHMS.values() if algo.top_level})

__all__ = sorted(algorithms.ALGORITHMS) + sorted(_CONTRIB_TOP_LEVEL) + ["__version__"]


def __getattr__(name: str) -> Any:
    algorithm = algorithms.ALGORITHMS.get(name) or _CONTRIB_TOP_LEVEL.get(name)
    if algorithm is None:
        raise AttributeError(f"module 'sbtf' has no attribute {name!r}")
    value = algorithm.load()
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(list(globals()) + list(algorithms.ALGORITHMS) + list(_CONTRIB_TOP_LEVEL))
