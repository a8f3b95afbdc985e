"""sbtf.contrib: the sb3-contrib algorithms on sbtf's core (``from sbtf.contrib import TQC, MaskablePPO`` reads like
``from sb3_contrib import TQC, MaskablePPO``).

Names are imported lazily from the table below (importing ``sbtf.contrib`` imports no TensorFlow).
"""
from __future__ import annotations

import importlib
from typing import Any, Dict

#: public name -> "module:attribute"
_LAZY_NAMES: Dict[str, str] = {
    "QRDQN": "sbtf.contrib.qrdqn:QRDQN",
    "RecurrentPPO": "sbtf.contrib.ppo_recurrent:RecurrentPPO",
    "TQC": "sbtf.contrib.tqc:TQC",
    "ARS": "sbtf.contrib.ars:ARS",
    "MaskablePPO": "sbtf.contrib.ppo_mask:MaskablePPO",
    "TRPO": "sbtf.contrib.trpo:TRPO",
}

__all__ = sorted(_LAZY_NAMES)


def __getattr__(name: str) -> Any:
    target = _LAZY_NAMES.get(name)
    if target is None:
        raise AttributeError(f"module 'sbtf.contrib' has no attribute {name!r}")
    module, _, attribute = target.partition(":")
    value = getattr(importlib.import_module(module), attribute)
    globals()[name] = value
    return value


def __dir__() -> list:
    return sorted(list(globals()) + list(_LAZY_NAMES))
