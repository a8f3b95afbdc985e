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
    "make_mujoco_env": "sbtf.common.cmd_util",
    "make_robotics_env": "sbtf.common.cmd_util",
    "arg_parser": "sbtf.common.cmd_util",
    "atari_arg_parser": "sbtf.common.cmd_util",
    "mujoco_arg_parser": "sbtf.common.cmd_util",
    "robotics_arg_parser": "sbtf.common.cmd_util",
    # models (these import TensorFlow)
    "BaseRLModel": "sbtf.common.base_class",
    "ActorCriticRLModel": "sbtf.common.base_class",
    "OffPolicyRLModel": "sbtf.common.base_class",
    "SetVerbosity": "sbtf.common.base_class",
    "TensorboardWriter": "sbtf.common.base_class",
    # console_util / dataset
    "fmt_row": "sbtf.common.console_util",
    "fmt_item": "sbtf.common.console_util",
    "colorize": "sbtf.common.console_util",
    "Dataset": "sbtf.common.dataset",
    # math_util
    "explained_variance": "sbtf.common.math_util",
    "explained_variance_2d": "sbtf.common.math_util",
    "discount": "sbtf.common.math_util",
    "discount_with_boundaries": "sbtf.common.math_util",
    "flatten_arrays": "sbtf.common.math_util",
    "unflatten_vector": "sbtf.common.math_util",
    "safe_mean": "sbtf.common.math_util",
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
