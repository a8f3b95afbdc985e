"""stable-baselines3's ``ddpg.policies``: DDPG uses TD3's policies."""
from sbtf.sb3.td3.policies import CnnPolicy, MlpPolicy, MultiInputPolicy, TD3Policy

__all__ = ["TD3Policy", "MlpPolicy", "CnnPolicy", "MultiInputPolicy"]
