"""GAE(lambda) advantages and TD(lambda) targets of a trajectory segment (stable-baselines 2.x ``trpo_mpi/utils.py``;
defined in ``sbtf.common.storage.rollout``)."""
from __future__ import annotations

from sbtf.common.storage.rollout import add_vtarg_and_adv

__all__ = ["add_vtarg_and_adv"]
