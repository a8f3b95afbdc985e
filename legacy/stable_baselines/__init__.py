"""``stable_baselines`` compatibility package for sbtf (opt-in: ``pip install ./legacy``).

Makes a stable-baselines 2.x script run unmodified on sbtf: ``from stable_baselines import PPO2``,
``from stable_baselines.common.policies import MlpPolicy``, ``from stable_baselines.ddpg.noise import
NormalActionNoise`` ... resolve to sbtf (see :mod:`stable_baselines._compat`). ``PPO2.load("old_agent.pkl")``
then reads the old agent files through sbtf's safe legacy loader.

Do not install this next to the real stable-baselines package: both use the import name ``stable_baselines``.
"""
from __future__ import annotations

import importlib
from typing import Any, List

from sbtf import algorithms
from stable_baselines import _compat

_compat.install()

#: the stable-baselines API version this package mirrors
__version__ = "2.10.2"
#: marks the shim (real stable-baselines has no such attribute)
__sbtf_shim__ = True

_ALGORITHMS = tuple(algorithms.SB2_ALGORITHMS)  # sbtf's algorithm registry: the names stable-baselines 2 had
__all__ = list(_ALGORITHMS)


def __getattr__(name: str) -> Any:
    if name in _ALGORITHMS:
        value = algorithms.SB2_ALGORITHMS[name].load()  # ImportError "... not available ..." if missing
        globals()[name] = value
        return value
    if not name.startswith("__"):
        try:
            return importlib.import_module(f"{__name__}.{name}")
        except ModuleNotFoundError:
            pass
    raise AttributeError(f"module 'stable_baselines' has no attribute {name!r}")


def __dir__() -> List[str]:
    return sorted(set(globals()) | set(_ALGORITHMS))
