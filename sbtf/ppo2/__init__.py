from sbtf.ppo2.ppo2 import PPO2

__all__ = ["PPO2"]
