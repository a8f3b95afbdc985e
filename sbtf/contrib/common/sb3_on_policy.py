"""The sb3-contrib on-policy base (MaskablePPO, TRPO with sb3-contrib's arguments): stable-baselines3's own, which
lives in :mod:`sbtf.sb3.common.on_policy_algorithm` (sb3-contrib builds on stable-baselines3, as sbtf.contrib builds
on sbtf.sb3); importable from here for the contrib classes."""
from __future__ import annotations

from sbtf.sb3.common.on_policy_algorithm import Sb3OnPolicyAlgorithm

__all__ = ["Sb3OnPolicyAlgorithm"]
