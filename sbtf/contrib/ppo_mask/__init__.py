"""MaskablePPO: PPO with invalid action masking (sb3-contrib's ``sb3_contrib.ppo_mask``)."""
from sbtf.contrib.ppo_mask.policies import CnnPolicy, MlpPolicy, MultiInputPolicy
from sbtf.contrib.ppo_mask.ppo_mask import MaskablePPO

__all__ = ["MaskablePPO", "MlpPolicy", "CnnPolicy", "MultiInputPolicy"]
