"""PPO2, stable-baselines 2's proximal policy optimization
(``from sbtf.ppo2 import PPO2``, SB2's ``stable_baselines.ppo2``)."""
from sbtf.ppo2.ppo2 import PPO2

__all__ = ["PPO2"]
