"""``stable_baselines.common.identity_env``: SB2's identity envs with the old gym API (see
:mod:`stable_baselines._compat.old_gym_api`); sbtf's gymnasium versions are in ``sbtf.common.identity_env``."""
from stable_baselines._compat.old_gym_api import (IdentityEnv, IdentityEnvBox, IdentityEnvMultiBinary,
                                                  IdentityEnvMultiDiscrete)

__all__ = ["IdentityEnv", "IdentityEnvBox", "IdentityEnvMultiDiscrete", "IdentityEnvMultiBinary"]
