"""Invalid action masking (sb3-contrib ``common/maskable``): masked distributions, the maskable policies, the
rollout runner, ``evaluate_policy`` and ``MaskableEvalCallback``; ``ActionMasker`` and the invalid-action test
environments. Names are imported lazily (the policies import TensorFlow)."""
from __future__ import annotations

import importlib

_LAZY = {
    "ActionMasker": "sbtf.contrib.common.maskable.wrappers",
    "get_action_masks": "sbtf.contrib.common.maskable.utils",
    "is_masking_supported": "sbtf.contrib.common.maskable.utils",
    "EXPECTED_METHOD_NAME": "sbtf.contrib.common.maskable.utils",
    "MaskableDistribution": "sbtf.contrib.common.maskable.distributions",
    "make_masked_proba_distribution": "sbtf.contrib.common.maskable.distributions",
    "MaskableActorCriticPolicy": "sbtf.contrib.common.maskable.policies",
    "MaskableActorCriticCnnPolicy": "sbtf.contrib.common.maskable.policies",
    "MaskableEvalCallback": "sbtf.contrib.common.maskable.callbacks",
    "evaluate_policy": "sbtf.contrib.common.maskable.evaluation",
    "InvalidActionEnvDiscrete": "sbtf.contrib.common.maskable.envs",
    "InvalidActionEnvMultiDiscrete": "sbtf.contrib.common.maskable.envs",
    "InvalidActionEnvMultiBinary": "sbtf.contrib.common.maskable.envs",
}

__all__ = sorted(_LAZY)


def __getattr__(name: str):
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(_LAZY))
