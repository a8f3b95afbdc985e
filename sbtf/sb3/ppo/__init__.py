"""stable-baselines3's PPO (``stable_baselines3.ppo``) on sbtf's core."""
from sbtf.sb3.ppo.policies import CnnPolicy, MlpPolicy, MultiInputPolicy
from sbtf.sb3.ppo.ppo import PPO

__all__ = ["PPO", "CnnPolicy", "MlpPolicy", "MultiInputPolicy"]
