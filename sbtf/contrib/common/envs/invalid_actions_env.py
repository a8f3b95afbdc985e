"""sb3-contrib's ``common.envs.invalid_actions_env`` module path (the classes live in
:mod:`sbtf.contrib.common.maskable.envs`)."""
from sbtf.contrib.common.maskable.envs import (InvalidActionEnvDiscrete, InvalidActionEnvMultiBinary,
                                               InvalidActionEnvMultiDiscrete)

__all__ = ["InvalidActionEnvDiscrete", "InvalidActionEnvMultiDiscrete", "InvalidActionEnvMultiBinary"]
