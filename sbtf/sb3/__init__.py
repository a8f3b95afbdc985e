"""stable-baselines3's own algorithms with stable-baselines3's API, on sbtf's core.

``from sbtf.sb3 import PPO, A2C, DQN, SAC, TD3, DDPG`` reads like ``from stable_baselines3 import ...``; the classes
are imported lazily (importing this package imports no TensorFlow). ``HerReplayBuffer`` is SB3's
goal-relabelling buffer, given to an off-policy algorithm through ``replay_buffer_class``. See docs/sb3.md.
"""
from __future__ import annotations

import importlib
from typing import Any, List

from sbtf.algorithms import SB3_ALGORITHMS

#: names served lazily besides the algorithms: name -> "module:attribute"
_EXTRA = {
    "HerReplayBuffer": "sbtf.her.her_replay_buffer:HerReplayBuffer",
}


def _targets() -> dict:
    targets = {algo.name: algo.target for algo in SB3_ALGORITHMS.values()}
    targets.update(_EXTRA)
    return targets


def __getattr__(name: str) -> Any:
    if name == "HER":
        raise ImportError("Since stable-baselines3 1.1.0, HER is no longer a separate algorithm: pass "
                          "replay_buffer_class=HerReplayBuffer to an off-policy algorithm (see the documentation: "
                          "docs/sb3.md, 'HER: HerReplayBuffer'); stable-baselines 2's HER class is sbtf.HER")
    target = _targets().get(name)
    if target is None:
        raise AttributeError(f"module 'sbtf.sb3' has no attribute {name!r}")
    module, _, attribute = target.partition(":")
    value = getattr(importlib.import_module(module), attribute)
    globals()[name] = value
    return value


def __dir__() -> List[str]:
    return sorted(set(globals()) | set(_targets()))


__all__ = sorted(_targets())
