"""sbtf: Stable Baselines on TensorFlow 2 / Keras.

The stable-baselines 2.x public API on TF2: ``from sbtf import PPO2`` works like
``from stable_baselines import PPO2`` did. Algorithms are imported lazily so that
``import sbtf`` stays cheap and an optional dependency (mpi4py) is only needed by
the algorithm that uses it.
"""
from __future__ import annotations

import importlib
import os
from typing import Any

from sbtf import _native_logs

# Quiet TensorFlow's C++ start-up chatter unless the user asked for it (SBTF_TF_LOGS=1 shows everything).
_native_logs.install()

__version__ = "0.1.0"

_ALGORITHMS = {
    "A2C": "sbtf.a2c",
    "ACER": "sbtf.acer",
    "ACKTR": "sbtf.acktr",
    "DDPG": "sbtf.ddpg",
    "DQN": "sbtf.deepq",
    "GAIL": "sbtf.gail",
    "HER": "sbtf.her",
    "PPO1": "sbtf.ppo1",
    "PPO2": "sbtf.ppo2",
    "SAC": "sbtf.sac",
    "TD3": "sbtf.td3",
    "TRPO": "sbtf.trpo_mpi",
}

__all__ = sorted(_ALGORITHMS) + ["__version__"]


def __getattr__(name: str) -> Any:
    module_path = _ALGORITHMS.get(name)
    if module_path is None:
        raise AttributeError(f"module 'sbtf' has no attribute {name!r}")
    try:
        module = importlib.import_module(module_path)
    except ModuleNotFoundError as exc:
        if exc.name == module_path:
            raise ImportError(f"sbtf.{name} is not available in this version of sbtf ({module_path} is missing)") from exc
        raise
    value = getattr(module, name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(list(globals()) + list(_ALGORITHMS))
