"""``stable_baselines.common.bit_flipping_env``: SB2's ``BitFlippingEnv`` with the old gym API (see
:mod:`stable_baselines._compat.old_gym_api`); sbtf's gymnasium version is ``sbtf.common.bit_flipping_env``."""
from stable_baselines._compat.old_gym_api import BitFlippingEnv

__all__ = ["BitFlippingEnv"]
