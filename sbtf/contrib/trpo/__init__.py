"""TRPO with sb3-contrib's arguments (``sb3_contrib.trpo``); stable-baselines 2's TRPO stays ``sbtf.TRPO``."""
from sbtf.common.policies import CnnPolicy, MlpPolicy, MultiInputPolicy
from sbtf.contrib.trpo.trpo import TRPO

__all__ = ["TRPO", "MlpPolicy", "CnnPolicy", "MultiInputPolicy"]
