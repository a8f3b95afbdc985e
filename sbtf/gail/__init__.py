"""GAIL and expert datasets, with stable-baselines 2.x import paths.

``from sbtf.gail import ExpertDataset, generate_expert_traj`` imports the dataset tools eagerly;
``GAIL`` is imported lazily from ``sbtf.gail.model`` on first access, so the dataset tools do not
pull in TensorFlow.
"""
from __future__ import annotations

import importlib
from typing import Any

from sbtf.gail.dataset import DataLoader, ExpertDataset, generate_expert_traj

_LAZY = {"GAIL": "sbtf.gail.model"}

__all__ = ["DataLoader", "ExpertDataset", "GAIL", "generate_expert_traj"]


def __getattr__(name: str) -> Any:
    module_path = _LAZY.get(name)
    if module_path is None:
        raise AttributeError(f"module 'sbtf.gail' has no attribute {name!r}")
    try:
        module = importlib.import_module(module_path)
    except ModuleNotFoundError as exc:
        if exc.name == module_path:
            raise ImportError(f"sbtf.gail.{name} is not available in this version of sbtf "
                              f"({module_path} is missing)", name=module_path) from exc
        raise
    value = getattr(module, name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
