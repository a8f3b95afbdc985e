"""stable-baselines3's ``common.base_class``: ``BaseAlgorithm`` is the SB3 model API that every ``sbtf.sb3`` and
``sbtf.contrib`` algorithm has (``isinstance(model, BaseAlgorithm)`` holds for each of them)."""
from __future__ import annotations

from sbtf.common.algo.sb3_api import Sb3ModelApi as BaseAlgorithm

__all__ = ["BaseAlgorithm"]
