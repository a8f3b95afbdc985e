"""sb3-contrib's ``common.envs``: the invalid-action test environments (defined in
:mod:`sbtf.contrib.common.maskable.envs`, beside the masking code they test)."""
from sbtf.contrib.common.envs.invalid_actions_env import (InvalidActionEnvDiscrete, InvalidActionEnvMultiBinary,
                                                          InvalidActionEnvMultiDiscrete)

__all__ = ["InvalidActionEnvDiscrete", "InvalidActionEnvMultiDiscrete", "InvalidActionEnvMultiBinary"]
