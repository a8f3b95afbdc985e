"""What sbtf's algorithms share (stable-baselines 2's ``stable_baselines.common``).

Names are imported lazily (on first attribute access) so that ``import sbtf.common`` stays cheap and does not import
TensorFlow; environment-side code (vec_env, gym_compat, ...) can be used without it. To export a new name, add it to
``_LAZY_EXPORTS`` (name -> module that defines it).
"""
from __future__ import annotations

import importlib
from typing import Any, Dict, List

_LAZY_EXPORTS: Dict[str, str] = {
    # environments
    "make_vec_env": "sbtf.common.cmd_util",
    "make_atari_env": "sbtf.common.cmd_util",
    # misc_util
    "set_global_seeds": "sbtf.common.misc_util",
    "zipsame": "sbtf.common.misc_util",
    "boolean_flag": "sbtf.common.misc_util",
}

__all__ = sorted(_LAZY_EXPORTS)


def __getattr__(name: str) -> Any:
    module_path = _LAZY_EXPORTS.get(name)
    if module_path is None:
        raise AttributeError(f"module 'sbtf.common' has no attribute {name!r}")
    value = getattr(importlib.import_module(module_path), name)
    globals()[name] = value
    return value


def __dir__() -> List[str]:
    return sorted(list(globals()) + list(_LAZY_EXPORTS))
